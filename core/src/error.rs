//! Small, `Copy`, typed errors: one enum per operation.

use core::fmt;

use crate::wait::WaitReason;

/// A fixed capacity of the simulator. Running out of one is an error that
/// names it; every capacity is sized from the configuration and the kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub enum Capacity {
    /// The arena as a whole.
    Arena,
    /// Physical thread (resident WarpGroup) table.
    Threads,
    /// Resident CTA table.
    Ctas,
    /// Per-CTA mbarrier states.
    Mbarriers,
    /// Per-CTA stage states.
    Stages,
    /// Per-CTA named-barrier states.
    NamedBarriers,
    /// The shared asynchronous event queue.
    EventQueue,
    /// Per-SM state tables.
    Sms,
    /// Memory-port state.
    MemoryPort,
    /// Committed-but-unfinished WGMMA groups of one WarpGroup.
    WgmmaGroups,
    /// Nesting depth of loops in one program.
    LoopDepth,
}

impl Capacity {
    /// A short name for messages.
    pub const fn name(self) -> &'static str {
        match self {
            Capacity::Arena => "arena",
            Capacity::Threads => "thread table",
            Capacity::Ctas => "CTA table",
            Capacity::Mbarriers => "mbarrier table",
            Capacity::Stages => "stage table",
            Capacity::NamedBarriers => "named-barrier table",
            Capacity::EventQueue => "event queue",
            Capacity::Sms => "SM table",
            Capacity::MemoryPort => "memory port table",
            Capacity::WgmmaGroups => "WGMMA group table (max_wgmma_groups)",
            Capacity::LoopDepth => "loop stack (max depth)",
        }
    }
}

impl fmt::Display for Capacity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Why a simulator could not be built.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub enum BuildError {
    /// The arena handed in is smaller than [`crate::Simulator::arena_size`].
    ArenaTooSmall {
        /// The table that did not fit.
        table: Capacity,
        /// Bytes that were available.
        available: usize,
    },
    /// The tables would not fit in the address space.
    TooLarge,
    /// The configuration is invalid.
    Config(ConfigError),
    /// The kernel is invalid or does not fit the configuration.
    Kernel(KernelError),
}

impl fmt::Display for BuildError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BuildError::ArenaTooSmall { table, available } => write!(
                f,
                "arena too small: the {table} does not fit in the {available} bytes left"
            ),
            BuildError::TooLarge => f.write_str("simulation tables exceed the address space"),
            BuildError::Config(e) => write!(f, "invalid configuration: {e}"),
            BuildError::Kernel(e) => write!(f, "invalid kernel: {e}"),
        }
    }
}

impl core::error::Error for BuildError {}

impl From<ConfigError> for BuildError {
    fn from(e: ConfigError) -> Self {
        BuildError::Config(e)
    }
}

impl From<KernelError> for BuildError {
    fn from(e: KernelError) -> Self {
        BuildError::Kernel(e)
    }
}

/// A configuration field that is out of its valid range.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct ConfigError {
    /// The field, as named in TOML configuration files.
    pub field: &'static str,
    /// What is wrong with it.
    pub problem: &'static str,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "field `{}`: {}", self.field, self.problem)
    }
}

impl core::error::Error for ConfigError {}

