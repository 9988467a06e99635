//! Operations handed over in the same cycle, timed in turns.
//!
//! The simulator hands the transaction model all the TMA operations its
//! SMs issue in one cycle at once ([`TxnMemory::transfer_batch`]). Timed
//! one after the other, the first operation's lines would take the first
//! free slot of every shared resource (slice ports, MSHRs, DRAM banks and
//! buses) before the second's were looked at: when every SM loads at once,
//! as all CTAs of a wave do in their prologue, the SMs would be served in
//! SM order and the last SM would start its work thousands of cycles after
//! the first. The line-level engines instead emit their lines side by
//! side, one per cycle each, and the slices and the DRAM serve them in
//! arrival order.
//!
//! So the operations of a batch take turns, a chunk at a time: the turn
//! goes to the chunk whose first line leaves its engine earliest (ties to
//! the lower SM, then to the operation handed over first). An SM's
//! operations stay in issue order: its next one starts when the previous
//! one's chunks are all timed. An operation whose box repeats lines out of
//! order goes through the model's one dedup set, so it is timed whole at
//! its first turn. A batch of one operation is [`TxnMemory::transfer`].

use super::gen::{Lines, Patterns};
use super::{Engine, Model, TxnDone, TxnMemory, TxnOp, TxnSink};
use crate::arena::{Arena, Layout};
use crate::error::{BuildError, Capacity};

/// One SM's operations of a batch, being timed.
#[derive(Clone, Copy, Debug)]
pub(super) struct Turn {
    /// The chunks left of the current operation.
    pats: Patterns,
    /// The SM's engine, carried from operation to operation.
    eng: Engine,
    /// The latest return of the current operation's lines so far.
    done: u64,
    /// With the arrival-order controller: when the current operation's
    /// lines the controller does not time are back.
    indep: u64,
    /// The current operation (an index into the batch) and one past the
    /// SM's last.
    op: u32,
    end: u32,
}

impl Turn {
    fn empty() -> Turn {
        Turn {
            pats: Patterns::new(Lines::Bulk { next: 0, left: 0 }, 1),
            eng: Engine::default(),
            done: 0,
            indep: 0,
            op: 0,
            end: 0,
        }
    }
}

/// The turns of a batch: one per SM that handed an operation over, and
/// a binary min-heap of them by (next emission cycle, turn).
pub(super) struct Turns<'a> {
    turns: &'a mut [Turn],
    heap: &'a mut [(u64, u32)],
}

impl<'a> Turns<'a> {
    /// Accounts for the tables of `sms` SMs.
    pub(super) fn layout(sms: usize, l: &mut Layout) -> Result<(), BuildError> {
        l.add::<Turn>(sms)?;
        l.add::<(u64, u32)>(sms)
    }

    /// The tables for `sms` SMs.
    pub(super) fn new_in(sms: usize, a: &mut Arena<'a>) -> Result<Self, BuildError> {
        Ok(Turns {
            turns: a.alloc(sms, Turn::empty(), Capacity::MemoryPort)?,
            heap: a.alloc(sms, (0u64, 0u32), Capacity::MemoryPort)?,
        })
    }
}

/// Restores the heap order of `h[..n]` below position `i`.
fn sift_down(h: &mut [(u64, u32)], n: usize, mut i: usize) {
    loop {
        let (l, r) = (2 * i + 1, 2 * i + 2);
        let mut m = i;
        if l < n && h[l] < h[m] {
            m = l;
        }
        if r < n && h[r] < h[m] {
            m = r;
        }
        if m == i {
            return;
        }
        h.swap(i, m);
        i = m;
    }
}

