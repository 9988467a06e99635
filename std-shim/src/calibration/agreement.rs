//! How closely the transaction-level memory model follows the line-level
//! reference: a fixed suite of workloads simulated under both, point by
//! point (`simfa agreement`). The suite is FA3 (head dims 64, 128 and 256,
//! causal and not, at two sequence lengths), six GEMM shapes of the
//! 23-shape sweep, the pointer chase and the TMA throughput table. Each
//! point compares the workload's own figure: cycles for FA3 and GEMM,
//! cycles per hop for the chase, GB/s for the throughput table.

use serde::Serialize;
use simfa_core::config::MemoryModel;
use simfa_core::GpuConfig;

use crate::calibration::error::CalibError;
use crate::calibration::experiments::{point_error, run_all};
use crate::calibration::pchase::{calibrate_pchase, pchase_rows, PchaseOptions};
use crate::calibration::stats::{error_percent, mape};
use crate::calibration::tma_bw::{calibrate_tma_bw, TmaBwOptions};
use crate::gen::fa3::Fa3Params;
use crate::gen::{gemm, sweep_shapes, BenchError, GemmParams};
use crate::run::simulate;

/// The agreement target: each point within this many percent of
/// the line-level model's figure. The table marks the points past it and
/// counts them.
pub const TARGET_PERCENT: f64 = 3.0;

/// Which suite to run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Suite {
    /// The suite: FA3 at 1k and 4k tokens, six sweep GEMMs, 24
    /// pointer-chase points and every cell of the TMA table (minutes).
    Full,
    /// The same kinds at small shapes (FA3 at 256 and 512 tokens, small
    /// GEMMs, 8 chase points, 6 TMA cells): what the tests run.
    Quick,
}

/// One point of the suite under both models.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct AgreementPoint {
    /// `fa3`, `gemm`, `pchase` or `tma-bw`.
    pub group: &'static str,
    /// The point, e.g. `d128 causal s=4096`.
    pub name: String,
    /// What is compared: `cycles`, `cycles/hop` or `GB/s`.
    pub metric: &'static str,
    /// The figure under the line-level model (the reference).
    pub line: f64,
    /// The figure under the transaction-level model.
    pub transaction: f64,
    /// `(transaction - line) / line`, percent.
    pub error_percent: f64,
}

impl AgreementPoint {
    /// Whether it is further than [`TARGET_PERCENT`] from the line model.
    pub fn past_target(&self) -> bool {
        self.error_percent.abs() > TARGET_PERCENT
    }
}

/// The whole comparison.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Agreement {
    /// The GPU configuration both models ran on.
    pub gpu: String,
    /// Every point, group by group.
    pub points: Vec<AgreementPoint>,
    /// Mean absolute error, percent.
    pub mape_percent: f64,
    /// The largest absolute error, percent.
    pub max_abs_error_percent: f64,
    /// How many points are further than [`TARGET_PERCENT`] from the line
    /// model.
    pub past_target: usize,
}

impl Agreement {
    /// The comparison of `points` on `gpu`, with its summary figures.
    pub fn new(gpu: String, points: Vec<AgreementPoint>) -> Self {
        let errs: Vec<f64> = points.iter().map(|p| p.error_percent).collect();
        Agreement {
            gpu,
            mape_percent: mape(&errs).unwrap_or(0.0),
            max_abs_error_percent: errs.iter().fold(0.0f64, |m, e| m.max(e.abs())),
            past_target: points.iter().filter(|p| p.past_target()).count(),
            points,
        }
    }
}

/// `cfg` under memory model `m`.
fn under(cfg: &GpuConfig, m: MemoryModel) -> GpuConfig {
    let mut c = cfg.clone();
    c.memory = m;
    c
}

/// A workload whose figure is its simulated cycles.
enum Job {
    Fa3(String, Fa3Params),
    Gemm(String, GemmParams),
}

impl Job {
    fn name(&self) -> &str {
        match self {
            Job::Fa3(n, _) | Job::Gemm(n, _) => n,
        }
    }

    fn cycles(&self, cfg: &GpuConfig) -> Result<f64, CalibError> {
        let run = || -> Result<f64, BenchError> {
            let k = match self {
                Job::Fa3(_, p) => crate::gen::fa3::fa3(p, cfg)?.0,
                Job::Gemm(_, p) => gemm(p)?,
            };
            Ok(simulate(cfg, &k, &mut ())?.summary.cycles as f64)
        };
        run().map_err(|e| point_error(format!("{} ({})", self.name(), cfg.memory), e))
    }
}

fn jobs(suite: Suite) -> Vec<(&'static str, Job)> {
    let (seqlens, heads) = match suite {
        Suite::Full => ([1024u32, 4096], 16u32),
        Suite::Quick => ([256, 512], 4),
    };
    let mut v = Vec::new();
    for hdim in [64u32, 128, 256] {
        for causal in [false, true] {
            for s in seqlens {
                let p = Fa3Params {
                    heads,
                    kv_heads: heads,
                    seqlen_q: s,
                    seqlen_kv: s,
                    hdim,
                    causal,
                    ..Fa3Params::default()
                };
                let c = if causal { " causal" } else { "" };
                v.push(("fa3", Job::Fa3(format!("d{hdim}{c} s={s}"), p)));
            }
        }
    }
    let gemms: Vec<GemmParams> = match suite {
        // Six of the sweep's shapes, spread over it.
        Suite::Full => sweep_shapes().into_iter().step_by(4).take(6).collect(),
        Suite::Quick => [(256, 256, 512), (512, 256, 1024), (384, 512, 256)]
            .map(|(m, n, k)| GemmParams::new(m, n, k))
            .to_vec(),
    };
    for g in gemms {
        v.push(("gemm", Job::Gemm(format!("{}x{}x{}", g.m, g.n, g.k), g)));
    }
    v
}

