//! The TMA pointer-chase latency microbenchmark (the `tma_cycles` column of
//! `reference/h800pcie_pointer_chase.csv`).
//!
//! One CTA of one WarpGroup walks a working set of `N = working_set / stride`
//! lines (128-byte stride by default) in a pseudo-random cyclic order: hop
//! `h` visits line `(h * P) mod N`, where `P` is the first integer coprime
//! with `N` at or above `round(N * 0.618...)` (a golden-ratio multiplicative
//! permutation: every line exactly once per `N` hops, consecutive hops far
//! apart). Each hop is one 16-byte bulk copy that completes an mbarrier,
//! waited on before the next hop starts, as one thread of the real benchmark
//! does with `cp.async.bulk` and `mbarrier.arrive`/`try_wait`:
//!
//! ```text
//! mbarrier warm[1] count=1
//! mbarrier meas[1] count=1
//! loop W {                                   ; warm-up (absent when W = 0)
//!     mbar.expect_tx warm[0], 16
//!     bulk.load warm[0], ((l0*P) % N) * 128, 16
//!     mbar.arrive warm[0]
//!     mbar.wait warm[0], l0 % 2
//! }
//! loop M {                                   ; measured hops, same sequence
//!     mbar.expect_tx meas[0], 16
//!     bulk.load meas[0], ((P*W mod N + l0*P) % N) * 128, 16
//!     mbar.arrive meas[0]
//!     mbar.wait meas[0], l0 % 2
//! }
//! exit
//! ```
//!
//! The address `((h*P) mod N) * 128` equals the `((h*128P) mod 128N)` of
//! the plain form; scaling after the remainder keeps the operands small.
//! The base address is 0.
//!
//! **Warm-up.** By default `W = min(N, WARMUP_CAP_HOPS)` hops, with
//! [`WARMUP_CAP_HOPS`] = 2 x 50 MiB / 128 = 819 200. A full pass (`W = N`)
//! leaves every line of a working set that fits the L2 resident; a working
//! set larger than that would need up to 21 million warm-up hops at 2.7 GB,
//! but after touching twice the 50 MB L2 worth of distinct lines the L2
//! holds the same thing a full pass would leave, the most recently chased
//! lines, and the measured hops that follow go to lines not touched since
//! (cold in both cases). So the cap changes no figure while bounding the
//! cost of a point.
//!
//! **Measurement** ([`cycles_per_hop`]): the warm-up and the measured loop
//! use different mbarriers, so the measured section starts at the first
//! [`Event::Issue`] of an `mbar.expect_tx` on `meas`. It ends one cycle
//! after the issue of the last `mbar.wait` on `meas` (a wait issues when it
//! passes), which is the cycle the next hop's `expect_tx` would issue (the
//! `exit` issues there): each of the `M` hops then counts for exactly one
//! expect_tx-to-expect_tx period, and the figure is that span divided by
//! `M`.

use simfa_core::{Cycle, Event, Expr, GpuConfig, Instr, Kernel, Observer, Op, Ref};

/// What a hop loads with.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum HopLoad {
    /// A 16-byte `cp.async.bulk` (the `tma_cycles` column): TMA, L2 only.
    #[default]
    Tma,
    /// A 16-byte plain load through the SM's L1 (the `regular_cycles`
    /// column): `ld.global.ca X, meas[0], [address / 4], 16` over a 1-D
    /// tensor map `X` of 4-byte elements spanning the working set.
    Regular,
}

use super::gemm::name;
use super::Kb;
use super::{BenchError, GenError};

/// Default byte distance between chased lines.
pub const DEFAULT_STRIDE: u64 = 128;
/// Default number of measured hops.
pub const DEFAULT_MEASURED_HOPS: u64 = 2048;
/// Bytes each hop copies (the real benchmark's 16-byte `cp.async.bulk`).
pub const HOP_BYTES: u32 = 16;
/// Most warm-up hops by default: twice a 50 MiB L2 in 128-byte lines.
pub const WARMUP_CAP_HOPS: u64 = 2 * 50 * 1024 * 1024 / 128;
/// Shared memory of the CTA.
pub const SMEM_BYTES: u32 = 1024;
/// Registers per thread of the `chase` role.
pub const REGS: u16 = 32;
/// The golden-ratio conjugate `(sqrt(5) - 1) / 2`.
pub const GOLDEN: f64 = 0.618_033_988_749_894_9;
/// mbarrier array index of `warm` (CTA-wide mbarrier 0).
pub const WARM_DECL: u8 = 0;
/// mbarrier array index of `meas` (CTA-wide mbarrier 1).
pub const MEAS_DECL: u8 = 1;

