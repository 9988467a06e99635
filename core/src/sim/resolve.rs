//! Resolving an instruction for one WarpGroup: its expression operands
//! evaluated for the CTA, the WarpGroup and the loop iteration, array
//! indices checked against their declarations, into the [`Op`] the issue
//! unit executes.

use crate::isa::{EvalCtx, Instr, Op, Ref};
use crate::kernel::Kernel;

fn index_of(k: &Kernel, r: Ref, ctx: &EvalCtx, mbar: bool) -> u16 {
    let base = if mbar {
        k.mbar_base(r.decl)
    } else {
        k.stage_base(r.decl)
    } as i64;
    let len = if mbar {
        k.mbarriers[r.decl as usize].len
    } else {
        k.stages[r.decl as usize].len
    } as i64;
    let i = k.exprs[r.idx as usize].eval(ctx);
    if (0..len).contains(&i) {
        (base + i) as u16
    } else {
        u16::MAX
    }
}

fn coords_of(k: &Kernel, map: u8, ids: &[u16; 5], ctx: &EvalCtx) -> [i64; 5] {
    let rank = k.maps[map as usize].rank as usize;
    let mut c = [0i64; 5];
    for i in 0..rank {
        c[i] = k.exprs[ids[i] as usize].eval(ctx);
    }
    c
}

/// Resolves a (non-control) instruction against the evaluation context.
/// Out-of-range array indices resolve to `u16::MAX`, which the executor
/// reports as [`crate::error::SimError::IndexOutOfRange`].
pub(super) fn resolve(k: &Kernel, instr: &Instr, ctx: &EvalCtx) -> Op {
    let ev = |id: u16| k.exprs[id as usize].eval(ctx);
    match *instr {
        Instr::TmaLoad {
            map,
            bar,
            coords,
            multicast,
        } => Op::TmaLoad {
            map,
            bar: index_of(k, bar, ctx, true),
            coords: coords_of(k, map, &coords, ctx),
            multicast,
        },
        Instr::TmaStore { map, coords } => Op::TmaStore {
            map,
            coords: coords_of(k, map, &coords, ctx),
        },
        Instr::BulkLoad { bar, addr, bytes } => Op::BulkLoad {
            bar: index_of(k, bar, ctx, true),
            addr: ev(addr) as u64,
            bytes,
        },
        Instr::BulkStore { addr, bytes } => Op::BulkStore {
            addr: ev(addr) as u64,
            bytes,
        },
        Instr::StoreWait { n } => Op::StoreWait { n },
        Instr::MbarInit { bar, count } => Op::MbarInit {
            bar: index_of(k, bar, ctx, true),
            count,
        },
        Instr::MbarArrive { bar } => Op::MbarArrive {
            bar: index_of(k, bar, ctx, true),
            count: 1,
        },
        Instr::MbarExpectTx { bar, bytes } => Op::MbarExpectTx {
            bar: index_of(k, bar, ctx, true),
            bytes,
        },
        Instr::MbarWait { bar, parity } => Op::MbarWait {
            bar: index_of(k, bar, ctx, true),
            parity: ev(parity).rem_euclid(2) as u8,
        },
        Instr::StageAcquire { stage } => Op::StageAcquire {
            stage: index_of(k, stage, ctx, false),
        },
        Instr::StageRelease { stage, cluster } => Op::StageRelease {
            stage: index_of(k, stage, ctx, false),
            cluster,
        },
        Instr::Wgmma { n, mode } => Op::Wgmma { n, mode },
        Instr::WgmmaCommit => Op::WgmmaCommit,
        Instr::WgmmaWait { n } => Op::WgmmaWait { n },
        Instr::BarSync { id, threads } => Op::BarSync {
            id: ev(id).clamp(0, 255) as u8,
            threads,
        },
        Instr::BarArrive { id, threads } => Op::BarArrive {
            id: ev(id).clamp(0, 255) as u8,
            threads,
        },
        Instr::Bubble { cycles } => Op::Bubble { cycles },
        Instr::SmemMove { bytes } => Op::SmemMove { bytes },
        Instr::Compute { work } => Op::Compute { work },
        Instr::StGlobal {
            map,
            coords,
            segment,
        } => Op::StGlobal {
            map,
            coords: coords_of(k, map, &coords, ctx),
            segment,
        },
        Instr::LdGlobal {
            map,
            bar,
            coords,
            segment,
            l1,
        } => Op::LdGlobal {
            map,
            bar: index_of(k, bar, ctx, true),
            coords: coords_of(k, map, &coords, ctx),
            segment,
            l1,
        },
        Instr::LockAcquire { lock } => Op::LockAcquire {
            lock: word_of(ev(lock), crate::kernel::MAX_LOCKS),
        },
        Instr::LockRelease { lock } => Op::LockRelease {
            lock: word_of(ev(lock), crate::kernel::MAX_LOCKS),
        },
        Instr::CounterAdd { counter, amount } => Op::CounterAdd {
            counter: word_of(ev(counter), crate::kernel::MAX_COUNTERS),
            amount: ev(amount).clamp(0, u32::MAX as i64) as u32,
        },
        Instr::CounterWait { counter, count } => Op::CounterWait {
            counter: word_of(ev(counter), crate::kernel::MAX_COUNTERS),
            count: ev(count).clamp(0, u32::MAX as i64) as u32,
        },
        Instr::LoopBegin { .. } | Instr::LoopEnd { .. } | Instr::Exit => Op::Exit,
    }
}

/// A lock or counter index, or `u16::MAX` (refused at issue) outside the
/// grid's `len` words.
fn word_of(v: i64, len: usize) -> u16 {
    if (0..len as i64).contains(&v) {
        v as u16
    } else {
        u16::MAX
    }
}