/// What a kernel is wrong about. `at` fields are instruction indices into
/// [`crate::Kernel::code`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub enum KernelError {
    /// A grid dimension is zero or the grid is too large.
    BadGrid,
    /// The kernel has no roles, or a role has zero WarpGroups.
    NoWarpGroups,
    /// More WarpGroups per CTA than a CTA may have (1024 threads = 8).
    TooManyWarpGroups,
    /// A role's program range lies outside the code table.
    BadProgramRange {
        /// Role index.
        role: u8,
    },
    /// An operand refers to an expression that does not exist.
    BadExpr {
        /// Instruction index.
        at: u16,
    },
    /// An operand names a tensor map that does not exist.
    BadTensorMap {
        /// Instruction index.
        at: u16,
    },
    /// An operand names an mbarrier array that does not exist.
    BadMbarrier {
        /// Instruction index.
        at: u16,
    },
    /// An operand names a stage array that does not exist.
    BadStage {
        /// Instruction index.
        at: u16,
    },
    /// A tensor map is malformed.
    BadTensorMapShape {
        /// Tensor map index.
        map: u8,
        /// What is wrong.
        problem: &'static str,
    },
    /// A declaration (mbarrier or stage array) is malformed.
    BadDeclaration {
        /// What is wrong.
        problem: &'static str,
    },
    /// A WGMMA with an N that Hopper does not support (multiples of 8, 8..=256).
    BadWgmmaShape {
        /// Instruction index.
        at: u16,
        /// The offending N.
        n: u16,
    },
    /// An `st.global` or `ld.global` whose sector requests would carry no
    /// bytes or more than a 32-byte sector.
    BadSegment {
        /// Instruction index.
        at: u16,
        /// The instruction's mnemonic.
        op: &'static str,
        /// The offending segment.
        segment: u8,
    },
    /// A cluster shape with a zero side, more than
    /// [`crate::cluster::MAX_CLUSTER`] CTAs, or a side that does not divide
    /// the grid's.
    BadCluster {
        /// CTAs per cluster along x, y, z.
        dims: [u8; 3],
        /// The grid.
        grid: [u32; 3],
    },
    /// A multicast or cluster-release mask with bits beyond x, y and z, or
    /// used by a kernel launched without clusters.
    BadClusterMask {
        /// Instruction index.
        at: u16,
        /// The offending mask.
        mask: u8,
    },
    /// One cluster needs more SMs than the GPU has.
    ClusterDoesNotFit {
        /// CTAs per cluster.
        size: u32,
        /// SMs of the GPU.
        sms: u32,
    },
    /// A named-barrier thread count that is zero or not a multiple of 128.
    BadThreadCount {
        /// Instruction index.
        at: u16,
    },
    /// Loop begin and end markers do not pair up within a program.
    UnbalancedLoop {
        /// Instruction index.
        at: u16,
    },
    /// Loops nest deeper than [`crate::isa::MAX_LOOP_DEPTH`].
    LoopTooDeep {
        /// Instruction index.
        at: u16,
        /// The deepest nesting allowed ([`crate::isa::MAX_LOOP_DEPTH`]).
        max: u8,
    },
    /// A loop body that contains no timed instruction (it would spin in zero time).
    EmptyLoop {
        /// Instruction index.
        at: u16,
    },
    /// An expression references a loop counter deeper than its nesting.
    BadLoopCounter {
        /// Instruction index.
        at: u16,
    },
    /// An expression divides or takes a remainder by a negative number, or
    /// scales without a division or remainder.
    BadExprDivisor {
        /// Expression index.
        expr: u16,
    },
    /// One CTA needs more of a resource than an SM has.
    CtaDoesNotFit {
        /// The resource: `"shared memory"`, `"registers"`, `"warps"`.
        resource: &'static str,
        /// How much one CTA needs.
        need: u32,
        /// How much one SM has.
        have: u32,
    },
    /// A role's register count exceeds the per-thread maximum.
    TooManyRegisters {
        /// Role index.
        role: u8,
    },
    /// A stream role is used but no stream source was given.
    NoStreamSource {
        /// Role index.
        role: u8,
    },
}

