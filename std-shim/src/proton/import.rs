//! Translating a Proton chrome trace into a kernel (paper section V-A4).
//!
//! The kernel's declarations (grid, tensor maps, mbarriers, stages, roles
//! with their WarpGroup counts and registers) come from a header: the
//! trace's `otherData.simfa_kernel` (written by [`super::export`]) or a
//! kernel file given by the caller, whose role programs are ignored. Every
//! role of the imported kernel is a `stream` role; its WarpGroups' ops are
//! written to an op file ([`super::ops_file`]).
//!
//! Warps are grouped into WarpGroups (`warp / 4`); the lowest-numbered warp
//! of a WarpGroup that recorded events gives its stream, and the other
//! warps' identical events are dropped (a warp whose names differ is
//! counted in [`ImportSummary::mismatched_warps`]). Timestamps only order
//! a warp's events. Each event becomes instructions by one table:
//!
//! | event | instructions |
//! |---|---|
//! | `args.op` present (any name but `WGMMA`) | that op |
//! | `WGMMA` M,N,K, instrM/N/K, `wgs=AxB` | ceil(M/(instrM A)) x ceil(N/(instrN B)) x ceil(K/instrK) WGMMAs of N = instrN, then one commit |
//! | `WGMMA_WAIT` pendings | wgmma.wait pendings |
//! | `TMA_LOAD` desc, bar | tma.load of the map named desc, onto bar |
//! | `TMA_STORE` desc | tma.store of the map named desc |
//! | `MB_EXPECT` bar, bytes | mbar.expect_tx bar, bytes, then mbar.arrive bar (TTGIR's `barrier_expect` is PTX `mbarrier.arrive.expect_tx`) |
//! | `MB_ARRIVE` bar, count | count x mbar.arrive bar |
//! | `MB_WAIT` bar, phase | mbar.wait bar, parity |
//!
//! SSA names map to the header's declarations by name without the `%`
//! (`desc=%K` is tensor map `K`, `bar=%full` mbarrier array `full`).
//! Operands a trace does not record are recovered by rule: the k-th event
//! of a site (a distinct name) in a WarpGroup uses element `k mod L` of an
//! `L`-element barrier array and, for a wait, parity `(k / L) mod 2` (a
//! multi-buffered ring; `args.bar` and `args.parity`, or a literal phase,
//! override it); without `args.coords` a copy's box origin is the k-th box
//! along the innermost dimension and the CTA's box along the next one
//! (`[k * box0, cta * box1]`), the synthetic addressing of section V-C.
//! Names that are not `SIMFA` scopes are skipped and counted.

use std::collections::HashMap;
use std::path::Path;
use std::rc::Rc;

use simfa_core::{Kernel, Op, WgmmaMode};

use super::error::ImportError;
use super::events::{self, Record};
use super::layout::Layout;
use super::ops_file::OpsWriter;
use crate::ttgir::{Scope, ScopeOp};

/// What an import did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ImportSummary {
    /// Events read.
    pub events: u64,
    /// Events ignored: not complete events, no CTA or warp, or a name that
    /// is not a `SIMFA` scope.
    pub ignored: u64,
    /// Events of a WarpGroup's other warps, dropped as duplicates.
    pub duplicates: u64,
    /// Warps whose event names differ from their WarpGroup's stream.
    pub mismatched_warps: u64,
    /// Events replayed from `args.op`.
    pub exact: u64,
    /// Events translated from their scope string.
    pub translated: u64,
    /// WarpGroup streams written.
    pub streams: u64,
    /// Instructions written.
    pub ops: u64,
}

/// The header kernel from the trace's `otherData.simfa_kernel`.
fn header_from_trace(other: Option<&serde_json::Value>, path: &str) -> Result<Kernel, ImportError> {
    let text = other
        .and_then(|o| o.get("simfa_kernel"))
        .and_then(|v| v.as_str())
        .ok_or_else(|| ImportError::Header {
            path: path.into(),
            problem: "the trace has no otherData.simfa_kernel; give a header kernel file".into(),
        })?;
    crate::asm::parse(text, &format!("{path} (otherData.simfa_kernel)")).map_err(|e| {
        ImportError::Header {
            path: path.into(),
            problem: e.to_string(),
        }
    })
}

