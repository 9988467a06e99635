//! The TMA load throughput microbenchmark (`reference/calibration.md` §2).
//!
//! A 1-D grid of `sms * blocks_per_sm` CTAs, one WarpGroup each, streams
//! tiles from global memory into shared memory, one copy in flight per CTA:
//!
//! ```text
//! mbarrier full[1] count=1
//! loop L {                                  ; tile t = cta + l0 * grid
//!     mbar.expect_tx full[0], TILE_BYTES
//!     bulk.load full[0], t * BYTES, BYTES   ; or tma.load X, full[0], [coords of t]
//!     mbar.arrive full[0]
//!     mbar.wait full[0], l0 % 2
//! }
//! exit
//! ```
//!
//! with `L = ceil(ceil(total / tile) / grid)`, so every CTA runs the same
//! number of iterations and at least `total_bytes` move. The default total
//! is 256 MiB ([`DEFAULT_TOTAL_BYTES`]); the real benchmark moved 4 GiB,
//! which changes nothing in a steady-state throughput but costs 16 times
//! the simulation.
//!
//! Tensor maps (fp32 by default, base 0) are sized to hold all
//! `L * grid` tiles, so no box is clipped: 1-D `[tiles * b0]` with
//! `x = t * b0`; 2-D a tensor [`ROW_TILES`] tiles wide,
//! `x = (t mod 64) * b0`, `y = (t div 64) * b1`; 3-D [`PLANE_TILES`] x
//! [`PLANE_TILES`] tiles per plane, `x = (t mod 8) * b0`,
//! `y = ((t div 8) mod 8) * b1`, `z = (t div 64) * b2`. Bulk copies read
//! `t * bytes`.
//!
//! With a `working_set` (bulk copies), the tile index wraps, `t mod
//! (working_set / bytes)`: the grid streams that many bytes over and over,
//! which, once they are in the L2, measures its bandwidth (the public L2
//! benchmarks likewise have every SM read a working set the L2 holds;
//! `reference/l2_bandwidth.md`). That is `simfa gen l2-bw`.

use simfa_core::{Expr, GpuConfig, Instr, Kernel, Ref, TensorMap};

use super::gemm::name;
use super::Kb;
use super::{BenchError, GenError};

/// CTAs per SM of the L2 bandwidth benchmark (`simfa gen l2-bw`): four
/// 16 KiB copies in flight per SM, more than an SM's share of the L2
/// needs to be saturated.
pub const L2_BLOCKS_PER_SM: u32 = 4;
/// Default bytes moved by the whole grid (the real benchmark: 4 GiB).
pub const DEFAULT_TOTAL_BYTES: u64 = 256 << 20;
/// Tiles per row of the 2-D tensor.
pub const ROW_TILES: u64 = 64;
/// Tiles per row and per column of a plane of the 3-D tensor.
pub const PLANE_TILES: u64 = 8;
/// Registers per thread of the `load` role.
pub const REGS: u16 = 32;

/// What one iteration copies.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CopyKind {
    /// A non-tensor bulk copy (`cp.async.bulk`) of `bytes`.
    Bulk {
        /// Bytes per copy, a non-zero multiple of 16.
        bytes: u32,
    },
    /// A 1-D tensor-map box.
    Tensor1d {
        /// Box extent in elements.
        boxdim: [u32; 1],
    },
    /// A 2-D tensor-map box, innermost extent first.
    Tensor2d {
        /// Box extents in elements.
        boxdim: [u32; 2],
    },
    /// A 3-D tensor-map box, innermost extent first.
    Tensor3d {
        /// Box extents in elements.
        boxdim: [u32; 3],
    },
}

impl CopyKind {
    /// The box extents of a tensor copy (empty for a bulk copy).
    pub fn boxdim(&self) -> &[u32] {
        match self {
            CopyKind::Bulk { .. } => &[],
            CopyKind::Tensor1d { boxdim } => boxdim,
            CopyKind::Tensor2d { boxdim } => boxdim,
            CopyKind::Tensor3d { boxdim } => boxdim,
        }
    }

