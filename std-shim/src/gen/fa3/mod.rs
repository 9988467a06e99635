//! The FlashAttention-3 forward kernel for Hopper (paper section VI,
//! `reference/calibration.md` §5-6), built from the attention shape the way
//! the real kernel is structured.
//!
//! One CTA owns `block_m` query rows of one head; one producer WarpGroup
//! issues the TMA loads and `consumers` WarpGroups own 64 query rows each.
//! Per tile:
//!
//! - the producer loads K(0), then Q (once per tile), waits until the
//!   previous tile's output store has drained (the output tile aliases V's
//!   shared memory), then for each next block loads K(j+1) before V(j), so V
//!   lags K by one stage; K and V each use a 2-stage ring with a "full"
//!   mbarrier (TMA byte count) and an "empty" stage the consumers release;
//! - each consumer computes S = Q K(j)^T while P V(j-1) of the previous block
//!   is still on the tensor pipe (intra-WarpGroup overlap), runs the softmax
//!   of S(j) (a `compute`), then rescales its output; consumers take turns to
//!   issue their GEMMs through named barriers (ping-pong), so one's softmax
//!   runs under the other's GEMMs;
//! - the epilogue normalises and converts the output (a `compute`), stores it
//!   with TMA, waits for the store and tells the producer.
//!
//! Non-causal kernels are persistent: `min(tiles, SMs)` CTAs (even, so that
//! cluster pairs stay on SM pairs) walk the tiles with a stride, m-block
//! fastest, so the two CTAs of a pair work on adjacent query blocks of the
//! same head and their identical K/V requests meet in the pair's coalescer.
//! Causal kernels launch one CTA per tile, longest tiles first, with query
//! blocks aligned to the end of the sequence; each visits only the KV
//! blocks at or below its diagonal, masked (diagonal) blocks first, as FA3
//! does.
//!
//! Non-MMA work is `compute` instructions whose operation counts come from
//! the tile shape ([`NonMma`]): they run on the SM's shared SIMT units, so
//! consumers doing softmax at once share its MUFU, and the tensor pipe's
//! register traffic slows them. Alone on an SM, a 64 x 176 tile with head
//! dim 128 takes the paper's 88 + 704 + 88 + 44 + 64 = 988 cycles.

mod program;
#[cfg(test)]
mod tests;

use simfa_core::{GpuConfig, Instr, Kernel, TensorMap, UnitClass, WgmmaMode, Work};

use super::gemm::name;
use super::{GenError, Kb};
use program::{lin, Gen};

const Q: usize = 0;
const K: usize = 1;
const V: usize = 2;
const O: usize = 3;

/// Query rows per consumer WarpGroup (one m64 WGMMA row block).
pub const ROWS_PER_WG: u32 = 64;
/// Bytes per FP16/BF16 element.
pub const ELEM_BYTES: u32 = 2;
/// Global address of Q.
pub const Q_BASE: u64 = 0x1000_0000;
/// Alignment of the tensors after Q.
pub const TENSOR_ALIGN: u64 = 1 << 20;
/// Threads of a WarpGroup.
const WG: u16 = 128;

/// The ablation variants of the paper's section VI-D.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Variant {
    /// The full kernel: warp specialisation, ping-pong and intra-WarpGroup
    /// overlap.
    #[default]
    Full,
    /// No intra-WarpGroup overlap, as the 2024 FA3 release's loop without
    /// it: each consumer waits for S before its softmax and for P V before
    /// the next block; the ping-pong orders the S GEMMs.
    NoOverlap,
    /// No warp specialisation: no producer WarpGroup; the first consumer
    /// issues the loads itself, one block ahead, and with every WarpGroup
    /// running the same program there is no ping-pong.
    NoWs,
}

impl Variant {
    /// Parses `full`, `no-overlap` or `no-ws`.
    pub fn from_name(s: &str) -> Option<Variant> {
        match s {
            "full" => Some(Variant::Full),
            "no-overlap" => Some(Variant::NoOverlap),
            "no-ws" => Some(Variant::NoWs),
            _ => None,
        }
    }

