//! Arrival-order landing (`transaction.arrival_controller = true`): the
//! transaction model's DRAM reads, served again in the order they reach
//! the DRAM by the line-level FR-FCFS controller, decide when their
//! operations land.
//!
//! # Why
//!
//! The transaction model times each line when its operation is handed
//! over, so the HBM service model books requests in hand-over order: of
//! two requests that want the same bank or bus slot, the one handed over
//! first gets it, whichever reaches the DRAM first. The SM whose operation
//! is handed over first is served first, and the service model never
//! makes an older request wait for younger row hits as FR-FCFS does. Both
//! make the transaction model faster than the line-level reference on
//! DRAM-bound work (GEMMs with a shared operand, TMA throughput).
//!
//! # How
//!
//! Every DRAM request still books the service model when it is handed
//! over: that timing keeps driving the L2 (fill readiness, MSHRs, the
//! engines' flight windows), so an operation's hand-over stays one call.
//! Each request is also queued here by the cycle it reaches the DRAM. A
//! request handed over at cycle `h` reaches the DRAM at `h +
//! xbar_latency` or later, so once the simulator's clock is at `now`,
//! every request arriving before `now + xbar_latency` is known: those are
//! handed, in arrival order, to a line-level controller (its read and
//! write queues, per-channel waiting when full, FR-FCFS, refresh), which
//! is run up to that horizon.
//!
//! An operation lands when (a) each of its DRAM reads is back from the
//! controller (plus the fill and return path the model added), (b) each
//! fill its reads waited for or hit — an L2 chunk filled by another
//! operation's reads, or the chunk its SM pair's coalescer merged it
//! with — is back from the controller, and (c) its lines whose time the
//! controller does not decide (L2 hits, shadow copies, and whatever did
//! not fit in the tables below) are back as the model times them. The
//! service model's own landing is not a floor: it is the hand-over-order
//! timing this module replaces, and keeping it would keep its bias (the
//! operation handed over last waiting longest). The simulator asks
//! [`ArrivalDram::landing`] first once (c) is met, or one cycle after the
//! hand-over; until the controller has returned all of (a) and (b) (it
//! has not run past the horizon yet), the answer is "ask again at the
//! horizon".
//!
//! Everything lives in arena tables sized before the run; a table that
//! fills (more requests not back from the controller, or more fills an
//! operation waits for, than it holds) falls back to the service model's
//! timing for what did not fit (a fill record reused before the
//! operation lands, to the service model's landing), never to a panic
//! or a hang.

use serde::{Deserialize, Serialize};

use crate::arena::{Arena, Layout};
use crate::codec::{Reader, SnapshotError, Writer};
use crate::error::{BuildError, Capacity};
use crate::mem::dram::{Command, CommandKind, Completion, Dram, DramConfig};
use crate::wheel::TimingWheel;

/// DRAM requests waiting to reach the controller, and records of those
/// handed to it.
const REQS: usize = 1 << 16;
/// Cycles the arrival queue's wheel spans (beyond them, its overflow heap
/// keeps the order).
const WHEEL_LOG2: u32 = 12;
/// Fill records (a ring).
const FILLS: usize = 1 << 16;
/// Fills one operation may wait for.
const DEPS: usize = 16;
/// The end of a record's free list and of a channel's waiting list.
const NIL: u32 = u32::MAX;

/// A fill of the L2 whose reads the controller serves: a record index
/// plus one (0: none) and the record's generation when it was taken.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FillRef {
    rec: u32,
    gen: u32,
}

impl FillRef {
    /// No fill.
    pub const NONE: FillRef = FillRef { rec: 0, gen: 0 };
}

#[derive(Clone, Copy, Debug, Default, Serialize, Deserialize)]
struct Fill {
    gen: u32,
    /// Reads not back yet.
    left: u32,
    /// When the last of them is usable in the L2.
    ready: u64,
}

/// A fill an operation waits for, and the cycles from the fill to the SM.
#[derive(Clone, Copy, Debug, Default, Serialize, Deserialize)]
struct Dep {
    fill: FillRef,
    after: u64,
}

/// One DRAM request.
#[derive(Clone, Copy, Debug, Default, Serialize, Deserialize)]
struct Req {
    /// SM cycle it reaches the DRAM.
    arrival: u64,
    /// DRAM byte address.
    addr: u64,
    channel: u16,
    write: bool,
    /// The operation tag whose landing it decides (`NIL`: none).
    op: u32,
    /// Cycles from its DRAM completion until its data is at the SM.
    after: u32,
    fill: FillRef,
    /// Next record in its channel's waiting list, or in the free list.
    next: u32,
}

