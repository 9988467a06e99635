//! The controllers: per-channel queues, bank state, FR-FCFS scheduling,
//! write draining and refresh, served in `(clock, channel)` order.
//!
//! # Scheduling
//!
//! Each bank offers at most one candidate command for the active queue
//! (reads, or writes while draining): a column command for its oldest
//! request that hits the open row; otherwise, for its oldest request, ACT
//! (bank closed) or PRE (another row open). A bank's candidate, with the
//! bank's own share of its ready time, is cached in a compact "hot" entry
//! and recomputed only when something about that bank changed (a command
//! to it, a request added or finished, refresh, a read/write mode switch).
//! At a decision clock the channel issues, among candidates that may
//! legally issue, a column command before a row command, then the oldest
//! request (lowest arrival sequence). The ready time of a candidate is the
//! maximum of its cached bank share, one of its bank group's timers and one
//! of the channel's timers (selected by command type), so a scan is a
//! branch-free pass over the hot entries of the banks with queued
//! requests. When nothing may issue, the channel sleeps until the earliest
//! clock at which something could: a decision costs O(banks), never
//! O(clocks), and idle channels cost nothing but their refreshes.

use super::config::DramConfig;
use super::heap::ChannelTree;
use super::{Command, CommandKind, Completion, DramFull};
use crate::arena::{Arena, Layout};
use crate::error::{BuildError, Capacity};
use super::heap::MAX_KEY;
use crate::time::Ratio;

const NIL: u16 = u16::MAX;
const CLOSED: u32 = u32::MAX;

const UNCLASSIFIED: u8 = 0;
const HIT: u8 = 1;
const MISS: u8 = 2;
const CONFLICT: u8 = 3;

const C_NONE: u8 = 0;
const C_ACT: u8 = 1;
const C_PRE: u8 = 2;
const C_COL: u8 = 3;

/// Counters of a [`Dram`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct DramStats {
    /// Reads completed.
    pub reads: u64,
    /// Writes completed.
    pub writes: u64,
    /// Requests whose first command was a column command (row already open).
    pub row_hits: u64,
    /// Requests whose first command was an ACT (bank closed).
    pub row_misses: u64,
    /// Requests whose first command was a PRE (another row open).
    pub row_conflicts: u64,
    /// ACT commands.
    pub activates: u64,
    /// PRE and PREA commands.
    pub precharges: u64,
    /// REF commands.
    pub refreshes: u64,
    /// Bytes of completed requests.
    pub bytes: u64,
    /// Sum over completed reads of SM cycles from enqueue to completion.
    pub read_latency_sum: u64,
    /// Largest such latency.
    pub read_latency_max: u64,
}

/// Timing and geometry in the units the scheduler uses.
#[derive(Clone, Copy, Debug)]
struct Params {
    channels: usize,
    groups: usize,
    bpg: usize,
    banks: usize,
    slots: usize,
    rets: usize,
    bursts: u8,
    line_bytes: u64,
    rq: u16,
    wq: u16,
    hi: u16,
    lo: u16,
    clock: Ratio,
    bl: u64,
    cl: u64,
    cwl: u64,
    rcdrd: u64,
    rcdwr: u64,
    rp: u64,
    ras: u64,
    rc: u64,
    rtp: u64,
    /// WR to PRE, same bank: CWL + BL + WR.
    wr_pre: u64,
    /// Column to column of the same kind, any banks: max(CCD_S, BL).
    cas_s: u64,
    ccdl: u64,
    rrds: u64,
    rrdl: u64,
    faw: u64,
    /// WR to RD, different bank groups: CWL + BL + WTR_S.
    wtr_s: u64,
    /// WR to RD, same bank group: CWL + BL + WTR_L.
    wtr_l: u64,
    rtw: u64,
    rfc: u64,
    refi: u64,
    ctrl: u64,
}

