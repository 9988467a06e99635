//! A timing wheel (calendar queue) over arena storage: a drop-in
//! replacement for [`EventQueue`] tuned for the memory system, whose events
//! almost all fire within a few thousand cycles of "now".
//!
//! # Ordering guarantee
//!
//! Exactly the order of [`EventQueue`]: events come out in ascending
//! `(cycle, class, sequence)`, where `sequence` is assigned at insertion by
//! one counter that starts at 0 and counts every accepted push (rejected
//! pushes take no number). Fed the same pushes and pops, a [`TimingWheel`]
//! and an [`EventQueue`] return identical [`Entry`] values, `seq` included,
//! and agree on [`TimingWheel::next_cycle`], [`TimingWheel::len`] and on
//! which pushes are refused for lack of room. The order never depends on
//! the horizon, on addresses or on where an event happens to be stored.
//!
//! # Structure
//!
//! - A *window* of `W = 2^horizon_log2` cycles, `[base, base + W)`, maps
//!   onto `W` slots (`slot = cycle mod W`). Each slot holds one FIFO per
//!   class `0..CLASSES` as a singly linked list through a node pool; since
//!   a slot only ever holds events of a single cycle (see the invariants)
//!   and sequence numbers grow with every push, appending keeps each FIFO
//!   sorted by sequence.
//! - A two-level occupancy bitmap (one bit per slot, one summary bit per
//!   64-slot word) finds the next non-empty slot with a couple of word
//!   scans.
//! - Everything else goes to an *overflow* binary heap ([`EventQueue`] of
//!   node indices): events at or beyond `base + W`, events in the past
//!   (`cycle < base`) and events of a class `>= CLASSES`.
//!
//! Instead of migrating overflow events into the wheel as the window
//! advances, [`TimingWheel::pop`] *merges* the two sources: it compares the
//! full key of the wheel's first event with that of the heap's first event
//! and takes the smaller. The key is unique, so this is exact even when an
//! overflow event and wheel events share a cycle (and class). The heap's
//! own sequence numbers are assigned in global insertion order, so the heap
//! orders its events exactly as the global sequence would; the global
//! sequence number is kept in the node and returned in the [`Entry`].
//!
//! # Invariants
//!
//! 1. Every event in the wheel has `base <= cycle < base + W`; hence each
//!    slot holds events of one cycle only, and the cyclic slot order from
//!    `base mod W` is the cycle order.
//! 2. `wheel_min` is the cycle of the earliest wheel event whenever the
//!    wheel is non-empty.
//! 3. `base` never decreases. [`TimingWheel::pop`] raises it to the popped
//!    cycle: every remaining event is not earlier than the popped one, so
//!    invariant 1 still holds. [`TimingWheel::push`] raises it when the
//!    wheel is empty (where invariant 1 is vacuous) to
//!    `cycle - W/2` if that is later, so that after an idle stretch the
//!    window catches up with the pushes instead of sending them all to the
//!    heap.
//! 4. Each node is on exactly one of: the free list, one slot FIFO, the
//!    overflow heap. The heap's capacity equals the pool's, so a push that
//!    finds a free node always succeeds.
//!
//! # Events in the past
//!
//! A push at a cycle before `base` (earlier than an event already popped)
//! is accepted, goes to the overflow heap, keeps its own cycle in the
//! popped [`Entry`], and is delivered before everything later, in
//! `(cycle, class, sequence)` order, exactly as [`EventQueue`] would. The
//! memory system never does this; the structure simply does not misbehave.
//!
//! No operation panics, allocates, loops more than `O(W / 4096 + 1)` word
//! scans (pop) or `O(log n)` heap steps (overflow), or uses floating point.
//! The sequence counter wraps after `2^64` pushes, which is never reached.

use crate::arena::{Arena, Layout};
use crate::error::{BuildError, Capacity, ConfigError};
use crate::queue::{Entry, EventQueue};

/// Number of classes with their own FIFO per slot. Events of a higher
/// class are still accepted and ordered exactly, through the overflow heap.
pub const CLASSES: usize = 4;

/// The largest accepted `horizon_log2` (16 Mi slots).
pub const MAX_HORIZON_LOG2: u32 = 24;

/// End of a list / no node.
const NIL: u32 = u32::MAX;

