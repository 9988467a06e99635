//! # simfa-core
//!
//! A deterministic, cycle-level simulation kernel for GPU kernels built on
//! NVIDIA Hopper's asynchronous features: TMA bulk tensor copies, WGMMA,
//! mbarriers, named barriers and warp specialisation. It follows the
//! WarpGroup-level abstraction of Sim-FA: the unit of execution is a
//! WarpGroup, and only timing-visible state is kept.
//!
//! ## Layers
//!
//! - **Time and order** — [`Cycle`] and exact [`Ratio`]s ([`time`]); the
//!   fixed-capacity [`queue::EventQueue`] and the [`wheel::TimingWheel`]
//!   (the paper's AEQ, shared by the simulator and the memory models) with
//!   their total order `(cycle, class, sequence)`; the seeded
//!   [`rand::Rng`]; the [`digest::Digest`] of the event stream; the
//!   snapshot [`codec`] every layer saves its state through.
//! - **Inputs** — a [`GpuConfig`] (with presets `h800`, `h100`, `h20`,
//!   `h200`, `h800-pcie`) and a [`Kernel`]: grid, WarpGroup roles, tensor
//!   maps, barrier and stage declarations and compact programs of [`Instr`]
//!   with affine operands ([`isa`]). Kernels encode to a compact binary
//!   ([`encode`]); the text assembly lives in the std shim.
//! - **Execution** — the [`Simulator`]: CTA admission under shared-memory,
//!   register, warp and CTA limits; a scheduler per SM; in-order issue with
//!   out-of-order completion; the tensor-core engine (one pipe, an
//!   instruction buffer, commit groups); the TMA engine issuing through a
//!   [`port::MemoryPort`]; mbarrier phases, stages and named barriers; stall
//!   and wake-up through the shared event queue; deadlock detection and a
//!   watchdog.
//! - **Embedding** — with `memory = "external"` the TMA engines' operations
//!   go to the host as [`external::ExtRequest`]s and the host completes
//!   them ([`external`]), for co-simulation with RTL or an emulator.
//! - **Observation** — an [`Observer`] sees every [`Event`]; [`Stats`] count.
//! - **Estimate** — [`analytic`]: the grid's FLOPs, L2 and compulsory HBM
//!   bytes, roofline cycles per level and waves, counted without timing
//!   (reporting only, never on the timing path).
//!
//! ## Place in the workspace
//!
//! The base of simfa: it uses no other crate of the workspace (and neither
//! `std` nor `alloc`). `simfa-std`, `simfa-ffi`, `simfa-cli` and the tests
//! build on it. `docs/architecture.md` draws the crates and these layers.
//!
//! ## Memory
//!
//! The crate is `#![no_std]` and does not use `alloc`. A simulation lives in
//! one caller-provided byte buffer whose exact size
//! [`Simulator::arena_size`] reports before the run.
//!
//! ```
//! use simfa_core::builder::Builder;
//! use simfa_core::{GpuConfig, Instr, Kernel, Simulator, WgmmaMode};
//! let mut b = Builder::new(Kernel::default(), "tiny").unwrap();
//! b.begin_role("main", 1, 32).unwrap();
//! b.op(Instr::Wgmma { n: 128, mode: WgmmaMode::Ss }).unwrap();
//! b.op(Instr::WgmmaCommit).unwrap();
//! b.op(Instr::WgmmaWait { n: 0 }).unwrap();
//! b.end_role().unwrap();
//! let k = b.finish().unwrap();
//! let cfg = GpuConfig::h800();
//! let mut arena = vec![0u8; Simulator::<simfa_core::NoStream>::arena_size(&cfg, &k).unwrap()];
//! let mut sim = Simulator::new(&cfg, &k, &mut arena).unwrap();
//! let s = sim.run(&mut ()).unwrap();
//! // wgmma at 0 (64 cycles on the pipe), commit at 1, wait at 2 stalls until 64,
//! // passes at 64, implicit exit at 65: the kernel ends at cycle 66.
//! assert_eq!(s.cycles, 66);
//! ```

#![cfg_attr(not(test), no_std)]
#![deny(missing_docs)]
#![forbid(unsafe_op_in_unsafe_fn)]

pub mod analytic;
pub mod arena;
pub mod builder;
pub mod cluster;
pub mod codec;
pub mod config;
pub mod digest;
pub mod encode;
pub mod error;
pub mod external;
pub mod isa;
pub mod kernel;
pub mod mem;
pub mod observer;
pub mod port;
pub mod power;
pub mod queue;
pub mod rand;
pub mod samples;
mod sim;
pub mod source;
pub mod tensor_map;
pub mod time;
pub mod transfer;
pub mod wait;
pub mod wheel;

pub use cluster::Cluster;
pub use codec::{SnapshotError, SNAPSHOT_MAGIC, SNAPSHOT_VERSION};
pub use config::{Fault, GpuConfig, L1Config, SchedulerPolicy, PRESETS};
pub use error::{BuildError, Capacity, ConfigError, DecodeError, KernelError, SimError};
pub use isa::{Expr, Instr, Op, Ref, UnitClass, WgmmaMode, Work};
pub use kernel::{CtaOrder, Kernel, MbarDecl, Role, StageDecl};
pub use observer::{Event, Observer, Stats, Who};
pub use sim::walk::{Walk, WalkError, WALK_BUDGET};
pub use sim::{fingerprint, lands_by_arrival, Simulator, Status, Summary, Waiter};
pub use source::{NoStream, SourceError, StreamSource};
pub use tensor_map::TensorMap;
pub use time::{Cycle, Ratio};
pub use wait::WaitReason;