impl Params {
    fn new(c: &DramConfig) -> Params {
        let t = &c.timing;
        let w = |x: u32| x as u64;
        Params {
            channels: c.channels as usize,
            groups: c.bank_groups as usize,
            bpg: c.banks_per_group as usize,
            banks: c.banks(),
            slots: c.read_queue as usize + c.write_queue as usize,
            rets: c.return_slots(),
            bursts: c.bursts_per_line() as u8,
            line_bytes: c.line_bytes as u64,
            rq: c.read_queue,
            wq: c.write_queue,
            hi: c.write_high,
            lo: c.write_low,
            clock: c.clock,
            bl: w(t.n_bl),
            cl: w(t.n_cl),
            cwl: w(t.n_cwl),
            rcdrd: w(t.n_rcdrd),
            rcdwr: w(t.n_rcdwr),
            rp: w(t.n_rp),
            ras: w(t.n_ras),
            rc: w(t.n_rc),
            rtp: w(t.n_rtp),
            wr_pre: w(t.n_cwl) + w(t.n_bl) + w(t.n_wr),
            cas_s: w(t.n_ccds).max(w(t.n_bl)),
            ccdl: w(t.n_ccdl),
            rrds: w(t.n_rrds),
            rrdl: w(t.n_rrdl),
            faw: w(t.n_faw),
            wtr_s: w(t.n_cwl) + w(t.n_bl) + w(t.n_wtrs),
            wtr_l: w(t.n_cwl) + w(t.n_bl) + w(t.n_wtrl),
            rtw: w(t.n_rtw),
            rfc: w(t.n_rfc),
            refi: w(t.n_refi),
            ctrl: w(c.ctrl_latency),
        }
    }
}

/// Timer selectors: which group / channel timer a candidate waits on.
const SEL_ACT: u8 = 0;
const SEL_RD: u8 = 1;
const SEL_WR: u8 = 2;
const SEL_PRE: u8 = 3;

/// Per-channel scalars.
#[derive(Clone, Copy, Debug)]
struct Chan {
    /// Next decision clock.
    dkey: u64,
    /// Command bus: one command per clock.
    next_cmd: u64,
    /// Channel timers by selector: ACT (tRRD_S, tFAW); RD (tCCD_S / tBL
    /// after RD, tWTR_S after WR); WR (tCCD_S / tBL after WR, tRTW after
    /// RD); none (PRE).
    ct: [u64; 4],
    /// The last four ACT clocks (ring).
    faw: [u64; 4],
    faw_n: u8,
    faw_i: u8,
    /// Draining writes.
    writing: bool,
    rq_len: u16,
    wq_len: u16,
    /// Head of the free-slot list.
    free: u16,
    /// Return ring (sorted by clock).
    ret_head: u16,
    ret_len: u16,
    /// Clock of the ring's first entry (`u64::MAX` when empty).
    ret_next: u64,
    /// Clock at which the next refresh is due.
    ref_due: u64,
    /// Banks with an open row.
    open: u64,
    /// Banks with queued reads / writes.
    rd_banks: u64,
    wr_banks: u64,
    /// Banks whose cached candidate is stale.
    dirty: u64,
    /// Arrival sequence.
    seq: u64,
    /// Data-bus busy clocks.
    busy: u64,
}

impl Chan {
    const EMPTY: Chan = Chan {
        dkey: 0,
        next_cmd: 0,
        ct: [0; 4],
        faw: [0; 4],
        faw_n: 0,
        faw_i: 0,
        writing: false,
        rq_len: 0,
        wq_len: 0,
        free: NIL,
        ret_head: 0,
        ret_len: 0,
        ret_next: u64::MAX,
        ref_due: 0,
        open: 0,
        rd_banks: 0,
        wr_banks: 0,
        dirty: 0,
        seq: 0,
        busy: 0,
    };
}

/// Bank-group timers by selector: ACT (tRRD_L); RD (tCCD_L after RD,
/// tWTR_L after WR); WR (tCCD_L after WR); none.
#[derive(Clone, Copy, Debug)]
struct Group {
    t: [u64; 4],
}

#[derive(Clone, Copy, Debug)]
struct List {
    head: u16,
    tail: u16,
}

/// What a scan reads of a bank: its cached candidate.
#[derive(Clone, Copy, Debug)]
struct Hot {
    /// The bank's share of the candidate's ready time (bank timers and the
    /// request's arrival).
    ready: u64,
    /// Priority, lowest first: `row_command << 63 | seq << 6 | bank`.
    key: u64,
    /// Timer selector.
    sel: u8,
    /// Bank group.
    grp: u8,
}

/// One bank's state.
#[derive(Clone, Copy, Debug)]
struct Bank {
    row: u32,
    /// Queued reads / writes to the open row.
    rd_hits: u16,
    wr_hits: u16,
    /// The candidate: kind and request.
    cand_kind: u8,
    cand_slot: u16,
    next_act: u64,
    next_pre: u64,
    next_rd: u64,
    next_wr: u64,
    rd: List,
    wr: List,
}

