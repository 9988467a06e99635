//! Save and restore: the whole mutable state of a [`Simulator`] as bytes.
//!
//! # Format
//!
//! A snapshot is a fixed 36-byte header followed by a postcard-encoded
//! body:
//!
//! | bytes  | field                                                      |
//! |--------|------------------------------------------------------------|
//! | 0..8   | magic `SIMFASNP`                                           |
//! | 8..12  | format version, little-endian `u32` ([`SNAPSHOT_VERSION`]) |
//! | 12..20 | fingerprint of the (config, kernel) pair, little-endian    |
//! | 20..28 | body length in bytes, little-endian `u64`                  |
//! | 28..36 | checksum of the body, little-endian `u64`                  |
//!
//! The body holds every scalar of the simulator and the contents of every
//! table carved from its arena, element by element, in a fixed order. The
//! fingerprint is a digest over the postcard encodings of the configuration
//! and the kernel, so a snapshot only restores into a simulator of the same
//! pair; the checksum rejects flipped bytes before anything is decoded.
//!
//! Restoring builds a fresh simulator exactly as [`Simulator::with_source`]
//! does and then overwrites its state, so the tables have the lengths the
//! snapshot recorded (a mismatch is a [`SnapshotError::Corrupt`]). Observers
//! are not part of the state; the digest is. A stream source is not part of
//! the state either: the caller hands the restored simulator a source that
//! resumes where each WarpGroup's stream position says.
//!
//! Nothing allocates: [`Simulator::snapshot_size`] bounds the size before a
//! run, and [`Simulator::save`] writes into a caller buffer.

use postcard::ser_flavors::Flavor;

use super::state::{Ev, TState, GROUP_RING};
use super::{Mem, Simulator};
use crate::codec::{Reader, Writer};
pub use crate::codec::{SnapshotError, SNAPSHOT_MAGIC, SNAPSHOT_VERSION};
use crate::config::GpuConfig;
use crate::digest::Digest;
use crate::isa::MAX_LOOP_DEPTH;
use crate::kernel::Kernel;
use crate::source::{NoStream, StreamSource};

/// Bytes of the fixed header before the body.
const HEADER: usize = 36;

/// A postcard flavor that folds the bytes into a [`Digest`].
struct Fold(Digest);

impl Flavor for Fold {
    type Output = u64;

    fn try_push(&mut self, data: u8) -> postcard::Result<()> {
        self.0.fold(data as u64);
        Ok(())
    }

    fn finalize(self) -> postcard::Result<u64> {
        Ok(self.0.value())
    }
}

/// Digest of the postcard encodings of the configuration and the kernel.
pub fn fingerprint(cfg: &GpuConfig, kernel: &Kernel) -> u64 {
    let c = postcard::serialize_with_flavor(cfg, Fold(Digest::new())).unwrap_or(0);
    let k = postcard::serialize_with_flavor(kernel, Fold(Digest::new())).unwrap_or(0);
    let mut d = Digest::new();
    d.fold_all(&[c, k]);
    d.value()
}

fn checksum(body: &[u8]) -> u64 {
    let mut d = Digest::new();
    d.fold(body.len() as u64);
    let mut chunks = body.chunks_exact(8);
    for c in &mut chunks {
        let mut w = [0u8; 8];
        w.copy_from_slice(c);
        d.fold(u64::from_le_bytes(w));
    }
    let mut w = [0u8; 8];
    let rest = chunks.remainder();
    w[..rest.len()].copy_from_slice(rest);
    d.fold(u64::from_le_bytes(w));
    d.value()
}

fn le_u64(b: &[u8]) -> u64 {
    let mut w = [0u8; 8];
    w.copy_from_slice(&b[..8]);
    u64::from_le_bytes(w)
}

