//! Workload generators: kernels built directly from core types.
//!
//! - [`gemm()`]: the tiled GEMM of the paper's section V-B1 and its
//!   pipelined, warp-specialised and persistent variants ([`GemmParams`]),
//!   with the section V-B3 calibration bubbles ([`Calibration`]).
//! - [`sweep()`]: the 23-shape GEMM sweep ([`sweep_shapes`]).
//! - [`fa3()`]: the FlashAttention-3 forward kernel of the paper's section VI.
//! - [`pchase()`]: the TMA pointer-chase latency microbenchmark, and
//!   [`cycles_per_hop`], its simulated figure.
//! - [`tma_bw()`]: the TMA load throughput microbenchmark, and
//!   [`throughput_gbps`], its simulated figure.

pub mod fa3;
pub mod gemm;
pub mod gemm_params;
pub mod gemm_space;
pub mod gemm_spec;
pub mod gemm_sweep;
pub mod gemm_tune;
pub mod pchase;
pub mod tmabw;
pub mod wgmma_bench;

pub use fa3::{fa3, Fa3Params, Variant};
pub use gemm::{gemm, gemm_source, GemmSource};
pub use gemm_params::{Calibration, Epilogue, GemmParams};
pub use gemm_spec::{GemmKernel, GemmSpec};
pub use gemm_sweep::{sweep, sweep_row, sweep_shapes, sweep_table, SweepRow};
pub use pchase::{cycles_per_hop, pchase, HopLoad, PchaseParams};
pub use tmabw::{throughput_gbps, tma_bw, CopyKind, TmaBwParams};

use simfa_core::builder::{Builder, BuilderError};
use simfa_core::{Kernel, KernelError};

/// The builder every generator fills its kernel through.
pub(crate) type Kb = Builder<Kernel>;

use crate::run::RunError;

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
    /// The kernel builder refused the kernel (a full table, a name too
    /// long, an invalid result).
    #[error("{0}")]
    Build(BuilderError),
    /// The generated kernel is invalid (for example a grid of 2^32 CTAs or more).
    #[error("the generated kernel is invalid: {0}")]
    Invalid(KernelError),
    /// A generator parameter is out of range.
    #[error("{param}: {problem}")]
    BadParam {
        /// The parameter, e.g. `"working set"`.
        param: &'static str,
        /// What is wrong with it.
        problem: String,
    },
}

impl From<BuilderError> for GenError {
    fn from(e: BuilderError) -> Self {
        match e {
            BuilderError::Invalid(k) => GenError::Invalid(k),
            e => GenError::Build(e),
        }
    }
}

/// Why a microbenchmark could not produce its figure.
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    /// The kernel could not be generated.
    #[error(transparent)]
    Gen(#[from] GenError),
    /// The simulation failed (or could not be built).
    #[error(transparent)]
    Run(#[from] RunError),
    /// The run finished without the events the figure is measured between.
    #[error("the run did not reach the measured section: {0}")]
    NoMeasurement(&'static str),
}

impl BenchError {
    /// True for errors caused by the input (parameters, configuration, a
    /// kernel that does not fit the GPU) rather than by the simulation.
    pub fn is_input_error(&self) -> bool {
        matches!(
            self,
            BenchError::Gen(_) | BenchError::Run(RunError::Build(_) | RunError::ExternalMemory)
        )
    }
}