    /// A short label: `bulk1024`, `1d128`, `2d32x32`, `3d8x8x4`.
    pub fn label(&self) -> String {
        let dims = |b: &[u32]| {
            b.iter()
                .map(|x| x.to_string())
                .collect::<Vec<_>>()
                .join("x")
        };
        match self {
            CopyKind::Bulk { bytes } => format!("bulk{bytes}"),
            other => format!("{}d{}", other.boxdim().len(), dims(other.boxdim())),
        }
    }
}

/// The shape of a throughput run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct TmaBwParams {
    /// What each iteration copies.
    pub copy: CopyKind,
    /// Bytes per tensor element: 1, 2, 4 or 8 (4 for the fp32 tensors of
    /// the data; unused by bulk copies).
    pub elem_bytes: u8,
    /// CTAs per SM.
    pub blocks_per_sm: u32,
    /// SMs of the GPU (the grid is `sms * blocks_per_sm`).
    pub sms: u16,
    /// Bytes the whole grid moves at least.
    pub total_bytes: u64,
    /// Bulk copies only: wrap the tile index over this many bytes, so the
    /// grid streams a working set of this size over and over (the L2
    /// bandwidth benchmark, `simfa gen l2-bw`); a multiple of the copy
    /// size. `None`: every tile is new.
    pub working_set: Option<u64>,
}

impl TmaBwParams {
    /// `copy` with `blocks_per_sm` CTAs per SM of `cfg`, fp32 elements and
    /// the default total of 256 MiB.
    pub fn new(copy: CopyKind, blocks_per_sm: u32, cfg: &GpuConfig) -> Self {
        TmaBwParams {
            copy,
            elem_bytes: 4,
            blocks_per_sm,
            sms: cfg.sms,
            total_bytes: DEFAULT_TOTAL_BYTES,
            working_set: None,
        }
    }

    /// Bytes one iteration copies.
    pub fn tile_bytes(&self) -> u64 {
        match self.copy {
            CopyKind::Bulk { bytes } => bytes as u64,
            c => c
                .boxdim()
                .iter()
                .fold(self.elem_bytes as u64, |a, &b| a * b as u64),
        }
    }

    /// CTAs in the grid.
    pub fn grid(&self) -> u64 {
        self.sms as u64 * self.blocks_per_sm as u64
    }

    /// Iterations of each CTA: `ceil(ceil(total / tile) / grid)`.
    pub fn iterations(&self) -> u64 {
        let tile = self.tile_bytes().max(1);
        self.total_bytes.div_ceil(tile).div_ceil(self.grid().max(1))
    }

    /// Bytes the run moves: `iterations * grid * tile`.
    pub fn bytes_moved(&self) -> u64 {
        self.iterations() * self.grid() * self.tile_bytes()
    }
}

fn bad(param: &'static str, problem: impl Into<String>) -> GenError {
    GenError::BadParam {
        param,
        problem: problem.into(),
    }
}

fn check(p: &TmaBwParams) -> Result<(), GenError> {
    if p.blocks_per_sm == 0 {
        return Err(bad("blocks per SM", "must be at least 1"));
    }
    if p.sms == 0 {
        return Err(bad("SMs", "must be at least 1"));
    }
    if p.grid() > u32::MAX as u64 {
        return Err(bad("blocks per SM", "the grid exceeds 2^32 - 1 CTAs"));
    }
    if p.total_bytes == 0 {
        return Err(bad("total bytes", "must be at least 1"));
    }
    match p.copy {
        CopyKind::Bulk { bytes } => {
            if bytes == 0 || bytes % 16 != 0 {
                return Err(bad(
                    "bulk bytes",
                    format!("{bytes} is not a non-zero multiple of 16"),
                ));
            }
        }
        c => {
            if ![1, 2, 4, 8].contains(&p.elem_bytes) {
                return Err(bad("element size", "must be 1, 2, 4 or 8 bytes"));
            }
            if c.boxdim().iter().any(|&b| !(1..=256).contains(&b)) {
                return Err(bad("box", "extents must be in 1..=256 elements"));
            }
            if c.boxdim()[0] as u64 * p.elem_bytes as u64 % 16 != 0 {
                return Err(bad(
                    "box",
                    "the inner extent must span a multiple of 16 bytes",
                ));
            }
        }
    }
    if let Some(ws) = p.working_set {
        let CopyKind::Bulk { bytes } = p.copy else {
            return Err(bad("working set", "applies to bulk copies only"));
        };
        if ws == 0 || ws % bytes as u64 != 0 || ws > 1 << 40 {
            return Err(bad(
                "working set",
                format!("{ws} bytes is not a non-zero multiple of the {bytes}-byte copy (at most 1 TiB)"),
            ));
        }
    }
    let iters = p.iterations();
    if iters > u32::MAX as u64 || p.bytes_moved() > i64::MAX as u64 / 2 {
        return Err(bad("total bytes", "too many iterations"));
    }
    Ok(())
}