impl TxnMemory<'_> {
    /// Times operations `ops`, handed over together in the simulator's
    /// current cycle (all with the same `now`; an SM's in issue order),
    /// in turns (a chunk at a time, the earliest-leaving chunk first), and calls
    /// `out(i, done)` for each as its last chunk is timed. The simulator
    /// hands them over in SM order; where the SM does not rise from one
    /// operation to the next (an SM's operations not handed over
    /// together), the rest take their turns in a later round, so that no
    /// SM has two turns at once. An SM beyond the model's counts as its
    /// last.
    pub fn transfer_batch(
        &mut self,
        ops: &[TxnOp<'_>],
        sink: &mut impl TxnSink,
        mut out: impl FnMut(usize, TxnDone),
    ) {
        let Some(first) = ops.first() else {
            return;
        };
        let TxnMemory { dedup, m, turns } = self;
        let sms = m.engines.len();
        if sms == 0 {
            for (i, op) in ops.iter().enumerate() {
                out(
                    i,
                    TxnDone {
                        done: op.start,
                        lines: 0,
                    },
                );
            }
            return;
        }
        if let Some(arr) = &mut m.arrival {
            // Requests handed over from now on reach the DRAM at `now +
            // xbar_latency` or later: those before are all known.
            arr.serve_until(first.now + m.l2.xbar_latency as u64);
        }
        let sm_of = |op: &TxnOp<'_>| (op.sm as usize).min(sms - 1);
        // One turn per run of operations of one SM; a round's runs have
        // rising SMs (so at most `sms` of them, one per turn).
        let mut start = 0usize;
        while start < ops.len() {
            let mut n = 0usize;
            let mut i = start;
            while i < ops.len() && (n == 0 || sm_of(&ops[i]) > sm_of(&ops[i - 1])) {
                let mut j = i + 1;
                while j < ops.len() && sm_of(&ops[j]) == sm_of(&ops[i]) {
                    j += 1;
                }
                let t = &mut turns.turns[n];
                t.eng = m.engines[sm_of(&ops[i])];
                t.op = i as u32;
                t.end = j as u32;
                m.begin(&ops[i], t);
                turns.heap[n] = (t.eng.free, n as u32);
                n += 1;
                i = j;
            }
            start = i;
            for k in (0..n / 2).rev() {
                sift_down(turns.heap, n, k);
            }
            let mut live = n;
            while live > 0 {
                let ti = turns.heap[0].1;
                // The turn keeps going while its next chunk comes no later
                // than every other turn's (the heap's top is the least of
                // its two children).
                let next =
                    |h: &[(u64, u32)], i: usize| if i < live { h[i] } else { (u64::MAX, u32::MAX) };
                let bound = next(turns.heap, 1).min(next(turns.heap, 2));
                let t = &mut turns.turns[ti as usize];
                let retired = loop {
                    let op = &ops[t.op as usize];
                    let sm = sm_of(op);
                    // With dedup on every operation is handed the set, but
                    // only one that uses it fills it: that one is timed
                    // whole, the others a chunk per step.
                    let more = if t.pats.uses_set() {
                        while let Some(p) = t.pats.next(m.shift, m.tma.dedup.then_some(&mut *dedup))
                        {
                            m.step(sm, op, &p, t, sink);
                        }
                        dedup.clear();
                        false
                    } else {
                        match t.pats.next(m.shift, m.tma.dedup.then_some(&mut *dedup)) {
                            Some(p) => {
                                m.step(sm, op, &p, t, sink);
                                true
                            }
                            None => false,
                        }
                    };
                    if !more {
                        out(t.op as usize, m.finish(op, t));
                        t.op += 1;
                        if t.op >= t.end {
                            m.engines[sm] = t.eng;
                            break true;
                        }
                        m.begin(&ops[t.op as usize], t);
                    }
                    if (t.eng.free, ti) > bound {
                        break false;
                    }
                };
                if retired {
                    live -= 1;
                    turns.heap[0] = turns.heap[live];
                } else {
                    turns.heap[0].0 = t.eng.free;
                }
                sift_down(turns.heap, live, 0);
            }
        }
    }
}

impl Model<'_> {
    /// Starts timing `op` on turn `t` (whose engine is its SM's).
    fn begin(&mut self, op: &TxnOp<'_>, t: &mut Turn) {
        if let Some(arr) = &mut self.arrival {
            arr.begin(op.id);
        }
        t.eng.slot_at(op.start, self.tma.line_interval);
        t.pats = Patterns::new(Lines::new(&op.shape, op.bytes, self.shift), self.chunk);
        t.done = t.eng.free;
        t.indep = 0;
    }

    /// Times chunk `p` of `op`, SM `sm`'s current operation on turn `t`.
    #[inline]
    fn step(
        &mut self,
        sm: usize,
        op: &TxnOp<'_>,
        p: &super::l2::Pattern,
        t: &mut Turn,
        sink: &mut impl TxnSink,
    ) {
        self.cur_op = op.id;
        self.indep = t.indep;
        t.done = t.done.max(self.chunk(sm, op.store, p, &mut t.eng, sink));
        t.indep = self.indep;
    }

    /// What became of `op`, whose chunks on turn `t` are all timed.
    fn finish(&mut self, op: &TxnOp<'_>, t: &Turn) -> TxnDone {
        // A load whose landing the controller decides: ask first once
        // its untimed parts are back (or at once), then as it says.
        let done = match &mut self.arrival {
            Some(arr) if !op.store => {
                arr.handed_over(op.id, t.indep, t.done);
                t.indep.max(op.now + 1).min(t.done)
            }
            _ => t.done,
        };
        TxnDone {
            done,
            lines: t.pats.n,
        }
    }
}
