//! The tiled GEMM of the paper's section V-B1.
//!
//! `C[M x N] = A[M x K] * B[K x N]`, FP16 inputs and output, FP32
//! accumulation, 128x128x64 tiles, one WarpGroup (role `main`, 168
//! registers) per CTA and one CTA per output tile. The grid is
//! `[N/128, M/128, 1]`: x is the tile column, y the tile row, so consecutive
//! CTAs share a block row of A. Per CTA:
//!
//! ```text
//! loop K/64 {
//!     mbar.expect_tx full[0], 32768
//!     tma.load A, full[0], [l0*64, cy*128]
//!     tma.load B, full[0], [cx*128, l0*64]
//!     mbar.arrive full[0]
//!     mbar.wait full[0], l0 % 2
//!     8 x wgmma 128          ; 2 M-halves x 4 k16 steps
//!     wgmma.commit
//!     wgmma.wait 0
//! }
//! tma.store C, [cx*128, cy*128]
//! store.wait 0
//! exit
//! ```
//!
//! The shape must be a multiple of the tile (M and N of 128, K of 64), so
//! every box is full and `expect_tx` equals the bytes TMA delivers.

use simfa_core::kernel::Name;
use simfa_core::{Expr, Instr, Kernel, MbarDecl, Ref, Role, TensorMap};

use super::GenError;

/// Tile rows (M).
pub const TILE_M: u32 = 128;
/// Tile columns (N).
pub const TILE_N: u32 = 128;
/// Tile depth (K) per main-loop iteration.
pub const TILE_K: u32 = 64;
/// Bytes per FP16 element.
pub const ELEM_BYTES: u32 = 2;
/// Shared memory per CTA: the A and B tiles of one iteration (32 KiB) and
/// the C tile staged for the store (32 KiB).
pub const SMEM_BYTES: u32 = 65536;
/// Registers per thread of the `main` role.
pub const REGS: u16 = 168;
/// Global address of A.
pub const A_BASE: u64 = 0x1000_0000;
/// Alignment of the tensors after A.
pub const TENSOR_ALIGN: u64 = 1 << 20;

/// The problem shape of a GEMM.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct GemmParams {
    /// Rows of A and C.
    pub m: u32,
    /// Columns of B and C.
    pub n: u32,
    /// Columns of A, rows of B.
    pub k: u32,
}

impl Default for GemmParams {
    /// 4096 x 4096 x 4096.
    fn default() -> Self {
        GemmParams {
            m: 4096,
            n: 4096,
            k: 4096,
        }
    }
}

fn check(dim: &'static str, value: u32, tile: u32) -> Result<(), GenError> {
    if value == 0 {
        return Err(GenError::Zero { dim });
    }
    if value % tile != 0 {
        return Err(GenError::NotMultiple { dim, value, tile });
    }
    Ok(())
}

/// Index of `e` in the expression table, pushing it if not yet present.
pub(super) fn expr(k: &mut Kernel, e: Expr) -> Result<u16, GenError> {
    if let Some(i) = k.exprs.iter().position(|x| *x == e) {
        return Ok(i as u16);
    }
    k.exprs
        .push(e)
        .map_err(|_| GenError::Capacity("expression table"))?;
    Ok((k.exprs.len() - 1) as u16)
}

pub(super) fn code(k: &mut Kernel, i: Instr) -> Result<u16, GenError> {
    k.code
        .push(i)
        .map_err(|_| GenError::Capacity("code table"))?;
    Ok((k.code.len() - 1) as u16)
}

pub(super) fn name(s: &str) -> Name {
    let mut n = Name::new();
    for c in s.chars() {
        if n.push(c).is_err() {
            break;
        }
    }
    n
}

/// A 2-D FP16 row-major tensor map: `rows x cols` elements, box `box_cols`
/// (inner) by `box_rows`.
fn map2d(nm: &str, base: u64, rows: u32, cols: u32, box_cols: u32, box_rows: u32) -> TensorMap {
    TensorMap {
        name: name(nm),
        base,
        elem_bytes: ELEM_BYTES as u8,
        rank: 2,
        dims: [cols as u64, rows as u64, 0, 0, 0],
        strides: [ELEM_BYTES as u64, cols as u64 * ELEM_BYTES as u64, 0, 0, 0],
        boxdim: [box_cols, box_rows, 0, 0, 0],
    }
}

fn after(base: u64, bytes: u64) -> u64 {
    (base + bytes).div_ceil(TENSOR_ALIGN) * TENSOR_ALIGN
}

