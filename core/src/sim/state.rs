//! The plain-data records the simulator keeps in its arena.

use crate::cluster::MAX_CLUSTER;
use crate::isa::{Frame, Op, MAX_LOOP_DEPTH};
use crate::wait::WaitReason;

/// Most committed WGMMA groups a WarpGroup can track (the config's
/// `max_wgmma_groups` is at most this).
pub(crate) const GROUP_RING: usize = 64;

/// Life-cycle state of a physical thread.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub(crate) enum TState {
    /// Slot unused.
    Free,
    /// Can issue.
    Ready,
    /// In a bubble or waiting for launch; a wake-up event is queued.
    Sleeping,
    /// Stalled on a condition; woken by the event that satisfies it.
    Waiting(WaitReason),
    /// Running a `compute` instruction on the SM's shared units; woken
    /// when its last phase is done (see `super::units`).
    Computing,
    /// Exited.
    Done,
}

/// A physical thread: one resident WarpGroup.
#[derive(Clone, Copy, Debug, serde::Serialize, serde::Deserialize)]
pub(crate) struct Thread {
    pub state: TState,
    /// Global CTA slot index.
    pub cta: u32,
    pub sm: u16,
    /// Slot within the SM (bit in its ready mask).
    pub slot: u8,
    /// WarpGroup index within the CTA.
    pub wg: u8,
    pub role: u8,
    pub wg_in_role: u8,
    pub pc: u16,
    pub stream_pos: u64,
    pub depth: u8,
    pub loops: [Frame; MAX_LOOP_DEPTH],
    /// Fetched, not yet issued instruction.
    pub pending: Option<Op>,
    /// Residency order, for greedy-then-oldest.
    pub age: u64,
    /// Cycle the current stall or sleep began.
    pub since: u64,
    pub wgmma_issued: u32,
    pub wgmma_done: u32,
    /// Ring of committed group end indices (pending groups only).
    #[serde(with = "super::big_array")]
    pub groups: [u32; GROUP_RING],
    pub g_head: u8,
    pub g_len: u8,
    pub stores: u16,
    /// Scaled work left per unit class of the current `compute`.
    pub work: [u64; 4],
    /// The class of the phase counted in the SM's `unit_n` (`u8::MAX`
    /// when none).
    pub unit_phase: u8,
}

impl Thread {
    pub const EMPTY: Thread = Thread {
        state: TState::Free,
        cta: 0,
        sm: 0,
        slot: 0,
        wg: 0,
        role: 0,
        wg_in_role: 0,
        pc: 0,
        stream_pos: 0,
        depth: 0,
        loops: [Frame::EMPTY; MAX_LOOP_DEPTH],
        pending: None,
        age: 0,
        since: 0,
        wgmma_issued: 0,
        wgmma_done: 0,
        groups: [0; GROUP_RING],
        g_head: 0,
        g_len: 0,
        stores: 0,
        work: [0; 4],
        unit_phase: u8::MAX,
    };

    /// Drops the committed groups that have completed.
    pub fn prune_groups(&mut self) {
        while self.g_len > 0 && self.groups[self.g_head as usize] <= self.wgmma_done {
            self.g_head = ((self.g_head as usize + 1) % GROUP_RING) as u8;
            self.g_len -= 1;
        }
    }
}

/// A resident CTA.
#[derive(Clone, Copy, Debug, serde::Serialize, serde::Deserialize)]
pub(crate) struct Cta {
    pub live: bool,
    pub sm: u16,
    /// Linear CTA index.
    pub cta: u32,
    pub coords: [u32; 3],
    /// WarpGroups that have not exited.
    pub left: u8,
    /// Transfers and WGMMAs in flight.
    pub inflight: u32,
    /// Rank in its cluster (0 without clusters).
    pub rank: u8,
    /// The CTA slot of each rank of its cluster (itself at `rank`).
    pub peers: [u32; MAX_CLUSTER],
}

impl Cta {
    pub const EMPTY: Cta = Cta {
        live: false,
        sm: 0,
        cta: 0,
        coords: [0; 3],
        left: 0,
        inflight: 0,
        rank: 0,
        peers: [0; MAX_CLUSTER],
    };

