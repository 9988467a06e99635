//! The SM's L1 data cache: a plain load (`ld.global.ca`) whose sectors
//! all lie in the L1 lands `l1.hit_cycles` after its requests have left
//! the load/store unit, without reaching the memory; one that misses
//! fills the L1 when it lands; an L2-only load (`ld.global`) never hits.

use simfa_core::{Event, GpuConfig, Instr, Op, Ratio};
use simfa_tests::{assert_clean, run_checked, run_observed, Builder, Recorder};

/// One WarpGroup loads 32-byte boxes of `X` one after another, each waited
/// for before the next: at elements 0, 0 again, then 8 (the next sector of
/// the same line), then 0 again.
fn chain(l1: bool) -> simfa_core::Kernel {
    chain_at(l1, &[0, 0, 8, 0])
}

/// [`chain`] at elements `at`.
fn chain_at(l1: bool, at: &[i64]) -> simfa_core::Kernel {
    let mut b = Builder::new("l1_chain", [1, 1, 1]);
    let x = b.map1d("X", 0x10000, 4, 1 << 16, 8);
    let bar = b.mbarrier("b", 1, 1);
    b.smem(1024);
    b.role("main", 1, 128);
    let zero = b.c(0);
    for (i, &at) in at.iter().enumerate() {
        let at = b.c(at);
        let r = b.at(bar, zero);
        b.op(Instr::MbarExpectTx { bar: r, bytes: 32 });
        b.op(Instr::LdGlobal {
            map: x,
            bar: r,
            coords: [at, 0, 0, 0, 0],
            segment: 32,
            l1,
        });
        b.op(Instr::MbarArrive { bar: r });
        let parity = b.c(i as i64 % 2);
        b.op(Instr::MbarWait { bar: r, parity });
    }
    b.finish()
}

fn cfg() -> GpuConfig {
    let mut cfg = GpuConfig::h100();
    cfg.memory = simfa_core::config::MemoryModel::Fixed;
    cfg.load_request_cycles = Ratio::new(1, 1);
    cfg
}

/// Cycles from each load's issue to its landing.
fn latencies(cfg: &GpuConfig, k: &simfa_core::Kernel) -> Vec<u64> {
    let mut rec = Recorder::default();
    run_observed(cfg, k, &mut rec).unwrap();
    let issues: Vec<u64> = rec
        .events
        .iter()
        .filter_map(|(c, e)| match e {
            Event::Issue {
                op: Op::LdGlobal { .. },
                ..
            } => Some(*c),
            _ => None,
        })
        .collect();
    let done: Vec<u64> = rec
        .events
        .iter()
        .filter_map(|(c, e)| matches!(e, Event::TmaDone { store: false, .. }).then_some(*c))
        .collect();
    let n = k
        .code
        .iter()
        .filter(|i| matches!(i, Instr::LdGlobal { .. }))
        .count();
    assert_eq!((issues.len(), done.len()), (n, n));
    issues.iter().zip(&done).map(|(i, d)| d - i).collect()
}

#[test]
fn a_load_hits_once_its_sectors_have_landed() {
    let cfg = cfg();
    let lat = latencies(&cfg, &chain(true));
    // One request leaves the unit in 1 cycle; a hit lands hit_cycles later.
    let hit = 1 + cfg.l1.hit_cycles as u64;
    let miss = cfg.port.latency as u64;
    assert!(lat[0] > miss, "{lat:?}");
    assert_eq!(lat[1], hit, "the same box again hits: {lat:?}");
    assert!(lat[2] > miss, "the line's next sector misses: {lat:?}");
    assert_eq!(lat[3], hit, "{lat:?}");
    // L2-only loads never hit.
    let lat = latencies(&cfg, &chain(false));
    assert!(lat.iter().all(|&l| l > miss), "{lat:?}");
}

#[test]
fn no_l1_means_every_load_goes_to_memory() {
    let mut cfg = cfg();
    cfg.l1.unified_bytes = 0;
    let lat = latencies(&cfg, &chain(true));
    assert!(lat.iter().all(|&l| l > cfg.port.latency as u64), "{lat:?}");
}

/// A hit's bytes were moved by the miss before it: the consistency checker
/// traces every read; the text assembly round-trips `ld.global.ca`.
#[test]
fn hits_are_consistent_and_round_trip() {
    let k = chain(true);
    use simfa_core::config::MemoryModel;
    for memory in [MemoryModel::Transaction, MemoryModel::Line] {
        let mut cfg = GpuConfig::h100();
        cfg.memory = memory;
        let (r, check) = run_checked(&cfg, &k, &mut ());
        let s = r.unwrap();
        assert_clean(&check);
        assert_eq!((s.stats.l1_loads, s.stats.l1_hits), (4, 2), "{memory:?}");
    }
    let text = simfa_std::asm::print(&k);
    assert!(text.contains("ld.global.ca X, b, [8], 32"), "{text}");
    let back = simfa_std::asm::parse(&text, "t.sasm").unwrap();
    assert_eq!(simfa_std::asm::print(&back), text);
}

/// The L1 follows the shared-memory carveout. Four lines of one set
/// (line numbers 64 apart: 64 sets) and the first again: with 1 KiB of
/// shared memory the L1 keeps 248 KiB, 31 ways, and the first line is
/// still there; a CTA with 200 KiB of shared memory leaves 28 KiB, three
/// ways, and the fourth line evicted the first.
#[test]
fn the_l1_is_what_shared_memory_leaves() {
    let lines = [0i64, 64, 128, 192, 0].map(|l| l * 32);
    let hit = 1 + cfg().l1.hit_cycles as u64;
    let small = chain_at(true, &lines);
    let lat = latencies(&cfg(), &small);
    assert_eq!(lat[4], hit, "{lat:?}");
    let mut big = small;
    big.smem_bytes = 200 * 1024;
    let lat = latencies(&cfg(), &big);
    assert!(lat[4] > cfg().port.latency as u64, "{lat:?}");
}
