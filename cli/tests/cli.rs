//! End-to-end tests of the `simfa` binary.

mod common;
use common::{json, s, simfa, simfa_unchecked, stderr, Scratch};

fn is_digest(v: &serde_json::Value) -> bool {
    v.as_str().is_some_and(|d| {
        d.len() == 16
            && d.chars()
                .all(|c| c.is_ascii_digit() || ('a'..='f').contains(&c))
    })
}

#[test]
fn gemm_json_report() {
    let o = simfa(&["gemm", "--m", "256", "--n", "256", "--k", "512", "--json"]);
    let j = json(&o);
    assert!(j.is_object());
    assert!(
        j["cycles"].is_u64() && j["cycles"].as_u64().unwrap() > 0,
        "{j}"
    );
    assert!(is_digest(&j["digest"]), "{j}");
    assert_eq!(j["gpu"], "h800");
    assert!(j["time_us"].as_f64().unwrap() > 0.0, "{j}");
    assert!(j["engines"].is_object(), "{j}");
    assert!(j["engines"]["tensor_busy_cycles"].is_u64(), "{j}");
    // The default kernel: 2 tiles of 128 x 256, 8 K iterations, 2
    // consumers of 4 WGMMAs each.
    assert_eq!(j["wgmmas"].as_u64(), Some(2 * 8 * 2 * 4));
    assert_eq!(j["ctas"].as_u64(), Some(2), "persistent: min(SMs, tiles)");
    // The same run is the same run.
    let again = json(&simfa(&[
        "gemm", "--m", "256", "--n", "256", "--k", "512", "--json",
    ]));
    assert_eq!(j, again);
}

