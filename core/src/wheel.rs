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
mod tests {
    use super::*;
    use ::std::vec;
    use ::std::vec::Vec;
    use proptest::prelude::*;

    fn filler() -> Entry<u32> {
        Entry {
            cycle: 0,
            class: 0,
            seq: 0,
            event: 0,
        }
    }

    fn wheel_buf(capacity: usize, horizon_log2: u32) -> Vec<u8> {
        let mut l = Layout::new();
        TimingWheel::<u32>::layout(capacity, horizon_log2, &mut l).unwrap();
        vec![0u8; l.bytes()]
    }

    /// A tiny deterministic generator for the non-proptest tests.
    struct XorShift(u64);

    impl XorShift {
        fn next(&mut self) -> u64 {
            let mut x = self.0;
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            self.0 = x;
            x
        }

        fn below(&mut self, n: u64) -> u64 {
            self.next() % n
        }
    }

    #[derive(Clone, Copy, Debug)]
    enum Op {
        /// Push at `now + d`.
        Near(u64, u8),
        /// Push at `now + d` with `d` around or past the horizon.
        Far(u64, u8),
        /// Push at `now - d` (possibly before events already popped).
        Past(u64, u8),
        /// Advance `now` by `d`.
        Tick(u64),
        /// `pop_due(now)`.
        PopDue,
        /// `pop()`, then `now = max(now, popped cycle)`.
        Pop,
    }

    fn op(horizon: u64) -> impl Strategy<Value = Op> {
        prop_oneof![
            6 => (0..48u64, 0..6u8).prop_map(|(d, c)| Op::Near(d, c)),
            1 => (horizon.saturating_sub(2)..horizon * 4 + 2, 0..6u8).prop_map(|(d, c)| Op::Far(d, c)),
            1 => (0..24u64, 0..6u8).prop_map(|(d, c)| Op::Past(d, c)),
            2 => (0..20u64).prop_map(Op::Tick),
            3 => Just(Op::PopDue),
            3 => Just(Op::Pop),
        ]
    }

    #[test]
    fn check_finds_damaged_links_and_counts() {
        let mut buf = wheel_buf(8, 4);
        let mut a = Arena::new(&mut buf);
        let mut w = TimingWheel::<u32>::new_in(&mut a, 8, 4, Capacity::EventQueue).unwrap();
        for (i, c) in [3u64, 3, 5, 40].iter().enumerate() {
            w.push(*c, 0, i as u32).unwrap();
        }
        assert_eq!(w.check(), Ok(()));
        let head = w.fifos[3].head[0];
        w.fifos[3].head[0] = 99;
        assert_eq!(w.check(), Err("event list"));
        w.fifos[3].head[0] = head;
        w.wheel_len += 1;
        assert_eq!(w.check(), Err("event counts"));
        w.wheel_len -= 1;
        let next = w.nodes[head as usize].next;
        w.nodes[head as usize].next = head;
        assert_eq!(w.check(), Err("event list"));
        w.nodes[head as usize].next = next;
        w.bits[0] ^= 1 << 7;
        assert_eq!(w.check(), Err("event slot bits"));
        w.bits[0] ^= 1 << 7;
        assert_eq!(w.check(), Ok(()));
    }

