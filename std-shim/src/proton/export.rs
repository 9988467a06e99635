//! Writing a simulated run as a Proton-style chrome trace.
//!
//! [`ProtonWriter`] is an [`Observer`]: every instruction a WarpGroup
//! issues becomes one complete (`"ph": "X"`) event, in the shape Triton's
//! Proton intra-kernel profiler writes (`pid` `"<kernel> Core<sm>
//! CTA<cta>"`, `tid` `"warp <4 * wg> (line 0)"`: one warp records for its
//! WarpGroup; `ts` and `dur` in cycles / 1000). An event lasts from its
//! instruction's issue to the WarpGroup's next issue.
//!
//! Event names are scope strings. Instructions the instrumentation pass
//! wraps get its scope (see [`crate::ttgir::scope`]): `TMA_LOAD`,
//! `TMA_STORE`, `MB_WAIT`, `MB_ARRIVE`, `WGMMA_WAIT`, and
//! `WGMMA` for a commit group of identical WGMMAs (`M` = 64 x the group's
//! size, `K` = 16, the instruction shape m64nNk16, FP16 into FP32), with
//! the kernel's names as SSA values (`desc=%K`, `bar=%k_full`). Every
//! other instruction (stages, named barriers, `compute`, bubbles, bulk
//! copies, a WGMMA group of mixed shapes, an expect-tx, which unlike
//! TTGIR's `barrier_expect` does not also arrive, ...) is named
//! `SIMFA|<OP>`, where `<OP>` is the op's name in upper case.
//!
//! Each event's `args` carry what a real trace leaves to the translator:
//! `bar` (CTA-wide mbarrier index), `parity`, `coords` (the box origin),
//! and `op`, the exact instruction (or, for a `WGMMA` scope, the group's
//! first WGMMA) as JSON. The importer replays `op` when present, so a run
//! exported and imported again simulates to the same cycles.
//!
//! The trace's `otherData.simfa_kernel` holds the kernel's declarations in
//! the text assembly, with every role a `stream` role: the importer's
//! kernel header.

use std::collections::HashMap;
use std::io::Write;

use serde_json::{json, Value};
use simfa_core::observer::Who;
use simfa_core::{Cycle, Event, Kernel, Observer, Op, WgmmaMode};

use crate::run::mbarrier_name;
use crate::ttgir::{Dtype, Scope, ScopeOp, TmaCopy, Wgmma};

/// An instruction (or WGMMA group) waiting for the WarpGroup's next issue,
/// which ends it.
struct Pending {
    who: Who,
    start: u64,
    name: String,
    args: Value,
    /// For a run of identical WGMMAs: its shape and size, and whether a
    /// commit closed it.
    group: Option<Group>,
}

/// A run of identical WGMMAs of one WarpGroup.
#[derive(Clone, Copy)]
struct Group {
    n: u16,
    mode: WgmmaMode,
    count: u32,
    committed: bool,
}

/// Writes a Proton-style chrome trace of a run; see the
/// [module documentation](self).
pub struct ProtonWriter<'k, W: Write> {
    out: W,
    k: &'k Kernel,
    pending: HashMap<(u32, u8), Pending>,
    /// Site numbers: one per distinct scope (without its site field), in
    /// order of first appearance.
    sites: HashMap<String, u32>,
    events: u64,
    error: Option<std::io::Error>,
}

impl<'k, W: Write> ProtonWriter<'k, W> {
    /// Starts the trace of a run of `k` on `out`: writes the header with
    /// the kernel's declarations.
    pub fn new(mut out: W, k: &'k Kernel) -> std::io::Result<Self> {
        let header = json!({ "simfa_kernel": stream_header(k) });
        writeln!(
            out,
            "{{\"displayTimeUnit\":\"ns\",\"otherData\":{header},\"traceEvents\":["
        )?;
        Ok(ProtonWriter {
            out,
            k,
            pending: HashMap::new(),
            sites: HashMap::new(),
            events: 0,
            error: None,
        })
    }

    /// Ends every open event at `end`, closes the JSON and flushes; returns
    /// the number of events written.
    pub fn finish(mut self, end: u64) -> std::io::Result<u64> {
        let mut open: Vec<_> = self.pending.drain().collect();
        open.sort_by_key(|(key, _)| *key);
        for (_, p) in open {
            self.write(p, end);
        }
        if let Some(e) = self.error.take() {
            return Err(e);
        }
        self.out.write_all(b"\n]}\n")?;
        self.out.flush()?;
        Ok(self.events)
    }

