//! The instruction set (the paper's Table III) and its operands.
//!
//! A program is a sequence of [`Instr`] whose variable operands are indices
//! into the kernel's expression table ([`Expr`]): tile coordinates, barrier
//! and stage indices and loop trip counts are affine in the CTA index, the
//! CTA coordinates, the WarpGroup's index within its role and the enclosing
//! loop counters, optionally followed by a floor division and a remainder.
//! At issue time an instruction is resolved into an [`Op`] with concrete
//! values; explicit per-WarpGroup streams supply [`Op`]s directly.

use serde::{Deserialize, Serialize};

/// Deepest loop nesting a program may use.
pub const MAX_LOOP_DEPTH: usize = 4;

/// One level of an active loop: where it begins, its trip count, the
/// iteration it is in (the issue unit's and the analytic walk's).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub(crate) struct Frame {
    pub begin: u16,
    pub count: u32,
    pub iter: u32,
}

impl Frame {
    /// A level with no loop in it.
    pub const EMPTY: Frame = Frame {
        begin: 0,
        count: 0,
        iter: 0,
    };
}

/// Index of an expression in [`crate::Kernel::exprs`].
pub type ExprId = u16;

/// An integer expression: `(((k + cta*CTA + cx*X + cy*Y + cz*Z + wg*W +
/// Σ l[i]*L_i) div d) mod m) * s`, with floor division and a non-negative
/// remainder, `d`, `m` and `s` omitted when zero. The scale `s` turns a
/// tile index decomposed by `div`/`mod` back into a coordinate, and is only
/// allowed after a division or remainder. Arithmetic wraps, so no input can
/// make evaluation panic.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Expr {
    /// Constant term.
    pub k: i64,
    /// Coefficient of the linear CTA index (launch order).
    pub cta: i64,
    /// Coefficients of the CTA coordinates x, y, z.
    pub c: [i64; 3],
    /// Coefficient of the WarpGroup's index within its role.
    pub wg: i64,
    /// Coefficients of the loop counters, outermost first.
    pub l: [i64; MAX_LOOP_DEPTH],
    /// Floor divisor, 0 for none.
    pub div: i64,
    /// Euclidean modulus, 0 for none.
    pub rem: i64,
    /// Scale applied last, 0 for none.
    pub mul: i64,
}

/// The values an [`Expr`] is evaluated against.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct EvalCtx {
    /// Linear CTA index.
    pub cta: u32,
    /// CTA coordinates.
    pub c: [u32; 3],
    /// WarpGroup index within its role.
    pub wg: u8,
    /// Loop counters, outermost first (zero beyond the current depth).
    pub l: [u32; MAX_LOOP_DEPTH],
}

impl Expr {
    /// A constant.
    pub const fn constant(k: i64) -> Self {
        Expr {
            k,
            cta: 0,
            c: [0; 3],
            wg: 0,
            l: [0; MAX_LOOP_DEPTH],
            div: 0,
            rem: 0,
            mul: 0,
        }
    }

    /// True when the expression has no variable term.
    pub fn is_constant(&self) -> bool {
        self.cta == 0 && self.c == [0; 3] && self.wg == 0 && self.l == [0; MAX_LOOP_DEPTH]
    }

    /// The deepest loop counter used (1-based), 0 if none.
    pub fn loop_depth_used(&self) -> usize {
        self.l.iter().rposition(|&c| c != 0).map_or(0, |i| i + 1)
    }

    /// Evaluates the expression. Never panics.
    pub fn eval(&self, ctx: &EvalCtx) -> i64 {
        let mut v = self.k;
        let term = |coef: i64, x: u32| coef.wrapping_mul(x as i64);
        v = v.wrapping_add(term(self.cta, ctx.cta));
        for i in 0..3 {
            v = v.wrapping_add(term(self.c[i], ctx.c[i]));
        }
        v = v.wrapping_add(term(self.wg, ctx.wg as u32));
        for i in 0..MAX_LOOP_DEPTH {
            v = v.wrapping_add(term(self.l[i], ctx.l[i]));
        }
        if self.div > 0 {
            v = v.div_euclid(self.div);
        }
        if self.rem > 0 {
            v = v.rem_euclid(self.rem);
        }
        if self.mul != 0 {
            v = v.wrapping_mul(self.mul);
        }
        v
    }
}

