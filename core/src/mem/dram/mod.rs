//! The HBM part of the memory hierarchy: one FR-FCFS controller per
//! pseudo-channel, with the JEDEC timing constraints of HBM2e/HBM3/HBM3e.
//!
//! # Model
//!
//! A [`DramConfig`] describes the organisation (pseudo-channels, bank groups,
//! banks, rows, columns of bursts), the timing in DRAM clocks, the clock
//! ratio to the SM clock as an exact [`Ratio`](crate::time::Ratio), the queue
//! depths and the address mapping. [`Dram`] holds every pseudo-channel's
//! controller in tables carved from a caller-provided arena:
//!
//! - a read and a write queue per pseudo-channel (fixed capacity; a full
//!   queue answers [`DramFull`], the caller retries: back-pressure, never a
//!   drop);
//! - per-bank state (open row, the earliest clock each command may issue)
//!   and per-bank-group and per-channel constraint timers;
//! - FR-FCFS scheduling: among commands that may issue now, row hits
//!   first, then the oldest request; ties cannot happen (arrival sequence
//!   numbers are unique), so the schedule is fully deterministic;
//! - open-page policy, precharge on conflict (never while an older queued
//!   request still hits the open row), write draining between watermarks,
//!   all-bank refresh every `n_refi` (PREA, then REF, blocking `n_rfc`).
//!
//! A line request (`line_bytes`, 128 for the L2) becomes
//! `line_bytes / burst_bytes` column commands to consecutive columns of one
//! row; it completes when its last burst's data has crossed the bus (reads)
//! or has been written (writes), plus the controller pipeline latency
//! `ctrl_latency`.
//!
//! # Time
//!
//! The interface speaks SM cycles; inside, everything is in DRAM clocks.
//! SM cycle `s` covers DRAM clocks up to `floor(s * clock)`, and an event at
//! DRAM clock `k` is reported at SM cycle `ceil(k / clock)`, never earlier
//! than it happened. No floating point is used.
//!
//! The controller is event-driven: [`Dram::next_event`] names the next SM
//! cycle at which a command can issue or data returns, and
//! [`Dram::advance`] processes everything up to a cycle, channel by channel
//! in (DRAM clock, channel index) order through a tournament tree, so idle
//! channels cost nothing but their refreshes.
//!
//! # Checking
//!
//! [`Dram::advance_observed`] reports every issued [`Command`].
//! [`TimingChecker`] is an independent implementation of the JEDEC rules
//! that verifies such a command stream, naming the violated constraint.

mod check;
mod config;
mod ctrl;
mod map;
mod presets;
mod sched;
mod state;
#[cfg(test)]
pub(crate) mod tests;
mod tree;

use core::fmt;

pub use check::{TimingChecker, Violation};
pub use config::{AddressMapping, DramConfig, DramTiming, MapField};
pub use ctrl::{Dram, DramStats};
pub use map::DramAddr;

/// The kind of a DRAM command.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum CommandKind {
    /// Activate (open) a row of one bank.
    Act,
    /// Precharge (close) one bank.
    Pre,
    /// Precharge all banks of the pseudo-channel.
    PreA,
    /// Read one burst from an open row.
    Rd,
    /// Write one burst to an open row.
    Wr,
    /// All-bank refresh.
    Ref,
}

impl CommandKind {
    /// The JEDEC mnemonic.
    pub const fn name(self) -> &'static str {
        match self {
            CommandKind::Act => "ACT",
            CommandKind::Pre => "PRE",
            CommandKind::PreA => "PREA",
            CommandKind::Rd => "RD",
            CommandKind::Wr => "WR",
            CommandKind::Ref => "REF",
        }
    }
}

/// One command issued by a controller.
///
/// `bank_group`, `bank`, `row` and `col` are zero where the command does
/// not use them (PREA, REF; `col` for ACT and PRE). A PRE names the row it
/// closes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Command {
    /// DRAM clock at which it issued.
    pub clock: u64,
    /// Pseudo-channel.
    pub channel: u16,
    /// What it does.
    pub kind: CommandKind,
    /// Bank group within the pseudo-channel.
    pub bank_group: u8,
    /// Bank within the bank group.
    pub bank: u8,
    /// Row.
    pub row: u32,
    /// Column (burst index within the row).
    pub col: u16,
}

impl fmt::Display for Command {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} at clock {} on channel {} (bank group {}, bank {}, row {}, column {})",
            self.kind.name(),
            self.clock,
            self.channel,
            self.bank_group,
            self.bank,
            self.row,
            self.col
        )
    }
}

/// A request that finished.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Completion {
    /// The tag given to [`Dram::try_enqueue`].
    pub tag: u32,
    /// A write.
    pub write: bool,
    /// SM cycle at which a read's data is back or a write has been
    /// written, controller pipeline latency included.
    pub cycle: u64,
}

/// The pseudo-channel's queue for this kind of request is full; retry
/// after the next [`Dram::advance`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct DramFull {
    /// The full pseudo-channel.
    pub channel: u16,
}

impl fmt::Display for DramFull {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "DRAM pseudo-channel {} queue full", self.channel)
    }
}

impl core::error::Error for DramFull {}
