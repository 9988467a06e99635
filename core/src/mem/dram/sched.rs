//! The command choice of one channel: cached per-bank candidates, the
//! branch-free scan that picks the best command that may issue (FR-FCFS:
//! column commands first, then the oldest request), the bound on the next
//! decision clock after a command, and the bookkeeping of an issued
//! command (timers, open rows, hit counts, finished requests).

use super::ctrl::Dram;
use super::state::*;
use super::{Command, CommandKind};

impl Dram<'_> {
    /// Recomputes bank `b`'s cached candidate for the active queue (the
    /// bank has requests in it).
    pub(super) fn candidate(&mut self, c: usize, b: usize, writing: bool) {
        let base = c * self.p.slots;
        let bi = c * self.p.banks + b;
        let bank = &self.banks[bi];
        let list = if writing { bank.wr } else { bank.rd };
        let hits = if writing { bank.wr_hits } else { bank.rd_hits };
        debug_assert_eq!(
            (bank.rd_hits, bank.wr_hits),
            if bank.row == CLOSED {
                (0, 0)
            } else {
                self.count_hits(c, bi, bank.row)
            },
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
        h.key = ((kind != C_COL) as u64) << 63 | slot.seq << 8 | (b as u64) << 2 | sel as u64;
        let bank = &mut self.banks[bi];
        bank.cand_kind = kind;
        bank.cand_slot = s;
    }

    /// Scans the candidates of channel `c` at `t`.
    pub(super) fn scan(&mut self, c: usize, t: u64) -> Scan {
        let (nb, ng) = (self.p.banks, self.p.groups);
        let ch = &self.chans[c];
        let writing = ch.writing;
        let mask = if writing { ch.wr_banks } else { ch.rd_banks };
        for b in bits(ch.dirty & mask) {
            self.candidate(c, b, writing);
        }
        let ch = &mut self.chans[c];
        ch.dirty &= !mask;
        let (ct, floor) = (ch.ct, ch.next_cmd);
        let hot = &self.hot[c * nb..(c + 1) * nb];
        let groups = &self.groups[c * ng..(c + 1) * ng];
        let mut sc = Scan {
            best: u64::MAX,
            min: u64::MAX,
            own1: [u64::MAX; 4],
            bank1: [usize::MAX; 4],
            own2: [u64::MAX; 4],
        };
        for b in bits(mask) {
            let h = &hot[b];
            let s = h.sel();
            let own = h.ready.max(groups[self.grp[b] as usize].t[s]);
            // The least and second-least per selector, without branches:
            // which bank's share is least is data the predictor cannot
            // learn.
            let (o1, o2) = (sc.own1[s], sc.own2[s]);
            let less = own < o1;
            sc.own2[s] = o2.min(o1.max(own));
            sc.own1[s] = o1.min(own);
            sc.bank1[s] = select(less, b, sc.bank1[s]);
            let r = own.max(ct[s]).max(floor);
            let ok = r <= t;
            sc.best = sc.best.min(if ok { h.key } else { u64::MAX });
            sc.min = sc.min.min(if ok { u64::MAX } else { r });
        }
        sc
    }

    /// After bank `b`'s candidate issued (no mode switch): a lower bound on
    /// the next clock at which a candidate may issue, from the scan before
    /// the command. Every timer only grows, so each other bank's ready time
    /// is at least its bank-and-group share from that scan combined with
    /// the channel's new timers; bank `b` has a new candidate, computed
    /// exactly. A bound below the truth only costs a wasted decision.
    pub(super) fn bound_after(&mut self, c: usize, b: usize, sc: &Scan) -> u64 {
        let ch = &self.chans[c];
        let (ct, floor) = (ch.ct, ch.next_cmd);
        let mask = if ch.writing { ch.wr_banks } else { ch.rd_banks };
        let mut min = u64::MAX;
        for (s, &timer) in ct.iter().enumerate() {
            let own = if sc.bank1[s] == b {
                sc.own2[s]
            } else {
                sc.own1[s]
            };
            if own != u64::MAX {
                min = min.min(own.max(timer).max(floor));
            }
        }
        if mask >> b & 1 != 0 {
            self.candidate(c, b, ch.writing);
            self.chans[c].dirty &= !(1 << b);
            let bi = c * self.p.banks + b;
            let h = &self.hot[bi];
            let s = h.sel();
            let g = &self.groups[c * self.p.groups + self.grp[b] as usize];
            min = min.min(h.ready.max(g.t[s]).max(ct[s]).max(floor));
        }
        min
    }

    /// Queued reads and writes of bank `bi` to `row`.
    pub(super) fn count_hits(&self, c: usize, bi: usize, row: u32) -> (u16, u16) {
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

    pub(super) fn classify(&mut self, si: usize, class: u8) {
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
    pub(super) fn issue(&mut self, c: usize, b: usize, t: u64, cmd: &mut impl FnMut(Command)) {
        let p = self.p;
        let bi = c * p.banks + b;
        let (kind, s) = (self.banks[bi].cand_kind, self.banks[bi].cand_slot);
        let si = c * p.slots + s as usize;
        let grp = self.grp[b] as usize;
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
    pub(super) fn finish(&mut self, c: usize, b: usize, s: u16, clock: u64) {
        let p = self.p;
        let base = c * p.slots;
        let slot = self.slots[base + s as usize];
        let bank = &mut self.banks[c * p.banks + b];
        let list = if slot.write {
            &mut bank.wr
        } else {
            &mut bank.rd
        };
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
        let lat = p
            .clock
            .div_ceil(clock)
            .saturating_sub(slot.enq)
            .min(WRITE_BIT as u64 - 1) as u32;
        self.rets[at(i)] = Ret {
            clock,
            tag: slot.tag,
            lat_w: lat | if slot.write { WRITE_BIT } else { 0 },
        };
        ch.ret_len += 1;
        ch.ret_next = self.rets[at(0)].clock;
    }
}
