//! The microbenchmark generators (`simfa gen pchase`, `simfa gen tma-bw`,
//! `simfa gen l2-bw`)
//! and the calibration commands (`simfa calibrate pchase|tma-bw|l2-bw|sm`).

use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::sync::Mutex;

use clap::{Args, Subcommand, ValueEnum};
use simfa_core::GpuConfig;
use simfa_std::calibration::error::CalibError;
use simfa_std::calibration::gemm_bubbles::{fit_bubbles, read_points};
use simfa_std::calibration::l2::{calibrate_l2_bw, L2BwOptions};
use simfa_std::calibration::pchase::{
    calibrate_pchase, pchase_rows, read_pchase_csv, PchaseOptions,
};
use simfa_std::calibration::sm::{calibrate_sm, SmOptions};
use simfa_std::calibration::store::calibrate_store;
use simfa_std::calibration::tma_bw::{calibrate_tma_bw, TmaBwOptions};
use simfa_std::config::{load_config, preset};
use simfa_std::gen::pchase::{DEFAULT_MEASURED_HOPS, DEFAULT_STRIDE};
use simfa_std::gen::tmabw::{DEFAULT_TOTAL_BYTES, L2_BLOCKS_PER_SM};
use simfa_std::gen::{pchase, tma_bw, CopyKind, GemmParams, HopLoad, PchaseParams, TmaBwParams};
use simfa_std::reporting::svg::write_svg;

use crate::{emit_kernel, out, Failure, GpuArgs};

/// `simfa gen pchase`.
#[derive(Debug, Args)]
pub struct PchaseGen {
    /// Working set: bytes, or with a suffix kB/KB, MB, GB (powers of 1000)
    /// or KiB, MiB, GiB (powers of 1024).
    #[arg(long, value_name = "SIZE", value_parser = parse_size)]
    working_set: u64,
    /// Measured hops.
    #[arg(long, value_name = "M", default_value_t = DEFAULT_MEASURED_HOPS)]
    hops: u64,
    /// Warm-up hops (default: one pass over the lines, at most 819 200).
    #[arg(long, value_name = "W")]
    warmup: Option<u64>,
    /// Bytes between chased lines (a multiple of 16).
    #[arg(long, value_name = "BYTES", default_value_t = DEFAULT_STRIDE)]
    stride: u64,
    /// What each hop loads with.
    #[arg(long, value_enum, default_value = "tma")]
    loads: LoadsArg,
    /// Output file (.sfk or .bin: binary, else text); stdout if absent.
    #[arg(short, long, value_name = "FILE")]
    output: Option<PathBuf>,
}

/// What a pointer chase's hops load with.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum LoadsArg {
    /// 16-byte TMA bulk copies (L2 only).
    Tma,
    /// 16-byte plain loads through the L1 (`ld.global.ca`).
    Regular,
}

impl From<LoadsArg> for HopLoad {
    fn from(a: LoadsArg) -> HopLoad {
        match a {
            LoadsArg::Tma => HopLoad::Tma,
            LoadsArg::Regular => HopLoad::Regular,
        }
    }
}

/// The copy of `simfa gen tma-bw`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum CopyArg {
    /// Non-tensor bulk copy of --bytes.
    Bulk,
    /// 1-D tensor box.
    #[value(name = "1d")]
    D1,
    /// 2-D tensor box.
    #[value(name = "2d")]
    D2,
    /// 3-D tensor box.
    #[value(name = "3d")]
    D3,
}

/// `simfa gen tma-bw`.
#[derive(Debug, Args)]
pub struct TmaBwGen {
    /// What each iteration copies.
    #[arg(long, value_enum)]
    copy: CopyArg,
    /// Box extents in elements, innermost first: A, AxB or AxBxC.
    #[arg(long = "box", value_name = "A[xB[xC]]", value_parser = parse_box)]
    boxdim: Option<BoxDims>,
    /// Bytes per bulk copy (SIZE, a multiple of 16; 1KiB is 1024, 1KB 1000).
    #[arg(long, value_name = "SIZE", value_parser = parse_size)]
    bytes: Option<u64>,
    /// Bytes per tensor element.
    #[arg(long, value_name = "N", default_value_t = 4)]
    elem_bytes: u8,
    /// CTAs per SM.
    #[arg(long, value_name = "N", default_value_t = 1)]
    blocks_per_sm: u32,
    #[command(flatten)]
    out: StreamOut,
}