/// Per operation tag.
#[derive(Clone, Copy, Debug, Default, Serialize, Deserialize)]
struct Op {
    /// Landing from the controller's reads and fills so far.
    done: u64,
    /// Its reads the controller has not returned.
    left: u32,
    deps: u8,
    /// When the parts of it the controller does not time are back.
    floor: u64,
    /// When the service model lands it: the answer for a fill whose
    /// record was reused before the operation landed.
    model: u64,
}

/// The arrival-order controller and its bookkeeping; see the [module
/// documentation](self).
pub struct ArrivalDram<'a> {
    ctl: Dram<'a>,
    /// Record indices of the requests not handed to the controller yet, by
    /// arrival cycle (ties in hand-over order).
    queue: TimingWheel<'a, u32>,
    reqs: &'a mut [Req],
    free: u32,
    /// Per channel, the requests waiting for room in its queue (oldest
    /// first), as lists through `Req::next`.
    wait_head: &'a mut [u32],
    wait_tail: &'a mut [u32],
    waiting: u32,
    /// Channels with waiting requests that issued a column command (and
    /// so may have freed queue room) since the last hand-over of waiting
    /// requests: a stack, and per channel whether it is on it. Derived
    /// state: a snapshot restore puts every channel with waiters on it.
    roomy: &'a mut [u16],
    roomy_len: usize,
    noted: &'a mut [bool],
    fills: &'a mut [Fill],
    next_fill: u64,
    ops: &'a mut [Op],
    deps: &'a mut [[Dep; DEPS]],
    fill_latency: u64,
}

impl<'a> ArrivalDram<'a> {
    /// Accounts for the tables of a controller for `dram` and `ops`
    /// operation tags (a power of two).
    pub fn layout(dram: &DramConfig, ops: usize, l: &mut Layout) -> Result<(), BuildError> {
        Dram::layout(dram, l)?;
        TimingWheel::<u32>::layout(REQS, WHEEL_LOG2, l)?;
        l.add::<Req>(REQS)?;
        l.add::<u32>(dram.channels as usize)?;
        l.add::<u32>(dram.channels as usize)?;
        l.add::<u16>(dram.channels as usize)?;
        l.add::<bool>(dram.channels as usize)?;
        l.add::<Fill>(FILLS)?;
        l.add::<Op>(ops)?;
        l.add::<[Dep; DEPS]>(ops)
    }

    /// Builds it, idle, from `a`; an L2 fill is usable `fill_latency`
    /// cycles after its DRAM read returns.
    pub fn new(
        dram: &DramConfig,
        ops: usize,
        fill_latency: u64,
        a: &mut Arena<'a>,
    ) -> Result<Self, BuildError> {
        let what = Capacity::MemoryPort;
        let ctl = Dram::new(dram, a)?;
        let queue = TimingWheel::new_in(a, REQS, WHEEL_LOG2, what)?;
        let reqs = a.alloc(REQS, Req::default(), what)?;
        for (i, r) in reqs.iter_mut().enumerate() {
            r.next = if i + 1 < REQS { i as u32 + 1 } else { NIL };
        }
        let c = dram.channels as usize;
        Ok(ArrivalDram {
            ctl,
            queue,
            reqs,
            free: 0,
            wait_head: a.alloc(c, NIL, what)?,
            wait_tail: a.alloc(c, NIL, what)?,
            waiting: 0,
            roomy: a.alloc(c, 0u16, what)?,
            roomy_len: 0,
            noted: a.alloc(c, false, what)?,
            fills: a.alloc(FILLS, Fill::default(), what)?,
            next_fill: 0,
            ops: a.alloc(ops, Op::default(), what)?,
            deps: a.alloc(ops, [Dep::default(); DEPS], what)?,
            fill_latency,
        })
    }

    fn tag(&self, id: u32) -> usize {
        id as usize & (self.ops.len() - 1)
    }

    /// Starts operation `id`: nothing of it is served yet.
    pub fn begin(&mut self, id: u32) {
        let t = self.tag(id);
        self.ops[t] = Op::default();
    }

    /// The fills operation `id` waits for (tests).
    #[cfg(test)]
    pub(crate) fn waits_for(&self, id: u32) -> ::std::vec::Vec<FillRef> {
        let t = self.tag(id);
        self.deps[t][..self.ops[t].deps as usize]
            .iter()
            .map(|d| d.fill)
            .collect()
    }

