//! Stream-K (Osama et al., PPoPP 2023): a persistent GEMM whose CTAs share
//! out the K iterations of all the tiles rather than the tiles, so that a
//! grid of few tiles still keeps every SM busy.
//!
//! # The schedule
//!
//! [`GemmParams::stream_k_split`] splits the tiles, in Triton's grouped
//! order, into the first `S` stream-K tiles and the data-parallel ones
//! after them, and picks `U` units (CTAs) for the stream-K part, as
//! CUTLASS's stream-K scheduler does. The `I = S x K/BK` stream-K
//! iterations, tile after tile, are cut among the units evenly: unit `u`
//! computes iterations `[u*I/U, (u+1)*I/U)` (floor divisions), so every
//! unit gets `I/U` of them or one more. Each CTA then computes its
//! data-parallel tiles, `S + c + w*G` for `w = 0, 1, ..` (`G` the grid),
//! as CUTLASS's work units after the stream-K ones do. A unit's range
//! crosses tiles; each tile a CTA touches is a [`Segment`] ending one of
//! three ways:
//!
//! - **store**: the CTA computed the whole tile and stores C as the
//!   persistent kernel does;
//! - **partial**: the CTA computed the tile's later iterations (this is
//!   only ever its first segment). Each consumer writes its FP32 partial
//!   sums to the CTA's slot of the workspace (`st.global W, [0, wg*h,
//!   c]`), drains the stores and adds 1 to its counter;
//! - **fix-up**: the CTA computed the tile's first iterations (only ever
//!   its last segment) and the CTAs after it the rest. Each consumer waits
//!   for each contributor's counter to reach 1, loads their partial sums
//!   into its `reduce` mbarrier, adds them (`compute fp32`) and stores C.
//!
//! The counters (`c * consumers + wg`, one per consumer of a contributing
//! CTA: [`Instr::CounterAdd`]) are the flags CUTLASS's fix-up waits on:
//! a contributor signals once its partial sums have landed, and the
//! finisher, which reaches its fix-up only after its whole range of
//! iterations, polls until they have. Because a tile's later iterations
//! are a CTA's first work and its first iterations a CTA's last, the
//! finisher rarely waits, as in the paper.
//!
//! # Programs and streams
//!
//! The kernel's roles `producer` and `consumer` are `stream` roles
//! ([`gemm`](super::gemm) declares them): [`StreamK`] builds, for the
//! segment a WarpGroup is at, a small program with the segment's tile, K
//! range and ring offset as constants (the persistent kernel's loads,
//! WGMMAs and stores; the same declarations as the stream kernel), and
//! hands its ops over through [`Walk`], one segment after another. A
//! CTA's WarpGroups share each program, built by the first to reach it and
//! dropped once the last has: memory stays at a segment's program or two
//! per resident CTA.

use std::collections::btree_map::Entry;
use std::collections::BTreeMap;
use std::ops::Range;
use std::rc::Rc;

use simfa_core::isa::EvalCtx;
use simfa_core::source::SourceError;
use simfa_core::{Expr, Instr, Kernel, Op, Ref, StreamSource, Walk};

use super::{
    bubble, coords, emit_loads, emit_mma, emit_reduce, emit_store, map2d, name, tensor_bases,
    workspace_base, Operands, Tile, EMPTY, FULL, MAP_A, MAP_C, PARTIAL_BYTES,
};
use crate::gen::gemm_params::{GemmParams, PRODUCER_REGS};
use crate::gen::{GenError, Kb};
use simfa_core::builder::Builder;
use simfa_core::{CtaOrder, TensorMap};

/// Map index of the workspace of partial sums (after A, B and C).
const MAP_W: u8 = 3;
/// Declaration index of the `reduce` mbarriers (after `full`).
const REDUCE: u8 = FULL + 1;

/// How a CTA's share of one tile ends.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SegmentEnd {
    /// The CTA computed the whole tile: it stores C.
    Store,
    /// The CTA computed the tile's later iterations: it writes its partial
    /// sums to its workspace slot.
    Partial,
    /// The CTA computed the tile's first iterations and the CTAs `from` the
    /// rest: it adds their partial sums and stores C.
    Fixup {
        /// The contributing CTAs, in order.
        from: Range<u32>,
    },
}