/// Where a WGMMA reads its A operand from: both operands from shared
/// memory (`SS`), or A from registers and B from shared memory (`RS`).
/// The mode decides how many bytes the instruction reads from shared
/// memory, which bounds small-N WGMMAs (see [`crate::GpuConfig::wgmma_cycles`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum WgmmaMode {
    /// A and B from shared memory.
    #[default]
    Ss,
    /// A from registers, B from shared memory.
    Rs,
}

impl WgmmaMode {
    /// `ss` or `rs`, as the text assembly writes it.
    pub const fn name(self) -> &'static str {
        match self {
            WgmmaMode::Ss => "ss",
            WgmmaMode::Rs => "rs",
        }
    }
}

/// The SIMT unit classes whose operations a [`Work`] counts, in the order
/// a `compute` instruction runs its phases.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum UnitClass {
    /// FP32 adds, multiplies, fused multiply-adds, compares (FFMA, FADD,
    /// FMUL, FMNMX).
    Fp32,
    /// The multi-function unit: exponentials, reciprocals (MUFU.EX2, ...).
    Mufu,
    /// Packed 16-bit arithmetic and FP32-to-16-bit conversions (HFMA2,
    /// F2FP), counted per 16-bit result.
    Fp16,
    /// Integer arithmetic and logic (IMAD, IADD3, LOP3).
    Int,
}

impl UnitClass {
    /// Every class, in phase order.
    pub const ALL: [UnitClass; 4] = [
        UnitClass::Fp32,
        UnitClass::Mufu,
        UnitClass::Fp16,
        UnitClass::Int,
    ];

    /// The name used by the text assembly and the configuration.
    pub const fn name(self) -> &'static str {
        match self {
            UnitClass::Fp32 => "fp32",
            UnitClass::Mufu => "mufu",
            UnitClass::Fp16 => "fp16",
            UnitClass::Int => "int",
        }
    }

    /// Operations one warp instruction of this class performs: 32 lanes,
    /// two 16-bit results per lane for packed FP16.
    pub const fn ops_per_warp_instr(self) -> u32 {
        match self {
            UnitClass::Fp16 => 64,
            _ => 32,
        }
    }
}

/// The non-MMA work of one WarpGroup, counted in operations (one per lane
/// and element: a 64 x 176 tile's exponentials are 11264 MUFU operations)
/// per unit class.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Work {
    /// FP32 operations.
    pub fp32: u32,
    /// MUFU operations.
    pub mufu: u32,
    /// 16-bit operations and conversions.
    pub fp16: u32,
    /// Integer operations.
    pub int: u32,
}

impl Work {
    /// The count of one class.
    pub const fn get(&self, c: UnitClass) -> u32 {
        match c {
            UnitClass::Fp32 => self.fp32,
            UnitClass::Mufu => self.mufu,
            UnitClass::Fp16 => self.fp16,
            UnitClass::Int => self.int,
        }
    }

    /// Sets the count of one class.
    pub fn set(&mut self, c: UnitClass, ops: u32) {
        match c {
            UnitClass::Fp32 => self.fp32 = ops,
            UnitClass::Mufu => self.mufu = ops,
            UnitClass::Fp16 => self.fp16 = ops,
            UnitClass::Int => self.int = ops,
        }
    }

    /// True when every count is zero.
    pub const fn is_empty(&self) -> bool {
        self.fp32 == 0 && self.mufu == 0 && self.fp16 == 0 && self.int == 0
    }