/// The shape of a pointer chase.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct PchaseParams {
    /// Bytes of the working set; `working_set_bytes / stride` lines are chased.
    pub working_set_bytes: u64,
    /// Bytes between chased lines, a multiple of 16 (default 128).
    pub stride: u64,
    /// Hops of the measured loop, at least 1 (default 2048).
    pub measured_hops: u64,
    /// Hops of the warm-up loop; `None` for `min(lines, WARMUP_CAP_HOPS)`.
    pub warmup_hops: Option<u64>,
    /// What each hop loads with.
    pub load: HopLoad,
}

impl PchaseParams {
    /// A chase over `working_set_bytes` with the defaults: 128-byte stride,
    /// 2048 measured hops, the default warm-up.
    pub fn new(working_set_bytes: u64) -> Self {
        PchaseParams {
            working_set_bytes,
            stride: DEFAULT_STRIDE,
            measured_hops: DEFAULT_MEASURED_HOPS,
            warmup_hops: None,
            load: HopLoad::Tma,
        }
    }

    /// Lines chased: `working_set_bytes / stride` (0 when the stride is 0).
    pub fn lines(&self) -> u64 {
        self.working_set_bytes.checked_div(self.stride).unwrap_or(0)
    }

    /// Warm-up hops the kernel runs.
    pub fn warmup(&self) -> u64 {
        self.warmup_hops
            .unwrap_or_else(|| self.lines().min(WARMUP_CAP_HOPS))
    }

    /// The permutation step `P` for these lines (see [`golden_step`]).
    pub fn step(&self) -> u64 {
        golden_step(self.lines())
    }

    /// Byte address of hop `h` (counting warm-up hops from 0):
    /// `((h * P) mod N) * stride`. The reference the kernel's expressions
    /// are tested against.
    pub fn hop_address(&self, h: u64) -> u64 {
        let n = self.lines().max(1) as u128;
        ((h as u128 * self.step() as u128) % n) as u64 * self.stride
    }
}

impl Default for PchaseParams {
    /// A 1 MB working set.
    fn default() -> Self {
        PchaseParams::new(1_000_000)
    }
}

fn gcd(mut a: u64, mut b: u64) -> u64 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

/// The multiplier `P` of the chase over `n` lines: the first integer at or
/// above `max(1, round(n * 0.618...))` that is coprime with `n`, so that
/// `h -> (h * P) mod n` visits every line once per `n` hops. For `n >= 2`
/// it is below `n` (`n - 1` is always coprime with `n`).
pub fn golden_step(n: u64) -> u64 {
    let mut p = ((n as f64 * GOLDEN).round() as u64).max(1);
    while gcd(p, n) != 1 {
        p += 1;
    }
    p
}

fn bad(param: &'static str, problem: impl Into<String>) -> GenError {
    GenError::BadParam {
        param,
        problem: problem.into(),
    }
}

