//! The core's external memory port, driven by Rust hosts: one that mirrors
//! the fixed port, one that answers in random order at random later
//! cycles, and a hostile one.
//!
//! The exact statement about the fixed port: a host answering every
//! request as `FixedPort` would (per-SM serialisation at `bytes_per_cycle`,
//! then `latency`) gives the fixed port's cycles, counters (but the port's
//! own busy count) and canonical event stream — every event at the same
//! cycle in the same order — except the `done` field of `TmaIssue`, which
//! the fixed port knows at issue and an external host only later. That
//! field enters the digest, so the digests themselves differ.

use std::collections::BTreeSet;

use proptest::prelude::*;
use simfa_core::config::MemoryModel;
use simfa_core::external::{ExtError, ExtRequest};
use simfa_core::{samples, Cycle, Event, GpuConfig, Kernel, Observer, Simulator, Stats, Status};

/// The canonical events of a run, `TmaIssue::done` cleared.
#[derive(Default)]
struct Record(Vec<(u64, Event)>);

impl Observer for Record {
    fn on_event(&mut self, cycle: Cycle, e: &Event) {
        let mut e = *e;
        if let Event::TmaIssue { done, .. } = &mut e {
            *done = None;
        }
        self.0.push((cycle.0, e));
    }
}

fn sample(i: usize) -> (GpuConfig, Box<Kernel>) {
    let mut k = Box::<Kernel>::default();
    let cfg = samples::build(i, &mut k).unwrap();
    (cfg, k)
}

fn external(mut cfg: GpuConfig) -> GpuConfig {
    cfg.memory = MemoryModel::External;
    cfg
}

fn arena(cfg: &GpuConfig, k: &Kernel) -> Vec<u8> {
    vec![0u8; Simulator::<simfa_core::NoStream>::arena_size(cfg, k).unwrap()]
}

/// Answers like `FixedPort`: in issue order, right after the step that
/// issued them.
struct FixedHost {
    free_at: Vec<u64>,
    latency: u64,
    rate: simfa_core::Ratio,
}

impl FixedHost {
    fn new(cfg: &GpuConfig) -> Self {
        FixedHost {
            free_at: vec![0; cfg.sms as usize],
            latency: cfg.port.latency as u64,
            rate: cfg.port.bytes_per_cycle,
        }
    }

    fn done(&mut self, r: &ExtRequest) -> u64 {
        let free = &mut self.free_at[r.sm as usize];
        let end = r.cycle.max(*free) + self.rate.div_ceil(r.bytes);
        *free = end;
        end + self.latency
    }

    fn serve(&mut self, sim: &mut Simulator<'_>) {
        while let Some(r) = sim.ext_pop() {
            let c = self.done(&r);
            sim.ext_complete(r.id, Cycle(c)).unwrap();
        }
    }
}

fn masked_stats(mut s: Stats) -> Stats {
    s.port_busy_cycles = 0;
    s
}

#[test]
fn a_fixed_port_host_reproduces_the_fixed_port() {
    for i in 0..samples::SAMPLES {
        let (cfg, k) = sample(i);
        if cfg.memory != MemoryModel::Fixed {
            continue;
        }
        let mut a = arena(&cfg, &k);
        let mut want = Record::default();
        let fixed = Simulator::new(&cfg, &k, &mut a)
            .unwrap()
            .run(&mut want)
            .unwrap();

        let ecfg = external(cfg.clone());
        let mut b = arena(&ecfg, &k);
        let mut sim = Simulator::new(&ecfg, &k, &mut b).unwrap();
        let mut host = FixedHost::new(&cfg);
        let mut got = Record::default();
        while sim.step(&mut got).unwrap() == Status::Running {
            host.serve(&mut sim);
        }
        let s = sim.summary();
        assert_eq!(s.cycles, fixed.cycles, "sample {i}");
        assert_eq!(
            masked_stats(s.stats),
            masked_stats(fixed.stats),
            "sample {i}"
        );
        assert_eq!(got.0.len(), want.0.len(), "sample {i}");
        assert!(got.0 == want.0, "sample {i}: event streams differ");
        // The digest leaves out what only the fixed port knows at issue
        // (`TmaIssue::done`): the same digest.
        assert_eq!(s.digest, fixed.digest, "sample {i}");
        assert_eq!(sim.ext_outstanding(), 0);
    }
}

