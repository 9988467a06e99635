//! `simfa calibrate l2-bw`: the L2's bandwidth with every SM loading,
//! simulated with `simfa gen l2-bw` and compared with the published
//! measurements of `data/l2_bandwidth.csv`.
//!
//! # The measurement
//!
//! Every SM streams a working set of the row's size with 16 KiB bulk
//! copies, [`L2_BLOCKS_PER_SM`] CTAs per SM each with one copy in flight
//! (the public benchmarks likewise keep every SM loading from a working
//! set the L2 holds). The first pass over the working set misses to the
//! HBM; to leave it out, the kernel runs twice, moving `T` and `2T` bytes
//! (`T` at least four passes over the working set), and the bandwidth is
//! the extra bytes over the extra cycles: the steady state, in bytes per
//! SM cycle. The data give bytes per clock at the clock each row names
//! (the source's or the board's nominal boost), the simulation bytes per
//! cycle of the preset's `clock_mhz`: the two are compared in bytes per
//! second, the measured figure taken to the preset's clock
//! ([`L2BwRow::at_clock`]).
//!
//! # The fit
//!
//! With `--fit`, every pair of widths of the grid ([`L2BwOptions`]) is
//! tried on the rows marked `fit` (`l2.slice_bytes_per_cycle` for a
//! slice's own partition, `l2.far_bytes_per_cycle` across partitions, the
//! same on every preset: the slices are the same silicon), and the pair
//! with the lowest MAPE on them is reported with the configuration lines
//! that set it. The rows marked `check` are never fitted on; the report
//! gives the two MAPEs apart. The SMs' port (`tma.line_interval`) is not
//! fitted: with every SM loading, its share of the L2 binds first, so the
//! table cannot tell its width.

use std::fmt::Write as _;
use std::sync::atomic::{AtomicUsize, Ordering};

use rayon::prelude::*;
use serde::Serialize;
use simfa_core::{GpuConfig, Ratio};

use crate::calibration::error::CalibError;
use crate::calibration::stats::{error_percent, mape, ProgressFn};
use crate::gen::tmabw::L2_BLOCKS_PER_SM;
use crate::gen::{tma_bw, BenchError, CopyKind, TmaBwParams};

/// Bytes per bulk copy of the benchmark.
pub const COPY_BYTES: u32 = 16 << 10;

/// One row of the L2 bandwidth table.
#[derive(Clone, Debug, PartialEq)]
pub struct L2BwRow {
    /// The preset of the GPU measured.
    pub gpu: String,
    /// What was measured (benchmark and source).
    pub benchmark: String,
    /// Bytes of the working set.
    pub working_set: u64,
    /// Measured bytes per SM clock, every SM loading.
    pub bytes_per_clk: f64,
    /// The clock `bytes_per_clk` counts, MHz.
    pub clock_mhz: f64,
    /// Whether `--fit` may fit on it.
    pub fit: bool,
}

/// The L2 bandwidth table ([`crate::calibration::data::L2_BANDWIDTH`]).
pub fn l2_bw_rows() -> Result<Vec<L2BwRow>, CalibError> {
    let cols = [
        "gpu",
        "benchmark",
        "working_set_kib",
        "bytes_per_clk",
        "clock_mhz",
        "use",
    ];
    let t = crate::calibration::data::Table::of(crate::calibration::data::L2_BANDWIDTH, &cols)?;
    t.rows()
        .map(|r| {
            let gpu = r.one_of("gpu", &simfa_core::PRESETS)?.to_string();
            let kib = r.count("working_set_kib", 1 << 30)?;
            if kib == 0 || (kib << 10) % COPY_BYTES as u64 != 0 {
                return Err(CalibError::Parse {
                    origin: crate::calibration::data::L2_BANDWIDTH.path.into(),
                    line: r.line,
                    problem: format!(
                        "working_set_kib {kib} is not a non-zero multiple of {}",
                        COPY_BYTES >> 10
                    ),
                });
            }
            Ok(L2BwRow {
                clock_mhz: r.positive("clock_mhz")?,
                gpu,
                benchmark: r.text("benchmark").to_string(),
                working_set: kib << 10,
                bytes_per_clk: r.positive("bytes_per_clk")?,
                fit: r.one_of("use", &["fit", "check"])? == "fit",
            })
        })
        .collect()
}

impl L2BwRow {
    /// The measured bandwidth in bytes per cycle of a `clock_mhz` clock:
    /// the same bytes per second.
    pub fn at_clock(&self, clock_mhz: u32) -> f64 {
        self.bytes_per_clk * self.clock_mhz / clock_mhz.max(1) as f64
    }
}