/// A CTA's share of one tile: iterations `k_begin .. k_begin + k_len` of
/// tile `tile` (in grouped order).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Segment {
    /// The tile's index in grouped order.
    pub tile: u64,
    /// Its first K iteration this CTA computes.
    pub k_begin: u32,
    /// Iterations this CTA computes.
    pub k_len: u32,
    /// How it ends.
    pub end: SegmentEnd,
}

/// The first of the stream-K tiles' iterations (in tile order) that unit
/// `u` computes; `first_iter(p, units)` is their number.
pub fn first_iter(p: &GemmParams, u: u64) -> u64 {
    let (dp, units) = p.stream_k_split();
    let total = (p.tiles() - dp) as u128 * p.k_iters() as u128;
    (u as u128 * total / units.max(1) as u128) as u64
}

/// The tile row and column (`pid_m`, `pid_n`) of tile `t` in Triton's
/// grouped order: `group_m` row blocks swept column by column, the last
/// group of fewer rows when `group_m` does not divide them.
pub fn tile_coords(p: &GemmParams, t: u64) -> (u32, u32) {
    let (tm, tn) = (p.tiles_m() as u64, p.tiles_n() as u64);
    let g = p.group_m.max(1) as u64;
    let per_group = g * tn;
    let first = t / per_group * g;
    let size = (tm - first).min(g);
    let within = t % per_group;
    ((first + within % size) as u32, (within / size) as u32)
}

/// CTA `cta`'s segments, in the order it computes them: its share of the
/// stream-K tiles' iterations (when it is one of the units), then its
/// data-parallel tiles, every `grid`-th after the stream-K tiles.
pub fn segments(p: &GemmParams, cta: u32) -> Vec<Segment> {
    let ipt = p.k_iters() as u64;
    let (dp, units) = p.stream_k_split();
    let sk_tiles = p.tiles() - dp;
    let c = cta as u64;
    let (mut at, end) = if c < units {
        (first_iter(p, c), first_iter(p, c + 1))
    } else {
        (0, 0)
    };
    let mut out = Vec::new();
    while at < end {
        let tile = at / ipt;
        let tile_end = (tile + 1) * ipt;
        let k_begin = at % ipt;
        let stop = end.min(tile_end);
        let kind = if k_begin > 0 {
            SegmentEnd::Partial
        } else if stop == tile_end {
            SegmentEnd::Store
        } else {
            let mut last = c + 1;
            while last < units && first_iter(p, last) < tile_end {
                last += 1;
            }
            SegmentEnd::Fixup {
                from: cta + 1..last as u32,
            }
        };
        out.push(Segment {
            tile,
            k_begin: k_begin as u32,
            k_len: (stop - at) as u32,
            end: kind,
        });
        at = stop;
    }
    let grid = p.grid_ctas();
    let mut tile = sk_tiles + c;
    while tile < p.tiles() {
        out.push(Segment {
            tile,
            k_begin: 0,
            k_len: ipt as u32,
            end: SegmentEnd::Store,
        });
        tile += grid;
    }
    out
}

/// The workspace: one `BM x BN` FP32 slot per CTA, a consumer's rows per
/// box.
fn workspace_map(p: &GemmParams) -> TensorMap {
    let e = PARTIAL_BYTES as u64;
    let (bm, bn) = (p.block_m as u64, p.block_n as u64);
    TensorMap {
        name: name("W"),
        base: workspace_base(p),
        elem_bytes: PARTIAL_BYTES as u8,
        rank: 3,
        dims: [bn, bm, p.grid_ctas(), 0, 0],
        strides: [e, bn * e, bm * bn * e, 0, 0],
        boxdim: [p.block_n, p.rows_per_consumer(), 1, 0, 0],
    }
}

