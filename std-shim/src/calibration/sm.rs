//! `simfa calibrate sm`: fits every parameter of the SM compute model from
//! the data files, deterministically, and reports each fit with its inputs,
//! outputs, residuals and leave-one-out errors.
//!
//! The parameters and what they are fitted on:
//!
//! | parameter | GPU | data |
//! |---|---|---|
//! | `tensor_sustained_mhz` | h800, h200 | [`crate::calibration::data::CLOCKS`]: the clock observed at a throughput; closed form |
//! | `tensor_sustained_mhz` | h800-pcie | [`crate::calibration::data::WGMMA`]: the WGMMA throughputs |
//! | `tensor_sustained_mhz` | h100, h20 | [`crate::calibration::data::GEMM_DENSE`]: dense GEMM throughputs |
//! | `units.rf_share` (every Hopper GPU) | h100 | the full kernel of [`crate::calibration::data::FA3_H100_ABLATION`] |
//!
//! A power-limit fit needs one simulation per point: the power limit only
//! scales time, so the simulated cycles do not depend on it, and every
//! integer clock is then tried exactly. `rf_share` changes the cycles; it
//! is searched over multiples of 1/32 (a ternary search, each candidate
//! simulated once), after the H100's power limit is fitted, on the full
//! kernel alone: the ablation's two variants test the pipeline mechanisms
//! (calibration.md: "the ratios between these three are a test of the
//! pipeline mechanisms, not of any one constant") and are reported as
//! held-out checks. Every loss is the sum of squared log errors of the
//! throughputs. Nothing else is
//! fitted: the unit throughputs, the issue rate and the WGMMA law are
//! architectural figures (calibration.md §3 and §7).

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde::Serialize;
use simfa_core::{GpuConfig, Ratio, WgmmaMode};

use crate::calibration::data::{self, Fa3Point};
use crate::calibration::error::CalibError;
use crate::calibration::experiments::{
    fa3_label, fa3_params, gemm_label, point_error, run_all, run_fa3, run_gemm,
};
use crate::calibration::stats::{error_percent, mape};
use crate::gen::wgmma_bench::wgmma_figures;

/// Denominator of the `rf_share` search grid.
pub const RF_SHARE_STEPS: u32 = 32;

/// Options of an SM calibration.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SmOptions {
    /// Batch of the FA3 ablation runs of the `rf_share` fit (the measured
    /// shape's batch is 4; each CTA's pipeline is the same at batch 1,
    /// which simulates four times faster). `None`: the measured batch.
    pub fa3_batch: Option<u32>,
    /// Skip the GEMM and WGMMA power-limit fits (use the presets' values).
    pub skip_clocks: bool,
    /// Skip the `units.rf_share` fit (its FA3 runs take most of the time).
    pub skip_rf_share: bool,
}

impl Default for SmOptions {
    fn default() -> Self {
        SmOptions {
            fa3_batch: Some(1),
            skip_clocks: false,
            skip_rf_share: false,
        }
    }
}

/// One point of a fit: measured against simulated with the fitted value,
/// and the error when the point is left out of the fit.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct FitPoint {
    /// The point.
    pub label: String,
    /// Measured figure.
    pub measured: f64,
    /// Simulated with the fitted value.
    pub simulated: f64,
    /// Signed error, percent.
    pub error_percent: f64,
    /// Signed error of the value fitted without this point, percent
    /// (`None` for a fit of one point).
    pub loo_error_percent: Option<f64>,
}

/// One fitted parameter.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Fit {
    /// The preset it sets.
    pub gpu: String,
    /// The configuration key, e.g. `tensor_sustained_mhz`.
    pub parameter: String,
    /// The fitted value as the configuration writes it.
    pub value: String,
    /// The data file.
    pub data: String,
    /// What is compared (e.g. `TFLOP/s`).
    pub figure: String,
    /// The points.
    pub points: Vec<FitPoint>,
    /// MAPE over the points, percent.
    pub mape_percent: f64,
    /// MAPE of the leave-one-out errors, percent (`None` for one point).
    pub loo_mape_percent: Option<f64>,
}

/// The result of `simfa calibrate sm`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SmCalibration {
    /// Every fit, in the order they ran.
    pub fits: Vec<Fit>,
    /// `tensor_sustained_mhz` per preset (0: the limit never binds).
    pub sustained_mhz: BTreeMap<String, u32>,
    /// `units.rf_share` of every Hopper preset, `num/den`.
    pub rf_share: String,
}

