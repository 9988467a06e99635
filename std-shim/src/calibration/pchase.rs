//! The TMA pointer-chase latency curve (calibration.md §1,
//! [`crate::calibration::data::POINTER_CHASE`]) against the simulated
//! `simfa gen pchase`: `simfa calibrate pchase`, which set the L2
//! latencies, associativity and remote-copy proxy.
//!
//! Each point is an independent deterministic simulation; they run in
//! parallel on rayon's pool and are collected in input order, so the
//! results do not depend on the number of threads. Errors are signed,
//! `(simulated - measured) / measured` in percent; MAPE is the mean of
//! their absolute values ([`super::stats`]).

use std::fmt::{self, Write as _};
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};

use rayon::prelude::*;
use serde::Serialize;
use simfa_core::GpuConfig;

use super::stats::{error_percent, mape, subsample, worst_of, ProgressFn};
use crate::calibration::error::CalibError;
use crate::gen::pchase::{
    cycles_per_hop, HopLoad, PchaseParams, DEFAULT_MEASURED_HOPS, WARMUP_CAP_HOPS,
};
use crate::gen::BenchError;
use crate::reporting::svg::{LineChart, Series};

/// Bytes per kB of the CSV's `working_set_kb` column. The data is decimal:
/// `calibration.md` reads its largest point, 2 737 229 kB, as 2.7 GB, and
/// its regime table, e.g. 21 592 kB as 21.6 MB.
pub const BYTES_PER_KB: f64 = 1000.0;

/// The columns the pointer-chase CSV must have.
pub const CSV_COLUMNS: [&str; 3] = ["working_set_kb", "regular_cycles", "tma_cycles"];

/// One row of the pointer-chase CSV.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ChaseRow {
    /// 1-based line in the file.
    pub line: usize,
    /// Working set in kB (1000 bytes, see [`BYTES_PER_KB`]).
    pub working_set_kb: f64,
    /// Cycles per hop of the regular 8-byte load chase.
    pub regular_cycles: f64,
    /// Cycles per hop of the TMA bulk-copy chase (what simfa simulates).
    pub tma_cycles: f64,
}

impl ChaseRow {
    /// The working set in bytes, rounded.
    pub fn working_set_bytes(&self) -> u64 {
        (self.working_set_kb * BYTES_PER_KB).round() as u64
    }
}

/// Parses the pointer-chase CSV (a [`crate::calibration::data::Table`]): the header
/// must name the [`CSV_COLUMNS`] (in any order), with positive finite
/// numbers in those columns. `origin` names the file in errors.
pub fn parse_pchase_csv(text: &str, origin: &str) -> Result<Vec<ChaseRow>, CalibError> {
    let t = crate::calibration::data::Table::parse(text, origin, &CSV_COLUMNS)?;
    t.rows()
        .map(|r| {
            Ok(ChaseRow {
                line: r.line,
                working_set_kb: r.positive(CSV_COLUMNS[0])?,
                regular_cycles: r.positive(CSV_COLUMNS[1])?,
                tma_cycles: r.positive(CSV_COLUMNS[2])?,
            })
        })
        .collect()
}

/// The shipped pointer-chase curve ([`crate::calibration::data::POINTER_CHASE`]).
pub fn pchase_rows() -> Result<Vec<ChaseRow>, CalibError> {
    let f = crate::calibration::data::POINTER_CHASE;
    parse_pchase_csv(f.text, f.path)
}

/// Reads and parses a pointer-chase CSV file.
pub fn read_pchase_csv(path: &Path) -> Result<Vec<ChaseRow>, CalibError> {
    let origin = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|source| CalibError::Io {
        path: origin.clone(),
        source,
    })?;
    parse_pchase_csv(&text, &origin)
}

/// The regimes of the pointer-chase curve (`calibration.md` §1).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Regime {
    /// Up to 21.6 MB: L2 hits near the partition floor (the L1 region up to
    /// 215 kB counts here: TMA bypasses L1).
    L2Floor,
    /// 22.5 - 30 MB: the partition transition window.
    Transition,
    /// 30.8 - 51.3 MB: the second plateau (far partition / copies).
    SecondPlateau,
    /// 53 - 122 MB: mixed L2 and DRAM.
    Mixed,
    /// 190 MB and up: the DRAM plateau.
    Dram,
}

