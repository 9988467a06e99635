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
//! are swept column by column before the next band. Without `persistent`
//! this is the kernel's [`CtaOrder::Grouped`] launch order; with it, the
//! tile index is decomposed by the expressions themselves:
//! `pid_n = (t / group_m) % (N/BN)` and
//! `pid_m = t / (group_m * N/BN) * group_m + t % group_m`. Because an expression has a single division, the A and C
//! tensor maps of a persistent kernel view the row dimension as
//! `[BM, group_m, M/(BM*group_m)]` (rank 4, same base and strides, so the
//! same addresses as the row-major 2-D map).
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
//! section V-B3 frontend constants; [`Calibration::H800`] holds the H800
//! fit and [`GemmParams::h800_calibrated`] applies it. Both default to 0.

use simfa_core::builder::Builder;
use simfa_core::kernel::Name;
use simfa_core::{CtaOrder, Expr, Instr, Kernel, Ref, TensorMap};

use super::{GenError, Kb};

/// Default tile rows (M).
pub const TILE_M: u32 = 128;
/// Default tile columns (N).
pub const TILE_N: u32 = 128;
/// Default tile depth (K) per main-loop iteration.
pub const TILE_K: u32 = 64;
/// Bytes per FP16 element.
pub const ELEM_BYTES: u32 = 2;
/// Shared memory per CTA of the default kernel: the A and B tiles of one
/// iteration (32 KiB) and the C tile staged for the store (32 KiB).
pub const SMEM_BYTES: u32 = 65536;
/// Registers per thread of the default kernel's `main` role.
pub const REGS: u16 = 168;
/// Registers per thread of the `producer` role of a pipelined kernel.
pub const PRODUCER_REGS: u16 = 40;
/// Registers per thread a WGMMA-issuing WarpGroup needs beyond its FP32
/// accumulator (addresses, loop state, descriptors).
pub const REG_OVERHEAD: u32 = 40;
/// Most registers per thread (Hopper).
pub const MAX_REGS_PER_THREAD: u32 = 255;
/// Registers per SM (Hopper).
pub const REGS_PER_SM: u32 = 65536;
/// Most shared memory per CTA (Hopper, 227 KiB).
pub const MAX_SMEM_PER_CTA: u32 = 227 * 1024;
/// Most ring stages (the kernel model's stage capacity).
pub const MAX_STAGES: u32 = simfa_core::kernel::MAX_STAGES as u32;
/// Most consumer WarpGroups of a pipelined kernel.
pub const MAX_CONSUMERS: u32 = 3;
/// SMs of an H800: the default CTA count of a persistent kernel.
pub const H800_SMS: u32 = 132;
/// Rows of one WGMMA (m64nNk16).
pub const WGMMA_M: u32 = 64;
/// Depth of one WGMMA (m64nNk16).
pub const WGMMA_K: u32 = 16;
/// Global address of A.
pub const A_BASE: u64 = 0x1000_0000;
/// Alignment of the tensors after A.
pub const TENSOR_ALIGN: u64 = 1 << 20;

/// The frontend calibration of section V-B3: cycles the simulator does not
/// otherwise charge, added as bubbles.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Calibration {
    /// Fixed prologue/epilogue cycles per CTA (CTA admission, setmaxnreg,
    /// mbarrier and tensor-map setup, store drain).
    pub prologue: u32,
    /// Residual cycles per BK=64 main-loop iteration (TMA-unit issue
    /// pipeline, optimism of the N/2 WGMMA law in a tight loop).
    pub per_iter_bk64: u32,
}

impl Calibration {
    /// No calibration: both bubbles 0.
    pub const NONE: Calibration = Calibration {
        prologue: 0,
        per_iter_bk64: 0,
    };

    /// The paper's H800 fit (1830 MHz, OLS on K = 512..4096): 4314 cycles
    /// and 330 cycles per BK=64 iteration.
    pub const H800: Calibration = Calibration {
        prologue: 4314,
        per_iter_bk64: 330,
    };

    /// `p` with this calibration's bubbles.
    pub const fn apply(&self, p: GemmParams) -> GemmParams {
        GemmParams {
            prologue_bubble: self.prologue,
            iter_bubble: self.per_iter_bk64,
            ..p
        }
    }
}

