//! The memory system behind the TMA engines: request coalescers per group
//! of SMs, the crossbar, hashed L2 slices in two partitions with MSHRs and
//! the remote-copy proxy, and the HBM controllers.
//!
//! # Request path
//!
//! A line request from SM `s` first meets the coalescer of its group of
//! SMs (`l2.coalescer_sms` consecutive SMs; 2, an SM pair, in the
//! presets): a read of a line the group already has in flight merges
//! with it and completes with it. Otherwise it crosses the crossbar (`xbar_latency`,
//! plus `far_latency` when its home slice lies in the other partition) and
//! reserves its slice's input port for the line's share of cycles at
//! `slice_bytes_per_cycle` (`far_bytes_per_cycle` for a request from the
//! other partition).
//! A far read first probes the near partition's mirror slice for a shadow
//! copy. At the home slice a hit answers after `hit_latency`; a miss merges
//! into an MSHR for the same line or allocates one and goes to DRAM; with
//! every MSHR of the slice busy it waits, in order, for one to free
//! (back-pressure, never a drop). A fill is usable `fill_latency` after
//! DRAM returns the data; then the line enters the tags and every
//! merged request answers (reads arriving before then merge into the MSHR:
//! no hit is served from a line whose data cannot be read yet). Writes (TMA
//! stores) allocate their line dirty without fetching it (full-line
//! writes); dirty victims are written back to DRAM.
//!
//! All state lives in arena tables sized from the configuration; events
//! are ordered like the simulator's (cycle, class, sequence), so the
//! memory system is as deterministic as the rest of the core.

mod miss;
mod slice;
mod snapshot;

use heapless::Vec as HVec;

use crate::arena::{Arena, Layout};
use crate::error::{BuildError, Capacity};
use crate::mem::config::L2Config;
use crate::mem::dram::{Completion, Dram, DramConfig};
use crate::mem::hash::SliceSelector;
use crate::mem::table::FixedMap;
use crate::mem::tags::TagArray;
use crate::observer::Event;
use crate::rand::Rng;
use crate::wheel::TimingWheel;

/// Where [`MemorySystem::advance`] delivers its results: every completed
/// request, and, when [`MemSink::wants_notes`] is true, the detail events
/// of the L2 ([`Event::DramDone`], [`Event::LineFill`],
/// [`Event::LineServed`]) for consistency checkers. A closure
/// `FnMut(token, cycle)` is a sink that wants no notes.
pub trait MemSink {
    /// Request `token` for line address `addr` completed at `cycle`.
    fn done(&mut self, token: u32, addr: u64, cycle: u64);

    /// Whether to build and deliver detail events.
    fn wants_notes(&self) -> bool {
        false
    }

    /// A detail event that happened at `cycle`.
    fn note(&mut self, _cycle: u64, _event: Event) {}
}

impl<F: FnMut(u32, u64)> MemSink for F {
    fn done(&mut self, token: u32, _addr: u64, cycle: u64) {
        self(token, cycle)
    }
}

use super::config::MAX_SLICES;

const NIL: u32 = u32::MAX;
/// Tag kind of a home copy.
const HOME: u8 = 0;
/// Tag kind of a shadow copy made by the remote-copy proxy.
const SHADOW: u8 = 1;

/// One cache-line request from a TMA engine.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LineRequest {
    /// Requesting SM.
    pub sm: u16,
    /// Line-aligned byte address.
    pub addr: u64,
    /// A write (TMA store) rather than a read.
    pub write: bool,
    /// Returned with the completion.
    pub token: u32,
}

/// The memory system cannot take another request now; retry next cycle.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Busy;

