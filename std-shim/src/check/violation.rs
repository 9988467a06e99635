//! What the read-after-transfer checker reports: the kinds of violation,
//! the site of each (an L2 line or a WarpGroup's TMA operation), and their
//! text.

use std::fmt;

/// What went wrong.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ViolationKind {
    /// A read answered (or a fill made) with no transfer of its line.
    NoTransfer,
    /// A read whose data left before its line's transfer completed.
    BeforeTransfer,
    /// An L2 hit answered sooner than the hit latency after its data arrived.
    HitTooSoon,
    /// A WGMMA reading a stage whose TMA bytes had not all landed.
    ReadBeforeLanding,
    /// A TMA load into a stage (or mbarrier) its consumers still needed.
    Overwrite,
    /// A TMA completion signalled before its data landed.
    EarlyCompletion,
}

impl ViolationKind {
    /// Every kind, in [`crate::check::ConsistencyChecker::counts`] order.
    pub const ALL: [ViolationKind; 6] = [
        ViolationKind::NoTransfer,
        ViolationKind::BeforeTransfer,
        ViolationKind::HitTooSoon,
        ViolationKind::ReadBeforeLanding,
        ViolationKind::Overwrite,
        ViolationKind::EarlyCompletion,
    ];

    /// A short kebab-case name.
    pub const fn name(self) -> &'static str {
        match self {
            ViolationKind::NoTransfer => "read-without-transfer",
            ViolationKind::BeforeTransfer => "read-before-transfer",
            ViolationKind::HitTooSoon => "hit-too-soon",
            ViolationKind::ReadBeforeLanding => "read-before-landing",
            ViolationKind::Overwrite => "overwrite-before-release",
            ViolationKind::EarlyCompletion => "early-completion",
        }
    }

    /// Its position in [`ViolationKind::ALL`].
    pub(crate) fn index(self) -> usize {
        self as usize
    }
}

impl fmt::Display for ViolationKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Where a violation happened.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Site {
    /// An L2 line.
    Line {
        /// Line address.
        addr: u64,
        /// The slice that answered (or was filled).
        slice: u16,
        /// Cycle the slice looked the line up.
        at: u64,
    },
    /// An mbarrier phase of a CTA.
    Barrier {
        /// SM.
        sm: u16,
        /// Linear CTA index.
        cta: u32,
        /// The WarpGroup (within the CTA) that read or waited, if one did.
        wg: Option<u8>,
        /// CTA-wide mbarrier index.
        bar: u16,
        /// The phase (1 = the barrier's first completion).
        phase: u32,
        /// The TMA operation concerned.
        op: u32,
    },
    /// A stage of a CTA.
    Stage {
        /// SM.
        sm: u16,
        /// Linear CTA index.
        cta: u32,
        /// CTA-wide stage index.
        stage: u16,
        /// Releases seen.
        released: u32,
        /// Releases needed before the stage may be written again.
        needed: u32,
        /// The TMA operation that wrote it.
        op: u32,
    },
    /// A TMA operation.
    Op {
        /// SM.
        sm: u16,
        /// Linear CTA index.
        cta: u32,
        /// Operation id.
        op: u32,
        /// Its mbarrier (loads).
        bar: Option<u16>,
        /// Its last line to land (memory hierarchy), once known.
        addr: Option<u64>,
    },
}

/// One inconsistency between a read and the transfers that should cause it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Violation {
    /// What went wrong.
    pub kind: ViolationKind,
    /// When the offending read was answered (L2), the WGMMA issued, the load
    /// issued or the completion signalled.
    pub cycle: u64,
    /// Where.
    pub site: Site,
    /// When the transfer the read needed completed: the line's earliest
    /// fill or write, the operation's landing; `None` while none is known.
    pub transfer_cycle: Option<u64>,
    /// The configured L2 hit latency (for [`ViolationKind::HitTooSoon`]).
    pub hit_latency: u64,
}

fn transfer(t: Option<u64>) -> String {
    match t {
        Some(c) => format!("at cycle {c}"),
        None => "not yet".to_string(),
    }
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: ", self.kind)?;
        match (self.kind, self.site) {
            (ViolationKind::NoTransfer, Site::Line { addr, slice, at }) => write!(
                f,
                "line {addr:#x} (slice {slice}) looked up at cycle {at} and answered at cycle {} \
                 with no transfer of that line before it",
                self.cycle
            ),
            (ViolationKind::BeforeTransfer, Site::Line { addr, slice, at }) => write!(
                f,
                "line {addr:#x} (slice {slice}) looked up at cycle {at} and answered at cycle {} \
                 before its transfer completed ({})",
                self.cycle,
                transfer(self.transfer_cycle)
            ),
            (ViolationKind::HitTooSoon, Site::Line { addr, slice, at }) => write!(
                f,
                "line {addr:#x} (slice {slice}) hit at cycle {at} and answered at cycle {}, \
                 sooner than the {}-cycle hit latency after its data arrived ({})",
                self.cycle,
                self.hit_latency,
                transfer(self.transfer_cycle)
            ),
            (
                ViolationKind::ReadBeforeLanding,
                Site::Barrier {
                    sm,
                    cta,
                    wg,
                    bar,
                    phase,
                    op,
                },
            ) => write!(
                f,
                "WGMMA of SM {sm} CTA {cta} WarpGroup {} at cycle {} reads mbarrier {bar} \
                 phase {phase}, whose TMA load #{op} had not landed (landed {})",
                wg.map_or("?".to_string(), |w| w.to_string()),
                self.cycle,
                transfer(self.transfer_cycle)
            ),
            (
                ViolationKind::Overwrite,
                Site::Barrier {
                    sm,
                    cta,
                    wg,
                    bar,
                    phase,
                    op,
                },
            ) => write!(
                f,
                "TMA load #{op} into mbarrier {bar} of SM {sm} CTA {cta} issued at cycle {} \
                 while WarpGroup {} had not yet passed its wait on phase {phase} (completed {})",
                self.cycle,
                wg.map_or("?".to_string(), |w| w.to_string()),
                transfer(self.transfer_cycle)
            ),
            (
                ViolationKind::Overwrite,
                Site::Stage {
                    sm,
                    cta,
                    stage,
                    released,
                    needed,
                    op,
                },
            ) => write!(
                f,
                "TMA load #{op} into stage {stage} of SM {sm} CTA {cta} issued at cycle {} \
                 before its consumers released it ({released} of {needed} releases)",
                self.cycle
            ),
            (
                ViolationKind::EarlyCompletion,
                Site::Op {
                    sm,
                    cta,
                    op,
                    bar,
                    addr,
                },
            ) => {
                write!(f, "TMA operation #{op} of SM {sm} CTA {cta}")?;
                if let Some(b) = bar {
                    write!(f, " (mbarrier {b})")?;
                }
                write!(
                    f,
                    " signalled complete at cycle {} before its data landed ({})",
                    self.cycle,
                    transfer(self.transfer_cycle)
                )?;
                if let Some(a) = addr {
                    write!(f, ", last line {a:#x}")?;
                }
                Ok(())
            }
            (_, site) => write!(
                f,
                "{site:?} at cycle {} (transfer {})",
                self.cycle,
                transfer(self.transfer_cycle)
            ),
        }
    }
}
