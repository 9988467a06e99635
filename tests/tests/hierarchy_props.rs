//! Random memory-hierarchy configurations never make a run panic, hang or
//! lose a transfer: every run ends with the same result twice, and when it
//! succeeds every TMA byte arrived. The coalescers merge exactly what a
//! reference map of lines in flight per coalescer group predicts.

use std::collections::{HashMap, HashSet};

use proptest::prelude::*;
use simfa_core::arena::{Arena, Layout};
use simfa_core::mem::hash::SliceHash;
use simfa_core::mem::system::{LineRequest, MemSink, MemorySystem};
use simfa_core::{GpuConfig, Instr};
use simfa_tests::{run, Builder, Var};

/// Four CTAs on two SMs: loads through a 2-stage ring, then a store.
fn kernel() -> simfa_core::Kernel {
    let mut b = Builder::new("mix", [4, 1, 1]);
    let x = b.map1d("X", 0x1_0000, 2, 1 << 20, 256);
    let full = b.mbarrier("full", 2, 1);
    let slot = b.lin(0, &[(1, Var::L(0))], 0, 2);
    let parity = b.lin(0, &[(1, Var::L(0))], 2, 2);
    let coord = b.lin(0, &[(256, Var::L(0)), (2048, Var::Cta)], 0, 0);
    let out = b.lin(1 << 19, &[(256, Var::Cta)], 0, 0);
    let trips = b.c(6);
    b.smem(4096);
    b.role("main", 1, 64);
    b.begin_loop(trips);
    b.op(Instr::MbarExpectTx {
        bar: b.at(full, slot),
        bytes: 512,
    });
    b.op(Instr::TmaLoad {
        map: x,
        bar: b.at(full, slot),
        coords: [coord, 0, 0, 0, 0],
        multicast: 0,
    });
    b.op(Instr::MbarArrive {
        bar: b.at(full, slot),
    });
    b.op(Instr::MbarWait {
        bar: b.at(full, slot),
        parity,
    });
    b.op(Instr::Wgmma {
        n: 64,
        mode: simfa_core::WgmmaMode::Ss,
    });
    b.end_loop();
    b.op(Instr::TmaStore {
        map: x,
        coords: [out, 0, 0, 0, 0],
    });
    b.op(Instr::StoreWait { n: 0 });
    b.finish()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    #[test]
    fn random_hierarchies_run_to_the_same_end(
        slices in prop::sample::select(vec![2u16, 4, 8, 80]),
        sets in 1u32..64,
        ways in 1u16..9,
        hit in 0u32..300,
        xbar in 0u32..200,
        far in 0u32..200,
        interval in 1u32..8,
        far_extra in 0u32..3,
        line_interval in 1u16..4,
        fill in 0u32..300,
        mshrs in 1u16..8,
        coalescer: bool,
        modulo: bool,
        proxy: bool,
        prob in 0u16..=1000,
        thr in 0u16..=1000,
        lpc in 1u16..4,
        max_lines in 1u16..16,
        dedup: bool,
        seed: u64,
    ) {
        let mut cfg = GpuConfig::h800();
        cfg.sms = 2;
        cfg.l2.slices = slices;
        cfg.l2.sets = sets;
        cfg.l2.ways = ways;
        cfg.l2.hit_latency = hit;
        cfg.l2.xbar_latency = xbar;
        cfg.l2.far_latency = far;
        // Widths of 256/(2i + 1) and 256/(2(i + far_extra) + 1) bytes per
        // cycle: a fractional number of cycles per line.
        cfg.l2.slice_bytes_per_cycle = simfa_core::Ratio::new(256, 2 * interval + 1);
        cfg.l2.far_bytes_per_cycle =
            simfa_core::Ratio::new(256, 2 * (interval + far_extra) + 1);
        cfg.tma.line_interval = line_interval;
        cfg.l2.fill_latency = fill;
        cfg.l2.mshrs = mshrs;
        cfg.l2.coalescer = coalescer;
        cfg.l2.hash = if modulo { SliceHash::Modulo } else { SliceHash::Xor };
        cfg.l2.proxy.enabled = proxy;
        cfg.l2.proxy.max_prob_permille = prob;
        cfg.l2.proxy.threshold_permille = thr;
        cfg.tma.lines_per_cycle = lpc;
        cfg.tma.max_lines = max_lines;
        cfg.tma.dedup = dedup;
        cfg.seed = seed;
        cfg.watchdog_cycles = 10_000_000;
        let k = kernel();
        let a = run(&cfg, &k);
        let b = run(&cfg, &k);
        prop_assert_eq!(&a, &b);
        let s = a.expect("a valid configuration runs to the end");
        prop_assert_eq!(s.stats.bytes_loaded, 4 * 6 * 512);
        prop_assert_eq!(s.stats.bytes_stored, 4 * 512);
        let m = s.memory.unwrap();
        prop_assert_eq!(m.requests, s.stats.tma_lines);
    }
}

