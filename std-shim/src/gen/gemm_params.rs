//! The parameters of the GEMM generator ([`super::gemm()`]): the problem
//! shape, the tile, the pipeline (stages, consumers, persistence, grouped
//! rasterisation), the epilogue, the WGMMA width and the frontend
//! calibration bubbles, with the checks that name the parameter at fault,
//! and the quantities derived from them (tiles, iterations, shared memory,
//! registers).

use super::GenError;

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
/// The fewest K iterations a stream-K unit computes (CUTLASS's
/// `min_iters_per_sk_unit_`).
pub const MIN_ITERS_PER_UNIT: u64 = 8;
/// Rows of one WGMMA (m64nNk16).
pub const WGMMA_M: u32 = 64;
/// Depth of one WGMMA (m64nNk16).
pub const WGMMA_K: u32 = 16;
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
    /// CTAs per thread block cluster along M (default 1): the CTAs of a
    /// cluster that share a tile column multicast its B tile, each loading
    /// a `block_k / cluster_m`-row slice of it for all of them.
    pub cluster_m: u32,
    /// CTAs per cluster along N (default 1): the CTAs that share a tile
    /// row multicast its A tile, each loading `block_m / cluster_n` rows.
    pub cluster_n: u32,
    /// K slices (split-K, default 1): the grid gets a z dimension of
    /// `split_k` CTAs per tile, each computing `K / split_k`; the CTAs of a
    /// tile form a `[1, 1, split_k]` cluster whose others write their FP32
    /// partial sums to a workspace for the first to add before it stores C.
    pub split_k: u32,
    /// Stream-K (default false): a persistent kernel whose CTAs share out
    /// the K iterations of the tiles [`GemmParams::stream_k_split`] leaves
    /// to stream-K evenly, unit by unit in tile order, then compute the
    /// others whole; a CTA that ends inside a tile
    /// writes its FP32 partial sums to a workspace, and the CTA that
    /// computed the tile's first iterations adds them before it stores C
    /// (see [`super::gemm::stream_k`]). Needs `persistent`, a
    /// ring (`stages >= 2`), a 1x1 cluster and `split_k = 1`.
    pub stream_k: bool,
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
            cluster_m: 1,
            cluster_n: 1,
            split_k: 1,
            stream_k: false,
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

    /// Main-loop iterations of one CTA: `k_iters / split_k`.
    pub fn k_iters_per_cta(&self) -> u32 {
        self.k_iters() / self.split_k.max(1)
    }

    /// CTAs launched: one per tile and K slice, `min(ctas, tiles)` when
    /// persistent (rounded down to whole clusters), or with stream-K
    /// `ctas` (its stream-K units alone when no tile is data-parallel).
    pub fn grid_ctas(&self) -> u64 {
        if self.stream_k {
            match self.stream_k_split() {
                (0, units) => units,
                _ => self.ctas as u64,
            }
        } else if self.persistent {
            let size = self.cluster_size() as u64;
            self.tiles().min(self.ctas as u64) / size * size
        } else {
            self.tiles() * self.split_k as u64
        }
    }

    /// Stream-K's split of the tiles ([`GemmParams::stream_k`]): how many
    /// are computed whole, data-parallel, and among how many CTAs (units)
    /// the other tiles' K iterations are shared. As CUTLASS's stream-K
    /// scheduler does: with more tiles than `ctas` and a partial last wave,
    /// every wave but the last two is data-parallel and the rest stream-K
    /// (each CTA then gets one to two tiles' worth); whole waves are all
    /// data-parallel; fewer tiles than `ctas` are all stream-K. No unit
    /// gets fewer than [`MIN_ITERS_PER_UNIT`] iterations unless that would
    /// leave fewer units than tiles, so small problems take fewer units
    /// than `ctas`.
    pub fn stream_k_split(&self) -> (u64, u64) {
        let (t, g) = (self.tiles(), self.ctas.max(1) as u64);
        let dp = if t < g {
            0
        } else if t % g == 0 {
            t
        } else {
            (t / g - 1) * g
        };
        let iters = (t - dp) * self.k_iters() as u64;
        // At least one unit per tile: fewer would compute whole tiles one
        // after another where data-parallel CTAs compute them side by side.
        let units = (iters / MIN_ITERS_PER_UNIT).max(t - dp).min(g);
        (dp, units)
    }

    /// Row blocks of the last group of the grouped raster: `group_m`, or
    /// fewer when `group_m` does not divide the row blocks.
    pub fn last_group_rows(&self) -> u32 {
        self.tiles_m() - self.last_group_first()
    }

    /// The first row block of the grouped raster's last group.
    pub fn last_group_first(&self) -> u32 {
        let g = self.group_m.max(1);
        (self.tiles_m().max(1) - 1) / g * g
    }

    /// Whether a persistent kernel computes the tiles of its last group
    /// apart from the others (through their own maps of A and C, based at
    /// the group's first row): when the group is partial or its last row
    /// block is clipped.
    pub fn last_group_apart(&self) -> bool {
        self.persistent
            && (self.tiles_m() % self.group_m.max(1) != 0 || self.m % self.block_m.max(1) != 0)
    }

    /// Tiles a persistent kernel walks through the grouped views of A and
    /// C: those before its last group when that is apart, else all.
    pub fn grouped_tiles(&self) -> u64 {
        if self.last_group_apart() {
            self.last_group_first() as u64 * self.tiles_n() as u64
        } else {
            self.tiles()
        }
    }

    /// Whether a persistent kernel's tiles come in two kinds: those of the
    /// grouped views and those of a last group apart after them (each kind
    /// then runs in its 0-or-1-trip loop, the last group through its own
    /// maps of A and C).
    pub fn two_tile_kinds(&self) -> bool {
        self.last_group_apart() && self.last_group_first() > 0
    }

    /// CTAs per thread block cluster.
    pub fn cluster_size(&self) -> u32 {
        self.cluster_m.saturating_mul(self.cluster_n)
    }

    /// Floating-point operations of the product: `2 * M * N * K`, what a
    /// GEMM's TFLOP/s counts (the WGMMAs of clipped edge tiles do more).
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
        if self.persistent && self.ctas == 0 {
            return Err(bad(
                "ctas",
                "a persistent kernel needs at least 1 CTA".into(),
            ));
        }
        self.validate_cluster()?;
        self.validate_split_k()?;
        self.validate_stream_k()?;
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

    /// Split-K's checks: a one-CTA-per-tile grid without another cluster,
    /// and K iterations that split evenly.
    fn validate_split_k(&self) -> Result<(), GenError> {
        let s = self.split_k;
        let problem = if s == 0 || s as usize > simfa_core::cluster::MAX_CLUSTER {
            format!("{s} must be in 1..=16 (its CTAs form one cluster)")
        } else if s == 1 {
            return Ok(());
        } else if self.persistent {
            "split-K runs one CTA per tile and K slice: set persistent = false".into()
        } else if self.cluster_size() > 1 {
            "split-K's K slices form the cluster: set cluster 1x1".into()
        } else if self.k_iters() % s != 0 {
            format!(
                "the {} iterations of K / block_k do not split into {s} equal slices",
                self.k_iters()
            )
        } else {
            return Ok(());
        };
        Err(bad("split_k", problem))
    }

    /// Stream-K's checks: a persistent kernel with a ring, no cluster or
    /// split-K, and a counter per consumer of each CTA.
    fn validate_stream_k(&self) -> Result<(), GenError> {
        if !self.stream_k {
            return Ok(());
        }
        let counters = self.grid_ctas() * self.consumers as u64;
        let problem = if !self.persistent {
            "stream-K shares K iterations among persistent CTAs: set persistent".to_string()
        } else if self.stages < 2 {
            "stream-K needs a producer and a ring: set stages >= 2".to_string()
        } else if self.cluster_size() > 1 {
            "stream-K runs without clusters: set cluster 1x1".to_string()
        } else if self.split_k > 1 {
            "stream-K already splits K: set split_k = 1".to_string()
        } else if counters > simfa_core::kernel::MAX_COUNTERS as u64 {
            format!(
                "{} CTAs of {} consumers need {counters} counters (at most {}): lower ctas",
                self.grid_ctas(),
                self.consumers,
                simfa_core::kernel::MAX_COUNTERS
            )
        } else {
            return Ok(());
        };
        Err(bad("stream_k", problem))
    }

    /// The cluster's checks: its size, a producer to multicast, whole
    /// clusters of tiles, slices of whole rows.
    fn validate_cluster(&self) -> Result<(), GenError> {
        let (cm, cn) = (self.cluster_m, self.cluster_n);
        if cm == 0 || cn == 0 || self.cluster_size() as usize > simfa_core::cluster::MAX_CLUSTER {
            return Err(bad(
                "cluster",
                format!("{cm}x{cn} must have sides >= 1 and at most 16 CTAs"),
            ));
        }
        if self.cluster_size() == 1 {
            return Ok(());
        }
        let problem = if self.stages < 2 {
            Some("a cluster multicasts into a ring: set stages >= 2".to_string())
        } else if self.tiles_m() % cm != 0 || self.tiles_n() % cn != 0 {
            Some(format!(
                "the {} x {} tiles do not divide into {cm}x{cn} clusters",
                self.tiles_m(),
                self.tiles_n()
            ))
        } else if self.m % self.block_m != 0 || self.k % self.block_k != 0 {
            Some(format!(
                "multicast slices whole tiles: M = {} and K = {} must be multiples of block_m = {} and block_k = {}",
                self.m, self.k, self.block_m, self.block_k
            ))
        } else if self.block_k % cm != 0 || self.block_m % cn != 0 {
            Some(format!(
                "block_k = {} rows of B and block_m = {} rows of A must split into {cm} and {cn} slices",
                self.block_k, self.block_m
            ))
        } else if (self.group_m > 1 || self.persistent)
            && (self.group_m % cm != 0 || self.last_group_rows() % cm != 0)
        {
            Some(format!(
                "group_m = {} and the last group's {} row blocks must be multiples of cluster_m = {cm} (a cluster's CTAs take tiles of one column of a group)",
                self.group_m,
                self.last_group_rows()
            ))
        } else if self.persistent && cm > 1 && cn > 1 {
            Some("a persistent kernel clusters along M or along N, not both".to_string())
        } else if self.persistent && cn > 1 && self.group_m > 1 {
            Some(
                "a persistent kernel clustered along N walks the tiles row by row: set group_m = 1"
                    .to_string(),
            )
        } else if self.persistent && (self.ctas < self.cluster_size()) {
            Some(format!("ctas = {} is less than one cluster", self.ctas))
        } else {
            None
        };
        match problem {
            Some(p) => Err(bad("cluster", p)),
            None => Ok(()),
        }
    }
}