/// Counters of the L2 and DRAM.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct MemStats {
    /// Line requests accepted.
    pub requests: u64,
    /// Of which writes.
    pub writes: u64,
    /// Reads merged in a coalescer.
    pub coalesced: u64,
    /// Requests that reached a slice (after coalescing).
    pub l2_requests: u64,
    /// Hits in the home slice.
    pub l2_hits: u64,
    /// Hits on a shadow copy in the near partition.
    pub shadow_hits: u64,
    /// Misses (reads that needed DRAM or merged into an MSHR; write misses).
    pub l2_misses: u64,
    /// Reads served by the far partition.
    pub far_reads: u64,
    /// Misses merged into an existing MSHR.
    pub mshr_merged: u64,
    /// Misses that had to wait for a free MSHR.
    pub mshr_stalls: u64,
    /// Shadow copies inserted.
    pub shadow_inserts: u64,
    /// DRAM line reads issued.
    pub dram_reads: u64,
    /// DRAM line writes (write-backs) issued.
    pub dram_writes: u64,
    /// Bytes the DRAM has read so far.
    pub dram_read_bytes: u64,
    /// Bytes the DRAM has written so far.
    pub dram_write_bytes: u64,
    /// Column accesses of the DRAM that hit an open row.
    pub dram_row_hits: u64,
    /// Write-backs dropped because every DRAM wait slot was taken.
    pub dropped_writebacks: u64,
}

impl MemStats {
    /// Fraction of the requests reaching the L2 that hit (home or shadow copy).
    pub fn l2_hit_rate(&self) -> f64 {
        if self.l2_requests == 0 {
            0.0
        } else {
            (self.l2_hits + self.shadow_hits) as f64 / self.l2_requests as f64
        }
    }

    /// Fraction of the DRAM's line accesses that found their row open.
    pub fn dram_row_hit_rate(&self) -> f64 {
        let n = self.dram_reads + self.dram_writes;
        if n == 0 {
            0.0
        } else {
            self.dram_row_hits as f64 / n as f64
        }
    }
}

#[derive(Clone, Copy, Debug, serde::Serialize, serde::Deserialize)]
struct Req {
    token: u32,
    sm: u16,
    write: bool,
    far: bool,
    line: u64,
    /// Next request merged in the same coalescer entry.
    co_next: u32,
    /// Next request merged in the same MSHR.
    ms_next: u32,
    /// Next request waiting for an MSHR of the same slice.
    wait_next: u32,
}

impl Req {
    const EMPTY: Req = Req {
        token: 0,
        sm: 0,
        write: false,
        far: false,
        line: 0,
        co_next: NIL,
        ms_next: NIL,
        wait_next: NIL,
    };
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
enum MemEv {
    /// A request reaches a slice; `probe` when it looks for a shadow copy.
    Arrive { req: u32, slice: u16, probe: bool },
    /// A request's data is back at its SM.
    Respond { req: u32 },
    /// The fill led by request `req` became usable: its line enters the
    /// tags and every request merged into its MSHR is answered.
    Fill { req: u32 },
}

/// Slots of the memory system's timing wheel: every fixed latency of the
/// L2 path is far below it, so only requests queued behind a congested
/// slice go to its overflow heap.
const WHEEL_LOG2: u32 = 12;

impl MemEv {
    const fn class(&self) -> u8 {
        match self {
            MemEv::Respond { .. } => 0,
            MemEv::Fill { .. } => 1,
            MemEv::Arrive { .. } => 2,
        }
    }
}

#[derive(Clone, Copy, Debug, serde::Serialize, serde::Deserialize)]
struct SliceState {
    /// First cycle the slice's input port is free.
    next_free: u64,
    /// Requests its port has taken (what [`L2Config::port_cycles`] counts).
    served: u64,
    /// First cycle the slice's crossing between the partitions is free.
    crossing_free: u64,
    mshrs_used: u16,
    wait_head: u32,
    wait_tail: u32,
}

/// A request the DRAM accepted, as logged for traces.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct DramRequest {
    /// SM cycle it entered the controller's queue.
    pub cycle: u64,
    /// A write (write-back) rather than a read.
    pub write: bool,
    /// Line address.
    pub addr: u64,
}

