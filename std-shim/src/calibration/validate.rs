//! `simfa validate`: every published dataset the project ships
//! ([`crate::calibration::data`]), simulated with the presets as they are, and compared
//! point by point: per dataset the points, the MAPE, the worst point, and
//! whether the dataset was used to fit a parameter (in-sample) or not
//! (held out). The README's accuracy table is this command's
//! `--markdown` output.
//!
//! | dataset | preset | figure | status |
//! |---|---|---|---|
//! | `pchase` | h800-pcie | cycles per hop | in-sample (L2 latencies, associativity, proxy) |
//! | `tma-bw` | h800-pcie | GB/s | held out |
//! | `wgmma-latency` | h800-pcie | cycles per WGMMA | in-sample (the 13-cycle floor) |
//! | `wgmma-tflops` | h800-pcie | TFLOP/s | in-sample (`tensor_sustained_mhz`) |
//! | `clocks` | h800, h200 | sustained MHz | in-sample (`tensor_sustained_mhz`) |
//! | `gemm-h100`, `gemm-h20` | h100, h20 | TFLOP/s | in-sample (`tensor_sustained_mhz`) |
//! | `fa3-h100-ablation` | h100 | TFLOP/s | in-sample (`units.rf_share`, on the full kernel) |
//! | `fa3-h100-ratios` | h100 | the variants' time over the full kernel's | held out |
//! | `fa3-h20` | h20 | TFLOP/s | held out |
//! | `l2-bandwidth` | each row's | bytes per clock, every SM loading | held out (the presets do not take `simfa calibrate l2-bw --fit`'s widths yet) |
//! | `gemm-variants` | h100 | TFLOP/s of the fast.cu ladder, and its order | held out |
//! | `gemm-library` | h100 | TFLOP/s of the vendor library's GEMMs against `simfa gemm --tune`'s best | in-sample (`tensor_sustained_mhz`, fitted on the same points with a fixed kernel) |
//! | `gemm-shapes` | h100 | TFLOP/s of the vendor library's GEMMs of LLM layers (M from 1 to 4096) against `simfa gemm --tune`'s best, kernel time alone | held out |

use std::fmt::Write as _;

use serde::Serialize;
use simfa_core::config::MemoryModel;
use simfa_core::mem::config::ArrivalController;
use simfa_core::{GpuConfig, WgmmaMode};

use crate::calibration::data;
use crate::calibration::error::CalibError;
use crate::calibration::experiments::{
    fa3_label, fa3_params, gemm_label, point_error, run_all, run_fa3, run_gemm, run_gemm_params,
};
use crate::calibration::l2::{calibrate_l2_bw, L2BwOptions};
use crate::calibration::pchase::{calibrate_pchase, pchase_rows, PchaseOptions};
use crate::calibration::stats::{error_percent, mape};
use crate::calibration::tma_bw::{calibrate_tma_bw, TmaBwOptions};
use crate::gen::wgmma_bench::wgmma_figures;

/// The datasets, in the order they run.
pub const DATASETS: [&str; 14] = [
    "pchase",
    "tma-bw",
    "wgmma-latency",
    "wgmma-tflops",
    "clocks",
    "gemm-h100",
    "gemm-h20",
    "fa3-h100-ablation",
    "fa3-h100-ratios",
    "fa3-h20",
    "l2-bandwidth",
    "gemm-variants",
    "gemm-library",
    "gemm-shapes",
];

/// One point of a dataset.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Point {
    /// The point.
    pub label: String,
    /// Measured figure.
    pub measured: f64,
    /// Simulated figure.
    pub simulated: f64,
    /// Signed error, percent.
    pub error_percent: f64,
}

/// The comparison of one dataset.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Dataset {
    /// Its name (see [`DATASETS`]).
    pub name: String,
    /// The data file it comes from.
    pub data: String,
    /// The preset it ran on.
    pub gpu: String,
    /// What is compared.
    pub figure: String,
    /// `in-sample` or `held out`.
    pub status: String,
    /// What was fitted on it (empty when held out).
    pub fitted: String,
    /// MAPE, percent.
    pub mape_percent: f64,
    /// The point with the largest absolute error.
    pub worst: Point,
    /// Every point.
    pub points: Vec<Point>,
}

