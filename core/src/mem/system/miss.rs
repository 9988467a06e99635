//! The miss path of an L2 slice: MSHR merges and allocation (or waiting,
//! in order, for a busy slice's next MSHR), requests to DRAM and their
//! retries, evictions and write-backs, the remote-copy proxy's shadow
//! copies, and fills that answer every merged request.

use super::*;

impl MemorySystem<'_> {
    /// A read miss at `slice`: merge into an MSHR, allocate one, or wait.
    pub(super) fn miss(&mut self, t: u64, id: u32, slice: u16, sink: &mut impl MemSink) {
        let line = self.reqs[id as usize].line;
        if let Some(&leader) = self.mshr.get(line) {
            if self.early_hits {
                // Test-only fault: answer before the fill is usable.
                self.answer_hit(t, id, line, slice, sink);
                return;
            }
            self.reqs[id as usize].ms_next = self.reqs[leader as usize].ms_next;
            self.reqs[leader as usize].ms_next = id;
            self.stats.mshr_merged += 1;
            return;
        }
        let s = &mut self.slices[slice as usize];
        if s.mshrs_used >= self.cfg.mshrs {
            self.stats.mshr_stalls += 1;
            self.reqs[id as usize].wait_next = NIL;
            if s.wait_tail == NIL {
                s.wait_head = id;
            } else {
                self.reqs[s.wait_tail as usize].wait_next = id;
            }
            s.wait_tail = id;
            return;
        }
        s.mshrs_used += 1;
        let _ = self.mshr.insert(line, id);
        self.stats.dram_reads += 1;
        self.send_to_dram(t, line * self.cfg.line_bytes as u64, false, id);
    }

    pub(super) fn send_to_dram(&mut self, t: u64, addr: u64, write: bool, tag: u32) {
        let daddr = self.cfg.dram_address(addr);
        // The channel is decoded only when some channel has waiters (this
        // one must not be overtaken) or the enqueue fails.
        let any_waiting = self.retry.busy.iter().any(|&w| w != 0);
        let mut ch = None;
        if any_waiting {
            let c = self.dram.config().decode(daddr).channel as usize;
            if self.retry.busy[c / 64] & (1 << (c % 64)) != 0 {
                ch = Some(c);
            }
        }
        if ch.is_none() && self.dram.try_enqueue(t, daddr, write, tag).is_ok() {
            let _ = self.log.push(DramRequest {
                cycle: t,
                write,
                addr,
            });
            return;
        }
        let ch = ch.unwrap_or_else(|| self.dram.config().decode(daddr).channel as usize);
        // Wait behind the channel's earlier requests.
        let w = &mut self.retry;
        let id = w.free;
        if id == NIL {
            // Reads never exceed the MSHRs the pool covers, so only a
            // write-back can find it empty under sustained overload; it is
            // counted rather than silently lost.
            self.stats.dropped_writebacks += 1;
            return;
        }
        w.free = w.pool[id as usize].next;
        w.pool[id as usize] = DramRetry {
            addr,
            write,
            tag,
            next: NIL,
        };
        if w.tail[ch] == NIL {
            w.head[ch] = id;
        } else {
            w.pool[w.tail[ch] as usize].next = id;
        }
        w.tail[ch] = id;
        w.busy[ch / 64] |= 1 << (ch % 64);
    }

    /// Offers the waiting requests of every channel that has some again, in
    /// order, until that channel's queue is full. A full channel never holds
    /// up the others, and channels without waiters cost nothing.
    pub(super) fn retry_dram(&mut self, t: u64) {
        for word in 0..self.retry.busy.len() {
            let mut bits = self.retry.busy[word];
            while bits != 0 {
                let ch = word * 64 + bits.trailing_zeros() as usize;
                bits &= bits - 1;
                loop {
                    let id = self.retry.head[ch];
                    if id == NIL {
                        self.retry.tail[ch] = NIL;
                        self.retry.busy[word] &= !(1 << (ch % 64));
                        break;
                    }
                    let r = self.retry.pool[id as usize];
                    if self
                        .dram
                        .try_enqueue(t, self.cfg.dram_address(r.addr), r.write, r.tag)
                        .is_err()
                    {
                        break;
                    }
                    self.retry.head[ch] = r.next;
                    self.retry.pool[id as usize].next = self.retry.free;
                    self.retry.free = id;
                    let _ = self.log.push(DramRequest {
                        cycle: t,
                        write: r.write,
                        addr: r.addr,
                    });
                }
            }
        }
    }

    /// The oldest DRAM request accepted and not yet taken, in acceptance
    /// order. The log holds as many requests as one
    /// [`MemorySystem::advance`] can cause, so taking them all after each
    /// call loses none.
    pub fn pop_dram_request(&mut self) -> Option<DramRequest> {
        self.log.pop()
    }

    pub(super) fn evicted(&mut self, t: u64, key: u64, dirty: bool, kind: u8) {
        if dirty && kind == HOME {
            self.stats.dram_writes += 1;
            self.send_to_dram(t, line_of(key) * self.cfg.line_bytes as u64, true, NIL);
        }
    }

    /// The remote-copy proxy: copy a line served by far slice `slice` into
    /// the near partition's mirror slice.
    pub(super) fn maybe_shadow(&mut self, t: u64, slice: u16, key: u64) {
        let p = self.cfg.proxy;
        if !p.enabled {
            return;
        }
        let mirror = self.mirror(slice);
        let tags = &mut self.tags[mirror as usize];
        if tags.lookup(key).is_some() {
            return;
        }
        let occ = tags.valid_lines() as u64 * 1000 / tags.capacity().max(1) as u64;
        if occ >= p.threshold_permille as u64 && !self.rng.chance(p.max_prob_permille as u32, 1000)
        {
            return;
        }
        self.stats.shadow_inserts += 1;
        if let Some(ev) = self.tags[mirror as usize].insert(key, false, SHADOW) {
            self.evicted(t, ev.line, ev.dirty, ev.kind);
        }
    }

    /// DRAM finished a request.
    pub(super) fn dram_done(&mut self, c: Completion, sink: &mut impl MemSink) {
        if c.write || c.tag == NIL {
            return;
        }
        let leader = c.tag;
        let line = self.reqs[leader as usize].line;
        let slice = self.home(line);
        let t = c.cycle + self.cfg.fill_latency as u64;
        if sink.wants_notes() {
            let addr = line * self.cfg.line_bytes as u64;
            sink.note(c.cycle, Event::DramDone { addr });
            let ev = Event::LineFill {
                addr,
                slice,
                ready: t,
                write: false,
            };
            sink.note(c.cycle, ev);
        }
        // The MSHR stays until the fill is usable, so reads of the line
        // arriving meanwhile merge into it instead of hitting a line whose
        // data cannot be read yet.
        self.push(t, MemEv::Fill { req: leader });
    }

    /// The fill led by request `leader` is usable at `t`.
    pub(super) fn fill(&mut self, t: u64, leader: u32, sink: &mut impl MemSink) {
        let line = self.reqs[leader as usize].line;
        let slice = self.home(line);
        let key = key_of(line);
        if !self.tags[slice as usize].touch(key) {
            if let Some(ev) = self.tags[slice as usize].insert(key, false, HOME) {
                self.evicted(t, ev.line, ev.dirty, ev.kind);
            }
        }
        self.mshr.remove(line);
        let mut id = leader;
        let mut any_far = false;
        // A chain is at most every request long; only a damaged snapshot
        // could make it a loop, and that stops here.
        let mut left = self.reqs.len();
        while id != NIL && left > 0 {
            left -= 1;
            let next = self.reqs[id as usize].ms_next;
            let served = self.note_served(sink, line, slice, false, t, t);
            any_far |= self.reqs[id as usize].far;
            let back = self.back(id);
            self.push(served + back, MemEv::Respond { req: id });
            id = next;
        }
        if any_far {
            self.stats.far_reads += 1;
            self.maybe_shadow(t, slice, key);
        }
        // Saturating: only a damaged snapshot holds a fill with no MSHR.
        let used = &mut self.slices[slice as usize].mshrs_used;
        *used = used.saturating_sub(1);
        // Waiting requests retry in order while an MSHR is free: one that
        // now hits or merges leaves the MSHR free for the next (waking only
        // one would strand the rest until another fill on this slice).
        let mut left = self.reqs.len();
        loop {
            let s = &mut self.slices[slice as usize];
            if s.wait_head == NIL || s.mshrs_used >= self.cfg.mshrs || left == 0 {
                break;
            }
            left -= 1;
            let w = s.wait_head;
            s.wait_head = self.reqs[w as usize].wait_next;
            if s.wait_head == NIL {
                s.wait_tail = NIL;
            }
            // The waiting request retries its lookup now: the line may have
            // been filled meanwhile.
            let wline = self.reqs[w as usize].line;
            let key = key_of(wline);
            if self.tags[slice as usize].touch(key) {
                self.answer_hit(t, w, wline, slice, sink);
            } else {
                self.miss(t, w, slice, sink);
            }
        }
    }
}
