//! Read-after-transfer consistency, checked on the event stream.
//!
//! A simulator's reads must be caused by transfers. [`ConsistencyChecker`]
//! is an [`Observer`] that asks for the core's detail events
//! ([`Event::is_detail`]) and records, per line address, the earliest
//! completed transfer into the L2 (a DRAM fill or a store's write) and, per
//! TMA operation and per mbarrier phase, when the bytes really landed in
//! shared memory. It flags (the first three are the read-after-transfer
//! conditions, defined once in [`rules`] for this checker and the
//! SCALE-Sim one, [`crate::scalesim`]):
//!
//! - [`ViolationKind::NoTransfer`]: an L2 read answered (or a fill made)
//!   with no transfer of that line before it;
//! - [`ViolationKind::BeforeTransfer`]: an L2 read whose data leaves the
//!   slice before the line's earliest transfer completed;
//! - [`ViolationKind::HitTooSoon`]: an L2 hit answered sooner than the
//!   configured hit latency after the later of its lookup and its data's
//!   arrival;
//! - [`ViolationKind::ReadBeforeLanding`]: a WGMMA issued by a WarpGroup
//!   whose last passed mbarrier wait covers a phase with a TMA load that has
//!   not landed (a WarpGroup's WGMMAs read the data of the mbarrier phase it
//!   last waited on; a load belongs to the phase in progress when it is
//!   issued);
//! - [`ViolationKind::Overwrite`]: a TMA load into a stage (the stage its
//!   issuer last acquired) whose previous round its consumers have not all
//!   released, or into an mbarrier whose completed phase a WarpGroup was
//!   woken for but has not yet passed its wait on;
//! - [`ViolationKind::EarlyCompletion`]: a TMA completion (`TmaDone`)
//!   signalled before the operation's data landed (the fixed port's landing
//!   cycle, or the hierarchy's last line).
//!
//! The checker changes nothing in the run: detail events are never folded
//! into the digest. It keeps the first [`KEPT`] violations in full and
//! counts every one by kind.
//!
//! ```
//! use simfa_core::GpuConfig;
//! use simfa_std::check::ConsistencyChecker;
//! use simfa_std::gen::{gemm, GemmParams};
//! use simfa_std::run::simulate;
//!
//! let cfg = GpuConfig::h800();
//! let k = gemm(&GemmParams::new(256, 256, 256)).unwrap();
//! let mut check = ConsistencyChecker::new(&cfg);
//! simulate(&cfg, &k, &mut check).unwrap();
//! assert!(check.is_clean(), "{}", check.summary());
//! ```

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

use simfa_core::{Cycle, Event, GpuConfig, Observer, Op, WaitReason, Who};

pub mod rules;
mod violation;

pub use violation::{Site, Violation, ViolationKind};

/// Violations kept in full; later ones are only counted.
pub const KEPT: usize = 16;

/// Violations listed in full by [`ConsistencyChecker::summary`] (and per
/// operand by the SCALE-Sim checker's text report).
pub(crate) const SHOWN: usize = 4;

/// A fixed, seedless multiplicative hasher: the checker's maps never depend
/// on a random seed (and nothing is reported in map order anyway).
#[derive(Default, Clone, Copy)]
pub(crate) struct FixedHasher(u64);

impl Hasher for FixedHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(b as u64);
        }
    }

    fn write_u8(&mut self, i: u8) {
        self.write_u64(i as u64);
    }

    fn write_u16(&mut self, i: u16) {
        self.write_u64(i as u64);
    }

    fn write_u32(&mut self, i: u32) {
        self.write_u64(i as u64);
    }

    fn write_u64(&mut self, i: u64) {
        self.0 = (self.0.rotate_left(5) ^ i).wrapping_mul(0x517c_c1b7_2722_0a95);
    }

    fn write_usize(&mut self, i: usize) {
        self.write_u64(i as u64);
    }
}

