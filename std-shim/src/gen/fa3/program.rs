//! The programs of the FA3 kernel's WarpGroups: the producer's loads and
//! each consumer's GEMMs, softmax `compute`, ping-pong and epilogue, written as
//! affine expressions of the CTA index and loop counters.

use simfa_core::{Expr, Instr, Ref, WgmmaMode, Work};

use super::super::{GenError, Kb};
use super::{Fa3Params, NonMma, Plan, Variant, K, O, Q, V, WG};

/// The ring position `g` of a KV block: `lin div div` (div 1 for none).
#[derive(Clone, Copy)]
struct Ring {
    lin: Expr,
    div: i64,
}

impl Ring {
    fn with(self, f: impl FnOnce(&mut Expr)) -> Expr {
        let mut e = self.lin;
        f(&mut e);
        e
    }
    /// Stage index `g mod 2`.
    fn stage(self) -> Expr {
        let d = if self.div == 1 { 0 } else { self.div };
        self.with(|e| {
            e.div = d;
            e.rem = 2;
        })
    }
    /// Phase parity of the block's "full" barrier: `(g div 2) mod 2`.
    fn parity(self) -> Expr {
        let d = self.div * 2;
        self.with(|e| {
            e.div = d;
            e.rem = 2;
        })
    }
}

/// Where the expression table, tiling and layout are gathered while the
/// programs are written.
pub(super) struct Gen<'a> {
    pub(super) k: Kb,
    pub(super) p: &'a Fa3Params,
    pub(super) plan: Plan,
    pub(super) nm: NonMma,
    /// Declarations.
    pub(super) q_full: u8,
    pub(super) k_full: u8,
    pub(super) v_full: u8,
    pub(super) o_free: u8,
    pub(super) q_empty: u8,
    pub(super) k_empty: u8,
    pub(super) v_empty: u8,
    pub(super) maps: [u8; 4],
}

pub(super) fn lin(k: i64) -> Expr {
    Expr::constant(k)
}

