//! `simfa fa3`, `simfa gen fa3`, the documented JSON report keys and the
//! Gantt outputs, end to end through the binary.

mod common;
use common::*;

/// The keys docs/reports.md documents for every report.
const KEYS: [&str; 18] = [
    "cycles",
    "time_us",
    "tflops",
    "digest",
    "l2_hit_rate",
    "dram_read_bytes",
    "dram_write_bytes",
    "dram_row_hits",
    "dram_row_hit_rate",
    "tensor_utilization",
    "tma_bytes_requested",
    "l2_requests",
    "l2_hits",
    "l2_misses",
    "cold_interval_cycles",
    "compute_field_cycles",
    "flops",
    "flops_source",
];

const SMALL: [&str; 8] = [
    "--heads",
    "2",
    "--kv-heads",
    "1",
    "--seqlen",
    "256",
    "--gpu",
    "h800",
];

#[test]
fn fa3_json_report_has_every_documented_key() {
    let mut args = vec!["fa3", "--json", "--check"];
    args.extend_from_slice(&SMALL);
    let j = json(&simfa(&args));
    assert_eq!(j["check"]["clean"], true, "{}", j["check"]);
    for k in KEYS {
        assert!(!j[k].is_null(), "missing key {k} in {j}");
    }
    let cycles = j["cycles"].as_u64().unwrap();
    assert!(cycles > 1000);
    assert_eq!(j["flops_source"], "workload");
    // 4 * 256 * 256 * 128 * 2 heads
    assert_eq!(j["flops"].as_u64(), Some(4 * 256 * 256 * 128 * 2));
    let cold = j["cold_interval_cycles"].as_u64().unwrap();
    let field = j["compute_field_cycles"].as_u64().unwrap();
    assert!(
        field > 0 && field < cold && cold <= cycles,
        "{field} {cold} {cycles}"
    );
    assert!(j["l2_requests"].as_u64().unwrap() > 0);
    assert!(j["tensor_utilization"].as_f64().unwrap() > 0.0);
    // Row hits are DRAM line accesses: no more than the lines moved.
    let lines =
        (j["dram_read_bytes"].as_u64().unwrap() + j["dram_write_bytes"].as_u64().unwrap()) / 128;
    let hits = j["dram_row_hits"].as_u64().unwrap();
    let rate = j["dram_row_hit_rate"].as_f64().unwrap();
    assert!(hits > 0 && hits <= lines, "{hits} of {lines}");
    assert!((rate - hits as f64 / lines as f64).abs() < 1e-9, "{rate}");
}

#[test]
fn gen_fa3_then_run_gives_the_same_digest() {
    let d = Scratch::new("fa3");
    let file = d.path("fa3.sasm");
    let mut args = vec!["gen", "fa3", "-o", s(&file)];
    args.extend_from_slice(&SMALL[..6]);
    let o = simfa(&args);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let text = std::fs::read_to_string(&file).unwrap();
    assert!(text.contains("role producer") && text.contains("role consumer1"));
    let run = json(&simfa(&["run", s(&file), "--json"]));
    let mut args = vec!["fa3", "--json"];
    args.extend_from_slice(&SMALL);
    let direct = json(&simfa(&args));
    assert_eq!(run["digest"], direct["digest"]);
    assert_eq!(run["cycles"], direct["cycles"]);
}

#[test]
fn gantt_is_a_chrome_trace_and_svg_draws_it() {
    let d = Scratch::new("gantt");
    let (g, v) = (d.path("t.json"), d.path("t.svg"));
    let mut args = vec!["fa3", "--json", "--gantt", s(&g), "--svg", s(&v)];
    args.extend_from_slice(&SMALL);
    json(&simfa(&args));
    let trace: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&g).unwrap()).unwrap();
    let events = trace.as_array().expect("a Chrome trace array");
    let complete: Vec<_> = events.iter().filter(|e| e["ph"] == "X").collect();
    assert!(complete.len() > 20);
    for e in &complete {
        for k in ["pid", "tid", "ts", "dur", "name"] {
            assert!(!e[k].is_null(), "{k} missing in {e}");
        }
        assert!(e["dur"].as_f64().unwrap() >= 0.0);
    }
    let names: Vec<&str> = complete.iter().filter_map(|e| e["cat"].as_str()).collect();
    for cat in ["wgmma", "compute"] {
        assert!(names.iter().any(|n| n.contains(cat)), "no {cat} span");
    }
    let svg = std::fs::read_to_string(&v).unwrap();
    assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
    assert!(svg.contains("consumer0") && svg.contains("producer"));
}

