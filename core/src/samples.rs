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

use crate::config::{GpuConfig, MemoryModel};
use crate::digest::Digest;
use crate::isa::{Expr, ExprId, Instr, Ref, WgmmaMode, Work};
use crate::kernel::{CtaOrder, Kernel, MbarDecl, Role, StageDecl, TensorMap};

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
    clear(k);
    match i / 3 {
        0 => ring(k)?,
        _ => tiles(k)?,
    }
    Some(config(MODELS[i % 3]))
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
/// HBM pseudo-channels, under memory model `memory`.
fn config(memory: MemoryModel) -> GpuConfig {
    let mut c = GpuConfig::h800();
    c.sms = 2;
    c.memory = memory;
    c.l2.slices = 4;
    c.l2.sets = 8;
    c.l2.ways = 4;
    c.l2.proxy.enabled = true;
    c.dram.channels = 2;
    c.tma.max_lines = 16;
    c.seed = 0x5EED;
    c
}

fn clear(k: &mut Kernel) {
    k.name.clear();
    k.grid = [1, 1, 1];
    k.order = CtaOrder::Linear;
    k.smem_bytes = 0;
    k.roles.clear();
    k.maps.clear();
    k.mbarriers.clear();
    k.stages.clear();
    k.exprs.clear();
    k.code.clear();
}

fn name24(s: &str) -> Option<crate::kernel::Name> {
    let mut n = crate::kernel::Name::new();
    n.push_str(s).ok()?;
    Some(n)
}

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

fn expr(k: &mut Kernel, e: E) -> Option<ExprId> {
    let mut x = Expr::constant(e.k);
    x.cta = e.cta;
    x.c[0] = e.cx;
    x.c[1] = e.cy;
    x.wg = e.wg;
    x.l[0] = e.l0;
    x.div = e.div;
    x.rem = e.rem;
    let id = k.exprs.len() as ExprId;
    k.exprs.push(x).ok()?;
    Some(id)
}

fn konst(k: &mut Kernel, v: i64) -> Option<ExprId> {
    expr(
        k,
        E {
            k: v,
            ..E::default()
        },
    )
}

fn code(k: &mut Kernel, instrs: &[Instr]) -> Option<()> {
    for &i in instrs {
        k.code.push(i).ok()?;
    }
    Some(())
}

fn role(k: &mut Kernel, name: &str, count: u8, regs: u16, start: usize) -> Option<()> {
    let len = k.code.len() - start;
    k.roles
        .push(Role {
            name: name24(name)?,
            count,
            regs,
            start: start as u16,
            len: len as u16,
            stream: false,
        })
        .ok()
}

/// `examples/ring.sasm`: a producer filling a two-stage ring with 1-D TMA
/// loads, a consumer waiting on the loads' mbarriers and running WGMMAs.
fn ring(k: &mut Kernel) -> Option<()> {
    k.name = name24("ring")?;
    k.grid = [4, 1, 1];
    k.smem_bytes = 4096;
    k.maps
        .push(TensorMap {
            name: name24("X")?,
            base: 0x1000,
            elem_bytes: 2,
            rank: 1,
            dims: [1 << 20, 0, 0, 0, 0],
            strides: [2, 0, 0, 0, 0],
            boxdim: [256, 0, 0, 0, 0],
        })
        .ok()?;
    k.mbarriers
        .push(MbarDecl {
            name: name24("full")?,
            len: 2,
            count: 1,
        })
        .ok()?;
    k.stages
        .push(StageDecl {
            name: name24("empty")?,
            len: 2,
            consumers: 1,
        })
        .ok()?;
    let four = konst(k, 4)?;
    let slot = expr(
        k,
        E {
            l0: 1,
            rem: 2,
            ..E::default()
        },
    )?;
    let coord = expr(
        k,
        E {
            l0: 256,
            cta: 1024,
            ..E::default()
        },
    )?;
    let parity = expr(
        k,
        E {
            l0: 1,
            div: 2,
            rem: 2,
            ..E::default()
        },
    )?;
    let full = Ref { decl: 0, idx: slot };
    let empty = Ref { decl: 0, idx: slot };
    let start = k.code.len();
    let b = start as u16;
    code(
        k,
        &[
            Instr::LoopBegin {
                count: four,
                end: b + 5,
            },
            Instr::StageAcquire { stage: empty },
            Instr::MbarExpectTx {
                bar: full,
                bytes: 512,
            },
            Instr::TmaLoad {
                map: 0,
                bar: full,
                coords: [coord, 0, 0, 0, 0],
            },
            Instr::MbarArrive { bar: full },
            Instr::LoopEnd { begin: b },
            Instr::Exit,
        ],
    )?;
    role(k, "producer", 1, 24, start)?;
    let start = k.code.len();
    let b = start as u16;
    code(
        k,
        &[
            Instr::LoopBegin {
                count: four,
                end: b + 6,
            },
            Instr::MbarWait { bar: full, parity },
            Instr::Wgmma {
                n: 64,
                mode: WgmmaMode::Ss,
            },
            Instr::WgmmaCommit,
            Instr::WgmmaWait { n: 0 },
            Instr::StageRelease { stage: empty },
            Instr::LoopEnd { begin: b },
            Instr::Exit,
        ],
    )?;
    role(k, "consumer", 1, 240, start)
}