    fn site(&mut self, scope: &str) -> u32 {
        let n = self.sites.len() as u32;
        *self.sites.entry(scope.to_string()).or_insert(n)
    }

    /// The name of a paper scope, its site numbered by its other fields.
    fn scope(&mut self, op: ScopeOp) -> String {
        let probe = Scope {
            op: op.clone(),
            site: 0,
        }
        .to_string();
        let site = self.site(&probe);
        Scope { op, site }.to_string()
    }

    fn write(&mut self, mut p: Pending, end: u64) {
        if self.error.is_some() {
            return;
        }
        match p.group {
            Some(g) if g.committed => {
                let w = Wgmma {
                    m: 64 * g.count,
                    n: g.n as u32,
                    k: 16,
                    instr_m: 64,
                    instr_n: g.n as u32,
                    instr_k: 16,
                    dtype: Dtype::Fp16,
                    acc: Dtype::Fp32,
                    mode: match g.mode {
                        WgmmaMode::Ss => crate::ttgir::WgmmaMode::Ss,
                        WgmmaMode::Rs => crate::ttgir::WgmmaMode::Rs,
                    },
                    wgs: (1, 1),
                };
                p.name = self.scope(ScopeOp::Wgmma(w));
                self.emit(&p, end);
            }
            // WGMMAs that no commit closed (the group goes on with another
            // shape): one event each.
            Some(g) => {
                for _ in 0..g.count {
                    self.emit(&p, end);
                }
            }
            None => self.emit(&p, end),
        }
    }

    fn emit(&mut self, p: &Pending, end: u64) {
        let ev = json!({
            "name": p.name,
            "cat": self.k.name.as_str(),
            "ph": "X",
            "pid": format!("{} Core{} CTA{}", self.k.name, p.who.sm, p.who.cta),
            "tid": format!("warp {} (line 0)", 4 * p.who.wg as u32),
            "ts": p.start as f64 / 1000.0,
            "dur": end.saturating_sub(p.start).max(1) as f64 / 1000.0,
            "args": p.args,
        });
        let sep = if self.events == 0 { "" } else { ",\n" };
        if let Err(e) = write!(self.out, "{sep}{ev}") {
            self.error = Some(e);
        }
        self.events += 1;
    }

    /// `%name` of mbarrier array element `bar`'s declaration.
    fn bar_ssa(&self, bar: u16) -> String {
        let full = mbarrier_name(self.k, bar);
        format!("%{}", full.split('[').next().unwrap_or(&full))
    }

    fn tma(&self, map: u8, bar: Option<u16>) -> TmaCopy {
        let m = &self.k.maps[map as usize];
        let rank = m.rank as usize;
        TmaCopy {
            desc: format!("%{}", m.name),
            box_shape: m.boxdim[..rank].iter().rev().copied().collect(),
            dtype: match m.elem_bytes {
                1 => Dtype::Fp8E4M3,
                4 => Dtype::Fp32,
                8 => Dtype::Fp64,
                _ => Dtype::Fp16,
            },
            bytes: m.full_box_bytes(),
            bar: bar.map(|b| self.bar_ssa(b)),
            coords: rank as u32,
        }
    }

    /// The event of `op` issued by `who` at `c`.
    fn event_of(&mut self, who: Who, c: u64, op: &Op) -> Pending {
        let exact = serde_json::to_value(op).unwrap_or(Value::Null);
        let rank = |map: u8| self.k.maps[map as usize].rank as usize;
        let (name, args) = match *op {
            Op::TmaLoad {
                map, bar, coords, ..
            } => {
                let t = self.tma(map, Some(bar));
                let coords = &coords[..rank(map)];
                (
                    self.scope(ScopeOp::TmaLoad(t)),
                    json!({"bar": bar, "coords": coords, "op": exact}),
                )
            }
            Op::TmaStore { map, coords } => {
                let t = self.tma(map, None);
                let coords = &coords[..rank(map)];
                (
                    self.scope(ScopeOp::TmaStore(t)),
                    json!({"coords": coords, "op": exact}),
                )
            }
            Op::MbarWait { bar, parity } => {
                let s = ScopeOp::MbWait {
                    bar: self.bar_ssa(bar),
                    phase: parity.to_string(),
                };
                (
                    self.scope(s),
                    json!({"bar": bar, "parity": parity, "op": exact}),
                )
            }
            Op::MbarArrive { bar, count } => {
                let s = ScopeOp::MbArrive {
                    bar: self.bar_ssa(bar),
                    count: count as u32,
                };
                (
                    self.scope(s),
                    json!({"bar": bar, "count": count, "op": exact}),
                )
            }
            Op::WgmmaWait { n } => (
                self.scope(ScopeOp::WgmmaWait { pendings: n as u32 }),
                json!({"op": exact}),
            ),
            _ => (format!("SIMFA|{}", op_name(op)), json!({"op": exact})),
        };
        Pending {
            who,
            start: c,
            name,
            args,
            group: None,
        }
    }

