//! The read-after-transfer check of one SCALE-Sim layer.
//!
//! [`check_layer`] streams a layer directory's six traces (see the
//! [module docs](super) for which file is what) and judges every SRAM read
//! of IFMAP and FILTER with [`rules::classify_read`], the rules simfa's own
//! `--check` uses. Per operand address it keeps one small record (the
//! earliest completed transfer, whether it was read, which kinds of
//! violation it had) in a map with a fixed hasher; rows are read one at a
//! time, so memory grows with the layer's distinct addresses, never with
//! the traces' length.

use std::fs::File;
use std::io::BufReader;
use std::path::Path;

use serde::Serialize;

use super::error::{Fault, ScaleSimError};
use super::trace::TraceReader;
use crate::check::rules;
use crate::check::{Map, ViolationKind, KEPT};

/// The three kinds this checker can find, in report order: the first
/// three of [`ViolationKind::ALL`], so a kind's `ViolationKind::index`
/// is its place here.
pub const KINDS: [ViolationKind; 3] = [
    ViolationKind::NoTransfer,
    ViolationKind::BeforeTransfer,
    ViolationKind::HitTooSoon,
];

const _: () = assert!(KINDS[0] as usize == 0 && KINDS[1] as usize == 1 && KINDS[2] as usize == 2);

/// An operand whose reads are checked.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Operand {
    /// The input feature map.
    Ifmap,
    /// The filter (weights).
    Filter,
}

impl Operand {
    /// Both, in report order.
    pub const ALL: [Operand; 2] = [Operand::Ifmap, Operand::Filter];

    /// `IFMAP` or `FILTER`, as SCALE-Sim's file names spell it.
    pub const fn name(self) -> &'static str {
        match self {
            Operand::Ifmap => "IFMAP",
            Operand::Filter => "FILTER",
        }
    }
}

/// One read that breaks a condition.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ReadViolation {
    /// Which condition.
    #[serde(serialize_with = "kind_name")]
    pub kind: ViolationKind,
    /// The address read.
    pub addr: u64,
    /// Its line in the SRAM trace.
    pub line: u64,
    /// The cycle the read was requested (its lookup).
    pub lookup: i64,
    /// The cycle it returned (the SRAM trace's cycle).
    pub served: i64,
    /// The earliest completed transfer of the address, if any.
    pub transfer: Option<i64>,
    /// The hit latency it was held to.
    pub hit_latency: u64,
}

fn kind_name<S: serde::Serializer>(k: &ViolationKind, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(k.name())
}

/// What one operand's reads came to.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct OperandReport {
    /// Which operand.
    pub operand: Operand,
    /// Reads (non-idle lanes of the SRAM trace).
    pub reads: u64,
    /// Distinct addresses read.
    pub addresses: u64,
    /// Words transferred (non-idle lanes of the DRAM trace).
    pub transfers: u64,
    /// Distinct addresses transferred.
    pub transferred: u64,
    /// Lanes per DRAM trace row (the words fetched per cycle).
    pub fetch_lanes: Option<usize>,
    /// Distinct addresses with at least one violating read, per kind in
    /// [`KINDS`] order.
    pub violating_addresses: [u64; 3],
    /// Violating reads per kind, in [`KINDS`] order.
    pub violating_reads: [u64; 3],
    /// The first [`KEPT`] violating reads, in trace order.
    pub first: Vec<ReadViolation>,
}

impl OperandReport {
    /// Violating reads of every kind.
    pub fn total(&self) -> u64 {
        self.violating_reads.iter().sum()
    }
}

/// A measurement window: `cycles = last - first`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Window {
    /// Where it starts.
    pub first: i64,
    /// Where it ends.
    pub last: i64,
    /// Its length, `last - first`.
    pub cycles: i64,
}

impl Window {
    fn new(first: i64, last: i64) -> Self {
        Window {
            first,
            last,
            cycles: last.saturating_sub(first),
        }
    }
}

