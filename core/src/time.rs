//! Simulated time: the SM clock cycle and exact rational ratios.
//!
//! The core never reads a wall clock. Time is a [`Cycle`] of the SM clock that
//! the simulator advances; other clock domains and throughput laws cross over
//! through [`Ratio`], an exact fraction of two integers, so that no floating
//! point ever reaches the timing path.

use core::fmt;
use core::ops::{Add, AddAssign, Sub};
use serde::{Deserialize, Serialize};

/// A point in simulated time, in cycles of the SM clock.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Cycle(pub u64);

impl Cycle {
    /// Cycle zero, where every run starts.
    pub const ZERO: Cycle = Cycle(0);
    /// The largest representable cycle; used as "never".
    pub const MAX: Cycle = Cycle(u64::MAX);

    /// Creates a cycle from a raw count.
    pub const fn new(c: u64) -> Self {
        Cycle(c)
    }

    /// The raw cycle count.
    pub const fn get(self) -> u64 {
        self.0
    }

    /// Adds `n` cycles, saturating at [`Cycle::MAX`].
    pub const fn after(self, n: u64) -> Self {
        Cycle(self.0.saturating_add(n))
    }
}

impl Add<u64> for Cycle {
    type Output = Cycle;
    fn add(self, rhs: u64) -> Cycle {
        self.after(rhs)
    }
}

impl AddAssign<u64> for Cycle {
    fn add_assign(&mut self, rhs: u64) {
        *self = self.after(rhs);
    }
}

impl Sub for Cycle {
    type Output = u64;
    fn sub(self, rhs: Cycle) -> u64 {
        self.0.saturating_sub(rhs.0)
    }
}

impl fmt::Display for Cycle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "cycle {}", self.0)
    }
}

/// An exact non-negative rational number `num / den`.
///
/// Used for latency multipliers (the H20 WGMMA factor 5.176 is `647/125`),
/// bandwidths in bytes per cycle and clock-domain ratios.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Ratio {
    /// Numerator.
    pub num: u32,
    /// Denominator; never zero in a validated configuration.
    pub den: u32,
}

impl Ratio {
    /// The ratio one.
    pub const ONE: Ratio = Ratio { num: 1, den: 1 };

    /// Creates `num / den`.
    pub const fn new(num: u32, den: u32) -> Self {
        Ratio { num, den }
    }

    /// `ceil(x * num / den)`, computed exactly in 128-bit arithmetic and
    /// saturated to `u64`. A zero denominator yields `u64::MAX`.
    pub const fn mul_ceil(self, x: u64) -> u64 {
        if self.den == 0 {
            return u64::MAX;
        }
        let p = x as u128 * self.num as u128;
        let d = self.den as u128;
        let q = p.div_ceil(d);
        if q > u64::MAX as u128 {
            u64::MAX
        } else {
            q as u64
        }
    }

    /// `ceil(x * den / num)`: the inverse law, e.g. cycles needed to move
    /// `x` bytes at `num/den` bytes per cycle. A zero numerator yields `u64::MAX`.
    pub const fn div_ceil(self, x: u64) -> u64 {
        Ratio {
            num: self.den,
            den: self.num,
        }
        .mul_ceil(x)
    }
}

impl fmt::Display for Ratio {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.num, self.den)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ratio_rounds_up_exactly() {
        let h20 = Ratio::new(647, 125);
        // 64 * 5.176 = 331.264 -> 332
        assert_eq!(h20.mul_ceil(64), 332);
        assert_eq!(Ratio::new(1, 2).mul_ceil(176), 88);
        assert_eq!(Ratio::new(1, 2).mul_ceil(9), 5);
        assert_eq!(Ratio::new(16, 1).div_ceil(33), 3);
        assert_eq!(Ratio::new(1, 0).mul_ceil(5), u64::MAX);
        assert_eq!(Ratio::new(u32::MAX, 1).mul_ceil(u64::MAX), u64::MAX);
    }

    #[test]
    fn cycle_saturates() {
        assert_eq!(Cycle::MAX + 5, Cycle::MAX);
        assert_eq!(Cycle(3) - Cycle(5), 0);
    }
}
