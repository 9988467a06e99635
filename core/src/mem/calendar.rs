//! Reservation calendars: which cycles of a resource are already booked.
//!
//! The transaction-level memory model computes, when a TMA operation is
//! issued, when each of its lines will cross each resource on its way (an
//! L2 slice's input port, an HBM channel's data bus, a bank group's column
//! slots). Operations are handed over in issue order, not in the order
//! their lines reach a resource, so a resource must accept bookings out of
//! time order: a scalar "next free cycle" would make a line that comes
//! early queue behind one booked earlier for later.
//!
//! A [`Calendars`] holds `n` calendars, each a bitmap of `W = 2^horizon`
//! slots (one per cycle) over the window `[base, base + W)`.
//! [`Calendars::reserve`] books the first run of `len` free slots at or
//! after `t`. Slots before `base` count as taken; a booking past the end of
//! the window slides the window forward (the slots it leaves behind are
//! forgotten, and so count as taken).
//!
//! # Exactness
//!
//! - As long as no booking asks for a cycle before `base` (every request
//!   lies within `W - len` of the latest booking so far), the calendar is
//!   exactly the infinite set of booked cycles: whatever the order of the
//!   requests, `reserve` answers what a brute-force set of booked cycles
//!   answers (property-tested below).
//! - Requests in nondecreasing `t` order get `max(t, end of the previous
//!   booking)`: the calendar is then the first-come first-served server of
//!   the line-level model (`next_free = max(t, next_free) + len`).
//! - For unit bookings the final schedule is work-conserving (no slot stays
//!   free while a request that arrived at or before it was given a later
//!   one), so the multiset of booked slots is that of the first-come
//!   first-served server fed the same requests in time order, whatever
//!   order they were booked in: the same makespan and mean wait, individual
//!   bookings permuted.
//! - A request before `base` is booked as if it came at `base`: later than
//!   an unbounded calendar would book it, by at most how far it was late.
//!
//! Every operation is integer-only, allocation-free and bounded: a search
//! scans at most the window's words plus `len` bits before sliding the
//! window, and a slide clears at most the window.

use crate::arena::{Arena, Layout};
use crate::error::{BuildError, Capacity, ConfigError};

/// The smallest accepted horizon: 2^7 slots per calendar (a booking is
/// at most `W - 64` slots long).
pub const MIN_HORIZON_LOG2: u32 = 7;

/// The largest accepted horizon: 2^20 slots per calendar.
pub const MAX_HORIZON_LOG2: u32 = 20;

/// `n` reservation calendars of `2^horizon_log2` slots each, over arena
/// storage. See the [module documentation](self).
#[derive(Debug)]
pub struct Calendars<'a> {
    /// `n * words` bitmap words; slot `s` of calendar `i`, within its
    /// window, is bit `s % 64` of word `(s / 64) % words`, kept at index
    /// `((s / 64) % words) * n + i`. A word that the window leaves behind
    /// is cleared as it slides, for the slots it stands for next.
    words_: &'a mut [u64],
    /// First slot of each calendar's window (a multiple of 64).
    base: &'a mut [u64],
    /// Words per calendar (a power of two).
    words: usize,
    /// Slots per calendar, `64 * words`.
    span: u64,
}

impl<'a> Calendars<'a> {
    fn words_for(horizon_log2: u32) -> Result<usize, BuildError> {
        if !(MIN_HORIZON_LOG2..=MAX_HORIZON_LOG2).contains(&horizon_log2) {
            return Err(BuildError::Config(ConfigError {
                field: "calendar horizon",
                problem: "must be 2^7..=2^20 slots",
            }));
        }
        Ok(1 << (horizon_log2 - 6))
    }

    /// Accounts in `l` for `n` calendars of `2^horizon_log2` slots, exactly
    /// as [`Calendars::new_in`] carves them.
    pub fn layout(n: usize, horizon_log2: u32, l: &mut Layout) -> Result<(), BuildError> {
        let words = Self::words_for(horizon_log2)?;
        l.add::<u64>(n.checked_mul(words).ok_or(BuildError::TooLarge)?)?;
        l.add::<u64>(n)
    }

