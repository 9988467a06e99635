//! CTA residency: admitting CTAs onto SMs while their shared memory,
//! registers, warps and CTA slots fit (breadth-first over the SMs for the
//! first wave), and retiring a CTA once its WarpGroups have exited and
//! nothing of it is in flight, which admits the next one on its SM.

use heapless::Vec;

use super::state::{Cta, Ev, Mbar, Named, Stage, TState, Thread};
use super::Simulator;
use crate::cluster::MAX_CLUSTER;
use crate::error::SimError;
use crate::kernel::NAMED_BARRIERS;
use crate::observer::{Event, Observer};
use crate::source::StreamSource;

impl<S: StreamSource> Simulator<'_, S> {
    /// Fills every SM, one CTA per SM per pass, until none fits (the first
    /// wave is spread breadth-first over the SMs). A cluster's CTAs go to
    /// the next SMs in the pass that each have room for one.
    pub(super) fn admit_all(&mut self, obs: &mut impl Observer) -> Result<(), SimError> {
        let size = self.kernel.cluster.size() as usize;
        loop {
            let mut any = false;
            let mut picked: Vec<u16, MAX_CLUSTER> = Vec::new();
            for sm in 0..self.plan.sms {
                if self.next_cta >= self.total_ctas || !self.fits(sm) {
                    continue;
                }
                // `size` is at most MAX_CLUSTER (a validated kernel).
                let _ = picked.push(sm as u16);
                if picked.len() == size {
                    self.admit_cluster(&picked, obs)?;
                    picked.clear();
                    any = true;
                }
            }
            if !any {
                return Ok(());
            }
        }
    }

    /// Admits CTAs after SM `sm` freed room: whole clusters (single CTAs
    /// without clusters) onto SMs that fit one CTA each, looked for from
    /// `sm` on. Only the SMs a retirement freed have room while CTAs wait,
    /// so without clusters the search stops at `sm` itself.
    fn admit_from(&mut self, sm: usize, obs: &mut impl Observer) -> Result<(), SimError> {
        let size = self.kernel.cluster.size() as usize;
        while self.next_cta < self.total_ctas {
            let mut picked: Vec<u16, MAX_CLUSTER> = Vec::new();
            for i in 0..self.plan.sms {
                if picked.len() == size {
                    break;
                }
                let s = (sm + i) % self.plan.sms;
                if self.fits(s) {
                    let _ = picked.push(s as u16);
                }
            }
            if picked.len() < size {
                return Ok(());
            }
            self.admit_cluster(&picked, obs)?;
        }
        Ok(())
    }

    /// Whether SM `sm` has room for one more CTA (its live CTAs are
    /// counted in `ctas`, so fewer than `cta_slots` leaves a slot free).
    fn fits(&self, sm: usize) -> bool {
        let k = self.kernel;
        let s = &self.sms[sm];
        s.smem + k.smem_bytes <= self.cfg.smem_per_sm
            && s.regs + k.regs_per_cta() <= self.cfg.regs_per_sm
            && s.warps as usize + 4 * self.plan.wgs <= self.cfg.warps_per_sm as usize
            && (s.ctas as usize) < self.plan.cta_slots
    }

    /// Admits the next cluster (the next CTA without clusters), rank `r`
    /// on SM `sms[r]`; each SM must fit one CTA.
    fn admit_cluster(&mut self, sms: &[u16], obs: &mut impl Observer) -> Result<(), SimError> {
        let mut slots = [0u32; MAX_CLUSTER];
        for (rank, &sm) in sms.iter().enumerate() {
            slots[rank] = self.admit_one(sm as usize, rank as u8) as u32;
        }
        for &ci in &slots[..sms.len()] {
            self.ctas[ci as usize].peers = slots;
        }
        for &ci in &slots[..sms.len()] {
            self.launch(ci as usize, obs)?;
        }
        Ok(())
    }

    /// Takes a CTA slot and the resources of one CTA on SM `sm` (which
    /// [fits](Self::fits) one) for the next CTA, of rank `rank`; returns
    /// the slot.
    fn admit_one(&mut self, sm: usize, rank: u8) -> usize {
        let k = self.kernel;
        let base = sm * self.plan.cta_slots;
        let slot = (0..self.plan.cta_slots)
            .find(|&i| !self.ctas[base + i].live)
            .unwrap_or(0);
        let ci = base + slot;
        let cta = self.next_cta;
        self.next_cta += 1;
        let s = &mut self.sms[sm];
        s.smem += k.smem_bytes;
        s.regs += k.regs_per_cta();
        s.warps += 4 * self.plan.wgs as u16;
        s.ctas += 1;
        self.ctas[ci] = Cta {
            live: true,
            sm: sm as u16,
            cta,
            coords: k.cta_coords(cta),
            left: self.plan.wgs as u8,
            inflight: 0,
            rank,
            peers: [0; MAX_CLUSTER],
        };
        ci
    }

    /// Resets CTA slot `ci`'s barriers and stages and starts its
    /// WarpGroups `cta_launch_cycles` from now.
    fn launch(&mut self, ci: usize, obs: &mut impl Observer) -> Result<(), SimError> {
        let k = self.kernel;
        let Cta { sm, cta, .. } = self.ctas[ci];
        let sm = sm as usize;
        let slot = ci - sm * self.plan.cta_slots;
        let mut b = ci * self.plan.nbar;
        for d in k.mbarriers.iter() {
            for _ in 0..d.len {
                self.mbars[b] = Mbar::new(d.count);
                b += 1;
            }
        }
        for s in self.stage_slice(ci) {
            *s = Stage::EMPTY;
        }
        for n in &mut self.named[ci * NAMED_BARRIERS..(ci + 1) * NAMED_BARRIERS] {
            *n = Named::EMPTY;
        }
        self.emit(obs, Event::CtaLaunch { sm: sm as u16, cta });
        let launch = self.cfg.cta_launch_cycles as u64;
        for wg in 0..self.plan.wgs {
            let tslot = slot * self.plan.wgs + wg;
            let ti = sm * self.plan.cta_slots * self.plan.wgs + tslot;
            let (role, wg_in_role) = k.role_of(wg);
            let r = &k.roles[role as usize];
            self.age += 1;
            self.threads[ti] = Thread {
                state: TState::Sleeping,
                cta: ci as u32,
                sm: sm as u16,
                slot: tslot as u8,
                wg: wg as u8,
                role,
                wg_in_role,
                pc: r.start,
                age: self.age,
                ..Thread::EMPTY
            };
            if launch == 0 {
                self.make_ready(ti);
            } else {
                self.push(self.now + launch, Ev::Wake { thread: ti as u32 })?;
            }
        }
        Ok(())
    }

    pub(super) fn stage_slice(&mut self, ci: usize) -> &mut [Stage] {
        let n = self.plan.nstage;
        &mut self.stages[ci * n..(ci + 1) * n]
    }

    /// Retires CTA slot `ci` if all its WarpGroups exited and nothing of it
    /// is in flight, then admits the next CTA on that SM. A cluster's CTAs
    /// retire together, once each of them has finished (another CTA may
    /// still write a CTA's shared memory or release its stages until then).
    pub(super) fn maybe_retire(
        &mut self,
        ci: usize,
        obs: &mut impl Observer,
    ) -> Result<(), SimError> {
        let c = self.ctas[ci];
        // Without clusters the only peer is the CTA itself.
        let peers = &c.peers[..self.kernel.cluster.size() as usize];
        if !peers.iter().all(|&p| self.ctas[p as usize].finished()) {
            return Ok(());
        }
        for &p in peers {
            self.retire(p as usize, obs);
        }
        self.admit_from(c.sm as usize, obs)
    }

    /// Frees CTA slot `ci` and its SM's resources.
    fn retire(&mut self, ci: usize, obs: &mut impl Observer) {
        let c = self.ctas[ci];
        self.ctas[ci].live = false;
        let k = self.kernel;
        let s = &mut self.sms[c.sm as usize];
        s.smem -= k.smem_bytes;
        s.regs -= k.regs_per_cta();
        s.warps -= 4 * self.plan.wgs as u16;
        s.ctas -= 1;
        let first = ci * self.plan.wgs;
        for t in &mut self.threads[first..first + self.plan.wgs] {
            t.state = TState::Free;
        }
        self.retired += 1;
        self.stats.ctas_retired += 1;
        self.emit(
            obs,
            Event::CtaRetire {
                sm: c.sm,
                cta: c.cta,
            },
        );
    }
}