/// Options of a validation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ValidateOptions {
    /// Run only these datasets (all when empty).
    pub only: Vec<String>,
    /// Batch of the FA3 ablation (the measured 4 when `None`).
    pub fa3_batch: Option<u32>,
    /// Bytes per cell of the TMA throughput table (64 MiB by default).
    pub tma_total_bytes: u64,
    /// Run every preset under this memory model instead of its own.
    pub memory: Option<MemoryModel>,
    /// Run every preset with this arrival-order controller policy instead
    /// of its own (`transaction.arrival_controller`).
    pub arrival_controller: Option<ArrivalController>,
}

impl ValidateOptions {
    fn overrides(&self) -> Overrides {
        Overrides {
            memory: self.memory,
            arrival: self.arrival_controller,
        }
    }
}

/// What the options change in every preset.
#[derive(Clone, Copy, Debug)]
struct Overrides {
    memory: Option<MemoryModel>,
    arrival: Option<ArrivalController>,
}

impl Default for ValidateOptions {
    fn default() -> Self {
        ValidateOptions {
            only: Vec::new(),
            fa3_batch: None,
            tma_total_bytes: 64 << 20,
            memory: None,
            arrival_controller: None,
        }
    }
}

/// The result of `simfa validate`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Validation {
    /// The memory model the simulations ran with: the presets' default,
    /// or [`ValidateOptions::memory`].
    pub memory_model: String,
    /// The transaction model's arrival-order controller policy
    /// (`"auto"`, `"on"` or `"off"`): the presets' or
    /// [`ValidateOptions::arrival_controller`].
    pub arrival_controller: String,
    /// Every dataset run.
    pub datasets: Vec<Dataset>,
}

/// Preset `name` with the overrides that are given.
fn preset(name: &str, over: Overrides) -> GpuConfig {
    let mut c = GpuConfig::preset(name).unwrap_or_else(GpuConfig::h800);
    if let Some(m) = over.memory {
        c.memory = m;
    }
    if let Some(a) = over.arrival {
        c.transaction.arrival_controller = a;
    }
    c
}

fn dataset(
    name: &str,
    data: &str,
    gpu: &str,
    figure: &str,
    fitted: &str,
    points: Vec<Point>,
) -> Dataset {
    let errs: Vec<f64> = points.iter().map(|p| p.error_percent).collect();
    let worst = points
        .iter()
        .fold(None::<&Point>, |w, p| match w {
            Some(w) if w.error_percent.abs() >= p.error_percent.abs() => Some(w),
            _ => Some(p),
        })
        .cloned()
        .unwrap_or(Point {
            label: String::new(),
            measured: 0.0,
            simulated: 0.0,
            error_percent: 0.0,
        });
    Dataset {
        name: name.into(),
        data: data.into(),
        gpu: gpu.into(),
        figure: figure.into(),
        status: if fitted.is_empty() {
            "held out"
        } else {
            "in-sample"
        }
        .into(),
        fitted: fitted.into(),
        mape_percent: mape(&errs).unwrap_or(0.0),
        worst,
        points,
    }
}

fn point(label: String, measured: f64, simulated: f64) -> Point {
    Point {
        label,
        measured,
        simulated,
        error_percent: error_percent(measured, simulated),
    }
}

