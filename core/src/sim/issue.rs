//! The issue unit and the engines: fetch and resolve, execute, stall, and
//! apply completions.

use super::cluster::{landing_code, split};
use super::state::{Ev, TState, GROUP_RING};
use super::walk::{control, Control};
use super::Simulator;
use crate::config::{Fault, SchedulerPolicy};
use crate::error::{Capacity, SimError};
use crate::isa::{EvalCtx, Op, MAX_LOOP_DEPTH};
use crate::kernel::{Kernel, NAMED_BARRIERS, WG_THREADS};
use crate::observer::{Event, Observer};
use crate::port::MemoryPort;
use crate::source::StreamSource;
use crate::transfer::{Direction, Shape, Transfer};
use crate::wait::WaitReason;

/// Control instructions (loop begin/end) resolved per issue attempt; a
/// thread that needs more spends the cycle and continues next cycle, so no
/// program can spin without time passing.
const CONTROL_BUDGET: u32 = 4 * MAX_LOOP_DEPTH as u32;

/// What issuing an instruction did to its WarpGroup.
pub(super) enum Outcome {
    /// Issued; the next instruction may issue next cycle.
    Next,
    /// Not issued: the WarpGroup stalls and retries it when woken.
    Stall(WaitReason),
    /// Issued, then the WarpGroup waits (named-barrier sync).
    NextThenWait(WaitReason),
    /// Issued; the WarpGroup sleeps until the given cycle.
    Sleep(u64),
    /// Issued; the WarpGroup's register stores leave the SM's store path
    /// until the given cycle, and it waits for them.
    Storing(u64),
    /// Issued; the WarpGroup runs a `compute` on the SM's shared units
    /// until they wake it.
    Compute,
    /// The WarpGroup exited.
    Exit,
}

impl<'a, S: StreamSource> Simulator<'a, S> {
    /// Picks one ready WarpGroup on `sm` and issues its next instruction.
    pub(super) fn issue_on(&mut self, sm: usize, obs: &mut impl Observer) -> Result<(), SimError> {
        let ready = self.sms[sm].ready;
        if ready == 0 {
            return Ok(());
        }
        let per = self.plan.cta_slots * self.plan.wgs;
        let base = sm * per;
        let last = self.sms[sm].last as u32;
        let slot = match self.cfg.scheduler {
            SchedulerPolicy::Gto if last < 32 && ready & (1 << last) != 0 => last,
            SchedulerPolicy::Gto => {
                let mut best = u32::MAX;
                let mut best_age = u64::MAX;
                let mut bits = ready;
                while bits != 0 {
                    let b = bits.trailing_zeros();
                    bits &= bits - 1;
                    let age = self.threads[base + b as usize].age;
                    if age < best_age {
                        best_age = age;
                        best = b;
                    }
                }
                best
            }
            SchedulerPolicy::Lrr => {
                // The first ready slot strictly after the last one, wrapping.
                let after = if last < 31 {
                    ready & !mask(last as usize + 1)
                } else {
                    0
                };
                if after != 0 {
                    after.trailing_zeros()
                } else {
                    ready.trailing_zeros()
                }
            }
        };
        self.sms[sm].last = slot as u8;
        self.issue(base + slot as usize, obs)
    }

    fn issue(&mut self, ti: usize, obs: &mut impl Observer) -> Result<(), SimError> {
        // A fetched instruction is kept as pending only when it stalls:
        // its loop control has run, and it is what the WarpGroup retries.
        let (op, fetched) = match self.threads[ti].pending {
            Some(op) => (op, false),
            None => match self.fetch(ti)? {
                Some(op) => (op, true),
                None => return Ok(()), // control budget spent this cycle
            },
        };
        let outcome = self.execute(ti, &op, obs)?;
        let who = self.who(ti);
        match outcome {
            Outcome::Stall(reason) => {
                if fetched {
                    self.threads[ti].pending = Some(op);
                }
                self.threads[ti].since = self.now;
                self.make_unready(ti, TState::Waiting(reason));
                self.emit(obs, Event::Stall { who, reason });
                return Ok(());
            }
            _ => {
                self.stats.instructions += 1;
                self.emit(obs, Event::Issue { who, op });
                self.advance(ti);
            }
        }
        match outcome {
            Outcome::Next | Outcome::Stall(_) => {}
            Outcome::NextThenWait(reason) => {
                self.threads[ti].since = self.now;
                self.make_unready(ti, TState::Waiting(reason));
                self.emit(obs, Event::Stall { who, reason });
            }
            Outcome::Sleep(until) | Outcome::Storing(until) => {
                if matches!(outcome, Outcome::Sleep(_)) {
                    self.stats.bubble_cycles += until - self.now;
                }
                self.threads[ti].since = until;
                self.make_unready(ti, TState::Sleeping);
                self.push(until, Ev::Wake { thread: ti as u32 })?;
            }
            Outcome::Compute => {
                self.threads[ti].since = self.now;
                self.make_unready(ti, TState::Computing);
                let sm = self.threads[ti].sm as usize;
                self.reschedule_units(sm);
            }
            Outcome::Exit => {
                self.make_unready(ti, TState::Done);
                self.end = self.end.max(self.now + 1);
                let ci = self.threads[ti].cta as usize;
                self.ctas[ci].left -= 1;
                self.maybe_retire(ci, obs)?;
            }
        }
        Ok(())
    }