/// How a GEMM writes its C tile.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Epilogue {
    /// Stage the converted tile in shared memory and write it with a TMA
    /// store (the paper's kernel, CUTLASS's and cuBLAS's Hopper GEMMs).
    #[default]
    Tma,
    /// Store the converted accumulator straight from registers
    /// (`st.global`), as fast.cu's kernels do: every warp store instruction
    /// writes 16-byte runs, one sector request each (the accumulator's
    /// rows in bf16x2 pairs, or element by element down a column-major C),
    /// and no shared memory is set aside for C.
    Registers,
}

impl Epilogue {
    /// Bytes of C one sector request of the register epilogue carries.
    pub const STORE_SEGMENT: u8 = 16;
}

/// The problem shape of a GEMM and the kernel that computes it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct GemmParams {
    /// Rows of A and C.
    pub m: u32,
    /// Columns of B and C.
    pub n: u32,
    /// Columns of A, rows of B.
    pub k: u32,
    /// Tile rows: a multiple of 64 in 64..=256 (default 128).
    pub block_m: u32,
    /// Tile columns, the WGMMA N: a multiple of 8 in 8..=256 (default 128).
    pub block_n: u32,
    /// Tile depth per main-loop iteration: a multiple of 16 in 16..=256
    /// (default 64).
    pub block_k: u32,
    /// Ring stages: 1 (default) is the non-pipelined single-WarpGroup loop,
    /// 2..=64 a producer WarpGroup and a ring of that many stages.
    pub stages: u32,
    /// Consumer WarpGroups of a pipelined kernel (1 to 3), each computing
    /// `block_m / consumers` rows; must be 1 when `stages == 1`.
    pub consumers: u32,
    /// Launch `min(ctas, tiles)` CTAs that loop over the tiles instead of
    /// one CTA per tile.
    pub persistent: bool,
    /// CTAs of a persistent kernel (usually the SM count; default
    /// [`H800_SMS`]); ignored otherwise.
    pub ctas: u32,
    /// Row blocks swept together by grouped rasterisation; 1 (default) is
    /// plain row-major order.
    pub group_m: u32,
    /// Cycles of prologue/epilogue work per CTA (default 0).
    pub prologue_bubble: u32,
    /// Cycles of residual work per BK=64 iteration, scaled by
    /// `block_k / 64` (default 0).
    pub iter_bubble: u32,
    /// How C is written (default [`Epilogue::Tma`]).
    pub epilogue: Epilogue,
    /// N of each WGMMA: `block_n` (0, the default) or a divisor of it that
    /// is a multiple of 8; a tile of `block_n` columns then takes
    /// `block_n / wgmma_n` WGMMAs side by side.
    pub wgmma_n: u32,
}

impl Default for GemmParams {
    /// 4096 x 4096 x 4096, the paper's kernel, no bubbles.
    fn default() -> Self {
        GemmParams::new(4096, 4096, 4096)
    }
}

fn bad(param: &'static str, problem: String) -> GenError {
    GenError::BadParam { param, problem }
}

/// A problem dimension: non-zero and, when it is the row length of a
/// tensor (`row` true: N and K), a whole number of 16-byte units, as TMA
/// needs for its global strides. It need not be a multiple of the tile:
/// edge tiles are clipped by TMA.
fn check(dim: &'static str, value: u32, row: bool) -> Result<(), GenError> {
    if value == 0 {
        return Err(GenError::Zero { dim });
    }
    let per16 = 16 / ELEM_BYTES;
    if row && value % per16 != 0 {
        return Err(GenError::NotMultiple {
            dim,
            value,
            tile: per16,
        });
    }
    Ok(())
}

fn check_block(param: &'static str, v: u32, step: u32) -> Result<(), GenError> {
    if v == 0 || v % step != 0 || v > 256 {
        return Err(bad(
            param,
            format!("{v} must be a multiple of {step} in {step}..=256"),
        ));
    }
    Ok(())
}

