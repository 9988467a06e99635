//! A TTGIR kernel and its launch as a simfa kernel: the declarations from
//! the module and a probe of CTA 0, and each CTA's WarpGroup streams from
//! the interpreter's effects, made as the simulator pulls them
//! ([`super::source::TtgirSource`]).
//!
//! # The kernel
//!
//! - **Grid** from the launch; CTA `i` runs with the program ids
//!   [`Kernel::cta_coords`] gives it (x fastest).
//! - **WarpGroups**: one stream role of `num-warps / 4` WarpGroups (at
//!   least one), with the launch's `regs` (168 by default), or, with warp
//!   specialisation, the registers Triton's `setmaxnreg` gives each
//!   partition (`registers.rs`).
//! - **Tensor maps**: one per descriptor argument a TMA op uses, its box
//!   from that op's type, its tensor from the launch.
//! - **MBarriers**: one array per barrier buffer CTA 0 initialises, of the
//!   buffer's length, with the count its `init_barrier` gives.
//! - **Shared memory**: the launch's `smem` (Triton's own layout), or
//!   the most bytes of buffers CTA 0 holds at once, from `local_alloc` to
//!   `local_dealloc`.
//!
//! # The streams (a kernel without warp specialisation)
//!
//! Every WarpGroup runs the body. A barrier initialisation, a TMA copy, a
//! store wait, an expect and an arrive are issued once per CTA, by
//! WarpGroup 0 (initialisations are followed by a CTA-wide `bar.sync`, as
//! Triton's lowering publishes them, when the CTA has several
//! WarpGroups); every WarpGroup
//! waits on mbarriers, and issues its share of each `warp_group_dot`
//! ([`super::Wgmma::per_warpgroup`]) and its dot waits; a synchronous dot
//! is followed by a wait for it. `barrier_expect` is PTX's
//! `mbarrier.arrive.expect_tx`: an expect and an arrive. Coordinates are
//! reversed to simfa's innermost-first order. Element-wise tensor math is
//! `compute` work, each WarpGroup taking its share of the CTA's
//! ([`super::interp`]'s work table); consecutive work is one `compute`.
//! Loads and stores through pointers, and TMA loads into registers, are
//! [`super::pointer`]'s.

use std::collections::{BTreeSet, HashMap, HashSet, VecDeque};
use std::hash::BuildHasherDefault;
use std::sync::Arc;

use fnv::FnvHasher;
use simfa_core::builder::Builder;
use simfa_core::kernel::{MAX_COUNTERS, MAX_LOCKS};
use simfa_core::{Kernel, Op, WgmmaMode, Work};

use super::error::TtgirError;
use super::global::Global;
use super::interp::{Effect, EffectSink, Interp, Origin, Role};
use super::launch::{Launch, LaunchError, Tensor};
use super::pointer::{all, Inflight, PtrMaps, Rings};
use super::scope::ScopeOp;
use super::tree::{Func, Module, Node};
use super::value::Value;

/// Registers per thread when the launch does not say.
pub const DEFAULT_REGS: u32 = 168;

