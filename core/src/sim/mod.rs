//! The simulator: CTA admission, per-SM scheduling, the event loop.
//!
//! # Execution model
//!
//! Each resident WarpGroup is a physical thread with one instruction stream.
//! Every cycle that has work, the simulator
//! 1. applies every event due at this cycle, in queue order (see
//!    [`crate::queue`]): transfer completions, WGMMA completions, wake-ups;
//! 2. lets each SM with a ready WarpGroup, in ascending SM order, issue one
//!    instruction from the WarpGroup its scheduler picks (greedy-then-oldest
//!    or loose round-robin).
//!
//! Issue is in order per WarpGroup; TMA transfers and WGMMAs complete out of
//! order through the shared event queue. A wait whose condition does not hold
//! stalls its WarpGroup, which is woken by the event that satisfies it, never
//! by polling. Cycles in which no SM can issue are skipped: time jumps to the
//! next queued event.
//!
//! # Memory
//!
//! [`Simulator::arena_size`] gives the exact number of bytes
//! [`Simulator::new`] needs; every table is carved from that one buffer and
//! nothing grows afterwards.

mod big_array;
mod cluster;
mod counter;
mod deadlines;
mod engine;
mod ext;
mod issue;
mod l1;
mod lock;
mod lsu;
mod residency;
mod resolve;
mod snapshot;
mod state;
mod tma;
mod units;
pub mod walk;

use crate::arena::{Arena, Layout};
use crate::config::{GpuConfig, MemoryModel};
use crate::digest::Digest;
use crate::error::{BuildError, Capacity, KernelError, SimError};
use crate::external::{ExternalPort, Slot as ExtSlot};
use crate::kernel::{Kernel, NAMED_BARRIERS};
use crate::mem::config::{ArrivalController, TxnConfig};
use crate::mem::lines::max_box_lines;
use crate::mem::system::{MemStats, MemorySystem};
use crate::mem::txn::TxnMemory;
use crate::observer::{Event, Observer, Stats, Who};
use crate::port::{FixedPort, MemoryPort};
use crate::source::{NoStream, StreamSource};
use crate::time::Cycle;
use crate::wait::WaitReason;
use crate::wheel::TimingWheel;

use deadlines::Deadlines;
use engine::TmaTables;
use state::{Cta, Ev, Mbar, Named, Sm, Stage, TState, Thread};
use tma::{Dedup, Engine, TmaOp};

/// Slots of the shared event queue's timing wheel: WGMMA completions,
/// wake-ups after bubbles and TMA ticks almost all fall within it; later
/// events go to its overflow heap, in the same order.
const QUEUE_HORIZON_LOG2: u32 = 12;

pub use snapshot::fingerprint;

/// The memory behind the TMA engines. The hierarchy variants are large,
/// but the core has no heap to box them in, and there is one per simulator.
#[allow(clippy::large_enum_variant)]
pub(crate) enum Mem<'a> {
    /// The fixed-latency, fixed-bandwidth port.
    Fixed(FixedPort<'a>),
    /// The line-level L2 / DRAM hierarchy, fed line by line by the TMA
    /// engines of `engine.rs`.
    Line(MemorySystem<'a>),
    /// The transaction-level hierarchy, handed whole operations.
    Txn(TxnMemory<'a>),
    /// The host's memory, through the request queue of [`crate::external`].
    External(ExternalPort<'a>),
}

/// Where a run stands after a call.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Status {
    /// More work remains.
    Running,
    /// Every CTA has retired.
    Finished,
}

/// The outcome of a finished run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Summary {
    /// Kernel duration in cycles: from cycle 0 to the end of the last
    /// instruction or transfer.
    pub cycles: u64,
    /// Digest of the canonical event stream.
    pub digest: u64,
    /// Counters.
    pub stats: Stats,
    /// Memory-hierarchy counters (`None` with the fixed port).
    pub memory: Option<MemStats>,
}

/// A WarpGroup that is waiting, as listed in a deadlock report.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Waiter {
    /// SM.
    pub sm: u16,
    /// Linear CTA index.
    pub cta: u32,
    /// Role index (see [`Kernel::roles`]).
    pub role: u8,
    /// WarpGroup index within the role.
    pub wg_in_role: u8,
    /// What it waits on.
    pub reason: WaitReason,
}