fn wgmma(
    which: &str,
    over: Overrides,
    progress: &(dyn Fn(usize, usize) + Sync),
) -> Result<Dataset, CalibError> {
    let cfg = preset("h800-pcie", over);
    let pts = data::wgmma_points()?;
    let jobs: Vec<(u16, WgmmaMode, f64, f64)> = pts
        .iter()
        .flat_map(|p| {
            [
                (p.n, WgmmaMode::Ss, p.latency[0], p.tflops[0]),
                (p.n, WgmmaMode::Rs, p.latency[1], p.tflops[1]),
            ]
        })
        .collect();
    let latency = which == "wgmma-latency";
    let points = run_all(
        &jobs,
        |&(n, mode, lat, tf)| {
            let label = format!("m64n{n}k16 {}", mode.name());
            let f = wgmma_figures(&cfg, n, mode).map_err(|e| point_error(label.clone(), e))?;
            Ok(if latency {
                point(label, lat, f.latency)
            } else {
                point(label, tf, f.tflops)
            })
        },
        progress,
    )?;
    Ok(if latency {
        dataset(
            which,
            data::WGMMA.path,
            "h800-pcie",
            "cycles per WGMMA",
            "wgmma_min_cycles (13, the RS floor)",
            points,
        )
    } else {
        dataset(
            which,
            data::WGMMA.path,
            "h800-pcie",
            "TFLOP/s",
            "tensor_sustained_mhz",
            points,
        )
    })
}

fn clocks() -> Result<Dataset, CalibError> {
    let mut points = Vec::new();
    for p in data::clock_points()? {
        let cfg = GpuConfig::preset(&p.gpu).unwrap_or_else(GpuConfig::h800);
        // The activity of the observed throughput at the observed clock,
        // and the clock the preset's limit gives at that activity.
        let cycles: u64 = 1 << 30;
        let peak = cfg.sms as f64 * 4096.0 * cycles as f64;
        let flops = (p.tflops * 1e6 / p.clock_mhz * cycles as f64).min(peak) as u64;
        let f = simfa_core::power::sustained_clock_mhz(&cfg, flops, cycles);
        points.push(point(
            format!("{} at {} TFLOP/s ({})", p.gpu, p.tflops, p.source),
            p.clock_mhz,
            f as f64,
        ));
    }
    Ok(dataset(
        "clocks",
        data::CLOCKS.path,
        "h800, h200",
        "sustained clock, MHz",
        "tensor_sustained_mhz",
        points,
    ))
}

fn gemm(
    gpu: &str,
    over: Overrides,
    progress: &(dyn Fn(usize, usize) + Sync),
) -> Result<Dataset, CalibError> {
    let cfg = preset(gpu, over);
    let pts: Vec<_> = data::gemm_points()?
        .into_iter()
        .filter(|p| p.gpu == gpu)
        .collect();
    let points = run_all(
        &pts,
        |p| {
            let r = run_gemm(&cfg, p.shape).map_err(|e| point_error(gemm_label(p), e))?;
            Ok(point(gemm_label(p), p.tflops, r.back_to_back_tflops))
        },
        progress,
    )?;
    Ok(dataset(
        &format!("gemm-{gpu}"),
        data::GEMM_DENSE.path,
        gpu,
        "TFLOP/s (128x256x64 tiles, 2 consumers, 3 stages, persistent, grouped)",
        "tensor_sustained_mhz",
        points,
    ))
}

