//! End-to-end tests of `simfa calibrate` and the microbenchmark generators.

use std::path::Path;

/// The published pointer-chase data, shipped in the project's `data/`
/// (the command's default too; passing the path tests the argument).
const CSV: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../data/h800pcie_pointer_chase.csv"
);

fn csv() -> &'static str {
    assert!(Path::new(CSV).is_file(), "{CSV} is missing");
    CSV
}

mod common;
use common::{json, simfa, stderr, Scratch};

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

#[test]
fn pchase_json_and_svg() {
    let d = Scratch::new("svg");
    let svg = d.path("chase.svg");
    let o = simfa(&[
        "calibrate",
        "pchase",
        csv(),
        "--points",
        "5",
        "--quick",
        "--json",
        "--svg",
        s(&svg),
    ]);
    let j = json(&o);
    for key in [
        "mape_percent",
        "max_abs_error_percent",
        "worst",
        "regimes",
        "points",
    ] {
        assert!(j.get(key).is_some(), "no {key} in {j}");
    }
    assert_eq!(j["gpu"], "h800-pcie");
    let mape = j["mape_percent"].as_f64().unwrap();
    let max = j["max_abs_error_percent"].as_f64().unwrap();
    assert!(mape >= 0.0 && max >= mape, "{j}");
    let points = j["points"].as_array().unwrap();
    assert_eq!(points.len(), 5);
    // The first and the last rows of the file are kept.
    assert_eq!(points[0]["working_set_kb"].as_f64(), Some(2.0));
    assert_eq!(points[4]["working_set_kb"].as_f64(), Some(2_737_229.0));
    assert_eq!(points[0]["measured"].as_f64(), Some(366.4));
    assert_eq!(points[4]["regime"], "dram");
    for p in points {
        for key in [
            "working_set_kb",
            "measured",
            "simulated",
            "error_percent",
            "regime",
        ] {
            assert!(p.get(key).is_some(), "no {key} in {p}");
        }
        assert!(p["simulated"].as_f64().unwrap() > 0.0, "{p}");
    }
    for r in ["l2_floor", "transition", "second_plateau", "mixed", "dram"] {
        assert!(j["regimes"][r]["points"].is_u64(), "{r}: {j}");
    }
    let n: u64 = j["regimes"]
        .as_object()
        .unwrap()
        .values()
        .map(|r| r["points"].as_u64().unwrap())
        .sum();
    assert_eq!(n, 5);
    let text = std::fs::read_to_string(&svg).unwrap();
    assert!(text.contains("<svg") && text.trim_end().ends_with("</svg>"));
    assert!(text.contains("measured") && text.contains("simulated"));
    assert_eq!(text.matches("<polyline").count(), 2);
}

