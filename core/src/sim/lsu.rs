//! The SM's load/store unit: the requests of its WarpGroups' own loads and
//! stores (`st.global` from registers, `ld.global`/`cp.async` into shared
//! memory, `smem.move` between registers and shared memory) leave it one
//! after another, at the configured cycles per request; a WarpGroup goes on
//! once its requests have left, and global loads and stores then move
//! their lines as TMA operations do.

use super::cluster::landing_code;
use super::issue::Outcome;
use super::l1::Lookup;
use super::Simulator;
use crate::error::SimError;
use crate::observer::Observer;
use crate::source::StreamSource;
use crate::transfer::{Direction, Shape};
use crate::wait::WaitReason;
use crate::Ratio;

impl<'a, S: StreamSource> Simulator<'a, S> {
    /// Queues `requests` on SM `sm`'s load/store unit at `per` cycles
    /// each, after those before them; returns when the last has left.
    pub(super) fn lsu(&mut self, sm: usize, per: Ratio, requests: u64) -> u64 {
        let start = self.sms[sm].lsu_free.max(self.now);
        let end = start.saturating_add(per.mul_ceil(requests));
        self.sms[sm].lsu_free = end;
        end
    }

    /// The WarpGroup waits for its load/store-unit requests to leave at
    /// `end` (goes on at once when that is the next cycle).
    pub(super) fn lsu_outcome(now: u64, end: u64) -> Outcome {
        if end > now + 1 {
            Outcome::Storing(end)
        } else {
            Outcome::Next
        }
    }

    /// `st.global` (`bar: None`) or `ld.global` (completing on mbarrier
    /// `bar`, through the SM's L1 when its flag says so): WarpGroup `ti`
    /// stores or loads a box of tensor map `map` with its threads' own
    /// requests of `segment` bytes. Only the in-bounds part is requested
    /// and moves; a load completes the whole box's bytes, as a TMA load
    /// does. A load that hits in the L1 lands
    /// [`crate::L1Config::hit_cycles`] after its requests have left,
    /// without reaching the memory.
    pub(super) fn thread_transfer(
        &mut self,
        ti: usize,
        map: u8,
        bar: Option<(u16, bool)>,
        coords: [i64; 5],
        segment: u8,
        obs: &mut impl Observer,
    ) -> Result<Outcome, SimError> {
        let (sm, now) = (self.threads[ti].sm as usize, self.now);
        if self.sms[sm].tma_inflight >= self.cfg.tma_slots {
            return Ok(Outcome::Stall(WaitReason::TmaSlot));
        }
        let kernel = self.kernel;
        let m = &kernel.maps[map as usize];
        let requests = m.box_bytes(&coords).div_ceil(segment.max(1) as u64);
        let (landing, dir, bytes, per) = match bar {
            Some((bar, _)) => {
                let b = self.bar_index(ti, bar, "mbarrier", self.plan.nbar)?;
                let code = landing_code(b as u16, 0);
                (
                    code,
                    Direction::Load,
                    m.full_box_bytes(),
                    self.cfg.load_request_cycles,
                )
            }
            None => (
                u16::MAX,
                Direction::Store,
                m.box_bytes(&coords),
                self.cfg.store_request_cycles,
            ),
        };
        // The unit takes this box's requests after those of the loads and
        // stores before it; the lines follow.
        let end = self.lsu(sm, per, requests);
        let id = self.stats.tma_ops as u32;
        let served = match bar {
            Some((_, true)) => match self.l1_lookup(ti, map, coords, id) {
                Some(Lookup::Hit) => Some(end + self.cfg.l1.hit_cycles as u64),
                _ => None,
            },
            _ => None,
        };
        self.start_transfer(
            ti,
            landing,
            dir,
            Shape::Tensor { map: m, coords },
            bytes,
            end - now,
            served,
            obs,
        )?;
        Ok(Self::lsu_outcome(now, end))
    }
}