    /// The sum of two works, saturating.
    pub fn plus(self, o: Work) -> Work {
        Work {
            fp32: self.fp32.saturating_add(o.fp32),
            mufu: self.mufu.saturating_add(o.mufu),
            fp16: self.fp16.saturating_add(o.fp16),
            int: self.int.saturating_add(o.int),
        }
    }
}

/// A reference to one element of a declared array (of mbarriers or stages):
/// the declaration's index and an expression for the element.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Ref {
    /// Declaration index.
    pub decl: u8,
    /// Element index expression.
    pub idx: ExprId,
}

/// One instruction of a compact program.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Instr {
    /// TMA tensor load of one box into shared memory; completes `bar`'s
    /// transaction count by the full box's bytes (as on the hardware, the
    /// out-of-bounds part is zero-filled in shared memory but moves no data
    /// through the memory system).
    TmaLoad {
        /// Tensor map index.
        map: u8,
        /// The mbarrier that receives the transaction bytes.
        bar: Ref,
        /// Box origin, one expression per tensor-map dimension (innermost first).
        coords: [ExprId; 5],
        /// Cluster dimensions to multicast along (see [`crate::cluster`]):
        /// the box is read from memory once and lands at the same place in
        /// every CTA of the cluster that differs from the issuer only along
        /// these dimensions, completing bytes on the same mbarrier of each.
        /// 0 for a load into the issuing CTA alone.
        multicast: u8,
    },
    /// TMA tensor store of one box from shared memory.
    TmaStore {
        /// Tensor map index.
        map: u8,
        /// Box origin.
        coords: [ExprId; 5],
    },
    /// Non-tensor bulk copy global -> shared of `bytes` at `addr`.
    BulkLoad {
        /// The mbarrier that receives the transaction bytes.
        bar: Ref,
        /// Global address expression.
        addr: ExprId,
        /// Bytes copied.
        bytes: u32,
    },
    /// Non-tensor bulk copy shared -> global.
    BulkStore {
        /// Global address expression.
        addr: ExprId,
        /// Bytes copied.
        bytes: u32,
    },
    /// Wait until at most `n` of this WarpGroup's stores are in flight.
    StoreWait {
        /// Stores allowed to remain in flight.
        n: u8,
    },
    /// Re-initialise an mbarrier with an arrival count (phase restarts at 0).
    MbarInit {
        /// The barrier.
        bar: Ref,
        /// Expected arrivals per phase.
        count: u16,
    },
    /// Arrive once on an mbarrier.
    MbarArrive {
        /// The barrier.
        bar: Ref,
    },
    /// Add `bytes` to the transaction count an mbarrier phase waits for.
    MbarExpectTx {
        /// The barrier.
        bar: Ref,
        /// Bytes expected.
        bytes: u32,
    },
    /// Wait until the phase with the given parity has completed.
    MbarWait {
        /// The barrier.
        bar: Ref,
        /// Phase parity (evaluated modulo 2).
        parity: ExprId,
    },
    /// Producer side of a ring buffer: wait until the stage is free, then claim it.
    StageAcquire {
        /// The stage.
        stage: Ref,
    },
    /// Consumer side: release the stage; it is free once all consumers released it.
    StageRelease {
        /// The stage.
        stage: Ref,
        /// Cluster dimensions to release along (see [`crate::cluster`]):
        /// the same stage of every CTA of the cluster that differs from
        /// this one only along them is released (a remote `mbarrier.arrive`
        /// on each, as consumers of a multicast ring do); 0 for this CTA's.
        cluster: u8,
    },
    /// One m64nNk16 dense FP16/BF16 WGMMA, added to the open commit group.
    Wgmma {
        /// N (a multiple of 8 in 8..=256).
        n: u16,
        /// Where A comes from.
        mode: WgmmaMode,
    },
    /// Close the open WGMMA group.
    WgmmaCommit,
    /// Wait until at most `n` committed WGMMA groups of this WarpGroup are pending.
    WgmmaWait {
        /// Groups allowed to remain pending.
        n: u8,
    },
    /// Named barrier: arrive and wait until `threads` threads have arrived.
    BarSync {
        /// Barrier id expression (0..16).
        id: ExprId,
        /// Participating threads (multiple of 128).
        threads: u16,
    },
    /// Named barrier: arrive without waiting.
    BarArrive {
        /// Barrier id expression (0..16).
        id: ExprId,
        /// Participating threads (multiple of 128).
        threads: u16,
    },
    /// `cycles` of non-MMA work; the WarpGroup issues nothing meanwhile.
    Bubble {
        /// Cycles of work.
        cycles: u32,
    },
    /// Non-MMA work on the SM's shared SIMT units (see `crate::sim`): the
    /// WarpGroup issues nothing until its operations are done.
    Compute {
        /// Operations per unit class.
        work: Work,
    },
    /// Start of a loop running `count` times (a count <= 0 skips the body).
    LoopBegin {
        /// Trip count expression.
        count: ExprId,
        /// Index of the matching [`Instr::LoopEnd`].
        end: u16,
    },
    /// End of a loop body.
    LoopEnd {
        /// Index of the matching [`Instr::LoopBegin`].
        begin: u16,
    },
    /// The WarpGroup finishes.
    Exit,
    /// The WarpGroup stores one box of a tensor straight from its registers
    /// (`st.global`, no shared-memory staging, no TMA): its threads' store
    /// instructions reach memory as sector write requests that each carry
    /// `segment` bytes of the box. The SM's store path takes
    /// [`crate::GpuConfig::store_request_cycles`] per request, shared by
    /// the SM's WarpGroups; the WarpGroup goes on once its requests have
    /// left, and the box's lines are then written like a store's (a
    /// `store.wait` or the WarpGroup's exit waits for them).
    StGlobal {
        /// Tensor map index.
        map: u8,
        /// Box origin.
        coords: [ExprId; 5],
        /// Bytes of the box one sector request carries (1 to 32): 16 when
        /// each warp store instruction writes 16-byte runs, as a WGMMA
        /// accumulator's rows of 2-byte elements stored in bf16x2 pairs
        /// (8 rows x 16 bytes per instruction) or element by element down
        /// a column-major tensor (4 columns x 16 bytes) are.
        segment: u8,
    },
    /// The WarpGroup's threads copy one box of a tensor from global memory
    /// into shared memory with their own loads (`cp.async`, or `ld.global`
    /// into registers), not the TMA: the box reaches memory as sector read
    /// requests that each carry `segment` bytes, issued through the SM's
    /// load/store unit at [`crate::GpuConfig::load_request_cycles`] per
    /// request, shared by the SM's WarpGroups with its register stores.
    /// The WarpGroup goes on once its requests have left; the box's lines
    /// then arrive as a TMA load's do: only the in-bounds part of the box
    /// is requested and moves (a masked-off remainder moves nothing), and
    /// the whole box's bytes complete on `bar`, as a TMA load's do.
    LdGlobal {
        /// Tensor map index.
        map: u8,
        /// The mbarrier that receives the transaction bytes.
        bar: Ref,
        /// Box origin.
        coords: [ExprId; 5],
        /// Bytes of the box one sector request carries (1 to 32).
        segment: u8,
        /// The loads go through the SM's L1 data cache (`ld.global.ca`:
        /// a plain `ld.global` into registers, or `cp.async.ca`): a box
        /// whose sectors all lie in it completes after
        /// [`crate::L1Config::hit_cycles`] without reaching the L2, and
        /// a box that misses allocates its sectors there when it lands.
        /// `false`: L2 only (`cp.async.cg`, `ld.global.cg`).
        l1: bool,
    },
    /// The WarpGroup's threads move `bytes` between their registers and
    /// shared memory (`ld.shared`, `st.shared`: a layout conversion
    /// through shared memory, a tensor stored for a WGMMA or loaded from a
    /// `cp.async` buffer). The SM's load/store unit takes them as 32-byte
    /// requests at [`crate::GpuConfig::load_request_cycles`] each (128
    /// bytes per cycle on Hopper), after the loads and stores before them;
    /// the WarpGroup goes on when they are done.
    SmemMove {
        /// Bytes moved.
        bytes: u32,
    },
    /// Take spin lock `lock` of the grid (a word in global memory that a
    /// WarpGroup takes with `atomicCAS(lock, 0, 1)` in a loop): when it is
    /// free the WarpGroup takes it and goes on after an atomic's round
    /// trip to the L2 ([`crate::GpuConfig::atomic_round_trip`]); when
    /// another CTA holds it, the WarpGroup waits until it is released.
    /// Locks are shared by every CTA of the grid ([`crate::kernel::MAX_LOCKS`]).
    LockAcquire {
        /// Lock index expression (0..MAX_LOCKS).
        lock: ExprId,
    },
    /// Release spin lock `lock` (`atomicExch(lock, 0)`): it is free for a
    /// waiter once the write has crossed to the L2 (the crossbar's one-way
    /// latency); the WarpGroup goes on at once.
    LockRelease {
        /// Lock index expression (0..MAX_LOCKS).
        lock: ExprId,
    },
    /// Add `amount` to counter `counter` of the grid (a word in global
    /// memory that CTAs signal each other through: `atomicAdd`,
    /// `red.release.gpu.global.add`, or an `atomicExch` that sets an unset
    /// flag), once the add has crossed to the L2 (the crossbar's one-way
    /// latency); the WarpGroup goes on at once. A negative amount adds
    /// nothing. Counters are shared by every CTA of the grid
    /// ([`crate::kernel::MAX_COUNTERS`]) and start at 0.
    CounterAdd {
        /// Counter index expression (0..MAX_COUNTERS).
        counter: ExprId,
        /// Amount expression.
        amount: ExprId,
    },
    /// Wait until counter `counter` of the grid has reached `count` (a
    /// spin on `ld.acquire` or `atomicCAS(p, v, v)`): when it has, the
    /// WarpGroup goes on after an atomic's round trip to the L2 (the poll
    /// that saw it, [`crate::GpuConfig::atomic_round_trip`]); when it has
    /// not, it waits until an add lands and polls again.
    CounterWait {
        /// Counter index expression (0..MAX_COUNTERS).
        counter: ExprId,
        /// Count expression (reached at once when not above 0).
        count: ExprId,
    },
}

