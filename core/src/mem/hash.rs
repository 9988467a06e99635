//! L2 slice selection: which slice of the distributed L2 serves a line.
//!
//! A line is identified by its line number `addr / line_bytes`. The
//! [`SliceHash::Modulo`] policy interleaves consecutive lines over the slices
//! and is easy to reason about, but a stream whose stride in lines shares a
//! factor with the slice count piles onto few slices. [`SliceHash::Xor`]
//! folds higher address bits into the low ones first, which spreads such
//! power-of-two strides over every slice.

use serde::{Deserialize, Serialize};

/// The function that maps a line number to an L2 slice. Serialises as
/// `"xor"` or `"modulo"`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[serde(rename_all = "lowercase")]
pub enum SliceHash {
    /// `(line ^ (line >> 5)) % slices`.
    #[default]
    Xor,
    /// `line % slices`.
    Modulo,
}

impl SliceHash {
    /// Every policy, in declaration order.
    pub const ALL: [SliceHash; 2] = [SliceHash::Xor, SliceHash::Modulo];

    /// The name used in configuration files: `"xor"` or `"modulo"`.
    pub const fn name(self) -> &'static str {
        match self {
            SliceHash::Xor => "xor",
            SliceHash::Modulo => "modulo",
        }
    }

    /// The policy called `name` (as [`SliceHash::name`] spells it).
    pub fn from_name(name: &str) -> Option<Self> {
        SliceHash::ALL.into_iter().find(|h| h.name() == name)
    }

    /// The slice, in `0..slices`, that serves line number `line`
    /// (`addr / line_bytes`). `slices == 0` gives 0.
    #[inline]
    pub const fn slice(&self, line: u64, slices: u32) -> u32 {
        if slices == 0 {
            return 0;
        }
        let h = match self {
            SliceHash::Xor => line ^ (line >> 5),
            SliceHash::Modulo => line,
        };
        (h % slices as u64) as u32
    }

    /// The slice that serves byte address `addr` with lines of `line_bytes`
    /// bytes (`line_bytes == 0` is taken as 1).
    #[inline]
    pub const fn slice_of_addr(&self, addr: u64, line_bytes: u64, slices: u32) -> u32 {
        let lb = if line_bytes == 0 { 1 } else { line_bytes };
        self.slice(addr / lb, slices)
    }
}

/// A [`SliceHash`] with its slice count, answering [`SliceHash::slice`]
/// without a hardware division: the remainder comes from Lemire's
/// multiply-based method (a 128-bit reciprocal of the slice count), exact
/// for every line number.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SliceSelector {
    /// All ones for [`SliceHash::Xor`] (the folded bits count), zero for
    /// [`SliceHash::Modulo`]: the policy without a branch per line.
    fold: u64,
    slices: u64,
    /// `ceil(2^128 / slices)`.
    m: u128,
    /// `floor((2^64 - 1) / slices) + 1`: the 64-bit reciprocal, exact for
    /// hashed lines below 2^32 (every address below 512 GiB with 128-byte
    /// lines) at a third of the multiplications.
    m32: u64,
}

impl SliceSelector {
    /// The selector of `hash` over `slices` slices (0 is taken as 1).
    pub const fn new(hash: SliceHash, slices: u32) -> Self {
        let d = if slices == 0 { 1 } else { slices as u64 };
        SliceSelector {
            fold: match hash {
                SliceHash::Xor => u64::MAX,
                SliceHash::Modulo => 0,
            },
            slices: d,
            m: (u128::MAX / d as u128).wrapping_add(1),
            m32: (u64::MAX / d).wrapping_add(1),
        }
    }

    /// `hash.slice(line, slices)`.
    #[inline]
    pub const fn slice(&self, line: u64) -> u32 {
        let h = line ^ (line >> 5 & self.fold);
        // One slice needs no case of its own: both reciprocals are then 0
        // (2^64 and 2^128 wrapped), and so is every remainder. The slice
        // count fits 32 bits.
        let d = self.slices;
        if h >> 32 == 0 {
            // Lemire's 32-bit remainder: the high half of (m32 * h mod
            // 2^64) * d.
            let low = self.m32.wrapping_mul(h);
            return ((low as u128 * d as u128) >> 64) as u32;
        }
        // The high 64 bits of the 192-bit product (m * h mod 2^128) * d.
        let low = self.m.wrapping_mul(h as u128);
        let d = d as u128;
        let lo = (low as u64 as u128 * d) >> 64;
        let hi = (low >> 64) * d;
        ((hi + lo) >> 64) as u32
    }
}

impl core::fmt::Display for SliceHash {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde::de::value::{Error as ValueError, StrDeserializer};
    use serde::de::IntoDeserializer;

