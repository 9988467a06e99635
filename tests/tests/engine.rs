//! Deadlocks, determinism, arenas, capacities, streams and admission.

use simfa_core::Event;
use simfa_core::{
    BuildError, Capacity, GpuConfig, Instr, KernelError, NoStream, Op, SchedulerPolicy, SimError,
    Simulator, SourceError, Status, StreamSource, WaitReason,
};
use simfa_std::check::ConsistencyChecker;
use simfa_tests::{assert_clean, run, run_observed, Builder, Recorder, Var};

/// The H800 with the fixed-latency port of the foundation.
fn fixed_port() -> GpuConfig {
    let mut cfg = GpuConfig::h800();
    cfg.memory = simfa_core::config::MemoryModel::Fixed;
    cfg
}

/// A consumer waits on a full barrier that the producer never fills: the
/// producer exits, and the consumer can never make progress.
fn deadlocking_kernel() -> simfa_core::Kernel {
    let mut b = Builder::new("deadlock", [2, 1, 1]);
    let full = b.mbarrier("full", 1, 1);
    let zero = b.c(0);
    b.role("producer", 1, 24);
    b.op(Instr::Bubble { cycles: 10 });
    b.op(Instr::Exit);
    b.role("consumer", 1, 240);
    b.op(Instr::MbarWait {
        bar: b.at(full, zero),
        parity: zero,
    });
    b.op(Instr::Exit);
    b.finish()
}

#[test]
fn deadlock_names_every_waiter() {
    let k = deadlocking_kernel();
    let cfg = GpuConfig::h800();
    let mut arena = vec![0u8; Simulator::<NoStream>::arena_size(&cfg, &k).unwrap()];
    let mut sim = Simulator::new(&cfg, &k, &mut arena).unwrap();
    let mut check = ConsistencyChecker::new(&cfg);
    let err = sim.run(&mut check).unwrap_err();
    assert_clean(&check);
    match err {
        SimError::Deadlock {
            waiting,
            role,
            reason,
            ..
        } => {
            assert_eq!(waiting, 2);
            assert_eq!(role, 1);
            assert_eq!(reason, WaitReason::Mbarrier { bar: 0, parity: 0 });
        }
        e => panic!("expected a deadlock, got {e}"),
    }
    let waiters: Vec<_> = sim.waiters().collect();
    assert_eq!(waiters.len(), 2);
    let ctas: Vec<u32> = waiters.iter().map(|w| w.cta).collect();
    assert_eq!(ctas, [0, 1]);
    assert!(waiters.iter().all(|w| w.role == 1 && w.wg_in_role == 0));
    assert!(err.to_string().contains("deadlock"), "{err}");
}

#[test]
fn watchdog_bounds_the_run() {
    let mut b = Builder::new("long", [1, 1, 1]);
    b.role("main", 1, 32);
    b.op(Instr::Bubble { cycles: 1_000_000 });
    b.op(Instr::Bubble { cycles: 1_000_000 });
    let k = b.finish();
    let mut cfg = GpuConfig::h800();
    cfg.watchdog_cycles = 1_500_000;
    assert_eq!(run(&cfg, &k), Err(SimError::Watchdog { limit: 1_500_000 }));
}

/// A many-CTA kernel with loops, TMA and WGMMA: more CTAs than fit at once.
fn busy_kernel() -> simfa_core::Kernel {
    let mut b = Builder::new("busy", [300, 2, 1]);
    let x = b.map1d("X", 0x10000, 2, 1 << 24, 256);
    let full = b.mbarrier("full", 2, 1);
    let slot = b.lin(0, &[(1, Var::L(0))], 0, 2);
    let parity = b.lin(0, &[(1, Var::L(0))], 2, 2);
    let coord = b.lin(0, &[(256, Var::L(0)), (4096, Var::Cta)], 0, 0);
    let trips = b.lin(3, &[(1, Var::Cy)], 0, 0);
    b.smem(100 * 1024);
    b.role("main", 1, 128);
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
        n: 128,
        mode: simfa_core::WgmmaMode::Ss,
    });
    b.op(Instr::Wgmma {
        n: 128,
        mode: simfa_core::WgmmaMode::Ss,
    });
    b.op(Instr::WgmmaCommit);
    b.op(Instr::WgmmaWait { n: 0 });
    b.op(Instr::Bubble { cycles: 37 });
    b.end_loop();
    let out = b.lin(0, &[(4096, Var::Cta)], 0, 0);
    b.op(Instr::TmaStore {
        map: x,
        coords: [out, 0, 0, 0, 0],
    });
    b.op(Instr::StoreWait { n: 0 });
    b.finish()
}