/// What the streaming microbenchmarks (`simfa gen tma-bw`, `simfa gen
/// l2-bw`) take besides their copies: the bytes moved, the GPU and the
/// output.
#[derive(Debug, Args)]
pub struct StreamOut {
    /// Bytes the whole grid moves (SIZE; default 256 MiB).
    #[arg(long, value_name = "SIZE", value_parser = parse_size)]
    total: Option<u64>,
    #[command(flatten)]
    gpu: GpuArgs,
    /// Output file (.sfk or .bin: binary, else text); stdout if absent.
    #[arg(short, long, value_name = "FILE")]
    output: Option<PathBuf>,
}

/// `simfa gen l2-bw`.
#[derive(Debug, Args)]
pub struct L2BwGen {
    /// The working set every SM streams, over and over (SIZE; 1MiB is
    /// 1048576 bytes, 1MB 10^6), a multiple of --bytes.
    #[arg(long, value_name = "SIZE", value_parser = parse_size)]
    size: u64,
    /// Bytes per bulk copy (SIZE, a multiple of 16).
    #[arg(long, value_name = "SIZE", value_parser = parse_size, default_value = "16KiB")]
    bytes: u64,
    /// CTAs per SM, each with one copy in flight.
    #[arg(long, value_name = "N", default_value_t = L2_BLOCKS_PER_SM)]
    blocks_per_sm: u32,
    #[command(flatten)]
    out: StreamOut,
}

impl L2BwGen {
    pub fn run(self) -> Result<(), Failure> {
        let cfg = self.out.gpu.resolve()?;
        let bytes = u32::try_from(self.bytes)
            .map_err(|_| Failure::Input(format!("--bytes {} is too large", self.bytes)))?;
        let p = TmaBwParams {
            total_bytes: self.out.total.unwrap_or(DEFAULT_TOTAL_BYTES),
            working_set: Some(self.size),
            ..TmaBwParams::new(CopyKind::Bulk { bytes }, self.blocks_per_sm, &cfg)
        };
        let k = tma_bw(&p).map_err(Failure::input)?;
        emit_kernel(&k, self.out.output.as_deref())
    }
}

/// Box extents parsed from `A[xB[xC]]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BoxDims(Vec<u32>);

/// Which GPU a calibration runs on (default `h800-pcie`, the machine of
/// the data).
#[derive(Debug, Args)]
pub struct CalGpuArgs {
    /// GPU preset (default h800-pcie; see `simfa presets`).
    #[arg(long, value_name = "NAME", conflicts_with = "config")]
    gpu: Option<String>,
    /// TOML configuration file: `preset = "..."` plus field overrides.
    #[arg(long, value_name = "FILE.toml")]
    config: Option<PathBuf>,
    /// Memory model, over the preset's or file's: transaction (default),
    /// line (the line-level reference) or fixed.
    #[arg(long, value_name = "MODEL", value_parser = crate::parse_memory)]
    memory: Option<simfa_core::config::MemoryModel>,
    #[command(flatten)]
    arrival: crate::ArrivalArg,
}

impl CalGpuArgs {
    fn resolve(&self) -> Result<GpuConfig, Failure> {
        match (&self.config, &self.gpu) {
            (Some(path), _) => load_config(path).map_err(Failure::input),
            (None, name) => preset(name.as_deref().unwrap_or("h800-pcie")).map_err(Failure::input),
        }
        .map(|c| {
            let mut c = crate::with_memory(c, self.memory);
            self.arrival.apply(&mut c);
            c
        })
    }
}

