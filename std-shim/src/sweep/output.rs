//! The files of a sweep directory, written the same way by a whole run,
//! by a resumed one and by `simfa sweep merge`:
//!
//! - `sweep.json`: the plan's shape ([`Meta`]): points, the plan's key,
//!   axes, CSV columns and plot;
//! - `points.jsonl`: one [`Row`] line per point, in plan order;
//! - `points.csv`: `index`, one column per axis, `status`, then the
//!   plan's report columns (dotted fields of the report; `error` for a
//!   failed point's error);
//! - `plot.svg` (if the plan asks): a metric against one axis, one line
//!   per combination of the other axes' values.
//!
//! A shard writes `sweep.json` and `points.jsonl` (its own points) into
//! `shard-I-of-N/` under the sweep directory. While points finish, their
//! lines are appended to `points.jsonl` as they come; at the end the file
//! is rewritten in plan order, so an interrupted sweep leaves every
//! finished point for the next run to skip.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::plan::{Plan, Plot};
use super::run::Row;
use crate::load::write_atomic;
use crate::reporting::svg::{LineChart, Series};

/// The name of the rows file in a sweep directory.
pub const POINTS: &str = "points.jsonl";
/// The name of the plan summary in a sweep directory.
pub const META: &str = "sweep.json";
/// The name of the CSV in a sweep directory.
pub const CSV: &str = "points.csv";
/// The name of the plot in a sweep directory.
pub const SVG: &str = "plot.svg";

/// What the outputs need to know of the plan (also what `merge` reads).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Meta {
    /// Points in the whole plan.
    pub points: usize,
    /// The plan's key ([`Plan::key`]).
    pub key: String,
    /// Axis keys, in plan order.
    pub axes: Vec<String>,
    /// Report columns of the CSV.
    pub columns: Vec<String>,
    /// The plot, if any.
    pub plot: Option<Plot>,
}

impl Meta {
    /// The summary of `plan`.
    pub fn of(plan: &Plan) -> Meta {
        Meta {
            points: plan.points.len(),
            key: plan.key(),
            axes: plan.axes.iter().map(|a| a.key.clone()).collect(),
            columns: plan.columns.clone(),
            plot: plan.plot.clone(),
        }
    }

    /// Reads `sweep.json` of `dir`.
    pub fn read(dir: &Path) -> std::io::Result<Meta> {
        let text = std::fs::read_to_string(dir.join(META))?;
        serde_json::from_str(&text)
            .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))
    }

    fn text(&self) -> String {
        serde_json::to_string_pretty(self).expect("serialises") + "\n"
    }
}

/// Reads the rows already in `dir/points.jsonl` (none if absent); lines
/// that do not parse (an interrupted write) are dropped.
pub fn read_rows(dir: &Path) -> std::io::Result<Vec<Row>> {
    match std::fs::read_to_string(dir.join(POINTS)) {
        Ok(text) => Ok(text.lines().filter_map(Row::parse).collect()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Vec::new()),
        Err(e) => Err(e),
    }
}

/// Appends rows to `dir/points.jsonl` as they finish.
pub struct Appender {
    file: std::sync::Mutex<std::fs::File>,
}

impl Appender {
    /// Opens `dir/points.jsonl` for appending, creating `dir`.
    pub fn open(dir: &Path) -> std::io::Result<Appender> {
        std::fs::create_dir_all(dir)?;
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(dir.join(POINTS))?;
        Ok(Appender {
            file: std::sync::Mutex::new(file),
        })
    }

    /// Appends one row's line (errors are ignored: the final rewrite
    /// writes every row again).
    pub fn push(&self, row: &Row) {
        if let Ok(mut f) = self.file.lock() {
            let _ = writeln!(f, "{}", row.line);
            let _ = f.flush();
        }
    }
}