/// A map with [`FixedHasher`]: the same iteration order on every run.
pub(crate) type Map<K, V> = HashMap<K, V, BuildHasherDefault<FixedHasher>>;

/// Per line address: the earliest DRAM read and the earliest transfer.
#[derive(Clone, Copy, Default)]
struct LineState {
    dram: Option<u64>,
    ready: Option<u64>,
}

/// An L2 read answered before any transfer of its line was seen.
#[derive(Clone, Copy)]
struct PendingRead {
    served: u64,
    /// Index in the kept list, if kept.
    kept: Option<usize>,
}

/// A TMA operation in flight (or landed, not yet forgotten).
#[derive(Clone, Default)]
struct OpState {
    sm: u16,
    cta: u32,
    bar: Option<u16>,
    /// The mbarrier phase a load fills.
    phase: u32,
    /// The other CTAs a multicast load fills, with the phase of each.
    also: Vec<(u32, u32)>,
    /// The stage its issuer last acquired and the releases its previous
    /// round needs.
    stage: Option<(u16, u32)>,
    /// Landing cycle known at issue (fixed port).
    lands: Option<u64>,
    lines_req: u32,
    lines_back: u32,
    last_back: Option<(u64, u64)>,
    signalled: Option<u64>,
    /// Kept violations waiting for this operation's landing cycle.
    waiting: Vec<usize>,
}

impl OpState {
    /// The landing cycle if the operation has landed by `now`.
    fn landed(&self, now: u64) -> Option<u64> {
        match self.lands {
            Some(d) => (d <= now).then_some(d),
            None => match (self.signalled, self.lines_back == self.lines_req) {
                (Some(s), true) => Some(self.last_back.map_or(s, |(c, _)| c)),
                _ => None,
            },
        }
    }
}

/// A WarpGroup stalled on (or woken for) an mbarrier.
#[derive(Clone, Copy)]
struct Waiter {
    wg: u8,
    bar: u16,
    parity: u8,
    /// The phase that satisfied the wait and when, once it completed.
    woken: Option<(u32, u64)>,
}

#[derive(Clone, Copy, Default)]
struct StageState {
    acquired: u32,
    released: u32,
    consumers: u16,
}

/// The read-after-transfer consistency checker (see the module docs).
pub struct ConsistencyChecker {
    hit_latency: u64,
    lines: Map<u64, LineState>,
    pending: Map<u64, Vec<PendingRead>>,
    ops: Map<u32, OpState>,
    /// Completed phases per (CTA, mbarrier).
    phases: Map<(u32, u16), u32>,
    /// Loads not yet seen landed per (CTA, mbarrier, phase).
    phase_loads: Map<(u32, u16, u32), Vec<u32>>,
    /// The (mbarrier, phase) each (CTA, WarpGroup) last passed a wait on.
    reads: Map<(u32, u8), (u16, u32)>,
    waiters: Map<u32, Vec<Waiter>>,
    stages: Map<(u32, u16), StageState>,
    /// The stage each (CTA, WarpGroup) last acquired.
    acquired: Map<(u32, u8), u16>,
    kept: Vec<Violation>,
    counts: [u64; 6],
    reads_checked: u64,
    wgmmas_checked: u64,
}

impl ConsistencyChecker {
    /// A checker for runs on `cfg`.
    pub fn new(cfg: &GpuConfig) -> Self {
        ConsistencyChecker {
            hit_latency: cfg.l2.hit_latency as u64,
            lines: Map::default(),
            pending: Map::default(),
            ops: Map::default(),
            phases: Map::default(),
            phase_loads: Map::default(),
            reads: Map::default(),
            waiters: Map::default(),
            stages: Map::default(),
            acquired: Map::default(),
            kept: Vec::new(),
            counts: [0; 6],
            reads_checked: 0,
            wgmmas_checked: 0,
        }
    }

    /// The first [`KEPT`] violations, in the order they were found.
    pub fn violations(&self) -> &[Violation] {
        &self.kept
    }

