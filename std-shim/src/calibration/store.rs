//! Calibration of register stores (`st.global`) against a GEMM epilogue
//! timed on the GPU (`data/register_stores.csv`).
//!
//! Each row is a tile of `tile_m x tile_n` elements that `warpgroups`
//! WarpGroups of a CTA store from registers, `segment` bytes per sector
//! request, with every SM of the GPU doing the same. The microbenchmark
//! ([`store_kernel`]) is exactly that: one CTA per SM, each WarpGroup one
//! `st.global` of its rows of the tile. The simulated figure is what the
//! GPU's `clock64()` around the store loop saw: the cycles from the first
//! WarpGroup's `st.global` to the last one going on, on SM 0.
//!
//! The time is linear in `store_request_cycles`, so `--fit` runs each row
//! once at one cycle per request and takes the measured cycles over the
//! simulated ones (in 1/1024 cycles) as the presets' value, then checks
//! the rows with it.

use simfa_core::observer::{Event, Observer};
use simfa_core::{Cycle, GpuConfig, Kernel, Op, Ratio};

use crate::calibration::data::{Table, REGISTER_STORES};
use crate::calibration::error::CalibError;

/// One row of the register-store table.
#[derive(Clone, Debug, PartialEq)]
pub struct StoreRow {
    /// The preset of the GPU measured.
    pub gpu: String,
    /// The kernel whose epilogue was timed.
    pub kernel: String,
    /// Tile rows and columns.
    pub tile: [u32; 2],
    /// WarpGroups storing the tile together.
    pub warpgroups: u32,
    /// Bytes per element.
    pub elem_bytes: u32,
    /// Bytes each sector request carries.
    pub segment: u8,
    /// Measured cycles to store one tile.
    pub cycles: f64,
}

/// The table ([`REGISTER_STORES`]).
pub fn store_rows() -> Result<Vec<StoreRow>, CalibError> {
    let cols = [
        "gpu",
        "kernel",
        "tile_m",
        "tile_n",
        "warpgroups",
        "elem_bytes",
        "segment",
        "cycles",
    ];
    let t = Table::of(REGISTER_STORES, &cols)?;
    t.rows()
        .map(|r| {
            let warpgroups = r.count("warpgroups", 4)? as u32;
            let tile_m = r.count("tile_m", 256)? as u32;
            if warpgroups == 0 || tile_m % warpgroups != 0 {
                return Err(CalibError::Parse {
                    origin: REGISTER_STORES.path.into(),
                    line: r.line,
                    problem: format!(
                        "tile_m {tile_m} is not split evenly by {warpgroups} WarpGroups"
                    ),
                });
            }
            Ok(StoreRow {
                gpu: r.one_of("gpu", &simfa_core::PRESETS)?.to_string(),
                kernel: r.text("kernel").to_string(),
                tile: [tile_m, r.count("tile_n", 256)? as u32],
                warpgroups,
                elem_bytes: r.int("elem_bytes", 1, 16)? as u32,
                segment: r.int("segment", 1, 32)? as u8,
                cycles: r.positive("cycles")?,
            })
        })
        .collect()
}

/// The microbenchmark of `row` on `cfg`: one CTA per SM, each storing its
/// own tile of a row-major C, each WarpGroup its `tile_m / warpgroups`
/// rows with one `st.global`.
pub fn store_kernel(cfg: &GpuConfig, row: &StoreRow) -> Result<Kernel, CalibError> {
    let [tm, tn] = row.tile;
    let rows = tm / row.warpgroups;
    let ctas = cfg.sms as u64;
    let text = format!(
        "kernel store_bench\n\
         grid {ctas} 1 1\n\
         smem 1024\n\
         tensormap C base=0x10000000 elem={e} dims=[{cols}, {tm}] strides=[{stride}] box=[{tn}, {rows}]\n\
         role consumer count={wgs} regs=168 {{\n\
         \x20   st.global C, [cta*{tn}, wg*{rows}], {seg}\n\
         \x20   exit\n\
         }}\n",
        e = row.elem_bytes,
        cols = ctas * tn as u64,
        stride = ctas * tn as u64 * row.elem_bytes as u64,
        wgs = row.warpgroups,
        seg = row.segment,
    );
    crate::asm::parse(&text, REGISTER_STORES.path).map_err(|e| CalibError::Parse {
        origin: REGISTER_STORES.path.into(),
        line: 0,
        problem: format!("the microbenchmark kernel: {e}"),
    })
}

