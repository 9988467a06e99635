//! What the interpreter reports: the timing-visible ops a CTA reaches,
//! with their operands' values.

use super::super::affine::Lin;
use super::super::scope::Wgmma;
use super::super::value::MemRef;

/// What a load or store through a pointer tensor moves: the tensor (its
/// argument, byte offset and byte steps) and how its threads' accesses
/// reach memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PtrTile {
    /// The pointer tensor.
    pub lin: Lin,
    /// Bytes per element.
    pub elem: u32,
    /// Bytes one sector request carries (1 to 32).
    pub segment: u8,
    /// Bytes one thread moves per access (its vector): a `cp.async` of 16
    /// is `.cg` and bypasses the L1, a narrower one is `.ca`.
    pub vector: u32,
    /// The op asks for the L2 only (`cache_modifier=".cg"` or `".cv"`).
    pub l2_only: bool,
}

/// One timing-visible op reached by a CTA, with its operands' values.
#[derive(Clone, Debug, PartialEq)]
pub enum Effect<'m> {
    /// `local_alloc` of `bytes` of shared memory.
    Alloc {
        /// The buffer.
        mem: MemRef,
        /// Its size.
        bytes: u64,
    },
    /// Tensor data moved between registers and shared memory by the CTA's
    /// threads: a layout conversion through shared memory, `local_load`,
    /// `local_store`, a `local_alloc` of a tensor.
    SharedMove {
        /// Bytes moved, for the whole CTA.
        bytes: u64,
    },
    /// `local_dealloc`: the buffer's shared memory is free again.
    Dealloc {
        /// The buffer.
        mem: MemRef,
    },
    /// `init_barrier` with an arrival count.
    InitBarrier {
        /// The barrier.
        bar: MemRef,
        /// Arrivals per phase.
        count: u32,
    },
    /// `barrier_expect` of `bytes`.
    Expect {
        /// The barrier.
        bar: MemRef,
        /// Bytes of transactions expected.
        bytes: u64,
    },
    /// `arrive_barrier`.
    Arrive {
        /// The barrier.
        bar: MemRef,
        /// Arrivals.
        count: u32,
    },
    /// `wait_barrier` for a phase parity.
    Wait {
        /// The barrier.
        bar: MemRef,
        /// The phase parity waited for.
        phase: u32,
    },
    /// A TMA copy from global memory (to shared memory, completing on
    /// `bar`, or to registers).
    TmaLoad {
        /// The kernel argument of the descriptor.
        desc: u32,
        /// Coordinates, outermost first (as the kernel passes them).
        coords: Vec<i64>,
        /// The box, outermost dimension first.
        box_shape: &'m [u32],
        /// Bytes moved.
        bytes: u64,
        /// The barrier it completes on (`None`: into registers).
        bar: Option<MemRef>,
        /// For a load into registers, its number among the run's loads.
        regs: Option<u64>,
    },
    /// A TMA copy to global memory.
    TmaStore {
        /// The kernel argument of the descriptor.
        desc: u32,
        /// Coordinates, outermost first.
        coords: Vec<i64>,
        /// The box, outermost dimension first.
        box_shape: &'m [u32],
        /// Bytes moved.
        bytes: u64,
    },
    /// `async_tma_store_wait` until at most `pendings` stores are in flight.
    StoreWait {
        /// Stores allowed to remain in flight.
        pendings: u32,
    },
    /// A `warp_group_dot`.
    Wgmma {
        /// Its shape.
        shape: &'m Wgmma,
        /// Whether it is synchronous (no `isAsync = true`): the
        /// WarpGroup waits for it before going on.
        sync: bool,
    },
    /// A `warp_group_dot_wait`.
    WgmmaWait {
        /// Dots allowed to remain in flight.
        pendings: u32,
    },
    /// A load through a pointer tensor by the CTA's threads: into shared
    /// memory (`async_copy_global_to_local`, part of the open commit
    /// group) or into registers (`tt.load`, load number `regs`).
    PtrLoad {
        /// What it reads.
        tile: PtrTile,
        /// The load's number for a load into registers.
        regs: Option<u64>,
    },
    /// `tt.store` through a pointer tensor from registers.
    PtrStore {
        /// What it writes.
        tile: PtrTile,
    },
    /// A load through a pointer tensor made from loaded indices (a
    /// gather), into shared memory or registers as [`Effect::PtrLoad`]:
    /// one tile per gathered row.
    Gather {
        /// What each row reads.
        tiles: Vec<PtrTile>,
        /// The load's number for a load into registers.
        regs: Option<u64>,
    },
    /// `tt.store` through a pointer tensor made from loaded indices (a
    /// scatter): one tile per row.
    Scatter {
        /// What each row writes.
        tiles: Vec<PtrTile>,
    },
    /// `ttg.barrier` (`tl.debug_barrier`, `gpu.barrier`): the warps of
    /// the run's role meet.
    Barrier,
    /// A spin lock at global address `addr`: taken (`atomic_cas(lock, 0,
    /// v)`, `v` not 0, in the loop that spins on it) or released
    /// (`atomic_rmw exch` of 0 on a lock the run holds).
    Lock {
        /// The lock word's global address.
        addr: u64,
        /// Taken (true) or released.
        acquire: bool,
    },
    /// A flag at global address `addr` (a word CTAs signal each other
    /// through, the grid's counter of that word): `amount` added to it
    /// (`atomic_rmw add`, or `exch` of a value not 0 on a word that is no
    /// lock the run holds), after the stores before it.
    FlagAdd {
        /// The word's global address.
        addr: u64,
        /// What is added.
        amount: i64,
    },
    /// Waiting for the flag at `addr` to reach `count`: an
    /// `atomic_cas(p, c, c)` (a read that changes nothing) in the
    /// condition of the `scf.while` that spins until it gives `c`.
    FlagWait {
        /// The word's global address.
        addr: u64,
        /// The value waited for.
        count: i64,
    },
    /// `async_commit_group`: the copies since the last one are a group.
    AsyncCommit,
    /// `async_wait`: until at most `pendings` groups are in flight.
    AsyncWait {
        /// Groups allowed to remain in flight.
        pendings: u32,
    },
    /// The first read of the registers load number `load` fills.
    Use {
        /// The load.
        load: u64,
    },
    /// `tensormap_create`: a descriptor made in the kernel over pointer
    /// argument `ptr`.
    MakeDesc {
        /// Its key ([`super::super::value::MADE_DESC`] and the op's byte
        /// offset).
        key: u32,
        /// The pointer argument's position.
        ptr: u16,
        /// The box, innermost first.
        boxdim: Vec<u32>,
        /// Elements per dimension, innermost first.
        dims: Vec<u64>,
        /// Byte strides of dimensions 1.., innermost first.
        strides: Vec<u64>,
    },
    /// The run enters its partition of `ttg.warp_specialize` (the default
    /// region, or a worker's): every partition's warps meet there.
    Partition,
    /// Element-wise work in registers, for the whole CTA, in operations
    /// per unit class (one per element of its class; the table is in
    /// `std-shim/src/ttgir/interp/work.rs`).
    Compute {
        /// FP32 operations.
        fp32: u64,
        /// MUFU operations.
        mufu: u64,
        /// 16-bit operations and conversions.
        fp16: u64,
        /// Integer operations.
        int: u64,
    },
}

/// The op an effect comes from: its byte offset in the input and its name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Origin<'m> {
    /// Byte offset of the op's statement.
    pub at: usize,
    /// The op's name (`ttng.wait_barrier`).
    pub op: &'m str,
}

/// Where the effects of a CTA go, each with the op it comes from.
pub trait EffectSink<'m> {
    /// One effect of op `from`.
    fn effect(&mut self, from: Origin<'m>, e: Effect<'m>);
}

impl<'m> EffectSink<'m> for Vec<(Origin<'m>, Effect<'m>)> {
    fn effect(&mut self, from: Origin<'m>, e: Effect<'m>) {
        self.push((from, e));
    }
}