/// Builds the pointer-chase kernel `pchase_<bytes>`; it is validated before
/// it is returned. The stride must be a non-zero multiple of 16, the
/// working set at least one stride, the hop counts below 2^32 (at least one
/// measured hop).
pub fn pchase(p: &PchaseParams) -> Result<Kernel, GenError> {
    if p.stride == 0 || p.stride % HOP_BYTES as u64 != 0 {
        return Err(bad(
            "stride",
            format!("{} is not a non-zero multiple of 16 bytes", p.stride),
        ));
    }
    let n = p.lines();
    if n == 0 {
        return Err(bad(
            "working set",
            format!(
                "{} bytes is less than one {}-byte line",
                p.working_set_bytes, p.stride
            ),
        ));
    }
    let (w, m) = (p.warmup(), p.measured_hops);
    if m == 0 {
        return Err(bad("measured hops", "must be at least 1"));
    }
    for (param, v) in [("measured hops", m), ("warm-up hops", w)] {
        if v > u32::MAX as u64 {
            return Err(bad(param, format!("{v} is more than 2^32 - 1")));
        }
    }
    // The largest operand the address expressions reach is
    // k + P * (hops - 1) < N * (hops + 1); the address is below N * stride.
    let fits = |x: Option<u64>| x.is_some_and(|x| x <= i64::MAX as u64);
    if !fits(n.checked_mul(w.max(m) + 1)) || !fits(n.checked_mul(p.stride)) {
        return Err(bad(
            "working set",
            format!(
                "{} bytes is too large for 64-bit address expressions",
                p.working_set_bytes
            ),
        ));
    }
    let step = golden_step(n);
    let mut k = Kb::new(
        Kernel::default(),
        &name(&format!("pchase_{}", p.working_set_bytes)),
    )?;
    k.smem(SMEM_BYTES);
    let map = match p.load {
        HopLoad::Tma => None,
        HopLoad::Regular => {
            let elems = n * p.stride / 4;
            if elems > 1 << 32 {
                return Err(bad(
                    "working set",
                    format!(
                        "{} bytes is more than a tensor map of 2^32 4-byte elements",
                        p.working_set_bytes
                    ),
                ));
            }
            Some(k.map(simfa_core::TensorMap {
                name: name("X"),
                base: 0,
                elem_bytes: 4,
                rank: 1,
                dims: [elems, 1, 1, 1, 1],
                strides: [4, 0, 0, 0, 0],
                boxdim: [HOP_BYTES / 4, 1, 1, 1, 1],
            })?)
        }
    };
    for nm in ["warm", "meas"] {
        k.mbarriers(nm, 1, 1)?;
    }
    k.begin_role("chase", 1, REGS as u32)?;
    let parity_expr = Expr {
        l: [1, 0, 0, 0],
        rem: 2,
        ..Expr::constant(0)
    };
    // ((k + l0*P) mod N) * stride, in bytes or (regular loads) elements.
    let unit = if map.is_some() { 4 } else { 1 };
    let address = |offset: u64| Expr {
        k: offset as i64,
        l: [step as i64, 0, 0, 0],
        rem: n as i64,
        mul: (p.stride / unit) as i64,
        ..Expr::constant(0)
    };
    let offset = (w as u128 * step as u128 % n as u128) as u64;
    for (decl, trips, addr) in [(WARM_DECL, w, address(0)), (MEAS_DECL, m, address(offset))] {
        if trips == 0 {
            continue;
        }
        // In order of first use, as the text assembly numbers them.
        let count = Expr::constant(trips as i64);
        k.expr(count)?;
        let zero = k.konst(0)?;
        let addr = k.expr(addr)?;
        let parity = k.expr(parity_expr)?;
        let bar = Ref { decl, idx: zero };
        let begin = k.loop_begin(count)?;
        k.op(Instr::MbarExpectTx {
            bar,
            bytes: HOP_BYTES,
        })?;
        match map {
            None => k.op(Instr::BulkLoad {
                bar,
                addr,
                bytes: HOP_BYTES,
            })?,
            Some(map) => k.op(Instr::LdGlobal {
                map,
                bar,
                coords: [addr, zero, zero, zero, zero],
                segment: HOP_BYTES as u8,
                l1: true,
            })?,
        };
        k.op(Instr::MbarArrive { bar })?;
        k.op(Instr::MbarWait { bar, parity })?;
        k.loop_end(begin)?;
    }
    k.op(Instr::Exit)?;
    k.end_role()?;
    Ok(k.finish()?)
}

/// Finds the measured section in the event stream (see the module docs).
struct HopClock {
    meas: u16,
    start: Option<u64>,
    last_wait: Option<u64>,
}

impl Observer for HopClock {
    fn on_event(&mut self, cycle: Cycle, event: &Event) {
        if let Event::Issue { op, .. } = event {
            match *op {
                Op::MbarExpectTx { bar, .. } if bar == self.meas && self.start.is_none() => {
                    self.start = Some(cycle.get());
                }
                Op::MbarWait { bar, .. } if bar == self.meas => {
                    self.last_wait = Some(cycle.get());
                }
                _ => {}
            }
        }
    }
}