/// A vendor library's H100 GEMMs against the fastest kernel `simfa gemm
/// --tune` finds for each shape: the default family with C staged for a
/// TMA store, as the libraries write it (one thread per shape; the shapes
/// run in parallel). `gemm-library`: the shapes of [`data::GEMM_DENSE`],
/// timed back to back as fast.cu times them; `gemm-shapes`: those of
/// [`data::GEMM_SHAPES`], kernel time alone as a profiler reports it.
fn gemm_library(
    name: &str,
    over: Overrides,
    progress: &(dyn Fn(usize, usize) + Sync),
) -> Result<Dataset, CalibError> {
    use crate::gen::gemm_space::Space;
    let cfg = preset("h100", over);
    let shapes = name == "gemm-shapes";
    let pts: Vec<_> = if shapes {
        data::gemm_shape_points()?
    } else {
        data::gemm_points()?
    }
    .into_iter()
    .filter(|p| p.gpu == "h100")
    .collect();
    let space = Space {
        tma_store: vec![true],
        ..Space::default()
    };
    let points = run_all(
        &pts,
        |p| {
            let [m, n, k] = p.shape;
            let spec = crate::gen::GemmSpec::new(m, n, k);
            let t = crate::gen::gemm_tune::tune(&cfg, &spec, &space, |q| q, 1, |_, _| {});
            let (_, r) = t.best_report(&cfg).map_err(|problem| {
                let e = crate::gen::GenError::BadParam {
                    param: "tune",
                    problem,
                };
                point_error(gemm_label(p), e.into())
            })?;
            let simulated = if shapes {
                r.tflops
            } else {
                r.back_to_back_tflops
            };
            Ok(point(gemm_label(p), p.tflops, simulated))
        },
        progress,
    )?;
    Ok(if shapes {
        dataset(
            name,
            data::GEMM_SHAPES.path,
            "h100",
            "TFLOP/s of the kernel alone (the best of simfa gemm --tune's family, TMA store)",
            "",
            points,
        )
    } else {
        dataset(
            name,
            data::GEMM_DENSE.path,
            "h100",
            "TFLOP/s (the best of simfa gemm --tune's family, TMA store)",
            "tensor_sustained_mhz",
            points,
        )
    })
}

/// The ablation's TFLOP/s and the variants' time ratios to the full kernel.
fn ablation(
    batch: Option<u32>,
    over: Overrides,
    progress: &(dyn Fn(usize, usize) + Sync),
) -> Result<(Dataset, Dataset), CalibError> {
    let cfg = preset("h100", over);
    let pts = data::fa3_h100_ablation_points()?;
    let sims = run_all(
        &pts,
        |p| {
            run_fa3(&cfg, &fa3_params(p, batch))
                .map(|r| r.back_to_back_tflops)
                .map_err(|e| point_error(fa3_label(p), e))
        },
        progress,
    )?;
    let points = pts
        .iter()
        .zip(&sims)
        .map(|(p, s)| point(fa3_label(&fa3_at(p, batch)), p.tflops, *s))
        .collect();
    let mut ratios = Vec::new();
    for (p, s) in pts.iter().zip(&sims).skip(1) {
        // time ratio = full TFLOP/s / variant TFLOP/s
        ratios.push(point(
            format!("{} / full", p.variant),
            pts[0].tflops / p.tflops,
            sims[0] / s,
        ));
    }
    let figure = match batch {
        Some(b) => format!("TFLOP/s (batch {b})"),
        None => "TFLOP/s".into(),
    };
    Ok((
        dataset(
            "fa3-h100-ablation",
            data::FA3_H100_ABLATION.path,
            "h100",
            &figure,
            "units.rf_share, on the full kernel",
            points,
        ),
        dataset(
            "fa3-h100-ratios",
            data::FA3_H100_ABLATION.path,
            "h100",
            "time over the full kernel's",
            "",
            ratios,
        ),
    ))
}

fn fa3_at(p: &data::Fa3Point, batch: Option<u32>) -> data::Fa3Point {
    data::Fa3Point {
        batch: batch.unwrap_or(p.batch),
        ..p.clone()
    }
}

fn fa3_h20(
    over: Overrides,
    progress: &(dyn Fn(usize, usize) + Sync),
) -> Result<Dataset, CalibError> {
    let cfg = preset("h20", over);
    let pts = data::fa3_h20_points()?;
    let points = run_all(
        &pts,
        |p| {
            let r =
                run_fa3(&cfg, &fa3_params(p, None)).map_err(|e| point_error(fa3_label(p), e))?;
            Ok(point(fa3_label(p), p.tflops, r.back_to_back_tflops))
        },
        progress,
    )?;
    Ok(dataset(
        "fa3-h20",
        data::FA3_H20.path,
        "h20",
        "TFLOP/s",
        "",
        points,
    ))
}