/// Lower ends of the regimes after the floor, in kB: the table's
/// boundaries 22.5, 30.8, 51.3 (the last plateau point) and 190 MB applied
/// to the working set rounded to 0.1 MB as the table rounds it, so that
/// e.g. 22 460 kB ("22.5 MB") opens the transition and 189 907 kB
/// ("190 MB") is DRAM.
pub const REGIME_BOUNDS_KB: [f64; 4] = [22_450.0, 30_750.0, 51_350.0, 189_500.0];

impl Regime {
    /// Every regime, in order of working set.
    pub const ALL: [Regime; 5] = [
        Regime::L2Floor,
        Regime::Transition,
        Regime::SecondPlateau,
        Regime::Mixed,
        Regime::Dram,
    ];

    /// The regime of a working set given in kB.
    pub fn classify(working_set_kb: f64) -> Regime {
        let i = REGIME_BOUNDS_KB
            .iter()
            .take_while(|&&b| working_set_kb >= b)
            .count();
        Regime::ALL[i]
    }

    /// The JSON key: `l2_floor`, `transition`, `second_plateau`, `mixed`, `dram`.
    pub fn name(self) -> &'static str {
        match self {
            Regime::L2Floor => "l2_floor",
            Regime::Transition => "transition",
            Regime::SecondPlateau => "second_plateau",
            Regime::Mixed => "mixed",
            Regime::Dram => "dram",
        }
    }
}

impl fmt::Display for Regime {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Options of a pointer-chase calibration.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PchaseOptions {
    /// Measured hops per point.
    pub measured_hops: u64,
    /// Most warm-up hops per point (each point warms up with
    /// `min(lines, warmup_cap)` hops).
    pub warmup_cap: u64,
    /// Run only this many points, spread evenly ([`subsample`]).
    pub points: Option<usize>,
    /// What the chase loads with, and so the column compared against.
    pub load: HopLoad,
}

impl Default for PchaseOptions {
    /// 2048 measured hops, the full default warm-up, every point.
    fn default() -> Self {
        PchaseOptions {
            measured_hops: DEFAULT_MEASURED_HOPS,
            warmup_cap: WARMUP_CAP_HOPS,
            points: None,
            load: HopLoad::Tma,
        }
    }
}

impl PchaseOptions {
    /// For tests and smoke runs: 256 measured hops and at most 16 384
    /// warm-up hops (a full pass only up to 2 MB), every point.
    pub fn quick() -> Self {
        PchaseOptions {
            measured_hops: 256,
            warmup_cap: 16_384,
            points: None,
            load: HopLoad::Tma,
        }
    }

    /// The chase parameters of a point.
    pub fn params(&self, row: &ChaseRow) -> PchaseParams {
        let mut p = PchaseParams::new(row.working_set_bytes());
        p.measured_hops = self.measured_hops;
        p.warmup_hops = Some(p.lines().min(self.warmup_cap));
        p.load = self.load;
        p
    }

    /// The measured column these options compare against.
    pub fn column(&self) -> &'static str {
        match self.load {
            HopLoad::Tma => "tma_cycles",
            HopLoad::Regular => "regular_cycles",
        }
    }
}

/// Largest working set, kB, of the plain loads' L1 plateau
/// (`calibration.md` §1: 32 cycles up to 215 kB).
pub const L1_PLATEAU_KB: f64 = 215.0;

/// The L1 hit latency fitted on the plain loads' L1 plateau: the
/// configuration's [`simfa_core::L1Config::hit_cycles`] moved by the mean
/// of measured less simulated cycles per hop over the plateau's points
/// (a hop's cycles are the hit latency plus the chase's own instructions,
/// which do not depend on it).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct L1Fit {
    /// Points on the plateau.
    pub points: usize,
    /// Their mean measured cycles per hop.
    pub measured: f64,
    /// Their mean simulated cycles per hop.
    pub simulated: f64,
    /// The configuration's hit latency.
    pub hit_cycles: u32,
    /// The fitted hit latency.
    pub fitted_hit_cycles: u32,
}