    /// The name [`Variant::from_name`] parses.
    pub fn name(self) -> &'static str {
        match self {
            Variant::Full => "full",
            Variant::NoOverlap => "no-overlap",
            Variant::NoWs => "no-ws",
        }
    }
}

/// The attention problem.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Fa3Params {
    /// Batch size.
    pub batch: u32,
    /// Query heads.
    pub heads: u32,
    /// Key/value heads (GQA); divides `heads`.
    pub kv_heads: u32,
    /// Query sequence length.
    pub seqlen_q: u32,
    /// Key/value sequence length.
    pub seqlen_kv: u32,
    /// Head dimension: 64, 96, 128, 192 or 256.
    pub hdim: u32,
    /// Causal masking.
    pub causal: bool,
    /// Pipeline variant.
    pub variant: Variant,
}

impl Default for Fa3Params {
    /// Llama 3 8B attention, batch 1, 4096 tokens, non-causal.
    fn default() -> Self {
        Fa3Params {
            batch: 1,
            heads: 32,
            kv_heads: 8,
            seqlen_q: 4096,
            seqlen_kv: 4096,
            hdim: 128,
            causal: false,
            variant: Variant::Full,
        }
    }
}

impl Fa3Params {
    /// The KV heads of a model with `group_kv` KV heads run with `heads`
    /// query heads when the KV head count is not given: the model's if it
    /// divides `heads` (the GQA grouping kept), otherwise `heads` (plain
    /// multi-head attention). `simfa fa3` and sweep plans both use it.
    pub fn kv_heads_for(heads: u32, group_kv: u32) -> u32 {
        if group_kv != 0 && heads % group_kv == 0 {
            group_kv
        } else {
            heads
        }
    }

    /// Useful FLOPs as FA3 counts them: `4 * sq * skv * hdim * heads *
    /// batch`, halved for causal.
    pub fn flops(&self) -> u64 {
        let f = 4
            * self.seqlen_q as u64
            * self.seqlen_kv as u64
            * self.hdim as u64
            * self.heads as u64
            * self.batch as u64;
        if self.causal {
            f / 2
        } else {
            f
        }
    }
}

/// Tile sizes and WarpGroup split of the real kernel for a head dim
/// (calibration.md §6).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Tiling {
    /// Query rows per CTA.
    pub block_m: u32,
    /// Key/value rows per block.
    pub block_n: u32,
    /// Consumer WarpGroups.
    pub consumers: u32,
    /// Stages of the K and V rings.
    pub stages: u32,
    /// Registers per thread of the producer.
    pub producer_regs: u16,
    /// Registers per thread of each consumer.
    pub consumer_regs: u16,
    /// CTAs per cluster (2 where the real kernel pairs CTAs).
    pub cluster: u32,
    /// Operand mode of the P V GEMM: RS (P from registers) for most head
    /// dims, SS for head dim 96 (and 64 non-causal), as FA3 chooses.
    pub pv_mode: WgmmaMode,
}

impl Tiling {
    /// The FA3 tiling for `hdim` (64, 96, 128, 192 or 256) and masking:
    /// FA3's `tile_size_fwd_sm90` for 16-bit inputs (head dim 64 with the
    /// 2024 release's 192 x 128 tile of calibration.md §6), clusters of two
    /// for head dims of 128 and more when not causal.
    pub fn for_shape(hdim: u32, causal: bool) -> Result<Tiling, GenError> {
        use WgmmaMode::{Rs, Ss};
        let (block_m, block_n, pv_mode) = match (hdim, causal) {
            (64, false) => (192, 128, Ss),
            (64, true) => (192, 128, Rs),
            (96, _) => (192, 144, Ss),
            (128, false) => (128, 176, Rs),
            (128, true) => (128, 128, Rs),
            (192, _) => (128, 112, Rs),
            (256, _) => (128, 80, Rs),
            _ => {
                return Err(GenError::BadParam {
                    param: "head dim",
                    problem: format!("{hdim} is not one of 64, 96, 128, 192, 256"),
                })
            }
        };
        let consumers = block_m / ROWS_PER_WG;
        let cluster = if hdim >= 128 && !causal { 2 } else { 1 };
        let (producer_regs, consumer_regs) = if consumers == 3 { (32, 160) } else { (24, 240) };
        Ok(Tiling {
            block_m,
            block_n,
            consumers,
            stages: 2,
            producer_regs,
            consumer_regs,
            cluster,
            pv_mode,
        })
    }
}