/// Options of an L2 bandwidth calibration.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct L2BwOptions {
    /// Bytes the shorter of a point's two runs moves at least (it also
    /// moves at least four passes over the working set).
    pub min_total: u64,
    /// Search the widths on the `fit` rows.
    pub fit: bool,
    /// The slice widths `--fit` tries, bytes per cycle.
    pub slice_widths: Vec<u32>,
    /// The cross-partition widths `--fit` tries, bytes per cycle (those
    /// above a slice width are skipped with it).
    pub far_widths: Vec<u32>,
}

impl Default for L2BwOptions {
    /// 128 MiB, no fit; a grid of 48..=64 by 4 and 8..=64 by 8.
    fn default() -> Self {
        L2BwOptions {
            min_total: 128 << 20,
            fit: false,
            slice_widths: (48..=64).step_by(4).collect(),
            far_widths: (8..=64).step_by(8).collect(),
        }
    }
}

impl L2BwOptions {
    /// For tests and smoke runs: 16 MiB runs.
    pub fn quick() -> Self {
        L2BwOptions {
            min_total: 16 << 20,
            ..L2BwOptions::default()
        }
    }
}

/// A steady-state measurement of the benchmark.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct L2Measure {
    /// Bytes per SM cycle.
    pub bytes_per_clk: f64,
    /// Share of the steady state's bytes read from the HBM.
    pub dram_share: f64,
}

/// Simulates the benchmark on a `working_set` of bytes on `cfg`: the
/// steady state between a run of `T` and one of `2T` bytes.
pub fn l2_bandwidth(
    cfg: &GpuConfig,
    working_set: u64,
    min_total: u64,
) -> Result<L2Measure, BenchError> {
    let t = min_total.max(4 * working_set);
    let run = |total: u64| {
        let p = TmaBwParams {
            total_bytes: total,
            working_set: Some(working_set),
            ..TmaBwParams::new(CopyKind::Bulk { bytes: COPY_BYTES }, L2_BLOCKS_PER_SM, cfg)
        };
        let out = crate::run::simulate(cfg, &tma_bw(&p)?, &mut ())?;
        let s = &out.summary;
        let dram = s.memory.map_or(0, |m| m.dram_read_bytes);
        Ok::<_, BenchError>((s.cycles, s.stats.bytes_loaded, dram))
    };
    let (c1, b1, d1) = run(t)?;
    let (c2, b2, d2) = run(2 * t)?;
    if c2 <= c1 || b2 <= b1 {
        return Err(BenchError::NoMeasurement(
            "the longer run took no more cycles than the shorter",
        ));
    }
    let bytes = (b2 - b1) as f64;
    Ok(L2Measure {
        bytes_per_clk: bytes / (c2 - c1) as f64,
        dram_share: d2.saturating_sub(d1) as f64 / bytes,
    })
}

/// One row, measured against simulated.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct L2BwPoint {
    /// The preset.
    pub gpu: String,
    /// What was measured.
    pub benchmark: String,
    /// Working set, KiB.
    pub working_set_kib: u64,
    /// `fit` or `check`.
    pub role: &'static str,
    /// Measured bytes per cycle of the preset's clock (the row's bytes
    /// per second).
    pub measured: f64,
    /// Simulated bytes per cycle.
    pub simulated: f64,
    /// Signed error, percent.
    pub error_percent: f64,
    /// Share of the simulated steady state read from the HBM.
    pub dram_share: f64,
}

impl L2BwPoint {
    /// `h100 40960 KiB: ld.global.cg.v4 80% of L2 (mt4g)`.
    pub fn label(&self) -> String {
        format!(
            "{} {} KiB [{}]: {}",
            self.gpu, self.working_set_kib, self.role, self.benchmark
        )
    }
}

/// One pair of widths tried by `--fit`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct L2BwCandidate {
    /// Slice width, bytes per cycle.
    pub slice_bytes_per_cycle: u32,
    /// Cross-partition width, bytes per cycle.
    pub far_bytes_per_cycle: u32,
    /// MAPE on the `fit` rows.
    pub mape_fit_percent: f64,
}

/// The result of `simfa calibrate l2-bw`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct L2BwCalibration {
    /// The slice width the points ran with, `num/den` bytes per cycle.
    pub slice_bytes_per_cycle: String,
    /// The cross-partition width the points ran with.
    pub far_bytes_per_cycle: String,
    /// MAPE over the `fit` rows.
    pub mape_fit_percent: f64,
    /// MAPE over the `check` rows (held out).
    pub mape_check_percent: f64,
    /// Every row.
    pub points: Vec<L2BwPoint>,
    /// With `--fit`, every pair tried, best first.
    pub candidates: Vec<L2BwCandidate>,
}

