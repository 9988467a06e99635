//! Workload generators: kernels built directly from core types.
//!
//! - [`gemm()`]: the tiled GEMM of the paper's section V-B1.

pub mod gemm;

pub use gemm::{gemm, GemmParams};

use simfa_core::KernelError;

/// Why a generator could not build a kernel.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum GenError {
    /// A problem dimension is zero.
    #[error("{dim} must be at least 1")]
    Zero {
        /// The dimension (`"M"`, `"N"`, `"K"`).
        dim: &'static str,
    },
    /// A problem dimension is not a multiple of the tile.
    #[error("{dim} = {value} is not a multiple of the {tile}-element tile")]
    NotMultiple {
        /// The dimension.
        dim: &'static str,
        /// Its value.
        value: u32,
        /// The tile extent it must be a multiple of.
        tile: u32,
    },
    /// A fixed capacity of the kernel model ran out.
    #[error("the kernel exceeds the {0} capacity")]
    Capacity(&'static str),
    /// The generated kernel is invalid (for example a grid of 2^32 CTAs or more).
    #[error("the generated kernel is invalid: {0}")]
    Invalid(KernelError),
}