/// Writes `sweep.json` and `points.jsonl` (rows sorted by index, one per
/// index) into `dir`, and with `tables` the CSV and the plot.
pub fn write_dir(dir: &Path, meta: &Meta, rows: &[Row], tables: bool) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    let mut by_index: BTreeMap<usize, &Row> = BTreeMap::new();
    for r in rows {
        by_index.entry(r.index).or_insert(r);
    }
    let rows: Vec<&Row> = by_index.into_values().collect();
    let mut lines = String::new();
    for r in &rows {
        lines.push_str(&r.line);
        lines.push('\n');
    }
    write_atomic(&dir.join(META), meta.text().as_bytes())?;
    write_atomic(&dir.join(POINTS), lines.as_bytes())?;
    if tables {
        let values: Vec<Value> = rows.iter().map(|r| r.value()).collect();
        write_atomic(&dir.join(CSV), &csv(meta, &values)?)?;
        if let Some(p) = &meta.plot {
            write_atomic(&dir.join(SVG), svg(p, meta, &values).as_bytes())?;
        }
    }
    Ok(())
}

/// A field of a row: `error`, or a dotted path into its report.
fn field(row: &Value, path: &str) -> Value {
    if path == "error" {
        return row.get("error").cloned().unwrap_or(Value::Null);
    }
    let mut v = &row["report"];
    for p in path.split('.') {
        v = &v[p];
    }
    v.clone()
}

/// A cell: strings bare, null empty, a ratio `num/den`, a workload
/// `kind key=value...`, anything else as compact JSON.
fn cell(v: &Value) -> String {
    match v {
        Value::Null => String::new(),
        Value::String(s) => s.clone(),
        Value::Object(o) if o.len() == 2 && o.contains_key("num") && o.contains_key("den") => {
            format!("{}/{}", o["num"], o["den"])
        }
        Value::Object(o) if o.get("kind").is_some_and(Value::is_string) => {
            let mut s = cell(&o["kind"]);
            for (k, v) in o.iter().filter(|(k, _)| *k != "kind") {
                s.push_str(&format!(" {k}={}", cell(v)));
            }
            s
        }
        v => v.to_string(),
    }
}

/// The CSV of `rows` (JSON lines values, in plan order).
pub fn csv(meta: &Meta, rows: &[Value]) -> std::io::Result<Vec<u8>> {
    let mut w = csv::Writer::from_writer(Vec::new());
    let mut head = vec!["index".to_string()];
    head.extend(meta.axes.iter().cloned());
    head.push("status".into());
    head.extend(meta.columns.iter().cloned());
    w.write_record(&head)?;
    for r in rows {
        let mut rec = vec![cell(&r["index"])];
        rec.extend(meta.axes.iter().map(|a| cell(&r["params"][a])));
        rec.push(cell(&r["status"]));
        rec.extend(meta.columns.iter().map(|c| cell(&field(r, c))));
        w.write_record(&rec)?;
    }
    w.into_inner().map_err(|e| e.into_error())
}

const COLORS: [&str; 8] = [
    "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
];

/// The plot: `p.metric` against axis `p.x` (its values if numbers, else
/// their positions), one series per combination of the other axes, in
/// order of first appearance; failed points are left out.
pub fn svg(p: &Plot, meta: &Meta, rows: &[Value]) -> String {
    let others: Vec<&String> = meta.axes.iter().filter(|a| **a != p.x).collect();
    let mut xs: Vec<String> = Vec::new();
    let mut series: Vec<Series> = Vec::new();
    for r in rows {
        let xv = &r["params"][&p.x];
        let xs_key = cell(xv);
        if !xs.contains(&xs_key) {
            xs.push(xs_key.clone());
        }
        let x = xv
            .as_f64()
            .unwrap_or_else(|| xs.iter().position(|s| *s == xs_key).unwrap_or(0) as f64);
        let Some(y) = field(r, &p.metric).as_f64() else {
            continue;
        };
        let name = others
            .iter()
            .map(|a| format!("{a}={}", cell(&r["params"][a.as_str()])))
            .collect::<Vec<_>>()
            .join(", ");
        let name = if name.is_empty() {
            p.metric.clone()
        } else {
            name
        };
        match series.iter_mut().find(|s| s.name == name) {
            Some(s) => s.points.push((x, y)),
            None => {
                let color = COLORS[series.len() % COLORS.len()].to_string();
                series.push(Series {
                    name,
                    color,
                    points: vec![(x, y)],
                });
            }
        }
    }
    LineChart {
        title: format!("{} against {}", p.metric, p.x),
        x_label: p.x.clone(),
        y_label: p.metric.clone(),
        log_x: false,
        x_tick: |v| format!("{v}"),
        series,
    }
    .render()
}
