//! The grid's spin locks ([`crate::Instr::LockAcquire`]): words in global
//! memory that a WarpGroup takes with `atomicCAS(lock, 0, 1)` in a loop and
//! gives back with `atomicExch(lock, 0)`, as Triton's layer-norm backward
//! guards its partial sums.
//!
//! # Timing
//!
//! - A WarpGroup that finds its lock free takes it and goes on after the
//!   CAS's round trip to an L2 slice of its partition
//!   ([`crate::GpuConfig::atomic_round_trip`]: crossbar there and back and
//!   the slice's hit latency).
//! - One that finds it held stalls ([`WaitReason::Lock`]), as a spinning
//!   warp makes no progress; it is woken when the lock is free and tries
//!   again.
//! - A release takes the lock's word back to 0 once the exchange has
//!   crossed to the L2 (the crossbar's one-way latency); the releasing
//!   WarpGroup goes on at once. A lock handed from one CTA to the next thus
//!   passes in a crossing and a round trip, the time of a waiter's CAS
//!   that lands just after the release.
//!
//! Waiters are woken in thread order and retake the lock in the order the
//! SMs issue, so a run stays deterministic. The CAS's few bytes are not
//! counted as memory traffic. A release of a free lock does nothing; a
//! second release before the first has crossed is merged with it.

use serde::{Deserialize, Serialize};

use super::issue::Outcome;
use super::state::Ev;
use super::Simulator;
use crate::error::SimError;
use crate::kernel::MAX_LOCKS;
use crate::observer::Observer;
use crate::source::StreamSource;
use crate::wait::WaitReason;

const WORDS: usize = MAX_LOCKS / 64;

/// Which locks are held, and which have a release on its way to the L2.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(super) struct Locks {
    held: [u64; WORDS],
    freeing: [u64; WORDS],
}

fn bit(lock: u16) -> (usize, u64) {
    (lock as usize / 64, 1 << (lock % 64))
}

impl Locks {
    /// Whether lock `lock` (in range) is held.
    fn held(&self, lock: u16) -> bool {
        let (w, b) = bit(lock);
        self.held[w] & b != 0
    }

    /// Takes lock `lock` (in range).
    fn take(&mut self, lock: u16) {
        let (w, b) = bit(lock);
        self.held[w] |= b;
    }

    /// Frees lock `lock` (in range): it is neither held nor being released.
    fn free(&mut self, lock: u16) {
        let (w, b) = bit(lock);
        self.held[w] &= !b;
        self.freeing[w] &= !b;
    }

    /// Marks lock `lock`'s release as on its way; false when the lock is
    /// out of range or a release of it is on its way already.
    pub(super) fn mark_freeing(&mut self, lock: u16) -> bool {
        if lock as usize >= MAX_LOCKS {
            return false;
        }
        let (w, b) = bit(lock);
        let fresh = self.freeing[w] & b == 0;
        self.freeing[w] |= b;
        fresh
    }

    /// Whether the releases on their way are exactly `queued`'s and each
    /// is of a held lock (a restored snapshot's check).
    pub(super) fn crossing_as(&self, queued: &Locks) -> bool {
        self.freeing == queued.freeing
            && self
                .freeing
                .iter()
                .zip(&self.held)
                .all(|(f, h)| f & !h == 0)
    }
}

impl<S: StreamSource> Simulator<'_, S> {
    /// `lock.acquire`: takes the lock when it is free.
    pub(super) fn lock_acquire(&mut self, ti: usize, lock: u16) -> Result<Outcome, SimError> {
        self.bar_index(ti, lock, "lock", MAX_LOCKS)?;
        if self.locks.held(lock) {
            return Ok(Outcome::Stall(WaitReason::Lock { lock }));
        }
        self.locks.take(lock);
        Ok(Outcome::Sleep(self.now + self.cfg.atomic_round_trip()))
    }

    /// `lock.release`: the lock is free once the write has crossed.
    pub(super) fn lock_release(&mut self, ti: usize, lock: u16) -> Result<Outcome, SimError> {
        self.bar_index(ti, lock, "lock", MAX_LOCKS)?;
        if self.locks.held(lock) && self.locks.mark_freeing(lock) {
            let at = self.now + self.cfg.atomic_crossing();
            self.push(at, Ev::LockFree { lock })?;
        }
        Ok(Outcome::Next)
    }

    /// A release reached the L2: frees the lock and wakes its waiters, on
    /// every SM.
    pub(super) fn lock_free(&mut self, lock: u16, obs: &mut impl Observer) {
        self.locks.free(lock);
        for sm in 0..self.sms.len() {
            self.wake_sm(sm, obs, |r| r == WaitReason::Lock { lock });
        }
    }
}