    /// Moves past the issued instruction.
    fn advance(&mut self, ti: usize) {
        let t = &mut self.threads[ti];
        t.pending = None;
        if self.kernel.roles[t.role as usize].stream {
            t.stream_pos += 1;
        } else {
            t.pc += 1;
        }
    }

    /// Resolves the thread's next instruction, running loop control.
    /// `None` when the control budget ran out this cycle.
    fn fetch(&mut self, ti: usize) -> Result<Option<Op>, SimError> {
        let k: &Kernel = self.kernel;
        let t = self.threads[ti];
        let role = &k.roles[t.role as usize];
        let cta = &self.ctas[t.cta as usize];
        if role.stream {
            return match self
                .source
                .pull(cta.cta, t.role, t.wg_in_role, t.stream_pos)
            {
                Ok(Some(op)) if k.op_fits(&op) => Ok(Some(op)),
                Ok(None) => Ok(Some(Op::Exit)),
                Ok(Some(_)) | Err(_) => Err(SimError::Source {
                    cta: cta.cta,
                    role: t.role,
                }),
            };
        }
        let end = role.start as usize + role.len as usize;
        let mut ctx = EvalCtx {
            cta: cta.cta,
            c: cta.coords,
            wg: t.wg_in_role,
            l: [0; MAX_LOOP_DEPTH],
        };
        let th = &mut self.threads[ti];
        let at = control(
            k,
            end,
            &mut th.pc,
            &mut th.depth,
            &mut th.loops,
            &mut ctx,
            CONTROL_BUDGET,
        )
        .map_err(|_| SimError::Inconsistent {
            what: "loop nesting",
            cycle: self.now,
        })?;
        Ok(match at {
            Control::At(pc) => Some(super::resolve::resolve(k, &k.code[pc], &ctx)),
            Control::End => Some(Op::Exit),
            Control::Budget => None,
        })
    }

    pub(super) fn bar_index(
        &self,
        ti: usize,
        bar: u16,
        what: &'static str,
        len: usize,
    ) -> Result<usize, SimError> {
        if (bar as usize) < len && bar != u16::MAX {
            Ok(bar as usize)
        } else {
            let t = &self.threads[ti];
            Err(SimError::IndexOutOfRange {
                what,
                index: bar as i64,
                cta: self.ctas[t.cta as usize].cta,
                role: t.role,
                cycle: self.now,
            })
        }
    }

