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
    ttgir_run_edited(kernel, &[], false)
}

/// `ttgir gen` of the kernel, then `simfa run` of what it wrote, gives the
/// cycles and digest of `direct`, its `ttgir run`.
fn replays_to(kernel: &str, direct: &serde_json::Value) {
    let k = compiled(&format!("{kernel}.ttgir"));
    let l = compiled(&format!("{kernel}.launch.toml"));
    replays_with(&k, &l, direct);
}

/// [`replays_to`] with kernel `k` and launch `l`.
fn replays_with(k: &std::path::Path, l: &std::path::Path, direct: &serde_json::Value) {
    let scratch = Scratch::new("ttgir-gen");
    let out = scratch.path("k.sfk");
    let g = simfa(&["ttgir", "gen", s(k), "--launch", s(l), "-o", s(&out)]);
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

/// Triton's warp-specialised GEMM on Hopper: its two consumer partitions
/// ask for 232 registers each (`setmaxnreg`), paid for by the default
/// WarpGroup, which keeps 40, so the CTA fits the SM's 64 K registers;
/// the descriptors the partitions make are declared from their own runs;
/// a consumer's arrive for its 128 threads is one arrive of 128, not 128
/// instructions (which made 4.4 M instructions of this run).
#[test]
fn a_warp_specialised_triton_gemm_fits_and_runs() {
    let direct = ttgir_run("ws_desc_gemm");
    // 16 x 16 tiles of 32 k-steps, 8 m64n128k16 WGMMAs each.
    assert_eq!(direct["wgmmas"], 256 * 32 * 8);
    assert!(
        direct["instructions"].as_u64().unwrap() < 400_000,
        "{direct}"
    );
    replays_to("ws_desc_gemm", &direct);
    let scratch = Scratch::new("ttgir-ws");
    let (k, text) = (scratch.path("k.sfk"), scratch.path("k.txt"));
    let g = simfa(&[
        "ttgir",
        "gen",
        s(&compiled("ws_desc_gemm.ttgir")),
        "--launch",
        s(&compiled("ws_desc_gemm.launch.toml")),
        "-o",
        s(&k),
    ]);
    assert_eq!(g.status.code(), Some(0), "{}", stderr(&g));
    let c = simfa(&["convert", s(&k), s(&text)]);
    assert_eq!(c.status.code(), Some(0), "{}", stderr(&c));
    let asm = std::fs::read_to_string(&text).unwrap();
    for role in [
        "role body count=1 regs=40 stream",
        "role partition0 count=1 regs=232 stream",
        "role partition1 count=1 regs=232 stream",
    ] {
        assert!(asm.contains(role), "{asm}");
    }
}

/// A flag between CTAs as Triton compiles it: program 1 stores and sets
/// the flag (`tl.atomic_xchg`), program 0 spins on it with a volatile
/// load. The waiter goes on once the set has crossed and its poll has come
/// back; alone, it waits forever, and the deadlock names the counter.
#[test]
fn a_triton_flag_wait_waits_for_the_set() {
    // The timing of the wait is checked cycle by cycle in the lowering's
    // tests; here the compiled kernel runs clean, replays, and deadlocks
    // without its setter.
    let direct = ttgir_run("flag_signal");
    assert_eq!(direct["ctas"], 2);
    replays_to("flag_signal", &direct);
    let text = std::fs::read_to_string(compiled("flag_signal.launch.toml"))
        .unwrap()
        .replace("grid = [2, 1, 1]", "grid = [1, 1, 1]");
    let scratch = Scratch::new("ttgir-flag");
    let l = scratch.path("alone.toml");
    std::fs::write(&l, text).unwrap();
    let k = compiled("flag_signal.ttgir");
    let o = simfa(&["ttgir", "run", s(&k), "--launch", s(&l), "--gpu", "h100"]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("waits on counter 0 to count up"),
        "{}",
        stderr(&o)
    );
}

/// Triton's TMA GEMM (not warp-specialised: its one WarpGroup issues each
/// load after the WGMMA that frees its slot, an iteration later than a
/// producer WarpGroup would) agrees within 3% with `simfa gemm`'s
/// warp-specialised kernel of the same tile, grid and stages when the
/// ring is deep enough to hide that (5 stages); with 3 it is slower, as
/// its structure makes it.
#[test]
fn triton_s_tma_gemm_matches_the_generator_when_its_ring_hides_latency() {
    let gemm = |stages: &str| {
        report(&[
            "gemm",
            "--gpu",
            "h100",
            "--m",
            "1024",
            "--n",
            "1024",
            "--k",
            "1024",
            "--block-m",
            "128",
            "--block-n",
            "128",
            "--stages",
            stages,
            "--consumers",
            "1",
            "--persistent",
            "false",
            "--tma-store",
            "--json",
        ])
    };
    let cycles = |r: &serde_json::Value| r["cycles"].as_f64().unwrap();
    let (deep, g5) = (ttgir_run("deep_tma_gemm"), gemm("5"));
    assert!(
        (cycles(&deep) / cycles(&g5) - 1.0).abs() < 0.03,
        "5 stages: ttgir {} cycles, gemm {}",
        cycles(&deep),
        cycles(&g5)
    );
    assert_eq!(deep["wgmmas"], g5["wgmmas"]);
    let (shallow, g3) = (ttgir_run("tma_gemm"), gemm("3"));
    assert!(cycles(&shallow) > cycles(&g3) * 1.03);
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
        "--group-m",
        "1",
        "--tma-store",
        "--json",
    ]);
    let (a, b) = (t["cycles"].as_f64().unwrap(), g["cycles"].as_f64().unwrap());
    assert!((a / b - 1.0).abs() < 0.03, "ttgir {a} cycles, gemm {b}");
    assert_eq!(t["wgmmas"], g["wgmmas"]);
    replays_to("gluon_ws_gemm", &t);
}