/// One pooled event. Free nodes have `event: None` and chain through
/// `next`; queued nodes have `event: Some(_)`.
#[derive(Clone, Copy, Debug, serde::Serialize, serde::Deserialize)]
struct Node<E> {
    /// Global insertion sequence number.
    seq: u64,
    /// Next node of the same FIFO or of the free list.
    next: u32,
    event: Option<E>,
}

/// The per-class FIFOs of one slot.
#[derive(Clone, Copy, Debug, serde::Serialize, serde::Deserialize)]
struct Fifo {
    head: [u32; CLASSES],
    tail: [u32; CLASSES],
}

impl Fifo {
    const EMPTY: Fifo = Fifo {
        head: [NIL; CLASSES],
        tail: [NIL; CLASSES],
    };

    /// The lowest non-empty class.
    fn first_class(&self) -> Option<usize> {
        self.head.iter().position(|&h| h != NIL)
    }
}

/// Table sizes for a capacity and horizon.
#[derive(Clone, Copy)]
struct Sizes {
    slots: usize,
    words: usize,
    summary: usize,
}

impl Sizes {
    fn new(capacity: usize, horizon_log2: u32) -> Result<Self, BuildError> {
        if horizon_log2 > MAX_HORIZON_LOG2 {
            return Err(BuildError::Config(ConfigError {
                field: "horizon_log2",
                problem: "must be at most 24",
            }));
        }
        // Node indices are u32 and NIL is reserved.
        if capacity >= NIL as usize {
            return Err(BuildError::TooLarge);
        }
        let slots = 1usize << horizon_log2;
        let words = slots.div_ceil(64);
        let summary = words.div_ceil(64);
        Ok(Sizes {
            slots,
            words,
            summary,
        })
    }
}

/// The first set bit of `words` at or after bit `start`, scanning
/// cyclically (bits before `start` in the same word come last).
fn scan_cyclic(words: &[u64], start: usize) -> Option<usize> {
    let n = words.len();
    let w = start / 64;
    let first = words.get(w)? & (!0u64 << (start % 64));
    if first != 0 {
        return Some(w * 64 + first.trailing_zeros() as usize);
    }
    let mut idx = w;
    for _ in 0..n {
        idx += 1;
        if idx == n {
            idx = 0;
        }
        let word = words[idx];
        if word != 0 {
            return Some(idx * 64 + word.trailing_zeros() as usize);
        }
    }
    None
}

/// A fixed-capacity timing wheel with the order of [`EventQueue`]; see the
/// [module documentation](self).
#[derive(Debug)]
pub struct TimingWheel<'a, E> {
    nodes: &'a mut [Node<E>],
    fifos: &'a mut [Fifo],
    /// One bit per slot: the slot holds an event.
    bits: &'a mut [u64],
    /// One bit per word of `bits`: the word is non-zero.
    summary: &'a mut [u64],
    /// Events outside the window or of class `>= CLASSES`.
    overflow: EventQueue<'a, u32>,
    /// Head of the free list.
    free: u32,
    /// First cycle of the window.
    base: u64,
    /// `W - 1`.
    mask: u64,
    /// Events in the wheel (not in the heap).
    wheel_len: usize,
    /// Cycle of the earliest wheel event; meaningful when `wheel_len > 0`.
    wheel_min: u64,
    len: usize,
    next_seq: u64,
}

impl<'a, E: Copy> TimingWheel<'a, E> {
    /// Accounts in `l` for the storage of a wheel of `capacity` events and
    /// `2^horizon_log2` slots, exactly as [`TimingWheel::new_in`] carves it.
    pub fn layout(capacity: usize, horizon_log2: u32, l: &mut Layout) -> Result<(), BuildError> {
        let z = Sizes::new(capacity, horizon_log2)?;
        l.add::<Node<E>>(capacity)?;
        l.add::<Fifo>(z.slots)?;
        l.add::<u64>(z.words)?;
        l.add::<u64>(z.summary)?;
        l.add::<Entry<u32>>(capacity)?;
        Ok(())
    }