    /// A new fill record, for a chunk the L2 misses.
    pub fn new_fill(&mut self) -> FillRef {
        let r = (self.next_fill % FILLS as u64) as usize;
        self.next_fill += 1;
        let gen = self.fills[r].gen.wrapping_add(1);
        self.fills[r] = Fill {
            gen,
            left: 0,
            ready: 0,
        };
        FillRef {
            rec: r as u32 + 1,
            gen,
        }
    }

    /// The fill behind `f`, if its record still holds it.
    fn fill(&mut self, f: FillRef) -> Option<&mut Fill> {
        let x = self.fills.get_mut(f.rec.checked_sub(1)? as usize)?;
        (x.gen == f.gen).then_some(x)
    }

    /// Operation `id` lands no sooner than fill `f`, plus `after` cycles.
    /// Returns whether the operation now waits for it.
    pub fn depend(&mut self, id: u32, f: FillRef, after: u64) -> bool {
        if f == FillRef::NONE || self.fill(f).is_none() {
            return false;
        }
        let t = self.tag(id);
        let n = self.ops[t].deps as usize;
        let deps = &mut self.deps[t];
        if deps[..n].iter().any(|d| d.fill == f) {
            return true;
        }
        // Beyond `DEPS` fills the operation keeps the model's timing for
        // the others.
        if n < DEPS {
            deps[n] = Dep { fill: f, after };
            self.ops[t].deps += 1;
            return true;
        }
        false
    }

    /// Operation `id`, handed over whole, lands no sooner than `floor`
    /// (when its lines the controller does not time are back); the
    /// service model lands it at `model`.
    pub fn handed_over(&mut self, id: u32, floor: u64, model: u64) {
        let t = self.tag(id);
        self.ops[t].floor = floor;
        self.ops[t].model = model;
    }

    /// Queues a DRAM request reaching DRAM byte address `addr` (pseudo-
    /// channel `channel`) at SM cycle `arrival`. A read of operation `id`
    /// (`Some((id, after))`) is at the SM `after` cycles after the
    /// controller returns it; `fill` names the L2 fill it is part of.
    pub fn request(
        &mut self,
        arrival: u64,
        addr: u64,
        channel: u16,
        write: bool,
        op: Option<(u32, u64)>,
        fill: FillRef,
    ) -> bool {
        // Every record in use (a backlog of `REQS` requests not back from
        // the controller): this one keeps the model's timing. Records in
        // use are at most the queue's capacity, so the push cannot fail.
        let i = self.free;
        if i == NIL || self.queue.push(arrival, 0, i).is_err() {
            return false;
        }
        self.free = self.reqs[i as usize].next;
        let (opt, after) = match op {
            Some((id, after)) => {
                let t = self.tag(id);
                self.ops[t].left += 1;
                (t as u32, after.min(u32::MAX as u64) as u32)
            }
            None => (NIL, 0),
        };
        if let Some(f) = self.fill(fill) {
            f.left += 1;
        }
        self.reqs[i as usize] = Req {
            arrival,
            addr,
            channel,
            write,
            op: opt,
            after,
            fill,
            next: NIL,
        };
        true
    }

    /// When operation `id`, asked about at `now`, lands: a cycle after
    /// `now` to land then, `now` to land now, or `now + horizon` to ask
    /// again then (the controller has not returned all its reads and
    /// fills yet). `horizon` is the least cycles from a request's
    /// hand-over to its arrival at the DRAM.
    pub fn landing(&mut self, id: u32, now: u64, horizon: u64) -> u64 {
        self.serve_until(now + horizon.max(1));
        let t = self.tag(id);
        let op = self.ops[t];
        let mut open = op.left > 0;
        let mut done = op.done;
        for k in 0..op.deps as usize {
            let d = self.deps[t][k];
            match self.fill(d.fill) {
                Some(f) => {
                    open |= f.left > 0;
                    done = done.max(f.ready + d.after);
                }
                // Its record was reused: the service model's landing.
                None => done = done.max(op.model),
            }
        }
        if open {
            now + horizon.max(1)
        } else {
            done.max(op.floor).max(now)
        }
    }

