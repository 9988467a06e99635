//! The external memory port: the embedding host is the memory.
//!
//! With [`MemoryModel::External`](crate::config::MemoryModel::External)
//! the TMA engines hand every operation to the host instead of a model of
//! simfa's own, as one [`ExtRequest`].
//!
//! # Granularity
//!
//! **One request per TMA operation** (a tensor-map box load or store, or a
//! bulk copy), carrying the operation's address, byte count and direction,
//! as memory-system hosts (DRAMsim3, Ramulator, an RTL memory model) are
//! usually fed transactions rather than the 128-byte lines a box expands
//! into. A host that wants lines splits the request itself.
//!
//! # Protocol
//!
//! 1. The simulator issues requests while it steps: each gets the next
//!    operation id ([`ExtRequest::id`], unique within a run), the SM, the
//!    cycle its requests leave the engine (after the TMA setup), the
//!    address and the bytes. They wait, in issue order, in a queue the
//!    host drains with [`Simulator::ext_pop`](crate::Simulator::ext_pop).
//! 2. The host answers each popped request, in any order and at any later
//!    cycle, with [`Simulator::ext_complete`](crate::Simulator::ext_complete)
//!    `(id, cycle)`: the cycle its last byte lands. The completion is
//!    applied when the simulator reaches that cycle, exactly like a fixed
//!    port's answer.
//! 3. A completion for an id that is not popped and outstanding (never
//!    issued, still unpopped, or completed already) is
//!    [`ExtError::UnknownRequest`]; one at a cycle the simulator has
//!    already simulated (before [`Simulator::now`](crate::Simulator::now))
//!    or before the request left the engine is [`ExtError::InPast`].
//!    Neither changes anything.
//!
//! While only the host's answers are awaited, [`Simulator::step`] returns
//! `Running` without advancing time and
//! [`Simulator::next_event_cycle`](crate::Simulator::next_event_cycle) is
//! `None`; [`Simulator::run`] fails with
//! [`SimError::ExternalPending`](crate::SimError::ExternalPending) rather
//! than wait forever.
//!
//! # Capacity and back-pressure
//!
//! The queue lives in the arena and holds `sms × tma_slots` requests:
//! every TMA operation that can be in flight. A WarpGroup that issues a
//! TMA operation while its SM's slots are all taken (by requests the host
//! has not yet answered) waits for a slot, as on the hardware, and issues
//! once a completion frees one: the request is delayed, never refused or
//! lost.
//!
//! # Determinism
//!
//! Given the host's answers (which ids, which cycles, between which
//! steps), the run is deterministic. Completions due at the same cycle are
//! applied in the order the host made them. Snapshots include the queue.
//!
//! [`Simulator::step`]: crate::Simulator::step
//! [`Simulator::run`]: crate::Simulator::run

use core::fmt;

use serde::{Deserialize, Serialize};

use crate::codec::{Reader, SnapshotError, Writer};

/// One TMA operation handed to the host.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExtRequest {
    /// Operation id, to name in the completion.
    pub id: u32,
    /// Issuing SM.
    pub sm: u16,
    /// True for a store (shared to global memory), false for a load.
    pub store: bool,
    /// The cycle the operation's requests leave the TMA engine.
    pub cycle: u64,
    /// Global address: the bulk copy's, or a tensor box's origin
    /// (`base + Σ coord × stride` over the map's dimensions, negative
    /// coordinates counted as 0).
    pub addr: u64,
    /// Bytes that cross the port (a box's in-bounds bytes for stores; the
    /// whole box for loads, as the hardware fills out-of-bounds elements).
    pub bytes: u64,
}

/// Why a completion was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub enum ExtError {
    /// The simulator does not use the external memory model.
    NotExternal,
    /// No popped, unanswered request has this id.
    UnknownRequest {
        /// The id named.
        id: u32,
    },
    /// The completion cycle lies before the simulator's current cycle or
    /// before the request left the engine.
    InPast {
        /// The cycle named.
        cycle: u64,
        /// The earliest cycle allowed.
        earliest: u64,
    },
    /// The simulator's event queue is full, so the completion cannot be
    /// scheduled. The queue has room for every operation in flight, so only
    /// a damaged snapshot leads here.
    QueueFull {
        /// The id named.
        id: u32,
    },
}

impl fmt::Display for ExtError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            ExtError::NotExternal => f.write_str("the memory model is not external"),
            ExtError::UnknownRequest { id } => {
                write!(f, "no outstanding request has id {id} (never issued, not popped, or already completed)")
            }
            ExtError::InPast { cycle, earliest } => write!(
                f,
                "completion at cycle {cycle} lies in the past: the earliest allowed is {earliest}"
            ),
            ExtError::QueueFull { id } => write!(
                f,
                "the event queue is full: request {id}'s completion cannot be scheduled (a damaged snapshot?)"
            ),
        }
    }
}