    /// Carves an empty wheel of `capacity` events and `2^horizon_log2`
    /// slots out of `arena`; `what` names the table in the error when the
    /// arena is exhausted. Fails with [`BuildError::Config`] when
    /// `horizon_log2 > MAX_HORIZON_LOG2` and [`BuildError::TooLarge`] when
    /// `capacity >= u32::MAX`.
    pub fn new_in(
        arena: &mut Arena<'a>,
        capacity: usize,
        horizon_log2: u32,
        what: Capacity,
    ) -> Result<Self, BuildError> {
        let z = Sizes::new(capacity, horizon_log2)?;
        let nodes = arena.alloc(
            capacity,
            Node {
                seq: 0,
                next: NIL,
                event: None,
            },
            what,
        )?;
        // Free list 0 -> 1 -> ... -> capacity - 1.
        for (i, n) in nodes.iter_mut().enumerate() {
            let next = i + 1;
            n.next = if next < capacity { next as u32 } else { NIL };
        }
        let fifos = arena.alloc(z.slots, Fifo::EMPTY, what)?;
        let bits = arena.alloc(z.words, 0u64, what)?;
        let summary = arena.alloc(z.summary, 0u64, what)?;
        let heap = arena.alloc(
            capacity,
            Entry {
                cycle: 0,
                class: 0,
                seq: 0,
                event: 0u32,
            },
            what,
        )?;
        Ok(TimingWheel {
            nodes,
            fifos,
            bits,
            summary,
            overflow: EventQueue::new(heap),
            free: if capacity > 0 { 0 } else { NIL },
            base: 0,
            mask: (z.slots - 1) as u64,
            wheel_len: 0,
            wheel_min: 0,
            len: 0,
            next_seq: 0,
        })
    }

    /// Number of queued events.
    pub const fn len(&self) -> usize {
        self.len
    }

    /// True when no event is queued.
    pub const fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Maximum number of events.
    pub fn capacity(&self) -> usize {
        self.nodes.len()
    }

    /// Number of slots `W` (the horizon, in cycles).
    pub fn horizon(&self) -> u64 {
        self.mask + 1
    }

    /// First cycle of the current window `[base, base + W)`.
    pub const fn base(&self) -> u64 {
        self.base
    }

    /// Events currently held in the overflow heap (diagnostics).
    pub const fn overflow_len(&self) -> usize {
        self.overflow.len()
    }

    /// The next sequence number that will be assigned.
    pub const fn next_seq(&self) -> u64 {
        self.next_seq
    }

    /// Queues `event` at `cycle` with ordering `class`. Returns the event
    /// back when the wheel is full.
    pub fn push(&mut self, cycle: u64, class: u8, event: E) -> Result<(), E> {
        let idx = self.free;
        if idx == NIL {
            return Err(event);
        }
        if self.wheel_len == 0 && cycle > self.base {
            // Invariant 3: an empty wheel may move its window freely.
            self.base = self.base.max(cycle.saturating_sub(self.mask.div_ceil(2)));
        }
        let in_window =
            cycle >= self.base && cycle - self.base <= self.mask && (class as usize) < CLASSES;
        if !in_window && self.overflow.push(cycle, class, idx).is_err() {
            // Unreachable (invariant 4), but never lose the event.
            return Err(event);
        }
        let node = &mut self.nodes[idx as usize];
        self.free = node.next;
        *node = Node {
            seq: self.next_seq,
            next: NIL,
            event: Some(event),
        };
        self.next_seq = self.next_seq.wrapping_add(1);
        self.len += 1;
        if in_window {
            let s = (cycle & self.mask) as usize;
            let k = class as usize;
            let f = &mut self.fifos[s];
            match f.tail[k] {
                NIL => f.head[k] = idx,
                t => self.nodes[t as usize].next = idx,
            }
            f.tail[k] = idx;
            self.bits[s / 64] |= 1 << (s % 64);
            self.summary[s / 4096] |= 1 << ((s / 64) % 64);
            if self.wheel_len == 0 || cycle < self.wheel_min {
                self.wheel_min = cycle;
            }
            self.wheel_len += 1;
        }
        Ok(())
    }

    /// The cycle of the earliest event, if any.
    pub fn next_cycle(&self) -> Option<u64> {
        let heap = self.overflow.next_cycle();
        if self.wheel_len == 0 {
            return heap;
        }
        Some(match heap {
            Some(h) if h < self.wheel_min => h,
            _ => self.wheel_min,
        })
    }

    /// The earliest entry, if any (by value: entries are not stored whole).
    pub fn peek(&self) -> Option<Entry<E>> {
        if self.take_from_wheel()? {
            let f = &self.fifos[(self.wheel_min & self.mask) as usize];
            let k = f.first_class()?;
            let n = &self.nodes[f.head[k] as usize];
            Some(Entry {
                cycle: self.wheel_min,
                class: k as u8,
                seq: n.seq,
                event: n.event?,
            })
        } else {
            let h = self.overflow.peek()?;
            let n = &self.nodes[h.event as usize];
            Some(Entry {
                cycle: h.cycle,
                class: h.class,
                seq: n.seq,
                event: n.event?,
            })
        }
    }

