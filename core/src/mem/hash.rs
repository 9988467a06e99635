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

impl core::fmt::Display for SliceHash {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
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
}
