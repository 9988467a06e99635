//! The 23-shape GEMM sweep, in the style of the paper's section V-B4
//! evaluation set: M and N from 128 to 8192, K from 512 to 32768, the
//! paper's 128x128x64 single-WarpGroup kernel with the H800 calibration
//! bubbles ([`Calibration::H800`]).
//!
//! The set leaves out the largest problems (4096x4096x4096 and
//! 8192x8192x1024 take about 80 s each to simulate in release mode on one
//! core, against about 2 minutes for the whole set) so that the sweep stays
//! a quick check; [`sweep`] runs any list of shapes, those included.
//!
//! [`sweep`] runs a list of shapes on one GPU configuration and reports
//! simulated cycles, time and TFLOP/s per shape; the wall-clock time of each
//! simulation is measured for reporting only and never feeds the timing.

use std::time::Instant;

use simfa_core::GpuConfig;

use super::BenchError;
use super::{gemm, Calibration, GemmParams};
use crate::run::simulate;

/// The sweep's (M, N, K) shapes, including the paper's two named ones
/// (2048x128x4096 and 1024x1024x4096).
pub const SWEEP_SHAPES: [(u32, u32, u32); 23] = [
    (128, 128, 512),
    (128, 128, 4096),
    (256, 256, 1024),
    (512, 512, 512),
    (512, 512, 2048),
    (1024, 1024, 1024),
    (1024, 1024, 4096),
    (2048, 128, 4096),
    (128, 2048, 4096),
    (2048, 2048, 512),
    (2048, 2048, 2048),
    (4096, 4096, 512),
    (4096, 4096, 1024),
    (8192, 1024, 2048),
    (1024, 512, 8192),
    (512, 1024, 16384),
    (256, 256, 32768),
    (128, 1024, 32768),
    (4096, 1024, 2048),
    (1024, 4096, 8192),
    (8192, 128, 1024),
    (128, 8192, 2048),
    (2048, 512, 16384),
];

/// The sweep's 23 shapes as calibrated default kernels.
pub fn sweep_shapes() -> [GemmParams; 23] {
    SWEEP_SHAPES.map(|(m, n, k)| GemmParams::new(m, n, k).calibrated(Calibration::H800))
}

/// One shape's result.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SweepRow {
    /// The kernel's parameters.
    pub params: GemmParams,
    /// Simulated cycles.
    pub cycles: u64,
    /// Simulated time in microseconds at the configuration's clock.
    pub time_us: f64,
    /// `2 M N K` over the simulated time, in TFLOP/s.
    pub tflops: f64,
    /// Wall-clock seconds the simulation took (reporting only).
    pub wall_s: f64,
    /// Simulated cycles per wall-clock second (reporting only).
    pub cycles_per_wall_s: f64,
    /// Bytes of simulation arena the run used.
    pub arena_bytes: usize,
}

/// Generates and simulates one GEMM on `cfg`.
pub fn sweep_row(cfg: &GpuConfig, p: &GemmParams) -> Result<SweepRow, BenchError> {
    let k = gemm(p)?;
    let start = Instant::now();
    let out = simulate(cfg, &k, &mut ())?;
    let wall_s = start.elapsed().as_secs_f64();
    let cycles = out.summary.cycles;
    let time_us = cycles as f64 / cfg.clock_mhz.max(1) as f64;
    Ok(SweepRow {
        params: *p,
        cycles,
        time_us,
        tflops: if time_us > 0.0 {
            p.flops() as f64 / time_us / 1e6
        } else {
            0.0
        },
        wall_s,
        cycles_per_wall_s: if wall_s > 0.0 {
            cycles as f64 / wall_s
        } else {
            0.0
        },
        arena_bytes: out.arena_bytes,
    })
}

/// Runs every shape of `shapes` on `cfg`, in order (see [`sweep_shapes`]
/// for the standard set).
pub fn sweep(cfg: &GpuConfig, shapes: &[GemmParams]) -> Result<Vec<SweepRow>, BenchError> {
    shapes.iter().map(|p| sweep_row(cfg, p)).collect()
}