/// Cycles from the first `st.global` issued on SM 0 to the last of its
/// WarpGroups going on past its `st.global`.
#[derive(Default)]
struct StoreSpan {
    first: Option<u64>,
    storing: Vec<(u32, u8)>,
    last: u64,
}

impl Observer for StoreSpan {
    fn on_event(&mut self, cycle: Cycle, event: &Event) {
        let Event::Issue { who, op } = event else {
            return;
        };
        if who.sm != 0 {
            return;
        }
        let key = (who.cta, who.wg);
        if matches!(op, Op::StGlobal { .. }) {
            self.first.get_or_insert(cycle.get());
            self.storing.push(key);
        } else if let Some(i) = self.storing.iter().position(|k| *k == key) {
            self.storing.swap_remove(i);
            self.last = self.last.max(cycle.get());
        }
    }
}

/// The simulated cycles of `row`'s tile store on `cfg`.
pub fn store_cycles(cfg: &GpuConfig, row: &StoreRow) -> Result<u64, CalibError> {
    let k = store_kernel(cfg, row)?;
    let mut span = StoreSpan::default();
    crate::run::simulate(cfg, &k, &mut span).map_err(|e| CalibError::Run {
        what: format!("{} store", row.kernel),
        source: e.into(),
    })?;
    Ok(span.last.saturating_sub(span.first.unwrap_or(0)))
}

/// One row, measured and simulated.
#[derive(Clone, Debug, PartialEq)]
pub struct StorePoint {
    /// The row.
    pub row: StoreRow,
    /// Simulated cycles.
    pub simulated: u64,
    /// `(simulated - measured) / measured`, in percent.
    pub error_pct: f64,
}

/// The outcome of `simfa calibrate store`.
#[derive(Clone, Debug, PartialEq)]
pub struct StoreCalibration {
    /// `store_request_cycles` the rows ran with: the presets', or the fit.
    pub store_request_cycles: Ratio,
    /// Whether it was fitted on the rows.
    pub fitted: bool,
    /// Every row.
    pub points: Vec<StorePoint>,
}

/// Runs the table on each row's preset (`cfg_of` maps a preset name to the
/// configuration); with `fit`, first fits `store_request_cycles` on the
/// rows (the mean, over rows, of measured over simulated cycles at one
/// cycle per request, in 1/1024 cycles) and runs them with it.
pub fn calibrate_store(
    cfg_of: &dyn Fn(&str) -> GpuConfig,
    fit: bool,
) -> Result<StoreCalibration, CalibError> {
    let rows = store_rows()?;
    let mut ratio = None;
    if fit {
        let mut sum = 0.0;
        for row in &rows {
            let mut cfg = cfg_of(&row.gpu);
            cfg.store_request_cycles = Ratio::ONE;
            let unit = store_cycles(&cfg, row)?.max(1);
            sum += row.cycles / unit as f64;
        }
        let per_request = sum / rows.len().max(1) as f64;
        ratio = Some(reduced((per_request * 1024.0).round() as u32, 1024));
    }
    let mut points = Vec::with_capacity(rows.len());
    let mut used = None;
    for row in rows {
        let mut cfg = cfg_of(&row.gpu);
        if let Some(r) = ratio {
            cfg.store_request_cycles = r;
        }
        used.get_or_insert(cfg.store_request_cycles);
        let simulated = store_cycles(&cfg, &row)?;
        let error_pct = (simulated as f64 - row.cycles) / row.cycles * 100.0;
        points.push(StorePoint {
            row,
            simulated,
            error_pct,
        });
    }
    Ok(StoreCalibration {
        store_request_cycles: ratio
            .or(used)
            .unwrap_or(simfa_core::config::STORE_REQUEST_CYCLES),
        fitted: fit,
        points,
    })
}