    fn issue(&mut self, c: u64, who: Who, op: &Op) {
        let key = (who.cta, who.wg);
        match *op {
            Op::Wgmma { n, mode } => {
                if let Some(g) = self.pending.get_mut(&key).and_then(|p| p.group.as_mut()) {
                    if !g.committed && g.n == n && g.mode == mode {
                        g.count += 1;
                        return;
                    }
                }
                self.close(key, c);
                let mut p = self.event_of(who, c, op);
                p.group = Some(Group {
                    n,
                    mode,
                    count: 1,
                    committed: false,
                });
                self.pending.insert(key, p);
            }
            Op::WgmmaCommit => {
                if let Some(g) = self.pending.get_mut(&key).and_then(|p| p.group.as_mut()) {
                    if !g.committed {
                        // The group and its commit are one WGMMA scope,
                        // which lasts until the next issue.
                        g.committed = true;
                        return;
                    }
                }
                self.close(key, c);
                let p = self.event_of(who, c, op);
                self.pending.insert(key, p);
            }
            Op::Exit => self.close(key, c),
            _ => {
                self.close(key, c);
                let p = self.event_of(who, c, op);
                self.pending.insert(key, p);
            }
        }
    }

    /// Writes the pending event of `key`, ending at `end`.
    fn close(&mut self, key: (u32, u8), end: u64) {
        if let Some(p) = self.pending.remove(&key) {
            self.write(p, end);
        }
    }
}

impl<W: Write> Observer for ProtonWriter<'_, W> {
    fn on_event(&mut self, cycle: Cycle, event: &Event) {
        if let Event::Issue { who, op } = event {
            self.issue(cycle.get(), *who, op);
        }
    }
}

/// The op's name in upper case, as in `SIMFA|<OP>` event names.
pub fn op_name(op: &Op) -> &'static str {
    match op {
        Op::TmaLoad { .. } => "TMA_LOAD",
        Op::TmaStore { .. } => "TMA_STORE",
        Op::StGlobal { .. } => "ST_GLOBAL",
        Op::LdGlobal { .. } => "LD_GLOBAL",
        Op::BulkLoad { .. } => "BULK_LOAD",
        Op::BulkStore { .. } => "BULK_STORE",
        Op::StoreWait { .. } => "STORE_WAIT",
        Op::MbarInit { .. } => "MB_INIT",
        Op::MbarArrive { .. } => "MB_ARRIVE",
        Op::MbarExpectTx { .. } => "MB_EXPECT_TX",
        Op::MbarWait { .. } => "MB_WAIT",
        Op::StageAcquire { .. } => "STAGE_ACQUIRE",
        Op::StageRelease { .. } => "STAGE_RELEASE",
        Op::Wgmma { .. } => "WGMMA_ONE",
        Op::WgmmaCommit => "WGMMA_COMMIT",
        Op::WgmmaWait { .. } => "WGMMA_WAIT",
        Op::BarSync { .. } => "BAR_SYNC",
        Op::BarArrive { .. } => "BAR_ARRIVE",
        Op::Bubble { .. } => "BUBBLE",
        Op::SmemMove { .. } => "SMEM_MOVE",
        Op::LockAcquire { .. } => "LOCK_ACQUIRE",
        Op::LockRelease { .. } => "LOCK_RELEASE",
        Op::CounterAdd { .. } => "COUNTER_ADD",
        Op::CounterWait { .. } => "COUNTER_WAIT",
        Op::Compute { .. } => "COMPUTE",
        Op::Exit => "EXIT",
    }
}

/// Kernel `k`'s declarations in the text assembly, every role a `stream`
/// role with the same WarpGroup count and registers.
pub fn stream_header(k: &Kernel) -> String {
    let mut h = k.clone();
    h.code.clear();
    h.exprs.clear();
    for r in h.roles.iter_mut() {
        r.stream = true;
        r.start = 0;
        r.len = 0;
    }
    crate::asm::print(&h)
}