fn l2_bandwidth(
    over: Overrides,
    progress: &(dyn Fn(usize, usize) + Sync),
) -> Result<Dataset, CalibError> {
    let cfg_of = |name: &str| preset(name, over);
    let c = calibrate_l2_bw(&cfg_of, &L2BwOptions::default(), progress)?;
    let points = c
        .points
        .iter()
        .map(|x| point(x.label(), x.measured, x.simulated))
        .collect();
    Ok(dataset(
        "l2-bandwidth",
        data::L2_BANDWIDTH.path,
        "h100, h800-pcie, h200",
        "bytes per clock, every SM loading",
        // The presets' widths were not fitted on it (`calibrate l2-bw
        // --fit` would fit them on the rows marked `fit`).
        "",
        points,
    ))
}

/// The generator's closest kernel to a row of the fast.cu ladder, or why
/// there is none: cuBLAS is the library stand-in of `gemm-h100`; the
/// hand-written kernels keep their tiles, stages, consumers and persistent
/// grid (grouped by 16 row blocks, as their 16 x 8 blocks of tiles), their
/// WGMMA width and their clusters along M (B multicast to the pair; each
/// CTA loads half of it, where fast.cu's rank 0 loads all of it: the same
/// reads and landings), and store C from registers as they do.
fn variant_params(
    r: &data::GemmVariant,
    cfg: &GpuConfig,
) -> Result<crate::gen::GemmParams, &'static str> {
    if r.kernel == "cublas" {
        return Ok(crate::calibration::experiments::closest_gemm(
            cfg,
            [r.n, r.n, r.n],
        ));
    }
    let p = crate::gen::GemmParams {
        block_m: r.tile[0],
        block_n: r.tile[1],
        block_k: r.tile[2],
        stages: r.stages,
        consumers: r.consumers,
        persistent: r.persistent_ctas > 0,
        ctas: r.persistent_ctas.max(1),
        group_m: if r.persistent_ctas > 0 { 16 } else { 1 },
        epilogue: crate::gen::Epilogue::Registers,
        wgmma_n: r.wgmma_n,
        cluster_m: r.cluster_m.max(1),
        ..crate::gen::GemmParams::new(r.n, r.n, r.n)
    };
    p.validate()
        .map_err(|_| "does not fit the generator's kernel")?;
    Ok(p)
}

fn gemm_variants(
    over: Overrides,
    progress: &(dyn Fn(usize, usize) + Sync),
) -> Result<Dataset, CalibError> {
    let cfg = preset("h100", over);
    let rows = data::gemm_variant_points()?;
    // Each row with the generator's kernel for it, or why there is none.
    let (runnable, skipped): (Vec<_>, Vec<_>) = rows
        .iter()
        .map(|r| (r, variant_params(r, &cfg)))
        .partition(|(_, p)| p.is_ok());
    let sims = run_all(
        &runnable,
        |(r, p)| {
            let p = p.as_ref().expect("partitioned to the runnable rows");
            run_gemm_params(&cfg, p)
                .map(|rep| rep.back_to_back_tflops)
                .map_err(|e| point_error(r.label(), e))
        },
        progress,
    )?;
    let ran: Vec<(&data::GemmVariant, f64)> = runnable.iter().map(|(r, _)| *r).zip(sims).collect();
    let mut figure = String::from("TFLOP/s; order: ");
    let orders: Vec<String> = variant_orders(&ran)
        .into_iter()
        .map(|o| {
            let same = if o.measured == o.simulated {
                "same"
            } else {
                "differs"
            };
            format!(
                "N={} measured {}; simulated {} ({same})",
                o.n, o.measured, o.simulated
            )
        })
        .collect();
    figure.push_str(&orders.join("; "));
    if !skipped.is_empty() {
        let why: Vec<String> = skipped
            .iter()
            .filter_map(|(r, p)| p.as_ref().err().map(|e| format!("{} ({e})", r.label())))
            .collect();
        figure.push_str("; not simulated: ");
        figure.push_str(&why.join(", "));
    }
    let mut points: Vec<Point> = ran
        .iter()
        .map(|(r, s)| point(r.label(), r.tflops, *s))
        .collect();
    points.sort_by_key(|p| p.label.clone());
    Ok(dataset(
        "gemm-variants",
        data::GEMM_VARIANTS.path,
        "h100",
        &figure,
        "",
        points,
    ))
}