/// Builds the GEMM kernel `gemm_MxNxK` (the name is cut to the 24
/// characters a kernel name holds). M and N must be multiples of 128, K of
/// 64; the kernel is validated before it is returned.
pub fn gemm(p: &GemmParams) -> Result<Kernel, GenError> {
    check("M", p.m, TILE_M)?;
    check("N", p.n, TILE_N)?;
    check("K", p.k, TILE_K)?;
    let mut k = Kernel {
        name: name(&format!("gemm_{}x{}x{}", p.m, p.n, p.k)),
        grid: [p.n / TILE_N, p.m / TILE_M, 1],
        smem_bytes: SMEM_BYTES,
        ..Kernel::default()
    };
    let e = ELEM_BYTES as u64;
    let b_base = after(A_BASE, p.m as u64 * p.k as u64 * e);
    let c_base = after(b_base, p.k as u64 * p.n as u64 * e);
    let maps = [
        map2d("A", A_BASE, p.m, p.k, TILE_K, TILE_M),
        map2d("B", b_base, p.k, p.n, TILE_N, TILE_K),
        map2d("C", c_base, p.m, p.n, TILE_N, TILE_M),
    ];
    let (a, b, c) = (0u8, 1u8, 2u8);
    for m in maps {
        k.maps
            .push(m)
            .map_err(|_| GenError::Capacity("tensor map table"))?;
    }
    k.mbarriers
        .push(MbarDecl {
            name: name("full"),
            len: 1,
            count: 1,
        })
        .map_err(|_| GenError::Capacity("mbarrier table"))?;

    // In order of first use, as the text assembly numbers them.
    let trips = expr(&mut k, Expr::constant((p.k / TILE_K) as i64))?;
    let zero = expr(&mut k, Expr::constant(0))?;
    let k_off = expr(
        &mut k,
        Expr {
            l: [TILE_K as i64, 0, 0, 0],
            ..Expr::constant(0)
        },
    )?;
    let row = expr(
        &mut k,
        Expr {
            c: [0, TILE_M as i64, 0],
            ..Expr::constant(0)
        },
    )?;
    let col = expr(
        &mut k,
        Expr {
            c: [TILE_N as i64, 0, 0],
            ..Expr::constant(0)
        },
    )?;
    let parity = expr(
        &mut k,
        Expr {
            l: [1, 0, 0, 0],
            rem: 2,
            ..Expr::constant(0)
        },
    )?;
    let full = Ref { decl: 0, idx: zero };
    let tile_bytes = k.maps[a as usize].full_box_bytes() + k.maps[b as usize].full_box_bytes();

    let begin = code(
        &mut k,
        Instr::LoopBegin {
            count: trips,
            end: 0,
        },
    )?;
    code(
        &mut k,
        Instr::MbarExpectTx {
            bar: full,
            bytes: tile_bytes as u32,
        },
    )?;
    code(
        &mut k,
        Instr::TmaLoad {
            map: a,
            bar: full,
            coords: [k_off, row, zero, zero, zero],
        },
    )?;
    code(
        &mut k,
        Instr::TmaLoad {
            map: b,
            bar: full,
            coords: [col, k_off, zero, zero, zero],
        },
    )?;
    code(&mut k, Instr::MbarArrive { bar: full })?;
    code(&mut k, Instr::MbarWait { bar: full, parity })?;
    for _ in 0..(TILE_M / 64) * (TILE_K / 16) {
        code(&mut k, Instr::Wgmma { n: TILE_N as u16 })?;
    }
    code(&mut k, Instr::WgmmaCommit)?;
    code(&mut k, Instr::WgmmaWait { n: 0 })?;
    let end = code(&mut k, Instr::LoopEnd { begin })?;
    k.code[begin as usize] = Instr::LoopBegin { count: trips, end };
    code(
        &mut k,
        Instr::TmaStore {
            map: c,
            coords: [col, row, zero, zero, zero],
        },
    )?;
    code(&mut k, Instr::StoreWait { n: 0 })?;
    code(&mut k, Instr::Exit)?;
    k.roles
        .push(Role {
            name: name("main"),
            count: 1,
            regs: REGS,
            start: 0,
            len: k.code.len() as u16,
            stream: false,
        })
        .map_err(|_| GenError::Capacity("role table"))?;
    k.validate().map_err(GenError::Invalid)?;
    Ok(k)
}

#[cfg(test)]
mod tests {
    use super::*;
    use simfa_core::GpuConfig;

