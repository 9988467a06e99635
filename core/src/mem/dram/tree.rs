//! A tournament (winner) tree over channel numbers, keyed by
//! `(clock, channel)`: the total order in which channels are served.
//!
//! Each entry packs `clock << 12 | channel` into one word, so a comparison
//! is one integer `min` and equal clocks fall to the lower channel. Every
//! channel always has a leaf; changing its key recomputes the path to the
//! root (branch-free, `log2(channels)` steps). Clocks are limited to
//! [`MAX_KEY`] (2^52 - 1 DRAM clocks, about a month of HBM time).

/// The largest key; larger ones are clamped.
pub(super) const MAX_KEY: u64 = (1 << 52) - 1;

const CH_BITS: u32 = 12;

/// The tree over borrowed storage of [`ChannelTree::nodes`] words.
#[derive(Debug)]
pub(super) struct ChannelTree<'a> {
    tree: &'a mut [u64],
    leaves: usize,
}

impl<'a> ChannelTree<'a> {
    /// Words of storage for `channels` (at most 4096) channels.
    pub(super) const fn nodes(channels: usize) -> usize {
        2 * channels.next_power_of_two()
    }

    /// A tree over `channels` channels in `tree` (of
    /// [`ChannelTree::nodes`] words), channel `c` keyed `key(c)`.
    pub(super) fn new(tree: &'a mut [u64], channels: usize, key: impl Fn(usize) -> u64) -> Self {
        let leaves = channels.next_power_of_two();
        let mut t = ChannelTree { tree, leaves };
        t.rebuild(channels, key);
        t
    }

    /// Recomputes every node from the keys of the first `channels` leaves
    /// (the rest empty), whatever the nodes held.
    pub(super) fn rebuild(&mut self, channels: usize, key: impl Fn(usize) -> u64) {
        let leaves = self.leaves;
        for (i, w) in self.tree[leaves..].iter_mut().enumerate() {
            *w = if i < channels {
                key(i).min(MAX_KEY) << CH_BITS | i as u64
            } else {
                u64::MAX
            };
        }
        for i in (1..leaves).rev() {
            self.tree[i] = self.tree[2 * i].min(self.tree[2 * i + 1]);
        }
    }

    /// The channel with the smallest `(key, channel)` and its key.
    pub(super) fn top(&self) -> (usize, u64) {
        let w = self.tree[1];
        ((w & ((1 << CH_BITS) - 1)) as usize, w >> CH_BITS)
    }

    /// Sets channel `c`'s key.
    pub(super) fn set(&mut self, c: usize, key: u64) {
        let mut i = self.leaves + c;
        let w = key.min(MAX_KEY) << CH_BITS | c as u64;
        if self.tree[i] == w {
            return;
        }
        self.tree[i] = w;
        while i > 1 {
            let m = self.tree[i].min(self.tree[i ^ 1]);
            i >>= 1;
            if self.tree[i] == m {
                break;
            }
            self.tree[i] = m;
        }
    }
}

impl ChannelTree<'_> {
    /// Writes the mutable state into a snapshot.
    pub(crate) fn save_state(
        &self,
        w: &mut crate::codec::Writer<'_>,
    ) -> Result<(), crate::codec::SnapshotError> {
        w.slice(self.tree)
    }

    /// Overwrites the mutable state from a snapshot.
    pub(crate) fn load_state(
        &mut self,
        r: &mut crate::codec::Reader<'_>,
    ) -> Result<(), crate::codec::SnapshotError> {
        r.slice(self.tree)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn orders_by_key_then_channel() {
        let k = [5u64, 3, 3, 9];
        let mut t = [0u64; 8];
        let mut q = ChannelTree::new(&mut t, 4, |c| k[c]);
        assert_eq!(q.top(), (1, 3));
        q.set(1, 10);
        assert_eq!(q.top(), (2, 3));
        q.set(2, 11);
        assert_eq!(q.top(), (0, 5));
        q.set(3, 5);
        assert_eq!(q.top(), (0, 5));
        q.set(0, 6);
        assert_eq!(q.top(), (3, 5));
        q.set(3, 0);
        assert_eq!(q.top(), (3, 0));
        q.set(3, u64::MAX);
        assert_eq!(q.top(), (0, 6));
    }

    #[test]
    fn agrees_with_a_linear_minimum() {
        let mut keys = [0u64; 37];
        let mut t = [0u64; ChannelTree::nodes(37)];
        let mut q = ChannelTree::new(&mut t, 37, |_| 0);
        let mut x = 12345u64;
        for _ in 0..5000 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let c = (x >> 33) as usize % 37;
            let k = (x >> 50) % 64;
            keys[c] = k;
            q.set(c, k);
            let want = (0..37).map(|c| (keys[c], c)).min().unwrap();
            assert_eq!(q.top(), (want.1, want.0));
        }
    }
}
