//! The tiled GEMM of the paper's section V-B1, and its pipelined,
//! warp-specialised and persistent variants.
//!
//! `C[M x N] = A[M x K] * B[K x N]`, FP16 inputs and output, FP32
//! accumulation, row-major tensors at distinct bases ([`A_BASE`], then B and
//! C each aligned to [`TENSOR_ALIGN`]), so the CTAs of one row block of C
//! load identical A lines and those of one column block identical B lines
//! (the real-address recovery of section V-C).
//!
//! # The default kernel (`stages == 1`)
//!
//! [`GemmParams::default()`] builds the paper's kernel: 128x128x64 tiles, one
//! WarpGroup (role `main`, 168 registers) per CTA and one CTA per output
//! tile. The grid is `[N/BN, M/BM, 1]`: x is the tile column, y the tile row,
//! so consecutive CTAs share a block row of A. Per CTA:
//!
//! ```text
//! bubble PROLOGUE              ; only when prologue_bubble > 0
//! loop K/BK {
//!     mbar.expect_tx full[0], (BM + BN) * BK * 2
//!     tma.load A, full[0], [l0*BK, cy*BM]
//!     tma.load B, full[0], [cx*BN, l0*BK]
//!     mbar.arrive full[0]
//!     mbar.wait full[0], l0 % 2
//!     (BM/64 * BK/16) x wgmma BN
//!     wgmma.commit
//!     wgmma.wait 0
//!     bubble ITER              ; only when iter_bubble > 0
//! }
//! compute fp16=BM*BN          ; the FP32 accumulator to FP16
//! tma.store C, [cx*BN, cy*BM]
//! store.wait 0
//! exit
//! ```
//!
//! M, N and K need not be multiples of the tile: the grid and the K loop
//! round up and TMA clips the edge tiles (their loads complete the full
//! box's bytes, zero-filled, as on the hardware); N and K must be multiples
//! of 8 so that rows are whole 16-byte units, as TMA's strides need.
//!
//! # The pipelined kernel (`stages >= 2`)
//!
//! A `producer` WarpGroup (40 registers) fills a ring of `stages` stages;
//! `consumers` WarpGroups of role `consumer` (1 to 3) each own
//! `BM/consumers` rows of the tile. With `g` the iteration count of the CTA
//! and `s = g % stages`:
//!
//! ```text
//! producer:                          consumer (wg = 0..consumers):
//! loop K/BK {                        bubble PROLOGUE
//!     stage.acquire empty[s]         loop K/BK {
//!     mbar.expect_tx full[s], BYTES      mbar.wait full[s], g / stages % 2
//!     tma.load A, full[s], ...           (BM/consumers/64 * BK/16) x wgmma BN
//!     tma.load B, full[s], ...           wgmma.commit
//!     mbar.arrive full[s]                wgmma.wait 0
//! }                                      stage.release empty[s]
//! exit                                   bubble ITER
//!                                    }
//!                                    compute fp16=BM/consumers*BN
//!                                    tma.store C, [cx*BN, cy*BM + wg*BM/consumers]
//!                                    store.wait 0
//!                                    exit
//! ```
//!
//! # Persistent kernels and grouped rasterisation
//!
//! With `persistent`, the grid is `min(ctas, tiles)` CTAs and each CTA
//! loops over the tiles `t = cta + l0 * grid` (an outer loop around the
//! K loop, `g = l0 * K/BK + l1`); before each tile's store it waits for the
//! previous tile's store to drain the C staging buffer. `group_m > 1`
//! orders the tiles as Triton's grouped matmul does: `group_m` row blocks
//! are swept column by column before the next band, and when `group_m`
//! does not divide the row blocks the last band is the `r = (M/BM) %
//! group_m` rows left, swept column by column too. Without `persistent`
//! this is the kernel's [`CtaOrder::Grouped`] launch order; with it, the
//! tile index is decomposed by the expressions themselves: in the full
//! bands `pid_n = (t / group_m) % (N/BN)` and `pid_m = t / (group_m *
//! N/BN) * group_m + t % group_m`; in the last band, with `u = t - F` (`F`
//! the full bands' tiles), `pid_m = F / (N/BN) + u % r` and `pid_n = u /
//! r`. A kernel with both kinds of tile runs each tile's body inside a
//! loop of 0 or 1 trips, `(F - 1 - t + T + 1) / (T + 1)` for the full
//! bands and `(t - F + T + 1) / (T + 1)` for the last (`T` tiles), which
//! puts its K loop at depth 2 (`g = l0 * K/BK + l2`). Because an
//! expression has a single division, the A and C tensor maps of a
//! persistent kernel view the row dimension as `[BM, group_m,
//! ceil(M/(BM*group_m))]` (rank 4, same base and strides, so the same
//! addresses as the row-major 2-D map).
//!
//! # Stream-K
//!
//! With `stream_k`, the persistent CTAs share out the tiles' K iterations
//! instead of the tiles, a CTA that ends inside a tile handing its partial
//! sums to the CTA that began it; each CTA's share is its own, so the
//! roles are streamed from per-segment programs ([`stream_k`], whose
//! source [`gemm_source`] gives).
//!
//! # The epilogue
//!
//! [`Epilogue::Tma`] (the default of [`GemmParams::new`], the paper's
//! kernel) stages C in shared memory and writes it with `tma.store`, as
//! above. [`Epilogue::Registers`] (the default of `simfa gemm`, sweeps and
//! Python, as fast.cu's kernels do) replaces the store with
//! `st.global C, [...], 16`: each consumer stores its rows straight from
//! registers in 16-byte sector requests, which the SM's store path takes
//! at `store_request_cycles` each; no shared memory is set aside for C
//! and a persistent kernel does not drain a staging buffer between tiles.
//! `wgmma_n` narrows the WGMMAs (fast.cu's kernel 2 covers a 128-column
//! tile with two m64n64k16 per k-step).
//!
//! # Calibration bubbles
//!
//! `prologue_bubble` (once per CTA, at the start of every WarpGroup that
//! issues WGMMA) and `iter_bubble` (per BK=64 iteration, scaled by
//! `block_k / 64`, after each iteration's WGMMAs complete) are the paper's
//! section V-B3 frontend constants; [`Calibration::H800`](super::Calibration::H800) holds the H800
//! fit and [`GemmParams::h800_calibrated`] applies it. Both default to 0.