/// Whether a run of `kernel` on `cfg` lands its loads by the
/// arrival-order controller: the transaction model with
/// `transaction.arrival_controller` on, or `"auto"` and a memory-bound
/// kernel ([`crate::analytic::memory_bound`]) or a grid of fewer CTAs
/// than SMs. Less than a wave, no CTA waits for an SM, so each one's time
/// is the chain of its own loads' latencies, and the service model's
/// hand-over order (a chunk's lines booked before the next SM's that
/// reach the DRAM at the same time) shows in it; such a run is short.
pub fn lands_by_arrival(cfg: &GpuConfig, kernel: &Kernel) -> bool {
    cfg.memory == MemoryModel::Transaction
        && match cfg.transaction.arrival_controller {
            ArrivalController::On => true,
            ArrivalController::Off => false,
            ArrivalController::Auto => {
                kernel.ctas() < cfg.sms as u64 || crate::analytic::memory_bound(cfg, kernel)
            }
        }
}

/// Table sizes derived from a (config, kernel) pair.
#[derive(Clone, Copy, Debug)]
struct Plan {
    sms: usize,
    cta_slots: usize,
    wgs: usize,
    nbar: usize,
    nstage: usize,
    queue: usize,
    model: MemoryModel,
    /// TMA operation slots per SM.
    tma_slots: usize,
    /// Dedup-set capacity per SM (hierarchy modes).
    dcap: usize,
    /// The transaction model's parameters, its arrival-order controller
    /// policy resolved for this kernel to on or off.
    txn: TxnConfig,
    /// Sets and ways of each SM's L1 (no ways: no L1 tables).
    l1: (usize, usize),
}

impl Plan {
    fn new(cfg: &GpuConfig, k: &Kernel) -> Result<Plan, BuildError> {
        cfg.validate()?;
        k.validate()?;
        k.check_fits(cfg)?;
        let wgs = k.wgs_per_cta();
        // The admission rule the analytic model states.
        let cta_slots = crate::analytic::resident_ctas(cfg, k) as usize;
        let sms = cfg.sms as usize;
        let threads = sms * cta_slots * wgs;
        // Every thread has at most one pending wake-up; every SM at most
        // `wgmma_buffer` WGMMAs and `tma_slots` transfers in flight.
        // In hierarchy mode every SM also has at most one engine tick queued.
        // A kernel that may release locks has at most one release of each
        // on its way to the L2.
        // Likewise at most one landing of adds to each counter.
        // (A streamed role may issue anything.)
        let stream = k.roles.iter().any(|r| r.stream);
        let may = |f: fn(&crate::Instr) -> bool| stream || k.code.iter().any(f);
        let locks = may(|i| matches!(i, crate::Instr::LockRelease { .. }));
        let counters = may(|i| matches!(i, crate::Instr::CounterAdd { .. }));
        let queue = threads
            + sms * (cfg.wgmma_buffer as usize + cfg.tma_slots as usize + 1)
            + if locks { crate::kernel::MAX_LOCKS } else { 0 }
            + if counters {
                crate::kernel::MAX_COUNTERS
            } else {
                0
            };
        // An L1 only for a kernel that may load through it, sized by what
        // its resident CTAs' shared memory leaves.
        let l1_ways = if may(|i| matches!(i, crate::Instr::LdGlobal { l1: true, .. })) {
            let smem = k.smem_bytes as u64 * cta_slots as u64;
            l1::ways(&cfg.l1, l1::l1_bytes(&cfg.l1, smem))
        } else {
            0
        };
        let lb = cfg.l2.line_bytes as u64;
        let most = k
            .maps
            .iter()
            .map(|m| max_box_lines(m, lb).unwrap_or(u64::MAX))
            .max()
            .unwrap_or(1);
        let dcap = most.min(cfg.tma.dedup_lines as u64).max(1) as usize;
        let arrival = lands_by_arrival(cfg, k);
        let txn = TxnConfig {
            arrival_controller: if arrival {
                ArrivalController::On
            } else {
                ArrivalController::Off
            },
            ..cfg.transaction
        };
        Ok(Plan {
            sms,
            cta_slots,
            wgs,
            nbar: k.mbarriers_per_cta(),
            nstage: k.stages_per_cta(),
            queue,
            model: cfg.memory,
            tma_slots: cfg.tma_slots as usize,
            dcap,
            txn,
            l1: (cfg.l1.sets as usize, l1_ways),
        })
    }

