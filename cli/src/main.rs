//! `simfa`: the command-line front end of the simfa GPU simulator.
//!
//! It parses arguments, shows progress and maps errors to exit statuses;
//! everything else it takes from `simfa-std` and `simfa-core`, the two
//! crates of the workspace it may use. The README's command table and
//! `docs/` describe the commands.
//!
//! ```text
//! simfa run FILE [--gpu NAME | --config FILE.toml] [--json] [--save-at CYCLE FILE] [--resume FILE]
//! simfa gen gemm --m M --n N --k K [-o FILE]
//! simfa gen pchase --working-set SIZE [--hops M] [-o FILE]
//! simfa gen tma-bw --copy bulk|1d|2d|3d (--box A[xB[xC]] | --bytes SIZE) [--blocks-per-sm N] [--total SIZE] [-o FILE]
//! simfa gen l2-bw --size SIZE [--bytes SIZE] [--blocks-per-sm N] [--total SIZE] [-o FILE]
//! simfa gemm [--m 4096] [--n 4096] [--k 4096] [--gpu NAME | --config FILE] [--json]
//! simfa convert IN OUT
//! simfa presets
//! simfa calibrate pchase CSV [--gpu NAME | --config FILE] [--json] [--svg FILE] [--points N]
//! simfa calibrate tma-bw [--gpu NAME | --config FILE] [--json] [--cells N]
//! simfa ttgir instrument IN [-o OUT]
//! simfa ttgir sites IN [--json]
//! simfa ttgir run KERNEL.ttgir --launch LAUNCH.toml [--gpu NAME | --config FILE] [--json]
//! simfa ttgir gen KERNEL.ttgir --launch LAUNCH.toml -o FILE
//! simfa sweep PLAN.toml [-o DIR] [-j N] [--shard I/N|env]
//! simfa sweep merge OUT SHARD...
//! simfa check scalesim RUN_DIR [--cfg scale.cfg] [--topology topo.csv] [--json]
//! simfa check scalesim --compare DIR DIR...
//! ```
//!
//! Exit status: 0 on success; 1 when the simulation fails (deadlock,
//! capacity, watchdog, no memory for the arena); 2 on bad usage or bad input
//! (unreadable or malformed files, bad configurations, kernels that do not
//! fit the GPU). Errors go to stderr prefixed `error: `; a deadlock also
//! lists every waiting WarpGroup. While a long run simulates, a one-line
//! progress display is drawn on stderr if it is a terminal (not with
//! `--json`).

mod agreement_cmd;
mod bench_cmd;
mod calibrate_cmd;
mod check_cmd;
mod fa3_cmd;
mod gemm_cmd;
mod import_cmd;
mod progress;
mod sweep_cmd;
mod ttgir_cmd;
mod validate_cmd;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand, ValueEnum};
use simfa_core::config::MemoryModel;
use simfa_core::mem::config::ArrivalController;
use simfa_core::{GpuConfig, Kernel, NoStream, Observer, StreamSource, PRESETS};
use simfa_std::check::ConsistencyChecker;
use simfa_std::config::{load_config, preset};
use simfa_std::fa3log::Fa3LogWriter;
use simfa_std::gen::{fa3, gemm, gemm_source};
use simfa_std::load::{load_kernel, save_kernel, Format};
use simfa_std::proton::export::ProtonWriter;
use simfa_std::proton::ops_file::{ops_path, write_streams, OpsFile};
use simfa_std::reporting::gantt::{write_chrome_trace, GanttRecorder};
use simfa_std::reporting::gantt_svg::write_svg;
use simfa_std::reporting::report::Report;
use simfa_std::run::{simulate_from, RunError, Snapshots};
use simfa_std::trace::{DramTrace, TraceFormat};

use agreement_cmd::AgreementArgs;
use bench_cmd::BenchArgs;
use calibrate_cmd::{CalibrateCmd, L2BwGen, PchaseGen, TmaBwGen};
use check_cmd::CheckCmd;
use fa3_cmd::Fa3Shape;
use gemm_cmd::{Shape, TuneArgs};
use import_cmd::ImportCmd;
use progress::Progress;
use sweep_cmd::SweepArgs;
use ttgir_cmd::TtgirCmd;
use validate_cmd::ValidateArgs;

