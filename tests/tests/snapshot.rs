//! Save and restore: a run saved at any cycle and resumed in a fresh arena
//! ends with the summary (cycles, digest, counters) of the uninterrupted
//! run; damaged snapshots are typed errors, never panics.

use proptest::prelude::*;
use simfa_core::config::MemoryModel;
use simfa_core::mem::config::ArrivalController;
use simfa_core::{Cycle, GpuConfig, Kernel, NoStream, Simulator, SnapshotError, Status, Summary};
use simfa_std::gen::fa3::{fa3, Fa3Params, Variant};
use simfa_std::gen::{gemm, GemmParams};

/// `memory`; the transaction model with its HBM service model alone
/// (`arrival()` has the controller).
fn cfg(memory: MemoryModel) -> GpuConfig {
    let mut c = GpuConfig::h800();
    c.memory = memory;
    c.transaction.arrival_controller = ArrivalController::Off;
    c
}

/// The transaction model landing by the arrival-order controller.
fn arrival() -> GpuConfig {
    let mut c = cfg(MemoryModel::Transaction);
    c.transaction.arrival_controller = ArrivalController::On;
    c
}

fn arena(cfg: &GpuConfig, k: &Kernel) -> Vec<u8> {
    vec![0u8; Simulator::<NoStream>::arena_size(cfg, k).unwrap()]
}

fn straight(cfg: &GpuConfig, k: &Kernel) -> Summary {
    let mut a = arena(cfg, k);
    let mut sim = Simulator::new(cfg, k, &mut a).unwrap();
    sim.run(&mut ()).unwrap()
}

/// Runs to `at`, saves, and returns the snapshot.
fn save_at(cfg: &GpuConfig, k: &Kernel, at: u64) -> Vec<u8> {
    let mut a = arena(cfg, k);
    let mut sim = Simulator::new(cfg, k, &mut a).unwrap();
    sim.run_until(Cycle(at), &mut ()).unwrap();
    let mut buf = vec![0u8; sim.snapshot_size()];
    let n = sim.save(&mut buf).unwrap();
    buf.truncate(n);
    // The run that saved goes on undisturbed.
    assert_eq!(sim.run(&mut ()).unwrap(), straight(cfg, k));
    buf
}

fn resume(cfg: &GpuConfig, k: &Kernel, snap: &[u8]) -> Summary {
    let mut a = arena(cfg, k);
    let mut sim = Simulator::restore(cfg, k, &mut a, snap).unwrap();
    sim.run(&mut ()).unwrap()
}

fn check_resumes(cfg: &GpuConfig, k: &Kernel) {
    let want = straight(cfg, k);
    let points = [
        0,
        1,
        want.cycles / 7,
        want.cycles / 2,
        want.cycles - 1,
        want.cycles + 10,
    ];
    let mut a = arena(cfg, k);
    let mut sim = Simulator::new(cfg, k, &mut a).unwrap();
    let bound = sim.snapshot_size();
    for &at in &points {
        let st = sim.run_until(Cycle(at), &mut ()).unwrap();
        assert_eq!(st == Status::Finished, at >= want.cycles - 1, "at {at}");
        let mut buf = vec![0u8; bound];
        let n = sim.save(&mut buf).unwrap();
        assert!(n <= bound);
        assert_eq!(resume(cfg, k, &buf[..n]), want, "saved at {at}");
    }
}

fn small_gemm() -> Kernel {
    gemm(&GemmParams::new(256, 256, 512)).unwrap()
}

fn small_fa3(cfg: &GpuConfig) -> Kernel {
    let p = Fa3Params {
        batch: 1,
        heads: 2,
        kv_heads: 1,
        seqlen_q: 256,
        seqlen_kv: 512,
        hdim: 128,
        causal: false,
        variant: Variant::Full,
    };
    fa3(&p, cfg).unwrap().0
}

#[test]
fn gemm_resumes_fixed_port() {
    let c = cfg(MemoryModel::Fixed);
    check_resumes(&c, &small_gemm());
}

#[test]
fn gemm_resumes_hierarchy() {
    let c = cfg(MemoryModel::Line);
    check_resumes(&c, &small_gemm());
}

#[test]
fn fa3_resumes_fixed_port() {
    let c = cfg(MemoryModel::Fixed);
    check_resumes(&c, &small_fa3(&c));
}

