//! HBM of the transaction model: a service model per pseudo-channel
//! instead of per-command scheduling.
//!
//! Each line request is placed, when it is handed over, at the earliest
//! clocks its commands may take given what earlier requests left behind:
//!
//! - **rows**: an open-row state per bank. A row hit goes straight to its
//!   column commands; a closed bank needs ACT (tRCD before the first
//!   column, tRC after the bank's previous ACT; the channel takes one ACT
//!   per `max(tRRD_S, tFAW / 4)` clocks, from a calendar of ACT slots);
//!   another open row first needs PRE (tRAS after its ACT, tRTP after a
//!   read, write recovery after a write) and tRP.
//! - **FR-FCFS row batching**: the line-level controller serves queued
//!   row hits before switching rows. Here requests come in the order TMA
//!   operations are issued, each with all its lines, so a bank sees
//!   requests that arrive before ones it has already placed. Each bank
//!   keeps a short timeline of its row openings; a request for another
//!   row than the open one is a hit (no ACT, no state change) when it
//!   arrived before the PRE that closed the previous row, if that was its
//!   row, or, handed over late, when its row opened while it was queued
//!   (from tRC before its arrival until its data could cross the bus).
//! - **columns and data**: a line is `bursts` column commands to one bank,
//!   tCCD_L apart: it holds its bank group's column slots for `G = bursts
//!   x tCCD_L` clocks, and `B = bursts x max(tCCD_S, nBL)` clocks of the
//!   channel's data bus from `CL` (reads) or `CWL` (writes) after its
//!   first command (other groups' bursts interleave with its own, so
//!   the bus is booked as one run: the same last data clock). Bus and
//!   bank-group time are [reservation calendars](crate::mem::calendar)
//!   with one slot per line (`G` and `B` clocks: tokens per interval), so
//!   requests handed over out of time order interleave instead of
//!   queueing behind each other, and a channel or bank group never
//!   carries more than its peak. A line starts at its own clock when its
//!   slot is free, else at the start of the next free slot.
//! - **turnarounds**: a read's first column command waits for the
//!   channel's last write data plus tWTR_S, a write's for the last read
//!   plus tRTW.
//! - **refresh** as lost time: at every tREFI (staggered per channel as in
//!   the line-level controller) all banks close and no ACT may issue until
//!   tRP + tRFC later (the PREA waits for open banks' tRAS at most: their
//!   later column commands are the bus backlog's, which a real queue
//!   would not have issued yet, and pushing the refresh behind that
//!   backlog charged it twice); a request that would issue across a due
//!   refresh waits for it. The bus slots of those tRP + tRFC (shifted by CL or
//!   CWL) are lost to every line, whatever order lines are handed over
//!   in: the windows are fixed clocks per channel, so a line booked ahead
//!   of a refresh not yet applied does not cross the bus during it.
//!
//! A read completes `CL + nBL + ctrl_latency` clocks after its last column
//! command, a write `CWL + nBL + ctrl_latency`; clocks convert to SM cycles
//! exactly as in the line-level controller (arrival `ceil(cycle * clock)`,
//! completion `ceil(clock / ratio)`). Served alone, a request gets the
//! line-level controller's timing; under load the service order is the
//! order of hand-over, with FR-FCFS's row batching as above.

use serde::{Deserialize, Serialize};

use crate::arena::{Arena, Layout};
use crate::error::{BuildError, Capacity};
use crate::mem::calendar::Calendars;
use crate::mem::dram::DramConfig;
use crate::time::Ratio;

/// DRAM clocks the bus and bank-group calendars look ahead.
const HORIZON_LOG2: u32 = 13;

const CLOSED: u32 = u32::MAX;

#[derive(Clone, Copy, Debug, Serialize, Deserialize)]
struct Bank {
    row: u32,
    next_act: u64,
    next_pre: u64,
    /// Earliest first column command (tRCD after the ACT).
    next_col: u64,
    /// Latest arrival clock handed over so far.
    last_a: u64,
    /// The bank's latest row openings (refreshes as `CLOSED`), oldest
    /// first: which row was open when, for requests handed over late.
    timeline: [Opening; TIMELINE],
}