/// Cycle-level simulator for Hopper TMA/WGMMA kernels.
#[derive(Debug, Parser)]
#[command(name = "simfa", version, propagate_version = true)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Debug, Subcommand)]
enum Cmd {
    /// Simulate a kernel file (text assembly or binary, told apart by content).
    Run {
        /// The kernel file.
        file: PathBuf,
        /// The op file of a kernel with stream roles (an imported trace);
        /// default: the kernel file's name with `.ops` appended.
        #[arg(long, value_name = "FILE")]
        ops: Option<PathBuf>,
        #[command(flatten)]
        gpu: SimGpuArgs,
        #[command(flatten)]
        out: Outputs,
    },
    /// Generate a workload kernel.
    Gen {
        #[command(subcommand)]
        what: GenCmd,
    },
    /// Generate the GEMM kernel and simulate it in one go (by default the
    /// warp-specialised persistent kernel, see --kernel; --tune finds the
    /// fastest of a family).
    Gemm {
        #[command(flatten)]
        shape: Shape,
        #[command(flatten)]
        tune: TuneArgs,
        #[command(flatten)]
        gpu: SimGpuArgs,
        #[command(flatten)]
        out: Outputs,
    },
    /// Generate the FlashAttention-3 forward kernel and simulate it (with no
    /// arguments: Llama 3 8B attention, 4096 tokens, on the H800).
    Fa3 {
        #[command(flatten)]
        shape: Fa3Shape,
        #[command(flatten)]
        gpu: SimGpuArgs,
        #[command(flatten)]
        out: Outputs,
        /// Write FA3's own event log of the run (paper section VI-A: the
        /// nine events per warp); `simfa import fa3-log` reads it back.
        #[arg(long, value_name = "FILE")]
        fa3_log: Option<PathBuf>,
    },
    /// Measure simulation speed (simulated cycles per wall second) and peak
    /// memory on FA3 and a GEMM sweep.
    Bench(BenchArgs),
    /// Convert a kernel between the text and binary encodings (OUT's
    /// extension decides: .sfk or .bin is binary, anything else text).
    Convert {
        /// Input kernel file (either encoding).
        input: PathBuf,
        /// Output kernel file.
        output: PathBuf,
    },
    /// List the built-in GPU presets.
    Presets,
    /// Compare simulated microbenchmarks with published measurements, and
    /// fit the model's parameters on them.
    Calibrate {
        #[command(subcommand)]
        what: CalibrateCmd,
    },
    /// Run every published dataset the project ships against the presets:
    /// points, MAPE, worst point, in-sample or held out. Takes tens of
    /// minutes (--only picks datasets).
    Validate(ValidateArgs),
    /// Compare the transaction-level memory model with the line-level
    /// reference on a fixed suite (FA3, GEMM, pointer chase, TMA
    /// throughput), point by point.
    Agreement(AgreementArgs),
    /// Turn a recorded trace into a kernel whose WarpGroups replay it.
    Import {
        #[command(subcommand)]
        what: ImportCmd,
    },
    /// Run a design-space sweep: every point of a plan (axes over
    /// configuration keys and workloads) in parallel, into JSON Lines, CSV
    /// and SVG files; resumes an interrupted sweep; shards over a cluster.
    Sweep(SweepArgs),
    /// Simulate a Triton kernel from its GPU IR (TTGIR) without a GPU, or
    /// instrument a TTGIR file with Proton records (or list the ops it
    /// would instrument).
    Ttgir {
        #[command(subcommand)]
        what: TtgirCmd,
    },
    /// Check another simulator's output for read-after-transfer
    /// consistency (SCALE-Sim v3 runs).
    Check {
        #[command(subcommand)]
        what: CheckCmd,
    },
}

#[derive(Debug, Subcommand)]
enum GenCmd {
    /// The TMA GEMM of `simfa gemm` (by default the warp-specialised
    /// persistent kernel; --kernel paper for the Sim-FA paper's).
    Gemm {
        #[command(flatten)]
        shape: Shape,
        /// GPU whose SM count sizes a persistent grid.
        #[command(flatten)]
        gpu: GpuArgs,
        /// Output file (.sfk or .bin: binary, else text); stdout if absent.
        #[arg(short, long, value_name = "FILE")]
        output: Option<PathBuf>,
    },
    /// The FlashAttention-3 forward kernel (sized for --gpu's SM count).
    Fa3 {
        #[command(flatten)]
        shape: Fa3Shape,
        #[command(flatten)]
        gpu: GpuArgs,
        /// Output file (.sfk or .bin: binary, else text); stdout if absent.
        #[arg(short, long, value_name = "FILE")]
        output: Option<PathBuf>,
    },
    /// The TMA pointer-chase latency benchmark: one CTA chasing a random
    /// cycle of 128-byte lines with 16-byte bulk copies.
    Pchase(PchaseGen),
    /// The TMA load throughput benchmark: every CTA streams tiles.
    TmaBw(TmaBwGen),
    /// The L2 bandwidth benchmark: every SM streams a working set that
    /// the L2 holds, with bulk copies, over and over.
    L2Bw(L2BwGen),
}

