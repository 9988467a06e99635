//! Edge tiles: a clipped TMA load completes its whole box's transaction
//! bytes (the hardware zero-fills the rest in shared memory), while only
//! its in-bounds part moves through the memory hierarchy.

use simfa_core::{Event, GpuConfig, Instr};
use simfa_tests::{run_observed, Builder, Recorder};

/// One CTA loads a 256-element FP16 box at `origin` of a 1000-element
/// tensor, with `expect_tx` set to the full box (512 bytes), and waits.
fn edge_kernel(origin: i64) -> simfa_core::Kernel {
    let mut b = Builder::new("edge", [1, 1, 1]);
    let full = b.mbarrier("full", 1, 1);
    let x = b.map1d("X", 0x10_0000, 2, 1000, 256);
    let zero = b.c(0);
    let at = b.c(origin);
    b.role("main", 1, 128);
    b.op(Instr::MbarExpectTx {
        bar: b.at(full, zero),
        bytes: 512,
    });
    b.op(Instr::TmaLoad {
        map: x,
        bar: b.at(full, zero),
        coords: [at, zero, zero, zero, zero],
        multicast: 0,
    });
    b.op(Instr::MbarArrive {
        bar: b.at(full, zero),
    });
    b.op(Instr::MbarWait {
        bar: b.at(full, zero),
        parity: zero,
    });
    b.op(Instr::Exit);
    b.finish()
}

fn lines_and_phases(origin: i64) -> (u64, usize) {
    let k = edge_kernel(origin);
    let mut rec = Recorder::default();
    let s = run_observed(&GpuConfig::h800(), &k, &mut rec)
        .unwrap_or_else(|e| panic!("origin {origin}: {e}"));
    let phases = rec
        .events
        .iter()
        .filter(|(_, e)| matches!(e, Event::PhaseComplete { .. }))
        .count();
    (s.stats.tma_lines, phases)
}

#[test]
fn clipped_box_completes_full_transaction() {
    // In bounds: 512 bytes = 4 lines of 128 bytes.
    assert_eq!(lines_and_phases(0), (4, 1));
    // Elements 896..1152 of 1000: 104 in bounds = 208 bytes over 2 lines
    // (0x10_0700 .. 0x10_07d0), yet the 512-byte expect_tx completes.
    assert_eq!(lines_and_phases(896), (2, 1));
    // Entirely out of bounds: no traffic, the phase still completes.
    assert_eq!(lines_and_phases(2048), (0, 1));
}
