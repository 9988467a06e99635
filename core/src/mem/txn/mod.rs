//! The transaction-level memory model (`memory = "transaction"`, the
//! default): whole TMA operations in, completion cycles out, in closed
//! form.
//!
//! # What happens to an operation
//!
//! When the simulator issues a TMA operation it hands it to
//! [`TxnMemory::transfer`] and gets back the cycle its last byte lands;
//! it queues one completion event, and that is all the event traffic an
//! operation costs. Inside, the operation's lines are generated exactly as
//! the line-level engine generates them (tensor-map walk, clipping,
//! deduplication) and timed one by one against state that only moves
//! forward:
//!
//! 1. **The SM's TMA engine** emits `lines_per_cycle` lines per cycle from
//!    the later of the operation's setup end and the engine's last
//!    emission, and never has more than `max_lines` in flight: each SM
//!    keeps the return cycles of its outstanding lines, sorted, and a line
//!    waits for the earliest of them when all are taken (exactly the
//!    line-level engine's rule).
//! 2. **Chunks.** Consecutive lines are grouped into chunks of up to
//!    `transaction.chunk_lines` lines (rows of a box; see [`l2`]). A chunk
//!    is the unit of the coalescer and of L2 residency: one lookup per
//!    chunk, not per line. A chunk's lines share one partition (an
//!    operation's run is cut per partition), which decides near or far
//!    for all of them. A one-line chunk is resident in its line's slice;
//!    a heavier one in a slice of its partition picked by its key, so that
//!    strided tiles, whose chunks start on the same few slices, spread
//!    their capacity over the partition as their lines would.
//! 3. **Coalescer.** A read chunk that its SM's coalescer group
//!    (`l2.coalescer_sms` consecutive SMs) remembers as still in flight
//!    (all its lines outstanding) merges with it and lands with it,
//!    touching neither crossbar nor L2.
//! 4. **Crossbar and slices.** Every line crosses the crossbar
//!    (`xbar_latency`, plus `far_latency` to the far partition) and books
//!    its share of cycles of its own slice's input port
//!    ([`L2Config::port_cycles`]), picked by
//!    the slice hash: a [reservation calendar](crate::mem::calendar) per
//!    slice, so the hash still decides how the load spreads. A far read
//!    with the remote-copy proxy first books the mirror slice's port and
//!    probes for a shadow copy there.
//! 5. **L2.** A resident chunk whose data is ready is a hit (`hit_latency`);
//!    one whose fill is still in flight makes the read wait for the fill
//!    (an MSHR merge); a missing chunk is filled from HBM line by line,
//!    each miss holding one of its slice's `mshrs` MSHRs (taken in order:
//!    a miss waits for the oldest when it is still busy) until its fill is
//!    usable `fill_latency` after the data returns. Stores allocate their
//!    chunk dirty; evicted dirty chunks are written back. Far hits and
//!    fills make shadow copies under the proxy's threshold and
//!    probability, drawn from the seeded generator.
//! 6. **HBM** is a service model per pseudo-channel ([`hbm`]). With
//!    `transaction.arrival_controller`, the DRAM requests are also served
//!    in arrival order by the line-level controller, which decides when
//!    operations land ([`arrival`]).
//!
//! # Determinism and bounds
//!
//! Everything is integer arithmetic on arena tables sized from the
//! configuration before the run; no operation loops more than its lines
//! times a bounded calendar search. Results depend only on the order
//! operations are handed over, which the simulator fixes.
//!
//! # Where it differs from the line-level model
//!
//! Residency is per chunk (a chunk is fully resident or not; a set holds
//! fewer, heavier entries); near or far is per chunk; a chunk's lines share
//! one fill-ready cycle; the coalescer and MSHR merges work on chunks;
//! resources are booked in hand-over order rather than event order, and
//! HBM serves in hand-over order rather than FR-FCFS (unless
//! `transaction.arrival_controller` decides landings). `simfa validate
//! memory` measures the effect on whole kernels.

pub mod arrival;
mod batch;
mod chunk;
mod engine;
pub mod gen;
pub mod hbm;
pub mod l2;
mod slice;
#[cfg(test)]
mod tests;

