//! The TMA engines in front of the memory hierarchy: each SM's engine
//! turns its operations, in issue order, into cache-line requests.
//!
//! An operation leaves setup at `start`; from then the engine emits up to
//! `lines_per_cycle` line requests per cycle, removing repeated lines of a
//! box, while fewer than `max_lines` of the SM's requests are in flight. An
//! operation completes when its last line returns (an operation whose box
//! is entirely out of bounds completes when its generation ends).

use crate::mem::lines::LineGen;
use crate::tensor_map::TensorMap;

/// What an operation still has to generate.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub(crate) enum Gen {
    /// A tensor box.
    Tensor(LineGen),
    /// A bulk range: next line address and lines left.
    Bulk { next: u64, left: u64 },
}

/// One TMA operation in flight on an SM.
#[derive(Clone, Copy, Debug, serde::Serialize, serde::Deserialize)]
pub(crate) struct TmaOp {
    pub live: bool,
    /// Operation id (see `Event::TmaIssue`).
    pub id: u32,
    /// Its completion was already signalled (only under `Fault::EarlyTma`):
    /// the slot stays taken until its last line is back, then frees
    /// silently.
    pub signalled: bool,
    pub thread: u32,
    /// mbarrier index, `u16::MAX` for stores.
    pub bar: u16,
    pub store: bool,
    pub bytes: u64,
    /// Cycle its setup ends and generation may start.
    pub start: u64,
    pub gen: Gen,
    pub issued: u32,
    pub done: u32,
    pub generated: bool,
    /// Last line emitted (for adjacent repeats of sorted boxes).
    pub last: Option<u64>,
}

impl TmaOp {
    pub const EMPTY: TmaOp = TmaOp {
        live: false,
        id: 0,
        signalled: false,
        thread: 0,
        bar: 0,
        store: false,
        bytes: 0,
        start: 0,
        gen: Gen::Bulk { next: 0, left: 0 },
        issued: 0,
        done: 0,
        generated: false,
        last: None,
    };

    /// All lines generated and returned.
    pub fn complete(&self) -> bool {
        self.generated && self.issued == self.done
    }
}

/// Per-SM engine state.
#[derive(Clone, Copy, Debug, serde::Serialize, serde::Deserialize)]
pub(crate) struct Engine {
    /// Operation slots in generation order (a ring of slot indices).
    pub order_head: u16,
    pub order_len: u16,
    /// Line requests in flight.
    pub lines_out: u32,
    /// A tick event is queued.
    pub tick_pending: bool,
    /// Waiting for a line to return before emitting more.
    pub blocked: bool,
    /// A line taken from the generator that the memory system refused.
    pub held: Option<u64>,
    /// First cycle of the next emission slot (`tma.line_interval` after
    /// the last slot that emitted a line).
    pub next_slot: u64,
}

impl Engine {
    pub const EMPTY: Engine = Engine {
        order_head: 0,
        order_len: 0,
        lines_out: 0,
        tick_pending: false,
        blocked: false,
        held: None,
        next_slot: 0,
    };
}

/// An SM's set of lines already emitted for the operation being generated:
/// open addressing over a power-of-two slice of `u64` (`u64::MAX` marks an
/// empty slot), with the used slots listed so clearing is O(entries).
pub(crate) struct Dedup<'s> {
    pub slots: &'s mut [u64],
    pub used: &'s mut [u32],
    pub len: &'s mut u32,
}

impl Dedup<'_> {
    /// Slots for a set of `cap` keys (load factor at most 1/2).
    pub fn slots_for(cap: usize) -> usize {
        (cap.max(1) * 2).next_power_of_two()
    }

    /// Inserts `key`: `Some(true)` if new, `Some(false)` if present, `None`
    /// when full.
    pub fn insert(&mut self, key: u64) -> Option<bool> {
        let mask = self.slots.len() - 1;
        let mut i = (key.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 32) as usize & mask;
        loop {
            let s = self.slots[i];
            if s == key {
                return Some(false);
            }
            if s == u64::MAX {
                if *self.len as usize >= self.used.len() {
                    return None;
                }
                self.slots[i] = key;
                self.used[*self.len as usize] = i as u32;
                *self.len += 1;
                return Some(true);
            }
            i = (i + 1) & mask;
        }
    }

    /// Empties the set.
    pub fn clear(&mut self) {
        for &i in self.used[..*self.len as usize].iter() {
            self.slots[i as usize] = u64::MAX;
        }
        *self.len = 0;
    }
}

/// Creates the generator of a tensor operation.
pub(crate) fn tensor_gen(map: &TensorMap, coords: &[i64; 5], line_bytes: u64) -> Gen {
    match LineGen::new(map, coords, line_bytes) {
        Ok(g) => Gen::Tensor(g),
        // A map that cannot be walked (validated kernels never get here)
        // generates nothing.
        Err(_) => Gen::Bulk { next: 0, left: 0 },
    }
}

/// Creates the generator of a bulk operation.
pub(crate) fn bulk_gen(addr: u64, bytes: u64, line_bytes: u64) -> Gen {
    if bytes == 0 {
        return Gen::Bulk { next: 0, left: 0 };
    }
    let first = addr & !(line_bytes - 1);
    let last = addr.saturating_add(bytes - 1) & !(line_bytes - 1);
    Gen::Bulk {
        next: first,
        left: (last - first) / line_bytes + 1,
    }
}

impl TmaOp {
    /// The next line address to request. With `dedup`, repeated lines of a
    /// box are removed: adjacent ones when the box's rows are ascending and
    /// disjoint, any through the set otherwise (a full set lets the
    /// remaining repeats through).
    pub fn next_line(&mut self, line_bytes: u64, mut dedup: Option<&mut Dedup<'_>>) -> Option<u64> {
        loop {
            let (line, sorted) = match &mut self.gen {
                Gen::Bulk { next, left } => {
                    if *left == 0 {
                        return None;
                    }
                    let l = *next;
                    *next = next.wrapping_add(line_bytes);
                    *left -= 1;
                    return Some(l);
                }
                Gen::Tensor(g) => {
                    let sorted = !g.needs_dedup();
                    (g.next()?, sorted)
                }
            };
            let Some(set) = dedup.as_deref_mut() else {
                return Some(line);
            };
            if sorted {
                if self.last.is_some_and(|l| line <= l) {
                    continue;
                }
                self.last = Some(line);
                return Some(line);
            }
            match set.insert(line) {
                Some(false) => continue,
                Some(true) | None => return Some(line),
            }
        }
    }
}