/// A row opening on a bank's timeline: its ACT clock and row (`CLOSED`:
/// a refresh closed the bank).
#[derive(Clone, Copy, Debug, Serialize, Deserialize)]
struct Opening {
    at: u64,
    row: u32,
}

/// Row openings a bank remembers.
const TIMELINE: usize = 8;

impl Bank {
    /// The ACT clock of an opening of `row` at a clock in `from..=until`
    /// on the timeline, if there is one.
    fn opened_while_queued(&self, row: u32, from: u64, until: u64) -> Option<u64> {
        self.timeline
            .iter()
            .find(|o| o.row == row && (from..=until).contains(&o.at))
            .map(|o| o.at)
    }

    /// Adds an opening to the timeline, forgetting the oldest; one older
    /// than every remembered opening is not kept.
    fn record(&mut self, o: Opening) {
        let tl = &mut self.timeline;
        if o.at < tl[0].at {
            return;
        }
        let mut i = 0;
        while i + 1 < TIMELINE && tl[i + 1].at <= o.at {
            tl[i] = tl[i + 1];
            i += 1;
        }
        tl[i] = o;
    }
}

#[derive(Clone, Copy, Debug, Serialize, Deserialize)]
struct Chan {
    ref_due: u64,
    /// The latest refresh applied: no command from its due clock until
    /// its REF's tRFC has passed.
    win_start: u64,
    win_end: u64,
    /// Latest read column command handed over (a write starting less
    /// than tRTW after it waits).
    last_rd: u64,
    /// Latest write column command handed over (a read starting less than
    /// CWL + nBL + tWTR_S after it waits).
    last_wr: u64,
}

/// Counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct HbmStats {
    /// Line reads served.
    pub reads: u64,
    /// Line writes served.
    pub writes: u64,
    /// Requests whose row was open.
    pub row_hits: u64,
    /// Requests that found their bank closed.
    pub row_misses: u64,
    /// Requests that found another row open.
    pub row_conflicts: u64,
    /// Refreshes applied.
    pub refreshes: u64,
}

/// Timing in DRAM clocks.
#[derive(Clone, Copy, Debug)]
struct P {
    clock: Ratio,
    banks: usize,
    bpg: usize,
    groups: usize,
    bursts: u32,
    bl: u64,
    cas: u32,
    ccdl: u32,
    cl: u64,
    cwl: u64,
    rcdrd: u64,
    rcdwr: u64,
    rp: u64,
    ras: u64,
    rc: u64,
    rtp: u64,
    wr_pre: u64,
    rrds: u64,
    faw: u64,
    wtrs: u64,
    rtw: u64,
    rfc: u64,
    refi: u64,
    ctrl: u64,
}

impl P {
    /// `ceil(cycle * clock)`: the DRAM clock of SM cycle `cycle`
    /// ([`Ratio::mul_ceil`] in 64 bits while the product fits).
    #[inline]
    fn clock_of(&self, cycle: u64) -> u64 {
        let (num, den) = (self.clock.num as u64, self.clock.den as u64);
        match cycle.checked_mul(num) {
            Some(x) if den > 0 => x.div_ceil(den),
            _ => self.clock.mul_ceil(cycle),
        }
    }

    /// `ceil(clock / ratio)`: the first SM cycle at or after DRAM clock
    /// `clock` ([`Ratio::div_ceil`] in 64 bits while the product fits).
    #[inline]
    fn cycle_of(&self, clock: u64) -> u64 {
        let (num, den) = (self.clock.num as u64, self.clock.den as u64);
        match clock.checked_mul(den) {
            Some(x) if num > 0 => x.div_ceil(num),
            _ => self.clock.div_ceil(clock),
        }
    }