#[test]
fn same_kernel_same_digest_and_step_equals_run() {
    let k = busy_kernel();
    let cfg = GpuConfig::h800();
    let a = run(&cfg, &k).unwrap();
    let b = run(&cfg, &k).unwrap();
    assert_eq!(a, b);
    assert_eq!(a.stats.ctas_retired, 600);

    let mut arena = vec![0u8; Simulator::<NoStream>::arena_size(&cfg, &k).unwrap()];
    let mut sim = Simulator::new(&cfg, &k, &mut arena).unwrap();
    let mut steps = 0u64;
    // Stepping with a detail-hungry checker: same summary and digest.
    let mut check = ConsistencyChecker::new(&cfg);
    while sim.step(&mut check).unwrap() == Status::Running {
        steps += 1;
    }
    assert!(steps > 100);
    assert_eq!(sim.summary(), a);
    assert_clean(&check);
    assert!(check.checked().0 > 0, "the hierarchy's reads were checked");

    // run_until in slices of 1000 cycles.
    let mut arena = vec![0u8; Simulator::<NoStream>::arena_size(&cfg, &k).unwrap()];
    let mut sim = Simulator::new(&cfg, &k, &mut arena).unwrap();
    let mut until = 0;
    let mut check = ConsistencyChecker::new(&cfg);
    while sim.run_until(simfa_core::Cycle(until), &mut check).unwrap() == Status::Running {
        assert!(sim.next_event_cycle().unwrap().get() > until);
        until += 1000;
    }
    assert_eq!(sim.summary(), a);
    assert_clean(&check);

    // Without any observer: still the same digest.
    let mut arena = vec![0u8; Simulator::<NoStream>::arena_size(&cfg, &k).unwrap()];
    let mut sim = Simulator::new(&cfg, &k, &mut arena).unwrap();
    assert_eq!(sim.run(&mut ()).unwrap(), a);
}

/// Asks for detail events and ignores them.
struct DetailHungry;

impl simfa_core::Observer for DetailHungry {
    fn wants_detail(&self) -> bool {
        true
    }
}

/// A run with `obs` alone (no checker beside it).
fn bare(
    cfg: &GpuConfig,
    k: &simfa_core::Kernel,
    obs: &mut impl simfa_core::Observer,
) -> simfa_core::Summary {
    let mut arena = vec![0u8; Simulator::<NoStream>::arena_size(cfg, k).unwrap()];
    let mut sim = Simulator::new(cfg, k, &mut arena).unwrap();
    sim.run(obs).unwrap()
}

/// The `simulate` fuzz target's find: CTAs that load the same 2-D tile
/// again and again through a tiny L2, so chunks meet lines still resident
/// from the previous load. Asking for detail events (as `--check` does)
/// once freed such a chunk's places in flight line by line instead of
/// together, and moved later DRAM requests by a cycle.
#[test]
fn detail_events_do_not_change_the_timing() {
    let mut b = Builder::new("reload", [2, 1, 2]);
    let m = b.map(simfa_core::TensorMap {
        name: simfa_core::builder::name("map", "M").unwrap(),
        base: 4080,
        elem_bytes: 2,
        rank: 2,
        dims: [1350, 70, 0, 0, 0],
        strides: [2, 2704, 0, 0, 0],
        boxdim: [256, 16, 0, 0, 0],
    });
    let bar = b.mbarrier("b", 1, 1);
    let zero = b.c(0);
    b.smem(17733);
    b.role("r", 2, 64);
    b.op(Instr::TmaLoad {
        map: m,
        bar: b.at(bar, 0),
        coords: [zero, zero, 0, 0, 0],
        multicast: 0,
    });
    let k = b.finish();
    for model in simfa_core::config::MemoryModel::ALL {
        let mut cfg = GpuConfig::h800();
        cfg.sms = 1;
        cfg.memory = model;
        cfg.l2.slices = 4;
        cfg.l2.sets = 8;
        cfg.l2.ways = 4;
        cfg.dram.channels = 2;
        let plain = bare(&cfg, &k, &mut ());
        assert_eq!(bare(&cfg, &k, &mut DetailHungry), plain, "{model:?}");
        let (checked, check) = simfa_tests::run_checked(&cfg, &k, &mut ());
        assert_eq!(checked.unwrap(), plain, "{model:?}");
        assert_clean(&check);
    }
}