    fn execute(
        &mut self,
        ti: usize,
        op: &Op,
        obs: &mut impl Observer,
    ) -> Result<Outcome, SimError> {
        let t = self.threads[ti];
        let ci = t.cta as usize;
        let sm = t.sm as usize;
        let now = self.now;
        Ok(match *op {
            Op::TmaLoad {
                map,
                bar,
                coords,
                multicast,
            } => {
                let b = self.bar_index(ti, bar, "mbarrier", self.plan.nbar)?;
                let kernel = self.kernel;
                let m = &kernel.maps[map as usize];
                // As on the hardware, a load fills the whole box in shared
                // memory (out-of-bounds elements with zeros) and completes
                // the full box's transaction bytes, so a constant
                // `expect_tx` serves edge tiles; only the in-bounds part
                // generates memory traffic.
                let bytes = m.full_box_bytes();
                let setup = self.cfg.tma_setup_common as u64 + self.cfg.tma_setup_tensor as u64;
                self.start_transfer(
                    ti,
                    landing_code(b as u16, multicast),
                    Direction::Load,
                    Shape::Tensor { map: m, coords },
                    bytes,
                    setup,
                    None,
                    obs,
                )?
            }
            Op::TmaStore { map, coords } => {
                let kernel = self.kernel;
                let m = &kernel.maps[map as usize];
                let bytes = m.box_bytes(&coords);
                let setup = self.cfg.tma_setup_common as u64 + self.cfg.tma_setup_tensor as u64;
                self.start_transfer(
                    ti,
                    u16::MAX,
                    Direction::Store,
                    Shape::Tensor { map: m, coords },
                    bytes,
                    setup,
                    None,
                    obs,
                )?
            }
            Op::StGlobal {
                map,
                coords,
                segment,
            } => self.thread_transfer(ti, map, None, coords, segment, obs)?,
            Op::LdGlobal {
                map,
                bar,
                coords,
                segment,
                l1,
            } => self.thread_transfer(ti, map, Some((bar, l1)), coords, segment, obs)?,
            Op::BulkLoad { bar, addr, bytes } => {
                let b = self.bar_index(ti, bar, "mbarrier", self.plan.nbar)?;
                let setup = self.cfg.tma_setup_common as u64;
                self.start_transfer(
                    ti,
                    b as u16,
                    Direction::Load,
                    Shape::Linear { addr },
                    bytes as u64,
                    setup,
                    None,
                    obs,
                )?
            }
            Op::BulkStore { addr, bytes } => {
                let setup = self.cfg.tma_setup_common as u64;
                self.start_transfer(
                    ti,
                    u16::MAX,
                    Direction::Store,
                    Shape::Linear { addr },
                    bytes as u64,
                    setup,
                    None,
                    obs,
                )?
            }
            Op::StoreWait { n } => {
                if self.threads[ti].stores <= n as u16 {
                    Outcome::Next
                } else {
                    Outcome::Stall(WaitReason::Stores { n })
                }
            }
            Op::MbarInit { bar, count } => {
                let b = self.bar_index(ti, bar, "mbarrier", self.plan.nbar)?;
                self.mbars[ci * self.plan.nbar + b] = super::state::Mbar::new(count.max(1));
                self.wake_cta(
                    ci,
                    obs,
                    |r| matches!(r, WaitReason::Mbarrier { bar: x, .. } if x == bar),
                );
                Outcome::Next
            }
            Op::MbarArrive { bar, count } => {
                let b = self.bar_index(ti, bar, "mbarrier", self.plan.nbar)?;
                let m = &mut self.mbars[ci * self.plan.nbar + b];
                if m.pending < count {
                    return Err(SimError::BarrierOverArrive {
                        barrier: bar,
                        cta: self.ctas[ci].cta,
                        cycle: now,
                    });
                }
                m.pending -= count;
                self.try_complete_phase(ci, b, obs);
                Outcome::Next
            }
            Op::MbarExpectTx { bar, bytes } => {
                let b = self.bar_index(ti, bar, "mbarrier", self.plan.nbar)?;
                self.mbars[ci * self.plan.nbar + b].tx += bytes as i64;
                self.try_complete_phase(ci, b, obs);
                Outcome::Next
            }
            Op::MbarWait { bar, parity } => {
                let b = self.bar_index(ti, bar, "mbarrier", self.plan.nbar)?;
                let phase = self.mbars[ci * self.plan.nbar + b].phase;
                if (phase & 1) as u8 != parity & 1 {
                    Outcome::Next
                } else {
                    Outcome::Stall(WaitReason::Mbarrier {
                        bar,
                        parity: parity & 1,
                    })
                }
            }
            Op::StageAcquire { stage } => {
                let s = self.bar_index(ti, stage, "stage", self.plan.nstage)?;
                let consumers = self.stage_consumers(s);
                let early = self.cfg.fault == Fault::EarlyStage;
                let st = &mut self.stages[ci * self.plan.nstage + s];
                if early || st.released as u64 >= st.acquired as u64 * consumers {
                    st.acquired += 1;
                    if obs.wants_detail() {
                        let who = self.who(ti);
                        let ev = Event::StageAcquired {
                            who,
                            stage,
                            consumers: consumers.min(u16::MAX as u64) as u16,
                        };
                        Self::detail(now, obs, ev);
                    }
                    Outcome::Next
                } else {
                    Outcome::Stall(WaitReason::Stage { stage })
                }
            }
            Op::StageRelease { stage, cluster } => {
                let s = self.bar_index(ti, stage, "stage", self.plan.nstage)?;
                self.release(ti, s, stage, cluster, obs);
                Outcome::Next
            }
            Op::Wgmma { n, mode } => {
                if self.sms[sm].wgmma_inflight >= self.cfg.wgmma_buffer {
                    return Ok(Outcome::Stall(WaitReason::TensorBuffer));
                }
                let lat = self.cfg.wgmma_cycles(n, mode);
                let changed = self.before_wgmma(sm);
                let s = &mut self.sms[sm];
                let start = now.max(s.pipe_free);
                let end = start + lat;
                s.pipe_free = end;
                s.wgmma_inflight += 1;
                self.ctas[ci].inflight += 1;
                self.threads[ti].wgmma_issued += 1;
                self.stats.wgmmas += 1;
                self.stats.tensor_busy_cycles += lat;
                self.stats.first_wgmma = self.stats.first_wgmma.min(start);
                self.stats.last_wgmma = self.stats.last_wgmma.max(end);
                self.push(end, Ev::WgmmaDone { thread: ti as u32 })?;
                self.after_wgmma(sm, changed);
                let who = self.who(ti);
                self.emit(obs, Event::WgmmaStart { who, start, end });
                Outcome::Next
            }
            Op::WgmmaCommit => {
                let max = (self.cfg.max_wgmma_groups as usize).min(GROUP_RING);
                let th = &mut self.threads[ti];
                th.prune_groups();
                let end = th.wgmma_issued;
                let last = if th.g_len == 0 {
                    th.wgmma_done
                } else {
                    th.groups[(th.g_head as usize + th.g_len as usize - 1) % GROUP_RING]
                };
                if end > last {
                    if th.g_len as usize >= max {
                        return Err(SimError::CapacityExceeded {
                            capacity: Capacity::WgmmaGroups,
                            cycle: now,
                        });
                    }
                    th.groups[(th.g_head as usize + th.g_len as usize) % GROUP_RING] = end;
                    th.g_len += 1;
                }
                Outcome::Next
            }
            Op::WgmmaWait { n } => {
                let th = &mut self.threads[ti];
                th.prune_groups();
                if th.g_len <= n {
                    Outcome::Next
                } else {
                    Outcome::Stall(WaitReason::WgmmaGroups { n })
                }
            }
            Op::BarSync { id, threads } | Op::BarArrive { id, threads } => {
                let b = self.bar_index(ti, id as u16, "named barrier", NAMED_BARRIERS)?;
                let nb = &mut self.named[ci * NAMED_BARRIERS + b];
                nb.arrived = nb.arrived.saturating_add(WG_THREADS as u16);
                if nb.arrived >= threads {
                    nb.arrived = 0;
                    self.wake_cta(ci, obs, |r| r == WaitReason::NamedBarrier { id });
                    Outcome::Next
                } else if matches!(op, Op::BarSync { .. }) {
                    Outcome::NextThenWait(WaitReason::NamedBarrier { id })
                } else {
                    Outcome::Next
                }
            }
            Op::LockAcquire { lock } => self.lock_acquire(ti, lock)?,
            Op::LockRelease { lock } => self.lock_release(ti, lock)?,
            Op::CounterAdd { counter, amount } => self.counter_add(ti, counter, amount)?,
            Op::CounterWait { counter, count } => self.counter_wait(ti, counter, count)?,
            Op::SmemMove { bytes } => {
                // The load/store unit takes the 32-byte requests after those
                // before them.
                let end = self.lsu(
                    sm,
                    self.cfg.load_request_cycles,
                    (bytes as u64).div_ceil(32),
                );
                Self::lsu_outcome(now, end)
            }
            Op::Bubble { cycles } => {
                if cycles <= 1 {
                    Outcome::Next
                } else {
                    Outcome::Sleep(now + cycles as u64)
                }
            }
            Op::Compute { work } => {
                if self.start_compute(ti, &work) {
                    Outcome::Compute
                } else {
                    Outcome::Next
                }
            }
            Op::Exit => Outcome::Exit,
        })
    }

