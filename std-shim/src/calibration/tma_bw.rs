//! The TMA load throughput table (calibration.md §2,
//! [`crate::calibration::data::TMA_THROUGHPUT`]) against the simulated
//! `simfa gen tma-bw` copies: `simfa calibrate tma-bw`. Nothing is fitted
//! to it; it checks the hierarchy, the DRAM address map included.

use std::fmt::Write as _;
use std::sync::atomic::{AtomicUsize, Ordering};

use rayon::prelude::*;
use serde::Serialize;
use simfa_core::GpuConfig;

use super::error::CalibError;
use super::stats::{error_percent, mape, subsample, worst_of, ProgressFn};
use crate::gen::tmabw::{throughput_gbps, CopyKind, TmaBwParams, DEFAULT_TOTAL_BYTES};
use crate::gen::BenchError;

/// One row of the TMA throughput table.
#[derive(Clone, Debug, PartialEq)]
pub struct TmaBwRow {
    /// Label as in `calibration.md`.
    pub label: String,
    /// The copy (the table's KB is 1024 bytes: 0.5 KB = 128 fp32).
    pub copy: CopyKind,
    /// Measured GB/s with 1, 2, 3 and 4 blocks per SM.
    pub gbps: [f64; 4],
}

/// The TMA load throughput table ([`crate::calibration::data::TMA_THROUGHPUT`]: the H800
/// PCIe, 114 SMs, GB/s for 1..4 blocks per SM): `kind` is `bulk` (with the
/// bytes per copy as `shape`), `1d`, `2d` or `3d` (fp32 boxes, `AxBxC`).
pub fn tma_bw_table() -> Result<Vec<TmaBwRow>, CalibError> {
    let cols = [
        "copy", "kind", "shape", "gbps_1", "gbps_2", "gbps_3", "gbps_4",
    ];
    let t = crate::calibration::data::Table::of(crate::calibration::data::TMA_THROUGHPUT, &cols)?;
    t.rows()
        .map(|r| {
            let kind = r.one_of("kind", &["bulk", "1d", "2d", "3d"])?;
            let bad = || CalibError::Parse {
                origin: crate::calibration::data::TMA_THROUGHPUT.path.into(),
                line: r.line,
                problem: format!("`{}` is not a {kind} copy shape", r.text("shape")),
            };
            let dims: Vec<u32> = r
                .text("shape")
                .split('x')
                .map(|d| d.parse::<u32>().ok().filter(|v| *v > 0))
                .collect::<Option<_>>()
                .ok_or_else(bad)?;
            let copy = match (kind, dims.as_slice()) {
                ("bulk", [b]) => CopyKind::Bulk { bytes: *b },
                ("1d", [a]) => CopyKind::Tensor1d { boxdim: [*a] },
                ("2d", [a, b]) => CopyKind::Tensor2d { boxdim: [*a, *b] },
                ("3d", [a, b, c]) => CopyKind::Tensor3d {
                    boxdim: [*a, *b, *c],
                },
                _ => return Err(bad()),
            };
            Ok(TmaBwRow {
                label: r.text("copy").to_string(),
                copy,
                gbps: [
                    r.positive("gbps_1")?,
                    r.positive("gbps_2")?,
                    r.positive("gbps_3")?,
                    r.positive("gbps_4")?,
                ],
            })
        })
        .collect()
}

/// Options of a throughput calibration.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TmaBwOptions {
    /// Bytes each cell moves (the real benchmark moved 4 GiB).
    pub total_bytes: u64,
    /// Run only this many of the 24 cells (row by row, 1..4 blocks per
    /// SM), spread evenly ([`subsample`]).
    pub cells: Option<usize>,
}

impl Default for TmaBwOptions {
    /// 256 MiB per cell, every cell.
    fn default() -> Self {
        TmaBwOptions {
            total_bytes: DEFAULT_TOTAL_BYTES,
            cells: None,
        }
    }
}

