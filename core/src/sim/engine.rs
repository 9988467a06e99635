//! The TMA engines' side of the memory hierarchy. With the line-level
//! model: starting operations, emitting their line requests cycle by
//! cycle, and counting lines back. With the transaction-level model:
//! handing each operation over whole and learning when it lands.

use super::state::Ev;
use super::tma::{bulk_gen, tensor_gen, Dedup, Engine, TmaOp};
use super::{Mem, Simulator};
use crate::arena::{Arena, Layout};
use crate::config::Fault;
use crate::digest::Digest;
use crate::error::BuildError;
use crate::error::{Capacity, SimError};
use crate::mem::system::{LineRequest, MemSink};
use crate::mem::txn::{TxnDone, TxnOp, TxnSink};
use crate::observer::{Event, Observer};
use crate::source::StreamSource;
use crate::time::Cycle;
use crate::transfer::Shape;

/// The arena tables of the TMA engines.
pub(crate) struct TmaTables<'a> {
    pub ops: &'a mut [TmaOp],
    pub order: &'a mut [u16],
    pub engines: &'a mut [Engine],
    pub dslots: &'a mut [u64],
    pub dused: &'a mut [u32],
    pub dlen: &'a mut [u32],
    /// Tokens of lines returned this cycle.
    pub returned: &'a mut [u32],
    /// Operation slots per SM.
    pub slots: usize,
    /// Dedup capacity per SM and slots per SM.
    pub dcap: usize,
    pub dslot_n: usize,
}

/// The TMA operations issued in the current cycle, waiting to be handed
/// to the transaction-level memory together (empty tables with the other
/// models). Empty between cycles, so never part of a snapshot.
pub(crate) struct Handover<'a> {
    ops: &'a mut [TxnOp<'a>],
    /// Per operation: its thread and mbarrier (`u16::MAX` for a store).
    who: &'a mut [(u32, u16)],
    done: &'a mut [TxnDone],
    len: usize,
}

impl<'a> Handover<'a> {
    const NONE: TxnOp<'static> = TxnOp {
        sm: 0,
        store: false,
        shape: Shape::Linear { addr: 0 },
        bytes: 0,
        start: 0,
        now: 0,
        id: 0,
    };

    /// Accounts for room for `cap` operations.
    pub(crate) fn layout(cap: usize, l: &mut Layout) -> Result<(), BuildError> {
        l.add::<TxnOp<'static>>(cap)?;
        l.add::<(u32, u16)>(cap)?;
        l.add::<TxnDone>(cap)
    }

    /// Room for `cap` operations.
    pub(crate) fn new_in(cap: usize, a: &mut Arena<'a>) -> Result<Self, BuildError> {
        let what = Capacity::MemoryPort;
        Ok(Handover {
            ops: a.alloc(cap, Self::NONE, what)?,
            who: a.alloc(cap, (0u32, 0u16), what)?,
            done: a.alloc(cap, TxnDone { done: 0, lines: 0 }, what)?,
            len: 0,
        })
    }
}

