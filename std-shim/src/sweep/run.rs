//! Running a plan's points in parallel.
//!
//! Every point is independent: its own configuration, kernel and arena,
//! and a seed that is its configuration's (never a thread's). Points run
//! on a rayon pool of `jobs` threads and the rows come back in the order
//! asked for, so the results do not depend on `jobs`. A point that fails
//! (a configuration the model rejects, a kernel that does not build or
//! fit, a deadlock, even a panic) becomes a failed row with its error.

use std::panic::{catch_unwind, AssertUnwindSafe};

use rayon::prelude::*;
use serde_json::{json, Value};
use simfa_core::{GpuConfig, Kernel, StreamSource};

use super::plan::{Plan, Point};
use crate::reporting::report::Report;
use crate::run::{simulate_from, Snapshots};

/// The result of one point, as one line of the sweep's JSON Lines file.
#[derive(Clone, Debug, PartialEq)]
pub struct Row {
    /// The point's index in plan order.
    pub index: usize,
    /// The point's key ([`Point::key`]).
    pub key: String,
    /// The line: `{"index", "key", "params", "status": "ok"|"failed",
    /// "report"|"error"}` as compact JSON, without a newline.
    pub line: String,
    /// The line's status is `"ok"` (read once, when the row is made).
    status_ok: bool,
}

impl Row {
    /// The row of `point` with `outcome`: the JSON report, or the error.
    pub fn new(point: &Point, outcome: Result<Value, String>) -> Row {
        let mut v = json!({
            "index": point.index,
            "key": point.key,
            "params": Value::Object(point.params.clone()),
        });
        let status_ok = outcome.is_ok();
        match outcome {
            Ok(report) => {
                v["status"] = "ok".into();
                v["report"] = report;
            }
            Err(e) => {
                v["status"] = "failed".into();
                v["error"] = e.into();
            }
        }
        Row {
            index: point.index,
            key: point.key.clone(),
            line: serde_json::to_string(&v).expect("JSON values serialise"),
            status_ok,
        }
    }

    /// Reads a row back from its line; `None` if the line is not one (a
    /// line cut short by an interrupted sweep).
    pub fn parse(line: &str) -> Option<Row> {
        let v: Value = serde_json::from_str(line).ok()?;
        Some(Row {
            index: v.get("index")?.as_u64()? as usize,
            key: v.get("key")?.as_str()?.to_string(),
            line: line.to_string(),
            status_ok: v.get("status").and_then(Value::as_str) == Some("ok"),
        })
    }

    /// The line as JSON.
    pub fn value(&self) -> Value {
        serde_json::from_str(&self.line).unwrap_or(Value::Null)
    }

    /// True when the point ran to a report.
    pub fn ok(&self) -> bool {
        self.status_ok
    }
}

/// Simulates one point and returns its JSON report, or why it failed.
pub fn run_point(point: &Point) -> Result<Value, String> {
    let cfg = point.config.clone()?;
    let (k, source, flops) = point.workload.kernel(&cfg)?;
    report_of(&cfg, &k, source, flops)
}

/// Simulates kernel `k` on `cfg`, its stream roles (if any) pulling from
/// `source`, and returns the JSON report (the one `simfa run --json`
/// prints; `flops`, when given, is the workload's own FLOP count), or why
/// the run failed: what a sweep row and the Python bindings hold.
pub fn report_of(
    cfg: &GpuConfig,
    k: &Kernel,
    source: impl StreamSource,
    flops: Option<u64>,
) -> Result<Value, String> {
    let out = simulate_from(cfg, k, source, &mut (), |_, _, _| {}, &Snapshots::default())
        .map_err(|e| e.to_string())?;
    let mut r = Report::new(cfg, k, &out);
    if let Some(f) = flops {
        r = r.with_workload_flops(f);
    }
    Ok(r.to_json())
}

/// Runs the points of `plan` at `indices` on `jobs` threads (0: one per
/// core), calling `done` with each row as it finishes (from any thread,
/// in completion order); returns the rows in the order of `indices`.
///
/// # Panics
///
/// If an index is out of range, or the thread pool cannot be built.
pub fn run_points(
    plan: &Plan,
    indices: &[usize],
    jobs: usize,
    done: &(dyn Fn(&Row) + Sync),
) -> Vec<Row> {
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(jobs)
        .build()
        .expect("a thread pool");
    pool.install(|| {
        indices
            .par_iter()
            .map(|&i| {
                let p = &plan.points[i];
                let outcome = catch_unwind(AssertUnwindSafe(|| run_point(p)))
                    .unwrap_or_else(|_| Err("the simulation panicked".to_string()));
                let row = Row::new(p, outcome);
                done(&row);
                row
            })
            .collect()
    })
}

/// Runs every point of `plan` on `jobs` threads and returns the rows in
/// plan order: the library face of `simfa sweep`.
pub fn run_plan(plan: &Plan, jobs: usize) -> Vec<Row> {
    let all: Vec<usize> = (0..plan.points.len()).collect();
    run_points(plan, &all, jobs, &|_| {})
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A row read back from its line has the status it was written with.
    #[test]
    fn status_survives_the_round_trip() {
        let plan = Plan::parse(
            "workload = { kind = \"gemm\", m = 128, n = 128, k = 64 }\n\
             [[axis]]\nkey = \"sms\"\nvalues = [4]\n",
            "p.toml",
            std::path::Path::new("."),
        )
        .unwrap();
        let p = &plan.points[0];
        let good = Row::new(p, Ok(json!({ "cycles": 1 })));
        let bad = Row::new(p, Err("no".into()));
        assert!(good.ok() && !bad.ok());
        assert_eq!(Row::parse(&good.line), Some(good.clone()));
        assert_eq!(Row::parse(&bad.line), Some(bad.clone()));
        assert!(!Row::parse(&good.line.replace("\"ok\"", "\"failed\""))
            .unwrap()
            .ok());
    }
}
