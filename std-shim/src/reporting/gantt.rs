//! A Gantt timeline of one SM (the picture of the Sim-FA paper's Figure 9).
//!
//! [`GanttRecorder`] is an [`Observer`] that keeps, for every WarpGroup
//! resident on one chosen SM, the spans of what it was doing:
//!
//! - **TMA** loads and stores, from [`Event::TmaIssue`] to the
//!   [`Event::TmaDone`] with the same operation id;
//! - **WGMMA**: the tensor-pipe intervals of [`Event::WgmmaStart`], merged
//!   while back-to-back so that a commit group shows as one bar;
//! - **waits**, from [`Event::Stall`] to the next [`Event::Wake`], labelled
//!   with the reason (`wait mbar 3`, `wait stage 1`, ...);
//! - **bubbles**: `[cycle, cycle + cycles)` of each issued [`Op::Bubble`];
//! - **computes**: from an issued [`Op::Compute`] to the [`Event::Wake`]
//!   that ends it on the SM's shared units.
//!
//! The spans are laid out on rows ([`GanttRow`]): per WarpGroup one row for
//! its issue stream (waits and bubbles), one for its WGMMAs and as many TMA
//! lanes as it had transfers in flight at once, so that no two spans of a
//! row overlap. [`GanttRecorder::chrome_trace`] turns the rows into a Chrome
//! trace / Perfetto JSON array (one thread per row) and
//! [`crate::reporting::gantt_svg::svg`] into a standalone SVG chart. Both are pure
//! functions of the event stream: the same run gives the same bytes.

use std::collections::BTreeMap;
use std::io;
use std::path::Path;

use serde_json::{json, Value};
use simfa_core::{Cycle, Event, Kernel, Observer, Op, UnitClass, WaitReason, Who, Work};

/// Spans a recorder keeps by default before it starts dropping them.
pub const DEFAULT_MAX_SPANS: usize = 1 << 20;

/// What a span shows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SpanKind {
    /// A TMA or bulk load in flight.
    TmaLoad {
        /// Bytes moved.
        bytes: u64,
    },
    /// A TMA or bulk store in flight.
    TmaStore {
        /// Bytes moved.
        bytes: u64,
    },
    /// Back-to-back WGMMAs on the tensor pipe.
    Wgmma {
        /// WGMMA instructions merged into the span.
        count: u32,
    },
    /// The WarpGroup stalled on `reason`.
    Wait(WaitReason),
    /// The WarpGroup slept in a bubble.
    Bubble,
    /// The WarpGroup ran non-MMA work on the SM's shared units.
    Compute {
        /// Its operations.
        work: Work,
    },
}

impl SpanKind {
    /// The category: `tma load`, `tma store`, `wgmma`, `wait`, `bubble` or
    /// `compute`.
    pub fn category(&self) -> &'static str {
        match self {
            SpanKind::TmaLoad { .. } => "tma load",
            SpanKind::TmaStore { .. } => "tma store",
            SpanKind::Wgmma { .. } => "wgmma",
            SpanKind::Wait(_) => "wait",
            SpanKind::Bubble => "bubble",
            SpanKind::Compute { .. } => "compute",
        }
    }

    /// A short label, e.g. `wait mbar 3` or `tma load`.
    pub fn label(&self) -> String {
        match *self {
            SpanKind::Wait(r) => match r {
                WaitReason::Mbarrier { bar, .. } => format!("wait mbar {bar}"),
                WaitReason::Stage { stage } => format!("wait stage {stage}"),
                WaitReason::NamedBarrier { id } => format!("wait named barrier {id}"),
                WaitReason::WgmmaGroups { .. } => "wait wgmma".into(),
                WaitReason::TensorBuffer => "wait tensor buffer".into(),
                WaitReason::TmaSlot => "wait tma slot".into(),
                WaitReason::Stores { .. } => "wait stores".into(),
                WaitReason::Lock { lock } => format!("wait lock {lock}"),
                WaitReason::Counter { counter } => format!("wait counter {counter}"),
            },
            other => other.category().into(),
        }
    }
}

/// A half-open interval `[start, end)` of cycles, `start < end`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Span {
    /// First cycle.
    pub start: u64,
    /// First cycle after the span.
    pub end: u64,
    /// What happened.
    pub kind: SpanKind,
}