/// `simfa ttgir run` of a compiled kernel with its launch file edited
/// (each `(from, to)` replaced), checked clean; the JSON report. With
/// `replay`, `ttgir gen` then `run` must give its cycles and digest.
fn ttgir_run_edited(kernel: &str, edits: &[(&str, &str)], replay: bool) -> serde_json::Value {
    let k = compiled(&format!("{kernel}.ttgir"));
    let mut text = std::fs::read_to_string(compiled(&format!("{kernel}.launch.toml"))).unwrap();
    for (from, to) in edits {
        assert!(text.contains(from), "{kernel}: no `{from}` in its launch");
        text = text.replace(from, to);
    }
    let scratch = Scratch::new("ttgir-launch");
    let l = scratch.path("launch.toml");
    std::fs::write(&l, text).unwrap();
    let r = report(&[
        "ttgir",
        "run",
        s(&k),
        "--launch",
        s(&l),
        "--gpu",
        "h100",
        "--json",
        "--check",
    ]);
    if replay {
        replays_with(&k, &l, &r);
    }
    r
}

/// Kernels that load and store through pointers, as Triton's tutorials
/// write them, and the tutorial's attention, run clean, moving exactly the
/// bytes their tiles cover, and replay through `ttgir gen` (at smaller
/// sizes than their launch files', to keep the test quick).
#[test]
fn tutorial_kernels_move_their_tiles() {
    // The cp.async GEMM at 1024^3: 32 tiles of 128x256, each reading a
    // 128-row panel of A and a 256-column panel of B (fp16), writing its
    // C tile; 16 k-steps of 8 m64n256k16 WGMMAs (two WarpGroups).
    let small = [
        ("grid = [512, 1, 1]", "grid = [32, 1, 1]"),
        (
            "M = 4096\nN = 4096\nK = 4096",
            "M = 1024\nN = 1024\nK = 1024",
        ),
    ];
    let g = ttgir_run_edited("ptr_gemm", &small, true);
    assert_eq!(g["bytes_loaded"], 32 * (128 * 1024 + 1024 * 256) * 2);
    assert_eq!(g["bytes_stored"], 1024 * 1024 * 2);
    assert_eq!(g["wgmmas"], 32 * 16 * 8);
    // Its persistent form: the same tiles on its 132 programs (its
    // NUM_SMS), 100 of them with none.
    let p = ttgir_run_edited("persistent_ptr_gemm", &[small[1]], false);
    assert_eq!(p["bytes_loaded"], g["bytes_loaded"]);
    assert_eq!(p["wgmmas"], g["wgmmas"]);
    // The causal attention of 4 batch-heads of 1024 tokens: CTA m of a
    // head takes the m blocks before the diagonal and the diagonal's, 16
    // m64n128k16 WGMMAs for QK^T and 16 for PV each; Q once, K and V per
    // block; O (fp16) and the row statistics M (fp32) once.
    let a = ttgir_run_edited(
        "causal_attention",
        &[
            ("grid = [32, 32, 1]", "grid = [8, 4, 1]"),
            ("N_CTX = 4096", "N_CTX = 1024"),
        ],
        true,
    );
    let blocks = 4 * (1..=8).sum::<u64>();
    assert_eq!(a["wgmmas"], blocks * 32);
    assert_eq!(a["bytes_loaded"], 32 * 32768 + blocks * 2 * 32768);
    assert_eq!(a["bytes_stored"], 32 * 32768 + 32 * 128 * 4);
    // The vector add reads x and y and writes out once: 2^20 fp32 each.
    let v = ttgir_run_edited(
        "vector_add",
        &[
            ("grid = [4096, 1, 1]", "grid = [1024, 1, 1]"),
            ("n = 4194304", "n = 1048576"),
        ],
        true,
    );
    assert_eq!(v["bytes_loaded"], 2 * 4 * (1 << 20));
    assert_eq!(v["bytes_stored"], 4 * (1 << 20));
    // The softmax's pipelined row copies: every row once, in and out (1024
    // rows on 264 programs).
    let r = ttgir_run_edited("row_softmax", &[("rows = 4096", "rows = 1024")], true);
    assert_eq!(r["bytes_loaded"], 1024 * 1024 * 4);
    assert_eq!(r["bytes_stored"], 1024 * 1024 * 4);
    // The layer norm reads each row three times and the weights and bias
    // once per row; it writes the row, and the mean and rstd scalars as
    // the 16-byte runs that hold them (512 rows).
    let l = ttgir_run_edited(
        "layer_norm",
        &[("grid = [4096, 1, 1]", "grid = [512, 1, 1]")],
        true,
    );
    assert_eq!(l["bytes_loaded"], 512 * 5 * 4096 * 2);
    assert_eq!(l["bytes_stored"], 512 * 4096 * 2 + 2 * 512 * 16);
    // The layer-norm backward's second kernel: 32 programs each read the
    // 64 partial rows of dw and db in its 128 columns (two steps of 32
    // rows) and write its 128 sums of each.
    let d = ttgir_run_edited("layer_norm_dwdb", &[], true);
    assert_eq!(d["bytes_loaded"], 32 * 2 * 64 * 128 * 2);
    assert_eq!(d["bytes_stored"], 32 * 2 * 128 * 2);
    // The attention backward's first kernel, 2 heads of 1024 tokens: o
    // and do (fp16, head dim 64) once, one fp32 delta per query.
    let pre = ttgir_run_edited(
        "attention_bwd_pre",
        &[
            ("grid = [32, 128, 1]", "grid = [8, 2, 1]"),
            ("N_CTX = 4096", "N_CTX = 1024"),
        ],
        true,
    );
    assert_eq!(pre["bytes_loaded"], 2 * 2 * 1024 * 64 * 2);
    assert_eq!(pre["bytes_stored"], 2 * 1024 * 4);
}

