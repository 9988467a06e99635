//! Pull-based sources of explicit per-WarpGroup instruction streams.
//!
//! A role marked `stream` in the kernel takes its instructions from a
//! [`StreamSource`] instead of a compact program: the simulator pulls the
//! `pos`-th resolved [`Op`] of a WarpGroup when it is about to issue it, so a
//! host can stream a recorded trace from a file with bounded memory. Each
//! position is pulled once, in increasing order per WarpGroup.

use crate::isa::Op;

/// The source could not produce an instruction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SourceError;

/// Supplies explicit instruction streams.
pub trait StreamSource {
    /// The `pos`-th instruction of WarpGroup `wg` (within role `role`) of CTA
    /// `cta`, or `None` at the end of its stream (an implicit exit).
    fn pull(&mut self, cta: u32, role: u8, wg: u8, pos: u64) -> Result<Option<Op>, SourceError>;

    /// False only for [`NoStream`], so that a kernel with stream roles is
    /// rejected when the simulator is built rather than when it first pulls.
    fn is_present(&self) -> bool {
        true
    }
}

/// The source of kernels without stream roles; every pull fails.
#[derive(Clone, Copy, Debug, Default)]
pub struct NoStream;

impl StreamSource for NoStream {
    fn pull(&mut self, _: u32, _: u8, _: u8, _: u64) -> Result<Option<Op>, SourceError> {
        Err(SourceError)
    }

    fn is_present(&self) -> bool {
        false
    }
}

impl<S: StreamSource + ?Sized> StreamSource for &mut S {
    fn pull(&mut self, cta: u32, role: u8, wg: u8, pos: u64) -> Result<Option<Op>, SourceError> {
        (**self).pull(cta, role, wg, pos)
    }

    fn is_present(&self) -> bool {
        (**self).is_present()
    }
}
