//! # simfa-std
//!
//! Everything around [`simfa_core`] that needs the standard library: the
//! text assembly ([`asm`]), kernel files in either encoding ([`load`]), GPU
//! configuration files ([`config`]), workload generators ([`gen`]), running a
//! kernel with a heap-allocated arena ([`run`]), reports, a Gantt timeline
//! of one SM as a Chrome trace or an SVG chart, and line charts
//! ([`reporting`]), the read-after-transfer consistency checker
//! ([`check`]) and its counterpart for SCALE-Sim runs ([`scalesim`]), the
//! TTGIR instrumentation pass for Triton kernels ([`ttgir`]), the trace
//! front-ends ([`proton`], [`fa3log`]), calibration and validation against
//! the published measurements ([`calibration`]), and design-space sweeps
//! over configurations and workloads ([`sweep`]).
//!
//! It may use [`simfa_core`] and no other crate of the workspace;
//! `simfa-cli`, the end-to-end tests, the Python bindings and the fuzz
//! targets build on it. Anything that decides a cycle belongs in the core,
//! not here (`docs/architecture.md`).

pub mod asm;
pub mod calibration;
pub mod check;
pub mod config;
pub mod fa3log;
pub mod gen;
pub mod load;
pub mod proton;
pub mod reporting;
pub mod run;
pub mod scalesim;
pub mod sweep;
pub mod toml_file;
pub mod trace;
pub mod ttgir;
