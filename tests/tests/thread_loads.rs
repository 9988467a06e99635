//! Loads by threads (`ld.global`: `cp.async`, or `ld.global` into
//! registers): the SM's load/store unit, shared by its WarpGroups and with
//! register stores, takes `load_request_cycles` per sector request; the
//! lines then arrive as a TMA load's and complete the mbarrier.

use simfa_core::{Event, GpuConfig, Instr, Op, Ratio};
use simfa_tests::{assert_clean, run_checked, run_observed, Builder, Recorder, Var};

/// Two WarpGroups of one CTA each load 512 bytes (16 requests of 32
/// bytes) into shared memory on their own mbarrier, issue a one-cycle
/// bubble, then wait for the bytes and exit. With `store_first`,
/// WarpGroup 1 first stores 512 bytes from registers.
fn two_loaders(segment: u8, store_first: bool) -> simfa_core::Kernel {
    let mut b = Builder::new("ld_global", [1, 1, 1]);
    let x = b.map1d("X", 0x10000, 2, 1 << 16, 256);
    let y = b.map1d("Y", 0x100000, 2, 1 << 16, 256);
    let full = b.mbarrier("full", 2, 1);
    b.smem(1024);
    let at = b.lin(0, &[(256, Var::Wg)], 0, 0);
    let wg = b.lin(0, &[(1, Var::Wg)], 0, 0);
    let zero = b.c(0);
    b.role("main", 2, 128);
    if store_first {
        // Only WarpGroup 1 stores: WarpGroup 0's store is out of bounds.
        let past = b.lin(-(1 << 16), &[(1 << 16, Var::Wg)], 0, 0);
        b.op(Instr::StGlobal {
            map: y,
            coords: [past, 0, 0, 0, 0],
            segment: 32,
        });
    }
    b.op(Instr::MbarExpectTx {
        bar: b.at(full, wg),
        bytes: 512,
    });
    b.op(Instr::LdGlobal {
        map: x,
        bar: b.at(full, wg),
        coords: [at, 0, 0, 0, 0],
        segment,
        l1: false,
    });
    b.op(Instr::MbarArrive {
        bar: b.at(full, wg),
    });
    b.op(Instr::Bubble { cycles: 1 });
    b.op(Instr::MbarWait {
        bar: b.at(full, wg),
        parity: zero,
    });
    b.finish()
}

/// For each WarpGroup: the cycle of its `ld.global`, of the instruction
/// after it, and of the one after its wait (the exit).
fn timeline(cfg: &GpuConfig, k: &simfa_core::Kernel) -> Vec<(u64, u64, u64)> {
    let mut rec = Recorder::default();
    run_observed(cfg, k, &mut rec).unwrap();
    let mut out = Vec::new();
    for wg in 0..2u8 {
        let issues: Vec<(u64, Op)> = rec
            .events
            .iter()
            .filter_map(|(c, e)| match e {
                Event::Issue { who, op } if who.wg == wg => Some((*c, *op)),
                _ => None,
            })
            .collect();
        let ld = issues
            .iter()
            .position(|(_, op)| matches!(op, Op::LdGlobal { .. }))
            .expect("an ld.global");
        let wait = issues
            .iter()
            .position(|(_, op)| matches!(op, Op::MbarWait { .. }))
            .expect("a wait");
        out.push((
            issues[ld].0,
            issues[ld + 1].0,
            issues.get(wait + 1).map_or(u64::MAX, |x| x.0),
        ));
    }
    out
}

fn cfg(per_request: Ratio) -> GpuConfig {
    let mut cfg = GpuConfig::h100();
    cfg.memory = simfa_core::config::MemoryModel::Fixed;
    cfg.load_request_cycles = per_request;
    cfg.store_request_cycles = Ratio::new(2, 1);
    cfg.port.bytes_per_cycle = Ratio::new(512, 1);
    cfg
}

