//! The kernel model: grid, CTA shape, tensor maps, synchronisation
//! declarations and one compact program per WarpGroup role.
//!
//! A [`Kernel`] is plain data with fixed capacities (see the `MAX_*`
//! constants), so it lives on the stack or in a `static` without a heap and
//! serialises with postcard. [`Kernel::validate`] checks everything that does
//! not depend on the GPU; [`Kernel::check_fits`] checks that one CTA fits an
//! SM of a [`GpuConfig`].

use heapless::{String, Vec};
use serde::{Deserialize, Serialize};

use crate::cluster::{Cluster, ALL_DIMS};
use crate::config::GpuConfig;
use crate::error::KernelError;
use crate::isa::{Expr, ExprId, Instr, Op, Ref, MAX_LOOP_DEPTH};
use crate::tensor_map::TensorMap;

/// Most roles per CTA.
pub const MAX_ROLES: usize = 8;
/// Most WarpGroups per CTA (1024 threads).
pub const MAX_WG_PER_CTA: usize = 8;
/// Most tensor maps per kernel.
pub const MAX_MAPS: usize = 32;
/// Most mbarrier or stage declarations (arrays) per kernel.
pub const MAX_DECLS: usize = 16;
/// Most mbarriers per CTA (all arrays together).
pub const MAX_MBARRIERS: usize = 256;
/// Most stages per CTA (all arrays together).
pub const MAX_STAGES: usize = 64;
/// Spin locks of a grid ([`crate::Instr::LockAcquire`]): words in
/// global memory that every CTA shares.
pub const MAX_LOCKS: usize = 1024;
/// Counters of a grid ([`crate::Instr::CounterAdd`]): words in global
/// memory that every CTA shares.
pub const MAX_COUNTERS: usize = 1024;
/// Named barriers per CTA (the hardware has 16).
pub const NAMED_BARRIERS: usize = 16;
/// Most expressions per kernel.
pub const MAX_EXPRS: usize = 256;
/// Most instructions per kernel (all programs together).
pub const MAX_CODE: usize = 1024;
/// Threads per WarpGroup.
pub const WG_THREADS: u32 = 128;

/// A short symbolic name.
pub type Name = String<24>;

/// The order in which CTA indices map to grid coordinates.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum CtaOrder {
    /// Row-major: x fastest, then y, then z.
    #[default]
    Linear,
    /// Grouped (swizzled) rasterisation as in Triton's matmul: CTAs walk a
    /// band of `rows` y-values column by column before moving to the next band.
    Grouped {
        /// Height of a band in y.
        rows: u32,
    },
}

/// A WarpGroup role of the CTA: `count` WarpGroups running one program.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Role {
    /// Name, e.g. `producer`.
    pub name: Name,
    /// WarpGroups with this role per CTA.
    pub count: u8,
    /// Registers per thread.
    pub regs: u16,
    /// First instruction of the program in [`Kernel::code`].
    pub start: u16,
    /// Length of the program.
    pub len: u16,
    /// The role's instructions come from a [`crate::StreamSource`] instead.
    pub stream: bool,
}

/// An array of mbarriers with one arrival count.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct MbarDecl {
    /// Name.
    pub name: Name,
    /// Number of barriers in the array.
    pub len: u16,
    /// Arrivals that complete a phase.
    pub count: u16,
}

/// An array of ring-buffer stages, each freed when `consumers` releases arrive.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct StageDecl {
    /// Name.
    pub name: Name,
    /// Number of stages in the array.
    pub len: u16,
    /// Releases that free a stage.
    pub consumers: u16,
}

