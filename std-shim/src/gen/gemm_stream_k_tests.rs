//! Stream-K: the schedule's segments, a hand-derived run of two CTAs that
//! share one tile's K (exact traffic, the fix-up after the partial sums
//! land), the walk of every CTA's programs, and the parameter checks.

use super::super::split_tests::{Transfer, Transfers};
use super::*;
use crate::check::ConsistencyChecker;
use crate::gen::{gemm, gemm_source, Epilogue};
use crate::run::{simulate_from, Snapshots};
use simfa_core::GpuConfig;

/// A persistent warp-specialised stream-K GEMM of `ctas` CTAs.
fn sk(m: u32, n: u32, k: u32, ctas: u32, consumers: u32) -> GemmParams {
    GemmParams {
        block_n: 128,
        stages: 2,
        consumers,
        persistent: true,
        ctas,
        epilogue: Epilogue::Registers,
        stream_k: true,
        ..GemmParams::new(m, n, k)
    }
}

#[test]
fn the_split_follows_the_waves() {
    // 4 tiles on 132 CTAs: all stream-K, 8 iterations per unit at least.
    let p = sk(256, 256, 1024, 132, 2);
    assert_eq!(p.tiles(), 4);
    assert_eq!(p.stream_k_split(), (0, 8));
    assert_eq!(p.grid_ctas(), 8);
    // 10 tiles on 4 CTAs: 1 data-parallel wave, 6 tiles stream-K.
    let q = sk(640, 256, 1024, 4, 2);
    assert_eq!(q.tiles(), 10);
    assert_eq!(q.stream_k_split(), (4, 4));
    assert_eq!(q.grid_ctas(), 4);
    // Whole waves: all data-parallel.
    let r = sk(512, 256, 1024, 4, 2);
    assert_eq!(r.stream_k_split(), (8, 0));
    for c in 0..4 {
        let s = segments(&r, c);
        let tiles: Vec<u64> = s.iter().map(|s| s.tile).collect();
        assert_eq!(tiles, [c as u64, c as u64 + 4]);
        assert!(s
            .iter()
            .all(|s| s.end == SegmentEnd::Store && s.k_len == 16));
    }
}

/// Checks `p`'s schedule: every CTA has work, every stream-K iteration is
/// computed once, every tile stored once, each partial fixed up once, the
/// split within the grid; a message names what is wrong.
fn check_schedule(p: &GemmParams) -> Result<(), String> {
    let ipt = p.k_iters();
    let (dp, units) = p.stream_k_split();
    let grid = p.grid_ctas();
    if units > p.ctas as u64 || grid > p.ctas as u64 || dp > p.tiles() {
        return Err(format!("split ({dp}, {units}) of grid {grid}"));
    }
    let mut done = vec![vec![0u32; ipt as usize]; p.tiles() as usize];
    let mut stores = vec![0u32; p.tiles() as usize];
    let mut partials = Vec::new();
    let mut fixed = Vec::new();
    for c in 0..grid as u32 {
        let s = segments(p, c);
        if s.is_empty() {
            return Err(format!("CTA {c} has no work"));
        }
        for (j, seg) in s.iter().enumerate() {
            for i in seg.k_begin..seg.k_begin + seg.k_len {
                done[seg.tile as usize][i as usize] += 1;
            }
            match &seg.end {
                SegmentEnd::Store => stores[seg.tile as usize] += 1,
                SegmentEnd::Partial if j == 0 => partials.push((seg.tile, c)),
                SegmentEnd::Partial => return Err(format!("CTA {c}: partial segment {j}")),
                SegmentEnd::Fixup { from } => {
                    stores[seg.tile as usize] += 1;
                    fixed.extend(from.clone().map(|f| (seg.tile, f)));
                }
            }
        }
    }
    if !done.iter().flatten().all(|&d| d == 1) {
        return Err("an iteration computed other than once".into());
    }
    if !stores.iter().all(|&s| s == 1) {
        return Err("a tile stored other than once".into());
    }
    if partials != fixed {
        return Err(format!("partials {partials:?} fixed up as {fixed:?}"));
    }
    Ok(())
}

