//! Tests of [`super`] (wheel.rs).

use super::*;
use ::std::vec;
use ::std::vec::Vec;
use proptest::prelude::*;

fn filler() -> Entry<u32> {
    Entry {
        cycle: 0,
        class: 0,
        seq: 0,
        event: 0,
    }
}

fn wheel_buf(capacity: usize, horizon_log2: u32) -> Vec<u8> {
    let mut l = Layout::new();
    TimingWheel::<u32>::layout(capacity, horizon_log2, &mut l).unwrap();
    vec![0u8; l.bytes()]
}

/// A tiny deterministic generator for the non-proptest tests.
struct XorShift(u64);

impl XorShift {
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

#[derive(Clone, Copy, Debug)]
enum Op {
    /// Push at `now + d`.
    Near(u64, u8),
    /// Push at `now + d` with `d` around or past the horizon.
    Far(u64, u8),
    /// Push at `now - d` (possibly before events already popped).
    Past(u64, u8),
    /// Advance `now` by `d`.
    Tick(u64),
    /// `pop_due(now)`.
    PopDue,
    /// `pop()`, then `now = max(now, popped cycle)`.
    Pop,
}

fn op(horizon: u64) -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (0..48u64, 0..6u8).prop_map(|(d, c)| Op::Near(d, c)),
        1 => (horizon.saturating_sub(2)..horizon * 4 + 2, 0..6u8).prop_map(|(d, c)| Op::Far(d, c)),
        1 => (0..24u64, 0..6u8).prop_map(|(d, c)| Op::Past(d, c)),
        2 => (0..20u64).prop_map(Op::Tick),
        3 => Just(Op::PopDue),
        3 => Just(Op::Pop),
    ]
}

#[test]
fn check_finds_damaged_links_and_counts() {
    let mut buf = wheel_buf(8, 4);
    let mut a = Arena::new(&mut buf);
    let mut w = TimingWheel::<u32>::new_in(&mut a, 8, 4, Capacity::EventQueue).unwrap();
    for (i, c) in [3u64, 3, 5, 40].iter().enumerate() {
        w.push(*c, 0, i as u32).unwrap();
    }
    assert_eq!(w.check(), Ok(()));
    let head = w.fifos[3].head[0];
    w.fifos[3].head[0] = 99;
    assert_eq!(w.check(), Err("event list"));
    w.fifos[3].head[0] = head;
    w.wheel_len += 1;
    assert_eq!(w.check(), Err("event counts"));
    w.wheel_len -= 1;
    let next = w.nodes[head as usize].next;
    w.nodes[head as usize].next = head;
    assert_eq!(w.check(), Err("event list"));
    w.nodes[head as usize].next = next;
    w.bits[0] ^= 1 << 7;
    assert_eq!(w.check(), Err("event slot bits"));
    w.bits[0] ^= 1 << 7;
    assert_eq!(w.check(), Ok(()));
}