/// A plain-text table of sweep rows: shape, cycles, microseconds, TFLOP/s
/// and simulation wall time.
pub fn sweep_table(rows: &[SweepRow]) -> String {
    let mut s = format!(
        "{:>20} {:>12} {:>10} {:>9} {:>9}\n",
        "M x N x K", "cycles", "time us", "TFLOP/s", "wall s"
    );
    for r in rows {
        let p = r.params;
        s += &format!(
            "{:>20} {:>12} {:>10.2} {:>9.1} {:>9.2}\n",
            format!("{}x{}x{}", p.m, p.n, p.k),
            r.cycles,
            r.time_us,
            r.tflops,
            r.wall_s
        );
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shape_set() {
        let s = sweep_shapes();
        assert_eq!(s.len(), 23);
        for p in &s {
            assert_eq!((p.prologue_bubble, p.iter_bubble), (4314, 330));
            assert!((128..=8192).contains(&p.m) && (128..=8192).contains(&p.n));
            assert!((512..=32768).contains(&p.k));
            gemm(p).unwrap();
        }
        assert!(s.iter().any(|p| (p.m, p.n, p.k) == (2048, 128, 4096)));
        assert!(s.iter().any(|p| (p.m, p.n, p.k) == (1024, 1024, 4096)));
        assert!(s.iter().any(|p| p.k == 512) && s.iter().any(|p| p.k == 32768));
        for (i, a) in SWEEP_SHAPES.iter().enumerate() {
            assert!(!SWEEP_SHAPES[..i].contains(a), "{a:?} twice");
        }
    }

    #[test]
    fn small_sweep() {
        let cfg = GpuConfig::h800();
        let shapes = [
            GemmParams::new(128, 128, 512).calibrated(Calibration::H800),
            GemmParams::new(256, 256, 1024).calibrated(Calibration::H800),
        ];
        let rows = sweep(&cfg, &shapes).unwrap();
        assert_eq!(rows.len(), 2);
        for r in &rows {
            // At least the serial bubbles of one CTA.
            let floor = 4314 + 330 * r.params.k_iters() as u64;
            assert!(r.cycles > floor, "{r:?}");
            assert!((r.time_us - r.cycles as f64 / 1830.0).abs() < 1e-9);
            let peak = 989.0; // H800 dense FP16
            assert!(r.tflops > 0.0 && r.tflops < peak, "{r:?}");
        }
        let t = sweep_table(&rows);
        assert!(
            t.contains("128x128x512") && t.contains("256x256x1024"),
            "{t}"
        );
        // Deterministic: the same cycles again.
        assert_eq!(sweep(&cfg, &shapes).unwrap()[1].cycles, rows[1].cycles);
    }

    /// The full 23-shape sweep on the H800, printed:
    /// `cargo test --release -p simfa-std --lib full_sweep -- --ignored --nocapture`.
    #[test]
    #[ignore = "minutes in release mode; run by hand"]
    fn full_sweep() {
        let cfg = GpuConfig::h800();
        let mut rows = Vec::new();
        for p in sweep_shapes() {
            let r = sweep_row(&cfg, &p).unwrap();
            println!("{}", sweep_table(&[r]).lines().nth(1).unwrap());
            rows.push(r);
        }
        println!("{}", sweep_table(&rows));
    }

    /// The kernel variants on two shapes, printed:
    /// `cargo test --release -p simfa-std --lib variants_report -- --ignored --nocapture`.
    #[test]
    #[ignore = "tens of seconds in release mode; run by hand"]
    fn variants_report() {
        let cfg = GpuConfig::h800();
        for (m, n, k) in [(1024, 1024, 4096), (2048, 2048, 2048)] {
            let base = GemmParams::new(m, n, k).calibrated(Calibration::H800);
            let variants = [
                ("stages 1", base),
                ("stages 4", GemmParams { stages: 4, ..base }),
                (
                    "stages 4, 2 consumers",
                    GemmParams {
                        stages: 4,
                        consumers: 2,
                        ..base
                    },
                ),
                (
                    "stages 3, 2 consumers, 128x256",
                    GemmParams {
                        stages: 3,
                        consumers: 2,
                        block_n: 256,
                        ..base
                    },
                ),
                (
                    "persistent 132, group 4, stages 4, 2 consumers",
                    GemmParams {
                        stages: 4,
                        consumers: 2,
                        persistent: true,
                        group_m: 4,
                        ..base
                    },
                ),
            ];
            for (what, p) in variants {
                let r = sweep_row(&cfg, &p).unwrap();
                println!(
                    "{m}x{n}x{k} {what}: {} cycles, {:.1} TFLOP/s, {:.2} s",
                    r.cycles, r.tflops, r.wall_s
                );
            }
        }
    }
}