#[test]
fn every_iteration_is_computed_once_and_every_tile_stored_once() {
    for (m, n, k, ctas) in [
        (640, 256, 1024, 4),
        (256, 256, 1024, 132),
        (384, 384, 640, 7),
    ] {
        let p = sk(m, n, k, ctas, 2);
        check_schedule(&p).unwrap_or_else(|e| panic!("{m}x{n}x{k}: {e}"));
    }
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(64))]

    /// Any shape, grid and raster group: the schedule covers the work
    /// exactly, and every CTA's first segment program builds.
    #[test]
    fn any_schedule_covers_the_work(
        m in 1u32..1200,
        n8 in 1u32..160,
        k8 in 1u32..600,
        ctas in 1u32..140,
        group_m in 1u32..10,
        bn in proptest::sample::select(vec![64u32, 128, 256]),
    ) {
        let p = GemmParams {
            block_n: bn,
            group_m,
            ..sk(m, n8 * 8, k8 * 8, ctas, 2)
        };
        proptest::prop_assume!(p.validate().is_ok());
        if let Err(e) = check_schedule(&p) {
            return Err(proptest::test_runner::TestCaseError::fail(e));
        }
        gemm(&p).map_err(|e| proptest::test_runner::TestCaseError::fail(e.to_string()))?;
        for c in 0..p.grid_ctas() as u32 {
            let s = segments(&p, c);
            for j in 0..s.len() {
                let offset = s[..j].iter().map(|s| s.k_len as u64).sum();
                segment_program(&p, c, &s, j, offset)
                    .map_err(|e| proptest::test_runner::TestCaseError::fail(e.to_string()))?;
            }
        }
    }
}

#[test]
fn tiles_follow_the_grouped_order() {
    // 3 row blocks in groups of 2, 2 columns: the first group column by
    // column, then the last row alone.
    let p = GemmParams {
        group_m: 2,
        ..sk(384, 256, 64, 4, 2)
    };
    let order: Vec<_> = (0..p.tiles()).map(|t| tile_coords(&p, t)).collect();
    assert_eq!(order, [(0, 0), (1, 0), (0, 1), (1, 1), (2, 0), (2, 1)]);
}

#[test]
fn two_ctas_share_a_tiles_k() {
    // One 128 x 128 tile, K = 1024: 16 iterations, 8 per CTA.
    for consumers in [1, 2] {
        let p = sk(128, 128, 1024, 2, consumers);
        assert_eq!(p.grid_ctas(), 2);
        let head = segments(&p, 0);
        let tail = segments(&p, 1);
        assert_eq!(
            head,
            [Segment {
                tile: 0,
                k_begin: 0,
                k_len: 8,
                end: SegmentEnd::Fixup { from: 1..2 }
            }]
        );
        assert_eq!(
            tail,
            [Segment {
                tile: 0,
                k_begin: 8,
                k_len: 8,
                end: SegmentEnd::Partial
            }]
        );
        let k = gemm(&p).unwrap();
        assert!(k.roles.iter().all(|r| r.stream));
        let cfg = GpuConfig::h100();
        let mut check = ConsistencyChecker::new(&cfg);
        let mut seen = Transfers::default();
        let out = simulate_from(
            &cfg,
            &k,
            gemm_source(&p),
            &mut (&mut check, &mut seen),
            |_, _, _| {},
            &Snapshots::default(),
        )
        .unwrap();
        assert!(check.is_clean(), "{}", check.summary());
        let s = out.summary.stats;
        // 16 iterations of an A and a B tile (128 x 64 and 64 x 128).
        let ab = 16 * 2 * 128 * 64 * 2;
        // The partial sums: 128 x 128 FP32, stored by CTA 1, loaded by 0.
        let partial = 128 * 128 * 4;
        assert_eq!(s.bytes_loaded, ab + partial);
        assert_eq!(s.bytes_stored, partial + 128 * 128 * 2, "partials and C");
        // 16 iterations x (128/64 rows x 64/16 k-steps) WGMMAs.
        assert_eq!(s.wgmmas, 16 * 8);
        assert_eq!(out.flops, p.flops());
        // Each consumer of CTA 0 loads the partial sums of its rows after
        // the same consumer of CTA 1 stored them (their counters pair them in
        // order), and stores C after its load lands.
        let t = &seen.0;
        let rows = partial / consumers as u64;
        let times = |f: &dyn Fn(&Transfer) -> bool| {
            let mut v: Vec<u64> = t.iter().filter(|e| f(e)).map(|e| e.0).collect();
            v.sort();
            v
        };
        let stored = times(&|e| e.1 == 1 && e.3 && e.4);
        let issued = times(&|e| e.1 == 0 && !e.3 && !e.4 && e.2 == rows);
        let landed = times(&|e| e.1 == 0 && !e.3 && e.4 && e.2 == rows);
        let c_stores = times(&|e| e.1 == 0 && e.3 && !e.4);
        let n = consumers as usize;
        assert_eq!((stored.len(), issued.len(), c_stores.len()), (n, n, n));
        assert!(
            stored.iter().zip(&issued).all(|(s, l)| s < l),
            "{consumers}: {t:?}"
        );
        assert!(
            c_stores.iter().zip(&landed).all(|(c, l)| c > l),
            "C after the reduction"
        );
    }
}