/// Drives both queues with `ops`; fails on the first difference.
fn compare(
    capacity: usize,
    horizon_log2: u32,
    start: u64,
    ops: &[Op],
    allow_past: bool,
) -> Result<(), TestCaseError> {
    let mut buf = wheel_buf(capacity, horizon_log2);
    let mut a = Arena::new(&mut buf);
    let mut w =
        TimingWheel::<u32>::new_in(&mut a, capacity, horizon_log2, Capacity::EventQueue).unwrap();
    let mut store = vec![filler(); capacity];
    let mut q = EventQueue::new(&mut store);
    let mut now = start;
    let mut popped_max = start;
    for (i, &o) in ops.iter().enumerate() {
        let ev = i as u32;
        let push = |cycle: u64, class: u8, w: &mut TimingWheel<u32>, q: &mut EventQueue<u32>| {
            let a = w.push(cycle, class, ev);
            let b = q.push(cycle, class, ev);
            prop_assert_eq!(a, b);
            Ok::<(), TestCaseError>(())
        };
        match o {
            Op::Near(d, c) | Op::Far(d, c) => push(now.saturating_add(d), c, &mut w, &mut q)?,
            Op::Past(d, c) => {
                let cycle = now.saturating_sub(d);
                if allow_past || cycle >= popped_max {
                    push(cycle, c, &mut w, &mut q)?;
                }
            }
            Op::Tick(d) => now = now.saturating_add(d),
            Op::PopDue => {
                let a = w.pop_due(now);
                prop_assert_eq!(a, q.pop_due(now));
                if let Some(e) = a {
                    popped_max = popped_max.max(e.cycle);
                }
            }
            Op::Pop => {
                prop_assert_eq!(w.peek(), q.peek().copied());
                let a = w.pop();
                prop_assert_eq!(a, q.pop());
                if let Some(e) = a {
                    now = now.max(e.cycle);
                    popped_max = popped_max.max(e.cycle);
                }
            }
        }
        prop_assert_eq!(w.next_cycle(), q.next_cycle());
        prop_assert_eq!(w.len(), q.len());
        prop_assert_eq!(w.next_seq(), q.next_seq());
        // Every reachable state passes the restore check.
        prop_assert_eq!(w.check(), Ok(()));
    }
    // Drain: the rest must agree too.
    loop {
        let a = w.pop();
        prop_assert_eq!(a, q.pop());
        prop_assert_eq!(w.next_cycle(), q.next_cycle());
        if a.is_none() {
            break;
        }
    }
    prop_assert!(w.is_empty());
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: ::std::env::var("PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(512),
        ..ProptestConfig::default()
    })]

    /// Same pops, entries and `next_cycle` as `EventQueue`, never
    /// pushing before an already popped event (the memory system's use).
    #[test]
    fn matches_event_queue(
        (h, ops) in (0u32..8).prop_flat_map(|h| (Just(h), proptest::collection::vec(op(1 << h), 0..400))),
        capacity in 0usize..80,
        start in prop_oneof![Just(0u64), 0..100_000u64, Just(u64::MAX - 5_000)],
    ) {
        compare(capacity, h, start, &ops, false)?;
    }

    /// The same with pushes into the past.
    #[test]
    fn matches_event_queue_with_past_pushes(
        (h, ops) in (0u32..8).prop_flat_map(|h| (Just(h), proptest::collection::vec(op(1 << h), 0..400))),
        capacity in 1usize..80,
    ) {
        compare(capacity, h, 1_000, &ops, true)?;
    }
}

#[test]
fn ties_are_fifo_and_class_orders_within_a_cycle() {
    let mut buf = wheel_buf(8, 4);
    let mut a = Arena::new(&mut buf);
    let mut q = TimingWheel::<u32>::new_in(&mut a, 8, 4, Capacity::EventQueue).unwrap();
    q.push(5, 1, 1).unwrap();
    q.push(5, 0, 2).unwrap();
    q.push(5, 1, 3).unwrap();
    q.push(4, 9, 4).unwrap();
    q.push(100, 0, 5).unwrap(); // beyond the 16-cycle horizon
    q.push(5, 7, 6).unwrap(); // class beyond CLASSES
    let order: [u32; 6] = core::array::from_fn(|_| q.pop().unwrap().event);
    assert_eq!(order, [4, 2, 1, 3, 6, 5]);
    assert!(q.pop().is_none());
}

/// An overflow event and directly pushed events of the same cycle and
/// class interleave by sequence number.
#[test]
fn overflow_and_wheel_events_of_one_cycle_keep_fifo_order() {
    let mut buf = wheel_buf(16, 4);
    let mut a = Arena::new(&mut buf);
    let mut q = TimingWheel::<u32>::new_in(&mut a, 16, 4, Capacity::EventQueue).unwrap();
    q.push(0, 0, 0).unwrap();
    q.push(40, 1, 1).unwrap(); // overflow (window is [0, 16))
    q.push(40, 0, 2).unwrap(); // overflow
    q.push(30, 0, 3).unwrap(); // overflow
    assert_eq!(q.overflow_len(), 3);
    assert_eq!(q.pop().unwrap().event, 0);
    assert_eq!(q.pop().unwrap().event, 3); // base -> 30: 40 is in the window
    q.push(40, 0, 4).unwrap(); // direct, after 2 in sequence
    q.push(40, 1, 5).unwrap(); // direct, after 1
    q.push(31, 1, 6).unwrap();
    assert_eq!(q.next_cycle(), Some(31));
    let got: Vec<(u64, u8, u64, u32)> = core::iter::from_fn(|| q.pop())
        .map(|e| (e.cycle, e.class, e.seq, e.event))
        .collect();
    assert_eq!(
        got,
        [
            (31, 1, 6, 6),
            (40, 0, 2, 2),
            (40, 0, 4, 4),
            (40, 1, 1, 1),
            (40, 1, 5, 5)
        ]
    );
}

