//! Observation of a run: the canonical event stream, observers and counters.
//!
//! Every timing-visible action of the simulator is an [`Event`]. Events are
//! emitted in the canonical order (cycle, then processing order, which is
//! itself deterministic) to the [`Observer`] of the call and folded into the
//! run's digest. The unit observer `()` costs nothing.
//!
//! # Detail events
//!
//! Some variants ([`Event::is_detail`]) describe data movement line by line
//! (TMA line requests and landings, L2 fills and answers, DRAM read
//! completions, stage acquisitions) for consistency checkers. They are built
//! and delivered only to observers whose [`Observer::wants_detail`] is true,
//! and they are never folded into the digest: asking for them changes
//! neither the run nor its digest.

use crate::isa::Op;
use crate::time::Cycle;
use crate::wait::WaitReason;

/// Identifies a physical thread (a resident WarpGroup) in events.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Who {
    /// SM.
    pub sm: u16,
    /// Linear CTA index.
    pub cta: u32,
    /// WarpGroup index within the CTA.
    pub wg: u8,
    /// Role index.
    pub role: u8,
}

/// A timing-visible event.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Event {
    /// A CTA became resident on an SM.
    CtaLaunch {
        /// SM.
        sm: u16,
        /// CTA.
        cta: u32,
    },
    /// A CTA finished and released its resources.
    CtaRetire {
        /// SM.
        sm: u16,
        /// CTA.
        cta: u32,
    },
    /// A WarpGroup issued an instruction.
    Issue {
        /// Issuer.
        who: Who,
        /// The resolved instruction.
        op: Op,
    },
    /// A WarpGroup stalled.
    Stall {
        /// Staller.
        who: Who,
        /// What it waits on.
        reason: WaitReason,
    },
    /// A stalled or sleeping WarpGroup became ready.
    Wake {
        /// The WarpGroup.
        who: Who,
    },
    /// A WGMMA was scheduled on the tensor pipe for `[start, end)`.
    WgmmaStart {
        /// Issuer.
        who: Who,
        /// First busy cycle.
        start: u64,
        /// Completion cycle.
        end: u64,
    },
    /// A WGMMA completed.
    WgmmaDone {
        /// Issuer.
        who: Who,
    },
    /// A TMA or bulk operation was issued; with the fixed port and the
    /// transaction-level model it lands at `done` (the latter reports it at
    /// the end of the cycle, when the cycle's operations are handed over);
    /// with the line-level model, and for a load the arrival-order
    /// controller lands, its landing is known only at its `TmaDone`
    /// (`None`).
    TmaIssue {
        /// Issuer.
        who: Who,
        /// Bytes moved.
        bytes: u64,
        /// True for stores.
        store: bool,
        /// Completion cycle, when known at issue.
        done: Option<u64>,
        /// Operation id: the number of TMA operations issued before it in
        /// this run (wrapping). Not part of the digest.
        op: u32,
        /// The mbarrier a load delivers its bytes to (CTA-wide index);
        /// `None` for stores. Not part of the digest.
        bar: Option<u16>,
    },
    /// A TMA or bulk transfer completed (its completion was signalled: its
    /// bytes were delivered to its mbarrier, or its store counted down).
    TmaDone {
        /// Issuer.
        who: Who,
        /// Bytes moved.
        bytes: u64,
        /// True for stores.
        store: bool,
        /// Operation id (as in [`Event::TmaIssue`]). Not part of the digest.
        op: u32,
        /// The mbarrier of a load; `None` for stores. Not part of the digest.
        bar: Option<u16>,
    },
    /// The DRAM accepted a line request (memory hierarchy only).
    DramRequest {
        /// A write-back rather than a read.
        write: bool,
        /// Line address.
        addr: u64,
    },
    /// An mbarrier completed a phase.
    PhaseComplete {
        /// SM.
        sm: u16,
        /// CTA.
        cta: u32,
        /// CTA-wide mbarrier index.
        bar: u16,
        /// Phases completed so far.
        phase: u32,
    },
    /// Detail: TMA operation `op` of SM `sm` sent a line request to the L2
    /// (memory hierarchy only).
    TmaLineRequest {
        /// SM.
        sm: u16,
        /// Operation id.
        op: u32,
        /// Line address.
        addr: u64,
    },
    /// Detail: a line of TMA operation `op` came back to SM `sm`: for a load,
    /// its bytes are now in shared memory (memory hierarchy only).
    TmaLineLanded {
        /// SM.
        sm: u16,
        /// Operation id.
        op: u32,
        /// Line address.
        addr: u64,
    },
    /// Detail: the DRAM completed the read of a line for an L2 fill.
    DramDone {
        /// Line address.
        addr: u64,
    },
    /// Detail: an L2 slice received a line: DRAM data for a fill (usable
    /// from `ready`), or a full-line write of a TMA store (`write`, usable
    /// from `ready`, the cycle it reached the slice).
    LineFill {
        /// Line address.
        addr: u64,
        /// Slice.
        slice: u16,
        /// First cycle the data can be read.
        ready: u64,
        /// A store's write rather than a DRAM fill.
        write: bool,
    },
    /// Detail: an L2 slice answered a read of a line: a hit (home or shadow
    /// copy) looked up at `at`, or a miss answered by its fill.
    LineServed {
        /// Line address.
        addr: u64,
        /// Slice that answered.
        slice: u16,
        /// Answered from the tags rather than by a fill.
        hit: bool,
        /// Cycle the slice looked the line up for this answer: the request's
        /// arrival for a hit, the cycle the fill became usable for a miss.
        at: u64,
        /// Cycle the data leaves the slice.
        served: u64,
    },
    /// Detail: a WarpGroup acquired a stage for its producer role.
    StageAcquired {
        /// Acquirer.
        who: Who,
        /// CTA-wide stage index.
        stage: u16,
        /// Releases each round of the stage needs.
        consumers: u16,
    },
    /// Detail: TMA load `op` (just issued) also lands in CTA `cta` of its
    /// issuer's cluster, on the same mbarrier (see [`crate::cluster`]).
    TmaMulticast {
        /// Operation id (see [`Event::TmaIssue`]).
        op: u32,
        /// Linear index of the destination CTA.
        cta: u32,
    },
    /// Detail: a WarpGroup released stage `stage` of another CTA of its
    /// cluster (a `stage.release` along cluster dimensions).
    RemoteRelease {
        /// Releaser.
        who: Who,
        /// Linear index of the CTA whose stage was released.
        cta: u32,
        /// CTA-wide stage index.
        stage: u16,
    },
}

