//! `simfa ttgir instrument` and `simfa ttgir sites` through the real
//! binary on the TTGIR fixtures, and `simfa ttgir run` and `gen` on the
//! kernels Triton compiled.

mod common;
use common::{s, simfa, stderr, Scratch};

use std::path::{Path, PathBuf};

/// File `name` of `tests/fixtures/DIR`.
fn in_fixtures(dir: &str, name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/fixtures")
        .join(dir)
        .join(name)
        .canonicalize()
        .expect("the fixture exists")
}

fn fixture(name: &str) -> PathBuf {
    in_fixtures("ttgir", name)
}

#[test]
fn instrument_writes_the_file_or_stdout_and_is_idempotent() {
    let input = fixture("01_gluon_frontend_hopper_ops.mlir");
    let scratch = Scratch::new("ttgir");
    let once = scratch.path("once.mlir");
    let o = simfa(&["ttgir", "instrument", s(&input), "-o", s(&once)]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(o.stdout.is_empty());
    let written = std::fs::read_to_string(&once).unwrap();
    let to_stdout = simfa(&["ttgir", "instrument", s(&input)]);
    assert_eq!(String::from_utf8(to_stdout.stdout).unwrap(), written);
    assert_eq!(written.matches("proton.record start \"SIMFA|").count(), 10);
    let again = simfa(&["ttgir", "instrument", s(&once)]);
    assert_eq!(String::from_utf8(again.stdout).unwrap(), written);
}

#[test]
fn sites_prints_a_table_or_json() {
    let input = fixture("05_legacy_proton_gemm_s3_excerpt.ttgir");
    let table = simfa(&["ttgir", "sites", s(&input)]);
    assert_eq!(table.status.code(), Some(0), "{}", stderr(&table));
    let text = String::from_utf8(table.stdout).unwrap();
    assert_eq!(text.lines().count(), 3, "{text}");
    assert!(text.lines().next().unwrap().starts_with("site"));
    let json = simfa(&["ttgir", "sites", s(&input), "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    let rows = v.as_array().unwrap();
    assert_eq!(rows.len(), 2);
    assert_eq!(rows[0]["kind"], "WGMMA");
    assert_eq!(rows[0]["line"], 18);
    assert_eq!(rows[0]["op"], "triton_nvidia_gpu.warp_group_dot");
    assert_eq!(rows[1]["scope"], "SIMFA|WGMMA_WAIT|pendings=1|site=1");
}

#[test]
fn a_missing_input_is_named() {
    let o = simfa(&["ttgir", "sites", "/nonexistent/k.mlir"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("cannot read /nonexistent/k.mlir"),
        "{}",
        stderr(&o)
    );
}

fn compiled(name: &str) -> PathBuf {
    in_fixtures("ttgir-compiled", name)
}

/// The JSON report of `simfa ARGS`, which must succeed.
fn report(args: &[&str]) -> serde_json::Value {
    let o = simfa(args);
    assert_eq!(o.status.code(), Some(0), "simfa {args:?}: {}", stderr(&o));
    serde_json::from_slice(&o.stdout).unwrap()
}

/// `simfa ttgir run KERNEL.ttgir --launch KERNEL.launch.toml --gpu h100
/// --json --check` (the checker must find it clean, or the run fails).
fn ttgir_run(kernel: &str) -> serde_json::Value {
    let k = compiled(&format!("{kernel}.ttgir"));
    let l = compiled(&format!("{kernel}.launch.toml"));
    report(&[
        "ttgir",
        "run",
        s(&k),
        "--launch",
        s(&l),
        "--gpu",
        "h100",
        "--json",
        "--check",
    ])
}

/// `ttgir gen` of the kernel, then `simfa run` of what it wrote, gives the
/// cycles and digest of `direct`, its `ttgir run`.
fn replays_to(kernel: &str, direct: &serde_json::Value) {
    let k = compiled(&format!("{kernel}.ttgir"));
    let l = compiled(&format!("{kernel}.launch.toml"));
    let scratch = Scratch::new("ttgir-gen");
    let out = scratch.path("k.sfk");
    let g = simfa(&["ttgir", "gen", s(&k), "--launch", s(&l), "-o", s(&out)]);
    assert_eq!(g.status.code(), Some(0), "{}", stderr(&g));
    assert!(scratch.path("k.sfk.ops").exists());
    let replayed = report(&["run", s(&out), "--gpu", "h100", "--json"]);
    assert_eq!(direct["cycles"], replayed["cycles"]);
    assert_eq!(direct["digest"], replayed["digest"]);
}

/// Triton's GEMM runs from its TTGIR, and replays through `ttgir gen`.
#[test]
fn run_and_gen_then_run_agree() {
    let direct = ttgir_run("tma_gemm");
    assert_eq!(direct["ctas"], 64);
    // 64 CTAs of 16 k-steps, 8 m64n128k16 WGMMAs each.
    assert_eq!(direct["wgmmas"], 64 * 16 * 8);
    replays_to("tma_gemm", &direct);
}

/// A GEMM that makes its descriptors in the kernel runs and replays.
#[test]
fn descriptors_made_in_the_kernel_run_and_replay() {
    let direct = ttgir_run("device_desc_gemm");
    // 16 x 16 tiles of 32 k-steps, 8 m64n128k16 WGMMAs each.
    assert_eq!(direct["wgmmas"], 256 * 32 * 8);
    replays_to("device_desc_gemm", &direct);
}

/// A warp-specialised Gluon GEMM (a one-warp TMA producer partition and a
/// four-warp WGMMA partition, 128x128x64, 4 stages, persistent) agrees
/// within 3% with `simfa gemm`'s kernel of the same tile, stages, grid and
/// epilogue, and replays.
#[test]
fn a_warp_specialised_gluon_gemm_matches_the_generator() {
    let t = ttgir_run("gluon_ws_gemm");
    let g = report(&[
        "gemm",
        "--gpu",
        "h100",
        "--m",
        "2048",
        "--n",
        "2048",
        "--k",
        "2048",
        "--block-m",
        "128",
        "--block-n",
        "128",
        "--stages",
        "4",
        "--consumers",
        "1",
        "--persistent",
        "--tma-store",
        "--json",
    ]);
    let (a, b) = (t["cycles"].as_f64().unwrap(), g["cycles"].as_f64().unwrap());
    assert!((a / b - 1.0).abs() < 0.03, "ttgir {a} cycles, gemm {b}");
    assert_eq!(t["wgmmas"], g["wgmmas"]);
    replays_to("gluon_ws_gemm", &t);
}

/// Kernels that load and store through pointers, as Triton's tutorials
/// write them, run clean and replay, moving exactly the bytes their tiles
/// cover.
#[test]
fn pointer_kernels_move_their_tiles_and_replay() {
    // The cp.async GEMM at 4096^3: 512 tiles of 128x256, each reading a
    // 128-row panel of A and a 256-column panel of B (fp16), writing its
    // C tile; 64 k-steps of 8 m64n256k16 WGMMAs (two WarpGroups).
    let g = ttgir_run("ptr_gemm");
    assert_eq!(g["bytes_loaded"], 512 * (128 * 4096 + 4096 * 256) * 2);
    assert_eq!(g["bytes_stored"], 4096 * 4096 * 2);
    assert_eq!(g["wgmmas"], 512 * 64 * 8);
    replays_to("ptr_gemm", &g);
    // Its persistent form: the same tiles, on 132 programs.
    let p = ttgir_run("persistent_ptr_gemm");
    assert_eq!(p["bytes_loaded"], g["bytes_loaded"]);
    assert_eq!(p["wgmmas"], g["wgmmas"]);
    assert_eq!(p["ctas"], 132);
    // The vector add reads x and y and writes out once: 2^22 fp32 each.
    let v = ttgir_run("vector_add");
    assert_eq!(v["bytes_loaded"], 2 * 4 * (1 << 22));
    assert_eq!(v["bytes_stored"], 4 * (1 << 22));
    replays_to("vector_add", &v);
    // The softmax's pipelined row copies: every row once, in and out.
    let s = ttgir_run("row_softmax");
    assert_eq!(s["bytes_loaded"], 4096 * 1024 * 4);
    assert_eq!(s["bytes_stored"], 4096 * 1024 * 4);
    // The layer norm reads each row three times and the weights and bias
    // once per row; it writes the row, and the mean and rstd scalars as
    // the 16-byte runs that hold them.
    let l = ttgir_run("layer_norm");
    assert_eq!(l["bytes_loaded"], 5 * 4096 * 4096 * 2);
    assert_eq!(l["bytes_stored"], 4096 * 4096 * 2 + 2 * 4096 * 16);
}
