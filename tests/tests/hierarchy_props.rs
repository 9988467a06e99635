//! Random memory-hierarchy configurations never make a run panic, hang or
//! lose a transfer: every run ends with the same result twice, and when it
//! succeeds every TMA byte arrived.

use proptest::prelude::*;
use simfa_core::mem::hash::SliceHash;
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
    b.k.smem_bytes = 4096;
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
    });
    b.op(Instr::MbarArrive {
        bar: b.at(full, slot),
    });
    b.op(Instr::MbarWait {
        bar: b.at(full, slot),
        parity,
    });
    b.op(Instr::Wgmma { n: 64 });
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
        cfg.l2.slice_interval = interval;
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
