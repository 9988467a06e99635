//! A fixed set of small kernels and configurations, built in code, for
//! checking that a run is bit-exact across machines.
//!
//! The simulator promises the same cycles and digest for the same kernel
//! and configuration on every machine. [`build`] fills a [`Kernel`] and
//! returns the [`GpuConfig`] of sample `i` (`0..SAMPLES`), using nothing
//! but core types, so a host program, an `aarch64` binary and a Cortex-M
//! firmware (`firmware/`) all simulate exactly the same inputs and can
//! compare their digests (`scripts/crossdigest.sh`). The samples are tiny
//! (a two-SM GPU, a small L2 and two HBM channels) so that they run in the
//! RAM of a microcontroller, yet they touch every engine: TMA tensor loads
//! and clipped stores, bulk copies, mbarrier transaction counts and
//! phases, ring stages, named barriers, WGMMA groups in both operand
//! modes, `compute` on the shared SIMT units beside the tensor pipe,
//! grouped CTA order,
//! the fixed port and both models of the memory hierarchy with its seeded
//! proxy.
//!
//! The kernel is filled in place (it is about 47 KB) so that a caller
//! without a heap can keep it in a `static`.

use crate::builder::{self, Builder, BuilderError};
use crate::config::{GpuConfig, MemoryModel};
use crate::digest::Digest;
use crate::isa::{Expr, Instr, WgmmaMode, Work};
use crate::kernel::{CtaOrder, Kernel};
use crate::mem::config::ArrivalController;
use crate::tensor_map::TensorMap;

/// Number of samples: two kernels, each on the fixed port and on both
/// models of the memory hierarchy (line-level and transaction-level).
pub const SAMPLES: usize = 6;

/// Name of sample `i` (`"?"` out of range).
pub fn name(i: usize) -> &'static str {
    match i {
        0 => "ring/fixed",
        1 => "ring/line",
        2 => "ring/transaction",
        3 => "tiles/fixed",
        4 => "tiles/line",
        5 => "tiles/transaction",
        _ => "?",
    }
}

/// Fills `k` with the kernel of sample `i` and returns its configuration;
/// `None` when `i >= SAMPLES`.
pub fn build(i: usize, k: &mut Kernel) -> Option<GpuConfig> {
    if i >= SAMPLES {
        return None;
    }
    let built = match i / 3 {
        0 => ring(k),
        _ => tiles(k),
    };
    built.ok()?;
    Some(config(MODELS[i % 3]))
}

/// Most SMs [`run_external`] serves.
pub const EXTERNAL_MAX_SMS: usize = 16;

/// Finishes `sim`, a run of configuration `cfg` with `memory =
/// "external"`, answering every request of its external port as the fixed
/// port would (per SM, `ceil(bytes / bytes_per_cycle)` cycles after both
/// the request's cycle and that SM's previous transfer, then
/// `port.latency`), in issue order, between steps. The bare-metal programs
/// (`firmware/`) run the samples this way too, so the external port is
/// exercised where no host exists. `None` when `cfg` has more than
/// [`EXTERNAL_MAX_SMS`] SMs or a completion is refused (neither happens
/// for the samples).
pub fn run_external(
    sim: &mut crate::Simulator<'_>,
    cfg: &GpuConfig,
) -> Option<Result<crate::Summary, crate::SimError>> {
    if cfg.sms as usize > EXTERNAL_MAX_SMS {
        return None;
    }
    let mut free_at = [0u64; EXTERNAL_MAX_SMS];
    loop {
        match sim.step(&mut ()) {
            Ok(crate::Status::Finished) => return Some(Ok(sim.summary())),
            Ok(crate::Status::Running) => {}
            Err(e) => return Some(Err(e)),
        }
        while let Some(r) = sim.ext_pop() {
            let free = free_at.get_mut(r.sm as usize)?;
            let end = r.cycle.max(*free) + cfg.port.bytes_per_cycle.div_ceil(r.bytes);
            *free = end;
            let done = end + cfg.port.latency as u64;
            sim.ext_complete(r.id, crate::Cycle(done)).ok()?;
        }
    }
}

/// Folds the `(cycles, digest)` pairs of every sample, in order, into one
/// 64-bit value: equal on two machines exactly when every sample is.
pub fn combine(results: &[(u64, u64)]) -> u64 {
    let mut d = Digest::new();
    for &(cycles, digest) in results {
        d.fold(cycles);
        d.fold(digest);
    }
    d.value()
}

/// The memory model of each sample of a kernel, in order.
const MODELS: [MemoryModel; 3] = [
    MemoryModel::Fixed,
    MemoryModel::Line,
    MemoryModel::Transaction,
];