#[test]
fn pchase_text_report() {
    let o = simfa(&["calibrate", "pchase", csv(), "--points", "2", "--quick"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let t = String::from_utf8(o.stdout).unwrap();
    assert!(t.contains("h800-pcie"), "{t}");
    assert!(t.contains("2 kB") && t.contains("2.74 GB"), "{t}");
    assert!(
        t.contains("MAPE") && t.contains("l2_floor") && t.contains("dram"),
        "{t}"
    );
}

#[test]
fn pchase_bad_input_exits_2() {
    let o = simfa(&["calibrate", "pchase", "/nonexistent/simfa/chase.csv"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("/nonexistent/simfa/chase.csv"),
        "{}",
        stderr(&o)
    );
    let d = Scratch::new("bad");
    let p = d.path("bad.csv");
    std::fs::write(
        &p,
        "# c\nworking_set_kb,regular_cycles,tma_cycles\n2,32.0,366.4\n6,32.0\n",
    )
    .unwrap();
    let o = simfa(&["calibrate", "pchase", s(&p), "--quick"]);
    assert_eq!(o.status.code(), Some(2));
    let e = stderr(&o);
    assert!(
        e.starts_with("error: ") && e.contains(&format!("{}:4:", s(&p))),
        "{e}"
    );
    let o = simfa(&["calibrate", "pchase", csv(), "--points", "0"]);
    assert_eq!(o.status.code(), Some(2));
    let o = simfa(&["calibrate", "pchase", csv(), "--gpu", "nosuch"]);
    assert_eq!(o.status.code(), Some(2));
}

#[test]
fn tma_bw_json() {
    let o = simfa(&[
        "calibrate",
        "tma-bw",
        "--total",
        "64KiB",
        "--cells",
        "3",
        "--json",
    ]);
    let j = json(&o);
    for key in ["mape_percent", "max_abs_error_percent", "worst", "cells"] {
        assert!(j.get(key).is_some(), "no {key} in {j}");
    }
    let cells = j["cells"].as_array().unwrap();
    assert_eq!(cells.len(), 3);
    assert_eq!(cells[2]["measured"].as_f64(), Some(617.0));
    assert_eq!(cells[0]["measured"].as_f64(), Some(223.0));
    assert_eq!(cells[0]["ctas"].as_u64(), Some(114));
    assert!(cells.iter().all(|c| c["simulated"].as_f64().unwrap() > 0.0));
}

#[test]
fn gen_microbenchmarks_run() {
    let d = Scratch::new("gen");
    let k = d.path("chase.sasm");
    let o = simfa(&[
        "gen",
        "pchase",
        "--working-set",
        "64KiB",
        "--hops",
        "16",
        "-o",
        s(&k),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let o = simfa(&["run", s(&k), "--gpu", "h800-pcie", "--json"]);
    let j = json(&o);
    // 512 warm-up hops and 16 measured ones, 16 bytes each.
    assert_eq!(j["bytes_loaded"].as_u64(), Some((512 + 16) * 16));
    let t = d.path("bw.sfk");
    let o = simfa(&[
        "gen",
        "tma-bw",
        "--copy",
        "2d",
        "--box",
        "32x32",
        "--blocks-per-sm",
        "2",
        "--total",
        "4MiB",
        "--gpu",
        "h800-pcie",
        "-o",
        s(&t),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let j = json(&simfa(&["run", s(&t), "--gpu", "h800-pcie", "--json"]));
    assert_eq!(j["ctas"].as_u64(), Some(228));
    assert!(j["bytes_loaded"].as_u64().unwrap() >= 4 << 20);
    let o = simfa(&["gen", "tma-bw", "--copy", "bulk", "--bytes", "1KB"]);
    assert_eq!(
        o.status.code(),
        Some(2),
        "1000 bytes is not a multiple of 16"
    );
    let o = simfa(&["gen", "tma-bw", "--copy", "bulk", "--bytes", "1KiB"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(String::from_utf8_lossy(&o.stdout).contains("bulk.load"));
    for bad in [
        &["gen", "tma-bw", "--copy", "3d", "--box", "8x8"][..],
        &["gen", "tma-bw", "--copy", "bulk"],
        &["gen", "tma-bw", "--copy", "4d", "--box", "8"],
        &["gen", "pchase", "--working-set", "12 parsecs"],
        &["gen", "pchase", "--working-set", "100"],
    ] {
        let o = simfa(bad);
        assert_eq!(o.status.code(), Some(2), "{bad:?}: {}", stderr(&o));
    }
}

#[test]
fn pchase_defaults_to_the_shipped_data() {
    let o = simfa(&["calibrate", "pchase", "--points", "2", "--quick", "--json"]);
    let j = json(&o);
    assert_eq!(j["points"].as_array().unwrap().len(), 2);
    assert_eq!(j["points"][0]["working_set_kb"].as_f64(), Some(2.0));
}

#[test]
fn validate_runs_a_dataset_and_refuses_unknown_ones() {
    let o = simfa(&["validate", "--only", "wgmma-latency", "--json"]);
    let j = json(&o);
    let d = &j["datasets"][0];
    assert_eq!(d["name"], "wgmma-latency");
    assert_eq!(d["points"].as_array().unwrap().len(), 12);
    assert_eq!(d["mape_percent"].as_f64(), Some(0.0));
    assert_eq!(j["memory_model"], "transaction");
    assert_eq!(j["arrival_controller"], "auto");
    let o = simfa(&[
        "validate",
        "--only",
        "wgmma-latency",
        "--memory",
        "line",
        "--arrival-controller=off",
        "--json",
    ]);
    assert_eq!(json(&o)["memory_model"], "line");
    assert_eq!(json(&o)["arrival_controller"], "off");
    let o = simfa(&["validate", "--only", "wgmma-latency", "--markdown"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let md = String::from_utf8_lossy(&o.stdout);
    assert!(
        md.contains("| dataset | GPU | points | MAPE | worst point | status |")
            && md.contains("| `wgmma-latency` | h800-pcie | 12 | 0.0% |"),
        "{md}"
    );
    let o = simfa(&["validate", "--markdown", "--json"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let o = simfa(&["validate", "--only", "nope"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("unknown dataset"), "{}", stderr(&o));
}