/// Which GPU to simulate.
#[derive(Debug, Args)]
struct GpuArgs {
    /// GPU preset (default h800; see `simfa presets`).
    #[arg(long, value_name = "NAME", conflicts_with = "config")]
    gpu: Option<String>,
    /// TOML configuration file: `preset = "..."` plus field overrides.
    #[arg(long, value_name = "FILE.toml")]
    config: Option<PathBuf>,
}

/// Which GPU to simulate, and with which memory model.
#[derive(Debug, Args)]
struct SimGpuArgs {
    #[command(flatten)]
    gpu: GpuArgs,
    /// Memory model, over the preset's or file's: transaction (default),
    /// line (the line-level reference) or fixed.
    #[arg(long, value_name = "MODEL", value_parser = parse_memory)]
    memory: Option<MemoryModel>,
    #[command(flatten)]
    arrival: ArrivalArg,
}

impl SimGpuArgs {
    fn resolve(&self) -> Result<GpuConfig, Failure> {
        let mut c = with_memory(self.gpu.resolve()?, self.memory);
        self.arrival.apply(&mut c);
        Ok(c)
    }
}

/// `--arrival-controller`, on every command that simulates the
/// transaction model.
#[derive(Debug, Args)]
pub struct ArrivalArg {
    /// With the transaction model, whether to land each TMA load when the
    /// line-level FR-FCFS controller, serving the DRAM reads in arrival
    /// order, returns them (`transaction.arrival_controller`): the line
    /// model's DRAM timing at roughly half the speed. `auto` (the
    /// presets') does for memory-bound kernels and grids of less than a
    /// wave only. The flag alone means
    /// `on`; give a value as `--arrival-controller=off` (docs/memory.md,
    /// docs/speed.md)
    #[arg(
        long,
        value_name = "WHEN",
        num_args = 0..=1,
        require_equals = true,
        default_missing_value = "on"
    )]
    arrival_controller: Option<ArrivalWhen>,
}

/// The values of `--arrival-controller`.
#[derive(Clone, Copy, Debug, ValueEnum)]
enum ArrivalWhen {
    /// For memory-bound kernels (their grid's traffic at the L2's or the
    /// HBM's peak takes at least as long as their WGMMAs) and grids of
    /// fewer CTAs than SMs
    Auto,
    /// Always
    On,
    /// Never: landings from the HBM service model alone
    Off,
}

impl ArrivalArg {
    /// The policy given, if any.
    pub fn policy(&self) -> Option<ArrivalController> {
        self.arrival_controller.map(|w| match w {
            ArrivalWhen::Auto => ArrivalController::Auto,
            ArrivalWhen::On => ArrivalController::On,
            ArrivalWhen::Off => ArrivalController::Off,
        })
    }

    /// Sets the policy in `cfg` when given (over a configuration file's).
    pub fn apply(&self, cfg: &mut GpuConfig) {
        if let Some(p) = self.policy() {
            cfg.transaction.arrival_controller = p;
        }
    }
}

/// `--memory`'s values: a model's name (`hierarchy` is `line`).
pub fn parse_memory(s: &str) -> Result<MemoryModel, String> {
    MemoryModel::from_name(s).ok_or_else(|| {
        let names: Vec<&str> = MemoryModel::ALL.iter().map(|m| m.name()).collect();
        format!("unknown memory model {s:?} (one of {})", names.join(", "))
    })
}

/// `cfg` with its memory model replaced by `memory` when given.
pub fn with_memory(mut cfg: GpuConfig, memory: Option<MemoryModel>) -> GpuConfig {
    if let Some(m) = memory {
        cfg.memory = m;
    }
    cfg
}

