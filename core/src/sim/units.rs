//! The SM's shared SIMT execution units and how they share the SM with the
//! tensor pipe: the timing of `compute` instructions.
//!
//! # What is shared
//!
//! A `compute` instruction carries one WarpGroup's non-MMA operations per
//! unit class ([`Work`]). Its phases run one after the other in the order
//! of [`UnitClass::ALL`] (FP32, MUFU, FP16, INT), each on its class of
//! unit, which belongs to the SM, not to the WarpGroup:
//!
//! 1. **Units.** A class delivers `units.<class>` operations per cycle per
//!    SM (MUFU 16, FP32 128, FP16 256, INT 64 on Hopper), split evenly
//!    between the WarpGroups whose current phase uses it. Two WarpGroups
//!    exponentiating at once each get 8 MUFU results per cycle.
//! 2. **Issue.** Every operation is issued as part of a warp instruction
//!    (32 lanes, 64 results for packed FP16) by one of the four
//!    sub-partitions' schedulers, which issue `units.issue` = 4 warp
//!    instructions per cycle per SM between them. When the active classes
//!    would together need more, every phase slows by the same factor.
//! 3. **The tensor pipe.** A WGMMA with FP32 accumulators reads and writes
//!    its accumulator in the register file: at the N/2 law that is one
//!    warp-register per cycle on every sub-partition, the same register
//!    file ports that SIMT instructions read their operands from and write
//!    their results to (Blackwell moved the accumulators into tensor memory
//!    for this reason). While the SM's tensor pipe is busy, it takes
//!    `units.rf_share` times its accumulator traffic
//!    ([`GpuConfig::tensor_rf_traffic`], 1 on the H100, 40/79 on the H20's
//!    slower pipe) of the issue bandwidth of step 2. The tensor pipe is
//!    never slowed; SIMT work is.
//!
//! This is the mechanism behind FlashAttention-3's measured 66.8% of peak on
//! the H100 at head dim 128: a consumer's softmax does overlap the other
//! consumer's GEMMs, but at a fraction of its solo speed. `rf_share` is its
//! one parameter, the same on every Hopper GPU.
//!
//! # Exact arithmetic
//!
//! Work is tracked in fixed point ([`FRAC`] fractional bits) and rates are
//! rounded down to it; a phase completes at the first cycle its work is
//! done (rounded up). Rates change only at *change points*: a phase starting
//! or ending on the SM, and the tensor pipe starting or draining. At each
//! change point the SM's active phases are *settled* (charged for the
//! cycles since the last one) and the next change point becomes the SM's
//! deadline ([`super::deadlines`]). Nothing is floating point; the same
//! inputs give the same cycles everywhere.
//!
//! An uncontended phase of `ops` operations on a class of rate `R` takes
//! `ceil(ops / R)` cycles, so a WarpGroup alone on its SM runs the paper's
//! 64 x 176 softmax (22528 FP32, 11264 MUFU, 11264 FP16 operations) in
//! 176 + 704 + 44 cycles.

use super::deadlines::NONE;
use super::state::TState;
use super::Simulator;
use crate::config::GpuConfig;
use crate::error::SimError;
use crate::isa::{UnitClass, Work};
use crate::observer::{Event, Observer};
use crate::source::StreamSource;

/// Fractional bits of the work and rate fixed point.
pub(crate) const FRAC: u32 = 16;

/// Classes of [`UnitClass::ALL`], as indices.
pub(crate) const CLASSES: usize = 4;

/// The scaled work of each phase of `w`, in phase order.
pub(crate) fn scaled(w: &Work) -> [u64; CLASSES] {
    let mut out = [0u64; CLASSES];
    for (i, c) in UnitClass::ALL.iter().enumerate() {
        out[i] = (w.get(*c) as u64) << FRAC;
    }
    out
}

/// The index of the first phase with work left, if any.
pub(crate) fn current(work: &[u64; CLASSES]) -> Option<usize> {
    work.iter().position(|&w| w != 0)
}

/// Rates of the SM's unit classes, in scaled operations per cycle per
/// phase, for `n[c]` active phases of class `c`, with the tensor pipe busy
/// or not.
pub(crate) fn rates(cfg: &GpuConfig, n: &[u8; CLASSES], busy: bool) -> [u64; CLASSES] {
    let u = &cfg.units;
    // Issue demand of the active classes, in 64ths of a warp instruction
    // per cycle: R_c / w_c = R_c * (64 / w_c) / 64.
    let mut demand: u128 = 0;
    for (i, c) in UnitClass::ALL.iter().enumerate() {
        if n[i] > 0 {
            demand += u.rate(*c) as u128 * (64 / c.ops_per_warp_instr()) as u128;
        }
    }
    // Issue capacity, in the same 64ths, as num / den: issue * 64 * (1 -
    // share * traffic) when the tensor pipe is busy.
    let (mut cap_num, mut cap_den) = (u.issue as u128 * 64, 1u128);
    if busy {
        let t = cfg.tensor_rf_traffic();
        let s = u.rf_share;
        let den = s.den as u128 * t.den as u128;
        let taken = (s.num as u128 * t.num as u128).min(den);
        cap_num *= den - taken;
        cap_den = den;
    }
    let mut out = [0u64; CLASSES];
    for (i, c) in UnitClass::ALL.iter().enumerate() {
        if n[i] == 0 {
            continue;
        }
        let share = ((u.rate(*c) as u128) << FRAC) / n[i] as u128;
        // Throttle by min(1, capacity / demand).
        let r = if cap_num >= demand * cap_den {
            share
        } else {
            share * cap_num / (demand * cap_den)
        };
        out[i] = r.min(u64::MAX as u128) as u64;
    }
    out
}