/// `simfa calibrate ...`.
#[derive(Debug, Subcommand)]
pub enum CalibrateCmd {
    /// The TMA pointer-chase latency curve against a CSV of measurements
    /// (columns working_set_kb, regular_cycles, tma_cycles).
    Pchase {
        /// The data (default: the shipped data/h800pcie_pointer_chase.csv).
        csv: Option<PathBuf>,
        #[command(flatten)]
        gpu: CalGpuArgs,
        /// Print one JSON object on stdout.
        #[arg(long)]
        json: bool,
        /// Also draw measured and simulated curves into this SVG file.
        #[arg(long, value_name = "FILE")]
        svg: Option<PathBuf>,
        /// Run only N points spread evenly (always the first and the last).
        #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
        points: Option<u64>,
        /// Measured hops per point (default 2048; 256 with --quick).
        #[arg(long, value_name = "M")]
        hops: Option<u64>,
        /// Fewer hops and a short warm-up: a smoke test, not a calibration.
        #[arg(long)]
        quick: bool,
        /// What each hop loads with: `tma` (a 16-byte bulk copy, against
        /// the tma_cycles column) or `regular` (a plain load through the
        /// L1, against regular_cycles; also fits l1.hit_cycles on the L1
        /// plateau and prints the fit).
        #[arg(long, value_enum, default_value = "tma")]
        loads: LoadsArg,
    },
    /// The TMA load throughput table of calibration.md section 2.
    TmaBw {
        #[command(flatten)]
        gpu: CalGpuArgs,
        /// Print one JSON object on stdout.
        #[arg(long)]
        json: bool,
        /// Bytes each cell moves (SIZE; default 256 MiB, 16 MiB with --quick).
        #[arg(long, value_name = "SIZE", value_parser = parse_size)]
        total: Option<u64>,
        /// Run only N of the 24 cells, spread evenly.
        #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
        cells: Option<u64>,
        /// Move 16 MiB per cell: a smoke test.
        #[arg(long)]
        quick: bool,
    },
    /// The L2 bandwidth table (data/l2_bandwidth.csv): every SM streaming
    /// a working set, on each row's preset; with --fit, search the slices'
    /// widths on the rows marked `fit` first.
    L2Bw {
        /// Print one JSON object on stdout.
        #[arg(long)]
        json: bool,
        /// Try every pair of widths of the grid on the `fit` rows and
        /// report the rows at the best (a few minutes).
        #[arg(long)]
        fit: bool,
        /// Bytes the shorter run of each point moves at least (SIZE;
        /// default 128 MiB, 16 MiB with --quick).
        #[arg(long, value_name = "SIZE", value_parser = parse_size)]
        total: Option<u64>,
        /// Move 16 MiB per run: a smoke test.
        #[arg(long)]
        quick: bool,
        /// Memory model, over the presets': transaction (default) or line.
        #[arg(long, value_name = "MODEL", value_parser = crate::parse_memory)]
        memory: Option<simfa_core::config::MemoryModel>,
        #[command(flatten)]
        arrival: crate::ArrivalArg,
    },
    /// Register stores (st.global) against a GEMM epilogue timed on the
    /// GPU (data/register_stores.csv), on each row's preset; with --fit,
    /// fit the presets' store_request_cycles on the rows first.
    Store {
        /// Print one JSON object on stdout.
        #[arg(long)]
        json: bool,
        /// Fit store_request_cycles on the rows and run them with it.
        #[arg(long)]
        fit: bool,
    },
    /// Fit the SM compute model on the shipped data: the power-limited
    /// clock of each GPU (tensor_sustained_mhz, on the clock, WGMMA and
    /// GEMM data) and the tensor/SIMT register-file share (units.rf_share,
    /// on the H100 FA3 ablation). Prints every fit with its residuals and
    /// leave-one-out errors, and the values for the presets. Takes tens of
    /// minutes.
    Sm {
        /// Print one JSON object on stdout.
        #[arg(long)]
        json: bool,
        /// Batch of the FA3 ablation runs (the measured shape's is 4).
        #[arg(long, value_name = "B", default_value_t = 1,
              value_parser = clap::value_parser!(u32).range(1..=4096))]
        fa3_batch: u32,
        /// Fit only units.rf_share (the presets' clocks as they are).
        #[arg(long)]
        skip_clocks: bool,
        /// Fit only the clocks (the presets' units.rf_share as it is; its
        /// FA3 runs take most of the time).
        #[arg(long, conflicts_with = "skip_clocks")]
        skip_rf_share: bool,
        /// Exit 1 unless the presets hold the fitted values.
        #[arg(long)]
        check: bool,
    },
    /// Fit the GEMM frontend's bubbles (paper section V-B3) on measured
    /// per-shape times: OLS of measured - simulated cycles against K/64
    /// (intercept: prologue/epilogue bubble; slope: per-BK=64 residual),
    /// R^2, and the errors with the fitted bubbles, in-sample and held out.
    GemmBubbles {
        /// CSV with columns m, n, k, measured_us or measured_cycles, and
        /// optionally set = fit | heldout.
        measured: PathBuf,
        #[command(flatten)]
        gpu: crate::SimGpuArgs,
        /// Print one JSON object on stdout.
        #[arg(long)]
        json: bool,
        /// Write the bubbles as a TOML snippet for `simfa gemm --bubbles`.
        #[arg(short, long, value_name = "FILE.toml")]
        output: Option<PathBuf>,
    },
}