use serde::{Deserialize, Serialize};

use crate::arena::{Arena, Layout};
use crate::error::{BuildError, Capacity};
use crate::mem::calendar::Calendars;
use crate::mem::config::{ArrivalController, L2Config, TmaLineConfig, TxnConfig};
use crate::mem::dram::DramConfig;
use crate::mem::hash::SliceSelector;
use crate::mem::lines::DedupSet;
use crate::mem::system::MemStats;
use crate::observer::Event;
use crate::rand::Rng;
use crate::transfer::Shape;

use arrival::{ArrivalDram, FillRef};
use gen::for_each_line;
use hbm::Hbm;
use l2::{ChunkTable, Pattern, HOME, SHADOW};

/// Cycles each slice port's calendar looks ahead.
const SLICE_HORIZON_LOG2: u32 = 14;

/// Crossing calendars: one per slice when the crossing can bind.
const fn crossing_tables(l2: &L2Config) -> usize {
    if l2.crossing_binds() {
        l2.slices as usize
    } else {
        0
    }
}

/// Where [`TxnMemory::transfer`] reports what the line-level model reports
/// through its events: every DRAM request (for the digest and the DRAM
/// trace) and, when [`TxnSink::wants_notes`] is true, the L2's detail
/// events ([`Event::DramDone`], [`Event::LineFill`], [`Event::LineServed`])
/// for consistency checkers.
pub trait TxnSink {
    /// The DRAM accepted a request for line address `addr` at `cycle`.
    fn dram(&mut self, cycle: u64, write: bool, addr: u64);

    /// Whether to build and deliver detail events.
    fn wants_notes(&self) -> bool {
        false
    }

    /// A detail event that happens at `cycle`.
    fn note(&mut self, _cycle: u64, _event: Event) {}
}

/// A sink that drops everything.
impl TxnSink for () {
    fn dram(&mut self, _: u64, _: bool, _: u64) {}
}

/// One TMA operation handed to the memory.
#[derive(Clone, Copy, Debug)]
pub struct TxnOp<'k> {
    /// Issuing SM.
    pub sm: u16,
    /// A store (shared to global) rather than a load.
    pub store: bool,
    /// What it moves.
    pub shape: Shape<'k>,
    /// Bytes of a bulk range (ignored for tensor boxes).
    pub bytes: u64,
    /// Cycle its setup ends: its lines may leave the engine from then.
    pub start: u64,
    /// The simulator's clock when it is handed over (at most `start`).
    pub now: u64,
    /// Its id, by which [`TxnMemory::landing`] is asked about it.
    pub id: u32,
}

/// What became of an operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TxnDone {
    /// Cycle its last line is back (for an operation without lines, the
    /// cycle the engine reached it). For a load whose landing the
    /// arrival-order controller decides, the cycle to ask
    /// [`TxnMemory::landing`] first instead.
    pub done: u64,
    /// Line requests it emitted.
    pub lines: u64,
}

/// Operation tags for at most `ops` operations in flight: a power of two,
/// so that operations in flight never share one.
fn op_tags(ops: usize) -> usize {
    ops.max(1).next_power_of_two()
}

/// Cycles of return times each SM's engine keeps count of: a line that
/// would return later than this after the engine's clock counts as
/// returning at the end of the window.
const FLIGHT_LOG2: u32 = 13;
const FLIGHT: u64 = 1 << FLIGHT_LOG2;

/// Per-SM engine state. The return cycles of the lines in flight are
/// counted per cycle in a window of [`FLIGHT`] cycles from `cursor` (a
/// count per cycle and a bitmap of the non-zero ones), so that "how many
/// are back by cycle `e`" and "when is the next one back" cost a few word
/// scans, whatever the order the returns were added in.
#[derive(Clone, Copy, Debug, Default, Serialize, Deserialize)]
struct Engine {
    /// Cycle of the last emission.
    free: u64,
    /// Lines emitted in cycle `free`.
    used: u16,
    /// Lines in flight: returning at or after `cursor`.
    out: u16,
    /// Every return before this cycle has been counted back.
    cursor: u64,
}