    /// Violations of each kind, in [`ViolationKind::ALL`] order.
    pub fn counts(&self) -> [(ViolationKind, u64); 6] {
        ViolationKind::ALL.map(|k| (k, self.counts[k.index()]))
    }

    /// Violations found in all.
    pub fn total(&self) -> u64 {
        self.counts.iter().sum()
    }

    /// True when no violation was found.
    pub fn is_clean(&self) -> bool {
        self.total() == 0
    }

    /// L2 reads and WGMMAs checked so far.
    pub fn checked(&self) -> (u64, u64) {
        (self.reads_checked, self.wgmmas_checked)
    }

    /// One paragraph: "clean" with what was checked, or the first few
    /// violations in full and the counts per kind.
    pub fn summary(&self) -> String {
        let (reads, wgmmas) = self.checked();
        if self.is_clean() {
            return format!(
                "consistency: clean ({reads} L2 reads and {wgmmas} WGMMAs checked against \
                 their transfers)"
            );
        }
        let mut s = format!(
            "consistency: {} violation(s) ({reads} L2 reads and {wgmmas} WGMMAs checked)",
            self.total()
        );
        for v in self.kept.iter().take(SHOWN) {
            s.push_str("\n  ");
            s.push_str(&v.to_string());
        }
        if self.total() > SHOWN.min(self.kept.len()) as u64 {
            s.push_str("\n  ...");
        }
        let counts: Vec<String> = self
            .counts()
            .iter()
            .filter(|(_, n)| *n > 0)
            .map(|(k, n)| format!("{k} {n}"))
            .collect();
        s.push_str("\n  by kind: ");
        s.push_str(&counts.join(", "));
        s
    }

    /// Records a violation; returns its index in the kept list, if kept.
    fn flag(&mut self, v: Violation) -> Option<usize> {
        self.counts[v.kind.index()] += 1;
        if self.kept.len() < KEPT {
            self.kept.push(v);
            Some(self.kept.len() - 1)
        } else {
            None
        }
    }

    /// Moves one counted violation from kind `from` to `v.kind`, updating
    /// the kept record `kept` if there is one.
    fn reclassify(&mut self, from: ViolationKind, kept: Option<usize>, v: Violation) {
        self.counts[from.index()] -= 1;
        self.counts[v.kind.index()] += 1;
        if let Some(i) = kept {
            self.kept[i] = v;
        }
    }

    fn line_violation(
        &self,
        kind: ViolationKind,
        addr: u64,
        slice: u16,
        at: u64,
        served: u64,
        transfer: Option<u64>,
    ) -> Violation {
        Violation {
            kind,
            cycle: served,
            site: Site::Line { addr, slice, at },
            transfer_cycle: transfer,
            hit_latency: self.hit_latency,
        }
    }

    fn on_fill(&mut self, cycle: u64, addr: u64, slice: u16, ready: u64, write: bool) {
        let line = self.lines.entry(addr).or_default();
        let no_dram = !write && !matches!(line.dram, Some(d) if d <= cycle);
        line.ready = Some(line.ready.map_or(ready, |r| r.min(ready)));
        if no_dram {
            let v = self.line_violation(ViolationKind::NoTransfer, addr, slice, cycle, ready, None);
            self.flag(v);
        }
        // Reads answered before any transfer of this line: now that one is
        // known, each either left before it completed, or (a hit) sooner
        // than the hit latency after it.
        if let Some(reads) = self.pending.remove(&addr) {
            for r in reads {
                let kind = rules::classify_late_transfer(ready, r.served);
                let mut v = self.line_violation(kind, addr, slice, r.served, r.served, Some(ready));
                if let Some(i) = r.kept {
                    if let Site::Line { at, slice, .. } = self.kept[i].site {
                        v.site = Site::Line { addr, slice, at };
                    }
                }
                self.reclassify(ViolationKind::NoTransfer, r.kept, v);
            }
        }
    }

