//! CTA residency: admitting CTAs onto SMs while their shared memory,
//! registers, warps and CTA slots fit (breadth-first over the SMs for the
//! first wave), and retiring a CTA once its WarpGroups have exited and
//! nothing of it is in flight, which admits the next one on its SM.

use super::state::{Cta, Ev, Mbar, Named, Stage, TState, Thread};
use super::Simulator;
use crate::error::SimError;
use crate::kernel::NAMED_BARRIERS;
use crate::observer::{Event, Observer};
use crate::source::StreamSource;

impl<S: StreamSource> Simulator<'_, S> {
    /// Fills every SM, one CTA per SM per pass, until none fits (the first
    /// wave is spread breadth-first over the SMs).
    pub(super) fn admit_all(&mut self, obs: &mut impl Observer) -> Result<(), SimError> {
        loop {
            let mut any = false;
            for sm in 0..self.plan.sms {
                if self.next_cta < self.total_ctas && self.try_admit(sm, obs)? {
                    any = true;
                }
            }
            if !any {
                return Ok(());
            }
        }
    }

    fn try_admit(&mut self, sm: usize, obs: &mut impl Observer) -> Result<bool, SimError> {
        let k = self.kernel;
        let s = &self.sms[sm];
        let fits = s.smem + k.smem_bytes <= self.cfg.smem_per_sm
            && s.regs + k.regs_per_cta() <= self.cfg.regs_per_sm
            && s.warps as usize + 4 * self.plan.wgs <= self.cfg.warps_per_sm as usize
            && (s.ctas as usize) < self.plan.cta_slots;
        if !fits {
            return Ok(false);
        }
        let base = sm * self.plan.cta_slots;
        let Some(slot) = (0..self.plan.cta_slots).find(|&i| !self.ctas[base + i].live) else {
            return Ok(false);
        };
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
        };
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
        Ok(true)
    }

    pub(super) fn stage_slice(&mut self, ci: usize) -> &mut [Stage] {
        let n = self.plan.nstage;
        &mut self.stages[ci * n..(ci + 1) * n]
    }

    /// Retires CTA slot `ci` if all its WarpGroups exited and nothing of it
    /// is in flight, then admits the next CTA on that SM.
    pub(super) fn maybe_retire(
        &mut self,
        ci: usize,
        obs: &mut impl Observer,
    ) -> Result<(), SimError> {
        let c = self.ctas[ci];
        if !c.live || c.left != 0 || c.inflight != 0 {
            return Ok(());
        }
        self.ctas[ci].live = false;
        let k = self.kernel;
        let sm = c.sm as usize;
        let s = &mut self.sms[sm];
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
        while self.next_cta < self.total_ctas && self.try_admit(sm, obs)? {}
        Ok(())
    }
}
