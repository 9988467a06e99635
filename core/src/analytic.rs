//! The analytical estimate of a kernel on a GPU: the work and traffic the
//! grid must do, and the roofline time each level of the machine needs for
//! it.
//!
//! [`estimate`] walks every WarpGroup program of every CTA exactly as the
//! issue unit would (the same loop counts, the same operand expressions,
//! stopping at the same `exit`), without any timing, and counts:
//!
//! - **FLOPs**: `2 * 64 * N * 16` per m64nNk16 WGMMA, and the cycles the
//!   tensor pipe is occupied by them ([`GpuConfig::wgmma_cycles`]).
//! - **L2 bytes**: every byte the TMA and bulk copies move between shared
//!   memory and the L2 (boxes clipped to their tensors, as the hardware
//!   moves no data for the out-of-bounds part). Nothing in shared memory
//!   survives a CTA, so the grid asks the L2 for these bytes whatever the
//!   schedule (the SM-pair coalescer and the TMA engine's line dedup may
//!   merge some requests, so this is not claimed as a bound).
//! - **HBM bytes**: the compulsory traffic. For each tensor map, the bytes
//!   of the tensor (`elem_bytes * product of dims`) or, if fewer, the bytes
//!   the grid loads from (stores to) it; the L2 starts cold, so every such
//!   byte crosses the HBM at least once. This assumes that a map's loads
//!   touch its tensor without re-reading one part while skipping another
//!   and that no two maps alias, which holds for the generated GEMM and
//!   FA3 kernels. Bulk copies are counted in the L2 bytes only.
//!
//! The roofline time per level is that level's work over its peak rate,
//! in SM cycles at the configured clock: the tensor pipes (`tensor cycles
//! / SMs`, rounded up), the L2 slices (`slices *
//! slice_bytes_per_cycle`), the HBM (channels x burst bytes /
//! burst length x DRAM clocks per SM cycle) or, with the fixed port, the
//! per-SM ports. [`Estimate::lower_bound_cycles`] is the largest of the
//! levels that bound the simulation: the tensor pipe and the HBM (port).
//!
//! **Off the timing path**, but for one decision: with
//! `transaction.arrival_controller = "auto"` the simulator asks
//! [`memory_bound`], once before the run, whether to land loads by the
//! arrival-order controller. Nothing else here affects cycles or digests.
//! Everything is integer arithmetic; the std shim turns it into times and
//! ratios.

use crate::config::{GpuConfig, MemoryModel};
use crate::isa::Frame;
use crate::isa::{EvalCtx, Instr, MAX_LOOP_DEPTH};
use crate::kernel::{Kernel, MAX_MAPS};

/// FLOPs of one m64nNk16 WGMMA per unit of N: `2 * 64 * 16`.
const FLOPS_PER_N: u64 = 2 * 64 * 16;

/// Work, traffic and roofline bounds of one kernel on one GPU.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Estimate {
    /// False when the walk stopped at its step budget or the kernel has
    /// stream roles (whose instructions come from the host): the counts
    /// are then partial and no bound is claimed.
    pub complete: bool,
    /// Floating-point operations of every WGMMA the grid issues.
    pub flops: u64,
    /// WGMMAs the grid issues.
    pub wgmmas: u64,
    /// Tensor-pipe cycles of those WGMMAs, summed over SMs.
    pub tensor_cycles: u64,
    /// Tensor-pipe cycles of the CTA with the most.
    pub cta_tensor_max: u64,
    /// Tensor-pipe cycles of the CTA with the fewest.
    pub cta_tensor_min: u64,
    /// Bytes TMA and bulk copies load from the L2 into shared memory.
    pub l2_load_bytes: u64,
    /// Bytes TMA and bulk copies store from shared memory to the L2.
    pub l2_store_bytes: u64,
    /// Of [`Estimate::l2_load_bytes`], those TMA tensor loads move (each
    /// line through its issuing SM's port, once for all the CTAs of a
    /// multicast).
    pub tma_load_bytes: u64,
    /// TMA tensor-load bytes of the CTA with the most.
    pub cta_tma_load_max: u64,
    /// Of [`Estimate::l2_load_bytes`], those bulk copies load (their
    /// sources are plain addresses, so they are not in the compulsory HBM
    /// bytes).
    pub bulk_load_bytes: u64,
    /// Compulsory bytes read from HBM (see the module docs).
    pub hbm_read_bytes: u64,
    /// Compulsory bytes written to HBM.
    pub hbm_write_bytes: u64,
    /// CTAs in the grid.
    pub ctas: u64,
    /// CTAs one SM holds at once (shared memory, registers, WarpGroup and
    /// CTA slots).
    pub resident_per_sm: u32,
    /// SMs of the GPU.
    pub sms: u32,
}