#[test]
fn fa3_resumes_hierarchy() {
    let c = cfg(MemoryModel::Line);
    check_resumes(&c, &small_fa3(&c));
}

#[test]
fn gemm_resumes_transaction() {
    let c = cfg(MemoryModel::Transaction);
    check_resumes(&c, &small_gemm());
}

#[test]
fn fa3_resumes_transaction() {
    let c = cfg(MemoryModel::Transaction);
    check_resumes(&c, &small_fa3(&c));
}

#[test]
fn gemm_resumes_arrival_controller() {
    check_resumes(&arrival(), &small_gemm());
}

#[test]
fn fa3_resumes_arrival_controller() {
    let c = arrival();
    check_resumes(&c, &small_fa3(&c));
}

#[test]
fn a_resumed_run_can_be_saved_and_resumed_again() {
    let c = cfg(MemoryModel::Line);
    let k = small_gemm();
    let want = straight(&c, &k);
    let first = save_at(&c, &k, want.cycles / 3);
    let mut a = arena(&c, &k);
    let mut sim = Simulator::restore(&c, &k, &mut a, &first).unwrap();
    sim.run_until(Cycle(2 * want.cycles / 3), &mut ()).unwrap();
    let mut buf = vec![0u8; sim.snapshot_size()];
    let n = sim.save(&mut buf).unwrap();
    assert_eq!(resume(&c, &k, &buf[..n]), want);
}

#[test]
fn a_small_buffer_is_an_error() {
    let c = cfg(MemoryModel::Fixed);
    let k = small_gemm();
    let mut a = arena(&c, &k);
    let sim = Simulator::new(&c, &k, &mut a).unwrap();
    for len in [0, 10, 36, 100] {
        let mut buf = vec![0u8; len];
        assert!(matches!(
            sim.save(&mut buf),
            Err(SnapshotError::BufferTooSmall { .. })
        ));
    }
}

#[test]
fn every_truncation_is_an_error() {
    let c = cfg(MemoryModel::Fixed);
    let k = small_gemm();
    let snap = save_at(&c, &k, 3000);
    let mut a = arena(&c, &k);
    for len in 0..snap.len() {
        let e = Simulator::restore(&c, &k, &mut a, &snap[..len]).err();
        assert!(matches!(e, Some(SnapshotError::Truncated)), "{len}: {e:?}");
    }
}

#[test]
fn flipped_bytes_are_errors() {
    let c = cfg(MemoryModel::Fixed);
    let k = small_gemm();
    let snap = save_at(&c, &k, 5000);
    let mut a = arena(&c, &k);
    let step = (snap.len() / 300).max(1);
    for i in (0..snap.len()).step_by(step).chain(0..40) {
        for bit in [0x01u8, 0x80] {
            let mut bad = snap.clone();
            bad[i] ^= bit;
            let e = Simulator::restore(&c, &k, &mut a, &bad).err();
            let want = match i {
                0..8 => SnapshotError::BadMagic,
                8..12 => SnapshotError::Version {
                    found: u32::from_le_bytes(bad[8..12].try_into().unwrap()),
                },
                12..20 => SnapshotError::Mismatch,
                20..28 => {
                    // A length that no longer matches the body.
                    assert!(matches!(
                        e,
                        Some(SnapshotError::Truncated | SnapshotError::Corrupt { .. })
                    ));
                    continue;
                }
                _ => SnapshotError::Checksum,
            };
            assert_eq!(e, Some(want), "byte {i}");
        }
    }
    let mut longer = snap.clone();
    longer.push(0);
    assert!(matches!(
        Simulator::restore(&c, &k, &mut a, &longer).err(),
        Some(SnapshotError::Corrupt { .. })
    ));
}

#[test]
fn another_kernel_or_config_is_a_mismatch() {
    let c = cfg(MemoryModel::Fixed);
    let k = small_gemm();
    let snap = save_at(&c, &k, 2000);
    let other = gemm(&GemmParams::new(256, 256, 1024)).unwrap();
    let mut a = arena(&c, &other);
    assert_eq!(
        Simulator::restore(&c, &other, &mut a, &snap).err(),
        Some(SnapshotError::Mismatch)
    );
    let h = cfg(MemoryModel::Line);
    let mut a = arena(&h, &k);
    assert_eq!(
        Simulator::restore(&h, &k, &mut a, &snap).err(),
        Some(SnapshotError::Mismatch)
    );
}

