//! FlashAttention-3's own event log (paper section VI-A): the nine events
//! lane 0 of each warp records, written by a simulated FA3 run and
//! translated back into a kernel (section VI-B).
//!
//! # The line format
//!
//! ```text
//! # simfa fa3-log 1
//! shape batch=1 heads=32 kv_heads=8 seqlen_q=4096 seqlen_kv=4096 hdim=128 causal=0
//! <cycle> <sm> <cta> <warp> <EVENT> [key=value ...]
//! ```
//!
//! Lines starting with `#` and blank lines are ignored; the `shape` line
//! comes before the first event. Events, with their payloads:
//!
//! | event | recorded by | payload |
//! |---|---|---|
//! | `TMA_Q_ISSUE`, `TMA_K_ISSUE`, `TMA_V_ISSUE` | producer, before the copy | `row=` first sequence row of the box, `head=`, `batch=` |
//! | `WAIT_K_START`, `WAIT_V_START` | consumer, at the `mbarrier.try_wait` of a K or V stage | |
//! | `GEMM_QK_ISSUE`, `GEMM_PV_ISSUE` | consumer, before the first `wgmma.mma_async` of S = QK^T or O += PV | |
//! | `WAIT_WG_1`, `WAIT_WG_0` | consumer, at `wgmma.wait_group 1` / `0` | `masked=1` when the softmax after it is a masked (diagonal) block's |
//!
//! The paper records a K or V tile's index; this format records its first
//! row (the index times the block's rows), which also covers the causal
//! kernel's end-aligned query blocks. Warps are grouped into WarpGroups
//! (`warp / 4`: the producer is WarpGroup 0, consumer `c` WarpGroup
//! `1 + c`) and each WarpGroup's lowest recording warp kept.
//!
//! - [`Fa3LogWriter`]: the observer that writes the log of a run of the
//!   FA3 generator's kernel.
//! - [`import_fa3_log`]: the translator (see [`import`] for its rules).

mod export;
pub mod import;
#[cfg(test)]
mod tests;

pub use export::Fa3LogWriter;
pub use import::import_fa3_log;

use crate::gen::Fa3Params;

/// The nine event types, in the order of the paper.
pub const EVENTS: [&str; 9] = [
    "TMA_Q_ISSUE",
    "TMA_K_ISSUE",
    "TMA_V_ISSUE",
    "WAIT_K_START",
    "WAIT_V_START",
    "GEMM_QK_ISSUE",
    "GEMM_PV_ISSUE",
    "WAIT_WG_1",
    "WAIT_WG_0",
];

/// An event type (an index into [`EVENTS`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// `TMA_Q_ISSUE`.
    TmaQ = 0,
    /// `TMA_K_ISSUE`.
    TmaK = 1,
    /// `TMA_V_ISSUE`.
    TmaV = 2,
    /// `WAIT_K_START`.
    WaitK = 3,
    /// `WAIT_V_START`.
    WaitV = 4,
    /// `GEMM_QK_ISSUE`.
    GemmQk = 5,
    /// `GEMM_PV_ISSUE`.
    GemmPv = 6,
    /// `WAIT_WG_1`.
    WaitWg1 = 7,
    /// `WAIT_WG_0`.
    WaitWg0 = 8,
}

impl Kind {
    const ALL: [Kind; 9] = [
        Kind::TmaQ,
        Kind::TmaK,
        Kind::TmaV,
        Kind::WaitK,
        Kind::WaitV,
        Kind::GemmQk,
        Kind::GemmPv,
        Kind::WaitWg1,
        Kind::WaitWg0,
    ];

    /// The event's name.
    pub fn name(self) -> &'static str {
        EVENTS[self as usize]
    }

    /// The event named `s`.
    pub fn from_name(s: &str) -> Option<Kind> {
        EVENTS.iter().position(|&e| e == s).map(|i| Kind::ALL[i])
    }

    /// The event with index `i`.
    fn from_index(i: u32) -> Kind {
        Kind::ALL[i as usize]
    }
}

/// The `shape` line of attention shape `p`.
pub fn shape_line(p: &Fa3Params) -> String {
    format!(
        "shape batch={} heads={} kv_heads={} seqlen_q={} seqlen_kv={} hdim={} causal={}",
        p.batch, p.heads, p.kv_heads, p.seqlen_q, p.seqlen_kv, p.hdim, p.causal as u8
    )
}
