//! The WGMMA latency and throughput microbenchmark of Luo et al.
//! (calibration.md §7): on every SM one WarpGroup issues a dependent chain
//! of `wgmma m64nNk16` in one mode, FP16 in, FP32 accumulated.
//!
//! ```text
//! loop CHAIN {
//!     wgmma N [ss|rs]
//! }
//! wgmma.commit
//! wgmma.wait 0
//! exit
//! ```
//!
//! The latency is the tensor pipe's cycles per WGMMA; the throughput is the
//! whole GPU's FLOPs over the run's time at the clock the power limit
//! sustains (`simfa_core::power`).

use simfa_core::{GpuConfig, Instr, Kernel, WgmmaMode};

use super::gemm::name;
use super::Kb;
use super::{BenchError, GenError};
use crate::run::simulate;

/// WGMMAs per chain.
pub const CHAIN: u32 = 1024;

/// The kernel for `n` and `mode` on a GPU of `sms` SMs.
pub fn wgmma_chain(sms: u16, n: u16, mode: WgmmaMode) -> Result<Kernel, GenError> {
    if !(8..=256).contains(&n) || n % 8 != 0 {
        return Err(GenError::BadParam {
            param: "n",
            problem: format!("{n} is not a multiple of 8 in 8..=256"),
        });
    }
    let mut k = Kb::new(
        Kernel::default(),
        &name(&format!("wgmma_n{n}_{}", mode.name())),
    )?;
    k.grid([sms.max(1) as u32, 1, 1]);
    k.begin_role("chain", 1, 168)?;
    let begin = k.loop_begin(simfa_core::Expr::constant(CHAIN as i64))?;
    k.op(Instr::Wgmma { n, mode })?;
    k.loop_end(begin)?;
    k.op(Instr::WgmmaCommit)?;
    k.op(Instr::WgmmaWait { n: 0 })?;
    k.op(Instr::Exit)?;
    k.end_role()?;
    Ok(k.finish()?)
}

/// What the benchmark measures.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct WgmmaFigures {
    /// Tensor-pipe cycles per WGMMA.
    pub latency: f64,
    /// TFLOP/s of the whole GPU.
    pub tflops: f64,
    /// The clock the throughput is at, MHz.
    pub clock_mhz: u32,
    /// FLOPs of the whole run.
    pub flops: u64,
    /// Cycles of the whole run.
    pub cycles: u64,
}

/// Runs the benchmark for `n` and `mode` on `cfg`.
pub fn wgmma_figures(cfg: &GpuConfig, n: u16, mode: WgmmaMode) -> Result<WgmmaFigures, BenchError> {
    let k = wgmma_chain(cfg.sms, n, mode)?;
    let out = simulate(cfg, &k, &mut ())?;
    let st = out.summary.stats;
    let cycles = out.summary.cycles;
    let clock = simfa_core::power::sustained_clock_mhz(cfg, out.flops, cycles);
    let latency = st.tensor_busy_cycles as f64 / st.wgmmas.max(1) as f64;
    let tflops = out.flops as f64 * clock as f64 / (cycles.max(1) as f64 * 1e6);
    Ok(WgmmaFigures {
        latency,
        tflops,
        clock_mhz: clock,
        flops: out.flops,
        cycles,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_chain_measures_the_wgmma_law() {
        let mut cfg = GpuConfig::h800_pcie();
        cfg.tensor_sustained_mhz = 0;
        let f = wgmma_figures(&cfg, 256, WgmmaMode::Ss).unwrap();
        assert_eq!(f.latency, 128.0);
        // No power limit: 114 SMs x 4096 FLOP/cycle at 1755 MHz, less the
        // few cycles around the chain.
        let peak = 114.0 * 4096.0 * 1755e6 / 1e12;
        assert!(f.tflops < peak && f.tflops > 0.99 * peak, "{}", f.tflops);
        assert_eq!(f.clock_mhz, 1755);
        // With the limit, the clock falls to about the sustained one (the
        // pipe is busy all but the chain's last few cycles).
        cfg.tensor_sustained_mhz = 1400;
        let g = wgmma_figures(&cfg, 256, WgmmaMode::Ss).unwrap();
        assert!((1400..1405).contains(&g.clock_mhz), "{}", g.clock_mhz);
        assert!((g.tflops / f.tflops - g.clock_mhz as f64 / 1755.0).abs() < 1e-9);
        assert_eq!(wgmma_figures(&cfg, 8, WgmmaMode::Rs).unwrap().latency, 13.0);
        assert!(wgmma_chain(114, 12, WgmmaMode::Ss).is_err());
    }
}