/// Checks the header against the pair and the body against its checksum;
/// returns the body.
fn open<'b>(cfg: &GpuConfig, kernel: &Kernel, bytes: &'b [u8]) -> Result<&'b [u8], SnapshotError> {
    let magic = bytes.get(..8).ok_or(SnapshotError::Truncated)?;
    if magic != SNAPSHOT_MAGIC {
        return Err(SnapshotError::BadMagic);
    }
    let head = bytes.get(..HEADER).ok_or(SnapshotError::Truncated)?;
    let mut v = [0u8; 4];
    v.copy_from_slice(&head[8..12]);
    let found = u32::from_le_bytes(v);
    if found != SNAPSHOT_VERSION {
        return Err(SnapshotError::Version { found });
    }
    if le_u64(&head[12..20]) != fingerprint(cfg, kernel) {
        return Err(SnapshotError::Mismatch);
    }
    let len = le_u64(&head[20..28]);
    let body = &bytes[HEADER..];
    if (body.len() as u64) < len {
        return Err(SnapshotError::Truncated);
    }
    if body.len() as u64 > len {
        return Err(SnapshotError::Corrupt {
            what: "trailing bytes",
        });
    }
    if checksum(body) != le_u64(&head[28..36]) {
        return Err(SnapshotError::Checksum);
    }
    Ok(body)
}

impl<'a> Simulator<'a, NoStream> {
    /// Builds a simulator in `arena` exactly as [`Simulator::new`] does and
    /// overwrites its state from `bytes`, a snapshot [`Simulator::save`]
    /// wrote for the same configuration and kernel. Running the result to
    /// the end gives the summary (cycles, digest, counters) of the run the
    /// snapshot was taken from.
    ///
    /// Wrong magic, version, configuration or kernel, truncated or
    /// corrupted bytes are typed errors, never panics.
    pub fn restore(
        cfg: &GpuConfig,
        kernel: &'a Kernel,
        arena: &'a mut [u8],
        bytes: &[u8],
    ) -> Result<Self, SnapshotError> {
        Simulator::restore_with_source(cfg, kernel, arena, NoStream, bytes)
    }
}

impl<'a, S: StreamSource> Simulator<'a, S> {
    /// [`Simulator::restore`] for a kernel with stream roles: `source` must
    /// resume every WarpGroup's stream at the position the snapshot holds.
    pub fn restore_with_source(
        cfg: &GpuConfig,
        kernel: &'a Kernel,
        arena: &'a mut [u8],
        source: S,
        bytes: &[u8],
    ) -> Result<Self, SnapshotError> {
        let body = open(cfg, kernel, bytes)?;
        let mut sim = Simulator::with_source(cfg, kernel, arena, source)?;
        let mut r = Reader::new(body);
        sim.load_body(&mut r)?;
        if !r.is_empty() {
            return Err(SnapshotError::Corrupt {
                what: "trailing bytes",
            });
        }
        sim.check_loaded()
            .map_err(|what| SnapshotError::Corrupt { what })?;
        Ok(sim)
    }

    /// An upper bound of the bytes [`Simulator::save`] writes, whatever
    /// the cycle: it depends only on the table sizes, so a caller can
    /// allocate the buffer before the run.
    pub fn snapshot_size(&self) -> usize {
        let mut w = Writer::counting();
        // Counting never fails.
        let _ = self.save_body(&mut w);
        HEADER + w.len()
    }

    /// Writes a snapshot of the whole simulation state into `out` and
    /// returns its length. May be called between any two steps (including
    /// before the first and after the last).
    pub fn save(&self, out: &mut [u8]) -> Result<usize, SnapshotError> {
        let available = out.len();
        if available < HEADER {
            return Err(SnapshotError::BufferTooSmall { available });
        }
        let (head, body) = out.split_at_mut(HEADER);
        let mut w = Writer::new(body);
        self.save_body(&mut w)?;
        let n = w.len();
        let sum = checksum(&body[..n]);
        head[..8].copy_from_slice(&SNAPSHOT_MAGIC);
        head[8..12].copy_from_slice(&SNAPSHOT_VERSION.to_le_bytes());
        head[12..20].copy_from_slice(&fingerprint(&self.cfg, self.kernel).to_le_bytes());
        head[20..28].copy_from_slice(&(n as u64).to_le_bytes());
        head[28..36].copy_from_slice(&sum.to_le_bytes());
        Ok(HEADER + n)
    }