    /// Drives both queues with `ops`; fails on the first difference.
    fn compare(
        capacity: usize,
        horizon_log2: u32,
        start: u64,
        ops: &[Op],
        allow_past: bool,
    ) -> Result<(), TestCaseError> {
        let mut buf = wheel_buf(capacity, horizon_log2);
        let mut a = Arena::new(&mut buf);
        let mut w =
            TimingWheel::<u32>::new_in(&mut a, capacity, horizon_log2, Capacity::EventQueue)
                .unwrap();
        let mut store = vec![filler(); capacity];
        let mut q = EventQueue::new(&mut store);
        let mut now = start;
        let mut popped_max = start;
        for (i, &o) in ops.iter().enumerate() {
            let ev = i as u32;
            let push =
                |cycle: u64, class: u8, w: &mut TimingWheel<u32>, q: &mut EventQueue<u32>| {
                    let a = w.push(cycle, class, ev);
                    let b = q.push(cycle, class, ev);
                    prop_assert_eq!(a, b);
                    Ok::<(), TestCaseError>(())
                };
            match o {
                Op::Near(d, c) | Op::Far(d, c) => push(now.saturating_add(d), c, &mut w, &mut q)?,
                Op::Past(d, c) => {
                    let cycle = now.saturating_sub(d);
                    if allow_past || cycle >= popped_max {
                        push(cycle, c, &mut w, &mut q)?;
                    }
                }
                Op::Tick(d) => now = now.saturating_add(d),
                Op::PopDue => {
                    let a = w.pop_due(now);
                    prop_assert_eq!(a, q.pop_due(now));
                    if let Some(e) = a {
                        popped_max = popped_max.max(e.cycle);
                    }
                }
                Op::Pop => {
                    prop_assert_eq!(w.peek(), q.peek().copied());
                    let a = w.pop();
                    prop_assert_eq!(a, q.pop());
                    if let Some(e) = a {
                        now = now.max(e.cycle);
                        popped_max = popped_max.max(e.cycle);
                    }
                }
            }
            prop_assert_eq!(w.next_cycle(), q.next_cycle());
            prop_assert_eq!(w.len(), q.len());
            prop_assert_eq!(w.next_seq(), q.next_seq());
            // Every reachable state passes the restore check.
            prop_assert_eq!(w.check(), Ok(()));
        }
        // Drain: the rest must agree too.
        loop {
            let a = w.pop();
            prop_assert_eq!(a, q.pop());
            prop_assert_eq!(w.next_cycle(), q.next_cycle());
            if a.is_none() {
                break;
            }
        }
        prop_assert!(w.is_empty());
        Ok(())
    }

