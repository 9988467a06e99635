//! A request at its home slice: the lookup (a hit, a shadow copy's probe,
//! or a miss handed to [`super::miss`]), the answer leaving the slice, and
//! the data's return to its SM, which completes the request and every one
//! merged with it in the coalescer.

use super::*;

impl MemorySystem<'_> {
    /// Notes that `slice` answered a read of `line` (looked up at `at`),
    /// its data leaving the slice at `served`; returns `served`.
    pub(super) fn note_served(
        &self,
        sink: &mut impl MemSink,
        line: u64,
        slice: u16,
        hit: bool,
        at: u64,
        served: u64,
    ) -> u64 {
        if sink.wants_notes() {
            let ev = Event::LineServed {
                addr: line * self.cfg.line_bytes as u64,
                slice,
                hit,
                at,
                served,
            };
            sink.note(at, ev);
        }
        served
    }

    /// Answers read `id` of `line` as a hit in `slice` looked up at `t`:
    /// its data leaves after the hit latency and crosses back to its SM.
    pub(super) fn answer_hit(
        &mut self,
        t: u64,
        id: u32,
        line: u64,
        slice: u16,
        sink: &mut impl MemSink,
    ) {
        let hit = t + self.cfg.hit_latency as u64;
        let served = self.note_served(sink, line, slice, true, t, hit);
        let back = self.back(id);
        self.push(served + back, MemEv::Respond { req: id });
    }

    pub(super) fn arrive(
        &mut self,
        t: u64,
        id: u32,
        slice: u16,
        probe: bool,
        sink: &mut impl MemSink,
    ) {
        let r = self.reqs[id as usize];
        let key = key_of(r.line);
        let tags = &mut self.tags[slice as usize];
        if probe {
            if tags.touch(key) {
                // A shadow copy in the near partition: no far crossing.
                self.stats.shadow_hits += 1;
                self.reqs[id as usize].far = false;
                // The copy's data moves through the mirror's port from
                // the lookup's cycle on.
                self.hold_from_lookup(slice, t);
                self.answer_hit(t, id, r.line, slice, sink);
                return;
            }
            let home = self.home(r.line);
            let at = self.reserve(home, t + self.cfg.far_latency as u64, true);
            self.push(
                at,
                MemEv::Arrive {
                    req: id,
                    slice: home,
                    probe: false,
                },
            );
            return;
        }
        if r.write {
            if tags.touch(key) {
                tags.mark_dirty(key);
                self.stats.l2_hits += 1;
            } else {
                self.stats.l2_misses += 1;
                if let Some(ev) = tags.insert(key, true, HOME) {
                    self.evicted(t, ev.line, ev.dirty, ev.kind);
                }
            }
            if sink.wants_notes() {
                let ev = Event::LineFill {
                    addr: r.line * self.cfg.line_bytes as u64,
                    slice,
                    ready: t,
                    write: true,
                };
                sink.note(t, ev);
            }
            let back = self.back(id);
            self.push(
                t + self.cfg.hit_latency as u64 + back,
                MemEv::Respond { req: id },
            );
            return;
        }
        if tags.touch(key) {
            self.stats.l2_hits += 1;
            if r.far {
                self.stats.far_reads += 1;
                self.maybe_shadow(t, slice, key);
            }
            self.answer_hit(t, id, r.line, slice, sink);
            return;
        }
        self.stats.l2_misses += 1;
        self.miss(t, id, slice, sink);
    }

    /// A request's data is back at its SM: complete it and every request
    /// merged with it in its group's coalescer.
    pub(super) fn respond(&mut self, t: u64, id: u32, done: &mut impl MemSink) {
        let r = self.reqs[id as usize];
        if !r.write && self.cfg.coalescer {
            let key = self.coalescer_key(r.line, r.sm);
            if self.coalescer.get(key) == Some(&id) {
                self.coalescer.remove(key);
            }
        }
        let mut cur = id;
        let addr = r.line * self.cfg.line_bytes as u64;
        // A chain is at most every request long, and only a damaged
        // snapshot could make it longer or free a record twice: both stop
        // here rather than loop or overflow the free list.
        let mut left = self.reqs.len();
        while cur != NIL && left > 0 && (cur as usize) < self.reqs.len() {
            left -= 1;
            let next = self.reqs[cur as usize].co_next;
            done.done(self.reqs[cur as usize].token, addr, t);
            self.reqs[cur as usize] = Req::EMPTY;
            if let Some(f) = self.free.get_mut(self.nfree) {
                *f = cur;
                self.nfree += 1;
            }
            cur = next;
        }
    }
}