/// Settings of a check.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CheckOptions {
    /// The SRAM read buffers' hit latency (SCALE-Sim v3: 1 cycle, the
    /// `read_buffer` default, which `scale.cfg` cannot change).
    pub hit_latency: u64,
    /// Expected lanes of the IFMAP and FILTER DRAM trace rows, when the
    /// configuration tells them.
    pub fetch_lanes: [Option<u64>; 2],
}

impl Default for CheckOptions {
    fn default() -> Self {
        CheckOptions {
            hit_latency: 1,
            fetch_lanes: [None, None],
        }
    }
}

/// What one layer came to.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct LayerCheck {
    /// IFMAP, then FILTER.
    pub operands: [OperandReport; 2],
    /// The compute field: from the first demand row's request (cycle 0)
    /// to the last OFMAP SRAM write (SCALE-Sim's "Total Cycles").
    pub compute_field: Window,
    /// The cold interval: from the first IFMAP or FILTER DRAM transfer
    /// (the cold fill, at negative cycles) to the last OFMAP DRAM write
    /// (SCALE-Sim's "Total Cycles (incl. prefetch)"); `None` when the DRAM
    /// traces are empty.
    pub cold_interval: Option<Window>,
    /// Demand rows (lines of each SRAM trace).
    pub rows: u64,
}

impl LayerCheck {
    /// Violating reads of both operands.
    pub fn total(&self) -> u64 {
        self.operands.iter().map(OperandReport::total).sum()
    }
}

#[derive(Clone, Copy, Default)]
struct AddrState {
    done: Option<i64>,
    read: bool,
    kinds: u8,
}

struct OperandState {
    op: Operand,
    map: Map<u64, AddrState>,
    reads: u64,
    transfers: u64,
    lanes: Option<usize>,
    counts: [u64; 3],
    kept: Vec<ReadViolation>,
}

impl OperandState {
    fn new(op: Operand) -> Self {
        OperandState {
            op,
            map: Map::default(),
            reads: 0,
            transfers: 0,
            lanes: None,
            counts: [0; 3],
            kept: Vec::new(),
        }
    }

    fn transfer(&mut self, addr: u64, done: i64) {
        self.transfers += 1;
        let e = self.map.entry(addr).or_default();
        e.done = Some(e.done.map_or(done, |d| d.min(done)));
    }

    fn read(&mut self, addr: u64, lookup: i64, served: i64, line: u64, hit_latency: u64) {
        self.reads += 1;
        let e = self.map.entry(addr).or_default();
        e.read = true;
        let Some(kind) = rules::classify_read(e.done, lookup, served, Some(hit_latency)) else {
            return;
        };
        let i = kind.index();
        e.kinds |= 1 << i;
        self.counts[i] += 1;
        if self.kept.len() < KEPT {
            self.kept.push(ReadViolation {
                kind,
                addr,
                line,
                lookup,
                served,
                transfer: e.done,
                hit_latency,
            });
        }
    }

    fn finish(self) -> OperandReport {
        let mut addresses = 0;
        let mut transferred = 0;
        let mut violating = [0; 3];
        for s in self.map.values() {
            addresses += s.read as u64;
            transferred += s.done.is_some() as u64;
            for (i, v) in violating.iter_mut().enumerate() {
                *v += (s.kinds >> i & 1) as u64;
            }
        }
        OperandReport {
            operand: self.op,
            reads: self.reads,
            addresses,
            transfers: self.transfers,
            transferred,
            fetch_lanes: self.lanes,
            violating_addresses: violating,
            violating_reads: self.counts,
            first: self.kept,
        }
    }
}

type Reader = TraceReader<BufReader<File>>;

fn open(dir: &Path, name: &str) -> Result<Reader, ScaleSimError> {
    let path = dir.join(name);
    let f = File::open(&path).map_err(|e| ScaleSimError::io(&path, e))?;
    Ok(TraceReader::new(
        path.display().to_string(),
        BufReader::with_capacity(1 << 16, f),
    ))
}