/// A resolved instruction, with every operand evaluated. This is what the
/// issue unit executes and what a [`crate::StreamSource`] supplies.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Op {
    /// See [`Instr::TmaLoad`]; `bar` is a CTA-wide mbarrier index.
    TmaLoad {
        /// Tensor map.
        map: u8,
        /// mbarrier index.
        bar: u16,
        /// Box origin.
        coords: [i64; 5],
        /// Cluster dimensions to multicast along.
        multicast: u8,
    },
    /// See [`Instr::TmaStore`].
    TmaStore {
        /// Tensor map.
        map: u8,
        /// Box origin.
        coords: [i64; 5],
    },
    /// See [`Instr::BulkLoad`].
    BulkLoad {
        /// mbarrier index.
        bar: u16,
        /// Global address.
        addr: u64,
        /// Bytes.
        bytes: u32,
    },
    /// See [`Instr::BulkStore`].
    BulkStore {
        /// Global address.
        addr: u64,
        /// Bytes.
        bytes: u32,
    },
    /// See [`Instr::StoreWait`].
    StoreWait {
        /// Stores allowed in flight.
        n: u8,
    },
    /// See [`Instr::MbarInit`].
    MbarInit {
        /// mbarrier index.
        bar: u16,
        /// Arrival count.
        count: u16,
    },
    /// See [`Instr::MbarArrive`]: `count` arrivals at once (PTX's
    /// `mbarrier.arrive` with a count, as one thread arrives for a whole
    /// WarpGroup); an instruction's arrive is one.
    MbarArrive {
        /// mbarrier index.
        bar: u16,
        /// Arrivals.
        count: u16,
    },
    /// See [`Instr::MbarExpectTx`].
    MbarExpectTx {
        /// mbarrier index.
        bar: u16,
        /// Bytes.
        bytes: u32,
    },
    /// See [`Instr::MbarWait`].
    MbarWait {
        /// mbarrier index.
        bar: u16,
        /// Parity 0 or 1.
        parity: u8,
    },
    /// See [`Instr::StageAcquire`]; a CTA-wide stage index.
    StageAcquire {
        /// Stage index.
        stage: u16,
    },
    /// See [`Instr::StageRelease`].
    StageRelease {
        /// Stage index.
        stage: u16,
        /// Cluster dimensions to release along.
        cluster: u8,
    },
    /// See [`Instr::Wgmma`].
    Wgmma {
        /// N.
        n: u16,
        /// Where A comes from.
        mode: WgmmaMode,
    },
    /// See [`Instr::WgmmaCommit`].
    WgmmaCommit,
    /// See [`Instr::WgmmaWait`].
    WgmmaWait {
        /// Groups allowed pending.
        n: u8,
    },
    /// See [`Instr::BarSync`].
    BarSync {
        /// Barrier id.
        id: u8,
        /// Threads.
        threads: u16,
    },
    /// See [`Instr::BarArrive`].
    BarArrive {
        /// Barrier id.
        id: u8,
        /// Threads.
        threads: u16,
    },
    /// See [`Instr::Bubble`].
    Bubble {
        /// Cycles.
        cycles: u32,
    },
    /// See [`Instr::Compute`].
    Compute {
        /// Operations per unit class.
        work: Work,
    },
    /// See [`Instr::Exit`].
    Exit,
    /// See [`Instr::StGlobal`].
    StGlobal {
        /// Tensor map.
        map: u8,
        /// Box origin.
        coords: [i64; 5],
        /// Bytes one sector request carries (1 to 32).
        segment: u8,
    },
    /// See [`Instr::LdGlobal`]; `bar` is a CTA-wide mbarrier index.
    LdGlobal {
        /// Tensor map.
        map: u8,
        /// mbarrier index.
        bar: u16,
        /// Box origin.
        coords: [i64; 5],
        /// Bytes one sector request carries (1 to 32).
        segment: u8,
        /// Through the SM's L1 (see [`Instr::LdGlobal`]).
        l1: bool,
    },
    /// See [`Instr::SmemMove`].
    SmemMove {
        /// Bytes moved.
        bytes: u32,
    },
    /// See [`Instr::LockAcquire`].
    LockAcquire {
        /// Lock index.
        lock: u16,
    },
    /// See [`Instr::LockRelease`].
    LockRelease {
        /// Lock index.
        lock: u16,
    },
    /// See [`Instr::CounterAdd`].
    CounterAdd {
        /// Counter index.
        counter: u16,
        /// Amount added.
        amount: u32,
    },
    /// See [`Instr::CounterWait`].
    CounterWait {
        /// Counter index.
        counter: u16,
        /// Awaited count.
        count: u32,
    },
}