    fn save_body(&self, w: &mut Writer<'_>) -> Result<(), SnapshotError> {
        w.val(&self.now)?;
        w.val(&self.end)?;
        w.val(&self.next_cta)?;
        w.val(&self.total_ctas)?;
        w.val(&self.retired)?;
        w.val(&self.age)?;
        w.val(&self.digest)?;
        w.val(&self.stats)?;
        w.val(&self.status)?;
        w.val(&self.locks)?;
        w.val(&self.counters)?;
        w.slice(self.threads)?;
        w.slice(self.ctas)?;
        w.slice(self.mbars)?;
        w.slice(self.stages)?;
        w.slice(self.named)?;
        w.slice(self.sms)?;
        w.slice(self.active)?;
        w.slice(self.deadlines.keys)?;
        self.queue.save_state(w)?;
        match &self.mem {
            Mem::Fixed(p) => {
                w.val(&0u8)?;
                p.save_state(w)?;
            }
            Mem::Line(m) => {
                w.val(&1u8)?;
                m.save_state(w)?;
            }
            Mem::Txn(m) => {
                w.val(&2u8)?;
                m.save_state(w)?;
            }
            Mem::External(p) => {
                w.val(&3u8)?;
                p.save_state(w)?;
            }
        }
        if let Some(t) = &self.tma {
            w.slice(t.ops)?;
            w.slice(t.order)?;
            w.slice(t.engines)?;
            w.slice(t.dslots)?;
            w.slice(t.dused)?;
            w.slice(t.dlen)?;
            w.slice(t.returned)?;
        }
        if let Some(l1) = &self.l1 {
            w.slice(l1.lines)?;
            w.slice(l1.fills)?;
            w.slice(l1.clock)?;
        }
        Ok(())
    }