/// A host that holds requests and answers a random subset, in random
/// order, at random later cycles, between steps.
fn random_host_run(i: usize, seed: u64) -> (u64, u64, usize) {
    let (cfg, k) = sample(i);
    let cfg = external(cfg);
    let mut a = arena(&cfg, &k);
    let mut sim = Simulator::new(&cfg, &k, &mut a).unwrap();
    let mut rng = simfa_core::rand::Rng::new(seed);
    let mut held: Vec<ExtRequest> = Vec::new();
    let mut seen = BTreeSet::new();
    let mut completed = BTreeSet::new();
    loop {
        while let Some(r) = sim.ext_pop() {
            assert!(seen.insert(r.id), "request {} popped twice", r.id);
            held.push(r);
        }
        let mut j = 0;
        while j < held.len() {
            if rng.below(3) == 0 {
                let r = held.swap_remove(j);
                let c = sim.now().0.max(r.cycle) + rng.below(400);
                sim.ext_complete(r.id, Cycle(c)).unwrap();
                assert!(completed.insert(r.id), "request {} completed twice", r.id);
            } else {
                j += 1;
            }
        }
        if sim.status() == Status::Finished {
            break;
        }
        // Before the first step nothing is admitted yet, so no event is
        // pending either; later, `None` means only the host can help.
        if sim.next_event_cycle().is_none() && !held.is_empty() {
            let r = held.swap_remove(rng.below(held.len() as u64) as usize);
            let c = sim.now().0.max(r.cycle) + rng.below(50);
            sim.ext_complete(r.id, Cycle(c)).unwrap();
            completed.insert(r.id);
            continue;
        }
        sim.step(&mut ()).unwrap();
    }
    let ops = sim.stats().tma_ops;
    let every: BTreeSet<u32> = (0..ops as u32).collect();
    assert_eq!(seen, every, "every request popped exactly once");
    assert_eq!(completed, every, "every request completed exactly once");
    assert!(held.is_empty() && sim.ext_outstanding() == 0);
    let s = sim.summary();
    (s.cycles, s.digest, ops as usize)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    #[test]
    fn a_random_host_never_loses_or_duplicates_a_request(i in 0..samples::SAMPLES, seed in any::<u64>()) {
        let (cycles, digest, ops) = random_host_run(i, seed);
        prop_assert!(ops > 0);
        // Deterministic given the host's answers.
        prop_assert_eq!(random_host_run(i, seed), (cycles, digest, ops));
    }
}

#[test]
fn snapshots_carry_the_queue() {
    // Save while requests are queued and held, restore into a fresh
    // simulator, answer the same way: the same end.
    let (cfg, k) = sample(0);
    let cfg = external(cfg);
    let mut a = arena(&cfg, &k);
    let mut sim = Simulator::new(&cfg, &k, &mut a).unwrap();
    let mut host = FixedHost::new(&cfg);
    let mut snap = None;
    while sim.step(&mut ()).unwrap() == Status::Running {
        if snap.is_none() && sim.ext_queued() > 0 && sim.now().0 > 100 {
            let mut buf = vec![0u8; sim.snapshot_size()];
            let n = sim.save(&mut buf).unwrap();
            buf.truncate(n);
            snap = Some((buf, host.free_at.clone()));
        }
        host.serve(&mut sim);
    }
    let want = sim.summary();
    let (buf, free_at) = snap.expect("a step left requests queued");
    let mut b = arena(&cfg, &k);
    let mut back = Simulator::restore(&cfg, &k, &mut b, &buf).unwrap();
    assert!(back.ext_queued() > 0);
    host.free_at = free_at;
    host.serve(&mut back);
    while back.step(&mut ()).unwrap() == Status::Running {
        host.serve(&mut back);
    }
    assert_eq!(back.summary(), want);
}

#[test]
fn hostile_completions_are_refused_and_change_nothing() {
    let (cfg, k) = sample(3);
    let ecfg = external(cfg.clone());
    let mut a = arena(&ecfg, &k);
    let mut sim = Simulator::new(&ecfg, &k, &mut a).unwrap();
    let mut host = FixedHost::new(&cfg);
    // Before anything is issued, nothing can be completed.
    assert_eq!(
        sim.ext_complete(0, Cycle(10)),
        Err(ExtError::UnknownRequest { id: 0 })
    );
    let mut tried = false;
    while sim.step(&mut ()).unwrap() == Status::Running {
        if !tried {
            if let Some(r) = sim.ext_pop() {
                tried = true;
                let past = sim.now().0.max(r.cycle) - 1;
                assert!(matches!(
                    sim.ext_complete(r.id, Cycle(past)),
                    Err(ExtError::InPast { .. })
                ));
                assert_eq!(
                    sim.ext_complete(r.id + 1000, Cycle(1 << 20)),
                    Err(ExtError::UnknownRequest { id: r.id + 1000 })
                );
                let c = host.done(&r);
                sim.ext_complete(r.id, Cycle(c)).unwrap();
                assert_eq!(
                    sim.ext_complete(r.id, Cycle(c)),
                    Err(ExtError::UnknownRequest { id: r.id }),
                    "completed twice"
                );
            }
        }
        host.serve(&mut sim);
    }
    assert!(tried);
    // The refusals changed nothing: the run ends as the clean one does.
    let mut b = arena(&ecfg, &k);
    let mut clean = Simulator::new(&ecfg, &k, &mut b).unwrap();
    let mut host = FixedHost::new(&cfg);
    while clean.step(&mut ()).unwrap() == Status::Running {
        host.serve(&mut clean);
    }
    assert_eq!(clean.summary(), sim.summary());
    // Other models refuse, and `run` does not wait forever for a host.
    let mut c = arena(&cfg, &k);
    let mut fixed = Simulator::new(&cfg, &k, &mut c).unwrap();
    assert_eq!(fixed.ext_complete(0, Cycle(0)), Err(ExtError::NotExternal));
    let mut d = arena(&ecfg, &k);
    let err = Simulator::new(&ecfg, &k, &mut d)
        .unwrap()
        .run(&mut ())
        .unwrap_err();
    assert!(
        matches!(err, simfa_core::SimError::ExternalPending { .. }),
        "{err}"
    );
}