/// A DRAM request waiting for room in its pseudo-channel's queue, in that
/// channel's FIFO.
#[derive(Clone, Copy, Debug, serde::Serialize, serde::Deserialize)]
struct DramRetry {
    addr: u64,
    write: bool,
    tag: u32,
    next: u32,
}

/// Per-pseudo-channel FIFOs of requests waiting for queue room, linked
/// through a pool, with a bitmap of the channels that have any.
#[derive(Debug)]
struct Waiting<'a> {
    pool: &'a mut [DramRetry],
    free: u32,
    head: &'a mut [u32],
    tail: &'a mut [u32],
    busy: &'a mut [u64],
}

/// A fixed-capacity FIFO over arena storage.
#[derive(Debug)]
struct Ring<'a, T> {
    buf: &'a mut [T],
    head: usize,
    len: usize,
}

impl<'a, T: Copy> Ring<'a, T> {
    fn push(&mut self, v: T) -> bool {
        if self.len == self.buf.len() {
            return false;
        }
        let i = (self.head + self.len) % self.buf.len();
        self.buf[i] = v;
        self.len += 1;
        true
    }

    fn pop(&mut self) -> Option<T> {
        if self.len == 0 {
            return None;
        }
        let v = self.buf[self.head];
        self.head = (self.head + 1) % self.buf.len();
        self.len -= 1;
        Some(v)
    }
}

/// Multiplier of the bijective line scramble that picks L2 sets.
const MIX: u64 = 0x9E37_79B9_7F4A_7C15;

/// The inverse of [`MIX`] modulo 2^64 (Newton's iteration).
const fn mix_inverse() -> u64 {
    let mut x = MIX;
    let mut i = 0;
    while i < 6 {
        x = x.wrapping_mul(2u64.wrapping_sub(MIX.wrapping_mul(x)));
        i += 1;
    }
    x
}

const UNMIX: u64 = mix_inverse();

/// Tag-array key of a line: a bijection, so keys identify lines, whose low
/// bits (the tag array's set index) depend on every bit of the line, so the
/// lines of one slice spread over all of its sets whatever the slice hash
/// left in their low bits.
#[inline]
fn key_of(line: u64) -> u64 {
    let k = line.wrapping_mul(MIX);
    k ^ (k >> 32)
}

/// The tag-array key the line-level L2 gives line number `line` (a
/// bijection whose low bits pick the set): the transaction model places
/// one-line chunks with the same key, so single lines land in the same
/// sets in both models.
#[inline]
pub const fn line_key(line: u64) -> u64 {
    let k = line.wrapping_mul(MIX);
    k ^ (k >> 32)
}

/// The inverse of [`key_of`] (`x ^ (x >> 32)` is its own inverse).
#[inline]
fn line_of(key: u64) -> u64 {
    (key ^ (key >> 32)).wrapping_mul(UNMIX)
}

/// Table sizes.
#[derive(Clone, Copy, Debug)]
struct Sizes {
    reqs: usize,
    mshrs: usize,
    retries: usize,
    queue: usize,
}

impl Sizes {
    fn new(l2: &L2Config, dram: &DramConfig, sms: u16, max_lines: u16) -> Sizes {
        let reqs = sms as usize * max_lines as usize;
        let mshrs = l2.slices as usize * l2.mshrs as usize;
        Sizes {
            reqs,
            mshrs,
            // Every MSHR can wait for a DRAM queue slot and every fill can
            // cause one write-back; writes allocate too.
            retries: 2 * mshrs + reqs + dram.queue_capacity(),
            // Each request has at most one event pending.
            queue: reqs,
        }
    }
}