impl PchaseOptions {}

/// One point of the curve, measured against simulated.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PchasePoint {
    /// Working set in kB (1000 bytes).
    pub working_set_kb: f64,
    /// Measured cycles per hop (the `tma_cycles` column).
    pub measured: f64,
    /// Simulated cycles per hop.
    pub simulated: f64,
    /// Signed error in percent.
    pub error_percent: f64,
    /// The regime of the working set.
    pub regime: Regime,
}

/// The error of one regime.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RegimeStats {
    /// MAPE over the regime's points (`null` when it has none).
    pub mape_percent: Option<f64>,
    /// Number of points in the regime.
    pub points: usize,
}

/// Per-regime errors, in order of working set.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Regimes {
    /// See [`Regime::L2Floor`].
    pub l2_floor: RegimeStats,
    /// See [`Regime::Transition`].
    pub transition: RegimeStats,
    /// See [`Regime::SecondPlateau`].
    pub second_plateau: RegimeStats,
    /// See [`Regime::Mixed`].
    pub mixed: RegimeStats,
    /// See [`Regime::Dram`].
    pub dram: RegimeStats,
}

impl Regimes {
    fn of(points: &[PchasePoint]) -> Regimes {
        let stats = |r: Regime| {
            let errs: Vec<f64> = points
                .iter()
                .filter(|p| p.regime == r)
                .map(|p| p.error_percent)
                .collect();
            RegimeStats {
                mape_percent: mape(&errs),
                points: errs.len(),
            }
        };
        Regimes {
            l2_floor: stats(Regime::L2Floor),
            transition: stats(Regime::Transition),
            second_plateau: stats(Regime::SecondPlateau),
            mixed: stats(Regime::Mixed),
            dram: stats(Regime::Dram),
        }
    }

    /// The regimes with their stats, in order.
    pub fn iter(&self) -> [(Regime, &RegimeStats); 5] {
        [
            (Regime::L2Floor, &self.l2_floor),
            (Regime::Transition, &self.transition),
            (Regime::SecondPlateau, &self.second_plateau),
            (Regime::Mixed, &self.mixed),
            (Regime::Dram, &self.dram),
        ]
    }
}

/// The result of a pointer-chase calibration.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PchaseCalibration {
    /// GPU configuration name.
    pub gpu: String,
    /// The measured column compared against.
    pub column: &'static str,
    /// Measured hops per point.
    pub measured_hops: u64,
    /// Most warm-up hops per point.
    pub warmup_cap_hops: u64,
    /// MAPE over all points.
    pub mape_percent: f64,
    /// Largest absolute error in percent.
    pub max_abs_error_percent: f64,
    /// The point with the largest absolute error (the first of equals).
    pub worst: PchasePoint,
    /// Per-regime errors.
    pub regimes: Regimes,
    /// Every point run, in file order.
    pub points: Vec<PchasePoint>,
    /// With plain loads, the L1 hit latency fitted on the L1 plateau
    /// (`null` with TMA loads, without an L1, or when no point lies on it).
    pub l1_fit: Option<L1Fit>,
}