use simfa_core::builder::Builder;
use simfa_core::kernel::Name;
use simfa_core::source::SourceError;
use simfa_core::{Cluster, CtaOrder, Expr, Instr, Kernel, Op, Ref, StreamSource, TensorMap};

use super::gemm_params::{Epilogue, GemmParams, ELEM_BYTES, PRODUCER_REGS};
use super::{GenError, Kb};

/// Global address of A.
pub const A_BASE: u64 = 0x1000_0000;
/// Alignment of the tensors after A.
pub const TENSOR_ALIGN: u64 = 1 << 20;

/// `s` as a kernel or tensor-map name, cut to the 24 bytes a name holds.
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

/// The same row-major `rows x cols` tensor as [`map2d`], its rows viewed as
/// `[block, group, rows / (block * group)]` (rank 4): element `(c, r, g, b)`
/// is row `r + block * (g + group * b)`, at the same address.
fn map_grouped(
    nm: &str,
    base: u64,
    (rows, cols): (u32, u32),
    (block, group): (u32, u32),
    (box_cols, box_rows): (u32, u32),
) -> TensorMap {
    let e = ELEM_BYTES as u64;
    let row = cols as u64 * e;
    TensorMap {
        name: name(nm),
        base,
        elem_bytes: ELEM_BYTES as u8,
        rank: 4,
        dims: [
            cols as u64,
            block as u64,
            group as u64,
            rows as u64 / (block as u64 * group as u64),
            0,
        ],
        strides: [
            e,
            row,
            row * block as u64,
            row * block as u64 * group as u64,
            0,
        ],
        boxdim: [box_cols, box_rows, 1, 1, 0],
    }
}

fn after(base: u64, bytes: u64) -> u64 {
    (base + bytes).div_ceil(TENSOR_ALIGN) * TENSOR_ALIGN
}

/// Global bases of A, B and C for `p`.
pub fn tensor_bases(p: &GemmParams) -> [u64; 3] {
    let e = ELEM_BYTES as u64;
    let b = after(A_BASE, p.m as u64 * p.k as u64 * e);
    let c = after(b, p.k as u64 * p.n as u64 * e);
    [A_BASE, b, c]
}

/// An expression with only a loop-counter term.
fn lc(l: [i64; 4]) -> Expr {
    Expr {
        l,
        ..Expr::constant(0)
    }
}

/// The operands of one kind of tile a program computes: the box origins
/// of A, B and C, and, for a persistent kernel whose tiles come in two
/// kinds, the 0-or-1 trip count of the loop that runs the tile only when
/// it is of this kind.
struct Tile {
    /// The trip count of the loop guarding this kind (`None`: every tile).
    when: Option<Expr>,
    /// The maps of A and C this kind loads and stores through.
    map_a: u8,
    map_c: u8,
    /// Box origins of A, B and C.
    a: Vec<Expr>,
    b: Vec<Expr>,
    c: Vec<Expr>,
}

