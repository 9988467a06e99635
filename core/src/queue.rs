//! The fixed-capacity event queue shared by every engine (the paper's
//! asynchronous event queue, AEQ).
//!
//! # Ordering guarantee
//!
//! Events are delivered in ascending order of the key `(cycle, class,
//! sequence)`:
//! - `cycle`: the simulated cycle at which the event fires;
//! - `class`: a small integer fixed per event kind, so that at one cycle,
//!   for example, memory completions are applied before thread wake-ups;
//! - `sequence`: a counter the queue assigns at insertion, so events of the
//!   same cycle and class come out first-in first-out.
//!
//! The key is unique, so the order is total and never depends on addresses,
//! hash seeds or the heap's internal layout. Storage is a caller-provided
//! slice; pushing into a full queue hands the event back.

use serde::{Deserialize, Serialize};

/// One queued event with its ordering key.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Entry<E> {
    /// Cycle at which the event fires.
    pub cycle: u64,
    /// Ordering class among events of the same cycle (lower first).
    pub class: u8,
    /// Insertion sequence number (FIFO among equal cycle and class).
    pub seq: u64,
    /// The payload.
    pub event: E,
}

impl<E> Entry<E> {
    fn key(&self) -> (u64, u8, u64) {
        (self.cycle, self.class, self.seq)
    }
}

/// A binary min-heap of [`Entry`] over borrowed storage.
#[derive(Debug)]
pub struct EventQueue<'a, E> {
    heap: &'a mut [Entry<E>],
    len: usize,
    next_seq: u64,
}

impl<'a, E: Copy> EventQueue<'a, E> {
    /// Creates an empty queue whose capacity is `storage.len()`.
    pub fn new(storage: &'a mut [Entry<E>]) -> Self {
        EventQueue {
            heap: storage,
            len: 0,
            next_seq: 0,
        }
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
        self.heap.len()
    }

    /// The next sequence number that will be assigned.
    pub const fn next_seq(&self) -> u64 {
        self.next_seq
    }

    /// Queues `event` at `cycle` with ordering `class`. Returns the event
    /// back when the queue is full.
    pub fn push(&mut self, cycle: u64, class: u8, event: E) -> Result<(), E> {
        if self.len == self.heap.len() {
            return Err(event);
        }
        let entry = Entry {
            cycle,
            class,
            seq: self.next_seq,
            event,
        };
        self.next_seq += 1;
        let mut i = self.len;
        self.heap[i] = entry;
        self.len += 1;
        while i > 0 {
            let parent = (i - 1) / 2;
            if self.heap[parent].key() <= self.heap[i].key() {
                break;
            }
            self.heap.swap(parent, i);
            i = parent;
        }
        Ok(())
    }

    /// The earliest entry, if any.
    pub fn peek(&self) -> Option<&Entry<E>> {
        if self.len == 0 {
            None
        } else {
            Some(&self.heap[0])
        }
    }

    /// The cycle of the earliest entry, if any.
    pub fn next_cycle(&self) -> Option<u64> {
        self.peek().map(|e| e.cycle)
    }

    /// Removes and returns the earliest entry.
    pub fn pop(&mut self) -> Option<Entry<E>> {
        if self.len == 0 {
            return None;
        }
        self.len -= 1;
        self.heap.swap(0, self.len);
        let top = self.heap[self.len];
        let n = self.len;
        let mut i = 0;
        loop {
            let l = 2 * i + 1;
            if l >= n {
                break;
            }
            let r = l + 1;
            let c = if r < n && self.heap[r].key() < self.heap[l].key() {
                r
            } else {
                l
            };
            if self.heap[i].key() <= self.heap[c].key() {
                break;
            }
            self.heap.swap(i, c);
            i = c;
        }
        Some(top)
    }

    /// Removes and returns the earliest entry if it fires at or before `cycle`.
    pub fn pop_due(&mut self, cycle: u64) -> Option<Entry<E>> {
        match self.peek() {
            Some(e) if e.cycle <= cycle => self.pop(),
            _ => None,
        }
    }

    /// The queued entries, in storage (not firing) order.
    pub fn entries(&self) -> &[Entry<E>] {
        &self.heap[..self.len]
    }
}

impl<E: Copy + Serialize + serde::de::DeserializeOwned> EventQueue<'_, E> {
    /// Writes the queue's state (its storage, length and sequence counter).
    pub(crate) fn save_state(
        &self,
        w: &mut crate::codec::Writer<'_>,
    ) -> Result<(), crate::codec::SnapshotError> {
        w.val(&(self.len as u64))?;
        w.val(&self.next_seq)?;
        w.slice(self.heap)
    }

    /// Overwrites the queue's state from a snapshot.
    pub(crate) fn load_state(
        &mut self,
        r: &mut crate::codec::Reader<'_>,
    ) -> Result<(), crate::codec::SnapshotError> {
        self.len = r.at_most(self.heap.len(), "event queue length")?;
        self.next_seq = r.val()?;
        r.slice(self.heap)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn filler() -> Entry<u32> {
        Entry {
            cycle: 0,
            class: 0,
            seq: 0,
            event: 0,
        }
    }

    #[test]
    fn full_queue_hands_the_event_back() {
        let mut s = [filler(); 2];
        let mut q = EventQueue::new(&mut s);
        q.push(1, 0, 10).unwrap();
        q.push(1, 0, 11).unwrap();
        assert_eq!(q.push(0, 0, 12), Err(12));
    }

    #[test]
    fn ties_are_fifo_and_class_orders_within_a_cycle() {
        let mut s = [filler(); 8];
        let mut q = EventQueue::new(&mut s);
        q.push(5, 1, 1).unwrap();
        q.push(5, 0, 2).unwrap();
        q.push(5, 1, 3).unwrap();
        q.push(4, 9, 4).unwrap();
        let order: [u32; 4] = core::array::from_fn(|_| q.pop().unwrap().event);
        assert_eq!(order, [4, 2, 1, 3]);
    }

    proptest! {
        /// The heap agrees with a sorted list under random pushes and pops.
        #[test]
        fn matches_sorted_reference(ops in proptest::collection::vec((0u64..20, 0u8..3, any::<bool>()), 0..200)) {
            let mut s = [filler(); 64];
            let mut q = EventQueue::new(&mut s);
            let mut reference: Vec<(u64, u8, u64, u32)> = Vec::new();
            let mut seq = 0u64;
            for (i, (cycle, class, pop)) in ops.into_iter().enumerate() {
                if pop {
                    reference.sort();
                    let want = if reference.is_empty() { None } else { Some(reference.remove(0)) };
                    let got = q.pop().map(|e| (e.cycle, e.class, e.seq, e.event));
                    prop_assert_eq!(got, want);
                } else if q.push(cycle, class, i as u32).is_ok() {
                    reference.push((cycle, class, seq, i as u32));
                    seq += 1;
                } else {
                    prop_assert_eq!(reference.len(), 64);
                }
            }
        }
    }
}