/// Runs every row (or the [`PchaseOptions::points`] subsample) of the
/// pointer-chase data on `cfg` and compares the simulated cycles per hop
/// with the `tma_cycles` column. `progress` is told of each finished point.
pub fn calibrate_pchase(
    cfg: &GpuConfig,
    rows: &[ChaseRow],
    opts: &PchaseOptions,
    progress: ProgressFn<'_>,
) -> Result<PchaseCalibration, CalibError> {
    let picked: Vec<ChaseRow> = match opts.points {
        Some(k) => subsample(rows.len(), k)
            .into_iter()
            .map(|i| rows[i])
            .collect(),
        None => rows.to_vec(),
    };
    if picked.is_empty() {
        return Err(CalibError::Empty {
            origin: "the pointer-chase data".into(),
        });
    }
    let done = AtomicUsize::new(0);
    let total = picked.len();
    let results: Vec<Result<f64, BenchError>> = picked
        .par_iter()
        .with_max_len(1)
        .map(|row| {
            let r = cycles_per_hop(cfg, &opts.params(row));
            progress(done.fetch_add(1, Ordering::Relaxed) + 1, total);
            r
        })
        .collect();
    let mut points = Vec::with_capacity(total);
    for (row, r) in picked.iter().zip(results) {
        let simulated = r.map_err(|source| CalibError::Point {
            working_set_kb: row.working_set_kb,
            source,
        })?;
        let measured = match opts.load {
            HopLoad::Tma => row.tma_cycles,
            HopLoad::Regular => row.regular_cycles,
        };
        points.push(PchasePoint {
            working_set_kb: row.working_set_kb,
            measured,
            simulated,
            error_percent: error_percent(measured, simulated),
            regime: Regime::classify(row.working_set_kb),
        });
    }
    let plateau: Vec<&PchasePoint> = points
        .iter()
        .filter(|p| p.working_set_kb <= L1_PLATEAU_KB)
        .collect();
    // Nothing to fit on a configuration without an L1.
    let fits = opts.load == HopLoad::Regular && cfg.l1.unified_bytes > 0;
    let l1_fit = (fits && !plateau.is_empty()).then(|| {
        let n = plateau.len() as f64;
        let measured = plateau.iter().map(|p| p.measured).sum::<f64>() / n;
        let simulated = plateau.iter().map(|p| p.simulated).sum::<f64>() / n;
        let hit = cfg.l1.hit_cycles;
        L1Fit {
            points: plateau.len(),
            measured,
            simulated,
            hit_cycles: hit,
            fitted_hit_cycles: (hit as f64 + measured - simulated).round().max(0.0) as u32,
        }
    });
    let errs: Vec<f64> = points.iter().map(|p| p.error_percent).collect();
    let worst = worst_of(&points, |p| p.error_percent).clone();
    Ok(PchaseCalibration {
        gpu: cfg.name.to_string(),
        column: opts.column(),
        measured_hops: opts.measured_hops,
        warmup_cap_hops: opts.warmup_cap,
        mape_percent: mape(&errs).unwrap_or(0.0),
        max_abs_error_percent: worst.error_percent.abs(),
        regimes: Regimes::of(&points),
        worst,
        points,
        l1_fit,
    })
}

/// A working set in kB (1000 bytes) for people: `2 kB`, `21.6 MB`, `2.74 GB`.
pub fn format_kb(kb: f64) -> String {
    if kb < 1000.0 {
        if kb.fract() == 0.0 {
            format!("{kb} kB")
        } else {
            format!("{kb:.1} kB")
        }
    } else if kb < 1e6 {
        format!("{:.1} MB", kb / 1e3)
    } else {
        format!("{:.2} GB", kb / 1e6)
    }
}

/// An axis tick in kB: `1 kB`, `10 MB`, `1 GB` (no decimals when whole).
pub fn tick_kb(kb: f64) -> String {
    let (v, unit) = if kb < 1000.0 {
        (kb, "kB")
    } else if kb < 1e6 {
        (kb / 1e3, "MB")
    } else {
        (kb / 1e6, "GB")
    };
    if (v - v.round()).abs() < 1e-9 {
        format!("{} {unit}", v.round())
    } else {
        format!("{v:.2} {unit}")
    }
}

/// A MAPE for people, `-` when there is none.
fn fmt_opt(v: Option<f64>) -> String {
    v.map_or_else(|| "-".into(), |v| format!("{v:.1}%"))
}