#[test]
fn gantt_sm_out_of_range_exits_2() {
    let d = Scratch::new("gantt-sm");
    let g = d.path("t.json");
    let mut args = vec!["fa3", "--gantt", s(&g), "--gantt-sm", "500"];
    args.extend_from_slice(&SMALL);
    let o = simfa(&args);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("--gantt-sm 500"), "{}", stderr(&o));
    assert!(!g.exists());
}

#[test]
fn bad_fa3_shapes_exit_2() {
    for (args, msg) in [
        (vec!["fa3", "--hdim", "80"], "head dim"),
        (vec!["fa3", "--heads", "6", "--kv-heads", "4"], "kv heads"),
        (vec!["fa3", "--causal", "--seqlen-kv", "8192"], "kv seqlen"),
        (vec!["fa3", "--seqlen", "0"], "seqlen"),
    ] {
        let o = simfa(&args);
        assert_eq!(o.status.code(), Some(2), "{args:?}");
        assert!(stderr(&o).contains(msg), "{args:?}: {}", stderr(&o));
    }
}

#[test]
fn gemm_kernel_parameters() {
    let base = [
        "gemm", "--json", "--check", "--m", "512", "--n", "512", "--k", "512", "--kernel", "paper",
    ];
    let plain = json(&simfa(&base));
    let mut args = base.to_vec();
    args.extend_from_slice(&["--stages", "3", "--consumers", "2", "--persistent"]);
    let piped = json(&simfa(&args));
    assert_eq!(piped["flops"], plain["flops"]);
    assert_ne!(piped["digest"], plain["digest"]);
    // 4314 cycles of prologue/epilogue plus 330 per BK=64 iteration, on
    // the fixed port (through the hierarchy the bubbles also move the
    // loads they overlap).
    let fixed = |extra: &[&'static str]| {
        let mut args = base.to_vec();
        args.extend_from_slice(&["--memory", "fixed"]);
        args.extend_from_slice(extra);
        json(&simfa(&args))["cycles"].as_u64().unwrap()
    };
    assert!(fixed(&["--calibrated"]) > fixed(&[]) + 4314 + 7 * 330);
    let mut args = base.to_vec();
    args.extend_from_slice(&["--block-n", "100"]);
    let o = simfa(&args);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("block"), "{}", stderr(&o));
}