impl Engine {
    /// Moves the engine's emission slot to the first one at or after
    /// `t`: `t` itself, unless the current slot has emitted lines and the
    /// next slot (`interval` cycles on) comes later.
    #[inline]
    fn slot_at(&mut self, t: u64, interval: u16) {
        if t > self.free {
            self.free = if self.used > 0 {
                t.max(self.free + interval as u64)
            } else {
                t
            };
            self.used = 0;
        }
    }
}

/// A chunk one coalescer group remembers.
#[derive(Clone, Copy, Debug, Default, Serialize, Deserialize)]
struct Coal {
    pat: Pattern,
    /// When its first line left the engine.
    first_emit: u64,
    /// Earliest and latest return of its lines.
    first_back: u64,
    last_back: u64,
}

/// A chunk's lines split by L2 partition, in emission order: each line's
/// address, slice and emission cycle. Scratch space of [`Model::chunk`],
/// overwritten (never cleared) by every chunk: only the first `count[p]`
/// entries of partition `p` are meaningful.
struct Run {
    line: [[u64; 64]; 2],
    slice: [[u16; 64]; 2],
    emit: [[u64; 64]; 2],
    count: [u8; 2],
}

impl Default for Run {
    fn default() -> Self {
        Run {
            line: [[0; 64]; 2],
            slice: [[0; 64]; 2],
            emit: [[0; 64]; 2],
            count: [0; 2],
        }
    }
}

/// What a chunk met, decided at its first line.
#[derive(Clone, Copy, Debug)]
enum Outcome {
    /// Merged in the coalescer with a chunk landing at this cycle.
    Coalesced(u64),
    /// A shadow copy in the near partition, usable from this cycle.
    Shadow(u64),
    /// Resident at home, usable from this cycle (possibly a fill in flight).
    Resident(u64),
    /// Not resident: filled from HBM.
    Miss,
    /// Resident at home by a fill whose miss arrived after this read (it
    /// was handed over first, but this read came first): the read is the
    /// miss that fill answers, its data back `.1` cycles after it reaches
    /// the slice, and entry `.0` becomes usable that much sooner.
    Refill(usize, u64),
    /// A store.
    Store,
}

/// When the miss behind an entry usable from `ready`, `lat` after it,
/// reached its slice.
#[inline]
const fn since(e: &l2::Entry) -> u64 {
    e.ready.saturating_sub(e.lat as u64)
}

/// A fill latency as an entry keeps it.
#[inline]
fn lat16(ready: u64, from: u64) -> u16 {
    ready.saturating_sub(from).min(u16::MAX as u64) as u16
}

/// The transaction-level memory behind every SM's TMA engine; see the
/// [module documentation](self).
pub struct TxnMemory<'a> {
    dedup: DedupSet<'a>,
    m: Model<'a>,
    turns: batch::Turns<'a>,
}

/// Everything but the dedup set (borrowed apart while lines are generated).
struct Model<'a> {
    l2: L2Config,
    dram: DramConfig,
    tma: TmaLineConfig,
    select: SliceSelector,
    chunk: u8,
    sms: u16,
    shift: u32,
    rng: Rng,
    engines: &'a mut [Engine],
    /// Per SM, [`FLIGHT`] counts of lines returning at each cycle.
    flight: &'a mut [u16],
    /// Per SM, one bit per non-zero count.
    flight_nz: &'a mut [u64],
    ports: Calendars<'a>,
    /// Per slice, the crossing between the partitions its lines take to
    /// and from SMs of the other partition; none when the crossing cannot
    /// bind ([`L2Config::crossing_binds`]).
    crossings: Calendars<'a>,
    /// [`L2Config::crossing_binds`].
    crossing: bool,
    /// Per slice, its MSHRs in the order they are taken: when each was
    /// taken and when it frees.
    mshr: &'a mut [[u64; 2]],
    mshr_next: &'a mut [u64],
    /// Lines each slice's port has taken ([`L2Config::port_cycles`]).
    port_served: &'a mut [u64],
    /// A near and a far line's port cycles when every line takes the
    /// same whole number of them (the width divides the line), else 0.
    port_len: [u32; 2],
    coal: &'a mut [Coal],
    coal_n: usize,
    chunks: ChunkTable<'a>,
    hbm: Hbm<'a>,
    /// With `transaction.arrival_controller`: the line-level controller
    /// serving the DRAM requests in arrival order, and per chunk entry
    /// and per coalescer entry the fill its reads wait for (empty
    /// without).
    arrival: Option<ArrivalDram<'a>>,
    entry_fill: &'a mut [FillRef],
    coal_fill: &'a mut [FillRef],
    /// The operation being timed, the fill of the chunk being timed, and
    /// the fill the chunk last looked up waits for.
    cur_op: u32,
    cur_fill: FillRef,
    last_dep: FillRef,
    /// Whether the current operation waits for `last_dep` at the
    /// controller, and whether the last DRAM read went to it.
    last_dep_ok: bool,
    last_req_ok: bool,
    /// When the current operation's lines the controller does not time
    /// are back.
    indep: u64,
    stats: MemStats,
    early_hits: bool,
    /// Scratch: the lines of the chunk being timed.
    run: Run,
}