/// Why a TTGIR kernel cannot be run.
#[derive(Debug, thiserror::Error)]
pub enum LowerError {
    /// The TTGIR cannot be read or executed.
    #[error(transparent)]
    Ttgir(#[from] TtgirError),
    /// The launch file does not fit the kernel.
    #[error(transparent)]
    Launch(#[from] LaunchError),
    /// The kernel has a feature simfa cannot build (yet), or its
    /// declarations do not fit simfa's limits.
    #[error("{file}: {why}")]
    Kernel {
        /// The TTGIR file.
        file: String,
        /// What does not fit.
        why: String,
    },
}

/// A descriptor made in the kernel: its box, dims and byte strides, all
/// innermost first.
type MadeShape = (Vec<u32>, Vec<u64>, Vec<u64>);

/// A TTGIR kernel ready to run: its simfa kernel and what turns a CTA's
/// effects into instructions.
pub struct Program<'m, 'a> {
    pub(super) module: &'m Module<'a>,
    pub(super) func: &'m Func<'a>,
    pub(super) args: Vec<Value>,
    /// The simfa kernel (every role a stream role).
    pub kernel: Kernel,
    /// WarpGroups of each role: the function's own warps, then each
    /// worker partition's.
    pub(super) wgs: Vec<u8>,
    /// Tensor map of each descriptor key (an argument position, or a
    /// descriptor made in the kernel).
    maps: HashMap<u32, u8>,
    /// What each descriptor made in the kernel was made as in CTA 0: box,
    /// dims and strides (every CTA must make the same).
    made: HashMap<u32, MadeShape>,
    /// First CTA-wide index and length of each barrier buffer.
    bars: HashMap<u32, (u16, u16)>,
    /// The launch's tensor of each pointer argument, with its name.
    ptr_tensors: HashMap<u16, (String, Tensor)>,
    /// Tensor maps of the pointer tiles CTA 0 moves.
    ptr_maps: PtrMaps,
    /// The kernel's own warps' mbarrier rings for loads through pointers.
    rings: Rings,
    pub(super) budget: u64,
    /// The launch's tensors and buffers, for the interpreter's loads.
    pub(super) global: Arc<Global>,
    /// The dots' depth per WGMMA over the 16 the core counts each with:
    /// numerator and denominator ([`Program::dot_flops`]).
    depth_scale: (u64, u64),
}

/// What lowering keeps of a CTA role's run between effects.
#[derive(Debug, Default)]
pub struct RunState {
    /// Barriers were initialised since the last CTA-wide barrier.
    unsynced: bool,
    /// Loads through pointers in flight.
    inflight: Inflight,
    /// Each WarpGroup's work since its last op that is not work.
    compute: Vec<Option<Work>>,
    /// Each WarpGroup's queue length before the effect being lowered.
    lens: Vec<usize>,
}

impl<'m, 'a> Program<'m, 'a> {
    /// The kernel `launch` (read from `launch_file`) runs in `module`.
    pub fn new(
        module: &'m Module<'a>,
        launch: &Launch,
        launch_file: &str,
    ) -> Result<Self, LowerError> {
        let fail = |why: String| LowerError::Kernel {
            file: module.file.clone(),
            why,
        };
        let func = module
            .func(launch.kernel.as_deref())
            .ok_or_else(|| match &launch.kernel {
                Some(k) => LowerError::Launch(LaunchError {
                    file: launch_file.to_string(),
                    why: format!("kernel = \"{k}\": {} has no function `@{k}`", module.file),
                }),
                None => fail(
                    "the module does not have exactly one public function; name one with `kernel = ...` in the launch file".into(),
                ),
            })?;
        let args = launch.bind(launch_file, func)?;
        let warps = module
            .attr_int("ttg.num-warps")
            .or_else(|| module.attr_int("triton_gpu.num-warps"))
            .unwrap_or(4);
        let wgs = u8::try_from((warps / 4).max(1)).map_err(|_| {
            fail(format!(
                "num-warps {warps} is more WarpGroups than a CTA has"
            ))
        })?;
        let workers = partitions(module, func).map_err(fail)?;

        let mut b = Builder::new(Kernel::default(), super::launch::short_name(func.name))
            .map_err(|e| fail(e.to_string()))?;
        b.grid(launch.grid);

        // Tensor maps: every descriptor a TMA op names, with its box.
        let mut maps = HashMap::new();
        let mut boxes: Vec<(u16, Vec<u32>)> = Vec::new();
        walk(&func.body.blocks, &HashMap::new(), &mut |n, alias| {
            if let Some(ScopeOp::TmaLoad(c) | ScopeOp::TmaStore(c)) = &n.scope {
                let desc = alias
                    .get(c.desc.as_str())
                    .copied()
                    .unwrap_or(c.desc.as_str());
                if let Some(pos) = func.args.iter().position(|(a, _)| *a == desc) {
                    if !boxes.iter().any(|(p, _)| *p == pos as u16) {
                        boxes.push((pos as u16, c.box_shape.clone()));
                    }
                }
            }
        });
        boxes.sort();
        for (pos, shape) in &boxes {
            let (name, ty) = func.args[*pos as usize];
            let t = launch
                .tensor(name, *pos as usize)
                .ok_or_else(|| fail(format!("the descriptor `{name}` has no tensor")))?;
            // The hardware box is at most 256 elements along each
            // dimension (as Triton's descriptors clamp it) and no wider than
            // the layout's swizzle span; a larger block is several copies
            // (see `copies`).
            let mut hw: Vec<u32> = shape.iter().map(|&d| d.min(256)).collect();
            if let (Some(span), Some(inner)) = (module.swizzle_bytes(ty, func.at), hw.last_mut()) {
                let cap = (span / t.elem.max(1) as u64).max(1) as u32;
                *inner = (*inner).min(cap);
            }
            let m = Launch::map(name, t, &hw).map_err(|why| {
                LowerError::Launch(LaunchError {
                    file: launch_file.to_string(),
                    why: format!("tensor `{}`: {why}", name.trim_start_matches('%')),
                })
            })?;
            let i = b.map(m).map_err(|e| fail(e.to_string()))?;
            maps.insert(*pos as u32, i);
        }

        // Barriers and shared memory, from CTA 0's run (which keeps only
        // the allocations and initialisations).
        let mut decls = Decls::default();
        let budget = launch.max_steps.unwrap_or(super::launch::DEFAULT_MAX_STEPS);
        let global = Arc::new(Global::new(launch, func, &args));
        // A CTA's run, every role of it: the worker partitions make
        // descriptors and move tiles of their own.
        let roles = 1 + workers.len();
        let probe = |coords: [u32; 3], sink: &mut Decls<'m>| -> Result<(), LowerError> {
            for r in 0..roles {
                Interp::new(module, coords, launch.grid, budget)
                    .with_global(global.clone())
                    .as_role(Role::of(r as u8))
                    .run(func, &args, sink)?;
            }
            Ok(())
        };
        probe([0, 0, 0], &mut decls)?;
        // The tensor maps of the tiles moved through pointers and of the
        // descriptors made in the kernel are declared once, from the CTAs
        // that reach them: more CTAs are probed, from both ends of the
        // grid inwards (a triangular kernel's first CTA skips loops its last
        // runs), until every such op of the module has been seen, or every
        // CTA has run. With [buffers], which tensors a CTA reaches depends
        // on the CTA (a grouped GEMM's CTAs work on different matrices), so
        // every CTA is probed; otherwise at most [`MAX_PROBES`] more (an op
        // no CTA reaches, behind a branch no launch takes, would make
        // every CTA run twice).
        let need = pointer_sites(module);
        let ctas = launch.grid.iter().product::<u32>();
        let mut order = (1..ctas).map(|i| if i % 2 == 1 { ctas - 1 - i / 2 } else { i / 2 });
        let mut probed = 0;
        // The later CTAs' tiles and descriptors (their allocations and
        // barriers are CTA 0's), each kind of tile once.
        let mut more = Decls {
            seen: std::mem::take(&mut decls.seen),
            ..Decls::default()
        };
        let covered = |d: &Decls, m: &Decls| {
            need.iter()
                .all(|s| d.sites.contains(s) || m.sites.contains(s))
        };
        while global.has_buffers() || (!covered(&decls, &more) && probed < MAX_PROBES) {
            probed += 1;
            let Some(cta) = order.next() else { break };
            probe(b.kernel().cta_coords(cta), &mut more)?;
        }
        decls.tiles.append(&mut more.tiles);
        decls.made.append(&mut more.made);
        let Decls {
            allocs,
            peak,
            inits,
            made: made_list,
            tiles,
            tma_regs,
            ..
        } = decls;
        let mut made = HashMap::new();
        for (key, ptr, (boxdim, dims, strides)) in made_list {
            if made.contains_key(&key) {
                continue;
            }
            let region = global
                .region(ptr)
                .ok_or_else(|| fail(format!("pointer {ptr} has no tensor")))?;
            let (name, base) = (region.name.as_str(), &region.tensor);
            if boxdim.len() != dims.len() || dims.is_empty() || dims.len() > 5 {
                return Err(fail(format!(
                    "a descriptor over `{name}` with a box of {} and {} dimensions",
                    boxdim.len(),
                    dims.len()
                )));
            }
            let t = super::launch::Tensor {
                base: base.base,
                elem: base.elem,
                dims: dims.clone(),
                strides: strides.clone(),
                values: Vec::new(),
            };
            let shape: Vec<u32> = boxdim.iter().rev().copied().collect();
            let m = Launch::map(name, &t, &shape)
                .map_err(|why| fail(format!("the descriptor made over `{name}`: {why}")))?;
            let i = b.map(m).map_err(|e| fail(e.to_string()))?;
            maps.insert(key, i);
            made.insert(key, (boxdim, dims, strides));
        }
        let smem = launch.smem.map_or(peak, u64::from);
        b.smem(u32::try_from(smem).map_err(|_| fail(format!("{smem} bytes of shared memory")))?);
        let mut bars = HashMap::new();
        for &(alloc, bytes) in &allocs {
            let mine: Vec<&(u32, i64, u32)> = inits.iter().filter(|i| i.0 == alloc).collect();
            let Some(first) = mine.first() else { continue };
            let len = u16::try_from((bytes / 8).max(1))
                .map_err(|_| fail("a barrier buffer of more than 65535 barriers".into()))?;
            let count = u16::try_from(first.2)
                .map_err(|_| fail(format!("an arrival count of {}", first.2)))?;
            if mine.iter().any(|i| i.2 != first.2) {
                return Err(fail(
                    "barriers of one buffer initialised with different counts".into(),
                ));
            }
            let d = b
                .mbarriers(&format!("bar{}", bars.len()), len, count)
                .map_err(|e| fail(e.to_string()))?;
            bars.insert(alloc, (b.kernel().mbar_base(d), len));
        }
        // Pointer arguments' tensors, the maps of the tiles CTA 0 moves,
        // and the rings their loads complete on.
        let ptr_tensors: HashMap<u16, (String, Tensor)> = global
            .regions()
            .iter()
            .map(|r| (r.id, (r.name.clone(), r.tensor.clone())))
            .collect();
        let mut ptr_maps = PtrMaps::new();
        let mut rings = Rings::default();
        let (mut need_groups, mut need_loads) = (false, false);
        for &(from, ref tile, ring) in &tiles {
            let at_op = |why: String| {
                LowerError::Ttgir(module.error(
                    from.at,
                    super::error::TtgirErrorKind::Exec {
                        op: from.op.into(),
                        x: 0,
                        y: 0,
                        z: 0,
                        why,
                    },
                ))
            };
            let arg = tile.lin.ptr.unwrap_or(u16::MAX);
            let (name, t) = ptr_tensors.get(&arg).ok_or_else(|| {
                at_op(format!(
                    "a load or store through pointer argument {arg}, which has no [tensors] entry"
                ))
            })?;
            let p = super::pointer::place(t, tile)
                .map_err(|why| at_op(format!("a tile of `{name}`: {why}")))?;
            if !ptr_maps.contains_key(&(arg, p.block.clone())) {
                let m = super::pointer::map_for(name, t, &p.block).map_err(|why| {
                    LowerError::Launch(LaunchError {
                        file: launch_file.to_string(),
                        why: format!("tensor `{name}`: {why}"),
                    })
                })?;
                let i = b.map(m).map_err(|e| fail(e.to_string()))?;
                ptr_maps.insert((arg, p.block), i);
            }
            need_groups |= ring == Some(false);
            need_loads |= ring == Some(true);
        }
        for (need, nm, ring) in [
            (need_groups, "groups", &mut rings.groups),
            (need_loads || tma_regs, "loads", &mut rings.loads),
        ] {
            if need {
                let d = b
                    .mbarriers(nm, super::pointer::RING as u16, 1)
                    .map_err(|e| fail(e.to_string()))?;
                *ring = Some(b.kernel().mbar_base(d));
            }
        }
        let parts: Vec<_> = workers.iter().map(|w| w.1).collect();
        let (regs, part_regs) = if parts.is_empty() {
            (launch.regs.unwrap_or(DEFAULT_REGS), Vec::new())
        } else {
            super::registers::split(launch.regs, warps.clamp(0, 1024) as u32, &parts)
        };
        b.stream_role("body", wgs as u32, regs)
            .map_err(|e| fail(e.to_string()))?;
        let mut all = vec![wgs];
        for (i, (w, r)) in workers.iter().zip(&part_regs).enumerate() {
            b.stream_role(&format!("partition{i}"), w.0 as u32, *r)
                .map_err(|e| fail(e.to_string()))?;
            all.push(w.0);
        }
        let kernel = b.finish().map_err(|e| fail(e.to_string()))?;
        Ok(Program {
            module,
            func,
            args,
            kernel,
            wgs: all,
            maps,
            made,
            bars,
            ptr_tensors,
            ptr_maps,
            rings,
            budget,
            global,
            depth_scale: depth_scale(module),
        })
    }

    /// The kernel's math, from the FLOPs `wgmma_flops` its WGMMAs have as
    /// the core counts them (each a 16-bit `m64nNk16`): an FP8 WGMMA (k32)
    /// does twice that in the same time, a TF32 one (k8) half. A kernel
    /// whose dots differ in depth keeps the core's count.
    pub fn dot_flops(&self, wgmma_flops: u64) -> u64 {
        let (num, den) = self.depth_scale;
        wgmma_flops.saturating_mul(num) / den
    }

    /// Roles of the kernel: the function's own warps, then each worker
    /// partition.
    pub fn roles(&self) -> usize {
        self.wgs.len()
    }

    /// The hardware copies of a TMA copy of a `block` (outermost first) at
    /// `coords` (outermost first) through tensor map `map`: one per box of
    /// the map along each dimension the block is wider than the box (a
    /// block wider than the swizzle span), in simfa's innermost-first
    /// coordinates.
    fn copies(&self, map: u8, block: &[u32], coords: &[i64]) -> Result<Vec<[i64; 5]>, String> {
        let m = &self.kernel.maps[map as usize];
        let rank = m.rank as usize;
        if block.len() != rank || coords.len() != rank {
            return Err(format!(
                "a copy of a {}-dimensional block at {} coordinates through a {rank}-dimensional tensor map",
                block.len(),
                coords.len()
            ));
        }
        let mut origin = [0i64; 5];
        let mut per = [1u32; 5];
        for i in 0..rank {
            origin[i] = coords[rank - 1 - i];
            let b = block[rank - 1 - i];
            per[i] = b.div_ceil(m.boxdim[i].max(1));
        }
        let total: u32 = per.iter().product();
        if total > 256 {
            return Err(format!("a block of {total} hardware copies"));
        }
        let mut out = Vec::with_capacity(total as usize);
        for k in 0..total {
            let mut c = origin;
            let mut r = k;
            for i in 0..rank {
                c[i] += (r % per[i]) as i64 * m.boxdim[i] as i64;
                r /= per[i];
            }
            out.push(c);
        }
        Ok(out)
    }

    /// The mbarrier rings of role `role`'s loads: the kernel's own warps
    /// have them (declared from CTA 0's run); a worker partition has none.
    fn rings(&self, role: u8) -> Rings {
        if role == 0 {
            self.rings
        } else {
            Rings::default()
        }
    }

    /// Appends the run's pending work to every WarpGroup's queue (at the
    /// next op that is not work, and at the end of the run).
    pub(super) fn flush(st: &mut RunState, out: &mut [VecDeque<Op>]) {
        for (s, w) in out.iter_mut().zip(st.compute.iter_mut()) {
            if let Some(work) = w.take() {
                s.push_back(Op::Compute { work });
            }
        }
    }

    /// The ops of one effect (of op `from`, in the CTA at `coords`)
    /// appended to the WarpGroups' queues; `st` is what lowering keeps of
    /// the run. A WarpGroup's consecutive work is one `compute`, placed
    /// before its next other op, so the streams do not depend on when
    /// the WarpGroups pull.
    pub(super) fn lower(
        &self,
        coords: [u32; 3],
        role: u8,
        from: Origin<'_>,
        e: Effect<'_>,
        st: &mut RunState,
        out: &mut [VecDeque<Op>],
    ) -> Result<(), LowerError> {
        st.compute.resize(out.len(), None);
        st.lens.clear();
        st.lens.extend(out.iter().map(VecDeque::len));
        self.lower_one(coords, role, from, e, st, out)?;
        for ((s, w), &len) in out.iter_mut().zip(st.compute.iter_mut()).zip(&st.lens) {
            if s.len() > len {
                if let Some(work) = w.take() {
                    s.insert(len, Op::Compute { work });
                }
            }
        }
        Ok(())
    }

    /// The `ld.global`s or `st.global`s of pointer tiles `tiles` (one, or
    /// a gather's rows): the map, coordinates and segment of each, and the
    /// bytes they complete.
    fn ptr_ops(
        &self,
        tiles: &[super::interp::PtrTile],
    ) -> Result<(Vec<super::pointer::PtrOp>, u32), String> {
        let mut ops = Vec::new();
        let mut bytes = 0u64;
        for tile in tiles {
            let arg = tile.lin.ptr.unwrap_or(u16::MAX);
            let (_, t) = self
                .ptr_tensors
                .get(&arg)
                .ok_or("a pointer argument without a [tensors] entry")?;
            let p = super::pointer::place(t, tile)?;
            let map = *self.ptr_maps.get(&(arg, p.block.clone())).ok_or_else(|| {
                format!(
                    "a tile of {:?} elements (innermost first), a shape the CTAs probed before the run never move (simfa declares tensor maps once per kernel)",
                    p.block
                )
            })?;
            let block: Vec<u32> = p.block.iter().rev().copied().collect();
            let origin: Vec<i64> = p.origin.iter().rev().copied().collect();
            let copies = self.copies(map, &block, &origin)?;
            bytes += self.kernel.maps[map as usize].full_box_bytes() * copies.len() as u64;
            ops.extend(copies.into_iter().map(|c| (map, c, tile.segment)));
        }
        let bytes = u32::try_from(bytes).map_err(|_| format!("{bytes} bytes in one load"))?;
        Ok((ops, bytes))
    }

    /// A load through pointer tiles `tiles` (a load into registers when
    /// `regs` numbers it), on the rings of `role`.
    fn load_ptrs(
        &self,
        role: u8,
        st: &mut RunState,
        tiles: &[super::interp::PtrTile],
        regs: Option<u64>,
        out: &mut [VecDeque<Op>],
    ) -> Result<(), String> {
        let (ops, bytes) = self.ptr_ops(tiles)?;
        let l1 = tiles
            .first()
            .is_some_and(|t| super::pointer::through_l1(t, regs.is_some()));
        let push = |bar, q: &mut VecDeque<Op>| super::pointer::ld_globals(&ops, bar, l1, q);
        self.rings(role)
            .load(&mut st.inflight, regs, bytes, push, out)
            .map_err(|w| w.to_string())
    }

    /// A store from registers through pointer tiles `tiles`, by WarpGroup 0.
    fn store_ptrs(
        &self,
        tiles: &[super::interp::PtrTile],
        out: &mut [VecDeque<Op>],
    ) -> Result<(), String> {
        let (ops, _) = self.ptr_ops(tiles)?;
        out[0].extend(ops.into_iter().map(|(map, coords, segment)| Op::StGlobal {
            map,
            coords,
            segment,
        }));
        Ok(())
    }

    /// [`Program::lower`] without the pending work.
    fn lower_one(
        &self,
        coords: [u32; 3],
        role: u8,
        from: Origin<'_>,
        e: Effect<'_>,
        st: &mut RunState,
        out: &mut [VecDeque<Op>],
    ) -> Result<(), LowerError> {
        let fail = |why: String| {
            LowerError::Ttgir(self.module.error(
                from.at,
                super::error::TtgirErrorKind::Exec {
                    op: from.op.into(),
                    x: coords[0],
                    y: coords[1],
                    z: coords[2],
                    why,
                },
            ))
        };
        let wgs = self.wgs[role as usize];
        // The role's WarpGroups meet (a `bar.sync` of their threads).
        let meet = |out: &mut [VecDeque<Op>]| {
            if wgs > 1 {
                let threads = wgs as u16 * 128;
                all(out, Op::BarSync { id: 0, threads });
            }
        };
        let spin = |out: &mut [VecDeque<Op>], op: Op| {
            out[0].push_back(op);
            meet(out);
        };
        let release = |out: &mut [VecDeque<Op>], op: Op| {
            all(out, Op::StoreWait { n: 0 });
            meet(out);
            out[0].push_back(op);
        };
        if st.unsynced && !matches!(e, Effect::InitBarrier { .. }) {
            st.unsynced = false;
            meet(out);
        }
        let bar = |m: super::value::MemRef| -> Result<u16, LowerError> {
            match self.bars.get(&m.alloc) {
                Some(&(base, len)) if (0..len as i64).contains(&m.index) => {
                    Ok(base + m.index as u16)
                }
                Some(_) => Err(fail(format!(
                    "barrier index {} is outside its buffer",
                    m.index
                ))),
                None => Err(fail("a barrier CTA 0 never initialises".into())),
            }
        };
        let map = |d: u32| {
            self.maps
                .get(&d)
                .copied()
                .ok_or_else(|| fail(format!("descriptor argument {d} has no tensor map")))
        };
        match e {
            Effect::Alloc { .. } | Effect::Dealloc { .. } => {}
            Effect::SharedMove { bytes } => {
                // Each WarpGroup moves its share.
                let share = u32::try_from(bytes.div_ceil(wgs as u64)).unwrap_or(u32::MAX);
                all(out, Op::SmemMove { bytes: share });
            }
            Effect::MakeDesc {
                key,
                boxdim,
                dims,
                strides,
                ..
            } => {
                if self.made.get(&key) != Some(&(boxdim, dims, strides)) {
                    return Err(fail(
                        "this CTA makes a descriptor the CTAs probed before the run never make (simfa declares tensor maps once per kernel)"
                            .into(),
                    ));
                }
            }
            Effect::Barrier => meet(out),
            // A spin (a lock's CAS, a flag's poll) is one thread's; the
            // role's other WarpGroups wait for its result. A release (a
            // lock's exchange, a flag's add) publishes the stores before
            // it: every WarpGroup's have landed.
            Effect::Lock { addr, acquire } => {
                let lock = lock_index(addr);
                if acquire {
                    spin(out, Op::LockAcquire { lock });
                } else {
                    release(out, Op::LockRelease { lock });
                }
            }
            Effect::FlagAdd { addr, amount } => release(
                out,
                Op::CounterAdd {
                    counter: counter_index(addr),
                    amount: amount.clamp(0, u32::MAX as i64) as u32,
                },
            ),
            Effect::FlagWait { addr, count } => spin(
                out,
                Op::CounterWait {
                    counter: counter_index(addr),
                    count: count.clamp(0, u32::MAX as i64) as u32,
                },
            ),
            Effect::Partition => {
                // Every partition's warps meet at the warp_specialize.
                let total: u16 = self.wgs.iter().map(|&w| w as u16).sum();
                if total > 1 {
                    all(
                        out,
                        Op::BarSync {
                            id: 1,
                            threads: total * 128,
                        },
                    );
                }
            }
            Effect::Compute {
                fp32,
                mufu,
                fp16,
                int,
            } => {
                // Each WarpGroup's share, added to the run's pending
                // compute: consecutive work is one op, whenever the
                // WarpGroups pull.
                let wgs = wgs as u64;
                let share = |x: u64| u32::try_from(x.div_ceil(wgs)).unwrap_or(u32::MAX);
                let add = Work {
                    fp32: share(fp32),
                    mufu: share(mufu),
                    fp16: share(fp16),
                    int: share(int),
                };
                for w in st.compute.iter_mut() {
                    *w = Some(w.map_or(add, |w| w.plus(add)));
                }
            }
            Effect::InitBarrier { bar: m, count } => {
                let bar = bar(m)?;
                let count = u16::try_from(count)
                    .map_err(|_| fail(format!("an arrival count of {count}")))?;
                out[0].push_back(Op::MbarInit { bar, count });
                st.unsynced = true;
            }
            Effect::Expect { bar: m, bytes } => {
                let bar = bar(m)?;
                let bytes = u32::try_from(bytes)
                    .map_err(|_| fail(format!("{bytes} bytes do not fit an mbarrier")))?;
                out[0].push_back(Op::MbarExpectTx { bar, bytes });
                out[0].push_back(Op::MbarArrive { bar, count: 1 });
            }
            Effect::Arrive { bar: m, count } => {
                let bar = bar(m)?;
                let count = u16::try_from(count)
                    .map_err(|_| fail(format!("an arrival count of {count}")))?;
                out[0].push_back(Op::MbarArrive { bar, count });
            }
            Effect::Wait { bar: m, phase } => {
                let op = Op::MbarWait {
                    bar: bar(m)?,
                    parity: phase as u8,
                };
                all(out, op);
            }
            Effect::TmaLoad {
                desc,
                coords,
                box_shape,
                bar: None,
                regs,
                ..
            } => {
                // Into registers: the TMA lands it in shared memory, on the
                // ring of loads into registers, then the threads read it.
                let map = map(desc)?;
                let copies = self.copies(map, box_shape, &coords).map_err(fail)?;
                let full = self.kernel.maps[map as usize].full_box_bytes() * copies.len() as u64;
                let bytes = u32::try_from(full)
                    .map_err(|_| fail(format!("{full} bytes do not fit an mbarrier")))?;
                let push = |bar, q: &mut VecDeque<Op>| {
                    for coords in copies {
                        q.push_back(Op::TmaLoad {
                            map,
                            bar,
                            coords,
                            multicast: 0,
                        });
                    }
                };
                let rings = self.rings(role);
                rings
                    .load(&mut st.inflight, regs.or(Some(0)), bytes, push, out)
                    .map_err(|w| fail(w.to_string()))?;
            }
            Effect::TmaLoad {
                desc,
                coords,
                box_shape,
                bar: Some(m),
                ..
            } => {
                let map = map(desc)?;
                let bar = bar(m)?;
                for coords in self.copies(map, box_shape, &coords).map_err(fail)? {
                    out[0].push_back(Op::TmaLoad {
                        map,
                        bar,
                        coords,
                        multicast: 0,
                    });
                }
            }
            Effect::TmaStore {
                desc,
                coords,
                box_shape,
                ..
            } => {
                let map = map(desc)?;
                for coords in self.copies(map, box_shape, &coords).map_err(fail)? {
                    out[0].push_back(Op::TmaStore { map, coords });
                }
            }
            Effect::StoreWait { pendings } => out[0].push_back(Op::StoreWait {
                n: pendings.min(255) as u8,
            }),
            Effect::Wgmma { shape, sync } => {
                let (count, n) = shape.per_warpgroup().map_err(fail)?;
                let mode = match shape.mode {
                    super::WgmmaMode::Ss => WgmmaMode::Ss,
                    super::WgmmaMode::Rs => WgmmaMode::Rs,
                };
                for s in out.iter_mut() {
                    s.extend((0..count).map(|_| Op::Wgmma { n, mode }));
                    s.push_back(Op::WgmmaCommit);
                    if sync {
                        s.push_back(Op::WgmmaWait { n: 0 });
                    }
                }
            }
            Effect::PtrLoad { tile, regs } => {
                self.load_ptrs(role, st, &[tile], regs, out).map_err(fail)?
            }
            Effect::Gather { tiles, regs } => {
                self.load_ptrs(role, st, &tiles, regs, out).map_err(fail)?
            }
            Effect::PtrStore { tile } => self.store_ptrs(&[tile], out).map_err(fail)?,
            Effect::Scatter { tiles } => self.store_ptrs(&tiles, out).map_err(fail)?,
            Effect::AsyncCommit => {
                let rings = self.rings(role);
                rings
                    .commit(&mut st.inflight, out)
                    .map_err(|w| fail(w.to_string()))?;
            }
            Effect::AsyncWait { pendings } => {
                self.rings(role).wait(&mut st.inflight, pendings, out)
            }
            Effect::Use { load } => self.rings(role).use_load(&mut st.inflight, load, out),
            Effect::WgmmaWait { pendings } => all(
                out,
                Op::WgmmaWait {
                    n: pendings.min(255) as u8,
                },
            ),
        }
        Ok(())
    }
}

/// The allocations and barrier initialisations of a run, in order.
#[derive(Default)]
struct Decls<'m> {
    /// Each buffer once: its allocation and bytes.
    allocs: Vec<(u32, u64)>,
    /// Which of them are allocated now, and their bytes.
    live: Vec<bool>,
    live_bytes: u64,
    /// The most bytes allocated at once.
    peak: u64,
    /// Each initialisation: the buffer, the index and the count.
    inits: Vec<(u32, i64, u32)>,
    /// Each descriptor made: key, pointer argument, box, dims, strides.
    made: Vec<(u32, u16, MadeShape)>,
    /// Each tile moved through pointers, and the ring it needs: `Some`
    /// for a copy into shared memory (`false`) or a load into registers
    /// (`true`), `None` for a store.
    tiles: Vec<(Origin<'m>, super::interp::PtrTile, Option<bool>)>,
    /// Whether a TMA copy loads into registers.
    tma_regs: bool,
    /// The ops that moved tiles through pointers or made descriptors
    /// (their byte offsets).
    sites: BTreeSet<usize>,
    /// The kinds of tile in `tiles`: the tensor, shape and steps (which
    /// decide its tensor map) and the ring it needs; where a tile lies
    /// does not matter here.
    seen: HashSet<TileKind, BuildHasherDefault<FnvHasher>>,
}

/// What [`Decls`] keeps a tile by: pointer id, rank, shape, steps, element
/// size and ring.
type TileKind = (Option<u16>, u8, [u32; 4], [i64; 4], u32, Option<bool>);

impl<'m> Decls<'m> {
    /// A tile moved by op `from`, needing `ring`: kept if it is the first
    /// of its kind.
    fn tile(&mut self, from: Origin<'m>, tile: super::interp::PtrTile, ring: Option<bool>) {
        self.sites.insert(from.at);
        let l = &tile.lin;
        if self
            .seen
            .insert((l.ptr, l.rank, l.shape, l.coef, tile.elem, ring))
        {
            self.tiles.push((from, tile, ring));
        }
    }
}

impl<'m> EffectSink<'m> for Decls<'m> {
    fn effect(&mut self, from: Origin<'m>, e: Effect<'m>) {
        match e {
            Effect::Alloc { mem, bytes } => {
                match self.allocs.iter().position(|a| a.0 == mem.alloc) {
                    Some(i) if self.live[i] => return,
                    Some(i) => self.live[i] = true,
                    None => {
                        self.allocs.push((mem.alloc, bytes));
                        self.live.push(true);
                    }
                }
                self.live_bytes += bytes;
                self.peak = self.peak.max(self.live_bytes);
            }
            Effect::Dealloc { mem } => {
                if let Some(i) = self.allocs.iter().position(|a| a.0 == mem.alloc) {
                    if self.live[i] {
                        self.live[i] = false;
                        self.live_bytes -= self.allocs[i].1;
                    }
                }
            }
            Effect::InitBarrier { bar, count } => self.inits.push((bar.alloc, bar.index, count)),
            Effect::MakeDesc {
                key,
                ptr,
                boxdim,
                dims,
                strides,
            } => {
                self.sites.insert(from.at);
                self.made.push((key, ptr, (boxdim, dims, strides)))
            }
            Effect::PtrLoad { tile, regs } => self.tile(from, tile, Some(regs.is_some())),
            Effect::TmaLoad { bar: None, .. } => self.tma_regs = true,
            Effect::PtrStore { tile } => self.tile(from, tile, None),
            Effect::Gather { tiles, regs } => {
                for t in tiles {
                    self.tile(from, t, Some(regs.is_some()));
                }
            }
            Effect::Scatter { tiles } => {
                for t in tiles {
                    self.tile(from, t, None);
                }
            }
            _ => {}
        }
    }
}

