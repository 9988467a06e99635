//! The 64-bit digest folded over the canonical event stream.
//!
//! Every event the simulator emits is folded, in emission order, into a
//! [`Digest`]. Two runs with equal digests produced the same events at the
//! same cycles; regression tests pin digests of fixed kernels ("golden
//! digests"). The fold uses only integer arithmetic, so it is identical on
//! every target.

use crate::rand::mix64;
use serde::{Deserialize, Serialize};

/// A running 64-bit fingerprint.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Digest(u64);

impl Default for Digest {
    fn default() -> Self {
        Digest::new()
    }
}

impl Digest {
    const SEED: u64 = 0x5349_4D46_4131_0001; // "SIMFA1" + 1

    /// A fresh digest.
    pub const fn new() -> Self {
        Digest(Self::SEED)
    }

    /// Folds one word into the digest.
    pub fn fold(&mut self, word: u64) {
        self.0 = mix64(self.0 ^ mix64(word.wrapping_add(0x9E37_79B9_7F4A_7C15)));
    }

    /// Folds one event: its cycle and its three canonical words. The words
    /// are spread by odd multipliers and rotations and mixed once, apart
    /// from the running value, so only one mix depends on the previous
    /// event (a quarter of [`Digest::fold`]'s work per word, and no chain
    /// of mixes from one word to the next).
    #[inline]
    pub fn fold_event(&mut self, cycle: u64, words: &[u64; 3]) {
        let [a, b, c] = *words;
        let x = mix64(cycle.wrapping_add(0x9E37_79B9_7F4A_7C15) ^ a.rotate_left(32));
        let y = a.wrapping_mul(0xD6E8_FEB8_6659_FD93)
            ^ b.wrapping_mul(0xA076_1D64_78BD_642F).rotate_left(21)
            ^ c.wrapping_mul(0xE703_7ED1_A0B4_28DB).rotate_left(43);
        self.0 = mix64(self.0.rotate_left(29) ^ x ^ y);
    }

    /// Folds several words, in order.
    pub fn fold_all(&mut self, words: &[u64]) {
        for &w in words {
            self.fold(w);
        }
    }

    /// The current value.
    pub const fn value(&self) -> u64 {
        self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn order_matters() {
        let mut a = Digest::new();
        a.fold_all(&[1, 2]);
        let mut b = Digest::new();
        b.fold_all(&[2, 1]);
        assert_ne!(a.value(), b.value());
        let mut c = Digest::new();
        c.fold_all(&[1, 2]);
        assert_eq!(a, c);
    }

    /// Changing any one bit of an event's cycle or words, or swapping two
    /// events, changes the digest.
    #[test]
    fn every_event_bit_counts() {
        let base = (1234u64, [3u64 | 7 << 8, 0x0001_0002_0003_0004, 99]);
        let fold = |evs: &[(u64, [u64; 3])]| {
            let mut d = Digest::new();
            for (c, w) in evs {
                d.fold_event(*c, w);
            }
            d.value()
        };
        let want = fold(&[base]);
        for bit in 0..64 {
            let mut e = base;
            e.0 ^= 1 << bit;
            assert_ne!(fold(&[e]), want, "cycle bit {bit}");
            for k in 0..3 {
                let mut e = base;
                e.1[k] ^= 1 << bit;
                assert_ne!(fold(&[e]), want, "word {k} bit {bit}");
            }
        }
        let other = (1235u64, [5u64, 1, 2]);
        assert_ne!(fold(&[base, other]), fold(&[other, base]));
    }
}