impl Bank {
    const EMPTY: Bank = Bank {
        row: CLOSED,
        rd_hits: 0,
        wr_hits: 0,
        cand_kind: C_NONE,
        cand_slot: NIL,
        next_act: 0,
        next_pre: 0,
        next_rd: 0,
        next_wr: 0,
        rd: List { head: NIL, tail: NIL },
        wr: List { head: NIL, tail: NIL },
    };
}

/// A queued request.
#[derive(Clone, Copy, Debug)]
struct Slot {
    /// First DRAM clock it may be scheduled at.
    arrival: u64,
    /// SM cycle it was enqueued.
    enq: u64,
    seq: u64,
    tag: u32,
    row: u32,
    /// First column.
    col: u16,
    prev: u16,
    next: u16,
    /// Bursts still to issue.
    left: u8,
    class: u8,
    write: bool,
}

impl Slot {
    const EMPTY: Slot = Slot {
        arrival: 0,
        enq: 0,
        seq: 0,
        tag: 0,
        row: 0,
        col: 0,
        prev: NIL,
        next: NIL,
        left: 0,
        class: UNCLASSIFIED,
        write: false,
    };
}

/// A completion waiting for its clock.
#[derive(Clone, Copy, Debug)]
struct Ret {
    clock: u64,
    tag: u32,
    /// SM cycles from enqueue to completion (saturated to 31 bits), with
    /// bit 31 set for a write.
    lat_w: u32,
}

const WRITE_BIT: u32 = 1 << 31;

fn mul(a: usize, b: usize) -> Result<usize, BuildError> {
    a.checked_mul(b).ok_or(BuildError::TooLarge)
}

fn bits(mut m: u64) -> impl Iterator<Item = usize> {
    core::iter::from_fn(move || {
        if m == 0 {
            None
        } else {
            let b = m.trailing_zeros() as usize;
            m &= m - 1;
            Some(b)
        }
    })
}

/// Every pseudo-channel's controller. See the [module](super) documentation.
#[derive(Debug)]
pub struct Dram<'a> {
    cfg: DramConfig,
    p: Params,
    chans: &'a mut [Chan],
    groups: &'a mut [Group],
    hot: &'a mut [Hot],
    /// Per channel, group and timer selector: the least bank-and-group
    /// share of the ready times of the candidates (scratch of the scan).
    mins: &'a mut [[u64; 4]],
    banks: &'a mut [Bank],
    slots: &'a mut [Slot],
    rets: &'a mut [Ret],
    order: ChannelTree<'a>,
    /// First DRAM clock not yet processed.
    next_clock: u64,
    /// Requests accepted and not yet reported.
    pending: u64,
    stats: DramStats,
}

impl<'a> Dram<'a> {
    /// Accounts in `l` for the tables of a DRAM system for `cfg`.
    pub fn layout(cfg: &DramConfig, l: &mut Layout) -> Result<(), BuildError> {
        cfg.validate()?;
        let p = Params::new(cfg);
        let c = p.channels;
        l.add::<Chan>(c)?;
        l.add::<Group>(mul(c, p.groups)?)?;
        l.add::<Hot>(mul(c, p.banks)?)?;
        l.add::<[u64; 4]>(mul(c, p.groups)?)?;
        l.add::<Bank>(mul(c, p.banks)?)?;
        l.add::<Slot>(mul(c, p.slots)?)?;
        l.add::<Ret>(mul(c, p.rets)?)?;
        l.add::<u64>(ChannelTree::nodes(c))?;
        Ok(())
    }

    /// Bytes of arena [`Dram::new`] needs for `cfg`.
    pub fn arena_size(cfg: &DramConfig) -> Result<usize, BuildError> {
        let mut l = Layout::new();
        Self::layout(cfg, &mut l)?;
        Ok(l.bytes())
    }

