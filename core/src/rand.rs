//! The one seeded pseudo-random generator of the core.
//!
//! Every random decision of a model (for example the remote-copy proxy of the
//! L2) draws from a [`Rng`] seeded from the configuration, so that a run is a
//! pure function of its inputs. The generator is SplitMix64: tiny, fast, with
//! a 64-bit state that serializes trivially.

use serde::{Deserialize, Serialize};

/// A SplitMix64 generator.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Rng {
    state: u64,
}

impl Rng {
    /// Creates a generator from a seed. Equal seeds give equal sequences.
    pub const fn new(seed: u64) -> Self {
        Rng { state: seed }
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        mix64(self.state)
    }

    /// A uniform draw in `0..bound` (Lemire's multiply-shift; `bound == 0` gives 0).
    pub fn below(&mut self, bound: u64) -> u64 {
        ((self.next_u64() as u128 * bound as u128) >> 64) as u64
    }

    /// True with probability `num / den` (fixed point, no floating point).
    pub fn chance(&mut self, num: u32, den: u32) -> bool {
        den != 0 && self.below(den as u64) < num as u64
    }
}

/// The SplitMix64 finalizer: a bijective 64-bit mixing function.
pub const fn mix64(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_seed_same_stream() {
        let mut a = Rng::new(42);
        let mut b = Rng::new(42);
        for _ in 0..100 {
            assert_eq!(a.next_u64(), b.next_u64());
        }
        let mut c = Rng::new(43);
        assert_ne!(Rng::new(42).next_u64(), c.next_u64());
    }

    #[test]
    fn below_stays_in_range_and_chance_is_roughly_fair() {
        let mut r = Rng::new(7);
        let mut hits = 0;
        for _ in 0..10_000 {
            assert!(r.below(10) < 10);
            if r.chance(1, 4) {
                hits += 1;
            }
        }
        assert!((2_200..2_800).contains(&hits), "{hits}");
        assert!(!r.chance(0, 4));
        assert!(!r.chance(1, 0));
    }
}