/// A failure and the exit status it maps to.
enum Failure {
    /// Bad usage or bad input: exit 2.
    Input(String),
    /// The simulation failed: exit 1.
    Sim(String),
}

impl Failure {
    fn input(e: impl std::fmt::Display) -> Self {
        Failure::Input(e.to_string())
    }

    /// The same failure with `why` appended to its message.
    fn because(self, why: &str) -> Self {
        match self {
            Failure::Input(m) => Failure::Input(format!("{m}: {why}")),
            Failure::Sim(m) => Failure::Sim(format!("{m}: {why}")),
        }
    }

    /// The same failure, its message prefixed with `origin: `.
    fn within(self, origin: &str) -> Self {
        match self {
            Failure::Input(m) => Failure::Input(format!("{origin}: {m}")),
            Failure::Sim(m) => Failure::Sim(format!("{origin}: {m}")),
        }
    }
}

fn main() -> ExitCode {
    // Usage errors exit 2 and --help/--version exit 0 (clap's behaviour).
    let cli = Cli::parse();
    match dispatch(cli.cmd) {
        Ok(()) => ExitCode::SUCCESS,
        Err(f) => {
            let (msg, code) = match f {
                Failure::Input(m) => (m, 2),
                Failure::Sim(m) => (m, 1),
            };
            let _ = writeln!(std::io::stderr().lock(), "error: {msg}");
            ExitCode::from(code)
        }
    }
}

fn dispatch(cmd: Cmd) -> Result<(), Failure> {
    match cmd {
        Cmd::Run {
            file,
            ops,
            gpu,
            out,
        } => {
            let cfg = gpu.resolve()?;
            let k = load_kernel(&file).map_err(Failure::input)?;
            // Name the inputs in run failures too (loading errors do already).
            let inputs = match &gpu.gpu.config {
                Some(c) => format!("{} with {}", file.display(), c.display()),
                None => file.display().to_string(),
            };
            if !k.roles.iter().any(|r| r.stream) {
                if let Some(o) = ops {
                    return Err(Failure::Input(format!(
                        "--ops {}: {} has no stream roles to read it",
                        o.display(),
                        file.display()
                    )));
                }
                return run_and_report(&cfg, &k, NoStream, &out, &mut (), None, None)
                    .map_err(|f| f.within(&inputs));
            }
            let path = ops.unwrap_or_else(|| ops_path(&file));
            let mut src = OpsFile::open(&path).map_err(|e| {
                Failure::Input(format!(
                    "{}: its stream roles need their op file: {e}",
                    file.display()
                ))
            })?;
            let r = run_and_report(&cfg, &k, &mut src, &out, &mut (), None, None);
            r.map_err(|f| match src.error() {
                Some(why) => f.within(&inputs).because(why),
                None => f.within(&inputs),
            })
        }
        Cmd::Import { what } => what.run(),
        Cmd::Sweep(s) => s.run(),
        Cmd::Check { what } => what.run(),
        Cmd::Gen {
            what: GenCmd::Gemm { shape, gpu, output },
        } => {
            let cfg = gpu.resolve()?;
            let p = shape.resolve(&cfg)?;
            let k = gemm(&p).map_err(Failure::input)?;
            if p.stream_k {
                // Each CTA's streams go to the op file beside the kernel.
                let Some(path) = output.as_deref() else {
                    return Err(Failure::Input(
                        "a stream-K kernel's CTAs each have their own instruction streams: give -o FILE.sfk to write them to FILE.sfk.ops beside it".into(),
                    ));
                };
                let ops = ops_path(path);
                write_streams(&ops, &k, gemm_source(&p))
                    .map_err(|e| Failure::Input(format!("cannot write {}: {e}", ops.display())))?;
            }
            emit_kernel(&k, output.as_deref())
        }
        Cmd::Gen {
            what: GenCmd::Fa3 { shape, gpu, output },
        } => {
            let cfg = gpu.resolve()?;
            let (k, _) = fa3(&shape.params(), &cfg).map_err(Failure::input)?;
            emit_kernel(&k, output.as_deref())
        }
        Cmd::Gen {
            what: GenCmd::Pchase(g),
        } => g.run(),
        Cmd::Gen {
            what: GenCmd::TmaBw(g),
        } => g.run(),
        Cmd::Gen {
            what: GenCmd::L2Bw(g),
        } => g.run(),
        Cmd::Calibrate { what } => what.run(),
        Cmd::Validate(v) => v.run(),
        Cmd::Agreement(a) => a.run(),
        Cmd::Ttgir { what } => what.run(),
        Cmd::Gemm {
            shape,
            tune,
            gpu,
            out,
        } => {
            let cfg = gpu.resolve()?;
            if tune.tune {
                return gemm_cmd::run_tune(&cfg, &shape, &tune, &out);
            }
            let p = shape.resolve(&cfg)?;
            let k = gemm(&p).map_err(Failure::input)?;
            // TFLOP/s of the product, 2 M N K, as libraries count it.
            run_and_report(
                &cfg,
                &k,
                gemm_source(&p),
                &out,
                &mut (),
                Some(&|_| p.flops()),
                None,
            )
        }
        Cmd::Fa3 {
            shape,
            gpu,
            out,
            fa3_log,
        } => {
            let cfg = gpu.resolve()?;
            let p = shape.params();
            let (k, _) = fa3(&p, &cfg).map_err(Failure::input)?;
            let Some(path) = fa3_log else {
                return run_and_report(
                    &cfg,
                    &k,
                    NoStream,
                    &out,
                    &mut (),
                    Some(&|_| p.flops()),
                    None,
                );
            };
            let cannot = |e: std::io::Error| {
                Failure::Input(format!("cannot write FA3 log {}: {e}", path.display()))
            };
            let f = std::io::BufWriter::new(std::fs::File::create(&path).map_err(cannot)?);
            let mut log = Fa3LogWriter::new(f, &k, &p).map_err(cannot)?;
            run_and_report(
                &cfg,
                &k,
                NoStream,
                &out,
                &mut log,
                Some(&|_| p.flops()),
                None,
            )?;
            log.finish().map(|_| ()).map_err(cannot)
        }
        Cmd::Bench(b) => b.run(),
        Cmd::Convert { input, output } => {
            let k = load_kernel(&input).map_err(Failure::input)?;
            save(&k, &output)
        }
        Cmd::Presets => out(&presets_table()),
    }
}