#[test]
fn a_consistent_but_corrupt_body_is_a_typed_error() {
    // Damage the body, then fix up the checksum: decoding must still fail
    // cleanly (a changed table length or an undecodable value) or restore.
    let c = cfg(MemoryModel::Fixed);
    let k = small_gemm();
    let snap = save_at(&c, &k, 2500);
    let mut a = arena(&c, &k);
    for i in (36..snap.len()).step_by(97) {
        let mut bad = snap.clone();
        bad[i] = 0xff;
        reseal(&mut bad);
        let _ = Simulator::restore(&c, &k, &mut a, &bad);
    }
}

#[test]
fn a_resealed_damaged_snapshot_never_panics_when_run() {
    // Sampled single-byte changes of the body, checksum fixed up (what a
    // crafted file can do): the restore fails with a typed error, or the
    // resumed run ends, finished or with a typed error, without a panic.
    // A low watchdog bounds runs a damaged loop counter would stretch.
    let mut failures = Vec::new();
    let mut cases = 0;
    for (memory, arrival, step) in [
        (MemoryModel::Fixed, ArrivalController::Off, 3),
        (MemoryModel::Line, ArrivalController::Off, 9),
        (MemoryModel::Transaction, ArrivalController::Off, 9),
        (MemoryModel::Transaction, ArrivalController::On, 27),
    ] {
        // A small GPU keeps the snapshot (and each restore) small.
        let mut c = cfg(memory);
        c.transaction.arrival_controller = arrival;
        c.sms = 8;
        c.l2.slices = 4;
        c.l2.sets = 16;
        c.watchdog_cycles = 200_000;
        let k = small_gemm();
        let snap = save_at(&c, &k, straight(&c, &k).cycles / 2);
        let mut a = arena(&c, &k);
        // Densely where the scheduler state lies (threads, CTAs, barriers,
        // queue), then a few hundred positions over the rest.
        let dense = snap.len().min(6000);
        let sparse = ((snap.len() - dense) / 400).max(1);
        let positions = (36..dense)
            .step_by(step)
            .chain((dense..snap.len()).step_by(sparse));
        for i in positions {
            for v in [0x00u8, 0x01, 0xff, snap[i] ^ 0x80] {
                let mut bad = snap.clone();
                bad[i] = v;
                reseal(&mut bad);
                let run = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    if let Ok(mut sim) = Simulator::restore(&c, &k, &mut a, &bad) {
                        let _ = sim.run(&mut ());
                    }
                }));
                if run.is_err() {
                    failures.push((memory, arrival, i, v));
                }
                cases += 1;
            }
        }
    }
    assert!(cases > 5000, "{cases}");
    assert!(
        failures.is_empty(),
        "{} of {cases} damaged snapshots panicked, first {:?}",
        failures.len(),
        &failures[..failures.len().min(5)]
    );
}

/// Recomputes a snapshot's checksum after editing its body (the same fold
/// as the core's).
fn reseal(snap: &mut [u8]) {
    let body = &snap[36..];
    let mut d = simfa_core::digest::Digest::new();
    d.fold(body.len() as u64);
    let mut chunks = body.chunks_exact(8);
    for ch in &mut chunks {
        d.fold(u64::from_le_bytes(ch.try_into().unwrap()));
    }
    let mut w = [0u8; 8];
    w[..chunks.remainder().len()].copy_from_slice(chunks.remainder());
    d.fold(u64::from_le_bytes(w));
    let sum = d.value();
    snap[28..36].copy_from_slice(&sum.to_le_bytes());
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(12))]

    #[test]
    fn any_save_point_resumes(frac in 0u64..1000, hier in any::<bool>()) {
        let c = cfg(if hier { MemoryModel::Line } else { MemoryModel::Fixed });
        let k = small_gemm();
        let want = straight(&c, &k);
        let snap = save_at(&c, &k, want.cycles * frac / 1000);
        prop_assert_eq!(resume(&c, &k, &snap), want);
    }
}