/// The operands every program shares, as expression ids.
struct Operands {
    /// Trip count of the tile loop (persistent only).
    tile_trips: Option<Expr>,
    /// Trip count of the K loop.
    k_trips: Expr,
    /// Ring slot `g % stages` (0 when `stages == 1`).
    slot: Expr,
    /// Phase parity of `full[slot]`.
    parity: Expr,
    /// The kinds of tile: one, or for a persistent kernel whose last
    /// group of row blocks is partial, the full groups' and the last
    /// group's.
    tiles: Vec<Tile>,
    /// Cluster dimensions the A and B loads multicast along, and the
    /// consumers release their stages along.
    a_multicast: u8,
    b_multicast: u8,
    release: u8,
}

/// `1` when the persistent tile `t` (an expression of the CTA and loop
/// counter 0) is at least `from`, else 0 (`below` false); or the
/// converse (`below` true): a loop of this count runs its body only for
/// those tiles. `span` exceeds every tile index.
fn tile_guard(t: Expr, from: i64, span: i64, below: bool) -> Expr {
    if below {
        // (from - 1 - t + span) / span
        Expr {
            k: from - 1 + span - t.k,
            cta: -t.cta,
            l: t.l.map(|c| -c),
            div: span,
            ..Expr::constant(0)
        }
    } else {
        Expr {
            k: t.k - from + span,
            div: span,
            ..t
        }
    }
}

fn operands(p: &GemmParams) -> Operands {
    let z = Expr::constant(0);
    let (bm, bn, bk) = (p.block_m as i64, p.block_n as i64, p.block_k as i64);
    let kt = p.k_iters_per_cta() as i64;
    let s = p.stages as i64;
    let split = p.two_tile_kinds();
    // The global iteration count g and the K-loop counter: a persistent
    // kernel's K loop is inside its tile loop and, when its tiles come in
    // two kinds, inside the 0-or-1 loop that picks the kind.
    let kl = match (p.persistent, split) {
        (false, _) => 0,
        (true, false) => 1,
        (true, true) => 2,
    };
    let mut g = lc([0; 4]);
    g.l[kl] = 1;
    if p.persistent {
        g.l[0] = kt;
    }
    let mut k_off = lc([0; 4]);
    k_off.l[kl] = bk;
    if p.split_k > 1 {
        // K slice z starts at iteration z * K/BK / split_k.
        k_off.c[2] = kt * bk;
    }
    let slot = if s == 1 { z } else { Expr { rem: s, ..g } };
    let parity = Expr {
        div: if s == 1 { 0 } else { s },
        rem: 2,
        ..g
    };
    let h = p.rows_per_consumer() as i64;
    let wg_rows = if p.consumers > 1 { h } else { 0 };
    let shared = |tiles| Operands {
        tile_trips: None,
        k_trips: Expr::constant(kt),
        slot,
        parity,
        tiles,
        a_multicast: 0,
        b_multicast: 0,
        release: 0,
    };
    if !p.persistent {
        let row = Expr { c: [0, bm, 0], ..z };
        let col = Expr { c: [bn, 0, 0], ..z };
        let c_row = Expr { wg: wg_rows, ..row };
        return shared(vec![Tile {
            when: None,
            map_a: MAP_A,
            map_c: MAP_C,
            a: vec![k_off, row],
            b: vec![col, k_off],
            c: vec![col, c_row],
        }]);
    }
    let grid = p.grid_ctas() as i64;
    let tiles = p.tiles() as i64;
    let gm = p.group_m as i64;
    let npn = p.tiles_n() as i64;
    // t = cta + l0 * grid
    let t = Expr {
        cta: 1,
        l: [grid, 0, 0, 0],
        ..z
    };
    let c_rows = Expr { wg: wg_rows, ..z };
    let mut kinds = Vec::new();
    // Tiles before the last group (all of them unless it is apart).
    let before = p.grouped_tiles() as i64;
    if before > 0 {
        // pid_m = t / (gm * npn) * gm + t % gm, pid_n = t / gm % npn,
        // through the maps' [BM, group, bands] rows.
        let within = if gm == 1 { z } else { Expr { rem: gm, ..t } };
        let band = Expr { div: gm * npn, ..t };
        let col = Expr {
            div: if gm == 1 { 0 } else { gm },
            rem: npn,
            mul: bn,
            ..t
        };
        kinds.push(Tile {
            when: (before < tiles).then(|| tile_guard(t, before, tiles + 1, true)),
            map_a: MAP_A,
            map_c: MAP_C,
            a: vec![k_off, z, within, band],
            b: vec![col, k_off],
            c: vec![col, c_rows, within, band],
        });
    }
    if before < tiles {
        // The last group, of r row blocks, through maps based at its first
        // row: with u = t - before, pid_m - first = u % r, pid_n = u / r,
        // and consumer wg's rows (u * consumers + wg) % (r * consumers) * h.
        let r = p.last_group_rows() as i64;
        let u = Expr { k: -before, ..t };
        let cons = p.consumers as i64;
        let c_row = if cons > 1 {
            Expr {
                k: u.k * cons,
                cta: cons,
                l: u.l.map(|c| c * cons),
                wg: 1,
                rem: r * cons,
                mul: h,
                ..z
            }
        } else {
            Expr {
                rem: r,
                mul: bm,
                ..u
            }
        };
        let col = Expr {
            div: r,
            mul: bn,
            ..u
        };
        kinds.push(Tile {
            when: (before > 0).then(|| tile_guard(t, before, tiles + 1, false)),
            // With no group before it, the last group's maps are the
            // row-major 2-D maps of A and C.
            map_a: if before > 0 { MAP_A_LAST } else { MAP_A },
            map_c: if before > 0 { MAP_C_LAST } else { MAP_C },
            a: vec![
                k_off,
                Expr {
                    rem: r,
                    mul: bm,
                    ..u
                },
            ],
            b: vec![col, k_off],
            c: vec![col, c_row],
        });
    }
    Operands {
        tile_trips: Some(Expr {
            k: tiles - 1 + grid,
            cta: -1,
            div: grid,
            ..z
        }),
        ..shared(kinds)
    }
}