fn loss(pairs: impl Iterator<Item = (f64, f64)>) -> f64 {
    pairs
        .map(|(m, s)| {
            let l = (s.max(1e-300) / m).ln();
            l * l
        })
        .sum()
}

/// What one GEMM-like run gives a power-limit fit: the tensor math, the
/// useful FLOPs and the cycles; its throughput at any limit follows.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PowerSample {
    /// FLOPs of the WGMMAs issued.
    pub wgmma_flops: u64,
    /// FLOPs the measured figure counts.
    pub useful_flops: u64,
    /// Simulated cycles.
    pub cycles: u64,
    /// Microseconds the measurement adds to each run: the launch gap of
    /// host-timed back-to-back launches, 0 for figures timed in the kernel.
    pub gap_us: f64,
    /// Measured TFLOP/s.
    pub measured: f64,
}

/// TFLOP/s of `s` on `cfg` with `tensor_sustained_mhz = mhz`.
pub fn tflops_at(cfg: &GpuConfig, mhz: u32, s: &PowerSample) -> f64 {
    let mut c = cfg.clone();
    c.tensor_sustained_mhz = mhz;
    let f = simfa_core::power::sustained_clock_mhz(&c, s.wgmma_flops, s.cycles);
    crate::reporting::report::back_to_back(
        s.useful_flops,
        s.cycles.max(1) as f64 / f.max(1) as f64,
        s.gap_us,
    )
}

/// The `tensor_sustained_mhz` of `cfg` that best fits `samples` (sum of
/// squared log errors; every integer MHz up to the clock is tried, and 0,
/// no limit, wins ties).
pub fn fit_sustained(cfg: &GpuConfig, samples: &[PowerSample]) -> u32 {
    let mut best = (f64::INFINITY, 0u32);
    for mhz in std::iter::once(0).chain(1..=cfg.clock_mhz) {
        let l = loss(samples.iter().map(|s| (s.measured, tflops_at(cfg, mhz, s))));
        if l < best.0 {
            best = (l, mhz);
        }
    }
    best.1
}

fn power_fit(
    cfg: &GpuConfig,
    data: &str,
    labels: &[String],
    samples: &[PowerSample],
) -> (u32, Fit) {
    let mhz = fit_sustained(cfg, samples);
    let mut points = Vec::new();
    for (i, (l, s)) in labels.iter().zip(samples).enumerate() {
        let sim = tflops_at(cfg, mhz, s);
        let loo = (samples.len() > 1).then(|| {
            let rest: Vec<PowerSample> = samples
                .iter()
                .enumerate()
                .filter(|(j, _)| *j != i)
                .map(|(_, s)| *s)
                .collect();
            error_percent(s.measured, tflops_at(cfg, fit_sustained(cfg, &rest), s))
        });
        points.push(FitPoint {
            label: l.clone(),
            measured: s.measured,
            simulated: sim,
            error_percent: error_percent(s.measured, sim),
            loo_error_percent: loo,
        });
    }
    (
        mhz,
        finish(
            cfg,
            "tensor_sustained_mhz",
            &mhz.to_string(),
            data,
            "TFLOP/s",
            points,
        ),
    )
}

fn finish(
    cfg: &GpuConfig,
    parameter: &str,
    value: &str,
    data: &str,
    figure: &str,
    points: Vec<FitPoint>,
) -> Fit {
    let errs: Vec<f64> = points.iter().map(|p| p.error_percent).collect();
    let loos: Option<Vec<f64>> = points.iter().map(|p| p.loo_error_percent).collect();
    Fit {
        gpu: cfg.name.to_string(),
        parameter: parameter.into(),
        value: value.into(),
        data: data.into(),
        figure: figure.into(),
        mape_percent: mape(&errs).unwrap_or(0.0),
        loo_mape_percent: loos.and_then(|l| mape(&l)),
        points,
    }
}

fn preset(name: &str) -> GpuConfig {
    GpuConfig::preset(name).unwrap_or_else(GpuConfig::h800)
}