/// The measured and simulated order of the kernels at one size.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VariantOrder {
    /// M = N = K.
    pub n: u32,
    /// The kernels fastest first by measured TFLOP/s, `a > b > c`.
    pub measured: String,
    /// The same by simulated TFLOP/s.
    pub simulated: String,
}

/// The order of the variants at each size of `ran` (each row with its
/// simulated TFLOP/s), sizes ascending; ties keep the rows' order.
pub fn variant_orders(ran: &[(&data::GemmVariant, f64)]) -> Vec<VariantOrder> {
    let mut ns: Vec<u32> = ran.iter().map(|(r, _)| r.n).collect();
    ns.sort_unstable();
    ns.dedup();
    let rank = |n: u32, key: &dyn Fn(&(&data::GemmVariant, f64)) -> f64| {
        let mut at: Vec<&(&data::GemmVariant, f64)> = ran.iter().filter(|x| x.0.n == n).collect();
        at.sort_by(|a, b| key(b).total_cmp(&key(a)));
        at.iter()
            .map(|(r, _)| r.kernel.as_str())
            .collect::<Vec<_>>()
            .join(" > ")
    };
    ns.into_iter()
        .map(|n| VariantOrder {
            n,
            measured: rank(n, &|x| x.0.tflops),
            simulated: rank(n, &|x| x.1),
        })
        .collect()
}

/// Runs the datasets `opts` selects. `progress(dataset, done, total)`
/// reports the simulations of the dataset under way.
pub fn validate(
    opts: &ValidateOptions,
    progress: &(dyn Fn(&str, usize, usize) + Sync),
) -> Result<Validation, CalibError> {
    for o in &opts.only {
        if !DATASETS.contains(&o.as_str()) {
            return Err(CalibError::Parse {
                origin: "--only".into(),
                line: 1,
                problem: format!("unknown dataset `{o}` (one of {})", DATASETS.join(", ")),
            });
        }
    }
    let want = |n: &str| opts.only.is_empty() || opts.only.iter().any(|o| o == n);
    let mut out = Vec::new();
    for name in DATASETS {
        if !want(name) {
            continue;
        }
        let p = |d: usize, t: usize| progress(name, d, t);
        match name {
            "pchase" => {
                let cfg = preset("h800-pcie", opts.overrides());
                let rows = pchase_rows()?;
                let c = calibrate_pchase(&cfg, &rows, &PchaseOptions::default(), &p)?;
                let points = c
                    .points
                    .iter()
                    .map(|x| point(format!("{} kB", x.working_set_kb), x.measured, x.simulated))
                    .collect();
                out.push(dataset(
                    name,
                    data::POINTER_CHASE.path,
                    "h800-pcie",
                    "TMA cycles per hop",
                    "l2 latencies, associativity, proxy",
                    points,
                ));
            }
            "tma-bw" => {
                let cfg = preset("h800-pcie", opts.overrides());
                let o = TmaBwOptions {
                    total_bytes: opts.tma_total_bytes,
                    cells: None,
                };
                let c = calibrate_tma_bw(&cfg, &o, &p)?;
                let points = c
                    .cells
                    .iter()
                    .map(|x| {
                        point(
                            format!("{}, {} blocks/SM", x.copy, x.blocks_per_sm),
                            x.measured,
                            x.simulated,
                        )
                    })
                    .collect();
                out.push(dataset(
                    name,
                    data::TMA_THROUGHPUT.path,
                    "h800-pcie",
                    "GB/s",
                    "",
                    points,
                ));
            }
            "wgmma-latency" | "wgmma-tflops" => out.push(wgmma(name, opts.overrides(), &p)?),
            "clocks" => out.push(clocks()?),
            "gemm-h100" => out.push(gemm("h100", opts.overrides(), &p)?),
            "gemm-h20" => out.push(gemm("h20", opts.overrides(), &p)?),
            "fa3-h100-ablation" => {
                let (a, r) = ablation(opts.fa3_batch, opts.overrides(), &p)?;
                out.push(a);
                if want("fa3-h100-ratios") {
                    out.push(r);
                }
            }
            "fa3-h100-ratios" => {
                if !want("fa3-h100-ablation") {
                    out.push(ablation(opts.fa3_batch, opts.overrides(), &p)?.1);
                }
            }
            "l2-bandwidth" => out.push(l2_bandwidth(opts.overrides(), &p)?),
            "gemm-variants" => out.push(gemm_variants(opts.overrides(), &p)?),
            "gemm-library" | "gemm-shapes" => out.push(gemm_library(name, opts.overrides(), &p)?),
            _ => out.push(fa3_h20(opts.overrides(), &p)?),
        }
    }
    // Every preset has the same default model and policy.
    let memory_model = opts
        .memory
        .unwrap_or(GpuConfig::h800().memory)
        .name()
        .to_string();
    let arrival_controller = opts
        .arrival_controller
        .unwrap_or(GpuConfig::h800().transaction.arrival_controller)
        .name()
        .to_string();
    Ok(Validation {
        memory_model,
        arrival_controller,
        datasets: out,
    })
}