/// The CTA's rank along the cluster's M and N sides, and the cluster
/// dimension each side lies along (`1 << d`, 0 for a side of one CTA): a
/// non-persistent kernel's `[cluster_n, cluster_m, 1]` clusters follow the
/// grid's tile columns and rows; a persistent kernel's `[size, 1, 1]`
/// clusters take consecutive tiles of its order, which share a column
/// (along M, down a group) or a row (along N, row-major).
fn cluster_ranks(p: &GemmParams) -> ((Expr, u8), (Expr, u8)) {
    let z = Expr::constant(0);
    let (cm, cn) = (p.cluster_m as i64, p.cluster_n as i64);
    let side = |n: i64, bit: u8| if n > 1 { bit } else { 0 };
    if p.persistent {
        let rank = Expr {
            cta: 1,
            rem: cm * cn,
            ..z
        };
        ((rank, side(cm, 1)), (rank, side(cn, 1)))
    } else {
        let m = Expr {
            c: [0, 1, 0],
            rem: cm,
            ..z
        };
        let n = Expr {
            c: [1, 0, 0],
            rem: cn,
            ..z
        };
        ((m, side(cm, 2)), (n, side(cn, 1)))
    }
}

/// `m` with dimension `d` (its box covering `block` elements of it) cut
/// into `[block, dims[d] / block]`: coordinate `c` of it becomes
/// `(0, c / block)`, at the same address.
fn block_dim(m: &TensorMap, d: usize, block: u32) -> TensorMap {
    let mut out = m.clone();
    let r = m.rank as usize;
    for i in (d + 1..=r).rev() {
        out.dims[i] = m.dims[i - 1];
        out.strides[i] = m.strides[i - 1];
        out.boxdim[i] = m.boxdim[i - 1];
    }
    out.dims[d] = block as u64;
    out.boxdim[d] = block;
    out.dims[d + 1] = m.dims[d] / block as u64;
    out.strides[d + 1] = m.strides[d] * block as u64;
    out.boxdim[d + 1] = 1;
    out.rank += 1;
    out
}

/// `m` with its box along dimension `d` (the whole of that dimension)
/// split into `parts` slices: dimension `d` becomes `[dims / parts,
/// parts]` and the box one slice, whose index is the new coordinate
/// `d + 1`.
fn slice_dim(m: &TensorMap, d: usize, parts: u32) -> TensorMap {
    let mut out = block_dim(m, d, (m.dims[d] / parts as u64) as u32);
    out.boxdim[d] = m.boxdim[d] / parts;
    out
}

/// The clustered kernel's A and B maps and load operands: the multicast
/// operand of each side of more than one CTA is cut into one slice per
/// CTA of that side, each CTA loading its slice for all of them.
fn clustered(p: &GemmParams, maps: &mut [TensorMap], ops: &mut Operands) {
    let ((rank_m, m_dim), (rank_n, n_dim)) = cluster_ranks(p);
    let z = Expr::constant(0);
    if p.cluster_n > 1 {
        // A's rows as [block_m, group, bands] (a non-persistent kernel's
        // 2-D map first), then the block's rows in cluster_n slices.
        if !p.persistent {
            maps[0] = block_dim(&block_dim(&maps[0], 1, p.block_m), 2, 1);
        }
        maps[0] = slice_dim(&maps[0], 1, p.cluster_n);
        for t in &mut ops.tiles {
            if !p.persistent {
                let cy = Expr { c: [0, 1, 0], ..z };
                t.a = vec![t.a[0], z, z, cy];
            }
            t.a.insert(2, rank_n);
        }
        ops.a_multicast = n_dim;
    }
    if p.cluster_m > 1 {
        // B's rows (K) as [block_k, K / block_k], the block in slices.
        maps[1] = slice_dim(&block_dim(&maps[1], 1, p.block_k), 1, p.cluster_m);
        for t in &mut ops.tiles {
            let mut k_iter = t.b[1];
            k_iter.l = k_iter.l.map(|c| c / p.block_k as i64);
            t.b = vec![t.b[0], z, rank_m, k_iter];
        }
        ops.b_multicast = m_dim;
    }
    ops.release = ops.a_multicast | ops.b_multicast;
}