/// At 3 cycles a request, the first WarpGroup's 16 requests hold the
/// load/store unit 48 cycles and it goes on when they have left; the
/// second, issued just after, waits for the unit and goes on 48 cycles
/// after the first. Each wait ends only after its bytes have landed.
#[test]
fn the_load_store_unit_is_shared_and_charged_per_request() {
    let t = timeline(&cfg(Ratio::new(3, 1)), &two_loaders(32, false));
    let (l0, n0, w0) = t[0];
    let (l1, n1, w1) = t[1];
    assert!(l1 > l0 && l1 < n0, "{t:?}");
    assert_eq!(n0, l0 + 48);
    assert_eq!(n1, l0 + 96);
    assert!(w0 > n0 && w1 > n1, "{t:?}");
    // Half-sector requests are twice as many.
    let t = timeline(&cfg(Ratio::new(3, 1)), &two_loaders(16, false));
    assert_eq!(t[0].1, t[0].0 + 96);
}

/// Loads and register stores share the unit: WarpGroup 1's store (16
/// requests at 2 cycles) queues behind WarpGroup 0's load (16 at 1), and
/// its own load follows its store.
#[test]
fn loads_and_register_stores_share_the_unit() {
    let t = timeline(&cfg(Ratio::new(1, 1)), &two_loaders(32, true));
    let (l0, n0, _) = t[0];
    let (l1, n1, _) = t[1];
    assert_eq!(n0, l0 + 16);
    assert!(l1 >= n0 + 32, "{t:?}");
    assert_eq!(n1, l1 + 16, "{t:?}");
}

/// The data moves like a TMA load's: the consistency checker traces every
/// read to its transfer, and the text assembly round-trips `ld.global`.
#[test]
fn consistent_and_round_trips() {
    let k = two_loaders(32, false);
    let mut cfg = GpuConfig::h100();
    cfg.load_request_cycles = Ratio::new(1, 4);
    let (r, check) = run_checked(&cfg, &k, &mut ());
    r.unwrap();
    assert_clean(&check);
    let text = simfa_std::asm::print(&k);
    assert!(
        text.contains("ld.global X, full[wg], [wg*256], 32"),
        "{text}"
    );
    let back = simfa_std::asm::parse(&text, "t.sasm").unwrap();
    assert_eq!(simfa_std::asm::print(&back), text);
    let zero = text.replace("], 32", "], 0");
    let e = simfa_std::asm::parse(&zero, "t.sasm")
        .unwrap_err()
        .to_string();
    assert!(e.contains("ld.global segment 0"), "{e}");
}

/// A shared-memory move (`smem.move`: `ld.shared`/`st.shared` of a tensor)
/// takes the same unit, 32 bytes a request: 4096 bytes at 1 cycle a
/// request hold it 128 cycles, and a second WarpGroup's move waits for it.
#[test]
fn shared_memory_moves_take_the_unit_too() {
    let mut b = Builder::new("smem_move", [1, 1, 1]);
    b.role("main", 2, 128);
    b.op(Instr::SmemMove { bytes: 4096 });
    b.op(Instr::Bubble { cycles: 1 });
    let k = b.finish();
    let mut rec = Recorder::default();
    run_observed(&cfg(Ratio::new(1, 1)), &k, &mut rec).unwrap();
    let at = |wg: u8, nth: usize| {
        rec.events
            .iter()
            .filter_map(|(c, e)| match e {
                Event::Issue { who, .. } if who.wg == wg => Some(*c),
                _ => None,
            })
            .nth(nth)
            .unwrap()
    };
    assert_eq!(at(0, 1), at(0, 0) + 128);
    assert_eq!(at(1, 1), at(0, 0) + 256);
    let text = simfa_std::asm::print(&k);
    assert!(text.contains("smem.move 4096"), "{text}");
    assert_eq!(
        simfa_std::asm::print(&simfa_std::asm::parse(&text, "t.sasm").unwrap()),
        text
    );
}
