//! Golden digests of the issue-4 workloads: a small FA3 forward kernel
//! (full pipeline, causal, and the two ablation variants) and a small
//! pipelined, persistent GEMM, all through the memory hierarchy with the
//! consistency checker on (`simfa_tests::run` asserts it is clean), under
//! the default transaction-level model and the line-level reference; and
//! a TMA stream long enough for the transaction HBM's refreshes to count.
//!
//! Each is also run with no observer at all: asking for detail events
//! must not change the timing.
//!
//! A golden digest moves only when the timing model or a generator
//! changes; update it in the same commit and say why in the message.

use simfa_core::config::MemoryModel;
use simfa_core::mem::config::ArrivalController;
use simfa_core::GpuConfig;
use simfa_std::gen::fa3::{fa3, Fa3Params, Variant};
use simfa_std::gen::{gemm, GemmParams};
use simfa_tests::run;

fn small_fa3(causal: bool, variant: Variant) -> Fa3Params {
    Fa3Params {
        batch: 1,
        heads: 4,
        kv_heads: 2,
        seqlen_q: 512,
        seqlen_kv: 512,
        hdim: 128,
        causal,
        variant,
    }
}

fn h800(memory: MemoryModel) -> GpuConfig {
    GpuConfig {
        memory,
        ..GpuConfig::h800()
    }
}

fn fa3_summary(memory: MemoryModel, p: &Fa3Params) -> (u64, u64) {
    let cfg = h800(memory);
    let (k, _) = fa3(p, &cfg).unwrap();
    let s = run(&cfg, &k).unwrap();
    assert_eq!(bare(&cfg, &k), s, "{memory}: the checker changed the run");
    (s.cycles, s.digest)
}

/// A run with no observer at all, as the CLI makes without `--check`.
fn bare(cfg: &GpuConfig, k: &simfa_core::Kernel) -> simfa_core::Summary {
    let n = simfa_core::Simulator::<simfa_core::NoStream>::arena_size(cfg, k).unwrap();
    let mut arena = vec![0u8; n];
    let mut sim = simfa_core::Simulator::new(cfg, k, &mut arena).unwrap();
    sim.run(&mut ()).unwrap()
}

/// Under the transaction-level model (the default).
const GOLDEN_FA3: [(u64, u64); 4] = [
    (17425, 0x5078_608b_3608_c68a),
    (16866, 0x7936_1316_2a43_c6a2),
    (17867, 0x149a_1404_d93c_83b4),
    (17332, 0xcad6_3a98_d5d2_8c22),
];

/// Under the line-level model.
const GOLDEN_FA3_LINE: [(u64, u64); 4] = [
    (17291, 0xed1b_4883_1d86_c2b4),
    (16894, 0x6a17_d425_bdd6_2b87),
    (17733, 0x4742_b28e_bad1_13c5),
    (17198, 0xacec_9c25_7282_9966),
];

fn check_fa3(memory: MemoryModel, golden: [(u64, u64); 4]) {
    let got = [
        fa3_summary(memory, &small_fa3(false, Variant::Full)),
        fa3_summary(memory, &small_fa3(true, Variant::Full)),
        fa3_summary(memory, &small_fa3(false, Variant::NoOverlap)),
        fa3_summary(memory, &small_fa3(false, Variant::NoWs)),
    ];
    let shown: Vec<String> = got
        .iter()
        .map(|(c, d)| format!("({c}, 0x{d:016x})"))
        .collect();
    assert_eq!(got, golden, "{memory}: got [{}]", shown.join(", "));
}

#[test]
fn golden_fa3_small() {
    check_fa3(MemoryModel::Transaction, GOLDEN_FA3);
}

#[test]
fn golden_fa3_small_line() {
    check_fa3(MemoryModel::Line, GOLDEN_FA3_LINE);
}

/// Under the transaction-level and the line-level model.
const GOLDEN_GEMM_PIPELINED: [(u64, u64); 2] = [
    (18365, 0x6ae8_38e5_c8e3_f66d),
    (18048, 0x0469_cc25_413d_e509),
];

#[test]
fn golden_gemm_pipelined_persistent() {
    let p = GemmParams {
        stages: 3,
        consumers: 2,
        persistent: true,
        group_m: 2,
        ..GemmParams::new(1024, 512, 1024)
    }
    .calibrated(simfa_std::gen::Calibration::H800);
    for (memory, golden) in [MemoryModel::Transaction, MemoryModel::Line]
        .into_iter()
        .zip(GOLDEN_GEMM_PIPELINED)
    {
        let (cfg, k) = (h800(memory), gemm(&p).unwrap());
        let s = run(&cfg, &k).unwrap();
        assert_eq!(bare(&cfg, &k), s, "{memory}: the checker changed the run");
        assert_eq!(
            (s.cycles, s.digest),
            golden,
            "{memory}: got ({}, 0x{:016x})",
            s.cycles,
            s.digest
        );
    }
}

/// Under the transaction-level model (the line-level one has its own
/// refresh tests): a bulk TMA stream near the HBM's peak for several
/// refresh intervals, where the HBM service model and its refresh decide
/// the time (`arrival_controller = "off"`), and, by default (`"auto"`:
/// the kernel is memory-bound), the arrival-order controller.
const GOLDEN_TMA_STREAM: [(ArrivalController, u64, u64); 2] = [
    (ArrivalController::Off, 22232, 0xae2c_46d1_4688_df3c),
    (ArrivalController::Auto, 23459, 0x89b6_08af_3b32_0187),
];

#[test]
fn golden_tma_stream_through_refreshes() {
    use simfa_std::gen::{tma_bw, CopyKind, TmaBwParams};
    for (policy, cycles, digest) in GOLDEN_TMA_STREAM {
        let mut cfg = h800(MemoryModel::Transaction);
        cfg.transaction.arrival_controller = policy;
        let p = TmaBwParams {
            total_bytes: 32 << 20,
            ..TmaBwParams::new(CopyKind::Bulk { bytes: 16384 }, 2, &cfg)
        };
        let k = tma_bw(&p).unwrap();
        let s = run(&cfg, &k).unwrap();
        assert_eq!(bare(&cfg, &k), s, "the checker changed the run");
        assert_eq!(
            (s.cycles, s.digest),
            (cycles, digest),
            "{policy:?}: got ({}, 0x{:016x})",
            s.cycles,
            s.digest
        );
    }
}