/// Bytes the grid moves through one tensor map.
#[derive(Clone, Copy, Debug, Default)]
struct MapTraffic {
    loaded: u64,
    stored: u64,
}

impl Estimate {
    /// Waves of CTAs: `ctas / (resident_per_sm * sms)`, as a fraction
    /// `(numerator, denominator)`.
    pub fn waves(&self) -> (u64, u64) {
        (
            self.ctas,
            (self.resident_per_sm as u64 * self.sms as u64).max(1),
        )
    }

    /// Whole waves, the last one partly filled counting as one.
    pub fn full_waves(&self) -> u64 {
        let (n, d) = self.waves();
        n.div_ceil(d)
    }

    /// Peak tensor math of one SM per cycle: the FLOPs of an m64n256k16
    /// WGMMA over the cycles it occupies the pipe.
    pub fn peak_flops_per_sm_cycle(cfg: &GpuConfig) -> (u64, u64) {
        (
            FLOPS_PER_N * 256,
            cfg.wgmma_cycles(256, crate::WgmmaMode::Ss),
        )
    }

    /// Cycles the tensor pipes need. One SM's pipe runs one WGMMA at a
    /// time and a CTA runs on one SM, so the busiest SM needs at least the
    /// most of: the tensor cycles spread evenly over the SMs (rounded up),
    /// the largest CTA's, and the smallest CTA's times the CTAs that some
    /// SM must run (`ceil(ctas / sms)`).
    pub fn tensor_bound_cycles(&self) -> u64 {
        let sms = self.sms.max(1) as u64;
        let even = self.tensor_cycles.div_ceil(sms);
        let stacked = self.cta_tensor_min.saturating_mul(self.ctas.div_ceil(sms));
        even.max(self.cta_tensor_max).max(stacked)
    }

    /// Cycles the L2 slices need to serve every load and store byte once.
    pub fn l2_bound_cycles(&self, cfg: &GpuConfig) -> u64 {
        let (num, den) = cfg.l2.peak_bytes_per_cycle();
        let bytes = self.l2_load_bytes.saturating_add(self.l2_store_bytes);
        // bytes / (num / den), rounded down.
        (bytes as u128 * den as u128 / num.max(1) as u128) as u64
    }

    /// Cycles the memory behind the L2 needs: the compulsory HBM reads at
    /// the HBM's peak, or with the fixed port every L2 byte through the
    /// SMs' ports. Rounded down. HBM writes are left out: the L2 writes
    /// back, and a kernel may end with its stores still in it.
    pub fn memory_bound_cycles(&self, cfg: &GpuConfig) -> u64 {
        if cfg.memory == MemoryModel::Fixed {
            let r = cfg.port.bytes_per_cycle;
            let bytes = self.l2_load_bytes.saturating_add(self.l2_store_bytes) as u128;
            // bytes / (sms * num / den)
            let den = cfg.sms as u128 * r.num as u128;
            return (bytes * r.den as u128 / den.max(1)) as u64;
        }
        let (num, den) = cfg.dram.peak_bytes_per_cycle();
        (self.hbm_read_bytes as u128 * den / num.max(1)) as u64
    }

    /// Cycles the SMs' TMA ports need for the tensor loads: an SM's port
    /// emits `tma.lines_per_cycle` line requests every `tma.line_interval`
    /// cycles and a box of `b` bytes is at least `b / line_bytes` lines,
    /// so the SMs together need the loads' bytes over all ports, and the
    /// CTA with the most its bytes over one (rounded down). 0 with the
    /// fixed port, whose bound is [`Estimate::memory_bound_cycles`]'s.
    pub fn port_bound_cycles(&self, cfg: &GpuConfig) -> u64 {
        if cfg.memory == MemoryModel::Fixed {
            return 0;
        }
        // bytes / (lines_per_cycle * line_bytes / line_interval)
        let num = cfg.tma.lines_per_cycle as u128 * cfg.l2.line_bytes as u128;
        let den = cfg.tma.line_interval.max(1) as u128;
        let cycles = |bytes: u128| (bytes * den / num.max(1)).min(u64::MAX as u128) as u64;
        let even = cycles(self.tma_load_bytes as u128) / (self.sms.max(1) as u64);
        even.max(cycles(self.cta_tma_load_max as u128))
    }

