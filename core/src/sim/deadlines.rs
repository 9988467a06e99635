//! Per-SM deadlines in a tournament tree: the next cycle at which each SM's
//! shared SIMT units change rate (see [`super::units`]), with the earliest
//! of them found in constant time and any one moved, earlier or later, in
//! `O(log SMs)`.
//!
//! # Ordering guarantee
//!
//! [`Deadlines::first`] returns the SM with the smallest `(cycle, sm)`: ties
//! go to the lower SM index, so the order in which SMs' deadlines fire never
//! depends on the order they were set in. The simulator fires deadlines
//! after every event-queue event of the same cycle.
//!
//! The keys live in the arena (one `u64` per SM, `u64::MAX` for none) and
//! are part of a snapshot; the inner nodes are derived and rebuilt on
//! restore.

/// No deadline.
pub(crate) const NONE: u64 = u64::MAX;

/// A tournament tree over `n` keys.
pub(crate) struct Deadlines<'a> {
    /// One key per SM.
    pub keys: &'a mut [u64],
    /// Inner nodes, 1-based heap order over `leaves` leaves: `win[i]` is the
    /// index of the smallest key below node `i` (`win[0]` unused).
    win: &'a mut [u16],
    leaves: usize,
}

impl<'a> Deadlines<'a> {
    /// Leaves of the tree for `n` keys: the next power of two.
    pub fn leaves_for(n: usize) -> usize {
        n.max(1).next_power_of_two()
    }

    /// A tree over `keys` (all [`NONE`]) with inner-node storage `win` of
    /// [`Deadlines::leaves_for`] entries.
    pub fn new(keys: &'a mut [u64], win: &'a mut [u16]) -> Self {
        let leaves = Self::leaves_for(keys.len());
        let mut d = Deadlines { keys, win, leaves };
        d.rebuild();
        d
    }

    fn key(&self, i: usize) -> u64 {
        self.keys.get(i).copied().unwrap_or(NONE)
    }

    /// The winner of two candidates: smaller key, then smaller index.
    fn better(&self, a: usize, b: usize) -> usize {
        if (self.key(b), b) < (self.key(a), a) {
            b
        } else {
            a
        }
    }

    /// The winner below node `i` (a leaf when `i >= leaves`).
    fn winner(&self, i: usize) -> usize {
        if i >= self.leaves {
            i - self.leaves
        } else {
            self.win[i] as usize
        }
    }

    /// Recomputes every inner node from the keys.
    pub fn rebuild(&mut self) {
        for i in (1..self.leaves).rev() {
            let w = self.better(self.winner(2 * i), self.winner(2 * i + 1));
            self.win[i] = w as u16;
        }
    }

    /// Sets SM `sm`'s deadline (or clears it with [`NONE`]).
    pub fn set(&mut self, sm: usize, at: u64) {
        if self.keys[sm] == at {
            return;
        }
        self.keys[sm] = at;
        let mut i = (sm + self.leaves) / 2;
        while i >= 1 {
            let w = self.better(self.winner(2 * i), self.winner(2 * i + 1));
            // A node that keeps another SM as its winner keeps it above
            // too: nothing else below those nodes changed.
            if w != sm && self.win[i] as usize == w {
                return;
            }
            self.win[i] = w as u16;
            i /= 2;
        }
    }

    /// The earliest deadline and its SM, if any.
    pub fn first(&self) -> Option<(u64, usize)> {
        let w = if self.leaves == 1 {
            0
        } else {
            self.win[1] as usize
        };
        let k = self.key(w);
        (k != NONE).then_some((k, w))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_is_the_smallest_cycle_then_the_lowest_sm() {
        for n in [1usize, 2, 3, 5, 8, 13] {
            let mut keys = [NONE; 13];
            let mut win = [0u16; 16];
            let mut d = Deadlines::new(&mut keys[..n], &mut win);
            assert_eq!(d.first(), None);
            let mut r = 0x9E37_79B9_7F4A_7C15u64;
            let mut shadow = [NONE; 13];
            for _ in 0..200 {
                r ^= r << 13;
                r ^= r >> 7;
                r ^= r << 17;
                let sm = (r % n as u64) as usize;
                let at = if r >> 40 & 7 == 0 { NONE } else { r >> 59 };
                d.set(sm, at);
                shadow[sm] = at;
                let want = (0..n)
                    .filter(|&i| shadow[i] != NONE)
                    .map(|i| (shadow[i], i))
                    .min();
                assert_eq!(d.first(), want, "n={n}");
            }
            d.rebuild();
            let want = (0..n)
                .filter(|&i| shadow[i] != NONE)
                .map(|i| (shadow[i], i))
                .min();
            assert_eq!(d.first(), want);
        }
    }
}