impl PchaseCalibration {
    /// The serialised result.
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::to_value(self).expect("a calibration always serialises")
    }

    /// The serialised result as indented text, keys in declaration order.
    pub fn to_json_pretty(&self) -> String {
        serde_json::to_string_pretty(self).expect("a calibration always serialises")
    }

    /// A table of every point, then MAPE overall and per regime.
    pub fn to_text(&self) -> String {
        let what = match self.column {
            "regular_cycles" => "Plain-load (ld.global.ca)",
            _ => "TMA",
        };
        let mut s = format!(
            "{what} pointer chase on {}: {} points, {} measured hops, warm-up up to {} hops\n\n",
            self.gpu,
            self.points.len(),
            self.measured_hops,
            self.warmup_cap_hops
        );
        let _ = writeln!(
            s,
            "{:>11} {:>10} {:>10} {:>8}  regime",
            "working set", "measured", "simulated", "error"
        );
        for p in &self.points {
            let _ = writeln!(
                s,
                "{:>11} {:>10.1} {:>10.1} {:>+7.1}%  {}",
                format_kb(p.working_set_kb),
                p.measured,
                p.simulated,
                p.error_percent,
                p.regime
            );
        }
        let _ = writeln!(
            s,
            "\nMAPE {:.1}% overall, max |error| {:.1}% at {}",
            self.mape_percent,
            self.max_abs_error_percent,
            format_kb(self.worst.working_set_kb)
        );
        let _ = writeln!(s, "{:<15} {:>6} {:>8}", "regime", "points", "MAPE");
        for (r, st) in self.regimes.iter() {
            let _ = writeln!(
                s,
                "{:<15} {:>6} {:>8}",
                r.name(),
                st.points,
                fmt_opt(st.mape_percent)
            );
        }
        if let Some(f) = &self.l1_fit {
            let _ = writeln!(
                s,
                "\nL1 plateau (up to {L1_PLATEAU_KB} kB, {} points): measured {:.1}, simulated {:.1} cycles per hop\nfit: l1.hit_cycles = {} (now {})",
                f.points, f.measured, f.simulated, f.fitted_hit_cycles, f.hit_cycles
            );
        }
        s
    }

    /// Both curves against the working set on a logarithmic axis.
    pub fn chart(&self) -> LineChart {
        let pts = |f: fn(&PchasePoint) -> f64| {
            self.points
                .iter()
                .map(|p| (p.working_set_kb, f(p)))
                .collect()
        };
        LineChart {
            title: format!(
                "TMA pointer chase on {}: measured vs simulated (MAPE {:.1}%)",
                self.gpu, self.mape_percent
            ),
            x_label: "working set".into(),
            y_label: "cycles per hop".into(),
            log_x: true,
            x_tick: tick_kb,
            series: vec![
                Series {
                    name: "measured (tma_cycles)".into(),
                    color: "#1f77b4".into(),
                    points: pts(|p| p.measured),
                },
                Series {
                    name: "simulated".into(),
                    color: "#d62728".into(),
                    points: pts(|p| p.simulated),
                },
            ],
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CSV: &str = "# comment\n\
        working_set_kb,regular_cycles,tma_cycles\n\
        2,32.0,366.4\n\
        \n\
        # another\n\
        21592,264.0,369.1\n\
        22460,271.0,372.2\n\
        2737229,656.8,761.5\n";

    #[test]
    fn parses_the_csv() {
        let rows = parse_pchase_csv(CSV, "t.csv").unwrap();
        assert_eq!(rows.len(), 4);
        assert_eq!(rows[0].line, 3);
        assert_eq!(rows[0].working_set_kb, 2.0);
        assert_eq!(rows[0].tma_cycles, 366.4);
        assert_eq!(rows[1].line, 6);
        assert_eq!(rows[3].working_set_bytes(), 2_737_229_000);
        // Columns in another order, extra column.
        let rows = parse_pchase_csv(
            "tma_cycles,x,working_set_kb,regular_cycles\n1.5,a,10,2\n",
            "t.csv",
        )
        .unwrap();
        assert_eq!(
            (
                rows[0].working_set_kb,
                rows[0].regular_cycles,
                rows[0].tma_cycles
            ),
            (10.0, 2.0, 1.5)
        );
    }

    #[test]
    fn csv_errors_name_file_and_line() {
        let e = |text: &str| parse_pchase_csv(text, "d.csv").unwrap_err().to_string();
        let m = e("working_set_kb,regular_cycles,tma_cycles\n2,32\n");
        assert_eq!(m, "d.csv:2: expected 3 fields, found 2");
        let m = e("# c\nworking_set_kb,regular_cycles,tma_cycles\n2,32,abc\n");
        assert!(m.starts_with("d.csv:3: `abc` in column tma_cycles"), "{m}");
        let m = e("working_set_kb,regular_cycles,tma_cycles\n-2,32,1\n");
        assert!(
            m.starts_with("d.csv:2:") && m.contains("working_set_kb"),
            "{m}"
        );
        let m = e("working_set_kb,regular_cycles,tma_cycles\n2,32,NaN\n");
        assert!(m.starts_with("d.csv:2:"), "{m}");
        let m = e("# only\nworking_set_kb,tma_cycles\n2,3\n");
        assert!(
            m.starts_with("d.csv:2: the header lacks the column `regular_cycles`"),
            "{m}"
        );
        assert_eq!(
            e("# c\nworking_set_kb,regular_cycles,tma_cycles\n"),
            "d.csv: no data rows"
        );
        assert!(e("").contains("no header"));
        let r = parse_pchase_csv("x", "d.csv").unwrap_err();
        assert!(r.is_input_error());
        let io = read_pchase_csv(Path::new("/nonexistent/x.csv")).unwrap_err();
        assert!(io.is_input_error());
        assert!(io.to_string().contains("/nonexistent/x.csv"), "{io}");
    }

    #[test]
    fn regimes_follow_the_table() {
        let c = Regime::classify;
        for kb in [2.0, 215.0, 330.0, 21_592.0, 22_449.0] {
            assert_eq!(c(kb), Regime::L2Floor, "{kb}");
        }
        for kb in [22_460.0, 25_277.0, 29_587.0] {
            assert_eq!(c(kb), Regime::Transition, "{kb}");
        }
        for kb in [30_775.0, 43_844.0, 51_308.0] {
            assert_eq!(c(kb), Regime::SecondPlateau, "{kb}");
        }
        for kb in [53_364.0, 121_731.0, 189_000.0] {
            assert_eq!(c(kb), Regime::Mixed, "{kb}");
        }
        for kb in [189_907.0, 2_737_229.0] {
            assert_eq!(c(kb), Regime::Dram, "{kb}");
        }
        assert_eq!(
            serde_json::to_value(Regime::SecondPlateau).unwrap(),
            "second_plateau"
        );
        for r in Regime::ALL {
            assert_eq!(serde_json::to_value(r).unwrap(), r.name());
        }
    }

    #[test]
    fn working_set_labels() {
        assert_eq!(format_kb(2.0), "2 kB");
        assert_eq!(format_kb(21_592.0), "21.6 MB");
        assert_eq!(format_kb(2_737_229.0), "2.74 GB");
        assert_eq!(tick_kb(1.0), "1 kB");
        assert_eq!(tick_kb(1000.0), "1 MB");
        assert_eq!(tick_kb(1e7), "10 GB");
        assert_eq!(tick_kb(2500.0), "2.50 MB");
    }

    fn rows() -> Vec<ChaseRow> {
        parse_pchase_csv(CSV, "t.csv").unwrap()
    }

    #[test]
    fn pchase_calibration_small() {
        let cfg = GpuConfig::h800_pcie();
        let opts = PchaseOptions {
            measured_hops: 32,
            warmup_cap: 64,
            points: None,
            load: HopLoad::Tma,
        };
        let calls = AtomicUsize::new(0);
        let c = calibrate_pchase(&cfg, &rows(), &opts, &|_, t| {
            assert_eq!(t, 4);
            calls.fetch_add(1, Ordering::Relaxed);
        })
        .unwrap();
        assert_eq!(calls.into_inner(), 4);
        assert_eq!(c.points.len(), 4);
        assert_eq!(c.gpu, "h800-pcie");
        let errs: Vec<f64> = c.points.iter().map(|p| p.error_percent).collect();
        assert!((c.mape_percent - mape(&errs).unwrap()).abs() < 1e-9);
        assert_eq!(c.regimes.l2_floor.points, 2);
        assert_eq!(c.regimes.transition.points, 1);
        assert_eq!(c.regimes.second_plateau.points, 0);
        assert_eq!(c.regimes.second_plateau.mape_percent, None);
        assert_eq!(c.regimes.dram.points, 1);
        assert!(c
            .points
            .iter()
            .all(|p| p.error_percent.abs() <= c.max_abs_error_percent));
        let j = c.to_json();
        for key in [
            "mape_percent",
            "max_abs_error_percent",
            "worst",
            "regimes",
            "points",
        ] {
            assert!(j.get(key).is_some(), "{key}: {j}");
        }
        assert!(j["regimes"]["second_plateau"]["mape_percent"].is_null());
        assert_eq!(j["points"][0]["regime"], "l2_floor");
        assert!(j["points"][3]["simulated"].is_f64());
        // Same keys (floats may differ in the last digit when parsed back).
        let back: serde_json::Value = serde_json::from_str(&c.to_json_pretty()).unwrap();
        let keys =
            |v: &serde_json::Value| v.as_object().unwrap().keys().cloned().collect::<Vec<_>>();
        assert_eq!(keys(&back), keys(&j));
        assert_eq!(back["points"].as_array().unwrap().len(), 4);
        let t = c.to_text();
        assert!(
            t.contains("MAPE") && t.contains("2.74 GB") && t.contains("dram"),
            "{t}"
        );
        let svg = c.chart().render();
        crate::reporting::svg::tests::assert_balanced(&svg);
        assert!(svg.contains("measured (tma_cycles)") && svg.contains("simulated"));
        // Subsampled: first and last.
        let opts2 = PchaseOptions {
            points: Some(2),
            ..opts
        };
        let c2 = calibrate_pchase(&cfg, &rows(), &opts2, &|_, _| {}).unwrap();
        assert_eq!(c2.points.len(), 2);
        assert_eq!(c2.points[0], c.points[0]);
        assert_eq!(c2.points[1], c.points[3]);
    }

    /// The presets' L1 hit latency is what the plain-load chase fits on
    /// the shipped data's L1 plateau, and the plateau comes out at its
    /// measured 32 cycles per hop.
    #[test]
    fn the_shipped_l1_hit_latency_is_the_fit() {
        let cfg = GpuConfig::h800_pcie();
        let rows: Vec<ChaseRow> = pchase_rows()
            .unwrap()
            .into_iter()
            .filter(|r| r.working_set_kb <= L1_PLATEAU_KB)
            .take(3)
            .collect();
        let mut opts = PchaseOptions::quick();
        opts.load = HopLoad::Regular;
        let c = calibrate_pchase(&cfg, &rows, &opts, &|_, _| {}).unwrap();
        assert_eq!(c.column, "regular_cycles");
        let f = c.l1_fit.expect("plateau points");
        assert_eq!(f.points, 3);
        assert_eq!(f.fitted_hit_cycles, cfg.l1.hit_cycles, "{f:?}");
        assert!((f.simulated - f.measured).abs() < 1.0, "{f:?}");
        // Without an L1 the same chase goes to the L2 every hop.
        let mut none = cfg.clone();
        none.l1.unified_bytes = 0;
        let c = calibrate_pchase(&none, &rows, &opts, &|_, _| {}).unwrap();
        assert!(
            c.points.iter().all(|p| p.simulated > 200.0),
            "{:?}",
            c.points
        );
        assert_eq!(c.l1_fit, None);
    }

    #[test]
    fn results_do_not_depend_on_threads() {
        let cfg = GpuConfig::h800_pcie();
        let opts = PchaseOptions {
            measured_hops: 16,
            warmup_cap: 32,
            points: None,
            load: HopLoad::Tma,
        };
        let run = |threads| {
            rayon::ThreadPoolBuilder::new()
                .num_threads(threads)
                .build()
                .unwrap()
                .install(|| calibrate_pchase(&cfg, &rows(), &opts, &|_, _| {}).unwrap())
        };
        assert_eq!(run(1), run(3));
    }

    #[test]
    fn point_errors_are_reported_in_order() {
        let cfg = GpuConfig::h800_pcie();
        let mut r = rows();
        r[1].working_set_kb = 0.05; // 50 bytes: less than a line
        r[2].working_set_kb = 0.06;
        let e = calibrate_pchase(&cfg, &r, &PchaseOptions::quick(), &|_, _| {}).unwrap_err();
        assert!(e.to_string().starts_with("working set 0.05 kB"), "{e}");
        assert!(e.is_input_error());
    }
}