/// The clocks of [`data::CLOCKS`]: `f_obs * u^(1/3)` with `u` the
/// observed throughput over the peak at the observed clock.
fn clock_fits() -> Result<Vec<(String, u32, Fit)>, CalibError> {
    let mut out = Vec::new();
    for p in data::clock_points()? {
        let cfg = preset(&p.gpu);
        let peak = cfg.sms as f64 * 2048.0 * cfg.wgmma_cycles_per_n.den as f64
            / cfg.wgmma_cycles_per_n.num as f64
            * p.clock_mhz
            / 1e6;
        let u = (p.tflops / peak).min(1.0);
        let mhz = (p.clock_mhz * u.cbrt()).round() as u32;
        let mut c = cfg.clone();
        c.tensor_sustained_mhz = mhz;
        // The clock the law gives back at that activity.
        let back = mhz as f64 / u.cbrt();
        let pt = FitPoint {
            label: format!("{} at {:.0} TFLOP/s ({})", p.gpu, p.tflops, p.source),
            measured: p.clock_mhz,
            simulated: back,
            error_percent: error_percent(p.clock_mhz, back),
            loo_error_percent: None,
        };
        let fit = finish(
            &c,
            "tensor_sustained_mhz",
            &mhz.to_string(),
            data::CLOCKS.path,
            "clock MHz",
            vec![pt],
        );
        out.push((p.gpu, mhz, fit));
    }
    Ok(out)
}

/// The WGMMA throughputs on the H800 PCIe.
fn wgmma_fit(progress: &(dyn Fn(usize, usize) + Sync)) -> Result<(u32, Fit), CalibError> {
    let mut cfg = GpuConfig::h800_pcie();
    cfg.tensor_sustained_mhz = 0;
    let pts = data::wgmma_points()?;
    let jobs: Vec<(u16, WgmmaMode, f64)> = pts
        .iter()
        .flat_map(|p| {
            [
                (p.n, WgmmaMode::Ss, p.tflops[0]),
                (p.n, WgmmaMode::Rs, p.tflops[1]),
            ]
        })
        .collect();
    let runs = run_all(
        &jobs,
        |&(n, mode, measured)| {
            let f = wgmma_figures(&cfg, n, mode)
                .map_err(|e| point_error(format!("wgmma N={n} {}", mode.name()), e))?;
            Ok(PowerSample {
                wgmma_flops: f.flops,
                useful_flops: f.flops,
                cycles: f.cycles,
                gap_us: 0.0,
                measured,
            })
        },
        progress,
    )?;
    let labels: Vec<String> = jobs
        .iter()
        .map(|(n, m, _)| format!("m64n{n}k16 {}", m.name()))
        .collect();
    Ok(power_fit(&cfg, data::WGMMA.path, &labels, &runs))
}

/// The dense GEMMs of one GPU.
fn gemm_fit(gpu: &str, progress: &(dyn Fn(usize, usize) + Sync)) -> Result<(u32, Fit), CalibError> {
    let mut cfg = preset(gpu);
    cfg.tensor_sustained_mhz = 0;
    let pts: Vec<_> = data::gemm_points()?
        .into_iter()
        .filter(|p| p.gpu == gpu)
        .collect();
    let runs = run_all(
        &pts,
        |p| {
            let r = run_gemm(&cfg, p.shape).map_err(|e| point_error(gemm_label(p), e))?;
            Ok(PowerSample {
                wgmma_flops: r.wgmma_flops,
                useful_flops: r.flops,
                cycles: r.cycles,
                gap_us: r.launch_gap_us,
                measured: p.tflops,
            })
        },
        progress,
    )?;
    let labels: Vec<String> = pts.iter().map(gemm_label).collect();
    Ok(power_fit(&cfg, data::GEMM_DENSE.path, &labels, &runs))
}

/// Simulated TFLOP/s of the ablation points with `rf_share = k / 32`.
fn ablation_at(
    cfg: &GpuConfig,
    k: u32,
    pts: &[Fa3Point],
    batch: Option<u32>,
    progress: &(dyn Fn(usize, usize) + Sync),
) -> Result<Vec<f64>, CalibError> {
    let mut c = cfg.clone();
    c.units.rf_share = Ratio::new(k, RF_SHARE_STEPS);
    run_all(
        pts,
        |p| {
            run_fa3(&c, &fa3_params(p, batch))
                .map(|r| r.back_to_back_tflops)
                .map_err(|e| point_error(fa3_label(p), e))
        },
        progress,
    )
}