    /// Builds the controllers from `arena`, every bank closed, at DRAM
    /// clock 0. Channel `c`'s first refresh is due at
    /// `n_refi * (c + 1) / channels`, staggering refreshes.
    pub fn new(cfg: &DramConfig, arena: &mut Arena<'a>) -> Result<Dram<'a>, BuildError> {
        cfg.validate()?;
        let p = Params::new(cfg);
        let c = p.channels;
        let what = Capacity::MemoryPort;
        let due = |i: usize| p.refi * (i as u64 + 1) / c as u64;
        let chans = arena.alloc(c, Chan::EMPTY, what)?;
        let groups = arena.alloc(mul(c, p.groups)?, Group { t: [0; 4] }, what)?;
        let hot = arena.alloc(
            mul(c, p.banks)?,
            Hot {
                ready: 0,
                key: u64::MAX,
                sel: SEL_PRE,
                grp: 0,
            },
            what,
        )?;
        for (i, h) in hot.iter_mut().enumerate() {
            h.grp = (i % p.banks / p.bpg) as u8;
        }
        let mins = arena.alloc(mul(c, p.groups)?, [u64::MAX; 4], what)?;
        let banks = arena.alloc(mul(c, p.banks)?, Bank::EMPTY, what)?;
        let slots = arena.alloc(mul(c, p.slots)?, Slot::EMPTY, what)?;
        let rets = arena.alloc(
            mul(c, p.rets)?,
            Ret {
                clock: 0,
                tag: 0,
                lat_w: 0,
            },
            what,
        )?;
        let tree = arena.alloc(ChannelTree::nodes(c), 0u64, what)?;
        for (i, ch) in chans.iter_mut().enumerate() {
            ch.ref_due = due(i);
            ch.dkey = ch.ref_due;
            ch.free = 0;
            let base = i * p.slots;
            for j in 0..p.slots {
                slots[base + j].next = if j + 1 < p.slots { (j + 1) as u16 } else { NIL };
            }
        }
        Ok(Dram {
            cfg: *cfg,
            p,
            chans,
            groups,
            hot,
            mins,
            banks,
            slots,
            rets,
            order: ChannelTree::new(tree, c, due),
            next_clock: 0,
            pending: 0,
            stats: DramStats::default(),
        })
    }

    /// The configuration.
    pub fn config(&self) -> &DramConfig {
        &self.cfg
    }

    /// Counters so far.
    pub fn stats(&self) -> DramStats {
        self.stats
    }

    /// DRAM clocks channel `channel`'s data bus has carried data.
    pub fn busy_clocks(&self, channel: usize) -> u64 {
        self.chans[channel].busy
    }

    /// Requests accepted and not yet completed.
    pub fn pending(&self) -> u64 {
        self.pending
    }

    /// Reads and writes queued (not yet fully issued) in `channel`.
    pub fn queued(&self, channel: usize) -> (u16, u16) {
        let ch = &self.chans[channel];
        (ch.rq_len, ch.wq_len)
    }

    /// The first DRAM clock not yet processed.
    pub fn dram_clock(&self) -> u64 {
        self.next_clock
    }

    /// Whether [`Dram::try_enqueue`] of this request would succeed now.
    pub fn can_accept(&self, addr: u64, write: bool) -> bool {
        let ch = &self.chans[self.cfg.decode(addr).channel as usize];
        if write {
            ch.wq_len < self.p.wq
        } else {
            ch.rq_len < self.p.rq
        }
    }

    /// Queues a line request arriving at SM cycle `now`; it completes with
    /// `tag`. Fails, changing nothing, when its pseudo-channel's read (or
    /// write) queue is full. `now` must not decrease between calls, and
    /// should not be earlier than the last [`Dram::advance`]'s; for exact
    /// queue occupancy, advance to `now` first.
    pub fn try_enqueue(&mut self, now: u64, addr: u64, write: bool, tag: u32) -> Result<(), DramFull> {
        let a = self.cfg.decode(addr);
        let c = a.channel as usize;
        let p = self.p;
        let ch = &mut self.chans[c];
        if (write && ch.wq_len >= p.wq) || (!write && ch.rq_len >= p.rq) {
            return Err(DramFull { channel: a.channel });
        }
        let s = ch.free;
        let base = c * p.slots;
        ch.free = self.slots[base + s as usize].next;
        let b = a.bank_group as usize * p.bpg + a.bank as usize;
        let arrival = p.clock.mul_ceil(now).max(self.next_clock);
        let bank = &mut self.banks[c * p.banks + b];
        let list = if write { &mut bank.wr } else { &mut bank.rd };
        let tail = list.tail;
        self.slots[base + s as usize] = Slot {
            arrival,
            enq: now,
            seq: ch.seq,
            tag,
            row: a.row,
            col: a.line * p.bursts as u16,
            prev: tail,
            next: NIL,
            left: p.bursts,
            class: UNCLASSIFIED,
            write,
        };
        if tail == NIL {
            list.head = s;
        } else {
            self.slots[base + tail as usize].next = s;
        }
        list.tail = s;
        if bank.row == a.row {
            if write {
                bank.wr_hits += 1;
            } else {
                bank.rd_hits += 1;
            }
        }
        ch.seq += 1;
        if write {
            ch.wq_len += 1;
            ch.wr_banks |= 1 << b;
        } else {
            ch.rq_len += 1;
            ch.rd_banks |= 1 << b;
        }
        ch.dirty |= 1 << b;
        ch.dkey = ch.dkey.min(arrival.max(ch.next_cmd));
        self.pending += 1;
        self.rekey(c);
        Ok(())
    }

    /// The SM cycle at which the controllers next have something to do (a
    /// command may issue, a refresh is due, or data returns), or `None`
    /// when no request is pending. Always later than the last `advance`.
    pub fn next_event(&self) -> Option<u64> {
        if self.pending == 0 {
            return None;
        }
        Some(self.p.clock.div_ceil(self.order.top().1))
    }

    /// Processes everything up to and including SM cycle `now`, calling
    /// `done` for every request that completes by then.
    pub fn advance(&mut self, now: u64, done: &mut impl FnMut(Completion)) {
        self.advance_observed(now, done, &mut |_| {});
    }

    /// [`Dram::advance`], also calling `cmd` for every command issued, in
    /// (clock, channel) order.
    pub fn advance_observed(
        &mut self,
        now: u64,
        done: &mut impl FnMut(Completion),
        cmd: &mut impl FnMut(Command),
    ) {
        let r = self.p.clock;
        let limit = (now as u128 * r.num as u128 / r.den.max(1) as u128).min(MAX_KEY as u128 - 1) as u64;
        loop {
            let (c, k) = self.order.top();
            if k > limit {
                break;
            }
            self.step(c, k, done, cmd);
        }
        self.next_clock = self.next_clock.max(limit + 1);
    }

    fn rekey(&mut self, c: usize) {
        let ch = &self.chans[c];
        self.order.set(c, ch.dkey.min(ch.ret_next));
    }

    /// Serves channel `c` at clock `t`: returns due data, then decides.
    fn step(&mut self, c: usize, t: u64, done: &mut impl FnMut(Completion), cmd: &mut impl FnMut(Command)) {
        let p = self.p;
        while self.chans[c].ret_next <= t {
            let ch = &mut self.chans[c];
            let r = self.rets[c * p.rets + ch.ret_head as usize];
            ch.ret_head += 1;
            if ch.ret_head as usize == p.rets {
                ch.ret_head = 0;
            }
            ch.ret_len -= 1;
            ch.ret_next = if ch.ret_len == 0 {
                u64::MAX
            } else {
                self.rets[c * p.rets + ch.ret_head as usize].clock
            };
            self.pending -= 1;
            let st = &mut self.stats;
            st.bytes += p.line_bytes;
            let write = r.lat_w & WRITE_BIT != 0;
            if write {
                st.writes += 1;
            } else {
                st.reads += 1;
                let lat = r.lat_w as u64;
                st.read_latency_sum += lat;
                st.read_latency_max = st.read_latency_max.max(lat);
            }
            done(Completion {
                tag: r.tag,
                write,
                cycle: p.clock.div_ceil(r.clock),
            });
        }
        if self.chans[c].dkey <= t {
            self.decide(c, t, cmd);
        }
        self.rekey(c);
    }

    fn decide(&mut self, c: usize, t: u64, cmd: &mut impl FnMut(Command)) {
        if t >= self.chans[c].ref_due && self.refresh(c, t, cmd) {
            return;
        }
        self.update_mode(c);
        let (best, mut min) = self.scan(c, t);
        if best != u64::MAX {
            let b = (best & 63) as usize;
            self.issue(c, b, t, cmd);
            min = if self.update_mode(c) {
                self.scan(c, t).1
            } else {
                self.rescan_group(c, self.hot[c * self.p.banks + b].grp as usize)
            };
        }
        let ch = &mut self.chans[c];
        ch.dkey = min.min(ch.ref_due).max(t + 1);
    }

    /// Drives a due refresh. Returns true while it blocks the channel (the
    /// decision clock is then set), false once REF has issued at `t`.
    fn refresh(&mut self, c: usize, t: u64, cmd: &mut impl FnMut(Command)) -> bool {
        let p = self.p;
        let bb = c * p.banks;
        let open = self.chans[c].open;
        let mut out = Command {
            clock: t,
            channel: c as u16,
            kind: CommandKind::PreA,
            bank_group: 0,
            bank: 0,
            row: 0,
            col: 0,
        };
        if open != 0 {
            let mut r = self.chans[c].next_cmd;
            for b in bits(open) {
                r = r.max(self.banks[bb + b].next_pre);
            }
            if r <= t {
                for b in bits(open) {
                    let bank = &mut self.banks[bb + b];
                    bank.row = CLOSED;
                    bank.rd_hits = 0;
                    bank.wr_hits = 0;
                    bank.next_act = bank.next_act.max(t + p.rp);
                }
                let ch = &mut self.chans[c];
                ch.open = 0;
                ch.dirty = !0;
                ch.next_cmd = t + 1;
                self.stats.precharges += 1;
                cmd(out);
                r = t + 1;
                for b in 0..p.banks {
                    r = r.max(self.banks[bb + b].next_act);
                }
            }
            self.chans[c].dkey = r;
            return true;
        }
        let mut r = self.chans[c].next_cmd;
        for b in 0..p.banks {
            r = r.max(self.banks[bb + b].next_act);
        }
        if r > t {
            self.chans[c].dkey = r;
            return true;
        }
        for b in 0..p.banks {
            let bank = &mut self.banks[bb + b];
            bank.next_act = bank.next_act.max(t + p.rfc);
        }
        let ch = &mut self.chans[c];
        ch.next_cmd = t + 1;
        ch.ref_due += p.refi;
        ch.dirty = !0;
        self.stats.refreshes += 1;
        out.kind = CommandKind::Ref;
        cmd(out);
        false
    }

    /// Write-drain hysteresis: start draining at `write_high` writes (or
    /// when no read waits), stop at `write_low` when reads wait (or when no
    /// write is left).
    fn update_mode(&mut self, c: usize) -> bool {
        let p = self.p;
        let ch = &mut self.chans[c];
        let switch = if ch.writing {
            ch.wq_len == 0 || (ch.rq_len > 0 && ch.wq_len <= p.lo)
        } else {
            ch.wq_len > 0 && (ch.wq_len >= p.hi || ch.rq_len == 0)
        };
        if switch {
            ch.writing = !ch.writing;
            ch.dirty = !0;
        }
        switch
    }

    /// Recomputes bank `b`'s cached candidate for the active queue (the
    /// bank has requests in it).
    fn candidate(&mut self, c: usize, b: usize, writing: bool) {
        let base = c * self.p.slots;
        let bi = c * self.p.banks + b;
        let bank = &self.banks[bi];
        let list = if writing { bank.wr } else { bank.rd };
        let hits = if writing { bank.wr_hits } else { bank.rd_hits };
        debug_assert_eq!(
            (bank.rd_hits, bank.wr_hits),
            if bank.row == CLOSED { (0, 0) } else { self.count_hits(c, bi, bank.row) },
            "open-row hit counts"
        );
        let (mut kind, mut s) = (if bank.row == CLOSED { C_ACT } else { C_PRE }, list.head);
        if hits > 0 {
            let mut i = list.head;
            while i != NIL {
                let slot = &self.slots[base + i as usize];
                if slot.row == bank.row {
                    (kind, s) = (C_COL, i);
                    break;
                }
                i = slot.next;
            }
        }
        let slot = &self.slots[base + s as usize];
        let (own, sel) = match kind {
            C_ACT => (bank.next_act, SEL_ACT),
            C_PRE => (bank.next_pre, SEL_PRE),
            _ if writing => (bank.next_wr, SEL_WR),
            _ => (bank.next_rd, SEL_RD),
        };
        let h = &mut self.hot[bi];
        h.ready = own.max(slot.arrival);
        h.key = ((kind != C_COL) as u64) << 63 | slot.seq << 6 | b as u64;
        h.sel = sel;
        let bank = &mut self.banks[bi];
        bank.cand_kind = kind;
        bank.cand_slot = s;
    }

    /// Refreshes the cached candidates of the dirty banks among `mask`.
    fn refresh_candidates(&mut self, c: usize, mask: u64) {
        let ch = &self.chans[c];
        let writing = ch.writing;
        for b in bits(ch.dirty & mask) {
            self.candidate(c, b, writing);
        }
        self.chans[c].dirty &= !mask;
    }

    /// The priority key of the best candidate that may issue at `t`
    /// (`u64::MAX` if none; its low 6 bits are the bank), and the earliest
    /// clock after `t` at which another may. Leaves the per-group minima
    /// of the candidates in `mins` for [`Dram::rescan_group`].
    fn scan(&mut self, c: usize, t: u64) -> (u64, u64) {
        let (nb, ng) = (self.p.banks, self.p.groups);
        let ch = &self.chans[c];
        let mask = if ch.writing { ch.wr_banks } else { ch.rd_banks };
        self.refresh_candidates(c, mask);
        let ch = &self.chans[c];
        let (ct, floor) = (ch.ct, ch.next_cmd);
        let hot = &self.hot[c * nb..(c + 1) * nb];
        let groups = &self.groups[c * ng..(c + 1) * ng];
        let mins = &mut self.mins[c * ng..(c + 1) * ng];
        mins.fill([u64::MAX; 4]);
        let mut best = u64::MAX;
        let mut min = u64::MAX;
        for b in bits(mask) {
            let h = &hot[b];
            let s = h.sel as usize & 3;
            let g = h.grp as usize;
            let own = h.ready.max(groups[g].t[s]);
            mins[g][s] = mins[g][s].min(own);
            let r = own.max(ct[s]).max(floor);
            let ok = r <= t;
            best = best.min(if ok { h.key } else { u64::MAX });
            min = min.min(if ok { u64::MAX } else { r });
        }
        (best, min)
    }

    /// After a command to bank group `g` (and no mode switch): recomputes
    /// that group's minima and returns the earliest clock at which a
    /// candidate may issue. Other groups' candidates and timers did not
    /// change, and the channel's timers are common to every candidate with
    /// the same selector, so `min(max(own, ct, floor))` over the banks is
    /// `max(min(own), ct, floor)` per group and selector.
    fn rescan_group(&mut self, c: usize, g: usize) -> u64 {
        let (nb, ng, bpg) = (self.p.banks, self.p.groups, self.p.bpg);
        let ch = &self.chans[c];
        let all = if ch.writing { ch.wr_banks } else { ch.rd_banks };
        let mask = all & (((1u64 << bpg) - 1) << (g * bpg));
        self.refresh_candidates(c, mask);
        let ch = &self.chans[c];
        let (ct, floor) = (ch.ct, ch.next_cmd);
        let timers = self.groups[c * ng + g].t;
        let mut m = [u64::MAX; 4];
        for b in bits(mask) {
            let h = &self.hot[c * nb + b];
            let s = h.sel as usize & 3;
            m[s] = m[s].min(h.ready.max(timers[s]));
        }
        let mins = &mut self.mins[c * ng..(c + 1) * ng];
        mins[g] = m;
        let mut min = u64::MAX;
        for row in mins.iter() {
            for s in 0..4 {
                min = min.min(row[s].max(ct[s]).max(floor));
            }
        }
        min
    }

    /// Queued reads and writes of bank `bi` to `row`.
    fn count_hits(&self, c: usize, bi: usize, row: u32) -> (u16, u16) {
        let base = c * self.p.slots;
        let count = |mut i: u16| {
            let mut n = 0;
            while i != NIL {
                let slot = &self.slots[base + i as usize];
                n += (slot.row == row) as u16;
                i = slot.next;
            }
            n
        };
        let bank = &self.banks[bi];
        (count(bank.rd.head), count(bank.wr.head))
    }

    fn classify(&mut self, si: usize, class: u8) {
        let slot = &mut self.slots[si];
        if slot.class != UNCLASSIFIED {
            return;
        }
        slot.class = class;
        match class {
            HIT => self.stats.row_hits += 1,
            MISS => self.stats.row_misses += 1,
            _ => self.stats.row_conflicts += 1,
        }
    }

    /// Issues bank `b`'s candidate at `t`.
    fn issue(&mut self, c: usize, b: usize, t: u64, cmd: &mut impl FnMut(Command)) {
        let p = self.p;
        let bi = c * p.banks + b;
        let (kind, s) = (self.banks[bi].cand_kind, self.banks[bi].cand_slot);
        let si = c * p.slots + s as usize;
        let grp = self.hot[bi].grp as usize;
        let gi = c * p.groups + grp;
        let mut out = Command {
            clock: t,
            channel: c as u16,
            kind: CommandKind::Act,
            bank_group: grp as u8,
            bank: (b - grp * p.bpg) as u8,
            row: self.slots[si].row,
            col: 0,
        };
        match kind {
            C_ACT => {
                let (rd_hits, wr_hits) = self.count_hits(c, bi, out.row);
                let bank = &mut self.banks[bi];
                bank.row = out.row;
                bank.rd_hits = rd_hits;
                bank.wr_hits = wr_hits;
                bank.next_rd = t + p.rcdrd;
                bank.next_wr = t + p.rcdwr;
                bank.next_pre = bank.next_pre.max(t + p.ras);
                bank.next_act = bank.next_act.max(t + p.rc);
                let g = &mut self.groups[gi].t;
                g[0] = g[0].max(t + p.rrdl);
                let ch = &mut self.chans[c];
                ch.faw[ch.faw_i as usize] = t;
                ch.faw_i = (ch.faw_i + 1) & 3;
                ch.faw_n = (ch.faw_n + 1).min(4);
                let mut next = ch.ct[0].max(t + p.rrds);
                if ch.faw_n == 4 {
                    next = next.max(ch.faw[ch.faw_i as usize] + p.faw);
                }
                ch.ct[0] = next;
                ch.open |= 1 << b;
                self.stats.activates += 1;
                self.classify(si, MISS);
            }
            C_PRE => {
                let bank = &mut self.banks[bi];
                out.kind = CommandKind::Pre;
                out.row = bank.row;
                bank.row = CLOSED;
                bank.rd_hits = 0;
                bank.wr_hits = 0;
                bank.next_act = bank.next_act.max(t + p.rp);
                self.chans[c].open &= !(1 << b);
                self.stats.precharges += 1;
                self.classify(si, CONFLICT);
            }
            _ => {
                self.classify(si, HIT);
                let slot = self.slots[si];
                out.col = slot.col + (p.bursts - slot.left) as u16;
                let bank = &mut self.banks[bi];
                let g = &mut self.groups[gi].t;
                let ch = &mut self.chans[c];
                let lat = if slot.write {
                    out.kind = CommandKind::Wr;
                    bank.next_pre = bank.next_pre.max(t + p.wr_pre);
                    g[2] = g[2].max(t + p.ccdl);
                    g[1] = g[1].max(t + p.wtr_l);
                    ch.ct[2] = ch.ct[2].max(t + p.cas_s);
                    ch.ct[1] = ch.ct[1].max(t + p.wtr_s);
                    p.cwl + p.bl
                } else {
                    out.kind = CommandKind::Rd;
                    bank.next_pre = bank.next_pre.max(t + p.rtp);
                    g[1] = g[1].max(t + p.ccdl);
                    ch.ct[1] = ch.ct[1].max(t + p.cas_s);
                    ch.ct[2] = ch.ct[2].max(t + p.rtw);
                    p.cl + p.bl
                };
                ch.busy += p.bl;
                self.slots[si].left -= 1;
                if slot.left == 1 {
                    self.finish(c, b, s, t + lat + p.ctrl);
                }
            }
        }
        let ch = &mut self.chans[c];
        ch.next_cmd = t + 1;
        ch.dirty |= 1 << b;
        cmd(out);
    }

    /// Request `s` of bank `b` has issued its last burst; its completion is
    /// due at `clock`.
    fn finish(&mut self, c: usize, b: usize, s: u16, clock: u64) {
        let p = self.p;
        let base = c * p.slots;
        let slot = self.slots[base + s as usize];
        let bank = &mut self.banks[c * p.banks + b];
        let list = if slot.write { &mut bank.wr } else { &mut bank.rd };
        if slot.prev == NIL {
            list.head = slot.next;
        } else {
            self.slots[base + slot.prev as usize].next = slot.next;
        }
        if slot.next == NIL {
            list.tail = slot.prev;
        } else {
            self.slots[base + slot.next as usize].prev = slot.prev;
        }
        let empty = list.head == NIL;
        // Its last burst just issued to the open row: it was a hit.
        if slot.write {
            bank.wr_hits -= 1;
        } else {
            bank.rd_hits -= 1;
        }
        let ch = &mut self.chans[c];
        if slot.write {
            ch.wq_len -= 1;
            if empty {
                ch.wr_banks &= !(1 << b);
            }
        } else {
            ch.rq_len -= 1;
            if empty {
                ch.rd_banks &= !(1 << b);
            }
        }
        self.slots[base + s as usize].next = ch.free;
        ch.free = s;
        // Insert into the return ring, keeping it sorted by clock (FIFO
        // among equal clocks). Its capacity bounds the pending returns.
        let rb = c * p.rets;
        let at = |i: usize| {
            let j = ch.ret_head as usize + i;
            rb + if j >= p.rets { j - p.rets } else { j }
        };
        let mut i = ch.ret_len as usize;
        debug_assert!(i < p.rets, "DRAM return ring overflow");
        while i > 0 && self.rets[at(i - 1)].clock > clock {
            self.rets[at(i)] = self.rets[at(i - 1)];
            i -= 1;
        }
        let lat = p.clock.div_ceil(clock).saturating_sub(slot.enq).min(WRITE_BIT as u64 - 1) as u32;
        self.rets[at(i)] = Ret {
            clock,
            tag: slot.tag,
            lat_w: lat | if slot.write { WRITE_BIT } else { 0 },
        };
        ch.ret_len += 1;
        ch.ret_next = self.rets[at(0)].clock;
    }
}