/// A builder with the declarations every stream-K kernel and segment
/// program shares, in one order.
fn declared(p: &GemmParams) -> Result<Kb, GenError> {
    let mut b = Builder::new(
        Kernel::default(),
        &name(&format!("gemm_{}x{}x{}", p.m, p.n, p.k)),
    )?;
    let k = &mut b;
    k.grid([p.grid_ctas() as u32, 1, 1]);
    k.order(CtaOrder::Linear);
    k.smem(p.smem_bytes() as u32);
    let [a, bb, c] = tensor_bases(p);
    let (bm, bn, bk) = (p.block_m, p.block_n, p.block_k);
    k.map(map2d("A", a, p.m, p.k, bk, bm))?;
    k.map(map2d("B", bb, p.k, p.n, bn, bk))?;
    k.map(map2d("C", c, p.m, p.n, bn, p.rows_per_consumer()))?;
    k.map(workspace_map(p))?;
    k.mbarriers("full", p.stages as u16, 1)?;
    k.stages("empty", p.stages as u16, p.consumers as u16)?;
    k.mbarriers("reduce", p.consumers as u16, 1)?;
    Ok(b)
}

/// The stream-K kernel: the shared declarations, its roles streamed.
pub(super) fn kernel(p: &GemmParams) -> Result<Kernel, GenError> {
    let mut b = declared(p)?;
    b.stream_role("producer", 1, PRODUCER_REGS as u32)?;
    b.stream_role("consumer", p.consumers, p.mma_regs())?;
    // A first segment's program checks the shapes once, up front.
    segment_program(p, 0, &segments(p, 0), 0, 0)?;
    Ok(b.finish()?)
}

/// The counter of consumer `wg` of CTA `cta`.
fn counter(k: &mut Kb, p: &GemmParams, cta: u32) -> Result<u16, GenError> {
    Ok(k.expr(Expr {
        wg: 1,
        ..Expr::constant(cta as i64 * p.consumers as i64)
    })?)
}