    /// Lines of the SMs' L1s.
    fn l1_lines(&self) -> usize {
        self.sms * self.l1.0 * self.l1.1
    }

    fn threads(&self) -> usize {
        self.sms * self.cta_slots * self.wgs
    }

    fn ctas(&self) -> usize {
        self.sms * self.cta_slots
    }

    fn layout(&self) -> Result<Layout, BuildError> {
        let mut l = Layout::new();
        l.add::<Thread>(self.threads())?;
        l.add::<Cta>(self.ctas())?;
        l.add::<Mbar>(self.ctas() * self.nbar)?;
        l.add::<Stage>(self.ctas() * self.nstage)?;
        l.add::<Named>(self.ctas() * NAMED_BARRIERS)?;
        l.add::<Sm>(self.sms)?;
        l.add::<u64>(self.sms.div_ceil(64))?;
        TimingWheel::<Ev>::layout(self.queue, QUEUE_HORIZON_LOG2, &mut l)?;
        l.add::<u64>(self.sms)?;
        l.add::<u64>(self.sms)?;
        l.add::<u16>(Deadlines::leaves_for(self.sms))?;
        if self.l1.1 > 0 {
            l.add::<l1::L1Line>(self.l1_lines())?;
            l.add::<l1::L1Fill>(self.sms * self.tma_slots)?;
            l.add::<u32>(self.sms)?;
        }
        Ok(l)
    }

    fn layout_mem(&self, cfg: &GpuConfig, l: &mut Layout) -> Result<(), BuildError> {
        match self.model {
            MemoryModel::Fixed => return Ok(()),
            MemoryModel::External => {
                let cap = self.sms * self.tma_slots;
                l.add::<ExtSlot>(cap)?;
                return l.add::<u32>(cap);
            }
            MemoryModel::Transaction => {
                engine::Handover::layout(self.sms * self.tma_slots, l)?;
                return TxnMemory::layout(
                    &cfg.l2,
                    &cfg.dram,
                    &self.txn,
                    cfg.sms,
                    self.dcap,
                    self.sms * self.tma_slots,
                    l,
                );
            }
            MemoryModel::Line => {}
        }
        let ops = self.sms * self.tma_slots;
        l.add::<TmaOp>(ops)?;
        l.add::<u16>(ops)?;
        l.add::<Engine>(self.sms)?;
        l.add::<u64>(self.sms * Dedup::slots_for(self.dcap))?;
        l.add::<u32>(self.sms * self.dcap)?;
        l.add::<u32>(self.sms)?;
        l.add::<u32>(self.sms * cfg.tma.max_lines as usize)?;
        MemorySystem::layout(&cfg.l2, &cfg.dram, cfg.sms, cfg.tma.max_lines, l)
    }
}

/// A cycle-level simulation of one kernel on one GPU, built in a
/// caller-provided arena.
pub struct Simulator<'a, S: StreamSource = NoStream> {
    cfg: GpuConfig,
    kernel: &'a Kernel,
    source: S,
    plan: Plan,
    now: u64,
    end: u64,
    threads: &'a mut [Thread],
    ctas: &'a mut [Cta],
    mbars: &'a mut [Mbar],
    stages: &'a mut [Stage],
    named: &'a mut [Named],
    sms: &'a mut [Sm],
    active: &'a mut [u64],
    queue: TimingWheel<'a, Ev>,
    /// Per-SM change points of the shared SIMT units.
    deadlines: Deadlines<'a>,
    /// The unit rates of recent phase mixes (a cache; not state).
    rate_memo: units::RateMemo,
    mem: Mem<'a>,
    /// This cycle's operations for the transaction-level memory.
    handover: engine::Handover<'a>,
    tma: Option<TmaTables<'a>>,
    next_cta: u32,
    total_ctas: u32,
    retired: u32,
    age: u64,
    digest: Digest,
    stats: Stats,
    status: Status,
    /// The grid's spin locks.
    locks: lock::Locks,
    /// The grid's counters.
    counters: counter::Counters,
    /// The SMs' L1 data caches (`None` when no load of the kernel can use
    /// one, or the configuration has none).
    l1: Option<l1::L1Tables<'a>>,
}