/// Parses a byte size: an integer or decimal number, optionally followed
/// by `B`, `kB`/`KB`/`k`, `MB`, `GB`, `TB` (powers of 1000) or `KiB`, `MiB`,
/// `GiB`, `TiB` (powers of 1024), case-insensitively, with optional space.
pub fn parse_size(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = (&t[..split], t[split..].trim());
    let mult: f64 = match unit.to_ascii_lowercase().as_str() {
        "" | "b" => 1.0,
        "k" | "kb" => 1e3,
        "m" | "mb" => 1e6,
        "g" | "gb" => 1e9,
        "t" | "tb" => 1e12,
        "kib" => 1024.0,
        "mib" => 1024.0 * 1024.0,
        "gib" => 1024.0 * 1024.0 * 1024.0,
        "tib" => 1024.0 * 1024.0 * 1024.0 * 1024.0,
        _ => {
            return Err(format!(
                "unknown unit `{unit}` in `{s}` (use kB, MB, GB, KiB, MiB, GiB or none)"
            ))
        }
    };
    if num.is_empty() {
        return Err(format!("`{s}` is not a size"));
    }
    let bytes = if let (Ok(n), true) = (num.parse::<u64>(), mult.fract() == 0.0) {
        n.checked_mul(mult as u64)
            .ok_or_else(|| format!("`{s}` is too large"))?
    } else {
        let v: f64 = num.parse().map_err(|_| format!("`{s}` is not a size"))?;
        let b = (v * mult).round();
        if !(0.0..1.8e19).contains(&b) {
            return Err(format!("`{s}` is too large"));
        }
        b as u64
    };
    Ok(bytes)
}

/// Parses `A`, `AxB` or `AxBxC` into box extents.
pub fn parse_box(s: &str) -> Result<BoxDims, String> {
    let dims: Result<Vec<u32>, _> = s
        .split(['x', 'X'])
        .map(|p| p.trim().parse::<u32>())
        .collect();
    match dims {
        Ok(d) if (1..=3).contains(&d.len()) => Ok(BoxDims(d)),
        _ => Err(format!(
            "`{s}` is not a box: give 1 to 3 extents separated by x, e.g. 32x32"
        )),
    }
}

impl PchaseGen {
    pub fn run(self) -> Result<(), Failure> {
        let p = PchaseParams {
            working_set_bytes: self.working_set,
            stride: self.stride,
            measured_hops: self.hops,
            warmup_hops: self.warmup,
            load: self.loads.into(),
        };
        let k = pchase(&p).map_err(Failure::input)?;
        emit_kernel(&k, self.output.as_deref())
    }
}

impl TmaBwGen {
    fn copy(&self) -> Result<CopyKind, Failure> {
        let need = match self.copy {
            CopyArg::Bulk => 0,
            CopyArg::D1 => 1,
            CopyArg::D2 => 2,
            CopyArg::D3 => 3,
        };
        if need == 0 {
            if self.boxdim.is_some() {
                return Err(Failure::Input(
                    "--copy bulk takes --bytes, not --box".into(),
                ));
            }
            let bytes = self
                .bytes
                .ok_or_else(|| Failure::Input("--copy bulk needs --bytes SIZE".into()))?;
            let bytes = u32::try_from(bytes)
                .map_err(|_| Failure::Input(format!("--bytes {bytes} is too large")))?;
            return Ok(CopyKind::Bulk { bytes });
        }
        if self.bytes.is_some() {
            return Err(Failure::Input(
                "--bytes is for --copy bulk; tensor copies take --box".into(),
            ));
        }
        let b = self.boxdim.as_ref().ok_or_else(|| {
            Failure::Input(format!("--copy {need}d needs --box with {need} extents"))
        })?;
        if b.0.len() != need {
            return Err(Failure::Input(format!(
                "--copy {need}d needs --box with {need} extents, got {}",
                b.0.len()
            )));
        }
        Ok(match need {
            1 => CopyKind::Tensor1d { boxdim: [b.0[0]] },
            2 => CopyKind::Tensor2d {
                boxdim: [b.0[0], b.0[1]],
            },
            _ => CopyKind::Tensor3d {
                boxdim: [b.0[0], b.0[1], b.0[2]],
            },
        })
    }