    fn on_served(&mut self, addr: u64, slice: u16, hit: bool, at: u64, served: u64) {
        self.reads_checked += 1;
        let ready = self.lines.get(&addr).and_then(|l| l.ready);
        let latency = hit.then_some(self.hit_latency);
        let Some(kind) = rules::classify_read(ready, at, served, latency) else {
            return;
        };
        let v = self.line_violation(kind, addr, slice, at, served, ready);
        let kept = self.flag(v);
        if ready.is_none() {
            // Settled once a transfer of this line turns up.
            self.pending
                .entry(addr)
                .or_default()
                .push(PendingRead { served, kept });
        }
    }

    fn on_issue_tma(
        &mut self,
        cycle: u64,
        who: &Who,
        done: Option<u64>,
        op: u32,
        bar: Option<u16>,
    ) {
        let mut st = OpState {
            sm: who.sm,
            cta: who.cta,
            bar,
            lands: done,
            ..OpState::default()
        };
        if let Some(b) = bar {
            st.phase = self.fills(cycle, who.sm, who.cta, b, op);
            if let Some(&stage) = self.acquired.get(&(who.cta, who.wg)) {
                let s = self
                    .stages
                    .get(&(who.cta, stage))
                    .copied()
                    .unwrap_or_default();
                let needed = s.acquired.saturating_sub(1) * s.consumers as u32;
                st.stage = Some((stage, needed));
                self.stage_free(cycle, who.sm, who.cta, stage, needed, op);
            }
        }
        self.ops.insert(op, st);
    }

    /// Load `op` fills mbarrier `b` of CTA `cta` (on SM `sm`): it belongs
    /// to the phase in progress, returned. A WarpGroup woken for the
    /// barrier's completed phase that has not passed its wait yet still
    /// has to read that phase's data: the load overwrites it.
    fn fills(&mut self, cycle: u64, sm: u16, cta: u32, b: u16, op: u32) -> u32 {
        let phase = self.phases.get(&(cta, b)).copied().unwrap_or(0) + 1;
        self.phase_loads
            .entry((cta, b, phase))
            .or_default()
            .push(op);
        let woken = self
            .waiters
            .get(&cta)
            .and_then(|ws| ws.iter().find(|w| w.bar == b && w.woken.is_some()).copied());
        if let Some(w) = woken {
            let (p, at) = w.woken.expect("found by woken.is_some()");
            let v = Violation {
                kind: ViolationKind::Overwrite,
                cycle,
                site: Site::Barrier {
                    sm,
                    cta,
                    wg: Some(w.wg),
                    bar: b,
                    phase: p,
                    op,
                },
                transfer_cycle: Some(at),
                hit_latency: self.hit_latency,
            };
            self.flag(v);
        }
        phase
    }

    /// A load `op` into stage `stage` of CTA `cta` (issued on SM `sm`)
    /// needs `needed` releases of it: the stage's previous round released
    /// by all its consumers.
    fn stage_free(&mut self, cycle: u64, sm: u16, cta: u32, stage: u16, needed: u32, op: u32) {
        let released = self.stages.get(&(cta, stage)).map_or(0, |s| s.released);
        if released < needed {
            let v = Violation {
                kind: ViolationKind::Overwrite,
                cycle,
                site: Site::Stage {
                    sm,
                    cta,
                    stage,
                    released,
                    needed,
                    op,
                },
                transfer_cycle: None,
                hit_latency: self.hit_latency,
            };
            self.flag(v);
        }
    }

    /// Multicast load `op` also fills its mbarrier, and the stage its
    /// issuer acquired, in CTA `cta`.
    fn on_multicast(&mut self, cycle: u64, op: u32, cta: u32) {
        let Some((sm, Some(b), stage)) = self.ops.get(&op).map(|st| (st.sm, st.bar, st.stage))
        else {
            return;
        };
        if let Some((stage, needed)) = stage {
            self.stage_free(cycle, sm, cta, stage, needed, op);
        }
        let phase = self.fills(cycle, sm, cta, b, op);
        if let Some(st) = self.ops.get_mut(&op) {
            st.also.push((cta, phase));
        }
    }

