//! The memory system's mutable state in a snapshot.

use super::*;

impl<T: Copy + serde::Serialize + serde::de::DeserializeOwned> Ring<'_, T> {
    /// Writes the mutable state into a snapshot.
    pub(crate) fn save_state(
        &self,
        w: &mut crate::codec::Writer<'_>,
    ) -> Result<(), crate::codec::SnapshotError> {
        w.val(&(self.head as u64))?;
        w.val(&(self.len as u64))?;
        w.slice(self.buf)
    }

    /// Overwrites the mutable state from a snapshot.
    pub(crate) fn load_state(
        &mut self,
        r: &mut crate::codec::Reader<'_>,
    ) -> Result<(), crate::codec::SnapshotError> {
        let n = self.buf.len();
        self.head = r.at_most(n.saturating_sub(1), "ring head")?;
        self.len = r.at_most(n, "ring length")?;
        r.slice(self.buf)
    }
}

impl Waiting<'_> {
    /// Writes the mutable state into a snapshot.
    pub(crate) fn save_state(
        &self,
        w: &mut crate::codec::Writer<'_>,
    ) -> Result<(), crate::codec::SnapshotError> {
        w.val(&self.free)?;
        w.slice(self.pool)?;
        w.slice(self.head)?;
        w.slice(self.tail)?;
        w.slice(self.busy)
    }

    /// Overwrites the mutable state from a snapshot.
    pub(crate) fn load_state(
        &mut self,
        r: &mut crate::codec::Reader<'_>,
    ) -> Result<(), crate::codec::SnapshotError> {
        self.free = r.val()?;
        if self.free != NIL && self.free as usize >= self.pool.len() {
            return Err(crate::codec::SnapshotError::Corrupt {
                what: "retry free list",
            });
        }
        r.slice(self.pool)?;
        r.slice(self.head)?;
        r.slice(self.tail)?;
        r.slice(self.busy)
    }
}

impl MemorySystem<'_> {
    /// Writes the mutable state into a snapshot.
    pub(crate) fn save_state(
        &self,
        w: &mut crate::codec::Writer<'_>,
    ) -> Result<(), crate::codec::SnapshotError> {
        w.val(&self.rng)?;
        w.val(&(self.nfree as u64))?;
        w.val(&self.stats)?;
        w.slice(self.reqs)?;
        w.slice(self.free)?;
        self.coalescer.save_state(w)?;
        self.mshr.save_state(w)?;
        w.slice(self.slices)?;
        w.val(&(self.tags.len() as u64))?;
        for t in &self.tags {
            t.save_state(w)?;
        }
        self.queue.save_state(w)?;
        self.dram.save_state(w)?;
        self.done.save_state(w)?;
        self.retry.save_state(w)?;
        self.log.save_state(w)
    }

    /// Overwrites the mutable state from a snapshot.
    pub(crate) fn load_state(
        &mut self,
        r: &mut crate::codec::Reader<'_>,
    ) -> Result<(), crate::codec::SnapshotError> {
        self.rng = r.val()?;
        self.nfree = r.at_most(self.free.len(), "free request count")?;
        self.stats = r.val()?;
        r.slice(self.reqs)?;
        r.slice(self.free)?;
        self.coalescer.load_state(r)?;
        self.mshr.load_state(r)?;
        r.slice(self.slices)?;
        let n = self.tags.len();
        if r.at_most(n, "slice count")? != n {
            return Err(crate::codec::SnapshotError::Corrupt {
                what: "slice count",
            });
        }
        for t in &mut self.tags {
            t.load_state(r)?;
        }
        self.queue.load_state(r)?;
        let corrupt = |what| crate::codec::SnapshotError::Corrupt { what };
        self.queue.check().map_err(corrupt)?;
        let (nreq, nslice) = (self.reqs.len(), self.slices.len());
        let bad_event = self.queue.queued().any(|e| match *e {
            MemEv::Arrive { req, slice, .. } => req as usize >= nreq || slice as usize >= nslice,
            MemEv::Respond { req } | MemEv::Fill { req } => req as usize >= nreq,
        });
        let bad_link = |l: u32| l != NIL && l as usize >= nreq;
        let bad_req = self
            .reqs
            .iter()
            .any(|q| bad_link(q.co_next) || bad_link(q.ms_next) || bad_link(q.wait_next));
        let bad_wait = self
            .slices
            .iter()
            .any(|s| bad_link(s.wait_head) || bad_link(s.wait_tail));
        if bad_event || bad_req || bad_wait || self.free.iter().any(|&f| f as usize >= nreq) {
            return Err(corrupt("memory request"));
        }
        self.dram.load_state(r)?;
        self.done.load_state(r)?;
        self.retry.load_state(r)?;
        self.log.load_state(r)
    }
}