/// The simulator's lock for the spin lock at global address `addr`: its
/// 32-bit word's index modulo [`MAX_LOCKS`] (two locks 4 KiB apart share
/// one, so they serialise each other's holders).
pub fn lock_index(addr: u64) -> u16 {
    word_index(addr, MAX_LOCKS)
}

/// The simulator's counter for the flag at global address `addr`: its
/// 32-bit word's index modulo [`MAX_COUNTERS`], as locks are found.
pub fn counter_index(addr: u64) -> u16 {
    word_index(addr, MAX_COUNTERS)
}

/// The index of `addr`'s 32-bit word among `words` (at most 65 536).
fn word_index(addr: u64, words: usize) -> u16 {
    ((addr / 4) % words as u64) as u16
}

/// The depth of `module`'s WGMMAs over 16: `(k, 16)` when every
/// `warp_group_dot` has instructions `k` deep, `(1, 1)` otherwise.
fn depth_scale(module: &Module<'_>) -> (u64, u64) {
    let mut depths = BTreeSet::new();
    for f in &module.funcs {
        walk(&f.body.blocks, &HashMap::new(), &mut |n, _| {
            if let Some(ScopeOp::Wgmma(w)) = &n.scope {
                depths.insert(w.instr_k as u64);
            }
        });
    }
    match depths.iter().collect::<Vec<_>>().as_slice() {
        [&k] if k > 0 => (k, 16),
        _ => (1, 1),
    }
}