/// Kernel `g`'s declarations (its cluster shape included) with every role a stream role and no
/// programs, rebuilt through the kernel builder (which checks them).
pub fn streamed(g: Kernel) -> Result<Kernel, simfa_core::builder::BuilderError> {
    let cluster = g.cluster;
    let mut b = simfa_core::builder::Builder::new(
        Kernel {
            cluster,
            ..Kernel::default()
        },
        g.name.as_str(),
    )?;
    b.grid(g.grid);
    b.order(g.order);
    b.smem(g.smem_bytes);
    for m in g.maps {
        b.map(m)?;
    }
    for d in g.mbarriers {
        b.mbarriers(d.name.as_str(), d.len, d.count)?;
    }
    for d in g.stages {
        b.stages(d.name.as_str(), d.len, d.consumers)?;
    }
    for r in g.roles {
        b.stream_role(r.name.as_str(), r.count as u32, r.regs as u32)?;
    }
    b.finish()
}

/// Per-WarpGroup translation state: how often each site was seen.
#[derive(Default)]
struct Occurrences(HashMap<u32, u64>);

impl Occurrences {
    fn next(&mut self, name: u32) -> u64 {
        let c = self.0.entry(name).or_insert(0);
        *c += 1;
        *c - 1
    }
}

/// How an event became instructions.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum How {
    /// Replayed from `args.op`.
    Exact,
    /// Translated from its scope.
    Scope,
    /// Not a SIMFA event: skipped.
    Skipped,
}

/// Translates one record into `out`.
struct Translator<'a> {
    k: &'a Kernel,
    layout: Option<&'a Layout>,
    names: &'a [String],
    scopes: HashMap<u32, Option<Rc<Scope>>>,
    path: &'a str,
}