/// The tensor map holding all tiles (dims and strides by rank).
fn tensor_map(p: &TmaBwParams, tiles: u64) -> Result<TensorMap, GenError> {
    let b = p.copy.boxdim();
    let e = p.elem_bytes as u64;
    let mut dims = [0u64; 5];
    match b.len() {
        1 => dims[0] = tiles * b[0] as u64,
        2 => {
            dims[0] = ROW_TILES * b[0] as u64;
            dims[1] = tiles.div_ceil(ROW_TILES) * b[1] as u64;
        }
        _ => {
            dims[0] = PLANE_TILES * b[0] as u64;
            dims[1] = PLANE_TILES * b[1] as u64;
            dims[2] = tiles.div_ceil(PLANE_TILES * PLANE_TILES) * b[2] as u64;
        }
    }
    if dims[..b.len()].iter().any(|&d| d > 1 << 32) {
        return Err(bad(
            "total bytes",
            "the tensor would exceed 2^32 elements in a dimension",
        ));
    }
    // Row-major: each dimension's stride is the bytes of the one inside it.
    let mut strides = [0u64; 5];
    strides[0] = e;
    for i in 1..b.len() {
        strides[i] = strides[i - 1] * dims[i - 1];
    }
    let mut boxdim = [0u32; 5];
    boxdim[..b.len()].copy_from_slice(b);
    Ok(TensorMap {
        name: name("X"),
        base: 0,
        elem_bytes: p.elem_bytes,
        rank: b.len() as u8,
        dims,
        strides,
        boxdim,
    })
}

/// Builds the throughput kernel `tmabw_<copy>_x<blocks per SM>`; it is
/// validated before it is returned.
pub fn tma_bw(p: &TmaBwParams) -> Result<Kernel, GenError> {
    check(p)?;
    let grid = p.grid();
    let iters = p.iterations();
    let tile = p.tile_bytes();
    let mut k = Kb::new(
        Kernel::default(),
        &name(&format!("tmabw_{}_x{}", p.copy.label(), p.blocks_per_sm)),
    )?;
    k.grid([grid as u32, 1, 1]);
    k.smem(tile.max(16) as u32);
    k.mbarriers("full", 1, 1)?;
    // In order of first use, as the text assembly numbers them.
    let trips = Expr::constant(iters as i64);
    k.expr(trips)?;
    let zero = k.konst(0)?;
    let full = Ref { decl: 0, idx: zero };
    let g = grid as i64;
    // The tile index t = cta + l0 * grid, then decomposed.
    let tile_index = |div: u64, rem: u64, mul: u64| Expr {
        cta: 1,
        l: [g, 0, 0, 0],
        div: div as i64,
        rem: rem as i64,
        mul: mul as i64,
        ..Expr::constant(0)
    };
    let load = match p.copy {
        CopyKind::Bulk { bytes } => {
            let addr = k.expr(match p.working_set {
                None => Expr {
                    cta: bytes as i64,
                    l: [g * bytes as i64, 0, 0, 0],
                    ..Expr::constant(0)
                },
                Some(ws) => tile_index(0, ws / bytes as u64, bytes as u64),
            })?;
            Instr::BulkLoad {
                bar: full,
                addr,
                bytes,
            }
        }
        c => {
            let map = tensor_map(p, iters * grid)?;
            k.map(map)?;
            let b: Vec<u64> = c.boxdim().iter().map(|&x| x as u64).collect();
            let mut coords = [zero; 5];
            match b.len() {
                1 => {
                    coords[0] = k.expr(Expr {
                        cta: b[0] as i64,
                        l: [g * b[0] as i64, 0, 0, 0],
                        ..Expr::constant(0)
                    })?;
                }
                2 => {
                    coords[0] = k.expr(tile_index(0, ROW_TILES, b[0]))?;
                    coords[1] = k.expr(tile_index(ROW_TILES, 0, b[1]))?;
                }
                _ => {
                    coords[0] = k.expr(tile_index(0, PLANE_TILES, b[0]))?;
                    coords[1] = k.expr(tile_index(PLANE_TILES, PLANE_TILES, b[1]))?;
                    coords[2] = k.expr(tile_index(PLANE_TILES * PLANE_TILES, 0, b[2]))?;
                }
            }
            Instr::TmaLoad {
                map: 0,
                bar: full,
                coords,
                multicast: 0,
            }
        }
    };
    let parity = k.expr(Expr {
        l: [1, 0, 0, 0],
        rem: 2,
        ..Expr::constant(0)
    })?;
    k.begin_role("load", 1, REGS as u32)?;
    let begin = k.loop_begin(trips)?;
    k.op(Instr::MbarExpectTx {
        bar: full,
        bytes: tile as u32,
    })?;
    k.op(load)?;
    k.op(Instr::MbarArrive { bar: full })?;
    k.op(Instr::MbarWait { bar: full, parity })?;
    k.loop_end(begin)?;
    k.op(Instr::Exit)?;
    k.end_role()?;
    Ok(k.finish()?)
}

