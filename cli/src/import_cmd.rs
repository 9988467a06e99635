//! `simfa import proton` and `simfa import fa3-log`: a Proton chrome trace
//! (paper section V-A4) or FA3's event log (section VI-B) to a kernel that
//! replays it.

use std::path::{Path, PathBuf};

use clap::Subcommand;
use simfa_std::fa3log::import_fa3_log;
use simfa_std::load::load_kernel;
use simfa_std::proton::import::{import_proton, ImportOptions, ImportSummary};
use simfa_std::proton::layout::Layout;
use simfa_std::proton::ops_file::ops_path;
use simfa_std::ttgir::decode;

use crate::{out, save, Failure, GpuArgs};

/// `simfa import ...`.
#[derive(Debug, Subcommand)]
pub enum ImportCmd {
    /// Translate a Proton chrome trace into a kernel whose roles stream
    /// the recorded instructions: writes KERNEL and its op file
    /// KERNEL.ops, which `simfa run KERNEL` reads. The header comes from
    /// --header, else --layout, else the trace's otherData.
    Proton {
        /// The chrome trace (JSON), of any size: it is read as a stream.
        trace: PathBuf,
        /// A kernel file whose declarations (grid, tensor maps, mbarriers,
        /// stages, roles) the trace's events refer to; default: the
        /// trace's own `otherData.simfa_kernel` (written by `--proton`).
        #[arg(long, value_name = "KERNEL")]
        header: Option<PathBuf>,
        /// The host-side layout (TOML: grid, tensors with their base,
        /// shape, strides and tile rule, barrier arrays): builds the header
        /// from it and recovers real addresses (paper section V-C).
        #[arg(long, value_name = "FILE.toml", conflicts_with = "header")]
        layout: Option<PathBuf>,
        /// The instrumented TTGIR the trace was recorded from: every SIMFA
        /// scope of the trace must be one of its sites, and its num-warps
        /// gives the WarpGroups per CTA.
        #[arg(long, value_name = "FILE")]
        ttgir: Option<PathBuf>,
        /// The kernel file to write (.sfk binary, anything else text);
        /// default: the trace's name with `.sfk`.
        #[arg(short, long, value_name = "KERNEL")]
        output: Option<PathBuf>,
    },
    /// Translate FlashAttention-3's event log (paper section VI; the line
    /// format is in docs/front-ends.md) into the FA3 kernel for its shape whose
    /// roles stream the logged pipeline: writes KERNEL and KERNEL.ops.
    Fa3Log {
        /// The event log.
        log: PathBuf,
        /// The GPU the log was recorded on (its SM count sets the grid).
        #[command(flatten)]
        gpu: GpuArgs,
        /// The kernel file to write (.sfk binary, anything else text);
        /// default: the log's name with `.sfk`.
        #[arg(short, long, value_name = "KERNEL")]
        output: Option<PathBuf>,
    },
}

impl ImportCmd {
    pub fn run(self) -> Result<(), Failure> {
        match self {
            ImportCmd::Proton {
                trace,
                header,
                layout,
                ttgir,
                output,
            } => {
                let header = header
                    .map(|h| load_kernel(&h).map_err(Failure::input))
                    .transpose()?;
                let layout = layout
                    .map(|l| Layout::read(&l).map_err(Failure::input))
                    .transpose()?;
                let ttgir = match ttgir {
                    Some(p) => {
                        let name = p.display().to_string();
                        let bytes = std::fs::read(&p)
                            .map_err(|e| Failure::Input(format!("cannot read {name}: {e}")))?;
                        let text = decode(&name, &bytes).map_err(Failure::input)?.to_string();
                        Some((name, text))
                    }
                    None => None,
                };
                let opts = ImportOptions {
                    header,
                    layout,
                    ttgir,
                };
                let kernel = output.unwrap_or_else(|| trace.with_extension("sfk"));
                let ops = ops_path(&kernel);
                let (k, sum) = import_proton(&trace, &opts, &ops).map_err(Failure::input)?;
                save(&k, &kernel)?;
                report(&trace, &kernel, &ops, &sum)
            }
            ImportCmd::Fa3Log { log, gpu, output } => {
                let cfg = gpu.resolve()?;
                let kernel = output.unwrap_or_else(|| log.with_extension("sfk"));
                let ops = ops_path(&kernel);
                let (k, sum) = import_fa3_log(&log, &cfg, &ops).map_err(Failure::input)?;
                save(&k, &kernel)?;
                report(&log, &kernel, &ops, &sum)
            }
        }
    }
}

/// Prints what an import did.
fn report(input: &Path, kernel: &Path, ops: &Path, sum: &ImportSummary) -> Result<(), Failure> {
    out(&format!(
        "imported {} events of {} into {} ({} WarpGroup streams, {} instructions \
                     in {})\n  {} replayed exactly, {} translated by the table, {} ignored, \
                     {} duplicates from other warps dropped, {} warps differing from their \
                     WarpGroup\n",
        sum.events,
        input.display(),
        kernel.display(),
        sum.streams,
        sum.ops,
        ops.display(),
        sum.exact,
        sum.translated,
        sum.ignored,
        sum.duplicates,
        sum.mismatched_warps,
    ))
}
