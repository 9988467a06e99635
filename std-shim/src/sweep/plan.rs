//! Sweep plans: a TOML file naming a base GPU, axes and outputs, expanded
//! into numbered points.
//!
//! ```toml
//! gpu = "h800"                 # base preset (or `config = "gpu.toml"`)
//! mode = "cross"               # or "zip": the i-th values of every axis
//! workload = { kind = "gemm", m = 256, n = 256, k = 256 }
//!
//! [[axis]]
//! key = "sms"                  # any configuration key, dotted
//! range = { from = 8, to = 32, step = 8 }   # inclusive
//!
//! [[axis]]
//! key = "wgmma_cycles_per_n"   # a ratio: a table or "num/den"
//! values = ["1/2", "1/4"]
//!
//! [[axis]]
//! key = "workload"             # workloads are an axis like any other
//! values = [{ kind = "fa3", seqlen = 512, hdim = 128 }, { kind = "kernel", file = "k.sasm" }]
//!
//! [output]
//! columns = ["cycles", "analytic.bound_cycles"]   # report fields, dotted
//! plot = { metric = "cycles", x = "sms" }
//! ```
//!
//! Crossed axes vary the last axis fastest. Every point's configuration is
//! resolved before anything runs: a key no configuration has, a value of
//! the wrong TOML type, an empty axis or a malformed workload is a
//! [`PlanError`] naming the plan file, the line and the key. A value of the
//! right type that the GPU model rejects (`sms = 0`) is not a plan error:
//! that point fails when run, and the sweep records it and goes on.

use std::path::Path;

use serde::Deserialize;
use simfa_core::GpuConfig;
use toml::{Spanned, Value};

use super::workload::Workload;
use crate::config::{config_from_table, ConfigFileError};
use crate::toml_file::toml_error;

/// A plan that cannot be run: the plan file, the line, the key and why.
pub use crate::toml_file::FileError as PlanError;

/// How axes combine into points.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Combine {
    /// Every combination; the last axis varies fastest.
    Cross,
    /// The i-th value of every axis together; axes have equal lengths.
    Zip,
}

/// One axis: a configuration key (or `workload`) and its values.
#[derive(Clone, Debug, PartialEq)]
pub struct Axis {
    /// The dotted configuration key, or `workload`.
    pub key: String,
    /// Its values, in plan order.
    pub values: Vec<Value>,
    /// Line of the axis in the plan file.
    pub line: usize,
}

/// The SVG plot a plan asks for.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Plot {
    /// The report field on the y axis (dotted, e.g. `cycles`).
    pub metric: String,
    /// The axis on the x axis; one line per value of the other axes.
    pub x: String,
}

/// One point of a plan.
#[derive(Clone, Debug)]
pub struct Point {
    /// Position in plan order, from 0.
    pub index: usize,
    /// The value of every axis (and the workload), keyed by axis key.
    pub params: serde_json::Map<String, serde_json::Value>,
    /// Stable hash of the base configuration and the parameters, 16 hex
    /// digits: a resumed sweep reuses a point only if index and key agree.
    pub key: String,
    /// The point's configuration, or why the GPU model rejects it.
    pub config: Result<GpuConfig, String>,
    /// The point's workload.
    pub workload: Workload,
}

/// A parsed, fully expanded plan.
#[derive(Clone, Debug)]
pub struct Plan {
    /// The plan file, as named.
    pub file: String,
    /// The axes in plan order.
    pub axes: Vec<Axis>,
    /// How the axes combine.
    pub combine: Combine,
    /// Every point, in plan order.
    pub points: Vec<Point>,
    /// Report fields the CSV shows after the axes.
    pub columns: Vec<String>,
    /// The plot, if asked for.
    pub plot: Option<Plot>,
}