/// Table sizes.
struct Sizes {
    flight: usize,
    flight_nz: usize,
    mshrs: usize,
    groups: usize,
    coal: usize,
}

impl Sizes {
    fn new(l2: &L2Config, txn: &TxnConfig, sms: u16) -> Sizes {
        let groups = l2.coalescer_groups(sms as usize);
        Sizes {
            flight: sms as usize * FLIGHT as usize,
            flight_nz: sms as usize * FLIGHT as usize / 64,
            mshrs: l2.slices as usize * l2.mshrs as usize,
            groups,
            coal: groups * txn.coalescer_entries.max(1) as usize,
        }
    }
}

impl<'a> TxnMemory<'a> {
    /// Accounts in `l` for every table of the model for `sms` SMs, a
    /// dedup set of `dedup_lines` lines and at most `ops` operations in
    /// flight.
    #[allow(clippy::too_many_arguments)]
    pub fn layout(
        l2: &L2Config,
        dram: &DramConfig,
        txn: &TxnConfig,
        sms: u16,
        dedup_lines: usize,
        ops: usize,
        l: &mut Layout,
    ) -> Result<(), BuildError> {
        let z = Sizes::new(l2, txn, sms);
        DedupSet::layout(dedup_lines, l)?;
        batch::Turns::layout(sms as usize, l)?;
        l.add::<Engine>(sms as usize)?;
        l.add::<u16>(z.flight)?;
        l.add::<u64>(z.flight_nz)?;
        Calendars::layout(l2.slices as usize, SLICE_HORIZON_LOG2, l)?;
        Calendars::layout(crossing_tables(l2), SLICE_HORIZON_LOG2, l)?;
        l.add::<[u64; 2]>(z.mshrs)?;
        l.add::<u64>(l2.slices as usize)?;
        l.add::<u64>(l2.slices as usize)?;
        l.add::<Coal>(z.coal)?;
        ChunkTable::layout(l2.slices as usize, l2.sets as usize, l2.ways as usize, l)?;
        Hbm::layout(dram, l)?;
        if txn.arrival_controller == ArrivalController::On {
            ArrivalDram::layout(dram, op_tags(ops), l)?;
            let (slices, sets, ways) = (l2.slices as usize, l2.sets as usize, l2.ways as usize);
            l.add::<FillRef>(ChunkTable::entries_for(slices, sets, ways)?)?;
            l.add::<FillRef>(z.coal)?;
        }
        Ok(())
    }

