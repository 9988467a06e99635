//! The memory port the TMA engine issues through.
//!
//! A [`MemoryPort`] is asked, in nondecreasing cycle order, to carry a
//! [`Transfer`] and answers with the cycle at which its last byte lands.
//! Because the simulator presents transfers in time order, a port can model
//! contention with reservation tables (a resource busy until some cycle)
//! without its own event loop. [`FixedPort`] is the fixed-latency,
//! fixed-bandwidth stand-in; the calibrated hierarchy implements the same
//! trait.

use crate::config::FixedPortConfig;
use crate::transfer::Transfer;

/// A memory system seen from the TMA engines.
pub trait MemoryPort {
    /// Carries `t`, whose requests leave the TMA engine at cycle `now`, and
    /// returns the cycle at which its last byte lands. Calls come in
    /// nondecreasing `now` order.
    fn transfer(&mut self, now: u64, t: &Transfer<'_>) -> u64;

    /// Cycles the port was busy moving bytes, summed over its channels.
    fn busy_cycles(&self) -> u64;
}

/// Fixed latency and fixed per-SM bandwidth: each SM's transfers are
/// serialised at `bytes_per_cycle`, and each lands `latency` cycles after
/// its last byte was serialised. A transfer of zero bytes lands `latency`
/// cycles after `now`.
#[derive(Debug)]
pub struct FixedPort<'a> {
    cfg: FixedPortConfig,
    free_at: &'a mut [u64],
    busy: u64,
}

impl<'a> FixedPort<'a> {
    /// Creates the port over per-SM storage (`free_at.len()` = SM count).
    pub fn new(cfg: FixedPortConfig, free_at: &'a mut [u64]) -> Self {
        FixedPort {
            cfg,
            free_at,
            busy: 0,
        }
    }

    /// The per-SM "channel free at" cycles, for save/restore.
    pub fn channels(&self) -> &[u64] {
        self.free_at
    }

    /// Writes the mutable state into a snapshot.
    pub(crate) fn save_state(
        &self,
        w: &mut crate::codec::Writer<'_>,
    ) -> Result<(), crate::codec::SnapshotError> {
        w.val(&self.busy)?;
        w.slice(self.free_at)
    }

    /// Overwrites the mutable state from a snapshot.
    pub(crate) fn load_state(
        &mut self,
        r: &mut crate::codec::Reader<'_>,
    ) -> Result<(), crate::codec::SnapshotError> {
        self.busy = r.val()?;
        r.slice(self.free_at)
    }
}

impl MemoryPort for FixedPort<'_> {
    fn transfer(&mut self, now: u64, t: &Transfer<'_>) -> u64 {
        let xfer = self.cfg.bytes_per_cycle.div_ceil(t.bytes);
        let Some(free) = self.free_at.get_mut(t.sm as usize) else {
            return now.saturating_add(self.cfg.latency as u64);
        };
        let begin = now.max(*free);
        let end = begin.saturating_add(xfer);
        *free = end;
        self.busy = self.busy.saturating_add(xfer);
        end.saturating_add(self.cfg.latency as u64)
    }

    fn busy_cycles(&self) -> u64 {
        self.busy
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::time::Ratio;
    use crate::transfer::{Direction, Shape};

    #[test]
    fn fixed_port_serialises_per_sm() {
        let mut store = [0u64; 2];
        let mut p = FixedPort::new(
            FixedPortConfig {
                latency: 100,
                bytes_per_cycle: Ratio::new(16, 1),
            },
            &mut store,
        );
        let t = |sm| Transfer {
            sm,
            dir: Direction::Load,
            shape: Shape::Linear { addr: 0 },
            bytes: 1600,
        };
        assert_eq!(p.transfer(10, &t(0)), 10 + 100 + 100);
        // Second transfer on the same SM queues behind the first.
        assert_eq!(p.transfer(10, &t(0)), 10 + 200 + 100);
        // Another SM is independent.
        assert_eq!(p.transfer(10, &t(1)), 210);
        assert_eq!(p.busy_cycles(), 300);
    }
}