/// Simulates the benchmark on `cfg` and returns its throughput in GB/s
/// (10^9 bytes per second): bytes loaded over the kernel's duration at
/// the configuration's clock.
pub fn throughput_gbps(cfg: &GpuConfig, p: &TmaBwParams) -> Result<f64, BenchError> {
    let k = tma_bw(p)?;
    let out = crate::run::simulate(cfg, &k, &mut ())?;
    let cycles = out.summary.cycles;
    if cycles == 0 {
        return Err(BenchError::NoMeasurement("the kernel took no time"));
    }
    // bytes / (cycles / (MHz * 1e6)) / 1e9
    Ok(out.summary.stats.bytes_loaded as f64 * cfg.clock_mhz as f64 / (cycles as f64 * 1e3))
}

#[cfg(test)]
mod tests {
    use super::*;
    use simfa_core::isa::EvalCtx;
    use std::collections::HashSet;

    fn small(copy: CopyKind) -> TmaBwParams {
        TmaBwParams {
            copy,
            elem_bytes: 4,
            blocks_per_sm: 2,
            sms: 3,
            total_bytes: 100 * 1024,
            working_set: None,
        }
    }

    const COPIES: [CopyKind; 5] = [
        CopyKind::Bulk { bytes: 1024 },
        CopyKind::Tensor1d { boxdim: [128] },
        CopyKind::Tensor2d { boxdim: [32, 32] },
        CopyKind::Tensor3d { boxdim: [8, 8, 4] },
        CopyKind::Tensor2d { boxdim: [4, 3] },
    ];

    #[test]
    fn tiles_are_distinct_and_inside() {
        for copy in COPIES {
            let p = small(copy);
            let k = tma_bw(&p).unwrap();
            k.validate().unwrap();
            let grid = p.grid() as u32;
            assert_eq!(k.grid, [grid, 1, 1]);
            let iters = p.iterations() as u32;
            assert!(p.bytes_moved() >= p.total_bytes);
            assert!(p.bytes_moved() - p.total_bytes < p.grid() * p.tile_bytes());
            let load = k.code[2];
            let mut seen = HashSet::new();
            for cta in 0..grid {
                for l0 in 0..iters {
                    let ctx = EvalCtx {
                        cta,
                        l: [l0, 0, 0, 0],
                        ..EvalCtx::default()
                    };
                    let ev = |id: u16| k.exprs[id as usize].eval(&ctx);
                    let key: Vec<i64> = match load {
                        Instr::BulkLoad { addr, bytes, .. } => {
                            let a = ev(addr);
                            assert_eq!(a % bytes as i64, 0);
                            vec![a]
                        }
                        Instr::TmaLoad { map, coords, .. } => {
                            let m = &k.maps[map as usize];
                            let mut c = [0i64; 5];
                            for d in 0..m.rank as usize {
                                c[d] = ev(coords[d]);
                                assert_eq!(c[d] % m.boxdim[d] as i64, 0, "{copy:?}");
                            }
                            assert_eq!(m.box_bytes(&c), p.tile_bytes(), "{copy:?} {c:?}");
                            c[..m.rank as usize].to_vec()
                        }
                        other => panic!("{other:?}"),
                    };
                    assert!(
                        seen.insert(key),
                        "{copy:?}: tile repeated at cta {cta} l0 {l0}"
                    );
                }
            }
            assert_eq!(seen.len() as u64, p.grid() * p.iterations());
        }
    }

