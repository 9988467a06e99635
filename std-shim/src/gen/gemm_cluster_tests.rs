//! The clustered GEMM: the kernel's cluster shape, the multicast loads and
//! releases, the L2 lines a cluster saves, and the parameter checks.

use super::*;
use crate::check::ConsistencyChecker;
use simfa_core::GpuConfig;

/// A 128 x 256 x 64 tile, 3 stages, 2 consumers, C from registers.
fn tile(m: u32, n: u32, k: u32, cluster: (u32, u32)) -> GemmParams {
    GemmParams {
        block_n: 256,
        stages: 3,
        consumers: 2,
        epilogue: Epilogue::Registers,
        cluster_m: cluster.0,
        cluster_n: cluster.1,
        ..GemmParams::new(m, n, k)
    }
}

/// TMA line requests of a checked run on an H100 (the checker must stay
/// clean).
fn lines(p: &GemmParams) -> u64 {
    let k = gemm(p).unwrap();
    let cfg = GpuConfig::h100();
    let mut check = ConsistencyChecker::new(&cfg);
    let out = crate::run::simulate(&cfg, &k, &mut check).unwrap();
    assert!(check.is_clean(), "{}", check.summary());
    out.summary.stats.tma_lines
}

/// The cluster follows the grid's tile columns (M) and rows (N) without
/// persistence and consecutive CTAs with it; the shared operand is
/// multicast along the cluster's side and every consumer releases its
/// stage in every CTA of the cluster.
#[test]
fn cluster_shape_masks_and_releases() {
    let k = gemm(&tile(512, 512, 512, (2, 1))).unwrap();
    assert_eq!(k.cluster.dims, [1, 2, 1]);
    assert_eq!(k.stages[0].consumers, 4);
    let masks: Vec<u8> = k
        .code
        .iter()
        .filter_map(|i| match *i {
            Instr::TmaLoad { multicast, .. } => Some(multicast),
            _ => None,
        })
        .collect();
    assert_eq!(masks, [0, 2], "A alone, B along y");
    assert!(k
        .code
        .iter()
        .any(|i| matches!(i, Instr::StageRelease { cluster: 2, .. })));
    let p = GemmParams {
        persistent: true,
        ctas: 8,
        group_m: 2,
        ..tile(512, 512, 512, (2, 1))
    };
    let k = gemm(&p).unwrap();
    assert_eq!(k.cluster.dims, [2, 1, 1]);
    assert_eq!(k.grid, [8, 1, 1]);
    let k = gemm(&tile(512, 512, 512, (1, 2))).unwrap();
    assert_eq!(k.cluster.dims, [2, 1, 1]);
}

/// 512^3 in 128 x 256 tiles: 4 x 2 tiles, 8 k-blocks each. A k-block's A
/// tile is 128 rows of 128 bytes (128 lines) and its B tile 64 rows of 512
/// bytes (256 lines); C is 4096 lines. A cluster of `m x n` CTAs reads
/// each B tile once per `m` CTAs and each A tile once per `n`, so the
/// lines requested are exactly `64 * (128 / n + 256 / m) + 4096`.
#[test]
fn a_cluster_reads_each_shared_tile_once() {
    for (m, n) in [(1u32, 1u32), (2, 1), (1, 2), (2, 2), (4, 1)] {
        let got = lines(&tile(512, 512, 512, (m, n)));
        assert_eq!(got, 64 * (128 / n + 256 / m) as u64 + 4096, "{m}x{n}");
    }
    // Persistent, 16 CTAs over 8 x 4 tiles in clusters of 2 along M.
    let p = GemmParams {
        persistent: true,
        ctas: 16,
        group_m: 4,
        ..tile(1024, 1024, 512, (2, 1))
    };
    assert_eq!(lines(&p), 32 * 8 * (128 + 128) + 16384);
}

/// The checks name the cluster and what it needs.
#[test]
fn cluster_parameters_are_checked() {
    let cases = [
        (tile(512, 512, 512, (0, 1)), "sides >= 1"),
        (tile(512, 512, 512, (8, 4)), "at most 16"),
        (
            GemmParams {
                stages: 1,
                consumers: 1,
                ..tile(512, 512, 512, (2, 1))
            },
            "stages >= 2",
        ),
        (tile(384, 512, 512, (2, 1)), "do not divide"),
        (tile(512, 512, 520, (2, 1)), "multiples of block_m"),
        (
            GemmParams {
                persistent: true,
                group_m: 2,
                ..tile(512, 1024, 512, (2, 2))
            },
            "not both",
        ),
        (
            GemmParams {
                persistent: true,
                ..tile(512, 512, 512, (2, 1))
            },
            "must be multiples of cluster_m = 2",
        ),
        (
            GemmParams {
                persistent: true,
                group_m: 2,
                ..tile(512, 1024, 512, (1, 2))
            },
            "set group_m = 1",
        ),
    ];
    for (p, want) in cases {
        let e = p.validate().unwrap_err().to_string();
        assert!(e.contains("cluster") && e.contains(want), "{e}");
    }
}