/// A complete kernel.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Kernel {
    /// Name.
    pub name: Name,
    /// Grid size in CTAs (x, y, z).
    pub grid: [u32; 3],
    /// Mapping from CTA index to grid coordinates.
    pub order: CtaOrder,
    /// CTAs launched together as a thread block cluster (see
    /// [`crate::cluster`]); [`Cluster::NONE`] for none.
    pub cluster: Cluster,
    /// Shared memory per CTA, bytes.
    pub smem_bytes: u32,
    /// The WarpGroup roles of a CTA, in WarpGroup order.
    pub roles: Vec<Role, MAX_ROLES>,
    /// Tensor maps.
    pub maps: Vec<TensorMap, MAX_MAPS>,
    /// mbarrier arrays (each CTA has its own copies).
    pub mbarriers: Vec<MbarDecl, MAX_DECLS>,
    /// Stage arrays (each CTA has its own copies).
    pub stages: Vec<StageDecl, MAX_DECLS>,
    /// Expression table.
    pub exprs: Vec<Expr, MAX_EXPRS>,
    /// All programs' instructions.
    pub code: Vec<Instr, MAX_CODE>,
}

impl Kernel {
    /// Whether the operands that compact programs get from a validated
    /// kernel are in range for this kernel: the tensor map exists, the
    /// WGMMA N is one Hopper has (a multiple of 8 in 8..=256), a named
    /// barrier's thread count is a non-zero multiple of 128, an
    /// `st.global` segment is 1 to 32 bytes, a cluster mask names only x,
    /// y and z in a clustered kernel. Barrier, stage and
    /// named-barrier indices are checked when the op executes. The
    /// simulator refuses a streamed op that fails this.
    pub fn op_fits(&self, op: &Op) -> bool {
        match *op {
            Op::TmaLoad { map, multicast, .. } => {
                (map as usize) < self.maps.len() && self.mask_ok(multicast, 0).is_ok()
            }
            Op::TmaStore { map, .. } => (map as usize) < self.maps.len(),
            Op::StageRelease { cluster, .. } => self.mask_ok(cluster, 0).is_ok(),
            Op::StGlobal { map, segment, .. } | Op::LdGlobal { map, segment, .. } => {
                (map as usize) < self.maps.len() && (1..=32).contains(&segment)
            }
            Op::Wgmma { n, .. } => (8..=256).contains(&n) && n % 8 == 0,
            Op::BarSync { threads, .. } | Op::BarArrive { threads, .. } => {
                threads != 0 && threads as u32 % WG_THREADS == 0
            }
            _ => true,
        }
    }

    /// Total CTAs in the grid (saturating: three `u32` sides can exceed
    /// `u64`, and [`Kernel::validate`] must be able to ask before it rejects).
    pub fn ctas(&self) -> u64 {
        self.grid
            .iter()
            .fold(1u64, |n, &g| n.saturating_mul(g as u64))
    }

    /// WarpGroups per CTA.
    pub fn wgs_per_cta(&self) -> usize {
        self.roles.iter().map(|r| r.count as usize).sum()
    }

    /// mbarriers per CTA.
    pub fn mbarriers_per_cta(&self) -> usize {
        self.mbarriers.iter().map(|d| d.len as usize).sum()
    }

    /// Stages per CTA.
    pub fn stages_per_cta(&self) -> usize {
        self.stages.iter().map(|d| d.len as usize).sum()
    }

    /// First CTA-wide index of mbarrier array `decl`.
    pub fn mbar_base(&self, decl: u8) -> u16 {
        self.mbarriers[..decl as usize].iter().map(|d| d.len).sum()
    }

    /// First CTA-wide index of stage array `decl`.
    pub fn stage_base(&self, decl: u8) -> u16 {
        self.stages[..decl as usize].iter().map(|d| d.len).sum()
    }

    /// Role and index-within-role of the CTA's `wg`-th WarpGroup.
    pub fn role_of(&self, wg: usize) -> (u8, u8) {
        let mut left = wg;
        for (i, r) in self.roles.iter().enumerate() {
            if left < r.count as usize {
                return (i as u8, left as u8);
            }
            left -= r.count as usize;
        }
        (0, 0)
    }

    /// Registers one CTA needs.
    pub fn regs_per_cta(&self) -> u32 {
        self.roles
            .iter()
            .map(|r| r.count as u32 * WG_THREADS * r.regs as u32)
            .sum()
    }