    fn stage_consumers(&self, s: usize) -> u64 {
        let mut left = s;
        for d in self.kernel.stages.iter() {
            if left < d.len as usize {
                return d.consumers as u64;
            }
            left -= d.len as usize;
        }
        1
    }

    #[allow(clippy::too_many_arguments)]
    pub(super) fn start_transfer(
        &mut self,
        ti: usize,
        bar: u16,
        dir: Direction,
        shape: Shape<'a>,
        bytes: u64,
        setup: u64,
        served: Option<u64>,
        obs: &mut impl Observer,
    ) -> Result<Outcome, SimError> {
        let t = self.threads[ti];
        let sm = t.sm as usize;
        if self.sms[sm].tma_inflight >= self.cfg.tma_slots {
            return Ok(Outcome::Stall(WaitReason::TmaSlot));
        }
        let leave = self.now + setup;
        let id = self.stats.tma_ops as u32;
        let done = match &mut self.mem {
            _ if served.is_some() => served,
            super::Mem::Fixed(port) => Some(port.transfer(
                leave,
                &Transfer {
                    sm: t.sm,
                    dir,
                    shape,
                    bytes,
                },
            )),
            _ => None,
        };
        // A load the SM serves itself (an L1 hit) never reaches the memory.
        let txn = served.is_none() && matches!(self.mem, super::Mem::Txn(_));
        let external = matches!(self.mem, super::Mem::External(_));
        match done {
            Some(done) => self.landing_at(ti, bar, bytes, id, done)?,
            None if txn => {
                self.txn_queue(ti, bar, dir == Direction::Store, shape, bytes, leave, id)?
            }
            None if external => self.ext_issue(ti, bar, dir, shape, bytes, leave, id)?,
            None => self.start_op(ti, bar, dir == Direction::Store, shape, bytes, leave, id)?,
        }
        let s = &mut self.sms[sm];
        if s.tma_inflight == 0 {
            s.tma_busy_since = self.now;
        }
        s.tma_inflight += 1;
        self.ctas[t.cta as usize].inflight += 1;
        let store = dir == Direction::Store;
        if store {
            self.threads[ti].stores += 1;
        }
        self.stats.tma_ops += 1;
        // The transaction-level memory's operations are reported when
        // they are handed over, at the end of the cycle.
        if !txn {
            let who = self.who(ti);
            self.emit(
                obs,
                Event::TmaIssue {
                    who,
                    bytes,
                    store,
                    done,
                    op: id,
                    bar: (!store).then_some(split(bar).0),
                },
            );
            self.emit_multicast(ti, bar, id, obs);
        }
        Ok(Outcome::Next)
    }