    /// Hands the controller, in arrival order, every request that arrives
    /// before `h`, and runs it up to cycle `h - 1`.
    pub fn serve_until(&mut self, h: u64) {
        let Some(end) = h.checked_sub(1) else {
            return;
        };
        loop {
            let next = self.queue.next_cycle().filter(|&a| a <= end);
            // With nothing to hand over and nothing due by `end`, running
            // the controller can wait: it serves every event at its own
            // clock whenever it is run, and runs before each hand-over.
            let idle = next.is_none()
                && self.waiting == 0
                && self.ctl.next_event().map_or(true, |e| e > end);
            if !idle {
                self.run(next.unwrap_or(end));
            }
            let Some(i) = next.and_then(|_| self.queue.pop()).map(|e| e.event) else {
                break;
            };
            let r = self.reqs[i as usize];
            let ch = r.channel as usize;
            if self.wait_head[ch] != NIL
                || self.ctl.try_enqueue(r.arrival, r.addr, r.write, i).is_err()
            {
                self.wait(ch, i);
            }
        }
    }

    fn wait(&mut self, ch: usize, i: u32) {
        self.reqs[i as usize].next = NIL;
        match self.wait_tail[ch] {
            NIL => self.wait_head[ch] = i,
            t => self.reqs[t as usize].next = i,
        }
        self.wait_tail[ch] = i;
        self.waiting += 1;
    }

    /// Runs the controller up to cycle `t`; while requests wait for queue
    /// room, from event to event, handing them over as room frees.
    fn run(&mut self, t: u64) {
        loop {
            let step = match self.ctl.next_event() {
                Some(e) if self.waiting > 0 && e < t => e,
                _ => t,
            };
            let ArrivalDram {
                ctl,
                reqs,
                free,
                fills,
                ops,
                fill_latency,
                wait_head,
                roomy,
                roomy_len,
                noted,
                ..
            } = self;
            // Queue room frees only when a request's last column command
            // issues: note the channels with waiters that issued one.
            let mut note = |c: Command| {
                let ch = c.channel as usize;
                if matches!(c.kind, CommandKind::Rd | CommandKind::Wr)
                    && wait_head[ch] != NIL
                    && !noted[ch]
                {
                    noted[ch] = true;
                    roomy[*roomy_len] = ch as u16;
                    *roomy_len += 1;
                }
            };
            let mut done = |c: Completion| {
                let i = c.tag as usize;
                // Tags are record indices (a damaged snapshot aside).
                let Some(&r) = reqs.get(i) else {
                    return;
                };
                if !r.write {
                    if let Some(op) = ops.get_mut(r.op as usize) {
                        op.done = op.done.max(c.cycle + r.after as u64);
                        op.left = op.left.saturating_sub(1);
                    }
                    if let Some(f) = fills.get_mut(r.fill.rec.wrapping_sub(1) as usize) {
                        if f.gen == r.fill.gen {
                            f.ready = f.ready.max(c.cycle + *fill_latency);
                            f.left = f.left.saturating_sub(1);
                        }
                    }
                }
                reqs[i].next = *free;
                *free = c.tag;
            };
            ctl.advance_observed(step, &mut done, &mut note);
            if self.roomy_len > 0 {
                self.admit(step);
            }
            if step >= t {
                return;
            }
        }
    }

    /// Hands waiting requests to the controller at `t`, oldest first per
    /// channel, while their channel has room. Only the channels noted as
    /// having issued a column command can have gained room since the last
    /// call (a channel keeps waiters only while it is full), and a
    /// channel's hand-over changes only its own state, so visiting them in
    /// any order hands over the same requests at the same clocks.
    fn admit(&mut self, t: u64) {
        while self.roomy_len > 0 {
            self.roomy_len -= 1;
            let ch = self.roomy[self.roomy_len] as usize;
            self.noted[ch] = false;
            while let Some(i) = Some(self.wait_head[ch]).filter(|&i| i != NIL) {
                let r = self.reqs[i as usize];
                // The queue's room first: a full channel stays full until
                // the controller serves it, and `try_enqueue` decodes.
                if !self.ctl.has_room(ch, r.write)
                    || self
                        .ctl
                        .try_enqueue(t.max(r.arrival), r.addr, r.write, i)
                        .is_err()
                {
                    break;
                }
                self.wait_head[ch] = r.next;
                if r.next == NIL {
                    self.wait_tail[ch] = NIL;
                }
                self.waiting = self.waiting.saturating_sub(1);
            }
        }
    }

    /// Writes the mutable state into a snapshot.
    pub(crate) fn save_state(&self, w: &mut Writer<'_>) -> Result<(), SnapshotError> {
        self.ctl.save_state(w)?;
        self.queue.save_state(w)?;
        w.slice(self.reqs)?;
        w.val(&(self.free, self.waiting, self.next_fill))?;
        w.slice(self.wait_head)?;
        w.slice(self.wait_tail)?;
        w.slice(self.fills)?;
        w.slice(self.ops)?;
        w.slice(self.deps)
    }

