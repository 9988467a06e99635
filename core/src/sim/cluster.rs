//! Thread block clusters in the simulator (see [`crate::cluster`]): a
//! multicast load's landing in every destination CTA, and a stage released
//! in the other CTAs of a cluster.
//!
//! A multicast load is one operation of its issuer: it takes one TMA slot
//! and reads each line from the memory system once. When it lands, its
//! bytes complete the same mbarrier of every destination CTA in the same
//! cycle (the crossbar replicates the data; the destinations' own ports
//! are not charged for it). Between issue and landing the load carries a
//! *landing code*: its mbarrier index (below [`MAX_MBARRIERS`] = 256, so
//! one byte) with the multicast mask in the byte above; `u16::MAX` still
//! marks a store.

use heapless::Vec;

use super::Simulator;
use crate::cluster::MAX_CLUSTER;
use crate::kernel::MAX_MBARRIERS;
use crate::observer::{Event, Observer};
use crate::source::StreamSource;
use crate::wait::WaitReason;

const _: () = assert!(MAX_MBARRIERS <= 256);

/// The landing code of a load on mbarrier `bar` multicast along `mask`.
pub(super) fn landing_code(bar: u16, mask: u8) -> u16 {
    bar | (mask as u16) << 8
}

/// The mbarrier and multicast mask of a landing code (a store's code is
/// returned as it is, with no mask).
pub(super) fn split(code: u16) -> (u16, u8) {
    if code == u16::MAX {
        (code, 0)
    } else {
        (code & 0xFF, (code >> 8) as u8)
    }
}

impl<S: StreamSource> Simulator<'_, S> {
    /// The CTA slots of the CTAs of `ci`'s cluster along the dimensions in
    /// `mask` (`ci` itself included), in rank order.
    pub(super) fn cluster_slots(&self, ci: usize, mask: u8) -> Vec<usize, MAX_CLUSTER> {
        let c = &self.ctas[ci];
        let mut out = Vec::new();
        if mask == 0 {
            // Along no dimension: the CTA alone (no rank walk on the
            // landings and releases of unclustered kernels).
            let _ = out.push(ci);
            return out;
        }
        for r in self.kernel.cluster.peers(c.rank as u32, mask) {
            // At most MAX_CLUSTER ranks (a validated kernel).
            let _ = out.push(c.peers[r as usize] as usize);
        }
        out
    }

    /// Tells a detail observer where load `op` of thread `ti`, landing
    /// code `code`, lands besides its issuer's CTA.
    pub(super) fn emit_multicast(
        &mut self,
        ti: usize,
        code: u16,
        op: u32,
        obs: &mut impl Observer,
    ) {
        let (_, mask) = split(code);
        if mask == 0 || !obs.wants_detail() {
            return;
        }
        let ci = self.threads[ti].cta as usize;
        for p in self.cluster_slots(ci, mask) {
            if p != ci {
                let cta = self.ctas[p].cta;
                Self::detail(self.now, obs, Event::TmaMulticast { op, cta });
            }
        }
    }

    /// Delivers `bytes` of a load with landing code `code` issued by CTA
    /// slot `ci` to its mbarrier in every destination CTA.
    pub(super) fn deliver(&mut self, ci: usize, code: u16, bytes: u64, obs: &mut impl Observer) {
        let (bar, mask) = split(code);
        for p in self.cluster_slots(ci, mask) {
            self.mbars[p * self.plan.nbar + bar as usize].tx -= bytes as i64;
            self.try_complete_phase(p, bar as usize, obs);
        }
    }

    /// Releases stage `s` (CTA-wide index `stage`) of every CTA of thread
    /// `ti`'s cluster along `mask`, waking their producers waiting on it.
    pub(super) fn release(
        &mut self,
        ti: usize,
        s: usize,
        stage: u16,
        mask: u8,
        obs: &mut impl Observer,
    ) {
        let ci = self.threads[ti].cta as usize;
        for p in self.cluster_slots(ci, mask) {
            let st = &mut self.stages[p * self.plan.nstage + s];
            st.released = st.released.saturating_add(1);
            self.wake_cta(p, obs, |r| r == WaitReason::Stage { stage });
            if p != ci && obs.wants_detail() {
                let who = self.who(ti);
                let cta = self.ctas[p].cta;
                Self::detail(self.now, obs, Event::RemoteRelease { who, cta, stage });
            }
        }
    }
}