/// Most CTAs resident on any one SM at once, from launch/retire events.
fn max_resident(cfg: &GpuConfig, k: &simfa_core::Kernel) -> (usize, u64) {
    let mut rec = Recorder::default();
    let s = run_observed(cfg, k, &mut rec).unwrap();
    let mut now = vec![0usize; cfg.sms as usize];
    let mut max = 0;
    let mut first_wave = 0;
    for (c, e) in &rec.events {
        match e {
            Event::CtaLaunch { sm, .. } => {
                now[*sm as usize] += 1;
                max = max.max(now[*sm as usize]);
                if *c == 0 {
                    first_wave += 1;
                }
            }
            Event::CtaRetire { sm, .. } => now[*sm as usize] -= 1,
            _ => {}
        }
    }
    assert_eq!(first_wave, (cfg.sms as usize * max).min(600));
    (max, s.cycles)
}

#[test]
fn admission_respects_shared_memory() {
    // 100 KiB per CTA: two CTAs fit an SM's 228 KiB; with 50 KiB, four.
    let k = busy_kernel();
    let cfg = GpuConfig::h800();
    let (two, slow) = max_resident(&cfg, &k);
    assert_eq!(two, 2);
    let mut k2 = k.clone();
    k2.smem_bytes = 50 * 1024;
    let (four, fast) = max_resident(&cfg, &k2);
    assert_eq!(four, 4);
    assert!(slow > fast, "{slow} vs {fast}");
    // Registers limit too: 128 threads x 255 registers = 32640 per CTA, two per SM.
    let mut k3 = k2.clone();
    k3.roles[0].regs = 255;
    assert_eq!(max_resident(&cfg, &k3).0, 2);
}

#[test]
fn scheduler_policy_changes_interleaving_not_results() {
    let k = busy_kernel();
    let mut cfg = GpuConfig::h800();
    let gto = run(&cfg, &k).unwrap();
    cfg.scheduler = SchedulerPolicy::Lrr;
    let lrr = run(&cfg, &k).unwrap();
    assert_eq!(gto.stats.wgmmas, lrr.stats.wgmmas);
    assert_eq!(gto.stats.bytes_loaded, lrr.stats.bytes_loaded);
}

#[test]
fn arena_one_byte_short_fails_cleanly() {
    let k = busy_kernel();
    let cfg = GpuConfig::h800();
    let n = Simulator::<NoStream>::arena_size(&cfg, &k).unwrap();
    let mut buf = vec![0u8; n + 8];
    for start in 0..8 {
        let short = &mut buf[start..start + n - 1];
        match Simulator::new(&cfg, &k, short) {
            Err(BuildError::ArenaTooSmall {
                table: Capacity::Arena,
                available,
            }) => assert_eq!(available, n - 1),
            Err(e) => panic!("unexpected {e}"),
            Ok(_) => panic!("an arena one byte short must fail"),
        }
        let exact = &mut buf[start..start + n];
        let mut sim = Simulator::new(&cfg, &k, exact).unwrap();
        let mut check = ConsistencyChecker::new(&cfg);
        sim.run(&mut check).unwrap();
        assert_clean(&check);
    }
}

#[test]
fn cta_too_big_is_a_typed_error() {
    let mut k = busy_kernel();
    k.smem_bytes = 300 * 1024;
    let cfg = GpuConfig::h800();
    assert!(matches!(
        Simulator::<NoStream>::arena_size(&cfg, &k),
        Err(BuildError::Kernel(KernelError::CtaDoesNotFit { .. }))
    ));
}