    /// Grid coordinates of the CTA with linear index `i`. In a clustered
    /// kernel CTAs are numbered cluster by cluster, in rank order within
    /// each; the clusters follow [`Kernel::order`] over the grid of
    /// clusters.
    pub fn cta_coords(&self, i: u32) -> [u32; 3] {
        if !self.cluster.is_clustered() {
            return self.block_coords(self.grid, i);
        }
        let size = self.cluster.size();
        let d = self.cluster.dims.map(|d| d.max(1) as u32);
        let blocks = [0, 1, 2].map(|j| self.grid[j] / d[j]);
        let q = self.block_coords(blocks, i / size);
        let r = self.cluster.rank_coords(i % size);
        [0, 1, 2].map(|j| q[j] * d[j] + r[j])
    }

    /// Coordinates of the `i`-th block of a `grid` walked in [`Kernel::order`].
    fn block_coords(&self, grid: [u32; 3], i: u32) -> [u32; 3] {
        let [gx, gy, _] = grid;
        let (gx, gy) = (gx.max(1), gy.max(1));
        let plane = gx * gy;
        let z = i / plane;
        let r = i % plane;
        match self.order {
            CtaOrder::Linear => [r % gx, r / gx, z],
            CtaOrder::Grouped { rows } => {
                let rows = rows.clamp(1, gy);
                let per_group = rows * gx;
                let group = r / per_group;
                let first = group * rows;
                let height = (gy - first).min(rows);
                let within = r % per_group;
                [within / height, first + within % height, z]
            }
        }
    }

    fn expr_ok(&self, id: ExprId, depth: usize, at: u16) -> Result<(), KernelError> {
        let e = self
            .exprs
            .get(id as usize)
            .ok_or(KernelError::BadExpr { at })?;
        if e.loop_depth_used() > depth {
            return Err(KernelError::BadLoopCounter { at });
        }
        Ok(())
    }

    fn mbar_ok(&self, r: Ref, depth: usize, at: u16) -> Result<(), KernelError> {
        if r.decl as usize >= self.mbarriers.len() {
            return Err(KernelError::BadMbarrier { at });
        }
        self.expr_ok(r.idx, depth, at)
    }

    fn stage_ok(&self, r: Ref, depth: usize, at: u16) -> Result<(), KernelError> {
        if r.decl as usize >= self.stages.len() {
            return Err(KernelError::BadStage { at });
        }
        self.expr_ok(r.idx, depth, at)
    }

    /// A cluster dimension mask: bits for x, y and z only, and none
    /// unless the kernel is launched in clusters.
    fn mask_ok(&self, mask: u8, at: u16) -> Result<(), KernelError> {
        if mask & !ALL_DIMS != 0 || (mask != 0 && !self.cluster.is_clustered()) {
            return Err(KernelError::BadClusterMask { at, mask });
        }
        Ok(())
    }

    fn map_ok(
        &self,
        map: u8,
        coords: &[ExprId; 5],
        depth: usize,
        at: u16,
    ) -> Result<(), KernelError> {
        let m = self
            .maps
            .get(map as usize)
            .ok_or(KernelError::BadTensorMap { at })?;
        for &c in &coords[..m.rank as usize] {
            self.expr_ok(c, depth, at)?;
        }
        Ok(())
    }