/// Simulates the chase on `cfg` and returns its figure, cycles per measured
/// hop: from the issue of the first `mbar.expect_tx` on `meas` to one cycle
/// after the issue of the last `mbar.wait` on `meas`, divided by the
/// measured hops (see the module docs).
pub fn cycles_per_hop(cfg: &GpuConfig, p: &PchaseParams) -> Result<f64, BenchError> {
    let k = pchase(p)?;
    let mut clock = HopClock {
        meas: k.mbar_base(MEAS_DECL),
        start: None,
        last_wait: None,
    };
    crate::run::simulate(cfg, &k, &mut clock)?;
    let start = clock
        .start
        .ok_or(BenchError::NoMeasurement("no expect_tx on meas issued"))?;
    let end = clock
        .last_wait
        .ok_or(BenchError::NoMeasurement("no wait on meas issued"))?
        + 1;
    Ok(end.saturating_sub(start) as f64 / p.measured_hops as f64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use simfa_core::isa::EvalCtx;

    fn eval(k: &Kernel, id: u16, l0: u32) -> i64 {
        let ctx = EvalCtx {
            l: [l0, 0, 0, 0],
            ..EvalCtx::default()
        };
        k.exprs[id as usize].eval(&ctx)
    }

    #[test]
    fn permutation_visits_every_line_once() {
        for n in [
            1u64, 2, 3, 4, 10, 15, 64, 97, 100, 128, 1000, 1024, 4096, 65_536, 100_003,
        ] {
            let step = golden_step(n);
            assert_eq!(gcd(step, n), 1, "n = {n}");
            assert!(n < 2 || step < n, "n = {n}, P = {step}");
            let mut seen = vec![false; n as usize];
            for h in 0..n {
                let i = (h * step % n) as usize;
                assert!(!seen[i], "n = {n}: line {i} visited twice");
                seen[i] = true;
            }
            assert!(seen.iter().all(|&s| s), "n = {n}");
        }
        // Near the golden ratio.
        let s = golden_step(1_000_000);
        assert!((618_000..618_100).contains(&s), "{s}");
        assert_eq!(golden_step(10), 7); // round(6.18) = 6 shares 2 with 10
    }

    #[test]
    fn kernel_shape_and_exprs() {
        let p = PchaseParams {
            warmup_hops: Some(100),
            ..PchaseParams::new(64 * 1024)
        };
        let k = pchase(&p).unwrap();
        k.validate().unwrap();
        k.check_fits(&GpuConfig::h800_pcie()).unwrap();
        assert_eq!(k.grid, [1, 1, 1]);
        assert_eq!(k.smem_bytes, 1024);
        assert_eq!(k.roles.len(), 1);
        assert_eq!(k.roles[0].count, 1);
        assert_eq!(k.mbarriers[0].name.as_str(), "warm");
        assert_eq!(k.mbarriers[1].name.as_str(), "meas");
        assert_eq!(k.mbar_base(MEAS_DECL), 1);
        // Two loops of 4 + begin/end each, and exit.
        assert_eq!(k.code.len(), 2 * 6 + 1);
        // zero, parity, 2 x (trip count, address).
        assert_eq!(k.exprs.len(), 6);
        assert_eq!(k.exprs[0], Expr::constant(100));
        assert_eq!(k.exprs[1], Expr::constant(0));
        for (i, e) in k.exprs.iter().enumerate() {
            assert!(!k.exprs[..i].contains(e), "expr {i} duplicated");
        }
        assert_eq!(k.name.as_str(), "pchase_65536");
        // Without warm-up the first loop disappears.
        let k = pchase(&PchaseParams {
            warmup_hops: Some(0),
            ..p
        })
        .unwrap();
        assert_eq!(k.code.len(), 6 + 1);
        assert_eq!(k.exprs.len(), 4);
        // A full warm-up pass ends where the chase started: the measured
        // loop shares the warm-up's address expression.
        let k = pchase(&PchaseParams::new(64 * 1024)).unwrap();
        assert_eq!(k.exprs.len(), 5);
    }

    fn addr_exprs(k: &Kernel) -> Vec<u16> {
        k.code
            .iter()
            .filter_map(|i| match i {
                Instr::BulkLoad { addr, .. } => Some(*addr),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn addresses_follow_the_permutation() {
        for (ws, warm) in [
            (2000u64, None),
            (1_000_000, None),
            (500_000_000, Some(1000)),
        ] {
            let p = PchaseParams {
                warmup_hops: warm,
                ..PchaseParams::new(ws)
            };
            let k = pchase(&p).unwrap();
            let (n, step, w) = (p.lines(), p.step(), p.warmup());
            let ids = addr_exprs(&k);
            assert_eq!(ids.len(), 2);
            for h in [0u64, 1, 2, 7, 100, w.saturating_sub(1)] {
                if h < w {
                    let want = (h * step % n) * 128;
                    assert_eq!(eval(&k, ids[0], h as u32) as u64, want, "ws {ws} h {h}");
                    assert_eq!(p.hop_address(h), want);
                }
            }
            // The measured loop continues the sequence.
            for j in [0u64, 1, 5, 2047] {
                let h = w + j;
                let want = ((h as u128 * step as u128) % n as u128) as u64 * 128;
                assert_eq!(eval(&k, ids[1], j as u32) as u64, want, "ws {ws} j {j}");
                assert_eq!(p.hop_address(h), want);
            }
        }
    }

    #[test]
    fn default_warmup_is_capped() {
        assert_eq!(WARMUP_CAP_HOPS, 819_200);
        assert_eq!(PchaseParams::new(64 * 128).warmup(), 64);
        assert_eq!(PchaseParams::new(2_737_229_000).warmup(), WARMUP_CAP_HOPS);
        let k = pchase(&PchaseParams::new(2_737_229_000)).unwrap();
        assert!(matches!(k.code[0], Instr::LoopBegin { .. }));
        assert_eq!(k.exprs[0], Expr::constant(WARMUP_CAP_HOPS as i64));
    }

    #[test]
    fn bad_params() {
        let e = pchase(&PchaseParams::new(100)).unwrap_err();
        assert!(e.to_string().contains("working set"), "{e}");
        let e = pchase(&PchaseParams {
            stride: 100,
            ..PchaseParams::default()
        })
        .unwrap_err();
        assert!(e.to_string().contains("stride"), "{e}");
        let e = pchase(&PchaseParams {
            measured_hops: 0,
            ..PchaseParams::default()
        })
        .unwrap_err();
        assert!(e.to_string().contains("measured"), "{e}");
        let e = pchase(&PchaseParams {
            warmup_hops: Some(1 << 32),
            ..PchaseParams::default()
        })
        .unwrap_err();
        assert!(e.to_string().contains("warm-up"), "{e}");
        let e = pchase(&PchaseParams {
            warmup_hops: Some(1 << 31),
            ..PchaseParams::new(1 << 50)
        })
        .unwrap_err();
        assert!(e.to_string().contains("too large"), "{e}");
    }

    #[test]
    fn text_round_trip() {
        let k = pchase(&PchaseParams::new(10_000)).unwrap();
        let text = crate::asm::print(&k);
        let back = crate::asm::parse(&text, "pchase.sasm").unwrap();
        assert_eq!(back, k, "{text}");
    }

    /// Records the issue cycle of every `expect_tx` on `meas`.
    struct Starts(u16, Vec<u64>, u64);

    impl Observer for Starts {
        fn on_event(&mut self, cycle: Cycle, event: &Event) {
            match event {
                Event::Issue {
                    op: Op::MbarExpectTx { bar, .. },
                    ..
                } if *bar == self.0 => self.1.push(cycle.get()),
                Event::Issue { op: Op::Exit, .. } => self.2 = cycle.get(),
                _ => {}
            }
        }
    }

    #[test]
    fn figure_is_the_mean_hop_period() {
        // Whatever the memory model: the figure is the mean distance between
        // successive measured expect_tx issues, the last hop ending where the
        // exit issues.
        let cfg = GpuConfig::h800_pcie();
        let p = PchaseParams {
            measured_hops: 64,
            warmup_hops: Some(16),
            ..PchaseParams::new(1 << 20)
        };
        let c = cycles_per_hop(&cfg, &p).unwrap();
        let k = pchase(&p).unwrap();
        let mut obs = Starts(k.mbar_base(MEAS_DECL), Vec::new(), 0);
        let out = crate::run::simulate(&cfg, &k, &mut obs).unwrap();
        assert_eq!(out.summary.stats.tma_ops, 80);
        assert_eq!(out.summary.stats.bytes_loaded, 80 * 16);
        let starts = &obs.1;
        assert_eq!(starts.len(), 64);
        let mut periods: Vec<u64> = starts.windows(2).map(|w| w[1] - w[0]).collect();
        periods.push(obs.2 - starts[63]);
        let mean = periods.iter().sum::<u64>() as f64 / 64.0;
        assert_eq!(c, mean);
        assert!(c > cfg.tma_setup_common as f64 + 3.0, "{c}");
        // Deterministic.
        assert_eq!(cycles_per_hop(&cfg, &p).unwrap(), c);
    }
}
