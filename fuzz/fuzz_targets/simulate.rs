//! Arbitrary structured kernels through the simulator.
//!
//! The fuzzer drives a bounded kernel *description* (a few roles of a
//! handful of ISA instructions, small tensor maps, mbarrier and stage
//! arrays, a small grid) derived with `arbitrary`; it becomes a
//! `simfa_core::Kernel`, invalid ones are skipped, and the rest run on a
//! two-SM H800 with a small watchdog, through the fixed port or the memory
//! hierarchy. Asserted: no panic; the run ends (finished, or any
//! simulation error but the "simulator bug" one) within the watchdog's
//! cycle budget; a second run, in an arena filled with different garbage,
//! gives the same outcome and digest; the consistency checker finds no
//! memory-system violation (a read without, or before, its transfer; a hit
//! sooner than the hit latency; a TMA completion before its data) — the
//! kernel-level kinds (a WGMMA before its bytes landed, a stage overwritten
//! before release) are the fuzzed kernel's own bugs and are allowed; and a
//! run saved midway and restored into a fresh arena ends with the
//! uninterrupted run's cycles and digest.
#![no_main]

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use simfa_std::check::{ConsistencyChecker, ViolationKind};
use simfa_core::config::MemoryModel;
use simfa_core::{
    Expr, GpuConfig, Instr, Kernel, MbarDecl, Ref, Role, SchedulerPolicy, SimError, Simulator,
    StageDecl, Status, TensorMap,
};

/// Cycle budget of every run.
const WATCHDOG: u64 = 200_000;

#[derive(Arbitrary, Debug)]
struct Desc {
    grid: [u8; 3],
    /// Cluster shape; zero, huge and non-dividing sides reach validation.
    cluster: [u8; 3],
    smem: u16,
    maps: [Option<MapDesc>; 2],
    mbarriers: [Option<(u8, u8)>; 3],
    stages: [Option<(u8, u8)>; 2],
    exprs: [ExprDesc; 6],
    roles: [Option<RoleDesc>; 3],
    /// Memory model: transaction-level, line-level or the fixed port.
    memory: u8,
    lrr: bool,
    sms: u8,
    seed: u8,
}

#[derive(Arbitrary, Debug)]
struct MapDesc {
    two_d: bool,
    elem_log2: u8,
    dims: [u16; 2],
    boxdim: [u8; 2],
    base: u16,
}

#[derive(Arbitrary, Debug)]
struct ExprDesc {
    k: i8,
    cta: i8,
    wg: i8,
    l: [i8; 2],
    div: u8,
    rem: u8,
}

#[derive(Arbitrary, Debug)]
struct RoleDesc {
    count: u8,
    regs: u8,
    body: [Option<Op>; 8],
}

/// One instruction; `Loop` opens a loop over the instructions up to the
/// next `End` (or the end of the body). Ids index small tables and may be
/// out of range on purpose: validation must reject those kernels.
#[derive(Arbitrary, Debug)]
enum Op {
    TmaLoad {
        map: u8,
        bar: (u8, u8),
        coords: [u8; 2],
        /// Raw cluster mask: bits past z reach validation.
        multicast: u8,
    },
    TmaStore {
        map: u8,
        coords: [u8; 2],
    },
    BulkLoad {
        bar: (u8, u8),
        addr: u8,
        bytes: u16,
    },
    BulkStore {
        addr: u8,
        bytes: u16,
    },
    StoreWait(u8),
    MbarInit {
        bar: (u8, u8),
        count: u8,
    },
    MbarArrive((u8, u8)),
    MbarExpectTx {
        bar: (u8, u8),
        bytes: u16,
    },
    MbarWait {
        bar: (u8, u8),
        parity: u8,
    },
    StageAcquire((u8, u8)),
    /// A stage and a raw cluster mask.
    StageRelease((u8, u8), u8),
    Wgmma(u8, bool),
    WgmmaCommit,
    WgmmaWait(u8),
    BarSync {
        id: u8,
        wgs: u8,
    },
    BarArrive {
        id: u8,
        wgs: u8,
    },
    Bubble(u8),
    /// Operation counts per unit class: zero, small, and up to 2^32 - 1
    /// (the watchdog bounds how long they may take).
    Compute([u32; 4]),
    Loop(u8),
    End,
    Exit,
    /// Register stores; the segment is raw so that 0 and > 32 reach
    /// validation.
    StGlobal {
        map: u8,
        coords: [u8; 2],
        segment: u8,
    },
    /// Shared-memory moves by threads.
    SmemMove(u16),
    /// Spin locks of the grid: an expression picks the lock (in range or
    /// not); a lock left held deadlocks the CTAs that wait on it.
    LockAcquire(u8),
    LockRelease(u8),
    /// Counters of the grid: expressions pick the counter (in range or
    /// not) and the amount or count; a count never reached deadlocks.
    CounterAdd(u8, u8),
    CounterWait(u8, u8),
    /// Loads by threads; the segment is raw as a store's; through the
    /// L1 or not.
    LdGlobal {
        map: u8,
        bar: (u8, u8),
        coords: [u8; 2],
        segment: u8,
        l1: bool,
    },
}