#[test]
fn past_events_come_first_with_their_own_cycle() {
    let mut buf = wheel_buf(8, 4);
    let mut a = Arena::new(&mut buf);
    let mut q = TimingWheel::<u32>::new_in(&mut a, 8, 4, Capacity::EventQueue).unwrap();
    q.push(100, 0, 1).unwrap();
    q.push(105, 0, 2).unwrap();
    assert_eq!(q.pop().unwrap().cycle, 100);
    q.push(50, 1, 3).unwrap();
    q.push(50, 0, 4).unwrap();
    q.push(100, 0, 5).unwrap();
    assert_eq!(q.next_cycle(), Some(50));
    let got: Vec<(u64, u32)> = core::iter::from_fn(|| q.pop())
        .map(|e| (e.cycle, e.event))
        .collect();
    assert_eq!(got, [(50, 4), (50, 3), (100, 5), (105, 2)]);
}

#[test]
fn full_wheel_hands_the_event_back_and_recovers() {
    for h in [0, 4, 12] {
        let cap = 40;
        let mut buf = wheel_buf(cap, h);
        let mut a = Arena::new(&mut buf);
        let mut q = TimingWheel::<u32>::new_in(&mut a, cap, h, Capacity::EventQueue).unwrap();
        assert_eq!(q.capacity(), cap);
        // Half in the window, half far beyond it, mixed classes.
        for i in 0..cap as u32 {
            let cycle = if i % 2 == 0 {
                1 + i as u64 % 7
            } else {
                1 << 30
            };
            q.push(cycle, (i % 5) as u8, i).unwrap();
        }
        assert_eq!(q.len(), cap);
        assert_eq!(q.push(0, 0, 999), Err(999));
        assert_eq!(q.push(1 << 40, 3, 998), Err(998));
        assert_eq!(q.next_seq(), cap as u64, "rejected pushes take no number");
        let first = q.pop().unwrap();
        assert_eq!(first.cycle, 1);
        q.push(2, 0, 997).unwrap();
        assert_eq!(q.push(2, 0, 996), Err(996));
        let mut n = 0;
        let mut last = (0, 0, 0);
        while let Some(e) = q.pop() {
            assert!((e.cycle, e.class, e.seq) > last);
            last = (e.cycle, e.class, e.seq);
            n += 1;
        }
        assert_eq!(n, cap);
        // Everything went back to the free list.
        for i in 0..cap as u32 {
            q.push(i as u64, 0, i).unwrap();
        }
        assert_eq!(q.push(0, 0, 1), Err(1));
    }
}

#[test]
fn zero_capacity_and_bad_horizon() {
    let mut buf = wheel_buf(0, 3);
    let mut a = Arena::new(&mut buf);
    let mut q = TimingWheel::<u32>::new_in(&mut a, 0, 3, Capacity::EventQueue).unwrap();
    assert_eq!(q.push(1, 0, 5), Err(5));
    assert_eq!(q.pop(), None);
    assert_eq!(q.next_cycle(), None);
    let mut l = Layout::new();
    assert!(matches!(
        TimingWheel::<u32>::layout(4, MAX_HORIZON_LOG2 + 1, &mut l),
        Err(BuildError::Config(ConfigError {
            field: "horizon_log2",
            ..
        }))
    ));
    let mut small = [0u8; 16];
    let mut a = Arena::new(&mut small);
    assert!(matches!(
        TimingWheel::<u32>::new_in(&mut a, 100, 4, Capacity::MemoryPort),
        Err(BuildError::ArenaTooSmall {
            table: Capacity::MemoryPort,
            ..
        })
    ));
}

#[test]
fn layout_is_exact_for_any_start_alignment() {
    let mut l = Layout::new();
    TimingWheel::<u64>::layout(100, 7, &mut l).unwrap();
    let mut buf = vec![0u8; l.bytes() + 16];
    for start in 0..8 {
        let mut a = Arena::new(&mut buf[start..start + l.bytes()]);
        TimingWheel::<u64>::new_in(&mut a, 100, 7, Capacity::EventQueue).unwrap();
    }
}