/// Records every completion by token, and any token completed twice.
#[derive(Default)]
struct Completions {
    got: HashMap<u32, (u64, u64)>,
    twice: Vec<u32>,
}

impl MemSink for Completions {
    fn done(&mut self, token: u32, addr: u64, cycle: u64) {
        if self.got.insert(token, (addr, cycle)).is_some() {
            self.twice.push(token);
        }
    }
}

/// Runs `mem` until it has nothing left to do; returns its completions.
fn drain(mem: &mut MemorySystem<'_>) -> Completions {
    let mut sink = Completions::default();
    let mut steps = 0u32;
    while let Some(t) = mem.next_event() {
        mem.advance(t, &mut sink);
        while mem.pop_dram_request().is_some() {}
        steps += 1;
        assert!(steps < 1_000_000, "the memory system does not drain");
    }
    sink
}

/// One slice's MSHR is busy with line A; reads of B and C wait for it, and
/// a write of B arriving meanwhile puts B in the tags. When A's fill frees
/// the MSHR, the B waiter retries, hits, and returns without using the
/// MSHR, which then stays free while the C waiter is never woken (only a
/// later fill on that slice would dequeue it): C never completes. Found by
/// `coalescer_merges_what_a_map_predicts` with one or two MSHRs per slice.
/// `fill` now keeps dequeuing waiters while an MSHR is free.
#[test]
fn mshr_waiter_that_hits_keeps_the_queue_moving() {
    let mut cfg = GpuConfig::h800();
    cfg.sms = 2;
    cfg.l2.slices = 2;
    cfg.l2.mshrs = 1;
    cfg.l2.coalescer = false;
    cfg.l2.proxy.enabled = false;
    let lb = cfg.l2.line_bytes as u64;
    // Three lines homed on the slice SM 0 reaches without a far crossing.
    let home = |line: u64| cfg.l2.hash.slice(line, 2);
    let near: Vec<u64> = (0..).filter(|&l| home(l) == 0).take(3).collect();
    let (a, b, c) = (near[0], near[1], near[2]);
    let mut l = Layout::new();
    MemorySystem::layout(&cfg.l2, &cfg.dram, 2, cfg.tma.max_lines, &mut l).unwrap();
    let mut buf = vec![0u8; l.bytes()];
    let mut arena = Arena::new(&mut buf);
    let mut mem =
        MemorySystem::new(&cfg.l2, &cfg.dram, 2, cfg.tma.max_lines, 7, &mut arena).unwrap();
    let reqs = [(a, false), (b, false), (b, true), (c, false)];
    for (token, &(line, write)) in reqs.iter().enumerate() {
        let r = LineRequest {
            sm: 0,
            addr: line * lb,
            write,
            token: token as u32,
        };
        mem.try_request(0, &r).unwrap();
    }
    let sink = drain(&mut mem);
    let mut got: Vec<u32> = sink.got.keys().copied().collect();
    got.sort_unstable();
    assert_eq!(got, [0, 1, 2, 3], "stats: {:?}", mem.stats());
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    /// A random stream of line requests from a few SMs, all offered at
    /// cycle 0 before anything can return, against a reference map keyed by
    /// (line, coalescer group of `group` consecutive SMs: 2, an SM pair, in
    /// the presets): the first read of a key goes out, every later read
    /// of it merges (writes never merge). Once the system drains, every
    /// request got exactly one completion, for its own line, and a merged
    /// read completed in the same cycle as the read it merged into.
    #[test]
    fn coalescer_merges_what_a_map_predicts(
        sms in 2u16..9,
        reqs in prop::collection::vec((0u16..8, 0u64..24, 0u8..5), 0..160),
        coalescer in prop::bool::weighted(0.8),
        group in prop::sample::select(vec![1u16, 2, 3, 17]),
        proxy: bool,
        slices in prop::sample::select(vec![2u16, 4, 8]),
        sets in 1u32..16,
        // From one MSHR per slice (reads wait for them, and waiters that
        // hit must not strand the rest) to one per distinct line.
        mshrs in 1u16..32,
    ) {
        let mut cfg = GpuConfig::h800();
        cfg.sms = sms;
        cfg.l2.coalescer = coalescer;
        cfg.l2.coalescer_sms = group;
        cfg.l2.proxy.enabled = proxy;
        cfg.l2.slices = slices;
        cfg.l2.sets = sets;
        cfg.l2.mshrs = mshrs;
        let line = cfg.l2.line_bytes as u64;
        let max_lines = cfg.tma.max_lines;
        let mut l = Layout::new();
        MemorySystem::layout(&cfg.l2, &cfg.dram, sms, max_lines, &mut l).unwrap();
        let mut buf = vec![0u8; l.bytes()];
        let mut a = Arena::new(&mut buf);
        let mut mem = MemorySystem::new(&cfg.l2, &cfg.dram, sms, max_lines, 7, &mut a).unwrap();

        let mut leader: HashMap<(u64, u16), u32> = HashMap::new();
        let mut merged_into: HashMap<u32, u32> = HashMap::new();
        let mut sent = Vec::new();
        for (token, &(sm, ln, kind)) in reqs.iter().enumerate() {
            let token = token as u32;
            let r = LineRequest { sm: sm % sms, addr: ln * line, write: kind == 0, token };
            prop_assert!(mem.try_request(0, &r).is_ok(), "busy below the pool size");
            sent.push(r);
            if !r.write && coalescer {
                match leader.get(&(ln, r.sm / group)) {
                    Some(&first) => {
                        merged_into.insert(token, first);
                    }
                    None => {
                        leader.insert((ln, r.sm / group), token);
                    }
                }
            }
        }
        let s = mem.stats();
        prop_assert_eq!(s.requests, sent.len() as u64);
        prop_assert_eq!(s.writes, sent.iter().filter(|r| r.write).count() as u64);
        prop_assert_eq!(s.coalesced, merged_into.len() as u64);
        prop_assert_eq!(s.l2_requests, (sent.len() - merged_into.len()) as u64);

        let sink = drain(&mut mem);
        prop_assert!(sink.twice.is_empty(), "completed twice: {:?}", sink.twice);
        let tokens: HashSet<u32> = sink.got.keys().copied().collect();
        let want: HashSet<u32> = sent.iter().map(|r| r.token).collect();
        prop_assert_eq!(tokens, want);
        for r in &sent {
            prop_assert_eq!(sink.got[&r.token].0, r.addr, "token {} answered for another line", r.token);
        }
        for (t, first) in &merged_into {
            prop_assert_eq!(sink.got[t].1, sink.got[first].1, "merged read {} did not complete with {}", t, first);
        }
        prop_assert_eq!(mem.stats().coalesced, merged_into.len() as u64);
    }
}
