//! The three read-after-transfer conditions, defined once.
//!
//! Every checker in simfa that judges a read against the transfers that
//! should have caused it uses these functions: [`ConsistencyChecker`]
//! (simfa's own `--check`, on L2 lines) and the SCALE-Sim trace checker
//! ([`crate::scalesim`], on scratchpad words). For one read of one address
//! (the background note's definitions, `shared/reference/read-trace-consistency-note.txt`):
//!
//! 1. **a transfer exists** for the address, else
//!    [`ViolationKind::NoTransfer`];
//! 2. **t_complete <= t_return**: the earliest recorded completion of a
//!    transfer of the address is no later than the cycle the read returned,
//!    else [`ViolationKind::BeforeTransfer`];
//! 3. **t_arrival + L_hit <= t_return** where a hit latency applies: the read
//!    returned no sooner than the hit latency after the later of its lookup
//!    (the request's arrival) and its data's arrival, else
//!    [`ViolationKind::HitTooSoon`].
//!
//! The conditions are checked in that order and the first that fails names
//! the violation. Time is any [`Time`]: simfa's cycles are `u64`; SCALE-Sim
//! writes its cold-start prefetches at negative cycles, so its checker uses
//! `i64`. Adding the hit latency saturates, so hostile cycles near the end of
//! the range cannot overflow.
//!
//! ```
//! use simfa_std::check::rules::classify_read;
//! use simfa_std::check::ViolationKind;
//!
//! // Data landed at 10, the read looked up at 12 and returned at 13 with a
//! // 1-cycle hit latency: consistent.
//! assert_eq!(classify_read(Some(10u64), 12, 13, Some(1)), None);
//! // No transfer at all.
//! assert_eq!(classify_read(None, 12u64, 13, Some(1)), Some(ViolationKind::NoTransfer));
//! // Returned at 9, before the transfer completed at 10.
//! assert_eq!(classify_read(Some(10u64), 8, 9, Some(1)), Some(ViolationKind::BeforeTransfer));
//! // Returned at 12, the same cycle it looked up: sooner than the hit latency.
//! assert_eq!(classify_read(Some(10i64), 12, 12, Some(1)), Some(ViolationKind::HitTooSoon));
//! // A miss (no hit latency applies) is only held to conditions 1 and 2.
//! assert_eq!(classify_read(Some(10u64), 12, 12, None), None);
//! ```
//!
//! [`ConsistencyChecker`]: super::ConsistencyChecker

use super::ViolationKind;

/// A cycle count the rules can compare and add a hit latency to.
pub trait Time: Copy + Ord {
    /// `self + latency`, saturating at the type's maximum.
    fn plus(self, latency: u64) -> Self;
}

impl Time for u64 {
    fn plus(self, latency: u64) -> Self {
        self.saturating_add(latency)
    }
}

impl Time for i64 {
    fn plus(self, latency: u64) -> Self {
        self.saturating_add_unsigned(latency)
    }
}

/// Condition 2: the transfer completed at `transfer_done`, no later than
/// the read returned at `served`.
pub fn completed_by<T: Time>(transfer_done: T, served: T) -> bool {
    transfer_done <= served
}

/// Condition 3: a hit looked up at `lookup` on data that arrived at
/// `transfer_done` returned at `served`, no sooner than `hit_latency` after
/// the later of the two.
pub fn hit_latency_respected<T: Time>(
    transfer_done: T,
    lookup: T,
    served: T,
    hit_latency: u64,
) -> bool {
    transfer_done.max(lookup).plus(hit_latency) <= served
}

/// Judges one read: `None` when it is consistent, else the first condition
/// it breaks. `transfer_done` is the earliest completed transfer of the
/// read's address (`None`: no transfer was seen), `lookup` the cycle the read
/// was looked up (its request arrived), `served` the cycle it returned, and
/// `hit_latency` the hit latency where one applies (`None` for a miss, which
/// is served on its own schedule).
pub fn classify_read<T: Time>(
    transfer_done: Option<T>,
    lookup: T,
    served: T,
    hit_latency: Option<u64>,
) -> Option<ViolationKind> {
    // Condition 1: a transfer of the address exists.
    let Some(done) = transfer_done else {
        return Some(ViolationKind::NoTransfer);
    };
    if !completed_by(done, served) {
        return Some(ViolationKind::BeforeTransfer);
    }
    match hit_latency {
        Some(l) if !hit_latency_respected(done, lookup, served, l) => {
            Some(ViolationKind::HitTooSoon)
        }
        _ => None,
    }
}

/// Judges a read that returned at `served` before any transfer of its
/// address was recorded, once the earliest transfer turns up (completing at
/// `transfer_done`): it left before its transfer completed
/// ([`ViolationKind::BeforeTransfer`], condition 2), or it was answered as a
/// hit on data the record did not yet hold ([`ViolationKind::HitTooSoon`]).
pub fn classify_late_transfer<T: Time>(transfer_done: T, served: T) -> ViolationKind {
    if completed_by(transfer_done, served) {
        ViolationKind::HitTooSoon
    } else {
        ViolationKind::BeforeTransfer
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_condition_in_order() {
        // No transfer wins over everything else.
        assert_eq!(
            classify_read::<u64>(None, 0, 0, Some(5)),
            Some(ViolationKind::NoTransfer)
        );
        // Before the transfer, even when the hit latency would also fail.
        assert_eq!(
            classify_read(Some(10u64), 9, 9, Some(5)),
            Some(ViolationKind::BeforeTransfer)
        );
        // Exactly at the boundaries: consistent.
        assert_eq!(classify_read(Some(10u64), 10, 10, None), None);
        assert_eq!(classify_read(Some(10u64), 10, 15, Some(5)), None);
        assert_eq!(
            classify_read(Some(10u64), 10, 14, Some(5)),
            Some(ViolationKind::HitTooSoon)
        );
        // The later of lookup and arrival counts.
        assert_eq!(
            classify_read(Some(10u64), 20, 24, Some(5)),
            Some(ViolationKind::HitTooSoon)
        );
        assert_eq!(classify_read(Some(10u64), 20, 25, Some(5)), None);
    }

    #[test]
    fn negative_cycles_and_saturation() {
        assert_eq!(classify_read(Some(-128i64), 0, 1, Some(1)), None);
        assert_eq!(
            classify_read(Some(i64::MAX), i64::MAX, i64::MAX, Some(1)),
            None,
            "saturates instead of overflowing"
        );
        assert_eq!(
            classify_read(Some(u64::MAX - 1), 0, u64::MAX - 1, Some(3)),
            Some(ViolationKind::HitTooSoon)
        );
    }

    #[test]
    fn late_transfer() {
        assert_eq!(
            classify_late_transfer(10u64, 9),
            ViolationKind::BeforeTransfer
        );
        assert_eq!(classify_late_transfer(10u64, 10), ViolationKind::HitTooSoon);
    }
}
