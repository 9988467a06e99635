//! `simfa check scalesim`: the read-after-transfer check on a SCALE-Sim
//! v3 run's own trace files, and the ranking of dataflows under both
//! measurement windows (simfa_std::scalesim).

use std::path::PathBuf;

use clap::{Args, Subcommand};
use simfa_std::scalesim::compare::{compare, comparison_text};
use simfa_std::scalesim::report::run_text;
use simfa_std::scalesim::{check_run, RunReport, RunSpec};

use crate::{out, Failure};

/// `simfa check`.
#[derive(Debug, Subcommand)]
pub enum CheckCmd {
    /// Check a SCALE-Sim v3 run: every IFMAP and FILTER SRAM read must have
    /// a DRAM transfer of its address that completed in time (exit 1 if
    /// not); with --compare, rank dataflows per layer under both windows.
    Scalesim(ScalesimArgs),
}

/// `simfa check scalesim`.
#[derive(Debug, Args)]
pub struct ScalesimArgs {
    /// The run directory (`<-p dir>/<run_name>`, holding `layerN/`), or one
    /// layer's directory.
    #[arg(value_name = "RUN_DIR", required_unless_present = "compare")]
    run_dir: Option<PathBuf>,
    /// Rank the dataflows of these runs (one per dataflow, same topology)
    /// per layer under the compute field and the cold interval.
    #[arg(long, value_name = "DIR", num_args = 2.., conflicts_with_all = ["run_dir", "cfg", "topology"])]
    compare: Vec<PathBuf>,
    /// The run's scale.cfg (default: RUN_DIR/scale.cfg if there).
    #[arg(long, value_name = "FILE")]
    cfg: Option<PathBuf>,
    /// The run's topology CSV, for layer names and sizes (default:
    /// RUN_DIR/topology.csv if there).
    #[arg(long, value_name = "FILE")]
    topology: Option<PathBuf>,
    /// Hold reads to this hit latency instead of SCALE-Sim v3's 1 cycle.
    #[arg(long, value_name = "CYCLES")]
    hit_latency: Option<u64>,
    /// Print one JSON object on stdout.
    #[arg(long)]
    json: bool,
}

fn check(spec: &RunSpec) -> Result<RunReport, Failure> {
    check_run(spec).map_err(Failure::input)
}

fn json(v: &impl serde::Serialize) -> Result<(), Failure> {
    let text = serde_json::to_string_pretty(v).map_err(Failure::input)?;
    out(&format!("{text}\n"))
}

impl CheckCmd {
    pub fn run(self) -> Result<(), Failure> {
        match self {
            CheckCmd::Scalesim(a) => a.run(),
        }
    }
}

impl ScalesimArgs {
    fn run(self) -> Result<(), Failure> {
        if !self.compare.is_empty() {
            let runs = self
                .compare
                .iter()
                .map(|d| {
                    check(&RunSpec {
                        dir: d.clone(),
                        hit_latency: self.hit_latency,
                        ..RunSpec::default()
                    })
                })
                .collect::<Result<Vec<_>, _>>()?;
            let c = compare(&runs).map_err(Failure::input)?;
            if self.json {
                json(&c)?;
            } else {
                out(&comparison_text(&c))?;
            }
            return if c.failing_runs > 0 {
                Err(Failure::Sim(format!(
                    "{} of {} compared runs fail the read-after-transfer check",
                    c.failing_runs,
                    c.runs.len()
                )))
            } else {
                Ok(())
            };
        }
        let dir = self
            .run_dir
            .expect("clap requires RUN_DIR without --compare");
        let r = check(&RunSpec {
            dir,
            cfg: self.cfg,
            topology: self.topology,
            hit_latency: self.hit_latency,
        })?;
        if self.json {
            json(&r)?;
        } else {
            out(&run_text(&r))?;
        }
        if r.is_clean() {
            Ok(())
        } else {
            Err(Failure::Sim(format!(
                "{}: read-after-transfer check failed: {} violating reads",
                r.dir,
                r.total()
            )))
        }
    }
}
