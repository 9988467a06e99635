//! The published experiments of [`crate::calibration::data`] re-created as simfa runs:
//! which kernel stands for each measured one, and how its figure is read
//! off the run. [`crate::calibration::sm`] fits on them and
//! [`crate::calibration::validate`] checks every dataset with them, so both measure the
//! same way.
//!
//! Times and rates come from [`Report`]: cycles at the clock the
//! configuration's power limit sustains for the run's tensor activity.

use rayon::prelude::*;
use simfa_core::GpuConfig;

use crate::calibration::data::{Fa3Point, GemmPoint};
use crate::calibration::error::CalibError;
use crate::gen::fa3::{fa3, Fa3Params, Variant};
use crate::gen::{gemm, BenchError, GemmParams, GemmSpec};
use crate::reporting::report::Report;
use crate::run::simulate;

/// The generator's closest configuration to the cuBLAS/torch kernels the
/// GEMM data measured: `simfa gemm`'s default family with C staged for a
/// TMA store, as the libraries write it ([`GemmSpec`]: 128 x 256 x 64
/// tiles, a producer and two consumer WarpGroups, persistent over the SMs,
/// grouped by 8 row blocks) over a 3-stage ring (what fits beside the
/// staged C tile of 128 x 256, kept for 128 x 128 tiles, on which
/// `tensor_sustained_mhz` was fitted), with 128 x 128 tiles when those
/// fill the SMs' waves better, as the libraries' heuristics pick smaller
/// tiles for small problems.
pub fn closest_gemm(cfg: &GpuConfig, [m, n, k]: [u32; 3]) -> GemmParams {
    let spec = |block_n| {
        GemmSpec {
            block_n: Some(block_n),
            stages: Some(3),
            tma_store: Some(true),
            ..GemmSpec::new(m, n, k)
        }
        .params(cfg.sms as u32)
    };
    let (wide, narrow) = (spec(256), spec(128));
    // The share of the SMs' last wave that has a tile, compared exactly:
    // tiles / (waves * sms).
    let sms = cfg.sms.max(1) as u64;
    let fill = |p: &GemmParams| (p.tiles(), p.tiles().div_ceil(sms) * sms);
    let ((wt, ws), (nt, ns)) = (fill(&wide), fill(&narrow));
    if nt * ws > wt * ns {
        narrow
    } else {
        wide
    }
}

/// Runs the closest GEMM for `shape` on `cfg`.
pub fn run_gemm(cfg: &GpuConfig, shape: [u32; 3]) -> Result<Report, BenchError> {
    run_gemm_params(cfg, &closest_gemm(cfg, shape))
}

/// Runs the GEMM `p` on `cfg`; the report counts `2 M N K` FLOPs.
pub fn run_gemm_params(cfg: &GpuConfig, p: &GemmParams) -> Result<Report, BenchError> {
    let k = gemm(p)?;
    let out = simulate(cfg, &k, &mut ())?;
    Ok(Report::new(cfg, &k, &out).with_workload_flops(p.flops()))
}

/// The FA3 parameters of a measured point, with `batch` instead of the
/// measured batch when given (the per-CTA pipeline is the same; a smaller
/// batch is cheaper to simulate).
pub fn fa3_params(p: &Fa3Point, batch: Option<u32>) -> Fa3Params {
    Fa3Params {
        batch: batch.unwrap_or(p.batch),
        heads: p.heads,
        kv_heads: p.heads,
        seqlen_q: p.seqlen,
        seqlen_kv: p.seqlen,
        hdim: p.hdim,
        causal: p.causal,
        variant: Variant::from_name(&p.variant).unwrap_or_default(),
    }
}

/// Runs FA3 for `p` on `cfg`; the report counts FA3's useful FLOPs.
pub fn run_fa3(cfg: &GpuConfig, p: &Fa3Params) -> Result<Report, BenchError> {
    let (k, _) = fa3(p, cfg)?;
    let out = simulate(cfg, &k, &mut ())?;
    Ok(Report::new(cfg, &k, &out).with_workload_flops(p.flops()))
}

/// Runs `jobs` in parallel (results in input order, whatever the number of
/// threads), calling `progress(done, total)` as each ends.
pub fn run_all<T: Sync, R: Send>(
    jobs: &[T],
    run: impl Fn(&T) -> Result<R, CalibError> + Sync,
    progress: &(dyn Fn(usize, usize) + Sync),
) -> Result<Vec<R>, CalibError> {
    let done = std::sync::atomic::AtomicUsize::new(0);
    let total = jobs.len();
    // A point's report is built on the worker that ran it; give the
    // workers a main thread's stack (rayon's default is 2 MiB).
    let pool = rayon::ThreadPoolBuilder::new()
        .stack_size(crate::run::RUN_STACK_BYTES)
        .build()
        .expect("a thread pool");
    let out: Vec<Result<R, CalibError>> = pool.install(|| {
        jobs.par_iter()
            .with_max_len(1)
            .map(|j| {
                let r = run(j);
                progress(
                    done.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1,
                    total,
                );
                r
            })
            .collect()
    });
    out.into_iter().collect()
}

/// A failed run of a dataset's point, as a calibration error naming it.
pub fn point_error(what: String, source: BenchError) -> CalibError {
    CalibError::Run { what, source }
}

/// A label for a GEMM point, e.g. `h100 cublas-bf16 4096x4096x4096`.
pub fn gemm_label(p: &GemmPoint) -> String {
    format!(
        "{} {} {}x{}x{}",
        p.gpu, p.kernel, p.shape[0], p.shape[1], p.shape[2]
    )
}

/// A label for an FA3 point, e.g. `d128 causal b2 s2048 h16 full`.
pub fn fa3_label(p: &Fa3Point) -> String {
    format!(
        "d{}{} b{} s{} h{} {}",
        p.hdim,
        if p.causal { " causal" } else { "" },
        p.batch,
        p.seqlen,
        p.heads,
        p.variant
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_closest_gemm_is_the_ws_family_with_a_tma_store() {
        let cfg = GpuConfig::h100();
        for s in [1024, 2048, 4096, 6144, 8192, 10240, 12288] {
            let p = closest_gemm(&cfg, [s, s, s]);
            assert!(p.persistent && p.validate().is_ok(), "{s}");
            assert_eq!((p.group_m, p.stages, p.consumers), (8, 3, 2));
            assert_eq!(p.epilogue, crate::gen::Epilogue::Tma);
        }
        assert_eq!(closest_gemm(&cfg, [4096, 4096, 4096]).block_n, 256);
        // 8 x 4 wide tiles would leave 100 of 132 SMs idle.
        assert_eq!(closest_gemm(&cfg, [1024, 1024, 1024]).block_n, 128);
        // 128 wide tiles fill 97% of one wave, as 256 narrow ones do of two.
        assert_eq!(closest_gemm(&cfg, [2048, 2048, 13312]).block_n, 256);
        // A partial last group (3 row blocks) and a clipped last row block
        // stay persistent and grouped.
        for shape in [[384, 256, 64], [1000, 1000, 1000]] {
            let p = closest_gemm(&cfg, shape);
            assert!(
                p.persistent && p.group_m == 8 && p.validate().is_ok(),
                "{shape:?}"
            );
        }
    }
}