    /// The operation landed: settle the violations waiting for its cycle and
    /// forget it.
    fn landed(&mut self, op: u32, at: u64) {
        let Some(st) = self.ops.remove(&op) else {
            return;
        };
        for i in st.waiting {
            self.kept[i].transfer_cycle = Some(at);
            if let (Site::Op { addr, .. }, Some((_, a))) = (&mut self.kept[i].site, st.last_back) {
                *addr = Some(a);
            }
        }
        if let Some(b) = st.bar {
            let fills = std::iter::once((st.cta, st.phase)).chain(st.also.iter().copied());
            for (cta, phase) in fills {
                let key = (cta, b, phase);
                if let Some(list) = self.phase_loads.get_mut(&key) {
                    list.retain(|&o| o != op);
                    if list.is_empty() {
                        self.phase_loads.remove(&key);
                    }
                }
            }
        }
    }

    fn on_tma_done(&mut self, cycle: u64, op: u32) {
        let Some(st) = self.ops.get_mut(&op) else {
            return;
        };
        st.signalled = Some(cycle);
        match st.landed(cycle) {
            Some(at) => self.landed(op, at),
            None => {
                let v = Violation {
                    kind: ViolationKind::EarlyCompletion,
                    cycle,
                    site: Site::Op {
                        sm: st.sm,
                        cta: st.cta,
                        op,
                        bar: st.bar,
                        addr: None,
                    },
                    transfer_cycle: st.lands,
                    hit_latency: self.hit_latency,
                };
                let lands = st.lands;
                if let Some(i) = self.flag(v) {
                    if lands.is_none() {
                        self.ops.get_mut(&op).expect("present").waiting.push(i);
                    }
                }
            }
        }
    }

    fn on_line_landed(&mut self, cycle: u64, op: u32, addr: u64) {
        let Some(st) = self.ops.get_mut(&op) else {
            return;
        };
        st.lines_back += 1;
        st.last_back = Some((cycle, addr));
        if st.signalled.is_some() && st.lines_back >= st.lines_req {
            self.landed(op, cycle);
        }
    }

    fn on_wgmma(&mut self, cycle: u64, who: &Who) {
        self.wgmmas_checked += 1;
        let Some(&(bar, phase)) = self.reads.get(&(who.cta, who.wg)) else {
            return;
        };
        let key = (who.cta, bar, phase);
        let Some(list) = self.phase_loads.get(&key) else {
            return;
        };
        let mut unlanded = None;
        let mut done = Vec::new();
        for &op in list {
            match self.ops.get(&op) {
                None => done.push((op, None)),
                Some(st) => match st.landed(cycle) {
                    Some(at) => done.push((op, Some(at))),
                    None => {
                        if unlanded.is_none() {
                            unlanded = Some((op, st.lands));
                        }
                    }
                },
            }
        }
        for (op, at) in done {
            match at {
                Some(at) => self.landed(op, at),
                None => {
                    if let Some(list) = self.phase_loads.get_mut(&key) {
                        list.retain(|&o| o != op);
                    }
                }
            }
        }
        if let Some((op, lands)) = unlanded {
            let v = Violation {
                kind: ViolationKind::ReadBeforeLanding,
                cycle,
                site: Site::Barrier {
                    sm: who.sm,
                    cta: who.cta,
                    wg: Some(who.wg),
                    bar,
                    phase,
                    op,
                },
                transfer_cycle: lands,
                hit_latency: self.hit_latency,
            };
            if let Some(i) = self.flag(v) {
                if lands.is_none() {
                    if let Some(st) = self.ops.get_mut(&op) {
                        st.waiting.push(i);
                    }
                }
            }
        }
    }