    pub fn run(self) -> Result<(), Failure> {
        let cfg = self.out.gpu.resolve()?;
        let p = TmaBwParams {
            copy: self.copy()?,
            elem_bytes: self.elem_bytes,
            blocks_per_sm: self.blocks_per_sm,
            sms: cfg.sms,
            total_bytes: self.out.total.unwrap_or(DEFAULT_TOTAL_BYTES),
            working_set: None,
        };
        let k = tma_bw(&p).map_err(Failure::input)?;
        emit_kernel(&k, self.out.output.as_deref())
    }
}

/// `calibrating: 37/189` on stderr while a terminal watches.
struct Counter {
    enabled: bool,
    what: &'static str,
    width: Mutex<usize>,
}

impl Counter {
    fn new(wanted: bool, what: &'static str) -> Self {
        Counter {
            enabled: wanted && std::io::stderr().is_terminal(),
            what,
            width: Mutex::new(0),
        }
    }

    fn update(&self, done: usize, total: usize) {
        if !self.enabled {
            return;
        }
        let line = format!("calibrating: {done}/{total} {}", self.what);
        let mut w = self.width.lock().unwrap_or_else(|e| e.into_inner());
        let mut err = std::io::stderr().lock();
        let _ = write!(err, "\r{line}");
        let _ = err.flush();
        *w = line.len();
    }

    fn finish(&self) {
        let w = *self.width.lock().unwrap_or_else(|e| e.into_inner());
        if w > 0 {
            let mut err = std::io::stderr().lock();
            let _ = write!(err, "\r{:w$}\r", "");
            let _ = err.flush();
        }
    }
}

/// A calibration or validation error as the failure (and exit status) it
/// maps to: bad input exits 2, a failed simulation 1.
pub fn calib_failure(e: CalibError) -> Failure {
    if e.is_input_error() {
        Failure::Input(e.to_string())
    } else {
        Failure::Sim(e.to_string())
    }
}