    fn new(c: &DramConfig) -> P {
        let t = &c.timing;
        let w = |x: u32| x as u64;
        P {
            clock: c.clock,
            banks: c.banks(),
            bpg: c.banks_per_group as usize,
            groups: c.bank_groups as usize,
            bursts: c.bursts_per_line() as u32,
            bl: w(t.n_bl),
            cas: t.n_ccds.max(t.n_bl),
            ccdl: t.n_ccdl,
            cl: w(t.n_cl),
            cwl: w(t.n_cwl),
            rcdrd: w(t.n_rcdrd),
            rcdwr: w(t.n_rcdwr),
            rp: w(t.n_rp),
            ras: w(t.n_ras),
            rc: w(t.n_rc),
            rtp: w(t.n_rtp),
            wr_pre: w(t.n_cwl) + w(t.n_bl) + w(t.n_wr),
            rrds: w(t.n_rrds),
            faw: w(t.n_faw),
            wtrs: w(t.n_cwl) + w(t.n_bl) + w(t.n_wtrs),
            rtw: w(t.n_rtw),
            rfc: w(t.n_rfc),
            refi: w(t.n_refi),
            ctrl: w(c.ctrl_latency),
        }
    }
}

/// Every pseudo-channel's service model.
#[derive(Debug)]
pub struct Hbm<'a> {
    cfg: DramConfig,
    p: P,
    chans: &'a mut [Chan],
    banks: &'a mut [Bank],
    /// One calendar per channel: its data bus.
    bus: Calendars<'a>,
    /// One calendar per bank group: its column slots.
    cols: Calendars<'a>,
    /// One calendar per channel: its ACT slots (tRRD_S and tFAW as one
    /// ACT per `max(tRRD_S, tFAW / 4)` clocks).
    acts: Calendars<'a>,
    stats: HbmStats,
    /// The last request's arrival, first column command and bus clocks
    /// (for the experiments below).
    #[cfg(test)]
    stages: [u64; 3],
}

impl<'a> Hbm<'a> {
    /// Accounts in `l` for the tables of `cfg` (which must be valid).
    pub fn layout(cfg: &DramConfig, l: &mut Layout) -> Result<(), BuildError> {
        let c = cfg.channels as usize;
        l.add::<Chan>(c)?;
        l.add::<Bank>(c * cfg.banks())?;
        Calendars::layout(c, HORIZON_LOG2, l)?;
        Calendars::layout(c * cfg.bank_groups as usize, HORIZON_LOG2, l)?;
        Calendars::layout(c, HORIZON_LOG2, l)
    }

    /// Builds the channels, every bank closed; channel `c`'s first refresh
    /// is due at [`DramConfig::first_refresh_due`], as in the line-level
    /// model.
    pub fn new(cfg: &DramConfig, a: &mut Arena<'a>) -> Result<Self, BuildError> {
        let p = P::new(cfg);
        let c = cfg.channels as usize;
        let what = Capacity::MemoryPort;
        let chans = a.alloc(
            c,
            Chan {
                ref_due: 0,
                win_start: 0,
                win_end: 0,
                last_rd: 0,
                last_wr: 0,
            },
            what,
        )?;
        for (i, ch) in chans.iter_mut().enumerate() {
            ch.ref_due = cfg.first_refresh_due(i);
        }
        let bank = Bank {
            row: CLOSED,
            next_act: 0,
            next_pre: 0,
            next_col: 0,
            last_a: 0,
            timeline: [Opening { at: 0, row: CLOSED }; TIMELINE],
        };
        Ok(Hbm {
            cfg: *cfg,
            p,
            chans,
            banks: a.alloc(c * p.banks, bank, what)?,
            bus: Calendars::new_in(a, c, HORIZON_LOG2, what)?,
            cols: Calendars::new_in(a, c * p.groups, HORIZON_LOG2, what)?,
            acts: Calendars::new_in(a, c, HORIZON_LOG2, what)?,
            stats: HbmStats::default(),
            #[cfg(test)]
            stages: [0; 3],
        })
    }