fn name(s: &str) -> simfa_core::kernel::Name {
    s.try_into().unwrap()
}

fn bar(r: (u8, u8)) -> Ref {
    Ref {
        decl: r.0 % 4,
        idx: (r.1 % 8) as u16,
    }
}

/// The kernel the description stands for, or `None` when it does not fit
/// the fixed capacities.
fn build(d: &Desc) -> Option<Kernel> {
    let mut k = Kernel {
        name: name("fuzz"),
        grid: [d.grid[0] % 4 + 1, d.grid[1] % 3 + 1, d.grid[2] % 2 + 1].map(u32::from),
        smem_bytes: d.smem as u32,
        cluster: simfa_core::Cluster {
            dims: d.cluster.map(|c| if c >= 250 { c } else { c % 5 }),
        },
        ..Kernel::default()
    };
    for m in d.maps.iter().flatten() {
        let elem = 1u8 << (m.elem_log2 % 4);
        let rank = if m.two_d { 2 } else { 1 };
        // The inner box spans a multiple of 16 bytes.
        let unit = (16 / elem as u32).max(1);
        let box0 = unit * (m.boxdim[0] as u32 % (256 / unit) + 1);
        let dims0 = m.dims[0] as u64 % 2048 + 1;
        let row = (dims0 * elem as u64).div_ceil(16) * 16;
        k.maps
            .push(TensorMap {
                name: name("M"),
                base: (m.base as u64) << 4,
                elem_bytes: elem,
                rank,
                dims: [dims0, m.dims[1] as u64 % 256 + 1, 0, 0, 0],
                strides: [elem as u64, row, 0, 0, 0],
                boxdim: [box0, m.boxdim[1] as u32 % 16 + 1, 0, 0, 0],
            })
            .ok()?;
    }
    for &(len, count) in d.mbarriers.iter().flatten() {
        k.mbarriers
            .push(MbarDecl {
                name: name("b"),
                len: (len % 4) as u16 + 1,
                count: (count % 3) as u16 + 1,
            })
            .ok()?;
    }
    for &(len, consumers) in d.stages.iter().flatten() {
        k.stages
            .push(StageDecl {
                name: name("s"),
                len: (len % 4) as u16 + 1,
                consumers: (consumers % 2) as u16 + 1,
            })
            .ok()?;
    }
    for e in &d.exprs {
        let mut x = Expr::constant(e.k as i64);
        x.cta = e.cta as i64 % 4;
        x.wg = e.wg as i64 % 4;
        x.l[0] = e.l[0] as i64 % 4;
        x.l[1] = e.l[1] as i64 % 4;
        x.div = (e.div % 4) as i64;
        x.rem = (e.rem % 5) as i64;
        k.exprs.push(x).ok()?;
    }
    // Expression ids past the table (6) are possible and must be rejected.
    let ex = |v: u8| (v % 8) as u16;
    for r in d.roles.iter().flatten() {
        let start = k.code.len();
        // Deeper nests than MAX_LOOP_DEPTH are left for validation to reject.
        let mut open: Vec<usize> = Vec::new();
        for op in r.body.iter().flatten() {
            let i = match *op {
                Op::TmaLoad {
                    map,
                    bar: b,
                    coords,
                    multicast,
                } => Instr::TmaLoad {
                    map: map % 3,
                    bar: bar(b),
                    coords: [ex(coords[0]), ex(coords[1]), 0, 0, 0],
                    multicast: multicast % 9,
                },
                Op::TmaStore { map, coords } => Instr::TmaStore {
                    map: map % 3,
                    coords: [ex(coords[0]), ex(coords[1]), 0, 0, 0],
                },
                Op::StGlobal {
                    map,
                    coords,
                    segment,
                } => Instr::StGlobal {
                    map: map % 3,
                    coords: [ex(coords[0]), ex(coords[1]), 0, 0, 0],
                    segment: segment % 40,
                },
                Op::LdGlobal {
                    map,
                    bar: b,
                    coords,
                    segment,
                    l1,
                } => Instr::LdGlobal {
                    map: map % 3,
                    bar: bar(b),
                    coords: [ex(coords[0]), ex(coords[1]), 0, 0, 0],
                    segment: segment % 40,
                    l1,
                },
                Op::BulkLoad {
                    bar: b,
                    addr,
                    bytes,
                } => Instr::BulkLoad {
                    bar: bar(b),
                    addr: ex(addr),
                    bytes: bytes as u32 * 16,
                },
                Op::BulkStore { addr, bytes } => Instr::BulkStore {
                    addr: ex(addr),
                    bytes: bytes as u32 * 16,
                },
                Op::StoreWait(n) => Instr::StoreWait { n: n % 4 },
                Op::MbarInit { bar: b, count } => Instr::MbarInit {
                    bar: bar(b),
                    count: (count % 4) as u16,
                },
                Op::MbarArrive(b) => Instr::MbarArrive { bar: bar(b) },
                Op::MbarExpectTx { bar: b, bytes } => Instr::MbarExpectTx {
                    bar: bar(b),
                    bytes: bytes as u32,
                },
                Op::MbarWait { bar: b, parity } => Instr::MbarWait {
                    bar: bar(b),
                    parity: ex(parity),
                },
                Op::StageAcquire(s) => Instr::StageAcquire { stage: bar(s) },
                Op::StageRelease(s, mask) => Instr::StageRelease {
                    stage: bar(s),
                    cluster: mask % 9,
                },
                Op::Wgmma(n, rs) => Instr::Wgmma {
                    n: (n as u16 % 33) * 8,
                    mode: if rs {
                        simfa_core::WgmmaMode::Rs
                    } else {
                        simfa_core::WgmmaMode::Ss
                    },
                },
                Op::WgmmaCommit => Instr::WgmmaCommit,
                Op::WgmmaWait(n) => Instr::WgmmaWait { n: n % 3 },
                Op::BarSync { id, wgs } => Instr::BarSync {
                    id: ex(id),
                    threads: (wgs % 4) as u16 * 128,
                },
                Op::BarArrive { id, wgs } => Instr::BarArrive {
                    id: ex(id),
                    threads: (wgs % 4) as u16 * 128,
                },
                Op::Bubble(c) => Instr::Bubble { cycles: c as u32 },
                Op::SmemMove(b) => Instr::SmemMove { bytes: b as u32 },
                Op::LockAcquire(l) => Instr::LockAcquire { lock: ex(l) },
                Op::LockRelease(l) => Instr::LockRelease { lock: ex(l) },
                Op::CounterAdd(c, n) => Instr::CounterAdd {
                    counter: ex(c),
                    amount: ex(n),
                },
                Op::CounterWait(c, n) => Instr::CounterWait {
                    counter: ex(c),
                    count: ex(n),
                },
                Op::Compute([fp32, mufu, fp16, int]) => Instr::Compute {
                    work: simfa_core::Work {
                        fp32,
                        mufu,
                        fp16,
                        int,
                    },
                },
                Op::Loop(count) => {
                    let at = k.code.len();
                    open.push(at);
                    // The count is an expression; `end` is patched below.
                    Instr::LoopBegin {
                        count: ex(count),
                        end: 0,
                    }
                }
                Op::End => match open.pop() {
                    Some(b) => close(&mut k, b)?,
                    None => continue,
                },
                Op::Exit => Instr::Exit,
            };
            k.code.push(i).ok()?;
        }
        while let Some(b) = open.pop() {
            let i = close(&mut k, b)?;
            k.code.push(i).ok()?;
        }
        k.roles
            .push(Role {
                name: name("r"),
                count: r.count % 3,
                regs: (r.regs as u16 % 32 + 1) * 8,
                start: start as u16,
                len: (k.code.len() - start) as u16,
                stream: false,
            })
            .ok()?;
    }
    Some(k)
}