/// A two-SM H800 with a small L2 (4 slices of 8 sets x 4 ways) and two
/// HBM pseudo-channels, under memory model `memory`; the transaction
/// model without its arrival-order controller, whose tables (64 Ki
/// request records) would not fit a microcontroller's RAM.
fn config(memory: MemoryModel) -> GpuConfig {
    let mut c = GpuConfig::h800();
    c.sms = 2;
    c.memory = memory;
    c.transaction.arrival_controller = ArrivalController::Off;
    c.l2.slices = 4;
    c.l2.sets = 8;
    c.l2.ways = 4;
    c.l2.proxy.enabled = true;
    c.dram.channels = 2;
    c.tma.max_lines = 16;
    c.seed = 0x5EED;
    c
}

type B<'k> = Builder<&'k mut Kernel>;

/// `k + Σ coef·var` with variables `cta`, `cx`, `cy`, `wg`, `l0`, then
/// `/ div` and `% rem` (0: none).
#[derive(Clone, Copy, Default)]
struct E {
    k: i64,
    cta: i64,
    cx: i64,
    cy: i64,
    wg: i64,
    l0: i64,
    div: i64,
    rem: i64,
}

impl E {
    fn expr(self) -> Expr {
        let mut x = Expr::constant(self.k);
        x.cta = self.cta;
        x.c[0] = self.cx;
        x.c[1] = self.cy;
        x.wg = self.wg;
        x.l[0] = self.l0;
        x.div = self.div;
        x.rem = self.rem;
        x
    }
}

fn code(b: &mut B<'_>, instrs: &[Instr]) -> Result<(), BuilderError> {
    for &i in instrs {
        b.op(i)?;
    }
    Ok(())
}

/// `examples/ring.sasm`: a producer filling a two-stage ring with 1-D TMA
/// loads, a consumer waiting on the loads' mbarriers and running WGMMAs.
fn ring(k: &mut Kernel) -> Result<(), BuilderError> {
    let mut b = Builder::new(k, "ring")?;
    b.grid([4, 1, 1]);
    b.smem(4096);
    b.map(TensorMap {
        name: builder::name("tensor map", "X")?,
        base: 0x1000,
        elem_bytes: 2,
        rank: 1,
        dims: [1 << 20, 0, 0, 0, 0],
        strides: [2, 0, 0, 0, 0],
        boxdim: [256, 0, 0, 0, 0],
    })?;
    let full_decl = b.mbarriers("full", 2, 1)?;
    let empty_decl = b.stages("empty", 2, 1)?;
    let slot = E {
        l0: 1,
        rem: 2,
        ..E::default()
    }
    .expr();
    let coord = b.expr(
        E {
            l0: 256,
            cta: 1024,
            ..E::default()
        }
        .expr(),
    )?;
    let parity = b.expr(
        E {
            l0: 1,
            div: 2,
            rem: 2,
            ..E::default()
        }
        .expr(),
    )?;
    let full = b.at(full_decl, slot)?;
    let empty = b.at(empty_decl, slot)?;
    b.begin_role("producer", 1, 24)?;
    let l = b.loop_begin(Expr::constant(4))?;
    code(
        &mut b,
        &[
            Instr::StageAcquire { stage: empty },
            Instr::MbarExpectTx {
                bar: full,
                bytes: 512,
            },
            Instr::TmaLoad {
                map: 0,
                bar: full,
                coords: [coord, 0, 0, 0, 0],
                multicast: 0,
            },
            Instr::MbarArrive { bar: full },
        ],
    )?;
    b.loop_end(l)?;
    b.op(Instr::Exit)?;
    b.end_role()?;
    b.begin_role("consumer", 1, 240)?;
    let l = b.loop_begin(Expr::constant(4))?;
    code(
        &mut b,
        &[
            Instr::MbarWait { bar: full, parity },
            Instr::Wgmma {
                n: 64,
                mode: WgmmaMode::Ss,
            },
            Instr::WgmmaCommit,
            Instr::WgmmaWait { n: 0 },
            Instr::StageRelease {
                stage: empty,
                cluster: 0,
            },
        ],
    )?;
    b.loop_end(l)?;
    b.op(Instr::Exit)?;
    b.end_role()?;
    b.finish().map(|_| ())
}