    /// Checks everything that does not depend on the GPU: ids in range,
    /// loops balanced and not empty, legal shapes, sane declarations.
    pub fn validate(&self) -> Result<(), KernelError> {
        if self.grid.contains(&0) || self.ctas() > u32::MAX as u64 {
            return Err(KernelError::BadGrid);
        }
        self.cluster.validate(self.grid)?;
        if self.roles.is_empty() || self.roles.iter().any(|r| r.count == 0) {
            return Err(KernelError::NoWarpGroups);
        }
        if self.wgs_per_cta() > MAX_WG_PER_CTA {
            return Err(KernelError::TooManyWarpGroups);
        }
        for (i, m) in self.maps.iter().enumerate() {
            m.validate(i as u8)?;
        }
        if self.mbarriers.iter().any(|d| d.len == 0 || d.count == 0) {
            return Err(KernelError::BadDeclaration {
                problem: "mbarrier arrays need a length and an arrival count >= 1",
            });
        }
        if self.mbarriers_per_cta() > MAX_MBARRIERS {
            return Err(KernelError::BadDeclaration {
                problem: "more than 256 mbarriers per CTA",
            });
        }
        if self.stages.iter().any(|d| d.len == 0 || d.consumers == 0) {
            return Err(KernelError::BadDeclaration {
                problem: "stage arrays need a length and a consumer count >= 1",
            });
        }
        if self.stages_per_cta() > MAX_STAGES {
            return Err(KernelError::BadDeclaration {
                problem: "more than 64 stages per CTA",
            });
        }
        if let CtaOrder::Grouped { rows: 0 } = self.order {
            return Err(KernelError::BadDeclaration {
                problem: "grouped CTA order needs rows >= 1",
            });
        }
        for (i, e) in self.exprs.iter().enumerate() {
            if e.div < 0 || e.rem < 0 || (e.mul != 0 && e.div == 0 && e.rem == 0) {
                return Err(KernelError::BadExprDivisor { expr: i as u16 });
            }
        }
        for (ri, r) in self.roles.iter().enumerate() {
            if r.stream {
                continue;
            }
            let end = r.start as usize + r.len as usize;
            if end > self.code.len() {
                return Err(KernelError::BadProgramRange { role: ri as u8 });
            }
            self.validate_program(r.start as usize, end)?;
        }
        Ok(())
    }

