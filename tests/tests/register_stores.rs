//! Register stores (`st.global`): the SM's store path, shared by its
//! WarpGroups, takes `store_request_cycles` per sector request, and the
//! lines are written after.

use simfa_core::{Event, GpuConfig, Instr, Op, Ratio};
use simfa_tests::{run_observed, Builder, Recorder, Var};

/// Two WarpGroups of one CTA each store 512 bytes (32 requests of 16
/// bytes) from registers, issue a one-cycle bubble, then wait for their
/// stores and exit.
fn two_storers(segment: u8) -> simfa_core::Kernel {
    let mut b = Builder::new("st_global", [1, 1, 1]);
    let x = b.map1d("X", 0x10000, 2, 1 << 16, 256);
    let at = b.lin(0, &[(256, Var::Wg)], 0, 0);
    b.role("main", 2, 128);
    b.op(Instr::StGlobal {
        map: x,
        coords: [at, 0, 0, 0, 0],
        segment,
    });
    b.op(Instr::Bubble { cycles: 1 });
    b.op(Instr::StoreWait { n: 0 });
    b.finish()
}

/// For each WarpGroup: the cycle of its `st.global` and of its next
/// instruction.
fn timeline(cfg: &GpuConfig, k: &simfa_core::Kernel) -> Vec<(u64, u64)> {
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
        assert!(matches!(issues[0].1, Op::StGlobal { .. }), "{issues:?}");
        out.push((issues[0].0, issues[1].0));
    }
    out
}

fn cfg(per_request: Ratio) -> GpuConfig {
    let mut cfg = GpuConfig::h100();
    cfg.memory = simfa_core::config::MemoryModel::Fixed;
    cfg.store_request_cycles = per_request;
    // A 512-byte store crosses the port in one cycle.
    cfg.port.bytes_per_cycle = Ratio::new(512, 1);
    cfg
}

/// At 3 cycles a request, the first WarpGroup's 32 requests hold the
/// store path 96 cycles and it goes on when they have left; the second,
/// issued a cycle later, waits for the path and goes on 96 cycles after
/// the first.
#[test]
fn the_store_path_is_shared_and_charged_per_request() {
    let t = timeline(&cfg(Ratio::new(3, 1)), &two_storers(16));
    let (s0, n0) = t[0];
    let (s1, n1) = t[1];
    assert_eq!(s1, s0 + 1);
    assert_eq!(n0, s0 + 96);
    assert_eq!(n1, s0 + 192);
}

/// Half-sized requests are twice as many; fractional cycles per request
/// round up once per `st.global` (32 x 16/8 = 64 requests at 5/4 cycles:
/// 80 cycles).
#[test]
fn requests_follow_the_segment_and_fractions_round_once() {
    let t = timeline(&cfg(Ratio::new(5, 4)), &two_storers(8));
    assert_eq!(t[0].1, t[0].0 + 80);
    assert_eq!(t[1].1, t[0].0 + 160);
}

/// The lines are written after the requests leave: the kernel's stores
/// land later with a slower store path, and `store.wait` waits for them.
#[test]
fn the_data_follows_the_requests() {
    let fast = run_observed(&cfg(Ratio::new(1, 1)), &two_storers(16), &mut ()).unwrap();
    let slow = run_observed(&cfg(Ratio::new(11, 1)), &two_storers(16), &mut ()).unwrap();
    // Both WarpGroups' requests: 64 at 1 or at 11 cycles.
    assert_eq!(slow.cycles - fast.cycles, 64 * 10);
}

/// The text assembly round-trips `st.global` and refuses a segment
/// outside one sector.
#[test]
fn text_round_trip_and_bad_segment() {
    let k = two_storers(16);
    let text = simfa_std::asm::print(&k);
    assert!(text.contains("st.global X, [wg*256], 16"), "{text}");
    let back = simfa_std::asm::parse(&text, "t.sasm").unwrap();
    assert_eq!(simfa_std::asm::print(&back), text);
    assert!(matches!(
        back.code[0],
        Instr::StGlobal {
            map: 0,
            segment: 16,
            ..
        }
    ));
    let bad = text.replace("], 16", "], 33");
    let e = simfa_std::asm::parse(&bad, "t.sasm")
        .unwrap_err()
        .to_string();
    assert!(e.contains("t.sasm") && e.contains("segment"), "{e}");
    let zero = text.replace("], 16", "], 0");
    let e = simfa_std::asm::parse(&zero, "t.sasm")
        .unwrap_err()
        .to_string();
    assert!(e.contains("st.global segment 0"), "{e}");
}
