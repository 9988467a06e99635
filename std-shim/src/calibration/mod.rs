//! Calibration and validation: the published measurements (`data/`), the
//! fits that set the presets' parameters on them, and the checks that
//! compare the presets with every dataset.
//!
//! - [`data`]: the embedded data files and their typed rows;
//! - [`error`]: why a calibration or validation could not run;
//! - [`stats`]: errors, MAPE, the worst point, subsampling, progress;
//! - [`pchase`]: the TMA pointer-chase latency curve;
//! - [`tma_bw`]: the TMA load throughput table;
//! - [`l2`]: the L2 bandwidth table and the fit of the slices' widths;
//! - [`store`]: register stores against a GEMM epilogue timed on the GPU;
//! - [`sm`]: the SM compute model's fit (clocks, the tensor/SIMT share);
//! - [`gemm_bubbles`]: the paper's GEMM frontend bubbles, fitted on
//!   measured per-shape times;
//! - [`experiments`]: the GEMM and FA3 runs the fits and checks share;
//! - [`validate`]: every dataset against the presets (`simfa validate`);
//! - [`agreement`]: the transaction-level memory model against the
//!   line-level reference (`simfa agreement`).
//!
//! Nothing here is below the generators and the runner: these modules use
//! [`crate::gen`], [`crate::run`] and [`crate::reporting::report`], and only the
//! command-line front-end and the Python bindings use them.

pub mod agreement;
pub mod data;
pub mod error;
pub mod experiments;
pub mod gemm_bubbles;
pub mod l2;
pub mod pchase;
pub mod sm;
pub mod stats;
pub mod store;
pub mod tma_bw;
pub mod validate;
