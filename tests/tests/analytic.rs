//! The analytical estimate (`simfa_core::analytic`) against hand-computed
//! FLOPs and bytes, and its lower bound against simulated cycles.
//!
//! The expected counts are written out from the problem shapes here, not
//! taken from the estimate's own code: a GEMM's `2 M N K` FLOPs and its
//! A, B, C footprints; FA3's `4 sq skv d` FLOPs per head and its Q, K, V,
//! O footprints.

use simfa_core::analytic::estimate;
use simfa_core::config::MemoryModel;
use simfa_core::GpuConfig;
use simfa_std::gen::fa3::{fa3, Fa3Params, Variant};
use simfa_std::gen::{gemm, GemmParams};
use simfa_std::run::simulate;

#[test]
fn gemm_flops_and_bytes_by_hand() {
    // 512 x 384 x 256 in 128 x 128 x 64 tiles: 4 x 3 = 12 CTAs.
    let (m, n, k) = (512u64, 384u64, 256u64);
    let cfg = GpuConfig::h800();
    let kern = gemm(&GemmParams::new(m as u32, n as u32, k as u32)).unwrap();
    let e = estimate(&cfg, &kern, u64::MAX);
    assert!(e.complete);
    assert_eq!(e.flops, 2 * m * n * k);
    assert_eq!(e.ctas, (m / 128) * (n / 128));
    // Each CTA loads a 128-row strip of A and a 128-column strip of B, K
    // deep, 2 bytes an element; C is stored once.
    assert_eq!(e.l2_load_bytes, e.ctas * (128 * k + 128 * k) * 2);
    assert_eq!(e.l2_store_bytes, m * n * 2);
    // Compulsory: A and B read once, C written once.
    assert_eq!(e.hbm_read_bytes, (m * k + k * n) * 2);
    assert_eq!(e.hbm_write_bytes, m * n * 2);
    // N = 128 WGMMAs take 64 cycles on the H800; 12 CTAs on 132 SMs is
    // one partial wave.
    assert_eq!(e.tensor_cycles, (2 * m * n * k) / (2 * 64 * 128 * 16) * 64);
    assert_eq!(e.full_waves(), 1);
}

#[test]
fn fa3_flops_and_bytes_by_hand() {
    // Head dim 64, not causal: 192-row Q blocks, 128-row K/V blocks, no
    // clusters; 384 x 256 tokens fill whole blocks.
    let (b, h, kvh, sq, skv, d) = (1u64, 4u64, 2u64, 384u64, 256u64, 64u64);
    let p = Fa3Params {
        batch: b as u32,
        heads: h as u32,
        kv_heads: kvh as u32,
        seqlen_q: sq as u32,
        seqlen_kv: skv as u32,
        hdim: d as u32,
        causal: false,
        variant: Variant::Full,
    };
    let cfg = GpuConfig::h800();
    let (kern, _) = fa3(&p, &cfg).unwrap();
    let e = estimate(&cfg, &kern, u64::MAX);
    assert!(e.complete);
    // S = Q K^T and O = P V: 2 sq skv d each, per head.
    assert_eq!(e.flops, 4 * sq * skv * d * h * b);
    assert_eq!(e.ctas, b * h * (sq / 192));
    // Each CTA loads its Q block and the whole K and V of its KV head.
    let per_cta = (192 * d + 2 * skv * d) * 2;
    assert_eq!(e.l2_load_bytes, e.ctas * per_cta);
    assert_eq!(e.l2_store_bytes, b * h * sq * d * 2);
    // Q, K and V are read once; O is written once.
    assert_eq!(e.hbm_read_bytes, b * (h * sq + 2 * kvh * skv) * d * 2);
    assert_eq!(e.hbm_write_bytes, b * h * sq * d * 2);
}

fn fa3_shape(sq: u32, hdim: u32, causal: bool) -> Fa3Params {
    Fa3Params {
        batch: 1,
        heads: 4,
        kv_heads: 2,
        seqlen_q: sq,
        seqlen_kv: sq,
        hdim,
        causal,
        variant: Variant::Full,
    }
}

/// The claimed lower bound is never above the simulated cycles, on every
/// memory model, for GEMMs and FA3s of several shapes.
#[test]
fn bound_is_below_simulation() {
    let gemms = [
        GemmParams::new(256, 256, 256),
        GemmParams::new(1024, 512, 2048),
        GemmParams {
            stages: 3,
            consumers: 2,
            block_m: 128,
            block_n: 256,
            ..GemmParams::new(2048, 2048, 512)
        },
        GemmParams {
            stages: 3,
            persistent: true,
            ctas: 132,
            ..GemmParams::new(2048, 1024, 1024)
        },
    ];
    let fa3s = [
        fa3_shape(512, 128, false),
        fa3_shape(512, 128, true),
        fa3_shape(384, 64, false),
        fa3_shape(1024, 256, true),
    ];
    let mut kernels: Vec<_> = gemms.iter().map(|p| gemm(p).unwrap()).collect();
    for memory in MemoryModel::ALL {
        let cfg = GpuConfig {
            memory,
            ..GpuConfig::h800()
        };
        let mut all = kernels.clone();
        all.extend(fa3s.iter().map(|p| fa3(p, &cfg).unwrap().0));
        for k in &all {
            let out = simulate(&cfg, k, &mut ()).unwrap();
            let e = estimate(&cfg, k, u64::MAX);
            let bound = e.lower_bound_cycles(&cfg).unwrap();
            assert!(
                bound <= out.summary.cycles,
                "{} on {memory}: bound {bound} > simulated {}",
                k.name,
                out.summary.cycles
            );
            assert!(bound > 0, "{}", k.name);
            // The walk sees the same WGMMAs as the run.
            assert_eq!(e.flops, out.flops, "{}", k.name);
        }
    }
    kernels.clear();
}