/// The coordinate operand of a TMA instruction on `map`: the first `rank`
/// expressions, unused slots constant 0, numbered as the text assembly
/// numbers them (coordinates first, then the 0).
fn coords(k: &mut Kb, map: u8, es: &[Expr]) -> Result<[u16; 5], GenError> {
    let rank = k.kernel().maps[map as usize].rank as usize;
    Ok(k.coords(&es[..rank])?)
}

fn bubble(k: &mut Kb, cycles: u64) -> Result<(), GenError> {
    if cycles > 0 {
        k.op(Instr::Bubble {
            cycles: cycles as u32,
        })?;
    }
    Ok(())
}

/// Map indices of A, B, C.
const MAP_A: u8 = 0;
const MAP_B: u8 = 1;
const MAP_C: u8 = 2;
/// Map indices of A and C from the last group's first row (a persistent
/// kernel whose last group is apart).
const MAP_A_LAST: u8 = 3;
const MAP_C_LAST: u8 = 4;
/// Declaration indices of `full` (mbarriers) and `empty` (stages).
const FULL: u8 = 0;
const EMPTY: u8 = 0;

/// The TMA half of an iteration: arm `full[slot]`, load A and B, arrive.
fn emit_loads(k: &mut Kb, ops: &Operands, tile: &Tile, bytes: u32) -> Result<(), GenError> {
    let slot = k.expr(ops.slot)?;
    let full = Ref {
        decl: FULL,
        idx: slot,
    };
    k.op(Instr::MbarExpectTx { bar: full, bytes })?;
    let a = coords(k, tile.map_a, &tile.a)?;
    k.op(Instr::TmaLoad {
        map: tile.map_a,
        bar: full,
        coords: a,
        multicast: ops.a_multicast,
    })?;
    let b = coords(k, MAP_B, &tile.b)?;
    k.op(Instr::TmaLoad {
        map: MAP_B,
        bar: full,
        coords: b,
        multicast: ops.b_multicast,
    })?;
    k.op(Instr::MbarArrive { bar: full })?;
    Ok(())
}

/// The MMA half of an iteration: wait for `full[slot]`, the WGMMAs, drain.
fn emit_mma(k: &mut Kb, p: &GemmParams, ops: &Operands) -> Result<(), GenError> {
    let slot = k.expr(ops.slot)?;
    let parity = k.expr(ops.parity)?;
    let full = Ref {
        decl: FULL,
        idx: slot,
    };
    k.op(Instr::MbarWait { bar: full, parity })?;
    for _ in 0..p.wgmmas_per_iter() {
        k.op(Instr::Wgmma {
            n: p.mma_n() as u16,
            mode: simfa_core::WgmmaMode::Ss,
        })?;
    }
    k.op(Instr::WgmmaCommit)?;
    k.op(Instr::WgmmaWait { n: 0 })?;
    Ok(())
}

/// The epilogue of one tile: convert the WarpGroup's FP32 accumulator to
/// FP16 on the SM's shared units (one FP16 result per element), then store
/// C: by TMA (a persistent kernel first drains the previous tile's store
/// from the staging buffer) or from registers.
fn emit_store(k: &mut Kb, p: &GemmParams, tile: &Tile) -> Result<(), GenError> {
    let elems = p.rows_per_consumer() * p.block_n;
    k.op(Instr::Compute {
        work: simfa_core::Work {
            fp16: elems,
            ..simfa_core::Work::default()
        },
    })?;
    match p.epilogue {
        Epilogue::Tma => {
            if p.persistent {
                k.op(Instr::StoreWait { n: 0 })?;
            }
            let c = coords(k, tile.map_c, &tile.c)?;
            k.op(Instr::TmaStore {
                map: tile.map_c,
                coords: c,
            })?;
        }
        Epilogue::Registers => {
            let c = coords(k, tile.map_c, &tile.c)?;
            k.op(Instr::StGlobal {
                map: tile.map_c,
                coords: c,
                segment: Epilogue::STORE_SEGMENT,
            })?;
        }
    }
    Ok(())
}

