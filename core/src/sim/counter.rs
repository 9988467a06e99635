//! The grid's counters ([`crate::Instr::CounterAdd`],
//! [`crate::Instr::CounterWait`]): words in global memory through which
//! CTAs tell each other that their data is out. One CTA adds to a word
//! (`atomicAdd`, `red.release.gpu.global.add`, or an `atomicExch` that sets
//! an unset flag) once its stores have landed; another spins until the
//! word reaches a count (`ld.acquire` or `atomicCAS(p, v, v)` in a loop),
//! as CUTLASS's stream-K fix-up waits for its peers' partial sums and
//! Triton's stream-K GEMM waits on a tile's flag.
//!
//! # Timing
//!
//! - An add reaches the L2 after the crossbar's one-way latency; the word
//!   counts up then and its waiters are woken. The adding WarpGroup goes on
//!   at once. An add issued while an earlier one to the same word is on its
//!   way lands with it, so each word has at most one landing queued.
//! - A wait that finds the count reached goes on after an atomic's round
//!   trip to the L2 ([`crate::GpuConfig::atomic_round_trip`]), the poll
//!   that saw it. One that does not stalls ([`WaitReason::Counter`]), as a
//!   spinning warp makes no progress, until an add lands, and polls again.
//!
//! Words start at 0 and saturate at `u32::MAX`. Waiters are woken in thread
//! order, so a run stays deterministic. The atomics' few bytes are not
//! counted as memory traffic.

use serde::{Deserialize, Serialize};

use super::issue::Outcome;
use super::state::Ev;
use super::Simulator;
use crate::error::SimError;
use crate::kernel::MAX_COUNTERS;
use crate::observer::Observer;
use crate::source::StreamSource;
use crate::wait::WaitReason;

/// Every counter's count, and the adds on their way to it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(super) struct Counters {
    #[serde(with = "super::big_array")]
    count: [u32; MAX_COUNTERS],
    /// The sum of the adds on their way to each word: not 0 exactly when
    /// the word's landing is queued.
    #[serde(with = "super::big_array")]
    pub(super) crossing: [u32; MAX_COUNTERS],
}

impl Default for Counters {
    fn default() -> Self {
        Counters {
            count: [0; MAX_COUNTERS],
            crossing: [0; MAX_COUNTERS],
        }
    }
}

impl Counters {
    /// Whether the words with adds on their way are exactly those `queued`
    /// marks, each once (a restored snapshot's check).
    pub(super) fn crossing_as(&self, queued: &[bool; MAX_COUNTERS]) -> bool {
        self.crossing
            .iter()
            .zip(queued)
            .all(|(&c, &q)| (c != 0) == q)
    }
}

impl<S: StreamSource> Simulator<'_, S> {
    /// `counter.add`: the amount is on its way to the L2.
    pub(super) fn counter_add(
        &mut self,
        ti: usize,
        counter: u16,
        amount: u32,
    ) -> Result<Outcome, SimError> {
        let c = self.bar_index(ti, counter, "counter", MAX_COUNTERS)?;
        if amount > 0 {
            if self.counters.crossing[c] == 0 {
                let at = self.now + self.cfg.atomic_crossing();
                self.push(at, Ev::CounterLand { counter })?;
            }
            self.counters.crossing[c] = self.counters.crossing[c].saturating_add(amount);
        }
        Ok(Outcome::Next)
    }

    /// `counter.wait`: goes on after a poll's round trip once the word has
    /// reached `count`.
    pub(super) fn counter_wait(
        &mut self,
        ti: usize,
        counter: u16,
        count: u32,
    ) -> Result<Outcome, SimError> {
        let c = self.bar_index(ti, counter, "counter", MAX_COUNTERS)?;
        Ok(if self.counters.count[c] >= count {
            Outcome::Sleep(self.now + self.cfg.atomic_round_trip())
        } else {
            Outcome::Stall(WaitReason::Counter { counter })
        })
    }

    /// The adds on their way to `counter` reach the L2: it counts up and
    /// its waiters, on every SM, poll again.
    pub(super) fn counter_land(&mut self, counter: u16, obs: &mut impl Observer) {
        let c = counter as usize;
        let n = core::mem::take(&mut self.counters.crossing[c]);
        self.counters.count[c] = self.counters.count[c].saturating_add(n);
        for sm in 0..self.sms.len() {
            self.wake_sm(sm, obs, |r| r == WaitReason::Counter { counter });
        }
    }
}