/// The L2 and DRAM behind every SM's TMA engine.
pub struct MemorySystem<'a> {
    cfg: L2Config,
    /// The slice hash over the configured slices, without a division.
    select: SliceSelector,
    sms: u16,
    rng: Rng,
    reqs: &'a mut [Req],
    free: &'a mut [u32],
    nfree: usize,
    coalescer: FixedMap<'a, u32>,
    mshr: FixedMap<'a, u32>,
    slices: &'a mut [SliceState],
    tags: HVec<TagArray<'a>, MAX_SLICES>,
    queue: TimingWheel<'a, MemEv>,
    dram: Dram<'a>,
    done: Ring<'a, Completion>,
    retry: Waiting<'a>,
    log: Ring<'a, DramRequest>,
    stats: MemStats,
    /// Test-only fault: reads that would merge into a fill in flight are
    /// answered as hits (see `Fault::EarlyHit`).
    early_hits: bool,
}

impl<'a> MemorySystem<'a> {
    /// Accounts in `l` for every table of a memory system for `sms` SMs,
    /// each with `max_lines` requests in flight.
    pub fn layout(
        l2: &L2Config,
        dram: &DramConfig,
        sms: u16,
        max_lines: u16,
        l: &mut Layout,
    ) -> Result<(), BuildError> {
        let z = Sizes::new(l2, dram, sms, max_lines);
        l.add::<Req>(z.reqs)?;
        l.add::<u32>(z.reqs)?;
        FixedMap::<u32>::layout(z.reqs, l)?;
        FixedMap::<u32>::layout(z.mshrs, l)?;
        l.add::<SliceState>(l2.slices as usize)?;
        for _ in 0..l2.slices {
            TagArray::layout(l2.sets as usize, l2.ways as usize, l)?;
        }
        TimingWheel::<MemEv>::layout(z.queue, WHEEL_LOG2, l)?;
        Dram::layout(dram, l)?;
        l.add::<Completion>(dram.queue_capacity())?;
        l.add::<DramRetry>(z.retries)?;
        l.add::<u32>(dram.channels as usize)?;
        l.add::<u32>(dram.channels as usize)?;
        l.add::<u64>((dram.channels as usize).div_ceil(64))?;
        l.add::<DramRequest>(z.retries)?;
        Ok(())
    }

    /// Builds the memory system from `arena`.
    pub fn new(
        l2: &L2Config,
        dram: &DramConfig,
        sms: u16,
        max_lines: u16,
        seed: u64,
        a: &mut Arena<'a>,
    ) -> Result<Self, BuildError> {
        let z = Sizes::new(l2, dram, sms, max_lines);
        let reqs = a.alloc(z.reqs, Req::EMPTY, Capacity::MemoryPort)?;
        let free = a.alloc(z.reqs, 0u32, Capacity::MemoryPort)?;
        for (i, f) in free.iter_mut().enumerate() {
            *f = (z.reqs - 1 - i) as u32;
        }
        let coalescer = FixedMap::new_in(a, z.reqs, Capacity::MemoryPort)?;
        let mshr = FixedMap::new_in(a, z.mshrs, Capacity::MemoryPort)?;
        let slices = a.alloc(
            l2.slices as usize,
            SliceState {
                next_free: 0,
                served: 0,
                crossing_free: 0,
                mshrs_used: 0,
                wait_head: NIL,
                wait_tail: NIL,
            },
            Capacity::MemoryPort,
        )?;
        let mut tags = HVec::new();
        for _ in 0..l2.slices {
            let t = TagArray::new_in(a, l2.sets as usize, l2.ways as usize, Capacity::MemoryPort)?;
            if tags.push(t).is_err() {
                return Err(BuildError::TooLarge);
            }
        }
        let dram_model = Dram::new(dram, a)?;
        let cfill = Completion {
            tag: 0,
            write: false,
            cycle: 0,
        };
        let done = a.alloc(dram.queue_capacity(), cfill, Capacity::MemoryPort)?;
        let pool = a.alloc(
            z.retries,
            DramRetry {
                addr: 0,
                write: false,
                tag: 0,
                next: NIL,
            },
            Capacity::MemoryPort,
        )?;
        for (i, r) in pool.iter_mut().enumerate() {
            r.next = if i + 1 < z.retries { i as u32 + 1 } else { NIL };
        }
        let retry = Waiting {
            pool,
            free: if z.retries > 0 { 0 } else { NIL },
            head: a.alloc(dram.channels as usize, NIL, Capacity::MemoryPort)?,
            tail: a.alloc(dram.channels as usize, NIL, Capacity::MemoryPort)?,
            busy: a.alloc(
                (dram.channels as usize).div_ceil(64),
                0u64,
                Capacity::MemoryPort,
            )?,
        };
        let log = a.alloc(
            z.retries,
            DramRequest {
                cycle: 0,
                write: false,
                addr: 0,
            },
            Capacity::MemoryPort,
        )?;
        Ok(MemorySystem {
            cfg: *l2,
            select: SliceSelector::new(l2.hash, l2.slices as u32),
            sms,
            rng: Rng::new(seed ^ 0x4C32_5052_4F58_5921),
            nfree: z.reqs,
            reqs,
            free,
            coalescer,
            mshr,
            slices,
            tags,
            queue: TimingWheel::new_in(a, z.queue, WHEEL_LOG2, Capacity::MemoryPort)?,
            dram: dram_model,
            done: Ring {
                buf: done,
                head: 0,
                len: 0,
            },
            retry,
            log: Ring {
                buf: log,
                head: 0,
                len: 0,
            },
            stats: MemStats::default(),
            early_hits: false,
        })
    }

