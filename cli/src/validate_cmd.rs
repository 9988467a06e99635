//! `simfa validate`: every shipped dataset against the presets.

use std::io::{IsTerminal, Write};
use std::sync::Mutex;

use clap::Args;
use simfa_std::calibration::validate::{validate, ValidateOptions, DATASETS};

use crate::{out, Failure};

/// `simfa validate`.
#[derive(Debug, Args)]
pub struct ValidateArgs {
    /// Print one JSON object on stdout.
    #[arg(long)]
    json: bool,
    /// Print the per-dataset table as a Markdown table.
    #[arg(long, conflicts_with = "json")]
    markdown: bool,
    /// Run only this dataset (repeatable): pchase, tma-bw, wgmma-latency,
    /// wgmma-tflops, clocks, gemm-h100, gemm-h20, fa3-h100-ablation,
    /// fa3-h100-ratios, fa3-h20, l2-bandwidth, gemm-variants, gemm-library,
    /// gemm-shapes.
    #[arg(long, value_name = "DATASET")]
    only: Vec<String>,
    /// Batch of the FA3 ablation (default: the measured 4).
    #[arg(long, value_name = "B", value_parser = clap::value_parser!(u32).range(1..=4096))]
    fa3_batch: Option<u32>,
    /// Memory model for every preset: transaction (their default), line or
    /// fixed.
    #[arg(long, value_name = "MODEL", value_parser = crate::parse_memory)]
    memory: Option<simfa_core::config::MemoryModel>,
    #[command(flatten)]
    arrival: crate::ArrivalArg,
}

impl ValidateArgs {
    pub fn run(self) -> Result<(), Failure> {
        for o in &self.only {
            if !DATASETS.contains(&o.as_str()) {
                return Err(Failure::Input(format!(
                    "--only {o}: unknown dataset (one of {})",
                    DATASETS.join(", ")
                )));
            }
        }
        let opts = ValidateOptions {
            only: self.only,
            fa3_batch: self.fa3_batch,
            memory: self.memory,
            arrival_controller: self.arrival.policy(),
            ..ValidateOptions::default()
        };
        let show = !self.json && std::io::stderr().is_terminal();
        let width = Mutex::new(0usize);
        let progress = |name: &str, done: usize, total: usize| {
            if !show {
                return;
            }
            let line = format!("validating {name}: {done}/{total}");
            let mut w = width.lock().unwrap_or_else(|e| e.into_inner());
            let mut err = std::io::stderr().lock();
            let _ = write!(err, "\r{line:<w$}", w = *w);
            let _ = err.flush();
            *w = line.len();
        };
        let result = validate(&opts, &progress);
        if show {
            let w = *width.lock().unwrap_or_else(|e| e.into_inner());
            let _ = write!(std::io::stderr(), "\r{:w$}\r", "");
        }
        let v = result.map_err(crate::calibrate_cmd::calib_failure)?;
        if self.json {
            out(&format!("{}\n", v.to_json_pretty()))
        } else if self.markdown {
            out(&v.to_markdown())
        } else {
            out(&v.to_text())
        }
    }
}