impl CalibrateCmd {
    pub fn run(self) -> Result<(), Failure> {
        match self {
            CalibrateCmd::Pchase {
                csv,
                gpu,
                json,
                svg,
                points,
                hops,
                quick,
                loads,
            } => {
                let cfg = gpu.resolve()?;
                let rows = match csv {
                    Some(path) => read_pchase_csv(&path),
                    None => pchase_rows(),
                }
                .map_err(calib_failure)?;
                let mut opts = if quick {
                    PchaseOptions::quick()
                } else {
                    PchaseOptions::default()
                };
                if let Some(h) = hops {
                    opts.measured_hops = h;
                }
                opts.points = points.map(|n| n.min(usize::MAX as u64) as usize);
                opts.load = loads.into();
                let counter = Counter::new(!json, "points");
                let result = calibrate_pchase(&cfg, &rows, &opts, &|d, t| counter.update(d, t));
                counter.finish();
                let c = result.map_err(calib_failure)?;
                if let Some(path) = svg {
                    write_svg(&path, &c.chart()).map_err(|e| {
                        Failure::Input(format!("cannot write {}: {e}", path.display()))
                    })?;
                }
                if json {
                    out(&format!("{}\n", c.to_json_pretty()))
                } else {
                    out(&c.to_text())
                }
            }
            CalibrateCmd::TmaBw {
                gpu,
                json,
                total,
                cells,
                quick,
            } => {
                let cfg = gpu.resolve()?;
                let mut opts = if quick {
                    TmaBwOptions::quick()
                } else {
                    TmaBwOptions::default()
                };
                if let Some(t) = total {
                    opts.total_bytes = t;
                }
                opts.cells = cells.map(|n| n.min(usize::MAX as u64) as usize);
                let counter = Counter::new(!json, "cells");
                let result = calibrate_tma_bw(&cfg, &opts, &|d, t| counter.update(d, t));
                counter.finish();
                let c = result.map_err(calib_failure)?;
                if json {
                    out(&format!("{}\n", c.to_json_pretty()))
                } else {
                    out(&c.to_text())
                }
            }
            CalibrateCmd::L2Bw {
                json,
                fit,
                total,
                quick,
                memory,
                arrival,
            } => {
                let mut opts = if quick {
                    L2BwOptions::quick()
                } else {
                    L2BwOptions::default()
                };
                if let Some(t) = total {
                    opts.min_total = t;
                }
                opts.fit = fit;
                let cfg_of = |name: &str| {
                    let c = GpuConfig::preset(name).unwrap_or_else(GpuConfig::h800);
                    let mut c = crate::with_memory(c, memory);
                    arrival.apply(&mut c);
                    c
                };
                let counter = Counter::new(!json, "runs");
                let result = calibrate_l2_bw(&cfg_of, &opts, &|d, t| counter.update(d, t));
                counter.finish();
                let c = result.map_err(calib_failure)?;
                if json {
                    out(&format!("{}\n", c.to_json()))
                } else {
                    out(&c.to_text())
                }
            }
            CalibrateCmd::Store { json, fit } => {
                let cfg_of = |name: &str| GpuConfig::preset(name).unwrap_or_else(GpuConfig::h800);
                let c = calibrate_store(&cfg_of, fit).map_err(calib_failure)?;
                if json {
                    out(&format!("{}\n", c.to_json()))
                } else {
                    out(&c.to_text())
                }
            }
            CalibrateCmd::GemmBubbles {
                measured,
                gpu,
                json,
                output,
            } => {
                let cfg = gpu.resolve()?;
                let points = read_points(&measured, cfg.clock_mhz).map_err(calib_failure)?;
                let counter = Counter::new(!json, "simulations");
                let template = GemmParams::new(128, 128, 64);
                let fit = fit_bubbles(&cfg, &template, &points, &|d, t| counter.update(d, t));
                counter.finish();
                let fit = fit.map_err(calib_failure)?;
                if let Some(path) = &output {
                    simfa_std::load::write_atomic(path, fit.to_toml().as_bytes()).map_err(|e| {
                        Failure::Input(format!("cannot write {}: {e}", path.display()))
                    })?;
                }
                if json {
                    let text =
                        serde_json::to_string_pretty(&fit.to_json()).map_err(Failure::input)?;
                    out(&format!("{text}\n"))
                } else {
                    out(&fit.to_text())
                }
            }
            CalibrateCmd::Sm {
                json,
                fa3_batch,
                skip_clocks,
                skip_rf_share,
                check,
            } => {
                let opts = SmOptions {
                    fa3_batch: Some(fa3_batch),
                    skip_clocks,
                    skip_rf_share,
                };
                let counter = Counter::new(!json, "simulations of the fit under way");
                let result = calibrate_sm(&opts, &|d, t| counter.update(d, t));
                counter.finish();
                let c = result.map_err(calib_failure)?;
                if json {
                    out(&format!("{}\n", c.to_json_pretty()))?;
                } else {
                    out(&c.to_text())?;
                }
                let diff = c.differences();
                if check && !diff.is_empty() {
                    let lines: Vec<String> = diff
                        .iter()
                        .map(|(g, k, have, want)| {
                            format!("{g}: {k} is {have}, the fit gives {want}")
                        })
                        .collect();
                    return Err(Failure::Sim(format!(
                        "the presets differ from the fit:\n  {}",
                        lines.join("\n  ")
                    )));
                }
                Ok(())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        assert_eq!(parse_size("4096"), Ok(4096));
        assert_eq!(parse_size("2kB"), Ok(2000));
        assert_eq!(parse_size("2 KB"), Ok(2000));
        assert_eq!(parse_size("21.6MB"), Ok(21_600_000));
        assert_eq!(parse_size("2.7GB"), Ok(2_700_000_000));
        assert_eq!(parse_size("1KiB"), Ok(1024));
        assert_eq!(parse_size("50MiB"), Ok(50 << 20));
        assert_eq!(parse_size("4GiB"), Ok(4 << 30));
        assert_eq!(parse_size("0.5KiB"), Ok(512));
        assert_eq!(parse_size("16B"), Ok(16));
        assert!(parse_size("").is_err());
        assert!(parse_size("MB").is_err());
        assert!(parse_size("12 parsecs").unwrap_err().contains("parsecs"));
        assert!(parse_size("1.2.3MB").is_err());
        assert!(parse_size("99999999999999999999").is_err());
        assert!(parse_size("100000000TB").is_err());
    }

    #[test]
    fn boxes() {
        assert_eq!(parse_box("128"), Ok(BoxDims(vec![128])));
        assert_eq!(parse_box("32x32"), Ok(BoxDims(vec![32, 32])));
        assert_eq!(parse_box("8x8x4"), Ok(BoxDims(vec![8, 8, 4])));
        assert!(parse_box("8x8x4x2").is_err());
        assert!(parse_box("8xa").is_err());
        assert!(parse_box("").is_err());
    }
}