/// The widths `(slice, far)` a configuration has, as text.
fn ratio_text(r: Ratio) -> String {
    if r.den == 1 {
        r.num.to_string()
    } else {
        format!("{}/{}", r.num, r.den)
    }
}

/// Runs `rows` with the configurations `cfg_of` gives per preset.
fn evaluate(
    rows: &[L2BwRow],
    cfg_of: &(dyn Fn(&str) -> GpuConfig + Sync),
    min_total: u64,
    progress: &(dyn Fn() + Sync),
) -> Result<Vec<L2BwPoint>, CalibError> {
    let results: Vec<Result<(L2Measure, f64), BenchError>> = rows
        .par_iter()
        .with_max_len(1)
        .map(|r| {
            let cfg = cfg_of(&r.gpu);
            let m = l2_bandwidth(&cfg, r.working_set, min_total);
            progress();
            m.map(|m| (m, r.at_clock(cfg.clock_mhz)))
        })
        .collect();
    rows.iter()
        .zip(results)
        .map(|(r, m)| {
            let (m, measured) = m.map_err(|source| CalibError::Run {
                what: format!("{} {} KiB", r.gpu, r.working_set >> 10),
                source,
            })?;
            Ok(L2BwPoint {
                gpu: r.gpu.clone(),
                benchmark: r.benchmark.clone(),
                working_set_kib: r.working_set >> 10,
                role: if r.fit { "fit" } else { "check" },
                measured,
                simulated: m.bytes_per_clk,
                error_percent: error_percent(measured, m.bytes_per_clk),
                dram_share: m.dram_share,
            })
        })
        .collect()
}

fn mape_of(points: &[L2BwPoint], role: &str) -> f64 {
    let e: Vec<f64> = points
        .iter()
        .filter(|p| p.role == role)
        .map(|p| p.error_percent)
        .collect();
    mape(&e).unwrap_or(0.0)
}

/// `cfg` with both widths set.
pub fn with_widths(mut cfg: GpuConfig, slice: Ratio, far: Ratio) -> GpuConfig {
    cfg.l2.slice_bytes_per_cycle = slice;
    cfg.l2.far_bytes_per_cycle = far;
    cfg
}

/// Compares every row of the table with the simulation on the
/// configurations `cfg_of` gives per preset; with `opts.fit`, first
/// searches the widths on the `fit` rows and reports the rows at the best
/// pair.
pub fn calibrate_l2_bw(
    cfg_of: &(dyn Fn(&str) -> GpuConfig + Sync),
    opts: &L2BwOptions,
    progress: ProgressFn<'_>,
) -> Result<L2BwCalibration, CalibError> {
    let rows = l2_bw_rows()?;
    if rows.is_empty() {
        return Err(CalibError::Empty {
            origin: crate::calibration::data::L2_BANDWIDTH.path.into(),
        });
    }
    let fit_rows: Vec<L2BwRow> = rows.iter().filter(|r| r.fit).cloned().collect();
    let pairs: Vec<(u32, u32)> = if opts.fit {
        opts.slice_widths
            .iter()
            .flat_map(|&s| {
                opts.far_widths
                    .iter()
                    .filter(move |&&f| f <= s)
                    .map(move |&f| (s, f))
            })
            .collect()
    } else {
        Vec::new()
    };
    let total = pairs.len() * fit_rows.len() + rows.len();
    let done = AtomicUsize::new(0);
    let tick = || progress(done.fetch_add(1, Ordering::Relaxed) + 1, total);
    let mut candidates = Vec::with_capacity(pairs.len());
    for &(s, f) in &pairs {
        let of = |g: &str| with_widths(cfg_of(g), Ratio::new(s, 1), Ratio::new(f, 1));
        let pts = evaluate(&fit_rows, &of, opts.min_total, &tick)?;
        candidates.push(L2BwCandidate {
            slice_bytes_per_cycle: s,
            far_bytes_per_cycle: f,
            mape_fit_percent: mape_of(&pts, "fit"),
        });
    }
    // Best first; ties keep the grid's order (narrower widths first).
    candidates.sort_by(|a, b| a.mape_fit_percent.total_cmp(&b.mape_fit_percent));
    let best = candidates
        .first()
        .map(|c| (c.slice_bytes_per_cycle, c.far_bytes_per_cycle));
    let of = |g: &str| match best {
        Some((s, f)) => with_widths(cfg_of(g), Ratio::new(s, 1), Ratio::new(f, 1)),
        None => cfg_of(g),
    };
    let points = evaluate(&rows, &of, opts.min_total, &tick)?;
    let l2 = of(&rows[0].gpu).l2;
    Ok(L2BwCalibration {
        slice_bytes_per_cycle: ratio_text(l2.slice_bytes_per_cycle),
        far_bytes_per_cycle: ratio_text(l2.far_bytes_per_cycle),
        mape_fit_percent: mape_of(&points, "fit"),
        mape_check_percent: mape_of(&points, "check"),
        points,
        candidates,
    })
}

