//! Chunks through the transaction-level model: an operation's run of
//! lines cut per L2 partition, each chunk looked up once in the coalescer
//! and the L2 and timed line by line across the crossbar (steps 2 to 5 of
//! [`super`]).

use super::*;

impl Model<'_> {
    /// Times run `q` of an operation of SM `sm` (up to `chunk_lines`
    /// lines, each emitted once it fits in flight); returns its
    /// last line's return cycle. Its lines in each L2 partition form one
    /// chunk.
    pub(super) fn chunk(
        &mut self,
        sm: usize,
        store: bool,
        q: &Pattern,
        eng: &mut Engine,
        sink: &mut impl TxnSink,
    ) -> u64 {
        let n = q.count.max(1);
        self.stats.requests += n as u64;
        if store {
            self.stats.writes += n as u64;
        }

        let half = self.l2.slices as usize / 2;
        self.run.count = [0; 2];
        for_each_line(q, |i, line| {
            let e = self.emit(sm, eng, i);
            let s = self.slice_of(line);
            let part = (s >= half) as usize;
            let k = self.run.count[part] as usize;
            self.run.line[part][k] = line;
            self.run.slice[part][k] = s as u16;
            self.run.emit[part][k] = e;
            self.run.count[part] += 1;
        });
        let near = ((sm as u32 * 2) / self.sms.max(1) as u32) as usize;
        let mut last = 0u64;
        for part in [near, 1 - near] {
            if self.run.count[part] == 0 {
                continue;
            }
            let p = Pattern {
                part: part as u8,
                weight: self.run.count[part],
                ..*q
            };
            let r = self.part_chunk(sm, store, &p, part != near, eng, sink);
            last = last.max(r);
        }
        last
    }

    /// The slice whose capacity chunk `p` (of the scratch run, key `key`) occupies
    /// while resident: its line's slice for a single line, as in the
    /// line-level model; for a heavier chunk one of its partition's slices
    /// picked by bits of its key. Homing such a chunk at its first line's
    /// slice would pile the chunks of a strided tile, whose rows start on
    /// the same few slices, onto those slices, which would then evict what
    /// a line-level L2 keeps (FA3 d256 causal at 1k tokens read 10% more
    /// from DRAM that way).
    pub(super) fn residency_slice(&self, p: &Pattern, key: u64) -> usize {
        let part = p.part as usize;
        if p.count <= 1 {
            return self.run.slice[part][0] as usize;
        }
        let half = (self.l2.slices / 2).max(1) as u64;
        (part as u64 * half + (key >> 40) % half) as usize
    }

    /// Times chunk `p`, the lines of the scratch run in partition
    /// `p.part`, read or written by SM `sm`, `far` from it or not; returns
    /// its last line's return cycle.
    pub(super) fn part_chunk(
        &mut self,
        sm: usize,
        store: bool,
        p: &Pattern,
        far: bool,
        eng: &mut Engine,
        sink: &mut impl TxnSink,
    ) -> u64 {
        let xbar = self.l2.xbar_latency as u64;
        let far_lat = self.l2.far_latency as u64;
        let hit_lat = self.l2.hit_latency as u64;
        let part = p.part as usize;
        let n = self.run.count[part] as usize;
        let key = p.key();
        let home = self.residency_slice(p, key);
        let probe = far && !store && self.l2.proxy.enabled;
        let notes = sink.wants_notes();
        let back = xbar + if far { far_lat } else { 0 };
        let w = p.weight as u64;
        let e0 = self.run.emit[part][0];
        let coal_slot =
            self.l2.coalescer_group(sm) * self.coal_n + (key as usize & (self.coal_n - 1));
        self.last_dep = FillRef::NONE;
        self.last_dep_ok = false;
        // What the chunk meets, decided at its first line.
        let outcome = if store {
            Outcome::Store
        } else {
            let c = &self.coal[coal_slot];
            if self.l2.coalescer && c.pat == *p && c.first_emit <= e0 && c.first_back > e0 {
                Outcome::Coalesced(c.last_back)
            } else if probe {
                // A shadow copy made by a fill that came after this read
                // does not exist for it yet.
                match self.chunks.find_keyed(self.mirror(home), p, key) {
                    Some(i) if since(self.chunks.entry(i)) <= e0 + xbar => {
                        self.chunks.touch(i);
                        // The copy is there once the fill it was made
                        // from is.
                        if let Some(&f) = self.entry_fill.get(i) {
                            self.last_dep = f;
                            self.last_dep_ok = self.depend(f, hit_lat + xbar);
                        }
                        Outcome::Shadow(self.chunks.entry(i).ready)
                    }
                    _ => self.lookup(home, p, key, e0 + xbar + far_lat, back),
                }
            } else {
                self.lookup(home, p, key, e0 + back, back)
            }
        };
        self.cur_fill = match (&mut self.arrival, outcome) {
            (Some(arr), Outcome::Miss) => arr.new_fill(),
            _ => FillRef::NONE,
        };
        let (mut first_back, mut last_back) = (u64::MAX, 0u64);
        let mut look = u64::MAX;
        let mut ready_max = 0u64;
        // Every line finds its data ready (a plain hit, or a shadow copy):
        // the chunk's places in flight free together, with its last line.
        let together = match outcome {
            Outcome::Resident(ready) => !probe && ready <= e0 + back,
            Outcome::Shadow(_) => true,
            _ => false,
        };
        // One line loop per outcome; detail events, when wanted, are built
        // inside it and never change the timing.
        match outcome {
            Outcome::Coalesced(at) => {
                let timed = match self.coal_fill.get(coal_slot) {
                    Some(&f) => self.depend(f, back),
                    None => false,
                };
                self.stats.coalesced += w;
                let e = self.run.emit[part][..n].iter().max();
                let last_emit = e.copied().unwrap_or(0);
                let r = at.max(last_emit);
                // Not back before it has left the engine.
                self.untimed(if timed { last_emit } else { r });
                self.returns(sm, eng, r, p.weight);
                return r;
            }
            Outcome::Resident(ready) => {
                // Resident at home: a hit for every line that reaches it
                // once the data is ready, an MSHR merge with the fill in
                // flight for the others.
                let (mut hits, mut hits_back) = (0u64, 0u64);
                if together && !notes {
                    // Every line a hit (it reaches the slice after the
                    // data is ready) and no detail events: only the ports'
                    // bookings count, without the per-line choices below.
                    let (mut lo, mut hi) = (u64::MAX, 0u64);
                    for i in 0..n {
                        let (slice, e) = (self.run.slice[part][i] as usize, self.run.emit[part][i]);
                        let t = self.reach_home(slice, e, false, back, far);
                        lo = lo.min(t);
                        hi = hi.max(t);
                    }
                    look = lo;
                    first_back = lo + hit_lat + back;
                    last_back = hi + hit_lat + back;
                    (hits, hits_back) = (n as u64, last_back);
                } else {
                    for i in 0..n {
                        let (slice, e) = (self.run.slice[part][i] as usize, self.run.emit[part][i]);
                        let t = self.reach_home(slice, e, probe, back, far);
                        look = look.min(t);
                        let r = if t >= ready || self.early_hits {
                            hits += 1;
                            let served = t + hit_lat;
                            if notes {
                                let line = self.run.line[part][i];
                                self.note_served(sink, line, slice, true, t, served);
                            }
                            hits_back = hits_back.max(served + back);
                            served + back
                        } else {
                            if notes {
                                let line = self.run.line[part][i];
                                self.note_served(sink, line, slice, false, ready, ready);
                            }
                            ready + back
                        };
                        first_back = first_back.min(r);
                        last_back = last_back.max(r);
                        if !together {
                            self.returns(sm, eng, r, 1);
                        }
                    }
                }
                // Merges wait for the fill, which the controller times
                // when it can; hits are the model's.
                self.untimed(if self.last_dep_ok {
                    hits_back
                } else {
                    last_back
                });
                let merged = n as u64 - hits;
                self.stats.l2_requests += n as u64;
                self.stats.l2_hits += hits;
                self.stats.l2_misses += merged;
                self.stats.mshr_merged += merged;
                if far {
                    self.stats.far_reads += hits;
                }
                // Hits come back within a few cycles of each other: their
                // places in flight free with the last.
                if together {
                    self.returns(sm, eng, last_back, p.weight);
                }
            }
            Outcome::Shadow(ready) => {
                self.stats.l2_requests += w;
                self.stats.shadow_hits += w;
                let mut reached = 0u64;
                for i in 0..n {
                    let (slice, e) = (self.run.slice[part][i] as usize, self.run.emit[part][i]);
                    let mirror = self.mirror(slice);
                    let t = self.book_port(mirror, e + xbar, false);
                    reached = reached.max(t);
                    let served = t.max(ready) + hit_lat;
                    if notes {
                        let line = self.run.line[part][i];
                        self.note_served(sink, line, mirror, true, t, served);
                    }
                    let r = served + xbar;
                    first_back = first_back.min(r);
                    last_back = last_back.max(r);
                }
                // The copy's readiness is the fill's, which the controller
                // times when it can.
                self.untimed(if self.last_dep_ok {
                    reached + hit_lat + xbar
                } else {
                    last_back
                });
                self.returns(sm, eng, last_back, p.weight);
            }
            // A store, a miss, or the read a fill in flight answers: each
            // line frees its place itself (misses spread out).
            _ => {
                // The latest return of a miss whose request did not fit
                // in the controller's tables.
                let mut unrecorded = 0u64;
                for i in 0..n {
                    let line = self.run.line[part][i];
                    let (slice, e) = (self.run.slice[part][i] as usize, self.run.emit[part][i]);
                    self.stats.l2_requests += 1;
                    let t = self.reach_home(slice, e, probe, back, far);
                    look = look.min(t);
                    let r = self.line_at_home(
                        outcome,
                        line,
                        slice,
                        t,
                        back,
                        notes,
                        &mut ready_max,
                        sink,
                    );
                    first_back = first_back.min(r);
                    last_back = last_back.max(r);
                    if !self.last_req_ok {
                        unrecorded = unrecorded.max(r);
                    }
                    self.returns(sm, eng, r, 1);
                }
                self.untimed(match outcome {
                    Outcome::Miss => unrecorded,
                    Outcome::Refill(..) if !self.last_dep_ok => last_back,
                    _ => 0,
                });
            }
        }
        match outcome {
            Outcome::Store => match self.chunks.find(home, p) {
                Some(i) => {
                    self.stats.l2_hits += w;
                    self.chunks.touch(i);
                    self.chunks.mark_dirty(i);
                }
                None => {
                    self.stats.l2_misses += w;
                    self.insert(look, home, p, HOME, true, look, 0, sink);
                }
            },
            Outcome::Miss => {
                let lat = lat16(ready_max, look);
                self.insert(look, home, p, HOME, false, ready_max, lat, sink);
                if far {
                    self.stats.far_reads += w;
                    self.maybe_shadow(look, home, p, ready_max, lat, sink);
                }
            }
            Outcome::Refill(i, lat) => {
                self.chunks.refill(i, ready_max, lat as u16);
                if far {
                    self.stats.far_reads += w;
                    self.maybe_shadow(look, home, p, ready_max, lat as u16, sink);
                }
            }
            Outcome::Resident(ready) if far => {
                self.maybe_shadow(look, home, p, ready.max(look), 0, sink)
            }
            _ => {}
        }
        if !store {
            if let Some(f) = self.coal_fill.get_mut(coal_slot) {
                *f = match outcome {
                    Outcome::Miss => self.cur_fill,
                    _ => self.last_dep,
                };
            }
            self.coal[coal_slot] = Coal {
                pat: *p,
                first_emit: e0,
                first_back,
                last_back,
            };
        }
        last_back
    }

    /// A line of a chunk that reached its home slice at `t` and does not
    /// find its data there: a write, the read a fill in flight answers,
    /// or a miss to HBM. Returns when its data is back at the SM.
    #[allow(clippy::too_many_arguments)]
    #[inline]
    pub(super) fn line_at_home(
        &mut self,
        outcome: Outcome,
        line: u64,
        slice: usize,
        t: u64,
        back: u64,
        notes: bool,
        ready_max: &mut u64,
        sink: &mut impl TxnSink,
    ) -> u64 {
        match outcome {
            Outcome::Store => {
                let hit_lat = self.l2.hit_latency as u64;
                if notes {
                    let ev = Event::LineFill {
                        addr: line << self.shift,
                        slice: slice as u16,
                        ready: t,
                        write: true,
                    };
                    sink.note(t, ev);
                }
                t + hit_lat + back
            }
            Outcome::Refill(_, lat) => {
                // The fill this read leads: no second DRAM read.
                self.stats.l2_misses += 1;
                self.stats.mshr_merged += 1;
                let fill = t + lat;
                *ready_max = (*ready_max).max(fill);
                if notes {
                    let c = fill.saturating_sub(self.l2.fill_latency as u64);
                    self.note_fill(sink, line, slice, c, fill);
                }
                self.note_served(sink, line, slice, false, fill, fill);
                fill + back
            }
            _ => {
                self.stats.l2_misses += 1;
                self.stats.dram_reads += 1;
                let (go, mi) = self.mshr_take(slice, t);
                let after = self.l2.fill_latency as u64 + back;
                let c = self.dram(go, line, false, Some(after), sink);
                let fill = c + self.l2.fill_latency as u64;
                self.mshr[mi][1] = fill;
                *ready_max = (*ready_max).max(fill);
                if notes {
                    self.note_fill(sink, line, slice, c, fill);
                }
                self.note_served(sink, line, slice, false, fill, fill);
                fill + back
            }
        }
    }

    /// The checker's detail events of a read fill of `line` in `slice`:
    /// its DRAM data back at `c`, the line usable from `fill`.
    pub(super) fn note_fill(
        &self,
        sink: &mut impl TxnSink,
        line: u64,
        slice: usize,
        c: u64,
        fill: u64,
    ) {
        let addr = line << self.shift;
        sink.note(c, Event::DramDone { addr });
        let ev = Event::LineFill {
            addr,
            slice: slice as u16,
            ready: fill,
            write: false,
        };
        sink.note(c, ev);
    }

    /// Looks chunk `p` (of key `key`) up in its home slice for a read arriving about `t`
    /// whose data is back at the SM `back` cycles after it leaves the L2.
    pub(super) fn lookup(
        &mut self,
        home: usize,
        p: &Pattern,
        key: u64,
        t: u64,
        back: u64,
    ) -> Outcome {
        match self.chunks.find_keyed(home, p, key) {
            Some(i) => {
                self.chunks.touch(i);
                let e = *self.chunks.entry(i);
                let resident = since(&e) <= t;
                if let Some(&f) = self.entry_fill.get(i) {
                    // A hit is served `hit_latency` after the fill; a read
                    // that leads the fill returns with it.
                    self.last_dep = f;
                    let hit = if resident { self.l2.hit_latency } else { 0 };
                    self.last_dep_ok = self.depend(f, hit as u64 + back);
                }
                if resident {
                    Outcome::Resident(e.ready)
                } else {
                    Outcome::Refill(i, e.lat as u64)
                }
            }
            None => Outcome::Miss,
        }
    }
}