impl Translator<'_> {
    fn err(&self, r: &Record, problem: String) -> ImportError {
        ImportError::Event {
            path: self.path.into(),
            index: r.seq,
            name: self.names[r.name as usize].clone(),
            problem,
        }
    }

    /// The parsed scope of name `name` (parsed once; shared, not copied,
    /// by every event of that name).
    fn scope(&mut self, name: u32) -> Option<Rc<Scope>> {
        let names = self.names;
        self.scopes
            .entry(name)
            .or_insert_with(|| names[name as usize].parse().ok().map(Rc::new))
            .clone()
    }

    fn map(&self, r: &Record, desc: &str) -> Result<u8, ImportError> {
        let n = desc.trim_start_matches('%');
        self.k
            .maps
            .iter()
            .position(|m| m.name.as_str() == n)
            .map(|i| i as u8)
            .ok_or_else(|| self.err(r, format!("the header has no tensor map `{n}`")))
    }

    /// The barrier array named `bar`: its first CTA-wide index and length.
    fn bar_array(&self, r: &Record, bar: &str) -> Result<(u16, u16), ImportError> {
        let n = bar.trim_start_matches('%');
        let d = self
            .k
            .mbarriers
            .iter()
            .position(|d| d.name.as_str() == n)
            .ok_or_else(|| self.err(r, format!("the header has no mbarrier array `{n}`")))?;
        Ok((self.k.mbar_base(d as u8), self.k.mbarriers[d].len.max(1)))
    }

    /// The barrier and parity of the k-th use of a site.
    fn bar_at(&self, r: &Record, bar: &str, k: u64) -> Result<(u16, u8), ImportError> {
        let (base, len) = self.bar_array(r, bar)?;
        let idx = r.args.bar.unwrap_or(base + (k % len as u64) as u16);
        let parity = r.args.parity.unwrap_or(((k / len as u64) % 2) as u8);
        Ok((idx, parity))
    }

    fn coords(&self, r: &Record, map: u8, k: u64) -> [i64; 5] {
        if let Some(c) = r.args.coords {
            return c;
        }
        let m = &self.k.maps[map as usize];
        if let Some((l, t)) = self
            .layout
            .and_then(|l| l.tensors.get(m.name.as_str()).map(|t| (l, t)))
        {
            return l.origin(t, &m.boxdim, r.cta, k);
        }
        let mut c = [0i64; 5];
        c[0] = k as i64 * m.boxdim[0] as i64;
        if m.rank > 1 {
            c[1] = r.cta as i64 * m.boxdim[1] as i64;
        }
        c
    }

    /// Appends the instructions of record `r` (the k-th of its site) to
    /// `out`.
    fn translate(&mut self, r: &Record, k: u64, out: &mut Vec<Op>) -> Result<How, ImportError> {
        let scope = self.scope(r.name);
        let is_wgmma = matches!(scope.as_deref().map(|s| &s.op), Some(ScopeOp::Wgmma(_)));
        if let (Some(op), false) = (r.args.op, is_wgmma) {
            out.push(op);
            return Ok(How::Exact);
        }
        let Some(scope) = scope else {
            if self.names[r.name as usize].starts_with("SIMFA|") {
                return Err(self.err(
                    r,
                    "not a scope the translator knows, and no args.op to replay".into(),
                ));
            }
            return Ok(How::Skipped);
        };
        match &scope.op {
            ScopeOp::Wgmma(w) => {
                let (count, n) = w.per_warpgroup().map_err(|why| self.err(r, why))?;
                let mode = match w.mode {
                    crate::ttgir::WgmmaMode::Ss => WgmmaMode::Ss,
                    crate::ttgir::WgmmaMode::Rs => WgmmaMode::Rs,
                };
                out.extend((0..count).map(|_| Op::Wgmma { n, mode }));
                out.push(Op::WgmmaCommit);
            }
            ScopeOp::WgmmaWait { pendings } => out.push(Op::WgmmaWait {
                n: (*pendings).min(255) as u8,
            }),
            ScopeOp::TmaLoad(t) => {
                let map = self.map(r, &t.desc)?;
                let Some(bar) = &t.bar else {
                    return Err(self.err(r, "a TMA load without a barrier".into()));
                };
                let (bar, _) = self.bar_at(r, bar, k)?;
                let coords = self.coords(r, map, k);
                out.push(Op::TmaLoad {
                    map,
                    bar,
                    coords,
                    multicast: 0,
                });
            }
            ScopeOp::TmaStore(t) => {
                let map = self.map(r, &t.desc)?;
                let coords = self.coords(r, map, k);
                out.push(Op::TmaStore { map, coords });
            }
            ScopeOp::MbExpect { bar, bytes } => {
                let (bar, _) = self.bar_at(r, bar, k)?;
                let bytes = u32::try_from(*bytes)
                    .map_err(|_| self.err(r, format!("{bytes} bytes do not fit an mbarrier")))?;
                // `barrier_expect` is PTX's mbarrier.arrive.expect_tx.
                out.push(Op::MbarExpectTx { bar, bytes });
                out.push(Op::MbarArrive { bar, count: 1 });
            }
            ScopeOp::MbArrive { bar, count } => {
                let (bar, _) = self.bar_at(r, bar, k)?;
                let count = u16::try_from(*count)
                    .map_err(|_| self.err(r, format!("an arrival count of {count}")))?;
                out.push(Op::MbarArrive { bar, count });
            }
            ScopeOp::MbWait { bar, phase } => {
                let (bar, mut parity) = self.bar_at(r, bar, k)?;
                if r.args.parity.is_none() {
                    if let Ok(p) = phase.parse::<u64>() {
                        parity = (p % 2) as u8;
                    }
                }
                out.push(Op::MbarWait { bar, parity });
            }
        }
        Ok(How::Scope)
    }
}

/// Where an import's kernel header and addresses come from besides the
/// trace.
#[derive(Clone, Debug, Default)]
pub struct ImportOptions {
    /// A kernel whose declarations the events refer to (its programs are
    /// ignored); first choice.
    pub header: Option<Kernel>,
    /// The host-side layout ([`Layout`]): with it the header is built from
    /// the layout and the trace's scopes, and box origins are recovered
    /// from the tensors' layouts.
    pub layout: Option<Layout>,
    /// The instrumented TTGIR the trace was recorded from, and its name:
    /// every SIMFA scope of the trace must be one of its sites, and its
    /// `num-warps` gives the WarpGroups per CTA.
    pub ttgir: Option<(String, String)>,
}