impl<'a> Simulator<'a, NoStream> {
    /// Builds a simulator for a kernel without stream roles.
    pub fn new(
        cfg: &GpuConfig,
        kernel: &'a Kernel,
        arena: &'a mut [u8],
    ) -> Result<Self, BuildError> {
        Simulator::with_source(cfg, kernel, arena, NoStream)
    }
}

impl<'a, S: StreamSource> Simulator<'a, S> {
    /// Bytes of arena [`Simulator::new`] needs for this pair; independent of
    /// the buffer's alignment.
    pub fn arena_size(cfg: &GpuConfig, kernel: &Kernel) -> Result<usize, BuildError> {
        let plan = Plan::new(cfg, kernel)?;
        let mut l = plan.layout()?;
        plan.layout_mem(cfg, &mut l)?;
        Ok(l.bytes())
    }

    /// Builds a simulator whose stream roles pull from `source`.
    pub fn with_source(
        cfg: &GpuConfig,
        kernel: &'a Kernel,
        arena: &'a mut [u8],
        source: S,
    ) -> Result<Self, BuildError> {
        let plan = Plan::new(cfg, kernel)?;
        if !source.is_present() {
            if let Some(i) = kernel.roles.iter().position(|r| r.stream) {
                return Err(KernelError::NoStreamSource { role: i as u8 }.into());
            }
        }
        let mut layout = plan.layout()?;
        plan.layout_mem(cfg, &mut layout)?;
        let need = layout.bytes();
        if arena.len() < need {
            return Err(BuildError::ArenaTooSmall {
                table: Capacity::Arena,
                available: arena.len(),
            });
        }
        let mut a = Arena::new(arena);
        let threads = a.alloc(plan.threads(), Thread::EMPTY, Capacity::Threads)?;
        let ctas = a.alloc(plan.ctas(), Cta::EMPTY, Capacity::Ctas)?;
        let mbars = a.alloc(plan.ctas() * plan.nbar, Mbar::EMPTY, Capacity::Mbarriers)?;
        let stages = a.alloc(plan.ctas() * plan.nstage, Stage::EMPTY, Capacity::Stages)?;
        let named = a.alloc(
            plan.ctas() * NAMED_BARRIERS,
            Named::EMPTY,
            Capacity::NamedBarriers,
        )?;
        let sms = a.alloc(plan.sms, Sm::EMPTY, Capacity::Sms)?;
        let active = a.alloc(plan.sms.div_ceil(64), 0u64, Capacity::Sms)?;
        let queue =
            TimingWheel::new_in(&mut a, plan.queue, QUEUE_HORIZON_LOG2, Capacity::EventQueue)?;
        let port_store = a.alloc(plan.sms, 0u64, Capacity::MemoryPort)?;
        let deadlines = Deadlines::new(
            a.alloc(plan.sms, deadlines::NONE, Capacity::Sms)?,
            a.alloc(Deadlines::leaves_for(plan.sms), 0u16, Capacity::Sms)?,
        );
        let l1 = match plan.l1 {
            (sets, ways) if ways > 0 => Some(l1::L1Tables {
                lines: a.alloc(plan.l1_lines(), l1::L1Line::EMPTY, Capacity::Sms)?,
                fills: a.alloc(plan.sms * plan.tma_slots, l1::L1Fill::EMPTY, Capacity::Sms)?,
                clock: a.alloc(plan.sms, 0u32, Capacity::Sms)?,
                sets,
                ways,
                fills_per_sm: plan.tma_slots,
            }),
            _ => None,
        };
        let handover = engine::Handover::new_in(
            match plan.model {
                MemoryModel::Transaction => plan.sms * plan.tma_slots,
                _ => 0,
            },
            &mut a,
        )?;
        let (mem, tma) = if plan.model == MemoryModel::Transaction {
            let mem = TxnMemory::new(
                &cfg.l2,
                &cfg.dram,
                &cfg.tma,
                &plan.txn,
                cfg.sms,
                plan.dcap,
                plan.sms * plan.tma_slots,
                cfg.seed,
                &mut a,
            )?
            .with_early_hits(cfg.fault == crate::config::Fault::EarlyHit);
            (Mem::Txn(mem), None)
        } else if plan.model == MemoryModel::Line {
            let ops = plan.sms * plan.tma_slots;
            let tables = TmaTables {
                ops: a.alloc(ops, TmaOp::EMPTY, Capacity::MemoryPort)?,
                order: a.alloc(ops, 0u16, Capacity::MemoryPort)?,
                engines: a.alloc(plan.sms, Engine::EMPTY, Capacity::MemoryPort)?,
                dslots: a.alloc(
                    plan.sms * Dedup::slots_for(plan.dcap),
                    u64::MAX,
                    Capacity::MemoryPort,
                )?,
                dused: a.alloc(plan.sms * plan.dcap, 0u32, Capacity::MemoryPort)?,
                dlen: a.alloc(plan.sms, 0u32, Capacity::MemoryPort)?,
                returned: a.alloc(
                    plan.sms * cfg.tma.max_lines as usize,
                    0u32,
                    Capacity::MemoryPort,
                )?,
                slots: plan.tma_slots,
                dcap: plan.dcap,
                dslot_n: Dedup::slots_for(plan.dcap),
            };
            let mem = MemorySystem::new(
                &cfg.l2,
                &cfg.dram,
                cfg.sms,
                cfg.tma.max_lines,
                cfg.seed,
                &mut a,
            )?
            .with_early_hits(cfg.fault == crate::config::Fault::EarlyHit);
            (Mem::Line(mem), Some(tables))
        } else if plan.model == MemoryModel::External {
            let cap = plan.sms * plan.tma_slots;
            let slots = a.alloc(cap, ExtSlot::EMPTY, Capacity::MemoryPort)?;
            let fifo = a.alloc(cap, 0u32, Capacity::MemoryPort)?;
            (Mem::External(ExternalPort::new(slots, fifo)), None)
        } else {
            (Mem::Fixed(FixedPort::new(cfg.port, port_store)), None)
        };
        let total = kernel.ctas() as u32;
        let sim = Simulator {
            cfg: cfg.clone(),
            kernel,
            source,
            plan,
            now: 0,
            end: 0,
            threads,
            ctas,
            mbars,
            stages,
            named,
            sms,
            active,
            queue,
            deadlines,
            rate_memo: units::RateMemo::new(),
            mem,
            handover,
            tma,
            next_cta: 0,
            total_ctas: total,
            retired: 0,
            age: 0,
            digest: Digest::new(),
            stats: Stats {
                first_wgmma: u64::MAX,
                ..Stats::default()
            },
            status: Status::Running,
            locks: lock::Locks::default(),
            counters: counter::Counters::default(),
            l1,
        };
        for (i, c) in sim.ctas.iter_mut().enumerate() {
            c.sm = (i / plan.cta_slots) as u16;
        }
        Ok(sim)
    }