    /// The configuration.
    pub fn config(&self) -> &DramConfig {
        &self.cfg
    }

    /// Counters so far.
    pub fn stats(&self) -> HbmStats {
        self.stats
    }

    /// Applies channel `c`'s refreshes due at or before clock `t`.
    fn refresh_until(&mut self, c: usize, t: u64) {
        let p = self.p;
        let ch = &mut self.chans[c];
        if ch.ref_due > t {
            return;
        }
        // Refreshes of an idle stretch leave nothing behind but the last.
        if t - ch.ref_due >= 2 * p.refi {
            ch.ref_due += (t - ch.ref_due) / p.refi * p.refi - p.refi;
        }
        while self.chans[c].ref_due <= t {
            let due = self.chans[c].ref_due;
            let banks = &mut self.banks[c * p.banks..(c + 1) * p.banks];
            // With a bank open, PREA once every open bank may precharge
            // and REF tRP later; else REF at once.
            let mut refresh = due;
            if banks.iter().any(|b| b.row != CLOSED) {
                let mut pre = due;
                for b in banks.iter() {
                    if b.row != CLOSED {
                        pre = pre.max(b.next_pre.min(due + p.ras));
                    }
                }
                refresh = pre + p.rp;
            }
            for b in banks.iter() {
                refresh = refresh.max(b.next_act.min(due + p.rc));
            }
            for b in banks.iter_mut() {
                b.row = CLOSED;
                b.record(Opening {
                    at: due,
                    row: CLOSED,
                });
            }
            let ch = &mut self.chans[c];
            ch.win_start = due;
            ch.win_end = refresh + p.rfc;
            ch.ref_due += p.refi;
            self.stats.refreshes += 1;
        }
    }

    /// The end of the refresh lost time that bus clock `x` of channel `c`
    /// falls in, if it does, for data `lat` clocks after its column
    /// command. Every tREFI (at the channel's staggered due clocks) the
    /// channel loses tRP + tRFC: no column command issues, so no data
    /// crosses the bus `lat` later. The windows are fixed in time, so a
    /// line handed over before the refresh it meets was applied (an
    /// earlier operation's, booked ahead) loses the same time as one
    /// handed over after.
    #[inline]
    fn refresh_lost(&self, c: usize, x: u64, lat: u64) -> Option<u64> {
        let p = &self.p;
        let phase = self.cfg.first_refresh_due(c) + lat;
        if x < phase || p.refi == 0 {
            return None;
        }
        let into = (x - phase) % p.refi;
        // At least one clock of every interval stays usable, whatever the
        // configuration (tRP + tRFC may exceed tREFI): the search for a
        // slot always ends.
        let lost = (p.rp + p.rfc).min(p.refi - 1);
        (into < lost).then(|| x - into + lost)
    }