impl GemmParams {
    /// An `m x n x k` GEMM with every other parameter at its default.
    pub const fn new(m: u32, n: u32, k: u32) -> Self {
        GemmParams {
            m,
            n,
            k,
            block_m: TILE_M,
            block_n: TILE_N,
            block_k: TILE_K,
            stages: 1,
            consumers: 1,
            persistent: false,
            ctas: H800_SMS,
            group_m: 1,
            prologue_bubble: 0,
            iter_bubble: 0,
            epilogue: Epilogue::Tma,
            wgmma_n: 0,
        }
    }

    /// The default 4096^3 GEMM with the paper's H800 bubbles
    /// ([`Calibration::H800`]).
    pub const fn h800_calibrated() -> Self {
        Calibration::H800.apply(GemmParams::new(4096, 4096, 4096))
    }

    /// These parameters with `c`'s bubbles.
    pub const fn calibrated(self, c: Calibration) -> Self {
        c.apply(self)
    }

    /// Tile rows of C (`ceil(M / block_m)`; the last may be clipped).
    pub fn tiles_m(&self) -> u32 {
        self.m.div_ceil(self.block_m.max(1))
    }

    /// Tile columns of C (`ceil(N / block_n)`; the last may be clipped).
    pub fn tiles_n(&self) -> u32 {
        self.n.div_ceil(self.block_n.max(1))
    }

    /// Output tiles.
    pub fn tiles(&self) -> u64 {
        self.tiles_m() as u64 * self.tiles_n() as u64
    }

    /// Main-loop iterations per tile (`ceil(K / block_k)`; the last may be
    /// clipped).
    pub fn k_iters(&self) -> u32 {
        self.k.div_ceil(self.block_k.max(1))
    }

    /// CTAs launched: one per tile, or `min(ctas, tiles)` when persistent.
    pub fn grid_ctas(&self) -> u64 {
        if self.persistent {
            self.tiles().min(self.ctas as u64)
        } else {
            self.tiles()
        }
    }

    /// Floating-point operations: `2 * M * N * K`.
    pub fn flops(&self) -> u64 {
        2 * self.m as u64 * self.n as u64 * self.k as u64
    }

    /// The per-iteration bubble for this `block_k`: `iter_bubble * block_k /
    /// 64`, rounded to the nearest cycle.
    pub fn iter_bubble_cycles(&self) -> u64 {
        (self.iter_bubble as u64 * self.block_k as u64 + 32) / 64
    }

    /// Rows of the tile each WGMMA-issuing WarpGroup computes.
    pub fn rows_per_consumer(&self) -> u32 {
        self.block_m / self.consumers.max(1)
    }

    /// The N of each WGMMA: `wgmma_n`, or `block_n` when that is 0.
    pub fn mma_n(&self) -> u32 {
        if self.wgmma_n == 0 {
            self.block_n
        } else {
            self.wgmma_n
        }
    }

    /// WGMMAs (m64nNk16, N = [`GemmParams::mma_n`]) each WGMMA-issuing
    /// WarpGroup issues per main-loop iteration.
    pub fn wgmmas_per_iter(&self) -> u32 {
        self.rows_per_consumer() / WGMMA_M
            * (self.block_n / self.mma_n().max(1))
            * (self.block_k / WGMMA_K)
    }

    /// Bytes one stage holds: the A and B tiles of one iteration.
    pub fn stage_bytes(&self) -> u64 {
        (self.block_m as u64 + self.block_n as u64) * self.block_k as u64 * ELEM_BYTES as u64
    }

    /// Shared memory per CTA: `stages` stages plus, with the TMA
    /// epilogue, the C tile staged for the store.
    pub fn smem_bytes(&self) -> u64 {
        self.stages as u64 * self.stage_bytes() + self.c_staging_bytes()
    }

    /// Shared memory the C tile takes for a TMA store (0 for register
    /// stores).
    pub fn c_staging_bytes(&self) -> u64 {
        match self.epilogue {
            Epilogue::Tma => self.block_m as u64 * self.block_n as u64 * ELEM_BYTES as u64,
            Epilogue::Registers => 0,
        }
    }

