//! Golden digests of the issue-4 workloads: a small FA3 forward kernel
//! (full pipeline, causal, and the two ablation variants) and a small
//! pipelined, persistent GEMM, all through the memory hierarchy with the
//! consistency checker on (`simfa_tests::run` asserts it is clean), under
//! the default transaction-level model and the line-level reference.
//!
//! A golden digest moves only when the timing model or a generator
//! changes; update it in the same commit and say why in the message.

use simfa_core::config::MemoryModel;
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
    (s.cycles, s.digest)
}

/// Under the transaction-level model (the default).
const GOLDEN_FA3: [(u64, u64); 4] = [
    (16986, 0x23e5_9d2f_5276_9a3e),
    (16408, 0x0fee_a954_13a9_7217),
    (17428, 0x5f22_4a2b_45e0_c83d),
    (16893, 0xa091_ac7b_2ce9_a05b),
];

/// Under the line-level model.
const GOLDEN_FA3_LINE: [(u64, u64); 4] = [
    (16920, 0x6953_5fcd_0f39_2878),
    (16418, 0x465d_1c0e_dea1_2c78),
    (17362, 0x7f2b_5303_ddd2_db6e),
    (16827, 0x2d01_143d_f06e_6808),
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
    (18781, 0x5f82_60a2_a039_a463),
    (18439, 0xaebc_c55e_1f03_5606),
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
        let s = run(&h800(memory), &gemm(&p).unwrap()).unwrap();
        assert_eq!(
            (s.cycles, s.digest),
            golden,
            "{memory}: got ({}, 0x{:016x})",
            s.cycles,
            s.digest
        );
    }
}