/// Patches the `LoopBegin` at `begin` to end at the next instruction and
/// returns that `LoopEnd`.
fn close(k: &mut Kernel, begin: usize) -> Option<Instr> {
    let end = k.code.len() as u16;
    if let Instr::LoopBegin { end: e, .. } = &mut k.code[begin] {
        *e = end;
    }
    Some(Instr::LoopEnd {
        begin: begin as u16,
    })
}

fn config(d: &Desc) -> GpuConfig {
    let mut c = GpuConfig::h800();
    c.sms = d.sms as u16 % 2 + 1;
    c.watchdog_cycles = WATCHDOG;
    c.memory = MemoryModel::ALL[d.memory as usize % MemoryModel::ALL.len()];
    c.scheduler = if d.lrr {
        SchedulerPolicy::Lrr
    } else {
        SchedulerPolicy::Gto
    };
    // A small L2 and HBM keep the arena (and each run) small.
    c.l2.slices = 4;
    c.l2.sets = 8;
    c.l2.ways = 4;
    c.dram.channels = 2;
    c.seed = d.seed as u64;
    c
}

/// The outcome of one run: (cycles, digest) or the error, and the steps.
fn run(
    cfg: &GpuConfig,
    k: &Kernel,
    garbage: u8,
    obs: &mut impl simfa_core::Observer,
) -> (Result<(u64, u64), SimError>, u64) {
    let size = Simulator::<simfa_core::NoStream>::arena_size(cfg, k).expect("sizes a valid pair");
    let mut arena = vec![garbage; size];
    let mut sim = Simulator::new(cfg, k, &mut arena).expect("builds a valid pair");
    let mut steps = 0u64;
    let result = loop {
        match sim.step(obs) {
            Ok(Status::Finished) => break Ok((sim.summary().cycles, sim.digest())),
            Ok(Status::Running) => {
                steps += 1;
                // A step simulates at least one new cycle.
                assert!(
                    steps <= WATCHDOG + 2,
                    "{steps} steps: the watchdog did not stop the run"
                );
            }
            Err(e) => break Err(e),
        }
    };
    (result, steps)
}