    proptest! {
        #![proptest_config(ProptestConfig {
            cases: ::std::env::var("PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(512),
            ..ProptestConfig::default()
        })]

        /// Same pops, entries and `next_cycle` as `EventQueue`, never
        /// pushing before an already popped event (the memory system's use).
        #[test]
        fn matches_event_queue(
            (h, ops) in (0u32..8).prop_flat_map(|h| (Just(h), proptest::collection::vec(op(1 << h), 0..400))),
            capacity in 0usize..80,
            start in prop_oneof![Just(0u64), 0..100_000u64, Just(u64::MAX - 5_000)],
        ) {
            compare(capacity, h, start, &ops, false)?;
        }

        /// The same with pushes into the past.
        #[test]
        fn matches_event_queue_with_past_pushes(
            (h, ops) in (0u32..8).prop_flat_map(|h| (Just(h), proptest::collection::vec(op(1 << h), 0..400))),
            capacity in 1usize..80,
        ) {
            compare(capacity, h, 1_000, &ops, true)?;
        }
    }

    #[test]
    fn ties_are_fifo_and_class_orders_within_a_cycle() {
        let mut buf = wheel_buf(8, 4);
        let mut a = Arena::new(&mut buf);
        let mut q = TimingWheel::<u32>::new_in(&mut a, 8, 4, Capacity::EventQueue).unwrap();
        q.push(5, 1, 1).unwrap();
        q.push(5, 0, 2).unwrap();
        q.push(5, 1, 3).unwrap();
        q.push(4, 9, 4).unwrap();
        q.push(100, 0, 5).unwrap(); // beyond the 16-cycle horizon
        q.push(5, 7, 6).unwrap(); // class beyond CLASSES
        let order: [u32; 6] = core::array::from_fn(|_| q.pop().unwrap().event);
        assert_eq!(order, [4, 2, 1, 3, 6, 5]);
        assert!(q.pop().is_none());
    }

    /// An overflow event and directly pushed events of the same cycle and
    /// class interleave by sequence number.
    #[test]
    fn overflow_and_wheel_events_of_one_cycle_keep_fifo_order() {
        let mut buf = wheel_buf(16, 4);
        let mut a = Arena::new(&mut buf);
        let mut q = TimingWheel::<u32>::new_in(&mut a, 16, 4, Capacity::EventQueue).unwrap();
        q.push(0, 0, 0).unwrap();
        q.push(40, 1, 1).unwrap(); // overflow (window is [0, 16))
        q.push(40, 0, 2).unwrap(); // overflow
        q.push(30, 0, 3).unwrap(); // overflow
        assert_eq!(q.overflow_len(), 3);
        assert_eq!(q.pop().unwrap().event, 0);
        assert_eq!(q.pop().unwrap().event, 3); // base -> 30: 40 is in the window
        q.push(40, 0, 4).unwrap(); // direct, after 2 in sequence
        q.push(40, 1, 5).unwrap(); // direct, after 1
        q.push(31, 1, 6).unwrap();
        assert_eq!(q.next_cycle(), Some(31));
        let got: Vec<(u64, u8, u64, u32)> = core::iter::from_fn(|| q.pop())
            .map(|e| (e.cycle, e.class, e.seq, e.event))
            .collect();
        assert_eq!(
            got,
            [
                (31, 1, 6, 6),
                (40, 0, 2, 2),
                (40, 0, 4, 4),
                (40, 1, 1, 1),
                (40, 1, 5, 5)
            ]
        );
    }

    #[test]
    fn past_events_come_first_with_their_own_cycle() {
        let mut buf = wheel_buf(8, 4);
        let mut a = Arena::new(&mut buf);
        let mut q = TimingWheel::<u32>::new_in(&mut a, 8, 4, Capacity::EventQueue).unwrap();
        q.push(100, 0, 1).unwrap();
        q.push(105, 0, 2).unwrap();
        assert_eq!(q.pop().unwrap().cycle, 100);
        q.push(50, 1, 3).unwrap();
        q.push(50, 0, 4).unwrap();
        q.push(100, 0, 5).unwrap();
        assert_eq!(q.next_cycle(), Some(50));
        let got: Vec<(u64, u32)> = core::iter::from_fn(|| q.pop())
            .map(|e| (e.cycle, e.event))
            .collect();
        assert_eq!(got, [(50, 4), (50, 3), (100, 5), (105, 2)]);
    }

    #[test]
    fn full_wheel_hands_the_event_back_and_recovers() {
        for h in [0, 4, 12] {
            let cap = 40;
            let mut buf = wheel_buf(cap, h);
            let mut a = Arena::new(&mut buf);
            let mut q = TimingWheel::<u32>::new_in(&mut a, cap, h, Capacity::EventQueue).unwrap();
            assert_eq!(q.capacity(), cap);
            // Half in the window, half far beyond it, mixed classes.
            for i in 0..cap as u32 {
                let cycle = if i % 2 == 0 {
                    1 + i as u64 % 7
                } else {
                    1 << 30
                };
                q.push(cycle, (i % 5) as u8, i).unwrap();
            }
            assert_eq!(q.len(), cap);
            assert_eq!(q.push(0, 0, 999), Err(999));
            assert_eq!(q.push(1 << 40, 3, 998), Err(998));
            assert_eq!(q.next_seq(), cap as u64, "rejected pushes take no number");
            let first = q.pop().unwrap();
            assert_eq!(first.cycle, 1);
            q.push(2, 0, 997).unwrap();
            assert_eq!(q.push(2, 0, 996), Err(996));
            let mut n = 0;
            let mut last = (0, 0, 0);
            while let Some(e) = q.pop() {
                assert!((e.cycle, e.class, e.seq) > last);
                last = (e.cycle, e.class, e.seq);
                n += 1;
            }
            assert_eq!(n, cap);
            // Everything went back to the free list.
            for i in 0..cap as u32 {
                q.push(i as u64, 0, i).unwrap();
            }
            assert_eq!(q.push(0, 0, 1), Err(1));
        }
    }

    #[test]
    fn zero_capacity_and_bad_horizon() {
        let mut buf = wheel_buf(0, 3);
        let mut a = Arena::new(&mut buf);
        let mut q = TimingWheel::<u32>::new_in(&mut a, 0, 3, Capacity::EventQueue).unwrap();
        assert_eq!(q.push(1, 0, 5), Err(5));
        assert_eq!(q.pop(), None);
        assert_eq!(q.next_cycle(), None);
        let mut l = Layout::new();
        assert!(matches!(
            TimingWheel::<u32>::layout(4, MAX_HORIZON_LOG2 + 1, &mut l),
            Err(BuildError::Config(ConfigError {
                field: "horizon_log2",
                ..
            }))
        ));
        let mut small = [0u8; 16];
        let mut a = Arena::new(&mut small);
        assert!(matches!(
            TimingWheel::<u32>::new_in(&mut a, 100, 4, Capacity::MemoryPort),
            Err(BuildError::ArenaTooSmall {
                table: Capacity::MemoryPort,
                ..
            })
        ));
    }

    #[test]
    fn layout_is_exact_for_any_start_alignment() {
        let mut l = Layout::new();
        TimingWheel::<u64>::layout(100, 7, &mut l).unwrap();
        let mut buf = vec![0u8; l.bytes() + 16];
        for start in 0..8 {
            let mut a = Arena::new(&mut buf[start..start + l.bytes()]);
            TimingWheel::<u64>::new_in(&mut a, 100, 7, Capacity::EventQueue).unwrap();
        }
    }

    /// Horizon of 16 cycles against latencies up to 200: most events go
    /// through the overflow heap and share cycles with direct pushes.
    #[test]
    fn small_horizon_stress() {
        for (seed, h) in [(1u64, 4u32), (7, 4), (99, 1), (1234, 6), (5, 13), (6, 7)] {
            let mut rng = XorShift(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
            let mut ops = Vec::new();
            for _ in 0..60_000 {
                ops.push(match rng.below(10) {
                    0..=3 => Op::Near(rng.below(24), rng.below(3) as u8),
                    4..=5 => Op::Far(rng.below(12 << h), rng.below(2) as u8),
                    6 => Op::Tick(rng.below(8)),
                    7..=8 => Op::PopDue,
                    _ => Op::Pop,
                });
            }
            compare(512, h, 0, &ops, false).unwrap();
        }
    }

    /// The two queues' push and pop, for one benchmark loop.
    trait Queue {
        fn put(&mut self, cycle: u64, class: u8, ev: u32);
        fn take(&mut self) -> (u64, u32);
    }

    impl Queue for TimingWheel<'_, u32> {
        fn put(&mut self, cycle: u64, class: u8, ev: u32) {
            let _ = self.push(cycle, class, ev);
        }
        fn take(&mut self) -> (u64, u32) {
            let e = self.pop().unwrap();
            (e.cycle, e.event)
        }
    }

    impl Queue for EventQueue<'_, u32> {
        fn put(&mut self, cycle: u64, class: u8, ev: u32) {
            let _ = self.push(cycle, class, ev);
        }
        fn take(&mut self) -> (u64, u32) {
            let e = self.pop().unwrap();
            (e.cycle, e.event)
        }
    }

    /// Steady state: pop the earliest event, push one at its cycle plus a
    /// latency (`far` per mille beyond 4096 cycles). Returns ns per
    /// push+pop pair and a checksum.
    fn steady(q: &mut impl Queue, n: usize, in_flight: usize, far: u64) -> (f64, u64) {
        let mut rng = XorShift(0x1234_5678);
        for i in 0..in_flight {
            q.put(latency(&mut rng, far), (i & 1) as u8, i as u32);
        }
        let t = ::std::time::Instant::now();
        let mut sum = 0u64;
        for i in 0..n {
            let (cycle, ev) = q.take();
            sum = sum.wrapping_add(cycle ^ ev as u64);
            q.put(cycle + latency(&mut rng, far), (i & 1) as u8, ev);
        }
        let ns = t.elapsed().as_nanos() as f64 / n as f64;
        (ns, ::std::hint::black_box(sum))
    }

    fn bench_wheel(n: usize, in_flight: usize, far: u64) -> (f64, u64) {
        let mut buf = wheel_buf(in_flight, 12);
        let mut a = Arena::new(&mut buf);
        let mut q =
            TimingWheel::<u32>::new_in(&mut a, in_flight, 12, Capacity::EventQueue).unwrap();
        steady(&mut q, n, in_flight, far)
    }

    fn bench_heap(n: usize, in_flight: usize, far: u64) -> (f64, u64) {
        let mut store = vec![filler(); in_flight];
        steady(&mut EventQueue::new(&mut store), n, in_flight, far)
    }

    /// L2-like latencies 100..=900 cycles; `far` per mille 4096..=20000.
    fn latency(rng: &mut XorShift, far: u64) -> u64 {
        if rng.below(1000) < far {
            4096 + rng.below(16_000)
        } else {
            100 + rng.below(800)
        }
    }

    /// `cargo test --release -p simfa-core wheel::tests::bench -- --ignored --nocapture`
    #[test]
    #[ignore]
    fn bench_push_pop_1m_30k_in_flight() {
        let n = 1_000_000;
        let k = 30_000;
        for far in [0, 10, 100] {
            // Warm up, then measure.
            let _ = (bench_wheel(n / 10, k, far), bench_heap(n / 10, k, far));
            let (w, ws) = bench_wheel(n, k, far);
            let (h, hs) = bench_heap(n, k, far);
            assert_eq!(ws, hs, "same pops in the same order");
            ::std::println!(
                "push+pop, {k} in flight, {far}/1000 beyond horizon: TimingWheel {w:.1} ns/op, EventQueue {h:.1} ns/op ({:.1}x)",
                h / w
            );
        }
    }
}