/// `num / den` in lowest terms.
fn reduced(num: u32, den: u32) -> Ratio {
    fn gcd(a: u32, b: u32) -> u32 {
        if b == 0 {
            a
        } else {
            gcd(b, a % b)
        }
    }
    let g = gcd(num, den).max(1);
    Ratio::new(num / g, den / g)
}

impl StoreCalibration {
    /// The report as JSON.
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::json!({
            "store_request_cycles": {
                "num": self.store_request_cycles.num,
                "den": self.store_request_cycles.den,
            },
            "fitted": self.fitted,
            "points": self.points.iter().map(|p| serde_json::json!({
                "gpu": p.row.gpu,
                "kernel": p.row.kernel,
                "tile": p.row.tile,
                "warpgroups": p.row.warpgroups,
                "segment": p.row.segment,
                "measured_cycles": p.row.cycles,
                "simulated_cycles": p.simulated,
                "error_pct": p.error_pct,
            })).collect::<Vec<_>>(),
        })
    }

    /// The report as text.
    pub fn to_text(&self) -> String {
        let r = self.store_request_cycles;
        let mut s = format!(
            "store_request_cycles = {{ num = {}, den = {} }} ({:.4} cycles per sector request; {})\n",
            r.num,
            r.den,
            r.num as f64 / r.den.max(1) as f64,
            if self.fitted {
                "fitted on these rows"
            } else {
                "the presets'"
            }
        );
        s.push_str("gpu    kernel      tile      wgs  segment   measured  simulated   error\n");
        for p in &self.points {
            s.push_str(&format!(
                "{:<6} {:<10} {:>4}x{:<4} {:>4} {:>8} {:>10.1} {:>10} {:>+6.1}%\n",
                p.row.gpu,
                p.row.kernel,
                p.row.tile[0],
                p.row.tile[1],
                p.row.warpgroups,
                p.row.segment,
                p.row.cycles,
                p.simulated,
                p.error_pct
            ));
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row() -> StoreRow {
        store_rows().unwrap().remove(0)
    }

    #[test]
    fn the_table_reads() {
        let r = row();
        assert_eq!(r.tile, [128, 256]);
        assert_eq!(r.warpgroups, 2);
        assert_eq!(r.segment, 16);
        assert!((r.cycles - 9115.878662).abs() < 1e-6);
    }

    /// 128 x 256 two-byte elements are 4096 requests of 16 bytes through
    /// SM 0's store path, shared by its two WarpGroups: at 3 cycles each,
    /// the second WarpGroup goes on 12288 cycles after the first stores.
    #[test]
    fn the_span_is_every_request_of_the_sm() {
        let mut cfg = GpuConfig::h100();
        cfg.store_request_cycles = Ratio::new(3, 1);
        assert_eq!(store_cycles(&cfg, &row()).unwrap(), 12288);
    }

    #[test]
    fn the_fit_matches_the_measurement_and_the_presets_hold_it() {
        let c = calibrate_store(&|n| GpuConfig::preset(n).unwrap(), true).unwrap();
        assert!(c.points[0].error_pct.abs() < 0.1, "{}", c.to_text());
        let presets = calibrate_store(&|n| GpuConfig::preset(n).unwrap(), false).unwrap();
        assert_eq!(
            presets.store_request_cycles,
            c.store_request_cycles,
            "the presets' store_request_cycles is not `simfa calibrate store --fit`'s:\n{}",
            c.to_text()
        );
    }
}