/// Kernels that read memory the launch file describes: a grouped GEMM
/// whose sizes and matrix addresses come from device tables (through
/// pointers, and through descriptors made over the loaded addresses), and
/// the layer-norm backward with its atomic spin lock. Each moves exactly
/// what its tiles and tables cover and replays through `ttgir gen`;
/// without the tables' contents, the run names the tensor to give them for.
#[test]
fn kernels_that_read_the_launch_s_memory_run_and_replay() {
    // Four 1024^3 GEMMs of 64 tiles of 128x128 on 128 programs: every A
    // and B panel once per tile, every C tile once; 8 m64n128k16 WGMMAs
    // per 64 of K. Every program reads the 3 sizes of each of the 4
    // groups, each scalar as the 16-byte run that holds it; program c has
    // tiles in 2 groups (tiles c and c + 128).
    let panels = 256 * 2 * 128 * 1024 * 2;
    let t = ttgir_run_edited("grouped_tma_gemm", &[], true);
    assert_eq!(t["wgmmas"], 256 * 16 * 8);
    assert_eq!(t["bytes_stored"], 4 * 1024 * 1024 * 2);
    // Per program: 12 sizes, and 3 addresses in each of its 2 groups.
    assert_eq!(t["bytes_loaded"], panels + 128 * (12 + 2 * 3) * 16);
    // Through pointers, each tile also loads its 3 strides and 3
    // addresses.
    let p = ttgir_run_edited("grouped_gemm", &[], true);
    assert_eq!(p["wgmmas"], t["wgmmas"]);
    assert_eq!(p["bytes_stored"], t["bytes_stored"]);
    assert_eq!(p["bytes_loaded"], panels + 128 * (12 + 2 * 6) * 16);
    // The layer-norm backward, 512 rows: each loads x, dy, w and the
    // group's partial dw and db (the counters say they exist), mean, rstd
    // and the counter (16-byte runs), and stores dx, dw and db; its spin
    // lock's CAS and exchange are the simulator's lock of their word.
    let l = ttgir_run_edited(
        "layer_norm_bwd",
        &[("grid = [4096, 1, 1]", "grid = [512, 1, 1]")],
        true,
    );
    assert_eq!(l["bytes_loaded"], 512 * (5 * 8192 + 3 * 16));
    assert_eq!(l["bytes_stored"], 512 * 3 * 8192);
    // The 8 rows of each of the 64 groups take its lock one after
    // another: the run takes more than three times as long as 64 rows,
    // one per lock (2.2 times when the locks were uncontended).
    let one = ttgir_run_edited(
        "layer_norm_bwd",
        &[("grid = [4096, 1, 1]", "grid = [64, 1, 1]")],
        false,
    );
    let (c8, c1) = (
        l["cycles"].as_u64().unwrap(),
        one["cycles"].as_u64().unwrap(),
    );
    assert!(c8 > 3 * c1, "{c8} cycles for 512 rows, {c1} for 64");
    // A loop bound from a table the launch gives no contents for.
    let k = compiled("grouped_gemm.ttgir");
    let text = std::fs::read_to_string(compiled("grouped_gemm.launch.toml")).unwrap();
    let cut = text.replace(
        "values = [1024, 1024, 1024, 1024, 1024, 1024, 1024, 1024, 1024, 1024, 1024, 1024]",
        "dims = [12]",
    );
    assert_ne!(cut, text);
    let scratch = Scratch::new("ttgir-no-values");
    let l = scratch.path("launch.toml");
    std::fs::write(&l, cut).unwrap();
    let out = scratch.path("k.sfk");
    for args in [
        vec!["ttgir", "run", s(&k), "--launch", s(&l), "--gpu", "h100"],
        vec!["ttgir", "gen", s(&k), "--launch", s(&l), "-o", s(&out)],
    ] {
        let o = simfa(&args);
        assert_eq!(o.status.code(), Some(2), "{args:?}");
        assert!(
            stderr(&o).contains("a load from `sizes`, whose contents the launch does not give"),
            "{args:?}: {}",
            stderr(&o)
        );
    }
    assert!(!out.exists(), "no kernel written");
}