    /// Builds the model from `a` (sized by [`TxnMemory::layout`] with
    /// the same arguments); `seed` feeds the proxy's draws. The
    /// arrival-order controller runs when `txn.arrival_controller` is
    /// [`ArrivalController::On`]: the simulator resolves `Auto` per kernel
    /// before it gets here, and `Auto` here counts as off.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        l2: &L2Config,
        dram: &DramConfig,
        tma: &TmaLineConfig,
        txn: &TxnConfig,
        sms: u16,
        dedup_lines: usize,
        ops: usize,
        seed: u64,
        a: &mut Arena<'a>,
    ) -> Result<Self, BuildError> {
        let z = Sizes::new(l2, txn, sms);
        let what = Capacity::MemoryPort;
        let dedup = DedupSet::new_in(a, dedup_lines, what)?;
        let turns = batch::Turns::new_in(sms as usize, a)?;
        let engines = a.alloc(sms as usize, Engine::default(), what)?;
        let flight = a.alloc(z.flight, 0u16, what)?;
        let flight_nz = a.alloc(z.flight_nz, 0u64, what)?;
        let ports = Calendars::new_in(a, l2.slices as usize, SLICE_HORIZON_LOG2, what)?;
        let crossings = Calendars::new_in(a, crossing_tables(l2), SLICE_HORIZON_LOG2, what)?;
        let mshr = a.alloc(z.mshrs, [0u64; 2], what)?;
        let mshr_next = a.alloc(l2.slices as usize, 0u64, what)?;
        let port_served = a.alloc(l2.slices as usize, 0u64, what)?;
        let coal = a.alloc(z.coal, Coal::default(), what)?;
        let chunks = ChunkTable::new_in(a, l2.slices as usize, l2.sets as usize, l2.ways as usize)?;
        let hbm = Hbm::new(dram, a)?;
        let (arrival, entry_fill, coal_fill) = if txn.arrival_controller == ArrivalController::On {
            let fill = l2.fill_latency as u64;
            let arrival = ArrivalDram::new(dram, op_tags(ops), fill, a)?;
            let entry_fill = a.alloc(chunks.entry_count(), FillRef::NONE, what)?;
            let coal_fill = a.alloc(z.coal, FillRef::NONE, what)?;
            (Some(arrival), entry_fill, coal_fill)
        } else {
            (
                None,
                a.alloc(0, FillRef::NONE, what)?,
                a.alloc(0, FillRef::NONE, what)?,
            )
        };
        Ok(TxnMemory {
            dedup,
            turns,
            m: Model {
                l2: *l2,
                dram: *dram,
                tma: *tma,
                select: SliceSelector::new(l2.hash, l2.slices as u32),
                chunk: txn.chunk_lines.min(l2.ways).min(tma.max_lines).clamp(1, 64) as u8,
                sms,
                shift: l2.line_bytes.trailing_zeros(),
                rng: Rng::new(seed ^ 0x5458_4E50_524F_5859),
                engines,
                flight,
                flight_nz,
                ports,
                crossings,
                crossing: l2.crossing_binds(),
                mshr,
                mshr_next,
                port_served,
                port_len: [l2.whole_port_cycles(false), l2.whole_port_cycles(true)],
                coal,
                coal_n: z.coal / z.groups.max(1),
                chunks,
                hbm,
                arrival,
                entry_fill,
                coal_fill,
                cur_op: 0,
                cur_fill: FillRef::NONE,
                last_dep_ok: false,
                last_req_ok: false,
                indep: 0,
                last_dep: FillRef::NONE,
                stats: MemStats::default(),
                early_hits: false,
                run: Run::default(),
            },
        })
    }

    /// Injects (or not) the test-only `Fault::EarlyHit`: a read that finds
    /// its chunk's fill in flight is answered as a hit after the hit
    /// latency instead of waiting for the fill.
    pub fn with_early_hits(mut self, on: bool) -> Self {
        self.m.early_hits = on;
        self
    }

    /// Counters so far (the DRAM's included).
    pub fn stats(&self) -> MemStats {
        let mut s = self.m.stats;
        let h = self.m.hbm.stats();
        let lb = self.m.l2.line_bytes as u64;
        s.dram_read_bytes = h.reads * lb;
        s.dram_write_bytes = h.writes * lb;
        s.dram_row_hits = h.row_hits;
        s
    }

    /// The HBM model (for its statistics).
    pub fn hbm(&self) -> &Hbm<'a> {
        &self.m.hbm
    }

    /// Times operation `op` and returns when it lands: a batch of one
    /// ([`TxnMemory::transfer_batch`]). Operations of one SM must come in
    /// issue order; their `start` may be earlier than an earlier
    /// operation's (the engine serves them in order anyway).
    pub fn transfer(&mut self, op: &TxnOp<'_>, sink: &mut impl TxnSink) -> TxnDone {
        let mut done = TxnDone {
            done: op.start,
            lines: 0,
        };
        self.transfer_batch(core::slice::from_ref(op), sink, |_, d| done = d);
        done
    }
}