    /// Carves `n` empty calendars of `2^horizon_log2` slots (in
    /// `MIN_HORIZON_LOG2..=MAX_HORIZON_LOG2`) out of `arena`.
    pub fn new_in(
        arena: &mut Arena<'a>,
        n: usize,
        horizon_log2: u32,
        what: Capacity,
    ) -> Result<Self, BuildError> {
        let words = Self::words_for(horizon_log2)?;
        let total = n.checked_mul(words).ok_or(BuildError::TooLarge)?;
        let w = arena.alloc(total, 0u64, what)?;
        Ok(Calendars {
            words_: w,
            base: arena.alloc(n, 0u64, what)?,
            words,
            span: words as u64 * 64,
        })
    }

    /// Number of calendars.
    pub fn len(&self) -> usize {
        self.base.len()
    }

    /// True when there is no calendar.
    pub fn is_empty(&self) -> bool {
        self.base.is_empty()
    }

    /// Slots per calendar (`W`).
    pub fn horizon(&self) -> u64 {
        self.span
    }

    /// First slot of calendar `i`'s window.
    pub fn base(&self, i: usize) -> u64 {
        self.base[i]
    }

    /// Where word `a` (slot `64a` on) of calendar `i` is kept: word `a %
    /// words` of every calendar side by side, so that the calendars' words
    /// for the same cycles share host cache lines (laid out calendar by
    /// calendar, they would be `words * 8` bytes apart, a power of two,
    /// and all fall in one cache set).
    #[inline(always)]
    fn at(&self, i: usize, a: u64) -> usize {
        (a as usize & (self.words - 1)) * self.base.len() + i
    }

    /// The booked bits of the word holding slot `s` (within the window).
    #[inline]
    fn get(&self, i: usize, s: u64) -> u64 {
        let a = s / 64;
        self.words_[self.at(i, a)]
    }

    /// Books `mask` in the word holding slot `s` (within the window).
    #[inline]
    fn set(&mut self, i: usize, s: u64, mask: u64) {
        let k = self.at(i, s / 64);
        self.words_[k] |= mask;
    }

    /// Whether slot `s` of calendar `i` is booked (or before the window).
    #[inline]
    pub fn is_booked(&self, i: usize, s: u64) -> bool {
        if s < self.base[i] {
            return true;
        }
        if s - self.base[i] >= self.horizon() {
            return false;
        }
        self.get(i, s) >> (s % 64) & 1 != 0
    }

    /// Slides calendar `i`'s window forward so that it ends at or after
    /// `end` (exclusive); the slots left behind count as booked.
    #[inline]
    fn reach(&mut self, i: usize, end: u64) {
        let w = self.horizon();
        let old = self.base[i];
        if end > old + w {
            let new = (end - w).div_ceil(64) * 64;
            self.base[i] = new;
            // The words of the blocks left behind stand for the blocks
            // the window takes in: empty.
            let (from, to) = (old / 64, new / 64);
            let left = (to - from).min(self.words as u64);
            for a in from..from + left {
                let k = self.at(i, a);
                self.words_[k] = 0;
            }
        }
    }

    /// The first slot `s >= t` of calendar `i` such that `[s, s + len)` is
    /// free, sliding the window forward as far as needed to hold the run
    /// (but booking nothing). `len` is clamped to `1..=W - 64`.
    pub fn first_free(&mut self, i: usize, t: u64, len: u32) -> u64 {
        let w = self.horizon();
        let len = (len as u64).clamp(1, w - 64);
        let mut s = t.max(self.base[i]);
        if len <= 64 {
            return self.first_free_short(i, s, len);
        }
        loop {
            // The first free slot at or after `s`.
            loop {
                self.reach(i, s + len);
                let off = s % 64;
                let taken = self.get(i, s) | ((1u64 << off) - 1);
                if taken != u64::MAX {
                    s = s - off + (!taken).trailing_zeros() as u64;
                    break;
                }
                s += 64 - off;
            }
            self.reach(i, s + len);
            // Is [s, s + len) free? The first booked slot in it, if any.
            match self.first_booked(i, s, len) {
                None => return s,
                Some(q) => s = q + 1,
            }
        }
    }