    /// Per-slice request counts of `n` requests at `stride` bytes apart.
    fn loads(h: SliceHash, slices: u32, stride: u64, n: u64) -> Vec<u32> {
        let mut load = vec![0u32; slices as usize];
        for i in 0..n {
            load[h.slice_of_addr(i * stride, 128, slices) as usize] += 1;
        }
        load
    }

    #[test]
    fn formulas() {
        assert_eq!(SliceHash::Modulo.slice(1000, 80), 1000 % 80);
        assert_eq!(
            SliceHash::Xor.slice(1000, 80),
            ((1000 ^ (1000 >> 5)) % 80) as u32
        );
        assert_eq!(SliceHash::Xor.slice(12345, 0), 0);
        assert_eq!(SliceHash::Modulo.slice_of_addr(128 * 81, 128, 80), 1);
        assert_eq!(SliceHash::Modulo.slice_of_addr(7, 0, 80), 7);
        for s in [1u32, 2, 7, 80, 96, 132] {
            for line in [0u64, 1, 31, 32, 1 << 40, u64::MAX] {
                assert!(SliceHash::Xor.slice(line, s) < s);
                assert!(SliceHash::Modulo.slice(line, s) < s);
            }
        }
    }

    #[test]
    fn names_round_trip() {
        for h in SliceHash::ALL {
            assert_eq!(SliceHash::from_name(h.name()), Some(h));
            let de: StrDeserializer<'_, ValueError> = h.name().into_deserializer();
            assert_eq!(SliceHash::deserialize(de).unwrap(), h);
        }
        assert_eq!(SliceHash::from_name("Xor"), None);
        let de: StrDeserializer<'_, ValueError> = "mod".into_deserializer();
        assert!(SliceHash::deserialize(de).is_err());
        assert_eq!(SliceHash::default(), SliceHash::Xor);
        assert_eq!(format!("{}", SliceHash::Modulo), "modulo");
    }

    #[test]
    fn hash_spread() {
        // 4096 requests 2048 bytes apart: 16 lines apart with 128-byte lines.
        for slices in [80u32, 96] {
            let n = 4096u64;
            let mean = n as f64 / slices as f64;

            let xor = loads(SliceHash::Xor, slices, 2048, n);
            let (xmin, xmax) = (*xor.iter().min().unwrap(), *xor.iter().max().unwrap());
            assert!(xmin >= 1, "xor leaves a slice idle: {xor:?}");
            assert_eq!(xor.iter().filter(|&&c| c > 0).count(), slices as usize);
            assert!(
                xmax as f64 / mean <= 2.0,
                "xor max/mean {}",
                xmax as f64 / mean
            );

            let modulo = loads(SliceHash::Modulo, slices, 2048, n);
            // 16 | gcd(16, slices) = 16 for 80 and 96: only slices = 0 mod 16.
            let used: Vec<usize> = (0..slices as usize).filter(|&s| modulo[s] > 0).collect();
            assert!(used.iter().all(|&s| s % 16 == 0), "{used:?}");
            assert_eq!(used.len(), slices as usize / 16);
            let mmax = *modulo.iter().max().unwrap();
            assert!(
                mmax as f64 / mean >= 10.0,
                "modulo max/mean {}",
                mmax as f64 / mean
            );
            assert!(mmax >= 4 * xmax, "modulo {mmax} vs xor {xmax}");
        }
    }

    proptest! {
        /// The division-free selector answers exactly what the hash does.
        #[test]
        fn selector_is_the_hash(line in any::<u64>(), slices in 0u32..600, modulo in any::<bool>()) {
            let h = if modulo { SliceHash::Modulo } else { SliceHash::Xor };
            prop_assert_eq!(SliceSelector::new(h, slices).slice(line), h.slice(line, slices.max(1)));
        }
    }

    proptest! {
        /// Lines whose hash fits in 32 bits take the 64-bit reciprocal.
        #[test]
        fn selector_is_the_hash_below_2_32(line in 0u64..1 << 33, slices in 0u32..600, modulo in any::<bool>()) {
            let h = if modulo { SliceHash::Modulo } else { SliceHash::Xor };
            prop_assert_eq!(SliceSelector::new(h, slices).slice(line), h.slice(line, slices.max(1)));
        }
    }

    #[test]
    fn selector_edges() {
        for slices in [1u32, 2, 3, 80, 96, 255, 256, u32::MAX] {
            let s = SliceSelector::new(SliceHash::Modulo, slices);
            for line in [
                0u64,
                1,
                u32::MAX as u64,
                1 << 32,
                slices as u64 - 1,
                slices as u64,
                u64::MAX,
                u64::MAX - 1,
            ] {
                assert_eq!(
                    s.slice(line),
                    SliceHash::Modulo.slice(line, slices),
                    "{line} % {slices}"
                );
            }
        }
    }
}
