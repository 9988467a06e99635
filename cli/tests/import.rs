//! The trace front-ends through the real binary: a run written with
//! `--proton` or `--fa3-log`, imported, and run again to the same cycles
//! and digest; the GEMM bubble fit and `--bubbles`.

mod common;
use common::{json, s, simfa, simfa_unchecked, stderr, Scratch};

fn cycles_digest(o: &std::process::Output) -> (u64, String) {
    assert!(o.status.success(), "{}", stderr(o));
    let j = json(o);
    (
        j["cycles"].as_u64().unwrap(),
        j["digest"].as_str().unwrap().to_string(),
    )
}

#[test]
fn a_proton_trace_imports_to_the_same_run() {
    let d = Scratch::new("proton");
    let trace = d.path("g.json");
    let want = cycles_digest(&simfa(&[
        "gemm",
        "--m",
        "256",
        "--n",
        "256",
        "--k",
        "256",
        "--stages",
        "2",
        "--json",
        "--proton",
        s(&trace),
    ]));
    let kernel = d.path("g.sasm");
    let o = simfa_unchecked(&["import", "proton", s(&trace), "-o", s(&kernel)]);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.contains("WarpGroup streams"), "{text}");
    assert!(d.path("g.sasm.ops").exists());
    assert_eq!(cycles_digest(&simfa(&["run", s(&kernel), "--json"])), want);
    // The op file can be named; a missing one is an input error.
    let moved = d.path("elsewhere.ops");
    std::fs::rename(d.path("g.sasm.ops"), &moved).unwrap();
    let o = simfa(&["run", s(&kernel), "--json"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("g.sasm.ops"), "{}", stderr(&o));
    let o = simfa(&["run", s(&kernel), "--ops", s(&moved), "--json"]);
    assert_eq!(cycles_digest(&o), want);
    // --ops on a kernel without stream roles is refused.
    let ring = concat!(env!("CARGO_MANIFEST_DIR"), "/../examples/ring.sasm");
    let o = simfa(&["run", ring, "--ops", s(&moved)]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("no stream roles"), "{}", stderr(&o));
}

#[test]
fn a_damaged_op_file_fails_the_run_with_its_name() {
    let d = Scratch::new("ops");
    let trace = d.path("t.json");
    cycles_digest(&simfa(&[
        "gemm",
        "--m",
        "128",
        "--n",
        "128",
        "--k",
        "128",
        "--json",
        "--proton",
        s(&trace),
    ]));
    let kernel = d.path("t.sfk");
    assert!(
        simfa_unchecked(&["import", "proton", s(&trace), "-o", s(&kernel)])
            .status
            .success()
    );
    let ops = d.path("t.sfk.ops");
    let mut b = std::fs::read(&ops).unwrap();
    for x in &mut b[8..24] {
        *x = 0xFF;
    }
    std::fs::write(&ops, b).unwrap();
    let o = simfa(&["run", s(&kernel)]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(stderr(&o).contains("t.sfk.ops"), "{}", stderr(&o));
}

#[test]
fn an_fa3_log_imports_to_the_same_run() {
    let d = Scratch::new("fa3log");
    let log = d.path("f.log");
    let args = ["--seqlen", "256", "--heads", "8", "--kv-heads", "2"];
    let mut run = vec!["fa3", "--json", "--fa3-log", s(&log)];
    run.extend(args);
    let want = cycles_digest(&simfa(&run));
    let kernel = d.path("f.sfk");
    let o = simfa_unchecked(&["import", "fa3-log", s(&log), "-o", s(&kernel)]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(cycles_digest(&simfa(&["run", s(&kernel), "--json"])), want);
    let bad = d.file("bad.log", "shape hdim=100\n");
    let o = simfa_unchecked(&["import", "fa3-log", s(&bad)]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("bad.log"), "{}", stderr(&o));
    assert!(!d.path("bad.sfk").exists() && !d.path("bad.sfk.ops").exists());
}

/// The fit runs on the fixed port, whose time is linear in K: a single
/// CTA through the hierarchy moves by a few percent with the DRAM
/// channels and refreshes its K's row stride meets, which is not what
/// this test is about.
#[test]
fn gemm_bubbles_fit_and_apply() {
    let d = Scratch::new("bubbles");
    let mut csv = String::from("m,n,k,measured_cycles,set\n");
    for (k, set) in [
        (512, "fit"),
        (1024, "fit"),
        (2048, "fit"),
        (1536, "heldout"),
    ] {
        let o = simfa(&[
            "gemm",
            "--m",
            "128",
            "--n",
            "128",
            "--k",
            &k.to_string(),
            "--calibrated",
            "--memory",
            "fixed",
            "--json",
        ]);
        csv.push_str(&format!("128,128,{k},{},{set}\n", cycles_digest(&o).0));
    }
    let m = d.file("m.csv", &csv);
    let toml = d.path("b.toml");
    let o = simfa_unchecked(&[
        "calibrate",
        "gemm-bubbles",
        s(&m),
        "--memory",
        "fixed",
        "--json",
        "-o",
        s(&toml),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let j = json(&o);
    assert!(j["r2"].as_f64().unwrap() > 0.99, "{j}");
    assert!(j["mape_held_out_pct"].as_f64().unwrap() < 2.0, "{j}");
    let with = simfa(&[
        "gemm",
        "--m",
        "128",
        "--n",
        "128",
        "--k",
        "1536",
        "--bubbles",
        s(&toml),
        "--json",
    ]);
    let without = simfa(&["gemm", "--m", "128", "--n", "128", "--k", "1536", "--json"]);
    assert!(cycles_digest(&with).0 > cycles_digest(&without).0);
    let junk = d.file(
        "junk.toml",
        "[gemm_bubbles]\nprologue = -3\nper_iter_bk64 = 1\n",
    );
    let o = simfa(&["gemm", "--bubbles", s(&junk)]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("junk.toml") && stderr(&o).contains("prologue"),
        "{}",
        stderr(&o)
    );
}