    /// Queues the landing of TMA operation `op` of thread `ti` (mbarrier
    /// `bar`, `u16::MAX` for a store) moving `bytes`, which lands at
    /// `done` (earlier under `Fault::EarlyTma`).
    pub(super) fn landing_at(
        &mut self,
        ti: usize,
        bar: u16,
        bytes: u64,
        op: u32,
        done: u64,
    ) -> Result<(), SimError> {
        let at = match self.cfg.fault {
            Fault::EarlyTma { cycles } => done
                .saturating_sub(cycles as u64)
                .max(self.now + 1)
                .min(done),
            _ => done,
        };
        self.push(
            at,
            Ev::TmaDone {
                thread: ti as u32,
                bar,
                bytes,
                op,
            },
        )
    }

    /// A transfer of thread `ti` landed: free its TMA slot, deliver its bytes
    /// to the mbarrier (loads) or count the store down.
    pub(super) fn finish_transfer(
        &mut self,
        ti: usize,
        bar: u16,
        bytes: u64,
        op: u32,
        obs: &mut impl Observer,
    ) -> Result<(), SimError> {
        let t = self.threads[ti];
        let (sm, ci) = (t.sm as usize, t.cta as usize);
        let what = "transfers in flight";
        self.sms[sm].tma_inflight = self.less(self.sms[sm].tma_inflight, what)?;
        let s = &mut self.sms[sm];
        if s.tma_inflight == 0 {
            self.stats.tma_busy_cycles += self.now - s.tma_busy_since;
        }
        self.ctas[ci].inflight = self.less(self.ctas[ci].inflight, what)?;
        self.end = self.end.max(self.now);
        let store = bar == u16::MAX;
        if !store {
            self.l1_landed(ti, op);
        }
        let who = self.who(ti);
        self.emit(
            obs,
            Event::TmaDone {
                who,
                bytes,
                store,
                op,
                bar: (!store).then_some(split(bar).0),
            },
        );
        if store {
            self.stats.bytes_stored += bytes;
            let th = &mut self.threads[ti];
            th.stores -= 1;
            let left = th.stores;
            if let TState::Waiting(WaitReason::Stores { n }) = th.state {
                if left <= n as u16 {
                    self.wake(ti, obs);
                }
            }
        } else {
            self.stats.bytes_loaded += bytes;
            self.deliver(ci, bar, bytes, obs);
        }
        self.wake_sm(sm, obs, |r| r == WaitReason::TmaSlot);
        self.maybe_retire(ci, obs)
    }