impl Op {
    /// A small stable code for digests and traces.
    pub const fn code(&self) -> u8 {
        match self {
            Op::TmaLoad { .. } => 1,
            Op::TmaStore { .. } => 2,
            Op::BulkLoad { .. } => 3,
            Op::BulkStore { .. } => 4,
            Op::StoreWait { .. } => 5,
            Op::MbarInit { .. } => 6,
            Op::MbarArrive { .. } => 7,
            Op::MbarExpectTx { .. } => 8,
            Op::MbarWait { .. } => 9,
            Op::StageAcquire { .. } => 10,
            Op::StageRelease { .. } => 11,
            Op::Wgmma { .. } => 12,
            Op::WgmmaCommit => 13,
            Op::WgmmaWait { .. } => 14,
            Op::BarSync { .. } => 15,
            Op::BarArrive { .. } => 16,
            Op::Bubble { .. } => 17,
            Op::Exit => 18,
            Op::Compute { .. } => 19,
            Op::StGlobal { .. } => 20,
            Op::LdGlobal { .. } => 21,
            Op::SmemMove { .. } => 22,
            Op::LockAcquire { .. } => 23,
            Op::LockRelease { .. } => 24,
            Op::CounterAdd { .. } => 25,
            Op::CounterWait { .. } => 26,
        }
    }

