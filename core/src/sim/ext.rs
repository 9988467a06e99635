//! The simulator's side of the external memory port ([`crate::external`]):
//! issuing requests into the queue, and the host's pop and complete calls.

use super::state::Ev;
use super::{Mem, Simulator};
use crate::error::{Capacity, SimError};
use crate::external::{ExtError, ExtRequest};
use crate::source::StreamSource;
use crate::time::Cycle;
use crate::transfer::{Direction, Shape};

/// The global address of a transfer: a bulk copy's, or a box's origin
/// (`base + x0 * elem_bytes + Σ_{d>=1} x_d * strides[d]`, the tensor map's
/// layout; `strides[0]` is not part of it, and negative coordinates count
/// as 0).
fn address(shape: &Shape<'_>) -> u64 {
    match *shape {
        Shape::Linear { addr } => addr,
        Shape::Tensor { map, coords } => {
            let rank = (map.rank as usize).min(coords.len());
            (0..rank).fold(map.base, |a, d| {
                let c = coords[d].max(0) as u64;
                let step = if d == 0 {
                    map.elem_bytes as u64
                } else {
                    map.strides[d]
                };
                a.wrapping_add(c.wrapping_mul(step))
            })
        }
    }
}

impl<'a, S: StreamSource> Simulator<'a, S> {
    /// Queues TMA operation `id` of thread `ti` for the host.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn ext_issue(
        &mut self,
        ti: usize,
        bar: u16,
        dir: Direction,
        shape: Shape<'_>,
        bytes: u64,
        leave: u64,
        id: u32,
    ) -> Result<(), SimError> {
        let sm = self.threads[ti].sm;
        let req = ExtRequest {
            id,
            sm,
            store: dir == Direction::Store,
            cycle: leave,
            addr: address(&shape),
            bytes,
        };
        let now = self.now;
        let Mem::External(port) = &mut self.mem else {
            return Ok(());
        };
        // The queue holds every operation the TMA slots admit, so this
        // only fails on a state a damaged snapshot made.
        port.push(req, ti as u32, bar)
            .map_err(|_| SimError::CapacityExceeded {
                capacity: Capacity::MemoryPort,
                cycle: now,
            })
    }

    /// External memory requests issued and not yet completed (0 with the
    /// other memory models).
    pub fn ext_outstanding(&self) -> usize {
        match &self.mem {
            Mem::External(p) => p.outstanding(),
            _ => 0,
        }
    }

    /// External memory requests issued and not yet popped by the host.
    pub fn ext_queued(&self) -> usize {
        match &self.mem {
            Mem::External(p) => p.queued(),
            _ => 0,
        }
    }

    /// Hands the host the oldest request it has not seen (`None` when
    /// there is none, or the memory model is not external).
    pub fn ext_pop(&mut self) -> Option<ExtRequest> {
        match &mut self.mem {
            Mem::External(p) => p.pop(),
            _ => None,
        }
    }

    /// Completes popped request `id`: its last byte lands at `cycle`,
    /// which must be at least [`Simulator::now`] and the request's own
    /// cycle. The completion takes effect when the run reaches `cycle`.
    /// A refused completion changes nothing.
    pub fn ext_complete(&mut self, id: u32, cycle: Cycle) -> Result<(), ExtError> {
        let now = self.now;
        let Mem::External(port) = &mut self.mem else {
            return Err(ExtError::NotExternal);
        };
        let i = port.find(id).ok_or(ExtError::UnknownRequest { id })?;
        let earliest = now.max(port.slot(i).req.cycle);
        if cycle.0 < earliest {
            return Err(ExtError::InPast {
                cycle: cycle.0,
                earliest,
            });
        }
        // The event queue has room for every TMA operation in flight (this
        // one was counted when it was issued); only a damaged snapshot can
        // fill it, and then the completion is refused before anything
        // changes.
        if self.queue.len() >= self.queue.capacity() {
            return Err(ExtError::QueueFull { id });
        }
        let s = port.take(i);
        let ev = Ev::TmaDone {
            thread: s.thread,
            bar: s.bar,
            bytes: s.req.bytes,
            op: id,
        };
        let _ = self.queue.push(cycle.0, ev.class(), ev);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tensor_map::TensorMap;

    #[test]
    fn a_box_origin_steps_by_the_element_size_along_dimension_0() {
        let map = TensorMap {
            name: Default::default(),
            base: 0x1000,
            elem_bytes: 2,
            rank: 2,
            dims: [64, 64, 0, 0, 0],
            strides: [0, 256, 0, 0, 0],
            boxdim: [16, 16, 0, 0, 0],
        };
        let at = |coords| address(&Shape::Tensor { map: &map, coords });
        assert_eq!(at([3, 2, 0, 0, 0]), 0x1000 + 3 * 2 + 2 * 256);
        assert_eq!(at([-5, 1, 0, 0, 0]), 0x1000 + 256);
    }
}