    /// The largest of the bounding levels (tensor pipe and memory), or
    /// `None` when the estimate is incomplete.
    pub fn lower_bound_cycles(&self, cfg: &GpuConfig) -> Option<u64> {
        self.complete.then(|| {
            self.tensor_bound_cycles()
                .max(self.memory_bound_cycles(cfg))
        })
    }
}

/// Instructions (loop markers included) after which [`memory_bound`]
/// starts no further CTA.
pub const MEMORY_BOUND_STEPS: u64 = 1 << 18;

/// Instructions [`memory_bound`] walks at most, to finish its first CTA.
pub const MEMORY_BOUND_MAX_STEPS: u64 = 1 << 22;

/// Whether `k` is bound by the HBM on `cfg`: whether its compulsory HBM
/// reads, plus what its bulk copies load (their sources are plain
/// addresses the walk cannot tell apart, so each byte counts as read from
/// the HBM), take at the HBM's peak at least as long as its WGMMAs on the
/// tensor pipes ([`Estimate::tensor_bound_cycles`]). A kernel without
/// WGMMAs is.
///
/// The walk starts no CTA after [`MEMORY_BOUND_STEPS`] instructions: a
/// larger grid is judged by the CTAs walked (in launch order), their work
/// and traffic scaled to all of its CTAs (a grid of alike CTAs gets the
/// whole walk's answer, at a bounded cost). Not memory-bound: a kernel
/// with stream roles, whose instructions come from the host, and one
/// whose first CTA alone is more than [`MEMORY_BOUND_MAX_STEPS`]
/// instructions.
pub fn memory_bound(cfg: &GpuConfig, k: &Kernel) -> bool {
    memory_bound_within(cfg, k, MEMORY_BOUND_STEPS)
}

/// [`memory_bound`], starting no CTA after `soft_steps` instructions.
pub fn memory_bound_within(cfg: &GpuConfig, k: &Kernel, soft_steps: u64) -> bool {
    if k.roles.iter().any(|r| r.stream) {
        return false;
    }
    let (mut e, maps, walked) = walk_grid(cfg, k, MEMORY_BOUND_MAX_STEPS, soft_steps);
    if walked == 0 {
        return false;
    }
    // The whole grid's counts from the CTAs walked.
    let (num, den) = (e.ctas.max(walked), walked);
    let scale = |b: u64| (b as u128 * num as u128 / den as u128).min(u64::MAX as u128) as u64;
    e.tensor_cycles = scale(e.tensor_cycles);
    let bytes = compulsory(k, &maps, num, den).0 as u128 + scale(e.bulk_load_bytes) as u128;
    let (hn, hd) = cfg.dram.peak_bytes_per_cycle();
    bytes * hd / hn.max(1) >= e.tensor_bound_cycles() as u128
}

/// CTAs one SM of `cfg` holds at once (at least 1): the least of its
/// WarpGroup slots, shared memory, registers and CTA limit allow. The
/// simulator sizes its CTA slots with this rule.
pub fn resident_ctas(cfg: &GpuConfig, k: &Kernel) -> u32 {
    let wgs = k.wgs_per_cta().max(1);
    let by_wg = cfg.wg_slots() / wgs;
    let by_smem = cfg
        .smem_per_sm
        .checked_div(k.smem_bytes)
        .map_or(usize::MAX, |n| n as usize);
    let by_regs = cfg
        .regs_per_sm
        .checked_div(k.regs_per_cta())
        .map_or(usize::MAX, |n| n as usize);
    by_wg
        .min(by_smem)
        .min(by_regs)
        .min(cfg.ctas_per_sm as usize)
        .max(1) as u32
}

/// Walks the whole grid of `k` (see the module docs) and returns its
/// estimate on `cfg`. At most `max_steps` instructions (loop markers
/// included) are visited; past that the estimate is marked incomplete.
/// `k` should be valid ([`Kernel::validate`]); an invalid one gives an
/// incomplete estimate, never a panic.
pub fn estimate(cfg: &GpuConfig, k: &Kernel, max_steps: u64) -> Estimate {
    let (mut e, maps, _) = walk_grid(cfg, k, max_steps, u64::MAX);
    (e.hbm_read_bytes, e.hbm_write_bytes) = compulsory(k, &maps, 1, 1);
    e
}