/// Non-MMA work of one consumer WarpGroup, in operations per unit class,
/// from the tile shape (the paper's section VI-B list: row max, exponent,
/// row sum, conversion to 16 bits, rescale).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct NonMma {
    /// Softmax of one `rows x block_n` block of S: row max and row sum
    /// (FP32, one operation per element each), exponentials (MUFU) and
    /// the conversion of P to 16 bits (FP16).
    pub softmax: Work,
    /// Causal masking of a diagonal block (an FP32 select per element).
    pub mask: Work,
    /// Rescaling the `rows x hdim` output accumulator (FP32).
    pub rescale: Work,
    /// Epilogue: normalising the output (FP32) and converting it (FP16).
    pub epilogue: Work,
}

impl NonMma {
    /// The work of a `rows x block_n` tile of S with head dim `hdim`.
    pub fn new(rows: u32, block_n: u32, hdim: u32) -> NonMma {
        let s = rows * block_n;
        let o = rows * hdim;
        let w = |fp32, mufu, fp16| Work {
            fp32,
            mufu,
            fp16,
            int: 0,
        };
        NonMma {
            softmax: w(2 * s, s, s),
            mask: w(s, 0, 0),
            rescale: w(o, 0, 0),
            epilogue: w(o, 0, o),
        }
    }

    /// The softmax of one block, masked or not.
    pub fn block(&self, masked: bool) -> Work {
        if masked {
            self.softmax.plus(self.mask)
        } else {
            self.softmax
        }
    }

    /// The per-block budget the paper quotes: softmax plus rescale.
    pub fn per_block(&self) -> Work {
        self.softmax.plus(self.rescale)
    }
}

/// Cycles `work` takes on an SM of `cfg` when nothing else runs there: its
/// phases one after the other, each at its unit's full rate.
pub fn solo_cycles(cfg: &GpuConfig, work: &Work) -> u64 {
    UnitClass::ALL
        .iter()
        .map(|&c| (work.get(c) as u64).div_ceil(cfg.units.rate(c) as u64))
        .sum()
}

/// How the kernel enumerates tiles and KV blocks, and the derived counts.
#[derive(Clone, Copy, Debug)]
pub struct Plan {
    /// The tiling.
    pub tiling: Tiling,
    /// Query blocks per head.
    pub m_blocks: u32,
    /// KV blocks per tile (non-causal).
    pub n_blocks: u32,
    /// Tiles in all.
    pub tiles: u64,
    /// CTAs launched.
    pub ctas: u32,
    /// Masked (diagonal) blocks of a full causal tile.
    pub masked: u32,
}

