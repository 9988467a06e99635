//! `simfa ttgir instrument` and `simfa ttgir sites`: the TTGIR
//! instrumentation pass of paper section V-A2 on a file; `simfa ttgir run`
//! and `simfa ttgir gen`: a Triton kernel's TTGIR executed for its launch,
//! without a GPU.

use std::path::{Path, PathBuf};

use clap::Subcommand;
use simfa_std::proton::ops_file::{ops_path, write_streams};
use simfa_std::reporting::report::Report;
use simfa_std::ttgir::launch::Launch;
use simfa_std::ttgir::lower::Program;
use simfa_std::ttgir::source::TtgirSource;
use simfa_std::ttgir::tree::parse;
use simfa_std::ttgir::{decode, instrument, sites, Site};

use crate::{out, run_and_report, save, Failure, Outputs, SimGpuArgs};

/// `simfa ttgir ...`.
#[derive(Debug, Subcommand)]
pub enum TtgirCmd {
    /// Wrap every TMA copy, WGMMA (and its wait) and mbarrier
    /// wait/arrive/expect of a TTGIR file in `proton.record start/end`
    /// markers carrying SIMFA scope strings; everything else is copied
    /// unchanged.
    Instrument {
        /// The TTGIR (MLIR text) file.
        input: PathBuf,
        /// Output file; stdout if absent.
        #[arg(short, long, value_name = "FILE")]
        output: Option<PathBuf>,
    },
    /// List the ops `instrument` wraps: site, line, op, kind, scope.
    Sites {
        /// The TTGIR (MLIR text) file.
        input: PathBuf,
        /// Print a JSON array instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Simulate a Triton kernel from its TTGIR: every CTA's scalar code is
    /// executed as the GPU would, and its TMA copies, loads and stores
    /// through pointers, atomics (a spin lock held by one CTA at a time),
    /// WGMMAs and mbarrier ops are simulated.
    Run {
        /// The TTGIR file (as `scripts/triton/compile_ttgir.py` writes it).
        input: PathBuf,
        /// The launch file: grid, arguments, tensors (with `values` where
        /// the kernel reads sizes or addresses from them), and `[buffers]`
        /// the kernel reaches only through addresses it loads
        /// (docs/front-ends.md).
        #[arg(long, value_name = "FILE")]
        launch: PathBuf,
        #[command(flatten)]
        gpu: Box<SimGpuArgs>,
        #[command(flatten)]
        out: Box<Outputs>,
    },
    /// Write the kernel `ttgir run` simulates, with its op file beside it
    /// (`OUTPUT.ops`), so that `simfa run OUTPUT` gives the same cycles.
    Gen {
        /// The TTGIR file.
        input: PathBuf,
        /// The launch file.
        #[arg(long, value_name = "FILE")]
        launch: PathBuf,
        /// The kernel file to write (`.sfk` binary or `.sasm` text).
        #[arg(short, long, value_name = "FILE")]
        output: PathBuf,
    },
}

/// Reads a launch file; errors name it.
fn read_launch(path: &Path) -> Result<(String, Launch), Failure> {
    let name = path.display().to_string();
    let text = std::fs::read_to_string(path)
        .map_err(|e| Failure::Input(format!("cannot read {name}: {e}")))?;
    let l = Launch::parse(&name, &text).map_err(Failure::input)?;
    Ok((name, l))
}

/// Reads `path` as text; errors name the file.
fn read(path: &Path) -> Result<(String, String), Failure> {
    let name = path.display().to_string();
    let bytes =
        std::fs::read(path).map_err(|e| Failure::Input(format!("cannot read {name}: {e}")))?;
    let text = decode(&name, &bytes).map_err(Failure::input)?.to_string();
    Ok((name, text))
}

impl TtgirCmd {
    pub fn run(self) -> Result<(), Failure> {
        match self {
            TtgirCmd::Instrument { input, output } => {
                let (name, text) = read(&input)?;
                let done = instrument(&name, &text).map_err(Failure::input)?;
                match output {
                    Some(path) => write_atomically(&path, &done.text),
                    None => out(&done.text),
                }
            }
            TtgirCmd::Sites { input, json } => {
                let (name, text) = read(&input)?;
                let found = sites(&name, &text).map_err(Failure::input)?;
                if json {
                    let v = serde_json::Value::Array(found.iter().map(site_json).collect());
                    let text = serde_json::to_string_pretty(&v).map_err(Failure::input)?;
                    out(&format!("{text}\n"))
                } else {
                    out(&sites_table(&found))
                }
            }
            TtgirCmd::Run {
                input,
                launch,
                gpu,
                out,
            } => {
                let cfg = gpu.resolve()?;
                let (name, text) = read(&input)?;
                let (lname, l) = read_launch(&launch)?;
                let module = parse(&name, &text).map_err(Failure::input)?;
                let program = Program::new(&module, &l, &lname).map_err(Failure::input)?;
                let mut src = TtgirSource::new(&program);
                // The dots' own math (an FP8 WGMMA does twice a 16-bit
                // one's).
                let flops = |r: &Report| program.dot_flops(r.wgmma_flops);
                let r = run_and_report(
                    &cfg,
                    &program.kernel,
                    &mut src,
                    &out,
                    &mut (),
                    Some(&flops),
                    None,
                );
                // A CTA the interpreter could not run is bad input; its
                // message names the file, line and CTA.
                r.map_err(|f| match src.error() {
                    Some(why) => Failure::Input(why.to_string()),
                    None => f.within(&name),
                })
            }
            TtgirCmd::Gen {
                input,
                launch,
                output,
            } => {
                let (name, text) = read(&input)?;
                let (lname, l) = read_launch(&launch)?;
                let module = parse(&name, &text).map_err(Failure::input)?;
                let program = Program::new(&module, &l, &lname).map_err(Failure::input)?;
                let ops = ops_path(&output);
                let cannot = |e: simfa_std::proton::ops_file::OpsError| {
                    Failure::Input(format!("cannot write {}: {e}", ops.display()))
                };
                let k = &program.kernel;
                let mut src = TtgirSource::new(&program);
                // A CTA the interpreter could not run is bad input, named
                // by the source's message.
                write_streams(&ops, k, &mut src).map_err(|e| match src.error() {
                    Some(why) => Failure::Input(why.to_string()),
                    None => cannot(e),
                })?;
                save(k, &output)
            }
        }
    }
}

/// Writes `text` to a temporary file beside `path` and renames it into
/// place, so a failure never leaves a half-written `path`.
fn write_atomically(path: &Path, text: &str) -> Result<(), Failure> {
    let fail = |e: std::io::Error| Failure::Input(format!("cannot write {}: {e}", path.display()));
    let mut tmp_name = path.file_name().unwrap_or_default().to_os_string();
    tmp_name.push(format!(".simfa-tmp-{}", std::process::id()));
    let tmp = path.with_file_name(tmp_name);
    let result = std::fs::write(&tmp, text).and_then(|()| std::fs::rename(&tmp, path));
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result.map_err(fail)
}

fn site_json(s: &Site) -> serde_json::Value {
    serde_json::json!({
        "site": s.scope.site,
        "line": s.line,
        "column": s.column,
        "op": s.op,
        "kind": s.kind().name(),
        "scope": s.scope.to_string(),
    })
}

/// One row per site under a header.
fn sites_table(sites: &[Site]) -> String {
    let op_w = sites.iter().map(|s| s.op.len()).max().unwrap_or(0).max(2);
    let mut t = format!(
        "{:>4} {:>6}  {:<op_w$}  {:<10}  scope\n",
        "site", "line", "op", "kind"
    );
    for s in sites {
        t.push_str(&format!(
            "{:>4} {:>6}  {:<op_w$}  {:<10}  {}\n",
            s.scope.site,
            s.line,
            s.op,
            s.kind().name(),
            s.scope
        ));
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_has_a_row_per_site() {
        let src = "ttng.arrive_barrier %0, 1 : !a\n  ttng.wait_barrier %0, %p : !a\n";
        let s = sites("t", src).unwrap();
        let t = sites_table(&s);
        assert_eq!(t.lines().count(), 3);
        assert!(t.lines().nth(2).unwrap().contains("MB_WAIT"), "{t}");
        assert!(t.contains("SIMFA|MB_ARRIVE|bar=%0|count=1|site=0"), "{t}");
    }
}
