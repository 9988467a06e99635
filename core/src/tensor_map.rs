//! A TMA tensor map (descriptor): the tensor's base, element size, shape
//! and strides, and the box one TMA operation moves. The kernel declares
//! them; the TMA engines and the memory models turn their boxes into
//! lines.

use heapless::String;
use serde::{Deserialize, Serialize};

use crate::error::KernelError;

/// A TMA tensor map (descriptor).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct TensorMap {
    /// Name (at most 24 bytes, as [`crate::kernel::Name`]).
    pub name: String<24>,
    /// Global base address (16-byte aligned).
    pub base: u64,
    /// Bytes per element: 1, 2, 4 or 8.
    pub elem_bytes: u8,
    /// Number of dimensions, 1..=5.
    pub rank: u8,
    /// Size of each dimension in elements, innermost first.
    pub dims: [u64; 5],
    /// Byte stride of each dimension; `strides[0]` is ignored (elements are
    /// contiguous), the others are multiples of 16.
    pub strides: [u64; 5],
    /// Box (tile) extent per dimension, 1..=256 elements.
    pub boxdim: [u32; 5],
}

impl TensorMap {
    /// Bytes a box at `coords` transfers: the part of the box inside the
    /// tensor (out-of-bounds elements generate no traffic).
    pub fn box_bytes(&self, coords: &[i64; 5]) -> u64 {
        let mut n: u64 = self.elem_bytes as u64;
        for (i, &c) in coords.iter().enumerate().take(self.rank as usize) {
            let lo = c.max(0);
            let hi = c
                .saturating_add(self.boxdim[i] as i64)
                .min(self.dims[i].min(i64::MAX as u64) as i64);
            if hi <= lo {
                return 0;
            }
            n = n.saturating_mul((hi - lo) as u64);
        }
        n
    }

    /// Bytes of a full box.
    pub fn full_box_bytes(&self) -> u64 {
        self.boxdim[..self.rank as usize]
            .iter()
            .fold(self.elem_bytes as u64, |acc, &b| acc * b as u64)
    }

    pub(crate) fn validate(&self, map: u8) -> Result<(), KernelError> {
        let bad = |problem| Err(KernelError::BadTensorMapShape { map, problem });
        if !(1..=5).contains(&self.rank) {
            return bad("rank must be 1..=5");
        }
        if ![1, 2, 4, 8].contains(&self.elem_bytes) {
            return bad("element size must be 1, 2, 4 or 8 bytes");
        }
        if self.base % 16 != 0 {
            return bad("base address must be 16-byte aligned");
        }
        let r = self.rank as usize;
        for i in 0..r {
            if self.dims[i] == 0 || self.dims[i] > 1 << 32 {
                return bad("dimension sizes must be in 1..=2^32");
            }
            if !(1..=256).contains(&self.boxdim[i]) {
                return bad("box extents must be in 1..=256");
            }
            if i > 0
                && (self.strides[i] == 0 || self.strides[i] % 16 != 0 || self.strides[i] >= 1 << 40)
            {
                return bad("strides must be non-zero multiples of 16 below 2^40");
            }
        }
        if (self.boxdim[0] as u64 * self.elem_bytes as u64) % 16 != 0 {
            return bad("the box's inner extent must span a multiple of 16 bytes");
        }
        Ok(())
    }
}