    /// Completes the current phase of mbarrier `b` of CTA slot `ci` if no
    /// arrivals and no transaction bytes remain.
    pub(super) fn try_complete_phase(&mut self, ci: usize, b: usize, obs: &mut impl Observer) {
        let m = &mut self.mbars[ci * self.plan.nbar + b];
        if m.pending != 0 || m.tx != 0 {
            return;
        }
        m.phase = m.phase.wrapping_add(1);
        m.pending = m.count;
        let phase = m.phase;
        let c = self.ctas[ci];
        self.emit(
            obs,
            Event::PhaseComplete {
                sm: c.sm,
                cta: c.cta,
                bar: b as u16,
                phase,
            },
        );
        let bar = b as u16;
        self.wake_cta(
            ci,
            obs,
            |r| matches!(r, WaitReason::Mbarrier { bar: x, .. } if x == bar),
        );
    }

    /// `n - 1`, or [`SimError::Inconsistent`] naming `what` when `n` is
    /// zero (only a damaged snapshot gets there).
    pub(super) fn less<N: Copy + core::ops::Sub<Output = N> + From<u8> + PartialEq>(
        &self,
        n: N,
        what: &'static str,
    ) -> Result<N, SimError> {
        if n == N::from(0) {
            return Err(SimError::Inconsistent {
                what,
                cycle: self.now,
            });
        }
        Ok(n - N::from(1))
    }

    /// Applies a due event.
    pub(super) fn apply(&mut self, ev: Ev, obs: &mut impl Observer) -> Result<(), SimError> {
        match ev {
            Ev::Wake { thread } => {
                let ti = thread as usize;
                if self.threads[ti].state == TState::Sleeping {
                    self.make_ready(ti);
                    let who = self.who(ti);
                    self.emit(obs, Event::Wake { who });
                }
            }
            Ev::WgmmaDone { thread } => {
                let ti = thread as usize;
                let t = &mut self.threads[ti];
                t.wgmma_done += 1;
                t.prune_groups();
                let g_len = t.g_len;
                let (sm, ci) = (t.sm as usize, t.cta as usize);
                let what = "WGMMAs in flight";
                self.sms[sm].wgmma_inflight = self.less(self.sms[sm].wgmma_inflight, what)?;
                self.ctas[ci].inflight = self.less(self.ctas[ci].inflight, what)?;
                let who = self.who(ti);
                self.emit(obs, Event::WgmmaDone { who });
                if let TState::Waiting(WaitReason::WgmmaGroups { n }) = self.threads[ti].state {
                    if g_len <= n {
                        self.wake(ti, obs);
                    }
                }
                self.wake_sm(sm, obs, |r| r == WaitReason::TensorBuffer);
                self.maybe_retire(ci, obs)?;
            }
            Ev::TmaDone {
                thread,
                bar,
                bytes,
                op,
            } => {
                let at = self.txn_landing(op, bar);
                if at > self.now {
                    self.push(
                        at,
                        Ev::TmaDone {
                            thread,
                            bar,
                            bytes,
                            op,
                        },
                    )?;
                } else {
                    self.finish_transfer(thread as usize, bar, bytes, op, obs)?
                }
            }
            Ev::TmaEarly { slot, op } => self.signal_early(slot as usize, op, obs)?,
            Ev::TmaTick { sm } => {
                self.engine_mut(sm as usize).tick_pending = false;
                self.tma_tick(sm as usize, obs)?;
            }
            Ev::LockFree { lock } => self.lock_free(lock, obs),
            Ev::CounterLand { counter } => self.counter_land(counter, obs),
        }
        Ok(())
    }
}

fn mask(n: usize) -> u32 {
    if n >= 32 {
        u32::MAX
    } else {
        (1u32 << n) - 1
    }
}