/// Keys [`RateMemo`] holds (a power of two).
const MEMO: usize = 64;

/// The [`rates`] of the last few mixes of active phases (with the tensor
/// pipe busy or not) the run asked for: they depend only on the mix and
/// the configuration, and an SM's mix changes far less often than its
/// units are settled, so most asks find them here.
#[derive(Clone, Debug)]
pub(crate) struct RateMemo {
    /// The mix's phase counts, one byte per class, and bit 32 for a busy
    /// tensor pipe; `u64::MAX` for an empty entry.
    keys: [u64; MEMO],
    vals: [[u64; CLASSES]; MEMO],
}

impl RateMemo {
    /// An empty memo.
    pub(crate) const fn new() -> Self {
        RateMemo {
            keys: [u64::MAX; MEMO],
            vals: [[0; CLASSES]; MEMO],
        }
    }

    /// `rates(cfg, n, busy)`, from the memo when it holds them (`cfg` must
    /// be the run's, the same at every call).
    #[inline]
    pub(crate) fn get(&mut self, cfg: &GpuConfig, n: &[u8; CLASSES], busy: bool) -> [u64; CLASSES] {
        let key = n.iter().fold(busy as u64, |k, &c| k << 8 | c as u64);
        // Fibonacci hashing: the mixes in use (a few small counts) land
        // on distinct slots far more often than with a fold of the bytes.
        let slot =
            (key.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> (64 - MEMO.trailing_zeros())) as usize;
        if self.keys[slot] != key {
            self.keys[slot] = key;
            self.vals[slot] = rates(cfg, n, busy);
        }
        self.vals[slot]
    }
}