impl GpuArgs {
    fn resolve(&self) -> Result<GpuConfig, Failure> {
        match (&self.config, &self.gpu) {
            (Some(path), _) => load_config(path).map_err(Failure::input),
            (None, name) => preset(name.as_deref().unwrap_or("h800")).map_err(Failure::input),
        }
    }
}

fn save(k: &Kernel, path: &Path) -> Result<(), Failure> {
    save_kernel(k, path, Format::from_path(path)).map_err(Failure::input)
}

/// Writes a generated kernel to `output`, or as text to stdout.
fn emit_kernel(k: &Kernel, output: Option<&Path>) -> Result<(), Failure> {
    match output {
        Some(path) => save(k, path),
        None => out(&simfa_std::asm::print(k)),
    }
}

/// `--dram-trace FILE [--dram-trace-format loadstore|timed]`.
#[derive(Debug, clap::Args)]
struct TraceArgs {
    /// Write every DRAM request (memory hierarchy only) to FILE, one per
    /// line, in a format Ramulator 2's LoadStoreTrace frontend reads.
    #[arg(long, value_name = "FILE")]
    dram_trace: Option<PathBuf>,
    /// `loadstore`: `LD|ST 0xADDR`; `timed`: `CYCLE LD|ST 0xADDR`.
    #[arg(long, value_name = "FORMAT", default_value = "loadstore", value_parser = ["loadstore", "timed"])]
    dram_trace_format: String,
}

/// What follows a report: text after its lines, and a key added to its
/// JSON object (`simfa gemm --tune`'s section).
struct Appendix {
    text: String,
    key: &'static str,
    json: serde_json::Value,
}