fuzz_target!(|d: Desc| {
    let Some(k) = build(&d) else { return };
    let cfg = config(&d);
    cfg.validate().expect("the fuzz configuration is valid");
    if k.validate().is_err() || k.check_fits(&cfg).is_err() {
        return;
    }
    let mut checker = ConsistencyChecker::new(&cfg);
    let (a, steps) = run(&cfg, &k, 0, &mut checker);
    for (kind, n) in checker.counts() {
        let kernel_bug = matches!(
            kind,
            ViolationKind::ReadBeforeLanding | ViolationKind::Overwrite
        );
        assert!(
            kernel_bug || n == 0,
            "consistency violation in the simulator: {}",
            checker.summary()
        );
    }
    if let Err(e) = a {
        assert!(
            !matches!(e, SimError::NoProgress { .. }),
            "simulator bug: {e}"
        );
    }
    if let Ok((cycles, _)) = a {
        assert!(
            cycles <= WATCHDOG + 1,
            "finished after the watchdog: {cycles}"
        );
    }
    if std::env::var_os("SIMFA_FUZZ_VERBOSE").is_some() {
        // For choosing seeds and reading crashes: what this input runs.
        eprintln!(
            "{} roles, {} instrs, memory {}: {a:?} in {steps} steps",
            k.roles.len(),
            k.code.len(),
            MemoryModel::ALL[d.memory as usize % MemoryModel::ALL.len()]
        );
    }
    let (b, steps_b) = run(&cfg, &k, 0xa5, &mut ());
    assert_eq!((a, steps), (b, steps_b), "the same run twice differs");
    if let Ok(full) = a {
        assert_eq!(resumed(&cfg, &k, full.0 / 2), full, "save/restore differs");
    }
});

/// Runs to `at`, saves, restores into a fresh arena and finishes.
fn resumed(cfg: &GpuConfig, k: &Kernel, at: u64) -> (u64, u64) {
    let size = Simulator::<simfa_core::NoStream>::arena_size(cfg, k).expect("sizes a valid pair");
    let mut arena = vec![0u8; size];
    let mut sim = Simulator::new(cfg, k, &mut arena).expect("builds a valid pair");
    sim.run_until(simfa_core::Cycle(at), &mut ())
        .expect("the uninterrupted run finished");
    let mut snap = vec![0u8; sim.snapshot_size()];
    let n = sim.save(&mut snap).expect("a snapshot fits its size");
    drop(sim);
    let mut fresh = vec![0x5au8; size];
    let mut sim =
        Simulator::restore(cfg, k, &mut fresh, &snap[..n]).expect("a fresh snapshot restores");
    let s = sim.run(&mut ()).expect("the uninterrupted run finished");
    (s.cycles, s.digest)
}