/// Two WarpGroups per CTA on a 3 x 2 grid in grouped order: each round
/// both bulk-load 256 bytes onto a shared mbarrier (two arrivals and the
/// transaction bytes complete its phase), run a WGMMA, store a 2-D box of
/// a tensor that the edges clip (partly or wholly), and meet at a named
/// barrier; at the end they drain their WGMMA groups and stores.
fn tiles(k: &mut Kernel) -> Result<(), BuilderError> {
    let mut b = Builder::new(k, "tiles")?;
    b.grid([3, 2, 1]);
    b.order(CtaOrder::Grouped { rows: 2 });
    b.smem(8192);
    b.map(TensorMap {
        name: builder::name("tensor map", "T")?,
        base: 0x10_0000,
        elem_bytes: 4,
        rank: 2,
        dims: [100, 70, 0, 0, 0],
        strides: [4, 400, 0, 0, 0],
        boxdim: [32, 16, 0, 0, 0],
    })?;
    let decl = b.mbarriers("b", 2, 2)?;
    let one = b.konst(1)?;
    let slot = E {
        l0: 1,
        rem: 2,
        ..E::default()
    }
    .expr();
    let parity = b.expr(
        E {
            l0: 1,
            div: 2,
            rem: 2,
            ..E::default()
        }
        .expr(),
    )?;
    let src = b.expr(
        E {
            k: 0x20_0000,
            cta: 4096,
            wg: 256,
            l0: 512,
            ..E::default()
        }
        .expr(),
    )?;
    let x = b.expr(
        E {
            k: -8,
            cx: 32,
            wg: 48,
            l0: 8,
            ..E::default()
        }
        .expr(),
    )?;
    let y = b.expr(
        E {
            cy: 16,
            l0: 20,
            ..E::default()
        }
        .expr(),
    )?;
    let dst = b.expr(
        E {
            k: 0x30_0000,
            cta: 128,
            ..E::default()
        }
        .expr(),
    )?;
    let bar = b.at(decl, slot)?;
    b.begin_role("worker", 2, 64)?;
    let l = b.loop_begin(Expr::constant(3))?;
    code(
        &mut b,
        &[
            Instr::MbarExpectTx { bar, bytes: 256 },
            Instr::BulkLoad {
                bar,
                addr: src,
                bytes: 256,
            },
            Instr::MbarArrive { bar },
            Instr::MbarWait { bar, parity },
            Instr::Wgmma {
                n: 128,
                mode: WgmmaMode::Ss,
            },
            Instr::Wgmma {
                n: 16,
                mode: WgmmaMode::Rs,
            },
            Instr::WgmmaCommit,
            Instr::TmaStore {
                map: 0,
                coords: [x, y, 0, 0, 0],
            },
            Instr::BarSync {
                id: one,
                threads: 256,
            },
            Instr::Bubble { cycles: 7 },
            Instr::Compute {
                work: Work {
                    fp32: 640,
                    mufu: 96,
                    fp16: 0,
                    int: 64,
                },
            },
        ],
    )?;
    b.loop_end(l)?;
    code(
        &mut b,
        &[
            Instr::WgmmaWait { n: 0 },
            Instr::StoreWait { n: 0 },
            Instr::BulkStore {
                addr: dst,
                bytes: 128,
            },
            Instr::StoreWait { n: 0 },
            Instr::Exit,
        ],
    )?;
    b.end_role()?;
    b.finish().map(|_| ())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{NoStream, Simulator};

    fn run(i: usize) -> (u64, u64) {
        let mut k = ::std::boxed::Box::new(Kernel::default());
        let cfg = build(i, &mut k).unwrap();
        k.validate().unwrap();
        k.check_fits(&cfg).unwrap();
        let size = Simulator::<NoStream>::arena_size(&cfg, &k).unwrap();
        let mut arena = ::std::vec![0u8; size];
        let mut sim = Simulator::new(&cfg, &k, &mut arena).unwrap();
        let s = sim.run(&mut ()).unwrap();
        (s.cycles, s.digest)
    }

    #[test]
    fn every_sample_is_valid_and_finishes() {
        for i in 0..SAMPLES {
            let (cycles, _) = run(i);
            assert!(cycles > 0, "{}", name(i));
        }
        assert!(build(SAMPLES, &mut Kernel::default()).is_none());
    }

    #[test]
    fn refilling_a_used_kernel_gives_the_same_sample() {
        let mut a = ::std::boxed::Box::new(Kernel::default());
        let mut b = ::std::boxed::Box::new(Kernel::default());
        build(2, &mut a).unwrap();
        build(0, &mut b).unwrap();
        build(2, &mut b).unwrap();
        assert_eq!(a, b);
    }

    #[test]
    fn the_external_port_serves_every_sample_like_the_fixed_port() {
        for i in [0, 3] {
            let mut k = ::std::boxed::Box::new(Kernel::default());
            let fixed = build(i, &mut k).unwrap();
            let mut cfg = fixed.clone();
            cfg.memory = MemoryModel::External;
            let size = Simulator::<NoStream>::arena_size(&cfg, &k).unwrap();
            let mut arena = ::std::vec![0u8; size];
            let mut sim = Simulator::new(&cfg, &k, &mut arena).unwrap();
            let s = run_external(&mut sim, &cfg).unwrap().unwrap();
            // The fixed port's cycles and digest.
            assert_eq!((s.cycles, s.digest), run(i), "{}", name(i));
            assert_eq!(sim.ext_outstanding(), 0);
        }
    }

    #[test]
    fn combine_depends_on_every_result() {
        let r = [(1, 2), (3, 4)];
        assert_ne!(combine(&r), combine(&[(1, 2), (3, 5)]));
        assert_ne!(combine(&r), combine(&[(3, 4), (1, 2)]));
    }
}