/// Simulates `k` with the outputs `out` asks for and prints its report,
/// followed by `appendix` when there is one.
fn run_and_report(
    cfg: &GpuConfig,
    k: &Kernel,
    source: impl StreamSource,
    out: &Outputs,
    extra: &mut impl Observer,
    workload_flops: Option<&dyn Fn(&Report) -> u64>,
    appendix: Option<Appendix>,
) -> Result<(), Failure> {
    let trace = &out.trace;
    if (out.gantt.is_some() || out.svg.is_some()) && out.gantt_sm >= cfg.sms {
        return Err(Failure::Input(format!(
            "--gantt-sm {}: the GPU has SMs 0..{}",
            out.gantt_sm,
            cfg.sms.saturating_sub(1)
        )));
    }
    let mut tracer = match &trace.dram_trace {
        Some(path) => {
            let format = TraceFormat::from_name(&trace.dram_trace_format).unwrap_or_default();
            Some(DramTrace::create(path, format).map_err(|e| {
                Failure::Input(format!("cannot create DRAM trace {}: {e}", path.display()))
            })?)
        }
        None => None,
    };
    let mut gantt = (out.gantt.is_some() || out.svg.is_some())
        .then(|| GanttRecorder::for_kernel(out.gantt_sm, k));
    let mut checker = out.check.then(|| ConsistencyChecker::new(cfg));
    let mut proton = match &out.proton {
        Some(path) => {
            let cannot = |e: std::io::Error| {
                Failure::Input(format!("cannot write Proton trace {}: {e}", path.display()))
            };
            let f = std::io::BufWriter::new(std::fs::File::create(path).map_err(cannot)?);
            Some(ProtonWriter::new(f, k).map_err(cannot)?)
        }
        None => None,
    };
    let mut progress = Progress::new(!out.json);
    let mut observers = (
        (&mut tracer, &mut gantt),
        ((&mut checker, &mut proton), extra),
    );
    let snaps = out.snapshots()?;
    let result = simulate_from(
        cfg,
        k,
        source,
        &mut observers,
        |c, r, t| progress.update(c, r, t),
        &snaps,
    );
    progress.finish();
    if let (Ok(o), Some(w), Some(path)) = (&result, proton.take(), &out.proton) {
        w.finish(o.summary.cycles).map_err(|e| {
            Failure::Input(format!("cannot write Proton trace {}: {e}", path.display()))
        })?;
    }
    if result.is_ok() {
        if let (Some(t), Some(path)) = (tracer.take(), &trace.dram_trace) {
            t.finish().map_err(|e| {
                Failure::Input(format!("cannot write DRAM trace {}: {e}", path.display()))
            })?;
        }
        if let Some(g) = &gantt {
            if let Some(path) = &out.gantt {
                write_chrome_trace(path, g, cfg.clock_mhz as f64).map_err(|e| {
                    Failure::Input(format!("cannot write Gantt trace {}: {e}", path.display()))
                })?;
            }
            if let Some(path) = &out.svg {
                let title = format!("{} on {}, SM {}", k.name, cfg.name, out.gantt_sm);
                write_svg(path, g, &title).map_err(|e| {
                    Failure::Input(format!("cannot write SVG {}: {e}", path.display()))
                })?;
            }
        }
    }
    let outcome = result.map_err(|e| match e {
        RunError::Build(_)
        | RunError::Snapshot { .. }
        | RunError::Io { .. }
        | RunError::ExternalMemory => Failure::Input(e.to_string()),
        RunError::Alloc { .. } | RunError::Sim { .. } => Failure::Sim(e.to_string()),
    })?;
    let mut report = Report::new(cfg, k, &outcome);
    if let Some(f) = workload_flops {
        let flops = f(&report);
        report = report.with_workload_flops(flops);
    }
    let printed = if out.json {
        let mut j = report.to_json();
        if let Some(c) = &checker {
            j["check"] = serde_json::json!({
                "clean": c.is_clean(),
                "violations": c.total(),
                "summary": c.summary(),
            });
        }
        if let Some(a) = &appendix {
            j[a.key] = a.json.clone();
        }
        let text = serde_json::to_string_pretty(&j).map_err(Failure::input)?;
        self::out(&format!("{text}\n"))
    } else {
        let mut text = report.to_text();
        if let Some(c) = &checker {
            text.push_str(&format!("check  {}\n", c.summary()));
        }
        if let Some(a) = &appendix {
            text.push_str(&a.text);
        }
        self::out(&text)
    };
    printed?;
    match &checker {
        Some(c) if !c.is_clean() => Err(Failure::Sim(format!(
            "read-after-transfer check failed: {}",
            c.summary()
        ))),
        _ => Ok(()),
    }
}