    /// The mnemonic used by the text assembly.
    pub const fn mnemonic(&self) -> &'static str {
        match self {
            Op::TmaLoad { .. } => "tma.load",
            Op::TmaStore { .. } => "tma.store",
            Op::BulkLoad { .. } => "bulk.load",
            Op::BulkStore { .. } => "bulk.store",
            Op::StoreWait { .. } => "store.wait",
            Op::MbarInit { .. } => "mbar.init",
            Op::MbarArrive { .. } => "mbar.arrive",
            Op::MbarExpectTx { .. } => "mbar.expect_tx",
            Op::MbarWait { .. } => "mbar.wait",
            Op::StageAcquire { .. } => "stage.acquire",
            Op::StageRelease { .. } => "stage.release",
            Op::Wgmma { .. } => "wgmma",
            Op::WgmmaCommit => "wgmma.commit",
            Op::WgmmaWait { .. } => "wgmma.wait",
            Op::BarSync { .. } => "bar.sync",
            Op::BarArrive { .. } => "bar.arrive",
            Op::Bubble { .. } => "bubble",
            Op::Exit => "exit",
            Op::Compute { .. } => "compute",
            Op::StGlobal { .. } => "st.global",
            Op::LdGlobal { l1: false, .. } => "ld.global",
            Op::LdGlobal { l1: true, .. } => "ld.global.ca",
            Op::SmemMove { .. } => "smem.move",
            Op::LockAcquire { .. } => "lock.acquire",
            Op::LockRelease { .. } => "lock.release",
            Op::CounterAdd { .. } => "counter.add",
            Op::CounterWait { .. } => "counter.wait",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expr_eval_floor_and_rem() {
        let mut e = Expr::constant(-3);
        e.l[0] = 1;
        e.div = 2;
        e.rem = 2;
        let mut ctx = EvalCtx::default();
        // (-3 + 0) div 2 = -2 ; rem 2 = 0
        assert_eq!(e.eval(&ctx), 0);
        ctx.l[0] = 4; // (1) div 2 = 0
        assert_eq!(e.eval(&ctx), 0);
        ctx.l[0] = 5; // 2 div 2 = 1
        assert_eq!(e.eval(&ctx), 1);
        assert_eq!(e.loop_depth_used(), 1);
        e.mul = 32;
        assert_eq!(e.eval(&ctx), 32);
    }

    #[test]
    fn expr_eval_never_panics_on_extremes() {
        let e = Expr {
            k: i64::MAX,
            cta: i64::MAX,
            c: [i64::MIN; 3],
            wg: -1,
            l: [i64::MAX; MAX_LOOP_DEPTH],
            div: 1,
            rem: i64::MAX,
            mul: 0,
        };
        let ctx = EvalCtx {
            cta: u32::MAX,
            c: [u32::MAX; 3],
            wg: 255,
            l: [u32::MAX; MAX_LOOP_DEPTH],
        };
        let v = e.eval(&ctx);
        assert!((0..i64::MAX).contains(&v));
    }
}