    /// Registers per thread of a WGMMA-issuing WarpGroup: its FP32
    /// accumulator (`rows * block_n / 128`) plus [`REG_OVERHEAD`], rounded
    /// up to a multiple of 8.
    pub fn mma_regs(&self) -> u32 {
        let acc = self.rows_per_consumer() as u64 * self.block_n as u64 / 128;
        ((acc + REG_OVERHEAD as u64).div_ceil(8) * 8).min(u32::MAX as u64) as u32
    }

    /// Registers one CTA needs.
    pub fn regs_per_cta(&self) -> u64 {
        let mma = self.consumers as u64 * 128 * self.mma_regs() as u64;
        if self.stages >= 2 {
            mma + 128 * PRODUCER_REGS as u64
        } else {
            mma
        }
    }

    /// Checks every parameter; the errors name the parameter at fault.
    pub fn validate(&self) -> Result<(), GenError> {
        check_block("block_m", self.block_m, WGMMA_M)?;
        check_block("block_n", self.block_n, 8)?;
        check_block("block_k", self.block_k, WGMMA_K)?;
        check("M", self.m, false)?;
        check("N", self.n, true)?;
        check("K", self.k, true)?;
        if !(1..=MAX_STAGES).contains(&self.stages) {
            return Err(bad(
                "stages",
                format!("{} must be in 1..={MAX_STAGES}", self.stages),
            ));
        }
        if self.stages == 1 && self.consumers != 1 {
            return Err(bad(
                "consumers",
                format!(
                    "{} consumer WarpGroups need a producer: set stages >= 2 (stages = 1 has one WarpGroup)",
                    self.consumers
                ),
            ));
        }
        if !(1..=MAX_CONSUMERS).contains(&self.consumers) {
            return Err(bad(
                "consumers",
                format!("{} must be 1, 2 or 3", self.consumers),
            ));
        }
        if self.block_m % (self.consumers * WGMMA_M) != 0 {
            return Err(bad(
                "consumers",
                format!(
                    "block_m = {} rows cannot be split between {} WarpGroups of 64-row WGMMAs",
                    self.block_m, self.consumers
                ),
            ));
        }
        if self.group_m == 0 {
            return Err(bad("group_m", "0 must be at least 1".into()));
        }
        let n = self.mma_n();
        if n % 8 != 0 || n > self.block_n || self.block_n % n != 0 {
            return Err(bad(
                "wgmma_n",
                format!(
                    "{} must be a multiple of 8 that divides block_n = {}",
                    self.wgmma_n, self.block_n
                ),
            ));
        }
        if self.persistent {
            if self.ctas == 0 {
                return Err(bad(
                    "ctas",
                    "a persistent kernel needs at least 1 CTA".into(),
                ));
            }
            if self.tiles_m() % self.group_m != 0 {
                return Err(bad(
                    "group_m",
                    format!(
                        "{} does not divide the {} row blocks (M / block_m), as a persistent kernel needs",
                        self.group_m,
                        self.tiles_m()
                    ),
                ));
            }
            if self.m % self.block_m != 0 {
                return Err(bad(
                    "M",
                    format!(
                        "a persistent kernel views the rows as whole row blocks, so M = {} must be a multiple of block_m = {} (a non-persistent kernel clips the last row block)",
                        self.m, self.block_m
                    ),
                ));
            }
        }
        let regs = self.mma_regs();
        if regs > MAX_REGS_PER_THREAD {
            return Err(bad(
                "block_n",
                format!(
                    "a {} x {} accumulator per WarpGroup needs {regs} registers per thread (at most {MAX_REGS_PER_THREAD}); lower block_n or block_m, or use 2 consumers",
                    self.rows_per_consumer(),
                    self.block_n
                ),
            ));
        }
        if self.regs_per_cta() > REGS_PER_SM as u64 {
            return Err(bad(
                "block_n",
                format!(
                    "the CTA needs {} registers (at most {REGS_PER_SM})",
                    self.regs_per_cta()
                ),
            ));
        }
        if self.smem_bytes() > MAX_SMEM_PER_CTA as u64 {
            return Err(bad(
                "stages",
                format!(
                    "{} stages of {} bytes and a {}-byte C tile need {} bytes of shared memory (at most {MAX_SMEM_PER_CTA})",
                    self.stages,
                    self.stage_bytes(),
                    self.c_staging_bytes(),
                    self.smem_bytes()
                ),
            ));
        }
        if self.iter_bubble_cycles() > u32::MAX as u64 {
            return Err(bad(
                "iter_bubble",
                format!(
                    "{} cycles scaled to block_k = {} overflow",
                    self.iter_bubble, self.block_k
                ),
            ));
        }
        Ok(())
    }
}