impl<'a, S: StreamSource> Simulator<'a, S> {
    /// Queues TMA operation `id` of thread `ti` (mbarrier `bar`;
    /// `u16::MAX` for a store) whose setup ends at `leave` for the
    /// transaction-level memory, which is handed this cycle's operations
    /// together at its end ([`Simulator::hand_over`]).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn txn_queue(
        &mut self,
        ti: usize,
        bar: u16,
        store: bool,
        shape: Shape<'a>,
        bytes: u64,
        leave: u64,
        id: u32,
    ) -> Result<(), SimError> {
        let h = &mut self.handover;
        let Some(slot) = h.ops.get_mut(h.len) else {
            return Err(SimError::CapacityExceeded {
                capacity: Capacity::MemoryPort,
                cycle: self.now,
            });
        };
        *slot = TxnOp {
            sm: self.threads[ti].sm,
            store,
            shape,
            bytes,
            start: leave,
            now: self.now,
            id,
        };
        h.who[h.len] = (ti as u32, bar);
        h.len += 1;
        Ok(())
    }

    /// Hands the operations queued this cycle to the transaction-level
    /// memory, which times them together, then queues each one's landing
    /// and reports its issue. The DRAM requests they cause enter the
    /// digest (and the observer) now, with the cycles they happen at.
    pub(super) fn hand_over(&mut self, obs: &mut impl Observer) -> Result<(), SimError> {
        let n = core::mem::take(&mut self.handover.len);
        if n == 0 {
            return Ok(());
        }
        if let Mem::Txn(mem) = &mut self.mem {
            let mut sink = TxnEvents {
                digest: &mut self.digest,
                detail: obs.wants_detail(),
                obs,
            };
            let h = &mut self.handover;
            let done = &mut *h.done;
            mem.transfer_batch(&h.ops[..n], &mut sink, |i, d| done[i] = d);
        }
        // A load the arrival-order controller lands is known to land only
        // when it is asked about (then at its `TmaDone`), not at issue;
        // under `Fault::EarlyTma` it lands at the model's cycle, early.
        let by_arrival = matches!(&self.mem, Mem::Txn(m) if m.lands_by_arrival())
            && !matches!(self.cfg.fault, Fault::EarlyTma { .. });
        for i in 0..n {
            let (op, (ti, bar), d) = (
                self.handover.ops[i],
                self.handover.who[i],
                self.handover.done[i],
            );
            self.stats.tma_lines += d.lines;
            self.landing_at(ti as usize, bar, op.bytes, op.id, d.done)?;
            let who = self.who(ti as usize);
            self.emit(
                obs,
                Event::TmaIssue {
                    who,
                    bytes: op.bytes,
                    store: op.store,
                    done: (op.store || !by_arrival).then_some(d.done),
                    op: op.id,
                    bar: (!op.store).then_some(super::cluster::split(bar).0),
                },
            );
            self.emit_multicast(ti as usize, bar, op.id, obs);
        }
        Ok(())
    }

    /// When load `op` (mbarrier `bar`; `u16::MAX` for a store), due to
    /// land now by the transaction-level memory, lands: now, or a later
    /// cycle to land or ask again then, with the arrival-order controller
    /// (`transaction.arrival_controller`); now with the other models (and
    /// under `Fault::EarlyTma`, which must land early).
    pub(super) fn txn_landing(&mut self, op: u32, bar: u16) -> u64 {
        let now = self.now;
        let early = matches!(self.cfg.fault, Fault::EarlyTma { .. });
        match &mut self.mem {
            Mem::Txn(mem) if bar != u16::MAX && !early && mem.lands_by_arrival() => {
                mem.landing(op, now)
            }
            _ => now,
        }
    }

    pub(super) fn engine_mut(&mut self, sm: usize) -> &mut Engine {
        &mut self.tma.as_mut().expect("hierarchy mode").engines[sm]
    }

    /// Queues TMA operation `id` of thread `ti` whose setup ends at `start`.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn start_op(
        &mut self,
        ti: usize,
        bar: u16,
        store: bool,
        shape: Shape<'_>,
        bytes: u64,
        start: u64,
        id: u32,
    ) -> Result<(), SimError> {
        let sm = self.threads[ti].sm as usize;
        let lb = self.cfg.l2.line_bytes as u64;
        let now = self.now;
        let tma = self.tma.as_mut().expect("hierarchy mode");
        let base = sm * tma.slots;
        let Some(slot) = (0..tma.slots).find(|&i| !tma.ops[base + i].live) else {
            return Err(SimError::CapacityExceeded {
                capacity: Capacity::Threads,
                cycle: now,
            });
        };
        let gen = match shape {
            Shape::Tensor { map, coords } => tensor_gen(map, &coords, lb),
            Shape::Linear { addr } => bulk_gen(addr, bytes, lb),
        };
        tma.ops[base + slot] = TmaOp {
            live: true,
            id,
            thread: ti as u32,
            bar,
            store,
            bytes,
            start,
            gen,
            ..TmaOp::EMPTY
        };
        let e = &mut tma.engines[sm];
        let pos = (e.order_head as usize + e.order_len as usize) % tma.slots;
        tma.order[base + pos] = slot as u16;
        e.order_len += 1;
        if !e.tick_pending {
            e.tick_pending = true;
            let at = start.max(now).max(e.next_slot);
            self.push(at, Ev::TmaTick { sm: sm as u16 })?;
        }
        Ok(())
    }

    fn schedule_tick(&mut self, sm: usize, at: u64) -> Result<(), SimError> {
        let e = self.engine_mut(sm);
        if e.tick_pending {
            return Ok(());
        }
        e.tick_pending = true;
        let at = at.max(e.next_slot);
        self.push(at, Ev::TmaTick { sm: sm as u16 })
    }

    /// One slot of SM `sm`'s engine: emit up to `lines_per_cycle` lines,
    /// the next slot `tma.line_interval` cycles later.
    pub(super) fn tma_tick(&mut self, sm: usize, obs: &mut impl Observer) -> Result<(), SimError> {
        let now = self.now;
        let lb = self.cfg.l2.line_bytes as u64;
        let lpc = self.cfg.tma.lines_per_cycle as u32;
        let max_lines = self.cfg.tma.max_lines as u32;
        let dedup_on = self.cfg.tma.dedup;
        let detail = obs.wants_detail();
        let early = match self.cfg.fault {
            Fault::EarlyTma { cycles } => Some(cycles as u64),
            _ => None,
        };
        let mut emitted = 0;
        // Operations whose generation ended: (global slot, complete).
        let mut finished: heapless::Vec<(usize, bool), 8> = heapless::Vec::new();
        let next_tick = loop {
            let Mem::Line(mem) = &mut self.mem else {
                return Ok(());
            };
            let tma = self.tma.as_mut().expect("hierarchy mode");
            let base = sm * tma.slots;
            let e = &mut tma.engines[sm];
            if e.order_len == 0 || finished.is_full() {
                break (e.order_len > 0).then_some(now + 1);
            }
            let slot = tma.order[base + e.order_head as usize] as usize;
            let op = &mut tma.ops[base + slot];
            if op.start > now {
                break Some(op.start);
            }
            if emitted >= lpc {
                break Some(now + 1);
            }
            if e.lines_out >= max_lines {
                e.blocked = true;
                break None;
            }
            let line = match e.held.take() {
                Some(l) => Some(l),
                None => {
                    let d0 = sm * tma.dslot_n;
                    let u0 = sm * tma.dcap;
                    let mut set = Dedup {
                        slots: &mut tma.dslots[d0..d0 + tma.dslot_n],
                        used: &mut tma.dused[u0..u0 + tma.dcap],
                        len: &mut tma.dlen[sm],
                    };
                    op.next_line(lb, dedup_on.then_some(&mut set))
                }
            };
            match line {
                None => {
                    op.generated = true;
                    e.order_head = ((e.order_head as usize + 1) % tma.slots) as u16;
                    e.order_len -= 1;
                    let d0 = sm * tma.dslot_n;
                    let u0 = sm * tma.dcap;
                    Dedup {
                        slots: &mut tma.dslots[d0..d0 + tma.dslot_n],
                        used: &mut tma.dused[u0..u0 + tma.dcap],
                        len: &mut tma.dlen[sm],
                    }
                    .clear();
                    let complete = op.complete();
                    if complete || early.is_some() {
                        let _ = finished.push((base + slot, complete));
                    }
                }
                Some(addr) => {
                    let req = LineRequest {
                        sm: sm as u16,
                        addr,
                        write: op.store,
                        token: (base + slot) as u32,
                    };
                    if mem.try_request(now, &req).is_err() {
                        e.held = Some(addr);
                        break Some(now + 1);
                    }
                    op.issued += 1;
                    e.lines_out += 1;
                    emitted += 1;
                    self.stats.tma_lines += 1;
                    if detail {
                        let ev = Event::TmaLineRequest {
                            sm: sm as u16,
                            op: op.id,
                            addr,
                        };
                        Self::detail(now, obs, ev);
                    }
                }
            }
        };
        if emitted > 0 {
            let interval = self.cfg.tma.line_interval as u64;
            let tma = self.tma.as_mut().expect("hierarchy mode");
            tma.engines[sm].next_slot = now + interval;
        }
        if let Some(at) = next_tick {
            self.schedule_tick(sm, at)?;
        }
        for (op, complete) in finished {
            if complete {
                self.finish_op(op, obs)?;
            } else if let Some(cycles) = early {
                let id = self.tma.as_ref().expect("hierarchy mode").ops[op].id;
                let ev = Ev::TmaEarly {
                    slot: op as u32,
                    op: id,
                };
                self.push(now + cycles, ev)?;
            }
        }
        Ok(())
    }

    /// Operation `op` (a global slot index) has all its lines back.
    fn finish_op(&mut self, op: usize, obs: &mut impl Observer) -> Result<(), SimError> {
        let tma = self.tma.as_mut().expect("hierarchy mode");
        let o = &mut tma.ops[op];
        o.live = false;
        if o.signalled {
            return Ok(());
        }
        let (thread, bar, bytes, id) = (o.thread as usize, o.bar, o.bytes, o.id);
        self.finish_transfer(thread, bar, bytes, id, obs)
    }

    /// Test-only `Fault::EarlyTma`: signals the completion of operation `id`
    /// in global slot `slot` if its lines are not all back yet.
    pub(super) fn signal_early(
        &mut self,
        slot: usize,
        id: u32,
        obs: &mut impl Observer,
    ) -> Result<(), SimError> {
        let tma = self.tma.as_mut().expect("hierarchy mode");
        let o = &mut tma.ops[slot];
        if !o.live || o.id != id || o.signalled {
            return Ok(());
        }
        o.signalled = true;
        let (thread, bar, bytes) = (o.thread as usize, o.bar, o.bytes);
        self.finish_transfer(thread, bar, bytes, id, obs)
    }

    /// Collects the lines the memory system returns up to now and counts
    /// them against their operations.
    pub(super) fn drain_memory(&mut self, obs: &mut impl Observer) -> Result<(), SimError> {
        let now = self.now;
        let (Mem::Line(mem), Some(tma)) = (&mut self.mem, self.tma.as_mut()) else {
            return Ok(());
        };
        if mem.next_event().map_or(true, |c| c > now) {
            return Ok(());
        }
        let mut sink = Drain {
            returned: &mut *tma.returned,
            n: 0,
            ops: &*tma.ops,
            slots: tma.slots,
            detail: obs.wants_detail(),
            obs: &mut *obs,
        };
        mem.advance(now, &mut sink);
        let n = sink.n;
        while let Some(r) = match &mut self.mem {
            Mem::Line(mem) => mem.pop_dram_request(),
            Mem::Fixed(_) | Mem::Txn(_) | Mem::External(_) => None,
        } {
            // The event carries the cycle the request entered DRAM.
            let ev = crate::observer::Event::DramRequest {
                write: r.write,
                addr: r.addr,
            };
            self.emit_at(r.cycle, obs, ev);
        }
        for i in 0..n {
            let token = self.tma.as_ref().expect("hierarchy mode").returned[i] as usize;
            self.line_returned(token, obs)?;
        }
        Ok(())
    }

    fn line_returned(&mut self, token: usize, obs: &mut impl Observer) -> Result<(), SimError> {
        let now = self.now;
        let tma = self.tma.as_mut().expect("hierarchy mode");
        let sm = token / tma.slots;
        let op = &mut tma.ops[token];
        op.done += 1;
        let complete = op.complete();
        let e = &mut tma.engines[sm];
        let Some(out) = e.lines_out.checked_sub(1) else {
            return Err(SimError::Inconsistent {
                what: "TMA lines in flight",
                cycle: now,
            });
        };
        e.lines_out = out;
        let unblock = e.blocked;
        e.blocked = false;
        if complete {
            self.finish_op(token, obs)?;
        }
        if unblock {
            self.schedule_tick(sm, now)?;
        }
        Ok(())
    }
}