impl Event {
    /// True for the detail variants: delivered only to observers that
    /// [want them](Observer::wants_detail), never folded into the digest.
    pub const fn is_detail(&self) -> bool {
        matches!(
            self,
            Event::TmaLineRequest { .. }
                | Event::TmaLineLanded { .. }
                | Event::DramDone { .. }
                | Event::LineFill { .. }
                | Event::LineServed { .. }
                | Event::StageAcquired { .. }
                | Event::TmaMulticast { .. }
                | Event::RemoteRelease { .. }
        )
    }

    /// Words folded into the digest for this event (detail events are
    /// never folded; they give zeros).
    pub(crate) fn digest_words(&self) -> [u64; 3] {
        let who = |w: &Who| {
            ((w.sm as u64) << 48) | ((w.wg as u64) << 40) | ((w.role as u64) << 32) | w.cta as u64
        };
        match self {
            Event::CtaLaunch { sm, cta } => [1, *sm as u64, *cta as u64],
            Event::CtaRetire { sm, cta } => [2, *sm as u64, *cta as u64],
            Event::Issue { who: w, op } => [3 | (op.code() as u64) << 8, who(w), op_word(op)],
            Event::Stall { who: w, .. } => [4, who(w), 0],
            Event::Wake { who: w } => [5, who(w), 0],
            Event::WgmmaStart { who: w, start, end } => [6 | start << 8, who(w), *end],
            Event::WgmmaDone { who: w } => [7, who(w), 0],
            // The landing cycle a port may know at issue (`done`) is left
            // out: `TmaDone` folds it when it happens, and a host serving
            // the external port gives it only then.
            Event::TmaIssue {
                who: w,
                bytes,
                store,
                ..
            } => [8 | (*store as u64) << 4 | bytes << 8, who(w), 0],
            Event::TmaDone {
                who: w,
                bytes,
                store,
                ..
            } => [9 | (*store as u64) << 4 | bytes << 8, who(w), 0],
            Event::DramRequest { write, addr } => [11 | (*write as u64) << 8, *addr, 0],
            Event::PhaseComplete {
                sm,
                cta,
                bar,
                phase,
            } => [
                10 | (*bar as u64) << 8,
                ((*sm as u64) << 32) | *cta as u64,
                *phase as u64,
            ],
            Event::TmaLineRequest { .. }
            | Event::TmaLineLanded { .. }
            | Event::DramDone { .. }
            | Event::LineFill { .. }
            | Event::LineServed { .. }
            | Event::StageAcquired { .. }
            | Event::TmaMulticast { .. }
            | Event::RemoteRelease { .. } => [0; 3],
        }
    }
}