/// Bytes per element of split-K's FP32 partial sums.
const PARTIAL_BYTES: u32 = 4;

/// Global base of split-K's workspace, after C.
pub fn workspace_base(p: &GemmParams) -> u64 {
    after(
        tensor_bases(p)[2],
        p.m as u64 * p.n as u64 * ELEM_BYTES as u64,
    )
}

/// Split-K's workspace: the FP32 partial sums of C, one `M x N` plane per
/// K slice (the first slice's unused), a consumer's rows per box.
fn workspace_map(p: &GemmParams) -> TensorMap {
    let e = PARTIAL_BYTES as u64;
    let plane = p.m as u64 * p.n as u64 * e;
    TensorMap {
        name: name("W"),
        base: workspace_base(p),
        elem_bytes: PARTIAL_BYTES as u8,
        rank: 3,
        dims: [p.n as u64, p.m as u64, p.split_k as u64, 0, 0],
        strides: [e, p.n as u64 * e, plane, 0, 0],
        boxdim: [p.block_n, p.rows_per_consumer(), 1, 0, 0],
    }
}

/// What a split-K kernel declares: the workspace map, the `partials`
/// stages and the `reduce` mbarriers.
#[derive(Clone, Copy)]
struct SplitK {
    map: u8,
    partials: u8,
    reduce: u8,
}

/// The end of a tile for a consumer (or the single WarpGroup): its store
/// of C; with split-K, in the first K slice after adding the others'
/// partial sums, in every other slice the write of its own.
///
/// ```text
/// loop (split_k - 1 + z) / split_k {     ; slices z >= 1
///     st.global W, [col, rows, z], 16    ; FP32 partial sums
///     store.wait 0
///     stage.release partials[wg], cluster z
/// }
/// loop 1 - z {                           ; slice 0
///     stage.acquire partials[wg]         ; claims the stage
///     stage.acquire partials[wg]         ; every other slice released it
///     mbar.expect_tx reduce[wg], (split_k - 1) * rows * BN * 4
///     loop split_k - 1 { ld.global W, reduce[wg], [col, rows, l + 1], 16 }
///     mbar.arrive reduce[wg]
///     mbar.wait reduce[wg], 0
///     compute fp32 = (split_k - 1) * rows * BN
///     (the store of C)
/// }
/// ```
fn emit_epilogue(
    k: &mut Kb,
    p: &GemmParams,
    tile: &Tile,
    split: Option<SplitK>,
) -> Result<(), GenError> {
    let Some(sk) = split else {
        return emit_store(k, p, tile);
    };
    let z = Expr::constant(0);
    let s = p.split_k as i64;
    let wg = Expr { wg: 1, ..z };
    let w = |k: &mut Kb, slice: Expr| -> Result<[u16; 5], GenError> {
        coords(k, sk.map, &[tile.c[0], tile.c[1], slice])
    };
    // The other slices: write, drain, release along z.
    let others = k.loop_begin(Expr {
        k: s - 1,
        c: [0, 0, 1],
        div: s,
        ..z
    })?;
    let c = w(k, Expr { c: [0, 0, 1], ..z })?;
    k.op(Instr::StGlobal {
        map: sk.map,
        coords: c,
        segment: Epilogue::STORE_SEGMENT,
    })?;
    k.op(Instr::StoreWait { n: 0 })?;
    let stage = Ref {
        decl: sk.partials,
        idx: k.expr(wg)?,
    };
    k.op(Instr::StageRelease { stage, cluster: 4 })?;
    k.loop_end(others)?;
    // The first slice: wait for the others, add their sums, store C.
    let first = k.loop_begin(Expr {
        k: 1,
        c: [0, 0, -1],
        ..z
    })?;
    k.op(Instr::StageAcquire { stage })?;
    k.op(Instr::StageAcquire { stage })?;
    let bar = Ref {
        decl: sk.reduce,
        idx: k.expr(wg)?,
    };
    // Slice i + 1's partial sums of the consumer's rows.
    emit_reduce(k, p, tile, (sk.map, bar), s as u32 - 1, |i| {
        [tile.c[0], tile.c[1], Expr { k: 1, ..i }]
    })?;
    k.loop_end(first)?;
    Ok(())
}