impl core::error::Error for ExtError {}

/// A queue slot's state.
const FREE: u8 = 0;
const QUEUED: u8 = 1;
const POPPED: u8 = 2;

/// A request and what its completion must deliver.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Slot {
    state: u8,
    pub req: ExtRequest,
    pub thread: u32,
    pub bar: u16,
}

impl Slot {
    pub(crate) const EMPTY: Slot = Slot {
        state: FREE,
        req: ExtRequest {
            id: 0,
            sm: 0,
            store: false,
            cycle: 0,
            addr: 0,
            bytes: 0,
        },
        thread: 0,
        bar: 0,
    };
}

/// The request queue in the arena.
#[derive(Debug)]
pub(crate) struct ExternalPort<'a> {
    slots: &'a mut [Slot],
    /// Ring of slot indices of queued (unpopped) requests, in issue order.
    fifo: &'a mut [u32],
    head: u32,
    len: u32,
    /// Requests queued or popped and not yet completed.
    live: u32,
}

impl<'a> ExternalPort<'a> {
    pub(crate) fn new(slots: &'a mut [Slot], fifo: &'a mut [u32]) -> Self {
        ExternalPort {
            slots,
            fifo,
            head: 0,
            len: 0,
            live: 0,
        }
    }

    /// Requests issued and not yet completed.
    pub(crate) fn outstanding(&self) -> usize {
        self.live as usize
    }

    /// Requests issued and not yet popped.
    pub(crate) fn queued(&self) -> usize {
        self.len as usize
    }

    /// Queues a request; `Err` when every slot is taken.
    pub(crate) fn push(&mut self, req: ExtRequest, thread: u32, bar: u16) -> Result<(), ()> {
        let i = self.slots.iter().position(|s| s.state == FREE).ok_or(())?;
        let cap = self.fifo.len() as u32;
        if self.len >= cap {
            return Err(());
        }
        self.slots[i] = Slot {
            state: QUEUED,
            req,
            thread,
            bar,
        };
        self.fifo[((self.head + self.len) % cap) as usize] = i as u32;
        self.len += 1;
        self.live += 1;
        Ok(())
    }

    /// The oldest unpopped request.
    pub(crate) fn pop(&mut self) -> Option<ExtRequest> {
        if self.len == 0 {
            return None;
        }
        let i = *self.fifo.get(self.head as usize)? as usize;
        self.head = (self.head + 1) % self.fifo.len() as u32;
        self.len -= 1;
        let s = self.slots.get_mut(i)?;
        s.state = POPPED;
        Some(s.req)
    }

    /// The popped, unanswered request `id`.
    pub(crate) fn find(&self, id: u32) -> Option<usize> {
        self.slots
            .iter()
            .position(|s| s.state == POPPED && s.req.id == id)
    }

    /// Frees slot `i` and returns what it held.
    pub(crate) fn take(&mut self, i: usize) -> Slot {
        let s = self.slots[i];
        self.slots[i].state = FREE;
        self.live -= 1;
        s
    }

    pub(crate) fn slot(&self, i: usize) -> &Slot {
        &self.slots[i]
    }

    pub(crate) fn save_state(&self, w: &mut Writer<'_>) -> Result<(), SnapshotError> {
        w.val(&self.head)?;
        w.val(&self.len)?;
        w.val(&self.live)?;
        w.slice(self.slots)?;
        w.slice(self.fifo)
    }

    pub(crate) fn load_state(&mut self, r: &mut Reader<'_>) -> Result<(), SnapshotError> {
        self.head = r.val()?;
        self.len = r.val()?;
        self.live = r.val()?;
        r.slice(self.slots)?;
        r.slice(self.fifo)?;
        let cap = self.slots.len();
        let queued = self.slots.iter().filter(|s| s.state == QUEUED).count();
        let live = self.slots.iter().filter(|s| s.state != FREE).count();
        let fifo_ok = (0..self.len).all(|k| {
            let at = (self.head + k) as usize % cap.max(1);
            self.fifo
                .get(at)
                .and_then(|&i| self.slots.get(i as usize))
                .is_some_and(|s| s.state == QUEUED)
        });
        if self.head as usize >= cap.max(1)
            || self.len as usize != queued
            || self.live as usize != live
            || self.slots.iter().any(|s| s.state > POPPED)
            || !fifo_ok
        {
            return Err(SnapshotError::Corrupt {
                what: "external request queue",
            });
        }
        Ok(())
    }
}
