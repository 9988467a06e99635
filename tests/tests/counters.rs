//! The grid's counters (`counter.add`, `counter.wait`): a CTA that waits
//! for a count goes on a poll's round trip after the add that reaches it
//! has crossed to the L2.

use simfa_core::{Event, GpuConfig, Instr, Op, SimError, WaitReason};
use simfa_tests::{run, run_observed, Builder, Recorder, Var};

/// Cycles between one adder's add and the next one's.
const WORK: u32 = 1000;

/// CTA 0 waits until counter 5 reaches `count`, then works a cycle; CTA
/// `c` of the `adders` others works `WORK * c` cycles, then adds `amount`
/// to the counter `adds` times, back to back.
fn signal(adders: u32, adds: u16, amount: i64, count: i64) -> simfa_core::Kernel {
    let n = adders as i64 + 1;
    let mut b = Builder::new("signal", [adders + 1, 1, 1]);
    let counter = b.c(5);
    let amount = b.c(amount);
    let count = b.c(count);
    // 1 for CTA 0 and 0 for the others, and the other way round.
    let waiter = b.lin(n - 1, &[(-1, Var::Cta)], n - 1, 0);
    let adder = b.lin(n - 2, &[(1, Var::Cta)], n - 1, 0);
    let delay = b.lin(0, &[(1, Var::Cta)], 0, 0);
    let repeat = b.c(adds as i64);
    b.role("main", 1, 128);
    b.begin_loop(waiter);
    b.op(Instr::CounterWait { counter, count });
    b.op(Instr::Bubble { cycles: 1 });
    b.end_loop();
    b.begin_loop(delay);
    b.op(Instr::Bubble { cycles: WORK });
    b.end_loop();
    b.begin_loop(adder);
    b.begin_loop(repeat);
    b.op(Instr::CounterAdd { counter, amount });
    b.end_loop();
    b.end_loop();
    b.finish()
}

/// The cycles CTA 0 issued its wait (the try that passed) and its bubble,
/// and those the others issued their adds.
fn timeline(cfg: &GpuConfig, k: &simfa_core::Kernel) -> (u64, u64, Vec<u64>) {
    let mut rec = Recorder::default();
    run_observed(cfg, k, &mut rec).unwrap();
    let (mut wait, mut after, mut adds) = (None, None, vec![]);
    for (c, e) in &rec.events {
        if let Event::Issue { who, op } = e {
            match (who.cta, op) {
                (0, Op::CounterWait { .. }) => wait = wait.or(Some(*c)),
                (0, Op::Bubble { .. }) => after = Some(*c),
                (_, Op::CounterAdd { .. }) => adds.push(*c),
                _ => {}
            }
        }
    }
    (wait.unwrap(), after.unwrap(), adds)
}

/// The waiter goes on a poll's round trip after the add that reaches its
/// count has crossed to the L2, whether one add or the last of three
/// reaches it; a count already reached costs one poll.
#[test]
fn a_waiter_goes_on_a_round_trip_after_the_add_that_reaches_its_count_lands() {
    let cfg = GpuConfig::h100();
    let (rtt, xbar) = (cfg.atomic_round_trip(), cfg.l2.xbar_latency as u64);
    // A stalled wait is issued (and its poll sent) when the add lands.
    let (wait, after, adds) = timeline(&cfg, &signal(1, 1, 1, 1));
    assert_eq!(adds.len(), 1);
    assert_eq!(wait, adds[0] + xbar, "{adds:?}");
    assert_eq!(after, wait + rtt, "{adds:?}");
    let (_, after, adds) = timeline(&cfg, &signal(3, 1, 1, 3));
    assert_eq!(adds.len(), 3);
    let last = *adds.iter().max().unwrap();
    assert!(last >= 3 * WORK as u64, "{adds:?}");
    assert_eq!(after, last + xbar + rtt, "{adds:?}");
    // Amounts count: one add of 3 reaches a count of 3.
    let (_, after, adds) = timeline(&cfg, &signal(1, 1, 3, 3));
    assert_eq!(after, adds[0] + xbar + rtt);
    // A count of 0 is reached at once.
    let (wait, after, _) = timeline(&cfg, &signal(1, 1, 1, 0));
    assert_eq!(after, wait + rtt);
}

/// Two adds issued back to back land together, when the first would: the
/// waiter for both goes on as early as for one.
#[test]
fn an_add_issued_while_another_crosses_lands_with_it() {
    let cfg = GpuConfig::h100();
    let (rtt, xbar) = (cfg.atomic_round_trip(), cfg.l2.xbar_latency as u64);
    let (_, after, adds) = timeline(&cfg, &signal(1, 2, 1, 2));
    assert_eq!(adds.len(), 2);
    assert!(adds[1] - adds[0] < xbar, "{adds:?}");
    assert_eq!(after, adds[0] + xbar + rtt, "{adds:?}");
}

/// A count never reached leaves its waiter stalled: the run ends in a
/// deadlock that names the counter; an index outside the grid's counters
/// is refused, and a negative amount adds nothing.
#[test]
fn a_count_never_reached_is_a_deadlock_and_bad_indices_are_refused() {
    let cfg = GpuConfig::h100();
    for k in [signal(2, 1, 1, 3), signal(1, 1, -4, 1)] {
        match run(&cfg, &k).unwrap_err() {
            SimError::Deadlock { reason, .. } => {
                assert_eq!(reason, WaitReason::Counter { counter: 5 });
                assert_eq!(reason.to_string(), "counter 5 to count up");
            }
            other => panic!("{other}"),
        }
    }
    for add in [true, false] {
        let mut b = Builder::new("far", [1, 1, 1]);
        let counter = b.c(simfa_core::kernel::MAX_COUNTERS as i64);
        let n = b.c(1);
        b.role("main", 1, 128);
        b.op(if add {
            Instr::CounterAdd { counter, amount: n }
        } else {
            Instr::CounterWait { counter, count: n }
        });
        let err = run(&cfg, &b.finish()).unwrap_err();
        assert!(
            matches!(
                err,
                SimError::IndexOutOfRange {
                    what: "counter",
                    ..
                }
            ),
            "{err}"
        );
    }
}