    /// Its WarpGroups have exited and nothing of it is in flight.
    pub fn finished(&self) -> bool {
        self.live && self.left == 0 && self.inflight == 0
    }
}

/// An mbarrier: arrivals and transaction bytes outstanding in the current phase.
#[derive(Clone, Copy, Debug, serde::Serialize, serde::Deserialize)]
pub(crate) struct Mbar {
    pub count: u16,
    pub pending: u16,
    pub tx: i64,
    /// Completed phases.
    pub phase: u32,
}

impl Mbar {
    pub const EMPTY: Mbar = Mbar::new(1);

    pub const fn new(count: u16) -> Mbar {
        Mbar {
            count,
            pending: count,
            tx: 0,
            phase: 0,
        }
    }
}

/// A ring stage: rounds acquired by the producer and releases by consumers.
#[derive(Clone, Copy, Debug, serde::Serialize, serde::Deserialize)]
pub(crate) struct Stage {
    pub acquired: u32,
    pub released: u32,
}

impl Stage {
    pub const EMPTY: Stage = Stage {
        acquired: 0,
        released: 0,
    };
}

/// A named barrier: threads arrived in the current round.
#[derive(Clone, Copy, Debug, serde::Serialize, serde::Deserialize)]
pub(crate) struct Named {
    pub arrived: u16,
}

impl Named {
    pub const EMPTY: Named = Named { arrived: 0 };
}

/// Per-SM state: resources, scheduler, tensor pipe and TMA engine.
#[derive(Clone, Copy, Debug, serde::Serialize, serde::Deserialize)]
pub(crate) struct Sm {
    /// Bit per thread slot that can issue.
    pub ready: u32,
    /// Slot issued last.
    pub last: u8,
    pub smem: u32,
    pub regs: u32,
    pub warps: u16,
    pub ctas: u16,
    pub wgmma_inflight: u16,
    /// First cycle the tensor pipe is free.
    pub pipe_free: u64,
    pub tma_inflight: u16,
    pub tma_busy_since: u64,
    /// Active `compute` phases per unit class.
    pub unit_n: [u8; 4],
    /// Cycle up to which the active phases have been charged.
    pub unit_last: u64,
    /// First cycle the load/store unit takes another `st.global`'s or
    /// `ld.global`'s requests.
    pub lsu_free: u64,
}

impl Sm {
    pub const EMPTY: Sm = Sm {
        ready: 0,
        last: u8::MAX,
        smem: 0,
        regs: 0,
        warps: 0,
        ctas: 0,
        wgmma_inflight: 0,
        pipe_free: 0,
        tma_inflight: 0,
        tma_busy_since: 0,
        unit_n: [0; 4],
        unit_last: 0,
        lsu_free: 0,
    };
}

/// An event in the shared queue. The class orders events of one cycle:
/// transfer completions (0), then WGMMA completions (1), then wake-ups (2),
/// then TMA engine ticks (3).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub(crate) enum Ev {
    /// A transfer landed; `bar` is `u16::MAX` for stores.
    TmaDone {
        thread: u32,
        bar: u16,
        bytes: u64,
        /// Operation id (see `Event::TmaIssue`).
        op: u32,
    },
    /// Test-only fault (`Fault::EarlyTma`): signal the completion of the
    /// hierarchy operation in global slot `slot` before its lines are back.
    TmaEarly {
        slot: u32,
        op: u32,
    },
    WgmmaDone {
        thread: u32,
    },
    Wake {
        thread: u32,
    },
    /// The TMA engine of an SM emits its next line requests.
    TmaTick {
        sm: u16,
    },
    /// A released spin lock's write reaches the L2: the lock is free.
    LockFree {
        lock: u16,
    },
    /// The adds on their way to a counter reach the L2.
    CounterLand {
        counter: u16,
    },
}

impl Ev {
    pub const fn class(&self) -> u8 {
        match self {
            Ev::TmaDone { .. } | Ev::TmaEarly { .. } => 0,
            Ev::WgmmaDone { .. } => 1,
            Ev::Wake { .. } => 2,
            Ev::TmaTick { .. } => 3,
            Ev::LockFree { .. } => 4,
            Ev::CounterLand { .. } => 5,
        }
    }
}
