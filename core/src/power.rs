//! The board's power limit: the SM clock a kernel sustains.
//!
//! Simulated time is in cycles of the SM clock; what a cycle lasts depends
//! on the clock the board's power limit allows. Dynamic power grows with
//! the switching activity and with `f * V^2`, and in the DVFS range the
//! voltage follows the frequency, so at the power cap `f^3 * activity` is
//! constant: a kernel whose tensor pipe does a fraction `u` of its peak math
//! sustains `f(u) = sustained * u^(-1/3)`, at most the configured clock.
//! [`GpuConfig::tensor_sustained_mhz`] (`sustained`, the clock at full
//! tensor activity) is this law's one parameter per GPU, fitted by `simfa
//! calibrate sm` on published GEMM and WGMMA throughputs; 0 means the power
//! limit never binds.
//!
//! The activity counted is the tensor pipe's math alone (the dominant
//! consumer in the kernels simfa models); SIMT, memory and static power
//! are folded into the fitted constant. The clock is a property of the
//! whole run, computed after it from its counts: it scales reported times,
//! never the simulated cycles, which stay bit-exact.

use crate::config::GpuConfig;

/// The largest `r` with `r^3 <= n`.
pub fn icbrt(n: u128) -> u128 {
    if n == 0 {
        return 0;
    }
    // Start above the root and descend by Newton steps; exact for u128.
    let bits = 128 - n.leading_zeros();
    let mut x: u128 = 1 << bits.div_ceil(3);
    loop {
        let y = (2 * x + n / (x * x)) / 3;
        if y >= x {
            break;
        }
        x = y;
    }
    while x * x * x > n {
        x -= 1;
    }
    while (x + 1) * (x + 1) * (x + 1) <= n {
        x += 1;
    }
    x
}

/// Peak tensor-pipe math of one SM, in FLOPs per cycle, as the ratio
/// `num / den` (2 * 64 * 16 FLOPs per N column every `wgmma_cycles_per_n`
/// cycles: 4096 on the H100).
fn peak_flops_per_cycle(cfg: &GpuConfig) -> (u128, u128) {
    let r = cfg.wgmma_cycles_per_n;
    (2048 * r.den as u128, r.num.max(1) as u128)
}

/// The SM clock in MHz that a run of `cycles` cycles doing `wgmma_flops`
/// of tensor math sustains on `cfg` (see the module docs): `clock_mhz` when
/// the power limit does not bind.
pub fn sustained_clock_mhz(cfg: &GpuConfig, wgmma_flops: u64, cycles: u64) -> u32 {
    let s = cfg.tensor_sustained_mhz as u128;
    if s == 0 || wgmma_flops == 0 || cycles == 0 {
        return cfg.clock_mhz;
    }
    // f^3 = s^3 / u, u = flops / (cycles * sms * peak)
    let (pn, pd) = peak_flops_per_cycle(cfg);
    let capacity = cycles as u128 * cfg.sms as u128 * pn;
    let f3 = s
        .saturating_mul(s)
        .saturating_mul(s)
        .saturating_mul(capacity)
        / (wgmma_flops as u128).saturating_mul(pd);
    let f = icbrt(f3);
    f.min(cfg.clock_mhz as u128) as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integer_cube_roots_are_exact() {
        for n in [0u128, 1, 7, 8, 9, 26, 27, 28, 1 << 63, u64::MAX as u128] {
            let r = icbrt(n);
            assert!(r * r * r <= n && (r + 1) * (r + 1) * (r + 1) > n, "{n}");
        }
        assert_eq!(icbrt(1830u128.pow(3)), 1830);
        assert_eq!(icbrt(1830u128.pow(3) - 1), 1829);
    }

    #[test]
    fn the_clock_follows_the_cube_root_law() {
        let mut c = GpuConfig::h100();
        c.tensor_sustained_mhz = 1500;
        let peak = 4096 * c.sms as u64;
        // Full activity: the sustained clock.
        assert_eq!(sustained_clock_mhz(&c, peak * 1000, 1000), 1500);
        // An eighth of the activity: twice the clock, capped at 1830.
        assert_eq!(sustained_clock_mhz(&c, peak * 1000, 8000), 1830);
        c.clock_mhz = 4000;
        assert_eq!(sustained_clock_mhz(&c, peak * 1000, 8000), 3000);
        // No tensor work, or no limit: the configured clock.
        assert_eq!(sustained_clock_mhz(&c, 0, 8000), 4000);
        c.tensor_sustained_mhz = 0;
        assert_eq!(sustained_clock_mhz(&c, peak, 1), 4000);
    }
}