/// Adds `n` FP32 partial sums to a consumer's accumulator and stores C
/// (split-K's first slice, stream-K's fix-up): loads them through
/// workspace map `w.0` into mbarrier `w.1`, the `i`-th at box `at(i)` (`i`
/// the expression of the loads' loop counter), waits for them, adds them
/// on the FP32 units, then stores the tile.
fn emit_reduce(
    k: &mut Kb,
    p: &GemmParams,
    tile: &Tile,
    (map, bar): (u8, Ref),
    n: u32,
    at: impl Fn(Expr) -> [Expr; 3],
) -> Result<(), GenError> {
    let z = Expr::constant(0);
    let elems = p.rows_per_consumer() * p.block_n;
    k.op(Instr::MbarExpectTx {
        bar,
        bytes: n * elems * PARTIAL_BYTES,
    })?;
    // The loads' loop counter is the next depth's.
    let mut i = z;
    i.l[k.depth()] = 1;
    let loads = k.loop_begin(Expr::constant(n as i64))?;
    let c = coords(k, map, &at(i))?;
    k.op(Instr::LdGlobal {
        map,
        bar,
        coords: c,
        segment: Epilogue::STORE_SEGMENT,
        // Each partial is read once: the L1 would hold nothing reused.
        l1: false,
    })?;
    k.loop_end(loads)?;
    k.op(Instr::MbarArrive { bar })?;
    let parity = k.expr(z)?;
    k.op(Instr::MbarWait { bar, parity })?;
    k.op(Instr::Compute {
        work: simfa_core::Work {
            fp32: n * elems,
            ..simfa_core::Work::default()
        },
    })?;
    emit_store(k, p, tile)
}

/// Emits `body` for each kind of tile: once, inside the persistent tile
/// loop when there is one, each kind in the 0-or-1 loop that picks it.
fn each_tile(
    k: &mut Kb,
    ops: &Operands,
    mut body: impl FnMut(&mut Kb, &Tile) -> Result<(), GenError>,
) -> Result<(), GenError> {
    let tiles = ops.tile_trips.map(|t| k.loop_begin(t)).transpose()?;
    for tile in &ops.tiles {
        let when = tile.when.map(|w| k.loop_begin(w)).transpose()?;
        body(k, tile)?;
        if let Some(w) = when {
            k.loop_end(w)?;
        }
    }
    if let Some(t) = tiles {
        k.loop_end(t)?;
    }
    Ok(())
}