/// The persistent TMA GEMM of Triton's persistent-matmul tutorial at
/// 4096^3: its FP16 form with the epilogue stored in two halves moves
/// every A and B panel once per tile and C once; its FP8 form moves half
/// the bytes and does the same math with half the WGMMAs' 16-bit count
/// (an FP8 WGMMA is k32), so the report's FLOPs are the dots' own and it
/// runs in well under two thirds of the FP16 time.
#[test]
fn fp8_and_split_epilogue_gemms_count_their_math() {
    let flops = 2u64 * 4096 * 4096 * 4096;
    let h = ttgir_run("subtile_gemm");
    assert_eq!(h["flops"], flops);
    assert_eq!(h["wgmma_flops"], flops);
    // 32 x 16 tiles of 128 x 256, each reading 128 + 256 rows of K.
    assert_eq!(h["bytes_loaded"], 512u64 * (128 + 256) * 4096 * 2);
    assert_eq!(h["bytes_stored"], 4096u64 * 4096 * 2);
    let e = ttgir_run("fp8_gemm");
    assert_eq!(e["flops"], flops);
    assert_eq!(e["wgmma_flops"], flops / 2);
    assert_eq!(e["bytes_loaded"], 512u64 * (128 + 256) * 4096);
    assert_eq!(e["bytes_stored"], 4096u64 * 4096);
    let (fp16, fp8) = (h["cycles"].as_u64().unwrap(), e["cycles"].as_u64().unwrap());
    assert!(3 * fp8 < 2 * fp16, "fp8 {fp8} cycles against fp16 {fp16}");
    replays_to("fp8_gemm", &e);
    // Resumed from a snapshot halfway, the report is the whole run's,
    // FLOPs included.
    let scratch = Scratch::new("ttgir-fp8-resume");
    let snap = scratch.path("half.snap");
    let (k, l) = (compiled("fp8_gemm.ttgir"), compiled("fp8_gemm.launch.toml"));
    let base = ["ttgir", "run", s(&k), "--launch", s(&l), "--gpu", "h100"];
    let half = (fp8 / 2).to_string();
    let saved = simfa(&[&base[..], &["--save-at", &half, s(&snap)]].concat());
    assert_eq!(saved.status.code(), Some(0), "{}", stderr(&saved));
    let resumed = report(&[&base[..], &["--resume", s(&snap), "--json"]].concat());
    assert_eq!(resumed["cycles"], e["cycles"]);
    assert_eq!(resumed["flops"], e["flops"]);
}