#[test]
fn wgmma_group_capacity_is_a_typed_error() {
    let mut b = Builder::new("groups", [1, 1, 1]);
    b.role("main", 1, 32);
    let n = b.c(20);
    b.begin_loop(n);
    b.op(Instr::Wgmma {
        n: 256,
        mode: simfa_core::WgmmaMode::Ss,
    });
    b.op(Instr::WgmmaCommit);
    b.end_loop();
    let k = b.finish();
    let err = run(&GpuConfig::h800(), &k).unwrap_err();
    assert!(
        matches!(
            err,
            SimError::CapacityExceeded {
                capacity: Capacity::WgmmaGroups,
                ..
            }
        ),
        "{err}"
    );
}

#[test]
fn out_of_range_barrier_index_is_a_typed_error() {
    let mut b = Builder::new("oob", [1, 1, 1]);
    let full = b.mbarrier("full", 2, 1);
    let three = b.c(3);
    b.role("main", 1, 32);
    b.op(Instr::MbarArrive {
        bar: b.at(full, three),
    });
    let k = b.finish();
    let err = run(&GpuConfig::h800(), &k).unwrap_err();
    assert!(
        matches!(
            err,
            SimError::IndexOutOfRange {
                what: "mbarrier",
                ..
            }
        ),
        "{err}"
    );
}

#[test]
fn tensor_buffer_back_pressure_stalls_without_changing_the_pipe() {
    let mut b = Builder::new("buf", [1, 1, 1]);
    b.role("main", 1, 32);
    let n = b.c(40);
    b.begin_loop(n);
    b.op(Instr::Wgmma {
        n: 64,
        mode: simfa_core::WgmmaMode::Ss,
    });
    b.end_loop();
    b.op(Instr::WgmmaCommit);
    b.op(Instr::WgmmaWait { n: 0 });
    let k = b.finish();
    let mut cfg = GpuConfig::h800();
    cfg.wgmma_buffer = 2;
    // 40 WGMMAs of 32 cycles each. With two buffer entries the third waits
    // for the first to finish (issues at 32), then one issues every 32
    // cycles as slots free: the 40th issues at 1216 and runs [1248, 1280),
    // so the pipe never idles. Commit 1217, wait 1218 stalls, passes 1280,
    // exit 1281.
    let s = run(&cfg, &k).unwrap();
    assert_eq!(s.stats.tensor_busy_cycles, 1280);
    assert!(s.stats.stall_cycles > 0);
    assert_eq!(s.cycles, 1282);
}

/// An explicit stream: the consumer's instructions come from a source.
struct Script(Vec<Op>);

impl StreamSource for Script {
    fn pull(&mut self, _cta: u32, _role: u8, _wg: u8, pos: u64) -> Result<Option<Op>, SourceError> {
        Ok(self.0.get(pos as usize).copied())
    }
}

#[test]
fn stream_roles_pull_from_the_source() {
    let mut b = Builder::new("stream", [1, 1, 1]);
    b.stream_role("main", 1, 32);
    let k = b.finish();
    let cfg = GpuConfig::h800();
    assert!(matches!(
        Simulator::new(&cfg, &k, &mut vec![0u8; 1 << 20]),
        Err(BuildError::Kernel(KernelError::NoStreamSource { role: 0 }))
    ));
    let ops = vec![
        Op::Wgmma {
            n: 128,
            mode: simfa_core::WgmmaMode::Ss,
        },
        Op::WgmmaCommit,
        Op::WgmmaWait { n: 0 },
    ];
    let n = Simulator::<Script>::arena_size(&cfg, &k).unwrap();
    let mut arena = vec![0u8; n];
    let mut sim = Simulator::with_source(&cfg, &k, &mut arena, Script(ops)).unwrap();
    // Same timing as the program form: wgmma [0,64), commit 1, wait passes 64, exit 65.
    let mut check = ConsistencyChecker::new(&cfg);
    assert_eq!(sim.run(&mut check).unwrap().cycles, 66);
    assert_clean(&check);
}