impl fmt::Display for KernelError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            KernelError::BadGrid => {
                f.write_str("grid dimensions must be >= 1 and the grid below 2^32 CTAs")
            }
            KernelError::NoWarpGroups => {
                f.write_str("a CTA needs at least one role with at least one WarpGroup")
            }
            KernelError::TooManyWarpGroups => {
                f.write_str("a CTA may have at most 8 WarpGroups (1024 threads)")
            }
            KernelError::BadProgramRange { role } => {
                write!(f, "role {role}: program lies outside the code table")
            }
            KernelError::BadExpr { at } => {
                write!(f, "instruction {at}: expression id out of range")
            }
            KernelError::BadTensorMap { at } => {
                write!(f, "instruction {at}: tensor map id out of range")
            }
            KernelError::BadMbarrier { at } => {
                write!(f, "instruction {at}: mbarrier id out of range")
            }
            KernelError::BadStage { at } => write!(f, "instruction {at}: stage id out of range"),
            KernelError::BadTensorMapShape { map, problem } => {
                write!(f, "tensor map {map}: {problem}")
            }
            KernelError::BadDeclaration { problem } => f.write_str(problem),
            KernelError::BadWgmmaShape { at, n } => write!(
                f,
                "instruction {at}: wgmma N={n} is not a Hopper shape (multiple of 8 in 8..=256)"
            ),
            KernelError::BadSegment { at, op, segment } => write!(
                f,
                "instruction {at}: {op} segment {segment} is not 1 to 32 bytes (one sector request)"
            ),
            KernelError::BadCluster {
                dims: [x, y, z],
                grid: [gx, gy, gz],
            } => write!(
                f,
                "cluster {x}x{y}x{z} must have sides >= 1, at most 16 CTAs, and sides dividing the grid {gx}x{gy}x{gz}"
            ),
            KernelError::BadClusterMask { at, mask } => write!(
                f,
                "instruction {at}: cluster mask {mask:#05b} needs a clustered kernel and bits only for x, y and z"
            ),
            KernelError::ClusterDoesNotFit { size, sms } => write!(
                f,
                "one cluster of {size} CTAs needs {size} SMs but the GPU has {sms}"
            ),
            KernelError::BadThreadCount { at } => write!(
                f,
                "instruction {at}: named-barrier thread count must be a non-zero multiple of 128"
            ),
            KernelError::UnbalancedLoop { at } => {
                write!(f, "instruction {at}: loop begin/end do not pair up")
            }
            KernelError::LoopTooDeep { at, max } => {
                write!(f, "instruction {at}: loops nest deeper than {max}")
            }
            KernelError::EmptyLoop { at } => {
                write!(f, "instruction {at}: loop body has no timed instruction")
            }
            KernelError::BadLoopCounter { at } => write!(
                f,
                "instruction {at}: expression uses a loop counter outside its loops"
            ),
            KernelError::BadExprDivisor { expr } => {
                write!(f, "expression {expr}: divisor and modulus must be positive, and a scale needs one of them")
            }
            KernelError::CtaDoesNotFit {
                resource,
                need,
                have,
            } => write!(f, "one CTA needs {need} {resource} but an SM has {have}"),
            KernelError::TooManyRegisters { role } => write!(
                f,
                "role {role}: registers per thread above the per-thread maximum"
            ),
            KernelError::NoStreamSource { role } => write!(
                f,
                "role {role} reads an explicit stream but no stream source was given"
            ),
        }
    }
}

impl core::error::Error for KernelError {}

/// Why a binary kernel could not be decoded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub enum DecodeError {
    /// Shorter than the header.
    Truncated,
    /// The magic bytes are wrong: not a simfa binary kernel.
    BadMagic,
    /// A format version this build does not read.
    BadVersion {
        /// The version found.
        found: u16,
        /// The version this build reads ([`crate::encode::VERSION`]).
        reads: u16,
    },
    /// The body is malformed (bad variant tag, count over a capacity, truncated field).
    Malformed,
    /// Bytes remain after the kernel.
    TrailingBytes,
    /// The decoded kernel is invalid.
    Invalid(KernelError),
    /// The output buffer is too small (encoding only).
    BufferFull,
}

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DecodeError::Truncated => f.write_str("truncated: shorter than the 10-byte header"),
            DecodeError::BadMagic => f.write_str("wrong magic: not a simfa binary kernel"),
            DecodeError::BadVersion { found, reads } => write!(
                f,
                "unsupported format version {found} (this build reads {reads})"
            ),
            DecodeError::Malformed => f.write_str(
                "malformed body: unknown instruction tag, count over a capacity, or truncated field",
            ),
            DecodeError::TrailingBytes => f.write_str("trailing bytes after the kernel"),
            DecodeError::Invalid(e) => write!(f, "invalid kernel: {e}"),
            DecodeError::BufferFull => f.write_str("output buffer too small"),
        }
    }
}

impl core::error::Error for DecodeError {}

