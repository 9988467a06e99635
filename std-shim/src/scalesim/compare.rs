//! Ranking dataflows per layer under both measurement windows.
//!
//! Given the checks of several runs of one topology (typically the same
//! layers under `os`, `ws` and `is`), [`compare`] ranks the runs of each
//! layer by compute field and by cold interval, fewest cycles first, and
//! says where the set of fastest runs (ties kept) differs between the two
//! windows: there the window decides which dataflow a designer would pick.

use std::fmt::Write;

use serde::Serialize;

use super::error::ScaleSimError;
use super::RunReport;

/// One run of one layer.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Entry {
    /// The run's dataflow (`os`, `ws`, `is`), followed by its directory
    /// when two runs share a dataflow or the configuration does not say.
    pub label: String,
    /// Compute-field cycles.
    pub compute_field: i64,
    /// Cold-interval cycles (the compute field's when the DRAM traces are
    /// empty).
    pub cold_interval: i64,
    /// Its violating reads (the ranking rests on traces that fail the
    /// read-after-transfer check when this is not 0).
    pub violations: u64,
}

/// The ranking of one layer.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct LayerRanking {
    /// Layer index.
    pub index: usize,
    /// Layer name (the first run's).
    pub name: String,
    /// Each run, in the order given.
    pub entries: Vec<Entry>,
    /// Labels by compute field, fastest first (ties by label).
    pub by_compute_field: Vec<String>,
    /// Labels by cold interval, fastest first.
    pub by_cold_interval: Vec<String>,
    /// The fastest under the compute field (all tied).
    pub fastest_compute_field: Vec<String>,
    /// The fastest under the cold interval (all tied).
    pub fastest_cold_interval: Vec<String>,
    /// The two windows pick different fastest sets.
    pub flips: bool,
}

/// Every layer's ranking.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Comparison {
    /// The runs compared, in order.
    pub runs: Vec<String>,
    /// Per layer.
    pub layers: Vec<LayerRanking>,
    /// Layers whose fastest set flips.
    pub flipped: usize,
    /// Runs with violating reads.
    pub failing_runs: usize,
}

fn rank(entries: &[Entry], key: impl Fn(&Entry) -> i64) -> (Vec<String>, Vec<String>) {
    let mut order: Vec<&Entry> = entries.iter().collect();
    order.sort_by(|a, b| key(a).cmp(&key(b)).then_with(|| a.label.cmp(&b.label)));
    let best = order.first().map(|e| key(e));
    let fastest = order
        .iter()
        .filter(|e| Some(key(e)) == best)
        .map(|e| e.label.clone())
        .collect();
    (order.iter().map(|e| e.label.clone()).collect(), fastest)
}

/// Ranks `runs` (at least two, with the same number of layers).
pub fn compare(runs: &[RunReport]) -> Result<Comparison, ScaleSimError> {
    let Some(first) = runs.first() else {
        return Ok(Comparison {
            runs: Vec::new(),
            layers: Vec::new(),
            flipped: 0,
            failing_runs: 0,
        });
    };
    for r in runs {
        if r.layers.len() != first.layers.len() {
            return Err(ScaleSimError::Inconsistent {
                file: r.dir.clone(),
                what: format!(
                    "{} layers, but {} has {}: not runs of one topology",
                    r.layers.len(),
                    first.dir,
                    first.layers.len()
                ),
            });
        }
    }
    let labels: Vec<String> = runs
        .iter()
        .map(|r| {
            let df = r.dataflow().map(|d| d.name());
            let shared = runs
                .iter()
                .filter(|o| o.dataflow().map(|d| d.name()) == df)
                .count()
                > 1;
            match df {
                Some(d) if !shared => d.to_string(),
                Some(d) => format!("{d} ({})", r.dir),
                None => format!("? ({})", r.dir),
            }
        })
        .collect();
    let mut layers = Vec::new();
    for (i, l0) in first.layers.iter().enumerate() {
        let entries: Vec<Entry> = runs
            .iter()
            .zip(&labels)
            .map(|(r, label)| {
                let c = &r.layers[i].check;
                Entry {
                    label: label.clone(),
                    compute_field: c.compute_field.cycles,
                    cold_interval: c.cold_interval.map_or(c.compute_field.cycles, |w| w.cycles),
                    violations: c.total(),
                }
            })
            .collect();
        let (by_c, fast_c) = rank(&entries, |e| e.compute_field);
        let (by_k, fast_k) = rank(&entries, |e| e.cold_interval);
        let flips = fast_c != fast_k;
        layers.push(LayerRanking {
            index: l0.index,
            name: l0.name.clone(),
            entries,
            by_compute_field: by_c,
            by_cold_interval: by_k,
            fastest_compute_field: fast_c,
            fastest_cold_interval: fast_k,
            flips,
        });
    }
    Ok(Comparison {
        runs: runs.iter().map(|r| r.dir.clone()).collect(),
        flipped: layers.iter().filter(|l| l.flips).count(),
        failing_runs: runs.iter().filter(|r| !r.is_clean()).count(),
        layers,
    })
}

/// The comparison as text.
pub fn comparison_text(c: &Comparison) -> String {
    let mut s = String::new();
    for l in &c.layers {
        let _ = writeln!(s, "layer {} {}", l.index, l.name);
        let w = l
            .entries
            .iter()
            .map(|e| e.label.len())
            .max()
            .unwrap_or(0)
            .max(8);
        let _ = writeln!(
            s,
            "  {:<w$}  {:>13}  {:>13}  read check",
            "dataflow", "compute field", "cold interval"
        );
        for e in &l.entries {
            let check = match e.violations {
                0 => "clean".to_string(),
                n => format!("{n} violating reads"),
            };
            let _ = writeln!(
                s,
                "  {:<w$}  {:>13}  {:>13}  {check}",
                e.label, e.compute_field, e.cold_interval
            );
        }
        let _ = writeln!(
            s,
            "  fastest: compute field {}; cold interval {}{}",
            l.fastest_compute_field.join(" = "),
            l.fastest_cold_interval.join(" = "),
            if l.flips {
                "  <- the ranking flips"
            } else {
                ""
            }
        );
    }
    let _ = writeln!(
        s,
        "the fastest dataflow depends on the window in {} of {} layers",
        c.flipped,
        c.layers.len()
    );
    if c.failing_runs > 0 {
        let _ = writeln!(
            s,
            "{} of {} runs fail the read-after-transfer check: their cycles rest on reads no \
             transfer supports",
            c.failing_runs,
            c.runs.len()
        );
    }
    s
}