    #[test]
    fn shape_and_program() {
        let k = gemm(&GemmParams {
            m: 256,
            n: 512,
            k: 192,
        })
        .unwrap();
        assert_eq!(k.name.as_str(), "gemm_256x512x192");
        assert_eq!(k.grid, [4, 2, 1]);
        assert_eq!(k.roles.len(), 1);
        assert_eq!(k.roles[0].name.as_str(), "main");
        assert_eq!(k.roles[0].regs, 168);
        assert_eq!(k.smem_bytes, 65536);
        // loop begin + 15 per iteration + loop end + store, store.wait, exit
        assert_eq!(k.code.len(), 1 + 15 + 1 + 3);
        assert_eq!(k.roles[0].len as usize, k.code.len());
        assert_eq!(
            k.code
                .iter()
                .filter(|i| matches!(i, Instr::Wgmma { n: 128 }))
                .count(),
            8
        );
        assert_eq!(
            k.code[1],
            Instr::MbarExpectTx {
                bar: Ref { decl: 0, idx: 1 },
                bytes: 32768
            }
        );
        assert_eq!(k.code[16], Instr::LoopEnd { begin: 0 });
        assert!(matches!(k.code[0], Instr::LoopBegin { end: 16, .. }));
        assert_eq!(k.code.last(), Some(&Instr::Exit));
        k.validate().unwrap();
        k.check_fits(&GpuConfig::h800()).unwrap();
        assert_eq!(k.mbarriers.len(), 1);
        assert_eq!(k.mbarriers[0].name.as_str(), "full");
    }

    #[test]
    fn tensor_maps() {
        let k = gemm(&GemmParams {
            m: 256,
            n: 384,
            k: 128,
        })
        .unwrap();
        let [a, b, c] = [&k.maps[0], &k.maps[1], &k.maps[2]];
        assert_eq!((a.dims[0], a.dims[1], a.strides[1]), (128, 256, 256));
        assert_eq!((b.dims[0], b.dims[1], b.strides[1]), (384, 128, 768));
        assert_eq!((c.dims[0], c.dims[1], c.strides[1]), (384, 256, 768));
        assert_eq!(a.full_box_bytes() + b.full_box_bytes(), 32768);
        assert_eq!(c.full_box_bytes(), 32768);
        assert_eq!(a.base, 0x1000_0000);
        assert_eq!(b.base % (1 << 20), 0);
        assert!(b.base >= a.base + 256 * 128 * 2);
        assert!(c.base >= b.base + 128 * 384 * 2 && c.base % (1 << 20) == 0);
    }

    #[test]
    fn exprs_are_deduplicated() {
        let k = gemm(&GemmParams::default()).unwrap();
        for (i, e) in k.exprs.iter().enumerate() {
            assert!(!k.exprs[..i].contains(e), "expr {i} duplicated");
        }
        // trip count, zero, l0*64, cy*128, cx*128, l0%2
        assert_eq!(k.exprs.len(), 6);
        assert_eq!(k.exprs[0], Expr::constant(64));
        assert_eq!(k.exprs[1], Expr::constant(0));
    }

    #[test]
    fn bad_shapes() {
        let e = gemm(&GemmParams {
            m: 128,
            n: 128,
            k: 0,
        })
        .unwrap_err();
        assert_eq!(e, GenError::Zero { dim: "K" });
        assert!(e.to_string().contains('K'));
        assert_eq!(
            gemm(&GemmParams {
                m: 0,
                n: 128,
                k: 64
            })
            .unwrap_err(),
            GenError::Zero { dim: "M" }
        );
        let e = gemm(&GemmParams {
            m: 128,
            n: 200,
            k: 64,
        })
        .unwrap_err();
        assert_eq!(
            e,
            GenError::NotMultiple {
                dim: "N",
                value: 200,
                tile: 128
            }
        );
        assert!(e.to_string().contains("N = 200"), "{e}");
        let e = gemm(&GemmParams {
            m: 100,
            n: 128,
            k: 64,
        })
        .unwrap_err();
        assert!(matches!(e, GenError::NotMultiple { dim: "M", .. }));
        let e = gemm(&GemmParams {
            m: 128,
            n: 128,
            k: 96,
        })
        .unwrap_err();
        assert!(matches!(e, GenError::NotMultiple { dim: "K", .. }));
        // 2^25 x 2^25 tiles: the grid is too large.
        let big = u32::MAX / 128 * 128;
        assert!(matches!(
            gemm(&GemmParams {
                m: big,
                n: big,
                k: 64
            }),
            Err(GenError::Invalid(_))
        ));
        // Long names are cut, not refused.
        let k = gemm(&GemmParams {
            m: 1 << 20,
            n: 1 << 20,
            k: 1 << 20,
        })
        .unwrap();
        assert_eq!(k.name.len(), 24);
    }

    #[test]
    fn runs_and_loads_match_expect_tx() {
        let p = GemmParams {
            m: 256,
            n: 256,
            k: 256,
        };
        let k = gemm(&p).unwrap();
        let cfg = GpuConfig::h800();
        let out = crate::run::simulate(&cfg, &k, &mut ()).unwrap();
        let s = out.summary.stats;
        assert_eq!(s.wgmmas, 4 * 4 * 8);
        assert_eq!(s.bytes_loaded, 4 * 4 * 32768);
        assert_eq!(s.bytes_stored, 4 * 32768);
        assert_eq!(out.flops, 2 * 256 * 256 * 256);
        // loop begin/end are not counted: 15 per iteration + 3.
        assert_eq!(s.instructions, 4 * (4 * 15 + 3));
    }
}