/// The causal attention backward of Triton's tutorial (through pointers,
/// 5 stages), on 2 heads of 1024 tokens (head dim 64): CTA p computes dK
/// and dV of keys 128p.. (8 masked steps of 16 queries, then 4(7 - p)
/// steps of 32) and dQ of queries 128p.. (8 masked steps of 16 keys, then
/// 4p steps of 32), four dots a dK/dV step and three a dQ step; CTA 0
/// never runs the unmasked dQ loop, so its tiles' maps come from later
/// CTAs. Derived by hand: the FLOPs, the stores (dK, dV, dQ once), and
/// the loads (K, V, Q, dO blocks; a row statistic per query block; the
/// compiler merges the two dQ calls' identical loads of delta into one).
#[test]
fn the_tutorial_attention_backward_runs_as_derived() {
    let r = ttgir_run_edited(
        "attention_bwd",
        &[
            ("grid = [32, 1, 128]", "grid = [8, 1, 2]"),
            ("stride_z = 8388608", "stride_z = 131072"),
            ("stride_h = 262144", "stride_h = 65536"),
            ("H = 32", "H = 2"),
            ("N_CTX = 4096", "N_CTX = 1024"),
        ],
        true,
    );
    let dot = |m: u64, n: u64, k: u64| 2 * m * n * k;
    let (mut flops, mut loaded) = (0, 0);
    for p in 0..8u64 {
        let (kv_steps, q_steps) = (4 * (7 - p), 4 * p);
        flops += 8 * (2 * dot(128, 16, 64) + 2 * dot(128, 64, 16))
            + kv_steps * (2 * dot(128, 32, 64) + 2 * dot(128, 64, 32))
            + 8 * (2 * dot(128, 16, 64) + dot(128, 64, 16))
            + q_steps * (2 * dot(128, 32, 64) + dot(128, 64, 32));
        // K, V, Q, dO blocks (128 x 64 fp16); m and delta of 128 queries.
        loaded += 4 * 16384 + 2 * 512;
        // Masked dK/dV steps: a 16-query block of Q and dO, m and delta.
        loaded += 8 * (2 * 2048 + 2 * 64);
        loaded += kv_steps * (2 * 4096 + 2 * 128);
        // dQ steps: a block of K and V.
        loaded += 8 * 2 * 2048 + q_steps * 2 * 4096;
    }
    assert_eq!(r["flops"], 2 * flops);
    assert_eq!(r["bytes_loaded"], 2 * loaded);
    assert_eq!(r["bytes_stored"], 2 * 8 * 3 * 16384);
}

