//! Small kernels whose cycle counts are derived by hand (the derivations are
//! in the comments) and asserted exactly.

use simfa_core::config::MemoryModel;
use simfa_core::{Event, GpuConfig, Instr, Op, Ratio};
use simfa_tests::{run, run_observed, Builder, Recorder, Var};

/// One WarpGroup, 4 x m64n128k16 (64 cycles each on H800), one group.
/// Issue at 0..3 -> pipe busy [0,64) [64,128) [128,192) [192,256);
/// commit at 4; wait at 5 stalls until the last completes at 256, passes at
/// 256; the implicit exit issues at 257; the kernel ends at 258.
#[test]
fn wgmma_chain() {
    let mut b = Builder::new("chain", [1, 1, 1]);
    b.role("main", 1, 64);
    for _ in 0..4 {
        b.op(Instr::Wgmma {
            n: 128,
            mode: simfa_core::WgmmaMode::Ss,
        });
    }
    b.op(Instr::WgmmaCommit);
    b.op(Instr::WgmmaWait { n: 0 });
    let k = b.finish();
    let s = run(&GpuConfig::h800(), &k).unwrap();
    assert_eq!(s.cycles, 258);
    assert_eq!(s.stats.wgmmas, 4);
    assert_eq!(s.stats.tensor_busy_cycles, 256);
}

/// Two groups of 2 x m64n256k16 (128 cycles each), wait_group 1 then 0.
/// Issue: wgmma 0,1 (end 128, 256), commit 2, wgmma 3,4 (end 384, 512),
/// commit 5, wait 1 at 6 stalls until group 1 ends at 256, passes at 256;
/// wait 0 at 257 stalls until 512, passes at 512; exit 513; ends at 514.
#[test]
fn wgmma_wait_group_counts_groups() {
    let mut b = Builder::new("groups", [1, 1, 1]);
    b.role("main", 1, 64);
    for _ in 0..2 {
        b.op(Instr::Wgmma {
            n: 256,
            mode: simfa_core::WgmmaMode::Ss,
        });
        b.op(Instr::Wgmma {
            n: 256,
            mode: simfa_core::WgmmaMode::Ss,
        });
        b.op(Instr::WgmmaCommit);
    }
    b.op(Instr::WgmmaWait { n: 1 });
    b.op(Instr::WgmmaWait { n: 0 });
    b.op(Instr::Exit);
    let k = b.finish();
    let s = run(&GpuConfig::h800(), &k).unwrap();
    assert_eq!(s.cycles, 514);
}

/// The H20 law: m64n128k16 takes ceil(128 * 79/40) = 253 cycles.
#[test]
fn h20_wgmma_multiplier() {
    let mut b = Builder::new("h20", [1, 1, 1]);
    b.role("main", 1, 64);
    b.op(Instr::Wgmma {
        n: 128,
        mode: simfa_core::WgmmaMode::Ss,
    });
    b.op(Instr::WgmmaCommit);
    b.op(Instr::WgmmaWait { n: 0 });
    let k = b.finish();
    // wgmma 0 -> [0, 253); commit 1; wait 2 stalls, passes 253; exit 254.
    assert_eq!(run(&GpuConfig::h20(), &k).unwrap().cycles, 255);
}

fn ring_config() -> GpuConfig {
    let mut cfg = GpuConfig::h800();
    cfg.memory = MemoryModel::Fixed;
    cfg.tma_setup_common = 10;
    cfg.tma_setup_tensor = 20;
    cfg.port.latency = 100;
    cfg.port.bytes_per_cycle = Ratio::new(64, 1);
    cfg
}