    /// Checks what the decoder cannot: indices in range and counts that
    /// agree, so that a damaged snapshot with a valid checksum is refused
    /// instead of panicking later. Names the first thing found wrong.
    fn check_loaded(&self) -> Result<(), &'static str> {
        self.queue.check()?;
        if let Some(l1) = &self.l1 {
            let maps = self.kernel.maps.len();
            if l1.fills.iter().any(|f| f.op != 0 && f.map as usize >= maps) {
                return Err("L1 fills");
            }
        }
        let k = self.kernel;
        let wgs = self.plan.wgs;
        for (ti, t) in self.threads.iter().enumerate() {
            if t.state == TState::Free {
                continue;
            }
            k.roles.get(t.role as usize).ok_or("thread role")?;
            let cta_ok = (t.cta as usize) < self.ctas.len()
                && t.cta as usize == ti / wgs
                && (t.sm as usize) < self.sms.len()
                && self.ctas[t.cta as usize].live
                && self.ctas[t.cta as usize].sm == t.sm;
            if !cta_ok {
                return Err("thread CTA");
            }
            if t.slot >= 32 || t.wg as usize >= wgs {
                return Err("thread slot");
            }
            let depth = t.depth as usize;
            let loops_ok = depth <= MAX_LOOP_DEPTH
                && t.loops[..depth.min(MAX_LOOP_DEPTH)]
                    .iter()
                    .all(|f| (f.begin as usize) < k.code.len());
            if !loops_ok {
                return Err("thread loop stack");
            }
            let groups_ok = (t.g_head as usize) < GROUP_RING
                && (t.g_len as usize) <= GROUP_RING
                && t.wgmma_done <= t.wgmma_issued;
            if !groups_ok {
                return Err("thread WGMMA groups");
            }
        }
        for (ci, c) in self.ctas.iter().enumerate() {
            if !c.live {
                continue;
            }
            let threads = &self.threads[ci * wgs..(ci + 1) * wgs];
            let running = threads.iter().filter(|t| t.state != TState::Done).count();
            if c.sm as usize >= self.sms.len()
                || ci / self.plan.cta_slots != c.sm as usize
                || c.left as usize != running
            {
                return Err("CTA state");
            }
            // A cluster's CTAs name each other, each at its own rank.
            let size = k.cluster.size() as usize;
            let peers_ok = (c.rank as usize) < size
                && c.peers[c.rank as usize] as usize == ci
                && c.peers[..size].iter().all(|&p| {
                    let p = self.ctas.get(p as usize);
                    p.is_some_and(|p| p.live && p.peers == c.peers)
                });
            if !peers_ok {
                return Err("CTA cluster");
            }
        }
        // A landing's mbarrier and multicast mask (see `super::cluster`).
        for ev in self.queue.queued() {
            if let Ev::TmaDone { bar, .. } = *ev {
                let (b, mask) = super::cluster::split(bar);
                if bar != u16::MAX
                    && (b as usize >= self.plan.nbar || mask & !crate::cluster::ALL_DIMS != 0)
                {
                    return Err("queued event");
                }
            }
        }
        for (sm, s) in self.sms.iter().enumerate() {
            let live = self
                .ctas
                .iter()
                .filter(|c| c.live && c.sm as usize == sm)
                .count() as u64;
            let ok = s.ctas as u64 == live
                && s.smem as u64 == live * k.smem_bytes as u64
                && s.regs as u64 == live * k.regs_per_cta() as u64
                && s.warps as u64 == live * 4 * wgs as u64;
            if !ok {
                return Err("SM occupancy");
            }
            // Compute phases: the SM's counts are its threads' phases.
            let per = self.plan.cta_slots * wgs;
            let mut n = [0u32; 4];
            for t in &self.threads[sm * per..(sm + 1) * per] {
                if t.state == TState::Computing {
                    let c = t.unit_phase as usize;
                    if c >= 4 || t.work[c] == 0 {
                        return Err("compute phase");
                    }
                    n[c] += 1;
                } else if t.state != TState::Free && t.unit_phase != u8::MAX {
                    return Err("compute phase");
                }
            }
            let counted = n.iter().zip(s.unit_n.iter()).all(|(a, b)| *a == *b as u32);
            let armed = n == [0; 4] || self.deadlines.keys[sm] != super::deadlines::NONE;
            if !counted || !armed || s.unit_last > self.now {
                return Err("compute units");
            }
        }
        // Every release on its way is one queued event, and no more.
        let mut crossing = super::lock::Locks::default();
        let mut landing = [false; crate::kernel::MAX_COUNTERS];
        for ev in self.queue.queued() {
            let thread = match *ev {
                Ev::Wake { thread } | Ev::WgmmaDone { thread } => thread,
                Ev::TmaDone { thread, .. } => thread,
                Ev::TmaEarly { slot, .. } => {
                    let n = self.tma.as_ref().map_or(0, |t| t.ops.len());
                    if slot as usize >= n {
                        return Err("queued event");
                    }
                    continue;
                }
                Ev::TmaTick { sm } => {
                    if sm as usize >= self.sms.len() {
                        return Err("queued event");
                    }
                    continue;
                }
                Ev::LockFree { lock } => {
                    if !crossing.mark_freeing(lock) {
                        return Err("queued event");
                    }
                    continue;
                }
                Ev::CounterLand { counter } => {
                    match landing.get_mut(counter as usize) {
                        Some(l) if !*l => *l = true,
                        _ => return Err("queued event"),
                    }
                    continue;
                }
            };
            let t = self.threads.get(thread as usize).ok_or("queued event")?;
            if t.state == TState::Free {
                return Err("queued event");
            }
        }
        if !self.locks.crossing_as(&crossing) {
            return Err("locks");
        }
        if !self.counters.crossing_as(&landing) {
            return Err("counters");
        }
        Ok(())
    }

    fn load_body(&mut self, r: &mut Reader<'_>) -> Result<(), SnapshotError> {
        let corrupt = |what| Err(SnapshotError::Corrupt { what });
        self.now = r.val()?;
        self.end = r.val()?;
        let next_cta: u32 = r.val()?;
        let total: u32 = r.val()?;
        let retired: u32 = r.val()?;
        if total != self.total_ctas || next_cta > total || retired > next_cta {
            return corrupt("CTA counters");
        }
        self.next_cta = next_cta;
        self.retired = retired;
        self.age = r.val()?;
        self.digest = r.val()?;
        self.stats = r.val()?;
        self.status = r.val()?;
        self.locks = r.val()?;
        self.counters = r.val()?;
        r.slice(self.threads)?;
        r.slice(self.ctas)?;
        r.slice(self.mbars)?;
        r.slice(self.stages)?;
        r.slice(self.named)?;
        r.slice(self.sms)?;
        r.slice(self.active)?;
        r.slice(self.deadlines.keys)?;
        self.deadlines.rebuild();
        self.queue.load_state(r)?;
        let kind: u8 = r.val()?;
        match (&mut self.mem, kind) {
            (Mem::Fixed(p), 0) => p.load_state(r)?,
            (Mem::Line(m), 1) => m.load_state(r)?,
            (Mem::Txn(m), 2) => m.load_state(r)?,
            (Mem::External(p), 3) => p.load_state(r)?,
            _ => return corrupt("memory model"),
        }
        if let Some(t) = &mut self.tma {
            r.slice(t.ops)?;
            r.slice(t.order)?;
            r.slice(t.engines)?;
            r.slice(t.dslots)?;
            r.slice(t.dused)?;
            r.slice(t.dlen)?;
            r.slice(t.returned)?;
        }
        if let Some(l1) = &mut self.l1 {
            r.slice(l1.lines)?;
            r.slice(l1.fills)?;
            r.slice(l1.clock)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::bound;
    use crate::sim::state::Thread;
    use serde::de::DeserializeOwned;
    use serde::Serialize;

    fn roundtrip<T: Serialize + DeserializeOwned>(v: &T) -> T {
        let mut buf = [0u8; 4096];
        let mut w = Writer::new(&mut buf);
        w.val(v).unwrap();
        let n = w.len();
        let mut r = Reader::new(&buf[..n]);
        let back = r.val().unwrap();
        assert!(r.is_empty());
        back
    }

    #[test]
    fn big_arrays_and_threads_round_trip_within_the_bound() {
        let mut t = Thread::EMPTY;
        for (i, g) in t.groups.iter_mut().enumerate() {
            *g = u32::MAX - i as u32;
        }
        t.pending = Some(crate::isa::Op::Wgmma {
            n: 256,
            mode: crate::isa::WgmmaMode::Rs,
        });
        t.age = u64::MAX;
        let back = roundtrip(&t);
        assert_eq!(back.groups, t.groups);
        assert_eq!(back.pending, t.pending);
        assert_eq!(back.age, u64::MAX);
        let n = postcard::to_slice(&t, &mut [0u8; 4096]).unwrap().len();
        assert!(n <= bound::<Thread>(), "{n}");
        assert_eq!(GROUP_RING, t.groups.len());
    }

    #[test]
    fn completions_without_work_in_flight_are_a_typed_error() {
        // What a damaged snapshot can hold: WGMMA and transfer completions
        // queued while the counters of work in flight say zero.
        for i in 0..crate::samples::SAMPLES {
            let mut k = ::std::boxed::Box::new(Kernel::default());
            let cfg = crate::samples::build(i, &mut k).unwrap();
            let size = Simulator::<crate::NoStream>::arena_size(&cfg, &k).unwrap();
            let mut arena = ::std::vec![0u8; size];
            let mut sim = Simulator::new(&cfg, &k, &mut arena).unwrap();
            // Step to the first cycle with work in flight.
            while !sim
                .sms
                .iter()
                .any(|s| s.wgmma_inflight > 0 || s.tma_inflight > 0)
            {
                sim.step(&mut ()).unwrap();
            }
            for s in sim.sms.iter_mut() {
                s.wgmma_inflight = 0;
                s.tma_inflight = 0;
            }
            for c in sim.ctas.iter_mut() {
                c.inflight = 0;
            }
            let err = sim.run(&mut ()).unwrap_err();
            assert!(
                matches!(err, crate::error::SimError::Inconsistent { .. }),
                "{}: {err}",
                crate::samples::name(i)
            );
        }
    }

    #[test]
    fn a_release_or_add_crossing_without_its_event_is_refused() {
        // A sample kernel saved with one lock marked held and crossing
        // but no event queued to free it: restored, it would never free.
        let mut k = ::std::boxed::Box::new(Kernel::default());
        let cfg = crate::samples::build(0, &mut k).unwrap();
        let size = Simulator::<crate::NoStream>::arena_size(&cfg, &k).unwrap();
        let mut arena = ::std::vec![0u8; size];
        let mut sim = Simulator::new(&cfg, &k, &mut arena).unwrap();
        sim.step(&mut ()).unwrap();
        let mut buf = ::std::vec![0u8; sim.snapshot_size()];
        let good = sim.save(&mut buf).unwrap();
        let mut a2 = ::std::vec![0u8; size];
        assert!(Simulator::restore(&cfg, &k, &mut a2, &buf[..good]).is_ok());
        assert!(sim.locks.mark_freeing(5));
        let n = sim.save(&mut buf).unwrap();
        let mut a3 = ::std::vec![0u8; size];
        let err = Simulator::restore(&cfg, &k, &mut a3, &buf[..n]).err();
        assert_eq!(err, Some(SnapshotError::Corrupt { what: "locks" }));
        // Likewise an add to a counter on its way with no landing queued.
        sim.locks = Default::default();
        sim.counters.crossing[9] = 1;
        let n = sim.save(&mut buf).unwrap();
        let err = Simulator::restore(&cfg, &k, &mut a3, &buf[..n]).err();
        assert_eq!(err, Some(SnapshotError::Corrupt { what: "counters" }));
    }

    #[test]
    fn header_checks_come_before_decoding() {
        let cfg = GpuConfig::h800();
        let k = Kernel::default();
        let body = [7u8; 10];
        let mut snap = [0u8; HEADER + 10];
        snap[..8].copy_from_slice(&SNAPSHOT_MAGIC);
        snap[8..12].copy_from_slice(&SNAPSHOT_VERSION.to_le_bytes());
        snap[12..20].copy_from_slice(&fingerprint(&cfg, &k).to_le_bytes());
        snap[20..28].copy_from_slice(&10u64.to_le_bytes());
        snap[28..36].copy_from_slice(&checksum(&body).to_le_bytes());
        snap[HEADER..].copy_from_slice(&body);
        assert_eq!(open(&cfg, &k, &snap), Ok(&body[..]));
        for cut in 0..snap.len() {
            assert_eq!(open(&cfg, &k, &snap[..cut]), Err(SnapshotError::Truncated));
        }
        let mut bad = snap;
        bad[HEADER + 3] ^= 1;
        assert_eq!(open(&cfg, &k, &bad), Err(SnapshotError::Checksum));
        let mut bad = snap;
        bad[9] = 1;
        assert!(matches!(
            open(&cfg, &k, &bad),
            Err(SnapshotError::Version { .. })
        ));
        let mut bad = snap;
        bad[1] = 0;
        assert_eq!(open(&cfg, &k, &bad), Err(SnapshotError::BadMagic));
        let mut other = cfg.clone();
        other.seed ^= 1;
        assert_eq!(open(&other, &k, &snap), Err(SnapshotError::Mismatch));
    }
}