    #[test]
    fn runs_move_the_bytes() {
        let cfg = GpuConfig::h800_pcie();
        for copy in COPIES {
            let p = TmaBwParams {
                sms: cfg.sms,
                ..small(copy)
            };
            let k = tma_bw(&p).unwrap();
            let out = crate::run::simulate(&cfg, &k, &mut ()).unwrap();
            assert_eq!(out.summary.stats.bytes_loaded, p.bytes_moved(), "{copy:?}");
            let gbps = throughput_gbps(&cfg, &p).unwrap();
            assert!(gbps > 0.0 && gbps.is_finite(), "{gbps}");
        }
    }

    #[test]
    fn more_blocks_more_throughput_for_small_copies() {
        let cfg = GpuConfig::h800_pcie();
        let run = |b| {
            let p = TmaBwParams {
                total_bytes: 1 << 20,
                ..TmaBwParams::new(CopyKind::Bulk { bytes: 1024 }, b, &cfg)
            };
            throughput_gbps(&cfg, &p).unwrap()
        };
        let (one, two) = (run(1), run(2));
        assert!(two > one, "{one} -> {two}");
    }

    #[test]
    fn names_and_exprs() {
        let cfg = GpuConfig::h800_pcie();
        let p = TmaBwParams::new(CopyKind::Tensor3d { boxdim: [8, 8, 4] }, 3, &cfg);
        let k = tma_bw(&p).unwrap();
        assert_eq!(k.name.as_str(), "tmabw_3d8x8x4_x3");
        assert_eq!(k.grid, [342, 1, 1]);
        // trips, zero, parity, x, y, z
        assert_eq!(k.exprs.len(), 6);
        assert_eq!(p.tile_bytes(), 1024);
        let m = &k.maps[0];
        assert_eq!(m.strides[1], 8 * 8 * 4);
        assert_eq!(m.strides[2], 8 * 8 * 4 * 8 * 8);
        let k = tma_bw(&TmaBwParams::new(CopyKind::Bulk { bytes: 16384 }, 1, &cfg)).unwrap();
        assert_eq!(k.name.as_str(), "tmabw_bulk16384_x1");
        assert_eq!(k.exprs.len(), 4);
        assert_eq!(k.smem_bytes, 16384);
        let text = crate::asm::print(&k);
        assert_eq!(crate::asm::parse(&text, "t.sasm").unwrap(), k);
    }

    #[test]
    fn bad_params() {
        let cfg = GpuConfig::h800_pcie();
        let e = |p: TmaBwParams| tma_bw(&p).unwrap_err().to_string();
        let base = TmaBwParams::new(CopyKind::Bulk { bytes: 1000 }, 1, &cfg);
        assert!(e(base).contains("bulk bytes"));
        let t = |copy| TmaBwParams::new(copy, 1, &cfg);
        assert!(e(t(CopyKind::Tensor1d { boxdim: [300] })).contains("box"));
        assert!(e(t(CopyKind::Tensor1d { boxdim: [3] })).contains("16 bytes"));
        assert!(e(TmaBwParams {
            blocks_per_sm: 0,
            ..base
        })
        .contains("blocks"));
        assert!(e(TmaBwParams {
            total_bytes: 0,
            ..t(CopyKind::Tensor1d { boxdim: [4] })
        })
        .contains("total"));
    }
}