/// Horizon of 16 cycles against latencies up to 200: most events go
/// through the overflow heap and share cycles with direct pushes.
#[test]
fn small_horizon_stress() {
    for (seed, h) in [(1u64, 4u32), (7, 4), (99, 1), (1234, 6), (5, 13), (6, 7)] {
        let mut rng = XorShift(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
        let mut ops = Vec::new();
        for _ in 0..60_000 {
            ops.push(match rng.below(10) {
                0..=3 => Op::Near(rng.below(24), rng.below(3) as u8),
                4..=5 => Op::Far(rng.below(12 << h), rng.below(2) as u8),
                6 => Op::Tick(rng.below(8)),
                7..=8 => Op::PopDue,
                _ => Op::Pop,
            });
        }
        compare(512, h, 0, &ops, false).unwrap();
    }
}

/// The two queues' push and pop, for one benchmark loop.
trait Queue {
    fn put(&mut self, cycle: u64, class: u8, ev: u32);
    fn take(&mut self) -> (u64, u32);
}

impl Queue for TimingWheel<'_, u32> {
    fn put(&mut self, cycle: u64, class: u8, ev: u32) {
        let _ = self.push(cycle, class, ev);
    }
    fn take(&mut self) -> (u64, u32) {
        let e = self.pop().unwrap();
        (e.cycle, e.event)
    }
}

impl Queue for EventQueue<'_, u32> {
    fn put(&mut self, cycle: u64, class: u8, ev: u32) {
        let _ = self.push(cycle, class, ev);
    }
    fn take(&mut self) -> (u64, u32) {
        let e = self.pop().unwrap();
        (e.cycle, e.event)
    }
}

/// Steady state: pop the earliest event, push one at its cycle plus a
/// latency (`far` per mille beyond 4096 cycles). Returns ns per
/// push+pop pair and a checksum.
fn steady(q: &mut impl Queue, n: usize, in_flight: usize, far: u64) -> (f64, u64) {
    let mut rng = XorShift(0x1234_5678);
    for i in 0..in_flight {
        q.put(latency(&mut rng, far), (i & 1) as u8, i as u32);
    }
    let t = ::std::time::Instant::now();
    let mut sum = 0u64;
    for i in 0..n {
        let (cycle, ev) = q.take();
        sum = sum.wrapping_add(cycle ^ ev as u64);
        q.put(cycle + latency(&mut rng, far), (i & 1) as u8, ev);
    }
    let ns = t.elapsed().as_nanos() as f64 / n as f64;
    (ns, ::std::hint::black_box(sum))
}

fn bench_wheel(n: usize, in_flight: usize, far: u64) -> (f64, u64) {
    let mut buf = wheel_buf(in_flight, 12);
    let mut a = Arena::new(&mut buf);
    let mut q = TimingWheel::<u32>::new_in(&mut a, in_flight, 12, Capacity::EventQueue).unwrap();
    steady(&mut q, n, in_flight, far)
}

fn bench_heap(n: usize, in_flight: usize, far: u64) -> (f64, u64) {
    let mut store = vec![filler(); in_flight];
    steady(&mut EventQueue::new(&mut store), n, in_flight, far)
}

/// L2-like latencies 100..=900 cycles; `far` per mille 4096..=20000.
fn latency(rng: &mut XorShift, far: u64) -> u64 {
    if rng.below(1000) < far {
        4096 + rng.below(16_000)
    } else {
        100 + rng.below(800)
    }
}

/// `cargo test --release -p simfa-core wheel::tests::bench -- --ignored --nocapture`
#[test]
#[ignore]
fn bench_push_pop_1m_30k_in_flight() {
    let n = 1_000_000;
    let k = 30_000;
    for far in [0, 10, 100] {
        // Warm up, then measure.
        let _ = (bench_wheel(n / 10, k, far), bench_heap(n / 10, k, far));
        let (w, ws) = bench_wheel(n, k, far);
        let (h, hs) = bench_heap(n, k, far);
        assert_eq!(ws, hs, "same pops in the same order");
        ::std::println!(
            "push+pop, {k} in flight, {far}/1000 beyond horizon: TimingWheel {w:.1} ns/op, EventQueue {h:.1} ns/op ({:.1}x)",
            h / w
        );
    }
}
