//! The Proton trace path (paper section V-A): simulated runs written as
//! Proton-style chrome traces, and traces turned back into kernels whose
//! WarpGroups replay them.
//!
//! - [`ops_file`]: the per-WarpGroup instruction streams of an imported
//!   kernel, on disk, read back through [`simfa_core::StreamSource`].

pub mod error;
pub mod events;
pub mod export;
pub mod import;
pub mod layout;
pub mod ops_file;

#[cfg(test)]
mod tests;