impl Plan {
    /// Tiling and counts of `p` on a GPU with `sms` SMs.
    pub fn new(p: &Fa3Params, sms: u16) -> Result<Plan, GenError> {
        for (dim, v) in [
            ("batch", p.batch),
            ("heads", p.heads),
            ("kv heads", p.kv_heads),
            ("seqlen", p.seqlen_q),
            ("kv seqlen", p.seqlen_kv),
        ] {
            if v == 0 {
                return Err(GenError::Zero { dim });
            }
        }
        let bad = |param, problem: String| Err(GenError::BadParam { param, problem });
        if p.heads % p.kv_heads != 0 {
            return bad(
                "kv heads",
                format!("{} does not divide {} query heads", p.kv_heads, p.heads),
            );
        }
        if p.seqlen_q > 1 << 20 || p.seqlen_kv > 1 << 20 || p.heads > 1024 || p.batch > 4096 {
            return bad(
                "shape",
                "sequence lengths are limited to 2^20, heads to 1024, batch to 4096".into(),
            );
        }
        let t = Tiling::for_shape(p.hdim, p.causal)?;
        if p.causal && p.seqlen_q != p.seqlen_kv {
            return bad(
                "kv seqlen",
                "causal attention is modelled for equal query and KV lengths".into(),
            );
        }
        if p.causal && p.variant == Variant::NoWs {
            return bad(
                "variant",
                "no-ws is modelled for non-causal attention (the paper's ablation)".into(),
            );
        }
        let m_blocks = p.seqlen_q.div_ceil(t.block_m);
        let n_blocks = p.seqlen_kv.div_ceil(t.block_n);
        if p.variant == Variant::NoWs && n_blocks < 2 {
            return bad(
                "kv seqlen",
                format!("no-ws needs at least 2 KV blocks of {}", t.block_n),
            );
        }
        let masked = t.block_m.div_ceil(t.block_n);
        if p.causal {
            // The top tile (end-aligned) may be shorter than `masked`
            // blocks; the count expression handles one block short.
            let top = (p.seqlen_q - (m_blocks - 1) * t.block_m).div_ceil(t.block_n);
            if top + 1 < masked {
                return bad(
                    "seqlen",
                    format!("{} leaves a top tile too short to model", p.seqlen_q),
                );
            }
        }
        let tiles = m_blocks as u64 * p.heads as u64 * p.batch as u64;
        let ctas = if p.causal {
            tiles
        } else {
            let mut g = tiles.min(sms.max(1) as u64);
            if g > 1 && t.cluster == 2 {
                g -= g % 2;
            }
            g
        };
        if ctas >= 1 << 31 {
            return bad("shape", format!("{tiles} tiles is too many"));
        }
        Ok(Plan {
            tiling: t,
            m_blocks,
            n_blocks,
            tiles,
            ctas: ctas as u32,
            masked,
        })
    }

    /// KV blocks visited by causal tile `m` (0 = top of the sequence).
    pub fn causal_blocks(&self, p: &Fa3Params, m: u32) -> u32 {
        let q_end = p.seqlen_q - (self.m_blocks - 1 - m) * self.tiling.block_m;
        q_end.div_ceil(self.tiling.block_n)
    }

    /// KV blocks visited by all tiles of one head.
    pub fn blocks_per_head(&self, p: &Fa3Params) -> u64 {
        if p.causal {
            (0..self.m_blocks)
                .map(|m| self.causal_blocks(p, m) as u64)
                .sum()
        } else {
            self.m_blocks as u64 * self.n_blocks as u64
        }
    }
}

fn after(base: u64, bytes: u64) -> u64 {
    (base + bytes).div_ceil(TENSOR_ALIGN) * TENSOR_ALIGN
}

/// A `[batch, seqlen, heads, hdim]` 16-bit tensor as a 4-D tensor map
/// (innermost first) with a `rows x hdim` box of one head.
fn bshd(
    nm: &str,
    base: u64,
    batch: u32,
    seqlen: u32,
    heads: u32,
    hdim: u32,
    rows: u32,
) -> TensorMap {
    let e = ELEM_BYTES as u64;
    let row = heads as u64 * hdim as u64 * e;
    TensorMap {
        name: name(nm),
        base,
        elem_bytes: ELEM_BYTES as u8,
        rank: 4,
        dims: [hdim as u64, heads as u64, seqlen as u64, batch as u64, 0],
        strides: [e, hdim as u64 * e, row, row * seqlen as u64, 0],
        boxdim: [hdim, 1, rows, 1, 0],
    }
}