    fn on_issue(&mut self, cycle: u64, who: &Who, op: &Op) {
        match *op {
            Op::Wgmma { .. } => self.on_wgmma(cycle, who),
            Op::MbarWait { bar, .. } => {
                if let Some(ws) = self.waiters.get_mut(&who.cta) {
                    ws.retain(|w| w.wg != who.wg);
                }
                let phase = self.phases.get(&(who.cta, bar)).copied().unwrap_or(0);
                self.reads.insert((who.cta, who.wg), (bar, phase));
            }
            Op::MbarInit { bar, .. } => {
                self.phases.insert((who.cta, bar), 0);
            }
            Op::StageRelease { stage, .. } => {
                let s = self.stages.entry((who.cta, stage)).or_default();
                s.released = s.released.saturating_add(1);
            }
            _ => {}
        }
    }

    fn on_phase(&mut self, cycle: u64, cta: u32, bar: u16, phase: u32) {
        self.phases.insert((cta, bar), phase);
        if let Some(ws) = self.waiters.get_mut(&cta) {
            for w in ws.iter_mut() {
                if w.bar == bar && w.woken.is_none() && (phase & 1) as u8 != w.parity {
                    w.woken = Some((phase, cycle));
                }
            }
        }
    }

    fn forget_cta(&mut self, cta: u32) {
        self.phases.retain(|k, _| k.0 != cta);
        self.phase_loads.retain(|k, _| k.0 != cta);
        self.reads.retain(|k, _| k.0 != cta);
        self.waiters.remove(&cta);
        self.stages.retain(|k, _| k.0 != cta);
        self.acquired.retain(|k, _| k.0 != cta);
    }
}

impl Observer for ConsistencyChecker {
    fn on_event(&mut self, cycle: Cycle, event: &Event) {
        let c = cycle.get();
        match *event {
            Event::DramDone { addr } => {
                let l = self.lines.entry(addr).or_default();
                l.dram = Some(l.dram.map_or(c, |d| d.min(c)));
            }
            Event::LineFill {
                addr,
                slice,
                ready,
                write,
            } => self.on_fill(c, addr, slice, ready, write),
            Event::LineServed {
                addr,
                slice,
                hit,
                at,
                served,
            } => self.on_served(addr, slice, hit, at, served),
            Event::TmaIssue {
                who, done, op, bar, ..
            } => self.on_issue_tma(c, &who, done, op, bar),
            Event::TmaLineRequest { op, .. } => {
                if let Some(st) = self.ops.get_mut(&op) {
                    st.lines_req += 1;
                }
            }
            Event::TmaLineLanded { op, addr, .. } => self.on_line_landed(c, op, addr),
            Event::TmaDone { op, .. } => self.on_tma_done(c, op),
            Event::Issue { who, op } => self.on_issue(c, &who, &op),
            Event::Stall {
                who,
                reason: WaitReason::Mbarrier { bar, parity },
            } => {
                let ws = self.waiters.entry(who.cta).or_default();
                ws.retain(|w| w.wg != who.wg);
                ws.push(Waiter {
                    wg: who.wg,
                    bar,
                    parity,
                    woken: None,
                });
            }
            Event::PhaseComplete {
                cta, bar, phase, ..
            } => self.on_phase(c, cta, bar, phase),
            Event::StageAcquired {
                who,
                stage,
                consumers,
            } => {
                let s = self.stages.entry((who.cta, stage)).or_default();
                s.acquired += 1;
                s.consumers = consumers;
                self.acquired.insert((who.cta, who.wg), stage);
            }
            Event::TmaMulticast { op, cta } => self.on_multicast(c, op, cta),
            Event::RemoteRelease { cta, stage, .. } => {
                let s = self.stages.entry((cta, stage)).or_default();
                s.released = s.released.saturating_add(1);
            }
            Event::CtaRetire { cta, .. } => self.forget_cta(cta),
            _ => {}
        }
    }

    fn wants_detail(&self) -> bool {
        true
    }
}

#[cfg(test)]
#[path = "check_tests.rs"]
mod tests;