    fn validate_program(&self, start: usize, end: usize) -> Result<(), KernelError> {
        let mut stack: Vec<(usize, bool), MAX_LOOP_DEPTH> = Vec::new();
        for pc in start..end {
            let at = pc as u16;
            let depth = stack.len();
            let timed = !matches!(
                self.code[pc],
                Instr::LoopBegin { .. } | Instr::LoopEnd { .. }
            );
            if timed {
                for s in stack.iter_mut() {
                    s.1 = true;
                }
            }
            match self.code[pc] {
                Instr::TmaLoad {
                    map,
                    bar,
                    coords,
                    multicast,
                } => {
                    self.map_ok(map, &coords, depth, at)?;
                    self.mbar_ok(bar, depth, at)?;
                    self.mask_ok(multicast, at)?;
                }
                Instr::TmaStore { map, coords } => self.map_ok(map, &coords, depth, at)?,
                Instr::StGlobal {
                    map,
                    coords,
                    segment,
                } => {
                    self.map_ok(map, &coords, depth, at)?;
                    if !(1..=32).contains(&segment) {
                        return Err(KernelError::BadSegment {
                            at,
                            op: "st.global",
                            segment,
                        });
                    }
                }
                Instr::LdGlobal {
                    map,
                    bar,
                    coords,
                    segment,
                    ..
                } => {
                    self.map_ok(map, &coords, depth, at)?;
                    self.mbar_ok(bar, depth, at)?;
                    if !(1..=32).contains(&segment) {
                        return Err(KernelError::BadSegment {
                            at,
                            op: "ld.global",
                            segment,
                        });
                    }
                }
                Instr::BulkLoad { bar, addr, .. } => {
                    self.mbar_ok(bar, depth, at)?;
                    self.expr_ok(addr, depth, at)?;
                }
                Instr::BulkStore { addr, .. } => self.expr_ok(addr, depth, at)?,
                Instr::MbarInit { bar, count } => {
                    self.mbar_ok(bar, depth, at)?;
                    if count == 0 {
                        return Err(KernelError::BadDeclaration {
                            problem: "mbar.init needs an arrival count >= 1",
                        });
                    }
                }
                Instr::MbarArrive { bar } | Instr::MbarExpectTx { bar, .. } => {
                    self.mbar_ok(bar, depth, at)?
                }
                Instr::MbarWait { bar, parity } => {
                    self.mbar_ok(bar, depth, at)?;
                    self.expr_ok(parity, depth, at)?;
                }
                Instr::StageAcquire { stage } => self.stage_ok(stage, depth, at)?,
                Instr::StageRelease { stage, cluster } => {
                    self.stage_ok(stage, depth, at)?;
                    self.mask_ok(cluster, at)?;
                }
                Instr::Wgmma { n, .. } => {
                    if !(8..=256).contains(&n) || n % 8 != 0 {
                        return Err(KernelError::BadWgmmaShape { at, n });
                    }
                }
                Instr::BarSync { id, threads } | Instr::BarArrive { id, threads } => {
                    self.expr_ok(id, depth, at)?;
                    if threads == 0 || threads as u32 % WG_THREADS != 0 || threads as u32 > 1024 {
                        return Err(KernelError::BadThreadCount { at });
                    }
                }
                Instr::LoopBegin { count, end: e } => {
                    self.expr_ok(count, depth, at)?;
                    let pairs = (e as usize) < end
                        && e as usize > pc
                        && self.code[e as usize] == Instr::LoopEnd { begin: at };
                    if !pairs {
                        return Err(KernelError::UnbalancedLoop { at });
                    }
                    stack
                        .push((pc, false))
                        .map_err(|_| KernelError::LoopTooDeep {
                            at,
                            max: MAX_LOOP_DEPTH as u8,
                        })?;
                }
                Instr::LoopEnd { begin } => match stack.pop() {
                    Some((b, has_timed)) if b == begin as usize => {
                        if !has_timed {
                            return Err(KernelError::EmptyLoop { at: begin });
                        }
                    }
                    _ => return Err(KernelError::UnbalancedLoop { at }),
                },
                Instr::LockAcquire { lock } | Instr::LockRelease { lock } => {
                    self.expr_ok(lock, depth, at)?
                }
                Instr::CounterAdd { counter, amount: n }
                | Instr::CounterWait { counter, count: n } => {
                    self.expr_ok(counter, depth, at)?;
                    self.expr_ok(n, depth, at)?
                }
                Instr::StoreWait { .. }
                | Instr::WgmmaCommit
                | Instr::WgmmaWait { .. }
                | Instr::Bubble { .. }
                | Instr::SmemMove { .. }
                | Instr::Compute { .. }
                | Instr::Exit => {}
            }
        }
        if let Some(&(b, _)) = stack.last() {
            return Err(KernelError::UnbalancedLoop { at: b as u16 });
        }
        Ok(())
    }

    /// Checks that one CTA fits an SM of `config`.
    pub fn check_fits(&self, config: &GpuConfig) -> Result<(), KernelError> {
        for (i, r) in self.roles.iter().enumerate() {
            if r.regs > config.regs_per_thread {
                return Err(KernelError::TooManyRegisters { role: i as u8 });
            }
        }
        let smem_cap = config.smem_per_cta.min(config.smem_per_sm);
        if self.smem_bytes > smem_cap {
            return Err(KernelError::CtaDoesNotFit {
                resource: "bytes of shared memory",
                need: self.smem_bytes,
                have: smem_cap,
            });
        }
        if self.regs_per_cta() > config.regs_per_sm {
            return Err(KernelError::CtaDoesNotFit {
                resource: "registers",
                need: self.regs_per_cta(),
                have: config.regs_per_sm,
            });
        }
        if self.cluster.size() > config.sms as u32 {
            return Err(KernelError::ClusterDoesNotFit {
                size: self.cluster.size(),
                sms: config.sms as u32,
            });
        }
        let warps = self.wgs_per_cta() as u32 * 4;
        if warps > config.warps_per_sm as u32 {
            return Err(KernelError::CtaDoesNotFit {
                resource: "warps",
                need: warps,
                have: config.warps_per_sm as u32,
            });
        }
        Ok(())
    }
}