/// Where the results of a simulation go besides the report.
#[derive(Debug, Args)]
struct Outputs {
    /// Print the report as one JSON object on stdout (no progress display).
    #[arg(long)]
    json: bool,
    /// Write a Chrome trace / Perfetto JSON timeline of one SM's WarpGroups
    /// (TMA transfers, WGMMA groups, waits, bubbles).
    #[arg(long, value_name = "FILE")]
    gantt: Option<PathBuf>,
    /// The SM that --gantt and --svg show.
    #[arg(long, value_name = "SM", default_value_t = 0)]
    gantt_sm: u16,
    /// Draw the same timeline as an SVG Gantt chart.
    #[arg(long, value_name = "FILE")]
    svg: Option<PathBuf>,
    /// Write the run as a Proton-style chrome trace (one event per
    /// instruction, SIMFA scope names); `simfa import proton` reads it
    /// back into a kernel that simulates to the same cycles.
    #[arg(long, value_name = "FILE")]
    proton: Option<PathBuf>,
    /// Run the read-after-transfer consistency checker; exit 1 if it finds
    /// a violation (the first few are printed in full, then counts).
    #[arg(long)]
    check: bool,
    #[command(flatten)]
    trace: TraceArgs,
    /// Save the whole simulation state to FILE once every cycle up to
    /// CYCLE is simulated (at the end if the run finishes first), then go
    /// on to the end.
    #[arg(long, num_args = 2, value_names = ["CYCLE", "FILE"])]
    save_at: Option<Vec<String>>,
    /// Start from a snapshot written by --save-at (same GPU and kernel)
    /// instead of cycle 0; the report and digest equal an uninterrupted
    /// run's (traces and --check see only the resumed part).
    #[arg(long, value_name = "FILE")]
    resume: Option<PathBuf>,
}

impl Outputs {
    /// The snapshots `--save-at` and `--resume` ask for.
    fn snapshots(&self) -> Result<Snapshots, Failure> {
        let save_at = match self.save_at.as_deref() {
            Some([cycle, file]) => {
                let c = cycle.parse::<u64>().map_err(|_| {
                    Failure::Input(format!("--save-at: `{cycle}` is not a cycle number"))
                })?;
                Some((c, PathBuf::from(file)))
            }
            _ => None,
        };
        Ok(Snapshots {
            resume: self.resume.clone(),
            save_at,
        })
    }
}

/// Writes to stdout; a closed pipe (`simfa ... | head`) is not an error.
fn out(text: &str) -> Result<(), Failure> {
    let mut stdout = std::io::stdout().lock();
    match stdout
        .write_all(text.as_bytes())
        .and_then(|()| stdout.flush())
    {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        Err(e) => Err(Failure::Input(format!("cannot write to stdout: {e}"))),
    }
}

fn presets_table() -> String {
    let mut s = format!(
        "{:<10} {:>5} {:>10} {:>10} {:>12}\n",
        "preset", "SMs", "clock MHz", "HBM GB/s", "FP16 TFLOPS"
    );
    for name in PRESETS {
        let Some(c) = GpuConfig::preset(name) else {
            continue;
        };
        let bw = c.port.bytes_per_cycle;
        let gbs = bw.num as f64 / bw.den as f64 * c.sms as f64 * c.clock_mhz as f64 / 1000.0;
        // Dense peak: one m64n256k16 WGMMA per tensor-pipe occupancy per SM.
        let flops_per_cycle =
            (2 * 64 * 256 * 16) as f64 / c.wgmma_cycles(256, simfa_core::WgmmaMode::Ss) as f64;
        let tflops = flops_per_cycle * c.sms as f64 * c.clock_mhz as f64 / 1e6;
        s.push_str(&format!(
            "{:<10} {:>5} {:>10} {:>10.0} {:>12.1}\n",
            name, c.sms, c.clock_mhz, gbs, tflops
        ));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn cli_is_well_formed() {
        Cli::command().debug_assert();
    }

    #[test]
    fn gpu_and_config_conflict() {
        let e = Cli::try_parse_from([
            "simfa", "run", "k.sasm", "--gpu", "h20", "--config", "c.toml",
        ])
        .unwrap_err();
        assert_eq!(e.kind(), clap::error::ErrorKind::ArgumentConflict);
        assert_eq!(e.exit_code(), 2);
    }

    #[test]
    fn presets_table_lists_all() {
        let t = presets_table();
        assert_eq!(t.lines().count(), PRESETS.len() + 1);
        assert!(t.contains("h800-pcie"));
        // H800: 132 SMs x 1830 MHz x 4096 FLOP/cycle = 989.4 TFLOPS.
        assert!(t.lines().nth(1).unwrap().contains("989.4"), "{t}");
    }
}