impl Gen<'_> {
    pub(super) fn e(&mut self, e: Expr) -> Result<u16, GenError> {
        Ok(self.k.expr(e)?)
    }
    pub(super) fn op(&mut self, i: Instr) -> Result<u16, GenError> {
        Ok(self.k.op(i)?)
    }
    fn at(&mut self, decl: u8, idx: Expr) -> Result<Ref, GenError> {
        Ok(Ref {
            decl,
            idx: self.e(idx)?,
        })
    }
    pub(super) fn loop_begin(&mut self, count: Expr) -> Result<u16, GenError> {
        Ok(self.k.loop_begin(count)?)
    }
    pub(super) fn loop_end(&mut self, begin: u16) -> Result<(), GenError> {
        Ok(self.k.loop_end(begin)?)
    }
    fn compute(&mut self, work: Work) -> Result<(), GenError> {
        if !work.is_empty() {
            self.op(Instr::Compute { work })?;
        }
        Ok(())
    }

    fn persistent(&self) -> bool {
        !self.p.causal
    }

    /// Tile-loop trip count: the CTA's share of the tiles.
    pub(super) fn tile_trips(&self) -> Expr {
        if self.persistent() {
            let g = self.plan.ctas as i64;
            Expr {
                cta: -1,
                div: g,
                ..lin(self.plan.tiles as i64 + g - 1)
            }
        } else {
            lin(1)
        }
    }

    /// The linear tile index of a persistent CTA (`cta + l0 * grid`) with
    /// `div`, `rem` and `mul` applied.
    fn tile(&self, div: i64, rem: i64, mul: i64) -> Expr {
        Expr {
            cta: 1,
            l: [self.plan.ctas as i64, 0, 0, 0],
            div,
            rem,
            mul,
            ..lin(0)
        }
    }

    /// First query row of the CTA's tile (negative for a short top tile
    /// of a causal kernel: TMA clips it).
    fn q_row(&self) -> Expr {
        let bm = self.plan.tiling.block_m as i64;
        if self.persistent() {
            self.tile(0, self.plan.m_blocks as i64, bm)
        } else {
            // End-aligned, longest first: cx = 0 is the last query block.
            Expr {
                c: [-bm, 0, 0],
                ..lin(self.p.seqlen_q as i64 - bm)
            }
        }
    }

    fn head(&self) -> Expr {
        if self.persistent() {
            self.tile(self.plan.m_blocks as i64, self.p.heads as i64, 0)
        } else {
            Expr {
                c: [0, 1, 0],
                ..lin(0)
            }
        }
    }

    fn kv_head(&self) -> Expr {
        let group = (self.p.heads / self.p.kv_heads) as i64;
        if self.persistent() {
            self.tile(self.plan.m_blocks as i64 * group, self.p.kv_heads as i64, 0)
        } else {
            Expr {
                c: [0, 1, 0],
                div: if group > 1 { group } else { 0 },
                ..lin(0)
            }
        }
    }

    fn batch(&self) -> Expr {
        if self.persistent() {
            self.tile(self.plan.m_blocks as i64 * self.p.heads as i64, 0, 0)
        } else {
            Expr {
                c: [0, 0, 1],
                ..lin(0)
            }
        }
    }

    /// Ring position of the tile's block `off` (+ the inner loop counter
    /// when `looped`).
    fn ring(&self, off: i64, looped: bool) -> Ring {
        let mut e = lin(off);
        e.l[1] = looped as i64;
        if self.persistent() {
            e.l[0] = self.plan.n_blocks as i64;
        }
        Ring { lin: e, div: 1 }
    }

    /// Ring position of the tile's last block.
    fn ring_last(&self) -> Ring {
        if self.persistent() {
            let n = self.plan.n_blocks as i64;
            Ring {
                lin: Expr {
                    l: [n, 0, 0, 0],
                    ..lin(n - 1)
                },
                div: 1,
            }
        } else {
            // n(cx) - 1 = (sq - cx*bm - 1) div bn
            let t = self.plan.tiling;
            Ring {
                lin: Expr {
                    c: [-(t.block_m as i64), 0, 0],
                    ..lin(self.p.seqlen_q as i64 - 1)
                },
                div: t.block_n as i64,
            }
        }
    }

    /// KV row of the block at ring offset `off` (+ loop counter).
    fn kv_row(&self, off: i64, looped: bool) -> Expr {
        let bn = self.plan.tiling.block_n as i64;
        if self.persistent() {
            let mut e = lin(off * bn);
            e.l[1] = if looped { bn } else { 0 };
            e
        } else {
            // Blocks in descending order: row = (n - 1 - g) * bn with
            // n = (sq - cx*bm + bn - 1) div bn.
            let bm = self.plan.tiling.block_m as i64;
            let mut e = Expr {
                c: [-bm, 0, 0],
                div: bn,
                mul: bn,
                ..lin(self.p.seqlen_q as i64 + bn - 1 - bn - off * bn)
            };
            e.l[1] = if looped { -bn } else { 0 };
            e
        }
    }

    fn kv_row_last(&self) -> Expr {
        if self.persistent() {
            lin((self.plan.n_blocks as i64 - 1) * self.plan.tiling.block_n as i64)
        } else {
            lin(0)
        }
    }

    /// Producer-side load of one K or V block into its ring stage.
    fn load_kv(&mut self, which: usize, ring: Ring, row: Expr) -> Result<(), GenError> {
        let (full, empty) = if which == K {
            (self.k_full, self.k_empty)
        } else {
            (self.v_full, self.v_empty)
        };
        let head = self.kv_head();
        self.load(which, (empty, full, ring.stage()), head, row)
    }

    fn load_q(&mut self) -> Result<(), GenError> {
        let (head, row) = (self.head(), self.q_row());
        self.load(Q, (self.q_empty, self.q_full, lin(0)), head, row)
    }

    /// Claims stage `slot` of `empty`, arms `full`'s barrier of the same
    /// index with the box's bytes, loads one box of map `which` at
    /// `[0, head, row, batch]` and arrives.
    fn load(
        &mut self,
        which: usize,
        (empty, full, slot): (u8, u8, Expr),
        head: Expr,
        row: Expr,
    ) -> Result<(), GenError> {
        let stage = self.at(empty, slot)?;
        self.op(Instr::StageAcquire { stage })?;
        let bar = self.at(full, slot)?;
        let bytes = self.k.kernel().maps[self.maps[which] as usize].full_box_bytes() as u32;
        self.op(Instr::MbarExpectTx { bar, bytes })?;
        let zero = self.e(lin(0))?;
        let coords = [
            zero,
            self.e(head)?,
            self.e(row)?,
            self.e(self.batch())?,
            zero,
        ];
        self.op(Instr::TmaLoad {
            map: self.maps[which],
            bar,
            coords,
            multicast: 0,
        })?;
        self.op(Instr::MbarArrive { bar })?;
        Ok(())
    }

    /// Waits for the previous tile's output store (V's shared memory).
    fn wait_o_free(&mut self) -> Result<(), GenError> {
        let bar = self.at(self.o_free, lin(0))?;
        let parity = self.e(Expr {
            l: [1, 0, 0, 0],
            rem: 2,
            ..lin(1)
        })?;
        self.op(Instr::MbarWait { bar, parity })?;
        Ok(())
    }

    /// The producer's loads of one tile: K(0), Q, [K(j+1), V(j)]*, V(last).
    pub(super) fn producer_tile(&mut self) -> Result<(), GenError> {
        self.load_kv(K, self.ring(0, false), self.kv_row(0, false))?;
        self.load_q()?;
        self.wait_o_free()?;
        let trips = self.kv_trips_minus_one();
        let b = self.loop_begin(trips)?;
        self.load_kv(K, self.ring(1, true), self.kv_row(1, true))?;
        self.load_kv(V, self.ring(0, true), self.kv_row(0, true))?;
        self.loop_end(b)?;
        self.load_kv(V, self.ring_last(), self.kv_row_last())?;
        Ok(())
    }

    /// `n - 1` for the CTA's tile.
    fn kv_trips_minus_one(&self) -> Expr {
        if self.persistent() {
            lin(self.plan.n_blocks as i64 - 1)
        } else {
            let t = self.plan.tiling;
            Expr {
                c: [-(t.block_m as i64), 0, 0],
                div: t.block_n as i64,
                ..lin(self.p.seqlen_q as i64 - 1)
            }
        }
    }

    fn wait_full(&mut self, full: u8, ring: Ring) -> Result<(), GenError> {
        let bar = self.at(full, ring.stage())?;
        let parity = self.e(ring.parity())?;
        self.op(Instr::MbarWait { bar, parity })?;
        Ok(())
    }

    fn release(&mut self, empty: u8, ring: Ring) -> Result<(), GenError> {
        let stage = self.at(empty, ring.stage())?;
        self.op(Instr::StageRelease { stage, cluster: 0 })?;
        Ok(())
    }

    fn gemm_s(&mut self) -> Result<(), GenError> {
        let t = self.plan.tiling;
        for _ in 0..self.p.hdim / 16 {
            self.op(Instr::Wgmma {
                n: t.block_n as u16,
                mode: WgmmaMode::Ss,
            })?;
        }
        self.op(Instr::WgmmaCommit)?;
        Ok(())
    }

    fn gemm_pv(&mut self) -> Result<(), GenError> {
        for _ in 0..self.plan.tiling.block_n / 16 {
            self.op(Instr::Wgmma {
                n: self.p.hdim as u16,
                mode: self.plan.tiling.pv_mode,
            })?;
        }
        self.op(Instr::WgmmaCommit)?;
        Ok(())
    }

    /// True when consumers take turns to issue their GEMMs: in the
    /// warp-specialised kernel with two or more consumers. Without warp
    /// specialisation every WarpGroup runs the same program and nothing
    /// orders their GEMMs.
    pub(super) fn ping_pong(&self) -> bool {
        self.plan.tiling.consumers >= 2 && self.p.variant != Variant::NoWs
    }

    /// Ping-pong: wait for this consumer's turn to issue GEMMs.
    fn turn(&mut self, c: u32) -> Result<(), GenError> {
        if !self.ping_pong() {
            return Ok(());
        }
        let id = self.e(lin(1 + c as i64))?;
        self.op(Instr::BarSync {
            id,
            threads: 2 * WG,
        })?;
        Ok(())
    }

    /// Ping-pong: hand the turn to the next consumer.
    fn pass(&mut self, c: u32) -> Result<(), GenError> {
        let n = self.plan.tiling.consumers;
        if !self.ping_pong() {
            return Ok(());
        }
        let id = self.e(lin(1 + ((c + 1) % n) as i64))?;
        self.op(Instr::BarArrive {
            id,
            threads: 2 * WG,
        })?;
        Ok(())
    }

    /// One steady-state block of consumer `c` at ring position `g`, as
    /// FA3's mainloop writes it.
    ///
    /// With intra-WarpGroup overlap: [turn] S(g), P V(g-1) [pass]; wait for
    /// S(g); softmax; wait for P V(g-1); rescale. Without it, as in the 2024
    /// FA3 release the paper's ablation measured: [turn] S(g) [pass]; wait;
    /// softmax; P V(g), waited for at once; rescale.
    fn consumer_block(
        &mut self,
        c: u32,
        g: Ring,
        prev: Ring,
        masked: bool,
    ) -> Result<(), GenError> {
        let soft = self.nm.block(masked);
        self.wait_full(self.k_full, g)?;
        if self.p.variant == Variant::NoOverlap {
            self.turn(c)?;
            self.gemm_s()?;
            self.pass(c)?;
            self.op(Instr::WgmmaWait { n: 0 })?;
            self.release(self.k_empty, g)?;
            self.compute(soft)?;
            self.wait_full(self.v_full, g)?;
            self.gemm_pv()?;
            self.op(Instr::WgmmaWait { n: 0 })?;
            self.release(self.v_empty, g)?;
            self.compute(self.nm.rescale)?;
            return Ok(());
        }
        self.turn(c)?;
        self.gemm_s()?;
        self.wait_full(self.v_full, prev)?;
        self.gemm_pv()?;
        self.pass(c)?;
        self.op(Instr::WgmmaWait { n: 1 })?;
        self.release(self.k_empty, g)?;
        self.compute(soft)?;
        self.op(Instr::WgmmaWait { n: 0 })?;
        self.release(self.v_empty, prev)?;
        self.compute(self.nm.rescale)?;
        Ok(())
    }

    /// Consumer `c`'s program for one tile.
    pub(super) fn consumer_tile(&mut self, c: u32) -> Result<(), GenError> {
        let no_ws_loader = self.p.variant == Variant::NoWs && c == 0;
        if no_ws_loader {
            // K(0), Q, then K(1), V(0): one block ahead.
            self.load_kv(K, self.ring(0, false), self.kv_row(0, false))?;
            self.load_q()?;
            self.wait_o_free()?;
            self.load_kv(K, self.ring(1, false), self.kv_row(1, false))?;
            self.load_kv(V, self.ring(0, false), self.kv_row(0, false))?;
        }
        let q = self.at(self.q_full, lin(0))?;
        let qpar = self.e(Expr {
            l: [1, 0, 0, 0],
            rem: 2,
            ..lin(0)
        })?;
        self.op(Instr::MbarWait {
            bar: q,
            parity: qpar,
        })?;
        let overlap = self.p.variant != Variant::NoOverlap;
        let first = self.nm.block(self.p.causal);
        // Block 0: S(0) and its softmax (nothing to rescale yet). With
        // overlap FA3 issues S(0) outside the ping-pong.
        let g0 = self.ring(0, false);
        self.wait_full(self.k_full, g0)?;
        if !overlap {
            self.turn(c)?;
        }
        self.gemm_s()?;
        if !overlap {
            self.pass(c)?;
        }
        self.op(Instr::WgmmaWait { n: 0 })?;
        self.release(self.k_empty, g0)?;
        self.compute(first)?;
        if !overlap {
            self.wait_full(self.v_full, g0)?;
            self.gemm_pv()?;
            self.op(Instr::WgmmaWait { n: 0 })?;
            self.release(self.v_empty, g0)?;
        }
        // Blocks 1..n as loops over (count, first ring offset, masked).
        let segments: Vec<(Expr, i64, bool, bool)> = if self.persistent() {
            let n = self.plan.n_blocks as i64;
            if self.p.variant == Variant::NoWs {
                // The loader prefetches K(g+1) on all but the last block.
                vec![(lin(n - 2), 1, false, true), (lin(1), n - 1, false, false)]
            } else {
                vec![(lin(n - 1), 1, false, true)]
            }
        } else {
            let t = self.plan.tiling;
            let m = self.plan.masked as i64;
            let top =
                (self.p.seqlen_q - (self.plan.m_blocks - 1) * t.block_m).div_ceil(t.block_n) as i64;
            // Masked blocks after block 0: m - 1, one fewer on a short top
            // tile (cx = m_blocks - 1): ((m-1)*d + d - 2 - cx) div d.
            let masked = if top >= m || self.plan.m_blocks == 1 {
                lin(m.min(top) - 1)
            } else {
                let d = self.plan.m_blocks as i64;
                Expr {
                    c: [-1, 0, 0],
                    div: d,
                    ..lin((m - 1) * d + d - 2)
                }
            };
            // Unmasked: n(cx) - m, skipped when <= 0.
            let unmasked = Expr {
                c: [-(t.block_m as i64), 0, 0],
                div: t.block_n as i64,
                ..lin(self.p.seqlen_q as i64 + t.block_n as i64 - 1 - m * t.block_n as i64)
            };
            vec![(masked, 1, true, true), (unmasked, m, false, true)]
        };
        for (count, off, masked, load_k) in segments {
            if count.is_constant() && count.k <= 0 {
                continue;
            }
            let b = self.loop_begin(count)?;
            if no_ws_loader {
                if load_k {
                    self.load_kv(K, self.ring(off + 1, true), self.kv_row(off + 1, true))?;
                }
                self.load_kv(V, self.ring(off, true), self.kv_row(off, true))?;
            }
            let g = self.ring(off, true);
            let prev = self.ring(off - 1, true);
            self.consumer_block(c, g, prev, masked)?;
            self.loop_end(b)?;
        }
        let q_stage = self.at(self.q_empty, lin(0))?;
        self.op(Instr::StageRelease {
            stage: q_stage,
            cluster: 0,
        })?;
        if overlap {
            // The last P V, outside the ping-pong as in FA3.
            let last = self.ring_last();
            self.wait_full(self.v_full, last)?;
            self.gemm_pv()?;
            self.op(Instr::WgmmaWait { n: 0 })?;
            self.release(self.v_empty, last)?;
        }
        // Epilogue: normalise and convert, gather the tile in shared
        // memory (a named barrier of all consumers), and the first consumer
        // stores it and tells the producer V's shared memory is free.
        self.compute(self.nm.epilogue)?;
        let n = self.plan.tiling.consumers;
        let id = self.e(lin(1 + n as i64))?;
        self.op(Instr::BarSync {
            id,
            threads: n as u16 * WG,
        })?;
        if c == 0 {
            let zero = self.e(lin(0))?;
            let coords = [
                zero,
                self.e(self.head())?,
                self.e(self.q_row())?,
                self.e(self.batch())?,
                zero,
            ];
            self.op(Instr::TmaStore {
                map: self.maps[O],
                coords,
            })?;
            self.op(Instr::StoreWait { n: 0 })?;
            let bar = self.at(self.o_free, lin(0))?;
            self.op(Instr::MbarArrive { bar })?;
        }
        Ok(())
    }
}