    /// Removes and returns the earliest entry.
    pub fn pop(&mut self) -> Option<Entry<E>> {
        let e = if self.take_from_wheel()? {
            self.pop_wheel()
        } else {
            self.pop_overflow()
        }?;
        // Invariant 3: every remaining event is at or after `e.cycle`.
        if e.cycle > self.base {
            self.base = e.cycle;
        }
        Some(e)
    }

    /// Removes and returns the earliest entry if it fires at or before `cycle`.
    pub fn pop_due(&mut self, cycle: u64) -> Option<Entry<E>> {
        match self.next_cycle() {
            Some(c) if c <= cycle => self.pop(),
            _ => None,
        }
    }

    /// Whether the earliest event is the wheel's (`Some(true)`) or the
    /// heap's (`Some(false)`); `None` when empty.
    fn take_from_wheel(&self) -> Option<bool> {
        let Some(h) = self.overflow.peek() else {
            return if self.wheel_len > 0 { Some(true) } else { None };
        };
        if self.wheel_len == 0 {
            return Some(false);
        }
        if h.cycle != self.wheel_min {
            return Some(self.wheel_min < h.cycle);
        }
        // Same cycle: compare (class, global sequence).
        let f = &self.fifos[(self.wheel_min & self.mask) as usize];
        let k = f.first_class()?;
        let wseq = self.nodes[f.head[k] as usize].seq;
        let hseq = self.nodes[h.event as usize].seq;
        Some((k as u8, wseq) < (h.class, hseq))
    }

    /// Returns node `idx` to the free list and hands back its contents.
    fn release(&mut self, idx: u32) -> Option<(u64, E)> {
        let node = &mut self.nodes[idx as usize];
        let out = (node.seq, node.event.take()?);
        node.next = self.free;
        self.free = idx;
        self.len -= 1;
        Some(out)
    }

    fn pop_wheel(&mut self) -> Option<Entry<E>> {
        let cycle = self.wheel_min;
        let s = (cycle & self.mask) as usize;
        let f = &mut self.fifos[s];
        let k = f.first_class()?;
        let idx = f.head[k];
        let next = self.nodes[idx as usize].next;
        f.head[k] = next;
        if next == NIL {
            f.tail[k] = NIL;
        }
        let slot_empty = f.first_class().is_none();
        self.wheel_len -= 1;
        if slot_empty {
            let w = s / 64;
            self.bits[w] &= !(1 << (s % 64));
            if self.bits[w] == 0 {
                self.summary[w / 64] &= !(1 << (w % 64));
            }
            if self.wheel_len > 0 {
                // Invariant 1 with base = cycle: the next occupied slot in
                // cyclic order from `s` holds the earliest remaining cycle.
                let next_slot = self.next_occupied(s)?;
                let ahead = (next_slot as u64).wrapping_sub(s as u64) & self.mask;
                self.wheel_min = cycle + ahead;
            }
        }
        let (seq, event) = self.release(idx)?;
        Some(Entry {
            cycle,
            class: k as u8,
            seq,
            event,
        })
    }

    fn pop_overflow(&mut self) -> Option<Entry<E>> {
        let h = self.overflow.pop()?;
        let (seq, event) = self.release(h.event)?;
        Some(Entry {
            cycle: h.cycle,
            class: h.class,
            seq,
            event,
        })
    }

    /// The first occupied slot at or after `start`, cyclically.
    fn next_occupied(&self, start: usize) -> Option<usize> {
        let w = start / 64;
        let first = self.bits.get(w)? & (!0u64 << (start % 64));
        if first != 0 {
            return Some(w * 64 + first.trailing_zeros() as usize);
        }
        // The next non-empty word after `w`, cyclically; `w` itself comes
        // last, and then only its bits before `start` can be set.
        let after = if w + 1 == self.bits.len() { 0 } else { w + 1 };
        let word = scan_cyclic(self.summary, after)?;
        let bits = *self.bits.get(word)?;
        Some(word * 64 + bits.trailing_zeros() as usize)
    }
}