/// The `rf_share` fit on the H100 ablation.
fn rf_share_fit(
    h100: &GpuConfig,
    opts: &SmOptions,
    progress: &(dyn Fn(usize, usize) + Sync),
) -> Result<(u32, Fit), CalibError> {
    let pts = data::fa3_h100_ablation_points()?;
    let full = pts
        .iter()
        .position(|p| p.variant == "full")
        .ok_or_else(|| CalibError::Empty {
            origin: format!("{} (no full kernel)", data::FA3_H100_ABLATION.path),
        })?;
    let mut memo: BTreeMap<u32, Vec<f64>> = BTreeMap::new();
    let eval = |k: u32, memo: &mut BTreeMap<u32, Vec<f64>>| -> Result<f64, CalibError> {
        if let std::collections::btree_map::Entry::Vacant(e) = memo.entry(k) {
            e.insert(ablation_at(h100, k, &pts, opts.fa3_batch, progress)?);
        }
        Ok(loss(std::iter::once((pts[full].tflops, memo[&k][full]))))
    };
    // Ternary search over the integers 0..=32: more sharing slows the
    // kernel monotonically, so the loss has one minimum.
    let (mut lo, mut hi) = (0u32, RF_SHARE_STEPS);
    while hi - lo > 2 {
        let m1 = lo + (hi - lo) / 3;
        let m2 = hi - (hi - lo) / 3;
        if eval(m1, &mut memo)? <= eval(m2, &mut memo)? {
            hi = m2;
        } else {
            lo = m1;
        }
    }
    let mut best = (f64::INFINITY, lo);
    for k in lo..=hi {
        let l = eval(k, &mut memo)?;
        if l < best.0 {
            best = (l, k);
        }
    }
    let k = best.1;
    // The fitted point, then the variants as held-out checks of the
    // mechanisms: their time ratios to the full kernel.
    let sims = &memo[&k];
    let mut points = vec![FitPoint {
        label: fa3_label(&pts[full]),
        measured: pts[full].tflops,
        simulated: sims[full],
        error_percent: error_percent(pts[full].tflops, sims[full]),
        loo_error_percent: None,
    }];
    for (i, p) in pts.iter().enumerate().filter(|(i, _)| *i != full) {
        let measured = pts[full].tflops / p.tflops;
        let simulated = sims[full] / sims[i];
        points.push(FitPoint {
            label: format!("{} / full time (held out)", p.variant),
            measured,
            simulated,
            error_percent: error_percent(measured, simulated),
            loo_error_percent: None,
        });
    }
    let value = format!("{k}/{RF_SHARE_STEPS}");
    let mut fit = finish(
        h100,
        "units.rf_share",
        &value,
        data::FA3_H100_ABLATION.path,
        "TFLOP/s of the full kernel; time ratios of the variants",
        points,
    );
    if let Some(b) = opts.fa3_batch {
        let _ = write!(fit.figure, " (batch {b})");
    }
    Ok((k, fit))
}

/// Runs every fit (see the module docs). `progress(done, total)` reports
/// the simulations of the fit under way.
pub fn calibrate_sm(
    opts: &SmOptions,
    progress: &(dyn Fn(usize, usize) + Sync),
) -> Result<SmCalibration, CalibError> {
    let mut fits = Vec::new();
    let mut sustained = BTreeMap::new();
    let mut h100 = GpuConfig::h100();
    if !opts.skip_clocks {
        for (gpu, mhz, fit) in clock_fits()? {
            sustained.insert(gpu, mhz);
            fits.push(fit);
        }
        let (mhz, fit) = wgmma_fit(progress)?;
        sustained.insert("h800-pcie".into(), mhz);
        fits.push(fit);
        for gpu in ["h100", "h20"] {
            let (mhz, fit) = gemm_fit(gpu, progress)?;
            sustained.insert(gpu.into(), mhz);
            fits.push(fit);
        }
        h100.tensor_sustained_mhz = sustained["h100"];
    }
    let rf_share = if opts.skip_rf_share {
        let r = h100.units.rf_share;
        format!("{}/{}", r.num, r.den)
    } else {
        let (k, fit) = rf_share_fit(&h100, opts, progress)?;
        fits.push(fit);
        format!("{k}/{RF_SHARE_STEPS}")
    };
    Ok(SmCalibration {
        fits,
        sustained_mhz: sustained,
        rf_share,
    })
}

impl SmCalibration {
    /// The result as pretty JSON.
    pub fn to_json_pretty(&self) -> String {
        serde_json::to_string_pretty(self).expect("a calibration always serialises")
    }