impl TmaBwOptions {
    /// For tests and smoke runs: 16 MiB per cell, every cell.
    pub fn quick() -> Self {
        TmaBwOptions {
            total_bytes: 16 << 20,
            cells: None,
        }
    }
}

/// One cell of the throughput table, measured against simulated.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TmaBwCell {
    /// The row's label.
    pub copy: String,
    /// Blocks per SM.
    pub blocks_per_sm: u32,
    /// CTAs in the grid.
    pub ctas: u64,
    /// Measured GB/s.
    pub measured: f64,
    /// Simulated GB/s.
    pub simulated: f64,
    /// Signed error in percent.
    pub error_percent: f64,
}

/// The result of a throughput calibration.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TmaBwCalibration {
    /// GPU configuration name.
    pub gpu: String,
    /// Bytes each cell moved (at least).
    pub total_bytes: u64,
    /// MAPE over all cells.
    pub mape_percent: f64,
    /// Largest absolute error in percent.
    pub max_abs_error_percent: f64,
    /// The cell with the largest absolute error (the first of equals).
    pub worst: TmaBwCell,
    /// Every cell run, row by row, 1..4 blocks per SM.
    pub cells: Vec<TmaBwCell>,
}

/// Runs every cell of [`tma_bw_table`] on `cfg` and compares the simulated
/// throughput with the measured one.
pub fn calibrate_tma_bw(
    cfg: &GpuConfig,
    opts: &TmaBwOptions,
    progress: ProgressFn<'_>,
) -> Result<TmaBwCalibration, CalibError> {
    let table = tma_bw_table()?;
    let all: Vec<(&TmaBwRow, u32)> = table
        .iter()
        .flat_map(|r| (1..=4u32).map(move |b| (r, b)))
        .collect();
    let jobs: Vec<(&TmaBwRow, u32)> = match opts.cells {
        Some(k) => subsample(all.len(), k)
            .into_iter()
            .map(|i| all[i])
            .collect(),
        None => all,
    };
    if jobs.is_empty() {
        return Err(CalibError::Empty {
            origin: "the TMA throughput table".into(),
        });
    }
    let params = |r: &TmaBwRow, b: u32| TmaBwParams {
        total_bytes: opts.total_bytes,
        ..TmaBwParams::new(r.copy, b, cfg)
    };
    let done = AtomicUsize::new(0);
    let total = jobs.len();
    let results: Vec<Result<f64, BenchError>> = jobs
        .par_iter()
        .with_max_len(1)
        .map(|&(r, b)| {
            let out = throughput_gbps(cfg, &params(r, b));
            progress(done.fetch_add(1, Ordering::Relaxed) + 1, total);
            out
        })
        .collect();
    let mut cells = Vec::with_capacity(total);
    for (&(r, b), res) in jobs.iter().zip(results) {
        let simulated = res.map_err(|source| CalibError::Cell {
            copy: r.label.to_string(),
            blocks_per_sm: b,
            source,
        })?;
        let measured = r.gbps[b as usize - 1];
        cells.push(TmaBwCell {
            copy: r.label.to_string(),
            blocks_per_sm: b,
            ctas: params(r, b).grid(),
            measured,
            simulated,
            error_percent: error_percent(measured, simulated),
        });
    }
    let errs: Vec<f64> = cells.iter().map(|c| c.error_percent).collect();
    let worst = worst_of(&cells, |c| c.error_percent).clone();
    Ok(TmaBwCalibration {
        gpu: cfg.name.to_string(),
        total_bytes: opts.total_bytes,
        mape_percent: mape(&errs).unwrap_or(0.0),
        max_abs_error_percent: worst.error_percent.abs(),
        worst,
        cells,
    })
}