impl Model<'_> {
    #[inline]
    fn slice_of(&self, line: u64) -> usize {
        self.select.slice(line) as usize
    }

    #[inline]
    fn mirror(&self, slice: usize) -> usize {
        // `(slice + slices / 2) % slices` for an even slice count.
        let half = self.l2.slices as usize / 2;
        if slice >= half {
            slice - half
        } else {
            slice + half
        }
    }
}

impl TxnMemory<'_> {
    /// Whether operations' landings wait for the arrival-order controller
    /// (`transaction.arrival_controller`); without it
    /// [`TxnMemory::landing`] always answers `now`.
    pub fn lands_by_arrival(&self) -> bool {
        self.m.arrival.is_some()
    }

    /// Operation `id`, handed over earlier, is asked about at `now` (no
    /// sooner than [`TxnMemory::transfer`] said): the cycle it lands
    /// (`now`: now), or a later cycle to land or to ask again then (see
    /// [`arrival`]).
    pub fn landing(&mut self, id: u32, now: u64) -> u64 {
        let xbar = self.m.l2.xbar_latency as u64;
        match &mut self.m.arrival {
            Some(arr) => arr.landing(id, now, xbar),
            None => now,
        }
    }

    /// Writes the mutable state into a snapshot (the dedup set is empty
    /// between operations and not saved).
    pub(crate) fn save_state(
        &self,
        w: &mut crate::codec::Writer<'_>,
    ) -> Result<(), crate::codec::SnapshotError> {
        let m = &self.m;
        w.val(&m.rng)?;
        w.val(&m.stats)?;
        w.slice(m.engines)?;
        w.slice(m.flight)?;
        w.slice(m.flight_nz)?;
        m.ports.save_state(w)?;
        m.crossings.save_state(w)?;
        w.slice(m.mshr)?;
        w.slice(m.mshr_next)?;
        w.slice(m.port_served)?;
        w.slice(m.coal)?;
        m.chunks.save_state(w)?;
        m.hbm.save_state(w)?;
        if let Some(arr) = &m.arrival {
            arr.save_state(w)?;
            w.slice(m.entry_fill)?;
            w.slice(m.coal_fill)?;
        }
        Ok(())
    }

    /// Overwrites the mutable state from a snapshot.
    pub(crate) fn load_state(
        &mut self,
        r: &mut crate::codec::Reader<'_>,
    ) -> Result<(), crate::codec::SnapshotError> {
        let m = &mut self.m;
        m.rng = r.val()?;
        m.stats = r.val()?;
        r.slice(m.engines)?;
        r.slice(m.flight)?;
        r.slice(m.flight_nz)?;
        // Every engine's count of lines in flight is its window's sum, and
        // the bitmap marks exactly the non-zero counts.
        let cap = m.tma.max_lines;
        let words = (FLIGHT / 64) as usize;
        for (sm, e) in m.engines.iter().enumerate() {
            let counts = &m.flight[sm * FLIGHT as usize..(sm + 1) * FLIGHT as usize];
            let nz = &m.flight_nz[sm * words..(sm + 1) * words];
            let sum: u64 = counts.iter().map(|&c| c as u64).sum();
            let marks = counts
                .iter()
                .enumerate()
                .all(|(i, &c)| (c != 0) == (nz[i / 64] >> (i % 64) & 1 != 0));
            if e.out > cap || sum != e.out as u64 || !marks || e.used > m.tma.lines_per_cycle {
                return Err(crate::codec::SnapshotError::Corrupt { what: "TMA engine" });
            }
        }
        m.ports.load_state(r)?;
        m.crossings.load_state(r)?;
        r.slice(m.mshr)?;
        r.slice(m.mshr_next)?;
        r.slice(m.port_served)?;
        r.slice(m.coal)?;
        m.chunks.load_state(r)?;
        m.hbm.load_state(r)?;
        if let Some(arr) = &mut m.arrival {
            arr.load_state(r)?;
            r.slice(m.entry_fill)?;
            r.slice(m.coal_fill)?;
        }
        Ok(())
    }
}
