//! The engine's in-flight rule at the transaction level: a line of a chunk
//! leaves as soon as it fits in the `max_lines` in flight, as in the
//! line-level engine, not when the whole chunk does. With the
//! arrival-order controller, what a read served from a shadow copy waits
//! for. And operations handed over together: in turns, not in SM order.

use super::*;
use crate::config::GpuConfig;
use crate::time::Ratio;

/// Records the DRAM hand-overs: (cycle, line address).
#[derive(Default)]
struct Handovers(std::vec::Vec<(u64, u64)>);

impl TxnSink for Handovers {
    fn dram(&mut self, cycle: u64, _write: bool, addr: u64) {
        self.0.push((cycle, addr));
    }
}

/// Line addresses of SM 0's own L2 partition (no far crossing), from `from`.
fn near_lines(cfg: &GpuConfig, from: u64, n: usize) -> std::vec::Vec<u64> {
    let sel = SliceSelector::new(cfg.l2.hash, cfg.l2.slices as u32);
    let lb = cfg.l2.line_bytes as u64;
    (from..)
        .filter(|&l| sel.slice(l) < cfg.l2.slices as u32 / 2)
        .take(n)
        .map(|l| l * lb)
        .collect()
}

fn bulk(addr: u64, bytes: u64, start: u64) -> TxnOp<'static> {
    TxnOp {
        sm: 0,
        store: false,
        shape: Shape::Linear { addr },
        bytes,
        start,
        now: start,
        id: 0,
    }
}

/// Runs `f` on the transaction model of `cfg` (64 operation tags, a
/// 64-line dedup set).
fn with_memory<R>(cfg: &GpuConfig, f: impl FnOnce(&mut TxnMemory<'_>) -> R) -> R {
    let (sms, ops) = (cfg.sms, 64);
    let mut l = Layout::new();
    TxnMemory::layout(&cfg.l2, &cfg.dram, &cfg.transaction, sms, 64, ops, &mut l).unwrap();
    let mut buf = std::vec![0u8; l.bytes()];
    let mut a = Arena::new(&mut buf);
    let mut m = TxnMemory::new(
        &cfg.l2,
        &cfg.dram,
        &cfg.tma,
        &cfg.transaction,
        sms,
        64,
        ops,
        7,
        &mut a,
    )
    .unwrap();
    f(&mut m)
}

#[test]
fn a_chunk_line_leaves_when_it_fits_not_when_the_chunk_does() {
    let mut cfg = GpuConfig::h800();
    cfg.tma.max_lines = 2;
    with_memory(&cfg, |m| {
        let lb = cfg.l2.line_bytes as u64;
        let [hot, cold] = near_lines(&cfg, 1 << 20, 2)[..] else {
            unreachable!()
        };
        // Two consecutive lines of the near partition: one run, one chunk.
        let near = near_lines(&cfg, 1 << 21, 64);
        let b0 = *near
            .iter()
            .find(|&&x| near.contains(&(x + lb)))
            .expect("consecutive near lines");
        // `hot` becomes resident.
        let warm = m.transfer(&bulk(hot, lb, 0), &mut ());
        let t0 = warm.done + 10_000;
        // Both places in flight taken: a hit that is back soon, a miss that
        // is back late.
        let hit = m.transfer(&bulk(hot, lb, t0), &mut ());
        let miss = m.transfer(&bulk(cold, lb, t0), &mut ());
        assert!(hit.done + 200 < miss.done, "{hit:?} {miss:?}");
        // A chunk of two cold lines.
        let mut h = Handovers::default();
        let both = m.transfer(&bulk(b0, 2 * lb, t0), &mut h);
        assert_eq!(h.0.len(), 2, "{:?}", h.0);
        let first_out = h.0.iter().map(|&(c, _)| c).min().unwrap();
        let last_out = h.0.iter().map(|&(c, _)| c).max().unwrap();
        // Its first line took the hit's place and left long before the miss
        // came back; the second waited for the miss's place. (Had the chunk
        // waited until both fit, its first line would have left with the
        // second, after the miss was back.)
        assert!(first_out < miss.done, "{first_out} vs {miss:?}");
        assert!(last_out >= miss.done, "{last_out} vs {miss:?}");
        assert!(both.done > miss.done);
    });
}

#[test]
fn with_the_controller_a_shadow_copy_is_read_after_the_fill_it_copies() {
    let mut cfg = GpuConfig::h800();
    cfg.transaction.arrival_controller = ArrivalController::On;
    // Every far read is copied into the near partition.
    cfg.l2.proxy.enabled = true;
    cfg.l2.proxy.threshold_permille = 1000;
    with_memory(&cfg, |m| {
        // A line whose home is in the other partition than SMs 0 and 2's.
        let sel = SliceSelector::new(cfg.l2.hash, cfg.l2.slices as u32);
        let lb = cfg.l2.line_bytes as u64;
        let far = (1u64 << 20..)
            .find(|&l| sel.slice(l) >= cfg.l2.slices as u32 / 2)
            .unwrap()
            * lb;
        // SM 0 misses it: a fill, and a shadow copy near SMs 0 and 2.
        let first = m.transfer(&bulk(far, lb, 0), &mut ());
        assert_eq!(m.m.stats.shadow_inserts, 1);
        // A load of DRAM reads alone: asked about one cycle after its
        // hand-over, and landing when the controller returns the read.
        assert_eq!(first.done, 1);
        let mut now = first.done;
        loop {
            let at = m.landing(0, now);
            if at == now {
                break;
            }
            now = at;
        }
        assert!(now > 300, "{now}");
        // SM 2 (another pair: no coalescing) reads it long after.
        let t = now + 5_000;
        let op = TxnOp {
            sm: 2,
            id: 1,
            ..bulk(far, lb, t)
        };
        m.transfer(&op, &mut ());
        assert_eq!(m.m.stats.shadow_hits, 1);
        // It waits for the fill SM 0's read made (before, a shadow copy had
        // no fill and landed at the service model's time).
        let arr = m.m.arrival.as_ref().unwrap();
        assert_eq!(arr.waits_for(1).len(), 1);
    });
}

/// `n` bulk loads of `bytes` each, one per SM from SM `sm0` on, all
/// starting at cycle 100, on disjoint addresses.
fn wave(sm0: u16, n: u16, bytes: u64) -> std::vec::Vec<TxnOp<'static>> {
    (0..n)
        .map(|i| TxnOp {
            sm: sm0 + i,
            id: i as u32,
            ..bulk((1 << 30) + i as u64 * bytes, bytes, 100)
        })
        .collect()
}