impl<S: StreamSource> Simulator<'_, S> {
    /// Threads of SM `sm`, as a range of thread indices.
    fn sm_threads(&self, sm: usize) -> core::ops::Range<usize> {
        let per = self.plan.cta_slots * self.plan.wgs;
        sm * per..(sm + 1) * per
    }

    /// True when SM `sm`'s tensor pipe is busy at cycle `t`.
    fn tensor_busy(&self, sm: usize, t: u64) -> bool {
        t < self.sms[sm].pipe_free
    }

    /// Charges SM `sm`'s active phases for the cycles up to `t`.
    pub(super) fn settle_units(&mut self, sm: usize, t: u64) {
        let last = self.sms[sm].unit_last;
        self.sms[sm].unit_last = t.max(last);
        if t <= last || self.sms[sm].unit_n == [0; CLASSES] {
            return;
        }
        let n = self.sms[sm].unit_n;
        let pipe_free = self.sms[sm].pipe_free;
        // At most two pieces: busy until the pipe drains, then idle.
        let split = pipe_free.clamp(last, t);
        let pieces = [(split - last, true), (t - split, false)];
        for (len, busy) in pieces {
            if len == 0 {
                continue;
            }
            let r = self.rate_memo.get(&self.cfg, &n, busy);
            for ti in self.sm_threads(sm) {
                let th = &mut self.threads[ti];
                if th.state != TState::Computing {
                    continue;
                }
                let c = th.unit_phase as usize;
                if c < CLASSES {
                    let done = (r[c] as u128 * len as u128).min(th.work[c] as u128) as u64;
                    th.work[c] -= done;
                }
            }
        }
    }

    /// The next change point of SM `sm` after `t`, or [`NONE`].
    fn next_change(&mut self, sm: usize, t: u64) -> u64 {
        let n = self.sms[sm].unit_n;
        if n == [0; CLASSES] {
            return NONE;
        }
        let busy = self.tensor_busy(sm, t);
        let r = self.rate_memo.get(&self.cfg, &n, busy);
        let s = &self.sms[sm];
        let mut next = if busy { s.pipe_free } else { NONE };
        for ti in self.sm_threads(sm) {
            let th = &self.threads[ti];
            if th.state != TState::Computing {
                continue;
            }
            let c = th.unit_phase as usize;
            if c < CLASSES && r[c] > 0 {
                next = next.min(t.saturating_add(th.work[c].div_ceil(r[c])));
            }
        }
        next
    }

    /// Sets SM `sm`'s deadline to its next change point after now.
    pub(super) fn reschedule_units(&mut self, sm: usize) {
        let at = self.next_change(sm, self.now);
        self.deadlines.set(sm, at);
    }

    /// Starts `work` for thread `ti` now. Returns false when there is
    /// nothing to do.
    pub(super) fn start_compute(&mut self, ti: usize, work: &Work) -> bool {
        let w = scaled(work);
        let Some(c) = current(&w) else {
            return false;
        };
        let sm = self.threads[ti].sm as usize;
        self.settle_units(sm, self.now);
        self.threads[ti].work = w;
        self.threads[ti].unit_phase = c as u8;
        self.sms[sm].unit_n[c] += 1;
        true
    }

    /// Called before SM `sm`'s tensor pipe takes a WGMMA now; returns
    /// whether its phases must be rescheduled once it has
    /// ([`Simulator::after_wgmma`]).
    ///
    /// With the pipe already busy and the SM's next change point a phase
    /// ending before the pipe drains, nothing changes now: the rates stay
    /// the busy ones, and so do the phases' ending cycles (settling is
    /// additive until a phase ends: `t + ceil(w / r)` is the same from any
    /// cycle before that), so the deadline stands; only the drain moves,
    /// later. Settling and rescheduling are skipped then.
    pub(super) fn before_wgmma(&mut self, sm: usize) -> bool {
        let s = &self.sms[sm];
        if s.unit_n == [0; CLASSES] {
            return false;
        }
        if self.now < s.pipe_free && self.deadlines.keys[sm] < s.pipe_free {
            return false;
        }
        self.settle_units(sm, self.now);
        true
    }

    /// Called after SM `sm`'s tensor pipe took a WGMMA, with what
    /// [`Simulator::before_wgmma`] said.
    pub(super) fn after_wgmma(&mut self, sm: usize, changed: bool) {
        if changed {
            self.reschedule_units(sm);
        }
    }

    /// SM `sm`'s deadline is due: settles its phases, moves finished ones
    /// on to their next phase or wakes their WarpGroups, and sets the next
    /// deadline.
    pub(super) fn fire_units(
        &mut self,
        sm: usize,
        obs: &mut impl Observer,
    ) -> Result<(), SimError> {
        let now = self.now;
        self.settle_units(sm, now);
        for ti in self.sm_threads(sm) {
            let th = &self.threads[ti];
            if th.state != TState::Computing {
                continue;
            }
            let c = th.unit_phase as usize;
            if c >= CLASSES {
                return Err(SimError::Inconsistent {
                    what: "compute phase",
                    cycle: now,
                });
            }
            if th.work[c] != 0 {
                continue;
            }
            let n = self.less(self.sms[sm].unit_n[c], "compute phases")?;
            self.sms[sm].unit_n[c] = n;
            let next = current(&self.threads[ti].work);
            let th = &mut self.threads[ti];
            th.unit_phase = next.map_or(u8::MAX, |i| i as u8);
            match next {
                Some(c2) => self.sms[sm].unit_n[c2] += 1,
                None => {
                    let since = self.threads[ti].since;
                    self.stats.compute_cycles += now - since;
                    self.make_ready(ti);
                    let who = self.who(ti);
                    self.emit(obs, Event::Wake { who });
                }
            }
        }
        self.reschedule_units(sm);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::time::Ratio;

    fn cfg() -> GpuConfig {
        let mut c = GpuConfig::h800();
        c.units.rf_share = Ratio::new(3, 4);
        c
    }

    #[test]
    fn a_class_is_split_evenly_between_its_phases() {
        let c = cfg();
        let one = rates(&c, &[0, 1, 0, 0], false);
        assert_eq!(one[1], 16 << FRAC);
        let two = rates(&c, &[0, 2, 0, 0], false);
        assert_eq!(two[1], 8 << FRAC);
    }

    #[test]
    fn issue_bandwidth_throttles_every_class_alike() {
        let c = cfg();
        // FP32 (4 warp instructions per cycle) alone fills the issue slots.
        assert_eq!(rates(&c, &[1, 0, 0, 0], false)[0], 128 << FRAC);
        // FP32 and MUFU together would need 4.5: both slow by 8/9.
        let r = rates(&c, &[1, 1, 0, 0], false);
        assert_eq!(r[0], ((128u64 << FRAC) * 8) / 9);
        assert_eq!(r[1], ((16u64 << FRAC) * 8) / 9);
    }

    #[test]
    fn a_busy_tensor_pipe_takes_its_share_of_issue() {
        let c = cfg();
        // With 3/4 of issue taken, FP32 gets 1 of 4 warp instructions.
        assert_eq!(rates(&c, &[1, 0, 0, 0], true)[0], 32 << FRAC);
        // MUFU needs only half a warp instruction per cycle: unaffected.
        assert_eq!(rates(&c, &[0, 1, 0, 0], true)[1], 16 << FRAC);
        // The H20's pipe moves its accumulators 40/79 as often as the
        // H100's: it takes 3/4 * 40/158 of issue.
        let mut h20 = GpuConfig::h20();
        h20.units.rf_share = Ratio::new(3, 4);
        let free = 4 * 158 - 3 * 40; // in 158ths of one warp instruction
        assert_eq!(
            rates(&h20, &[1, 0, 0, 0], true)[0],
            ((128u64 << FRAC) * free) / (4 * 158)
        );
    }
}