/// Checks the layer whose traces are in `dir` (a `layerN` directory).
pub fn check_layer(dir: &Path, opts: &CheckOptions) -> Result<LayerCheck, ScaleSimError> {
    let mut ops = Operand::ALL.map(OperandState::new);
    let mut addrs = Vec::new();
    let mut cold_first: Option<i64> = None;
    // Transfers: every non-idle lane of a DRAM read trace.
    for (st, expect) in ops.iter_mut().zip(opts.fetch_lanes) {
        let mut r = open(dir, &format!("{}_DRAM_TRACE.csv", st.op.name()))?;
        while let Some(cycle) = r.next_row(&mut addrs)? {
            if st.lanes.is_none() {
                st.lanes = r.lanes();
                if let (Some(want), Some(got)) = (expect, st.lanes) {
                    if want != got as u64 {
                        // Where the first lane past the configured ones
                        // starts (or the line's end when there are fewer).
                        let col = r.field_column(want.min(got as u64) as usize + 1);
                        return Err(ScaleSimError::at(
                            r.file(),
                            r.line(),
                            col,
                            Fault::Lanes {
                                found: got,
                                expected: want,
                            },
                        ));
                    }
                }
            }
            cold_first = Some(cold_first.map_or(cycle, |c| c.min(cycle)));
            for &a in &addrs {
                st.transfer(a, cycle);
            }
        }
    }
    let mut cold_last: Option<i64> = None;
    let mut r = open(dir, "OFMAP_DRAM_TRACE.csv")?;
    while let Some(cycle) = r.next_row(&mut addrs)? {
        cold_last = Some(cold_last.map_or(cycle, |c| c.max(cycle)));
    }
    // Reads: the three SRAM traces in step, one row per demand cycle.
    let mut sram = [
        open(dir, "IFMAP_SRAM_TRACE.csv")?,
        open(dir, "FILTER_SRAM_TRACE.csv")?,
        open(dir, "OFMAP_SRAM_TRACE.csv")?,
    ];
    let mut lanes: [Vec<u64>; 3] = Default::default();
    let hl = opts.hit_latency;
    let mut lookup: i64 = 0;
    let mut compute_last: i64 = 0;
    let mut rows = 0u64;
    loop {
        let mut served = [None; 3];
        for ((r, a), s) in sram.iter_mut().zip(lanes.iter_mut()).zip(served.iter_mut()) {
            *s = r.next_row(a)?;
        }
        let [Some(i), Some(f), Some(o)] = served else {
            if let Some(short) = served.iter().position(Option::is_none) {
                if let Some(long) = served.iter().position(Option::is_some) {
                    return Err(ScaleSimError::at(
                        sram[short].file(),
                        sram[short].line() + 1,
                        1,
                        Fault::EndsEarly(sram[long].file().to_string()),
                    ));
                }
            }
            break;
        };
        rows += 1;
        for (k, st) in ops.iter_mut().enumerate() {
            let line = sram[k].line();
            for &a in &lanes[k] {
                st.read(a, lookup, served[k].expect("all rows present"), line, hl);
            }
        }
        compute_last = compute_last.max(o);
        // SCALE-Sim's service_memory_requests: the next row is requested one
        // cycle later, plus the largest stall of this row's three accesses.
        let stall = i
            .saturating_sub(lookup)
            .saturating_sub_unsigned(hl)
            .max(f.saturating_sub(lookup).saturating_sub_unsigned(hl))
            .max(o.saturating_sub(lookup));
        lookup = lookup.saturating_add(1).saturating_add(stall);
    }
    let cold_interval = match (cold_first, cold_last) {
        (Some(a), Some(b)) => Some(Window::new(a, b)),
        _ => None,
    };
    Ok(LayerCheck {
        operands: ops.map(OperandState::finish),
        compute_field: Window::new(0, compute_last),
        cold_interval,
        rows,
    })
}