/// Index of `e` in the expression table, pushing it if not yet present.
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
    /// Box origins of A, B and C.
    a: [Expr; 4],
    b: [Expr; 2],
    c: [Expr; 4],
}

fn operands(p: &GemmParams) -> Operands {
    let z = Expr::constant(0);
    let (bm, bn, bk) = (p.block_m as i64, p.block_n as i64, p.block_k as i64);
    let kt = p.k_iters() as i64;
    let s = p.stages as i64;
    // The global iteration count g and the K-loop counter.
    let (g, kl) = if p.persistent {
        (lc([kt, 1, 0, 0]), 1)
    } else {
        (lc([1, 0, 0, 0]), 0)
    };
    let mut k_off = lc([0; 4]);
    k_off.l[kl] = bk;
    let slot = if s == 1 { z } else { Expr { rem: s, ..g } };
    let parity = Expr {
        div: if s == 1 { 0 } else { s },
        rem: 2,
        ..g
    };
    let h = p.rows_per_consumer() as i64;
    let wg_rows = if p.consumers > 1 { h } else { 0 };
    if !p.persistent {
        let row = Expr { c: [0, bm, 0], ..z };
        let col = Expr { c: [bn, 0, 0], ..z };
        let c_row = Expr { wg: wg_rows, ..row };
        return Operands {
            tile_trips: None,
            k_trips: Expr::constant(kt),
            slot,
            parity,
            a: [k_off, row, z, z],
            b: [col, k_off],
            c: [col, c_row, z, z],
        };
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
    let within = if gm == 1 { z } else { Expr { rem: gm, ..t } };
    let band = Expr { div: gm * npn, ..t };
    let col = Expr {
        div: if gm == 1 { 0 } else { gm },
        rem: npn,
        mul: bn,
        ..t
    };
    Operands {
        tile_trips: Some(Expr {
            k: tiles - 1 + grid,
            cta: -1,
            div: grid,
            ..z
        }),
        k_trips: Expr::constant(kt),
        slot,
        parity,
        a: [k_off, z, within, band],
        b: [col, k_off],
        c: [col, Expr { wg: wg_rows, ..z }, within, band],
    }
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
/// Declaration indices of `full` (mbarriers) and `empty` (stages).
const FULL: u8 = 0;
const EMPTY: u8 = 0;

/// The TMA half of an iteration: arm `full[slot]`, load A and B, arrive.
fn emit_loads(k: &mut Kb, ops: &Operands, bytes: u32) -> Result<(), GenError> {
    let slot = k.expr(ops.slot)?;
    let full = Ref {
        decl: FULL,
        idx: slot,
    };
    k.op(Instr::MbarExpectTx { bar: full, bytes })?;
    let a = coords(k, MAP_A, &ops.a)?;
    k.op(Instr::TmaLoad {
        map: MAP_A,
        bar: full,
        coords: a,
    })?;
    let b = coords(k, MAP_B, &ops.b)?;
    k.op(Instr::TmaLoad {
        map: MAP_B,
        bar: full,
        coords: b,
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
fn emit_store(k: &mut Kb, p: &GemmParams, ops: &Operands) -> Result<(), GenError> {
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
            let c = coords(k, MAP_C, &ops.c)?;
            k.op(Instr::TmaStore {
                map: MAP_C,
                coords: c,
            })?;
        }
        Epilogue::Registers => {
            let c = coords(k, MAP_C, &ops.c)?;
            k.op(Instr::StGlobal {
                map: MAP_C,
                coords: c,
                segment: Epilogue::STORE_SEGMENT,
            })?;
        }
    }
    Ok(())
}

/// Declares the role `nm` whose program is the code from `start` to the end.
/// Builds the GEMM kernel `gemm_MxNxK` (the name is cut to the 24
/// characters a kernel name holds) described by `p`, after checking every
/// parameter ([`GemmParams::validate`]); the kernel is validated before it
/// is returned. The default parameters build the paper's kernel.
pub fn gemm(p: &GemmParams) -> Result<Kernel, GenError> {
    p.validate()?;
    let mut b = Builder::new(
        Kernel::default(),
        &name(&format!("gemm_{}x{}x{}", p.m, p.n, p.k)),
    )?;
    let k = &mut b;
    k.grid(if p.persistent {
        [p.grid_ctas().min(u32::MAX as u64) as u32, 1, 1]
    } else {
        [p.tiles_n(), p.tiles_m(), 1]
    });
    k.order(if p.group_m > 1 && !p.persistent {
        CtaOrder::Grouped { rows: p.group_m }
    } else {
        CtaOrder::Linear
    });
    k.smem(p.smem_bytes() as u32);
    let [a_base, b_base, c_base] = tensor_bases(p);
    let (bm, bn, bk, h) = (p.block_m, p.block_n, p.block_k, p.rows_per_consumer());
    let maps = if p.persistent {
        let g = (bm, p.group_m);
        [
            map_grouped("A", a_base, (p.m, p.k), g, (bk, bm)),
            map2d("B", b_base, p.k, p.n, bn, bk),
            map_grouped("C", c_base, (p.m, p.n), g, (bn, h)),
        ]
    } else {
        [
            map2d("A", a_base, p.m, p.k, bk, bm),
            map2d("B", b_base, p.k, p.n, bn, bk),
            map2d("C", c_base, p.m, p.n, bn, h),
        ]
    };
    for m in maps {
        k.map(m)?;
    }
    k.mbarriers("full", p.stages as u16, 1)?;
    if p.stages >= 2 {
        k.stages("empty", p.stages as u16, p.consumers as u16)?;
    }
    let ops = operands(p);
    let bytes = p.stage_bytes() as u32;
    let iter_bubble = p.iter_bubble_cycles();

    if p.stages == 1 {
        // One WarpGroup loads and computes; expressions are numbered in
        // order of first use, as the text assembly numbers them.
        k.begin_role("main", 1, p.mma_regs())?;
        bubble(k, p.prologue_bubble as u64)?;
        let tiles = ops.tile_trips.map(|t| k.loop_begin(t)).transpose()?;
        let kl = k.loop_begin(ops.k_trips)?;
        emit_loads(k, &ops, bytes)?;
        emit_mma(k, p, &ops)?;
        bubble(k, iter_bubble)?;
        k.loop_end(kl)?;
        emit_store(k, p, &ops)?;
        if let Some(t) = tiles {
            k.loop_end(t)?;
        }
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
        let tiles = ops.tile_trips.map(|t| k.loop_begin(t)).transpose()?;
        let kl = k.loop_begin(ops.k_trips)?;
        let stage = empty(k)?;
        k.op(Instr::StageAcquire { stage })?;
        emit_loads(k, &ops, bytes)?;
        k.loop_end(kl)?;
        if let Some(t) = tiles {
            k.loop_end(t)?;
        }
        k.op(Instr::Exit)?;
        k.end_role()?;
        // consumers
        k.begin_role("consumer", p.consumers, p.mma_regs())?;
        bubble(k, p.prologue_bubble as u64)?;
        let tiles = ops.tile_trips.map(|t| k.loop_begin(t)).transpose()?;
        let kl = k.loop_begin(ops.k_trips)?;
        emit_mma(k, p, &ops)?;
        let stage = empty(k)?;
        k.op(Instr::StageRelease { stage })?;
        bubble(k, iter_bubble)?;
        k.loop_end(kl)?;
        emit_store(k, p, &ops)?;
        if let Some(t) = tiles {
            k.loop_end(t)?;
        }
        k.op(Instr::StoreWait { n: 0 })?;
        k.op(Instr::Exit)?;
        k.end_role()?;
    }
    Ok(b.finish()?)
}

#[cfg(test)]
#[path = "gemm_tests.rs"]
mod tests;