impl L2BwCalibration {
    /// The serialised result.
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::to_value(self).expect("a calibration always serialises")
    }

    /// A table of every row, the two MAPEs and, after a fit, the best
    /// pairs and the configuration lines that set them.
    pub fn to_text(&self) -> String {
        let mut s = format!(
            "L2 bandwidth, every SM loading: bytes per clock measured / simulated \
             (slices {} B/clk, across partitions {} B/clk)\n\n",
            self.slice_bytes_per_cycle, self.far_bytes_per_cycle
        );
        let _ = writeln!(
            s,
            "{:<10} {:>9} {:<6} {:>9} {:>9} {:>8} {:>6}  benchmark",
            "gpu", "KiB", "use", "measured", "simulated", "error", "HBM"
        );
        for p in &self.points {
            let _ = writeln!(
                s,
                "{:<10} {:>9} {:<6} {:>9.0} {:>9.0} {:>+7.1}% {:>5.1}%  {}",
                p.gpu,
                p.working_set_kib,
                p.role,
                p.measured,
                p.simulated,
                p.error_percent,
                100.0 * p.dram_share,
                p.benchmark
            );
        }
        let _ = writeln!(
            s,
            "\nMAPE {:.1}% on the fit rows (in-sample), {:.1}% on the check rows (held out)",
            self.mape_fit_percent, self.mape_check_percent
        );
        if !self.candidates.is_empty() {
            let _ = writeln!(s, "\nbest widths on the fit rows:");
            for c in self.candidates.iter().take(5) {
                let _ = writeln!(
                    s,
                    "  slices {:>3} B/clk, across partitions {:>3} B/clk: MAPE {:.1}%",
                    c.slice_bytes_per_cycle, c.far_bytes_per_cycle, c.mape_fit_percent
                );
            }
            let _ = writeln!(
                s,
                "\n[l2]\nslice_bytes_per_cycle = {{ num = {}, den = 1 }}\nfar_bytes_per_cycle = {{ num = {}, den = 1 }}",
                self.candidates[0].slice_bytes_per_cycle, self.candidates[0].far_bytes_per_cycle
            );
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_parses() {
        let rows = l2_bw_rows().unwrap();
        assert!(rows.len() >= 6);
        assert!(rows.iter().any(|r| r.fit) && rows.iter().any(|r| !r.fit));
        assert!(rows.iter().all(|r| r.bytes_per_clk > 1000.0));
    }

    /// A row is compared in bytes per second: the H100 SXM's 4257 bytes
    /// per 1980 MHz clock are 4606 per cycle of the preset's 1830 MHz.
    #[test]
    fn rows_are_compared_at_the_presets_clock() {
        let rows = l2_bw_rows().unwrap();
        let r = rows.iter().find(|r| r.gpu == "h100" && r.fit).unwrap();
        assert_eq!((r.bytes_per_clk, r.clock_mhz), (4257.0, 1980.0));
        let at = r.at_clock(GpuConfig::h100().clock_mhz);
        assert!((at - 4257.0 * 1980.0 / 1830.0).abs() < 1e-9, "{at}");
        assert_eq!(r.at_clock(1980), 4257.0);
    }

    /// A slice width caps the steady state: 16 SMs streaming a small
    /// working set from 8 slices of 32 B/clk get at most 256 B/clk, and
    /// doubling the width lifts it.
    #[test]
    fn the_slices_width_bounds_the_steady_state() {
        let mut cfg = GpuConfig::h800();
        cfg.sms = 16;
        cfg.l2.slices = 8;
        cfg.l2.sets = 64;
        let narrow = with_widths(cfg.clone(), Ratio::new(32, 1), Ratio::new(32, 1));
        let wide = with_widths(cfg, Ratio::new(64, 1), Ratio::new(64, 1));
        let a = l2_bandwidth(&narrow, 1 << 20, 4 << 20).unwrap();
        let b = l2_bandwidth(&wide, 1 << 20, 4 << 20).unwrap();
        assert!(a.bytes_per_clk <= 8.0 * 32.0 * 1.01, "{a:?}");
        assert!(a.bytes_per_clk >= 8.0 * 32.0 * 0.9, "{a:?}");
        assert!(b.bytes_per_clk > 1.5 * a.bytes_per_clk, "{a:?} {b:?}");
        assert!(a.dram_share < 0.01, "{a:?}");
    }
}
