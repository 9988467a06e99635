//! The text form of a SCALE-Sim check (`--json` prints the reports'
//! serde form instead).

use std::fmt::Write;

use super::check::{ReadViolation, Window, KINDS};
use super::{LayerReport, OperandReport, RunReport};
use crate::check::{ViolationKind, SHOWN};

fn window(w: &Window) -> String {
    format!("{} cycles ({}..{})", w.cycles, w.first, w.last)
}

/// One violation in a sentence.
pub fn describe(v: &ReadViolation) -> String {
    let head = format!(
        "{}: address {} (SRAM trace line {}) requested at cycle {}, returned at cycle {}",
        v.kind, v.addr, v.line, v.lookup, v.served
    );
    match (v.kind, v.transfer) {
        (ViolationKind::NoTransfer, _) | (_, None) => {
            format!("{head}: no DRAM transfer of it")
        }
        (ViolationKind::BeforeTransfer, Some(t)) => {
            format!("{head}, before its earliest transfer completed at cycle {t}")
        }
        (_, Some(t)) => format!(
            "{head}, sooner than the {}-cycle hit latency after the later of its request \
             and its data's arrival (cycle {t})",
            v.hit_latency
        ),
    }
}

fn operand(s: &mut String, o: &OperandReport) {
    let verdict = if o.total() == 0 { "clean" } else { "FAIL" };
    let _ = writeln!(
        s,
        "  {:<6} {} reads of {} addresses; {} words transferred to {} addresses: {verdict}",
        o.operand.name(),
        o.reads,
        o.addresses,
        o.transfers,
        o.transferred
    );
    if o.total() == 0 {
        return;
    }
    let by = |counts: &[u64; 3]| {
        KINDS
            .iter()
            .zip(counts)
            .map(|(k, n)| format!("{k} {n}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let _ = writeln!(
        s,
        "         violating addresses: {}",
        by(&o.violating_addresses)
    );
    let _ = writeln!(
        s,
        "         violating reads:     {}",
        by(&o.violating_reads)
    );
    for v in o.first.iter().take(SHOWN) {
        let _ = writeln!(s, "         {}", describe(v));
    }
    if o.total() > SHOWN.min(o.first.len()) as u64 {
        let _ = writeln!(s, "         ...");
    }
}

fn layer(s: &mut String, l: &LayerReport) {
    let _ = write!(
        s,
        "layer {} {}: {} demand rows",
        l.index, l.name, l.check.rows
    );
    if let Some(t) = &l.layer {
        let _ = write!(
            s,
            "; {} distinct input words, {} filter words",
            t.ifmap_words, t.filter_words
        );
    }
    s.push('\n');
    let (incl, total) = match l.reported {
        Some((a, b)) => (
            format!(" (SCALE-Sim's Total Cycles (incl. prefetch): {a})"),
            format!(" (SCALE-Sim's Total Cycles: {b})"),
        ),
        None => (String::new(), String::new()),
    };
    let _ = writeln!(
        s,
        "  compute field  {}{total}",
        window(&l.check.compute_field)
    );
    match &l.check.cold_interval {
        Some(w) => {
            let _ = writeln!(s, "  cold interval  {}{incl}", window(w));
        }
        None => {
            let _ = writeln!(s, "  cold interval  none (empty DRAM traces)");
        }
    }
    for o in &l.check.operands {
        operand(s, o);
    }
}

/// The whole report as text, ending with the verdict.
pub fn run_text(r: &RunReport) -> String {
    let mut s = format!("SCALE-Sim run {}", r.dir);
    let mut facts = Vec::new();
    if let Some(c) = &r.config {
        if let Some(d) = c.dataflow {
            facts.push(format!("dataflow {}", d.name()));
        }
        if let Some((h, w)) = c.array {
            facts.push(format!("{h}x{w} array"));
        }
        if let (Some(i), Some(f)) = (c.ifmap_kb, c.filter_kb) {
            facts.push(format!("IFMAP {i} KiB, FILTER {f} KiB"));
        }
    } else {
        facts.push("no scale.cfg".to_string());
    }
    facts.push(format!("hit latency {}", r.hit_latency));
    let _ = writeln!(s, " ({})", facts.join(", "));
    for l in &r.layers {
        layer(&mut s, l);
    }
    let bad = r.layers.iter().filter(|l| l.check.total() > 0).count();
    if r.is_clean() {
        let _ = writeln!(
            s,
            "read-after-transfer: clean ({} layers; every read has a transfer that completed \
             in time)",
            r.layers.len()
        );
    } else {
        let _ = writeln!(
            s,
            "read-after-transfer: FAILED: {} violating reads in {bad} of {} layers",
            r.total(),
            r.layers.len()
        );
    }
    s
}