#[test]
fn a_resumed_run_matches() {
    // The source re-walks a WarpGroup's stream when a run resumes.
    let p = sk(640, 256, 1024, 4, 2);
    let k = gemm(&p).unwrap();
    let cfg = GpuConfig::h100();
    let whole = simulate_from(
        &cfg,
        &k,
        gemm_source(&p),
        &mut (),
        |_, _, _| {},
        &Snapshots::default(),
    )
    .unwrap();
    let dir = std::env::temp_dir().join(format!("simfa-sk-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let snap = dir.join("s.snap");
    let at = whole.summary.cycles / 2;
    let save = Snapshots {
        save_at: Some((at, snap.clone())),
        ..Snapshots::default()
    };
    simulate_from(&cfg, &k, gemm_source(&p), &mut (), |_, _, _| {}, &save).unwrap();
    let resume = Snapshots {
        resume: Some(snap),
        ..Snapshots::default()
    };
    let again = simulate_from(&cfg, &k, gemm_source(&p), &mut (), |_, _, _| {}, &resume).unwrap();
    std::fs::remove_dir_all(&dir).ok();
    assert_eq!(again.summary, whole.summary);
}

#[test]
fn stream_k_checks_name_the_parameter() {
    let p = sk(256, 256, 1024, 132, 2);
    for (q, want) in [
        (
            GemmParams {
                persistent: false,
                ..p
            },
            "persistent",
        ),
        (
            GemmParams {
                stages: 1,
                consumers: 1,
                ..p
            },
            "stages >= 2",
        ),
        (
            GemmParams {
                cluster_m: 2,
                group_m: 2,
                ..p
            },
            "cluster 1x1",
        ),
        (
            GemmParams {
                ctas: 1000,
                m: 32768,
                ..p
            },
            "counters",
        ),
    ] {
        let e = q.validate().unwrap_err().to_string();
        assert!(e.contains("stream_k") && e.contains(want), "{e}");
    }
}

#[test]
fn a_tile_shared_by_forty_ctas_is_fixed_up_in_two_loops() {
    // One 128 x 128 tile of 320 iterations on 40 CTAs: CTA 0 adds the
    // partial sums of the 39 others, whatever their number in a constant
    // count of expressions.
    let p = sk(128, 128, 64 * 320, 40, 1);
    assert_eq!(p.stream_k_split(), (0, 40));
    assert_eq!(segments(&p, 0)[0].end, SegmentEnd::Fixup { from: 1..40 });
    let k = gemm(&p).unwrap();
    let cfg = GpuConfig::h100();
    let mut check = ConsistencyChecker::new(&cfg);
    let out = simulate_from(
        &cfg,
        &k,
        gemm_source(&p),
        &mut check,
        |_, _, _| {},
        &Snapshots::default(),
    )
    .unwrap();
    assert!(check.is_clean(), "{}", check.summary());
    let s = out.summary.stats;
    let partial = 128 * 128 * 4;
    assert_eq!(s.bytes_loaded, 320 * 2 * 128 * 64 * 2 + 39 * partial);
    assert_eq!(s.bytes_stored, 39 * partial + 128 * 128 * 2);
}

#[test]
fn tiles_of_few_iterations_stay_data_parallel() {
    // 128 tiles of one iteration: a unit per tile, not 16 units of 8.
    let p = sk(16384, 128, 64, 132, 2);
    assert_eq!(p.stream_k_split(), (0, 128));
    assert!((0..128).all(|c| segments(&p, c)
        == [Segment {
            tile: c as u64,
            k_begin: 0,
            k_len: 1,
            end: SegmentEnd::Store
        }]));
}