impl TmaBwCalibration {
    /// The serialised result.
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::to_value(self).expect("a calibration always serialises")
    }

    /// The serialised result as indented text, keys in declaration order.
    pub fn to_json_pretty(&self) -> String {
        serde_json::to_string_pretty(self).expect("a calibration always serialises")
    }

    /// A table of every cell, then the MAPE.
    pub fn to_text(&self) -> String {
        let mut s = format!(
            "TMA load throughput on {}: {} per cell, GB/s measured / simulated (error)\n\n",
            self.gpu,
            binary_size(self.total_bytes)
        );
        let _ = write!(s, "{:<22}", "copy");
        for b in 1..=4 {
            let _ = write!(
                s,
                " {:>26}",
                format!("{b} block{}/SM", if b > 1 { "s" } else { "" })
            );
        }
        s.push('\n');
        for row in self.cells.chunk_by(|a, b| a.copy == b.copy) {
            let _ = write!(s, "{:<22}", row[0].copy);
            for b in 1..=4 {
                let cell = row.iter().find(|c| c.blocks_per_sm == b).map_or_else(
                    || "-".to_string(),
                    |c| {
                        format!(
                            "{:.0} / {:.0} ({:+.1}%)",
                            c.measured, c.simulated, c.error_percent
                        )
                    },
                );
                let _ = write!(s, " {cell:>26}");
            }
            s.push('\n');
        }
        let _ = writeln!(
            s,
            "\nMAPE {:.1}% over {} cells, max |error| {:.1}% ({}, {} blocks/SM)",
            self.mape_percent,
            self.cells.len(),
            self.max_abs_error_percent,
            self.worst.copy,
            self.worst.blocks_per_sm
        );
        s
    }
}

/// `256 MiB`, `64 KiB`, `1000 B`: the largest binary unit that divides.
fn binary_size(bytes: u64) -> String {
    for (shift, unit) in [(30, "GiB"), (20, "MiB"), (10, "KiB")] {
        if bytes >= 1 << shift && bytes % (1 << shift) == 0 {
            return format!("{} {unit}", bytes >> shift);
        }
    }
    format!("{bytes} B")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tma_bw_table_and_quick_run() {
        let table = tma_bw_table().unwrap();
        assert_eq!(table.len(), 6);
        assert_eq!(table[4].label, "2-D 32x32 fp32 (4 KB)");
        assert_eq!(table[4].gbps, [631.0, 1126.0, 1473.0, 1645.0]);
        let cfg = GpuConfig::h800_pcie();
        let sizes: Vec<u64> = table
            .iter()
            .map(|r| TmaBwParams::new(r.copy, 1, &cfg).tile_bytes())
            .collect();
        assert_eq!(sizes, vec![1024, 8192, 16384, 512, 4096, 1024]);
        // One copy per CTA, 4 cells spread over the table (cells 0, 8, 15
        // and 23): the shape of the result, not its figures.
        let opts = TmaBwOptions {
            total_bytes: 64 << 10,
            cells: Some(4),
        };
        let c = calibrate_tma_bw(&cfg, &opts, &|_, _| {}).unwrap();
        assert_eq!(c.cells.len(), 4);
        assert_eq!(c.cells[1].copy, "bulk 16 KB");
        assert_eq!(c.cells[1].blocks_per_sm, 1);
        assert_eq!(c.cells[2].copy, "1-D 0.5 KB (128 fp32)");
        assert_eq!(c.cells[2].blocks_per_sm, 4);
        assert_eq!(c.cells[2].ctas, 456);
        assert_eq!(c.cells[2].measured, 426.0);
        assert_eq!(c.cells[3].measured, 617.0);
        assert!(c.cells.iter().all(|x| x.simulated > 0.0));
        let j = c.to_json();
        for key in ["mape_percent", "max_abs_error_percent", "worst", "cells"] {
            assert!(j.get(key).is_some(), "{key}");
        }
        let t = c.to_text();
        assert!(t.contains("3-D 8x8x4") && t.contains("MAPE"), "{t}");
        assert!(t.contains("64 KiB per cell"), "{t}");
        assert_eq!(t.lines().filter(|l| l.contains("%)")).count(), 4, "{t}");
        let none = TmaBwOptions {
            cells: Some(0),
            ..opts
        };
        assert!(calibrate_tma_bw(&cfg, &none, &|_, _| {}).is_err());
    }
}