/// The most CTAs probed after CTA 0 for the tensor maps of ops it never
/// reaches, in a launch without `[buffers]`.
const MAX_PROBES: u32 = 1024;

/// The ops of `module` that declare tensor maps as they run: loads,
/// stores and atomics through pointers, and descriptors made in the
/// kernel (their byte offsets).
fn pointer_sites(module: &Module<'_>) -> BTreeSet<usize> {
    const THROUGH_POINTERS: &[&str] = &[
        "tt.load",
        "tt.store",
        "tt.atomic_rmw",
        "tt.atomic_cas",
        "ttg.async_copy_global_to_local",
    ];
    let mut sites = BTreeSet::new();
    for f in &module.funcs {
        walk(&f.body.blocks, &HashMap::new(), &mut |n, _| {
            let v = &n.view;
            let pointer = v.ins.first().is_some_and(|t| t.contains("!tt.ptr"));
            if (THROUGH_POINTERS.contains(&v.name) && pointer) || v.name == "ttng.tensormap_create"
            {
                sites.insert(n.stmt.start);
            }
        });
    }
    sites
}

/// Calls `f` on every op of `blocks`, nested regions included, with the
/// names a worker partition's arguments stand for (`%arg18` is the
/// `warp_specialize` operand `%a_desc` it captures).
fn walk<'m, 'a>(
    blocks: &'m [super::tree::Block<'a>],
    alias: &HashMap<&'a str, &'a str>,
    f: &mut impl FnMut(&'m Node<'a>, &HashMap<&'a str, &'a str>),
) {
    for b in blocks {
        for n in &b.ops {
            f(n, alias);
            let captures = n.view.name == "ttg.warp_specialize";
            for (i, r) in n.regions.iter().enumerate() {
                if !(captures && i > 0) {
                    walk(&r.blocks, alias, f);
                    continue;
                }
                let mut inner = alias.clone();
                let operands = n
                    .view
                    .operands
                    .iter()
                    .filter(|o| o.is_ssa() && o.group == 0);
                let names = r.blocks.first().map(|b| b.args.as_slice()).unwrap_or(&[]);
                for (k, o) in names.iter().zip(operands) {
                    inner.insert(*k, alias.get(o.text).copied().unwrap_or(o.text));
                }
                walk(&r.blocks, &inner, f);
            }
        }
    }
}