    /// The configuration.
    pub fn config(&self) -> &GpuConfig {
        &self.cfg
    }

    /// The kernel.
    pub fn kernel(&self) -> &'a Kernel {
        self.kernel
    }

    /// The current cycle: the next cycle [`Simulator::step`] will simulate
    /// if something happens in it.
    pub fn now(&self) -> Cycle {
        Cycle(self.now)
    }

    /// The cycle of the next activity: now if some SM can issue, else the
    /// next queued event; `None` when finished or nothing is pending.
    pub fn next_event_cycle(&self) -> Option<Cycle> {
        if self.status == Status::Finished {
            return None;
        }
        if self.any_active() {
            return Some(Cycle(self.now));
        }
        self.next_queued().map(|c| Cycle(c.max(self.now)))
    }

    /// The earliest cycle of the event queue, the SMs' unit deadlines and
    /// the memory system.
    fn next_queued(&self) -> Option<u64> {
        let q = self.queue.next_cycle();
        let m = match &self.mem {
            Mem::Line(m) => m.next_event(),
            Mem::Fixed(_) | Mem::Txn(_) | Mem::External(_) => None,
        };
        let u = self.deadlines.first().map(|(c, _)| c);
        [q, m, u].into_iter().flatten().min()
    }

    /// Where the run stands.
    pub fn status(&self) -> Status {
        self.status
    }

    /// Counters so far.
    pub fn stats(&self) -> Stats {
        let mut s = self.stats;
        if let Mem::Fixed(p) = &self.mem {
            s.port_busy_cycles = p.busy_cycles();
        }
        s
    }

    /// Counters of the memory hierarchy (`None` with the fixed port).
    pub fn mem_stats(&self) -> Option<MemStats> {
        match &self.mem {
            Mem::Txn(m) => Some(m.stats()),
            Mem::Line(m) => {
                let mut st = m.stats();
                let d = m.dram().stats();
                st.dram_read_bytes = d.reads * m.dram().config().line_bytes as u64;
                st.dram_write_bytes = d.writes * m.dram().config().line_bytes as u64;
                st.dram_row_hits = d.row_hits;
                Some(st)
            }
            Mem::Fixed(_) | Mem::External(_) => None,
        }
    }

    /// Digest of the events so far.
    pub fn digest(&self) -> u64 {
        self.digest.value()
    }

    /// CTAs retired so far, and in all.
    pub fn progress(&self) -> (u32, u32) {
        (self.retired, self.total_ctas)
    }

    /// The outcome so far (final once [`Status::Finished`]).
    pub fn summary(&self) -> Summary {
        Summary {
            cycles: self.end,
            digest: self.digest(),
            stats: self.stats(),
            memory: self.mem_stats(),
        }
    }

    /// Every WarpGroup currently waiting, in SM and slot order.
    pub fn waiters(&self) -> impl Iterator<Item = Waiter> + use<'_, 'a, S> {
        self.threads.iter().filter_map(move |t| match t.state {
            TState::Waiting(reason) => Some(Waiter {
                sm: t.sm,
                cta: self.ctas[t.cta as usize].cta,
                role: t.role,
                wg_in_role: t.wg_in_role,
                reason,
            }),
            _ => None,
        })
    }

    /// Simulates the next cycle in which something happens (skipping idle
    /// cycles). Returns [`Status::Finished`] once every CTA has retired.
    pub fn step(&mut self, obs: &mut impl Observer) -> Result<Status, SimError> {
        if self.status == Status::Finished {
            return Ok(Status::Finished);
        }
        if self.now == 0 && self.next_cta == 0 {
            self.admit_all(obs)?;
        }
        if !self.any_active() {
            match self.next_queued() {
                Some(c) => self.now = self.now.max(c),
                // Only the host's answers can move the run on.
                None if self.ext_outstanding() > 0 => return Ok(Status::Running),
                None => return self.finish_or_deadlock(),
            }
        }
        if self.now > self.cfg.watchdog_cycles {
            return Err(SimError::Watchdog {
                limit: self.cfg.watchdog_cycles,
            });
        }
        self.drain_memory(obs)?;
        while let Some(e) = self.queue.pop_due(self.now) {
            self.apply(e.event, obs)?;
        }
        while let Some((at, sm)) = self.deadlines.first() {
            if at > self.now {
                break;
            }
            self.fire_units(sm, obs)?;
        }
        let words = self.active.len();
        for w in 0..words {
            let mut bits = self.active[w];
            while bits != 0 {
                let b = bits.trailing_zeros() as usize;
                bits &= bits - 1;
                self.issue_on(w * 64 + b, obs)?;
            }
        }
        self.hand_over(obs)?;
        self.now += 1;
        if self.retired == self.total_ctas {
            self.status = Status::Finished;
        }
        Ok(self.status)
    }

    /// Steps until the next activity would lie after `cycle`, or the run ends.
    pub fn run_until(&mut self, cycle: Cycle, obs: &mut impl Observer) -> Result<Status, SimError> {
        loop {
            if self.status == Status::Finished {
                return Ok(Status::Finished);
            }
            if self.now == 0 && self.next_cta == 0 {
                self.admit_all(obs)?;
            }
            match self.next_event_cycle() {
                Some(c) if c <= cycle => {
                    self.step(obs)?;
                }
                Some(_) => return Ok(Status::Running),
                None => return self.step(obs),
            }
        }
    }

    /// Runs to the end and returns the summary. With the external memory
    /// model a host must answer the requests: `run` fails with
    /// [`SimError::ExternalPending`] when the run waits on nothing else.
    pub fn run(&mut self, obs: &mut impl Observer) -> Result<Summary, SimError> {
        while self.step(obs)? == Status::Running {
            if self.ext_outstanding() > 0 && self.next_event_cycle().is_none() {
                return Err(SimError::ExternalPending {
                    cycle: self.now,
                    outstanding: self.ext_outstanding() as u32,
                });
            }
        }
        Ok(self.summary())
    }

    fn finish_or_deadlock(&mut self) -> Result<Status, SimError> {
        if self.retired == self.total_ctas {
            self.status = Status::Finished;
            return Ok(Status::Finished);
        }
        let waiting = self.waiters().count() as u32;
        let first = self.waiters().next();
        match first {
            Some(w) => Err(SimError::Deadlock {
                cycle: self.now,
                waiting,
                cta: w.cta,
                role: w.role,
                reason: w.reason,
            }),
            // Nothing waits and nothing is queued, yet CTAs remain: an
            // internal inconsistency, reported rather than hidden.
            None => Err(SimError::NoProgress {
                cycle: self.now,
                unfinished: self.total_ctas.saturating_sub(self.retired),
            }),
        }
    }

    fn any_active(&self) -> bool {
        self.active.iter().any(|&w| w != 0)
    }

    fn set_active(&mut self, sm: usize, on: bool) {
        let bit = 1u64 << (sm % 64);
        if on {
            self.active[sm / 64] |= bit;
        } else {
            self.active[sm / 64] &= !bit;
        }
    }

    fn emit(&mut self, obs: &mut impl Observer, ev: Event) {
        self.emit_at(self.now, obs, ev);
    }

    /// Emits an event that happened at `cycle` (not necessarily now).
    fn emit_at(&mut self, cycle: u64, obs: &mut impl Observer, ev: Event) {
        emit(&mut self.digest, cycle, obs, ev);
    }

    /// Delivers a detail event (never folded into the digest). Callers
    /// check [`Observer::wants_detail`] before building one.
    fn detail(cycle: u64, obs: &mut impl Observer, ev: Event) {
        debug_assert!(ev.is_detail());
        obs.on_event(Cycle(cycle), &ev);
    }

    fn who(&self, t: usize) -> Who {
        let th = &self.threads[t];
        Who {
            sm: th.sm,
            cta: self.ctas[th.cta as usize].cta,
            wg: th.wg,
            role: th.role,
        }
    }

    fn push(&mut self, cycle: u64, ev: Ev) -> Result<(), SimError> {
        self.queue
            .push(cycle, ev.class(), ev)
            .map_err(|_| SimError::CapacityExceeded {
                capacity: Capacity::EventQueue,
                cycle: self.now,
            })
    }

    fn make_ready(&mut self, ti: usize) {
        let t = &mut self.threads[ti];
        t.state = TState::Ready;
        let (sm, slot) = (t.sm as usize, t.slot);
        self.sms[sm].ready |= 1 << slot;
        self.set_active(sm, true);
    }

    fn make_unready(&mut self, ti: usize, state: TState) {
        let t = &mut self.threads[ti];
        t.state = state;
        let (sm, slot) = (t.sm as usize, t.slot);
        self.sms[sm].ready &= !(1 << slot);
        if self.sms[sm].ready == 0 {
            self.set_active(sm, false);
        }
    }

    /// Wakes the WarpGroups of CTA slot `ci` whose wait matches `pred`.
    fn wake_cta(&mut self, ci: usize, obs: &mut impl Observer, pred: impl Fn(WaitReason) -> bool) {
        let first = ci * self.plan.wgs;
        for ti in first..first + self.plan.wgs {
            if let TState::Waiting(r) = self.threads[ti].state {
                if pred(r) {
                    self.wake(ti, obs);
                }
            }
        }
    }

    /// Wakes the WarpGroups of SM `sm` whose wait matches `pred`.
    fn wake_sm(&mut self, sm: usize, obs: &mut impl Observer, pred: impl Fn(WaitReason) -> bool) {
        let per = self.plan.cta_slots * self.plan.wgs;
        for ti in sm * per..(sm + 1) * per {
            if let TState::Waiting(r) = self.threads[ti].state {
                if pred(r) {
                    self.wake(ti, obs);
                }
            }
        }
    }

    fn wake(&mut self, ti: usize, obs: &mut impl Observer) {
        let since = self.threads[ti].since;
        self.stats.stall_cycles += self.now - since;
        self.make_ready(ti);
        let who = self.who(ti);
        self.emit(obs, Event::Wake { who });
    }
}

/// Folds canonical event `ev` at `cycle` into `digest` and hands it to the
/// observer: the one way an event enters the digest.
fn emit(digest: &mut Digest, cycle: u64, obs: &mut impl Observer, ev: Event) {
    debug_assert!(!ev.is_detail());
    digest.fold_event(cycle, &ev.digest_words());
    obs.on_event(Cycle(cycle), &ev);
}