/// Producer and consumer WarpGroups over a 2-stage ring (full mbarriers
/// with TMA byte counts, stages released by the consumer), fixed port:
/// setup 30, 512-byte boxes take 8 cycles on the port, latency 100.
/// The consumer's m64n64k16 takes 32 cycles. Greedy-then-oldest, the
/// producer is older. The derivation, cycle by cycle:
///
/// - P: 0 acquire s0, 1 expect_tx, 2 tma.load (leaves 32, port [32,40),
///   lands 140), 3 arrive; 4 acquire s1, 5 expect_tx, 6 tma.load (leaves 36,
///   port [40,48), lands 148), 7 arrive; 8 acquire s0 stalls.
/// - C: 8 wait full0 stalls. 140 full0 completes; C passes at 140, wgmma 141
///   (ends 173), commit 142, wait 143 stalls; 173 passes; release s0 at 174
///   (wakes P).
/// - GTO keeps C: 175 wait full1 passes, wgmma 176 (ends 208), commit 177,
///   wait 178 stalls.
/// - P: 179 acquire s0, 180 expect_tx, 181 tma.load (leaves 211, port
///   [211,219), lands 319), 182 arrive, 183 acquire s1 stalls.
/// - C: 208 passes, release s1 at 209 (wakes P); 210 wait full0 (parity 1)
///   stalls.
/// - P: 211 acquire s1, 212 expect_tx, 213 tma.load (leaves 243, port
///   [243,251), lands 351), 214 arrive, 215 exit.
/// - C: 319 passes, wgmma 320 (ends 352), commit, wait 322 stalls, passes
///   352, release 353; 354 wait full1 passes (351 completed it), wgmma 355
///   (ends 387), commit, wait stalls, passes 387, release 388, exit 389.
///
/// The kernel ends at 390.
#[test]
fn producer_consumer_two_stage_ring() {
    let mut b = Builder::new("ring", [1, 1, 1]);
    let x = b.map1d("X", 0x1000, 2, 1 << 20, 256);
    let full = b.mbarrier("full", 2, 1);
    let empty = b.stage("empty", 2, 1);
    let slot = b.lin(0, &[(1, Var::L(0))], 0, 2);
    let parity = b.lin(0, &[(1, Var::L(0))], 2, 2);
    let coord = b.lin(0, &[(256, Var::L(0))], 0, 0);
    let four = b.c(4);
    b.role("producer", 1, 24);
    b.begin_loop(four);
    b.op(Instr::StageAcquire {
        stage: b.at(empty, slot),
    });
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
    b.end_loop();
    b.op(Instr::Exit);
    b.role("consumer", 1, 240);
    b.begin_loop(four);
    b.op(Instr::MbarWait {
        bar: b.at(full, slot),
        parity,
    });
    b.op(Instr::Wgmma {
        n: 64,
        mode: simfa_core::WgmmaMode::Ss,
    });
    b.op(Instr::WgmmaCommit);
    b.op(Instr::WgmmaWait { n: 0 });
    b.op(Instr::StageRelease {
        stage: b.at(empty, slot),
        cluster: 0,
    });
    b.end_loop();
    b.op(Instr::Exit);
    let k = b.finish();
    let mut rec = Recorder::default();
    let s = run_observed(&ring_config(), &k, &mut rec).unwrap();
    let lands: Vec<u64> = rec
        .events
        .iter()
        .filter_map(|(c, e)| matches!(e, Event::TmaDone { .. }).then_some(*c))
        .collect();
    assert_eq!(lands, [140, 148, 319, 351]);
    assert_eq!(s.cycles, 390);
    assert_eq!(s.stats.bytes_loaded, 4 * 512);
}

/// Two consumer WarpGroups ping-pong their GEMMs through named barriers 0
/// and 1 (256 threads each): `bar.sync wg` before the GEMM, `bar.arrive
/// 1-wg` after it, then a 200-cycle softmax bubble. WG 1 opens with one
/// arrive on barrier 0 to give WG 0 the first turn. Each m64n256k16 takes
/// 128 cycles.
///
/// WG0 GEMMs: [3,131), [333,461), [667,795); WG1: [131,259), [461,589),
/// [795,923). WG1's last bubble starts at 924 and ends at 1124, where it
/// exits; the kernel ends at 1125.
#[test]
fn named_barrier_ping_pong() {
    let mut b = Builder::new("pingpong", [1, 1, 1]);
    let wg = b.lin(0, &[(1, Var::Wg)], 0, 0);
    let other = b.lin(1, &[(-1, Var::Wg)], 0, 0);
    let zero = b.c(0);
    let three = b.c(3);
    b.role("consumer", 2, 240);
    b.begin_loop(wg);
    b.op(Instr::BarArrive {
        id: zero,
        threads: 256,
    });
    b.end_loop();
    b.begin_loop(three);
    b.op(Instr::BarSync {
        id: wg,
        threads: 256,
    });
    b.op(Instr::Wgmma {
        n: 256,
        mode: simfa_core::WgmmaMode::Ss,
    });
    b.op(Instr::WgmmaCommit);
    b.op(Instr::BarArrive {
        id: other,
        threads: 256,
    });
    b.op(Instr::WgmmaWait { n: 0 });
    b.op(Instr::Bubble { cycles: 200 });
    b.end_loop();
    b.op(Instr::Exit);
    let k = b.finish();
    let mut rec = Recorder::default();
    let s = run_observed(&GpuConfig::h800(), &k, &mut rec).unwrap();
    let mut spans: Vec<(u8, u64, u64)> = rec
        .events
        .iter()
        .filter_map(|(_, e)| match e {
            Event::WgmmaStart { who, start, end } => Some((who.wg, *start, *end)),
            _ => None,
        })
        .collect();
    spans.sort_by_key(|s| s.1);
    assert_eq!(
        spans,
        [
            (0, 3, 131),
            (1, 131, 259),
            (0, 333, 461),
            (1, 461, 589),
            (0, 667, 795),
            (1, 795, 923)
        ]
    );
    assert_eq!(s.cycles, 1125);
    // The named-barrier ops issued: 1 + 3*2 per WarpGroup minus WG0's prologue.
    let bars = rec
        .events
        .iter()
        .filter(|(_, e)| {
            matches!(
                e,
                Event::Issue {
                    op: Op::BarSync { .. } | Op::BarArrive { .. },
                    ..
                }
            )
        })
        .count();
    assert_eq!(bars, 13);
}