/// Builds the GEMM kernel `gemm_MxNxK` (the name is cut to the 24
/// characters a kernel name holds) described by `p`, after checking every
/// parameter ([`GemmParams::validate`]); the kernel is validated before it
/// is returned. The default parameters build the paper's kernel.
pub fn gemm(p: &GemmParams) -> Result<Kernel, GenError> {
    p.validate()?;
    if p.stream_k {
        return stream_k::kernel(p);
    }
    let (cm, cn) = (p.cluster_m as u8, p.cluster_n as u8);
    let cluster = Cluster {
        dims: if p.persistent {
            [cm * cn, 1, 1]
        } else {
            [cn, cm, p.split_k as u8]
        },
    };
    let mut b = Builder::new(
        Kernel {
            cluster,
            ..Kernel::default()
        },
        &name(&format!("gemm_{}x{}x{}", p.m, p.n, p.k)),
    )?;
    let k = &mut b;
    k.grid(if p.persistent {
        [p.grid_ctas().min(u32::MAX as u64) as u32, 1, 1]
    } else {
        [p.tiles_n(), p.tiles_m(), p.split_k]
    });
    k.order(if p.group_m > 1 && !p.persistent {
        // Clusters follow the order over the grid of clusters.
        CtaOrder::Grouped {
            rows: p.group_m / p.cluster_m,
        }
    } else {
        CtaOrder::Linear
    });
    k.smem(p.smem_bytes() as u32);
    let [a_base, b_base, c_base] = tensor_bases(p);
    let (bm, bn, bk, h) = (p.block_m, p.block_n, p.block_k, p.rows_per_consumer());
    let mut maps = if p.persistent && p.grouped_tiles() > 0 {
        // The grouped view covers the rows before the last group when
        // that is apart.
        let g = (bm, p.group_m);
        let rows = if p.last_group_apart() {
            p.last_group_first() * bm
        } else {
            p.m
        };
        vec![
            map_grouped("A", a_base, (rows, p.k), g, (bk, bm)),
            map2d("B", b_base, p.k, p.n, bn, bk),
            map_grouped("C", c_base, (rows, p.n), g, (bn, h)),
        ]
    } else {
        vec![
            map2d("A", a_base, p.m, p.k, bk, bm),
            map2d("B", b_base, p.k, p.n, bn, bk),
            map2d("C", c_base, p.m, p.n, bn, h),
        ]
    };
    if p.two_tile_kinds() {
        let first = p.last_group_first() as u64 * bm as u64;
        let e = ELEM_BYTES as u64;
        let rows = p.m - first as u32;
        let (a_at, c_at) = (first * p.k as u64 * e, first * p.n as u64 * e);
        maps.push(map2d("A_last", a_base + a_at, rows, p.k, bk, bm));
        maps.push(map2d("C_last", c_base + c_at, rows, p.n, bn, h));
    }
    let split = (p.split_k > 1).then(|| {
        maps.push(workspace_map(p));
        SplitK {
            map: maps.len() as u8 - 1,
            // After the ring's `empty` and `full`.
            partials: (p.stages >= 2) as u8,
            reduce: FULL + 1,
        }
    });
    let mut ops = operands(p);
    if p.cluster_size() > 1 {
        clustered(p, &mut maps, &mut ops);
    }
    for m in maps {
        k.map(m)?;
    }
    k.mbarriers("full", p.stages as u16, 1)?;
    if p.stages >= 2 {
        // Every consumer of every CTA of the cluster releases each stage.
        let releases = p.consumers * p.cluster_size();
        k.stages("empty", p.stages as u16, releases as u16)?;
    }
    if p.split_k > 1 {
        // One per consumer of the first K slice, released by the same
        // consumer of each other slice; one mbarrier per consumer for its
        // loads of their partial sums.
        k.stages("partials", p.consumers as u16, p.split_k as u16 - 1)?;
        k.mbarriers("reduce", p.consumers as u16, 1)?;
    }
    let bytes = p.stage_bytes() as u32;
    let iter_bubble = p.iter_bubble_cycles();

    if p.stages == 1 {
        // One WarpGroup loads and computes; expressions are numbered in
        // order of first use, as the text assembly numbers them.
        k.begin_role("main", 1, p.mma_regs())?;
        bubble(k, p.prologue_bubble as u64)?;
        each_tile(k, &ops, |k, tile| {
            let kl = k.loop_begin(ops.k_trips)?;
            emit_loads(k, &ops, tile, bytes)?;
            emit_mma(k, p, &ops)?;
            bubble(k, iter_bubble)?;
            k.loop_end(kl)?;
            emit_epilogue(k, p, tile, split)
        })?;
        k.op(Instr::StoreWait { n: 0 })?;
        k.op(Instr::Exit)?;
        k.end_role()?;
    } else {
        let empty = |k: &mut Kb| -> Result<Ref, GenError> {
            Ok(Ref {
                decl: EMPTY,
                idx: k.expr(ops.slot)?,
            })
        };
        // producer
        k.begin_role("producer", 1, PRODUCER_REGS as u32)?;
        each_tile(k, &ops, |k, tile| {
            let kl = k.loop_begin(ops.k_trips)?;
            let stage = empty(k)?;
            k.op(Instr::StageAcquire { stage })?;
            emit_loads(k, &ops, tile, bytes)?;
            k.loop_end(kl)?;
            Ok(())
        })?;
        k.op(Instr::Exit)?;
        k.end_role()?;
        // consumers
        k.begin_role("consumer", p.consumers, p.mma_regs())?;
        bubble(k, p.prologue_bubble as u64)?;
        each_tile(k, &ops, |k, tile| {
            let kl = k.loop_begin(ops.k_trips)?;
            emit_mma(k, p, &ops)?;
            let stage = empty(k)?;
            k.op(Instr::StageRelease {
                stage,
                cluster: ops.release,
            })?;
            bubble(k, iter_bubble)?;
            k.loop_end(kl)?;
            emit_epilogue(k, p, tile, split)
        })?;
        k.op(Instr::StoreWait { n: 0 })?;
        k.op(Instr::Exit)?;
        k.end_role()?;
    }
    Ok(b.finish()?)
}

#[path = "gemm_stream_k.rs"]
pub mod stream_k;

/// The source of a GEMM kernel's streamed roles: stream-K's
/// ([`stream_k::StreamK`]); none for every other kernel, whose roles run
/// programs.
pub struct GemmSource(Option<stream_k::StreamK>);

impl GemmSource {
    /// No source: a kernel without stream roles.
    pub const NONE: GemmSource = GemmSource(None);
}

/// The source [`gemm`]'s kernel of `p` runs with.
pub fn gemm_source(p: &GemmParams) -> GemmSource {
    GemmSource(p.stream_k.then(|| stream_k::StreamK::new(p)))
}

impl StreamSource for GemmSource {
    fn pull(&mut self, cta: u32, role: u8, wg: u8, pos: u64) -> Result<Option<Op>, SourceError> {
        match &mut self.0 {
            Some(s) => s.pull(cta, role, wg, pos),
            None => Err(SourceError),
        }
    }

    fn is_present(&self) -> bool {
        self.0.is_some()
    }
}

#[cfg(test)]
#[path = "gemm_tests.rs"]
mod tests;

#[cfg(test)]
#[path = "gemm_cluster_tests.rs"]
mod cluster_tests;

#[cfg(test)]
#[path = "gemm_raster_tests.rs"]
mod raster_tests;

#[cfg(test)]
#[path = "gemm_split_tests.rs"]
mod split_tests;
