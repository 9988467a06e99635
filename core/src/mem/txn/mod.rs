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
//! 3. **Coalescer.** A read chunk that the SM pair's coalescer remembers as
//!    still in flight (all its lines outstanding) merges with it and lands
//!    with it, touching neither crossbar nor L2.
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
pub mod gen;
pub mod hbm;
pub mod l2;
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

/// A chunk one SM pair's coalescer remembers.
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
    pairs: usize,
    coal: usize,
}

impl Sizes {
    fn new(l2: &L2Config, txn: &TxnConfig, sms: u16) -> Sizes {
        let pairs = (sms as usize).div_ceil(2);
        Sizes {
            flight: sms as usize * FLIGHT as usize,
            flight_nz: sms as usize * FLIGHT as usize / 64,
            mshrs: l2.slices as usize * l2.mshrs as usize,
            pairs,
            coal: pairs * txn.coalescer_entries.max(1) as usize,
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
                mshr,
                mshr_next,
                port_served,
                port_len: [l2.whole_port_cycles(false), l2.whole_port_cycles(true)],
                coal,
                coal_n: z.coal / z.pairs.max(1),
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

    /// Counts back every line of SM `sm` returning at or before `e`.
    #[inline]
    fn back_by(&mut self, sm: usize, eng: &mut Engine, e: u64) {
        if e < eng.cursor {
            return;
        }
        let words = (FLIGHT / 64) as usize;
        let cb = sm * FLIGHT as usize;
        let nb = sm * words;
        if e - eng.cursor >= FLIGHT || eng.out == 0 {
            if eng.out != 0 {
                self.flight[cb..cb + FLIGHT as usize].fill(0);
                self.flight_nz[nb..nb + words].fill(0);
            }
            eng.out = 0;
            eng.cursor = e + 1;
            return;
        }
        // Cycles cursor..=e, word by word of the bitmap.
        let mut c = eng.cursor;
        while c <= e {
            let w = ((c / 64) % (words as u64)) as usize;
            let off = c % 64;
            let n = (64 - off).min(e - c + 1);
            let mask = if n == 64 {
                u64::MAX
            } else {
                ((1u64 << n) - 1) << off
            };
            let mut bits = self.flight_nz[nb + w] & mask;
            self.flight_nz[nb + w] &= !mask;
            while bits != 0 {
                let b = bits.trailing_zeros() as usize;
                bits &= bits - 1;
                let i = cb + w * 64 + b;
                eng.out = eng.out.saturating_sub(self.flight[i]);
                self.flight[i] = 0;
            }
            c += n;
        }
        eng.cursor = e + 1;
    }

    /// Counts lines of SM `sm` back, earliest first, until `need` of them
    /// are (or none is left in flight); returns the cycle the last of them
    /// is back.
    #[inline]
    fn wait_back(&mut self, sm: usize, eng: &mut Engine, need: u32) -> u64 {
        let words = (FLIGHT / 64) as usize;
        let cb = sm * FLIGHT as usize;
        let nb = sm * words;
        let mut got = 0u32;
        let mut c = eng.cursor;
        for _ in 0..=words {
            if eng.out == 0 {
                break;
            }
            let w = ((c / 64) % (words as u64)) as usize;
            let off = c % 64;
            let mut bits = self.flight_nz[nb + w] & (u64::MAX << off);
            while bits != 0 {
                let b = bits.trailing_zeros() as u64;
                bits &= bits - 1;
                let i = cb + w * 64 + b as usize;
                let k = self.flight[i];
                self.flight[i] = 0;
                self.flight_nz[nb + w] &= !(1u64 << b);
                eng.out = eng.out.saturating_sub(k);
                got += k as u32;
                if got >= need || eng.out == 0 {
                    let at = c - off + b;
                    eng.cursor = at + 1;
                    return at;
                }
            }
            c += 64 - off;
        }
        // Unreachable with lines in flight; a damaged snapshot lands here.
        eng.out = 0;
        eng.cursor
    }

    /// The emission cycle of line `j` (from 0) of a chunk of SM `sm`: the
    /// next of at most `lines_per_cycle` slots per cycle, once this line
    /// and the chunk's `j` before it fit in the `max_lines` in flight (the
    /// line-level engine's rule). A chunk's own lines cannot be back before
    /// it has left, so only earlier chunks' lines free places. The count in
    /// flight is brought up to date at a chunk's first line (which keeps
    /// the window of return cycles current); after that it may still hold
    /// lines back by now, and when it says a line does not fit, the
    /// earliest returns are counted back until it does, the line leaving
    /// at the later of its slot and the last of them.
    #[inline(always)]
    fn emit(&mut self, sm: usize, eng: &mut Engine, j: u32) -> u64 {
        if eng.used >= self.tma.lines_per_cycle {
            eng.free += self.tma.line_interval as u64;
            eng.used = 0;
        }
        if j == 0 {
            self.back_by(sm, eng, eng.free);
        }
        let need = (eng.out as u32 + j + 1).saturating_sub(self.tma.max_lines as u32);
        if need > 0 {
            self.wait_to_emit(sm, eng, need);
        }
        eng.used += 1;
        eng.free
    }

    /// [`Model::emit`] for a line that does not fit yet: moves the
    /// engine's slot to when `need` more lines are back, if later.
    #[inline(never)]
    fn wait_to_emit(&mut self, sm: usize, eng: &mut Engine, need: u32) {
        let w = self.wait_back(sm, eng, need);
        eng.slot_at(w, self.tma.line_interval);
    }

    /// Adds `n` lines of SM `sm` returning at `r` (after their emission).
    #[inline]
    fn returns(&mut self, sm: usize, eng: &mut Engine, r: u64, n: u8) {
        let r = r.clamp(eng.cursor, eng.cursor + FLIGHT - 1);
        let words = FLIGHT / 64;
        let w = ((r / 64) % words) as usize;
        self.flight[sm * FLIGHT as usize + w * 64 + (r % 64) as usize] += n as u16;
        self.flight_nz[sm * words as usize + w] |= 1 << (r % 64);
        eng.out += n as u16;
    }

    /// Books the next MSHR of `slice` for a miss arriving at `t`; returns
    /// when it may go to DRAM and the MSHR's index.
    #[inline]
    fn mshr_take(&mut self, slice: usize, t: u64) -> (u64, usize) {
        let n = self.l2.mshrs as usize;
        let k = self.mshr_next[slice];
        self.mshr_next[slice] = k.wrapping_add(1);
        let i = slice * n + (k % n as u64) as usize;
        // The oldest MSHR is busy at `t` if it was taken at or before `t`
        // (one taken later, by a miss handed over earlier but arriving
        // later, does not hold this one up).
        let [taken, free] = self.mshr[i];
        let go = if taken <= t && free > t {
            self.stats.mshr_stalls += 1;
            free
        } else {
            t
        };
        self.mshr[i][0] = go;
        (go, i)
    }

    /// One DRAM access of line `line` at `t`; returns its completion. A
    /// read of the current operation is at its SM `after` cycles after
    /// that (for the arrival-order controller).
    fn dram(
        &mut self,
        t: u64,
        line: u64,
        write: bool,
        after: Option<u64>,
        sink: &mut impl TxnSink,
    ) -> u64 {
        let addr = line << self.shift;
        let daddr = self.l2.dram_address(addr);
        let d = self.dram.decode(daddr);
        let bank = d.bank_group as usize * self.dram.banks_per_group as usize + d.bank as usize;
        sink.dram(t, write, addr);
        if let Some(arr) = &mut self.arrival {
            let op = after.map(|a| (self.cur_op, a));
            let fill = if write { FillRef::NONE } else { self.cur_fill };
            self.last_req_ok = arr.request(t, daddr, d.channel, write, op, fill);
        }
        self.hbm.access(t, d.channel, bank, d.row, write)
    }

    /// The current operation's read waits for fill `f` (if the
    /// arrival-order controller runs), `after` cycles from the fill to
    /// the SM.
    #[inline]
    fn depend(&mut self, f: FillRef, after: u64) -> bool {
        match &mut self.arrival {
            Some(arr) => arr.depend(self.cur_op, f, after),
            None => false,
        }
    }

    /// A line of the current operation back at `r`, whose time the
    /// controller does not decide.
    #[inline]
    fn untimed(&mut self, r: u64) {
        self.indep = self.indep.max(r);
    }

    /// Writes back evicted chunk `e` at `t` if it is a dirty home copy.
    fn evicted(&mut self, t: u64, e: l2::Entry, sink: &mut impl TxnSink) {
        if !e.dirty() || e.kind() != HOME {
            return;
        }
        let p = e.pattern();
        let half = self.l2.slices as usize / 2;
        for_each_line(&p, |_, line| {
            if (self.slice_of(line) >= half) as u8 == p.part {
                self.stats.dram_writes += 1;
                self.dram(t, line, true, None, sink);
            }
        });
    }

    /// Inserts chunk `p` into `slice`, writing back what it evicts.
    #[allow(clippy::too_many_arguments)]
    fn insert(
        &mut self,
        t: u64,
        slice: usize,
        p: &Pattern,
        kind: u8,
        dirty: bool,
        ready: u64,
        lat: u16,
        sink: &mut impl TxnSink,
    ) {
        let mut out: heapless::Vec<l2::Entry, 64> = heapless::Vec::new();
        let at = self.chunks.insert(slice, p, kind, dirty, ready, lat, |e| {
            let _ = out.push(e);
        });
        // A read fill's entry waits for that fill, a shadow copy for the
        // fill it copies (this chunk's, or the one its read found at
        // home); a store's for none.
        let fill = match (kind, dirty) {
            (HOME, false) => self.cur_fill,
            (SHADOW, _) if self.cur_fill != FillRef::NONE => self.cur_fill,
            (SHADOW, _) => self.last_dep,
            _ => FillRef::NONE,
        };
        if let Some(f) = at.and_then(|i| self.entry_fill.get_mut(i)) {
            *f = fill;
        }
        // By index: moving the vector into an iterator would copy it.
        for i in 0..out.len() {
            self.evicted(t, out[i], sink);
        }
    }

    /// The remote-copy proxy: copy chunk `p`, served by far slice `home`,
    /// into the mirror slice, usable from `ready`.
    fn maybe_shadow(
        &mut self,
        t: u64,
        home: usize,
        p: &Pattern,
        ready: u64,
        lat: u16,
        sink: &mut impl TxnSink,
    ) {
        let px = self.l2.proxy;
        if !px.enabled {
            return;
        }
        let mirror = self.mirror(home);
        if self.chunks.find(mirror, p).is_some() {
            return;
        }
        let cap = self.chunks.slice_capacity().max(1) as u64;
        let occ = self.chunks.occupancy(mirror) as u64 * 1000 / cap;
        if occ >= px.threshold_permille as u64
            && !self.rng.chance(px.max_prob_permille as u32, 1000)
        {
            return;
        }
        self.stats.shadow_inserts += 1;
        self.insert(t, mirror, p, SHADOW, false, ready, lat, sink);
    }

    #[inline]
    fn note_served(
        &self,
        sink: &mut impl TxnSink,
        line: u64,
        slice: usize,
        hit: bool,
        at: u64,
        served: u64,
    ) {
        if sink.wants_notes() {
            let ev = Event::LineServed {
                addr: line << self.shift,
                slice: slice as u16,
                hit,
                at,
                served,
            };
            sink.note(at, ev);
        }
    }

    /// Books line `e`'s way to its home `slice`: the slice's port, `back`
    /// after the line left the engine, or, when the proxy `probe`s for a
    /// shadow copy, the mirror slice's port first and the home port
    /// `far_latency` later. A `far` line holds the home port at
    /// `far_bytes_per_cycle`, a near one at `slice_bytes_per_cycle`.
    /// Returns when it reaches the slice.
    #[inline(always)]
    fn reach_home(&mut self, slice: usize, e: u64, probe: bool, back: u64, far: bool) -> u64 {
        if probe {
            let xbar = self.l2.xbar_latency as u64;
            let tp = self.book_port(self.mirror(slice), e + xbar, false);
            self.book_port(slice, tp + self.l2.far_latency as u64, true)
        } else {
            self.book_port(slice, e + back, far)
        }
    }

    /// Books `slice`'s port for a line reaching it at `t`, `far` or not,
    /// for the line's share of cycles ([`L2Config::port_cycles`]); returns
    /// when the port takes it.
    #[inline(always)]
    fn book_port(&mut self, slice: usize, t: u64, far: bool) -> u64 {
        let k = self.port_served[slice];
        self.port_served[slice] = k.wrapping_add(1);
        let len = match self.port_len[far as usize] {
            0 => self.l2.port_cycles(k, far),
            n => n,
        };
        self.ports.reserve(slice, t, len)
    }

    /// Times run `q` of an operation of SM `sm` (up to `chunk_lines`
    /// lines, each emitted once it fits in flight); returns its
    /// last line's return cycle. Its lines in each L2 partition form one
    /// chunk.
    fn chunk(
        &mut self,
        sm: usize,
        store: bool,
        q: &Pattern,
        eng: &mut Engine,
        sink: &mut impl TxnSink,
    ) -> u64 {
        let n = q.count.max(1);
        self.stats.requests += n as u64;
        if store {
            self.stats.writes += n as u64;
        }

        let half = self.l2.slices as usize / 2;
        self.run.count = [0; 2];
        for_each_line(q, |i, line| {
            let e = self.emit(sm, eng, i);
            let s = self.slice_of(line);
            let part = (s >= half) as usize;
            let k = self.run.count[part] as usize;
            self.run.line[part][k] = line;
            self.run.slice[part][k] = s as u16;
            self.run.emit[part][k] = e;
            self.run.count[part] += 1;
        });
        let near = ((sm as u32 * 2) / self.sms.max(1) as u32) as usize;
        let mut last = 0u64;
        for part in [near, 1 - near] {
            if self.run.count[part] == 0 {
                continue;
            }
            let p = Pattern {
                part: part as u8,
                weight: self.run.count[part],
                ..*q
            };
            let r = self.part_chunk(sm, store, &p, part != near, eng, sink);
            last = last.max(r);
        }
        last
    }

    /// The slice whose capacity chunk `p` (of the scratch run, key `key`) occupies
    /// while resident: its line's slice for a single line, as in the
    /// line-level model; for a heavier chunk one of its partition's slices
    /// picked by bits of its key. Homing such a chunk at its first line's
    /// slice would pile the chunks of a strided tile, whose rows start on
    /// the same few slices, onto those slices, which would then evict what
    /// a line-level L2 keeps (FA3 d256 causal at 1k tokens read 10% more
    /// from DRAM that way).
    fn residency_slice(&self, p: &Pattern, key: u64) -> usize {
        let part = p.part as usize;
        if p.count <= 1 {
            return self.run.slice[part][0] as usize;
        }
        let half = (self.l2.slices / 2).max(1) as u64;
        (part as u64 * half + (key >> 40) % half) as usize
    }

    /// Times chunk `p`, the lines of the scratch run in partition
    /// `p.part`, read or written by SM `sm`, `far` from it or not; returns
    /// its last line's return cycle.
    fn part_chunk(
        &mut self,
        sm: usize,
        store: bool,
        p: &Pattern,
        far: bool,
        eng: &mut Engine,
        sink: &mut impl TxnSink,
    ) -> u64 {
        let xbar = self.l2.xbar_latency as u64;
        let far_lat = self.l2.far_latency as u64;
        let hit_lat = self.l2.hit_latency as u64;
        let part = p.part as usize;
        let n = self.run.count[part] as usize;
        let key = p.key();
        let home = self.residency_slice(p, key);
        let probe = far && !store && self.l2.proxy.enabled;
        let notes = sink.wants_notes();
        let back = xbar + if far { far_lat } else { 0 };
        let w = p.weight as u64;
        let e0 = self.run.emit[part][0];
        let coal_slot = (sm / 2) * self.coal_n + (key as usize & (self.coal_n - 1));
        self.last_dep = FillRef::NONE;
        self.last_dep_ok = false;
        // What the chunk meets, decided at its first line.
        let outcome = if store {
            Outcome::Store
        } else {
            let c = &self.coal[coal_slot];
            if self.l2.coalescer && c.pat == *p && c.first_emit <= e0 && c.first_back > e0 {
                Outcome::Coalesced(c.last_back)
            } else if probe {
                // A shadow copy made by a fill that came after this read
                // does not exist for it yet.
                match self.chunks.find_keyed(self.mirror(home), p, key) {
                    Some(i) if since(self.chunks.entry(i)) <= e0 + xbar => {
                        self.chunks.touch(i);
                        // The copy is there once the fill it was made
                        // from is.
                        if let Some(&f) = self.entry_fill.get(i) {
                            self.last_dep = f;
                            self.last_dep_ok = self.depend(f, hit_lat + xbar);
                        }
                        Outcome::Shadow(self.chunks.entry(i).ready)
                    }
                    _ => self.lookup(home, p, key, e0 + xbar + far_lat, back),
                }
            } else {
                self.lookup(home, p, key, e0 + back, back)
            }
        };
        self.cur_fill = match (&mut self.arrival, outcome) {
            (Some(arr), Outcome::Miss) => arr.new_fill(),
            _ => FillRef::NONE,
        };
        let (mut first_back, mut last_back) = (u64::MAX, 0u64);
        let mut look = u64::MAX;
        let mut ready_max = 0u64;
        // Every line finds its data ready (a plain hit, or a shadow copy):
        // the chunk's places in flight free together, with its last line.
        let together = match outcome {
            Outcome::Resident(ready) => !probe && ready <= e0 + back,
            Outcome::Shadow(_) => true,
            _ => false,
        };
        // One line loop per outcome; detail events, when wanted, are built
        // inside it and never change the timing.
        match outcome {
            Outcome::Coalesced(at) => {
                let timed = match self.coal_fill.get(coal_slot) {
                    Some(&f) => self.depend(f, back),
                    None => false,
                };
                self.stats.coalesced += w;
                let e = self.run.emit[part][..n].iter().max();
                let last_emit = e.copied().unwrap_or(0);
                let r = at.max(last_emit);
                // Not back before it has left the engine.
                self.untimed(if timed { last_emit } else { r });
                self.returns(sm, eng, r, p.weight);
                return r;
            }
            Outcome::Resident(ready) => {
                // Resident at home: a hit for every line that reaches it
                // once the data is ready, an MSHR merge with the fill in
                // flight for the others.
                let (mut hits, mut hits_back) = (0u64, 0u64);
                if together && !notes {
                    // Every line a hit (it reaches the slice after the
                    // data is ready) and no detail events: only the ports'
                    // bookings count, without the per-line choices below.
                    let (mut lo, mut hi) = (u64::MAX, 0u64);
                    for i in 0..n {
                        let (slice, e) = (self.run.slice[part][i] as usize, self.run.emit[part][i]);
                        let t = self.reach_home(slice, e, false, back, far);
                        lo = lo.min(t);
                        hi = hi.max(t);
                    }
                    look = lo;
                    first_back = lo + hit_lat + back;
                    last_back = hi + hit_lat + back;
                    (hits, hits_back) = (n as u64, last_back);
                } else {
                    for i in 0..n {
                        let (slice, e) = (self.run.slice[part][i] as usize, self.run.emit[part][i]);
                        let t = self.reach_home(slice, e, probe, back, far);
                        look = look.min(t);
                        let r = if t >= ready || self.early_hits {
                            hits += 1;
                            let served = t + hit_lat;
                            if notes {
                                let line = self.run.line[part][i];
                                self.note_served(sink, line, slice, true, t, served);
                            }
                            hits_back = hits_back.max(served + back);
                            served + back
                        } else {
                            if notes {
                                let line = self.run.line[part][i];
                                self.note_served(sink, line, slice, false, ready, ready);
                            }
                            ready + back
                        };
                        first_back = first_back.min(r);
                        last_back = last_back.max(r);
                        if !together {
                            self.returns(sm, eng, r, 1);
                        }
                    }
                }
                // Merges wait for the fill, which the controller times
                // when it can; hits are the model's.
                self.untimed(if self.last_dep_ok {
                    hits_back
                } else {
                    last_back
                });
                let merged = n as u64 - hits;
                self.stats.l2_requests += n as u64;
                self.stats.l2_hits += hits;
                self.stats.l2_misses += merged;
                self.stats.mshr_merged += merged;
                if far {
                    self.stats.far_reads += hits;
                }
                // Hits come back within a few cycles of each other: their
                // places in flight free with the last.
                if together {
                    self.returns(sm, eng, last_back, p.weight);
                }
            }
            Outcome::Shadow(ready) => {
                self.stats.l2_requests += w;
                self.stats.shadow_hits += w;
                let mut reached = 0u64;
                for i in 0..n {
                    let (slice, e) = (self.run.slice[part][i] as usize, self.run.emit[part][i]);
                    let mirror = self.mirror(slice);
                    let t = self.book_port(mirror, e + xbar, false);
                    reached = reached.max(t);
                    let served = t.max(ready) + hit_lat;
                    if notes {
                        let line = self.run.line[part][i];
                        self.note_served(sink, line, mirror, true, t, served);
                    }
                    let r = served + xbar;
                    first_back = first_back.min(r);
                    last_back = last_back.max(r);
                }
                // The copy's readiness is the fill's, which the controller
                // times when it can.
                self.untimed(if self.last_dep_ok {
                    reached + hit_lat + xbar
                } else {
                    last_back
                });
                self.returns(sm, eng, last_back, p.weight);
            }
            // A store, a miss, or the read a fill in flight answers: each
            // line frees its place itself (misses spread out).
            _ => {
                // The latest return of a miss whose request did not fit
                // in the controller's tables.
                let mut unrecorded = 0u64;
                for i in 0..n {
                    let line = self.run.line[part][i];
                    let (slice, e) = (self.run.slice[part][i] as usize, self.run.emit[part][i]);
                    self.stats.l2_requests += 1;
                    let t = self.reach_home(slice, e, probe, back, far);
                    look = look.min(t);
                    let r = self.line_at_home(
                        outcome,
                        line,
                        slice,
                        t,
                        back,
                        notes,
                        &mut ready_max,
                        sink,
                    );
                    first_back = first_back.min(r);
                    last_back = last_back.max(r);
                    if !self.last_req_ok {
                        unrecorded = unrecorded.max(r);
                    }
                    self.returns(sm, eng, r, 1);
                }
                self.untimed(match outcome {
                    Outcome::Miss => unrecorded,
                    Outcome::Refill(..) if !self.last_dep_ok => last_back,
                    _ => 0,
                });
            }
        }
        match outcome {
            Outcome::Store => match self.chunks.find(home, p) {
                Some(i) => {
                    self.stats.l2_hits += w;
                    self.chunks.touch(i);
                    self.chunks.mark_dirty(i);
                }
                None => {
                    self.stats.l2_misses += w;
                    self.insert(look, home, p, HOME, true, look, 0, sink);
                }
            },
            Outcome::Miss => {
                let lat = lat16(ready_max, look);
                self.insert(look, home, p, HOME, false, ready_max, lat, sink);
                if far {
                    self.stats.far_reads += w;
                    self.maybe_shadow(look, home, p, ready_max, lat, sink);
                }
            }
            Outcome::Refill(i, lat) => {
                self.chunks.refill(i, ready_max, lat as u16);
                if far {
                    self.stats.far_reads += w;
                    self.maybe_shadow(look, home, p, ready_max, lat as u16, sink);
                }
            }
            Outcome::Resident(ready) if far => {
                self.maybe_shadow(look, home, p, ready.max(look), 0, sink)
            }
            _ => {}
        }
        if !store {
            if let Some(f) = self.coal_fill.get_mut(coal_slot) {
                *f = match outcome {
                    Outcome::Miss => self.cur_fill,
                    _ => self.last_dep,
                };
            }
            self.coal[coal_slot] = Coal {
                pat: *p,
                first_emit: e0,
                first_back,
                last_back,
            };
        }
        last_back
    }

    /// A line of a chunk that reached its home slice at `t` and does not
    /// find its data there: a write, the read a fill in flight answers,
    /// or a miss to HBM. Returns when its data is back at the SM.
    #[allow(clippy::too_many_arguments)]
    #[inline]
    fn line_at_home(
        &mut self,
        outcome: Outcome,
        line: u64,
        slice: usize,
        t: u64,
        back: u64,
        notes: bool,
        ready_max: &mut u64,
        sink: &mut impl TxnSink,
    ) -> u64 {
        match outcome {
            Outcome::Store => {
                let hit_lat = self.l2.hit_latency as u64;
                if notes {
                    let ev = Event::LineFill {
                        addr: line << self.shift,
                        slice: slice as u16,
                        ready: t,
                        write: true,
                    };
                    sink.note(t, ev);
                }
                t + hit_lat + back
            }
            Outcome::Refill(_, lat) => {
                // The fill this read leads: no second DRAM read.
                self.stats.l2_misses += 1;
                self.stats.mshr_merged += 1;
                let fill = t + lat;
                *ready_max = (*ready_max).max(fill);
                if notes {
                    let c = fill.saturating_sub(self.l2.fill_latency as u64);
                    self.note_fill(sink, line, slice, c, fill);
                }
                self.note_served(sink, line, slice, false, fill, fill);
                fill + back
            }
            _ => {
                self.stats.l2_misses += 1;
                self.stats.dram_reads += 1;
                let (go, mi) = self.mshr_take(slice, t);
                let after = self.l2.fill_latency as u64 + back;
                let c = self.dram(go, line, false, Some(after), sink);
                let fill = c + self.l2.fill_latency as u64;
                self.mshr[mi][1] = fill;
                *ready_max = (*ready_max).max(fill);
                if notes {
                    self.note_fill(sink, line, slice, c, fill);
                }
                self.note_served(sink, line, slice, false, fill, fill);
                fill + back
            }
        }
    }

    /// The checker's detail events of a read fill of `line` in `slice`:
    /// its DRAM data back at `c`, the line usable from `fill`.
    fn note_fill(&self, sink: &mut impl TxnSink, line: u64, slice: usize, c: u64, fill: u64) {
        let addr = line << self.shift;
        sink.note(c, Event::DramDone { addr });
        let ev = Event::LineFill {
            addr,
            slice: slice as u16,
            ready: fill,
            write: false,
        };
        sink.note(c, ev);
    }

    /// Looks chunk `p` (of key `key`) up in its home slice for a read arriving about `t`
    /// whose data is back at the SM `back` cycles after it leaves the L2.
    fn lookup(&mut self, home: usize, p: &Pattern, key: u64, t: u64, back: u64) -> Outcome {
        match self.chunks.find_keyed(home, p, key) {
            Some(i) => {
                self.chunks.touch(i);
                let e = *self.chunks.entry(i);
                let resident = since(&e) <= t;
                if let Some(&f) = self.entry_fill.get(i) {
                    // A hit is served `hit_latency` after the fill; a read
                    // that leads the fill returns with it.
                    self.last_dep = f;
                    let hit = if resident { self.l2.hit_latency } else { 0 };
                    self.last_dep_ok = self.depend(f, hit as u64 + back);
                }
                if resident {
                    Outcome::Resident(e.ready)
                } else {
                    Outcome::Refill(i, e.lat as u64)
                }
            }
            None => Outcome::Miss,
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