/// A run-time failure of the simulation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub enum SimError {
    /// No WarpGroup can ever make progress again. The first waiter is named
    /// here; [`crate::Simulator::waiters`] lists all of them.
    Deadlock {
        /// Cycle at which the deadlock was detected.
        cycle: u64,
        /// Number of waiting WarpGroups.
        waiting: u32,
        /// The first waiter's CTA.
        cta: u32,
        /// The first waiter's role index.
        role: u8,
        /// What it waits on.
        reason: WaitReason,
    },
    /// The run passed the configured watchdog cycle limit.
    Watchdog {
        /// The limit.
        limit: u64,
    },
    /// A fixed capacity ran out during the run.
    CapacityExceeded {
        /// Which one.
        capacity: Capacity,
        /// Cycle at which it happened.
        cycle: u64,
    },
    /// An operand evaluated to an index outside its array.
    IndexOutOfRange {
        /// What was indexed: `"mbarrier"`, `"stage"`, `"named barrier"`.
        what: &'static str,
        /// The evaluated index.
        index: i64,
        /// The CTA.
        cta: u32,
        /// The role index.
        role: u8,
        /// Cycle.
        cycle: u64,
    },
    /// More arrivals on an mbarrier than its count allows in one phase.
    BarrierOverArrive {
        /// Barrier index within the CTA.
        barrier: u16,
        /// The CTA.
        cta: u32,
        /// Cycle.
        cycle: u64,
    },
    /// Nothing is queued and no WarpGroup waits, yet CTAs are unfinished
    /// (an internal inconsistency of the simulator; please report it).
    NoProgress {
        /// Cycle.
        cycle: u64,
        /// CTAs not yet retired.
        unfinished: u32,
    },
    /// A count in the simulation state went below zero or a loop stack
    /// over- or underflowed, so the state contradicts itself: only a
    /// damaged (but checksum-valid) snapshot passed to
    /// [`crate::Simulator::restore`] can do this.
    Inconsistent {
        /// What: `"WGMMAs in flight"`, `"transfers in flight"`, `"loop nesting"`.
        what: &'static str,
        /// Cycle.
        cycle: u64,
    },
    /// [`crate::Simulator::run`] with the external memory model: the run
    /// waits on the host's answers and nothing else (see
    /// [`crate::external`]; a host steps and completes requests instead).
    ExternalPending {
        /// Cycle.
        cycle: u64,
        /// Requests issued and not completed.
        outstanding: u32,
    },
    /// The stream source failed to produce an instruction.
    Source {
        /// The CTA.
        cta: u32,
        /// The role index.
        role: u8,
    },
}

impl fmt::Display for SimError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            SimError::Deadlock { cycle, waiting, cta, role, reason } => write!(
                f,
                "deadlock at cycle {cycle}: {waiting} WarpGroup(s) wait forever; first: CTA {cta} role {role} waits on {reason}"
            ),
            SimError::Watchdog { limit } => write!(f, "watchdog: run passed the limit of {limit} cycles"),
            SimError::CapacityExceeded { capacity, cycle } => write!(f, "capacity exceeded at cycle {cycle}: {capacity}"),
            SimError::IndexOutOfRange { what, index, cta, role, cycle } => write!(
                f,
                "cycle {cycle}: CTA {cta} role {role}: {what} index {index} out of range"
            ),
            SimError::BarrierOverArrive { barrier, cta, cycle } => write!(
                f,
                "cycle {cycle}: CTA {cta}: more arrivals on mbarrier {barrier} than its count"
            ),
            SimError::NoProgress { cycle, unfinished } => write!(
                f,
                "cycle {cycle}: no event pending and no WarpGroup waiting, yet {unfinished} CTA(s) unfinished (simulator bug)"
            ),
            SimError::Inconsistent { what, cycle } => write!(
                f,
                "cycle {cycle}: {what} out of range: the state is inconsistent (a damaged snapshot?)"
            ),
            SimError::ExternalPending { cycle, outstanding } => write!(
                f,
                "cycle {cycle}: the run waits on {outstanding} external memory request(s) that only a host can answer"
            ),
            SimError::Source { cta, role } => write!(f, "stream source failed for CTA {cta} role {role}"),
        }
    }
}

impl core::error::Error for SimError {}
