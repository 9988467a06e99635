//! `simfa agreement`: the transaction-level memory model against the
//! line-level reference on a fixed suite, point by point.

use clap::Args;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use simfa_std::calibration::agreement::{agreement, agreement_table, Suite};

use crate::{out, ArrivalArg, Failure, GpuArgs};

/// `simfa agreement`.
#[derive(Debug, Args)]
pub struct AgreementArgs {
    /// The small suite the tests run (seconds) instead of the issue's
    /// (FA3 at 1k and 4k tokens, six sweep GEMMs; minutes).
    #[arg(long)]
    quick: bool,
    /// Print one JSON object on stdout.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    gpu: GpuArgs,
    #[command(flatten)]
    arrival: ArrivalArg,
}

impl AgreementArgs {
    pub fn run(self) -> Result<(), Failure> {
        let mut cfg = self.gpu.resolve()?;
        self.arrival.apply(&mut cfg);
        let suite = if self.quick {
            Suite::Quick
        } else {
            Suite::Full
        };
        let bar = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr_with_hz(4));
        if let Ok(style) = ProgressStyle::with_template("{msg} {pos}/{len} [{elapsed}]") {
            bar.set_style(style);
        }
        bar.set_message("simulating FA3 and GEMM under both models");
        let progress = |done: usize, total: usize| {
            bar.set_length(total as u64);
            bar.set_position(done as u64);
        };
        let a = agreement(&cfg, suite, &progress);
        bar.finish_and_clear();
        let a = a.map_err(crate::calibrate_cmd::calib_failure)?;
        if self.json {
            let text = serde_json::to_string_pretty(&a).map_err(Failure::input)?;
            out(&format!("{text}\n"))
        } else {
            out(&agreement_table(&a))
        }
    }
}