/// An embedding lookup gathers the table's rows at the ids it loads: one
/// 256-byte row per id after the ids have arrived, through the L1; without
/// the ids' values each id is its own position (every row read once), with
/// them the rows they name (here one row 4096 times: the L1 and the L2
/// serve all but the first). Clean under the checker, and it replays.
#[test]
fn a_gather_reads_the_rows_its_ids_name() {
    let row = 128 * 2;
    let direct = ttgir_run_edited("embedding", &[], true);
    assert_eq!(direct["bytes_loaded"], 4096 * 4 + 4096 * row);
    assert_eq!(direct["bytes_stored"], 4096 * row);
    assert_eq!(direct["l1_loads"], 64 * (1 + 64));
    let ids = format!(
        "[tensors.ids_ptr]\nvalues = [{}]\n",
        vec!["7"; 4096].join(", ")
    );
    let same = ttgir_run_edited("embedding", &[("[tensors.ids_ptr]\n", &ids)], true);
    assert_eq!(same["bytes_loaded"], direct["bytes_loaded"]);
    // DRAM reads the ids and one 256-byte row (in 128-byte lines).
    assert_eq!(same["dram_read_bytes"], 4096 * 4 + row);
    assert!(same["l1_hits"].as_u64().unwrap() > 0, "{same}");
    assert!(same["cycles"].as_u64() < direct["cycles"].as_u64());
}

/// A mixture-of-experts GEMM gathers its tokens' rows of A by id (`ids //
/// 2`: each token goes to two experts) and its block's expert weights by a
/// loaded scalar id. Without the ids, block `b` takes expert `b` modulo the
/// 8 experts, so DRAM reads every expert's weights once (and A's 8 MiB);
/// with every block on expert 5, only that expert's. (Two column blocks
/// of the launch's 16, so 256 of each expert's 2048 columns, to keep the
/// test quick.)
#[test]
fn a_moe_gemm_gathers_its_tokens_and_its_expert() {
    let (a, expert) = (4096 * 1024 * 2, 1024 * 256 * 2);
    let ids = 8704 * 4 + 136 * 4;
    let two = ("grid = [136, 16, 1]", "grid = [136, 2, 1]");
    let direct = ttgir_run_edited("moe_gemm", &[two], true);
    // 136 x 2 tiles, 16 k-steps of four m64n128k16 WGMMAs.
    assert_eq!(direct["wgmmas"], 136 * 2 * 16 * 4);
    let dram = |r: &serde_json::Value| r["dram_read_bytes"].as_u64().unwrap();
    assert!(dram(&direct) >= (a + 8 * expert) as u64, "{direct}");
    let fives = format!(
        "[tensors.expert_ids_ptr]\nvalues = [{}]\n",
        vec!["5"; 136].join(", ")
    );
    let one = ttgir_run_edited(
        "moe_gemm",
        &[two, ("[tensors.expert_ids_ptr]\n", &fives)],
        true,
    );
    assert_eq!(one["bytes_loaded"], direct["bytes_loaded"]);
    assert!(dram(&one) >= (a + expert) as u64, "{one}");
    // (A little more than each line once: lines the L2 evicts come back.)
    assert!(dram(&one) <= (a + expert + ids + 65536) as u64, "{one}");
}