/// Which part of a WarpGroup a row shows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RowKind {
    /// Its issue stream: waits and bubbles.
    Issue,
    /// Its WGMMAs on the tensor pipe.
    Wgmma,
    /// One lane of its TMA transfers.
    Tma,
}

/// One row of the chart (one thread of the Chrome trace); its spans are
/// sorted by start and never overlap.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GanttRow {
    /// E.g. `cta 5 / producer wg0`, `cta 5 / consumer wg1 tma 2`.
    pub name: String,
    /// What the row shows.
    pub kind: RowKind,
    /// Linear CTA index.
    pub cta: u32,
    /// WarpGroup index within the CTA.
    pub wg: u8,
    /// The spans.
    pub spans: Vec<Span>,
}

#[derive(Clone, Copy, Debug)]
struct Pending {
    op: u32,
    start: u64,
    bytes: u64,
    store: bool,
    done: Option<u64>,
}

/// What one WarpGroup did so far.
#[derive(Clone, Debug, Default)]
struct WgLog {
    role: u8,
    wait: Option<(u64, WaitReason)>,
    /// The `compute` in progress: its issue cycle and work.
    compute: Option<(u64, Work)>,
    pending: Vec<Pending>,
    /// The WGMMA span still growing.
    wgmma: Option<Span>,
    issue: Vec<Span>,
    wgmmas: Vec<Span>,
    tma: Vec<Span>,
}

/// Span budget shared by all WarpGroups.
#[derive(Clone, Copy, Debug)]
struct Budget {
    left: usize,
    dropped: u64,
}

impl Budget {
    fn push(&mut self, to: &mut Vec<Span>, span: Span) {
        if span.end <= span.start {
            return;
        }
        if self.left == 0 {
            self.dropped += 1;
            return;
        }
        self.left -= 1;
        to.push(span);
    }
}

/// Records the Gantt spans of the WarpGroups of one SM.
#[derive(Clone, Debug)]
pub struct GanttRecorder {
    sm: u16,
    roles: Vec<String>,
    wgs: BTreeMap<(u32, u8), WgLog>,
    last: u64,
    budget: Budget,
}

impl GanttRecorder {
    /// A recorder for SM `sm`; roles are named `role 0`, `role 1`, ...
    pub fn new(sm: u16) -> Self {
        GanttRecorder {
            sm,
            roles: Vec::new(),
            wgs: BTreeMap::new(),
            last: 0,
            budget: Budget {
                left: DEFAULT_MAX_SPANS,
                dropped: 0,
            },
        }
    }

    /// A recorder for SM `sm` naming roles as `k` does.
    pub fn for_kernel(sm: u16, k: &Kernel) -> Self {
        Self::new(sm).with_role_names(k.roles.iter().map(|r| r.name.to_string()).collect())
    }

    /// Names role `i` `names[i]` in row names.
    pub fn with_role_names(mut self, names: Vec<String>) -> Self {
        self.roles = names;
        self
    }

    /// Keeps at most `max` spans; later ones are counted by
    /// [`GanttRecorder::dropped`] instead.
    pub fn with_max_spans(mut self, max: usize) -> Self {
        self.budget.left = max;
        self
    }

    /// The SM recorded.
    pub fn sm(&self) -> u16 {
        self.sm
    }

    /// The last cycle seen; spans still open are closed there.
    pub fn last_cycle(&self) -> u64 {
        self.last
    }

    /// Spans dropped because the budget of [`GanttRecorder::with_max_spans`]
    /// was spent.
    pub fn dropped(&self) -> u64 {
        self.budget.dropped
    }

    fn role_name(&self, role: u8) -> String {
        self.roles
            .get(role as usize)
            .cloned()
            .unwrap_or_else(|| format!("role {role}"))
    }