    /// The fits as text: each parameter with its points, errors and
    /// leave-one-out errors, then the values for the presets.
    pub fn to_text(&self) -> String {
        let mut s = String::new();
        for f in &self.fits {
            let _ = writeln!(
                s,
                "{} {} = {}   ({}, {}; MAPE {:.1}%{})",
                f.gpu,
                f.parameter,
                f.value,
                f.data,
                f.figure,
                f.mape_percent,
                f.loo_mape_percent
                    .map_or(String::new(), |l| format!(", leave-one-out {l:.1}%"))
            );
            for p in &f.points {
                let _ = writeln!(
                    s,
                    "    {:<48} measured {:>8.1}  simulated {:>8.1}  {:+6.1}%{}",
                    p.label,
                    p.measured,
                    p.simulated,
                    p.error_percent,
                    p.loo_error_percent
                        .map_or(String::new(), |l| format!("  (left out {l:+.1}%)"))
                );
            }
        }
        let _ = writeln!(s, "\npresets:");
        for (g, m) in &self.sustained_mhz {
            let _ = writeln!(s, "    {g}: tensor_sustained_mhz = {m}");
        }
        let _ = writeln!(
            s,
            "    every Hopper GPU: units.rf_share = {}",
            self.rf_share
        );
        s
    }

    /// The presets whose values differ from this fit, as `(preset, key,
    /// preset value, fitted value)`.
    pub fn differences(&self) -> Vec<(String, String, String, String)> {
        let mut out = Vec::new();
        for (g, m) in &self.sustained_mhz {
            let p = preset(g);
            if p.tensor_sustained_mhz != *m {
                out.push((
                    g.clone(),
                    "tensor_sustained_mhz".into(),
                    p.tensor_sustained_mhz.to_string(),
                    m.to_string(),
                ));
            }
        }
        let fitted: Option<(u64, u64)> = self
            .rf_share
            .split_once('/')
            .and_then(|(n, d)| Some((n.parse().ok()?, d.parse().ok()?)));
        for name in simfa_core::PRESETS {
            let r = preset(name).units.rf_share;
            let same = fitted.is_some_and(|(n, d)| n * r.den as u64 == d * r.num as u64);
            if !same {
                let v = format!("{}/{}", r.num, r.den);
                out.push((
                    name.into(),
                    "units.rf_share".into(),
                    v,
                    self.rf_share.clone(),
                ));
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(cfg: &GpuConfig, util: f64, mhz: u32, cycles: u64) -> PowerSample {
        // A run at tensor utilisation `util` measured at the clock a limit
        // of `mhz` gives it.
        let peak = cfg.sms as u64 * 4096;
        let wgmma_flops = (peak as f64 * cycles as f64 * util) as u64;
        let s = PowerSample {
            wgmma_flops,
            useful_flops: wgmma_flops,
            cycles,
            gap_us: 2.2,
            measured: 0.0,
        };
        PowerSample {
            measured: tflops_at(cfg, mhz, &s),
            ..s
        }
    }

    #[test]
    fn the_power_fit_recovers_a_known_limit() {
        let cfg = GpuConfig::h100();
        let samples: Vec<PowerSample> = [0.95, 0.9, 0.8, 0.7]
            .iter()
            .map(|&u| sample(&cfg, u, 1500, 1_000_000))
            .collect();
        assert_eq!(fit_sustained(&cfg, &samples), 1500);
        let labels: Vec<String> = (0..4).map(|i| format!("p{i}")).collect();
        let (mhz, fit) = power_fit(&cfg, "x.csv", &labels, &samples);
        assert_eq!(mhz, 1500);
        assert!(fit.mape_percent < 0.1, "{}", fit.mape_percent);
        assert!(fit
            .points
            .iter()
            .all(|p| p.loo_error_percent.unwrap().abs() < 0.1));
        // Data that never throttles fits "no limit".
        let free: Vec<PowerSample> = [0.9, 0.5]
            .iter()
            .map(|&u| sample(&cfg, u, 0, 1000))
            .collect();
        assert_eq!(fit_sustained(&cfg, &free), 0);
    }

    #[test]
    fn the_clock_fits_invert_the_law() {
        let fits = clock_fits().unwrap();
        let h800 = fits.iter().find(|f| f.0 == "h800").unwrap();
        // 865 TFLOP/s at 1600 MHz is all of the peak there: 1600 MHz.
        assert!((1590..=1600).contains(&h800.1), "{}", h800.1);
        let h200 = fits.iter().find(|f| f.0 == "h200").unwrap();
        assert!(h200.1 < 1465, "{}", h200.1);
        assert!(h200.2.points[0].error_percent.abs() < 0.1);
    }
}