/// Times `ops` as one batch on a fresh model of `cfg`; their landings.
fn batched(cfg: &GpuConfig, ops: &[TxnOp<'_>]) -> std::vec::Vec<u64> {
    with_memory(cfg, |m| {
        let mut done = std::vec![0; ops.len()];
        m.transfer_batch(ops, &mut (), |i, d| done[i] = d.done);
        done
    })
}

/// One SM's operations in a batch are its transfers, in order: its turn
/// carries its engine from one to the next.
#[test]
fn a_batch_of_one_sms_operations_is_its_transfers_in_order() {
    let cfg = GpuConfig::h800();
    let ops: std::vec::Vec<TxnOp<'_>> = wave(3, 3, 16 << 10)
        .into_iter()
        .map(|op| TxnOp { sm: 3, ..op })
        .collect();
    let one_by_one = with_memory(&cfg, |m| {
        ops.iter()
            .map(|op| m.transfer(op, &mut ()).done)
            .collect::<std::vec::Vec<_>>()
    });
    assert_eq!(batched(&cfg, &ops), one_by_one);
}

/// A whole wave loading at once: timed one after the other the SMs land
/// in SM order, the last far behind the first; in turns, as the
/// line-level engines emit side by side, their landings spread far less.
#[test]
fn a_wave_loading_at_once_is_served_in_turns_not_in_sm_order() {
    let cfg = GpuConfig::h800();
    let ops = wave(0, cfg.sms, 64 << 10);
    let spread = |d: &[u64]| d.iter().max().unwrap() - d.iter().min().unwrap();
    let one_by_one = with_memory(&cfg, |m| {
        ops.iter()
            .map(|op| m.transfer(op, &mut ()).done)
            .collect::<std::vec::Vec<_>>()
    });
    let turns = batched(&cfg, &ops);
    // The last quarter of the SMs against the first: how far the order of
    // hand-over shows in the landings.
    let q = ops.len() / 4;
    let gradient = |d: &[u64]| {
        let mean = |s: &[u64]| s.iter().sum::<u64>() / s.len() as u64;
        mean(&d[d.len() - q..]) as i64 - mean(&d[..q]) as i64
    };
    let (g1, gt) = (gradient(&one_by_one), gradient(&turns));
    assert!(g1 > 2000 && gt.abs() * 4 < g1, "{gt} against {g1}");
    assert!(
        spread(&turns) * 2 < spread(&one_by_one),
        "{} against {}",
        spread(&turns),
        spread(&one_by_one)
    );
}

/// An SM whose operations are not handed over together never has two
/// turns at once: from where the SMs stop rising, a later round.
#[test]
fn an_sm_handed_over_twice_takes_a_later_round() {
    let cfg = GpuConfig::h800();
    let w = wave(0, 3, 8 << 10);
    let ops = [
        TxnOp { sm: 1, ..w[0] },
        TxnOp { sm: 0, ..w[1] },
        TxnOp { sm: 1, ..w[2] },
    ];
    let rounds = with_memory(&cfg, |m| {
        let mut done = std::vec![0; 3];
        m.transfer_batch(&ops[..1], &mut (), |_, d| done[0] = d.done);
        m.transfer_batch(&ops[1..], &mut (), |i, d| done[1 + i] = d.done);
        done
    });
    assert_eq!(batched(&cfg, &ops), rounds);
}

/// Warms `lines` (each its own one-line operation of SM 0), then reads
/// them again from `t0` on, all handed over at `t0`; returns the last
/// landing.
fn reread(m: &mut TxnMemory<'_>, lb: u64, lines: &[u64], t0: u64) -> u64 {
    let mut warm = 0;
    for &l in lines {
        warm = warm.max(m.transfer(&bulk(l, lb, 0), &mut ()).done);
    }
    assert!(warm < t0, "warm-up {warm} reaches {t0}");
    lines
        .iter()
        .map(|&l| m.transfer(&bulk(l, lb, t0), &mut ()).done)
        .max()
        .unwrap()
}

/// The SM's port (`tma.line_interval`): four L2 hits of one SM, each on
/// its own near slice, leave the engine `line_interval` cycles apart, so
/// the last lands `3 * line_interval` after the first would have.
#[test]
fn an_sms_port_spaces_its_lines_by_the_line_interval() {
    let base = GpuConfig::h800();
    let sel = SliceSelector::new(base.l2.hash, base.l2.slices as u32);
    let lb = base.l2.line_bytes as u64;
    // Four near lines on four different slices.
    let mut lines = std::vec::Vec::new();
    let mut used = std::vec::Vec::new();
    for l in near_lines(&base, 1 << 20, 64).into_iter().map(|a| a / lb) {
        let s = sel.slice(l);
        if !used.contains(&s) {
            used.push(s);
            lines.push(l * lb);
        }
        if lines.len() == 4 {
            break;
        }
    }
    let t0 = 100_000;
    let lat = base.l2.hit_latency as u64 + 2 * base.l2.xbar_latency as u64;
    for interval in [1u16, 2, 3] {
        let mut cfg = base.clone();
        cfg.tma.line_interval = interval;
        let done = with_memory(&cfg, |m| reread(m, lb, &lines, t0));
        assert_eq!(done, t0 + 3 * interval as u64 + lat, "interval {interval}");
    }
}

/// A slice's width: four hits on one slice, emitted a cycle apart, take
/// its port for `line_bytes / width` cycles each (4 at 32 bytes per
/// cycle), so the last is served 12 cycles after the first.
#[test]
fn a_slices_width_spaces_the_lines_it_serves() {
    let mut cfg = GpuConfig::h800();
    cfg.tma.line_interval = 1;
    let sel = SliceSelector::new(cfg.l2.hash, cfg.l2.slices as u32);
    let lb = cfg.l2.line_bytes as u64;
    let near = near_lines(&cfg, 1 << 20, 4096);
    let s0 = sel.slice(near[0] / lb);
    let lines: std::vec::Vec<u64> = near
        .into_iter()
        .filter(|&a| sel.slice(a / lb) == s0)
        .take(4)
        .collect();
    assert_eq!(lines.len(), 4);
    let t0 = 100_000;
    let lat = cfg.l2.hit_latency as u64 + 2 * cfg.l2.xbar_latency as u64;
    for (width, gap) in [(128u32, 1u64), (64, 2), (32, 4)] {
        cfg.l2.slice_bytes_per_cycle = Ratio::new(width, 1);
        cfg.l2.far_bytes_per_cycle = Ratio::new(width, 1);
        let done = with_memory(&cfg, |m| reread(m, lb, &lines, t0));
        // Emitted at t0..t0+3; the slice takes one every `gap` cycles.
        assert_eq!(done, t0 + 3 * gap + lat, "width {width}");
    }
}

#[test]
fn a_probe_that_finds_no_copy_holds_the_mirror_port_one_cycle() {
    let mut cfg = GpuConfig::h800();
    cfg.transaction.arrival_controller = ArrivalController::Off;
    // Four cycles a line at every slice, and no shadow copy ever made: every
    // far read probes the mirror and misses there.
    cfg.l2.slice_bytes_per_cycle = Ratio::new(32, 1);
    cfg.l2.far_bytes_per_cycle = Ratio::new(32, 1);
    cfg.l2.proxy.enabled = true;
    cfg.l2.proxy.threshold_permille = 0;
    cfg.l2.proxy.max_prob_permille = 0;
    with_memory(&cfg, |m| {
        let sel = SliceSelector::new(cfg.l2.hash, cfg.l2.slices as u32);
        let (lb, half) = (cfg.l2.line_bytes as u64, cfg.l2.slices as u32 / 2);
        // A far line (home in the other partition than SM 0's), and a near
        // line whose home is that far line's mirror slice.
        let far = (1u64 << 20..).find(|&l| sel.slice(l) >= half).unwrap();
        let mirror = sel.slice(far) - half;
        let near = (1u64 << 21..).find(|&l| sel.slice(l) == mirror).unwrap();
        let (far, near) = (far * lb, near * lb);
        // Both resident, long before.
        let w = m.transfer(&bulk(far, lb, 0), &mut ());
        let w2 = m.transfer(&bulk(near, lb, w.done + 10_000), &mut ());
        let t = w2.done + 10_000;
        let alone = m.transfer(&bulk(near, lb, t), &mut ()).done - t;
        // The far read's probe reaches the mirror port first.
        let t2 = t + 10_000;
        let probe = m.transfer(&bulk(far, lb, t2), &mut ());
        assert_eq!(m.m.stats.shadow_inserts, 0);
        let after = m.transfer(&bulk(near, lb, t2), &mut ()).done - t2;
        // A lookup moves no data: the near read waits one cycle for it, not
        // the four a line's data holds the port.
        assert_eq!(after, alone + 1, "{probe:?}");
    });
}

#[test]
fn a_far_line_crosses_without_holding_its_slice_port_longer() {
    let mut cfg = GpuConfig::h800();
    cfg.transaction.arrival_controller = ArrivalController::Off;
    // Two cycles a line at a slice's port, eight across the partitions; no
    // proxy, so a far read goes straight to its home slice.
    cfg.l2.slice_bytes_per_cycle = Ratio::new(64, 1);
    cfg.l2.far_bytes_per_cycle = Ratio::new(16, 1);
    cfg.l2.proxy.enabled = false;
    with_memory(&cfg, |m| {
        let sel = SliceSelector::new(cfg.l2.hash, cfg.l2.slices as u32);
        let (lb, half) = (cfg.l2.line_bytes as u64, cfg.l2.slices as u32 / 2);
        // Two lines of one slice of partition 1: far from SM 0, near to
        // the last SM.
        let x = (1u64 << 20..).find(|&l| sel.slice(l) >= half).unwrap();
        let y = (1u64 << 21..)
            .find(|&l| sel.slice(l) == sel.slice(x))
            .unwrap();
        let (x, y) = (x * lb, y * lb);
        let last = cfg.sms - 1;
        let on = |sm: u16, addr: u64, start: u64| TxnOp {
            sm,
            ..bulk(addr, lb, start)
        };
        let w = m.transfer(&on(0, x, 0), &mut ());
        let w2 = m.transfer(&on(last, y, w.done + 10_000), &mut ());
        let t = w2.done + 10_000;
        let alone = m.transfer(&on(last, y, t), &mut ()).done - t;
        let t2 = t + 10_000;
        m.transfer(&on(0, x, t2), &mut ());
        // Issued `far_latency` later, the near read reaches the slice just
        // after the far one.
        let t2n = t2 + cfg.l2.far_latency as u64 + 1;
        let after = m.transfer(&on(last, y, t2n), &mut ()).done - t2n;
        // The near read waits for the far line's two cycles at the port
        // at most, not the eight of its crossing.
        assert!(after <= alone + 2, "{after} vs {alone}");
        assert!(after > alone, "{after} vs {alone}: the reads did not meet");
        // The crossing itself is the far width: two far reads in a row
        // leave eight cycles apart.
        let t3 = t2 + 10_000;
        let a = m.transfer(&on(0, x, t3), &mut ()).done;
        let b = m.transfer(&on(2, x, t3), &mut ()).done;
        assert_eq!(b - a, 8, "{a} {b}");
    });
}

/// Two SMs reading the same lines at once merge in the coalescer only
/// when they share a coalescer group (`l2.coalescer_sms` consecutive SMs):
/// SMs 0 and 3 do not in pairs, and do in groups of four, where the second
/// read lands with the first.
#[test]
fn reads_merge_only_within_a_coalescer_group() {
    let run = |group: u16| {
        let mut cfg = GpuConfig::h800();
        cfg.l2.coalescer_sms = group;
        with_memory(&cfg, |m| {
            let a = bulk(1 << 30, 4096, 100);
            let b = TxnOp { sm: 3, id: 1, ..a };
            let (da, db) = (m.transfer(&a, &mut ()).done, m.transfer(&b, &mut ()).done);
            (m.stats().coalesced, da, db)
        })
    };
    let (pairs, _, _) = run(2);
    assert_eq!(pairs, 0, "SMs 0 and 3 are in different pairs");
    let (fours, da, db) = run(4);
    assert_eq!(fours, 4096 / 128, "every line of SM 3's read merges");
    assert_eq!(da, db, "the merged read lands with the first");
}
