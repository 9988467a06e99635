//! What a stalled WarpGroup waits on: the reasons the issue unit, the
//! observer's events and the deadlock report name.

use core::fmt;
use serde::{Deserialize, Serialize};

/// What a stalled WarpGroup waits on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum WaitReason {
    /// Phase with `parity` of CTA mbarrier `bar`.
    Mbarrier {
        /// mbarrier index.
        bar: u16,
        /// Awaited parity.
        parity: u8,
    },
    /// A stage of the ring to be released by its consumers.
    Stage {
        /// Stage index.
        stage: u16,
    },
    /// A named barrier to fill up.
    NamedBarrier {
        /// Barrier id.
        id: u8,
    },
    /// Pending WGMMA groups to drop to `n`.
    WgmmaGroups {
        /// Allowed pending groups.
        n: u8,
    },
    /// A free slot in the SM's tensor-core instruction buffer.
    TensorBuffer,
    /// A free TMA slot on the SM.
    TmaSlot,
    /// In-flight stores to drop to `n`.
    Stores {
        /// Allowed in-flight stores.
        n: u8,
    },
    /// A spin lock of the grid held by another WarpGroup.
    Lock {
        /// Lock index.
        lock: u16,
    },
    /// A counter of the grid to reach the count a `counter.wait` awaits.
    Counter {
        /// Counter index.
        counter: u16,
    },
}

impl fmt::Display for WaitReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            WaitReason::Mbarrier { bar, parity } => {
                write!(f, "mbarrier {bar} phase parity {parity}")
            }
            WaitReason::Stage { stage } => write!(f, "stage {stage} to be released"),
            WaitReason::NamedBarrier { id } => write!(f, "named barrier {id}"),
            WaitReason::WgmmaGroups { n } => write!(f, "WGMMA groups (wait_group {n})"),
            WaitReason::TensorBuffer => f.write_str("a tensor-core instruction buffer slot"),
            WaitReason::TmaSlot => f.write_str("a TMA slot"),
            WaitReason::Stores { n } => write!(f, "stores to drain (store.wait {n})"),
            WaitReason::Lock { lock } => write!(f, "lock {lock} to be released"),
            WaitReason::Counter { counter } => write!(f, "counter {counter} to count up"),
        }
    }
}