/// Imports the chrome trace at `trace`: writes the WarpGroups' streams to
/// the op file `ops` and returns the kernel (every role a stream role)
/// with what the import did. The header is `opts.header`, else built from
/// `opts.layout`, else the trace's `otherData.simfa_kernel`.
pub fn import_proton(
    trace: &Path,
    opts: &ImportOptions,
    ops: &Path,
) -> Result<(Kernel, ImportSummary), ImportError> {
    let path = trace.display().to_string();
    let (info, mut sorted) = events::read(trace)?;
    let scopes: Vec<Scope> = info.names.iter().filter_map(|n| n.parse().ok()).collect();
    let mut ttgir_wgs = None;
    if let Some((name, text)) = &opts.ttgir {
        let sites = crate::ttgir::sites(name, text).map_err(|e| ImportError::Header {
            path: name.clone(),
            problem: e.to_string(),
        })?;
        for s in &scopes {
            if !sites.iter().any(|site| site.scope == *s) {
                return Err(ImportError::Header {
                    path: path.clone(),
                    problem: format!("scope `{s}` is not one of the sites of {name}"),
                });
            }
        }
        ttgir_wgs = super::layout::ttgir_warpgroups(text);
    }
    let stem = trace
        .file_stem()
        .map_or("trace".into(), |s| s.to_string_lossy().into_owned());
    let stem: String = stem.chars().take(24).collect();
    let header = match (&opts.header, &opts.layout) {
        (Some(h), _) => h.clone(),
        (None, Some(l)) => l.header(&stem, &scopes, ttgir_wgs, &path)?,
        (None, None) => header_from_trace(info.other.as_ref(), &path)?,
    };
    let k = streamed(header).map_err(|e| ImportError::Header {
        path: path.clone(),
        problem: e.to_string(),
    })?;
    let mut sum = ImportSummary {
        events: info.events,
        ignored: info.ignored,
        ..ImportSummary::default()
    };
    let mut tr = Translator {
        k: &k,
        layout: opts.layout.as_ref(),
        names: &info.names,
        scopes: HashMap::new(),
        path: &path,
    };
    let wgs = k.wgs_per_cta() as u32;
    let ctas = k.ctas();
    let mut w = OpsWriter::create(ops)?;
    let sort_err = |source| ImportError::Io {
        path: "a temporary sort file".into(),
        source,
    };
    // The WarpGroup being written: (cta, wg), its stream's warp and names,
    // the warp being compared and how far.
    let mut cur: Option<(u32, u32)> = None;
    let mut lead = 0u32;
    let mut names: Vec<u32> = Vec::new();
    let mut other: Option<(u32, usize, bool)> = None;
    let mut occ = Occurrences::default();
    let mut buf = Vec::new();
    let finish_other = |o: Option<(u32, usize, bool)>, names: &[u32], sum: &mut ImportSummary| {
        if let Some((_, at, ok)) = o {
            if !ok || at != names.len() {
                sum.mismatched_warps += 1;
            }
        }
    };
    while let Some(r) = sorted.next_record().map_err(sort_err)? {
        let key = (r.cta, r.wg());
        if cur != Some(key) {
            finish_other(other.take(), &names, &mut sum);
            if r.cta as u64 >= ctas || r.wg() >= wgs {
                return Err(tr.err(
                    &r,
                    format!(
                        "CTA {} warp {} is outside the header's {ctas} CTAs of {wgs} WarpGroups",
                        r.cta, r.warp
                    ),
                ));
            }
            let (role, wg) = k.role_of(r.wg() as usize);
            w.begin(r.cta, role, wg)?;
            sum.streams += 1;
            cur = Some(key);
            lead = r.warp;
            names.clear();
            occ = Occurrences::default();
        }
        if r.warp != lead {
            // Another warp of the WarpGroup: a duplicate of the stream.
            sum.duplicates += 1;
            match &mut other {
                Some((warp, at, ok)) if *warp == r.warp => {
                    *ok &= names.get(*at) == Some(&r.name);
                    *at += 1;
                }
                _ => {
                    finish_other(other.take(), &names, &mut sum);
                    other = Some((r.warp, 1, names.first() == Some(&r.name)));
                }
            }
            continue;
        }
        names.push(r.name);
        let kth = occ.next(r.name);
        buf.clear();
        match tr.translate(&r, kth, &mut buf)? {
            How::Exact => sum.exact += 1,
            How::Scope => sum.translated += 1,
            How::Skipped => sum.ignored += 1,
        }
        for op in &buf {
            w.push(op)?;
        }
        sum.ops += buf.len() as u64;
    }
    finish_other(other.take(), &names, &mut sum);
    w.finish()?;
    Ok((k, sum))
}
