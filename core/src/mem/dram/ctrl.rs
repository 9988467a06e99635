//! The controllers' interface and event loop: construction, enqueue,
//! `(clock, channel)`-ordered processing, data returns, refresh and the
//! read/write mode; the command choice itself is in `sched.rs`.
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
use super::state::*;
use super::tree::{ChannelTree, MAX_KEY};
use super::{Command, CommandKind, Completion, DramFull};
use crate::arena::{Arena, Layout};
use crate::error::{BuildError, Capacity};

/// Counters of a [`Dram`].
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize,
)]
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

/// Every pseudo-channel's controller. See the [module](super) documentation.
#[derive(Debug)]
pub struct Dram<'a> {
    pub(super) cfg: DramConfig,
    pub(super) p: Params,
    pub(super) chans: &'a mut [Chan],
    pub(super) groups: &'a mut [Group],
    pub(super) hot: &'a mut [Hot],
    /// Each bank's group, by bank number.
    pub(super) grp: [u8; 64],
    pub(super) banks: &'a mut [Bank],
    pub(super) slots: &'a mut [Slot],
    pub(super) rets: &'a mut [Ret],
    pub(super) order: ChannelTree<'a>,
    /// First DRAM clock not yet processed.
    pub(super) next_clock: u64,
    /// Requests accepted and not yet reported.
    pub(super) pending: u64,
    pub(super) stats: DramStats,
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
    /// clock 0; channel `c`'s first refresh is due at
    /// [`DramConfig::first_refresh_due`].
    pub fn new(cfg: &DramConfig, arena: &mut Arena<'a>) -> Result<Dram<'a>, BuildError> {
        cfg.validate()?;
        let p = Params::new(cfg);
        let c = p.channels;
        let what = Capacity::MemoryPort;
        let chans = arena.alloc(c, Chan::EMPTY, what)?;
        let groups = arena.alloc(mul(c, p.groups)?, Group { t: [0; 4] }, what)?;
        let hot = arena.alloc(
            mul(c, p.banks)?,
            Hot {
                ready: 0,
                key: u64::MAX,
            },
            what,
        )?;
        let mut grp = [0u8; 64];
        for (b, g) in grp.iter_mut().enumerate().take(p.banks) {
            *g = (b / p.bpg) as u8;
        }
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
            ch.ref_due = cfg.first_refresh_due(i);
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
            grp,
            banks,
            slots,
            rets,
            order: ChannelTree::new(tree, c, |i| cfg.first_refresh_due(i)),
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
        self.has_room(self.cfg.decode(addr).channel as usize, write)
    }

    /// Whether pseudo-channel `channel`'s write (or read) queue has room
    /// (a channel out of range has none).
    pub fn has_room(&self, channel: usize, write: bool) -> bool {
        self.chans.get(channel).is_some_and(|ch| {
            if write {
                ch.wq_len < self.p.wq
            } else {
                ch.rq_len < self.p.rq
            }
        })
    }

    /// Queues a line request arriving at SM cycle `now`; it completes with
    /// `tag`. Fails, changing nothing, when its pseudo-channel's read (or
    /// write) queue is full. `now` must not decrease between calls, and
    /// should not be earlier than the last [`Dram::advance`]'s; for exact
    /// queue occupancy, advance to `now` first.
    pub fn try_enqueue(
        &mut self,
        now: u64,
        addr: u64,
        write: bool,
        tag: u32,
    ) -> Result<(), DramFull> {
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
    /// when no request is pending. Always later than the last `advance`;
    /// never later than the next command or completion, occasionally
    /// earlier (a channel's wake-up after a command is a lower bound), in
    /// which case advancing to it changes nothing visible.
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
        let limit =
            (now as u128 * r.num as u128 / r.den.max(1) as u128).min(MAX_KEY as u128 - 1) as u64;
        loop {
            let (c, k) = self.order.top();
            if k > limit {
                break;
            }
            self.step(c, k, done, cmd);
        }
        self.next_clock = self.next_clock.max(limit + 1);
    }

    pub(super) fn rekey(&mut self, c: usize) {
        let ch = &self.chans[c];
        self.order.set(c, ch.dkey.min(ch.ret_next));
    }

    /// Serves channel `c` at clock `t`: returns due data, then decides.
    pub(super) fn step(
        &mut self,
        c: usize,
        t: u64,
        done: &mut impl FnMut(Completion),
        cmd: &mut impl FnMut(Command),
    ) {
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

    pub(super) fn decide(&mut self, c: usize, t: u64, cmd: &mut impl FnMut(Command)) {
        if t >= self.chans[c].ref_due && self.refresh(c, t, cmd) {
            return;
        }
        self.update_mode(c);
        let sc = self.scan(c, t);
        let mut min = sc.min;
        if sc.best != u64::MAX {
            let b = Hot::bank(sc.best);
            self.issue(c, b, t, cmd);
            min = if self.update_mode(c) {
                self.scan(c, t).min
            } else {
                let bound = self.bound_after(c, b, &sc);
                // The bound may be early, never late: a full scan (nothing
                // can issue at `t` any more) gives the exact clock.
                #[cfg(debug_assertions)]
                {
                    let exact = self.scan(c, t);
                    debug_assert!(exact.best == u64::MAX && bound <= exact.min);
                }
                bound
            };
        }
        let ch = &mut self.chans[c];
        ch.dkey = min.min(ch.ref_due).max(t + 1);
    }

    /// Drives a due refresh. Returns true while it blocks the channel (the
    /// decision clock is then set), false once REF has issued at `t`.
    pub(super) fn refresh(&mut self, c: usize, t: u64, cmd: &mut impl FnMut(Command)) -> bool {
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
    pub(super) fn update_mode(&mut self, c: usize) -> bool {
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
}

impl Dram<'_> {
    /// Writes the mutable state into a snapshot.
    pub(crate) fn save_state(
        &self,
        w: &mut crate::codec::Writer<'_>,
    ) -> Result<(), crate::codec::SnapshotError> {
        w.val(&self.next_clock)?;
        w.val(&self.pending)?;
        w.val(&self.stats)?;
        w.slice(self.chans)?;
        w.slice(self.groups)?;
        w.slice(self.hot)?;
        w.slice(self.banks)?;
        w.slice(self.slots)?;
        w.slice(self.rets)?;
        self.order.save_state(w)
    }

    /// Overwrites the mutable state from a snapshot.
    pub(crate) fn load_state(
        &mut self,
        r: &mut crate::codec::Reader<'_>,
    ) -> Result<(), crate::codec::SnapshotError> {
        self.next_clock = r.val()?;
        self.pending = r.val()?;
        self.stats = r.val()?;
        r.slice(self.chans)?;
        r.slice(self.groups)?;
        r.slice(self.hot)?;
        r.slice(self.banks)?;
        r.slice(self.slots)?;
        r.slice(self.rets)?;
        self.order.load_state(r)?;
        self.check()
            .map_err(|what| crate::codec::SnapshotError::Corrupt { what })?;
        // The cached candidates are derived from the banks and queues: a
        // damaged one could name another bank. Recompute them before use.
        for ch in self.chans.iter_mut() {
            ch.dirty = !0;
        }
        // The decision order is derived from the channels: rebuild it.
        let chans = &*self.chans;
        self.order
            .rebuild(self.p.channels, |c| chans[c].dkey.min(chans[c].ret_next));
        Ok(())
    }

    /// Checks the structure after a restore: every slot of a channel on
    /// exactly one list (free, or one bank's read or write queue), list
    /// links in range, counts, ring positions and bank masks in range.
    fn check(&self) -> Result<(), &'static str> {
        let p = self.p;
        let bank_mask = if p.banks >= 64 {
            u64::MAX
        } else {
            (1u64 << p.banks) - 1
        };
        let in_slots = |i: u16| i == NIL || (i as usize) < p.slots;
        for (c, ch) in self.chans.iter().enumerate() {
            let masks = ch.open | ch.rd_banks | ch.wr_banks;
            if ch.ret_head as usize >= p.rets.max(1)
                || ch.ret_len as usize > p.rets
                || ch.faw_i >= 4
                || ch.faw_n > 4
                || masks & !bank_mask != 0
            {
                return Err("DRAM channel");
            }
            let base = c * p.slots;
            let mut seen = 0usize;
            let walk = |head: u16, seen: &mut usize| -> Result<u16, &'static str> {
                let (mut i, mut last) = (head, NIL);
                while i != NIL {
                    if !in_slots(i) || *seen >= p.slots {
                        return Err("DRAM queue links");
                    }
                    *seen += 1;
                    last = i;
                    i = self.slots[base + i as usize].next;
                }
                Ok(last)
            };
            walk(ch.free, &mut seen)?;
            let free = seen;
            for b in 0..p.banks {
                let bank = &self.banks[c * p.banks + b];
                // The cached candidate (`cand_slot`, `hot`) is not checked:
                // a restore marks every bank dirty, so it is recomputed
                // before use. A queued request is on its own kind's list, linked both
                // ways, with bursts left to issue within its row.
                for (list, write) in [(bank.rd, false), (bank.wr, true)] {
                    let (mut i, mut prev) = (list.head, NIL);
                    while i != NIL {
                        if !in_slots(i) || seen >= p.slots {
                            return Err("DRAM queue links");
                        }
                        seen += 1;
                        let s = &self.slots[base + i as usize];
                        if s.prev != prev || s.write != write {
                            return Err("DRAM queue links");
                        }
                        if s.left == 0
                            || s.left > p.bursts
                            || s.col as u32 + p.bursts as u32 > u16::MAX as u32
                        {
                            return Err("DRAM queued request");
                        }
                        (prev, i) = (i, s.next);
                    }
                    if prev != list.tail {
                        return Err("DRAM queue links");
                    }
                }
                let queued = |m: u64, l: List| (m >> b & 1 != 0) == (l.head != NIL);
                if !queued(ch.rd_banks, bank.rd) || !queued(ch.wr_banks, bank.wr) {
                    return Err("DRAM bank masks");
                }
                let hits = if bank.row == CLOSED {
                    (0, 0)
                } else {
                    self.count_hits(c, c * p.banks + b, bank.row)
                };
                if (bank.rd_hits, bank.wr_hits) != hits {
                    return Err("DRAM row hits");
                }
            }
            if seen != p.slots || seen - free != ch.rq_len as usize + ch.wq_len as usize {
                return Err("DRAM queue counts");
            }
            // The next return is the ring's head, or none when it is empty.
            let head = self
                .rets
                .get(c * p.rets + ch.ret_head as usize)
                .map_or(u64::MAX, |r| r.clock);
            let next = if ch.ret_len == 0 { u64::MAX } else { head };
            if ch.ret_next != next {
                return Err("DRAM return ring");
            }
        }
        // Every pending request is queued or waiting to return.
        let held: u64 = self
            .chans
            .iter()
            .map(|ch| ch.rq_len as u64 + ch.wq_len as u64 + ch.ret_len as u64)
            .sum();
        if held != self.pending {
            return Err("DRAM pending count");
        }
        Ok(())
    }
}
