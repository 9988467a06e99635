//! One TMA transfer as the memory models see it: which SM, which
//! direction, what it moves (a tensor-map box or a bulk range) and how many
//! bytes.

use crate::tensor_map::TensorMap;

/// Direction of a transfer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Direction {
    /// Global memory to shared memory.
    Load,
    /// Shared memory to global memory.
    Store,
}

/// What a transfer moves.
#[derive(Clone, Copy, Debug)]
pub enum Shape<'k> {
    /// A tensor-map box at the given origin.
    Tensor {
        /// The tensor map.
        map: &'k TensorMap,
        /// Box origin.
        coords: [i64; 5],
    },
    /// A contiguous bulk range.
    Linear {
        /// Global address.
        addr: u64,
    },
}

/// One TMA transfer presented to the memory port.
#[derive(Clone, Copy, Debug)]
pub struct Transfer<'k> {
    /// Issuing SM.
    pub sm: u16,
    /// Direction.
    pub dir: Direction,
    /// What is moved.
    pub shape: Shape<'k>,
    /// Bytes that cross the port (clipped box bytes, or the bulk size).
    pub bytes: u64,
}