fn op_word(op: &Op) -> u64 {
    match *op {
        Op::TmaLoad {
            map,
            bar,
            coords,
            multicast,
        } => {
            (map as u64)
                ^ ((bar as u64) << 8)
                ^ ((multicast as u64) << 60)
                ^ coords
                    .iter()
                    .fold(0u64, |a, &c| a.rotate_left(13) ^ c as u64)
        }
        Op::TmaStore { map, coords } => {
            (map as u64)
                ^ coords
                    .iter()
                    .fold(0u64, |a, &c| a.rotate_left(13) ^ c as u64)
        }
        Op::StGlobal {
            map,
            coords,
            segment,
        } => {
            (map as u64)
                ^ ((segment as u64) << 56)
                ^ coords
                    .iter()
                    .fold(0u64, |a, &c| a.rotate_left(13) ^ c as u64)
        }
        Op::LdGlobal {
            map,
            bar,
            coords,
            segment,
            l1,
        } => {
            op_word(&Op::StGlobal {
                map,
                coords,
                segment,
            }) ^ ((bar as u64) << 8)
                ^ ((l1 as u64) << 63)
        }
        Op::BulkLoad { bar, addr, bytes } => addr ^ ((bytes as u64) << 32) ^ bar as u64,
        Op::BulkStore { addr, bytes } => addr ^ ((bytes as u64) << 32),
        Op::StoreWait { n } | Op::WgmmaWait { n } => n as u64,
        Op::MbarInit { bar, count } => bar as u64 | (count as u64) << 16,
        // One arrival keeps the word of kernels written before counts.
        Op::MbarArrive { bar, count } => bar as u64 | ((count as u64).saturating_sub(1)) << 16,
        Op::MbarExpectTx { bar, bytes } => bar as u64 | (bytes as u64) << 16,
        Op::MbarWait { bar, parity } => bar as u64 | (parity as u64) << 16,
        Op::StageAcquire { stage } => stage as u64,
        Op::LockAcquire { lock } => lock as u64,
        Op::LockRelease { lock } => lock as u64 | 1 << 16,
        Op::CounterAdd { counter, amount } => counter as u64 | (amount as u64) << 16,
        Op::CounterWait { counter, count } => counter as u64 | (count as u64) << 16,
        Op::StageRelease { stage, cluster } => stage as u64 | (cluster as u64) << 16,
        // SS keeps the digest word of kernels written before modes existed.
        Op::Wgmma { n, mode } => n as u64 | (mode as u64) << 16,
        Op::BarSync { id, threads } | Op::BarArrive { id, threads } => {
            id as u64 | (threads as u64) << 8
        }
        Op::Bubble { cycles } => cycles as u64,
        Op::SmemMove { bytes } => bytes as u64,
        Op::Compute { work } => {
            work.fp32 as u64
                ^ (work.mufu as u64).rotate_left(16)
                ^ (work.fp16 as u64).rotate_left(32)
                ^ (work.int as u64).rotate_left(48)
        }
        Op::WgmmaCommit | Op::Exit => 0,
    }
}

/// Receives every event of a run. All methods default to doing nothing.
pub trait Observer {
    /// Called for each event, in canonical order, at the cycle it happens.
    /// Detail events ([`Event::is_detail`]) come only when
    /// [`Observer::wants_detail`] is true.
    fn on_event(&mut self, _cycle: Cycle, _event: &Event) {}

    /// Whether to build and deliver detail events. The simulator asks before
    /// building any, so an observer that says no (the default) costs
    /// nothing for them. The answer may change between calls.
    fn wants_detail(&self) -> bool {
        false
    }
}

impl Observer for () {}

impl<O: Observer + ?Sized> Observer for &mut O {
    fn on_event(&mut self, cycle: Cycle, event: &Event) {
        (**self).on_event(cycle, event)
    }

