//! The grid's spin locks (`lock.acquire`, `lock.release`): a lock is held
//! by one CTA at a time, taken in an atomic's round trip, and handed on
//! once its release has crossed to the L2.

use simfa_core::{Event, GpuConfig, Instr, Op, SimError, WaitReason};
use simfa_tests::{run, run_observed, Builder, Recorder, Var};

/// Cycles each CTA holds its lock after taking it.
const WORK: u32 = 1000;

/// `ctas` one-WarpGroup CTAs, each takes lock `lock(cta)`, works
/// [`WORK`] cycles, releases it and exits.
fn lockers(ctas: u32, shared: bool) -> simfa_core::Kernel {
    let mut b = Builder::new("lockers", [ctas, 1, 1]);
    let lock = if shared {
        b.c(7)
    } else {
        b.lin(0, &[(1, Var::Cta)], 0, 0)
    };
    b.role("main", 1, 128);
    b.op(Instr::LockAcquire { lock });
    b.op(Instr::Bubble { cycles: WORK });
    b.op(Instr::LockRelease { lock });
    b.finish()
}

/// Per CTA, the cycles it issued its acquire, its bubble and its release.
fn timeline(cfg: &GpuConfig, k: &simfa_core::Kernel) -> Vec<[u64; 3]> {
    let mut rec = Recorder::default();
    run_observed(cfg, k, &mut rec).unwrap();
    let mut out = vec![[0u64; 3]; k.grid[0] as usize];
    for (c, e) in &rec.events {
        if let Event::Issue { who, op } = e {
            let slot = match op {
                Op::LockAcquire { .. } => 0,
                Op::Bubble { .. } => 1,
                Op::LockRelease { .. } => 2,
                _ => continue,
            };
            out[who.cta as usize][slot] = *c;
        }
    }
    out
}

/// Contended, the CTAs hold the lock one after another: each takes it a
/// crossing after the last release and goes on a round trip later; on
/// their own locks they all run at once.
#[test]
fn a_shared_lock_is_held_by_one_cta_at_a_time() {
    let cfg = GpuConfig::h100();
    let rtt = cfg.atomic_round_trip();
    // The crossbar both ways and the hit latency: the 327 cycles
    // docs/kernel-model.md gives for every preset.
    for p in simfa_core::PRESETS {
        let c = GpuConfig::preset(p).unwrap();
        assert_eq!(c.atomic_round_trip(), 327, "{p}");
    }
    let xbar = cfg.l2.xbar_latency as u64;
    let t = timeline(&cfg, &lockers(4, true));
    let mut order: Vec<[u64; 3]> = t.clone();
    order.sort();
    for w in &order {
        assert_eq!(w[1], w[0] + rtt, "{t:?}");
        assert_eq!(w[2], w[1] + WORK as u64, "{t:?}");
    }
    for p in order.windows(2) {
        assert_eq!(p[1][0], p[0][2] + xbar, "{t:?}");
    }
    let apart = timeline(&cfg, &lockers(4, false));
    let first = apart.iter().map(|w| w[0]).min().unwrap();
    let last = apart.iter().map(|w| w[2]).max().unwrap();
    assert!(last - first < rtt + WORK as u64 + 10, "{apart:?}");
    assert!(order[3][2] - order[0][0] >= 4 * (rtt + WORK as u64) + 3 * xbar);
}

/// A lock taken and never released leaves the other CTAs waiting: the
/// run ends in a deadlock that names the lock; a lock index outside the
/// grid's locks is refused.
#[test]
fn a_lock_never_released_is_a_deadlock_and_bad_indices_are_refused() {
    let cfg = GpuConfig::h100();
    let mut b = Builder::new("holder", [2, 1, 1]);
    let lock = b.c(3);
    b.role("main", 1, 128);
    b.op(Instr::LockAcquire { lock });
    b.op(Instr::Bubble { cycles: 10 });
    let err = run(&cfg, &b.finish()).unwrap_err();
    match err {
        SimError::Deadlock { reason, .. } => {
            assert_eq!(reason, WaitReason::Lock { lock: 3 });
        }
        other => panic!("{other}"),
    }
    let mut b = Builder::new("far", [1, 1, 1]);
    let lock = b.c(simfa_core::kernel::MAX_LOCKS as i64);
    b.role("main", 1, 128);
    b.op(Instr::LockAcquire { lock });
    let err = run(&cfg, &b.finish()).unwrap_err();
    assert!(
        matches!(err, SimError::IndexOutOfRange { what: "lock", .. }),
        "{err}"
    );
}