#[test]
fn check_flags_a_kernel_that_reads_before_its_data_lands() {
    // expect_tx covers only one of the two loads, so the wait returns as
    // soon as the first lands and the WGMMA reads the second (an 8 KiB
    // box, which lands later) too early.
    let d = Scratch::new("check");
    let k = d.file(
        "short_tx.sasm",
        "kernel short_tx\ngrid 1\nsmem 16384\n\
         tensormap X base=0x100000 elem=2 dims=[65536] box=[256]\n\
         tensormap Y base=0x200000 elem=2 dims=[256, 256] strides=[512] box=[256, 16]\n\
         mbarrier full[1] count=1\n\
         role main count=1 regs=128 {\n\
         mbar.expect_tx full[0], 512\n\
         tma.load X, full[0], [0]\n\
         tma.load Y, full[0], [0, 16]\n\
         mbar.arrive full[0]\n\
         mbar.wait full[0], 0\n\
         wgmma 64\nwgmma.commit\nwgmma.wait 0\nexit\n}\n",
    );
    let o = simfa(&["run", s(&k), "--check"]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let e = stderr(&o);
    assert!(e.contains("read-before-landing"), "{e}");
    assert!(
        e.contains("cycle 1035") && e.contains("landed at cycle 1182"),
        "{e}"
    );
    // Without --check the same run succeeds.
    assert_eq!(simfa_unchecked(&["run", s(&k)]).status.code(), Some(0));
}

/// `simfa gemm --tune`: the best's report with a `tune` array, the same
/// whatever the threads, its flags rerun to the same cycles; a hostile
/// space file and a one-run output flag exit 2 naming what is wrong.
#[test]
fn gemm_tune_reports_the_best_of_a_family() {
    let dir = Scratch::new("gemm-tune");
    let space = dir.file(
        "space.toml",
        "tiles = [\"128x256\", \"64x64\"]\ncluster = [\"1x1\"]\nsplit_k = [1, 4]\n",
    );
    let shape = [
        "gemm", "--gpu", "h100", "--m", "128", "--n", "1024", "--k", "2048",
    ];
    let args = |j| {
        let mut v = shape.to_vec();
        v.extend(["--tune", "--space", s(&space), "-j", j, "--json"]);
        v
    };
    let one = json(&simfa(&args("1")));
    let two = json(&simfa(&args("2")));
    assert_eq!(one, two, "-j 1 and -j 2");
    // simfa() adds --check: the best is run again under the checker.
    assert_eq!(one["check"]["clean"], true);
    let tune = one["tune"].as_array().unwrap();
    // 2 tiles x persistent or not x 2 splits, and each tile persistent
    // with stream-K.
    assert_eq!(tune.len(), 10);
    let best = tune
        .iter()
        .filter_map(|c| c["cycles"].as_u64())
        .min()
        .unwrap();
    assert_eq!(one["cycles"].as_u64(), Some(best));
    // The text report names the best's flags; they rerun to its cycles.
    let mut text_args = args("2");
    text_args.pop();
    let text = String::from_utf8(simfa(&text_args).stdout).unwrap();
    let flags = text
        .lines()
        .find_map(|l| l.strip_prefix("best"))
        .unwrap()
        .trim()
        .to_string();
    let mut rerun = shape.to_vec();
    rerun.extend(flags.split_whitespace());
    rerun.push("--json");
    assert_eq!(
        json(&simfa(&rerun))["cycles"].as_u64(),
        Some(best),
        "{flags}"
    );
    // Kernel flags given by hand narrow the family.
    let mut narrow = shape.to_vec();
    narrow.extend([
        "--tune",
        "--block-n",
        "64",
        "--persistent",
        "false",
        "--split-k",
        "4",
        "--json",
    ]);
    let narrowed = json(&simfa(&narrow));
    let cands = narrowed["tune"].as_array().unwrap();
    assert!(!cands.is_empty());
    assert!(cands.iter().all(|c| c["config"]["block_n"] == 64
        && c["config"]["persistent"] == false
        && c["config"]["split_k"] == 4));
    // Hostile input.
    let bad = dir.file("bad.toml", "block_k = [64]\ntiles = [\"128x999\"]\n");
    let o = simfa_unchecked(&["gemm", "--tune", "--space", s(&bad)]);
    assert_eq!(o.status.code(), Some(2));
    let want = format!("{}:2: tiles: value 1: expected", s(&bad));
    assert!(stderr(&o).contains(&want), "{}", stderr(&o));
    let o = simfa_unchecked(&["gemm", "--tune", "--resume", "s.snap"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("snapshot one run"), "{}", stderr(&o));
    let o = simfa_unchecked(&["gemm", "--space", s(&space)]);
    assert_eq!(o.status.code(), Some(2), "--space needs --tune");
}

/// A GEMM's throughput counts the product, `2 M N K`, as libraries do,
/// not the WGMMAs of the tile rows TMA clips (a 16-row GEMM in 128-row
/// tiles issues eight times its FLOPs); the tuning table's TFLOP/s then
/// fall as its cycles rise.
#[test]
fn gemm_throughput_counts_the_product() {
    let shape = [
        "gemm", "--gpu", "h100", "--m", "16", "--n", "512", "--k", "512",
    ];
    let mut plain = shape.to_vec();
    plain.push("--json");
    let j = json(&simfa(&plain));
    let flops = 2 * 16 * 512 * 512u64;
    assert_eq!(j["flops_source"], "workload");
    assert_eq!(j["flops"].as_u64(), Some(flops));
    assert_eq!(j["wgmma_flops"].as_u64(), Some(flops * 128 / 16));
    let t = j["time_us"].as_f64().unwrap();
    let tflops = j["tflops"].as_f64().unwrap();
    assert!((tflops - flops as f64 / t / 1e6).abs() < 1e-9, "{tflops}");
    let dir = Scratch::new("gemm-flops");
    let space = dir.file(
        "space.toml",
        "tiles = [\"128x256\", \"64x64\", \"64x128\"]\ncluster = [\"1x1\"]\nsplit_k = [1, 2]\n",
    );
    let mut tuned = shape.to_vec();
    tuned.extend(["--tune", "--space", s(&space), "--json"]);
    let best = json(&simfa(&tuned));
    assert_eq!(best["flops"].as_u64(), Some(flops));
    tuned.pop();
    let text = String::from_utf8(simfa(&tuned).stdout).unwrap();
    let rows: Vec<(u64, f64)> = text
        .lines()
        .skip_while(|l| !l.trim_start().starts_with("cycles      TFLOPS"))
        .skip(1)
        .map(|l| {
            let mut w = l.split_whitespace();
            let c = w.next().unwrap().parse().unwrap();
            (c, w.next().unwrap().parse().unwrap())
        })
        .collect();
    assert!(rows.len() >= 2, "{text}");
    for p in rows.windows(2) {
        assert!(p[0].0 <= p[1].0 && p[0].1 >= p[1].1, "{text}");
    }
}

/// Stream-K: checked clean, the same work as the data-parallel kernel,
/// written with its op file by `gen gemm -o` and run back to the same
/// digest; refused without `-o` and outside a persistent kernel.
#[test]
fn gemm_stream_k_runs_replays_and_refuses() {
    let shape = ["--m", "640", "--n", "1024", "--k", "2048", "--gpu", "h100"];
    let run = |extra: &[&str]| {
        let mut args = vec!["gemm", "--json", "--check"];
        args.extend_from_slice(&shape);
        args.extend_from_slice(extra);
        json(&simfa(&args))
    };
    let dp = run(&[]);
    let sk = run(&["--stream-k"]);
    assert_eq!(sk["check"]["clean"], true, "{}", sk["check"]);
    assert_eq!(sk["flops"], dp["flops"]);
    // Its streamed roles are not walked: no estimate, and the text says so.
    assert_eq!(sk["analytic"]["streamed"], true);
    assert_eq!(dp["analytic"]["streamed"], false);
    assert!(sk["analytic"]["bound_cycles"].is_null());
    let mut args = vec!["gemm", "--stream-k"];
    args.extend_from_slice(&shape);
    let text = String::from_utf8(simfa(&args).stdout).unwrap();
    assert!(text.contains("analytic      none: "), "{text}");
    assert_ne!(sk["digest"], dp["digest"]);
    // 20 tiles of 128 x 256, 32 iterations each, 8 per unit at least: 80
    // CTAs, where the data-parallel kernel has one per tile.
    assert_eq!(sk["ctas"], 80);
    assert_eq!(dp["ctas"], 20);
    let d = Scratch::new("stream-k");
    let file = d.path("sk.sfk");
    let mut args = vec!["gen", "gemm", "--stream-k", "-o", s(&file)];
    args.extend_from_slice(&shape);
    let o = simfa(&args);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(d.path("sk.sfk.ops").exists());
    let replay = json(&simfa(&["run", s(&file), "--gpu", "h100", "--json"]));
    assert_eq!(replay["digest"], sk["digest"]);
    assert_eq!(replay["cycles"], sk["cycles"]);
    let mut args = vec!["gen", "gemm", "--stream-k"];
    args.extend_from_slice(&shape);
    let o = simfa_unchecked(&args);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("-o FILE.sfk"), "{}", stderr(&o));
    let mut args = vec!["gemm", "--stream-k", "--persistent", "false"];
    args.extend_from_slice(&shape);
    let o = simfa_unchecked(&args);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("stream_k"), "{}", stderr(&o));
}
