//! The L2 slice side of the transaction-level model: MSHRs, DRAM fills
//! and their dependencies, insertion, eviction and write-back, the
//! remote-copy proxy's shadow copies, the crossbar's reach to a line's home
//! slice and the slice ports (steps 4 and 5 of [`super`]).

use super::*;

impl Model<'_> {
    /// Books the next MSHR of `slice` for a miss arriving at `t`; returns
    /// when it may go to DRAM and the MSHR's index.
    #[inline]
    pub(super) fn mshr_take(&mut self, slice: usize, t: u64) -> (u64, usize) {
        let n = self.l2.mshrs as usize;
        let k = self.mshr_next[slice];
        self.mshr_next[slice] = k.wrapping_add(1);
        let i = slice * n + (k % n as u64) as usize;
        // The oldest MSHR is busy at `t` if it was taken at or before `t`
        // (one taken later, by a miss handed over earlier but arriving
        // later, does not hold this one up).
        let [taken, free] = self.mshr[i];
        let go = if taken <= t && free > t {
            self.stats.mshr_stalls += 1;
            free
        } else {
            t
        };
        self.mshr[i][0] = go;
        (go, i)
    }

    /// One DRAM access of line `line` at `t`; returns its completion. A
    /// read of the current operation is at its SM `after` cycles after
    /// that (for the arrival-order controller).
    pub(super) fn dram(
        &mut self,
        t: u64,
        line: u64,
        write: bool,
        after: Option<u64>,
        sink: &mut impl TxnSink,
    ) -> u64 {
        let addr = line << self.shift;
        let daddr = self.l2.dram_address(addr);
        let d = self.dram.decode(daddr);
        let bank = d.bank_group as usize * self.dram.banks_per_group as usize + d.bank as usize;
        sink.dram(t, write, addr);
        if let Some(arr) = &mut self.arrival {
            let op = after.map(|a| (self.cur_op, a));
            let fill = if write { FillRef::NONE } else { self.cur_fill };
            self.last_req_ok = arr.request(t, daddr, d.channel, write, op, fill);
        }
        self.hbm.access(t, d.channel, bank, d.row, write)
    }

    /// The current operation's read waits for fill `f` (if the
    /// arrival-order controller runs), `after` cycles from the fill to
    /// the SM.
    #[inline]
    pub(super) fn depend(&mut self, f: FillRef, after: u64) -> bool {
        match &mut self.arrival {
            Some(arr) => arr.depend(self.cur_op, f, after),
            None => false,
        }
    }

    /// A line of the current operation back at `r`, whose time the
    /// controller does not decide.
    #[inline]
    pub(super) fn untimed(&mut self, r: u64) {
        self.indep = self.indep.max(r);
    }

    /// Writes back evicted chunk `e` at `t` if it is a dirty home copy.
    pub(super) fn evicted(&mut self, t: u64, e: l2::Entry, sink: &mut impl TxnSink) {
        if !e.dirty() || e.kind() != HOME {
            return;
        }
        let p = e.pattern();
        let half = self.l2.slices as usize / 2;
        for_each_line(&p, |_, line| {
            if (self.slice_of(line) >= half) as u8 == p.part {
                self.stats.dram_writes += 1;
                self.dram(t, line, true, None, sink);
            }
        });
    }

    /// Inserts chunk `p` into `slice`, writing back what it evicts.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn insert(
        &mut self,
        t: u64,
        slice: usize,
        p: &Pattern,
        kind: u8,
        dirty: bool,
        ready: u64,
        lat: u16,
        sink: &mut impl TxnSink,
    ) {
        let mut out: heapless::Vec<l2::Entry, 64> = heapless::Vec::new();
        let at = self.chunks.insert(slice, p, kind, dirty, ready, lat, |e| {
            let _ = out.push(e);
        });
        // A read fill's entry waits for that fill, a shadow copy for the
        // fill it copies (this chunk's, or the one its read found at
        // home); a store's for none.
        let fill = match (kind, dirty) {
            (HOME, false) => self.cur_fill,
            (SHADOW, _) if self.cur_fill != FillRef::NONE => self.cur_fill,
            (SHADOW, _) => self.last_dep,
            _ => FillRef::NONE,
        };
        if let Some(f) = at.and_then(|i| self.entry_fill.get_mut(i)) {
            *f = fill;
        }
        // By index: moving the vector into an iterator would copy it.
        for i in 0..out.len() {
            self.evicted(t, out[i], sink);
        }
    }

    /// The remote-copy proxy: copy chunk `p`, served by far slice `home`,
    /// into the mirror slice, usable from `ready`.
    pub(super) fn maybe_shadow(
        &mut self,
        t: u64,
        home: usize,
        p: &Pattern,
        ready: u64,
        lat: u16,
        sink: &mut impl TxnSink,
    ) {
        let px = self.l2.proxy;
        if !px.enabled {
            return;
        }
        let mirror = self.mirror(home);
        if self.chunks.find(mirror, p).is_some() {
            return;
        }
        let cap = self.chunks.slice_capacity().max(1) as u64;
        let occ = self.chunks.occupancy(mirror) as u64 * 1000 / cap;
        if occ >= px.threshold_permille as u64
            && !self.rng.chance(px.max_prob_permille as u32, 1000)
        {
            return;
        }
        self.stats.shadow_inserts += 1;
        self.insert(t, mirror, p, SHADOW, false, ready, lat, sink);
    }

    #[inline]
    pub(super) fn note_served(
        &self,
        sink: &mut impl TxnSink,
        line: u64,
        slice: usize,
        hit: bool,
        at: u64,
        served: u64,
    ) {
        if sink.wants_notes() {
            let ev = Event::LineServed {
                addr: line << self.shift,
                slice: slice as u16,
                hit,
                at,
                served,
            };
            sink.note(at, ev);
        }
    }

    /// Books line `e`'s way to its home `slice`: the slice's port, `back`
    /// after the line left the engine, or, when the proxy `probe`s for a
    /// shadow copy that is not there, one cycle of the mirror slice's port
    /// (a tag lookup moves no data) and the home port `far_latency` later;
    /// a `far` line then takes the home slice's crossing ([`Self::book_port`]).
    /// Returns when it reaches the slice.
    #[inline(always)]
    pub(super) fn reach_home(
        &mut self,
        slice: usize,
        e: u64,
        probe: bool,
        back: u64,
        far: bool,
    ) -> u64 {
        if probe {
            let xbar = self.l2.xbar_latency as u64;
            let tp = self.ports.reserve(self.mirror(slice), e + xbar, 1);
            self.book_port(slice, tp + self.l2.far_latency as u64, true)
        } else {
            self.book_port(slice, e + back, far)
        }
    }

    /// Books `slice`'s port for a line reaching it at `t` for the line's
    /// share of cycles at `slice_bytes_per_cycle`, and, when it is `far`,
    /// the slice's crossing between the partitions from then on at
    /// `far_bytes_per_cycle` ([`L2Config::port_cycles`]): a crossing line
    /// does not hold the port its near readers use for longer. Returns when
    /// the port (for a far line, the crossing) takes it.
    #[inline(always)]
    pub(super) fn book_port(&mut self, slice: usize, t: u64, far: bool) -> u64 {
        let k = self.port_served[slice];
        self.port_served[slice] = k.wrapping_add(1);
        let len = match self.port_len[0] {
            0 => self.l2.port_cycles(k, false),
            n => n,
        };
        let at = self.ports.reserve(slice, t, len);
        if !far || !self.crossing {
            return at;
        }
        let cross = match self.port_len[1] {
            0 => self.l2.port_cycles(k, true),
            n => n,
        };
        self.crossings.reserve(slice, at, cross)
    }
}
