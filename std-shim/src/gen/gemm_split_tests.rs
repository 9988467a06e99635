//! Split-K: two CTAs share one tile's K, the second writes its FP32 partial
//! sums to the workspace and the first adds them before storing C; the
//! traffic is derived by hand and the reduction's order checked on the
//! events (a child module of `gemm`).

use super::*;
use crate::check::ConsistencyChecker;
use simfa_core::{Cycle, Event, GpuConfig, Observer};

/// A transfer's issue or completion: (cycle, CTA, bytes, store, done).
pub(super) type Transfer = (u64, u32, u64, bool, bool);

/// Every TMA and register transfer's issue and completion (the stream-K
/// tests' too).
#[derive(Default)]
pub(super) struct Transfers(pub(super) Vec<Transfer>);

impl Observer for Transfers {
    fn on_event(&mut self, c: Cycle, e: &Event) {
        match *e {
            Event::TmaIssue {
                who, bytes, store, ..
            } => self.0.push((c.get(), who.cta, bytes, store, false)),
            Event::TmaDone {
                who, bytes, store, ..
            } => self.0.push((c.get(), who.cta, bytes, store, true)),
            _ => {}
        }
    }
}

/// 128 x 128 x 256 in 128 x 128 x 64 tiles: 4 K iterations, 2 per slice;
/// one WarpGroup (`stages` 1) or a producer and `consumers`.
fn two_slices(stages: u32, consumers: u32) -> GemmParams {
    GemmParams {
        stages,
        consumers,
        split_k: 2,
        epilogue: Epilogue::Registers,
        ..GemmParams::new(128, 128, 256)
    }
}

#[test]
fn two_ctas_share_a_tiles_k() {
    for (stages, consumers) in [(1, 1), (2, 1), (2, 2)] {
        let p = two_slices(stages, consumers);
        let k = gemm(&p).unwrap();
        assert_eq!(k.grid, [1, 1, 2]);
        assert_eq!(k.cluster.dims, [1, 1, 2], "the K slices form a cluster");
        let w = &k.maps[3];
        assert_eq!((w.name.as_str(), w.elem_bytes), ("W", 4));
        assert_eq!(w.base, workspace_base(&p));
        assert_eq!(w.base, tensor_bases(&p)[2] + (1 << 20), "after C");
        let cfg = GpuConfig::h100();
        let mut check = ConsistencyChecker::new(&cfg);
        let mut seen = Transfers::default();
        let out = crate::run::simulate(&cfg, &k, &mut (&mut check, &mut seen)).unwrap();
        assert!(check.is_clean(), "{}", check.summary());
        let s = out.summary.stats;
        // Each slice: 2 iterations of an A and a B tile (128 x 64 each).
        let ab = 2 * 2 * 2 * 128 * 64 * 2;
        // The partial sums: 128 x 128 FP32, stored by slice 1, loaded by
        // slice 0.
        let partial = 128 * 128 * 4;
        assert_eq!(s.bytes_loaded, ab + partial);
        assert_eq!(s.bytes_stored, partial + 128 * 128 * 2, "partials and C");
        // 2 CTAs x 2 iterations x (128/64 rows x 64/16 k-steps) WGMMAs.
        assert_eq!(s.wgmmas, 2 * 2 * 8);
        assert_eq!(out.flops, p.flops());
        // The order: each consumer of slice 0 loads the partial sums of its
        // rows after the same consumer of slice 1 stored them; C is stored
        // after the last of them lands.
        let t = &seen.0;
        let mut stored: Vec<u64> = t
            .iter()
            .filter(|e| e.1 == 1 && e.3 && e.4)
            .map(|e| e.0)
            .collect();
        let partial_loads: Vec<_> = t
            .iter()
            .filter(|e| e.1 == 0 && !e.3 && e.2 == partial / consumers as u64)
            .collect();
        let mut issued: Vec<u64> = partial_loads.iter().filter(|e| !e.4).map(|e| e.0).collect();
        stored.sort();
        issued.sort();
        assert_eq!(
            (stored.len(), issued.len()),
            (consumers as usize, consumers as usize)
        );
        assert!(
            stored.iter().zip(&issued).all(|(s, l)| s < l),
            "{stages} {consumers}: {t:?}"
        );
        let c_stores: Vec<u64> = t
            .iter()
            .filter(|e| e.1 == 0 && e.3 && !e.4)
            .map(|e| e.0)
            .collect();
        let mut landed: Vec<u64> = partial_loads.iter().filter(|e| e.4).map(|e| e.0).collect();
        landed.sort();
        assert_eq!(c_stores.len(), consumers as usize);
        assert!(
            c_stores.iter().zip(&landed).all(|(c, l)| c > l),
            "each consumer's C after its reduction"
        );
        assert!(t
            .iter()
            .all(|e| !(e.1 == 1 && e.3 && e.2 == 128 * 128 * 2 / consumers as u64)));
    }
}

#[test]
fn split_k_checks_name_the_parameter() {
    let p = two_slices(2, 1);
    for (q, want) in [
        (GemmParams { split_k: 0, ..p }, "1..=16"),
        (GemmParams { split_k: 17, ..p }, "1..=16"),
        (GemmParams { split_k: 3, ..p }, "3 equal slices"),
        (
            GemmParams {
                persistent: true,
                ..p
            },
            "persistent = false",
        ),
        (
            GemmParams {
                cluster_m: 2,
                ..GemmParams { m: 256, ..p }
            },
            "cluster 1x1",
        ),
    ] {
        let e = gemm(&q).unwrap_err().to_string();
        assert!(e.starts_with("split_k: ") && e.contains(want), "{e}");
    }
}

/// Split-K finishes a small grid sooner: 4 K slices of a 128 x 128 tile
/// keep 4 SMs busy instead of 1 (at least 1.5 times as fast, with the
/// reduction), and the same FLOPs are done.
#[test]
fn slices_shorten_a_small_grid() {
    let one = GemmParams {
        stages: 3,
        ..GemmParams::new(128, 128, 4096)
    };
    let four = GemmParams { split_k: 4, ..one };
    let cfg = GpuConfig::h100();
    let a = crate::run::simulate(&cfg, &gemm(&one).unwrap(), &mut ()).unwrap();
    let b = crate::run::simulate(&cfg, &gemm(&four).unwrap(), &mut ()).unwrap();
    assert_eq!(a.flops, b.flops);
    assert!(
        b.summary.cycles * 3 < a.summary.cycles * 2,
        "{} vs {}",
        b.summary.cycles,
        a.summary.cycles
    );
}
