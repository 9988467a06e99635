//! `simfa sweep PLAN.toml` and `simfa sweep merge OUT SHARD...`: a thin
//! layer over `simfa_std::sweep` with a progress bar on stderr.

use std::io::IsTerminal;
use std::path::PathBuf;

use clap::{Args, Subcommand};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use simfa_std::sweep::{merge, sweep, Plan, Shard};

use crate::Failure;

/// `simfa sweep`.
#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true, subcommand_negates_reqs = true)]
pub struct SweepArgs {
    #[command(subcommand)]
    what: Option<SweepCmd>,
    /// The plan file (TOML; see docs/sweeps.md).
    #[arg(required = true)]
    plan: Option<PathBuf>,
    /// The sweep directory (default: the plan's name without `.toml`,
    /// with `.sweep` appended, beside the plan).
    #[arg(long, short = 'o', value_name = "DIR")]
    out: Option<PathBuf>,
    /// Points simulated at once (default: one per core).
    #[arg(long, short = 'j', value_name = "N", default_value_t = 0)]
    jobs: usize,
    /// Run only every N-th point, starting at I (`I/N`), into
    /// DIR/shard-I-of-N/; `env` takes I and N from a Slurm array
    /// (`SLURM_ARRAY_TASK_ID`, `SLURM_ARRAY_TASK_COUNT`) or a Kubernetes
    /// indexed Job (`JOB_COMPLETION_INDEX`, `SIMFA_SHARDS`).
    #[arg(long, value_name = "I/N|env")]
    shard: Option<String>,
}

#[derive(Debug, Subcommand)]
enum SweepCmd {
    /// Combine shard directories into the files an unsharded run writes.
    Merge {
        /// The sweep directory to write.
        out: PathBuf,
        /// Shard directories (`DIR/shard-I-of-N`).
        #[arg(required = true)]
        shards: Vec<PathBuf>,
    },
}

impl SweepArgs {
    pub fn run(self) -> Result<(), Failure> {
        if let Some(SweepCmd::Merge { out, shards }) = self.what {
            merge(&out, &shards).map_err(Failure::input)?;
            eprintln!(
                "sweep: merged {} shards into {}",
                shards.len(),
                out.display()
            );
            return Ok(());
        }
        let path = self.plan.expect("clap requires the plan");
        let shard = match self.shard.as_deref() {
            None => None,
            Some("env") => {
                Some(Shard::from_env(|v| std::env::var(v).ok()).map_err(Failure::Input)?)
            }
            Some(s) => Some(Shard::parse(s).map_err(Failure::Input)?),
        };
        let plan = Plan::load(&path).map_err(Failure::input)?;
        let out = self.out.unwrap_or_else(|| path.with_extension("sweep"));
        let bar = ProgressBar::with_draw_target(
            Some(0),
            if std::io::stderr().is_terminal() {
                ProgressDrawTarget::stderr_with_hz(4)
            } else {
                ProgressDrawTarget::hidden()
            },
        );
        bar.set_style(
            ProgressStyle::with_template(
                "sweep [{elapsed_precise}] {bar:30} {pos}/{len} points {msg}",
            )
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
        );
        let failed = std::sync::atomic::AtomicUsize::new(0);
        let s = sweep(
            &plan,
            &out,
            shard,
            self.jobs,
            |n| bar.set_length(n as u64),
            &|r| {
                if !r.ok() {
                    let f = failed.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
                    bar.set_message(format!("({f} failed)"));
                }
                bar.inc(1);
            },
        )
        .map_err(|e| Failure::Input(format!("{}: {e}", out.display())))?;
        bar.finish_and_clear();
        let dir = shard.map_or(out.clone(), |s| s.dir(&out));
        eprintln!(
            "sweep: {} points ({} done before, {} run, {} failed) in {}",
            s.points,
            s.skipped,
            s.ran,
            s.failed,
            dir.display()
        );
        Ok(())
    }
}
