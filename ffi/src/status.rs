//! The one result type of every entry point, and how core errors map to it.

use simfa_core::error::DecodeError;
use simfa_core::{BuildError, SimError, SnapshotError};

/// The result of every `simfa_*` call: `SIMFA_STATUS_OK` or the reason it
/// failed. [`simfa_last_error_message`](crate::simfa_last_error_message)
/// gives a sentence about the last failure of a simulator handle.
///
/// The numeric values are stable: new codes are only ever appended.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SimfaStatus {
    /// Success.
    Ok = 0,
    /// A required pointer argument was null.
    NullPointer = 1,
    /// A pointer was not aligned for its type (the simulator memory must be
    /// aligned to `SIMFA_MEM_ALIGN`).
    BadAlignment = 2,
    /// A caller buffer is too small; the call's size output (where it has
    /// one) holds the size needed.
    BufferTooSmall = 3,
    /// The kernel bytes are not a valid binary kernel, or the kernel does
    /// not fit the configuration.
    BadKernel = 4,
    /// The configuration is invalid or not a configuration at all.
    BadConfig = 5,
    /// An argument is out of range (a sample index, a preset name, a
    /// handle that `simfa_init` did not make).
    BadArgument = 6,
    /// The kernel deadlocked: no WarpGroup can make progress again.
    Deadlock = 7,
    /// The run passed the configuration's watchdog cycle limit.
    Watchdog = 8,
    /// Another run-time failure of the simulation (a capacity ran out, an
    /// operand out of range, an over-arrived barrier, ...).
    SimFailed = 9,
    /// The snapshot is of another configuration or kernel.
    SnapshotMismatch = 10,
    /// The bytes are not a snapshot this build can restore (magic,
    /// version, truncation, checksum, impossible contents).
    BadSnapshot = 11,
    /// The operation needs `memory = external` and the simulator does not
    /// use it.
    NotExternal = 12,
    /// `simfa_ext_complete` named an id that is not outstanding (never
    /// issued, or already completed).
    UnknownRequest = 13,
    /// `simfa_ext_complete` named a cycle before the simulator's current
    /// cycle.
    CompletionInPast = 14,
    /// A Rust panic was caught at the boundary (a simfa bug; only with the
    /// `std` feature, without it a panic reaches the firmware's handler).
    Panic = 15,
}

impl SimfaStatus {
    /// A short, static, NUL-terminated name of the code.
    pub const fn name(self) -> &'static str {
        match self {
            SimfaStatus::Ok => "ok\0",
            SimfaStatus::NullPointer => "null pointer\0",
            SimfaStatus::BadAlignment => "bad alignment\0",
            SimfaStatus::BufferTooSmall => "buffer too small\0",
            SimfaStatus::BadKernel => "bad kernel\0",
            SimfaStatus::BadConfig => "bad configuration\0",
            SimfaStatus::BadArgument => "bad argument\0",
            SimfaStatus::Deadlock => "deadlock\0",
            SimfaStatus::Watchdog => "watchdog\0",
            SimfaStatus::SimFailed => "simulation failed\0",
            SimfaStatus::SnapshotMismatch => "snapshot of another configuration or kernel\0",
            SimfaStatus::BadSnapshot => "bad snapshot\0",
            SimfaStatus::NotExternal => "memory model is not external\0",
            SimfaStatus::UnknownRequest => "unknown request id\0",
            SimfaStatus::CompletionInPast => "completion in the past\0",
            SimfaStatus::Panic => "panic\0",
        }
    }
}

impl From<BuildError> for SimfaStatus {
    fn from(e: BuildError) -> Self {
        match e {
            BuildError::ArenaTooSmall { .. } => SimfaStatus::BufferTooSmall,
            BuildError::Config(_) => SimfaStatus::BadConfig,
            // A kernel that does not fit the configuration, or tables too
            // large for the address space: the kernel's fault either way.
            _ => SimfaStatus::BadKernel,
        }
    }
}

impl From<DecodeError> for SimfaStatus {
    fn from(_: DecodeError) -> Self {
        SimfaStatus::BadKernel
    }
}

impl From<SimError> for SimfaStatus {
    fn from(e: SimError) -> Self {
        match e {
            SimError::Deadlock { .. } => SimfaStatus::Deadlock,
            SimError::Watchdog { .. } => SimfaStatus::Watchdog,
            _ => SimfaStatus::SimFailed,
        }
    }
}

impl From<SnapshotError> for SimfaStatus {
    fn from(e: SnapshotError) -> Self {
        match e {
            SnapshotError::BufferTooSmall { .. } => SimfaStatus::BufferTooSmall,
            SnapshotError::Mismatch => SimfaStatus::SnapshotMismatch,
            SnapshotError::Build(b) => b.into(),
            _ => SimfaStatus::BadSnapshot,
        }
    }
}

/// The name of a status code as a static NUL-terminated string (never
/// null; `"unknown status"` for a value outside the enum).
#[no_mangle]
pub extern "C" fn simfa_status_name(status: i32) -> *const core::ffi::c_char {
    const ALL: [SimfaStatus; 16] = [
        SimfaStatus::Ok,
        SimfaStatus::NullPointer,
        SimfaStatus::BadAlignment,
        SimfaStatus::BufferTooSmall,
        SimfaStatus::BadKernel,
        SimfaStatus::BadConfig,
        SimfaStatus::BadArgument,
        SimfaStatus::Deadlock,
        SimfaStatus::Watchdog,
        SimfaStatus::SimFailed,
        SimfaStatus::SnapshotMismatch,
        SimfaStatus::BadSnapshot,
        SimfaStatus::NotExternal,
        SimfaStatus::UnknownRequest,
        SimfaStatus::CompletionInPast,
        SimfaStatus::Panic,
    ];
    let s = ALL
        .iter()
        .find(|s| **s as i32 == status)
        .map_or("unknown status\0", |s| s.name());
    s.as_ptr().cast()
}