/// An arrive of several arrivals (one thread arriving for its whole
/// WarpGroup) completes a phase as that many single arrives would; more
/// arrivals than the phase has left is refused.
#[test]
fn an_arrive_counts_its_arrivals() {
    let mut b = Builder::new("arrive", [1, 1, 1]);
    b.mbarrier("full", 1, 128);
    b.stream_role("main", 1, 32);
    let k = b.finish();
    let cfg = GpuConfig::h800();
    let run_ops = |ops: Vec<Op>| {
        let n = Simulator::<Script>::arena_size(&cfg, &k).unwrap();
        let mut arena = vec![0u8; n];
        let mut sim = Simulator::with_source(&cfg, &k, &mut arena, Script(ops)).unwrap();
        sim.run(&mut ())
    };
    let init = Op::MbarInit { bar: 0, count: 128 };
    let wait = Op::MbarWait { bar: 0, parity: 0 };
    let arrive = |count| Op::MbarArrive { bar: 0, count };
    // 128 at once, or 100 then 28, complete the phase: the wait passes.
    assert!(run_ops(vec![init, arrive(128), wait]).is_ok());
    assert!(run_ops(vec![init, arrive(100), arrive(28), wait]).is_ok());
    // 127 leave it pending: the wait never passes.
    assert!(matches!(
        run_ops(vec![init, arrive(127), wait]),
        Err(SimError::Deadlock { .. })
    ));
    assert!(matches!(
        run_ops(vec![init, arrive(100), arrive(29)]),
        Err(SimError::BarrierOverArrive { barrier: 0, .. })
    ));
}

/// Golden digest of a fixed multi-wave kernel. It moves only when the
/// timing model changes; update it in the same commit and say why.
#[test]
fn golden_digest_busy_kernel() {
    let s = run(&fixed_port(), &busy_kernel()).unwrap();
    assert_eq!(
        (s.cycles, format!("{:016x}", s.digest)),
        (GOLDEN_BUSY.0, GOLDEN_BUSY.1.to_string())
    );
}

const GOLDEN_BUSY: (u64, &str) = (11764, "fada2587e66c1514");

/// A CTA that does not fit beside the one running on its SM is admitted
/// in the cycle that one retires, and its first instruction issues
/// `cta_launch_cycles` later: on one SM with room for one 150 KiB CTA, two
/// CTAs of a 100-cycle bubble run back to back.
#[test]
fn a_cta_waits_for_the_one_before_it_to_leave_its_sm() {
    let mut b = Builder::new("one_at_a_time", [2, 1, 1]);
    b.smem(150 * 1024);
    b.role("main", 1, 128);
    b.op(Instr::Bubble { cycles: 100 });
    let k = b.finish();
    for launch in [0u64, 25] {
        let mut cfg = fixed_port();
        cfg.sms = 1;
        cfg.cta_launch_cycles = launch as u32;
        let mut rec = Recorder::default();
        let s = run_observed(&cfg, &k, &mut rec).unwrap();
        let at = |want: fn(&Event) -> bool| -> Vec<u64> {
            rec.events
                .iter()
                .filter(|(_, e)| want(e))
                .map(|(c, _)| *c)
                .collect()
        };
        let starts = at(|e| matches!(e, Event::CtaLaunch { .. }));
        let ends = at(|e| matches!(e, Event::CtaRetire { .. }));
        let bubbles = at(|e| {
            matches!(
                e,
                Event::Issue {
                    op: Op::Bubble { .. },
                    ..
                }
            )
        });
        // CTA 0: admitted at 0, bubble at `launch`, exits (and retires)
        // when the bubble ends; CTA 1 the same from the next cycle.
        // CTA 0: admitted at 0, its bubble at `launch`, exits and retires
        // when the bubble ends. CTA 1 is admitted in that cycle, after the
        // cycle's issue, so it issues `launch` cycles later but not before
        // the next cycle.
        let e0 = launch + 100;
        let b1 = e0 + launch.max(1);
        assert_eq!(starts, vec![0, e0], "launch {launch}");
        assert_eq!(bubbles, vec![launch, b1], "launch {launch}");
        assert_eq!(ends, vec![e0, b1 + 100], "launch {launch}");
        assert_eq!(s.cycles, ends[1] + 1, "launch {launch}");
    }
}