    /// The rows of the chart: per WarpGroup (by CTA, then WarpGroup) its
    /// issue row, its WGMMA row if it issued any and its TMA lanes. Spans
    /// still open are closed at [`GanttRecorder::last_cycle`].
    pub fn rows(&self) -> Vec<GanttRow> {
        let mut rows = Vec::new();
        let mut budget = Budget {
            left: usize::MAX,
            dropped: 0,
        };
        for (&(cta, wg), log) in &self.wgs {
            let base = format!("cta {cta} / {} wg{wg}", self.role_name(log.role));
            let row = |name: String, kind, spans| GanttRow {
                name,
                kind,
                cta,
                wg,
                spans,
            };
            let mut issue = log.issue.clone();
            if let Some((start, reason)) = log.wait {
                let kind = SpanKind::Wait(reason);
                budget.push(
                    &mut issue,
                    Span {
                        start,
                        end: self.last,
                        kind,
                    },
                );
            }
            rows.push(row(base.clone(), RowKind::Issue, issue));
            let mut wgmmas = log.wgmmas.clone();
            wgmmas.extend(log.wgmma);
            if !wgmmas.is_empty() {
                rows.push(row(format!("{base} wgmma"), RowKind::Wgmma, wgmmas));
            }
            let mut tma = log.tma.clone();
            for p in &log.pending {
                let end = p.done.unwrap_or(self.last);
                budget.push(&mut tma, tma_span(p, end));
            }
            tma.sort_by_key(|s| (s.start, s.end, s.kind.category()));
            // Greedy lanes: each span on the first lane free by its start.
            let mut lanes: Vec<Vec<Span>> = Vec::new();
            for s in tma {
                match lanes
                    .iter_mut()
                    .find(|l| l.last().map_or(true, |x| x.end <= s.start))
                {
                    Some(l) => l.push(s),
                    None => lanes.push(vec![s]),
                }
            }
            for (i, spans) in lanes.into_iter().enumerate() {
                let name = match i {
                    0 => format!("{base} tma"),
                    i => format!("{base} tma {}", i + 1),
                };
                rows.push(row(name, RowKind::Tma, spans));
            }
        }
        rows
    }

    /// The timeline as a Chrome trace / Perfetto JSON array: `thread_name`
    /// and `thread_sort_index` metadata per row, then one complete (`"X"`)
    /// event per span with `pid` the SM, `tid` the row, `ts`/`dur` in
    /// microseconds at `clock_mhz` (rounded to whole picoseconds) and the
    /// raw cycles in `args`. A clock
    /// that is not a positive number counts one cycle as one microsecond.
    pub fn chrome_trace(&self, clock_mhz: f64) -> Value {
        let mhz = if clock_mhz.is_finite() && clock_mhz > 0.0 {
            clock_mhz
        } else {
            1.0
        };
        // Whole picoseconds, so that adjacent spans meet exactly.
        let ps = |c: u64| (c as f64 * 1e6 / mhz).round() as u64;
        let us = |ps: u64| ps as f64 / 1e6;
        let pid = self.sm;
        let mut out = vec![json!({
            "ph": "M", "name": "process_name", "pid": pid, "tid": 0,
            "args": { "name": format!("SM {pid}") },
        })];
        for (tid, row) in self.rows().iter().enumerate() {
            out.push(json!({
                "ph": "M", "name": "thread_name", "pid": pid, "tid": tid,
                "args": { "name": row.name },
            }));
            out.push(json!({
                "ph": "M", "name": "thread_sort_index", "pid": pid, "tid": tid,
                "args": { "sort_index": tid },
            }));
            for s in &row.spans {
                let mut args = json!({
                    "start_cycle": s.start,
                    "end_cycle": s.end,
                    "cycles": s.end - s.start,
                });
                match s.kind {
                    SpanKind::TmaLoad { bytes } | SpanKind::TmaStore { bytes } => {
                        args["bytes"] = bytes.into();
                    }
                    SpanKind::Wgmma { count } => args["wgmmas"] = count.into(),
                    SpanKind::Wait(r) => args["reason"] = r.to_string().into(),
                    SpanKind::Bubble => {}
                    SpanKind::Compute { work } => {
                        for c in UnitClass::ALL {
                            args[c.name()] = work.get(c).into();
                        }
                    }
                }
                out.push(json!({
                    "name": s.kind.label(),
                    "cat": s.kind.category(),
                    "ph": "X",
                    "pid": pid,
                    "tid": tid,
                    "ts": us(ps(s.start)),
                    "dur": us(ps(s.end) - ps(s.start)),
                    "args": args,
                }));
            }
        }
        Value::Array(out)
    }

    fn log(&mut self, who: Who) -> Option<&mut WgLog> {
        if who.sm != self.sm {
            return None;
        }
        let log = self.wgs.entry((who.cta, who.wg)).or_default();
        log.role = who.role;
        Some(log)
    }
}