    /// Injects (or not) the test-only `Fault::EarlyHit`: a read that finds
    /// its line's fill in flight is answered as a hit after the hit latency
    /// instead of waiting for the fill.
    pub fn with_early_hits(mut self, on: bool) -> Self {
        self.early_hits = on;
        self
    }

    /// Counters so far.
    pub fn stats(&self) -> MemStats {
        self.stats
    }

    /// The DRAM model (for its statistics).
    pub fn dram(&self) -> &Dram<'a> {
        &self.dram
    }

    fn partition_of_sm(&self, sm: u16) -> u16 {
        ((sm as u32 * 2) / self.sms.max(1) as u32) as u16
    }

    fn partition_of_slice(&self, slice: u16) -> u16 {
        (slice as u32 * 2 / self.cfg.slices as u32) as u16
    }

    fn home(&self, line: u64) -> u16 {
        self.select.slice(line) as u16
    }

    fn push(&mut self, cycle: u64, ev: MemEv) {
        // Capacity equals the request pool and each request has at most one
        // event pending, so the queue cannot overflow.
        let _ = self.queue.push(cycle, ev.class(), ev);
    }

    /// The coalescer's key of a read of `line` by SM `sm`: the line and
    /// the SM's coalescer group.
    fn coalescer_key(&self, line: u64, sm: u16) -> u64 {
        line ^ ((self.cfg.coalescer_group(sm as usize) as u64) << 56)
    }

    /// Offers one line request at cycle `now`.
    pub fn try_request(&mut self, now: u64, r: &LineRequest) -> Result<(), Busy> {
        if self.nfree == 0 {
            return Err(Busy);
        }
        self.nfree -= 1;
        let id = self.free[self.nfree];
        let line = r.addr / self.cfg.line_bytes as u64;
        self.reqs[id as usize] = Req {
            token: r.token,
            sm: r.sm,
            write: r.write,
            line,
            ..Req::EMPTY
        };
        self.stats.requests += 1;
        if r.write {
            self.stats.writes += 1;
        } else if self.cfg.coalescer {
            let key = self.coalescer_key(line, r.sm);
            if let Some(&leader) = self.coalescer.get(key) {
                let lr = self.reqs[leader as usize];
                let group = |sm: u16| self.cfg.coalescer_group(sm as usize);
                if lr.line == line && group(lr.sm) == group(r.sm) {
                    self.reqs[id as usize].co_next = lr.co_next;
                    self.reqs[leader as usize].co_next = id;
                    self.stats.coalesced += 1;
                    return Ok(());
                }
            } else {
                let _ = self.coalescer.insert(key, id);
            }
        }
        self.route(now, id);
        Ok(())
    }

    /// Sends request `id` across the crossbar towards its slice.
    fn route(&mut self, now: u64, id: u32) {
        let r = self.reqs[id as usize];
        let home = self.home(r.line);
        let near = self.partition_of_sm(r.sm);
        let far = self.partition_of_slice(home) != near;
        self.reqs[id as usize].far = far;
        self.stats.l2_requests += 1;
        let xbar = self.cfg.xbar_latency as u64;
        if far && !r.write && self.cfg.proxy.enabled {
            // The probe is a tag lookup: it holds the mirror's port for a
            // cycle; its data, when the copy is there, moves afterwards.
            let mirror = self.mirror(home);
            let t = self.reserve_lookup(mirror, now + xbar);
            self.push(
                t,
                MemEv::Arrive {
                    req: id,
                    slice: mirror,
                    probe: true,
                },
            );
        } else {
            let t = now + xbar + if far { self.cfg.far_latency as u64 } else { 0 };
            let t = self.reserve(home, t, far);
            self.push(
                t,
                MemEv::Arrive {
                    req: id,
                    slice: home,
                    probe: false,
                },
            );
        }
    }

    fn mirror(&self, slice: u16) -> u16 {
        (slice + self.cfg.slices / 2) % self.cfg.slices
    }

    /// Reserves the input port of `slice` for a request arriving at `t` for
    /// its share of cycles at `slice_bytes_per_cycle`, and, from the other
    /// partition when `far`, the slice's crossing between the partitions
    /// from then on at `far_bytes_per_cycle` ([`L2Config::port_cycles`]);
    /// returns when the port (for a far request, the crossing) takes it.
    fn reserve(&mut self, slice: u16, t: u64, far: bool) -> u64 {
        let s = &mut self.slices[slice as usize];
        let at = t.max(s.next_free);
        let k = s.served;
        s.served = s.served.wrapping_add(1);
        s.next_free = at + self.cfg.port_cycles(k, false) as u64;
        if !far || !self.cfg.crossing_binds() {
            return at;
        }
        let cross = at.max(s.crossing_free);
        s.crossing_free = cross + self.cfg.port_cycles(k, true) as u64;
        cross
    }

    /// Reserves one cycle of `slice`'s port for a tag lookup that moves no
    /// data (a far read probing the mirror for a shadow copy); returns when
    /// the port takes it.
    fn reserve_lookup(&mut self, slice: u16, t: u64) -> u64 {
        let s = &mut self.slices[slice as usize];
        let at = t.max(s.next_free);
        s.next_free = at + 1;
        at
    }

    /// A lookup at `t` on `slice` found data to move (a shadow copy): the
    /// port is held for the line's share of cycles, the lookup's cycle
    /// being the first.
    fn hold_from_lookup(&mut self, slice: u16, t: u64) {
        let s = &mut self.slices[slice as usize];
        let len = self.cfg.port_cycles(s.served, false);
        s.served = s.served.wrapping_add(1);
        s.next_free = s.next_free.max(t + 1) + (len as u64).saturating_sub(1);
    }

    /// Cycles from a slice answering to the data reaching the SM.
    fn back(&self, id: u32) -> u64 {
        self.cfg.xbar_latency as u64
            + if self.reqs[id as usize].far {
                self.cfg.far_latency as u64
            } else {
                0
            }
    }

    /// The next cycle at which the memory system has something to do.
    pub fn next_event(&self) -> Option<u64> {
        match (self.queue.next_cycle(), self.dram.next_event()) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Processes everything due up to and including `now`, telling `done`
    /// of every request that completes (and, if it wants them, of the L2's
    /// fills and answers, see [`MemSink`]).
    pub fn advance(&mut self, now: u64, done: &mut impl MemSink) {
        loop {
            let tq = self.queue.next_cycle().filter(|&c| c <= now);
            let td = self.dram.next_event().filter(|&c| c <= now);
            match (tq, td) {
                (None, None) => break,
                (Some(q), Some(d)) if q < d => self.pop_event(done),
                (Some(_), None) => self.pop_event(done),
                (_, Some(d)) => {
                    let MemorySystem {
                        dram, done: ring, ..
                    } = self;
                    dram.advance(d, &mut |c| {
                        let _ = ring.push(c);
                    });
                    while let Some(c) = self.done.pop() {
                        self.dram_done(c, done);
                    }
                    self.retry_dram(d);
                }
            }
        }
    }

    fn pop_event(&mut self, done: &mut impl MemSink) {
        let Some(e) = self.queue.pop() else { return };
        let t = e.cycle;
        match e.event {
            MemEv::Arrive { req, slice, probe } => self.arrive(t, req, slice, probe, done),
            MemEv::Respond { req } => self.respond(t, req, done),
            MemEv::Fill { req } => self.fill(t, req, done),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The line-level hierarchy of `cfg` (64 requests in flight per SM), in
    /// `buf`.
    fn system<'a>(
        cfg: &crate::config::GpuConfig,
        buf: &'a mut std::vec::Vec<u8>,
    ) -> MemorySystem<'a> {
        let mut l = Layout::new();
        MemorySystem::layout(&cfg.l2, &cfg.dram, cfg.sms, 64, &mut l).unwrap();
        buf.resize(l.bytes(), 0);
        let mut a = Arena::new(buf);
        MemorySystem::new(&cfg.l2, &cfg.dram, cfg.sms, 64, 7, &mut a).unwrap()
    }

    /// Serves `reqs` (SM, line address) offered at `now` and returns when
    /// each completed.
    fn serve(m: &mut MemorySystem<'_>, now: u64, reqs: &[(u16, u64)]) -> std::vec::Vec<u64> {
        for (i, &(sm, addr)) in reqs.iter().enumerate() {
            let r = LineRequest {
                sm,
                addr,
                write: false,
                token: i as u32,
            };
            m.try_request(now, &r).unwrap();
        }
        let mut done = std::vec![0u64; reqs.len()];
        while let Some(t) = m.next_event() {
            m.advance(t, &mut |tok: u32, c: u64| done[tok as usize] = c);
        }
        done
    }

    /// SMs 0 and 3 reading one line at once merge in the coalescer only
    /// when `l2.coalescer_sms` puts them in one group; the merged read
    /// then completes with the first.
    #[test]
    fn reads_merge_only_within_a_coalescer_group() {
        let run = |group: u16| {
            let mut cfg = crate::config::GpuConfig::h800();
            cfg.l2.coalescer_sms = group;
            let mut buf = std::vec::Vec::new();
            let m = &mut system(&cfg, &mut buf);
            let done = serve(m, 0, &[(0, 1 << 30), (3, 1 << 30)]);
            (m.stats().coalesced, done)
        };
        let (pairs, _) = run(2);
        assert_eq!(pairs, 0, "SMs 0 and 3 are in different pairs");
        let (fours, done) = run(4);
        assert_eq!(fours, 1);
        assert_eq!(done[0], done[1], "the merged read completes with the first");
    }

    #[test]
    fn a_probe_that_finds_no_copy_holds_the_mirror_port_one_cycle() {
        let mut cfg = crate::config::GpuConfig::h800();
        // Four cycles a line at every slice; no shadow copy is ever made,
        // so every far read probes its mirror and misses there.
        cfg.l2.slice_bytes_per_cycle = crate::time::Ratio::new(32, 1);
        cfg.l2.far_bytes_per_cycle = crate::time::Ratio::new(32, 1);
        cfg.l2.proxy.threshold_permille = 0;
        cfg.l2.proxy.max_prob_permille = 0;
        let mut buf = std::vec::Vec::new();
        let m = &mut system(&cfg, &mut buf);
        let sel = SliceSelector::new(cfg.l2.hash, cfg.l2.slices as u32);
        let (lb, half) = (cfg.l2.line_bytes as u64, cfg.l2.slices as u32 / 2);
        // A line homed in the far partition of SM 0, and a near line homed
        // in that line's mirror slice.
        let far = (1u64 << 20..).find(|&x| sel.slice(x) >= half).unwrap();
        let mirror = sel.slice(far) - half;
        let near = (1u64 << 21..).find(|&x| sel.slice(x) == mirror).unwrap();
        let (far, near) = (far * lb, near * lb);
        let warm = serve(m, 0, &[(0, far), (0, near)]);
        let t = warm[0].max(warm[1]) + 10_000;
        let alone = serve(m, t, &[(0, near)])[0] - t;
        let t2 = t + 10_000;
        let both = serve(m, t2, &[(0, far), (0, near)]);
        assert_eq!(m.stats().shadow_hits, 0);
        // A lookup moves no data: the near read waits one cycle for it, not
        // the four a line's data holds the port.
        assert_eq!(both[1] - t2, alone + 1, "{both:?}");
    }

    #[test]
    fn a_far_line_crosses_without_holding_its_slice_port_longer() {
        let mut cfg = crate::config::GpuConfig::h800();
        // Two cycles a line at a slice's port, eight across the partitions;
        // no proxy, so a far read goes straight to its home slice.
        cfg.l2.slice_bytes_per_cycle = crate::time::Ratio::new(64, 1);
        cfg.l2.far_bytes_per_cycle = crate::time::Ratio::new(16, 1);
        cfg.l2.proxy.enabled = false;
        let mut buf = std::vec::Vec::new();
        let m = &mut system(&cfg, &mut buf);
        let sel = SliceSelector::new(cfg.l2.hash, cfg.l2.slices as u32);
        let (lb, half) = (cfg.l2.line_bytes as u64, cfg.l2.slices as u32 / 2);
        // Two lines of one slice of partition 1: far from SM 0, near to
        // the last SM.
        let x = (1u64 << 20..).find(|&v| sel.slice(v) >= half).unwrap();
        let y = (1u64 << 21..)
            .find(|&v| sel.slice(v) == sel.slice(x))
            .unwrap();
        let (x, y, last) = (x * lb, y * lb, cfg.sms - 1);
        let warm = serve(m, 0, &[(0, x), (last, y)]);
        let t = warm[0].max(warm[1]) + 10_000;
        let alone = serve(m, t, &[(last, y)])[0] - t;
        // The far read, then the near one `far_latency` later, so that it
        // reaches the slice just after.
        let t2 = t + 10_000;
        let req = |sm, addr, token| LineRequest {
            sm,
            addr,
            write: false,
            token,
        };
        m.try_request(t2, &req(0, x, 0)).unwrap();
        let t2n = t2 + cfg.l2.far_latency as u64 + 1;
        let mut done = [0u64; 2];
        while let Some(e) = m.next_event().filter(|&e| e < t2n) {
            m.advance(e, &mut |tok: u32, c: u64| done[tok as usize] = c);
        }
        m.try_request(t2n, &req(last, y, 1)).unwrap();
        while let Some(e) = m.next_event() {
            m.advance(e, &mut |tok: u32, c: u64| done[tok as usize] = c);
        }
        let after = done[1] - t2n;
        // The near read waits for the far line's two cycles at the port at
        // most, not the eight of its crossing.
        assert!(after <= alone + 2, "{after} vs {alone}");
        assert!(after > alone, "{after} vs {alone}: the reads did not meet");
    }

    #[test]
    fn key_is_a_bijection() {
        for line in [0u64, 1, 2, 127, 1 << 40, u64::MAX, 0x1234_5678_9abc] {
            assert_eq!(line_of(key_of(line)), line);
        }
    }
}