/// Report fields of the CSV when the plan names none.
pub const DEFAULT_COLUMNS: [&str; 6] = [
    "cycles",
    "time_us",
    "tflops",
    "analytic.bound_cycles",
    "analytic.simulated_over_bound",
    "digest",
];

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PlanFile {
    gpu: Option<Spanned<String>>,
    config: Option<Spanned<String>>,
    mode: Option<Spanned<String>>,
    workload: Option<Spanned<Value>>,
    #[serde(default)]
    axis: Vec<Spanned<AxisFile>>,
    #[serde(default)]
    output: Option<Spanned<OutputFile>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct AxisFile {
    key: String,
    values: Option<Vec<Value>>,
    range: Option<RangeFile>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RangeFile {
    from: i64,
    to: i64,
    step: i64,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct OutputFile {
    columns: Option<Vec<String>>,
    plot: Option<Plot>,
}

/// 1-based line of byte offset `at` in `text`.
fn line_of(text: &str, at: usize) -> usize {
    crate::config::line_col(text, at).0
}

impl Plan {
    /// Reads and expands the plan file at `path`; relative `config` and
    /// kernel `file` paths are taken from the plan's directory.
    pub fn load(path: &Path) -> Result<Plan, PlanError> {
        let (text, file) = crate::toml_file::read(path, "plan")?;
        let dir = path.parent().map(Path::to_path_buf).unwrap_or_default();
        Plan::parse(&text, &file, &dir)
    }

    /// Parses and expands a plan's text; `file` names it in errors and
    /// `dir` resolves its relative paths.
    pub fn parse(text: &str, file: &str, dir: &Path) -> Result<Plan, PlanError> {
        let err = |at: usize, key: &str, message: String| PlanError {
            file: file.to_string(),
            line: line_of(text, at),
            key: key.to_string(),
            message,
        };
        let pf: PlanFile = toml::from_str(text).map_err(|e| toml_error(text, file, &e, "plan"))?;
        // The base configuration table: a config file's, then `gpu`.
        let mut base = toml::Table::new();
        if let Some(c) = &pf.config {
            let p = dir.join(c.get_ref());
            let t = std::fs::read_to_string(&p)
                .map_err(|e| e.to_string())
                .and_then(|s| s.parse::<toml::Table>().map_err(|e| e.to_string()))
                .map_err(|e| err(c.span().start, "config", format!("{}: {e}", p.display())))?;
            base = t;
        }
        if let Some(g) = &pf.gpu {
            base.insert("preset".into(), Value::String(g.get_ref().clone()));
        } else if !base.contains_key("preset") {
            base.insert("preset".into(), Value::String("h800".into()));
        }
        let base_at = pf
            .gpu
            .as_ref()
            .map(|g| g.span().start)
            .or(pf.config.as_ref().map(|c| c.span().start))
            .unwrap_or(0);
        let combine = match pf.mode.as_ref().map(|m| m.get_ref().as_str()) {
            None | Some("cross") => Combine::Cross,
            Some("zip") => Combine::Zip,
            Some(other) => {
                return Err(err(
                    pf.mode.as_ref().map_or(0, |m| m.span().start),
                    "mode",
                    format!("expected \"cross\" or \"zip\", found \"{other}\""),
                ))
            }
        };
        let mut axes = Vec::new();
        for a in &pf.axis {
            let at = a.span().start;
            let a = a.get_ref();
            let values = match (&a.values, &a.range) {
                (Some(v), None) => v.clone(),
                (None, Some(r)) => {
                    if r.step <= 0 {
                        return Err(err(at, &a.key, "range step must be positive".into()));
                    }
                    let mut v = Vec::new();
                    let mut x = r.from;
                    while x <= r.to {
                        v.push(Value::Integer(x));
                        x = match x.checked_add(r.step) {
                            Some(n) => n,
                            None => break,
                        };
                    }
                    v
                }
                _ => {
                    return Err(err(
                        at,
                        &a.key,
                        "an axis has exactly one of `values` and `range`".into(),
                    ))
                }
            };
            if values.is_empty() {
                return Err(err(at, &a.key, "the axis is empty".into()));
            }
            if axes.iter().any(|b: &Axis| b.key == a.key) {
                return Err(err(at, &a.key, "the key has two axes".into()));
            }
            axes.push(Axis {
                key: a.key.clone(),
                values,
                line: line_of(text, at),
            });
        }
        if combine == Combine::Zip {
            if let Some(a) = axes.iter().find(|a| a.values.len() != axes[0].values.len()) {
                return Err(PlanError {
                    file: file.into(),
                    line: a.line,
                    key: a.key.clone(),
                    message: format!(
                        "zipped axes need equal lengths: {} values, the first axis has {}",
                        a.values.len(),
                        axes[0].values.len()
                    ),
                });
            }
        }
        let fixed_workload = pf.workload.as_ref();
        if fixed_workload.is_none() && !axes.iter().any(|a| a.key == "workload") {
            return Err(err(0, "workload", "the plan names no workload".into()));
        }
        let (columns, plot) = match &pf.output {
            Some(o) => (o.get_ref().columns.clone(), o.get_ref().plot.clone()),
            None => (None, None),
        };
        let columns = columns.unwrap_or_else(|| DEFAULT_COLUMNS.map(String::from).to_vec());
        if let Some(p) = &plot {
            if !axes.iter().any(|a| a.key == p.x) {
                let at = pf.output.as_ref().map_or(0, |o| o.span().start);
                return Err(err(
                    at,
                    "output.plot.x",
                    format!("no axis has key `{}`", p.x),
                ));
            }
        }
        let base_text = toml::to_string(&base).unwrap_or_default();
        let mut points = Vec::new();
        let mut kernel_hashes = std::collections::HashMap::new();
        // The shape every key is checked against, built once.
        let shape = Value::try_from(GpuConfig::h800()).map_err(|e| err(0, "gpu", e.to_string()))?;
        for (index, choice) in combinations(&axes, combine).into_iter().enumerate() {
            let mut table = base.clone();
            let mut params = serde_json::Map::new();
            let mut workload = fixed_workload.map(|w| (w.get_ref().clone(), w.span().start));
            for (axis, &vi) in axes.iter().zip(&choice) {
                let v = &axis.values[vi];
                let axis_err = |message: String| PlanError {
                    file: file.into(),
                    line: axis.line,
                    key: axis.key.clone(),
                    message,
                };
                if axis.key == "workload" {
                    workload = Some((v.clone(), usize::MAX));
                    continue;
                }
                let v = set_key(&mut table, &shape, &axis.key, v.clone()).map_err(axis_err)?;
                params.insert(
                    axis.key.clone(),
                    serde_json::to_value(&v).unwrap_or_default(),
                );
            }
            let (wv, wat) = workload.expect("checked above");
            let workload_line = if wat == usize::MAX {
                axes.iter()
                    .find(|a| a.key == "workload")
                    .map_or(1, |a| a.line)
            } else {
                line_of(text, wat)
            };
            let w = Workload::from_value(&wv, dir).map_err(|m| PlanError {
                file: file.into(),
                line: workload_line,
                key: "workload".into(),
                message: m,
            })?;
            params.insert(
                "workload".into(),
                serde_json::to_value(&wv).unwrap_or_default(),
            );
            let config = match config_from_table(table, file) {
                Ok(c) => Ok(c),
                Err(e) => Err(classify(e, &axes, file, line_of(text, base_at))?),
            };
            // A kernel file's key covers its contents: a resumed sweep
            // must not reuse the rows of a file edited since.
            let contents = match &w {
                Workload::Kernel(path) => kernel_hashes
                    .entry(path.clone())
                    .or_insert_with(|| match std::fs::read(path) {
                        Ok(bytes) => hash_hex(&bytes),
                        Err(e) => format!("unreadable: {e}"),
                    })
                    .clone(),
                _ => String::new(),
            };
            let key = point_key(&base_text, &params, &contents);
            points.push(Point {
                index,
                params,
                key,
                config,
                workload: w,
            });
        }
        Ok(Plan {
            file: file.into(),
            axes,
            combine,
            points,
            columns,
            plot,
        })
    }

    /// A stable hash of the whole plan's points (their keys in order).
    pub fn key(&self) -> String {
        let keys: Vec<&str> = self.points.iter().map(|p| p.key.as_str()).collect();
        hash_hex(keys.join(",").as_bytes())
    }
}

/// The index of every axis's value at each point, in plan order.
fn combinations(axes: &[Axis], combine: Combine) -> Vec<Vec<usize>> {
    match combine {
        Combine::Zip => {
            let n = axes.first().map_or(1, |a| a.values.len());
            (0..n).map(|i| vec![i; axes.len()]).collect()
        }
        Combine::Cross => {
            let mut out = vec![Vec::new()];
            for a in axes {
                out = out
                    .into_iter()
                    .flat_map(|prefix| {
                        (0..a.values.len()).map(move |i| {
                            let mut p = prefix.clone();
                            p.push(i);
                            p
                        })
                    })
                    .collect();
            }
            out
        }
    }
}

/// Sets dotted `key` of `table` to `v`, creating sub-tables; a `"n/d"`
/// string where the preset has a ratio becomes `{ num, den }`. Returns
/// the value set.
fn set_key(table: &mut toml::Table, shape: &Value, key: &str, v: Value) -> Result<Value, String> {
    let mut expected = Some(shape);
    for part in key.split('.') {
        expected = expected.and_then(|t| t.get(part));
    }
    let v = match (&v, expected) {
        (Value::String(s), Some(Value::Table(t))) if t.contains_key("num") => {
            let (n, d) = s
                .split_once('/')
                .and_then(|(n, d)| {
                    Some((n.trim().parse::<i64>().ok()?, d.trim().parse::<i64>().ok()?))
                })
                .ok_or_else(|| format!("`{s}` is not a ratio `num/den`"))?;
            let mut r = toml::Table::new();
            r.insert("num".into(), Value::Integer(n));
            r.insert("den".into(), Value::Integer(d));
            Value::Table(r)
        }
        _ => v,
    };
    let parts: Vec<&str> = key.split('.').collect();
    let (last, path) = parts.split_last().ok_or("an empty key")?;
    let mut t = table;
    for p in path {
        let slot = t
            .entry(p.to_string())
            .or_insert_with(|| Value::Table(toml::Table::new()));
        t = match slot {
            Value::Table(inner) => inner,
            _ => return Err(format!("`{p}` is not a table")),
        };
    }
    t.insert(last.to_string(), v.clone());
    Ok(v)
}

/// Splits configuration errors into plan errors (the key or the value's
/// type is wrong) and point failures (the model rejects the value).
fn classify(
    e: ConfigFileError,
    axes: &[Axis],
    file: &str,
    base_line: usize,
) -> Result<String, PlanError> {
    let key = match &e {
        ConfigFileError::UnknownKey { key, .. }
        | ConfigFileError::WrongType { key, .. }
        | ConfigFileError::Negative { key, .. }
        | ConfigFileError::NotFinite { key, .. } => key.clone(),
        ConfigFileError::Io { .. }
        | ConfigFileError::Syntax { .. }
        | ConfigFileError::MissingPreset { .. }
        | ConfigFileError::UnknownPreset { .. } => "gpu".to_string(),
        _ => return Ok(e.to_string()),
    };
    let axis = axes
        .iter()
        .find(|a| key == a.key || key.starts_with(&format!("{}.", a.key)));
    let message = e.to_string();
    let message = message
        .split_once(": ")
        .map_or(message.as_str(), |(_, m)| m)
        .to_string();
    Err(PlanError {
        file: file.into(),
        line: axis.map_or(base_line, |a| a.line),
        key: axis.map_or(key, |a| a.key.clone()),
        message,
    })
}

/// FNV-1a of `bytes` as 16 hex digits.
pub(crate) fn hash_hex(bytes: &[u8]) -> String {
    use std::hash::Hasher;
    let mut h = fnv::FnvHasher::default();
    h.write(bytes);
    crate::reporting::report::format_digest(h.finish())
}

fn point_key(
    base: &str,
    params: &serde_json::Map<String, serde_json::Value>,
    kernel: &str,
) -> String {
    let p = serde_json::to_string(params).unwrap_or_default();
    if kernel.is_empty() {
        // Generated workloads: the key sweeps written before kernel
        // contents were keyed have.
        return hash_hex(format!("{base}\n{p}").as_bytes());
    }
    hash_hex(format!("{base}\n{p}\n{kernel}").as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Plan, PlanError> {
        Plan::parse(text, "p.toml", Path::new("."))
    }

    const GEMM: &str = "workload = { kind = \"gemm\", m = 256, n = 256, k = 128 }\n";

    #[test]
    fn crossed_axes_vary_the_last_fastest() {
        let p = parse(&format!(
            "{GEMM}[[axis]]\nkey = \"sms\"\nrange = {{ from = 4, to = 12, step = 4 }}\n\
             [[axis]]\nkey = \"l2.slices\"\nvalues = [40, 80]\n"
        ))
        .unwrap();
        assert_eq!(p.points.len(), 6);
        let got: Vec<(i64, i64)> = p
            .points
            .iter()
            .map(|pt| {
                let c = pt.config.as_ref().unwrap();
                (c.sms as i64, c.l2.slices as i64)
            })
            .collect();
        assert_eq!(
            got,
            [(4, 40), (4, 80), (8, 40), (8, 80), (12, 40), (12, 80)]
        );
        // Keys are stable and distinct.
        let again = parse(&format!(
            "{GEMM}[[axis]]\nkey = \"sms\"\nrange = {{ from = 4, to = 12, step = 4 }}\n\
             [[axis]]\nkey = \"l2.slices\"\nvalues = [40, 80]\n"
        ))
        .unwrap();
        assert_eq!(p.key(), again.key());
        let mut keys: Vec<&String> = p.points.iter().map(|pt| &pt.key).collect();
        keys.sort();
        keys.dedup();
        assert_eq!(keys.len(), 6);
    }

    /// A kernel file's point key follows the file's contents, not only
    /// its name.
    #[test]
    fn kernel_points_are_keyed_by_contents() {
        let dir = tempfile::tempdir().unwrap();
        let plan = "workload = { kind = \"kernel\", file = \"k.sasm\" }\n\
                    [[axis]]\nkey = \"sms\"\nvalues = [4]\n";
        let key = |body: &str| {
            std::fs::write(dir.path().join("k.sasm"), body).unwrap();
            Plan::parse(plan, "p.toml", dir.path()).unwrap().points[0]
                .key
                .clone()
        };
        let a = key("one");
        assert_eq!(key("one"), a);
        assert_ne!(key("two"), a);
    }

    #[test]
    fn zipped_axes_and_ratios() {
        let p = parse(&format!(
            "mode = \"zip\"\n{GEMM}[[axis]]\nkey = \"sms\"\nvalues = [4, 8]\n\
             [[axis]]\nkey = \"wgmma_cycles_per_n\"\nvalues = [\"1/2\", {{ num = 3, den = 4 }}]\n"
        ))
        .unwrap();
        assert_eq!(p.points.len(), 2);
        let c = p.points[1].config.as_ref().unwrap();
        assert_eq!(
            (c.sms, c.wgmma_cycles_per_n),
            (8, simfa_core::Ratio::new(3, 4))
        );
        let c = p.points[0].config.as_ref().unwrap();
        assert_eq!(c.wgmma_cycles_per_n, simfa_core::Ratio::new(1, 2));
        assert_eq!(p.points[0].params["wgmma_cycles_per_n"]["den"], 2);
        let e = parse(&format!(
            "mode = \"zip\"\n{GEMM}[[axis]]\nkey = \"sms\"\nvalues = [4, 8]\n\
             [[axis]]\nkey = \"l2.slices\"\nvalues = [40]\n"
        ))
        .unwrap_err();
        assert_eq!((e.line, e.key.as_str()), (6, "l2.slices"), "{e}");
    }

    #[test]
    fn a_rejected_value_is_a_point_failure_not_a_plan_error() {
        let p = parse(&format!("{GEMM}[[axis]]\nkey = \"sms\"\nvalues = [0, 4]\n")).unwrap();
        assert!(p.points[0].config.as_ref().unwrap_err().contains("sms"));
        assert!(p.points[1].config.is_ok());
    }

    #[test]
    fn plan_errors() {
        let e = parse("gpu = \"h800\"\n").unwrap_err();
        assert_eq!(e.key, "workload");
        let e = parse(&format!("gpu = \"b200\"\n{GEMM}")).unwrap_err();
        assert_eq!((e.line, e.key.as_str()), (1, "gpu"), "{e}");
        let e = parse(&format!("{GEMM}[[axis]]\nkey = \"sms\"\nvalues = [1]\nrange = {{ from = 1, to = 2, step = 1 }}\n"))
            .unwrap_err();
        assert_eq!((e.line, e.key.as_str()), (2, "sms"), "{e}");
        let e = parse(&format!(
            "{GEMM}[[axis]]\nkey = \"sms\"\nrange = {{ from = 1, to = 2, step = 0 }}\n"
        ))
        .unwrap_err();
        assert!(e.message.contains("step"), "{e}");
        let e = parse(&format!(
            "{GEMM}[[axis]]\nkey = \"wgmma_cycles_per_n\"\nvalues = [\"half\"]\n"
        ))
        .unwrap_err();
        assert!(e.message.contains("ratio"), "{e}");
        let e = parse(&format!(
            "{GEMM}[output]\nplot = {{ metric = \"cycles\", x = \"sms\" }}\n"
        ))
        .unwrap_err();
        assert_eq!(e.key, "output.plot.x", "{e}");
        assert_eq!(
            e.to_string(),
            format!("p.toml:{}: output.plot.x: no axis has key `sms`", e.line)
        );
    }
}