    fn wants_detail(&self) -> bool {
        (**self).wants_detail()
    }
}

impl<O: Observer> Observer for Option<O> {
    fn on_event(&mut self, cycle: Cycle, event: &Event) {
        if let Some(o) = self {
            o.on_event(cycle, event)
        }
    }

    fn wants_detail(&self) -> bool {
        self.as_ref().is_some_and(O::wants_detail)
    }
}

/// Two observers side by side: each sees every event, the first one first;
/// detail events go only to the side(s) that want them.
impl<A: Observer, B: Observer> Observer for (A, B) {
    fn on_event(&mut self, cycle: Cycle, event: &Event) {
        let detail = event.is_detail();
        if !detail || self.0.wants_detail() {
            self.0.on_event(cycle, event);
        }
        if !detail || self.1.wants_detail() {
            self.1.on_event(cycle, event);
        }
    }

    fn wants_detail(&self) -> bool {
        self.0.wants_detail() || self.1.wants_detail()
    }
}

/// Counters kept by every run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Stats {
    /// Instructions issued (control flow not counted).
    pub instructions: u64,
    /// WGMMA instructions executed.
    pub wgmmas: u64,
    /// Tensor-pipe busy cycles, summed over SMs.
    pub tensor_busy_cycles: u64,
    /// TMA and bulk operations issued.
    pub tma_ops: u64,
    /// Cache-line requests the TMA engines emitted (memory hierarchy only).
    pub tma_lines: u64,
    /// Cycles with at least one TMA operation in flight, summed over SMs.
    pub tma_busy_cycles: u64,
    /// Bytes loaded through TMA/bulk copies.
    pub bytes_loaded: u64,
    /// Bytes stored through TMA/bulk copies.
    pub bytes_stored: u64,
    /// Cycles the memory port spent moving bytes.
    pub port_busy_cycles: u64,
    /// Cycles WarpGroups spent stalled, summed over WarpGroups.
    pub stall_cycles: u64,
    /// Cycles WarpGroups spent in bubbles, summed over WarpGroups.
    pub bubble_cycles: u64,
    /// Cycles WarpGroups spent in `compute` instructions, summed over
    /// WarpGroups.
    pub compute_cycles: u64,
    /// CTAs retired.
    pub ctas_retired: u64,
    /// First cycle any tensor-core work started (`u64::MAX` if none).
    pub first_wgmma: u64,
    /// Last cycle any tensor-core work ended.
    pub last_wgmma: u64,
    /// Loads that went through an SM's L1.
    pub l1_loads: u64,
    /// Of those, the loads it served (every sector valid).
    pub l1_hits: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Count(u32, u64);
    impl Observer for Count {
        fn on_event(&mut self, cycle: Cycle, _event: &Event) {
            self.0 += 1;
            self.1 = cycle.0;
        }
    }

    #[test]
    fn pair_feeds_both_in_order() {
        let mut pair = (Count(0, 0), Some(Count(0, 0)));
        let ev = Event::CtaLaunch { sm: 1, cta: 2 };
        pair.on_event(Cycle(7), &ev);
        pair.on_event(Cycle(9), &ev);
        assert_eq!((pair.0 .0, pair.0 .1), (2, 9));
        let b = pair.1.as_ref().unwrap();
        assert_eq!((b.0, b.1), (2, 9));
    }

    struct Detailed(u32);
    impl Observer for Detailed {
        fn on_event(&mut self, _cycle: Cycle, _event: &Event) {
            self.0 += 1;
        }
        fn wants_detail(&self) -> bool {
            true
        }
    }

    #[test]
    fn detail_events_reach_only_observers_that_want_them() {
        let mut pair = (Count(0, 0), Detailed(0));
        assert!(pair.wants_detail());
        assert!(!(Count(0, 0), None::<Detailed>).wants_detail());
        let detail = Event::DramDone { addr: 128 };
        assert!(detail.is_detail());
        assert_eq!(detail.digest_words(), [0; 3]);
        pair.on_event(Cycle(3), &detail);
        pair.on_event(Cycle(4), &Event::CtaLaunch { sm: 0, cta: 0 });
        assert_eq!((pair.0 .0, pair.1 .0), (1, 2));
        let by_ref: &mut dyn Observer = &mut pair;
        assert!(by_ref.wants_detail());
    }
}