/// The program of segment `j` of CTA `cta`, whose earlier segments took
/// `offset` of its ring's iterations.
fn segment_program(
    p: &GemmParams,
    cta: u32,
    segs: &[Segment],
    j: usize,
    offset: u64,
) -> Result<Kernel, GenError> {
    let seg = &segs[j];
    let last = j + 1 == segs.len();
    let mut b = declared(p)?;
    let k = &mut b;
    let z = Expr::constant(0);
    let (bm, bn, bk) = (p.block_m as i64, p.block_n as i64, p.block_k as i64);
    let s = p.stages as i64;
    let o = offset as i64;
    let g = Expr {
        k: o,
        l: [1, 0, 0, 0],
        ..z
    };
    let k_off = Expr {
        k: seg.k_begin as i64 * bk,
        l: [bk, 0, 0, 0],
        ..z
    };
    let (pm, pn) = tile_coords(p, seg.tile);
    let (row, col) = (
        Expr::constant(pm as i64 * bm),
        Expr::constant(pn as i64 * bn),
    );
    let h = p.rows_per_consumer() as i64;
    let ops = Operands {
        tile_trips: None,
        k_trips: Expr::constant(seg.k_len as i64),
        slot: Expr { rem: s, ..g },
        parity: Expr {
            div: s,
            rem: 2,
            ..g
        },
        tiles: vec![Tile {
            when: None,
            map_a: MAP_A,
            map_c: MAP_C,
            a: vec![k_off, row],
            b: vec![col, k_off],
            c: vec![col, Expr { wg: h, ..row }],
        }],
        a_multicast: 0,
        b_multicast: 0,
        release: 0,
    };
    let tile = &ops.tiles[0];
    let empty = |k: &mut Kb| -> Result<Ref, GenError> {
        Ok(Ref {
            decl: EMPTY,
            idx: k.expr(ops.slot)?,
        })
    };
    // producer
    k.begin_role("producer", 1, PRODUCER_REGS as u32)?;
    let kl = k.loop_begin(ops.k_trips)?;
    let stage = empty(k)?;
    k.op(Instr::StageAcquire { stage })?;
    emit_loads(k, &ops, tile, p.stage_bytes() as u32)?;
    k.loop_end(kl)?;
    if last {
        k.op(Instr::Exit)?;
    }
    k.end_role()?;
    // consumers
    k.begin_role("consumer", p.consumers, p.mma_regs())?;
    if j == 0 {
        bubble(k, p.prologue_bubble as u64)?;
    }
    let kl = k.loop_begin(ops.k_trips)?;
    emit_mma(k, p, &ops)?;
    let stage = empty(k)?;
    k.op(Instr::StageRelease { stage, cluster: 0 })?;
    bubble(k, p.iter_bubble_cycles())?;
    k.loop_end(kl)?;
    let wg = Expr { wg: 1, ..z };
    match &seg.end {
        SegmentEnd::Store => emit_store(k, p, tile)?,
        SegmentEnd::Partial => {
            let own = [z, Expr { wg: h, ..z }, Expr::constant(cta as i64)];
            let c = coords(k, MAP_W, &own)?;
            k.op(Instr::StGlobal {
                map: MAP_W,
                coords: c,
                segment: crate::gen::Epilogue::STORE_SEGMENT,
            })?;
            k.op(Instr::StoreWait { n: 0 })?;
            let counter = counter(k, p, cta)?;
            let amount = k.expr(Expr::constant(1))?;
            k.op(Instr::CounterAdd { counter, amount })?;
        }
        SegmentEnd::Fixup { from } => {
            // The contributors are consecutive CTAs: one loop over them
            // (loop counter 0, the K loop being closed) for the counters
            // and one for the loads, whatever their number.
            let n = from.len() as u32;
            let (first, cons) = (from.start as i64, p.consumers as i64);
            let each = k.loop_begin(Expr::constant(n as i64))?;
            let counter = k.expr(Expr {
                k: first * cons,
                wg: 1,
                l: [cons, 0, 0, 0],
                ..z
            })?;
            let count = k.expr(Expr::constant(1))?;
            k.op(Instr::CounterWait { counter, count })?;
            k.loop_end(each)?;
            let bar = Ref {
                decl: REDUCE,
                idx: k.expr(wg)?,
            };
            // Contributor first + i's slot, the consumer's rows.
            emit_reduce(k, p, tile, (MAP_W, bar), n, |i| {
                [z, Expr { wg: h, ..z }, Expr { k: first, ..i }]
            })?;
        }
    }
    if last {
        k.op(Instr::StoreWait { n: 0 })?;
        k.op(Instr::Exit)?;
    }
    k.end_role()?;
    Ok(b.finish()?)
}

/// Where one WarpGroup is in its CTA's segments.
struct Cursor {
    /// Ops handed over so far.
    pos: u64,
    segs: Rc<[Segment]>,
    seg: usize,
    /// Ring iterations of the segments before `seg`.
    offset: u64,
    program: Rc<Kernel>,
    walk: Walk,
}

/// A CTA's segments or one segment's program, built by the first of the
/// CTA's WarpGroups to need it and kept until the others have taken it.
struct Shared<T: ?Sized> {
    value: Rc<T>,
    /// WarpGroups still to take it.
    left: u32,
}

/// Takes `key`'s shared value, building it with `make` for the first of
/// `users` takers; dropped from `map` once the last has taken it. (A run
/// resumed from a snapshot may take a value again: it is then built again.)
fn take<K: Ord + Copy, T: ?Sized>(
    map: &mut BTreeMap<K, Shared<T>>,
    key: K,
    users: u32,
    make: impl FnOnce() -> Result<Rc<T>, SourceError>,
) -> Result<Rc<T>, SourceError> {
    if let Some(s) = map.get_mut(&key) {
        let v = Rc::clone(&s.value);
        s.left -= 1;
        if s.left == 0 {
            map.remove(&key);
        }
        return Ok(v);
    }
    let v = make()?;
    if users > 1 {
        map.insert(
            key,
            Shared {
                value: Rc::clone(&v),
                left: users - 1,
            },
        );
    }
    Ok(v)
}

/// The CTAs' segments and segment programs, shared by their WarpGroups.
struct Library {
    p: GemmParams,
    segs: BTreeMap<u32, Shared<[Segment]>>,
    programs: BTreeMap<(u32, usize), Shared<Kernel>>,
}