    /// Serves a line request of DRAM location `d` (already decoded) that
    /// arrives at SM cycle `now`; returns the SM cycle it completes.
    pub fn access(&mut self, now: u64, channel: u16, bank: usize, row: u32, write: bool) -> u64 {
        let p = self.p;
        let c = channel as usize;
        let a = p.clock_of(now);
        self.refresh_until(c, a);
        let bi = c * p.banks + bank;
        let g = c * p.groups + bank / p.bpg;
        // Plan the row commands; a due refresh comes first. An ACT takes
        // one of the channel's ACT slots of `max(tRRD_S, tFAW / 4)` clocks:
        // at its own clock when that slot is free, else at the next free
        // slot's start.
        let al = p.rrds.max(p.faw.div_ceil(4)).max(1);
        // A request handed over well after a later one of its bank (they
        // come in issue order, not time order) finds the bank in that later
        // request's state: it leaves that state alone, and is a row hit if
        // its bank's timeline opened its row while it was queued (FR-FCFS
        // serves it there), else a row conflict of its own time (the ACT,
        // bank-group and bus calendars still take it).
        let past = a + p.rc < self.banks[bi].last_a;
        let (act, first, late_hit) = loop {
            let b = self.banks[bi];
            let rcd = if write { p.rcdwr } else { p.rcdrd };
            let opened = if past {
                // Queued from `a` until its data could cross the bus.
                let lat = if write { p.cwl } else { p.cl };
                let bl = (p.bursts * p.cas.max(1)) as u64;
                let want = a + rcd + lat;
                let until = self.bus.first_free(c, want / bl, 1) * bl;
                b.opened_while_queued(row, a.saturating_sub(p.rc), until)
            } else if b.row != row {
                // Its row was open before the current one, and it arrived
                // before the PRE that closed it: FR-FCFS served it there.
                let tl = &b.timeline;
                let (cur, prev) = (tl[TIMELINE - 1], tl[TIMELINE - 2]);
                (prev.row == row && a + p.rp < cur.at).then_some(prev.at)
            } else {
                None
            };
            let mut late_hit = opened.is_some();
            let plan = if let Some(opened) = opened {
                (None, a.max(opened + rcd))
            } else if past {
                let t = a + p.rp;
                let k = self.acts.first_free(c, t / al, 1);
                let act = if k == t / al { t } else { k * al };
                (Some(act), act + rcd)
            } else if b.row == row {
                (None, a.max(b.next_col))
            } else {
                let mut t = a;
                if b.row != CLOSED {
                    t = a.max(b.next_pre) + p.rp;
                }
                let t = t.max(b.next_act);
                let k = self.acts.first_free(c, t / al, 1);
                let act = if k == t / al { t } else { k * al };
                (Some(act), act + rcd)
            };
            // A refresh already applied (for a request handed over earlier
            // but arriving later) stops the channel from its due clock to
            // the end of tRFC: a request overlapping that window starts
            // after it, on a closed bank.
            let ch = self.chans[c];
            let span = (p.bursts.max(1) as u64 - 1) * p.ccdl as u64;
            let issue = plan.0.unwrap_or(plan.1);
            let plan = if plan.1 + span >= ch.win_start && issue < ch.win_end {
                let t = if past {
                    ch.win_end
                } else {
                    ch.win_end.max(b.next_act)
                };
                late_hit = false;
                let k = self.acts.first_free(c, t / al, 1);
                let act = if k == t / al { t } else { k * al };
                (Some(act), act + rcd)
            } else {
                plan
            };
            // A due refresh stops every command of the channel: a request
            // whose column commands would not all issue before it waits
            // for it (its row, if it opened one, closed by the refresh's
            // PREA once tRAS allows) and then starts again.
            let last = plan.1 + span;
            let due = self.chans[c].ref_due;
            if last >= due && !past {
                if let Some(act) = plan.0.filter(|&act| act < due) {
                    let b = &mut self.banks[bi];
                    b.row = row;
                    b.next_pre = b.next_pre.max(act + p.ras);
                    b.next_act = b.next_act.max(act + p.rc);
                    self.acts.book(c, act / al, 1);
                }
                self.refresh_until(c, due);
                continue;
            }
            if let Some(act) = plan.0 {
                self.acts.book(c, act / al, 1);
            }
            break (plan.0, plan.1, late_hit);
        };
        let b = &mut self.banks[bi];
        match (late_hit || b.row == row && !past, act) {
            (true, _) => self.stats.row_hits += 1,
            (false, _) if b.row == CLOSED => self.stats.row_misses += 1,
            _ => self.stats.row_conflicts += 1,
        }
        // Read/write turnaround, from the latest opposite command at or
        // before this one's first.
        let ch = &self.chans[c];
        let (lat, other, gap) = if write {
            (p.cwl, ch.last_rd, p.rtw)
        } else {
            (p.cl, ch.last_wr, p.wtrs)
        };
        let after = if first >= other && first < other + gap {
            other + gap
        } else {
            first
        };
        // Column commands: the line's bursts fill its bank group's column
        // slots for `G = bursts * tCCD_L` clocks, and take `B = bursts *
        // max(tCCD_S, nBL)` clocks of bus `lat` after they start (other
        // groups' bursts interleave in between, so the last data clock is
        // that of the line's bus time booked as one run). Both calendars
        // count in lines: slot `k` of the bank group is clocks
        // `[kG, (k+1)G)`, of the bus `[kB, (k+1)B)`, one line each. A
        // line starts at its earliest clock when that slot is free, else at
        // the start of the first free one.
        let gl = (p.bursts * p.ccdl.max(1)) as u64;
        let bl = (p.bursts * p.cas.max(1)) as u64;
        let want = first.max(after);
        let k = self.cols.reserve(g, want / gl, 1);
        let col = if k == want / gl { want } else { k * gl };
        let mut bus_want = col + lat;
        let bus = loop {
            let kb = self.bus.reserve(c, bus_want / bl, 1);
            let bus = if kb == bus_want / bl {
                bus_want
            } else {
                kb * bl
            };
            // A slot in a refresh's lost time stays booked (nobody may
            // use it) and the line takes the first slot after it.
            match self.refresh_lost(c, bus, lat) {
                Some(end) => bus_want = end,
                None => break bus,
            }
        };
        // A late bus holds the column commands back as long.
        let last = bus - lat + (p.bursts.max(1) as u64 - 1) * p.ccdl as u64;
        let end = (last + lat + p.bl).max(bus + bl);
        #[cfg(test)]
        {
            self.stages = [a, first, bus - lat];
        }
        if write {
            self.stats.writes += 1;
        } else {
            self.stats.reads += 1;
        }
        let ch = &mut self.chans[c];
        if write {
            ch.last_wr = ch.last_wr.max(last);
        } else {
            ch.last_rd = ch.last_rd.max(last);
        }
        let b = &mut self.banks[bi];
        if let Some(at) = act {
            b.record(Opening { at, row });
        }
        if past {
            return p.cycle_of(end + p.ctrl);
        }
        b.row = row;
        b.last_a = b.last_a.max(a);
        if let Some(act) = act {
            b.next_act = b.next_act.max(act + p.rc);
            b.next_pre = b.next_pre.max(act + p.ras);
            b.next_col = act + if write { p.rcdwr } else { p.rcdrd };
        }
        b.next_pre = b.next_pre.max(last + if write { p.wr_pre } else { p.rtp });
        // The bank's next line starts its column commands no sooner than
        // `G` clocks after this one's first (its bursts, tCCD_L apart):
        // the group's slots are aligned to `G` clocks, so two lines of one
        // bank could otherwise land in adjacent slots less than `G` apart.
        b.next_col = b.next_col.max(col + gl);
        p.cycle_of(end + p.ctrl)
    }

    /// Writes the mutable state into a snapshot.
    pub(crate) fn save_state(
        &self,
        w: &mut crate::codec::Writer<'_>,
    ) -> Result<(), crate::codec::SnapshotError> {
        w.val(&self.stats)?;
        w.slice(self.chans)?;
        w.slice(self.banks)?;
        self.bus.save_state(w)?;
        self.cols.save_state(w)?;
        self.acts.save_state(w)
    }

    /// Overwrites the mutable state from a snapshot.
    pub(crate) fn load_state(
        &mut self,
        r: &mut crate::codec::Reader<'_>,
    ) -> Result<(), crate::codec::SnapshotError> {
        self.stats = r.val()?;
        r.slice(self.chans)?;
        r.slice(self.banks)?;
        self.bus.load_state(r)?;
        self.cols.load_state(r)?;
        self.acts.load_state(r)
    }
}

#[cfg(test)]
#[path = "hbm_tests.rs"]
mod tests;

/// Mean latency of request streams through this model and through the
/// line-level controller: `cargo test --release -p simfa-core
/// stream_latency -- --ignored --nocapture`.
#[cfg(test)]
#[path = "hbm_experiment.rs"]
mod experiment;