    /// [`Calendars::first_free`] of a run of at most 64 slots, from `s >=
    /// base`: word by word, the starts of free runs found with shifts.
    #[inline]
    fn first_free_short(&mut self, i: usize, mut s: u64, len: u64) -> u64 {
        loop {
            self.reach(i, s + len);
            let off = s % 64;
            let a = s - off;
            // Free slots of this word and the next (beyond the window's
            // end the next word is free).
            let lo = !self.get(i, a) as u128;
            let hi = if a + 64 < self.base[i] + self.horizon() {
                !self.get(i, a + 64) as u128
            } else {
                u64::MAX as u128
            };
            let free = lo | hi << 64;
            // Bit k of `run`: slots k..k+len are all free.
            let mut run = free;
            let mut have = 1u64;
            while have < len {
                let sh = have.min(len - have);
                run &= run >> sh;
                have += sh;
            }
            let starts = (run as u64) & (u64::MAX << off);
            if starts != 0 {
                let p = a + starts.trailing_zeros() as u64;
                if p + len <= self.base[i] + self.horizon() {
                    return p;
                }
                // The run ends past the window: slide and look again.
                s = p;
                continue;
            }
            s = a + 64;
        }
    }

    /// The first booked slot in `[p, p + len)` of calendar `i` (all within
    /// the window), if any.
    #[inline]
    fn first_booked(&self, i: usize, p: u64, len: u64) -> Option<u64> {
        let end = p + len;
        let mut s = p;
        while s < end {
            let off = s % 64;
            let n = (64 - off).min(end - s);
            let mask = if n == 64 {
                u64::MAX
            } else {
                ((1u64 << n) - 1) << off
            };
            let hit = self.get(i, s) & mask;
            if hit != 0 {
                return Some(s - off + hit.trailing_zeros() as u64);
            }
            s += n;
        }
        None
    }

    /// Books `[s, s + len)` of calendar `i` (the part within the window).
    pub fn book(&mut self, i: usize, s: u64, len: u32) {
        let w = self.horizon();
        let len = (len as u64).clamp(1, w - 64);
        let start = s.max(self.base[i]);
        let end = (s + len).min(self.base[i] + w);
        let mut x = start;
        while x < end {
            let off = x % 64;
            let n = (64 - off).min(end - x);
            let mask = if n == 64 {
                u64::MAX
            } else {
                ((1u64 << n) - 1) << off
            };
            self.set(i, x, mask);
            x += n;
        }
    }

    /// Books the first run of `len` free slots of calendar `i` at or after
    /// `t` and returns its first slot.
    #[inline(always)]
    pub fn reserve(&mut self, i: usize, t: u64, len: u32) -> u64 {
        if len <= 1 {
            // A unit booking: the first free slot, found and booked in one
            // pass over the words.
            let b = self.base[i];
            let mut s = if t > b { t } else { b };
            loop {
                if s >= self.base[i] + self.span {
                    self.reach(i, s + 1);
                }
                let off = s % 64;
                let a = s / 64;
                let k = self.at(i, a);
                let word = &mut self.words_[k];
                let taken = *word | ((1u64 << off) - 1);
                if taken != u64::MAX {
                    let b = (!taken).trailing_zeros();
                    *word |= 1 << b;
                    return s - off + b as u64;
                }
                s += 64 - off;
            }
        }
        self.reserve_run(i, t, len)
    }

    /// [`Calendars::reserve`] of more than one slot.
    #[inline(never)]
    fn reserve_run(&mut self, i: usize, t: u64, len: u32) -> u64 {
        let s = self.first_free(i, t, len);
        self.book(i, s, len);
        s
    }

    /// Writes the mutable state into a snapshot.
    pub(crate) fn save_state(
        &self,
        w: &mut crate::codec::Writer<'_>,
    ) -> Result<(), crate::codec::SnapshotError> {
        w.slice(self.base)?;
        w.slice(self.words_)
    }

