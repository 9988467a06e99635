//! The core's `Walk` resolves a role's compact program into the ops the
//! simulator issues: a kernel whose roles are streamed from walks of its
//! own programs runs to the same summary and digest as the kernel itself.

use std::collections::BTreeMap;

use simfa_core::isa::{EvalCtx, MAX_LOOP_DEPTH};
use simfa_core::source::SourceError;
use simfa_core::{GpuConfig, Kernel, Op, StreamSource, Walk, WalkError};
use simfa_std::gen::{gemm, GemmParams};
use simfa_std::run::{simulate, simulate_from, Snapshots};

/// Streams each WarpGroup's ops from a walk of `program`'s roles; the
/// grid is `[gx, gy, 1]` in linear launch order.
struct Walked<'k> {
    program: &'k Kernel,
    walks: BTreeMap<(u32, u8, u8), Walk>,
}

impl StreamSource for Walked<'_> {
    fn pull(&mut self, cta: u32, role: u8, wg: u8, _pos: u64) -> Result<Option<Op>, SourceError> {
        let gx = self.program.grid[0];
        let ctx = EvalCtx {
            cta,
            c: [cta % gx, cta / gx, 0],
            wg,
            l: [0; MAX_LOOP_DEPTH],
        };
        let k = self.program;
        let w = match self.walks.entry((cta, role, wg)) {
            std::collections::btree_map::Entry::Occupied(o) => o.into_mut(),
            std::collections::btree_map::Entry::Vacant(v) => {
                v.insert(Walk::new(k, role, ctx).map_err(|_| SourceError)?)
            }
        };
        w.next_op(k).map_err(|_| SourceError)
    }
}

/// `k` with every role streamed.
fn streamed(k: &Kernel) -> Kernel {
    let mut s = k.clone();
    for r in s.roles.iter_mut() {
        r.start = 0;
        r.len = 0;
        r.stream = true;
    }
    s.code.clear();
    s
}

#[test]
fn a_walked_program_runs_as_the_program() {
    let cfg = GpuConfig::h100();
    let shapes = [
        // The paper's kernel: a 2-D grid, one WarpGroup.
        GemmParams::new(512, 256, 256),
        // Persistent, warp-specialised, grouped with a partial last group:
        // nested loops and 0-or-1 trip guards.
        GemmParams {
            block_n: 128,
            stages: 3,
            consumers: 2,
            persistent: true,
            ctas: 5,
            group_m: 2,
            ..GemmParams::new(640, 384, 320)
        },
    ];
    for p in shapes {
        let k = gemm(&p).unwrap();
        let whole = simulate(&cfg, &k, &mut ()).unwrap();
        let s = streamed(&k);
        let src = Walked {
            program: &k,
            walks: BTreeMap::new(),
        };
        let walked =
            simulate_from(&cfg, &s, src, &mut (), |_, _, _| {}, &Snapshots::default()).unwrap();
        assert_eq!(walked.summary.stats, whole.summary.stats);
        assert_eq!(walked.summary.digest, whole.summary.digest);
        assert_eq!(walked.summary.cycles, whole.summary.cycles);
    }
}

#[test]
fn a_walk_ends_after_its_exit_and_names_a_bad_role() {
    let k = gemm(&GemmParams::new(128, 128, 128)).unwrap();
    let ctx = EvalCtx::default();
    assert_eq!(Walk::new(&k, 9, ctx).unwrap_err(), WalkError::Role);
    let mut w = Walk::new(&k, 0, ctx).unwrap();
    let mut ops = Vec::new();
    while let Some(op) = w.next_op(&k).unwrap() {
        ops.push(op);
    }
    assert_eq!(ops.last(), Some(&Op::Exit));
    // Two K iterations of loads, WGMMAs and waits, then the epilogue.
    let wgmmas = ops.iter().filter(|o| matches!(o, Op::Wgmma { .. })).count();
    assert_eq!(wgmmas, 2 * 2 * 4);
    assert_eq!(w.next_op(&k).unwrap(), None);
}