/// Walks `k`'s grid in launch order, at most `max_steps` instructions in
/// all, and no further CTA once `soft_steps` are walked. Returns the
/// counts (without the HBM bytes), each map's traffic and the CTAs
/// walked to their end.
fn walk_grid(
    cfg: &GpuConfig,
    k: &Kernel,
    max_steps: u64,
    soft_steps: u64,
) -> (Estimate, [MapTraffic; MAX_MAPS], u64) {
    let mut e = Estimate {
        complete: k.validate().is_ok() && !k.roles.iter().any(|r| r.stream),
        ctas: k.ctas(),
        resident_per_sm: resident_ctas(cfg, k),
        sms: cfg.sms as u32,
        ..Estimate::default()
    };
    let mut maps = [MapTraffic::default(); MAX_MAPS];
    let mut steps = 0u64;
    let mut walked = 0u64;
    if e.complete {
        e.cta_tensor_min = u64::MAX;
        'grid: for cta in 0..e.ctas.min(u32::MAX as u64) as u32 {
            if steps >= soft_steps {
                e.complete = false;
                break;
            }
            let c = k.cta_coords(cta);
            let before = e.tensor_cycles;
            let loaded = e.tma_load_bytes;
            for role in k.roles.iter().filter(|r| !r.stream) {
                for wg in 0..role.count {
                    let ctx = EvalCtx {
                        cta,
                        c,
                        wg,
                        l: [0; MAX_LOOP_DEPTH],
                    };
                    let start = role.start as usize;
                    let end = start + role.len as usize;
                    if !walk(
                        cfg, k, start, end, ctx, &mut e, &mut maps, &mut steps, max_steps,
                    ) {
                        e.complete = false;
                        break 'grid;
                    }
                }
            }
            e.cta_tma_load_max = e.cta_tma_load_max.max(e.tma_load_bytes - loaded);
            let mine = e.tensor_cycles - before;
            e.cta_tensor_max = e.cta_tensor_max.max(mine);
            e.cta_tensor_min = e.cta_tensor_min.min(mine);
            walked += 1;
        }
        if e.cta_tensor_min == u64::MAX {
            e.cta_tensor_min = 0;
        }
    }
    (e, maps, walked)
}

/// The compulsory HBM reads and writes of traffic `maps`, scaled by
/// `num / den` (the whole grid's from the CTAs walked): per map, its
/// tensor's bytes or, if fewer, what the grid moves through it.
fn compulsory(k: &Kernel, maps: &[MapTraffic; MAX_MAPS], num: u64, den: u64) -> (u64, u64) {
    let scale =
        |b: u64| (b as u128 * num as u128 / den.max(1) as u128).min(u64::MAX as u128) as u64;
    let (mut read, mut written) = (0u64, 0u64);
    for (m, t) in k.maps.iter().zip(maps.iter()) {
        let tensor = m.dims[..m.rank as usize]
            .iter()
            .fold(m.elem_bytes as u64, |a, &d| a.saturating_mul(d));
        read = read.saturating_add(scale(t.loaded).min(tensor));
        written = written.saturating_add(scale(t.stored).min(tensor));
    }
    (read, written)
}