    /// Overwrites the mutable state from a snapshot.
    pub(crate) fn load_state(
        &mut self,
        r: &mut crate::codec::Reader<'_>,
    ) -> Result<(), crate::codec::SnapshotError> {
        r.slice(self.base)?;
        if self.base.iter().any(|b| b % 64 != 0) {
            return Err(crate::codec::SnapshotError::Corrupt {
                what: "calendar window",
            });
        }
        r.slice(self.words_)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ::std::collections::BTreeSet;
    use proptest::prelude::*;

    fn cal(n: usize, h: u32) -> (Vec<u8>, usize) {
        let mut l = Layout::new();
        Calendars::layout(n, h, &mut l).unwrap();
        (vec![0u8; l.bytes()], n)
    }

    /// The brute-force reference: the set of booked cycles, unbounded.
    #[derive(Default)]
    struct Reference(BTreeSet<u64>);

    impl Reference {
        fn reserve(&mut self, t: u64, len: u64) -> u64 {
            let mut s = t;
            loop {
                match self.0.range(s..s + len).next() {
                    None => {
                        self.0.extend(s..s + len);
                        return s;
                    }
                    Some(&q) => s = q + 1,
                }
            }
        }
    }

    #[test]
    fn in_order_requests_are_first_come_first_served() {
        let (mut buf, _) = cal(1, 7);
        let mut a = Arena::new(&mut buf);
        let mut c = Calendars::new_in(&mut a, 1, 7, Capacity::MemoryPort).unwrap();
        assert_eq!(c.reserve(0, 5, 1), 5);
        assert_eq!(c.reserve(0, 5, 1), 6);
        assert_eq!(c.reserve(0, 5, 3), 7);
        assert_eq!(c.reserve(0, 20, 2), 20);
        // Far past the 128-slot window: it slides.
        assert_eq!(c.reserve(0, 1000, 1), 1000);
        assert!(c.base(0) > 20);
        // Before the window: booked at its start, never earlier.
        let b = c.base(0);
        assert!(c.reserve(0, 3, 1) >= b);
    }

    #[test]
    fn out_of_order_bookings_fill_holes() {
        let (mut buf, _) = cal(2, 8);
        let mut a = Arena::new(&mut buf);
        let mut c = Calendars::new_in(&mut a, 2, 8, Capacity::MemoryPort).unwrap();
        assert_eq!(c.reserve(0, 100, 4), 100);
        // An earlier request is not queued behind the later booking.
        assert_eq!(c.reserve(0, 90, 4), 90);
        assert_eq!(c.reserve(0, 98, 4), 104);
        assert_eq!(c.reserve(0, 94, 4), 94);
        assert_eq!(c.reserve(0, 94, 1), 98);
        // Calendars are independent.
        assert_eq!(c.reserve(1, 100, 4), 100);
        assert!(c.is_booked(0, 100) && !c.is_booked(0, 99) && !c.is_booked(1, 90));
    }

    #[test]
    fn bad_horizons_are_config_errors() {
        let mut l = Layout::new();
        for h in [0, 6, MAX_HORIZON_LOG2 + 1] {
            assert!(matches!(
                Calendars::layout(1, h, &mut l),
                Err(BuildError::Config(_))
            ));
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig {
            cases: ::std::env::var("PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(256),
            ..ProptestConfig::default()
        })]

        /// Within the horizon the calendar is the unbounded set of booked
        /// cycles, whatever the order of the requests.
        #[test]
        fn matches_brute_force_within_the_horizon(
            reqs in proptest::collection::vec((0u64..400, 1u32..6, 0u64..40), 1..300),
        ) {
            // Horizon 2^10: requests drift forward slowly and never reach
            // back more than ~440 + the queue behind the latest booking.
            let (mut buf, _) = cal(1, 10);
            let mut a = Arena::new(&mut buf);
            let mut c = Calendars::new_in(&mut a, 1, 10, Capacity::MemoryPort).unwrap();
            let mut r = Reference::default();
            let mut now = 0u64;
            for (back, len, step) in reqs {
                now += step;
                let t = now.saturating_sub(back);
                let latest = r.0.iter().next_back().copied().unwrap_or(0);
                prop_assume!(latest < t + 1024 - 64 - 6);
                prop_assert_eq!(c.reserve(0, t, len), r.reserve(t, len as u64));
            }
        }

        /// Calendars sharing the table (their words interleaved) stay
        /// independent, and each stays exact as its window slides over
        /// several laps (the words it leaves behind are cleared for reuse).
        #[test]
        fn interleaved_calendars_match_brute_force_over_laps(
            reqs in proptest::collection::vec((0usize..3, 0u64..100, 1u32..4, 0u64..60), 1..400),
        ) {
            let (mut buf, _) = cal(3, 8);
            let mut a = Arena::new(&mut buf);
            let mut c = Calendars::new_in(&mut a, 3, 8, Capacity::MemoryPort).unwrap();
            let mut r: [Reference; 3] = Default::default();
            let mut now = 0u64;
            for (i, back, len, step) in reqs {
                now += step;
                let t = now.saturating_sub(back);
                let latest = r.iter().flat_map(|x| x.0.iter().next_back()).max().copied().unwrap_or(0);
                prop_assume!(latest < t + 256 - 64 - 4);
                prop_assert_eq!(c.reserve(i, t, len), r[i].reserve(t, len as u64));
            }
        }

        /// Nondecreasing requests get `max(t, previous end)`, exactly the
        /// line-level model's `next_free` server, over any horizon.
        #[test]
        fn in_order_streams_equal_the_next_free_server(
            steps in proptest::collection::vec((0u64..30, 1u32..8), 1..500),
            h in 7u32..12,
        ) {
            let (mut buf, _) = cal(1, h);
            let mut a = Arena::new(&mut buf);
            let mut c = Calendars::new_in(&mut a, 1, h, Capacity::MemoryPort).unwrap();
            let (mut t, mut next_free) = (0u64, 0u64);
            for (dt, len) in steps {
                t += dt;
                let len = len.min((1u32 << h) - 64);
                let want = t.max(next_free);
                next_free = want + len as u64;
                prop_assert_eq!(c.reserve(0, t, len), want);
            }
        }

        /// Unit bookings in any order within the horizon book the same
        /// slots, as a multiset, as the first-come first-served server fed
        /// the same requests in time order; each request waits at most
        /// the number of requests booked before it.
        #[test]
        fn unit_bookings_are_work_conserving(
            mut times in proptest::collection::vec(0u64..300, 1..200),
            seed in any::<u64>(),
        ) {
            let (mut buf, _) = cal(1, 12);
            let mut a = Arena::new(&mut buf);
            let mut c = Calendars::new_in(&mut a, 1, 12, Capacity::MemoryPort).unwrap();
            // A deterministic shuffle of the requests.
            let mut x = seed | 1;
            for i in (1..times.len()).rev() {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                times.swap(i, (x % (i as u64 + 1)) as usize);
            }
            let mut got: Vec<u64> = Vec::new();
            for (k, &t) in times.iter().enumerate() {
                let s = c.reserve(0, t, 1);
                prop_assert!(s >= t && s - t <= k as u64);
                got.push(s);
            }
            let mut sorted = times.clone();
            sorted.sort_unstable();
            let mut fcfs = Vec::new();
            let mut free = 0u64;
            for t in sorted {
                let s = t.max(free);
                free = s + 1;
                fcfs.push(s);
            }
            got.sort_unstable();
            prop_assert_eq!(got, fcfs);
        }

        /// Far beyond the horizon: never earlier than asked, never a slot
        /// booked twice within a window, never a panic.
        #[test]
        fn beyond_the_horizon_bookings_stay_sane(
            reqs in proptest::collection::vec((0u64..5000, 1u32..70), 1..300),
        ) {
            let (mut buf, _) = cal(1, 7);
            let mut a = Arena::new(&mut buf);
            let mut c = Calendars::new_in(&mut a, 1, 7, Capacity::MemoryPort).unwrap();
            let mut booked: Vec<(u64, u64)> = Vec::new();
            for (t, len) in reqs {
                let s = c.reserve(0, t, len);
                prop_assert!(s >= t);
                let l = (len as u64).clamp(1, c.horizon() - 64);
                // No overlap with a booking still inside the window.
                let b = c.base(0);
                for &(s0, l0) in &booked {
                    if s0 >= b {
                        prop_assert!(s + l <= s0 || s0 + l0 <= s, "{s}+{l} overlaps {s0}+{l0}");
                    }
                }
                booked.push((s, l));
            }
        }
    }
}