/// Two WarpGroups per CTA on a 3 x 2 grid in grouped order: each round
/// both bulk-load 256 bytes onto a shared mbarrier (two arrivals and the
/// transaction bytes complete its phase), run a WGMMA, store a 2-D box of
/// a tensor that the edges clip (partly or wholly), and meet at a named
/// barrier; at the end they drain their WGMMA groups and stores.
fn tiles(k: &mut Kernel) -> Option<()> {
    k.name = name24("tiles")?;
    k.grid = [3, 2, 1];
    k.order = CtaOrder::Grouped { rows: 2 };
    k.smem_bytes = 8192;
    k.maps
        .push(TensorMap {
            name: name24("T")?,
            base: 0x10_0000,
            elem_bytes: 4,
            rank: 2,
            dims: [100, 70, 0, 0, 0],
            strides: [4, 400, 0, 0, 0],
            boxdim: [32, 16, 0, 0, 0],
        })
        .ok()?;
    k.mbarriers
        .push(MbarDecl {
            name: name24("b")?,
            len: 2,
            count: 2,
        })
        .ok()?;
    let three = konst(k, 3)?;
    let one = konst(k, 1)?;
    let slot = expr(
        k,
        E {
            l0: 1,
            rem: 2,
            ..E::default()
        },
    )?;
    let parity = expr(
        k,
        E {
            l0: 1,
            div: 2,
            rem: 2,
            ..E::default()
        },
    )?;
    let src = expr(
        k,
        E {
            k: 0x20_0000,
            cta: 4096,
            wg: 256,
            l0: 512,
            ..E::default()
        },
    )?;
    let x = expr(
        k,
        E {
            k: -8,
            cx: 32,
            wg: 48,
            l0: 8,
            ..E::default()
        },
    )?;
    let y = expr(
        k,
        E {
            cy: 16,
            l0: 20,
            ..E::default()
        },
    )?;
    let dst = expr(
        k,
        E {
            k: 0x30_0000,
            cta: 128,
            ..E::default()
        },
    )?;
    let bar = Ref { decl: 0, idx: slot };
    let start = k.code.len();
    let b = start as u16;
    code(
        k,
        &[
            Instr::LoopBegin {
                count: three,
                end: b + 12,
            },
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
            Instr::LoopEnd { begin: b },
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
    role(k, "worker", 2, 64, start)
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
    fn combine_depends_on_every_result() {
        let r = [(1, 2), (3, 4)];
        assert_ne!(combine(&r), combine(&[(1, 2), (3, 5)]));
        assert_ne!(combine(&r), combine(&[(3, 4), (1, 2)]));
    }
}