/// Runs `suite` on `cfg` under both hierarchy models; `progress(done,
/// total)` is told of each finished run (in parallel on rayon's threads).
pub fn agreement(
    cfg: &GpuConfig,
    suite: Suite,
    progress: &(dyn Fn(usize, usize) + Sync),
) -> Result<Agreement, CalibError> {
    let (line, txn) = (
        under(cfg, MemoryModel::Line),
        under(cfg, MemoryModel::Transaction),
    );
    let mut points = Vec::new();
    let work = jobs(suite);
    let runs: Vec<(usize, &GpuConfig)> = (0..work.len())
        .flat_map(|i| [(i, &line), (i, &txn)])
        .collect();
    let cycles = run_all(&runs, |&(i, c)| work[i].1.cycles(c), progress)?;
    for (i, (group, job)) in work.iter().enumerate() {
        points.push(point(
            group,
            job.name().to_string(),
            "cycles",
            cycles[2 * i],
            cycles[2 * i + 1],
        ));
    }
    let none = &|_: usize, _: usize| {};
    let chase = match suite {
        Suite::Full => PchaseOptions {
            points: Some(24),
            ..PchaseOptions::default()
        },
        Suite::Quick => PchaseOptions {
            points: Some(8),
            ..PchaseOptions::quick()
        },
    };
    let rows = pchase_rows()?;
    let a = calibrate_pchase(&line, &rows, &chase, none)?;
    let b = calibrate_pchase(&txn, &rows, &chase, none)?;
    for (p, q) in a.points.iter().zip(&b.points) {
        let name = crate::calibration::pchase::format_kb(p.working_set_kb);
        points.push(point(
            "pchase",
            name,
            "cycles/hop",
            p.simulated,
            q.simulated,
        ));
    }
    let tma = match suite {
        Suite::Full => TmaBwOptions {
            total_bytes: 64 << 20,
            cells: None,
        },
        Suite::Quick => TmaBwOptions {
            total_bytes: 4 << 20,
            cells: Some(6),
        },
    };
    let a = calibrate_tma_bw(&line, &tma, none)?;
    let b = calibrate_tma_bw(&txn, &tma, none)?;
    for (p, q) in a.cells.iter().zip(&b.cells) {
        let name = format!("{} x{}", p.copy, p.blocks_per_sm);
        points.push(point("tma-bw", name, "GB/s", p.simulated, q.simulated));
    }
    Ok(Agreement::new(cfg.name.to_string(), points))
}

fn point(
    group: &'static str,
    name: String,
    metric: &'static str,
    line: f64,
    transaction: f64,
) -> AgreementPoint {
    AgreementPoint {
        group,
        name,
        metric,
        line,
        transaction,
        error_percent: error_percent(line, transaction),
    }
}

/// The comparison as a plain-text table, one point a line; a `*` marks
/// each point further than [`TARGET_PERCENT`] from the line model.
pub fn agreement_table(a: &Agreement) -> String {
    let mut s = format!(
        "transaction vs line memory model on {}\n{:<8} {:<26} {:>12} {:>14} {:>14} {:>8}\n",
        a.gpu, "group", "point", "metric", "line", "transaction", "error"
    );
    for p in &a.points {
        let past = if p.past_target() { " *" } else { "" };
        s.push_str(&format!(
            "{:<8} {:<26} {:>12} {:>14.2} {:>14.2} {:>+7.2}%{past}\n",
            p.group, p.name, p.metric, p.line, p.transaction, p.error_percent
        ));
    }
    s.push_str(&format!(
        "{} points: MAPE {:.2}%, worst {:.2}%, {} past {}% (*)\n",
        a.points.len(),
        a.mape_percent,
        a.max_abs_error_percent,
        a.past_target,
        TARGET_PERCENT
    ));
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pt(name: &str, line: f64, transaction: f64) -> AgreementPoint {
        point("tma-bw", name.to_string(), "GB/s", line, transaction)
    }

    /// Points past the target are counted and marked; one exactly at it
    /// (`(103 - 100) / 100 * 100` is 3.0 exactly in binary floating
    /// point) is not.
    #[test]
    fn the_table_marks_and_counts_the_points_past_the_target() {
        let a = Agreement::new(
            "h800".into(),
            vec![
                pt("in", 100.0, 102.0),
                pt("at", 100.0, 103.0),
                pt("over", 100.0, 96.5),
                pt("far", 200.0, 240.0),
            ],
        );
        assert_eq!(a.past_target, 2);
        assert!((a.max_abs_error_percent - 20.0).abs() < 1e-9);
        let t = agreement_table(&a);
        let marked: Vec<&str> = t
            .lines()
            .filter(|l| l.ends_with(" *"))
            .map(|l| l.split_whitespace().nth(1).unwrap())
            .collect();
        assert_eq!(marked, ["over", "far"], "{t}");
        assert!(
            t.ends_with("4 points: MAPE 7.12%, worst 20.00%, 2 past 3% (*)\n"),
            "{t}"
        );
    }
}