impl Validation {
    /// The result as pretty JSON.
    pub fn to_json_pretty(&self) -> String {
        serde_json::to_string_pretty(self).expect("a validation always serialises")
    }

    /// A table, one dataset per line, then every point of the small ones.
    pub fn to_text(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(
            s,
            "memory model: {} (arrival-order controller: {})",
            self.memory_model, self.arrival_controller
        );
        let _ = writeln!(
            s,
            "{:<18} {:<10} {:>6} {:>8}  {:<10} worst point",
            "dataset", "gpu", "points", "MAPE", "status"
        );
        for d in &self.datasets {
            let _ = writeln!(
                s,
                "{:<18} {:<10} {:>6} {:>7.1}%  {:<10} {:+.1}% ({})",
                d.name,
                d.gpu,
                d.points.len(),
                d.mape_percent,
                d.status,
                d.worst.error_percent,
                d.worst.label
            );
        }
        for d in self.datasets.iter().filter(|d| d.points.len() <= 12) {
            let _ = writeln!(s, "\n{} ({}, {}):", d.name, d.data, d.figure);
            for p in &d.points {
                let _ = writeln!(
                    s,
                    "    {:<44} measured {:>9.3}  simulated {:>9.3}  {:+6.1}%",
                    p.label, p.measured, p.simulated, p.error_percent
                );
            }
        }
        s
    }

    /// The per-dataset table of [`Validation::to_text`] as a Markdown
    /// table (one row per dataset, with what was fitted on the in-sample
    /// ones), after a sentence naming the memory model.
    pub fn to_markdown(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(
            s,
            "Memory model: {} (arrival-order controller: {}).\n",
            self.memory_model, self.arrival_controller
        );
        s.push_str("| dataset | GPU | points | MAPE | worst point | status |\n");
        s.push_str("|---|---|---:|---:|---|---|\n");
        for d in &self.datasets {
            let status = if d.fitted.is_empty() {
                d.status.clone()
            } else {
                format!("{}: {}", d.status, d.fitted)
            };
            let _ = writeln!(
                s,
                "| `{}` | {} | {} | {:.1}% | {:+.1}% ({}) | {} |",
                d.name,
                markdown_cell(&d.gpu),
                d.points.len(),
                d.mape_percent,
                d.worst.error_percent,
                markdown_cell(&d.worst.label),
                markdown_cell(&status)
            );
        }
        s
    }
}

/// `text` made safe for a Markdown table cell: pipes escaped, line
/// breaks turned into spaces.
pub fn markdown_cell(text: &str) -> String {
    text.replace('|', "\\|").replace(['\n', '\r'], " ")
}

#[cfg(test)]
#[path = "validate_tests.rs"]
mod tests;