    /// Overwrites the mutable state from a snapshot.
    pub(crate) fn load_state(&mut self, r: &mut Reader<'_>) -> Result<(), SnapshotError> {
        self.ctl.load_state(r)?;
        self.queue.load_state(r)?;
        r.slice(self.reqs)?;
        (self.free, self.waiting, self.next_fill) = r.val()?;
        r.slice(self.wait_head)?;
        r.slice(self.wait_tail)?;
        r.slice(self.fills)?;
        r.slice(self.ops)?;
        r.slice(self.deps)?;
        self.check()
            .map_err(|what| SnapshotError::Corrupt { what })?;
        // Every channel with waiters may have room to look at.
        self.roomy_len = 0;
        for ch in 0..self.wait_head.len() {
            let waits = self.wait_head[ch] != NIL;
            self.noted[ch] = waits;
            if waits {
                self.roomy[self.roomy_len] = ch as u16;
                self.roomy_len += 1;
            }
        }
        Ok(())
    }

    /// Whether every index in the tables points inside them (a damaged
    /// snapshot must not make them panic).
    fn check(&self) -> Result<(), &'static str> {
        let n = self.reqs.len() as u32;
        let ok = |i: u32| i == NIL || i < n;
        self.queue.check()?;
        if !self.queue.queued().all(|&e| e < n) {
            return Err("arrival-order DRAM queue entry");
        }
        let ops = self.ops.len() as u32;
        let reqs_ok = self.reqs.iter().all(|r| {
            ok(r.next) && (r.op == NIL || r.op < ops) && (r.channel as usize) < self.wait_head.len()
        });
        if !reqs_ok || !ok(self.free) {
            return Err("arrival-order DRAM request record");
        }
        let lists = self.wait_head.iter().chain(self.wait_tail.iter());
        if !lists.copied().all(ok) {
            return Err("arrival-order DRAM waiting list");
        }
        if self.ops.iter().any(|o| o.deps as usize > DEPS) {
            return Err("arrival-order operation record");
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::GpuConfig;
    use ::std::vec;
    use ::std::vec::Vec;
    use proptest::prelude::*;

    const OPS: usize = 1024;

    fn with_arrival<R>(f: impl FnOnce(&mut ArrivalDram<'_>, &DramConfig) -> R) -> R {
        let cfg = GpuConfig::h800().dram;
        let mut l = Layout::new();
        ArrivalDram::layout(&cfg, OPS, &mut l).unwrap();
        let mut buf = vec![0u8; l.bytes()];
        let mut a = Arena::new(&mut buf);
        let mut arr = ArrivalDram::new(&cfg, OPS, 40, &mut a).unwrap();
        f(&mut arr, &cfg)
    }

    /// The reference: the controller's completions for reads `reqs`
    /// (`(arrival, DRAM address)`, arriving at cycle 1 or later) fed in
    /// arrival order cycle by cycle.
    fn reference(cfg: &DramConfig, reqs: &[(u64, u64)]) -> Vec<u64> {
        let reads: Vec<(u64, u64, bool)> = reqs.iter().map(|&(t, a)| (t, a, false)).collect();
        crate::mem::dram::tests::served_in_cycle_order(cfg, &reads).0
    }

    /// Starts operation `id` with one read of `addr` reaching the DRAM at
    /// `arrival`, at the SM `after` cycles after the controller returns it.
    fn one_read(
        arr: &mut ArrivalDram<'_>,
        cfg: &DramConfig,
        id: u32,
        arrival: u64,
        addr: u64,
        after: u64,
    ) {
        arr.begin(id);
        let ch = cfg.decode(addr).channel;
        arr.request(arrival, addr, ch, false, Some((id, after)), FillRef::NONE);
    }

    /// Lands operation `id` by asking from `now` on as it says.
    fn land(arr: &mut ArrivalDram<'_>, id: u32, mut now: u64) -> u64 {
        loop {
            let at = arr.landing(id, now, 90);
            if at == now {
                return now;
            }
            now = at;
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(24))]
        /// Handed over in any order, requests are served as the line-level
        /// controller serves them in arrival order: the same completion
        /// cycles, queue overflow included.
        #[test]
        fn completions_are_the_controllers_in_arrival_order(
            reqs in prop::collection::vec((1u64..600, 0u64..4096), 1..200),
        ) {
            let got = with_arrival(|arr, cfg| {
                let reqs: Vec<(u64, u64)> = reqs.iter().map(|&(t, l)| (t, l * 128)).collect();
                for (i, &(t, addr)) in reqs.iter().enumerate() {
                    arr.begin(i as u32);
                    let ch = cfg.decode(addr).channel;
                    arr.request(t, addr, ch, false, Some((i as u32, 0)), FillRef::NONE);
                }
                let mut got = vec![0; reqs.len()];
                for (i, g) in got.iter_mut().enumerate() {
                    land(arr, i as u32, 0);
                    *g = arr.ops[i].done;
                }
                (got, reference(cfg, &reqs))
            });
            prop_assert_eq!(got.0, got.1);
        }
    }

    #[test]
    fn a_restore_refuses_a_request_for_a_channel_that_does_not_exist() {
        // Waiting lists are per channel: a damaged record's channel would
        // index past them when the request reaches the DRAM.
        with_arrival(|arr, cfg| {
            one_read(arr, cfg, 3, 500, 1 << 20, 0);
            let good = crate::codec::saved(|w| arr.save_state(w));
            let i = arr.reqs.iter().position(|r| r.arrival == 500).unwrap();
            arr.reqs[i].channel = cfg.channels;
            let bad = crate::codec::saved(|w| arr.save_state(w));
            with_arrival(|fresh, _| {
                assert!(fresh.load_state(&mut Reader::new(&good)).is_ok());
                let err = fresh.load_state(&mut Reader::new(&bad));
                assert!(matches!(err, Err(SnapshotError::Corrupt { .. })), "{err:?}");
            });
        });
    }

    #[test]
    fn landing_waits_for_the_horizon_then_for_the_read() {
        with_arrival(|arr, cfg| {
            let addr = 1 << 20;
            one_read(arr, cfg, 7, 1000, addr, 25);
            // Before the controller has seen the read: ask again.
            assert_eq!(arr.landing(7, 500, 90), 590);
            let want = reference(cfg, &[(1000, addr)])[0] + 25;
            assert!(want > 1090, "{want}");
            // Past its completion: land at it (never before `now`).
            assert_eq!(arr.landing(7, want, 90), want);
            assert_eq!(arr.landing(7, want + 5, 90), want + 5);
        });
    }

    #[test]
    fn the_controller_decides_the_landing_not_the_service_model() {
        with_arrival(|arr, cfg| {
            let addr = 5 << 20;
            let ch = cfg.decode(addr).channel;
            let read = |id| Some((id, 25));
            let want = reference(cfg, &[(1000, addr)])[0] + 25;
            // The service model had it back much later: the controller's
            // time wins, asked from one cycle after the hand-over.
            arr.begin(1);
            assert!(arr.request(1000, addr, ch, false, read(1), FillRef::NONE));
            arr.handed_over(1, 0, want + 500);
            assert_eq!(land(arr, 1, 991), want);
            // Lines the controller does not time (hits) are a floor.
            arr.begin(2);
            assert!(arr.request(3000, addr, ch, false, read(2), FillRef::NONE));
            arr.handed_over(2, 20_000, 30_000);
            assert_eq!(land(arr, 2, 2991), 20_000);
            // A fill whose record is reused while the operation waits: the
            // service model's landing.
            let f = arr.new_fill();
            arr.begin(3);
            assert!(arr.depend(3, f, 30));
            arr.handed_over(3, 0, 9000);
            for _ in 0..FILLS {
                arr.new_fill();
            }
            assert_eq!(land(arr, 3, 5000), 9000);
        });
    }

    #[test]
    fn an_operation_waits_for_the_fill_it_read_from() {
        with_arrival(|arr, cfg| {
            let addr = 3 << 20;
            let f = arr.new_fill();
            arr.begin(1);
            arr.request(200, addr, cfg.decode(addr).channel, false, Some((1, 0)), f);
            // Operation 2 hit the chunk that fill brings, 30 cycles from
            // the L2 to its SM.
            arr.begin(2);
            arr.depend(2, f, 30);
            let read = reference(cfg, &[(200, addr)])[0];
            assert_eq!(land(arr, 2, 0), read + 40 + 30);
            // A fill whose record was reused no longer holds anyone up.
            for _ in 0..FILLS {
                arr.new_fill();
            }
            arr.begin(3);
            arr.depend(3, f, 30);
            assert_eq!(arr.landing(3, 5, 90), 5);
        });
    }
}