impl<E: Copy> TimingWheel<'_, E> {
    /// Checks the structure after a restore: every list index in range and
    /// acyclic, every node on exactly one of the free list, one slot FIFO or
    /// the overflow heap, the occupancy bits and counts matching, and the
    /// earliest wheel cycle inside the window on an occupied slot. Names
    /// the first thing found wrong.
    pub(crate) fn check(&self) -> Result<(), &'static str> {
        let cap = self.nodes.len();
        let mut seen = 0usize;
        // Free list.
        let mut i = self.free;
        while i != NIL {
            let n = self.nodes.get(i as usize).ok_or("event free list")?;
            if n.event.is_some() || seen >= cap {
                return Err("event free list");
            }
            seen += 1;
            i = n.next;
        }
        let free = seen;
        // Slot FIFOs and occupancy bits.
        for (s, f) in self.fifos.iter().enumerate() {
            let mut any = false;
            for k in 0..CLASSES {
                let mut last = NIL;
                let mut i = f.head[k];
                while i != NIL {
                    let n = self.nodes.get(i as usize).ok_or("event list")?;
                    if n.event.is_none() || seen >= cap {
                        return Err("event list");
                    }
                    seen += 1;
                    last = i;
                    i = n.next;
                }
                if f.tail[k] != last {
                    return Err("event list tail");
                }
                any |= last != NIL;
            }
            let bit = self
                .bits
                .get(s / 64)
                .is_some_and(|w| w >> (s % 64) & 1 != 0);
            if bit != any {
                return Err("event slot bits");
            }
        }
        for (w, &word) in self.bits.iter().enumerate() {
            let sum = self
                .summary
                .get(w / 64)
                .is_some_and(|x| x >> (w % 64) & 1 != 0);
            if sum != (word != 0) {
                return Err("event summary bits");
            }
        }
        let wheel = seen - free;
        // Overflow heap: node indices in range, queued, not already seen.
        for e in self.overflow.entries() {
            let n = self.nodes.get(e.event as usize).ok_or("overflow event")?;
            if n.event.is_none() || seen >= cap {
                return Err("overflow event");
            }
            seen += 1;
        }
        if seen != cap || wheel != self.wheel_len || self.len != cap - free {
            return Err("event counts");
        }
        if self.wheel_len > 0 {
            let s = (self.wheel_min & self.mask) as usize;
            let occupied = self
                .bits
                .get(s / 64)
                .is_some_and(|w| w >> (s % 64) & 1 != 0);
            if self.wheel_min < self.base || self.wheel_min - self.base > self.mask || !occupied {
                return Err("earliest event");
            }
        }
        Ok(())
    }

    /// Every queued event, in no particular order.
    pub(crate) fn queued(&self) -> impl Iterator<Item = &E> {
        self.nodes.iter().filter_map(|n| n.event.as_ref())
    }
}

impl<E: Copy + serde::Serialize + serde::de::DeserializeOwned> TimingWheel<'_, E> {
    /// Writes the mutable state into a snapshot.
    pub(crate) fn save_state(
        &self,
        w: &mut crate::codec::Writer<'_>,
    ) -> Result<(), crate::codec::SnapshotError> {
        w.val(&self.free)?;
        w.val(&self.base)?;
        w.val(&(self.wheel_len as u64))?;
        w.val(&self.wheel_min)?;
        w.val(&(self.len as u64))?;
        w.val(&self.next_seq)?;
        w.slice(self.nodes)?;
        w.slice(self.fifos)?;
        w.slice(self.bits)?;
        w.slice(self.summary)?;
        self.overflow.save_state(w)
    }

    /// Overwrites the mutable state from a snapshot.
    pub(crate) fn load_state(
        &mut self,
        r: &mut crate::codec::Reader<'_>,
    ) -> Result<(), crate::codec::SnapshotError> {
        let cap = self.nodes.len();
        self.free = r.val()?;
        if self.free != NIL && self.free as usize >= cap {
            return Err(crate::codec::SnapshotError::Corrupt {
                what: "wheel free list",
            });
        }
        self.base = r.val()?;
        self.wheel_len = r.at_most(cap, "wheel length")?;
        self.wheel_min = r.val()?;
        self.len = r.at_most(cap, "wheel length")?;
        self.next_seq = r.val()?;
        r.slice(self.nodes)?;
        r.slice(self.fifos)?;
        r.slice(self.bits)?;
        r.slice(self.summary)?;
        self.overflow.load_state(r)
    }
}

#[cfg(test)]
#[path = "wheel_tests.rs"]
mod tests;