/// Builds the FA3 forward kernel for `p` on `cfg` (whose SM count sizes the
/// persistent grid), with the
/// plan it follows. The kernel is validated and checked to fit an SM.
pub fn fa3(p: &Fa3Params, cfg: &GpuConfig) -> Result<(Kernel, Plan), GenError> {
    let plan = Plan::new(p, cfg.sms)?;
    let t = plan.tiling;
    let mut k = Kb::new(
        Kernel::default(),
        &name(&format!(
            "fa3_{}x{}x{}_d{}{}",
            p.batch,
            p.heads,
            p.seqlen_q,
            p.hdim,
            if p.causal { "c" } else { "" }
        )),
    )?;
    k.grid(if p.causal {
        [plan.m_blocks, p.heads, p.batch]
    } else {
        [plan.ctas, 1, 1]
    });
    let e = ELEM_BYTES as u64;
    let q_bytes = p.batch as u64 * p.seqlen_q as u64 * p.heads as u64 * p.hdim as u64 * e;
    let kv_bytes = p.batch as u64 * p.seqlen_kv as u64 * p.kv_heads as u64 * p.hdim as u64 * e;
    let k_base = after(Q_BASE, q_bytes);
    let v_base = after(k_base, kv_bytes);
    let o_base = after(v_base, kv_bytes);
    let maps = [
        bshd("Q", Q_BASE, p.batch, p.seqlen_q, p.heads, p.hdim, t.block_m),
        bshd(
            "K",
            k_base,
            p.batch,
            p.seqlen_kv,
            p.kv_heads,
            p.hdim,
            t.block_n,
        ),
        bshd(
            "V",
            v_base,
            p.batch,
            p.seqlen_kv,
            p.kv_heads,
            p.hdim,
            t.block_n,
        ),
        bshd("O", o_base, p.batch, p.seqlen_q, p.heads, p.hdim, t.block_m),
    ];
    // Shared memory: Q, the K and V rings (the output tile aliases V).
    let smem = maps[Q].full_box_bytes() + t.stages as u64 * 2 * maps[K].full_box_bytes();
    k.smem(smem as u32);
    for m in maps {
        k.map(m)?;
    }
    let st = t.stages as u16;
    let q_full = k.mbarriers("q_full", 1, 1)?;
    let k_full = k.mbarriers("k_full", st, 1)?;
    let v_full = k.mbarriers("v_full", st, 1)?;
    let o_free = k.mbarriers("o_free", 1, 1)?;
    let c = t.consumers as u16;
    let q_empty = k.stages("q_empty", 1, c)?;
    let k_empty = k.stages("k_empty", st, c)?;
    let v_empty = k.stages("v_empty", st, c)?;
    let mut g = Gen {
        k,
        p,
        plan,
        nm: NonMma::new(ROWS_PER_WG, t.block_n, p.hdim),
        q_full,
        k_full,
        v_full,
        o_free,
        q_empty,
        k_empty,
        v_empty,
        maps: [0, 1, 2, 3],
    };
    if p.variant != Variant::NoWs {
        g.k.begin_role("producer", 1, t.producer_regs as u32)?;
        let b = g.loop_begin(g.tile_trips())?;
        g.producer_tile()?;
        g.loop_end(b)?;
        g.op(Instr::Exit)?;
        g.k.end_role()?;
    }
    for c in 0..t.consumers {
        g.k.begin_role(&format!("consumer{c}"), 1, t.consumer_regs as u32)?;
        if c + 1 == t.consumers && g.ping_pong() {
            // The last consumer opens the ping-pong for the first.
            let id = g.e(lin(1))?;
            g.op(Instr::BarArrive {
                id,
                threads: 2 * WG,
            })?;
        }
        let b = g.loop_begin(g.tile_trips())?;
        g.consumer_tile(c)?;
        g.loop_end(b)?;
        g.op(Instr::Exit)?;
        g.k.end_role()?;
    }
    let k = g.k.finish()?;
    k.check_fits(cfg).map_err(GenError::Invalid)?;
    Ok((k, plan))
}