/// Collects the tokens of returned lines during [`MemorySystem::advance`]
/// and passes the detail events on to the observer.
///
/// [`MemorySystem::advance`]: crate::mem::system::MemorySystem::advance
struct Drain<'t, 'o, O: Observer> {
    returned: &'t mut [u32],
    n: usize,
    ops: &'t [TmaOp],
    slots: usize,
    detail: bool,
    obs: &'o mut O,
}

impl<O: Observer> MemSink for Drain<'_, '_, O> {
    fn done(&mut self, token: u32, addr: u64, cycle: u64) {
        if self.n < self.returned.len() {
            self.returned[self.n] = token;
            self.n += 1;
        }
        if self.detail {
            let ev = Event::TmaLineLanded {
                sm: (token as usize / self.slots) as u16,
                op: self.ops[token as usize].id,
                addr,
            };
            self.obs.on_event(Cycle(cycle), &ev);
        }
    }

    fn wants_notes(&self) -> bool {
        self.detail
    }

    fn note(&mut self, cycle: u64, event: Event) {
        self.obs.on_event(Cycle(cycle), &event);
    }
}

/// Passes the transaction-level model's DRAM requests into the digest and
/// to the observer, and its detail events to an observer that wants them.
struct TxnEvents<'d, 'o, O: Observer> {
    digest: &'d mut Digest,
    detail: bool,
    obs: &'o mut O,
}

impl<O: Observer> TxnSink for TxnEvents<'_, '_, O> {
    fn dram(&mut self, cycle: u64, write: bool, addr: u64) {
        super::emit(
            self.digest,
            cycle,
            self.obs,
            Event::DramRequest { write, addr },
        );
    }

    fn wants_notes(&self) -> bool {
        self.detail
    }

    fn note(&mut self, cycle: u64, event: Event) {
        self.obs.on_event(Cycle(cycle), &event);
    }
}