/// A clustered GEMM (clusters of 2 x 2 CTAs multicasting A and B, 16 CTAs
/// on 4 SMs, so that clusters retire and start again) resumes under every
/// memory model: the CTAs' ranks and peers are saved.
#[test]
fn clustered_gemm_resumes() {
    let p = GemmParams {
        stages: 3,
        consumers: 2,
        cluster_m: 2,
        cluster_n: 2,
        ..GemmParams::new(512, 512, 256)
    };
    let k = gemm(&p).unwrap();
    assert!(k.cluster.is_clustered());
    for m in [
        MemoryModel::Fixed,
        MemoryModel::Line,
        MemoryModel::Transaction,
    ] {
        let mut c = cfg(m);
        c.sms = 4;
        check_resumes(&c, &k);
    }
}

/// A kernel whose CTAs queue on one spin lock (text assembly, read back
/// from its printed form) resumes from any cycle: which locks are held and
/// which releases are crossing are part of the state.
#[test]
fn lock_queue_resumes() {
    let text = "kernel locks\ngrid 6\nrole main count=1 regs=128 {\n    lock.acquire cta % 2\n    bubble 700\n    lock.release cta % 2\n}\n";
    let k = simfa_std::asm::parse(text, "locks.sfk").unwrap();
    let printed = simfa_std::asm::print(&k);
    assert!(printed.contains("lock.acquire cta % 2"), "{printed}");
    assert_eq!(simfa_std::asm::parse(&printed, "printed").unwrap(), k);
    for c in [cfg(MemoryModel::Fixed), arrival()] {
        check_resumes(&c, &k);
    }
    let bad = simfa_std::asm::parse(
        "kernel l\ngrid 1\nrole main count=1 regs=128 {\n    lock.release 1024\n}\n",
        "bad.sfk",
    )
    .unwrap_err();
    assert!(
        bad.to_string()
            .contains("bad.sfk:4:18: lock 1024 out of range"),
        "{bad}"
    );
}

/// A kernel whose CTAs signal each other through counters (text
/// assembly, read back from its printed form) resumes from any cycle: the
/// counts and the adds crossing to the L2 are part of the state.
#[test]
fn counter_signals_resume() {
    let text = "kernel signals\ngrid 6\nrole main count=1 regs=128 {\n    bubble 300\n    counter.add cta % 3, 1\n    counter.wait (cta + 1) % 3, 2\n    bubble 200\n}\n";
    let k = simfa_std::asm::parse(text, "signals.sfk").unwrap();
    let printed = simfa_std::asm::print(&k);
    assert!(printed.contains("counter.add cta % 3, 1"), "{printed}");
    assert_eq!(simfa_std::asm::parse(&printed, "printed").unwrap(), k);
    for c in [cfg(MemoryModel::Fixed), arrival()] {
        check_resumes(&c, &k);
    }
    let bad = simfa_std::asm::parse(
        "kernel l\ngrid 1\nrole main count=1 regs=128 {\n    counter.wait 1024, 1\n}\n",
        "bad.sfk",
    )
    .unwrap_err();
    assert!(
        bad.to_string()
            .contains("bad.sfk:4:18: counter 1024 out of range"),
        "{bad}"
    );
}

/// A kernel whose plain loads hit and fill the SMs' L1s resumes from any
/// cycle: the lines, their pending sectors and the fills in flight are part
/// of the state.
#[test]
fn l1_state_resumes() {
    let text = "kernel cached\ngrid 8\ntensormap X base=0x10000 elem=4 dims=[4096] strides=[] box=[16]\nmbarrier b[1] count=1\nrole main count=1 regs=128 {\n    loop 6 {\n        mbar.expect_tx b[0], 64\n        ld.global.ca X, b[0], [cta % 2 * 16], 16\n        mbar.arrive b[0]\n        mbar.wait b[0], l0 % 2\n    }\n}\n";
    let k = simfa_std::asm::parse(text, "cached.sfk").unwrap();
    for mut c in [cfg(MemoryModel::Fixed), cfg(MemoryModel::Line), arrival()] {
        c.sms = 4;
        let s = straight(&c, &k);
        assert!(
            s.stats.l1_hits > 0 && s.stats.l1_hits < s.stats.l1_loads,
            "{:?}",
            s.stats
        );
        check_resumes(&c, &k);
    }
}