impl Library {
    /// WarpGroups per CTA: the producer and the consumers.
    fn users(&self) -> u32 {
        1 + self.p.consumers
    }

    /// Segment `j`'s program for CTA `cta`, `offset` ring iterations in.
    fn program(
        &mut self,
        cta: u32,
        segs: &[Segment],
        j: usize,
        offset: u64,
    ) -> Result<Rc<Kernel>, SourceError> {
        let (p, users) = (self.p, self.users());
        take(&mut self.programs, (cta, j), users, || {
            segment_program(&p, cta, segs, j, offset)
                .map(Rc::new)
                .map_err(|_| SourceError)
        })
    }

    /// WarpGroup `wg` of role `role` in CTA `cta`, at its first op.
    fn start(&mut self, cta: u32, role: u8, wg: u8) -> Result<Cursor, SourceError> {
        let (p, users) = (self.p, self.users());
        let segs = take(&mut self.segs, cta, users, || {
            Ok(Rc::from(segments(&p, cta)))
        })?;
        if segs.is_empty() {
            return Err(SourceError);
        }
        let program = self.program(cta, &segs, 0, 0)?;
        let walk = Walk::new(&program, role, ctx(cta, wg)).map_err(|_| SourceError)?;
        Ok(Cursor {
            pos: 0,
            segs,
            seg: 0,
            offset: 0,
            program,
            walk,
        })
    }
}

impl Cursor {
    /// The WarpGroup's next op (it is `key`), moving on to its next
    /// segment's program at the end of one; `None` after the last.
    fn next(&mut self, lib: &mut Library, key: (u32, u8, u8)) -> Result<Option<Op>, SourceError> {
        let (cta, role, wg) = key;
        loop {
            if let Some(op) = self.walk.next_op(&self.program).map_err(|_| SourceError)? {
                self.pos += 1;
                return Ok(Some(op));
            }
            if self.seg + 1 >= self.segs.len() {
                return Ok(None);
            }
            self.offset += self.segs[self.seg].k_len as u64;
            self.seg += 1;
            self.program = lib.program(cta, &self.segs, self.seg, self.offset)?;
            self.walk = Walk::new(&self.program, role, ctx(cta, wg)).map_err(|_| SourceError)?;
        }
    }
}

/// The [`StreamSource`] of a stream-K kernel: each WarpGroup's ops, one
/// segment's program at a time, each program built once for its CTA's
/// WarpGroups.
pub struct StreamK {
    at: BTreeMap<(u32, u8, u8), Cursor>,
    lib: Library,
}

impl StreamK {
    /// The source of the stream-K kernel of `p`.
    pub fn new(p: &GemmParams) -> Self {
        StreamK {
            at: BTreeMap::new(),
            lib: Library {
                p: *p,
                segs: BTreeMap::new(),
                programs: BTreeMap::new(),
            },
        }
    }
}

fn ctx(cta: u32, wg: u8) -> EvalCtx {
    EvalCtx {
        cta,
        c: [cta, 0, 0],
        wg,
        l: [0; simfa_core::isa::MAX_LOOP_DEPTH],
    }
}

impl StreamSource for StreamK {
    fn pull(&mut self, cta: u32, role: u8, wg: u8, pos: u64) -> Result<Option<Op>, SourceError> {
        let key = (cta, role, wg);
        let cur = match self.at.entry(key) {
            Entry::Occupied(o) if o.get().pos <= pos => o.into_mut(),
            // First pull, or a run resumed from a snapshot: from the start.
            Entry::Occupied(mut o) => {
                o.insert(self.lib.start(cta, role, wg)?);
                o.into_mut()
            }
            Entry::Vacant(v) => v.insert(self.lib.start(cta, role, wg)?),
        };
        let mut op = cur.next(&mut self.lib, key)?;
        while op.is_some() && cur.pos <= pos {
            op = cur.next(&mut self.lib, key)?;
        }
        if matches!(op, None | Some(Op::Exit)) {
            self.at.remove(&key);
        }
        Ok(op)
    }
}

#[cfg(test)]
#[path = "gemm_stream_k_tests.rs"]
mod tests;