#[test]
fn gemm_text_report() {
    let o = simfa(&[
        "gemm", "--m", "128", "--n", "128", "--k", "64", "--gpu", "h20",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let out = String::from_utf8(o.stdout).unwrap();
    assert!(out.contains("gemm_128x128x64 on h20"), "{out}");
    assert!(out.contains("cycles"), "{out}");
}

#[test]
fn run_missing_file_exits_2() {
    let o = simfa(&["run", "/nonexistent/simfa/kernel.sasm"]);
    assert_eq!(o.status.code(), Some(2));
    let e = stderr(&o);
    assert!(
        e.starts_with("error: ") && e.contains("/nonexistent/simfa/kernel.sasm"),
        "{e}"
    );
}

#[test]
fn run_syntax_error_exits_2_with_location() {
    let d = Scratch::new("syntax");
    let p = d.file(
        "bad.sasm",
        "kernel bad\ngrid 1\nrole main count=1 regs=32 {\n    frobnicate 3\n}\n",
    );
    let o = simfa(&["run", s(&p)]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let e = stderr(&o);
    assert!(e.starts_with("error: "), "{e}");
    // file:line:col
    let at = e
        .find(&format!("{}:", s(&p)))
        .unwrap_or_else(|| panic!("no file in {e}"));
    let rest = &e[at + s(&p).len() + 1..];
    let mut parts = rest.splitn(3, ':');
    let line = parts.next().unwrap();
    let col = parts.next().unwrap_or("");
    assert!(
        !line.is_empty() && line.chars().all(|c| c.is_ascii_digit()),
        "{e}"
    );
    assert!(
        !col.is_empty() && col.chars().all(|c| c.is_ascii_digit()),
        "{e}"
    );
}

#[test]
fn unknown_gpu_exits_2() {
    let o = simfa(&[
        "gemm", "--m", "128", "--n", "128", "--k", "64", "--gpu", "nosuch",
    ]);
    assert_eq!(o.status.code(), Some(2));
    let e = stderr(&o);
    assert!(e.contains("nosuch") && e.contains("h800"), "{e}");
}

#[test]
fn usage_errors_exit_2() {
    assert_eq!(simfa(&[]).status.code(), Some(2));
    assert_eq!(simfa(&["frobnicate"]).status.code(), Some(2));
    assert_eq!(simfa(&["gemm", "--m", "abc"]).status.code(), Some(2));
    let o = simfa(&["gemm", "--gpu", "h20", "--config", "x.toml"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("cannot be used with"), "{}", stderr(&o));
    assert_eq!(simfa(&["--help"]).status.code(), Some(0));
}

#[test]
fn bad_gemm_shape_exits_2() {
    // N must be whole 16-byte rows (M and K off the tile are clipped).
    let o = simfa(&["gemm", "--m", "100", "--n", "100", "--k", "64"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("N = 100"), "{}", stderr(&o));
    let o = simfa(&["gen", "gemm", "--m", "128", "--n", "128", "--k", "0"]);
    assert_eq!(o.status.code(), Some(2));
}

#[test]
fn deadlock_exits_1_and_names_waiters() {
    let d = Scratch::new("deadlock");
    let p = d.file(
        "dl.sasm",
        "kernel dl\ngrid 1\nmbarrier b count=1\nrole main count=1 regs=32 {\n    mbar.wait b, 0\n}\n",
    );
    let o = simfa(&["run", s(&p)]);
    let e = stderr(&o);
    assert_eq!(o.status.code(), Some(1), "{e}");
    assert!(e.starts_with(&format!("error: {}: deadlock", s(&p))), "{e}");
    assert!(e.contains("role main") && e.contains("mbarrier"), "{e}");
    assert!(o.stdout.is_empty());
}

#[test]
fn cta_that_does_not_fit_exits_2() {
    let d = Scratch::new("fit");
    let c = d.file(
        "small.toml",
        "preset = \"h800\"\nsmem_per_sm = 16384\nsmem_per_cta = 16384\n",
    );
    let o = simfa(&[
        "gemm",
        "--m",
        "128",
        "--n",
        "128",
        "--k",
        "64",
        "--config",
        s(&c),
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("shared memory"), "{}", stderr(&o));
}

#[test]
fn gen_convert_run_round_trip() {
    let d = Scratch::new("roundtrip");
    let bin = d.path("x.sfk");
    let text = d.path("x.sasm");
    let o = simfa(&[
        "gen",
        "gemm",
        "--m",
        "256",
        "--n",
        "256",
        "--k",
        "512",
        "-o",
        s(&bin),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(std::fs::read(&bin).unwrap().starts_with(b"SIMFAKRN"));
    let o = simfa(&["convert", s(&bin), s(&text)]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(!std::fs::read(&text).unwrap().starts_with(b"SIMFAKRN"));
    let from_text = json(&simfa(&["run", s(&text), "--json"]));
    let from_bin = json(&simfa(&["run", s(&bin), "--json"]));
    let direct = json(&simfa(&[
        "gemm", "--m", "256", "--n", "256", "--k", "512", "--json",
    ]));
    assert!(is_digest(&direct["digest"]));
    assert_eq!(from_text["digest"], direct["digest"]);
    assert_eq!(from_bin["digest"], direct["digest"]);
    assert_eq!(from_text["cycles"], direct["cycles"]);
    // gen without -o prints the text form, which runs the same.
    let o = simfa(&["gen", "gemm", "--m", "256", "--n", "256", "--k", "512"]);
    assert_eq!(o.status.code(), Some(0));
    let printed = d.file("printed.sasm", std::str::from_utf8(&o.stdout).unwrap());
    let from_stdout = json(&simfa(&["run", s(&printed), "--json"]));
    assert_eq!(from_stdout["digest"], direct["digest"]);
}

#[test]
fn gen_into_missing_dir_fails_cleanly() {
    let d = Scratch::new("nodir");
    let target = d.path("missing").join("x.sfk");
    let o = simfa(&[
        "gen",
        "gemm",
        "--m",
        "128",
        "--n",
        "128",
        "--k",
        "64",
        "-o",
        s(&target),
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(!target.exists());
    assert_eq!(std::fs::read_dir(&d.0).unwrap().count(), 0);
}

#[test]
fn config_overrides_and_unknown_keys() {
    let d = Scratch::new("config");
    let bad = d.file("bad.toml", "preset = \"h800\"\n[port]\nlatncy = 400\n");
    let o = simfa(&[
        "gemm",
        "--m",
        "128",
        "--n",
        "128",
        "--k",
        "64",
        "--config",
        s(&bad),
    ]);
    assert_eq!(o.status.code(), Some(2));
    let e = stderr(&o);
    assert!(e.contains("port.latncy") && e.contains(s(&bad)), "{e}");

    let good = d.file(
        "good.toml",
        "preset = \"h800\"\nname = \"slowmem\"\nmemory = \"fixed\"\n[port]\nlatency = 2000\n",
    );
    let slow = json(&simfa(&[
        "gemm",
        "--m",
        "128",
        "--n",
        "128",
        "--k",
        "64",
        "--config",
        s(&good),
        "--json",
    ]));
    let base = json(&simfa(&[
        "gemm", "--m", "128", "--n", "128", "--k", "64", "--json",
    ]));
    assert_eq!(slow["gpu"], "slowmem");
    assert!(
        slow["cycles"].as_u64() > base["cycles"].as_u64(),
        "{slow} vs {base}"
    );

    let o = simfa(&["gemm", "--config", s(&d.path("missing.toml"))]);
    assert_eq!(o.status.code(), Some(2));
}

#[test]
fn presets_lists_every_preset() {
    let o = simfa(&["presets"]);
    assert_eq!(o.status.code(), Some(0));
    let out = String::from_utf8(o.stdout).unwrap();
    for p in ["h800", "h100", "h20", "h200", "h800-pcie"] {
        assert!(
            out.lines().any(|l| l.starts_with(p)),
            "{p} missing from {out}"
        );
    }
}

#[test]
fn no_progress_output_when_not_a_terminal() {
    let o = simfa(&["gemm", "--m", "256", "--n", "256", "--k", "256"]);
    assert_eq!(o.status.code(), Some(0));
    assert!(o.stderr.is_empty(), "{}", stderr(&o));
}

#[test]
fn watchdog_exits_1() {
    let d = Scratch::new("watchdog");
    let c = d.file("w.toml", "preset = \"h800\"\nwatchdog_cycles = 1000\n");
    let o = simfa(&[
        "gemm",
        "--m",
        "128",
        "--n",
        "128",
        "--k",
        "64",
        "--config",
        s(&c),
        "--json",
    ]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(stderr(&o).starts_with("error: watchdog"), "{}", stderr(&o));
    assert!(o.stdout.is_empty());
}

#[test]
fn dram_trace_lists_every_request() {
    let d = Scratch::new("dramtrace");
    let t = d.0.join("g.trace");
    let o = simfa(&[
        "gemm",
        "--m",
        "256",
        "--n",
        "256",
        "--k",
        "512",
        "--json",
        "--dram-trace",
        s(&t),
    ]);
    let v = json(&o);
    let text = std::fs::read_to_string(&t).unwrap();
    let reads = text.lines().filter(|l| l.starts_with("LD 0x")).count() as u64;
    let writes = text.lines().filter(|l| l.starts_with("ST 0x")).count() as u64;
    assert_eq!(
        reads + writes,
        text.lines().count() as u64,
        "only LD/ST lines"
    );
    assert_eq!(reads * 128, v["dram_read_bytes"].as_u64().unwrap());
    assert_eq!(writes * 128, v["dram_write_bytes"].as_u64().unwrap());
    assert!(reads > 0);
    // A trace into a directory that does not exist is bad input.
    let bad = d.0.join("no/such/dir/t.trace");
    let o = simfa(&[
        "gemm",
        "--m",
        "128",
        "--n",
        "128",
        "--k",
        "64",
        "--dram-trace",
        s(&bad),
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("DRAM trace"), "{}", stderr(&o));
}

#[test]
fn memory_flag_picks_the_model_and_the_report_names_it() {
    let mut cycles = Vec::new();
    for (flag, name) in [
        (None, "transaction"),
        (Some("line"), "line"),
        (Some("hierarchy"), "line"),
        (Some("fixed"), "fixed"),
    ] {
        let mut args = vec!["gemm", "--m", "256", "--n", "256", "--k", "256", "--json"];
        if let Some(f) = flag {
            args.extend(["--memory", f]);
        }
        let j = json(&simfa(&args));
        assert_eq!(j["memory_model"], name, "{flag:?}");
        cycles.push(j["cycles"].as_u64().unwrap());
    }
    // The alias runs the same model; the fixed port is another one.
    assert_eq!(cycles[1], cycles[2]);
    assert_ne!(cycles[1], cycles[3]);
    // A --memory flag overrides a configuration file's choice.
    let dir = Scratch::new("memory-flag");
    let toml = dir.path("line.toml");
    std::fs::write(&toml, "preset = \"h800\"\nmemory = \"line\"\n").unwrap();
    let args = ["gemm", "--m", "256", "--n", "256", "--k", "256", "--json"];
    let mut with_file = args.to_vec();
    with_file.extend(["--config", s(&toml)]);
    assert_eq!(json(&simfa(&with_file))["memory_model"], "line");
    with_file.extend(["--memory", "transaction"]);
    assert_eq!(json(&simfa(&with_file))["memory_model"], "transaction");
}

#[test]
fn arrival_controller_flag_and_config_key_set_it_and_the_report_says_so() {
    // A tensor-bound GEMM of more than a wave: `auto` leaves the
    // controller off.
    let args = [
        "gemm", "--m", "2048", "--n", "2048", "--k", "512", "--kernel", "paper", "--json",
    ];
    let plain = json(&simfa(&args));
    assert_eq!(plain["arrival_controller"], false);
    let with = |extra: &[&str]| {
        let mut v = args.to_vec();
        v.extend(extra);
        json(&simfa(&v))
    };
    assert_eq!(with(&["--arrival-controller=off"]), plain);
    assert_eq!(with(&["--arrival-controller=auto"]), plain);
    let on = with(&["--arrival-controller"]);
    assert_eq!(on["arrival_controller"], true);
    assert_eq!(on["memory_model"], "transaction");
    assert_eq!(with(&["--arrival-controller=on"]), on);
    // The controller, not the service model, decides the landings.
    assert_ne!(on["digest"], plain["digest"]);
    // The same runs from a configuration file's key: a name, or a
    // boolean as before `"auto"` existed; the flag wins over the file.
    let dir = Scratch::new("arrival-controller");
    for (value, want) in [
        ("true", &on),
        ("\"on\"", &on),
        ("false", &plain),
        ("\"off\"", &plain),
    ] {
        let toml = dir.file(
            "arrival.toml",
            &format!("preset = \"h800\"\n[transaction]\narrival_controller = {value}\n"),
        );
        assert_eq!(&with(&["--config", s(&toml)]), want, "{value}");
        let flag = if want == &on {
            "--arrival-controller=off"
        } else {
            "--arrival-controller"
        };
        assert_ne!(&with(&["--config", s(&toml), flag]), want, "{value}");
    }
    // Other models ignore it.
    assert_eq!(
        with(&["--arrival-controller", "--memory", "line"])["arrival_controller"],
        false
    );
    // The text report says which model ran.
    let o = simfa(&[
        "gemm",
        "--m",
        "512",
        "--n",
        "128",
        "--k",
        "512",
        "--arrival-controller",
    ]);
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(
        text.contains("transaction, landings by the arrival-order controller"),
        "{text}"
    );
}

/// `auto` turns the controller on for a memory-bound kernel (the TMA
/// throughput benchmark, no WGMMAs), and a bad policy is a typed error.
#[test]
fn arrival_controller_auto_follows_the_kernel_and_bad_values_are_refused() {
    let dir = Scratch::new("arrival-auto");
    let k = dir.path("tma.sfk");
    simfa(&[
        "gen",
        "tma-bw",
        "--copy",
        "bulk",
        "--bytes",
        "4KiB",
        "--total",
        "1MiB",
        "-o",
        s(&k),
    ]);
    let j = json(&simfa(&["run", s(&k), "--json"]));
    assert_eq!(j["arrival_controller"], true);
    let off = json(&simfa(&[
        "run",
        s(&k),
        "--json",
        "--arrival-controller=off",
    ]));
    assert_eq!(off["arrival_controller"], false);
    let bad = dir.file(
        "bad.toml",
        "preset = \"h800\"\n[transaction]\narrival_controller = \"sometimes\"\n",
    );
    let fails = |args: &[&str]| {
        let o = simfa_unchecked(args);
        assert_eq!(o.status.code(), Some(2), "{args:?}");
        stderr(&o)
    };
    let e = fails(&["run", s(&k), "--config", s(&bad)]);
    assert!(
        e.contains("transaction.arrival_controller") && e.contains("\"auto\""),
        "{e}"
    );
    let e = fails(&["run", s(&k), "--arrival-controller=maybe"]);
    assert!(e.contains("auto, on, off"), "{e}");
}

#[test]
fn unknown_memory_model_exits_2_and_names_the_choices() {
    let o = simfa(&[
        "gemm", "--m", "128", "--n", "128", "--k", "64", "--memory", "cache",
    ]);
    assert_eq!(o.status.code(), Some(2));
    let e = stderr(&o);
    assert!(
        e.contains("cache") && e.contains("transaction, line, fixed"),
        "{e}"
    );
    // Commands that do not simulate do not take it (rather than ignore it).
    let o = simfa(&["gen", "gemm", "--m", "128", "--memory", "line"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("--memory"), "{}", stderr(&o));
}

#[test]
fn agreement_quick_prints_both_models_per_point() {
    let j = json(&simfa(&["agreement", "--quick", "--json"]));
    let points = j["points"].as_array().unwrap();
    assert_eq!(points.len(), 29, "{j}");
    for p in points {
        assert!(p["line"].as_f64().unwrap() > 0.0, "{p}");
        assert!(p["transaction"].as_f64().unwrap() > 0.0, "{p}");
    }
    assert!(j["max_abs_error_percent"].as_f64().unwrap() < 12.0, "{j}");
    // The count of points past the 3% is the points' own.
    let past = points
        .iter()
        .filter(|p| p["error_percent"].as_f64().unwrap().abs() > 3.0)
        .count();
    assert_eq!(j["past_target"].as_u64(), Some(past as u64), "{j}");
}

/// `--arrival-controller` on `agreement` is the configuration file's
/// `transaction.arrival_controller = true`, and changes the points.
#[test]
fn agreement_takes_the_arrival_controller_flag() {
    let d = Scratch::new("agree-arrival");
    let f = d.file(
        "ac.toml",
        "preset = \"h800\"\n[transaction]\narrival_controller = true\n",
    );
    let flag = json(&simfa(&[
        "agreement",
        "--quick",
        "--json",
        "--arrival-controller",
    ]));
    let file = json(&simfa(&[
        "agreement",
        "--quick",
        "--json",
        "--config",
        s(&f),
    ]));
    // The quick suite's kernels are all memory-bound or less than a wave,
    // which `auto` lands by the controller: only `off` changes them.
    let plain = json(&simfa(&["agreement", "--quick", "--json"]));
    let off = json(&simfa(&[
        "agreement",
        "--quick",
        "--json",
        "--arrival-controller=off",
    ]));
    assert_eq!(flag, file);
    assert_eq!(flag["points"], plain["points"]);
    assert_ne!(off["points"], plain["points"]);
}

#[test]
fn external_memory_needs_a_host() {
    // Only an embedding host can answer the external port's requests: a
    // run here is refused at once instead of waiting forever.
    let ring = concat!(env!("CARGO_MANIFEST_DIR"), "/../examples/ring.sasm");
    let o = simfa_unchecked(&["run", ring, "--memory", "external"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("embedding host"), "{}", stderr(&o));
    let o = simfa_unchecked(&[
        "gemm", "--m", "128", "--n", "128", "--k", "64", "--memory", "external",
    ]);
    assert_eq!(o.status.code(), Some(2));
}