fn tma_span(p: &Pending, end: u64) -> Span {
    let kind = if p.store {
        SpanKind::TmaStore { bytes: p.bytes }
    } else {
        SpanKind::TmaLoad { bytes: p.bytes }
    };
    Span {
        start: p.start,
        end: end.max(p.start),
        kind,
    }
}

impl Observer for GanttRecorder {
    fn on_event(&mut self, cycle: Cycle, event: &Event) {
        let c = cycle.get();
        self.last = self.last.max(c);
        let mut budget = self.budget;
        match *event {
            Event::Stall { who, reason } => {
                if let Some(log) = self.log(who) {
                    if let Some((start, r)) = log.wait.replace((c, reason)) {
                        let span = Span {
                            start,
                            end: c,
                            kind: SpanKind::Wait(r),
                        };
                        push_issue(&mut budget, &mut log.issue, span);
                    }
                }
            }
            Event::Wake { who } => {
                if let Some(log) = self.log(who) {
                    if let Some((start, r)) = log.wait.take() {
                        let span = Span {
                            start,
                            end: c,
                            kind: SpanKind::Wait(r),
                        };
                        push_issue(&mut budget, &mut log.issue, span);
                    } else if let Some((start, work)) = log.compute.take() {
                        let span = Span {
                            start,
                            end: c.max(start + 1),
                            kind: SpanKind::Compute { work },
                        };
                        push_issue(&mut budget, &mut log.issue, span);
                    }
                }
            }
            Event::Issue {
                who,
                op: Op::Compute { work },
            } => {
                if let Some(log) = self.log(who) {
                    log.compute = Some((c, work));
                }
            }
            Event::Issue {
                who,
                op: Op::Bubble { cycles },
            } => {
                let end = c + cycles as u64;
                if let Some(log) = self.log(who) {
                    let span = Span {
                        start: c,
                        end,
                        kind: SpanKind::Bubble,
                    };
                    push_issue(&mut budget, &mut log.issue, span);
                    self.last = self.last.max(end);
                }
            }
            Event::WgmmaStart { who, start, end } => {
                if let Some(log) = self.log(who) {
                    match &mut log.wgmma {
                        Some(cur) if start <= cur.end => {
                            cur.end = cur.end.max(end);
                            if let SpanKind::Wgmma { count } = &mut cur.kind {
                                *count += 1;
                            }
                        }
                        cur => {
                            let next = Span {
                                start,
                                end,
                                kind: SpanKind::Wgmma { count: 1 },
                            };
                            if let Some(done) = cur.replace(next) {
                                budget.push(&mut log.wgmmas, done);
                            }
                        }
                    }
                }
            }
            Event::TmaIssue {
                who,
                bytes,
                store,
                done,
                op,
                ..
            } => {
                if let Some(log) = self.log(who) {
                    log.pending.push(Pending {
                        op,
                        start: c,
                        bytes,
                        store,
                        done,
                    });
                }
            }
            Event::TmaDone { who, op, .. } => {
                if let Some(log) = self.log(who) {
                    if let Some(i) = log.pending.iter().position(|p| p.op == op) {
                        let p = log.pending.remove(i);
                        budget.push(&mut log.tma, tma_span(&p, c));
                    }
                }
            }
            _ => {}
        }
        self.budget = budget;
    }
}

/// Appends to an issue row, cutting a one-cycle bubble short where the next
/// span starts in the same cycle, so that the row never overlaps itself.
fn push_issue(budget: &mut Budget, row: &mut Vec<Span>, span: Span) {
    if let Some(last) = row.last_mut() {
        if last.end > span.start {
            last.end = span.start.max(last.start);
            if last.end == last.start {
                row.pop();
                budget.left = budget.left.saturating_add(1);
            }
        }
    }
    budget.push(row, span);
}

/// Writes the Chrome trace of `rec` to `path` atomically.
pub fn write_chrome_trace(path: &Path, rec: &GanttRecorder, clock_mhz: f64) -> io::Result<()> {
    let bytes = serde_json::to_vec(&rec.chrome_trace(clock_mhz)).map_err(io::Error::other)?;
    crate::load::write_atomic(path, &bytes)
}

#[cfg(test)]
#[path = "gantt_tests.rs"]
mod tests;