/// Walks one WarpGroup's program; false when the step budget ran out.
#[allow(clippy::too_many_arguments)]
fn walk(
    cfg: &GpuConfig,
    k: &Kernel,
    start: usize,
    end: usize,
    mut ctx: EvalCtx,
    e: &mut Estimate,
    maps: &mut [MapTraffic; MAX_MAPS],
    steps: &mut u64,
    max_steps: u64,
) -> bool {
    // The open loops, as the simulator's threads keep them.
    let mut frames = [Frame::EMPTY; MAX_LOOP_DEPTH];
    let mut depth = 0usize;
    let mut pc = start;
    let ev = |id: u16, ctx: &EvalCtx| k.exprs.get(id as usize).map_or(0, |x| x.eval(ctx));
    // `ctx.l` holds the open loops' iterations and zeros past them; it
    // changes only where a loop opens, steps or closes.
    ctx.l = [0; MAX_LOOP_DEPTH];
    while pc < end {
        *steps += 1;
        if *steps > max_steps {
            return false;
        }
        match k.code[pc] {
            Instr::LoopBegin { count, end: e_pc } => {
                let n = ev(count, &ctx);
                if n <= 0 || depth == MAX_LOOP_DEPTH {
                    pc = e_pc as usize + 1;
                } else {
                    frames[depth] = Frame {
                        begin: pc as u16,
                        count: n.min(u32::MAX as i64) as u32,
                        iter: 0,
                    };
                    depth += 1;
                    pc += 1;
                }
                continue;
            }
            Instr::LoopEnd { .. } => {
                if depth == 0 {
                    return true;
                }
                let f = &mut frames[depth - 1];
                f.iter += 1;
                if f.iter < f.count {
                    ctx.l[depth - 1] = f.iter;
                    pc = f.begin as usize + 1;
                } else {
                    depth -= 1;
                    ctx.l[depth] = 0;
                    pc += 1;
                }
                continue;
            }
            Instr::Exit => return true,
            Instr::Wgmma { n, mode } => {
                e.wgmmas += 1;
                e.flops = e.flops.saturating_add(FLOPS_PER_N * n as u64);
                e.tensor_cycles = e.tensor_cycles.saturating_add(cfg.wgmma_cycles(n, mode));
            }
            Instr::TmaLoad { map, coords, .. }
            | Instr::TmaStore { map, coords }
            | Instr::StGlobal { map, coords, .. }
            | Instr::LdGlobal { map, coords, .. } => {
                let Some(m) = k.maps.get(map as usize) else {
                    pc += 1;
                    continue;
                };
                let mut at = [0i64; 5];
                for (i, c) in at.iter_mut().enumerate().take(m.rank as usize) {
                    *c = ev(coords[i], &ctx);
                }
                let bytes = m.box_bytes(&at);
                let t = &mut maps[map as usize];
                if matches!(k.code[pc], Instr::TmaLoad { .. } | Instr::LdGlobal { .. }) {
                    t.loaded = t.loaded.saturating_add(bytes);
                    e.l2_load_bytes = e.l2_load_bytes.saturating_add(bytes);
                    if matches!(k.code[pc], Instr::TmaLoad { .. }) {
                        e.tma_load_bytes = e.tma_load_bytes.saturating_add(bytes);
                    }
                } else {
                    t.stored = t.stored.saturating_add(bytes);
                    e.l2_store_bytes = e.l2_store_bytes.saturating_add(bytes);
                }
            }
            Instr::BulkLoad { bytes, .. } => {
                e.l2_load_bytes = e.l2_load_bytes.saturating_add(bytes as u64);
                e.bulk_load_bytes = e.bulk_load_bytes.saturating_add(bytes as u64);
            }
            Instr::BulkStore { bytes, .. } => {
                e.l2_store_bytes = e.l2_store_bytes.saturating_add(bytes as u64);
            }
            _ => {}
        }
        pc += 1;
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::builder::Builder;
    use crate::{Expr, WgmmaMode};

    /// A grid of 10 CTAs, each running a loop of 3 WGMMAs of N = 128.
    #[test]
    fn counts_loops_and_ctas() {
        let mut b = Builder::new(Kernel::default(), "loop").unwrap();
        b.grid([10, 1, 1]);
        b.begin_role("main", 1, 32).unwrap();
        let l = b.loop_begin(Expr::constant(3)).unwrap();
        b.op(Instr::Wgmma {
            n: 128,
            mode: WgmmaMode::Ss,
        })
        .unwrap();
        b.loop_end(l).unwrap();
        b.end_role().unwrap();
        let k = b.finish().unwrap();
        let cfg = GpuConfig::h800();
        let e = estimate(&cfg, &k, u64::MAX);
        assert!(e.complete);
        assert_eq!(e.wgmmas, 30);
        assert_eq!(e.flops, 30 * 2 * 64 * 128 * 16);
        assert_eq!(e.tensor_cycles, 30 * 64);
        // One CTA's three WGMMAs run on one pipe.
        assert_eq!((e.cta_tensor_min, e.cta_tensor_max), (3 * 64, 3 * 64));
        assert_eq!(e.tensor_bound_cycles(), 3 * 64);
        assert_eq!(e.full_waves(), 1);
        let cut = estimate(&cfg, &k, 5);
        assert!(!cut.complete);
        assert_eq!(cut.lower_bound_cycles(&cfg), None);
    }

    /// A grid of `ctas` CTAs, each loading `loads` 16 KiB bulk copies and
    /// issuing `wgmmas` WGMMAs of N = 256.
    fn mixed(ctas: u32, loads: i64, wgmmas: i64) -> Kernel {
        let mut b = Builder::new(Kernel::default(), "mixed").unwrap();
        b.grid([ctas, 1, 1]);
        let decl = b.mbarriers("bar", 1, 1).unwrap();
        let bar = b.at(decl, Expr::constant(0)).unwrap();
        let addr = b.expr(Expr::constant(0)).unwrap();
        b.begin_role("main", 1, 32).unwrap();
        let l = b.loop_begin(Expr::constant(loads)).unwrap();
        b.op(Instr::BulkLoad {
            bar,
            addr,
            bytes: 16 << 10,
        })
        .unwrap();
        b.loop_end(l).unwrap();
        let l = b.loop_begin(Expr::constant(wgmmas)).unwrap();
        b.op(Instr::Wgmma {
            n: 256,
            mode: WgmmaMode::Ss,
        })
        .unwrap();
        b.loop_end(l).unwrap();
        b.end_role().unwrap();
        b.finish().unwrap()
    }

    #[test]
    fn memory_bound_compares_traffic_with_tensor_work() {
        let cfg = GpuConfig::h800();
        // Without WGMMAs every kernel is memory-bound.
        assert!(memory_bound(&cfg, &mixed(264, 4, 0)));
        // 64 KiB per CTA from the HBM against one WGMMA, then against a
        // thousand.
        assert!(memory_bound(&cfg, &mixed(264, 4, 1)));
        assert!(!memory_bound(&cfg, &mixed(264, 4, 1000)));
        // Where the two cross: the HBM's time for the grid's bytes against
        // the tensor pipes' for its WGMMAs (two CTAs per SM).
        let (num, den) = cfg.dram.peak_bytes_per_cycle();
        let hbm = (264 * 4 * (16u128 << 10) * den / num) as u64;
        let per = cfg.wgmma_cycles(256, WgmmaMode::Ss);
        let even = hbm / 2 / per;
        assert!(memory_bound(&cfg, &mixed(264, 4, even as i64)));
        assert!(!memory_bound(&cfg, &mixed(264, 4, even as i64 + 2)));
        // A single CTA: its WGMMAs on one pipe.
        let one = (4 * (16u128 << 10) * den / num) as u64 / per;
        assert!(memory_bound(&cfg, &mixed(1, 4, one as i64)));
        assert!(!memory_bound(&cfg, &mixed(1, 4, one as i64 + 2)));
    }

    #[test]
    fn a_partial_walk_gives_the_whole_grids_answer() {
        let cfg = GpuConfig::h800();
        for w in [1, 10, 100, 1000, 4000] {
            let k = mixed(5000, 4, w);
            let whole = memory_bound_within(&cfg, &k, u64::MAX);
            // One CTA, about two and about seven and a half.
            let cta = 2 * w as u64 + 11;
            for steps in [1, 2 * cta, 15 * cta / 2] {
                assert_eq!(memory_bound_within(&cfg, &k, steps), whole, "{w} {steps}");
            }
        }
        // The crossing of a 5000-CTA grid, found from one CTA.
        let (num, den) = cfg.dram.peak_bytes_per_cycle();
        let per = cfg.wgmma_cycles(256, WgmmaMode::Ss);
        let sms = cfg.sms as u128;
        let even =
            (5000 * 4 * (16u128 << 10) * den / num / (5000u128.div_ceil(sms) * per as u128)) as i64;
        assert!(memory_bound_within(&cfg, &mixed(5000, 4, even - 1), 1));
        assert!(!memory_bound_within(&cfg, &mixed(5000, 4, even + 2), 1));
    }

    #[test]
    fn a_kernel_too_large_to_walk_one_cta_of_is_not_memory_bound() {
        let cfg = GpuConfig::h800();
        let k = mixed(1, 1 << 22, 0);
        assert!(!memory_bound(&cfg, &k));
        assert!(memory_bound(&cfg, &mixed(1, 1 << 10, 0)));
    }
}