/// The worker partitions of the kernel's `ttg.warp_specialize` (none
/// without one): each one's WarpGroups (`num_warps(W)`, a WarpGroup per
/// four warps, at least one), its warps and requested registers.
fn partitions(
    module: &Module<'_>,
    func: &Func<'_>,
) -> Result<Vec<(u8, super::registers::Partition)>, String> {
    let mut found: Vec<&Node<'_>> = Vec::new();
    walk(&func.body.blocks, &HashMap::new(), &mut |n, _| {
        if n.view.name == "ttg.warp_specialize" {
            found.push(n);
        }
    });
    let Some(ws) = found.first() else {
        return Ok(Vec::new());
    };
    if found.len() > 1 {
        return Err("more than one ttg.warp_specialize (simfa runs one per kernel)".into());
    }
    let regs: Vec<i64> = ws
        .view
        .attrs
        .iter()
        .find_map(|a| {
            let i = a.find("requestedRegisters = array<i32:")?;
            let rest = &a[i + "requestedRegisters = array<i32:".len()..];
            let end = rest.find('>')?;
            Some(
                rest[..end]
                    .split(',')
                    .filter_map(|x| x.trim().parse().ok())
                    .collect(),
            )
        })
        .unwrap_or_default();
    let mut out = Vec::new();
    for (i, head) in ws.region_heads.iter().enumerate().skip(1) {
        let text = module.src.get(head.start..head.end).unwrap_or("");
        let warps: i64 = text
            .find("num_warps(")
            .and_then(|k| {
                let rest = &text[k + "num_warps(".len()..];
                rest[..rest.find(')')?].trim().parse().ok()
            })
            .ok_or_else(|| format!("partition{} has no num_warps(N)", i - 1))?;
        let wgs = u8::try_from((warps.max(1) as u64).div_ceil(4))
            .map_err(|_| format!("partition{} has {warps} warps", i - 1))?;
        out.push((
            wgs,
            super::registers::Partition {
                warps: warps.clamp(1, 1024) as u32,
                requested: regs.get(i - 1).copied(),
            },
        ));
    }
    Ok(out)
}

#[cfg(test)]
#[path = "lower_tests.rs"]
mod tests;
