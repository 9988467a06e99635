//! The controllers' tables: per-channel scalars, bank-group timers,
//! banks with their cached candidates, queued requests and pending
//! completions, all `Copy` so that they live in arena slices.

use super::config::DramConfig;
use crate::error::BuildError;
use crate::time::Ratio;

pub(super) const NIL: u16 = u16::MAX;
pub(super) const CLOSED: u32 = u32::MAX;

pub(super) const UNCLASSIFIED: u8 = 0;
pub(super) const HIT: u8 = 1;
pub(super) const MISS: u8 = 2;
pub(super) const CONFLICT: u8 = 3;

pub(super) const C_NONE: u8 = 0;
pub(super) const C_ACT: u8 = 1;
pub(super) const C_PRE: u8 = 2;
pub(super) const C_COL: u8 = 3;

/// Timing and geometry in the units the scheduler uses.
#[derive(Clone, Copy, Debug)]
pub(super) struct Params {
    pub(super) channels: usize,
    pub(super) groups: usize,
    pub(super) bpg: usize,
    pub(super) banks: usize,
    pub(super) slots: usize,
    pub(super) rets: usize,
    pub(super) bursts: u8,
    pub(super) line_bytes: u64,
    pub(super) rq: u16,
    pub(super) wq: u16,
    pub(super) hi: u16,
    pub(super) lo: u16,
    pub(super) clock: Ratio,
    pub(super) bl: u64,
    pub(super) cl: u64,
    pub(super) cwl: u64,
    pub(super) rcdrd: u64,
    pub(super) rcdwr: u64,
    pub(super) rp: u64,
    pub(super) ras: u64,
    pub(super) rc: u64,
    pub(super) rtp: u64,
    /// WR to PRE, same bank: CWL + BL + WR.
    pub(super) wr_pre: u64,
    /// Column to column of the same kind, any banks: max(CCD_S, BL).
    pub(super) cas_s: u64,
    pub(super) ccdl: u64,
    pub(super) rrds: u64,
    pub(super) rrdl: u64,
    pub(super) faw: u64,
    /// WR to RD, different bank groups: CWL + BL + WTR_S.
    pub(super) wtr_s: u64,
    /// WR to RD, same bank group: CWL + BL + WTR_L.
    pub(super) wtr_l: u64,
    pub(super) rtw: u64,
    pub(super) rfc: u64,
    pub(super) refi: u64,
    pub(super) ctrl: u64,
}

impl Params {
    pub(super) fn new(c: &DramConfig) -> Params {
        let t = &c.timing;
        let w = |x: u32| x as u64;
        Params {
            channels: c.channels as usize,
            groups: c.bank_groups as usize,
            bpg: c.banks_per_group as usize,
            banks: c.banks(),
            slots: c.read_queue as usize + c.write_queue as usize,
            rets: c.return_slots(),
            bursts: c.bursts_per_line() as u8,
            line_bytes: c.line_bytes as u64,
            rq: c.read_queue,
            wq: c.write_queue,
            hi: c.write_high,
            lo: c.write_low,
            clock: c.clock,
            bl: w(t.n_bl),
            cl: w(t.n_cl),
            cwl: w(t.n_cwl),
            rcdrd: w(t.n_rcdrd),
            rcdwr: w(t.n_rcdwr),
            rp: w(t.n_rp),
            ras: w(t.n_ras),
            rc: w(t.n_rc),
            rtp: w(t.n_rtp),
            wr_pre: w(t.n_cwl) + w(t.n_bl) + w(t.n_wr),
            cas_s: w(t.n_ccds).max(w(t.n_bl)),
            ccdl: w(t.n_ccdl),
            rrds: w(t.n_rrds),
            rrdl: w(t.n_rrdl),
            faw: w(t.n_faw),
            wtr_s: w(t.n_cwl) + w(t.n_bl) + w(t.n_wtrs),
            wtr_l: w(t.n_cwl) + w(t.n_bl) + w(t.n_wtrl),
            rtw: w(t.n_rtw),
            rfc: w(t.n_rfc),
            refi: w(t.n_refi),
            ctrl: w(c.ctrl_latency),
        }
    }
}

/// What a scan found.
#[derive(Clone, Copy, Debug)]
pub(super) struct Scan {
    /// Priority key of the best candidate that may issue now (`u64::MAX`
    /// if none; [`Hot::bank`] gives its bank).
    pub(super) best: u64,
    /// Earliest clock after now at which another candidate may issue.
    pub(super) min: u64,
    /// Per timer selector: the least and second-least bank-and-group share
    /// of the candidates' ready times, and the bank of the least.
    pub(super) own1: [u64; 4],
    pub(super) bank1: [usize; 4],
    pub(super) own2: [u64; 4],
}

/// Timer selectors: which group / channel timer a candidate waits on.
pub(super) const SEL_ACT: u8 = 0;
pub(super) const SEL_RD: u8 = 1;
pub(super) const SEL_WR: u8 = 2;
pub(super) const SEL_PRE: u8 = 3;

/// Per-channel scalars.
#[derive(Clone, Copy, Debug, serde::Serialize, serde::Deserialize)]
pub(super) struct Chan {
    /// Next decision clock.
    pub(super) dkey: u64,
    /// Command bus: one command per clock.
    pub(super) next_cmd: u64,
    /// Channel timers by selector: ACT (tRRD_S, tFAW); RD (tCCD_S / tBL
    /// after RD, tWTR_S after WR); WR (tCCD_S / tBL after WR, tRTW after
    /// RD); none (PRE).
    pub(super) ct: [u64; 4],
    /// The last four ACT clocks (ring).
    pub(super) faw: [u64; 4],
    pub(super) faw_n: u8,
    pub(super) faw_i: u8,
    /// Draining writes.
    pub(super) writing: bool,
    pub(super) rq_len: u16,
    pub(super) wq_len: u16,
    /// Head of the free-slot list.
    pub(super) free: u16,
    /// Return ring (sorted by clock).
    pub(super) ret_head: u16,
    pub(super) ret_len: u16,
    /// Clock of the ring's first entry (`u64::MAX` when empty).
    pub(super) ret_next: u64,
    /// Clock at which the next refresh is due.
    pub(super) ref_due: u64,
    /// Banks with an open row.
    pub(super) open: u64,
    /// Banks with queued reads / writes.
    pub(super) rd_banks: u64,
    pub(super) wr_banks: u64,
    /// Banks whose cached candidate is stale.
    pub(super) dirty: u64,
    /// Arrival sequence.
    pub(super) seq: u64,
    /// Data-bus busy clocks.
    pub(super) busy: u64,
}

impl Chan {
    pub(super) const EMPTY: Chan = Chan {
        dkey: 0,
        next_cmd: 0,
        ct: [0; 4],
        faw: [0; 4],
        faw_n: 0,
        faw_i: 0,
        writing: false,
        rq_len: 0,
        wq_len: 0,
        free: NIL,
        ret_head: 0,
        ret_len: 0,
        ret_next: u64::MAX,
        ref_due: 0,
        open: 0,
        rd_banks: 0,
        wr_banks: 0,
        dirty: 0,
        seq: 0,
        busy: 0,
    };
}

/// Bank-group timers by selector: ACT (tRRD_L); RD (tCCD_L after RD,
/// tWTR_L after WR); WR (tCCD_L after WR); none.
#[derive(Clone, Copy, Debug, serde::Serialize, serde::Deserialize)]
pub(super) struct Group {
    pub(super) t: [u64; 4],
}

#[derive(Clone, Copy, Debug, serde::Serialize, serde::Deserialize)]
pub(super) struct List {
    pub(super) head: u16,
    pub(super) tail: u16,
}

/// What a scan reads of a bank: its cached candidate, in 16 bytes so that
/// a channel's sixteen banks take four cache lines.
#[derive(Clone, Copy, Debug, serde::Serialize, serde::Deserialize)]
pub(super) struct Hot {
    /// The bank's share of the candidate's ready time (bank timers and the
    /// request's arrival).
    pub(super) ready: u64,
    /// Priority, lowest first, and the timer selector below it:
    /// `row_command << 63 | seq << 8 | bank << 2 | selector`.
    pub(super) key: u64,
}

impl Hot {
    /// The bank of a priority key.
    pub(super) fn bank(key: u64) -> usize {
        (key >> 2) as usize & 63
    }

    /// The timer selector.
    pub(super) fn sel(&self) -> usize {
        self.key as usize & 3
    }
}

/// One bank's state.
#[derive(Clone, Copy, Debug, serde::Serialize, serde::Deserialize)]
pub(super) struct Bank {
    pub(super) row: u32,
    /// Queued reads / writes to the open row.
    pub(super) rd_hits: u16,
    pub(super) wr_hits: u16,
    /// The candidate: kind and request.
    pub(super) cand_kind: u8,
    pub(super) cand_slot: u16,
    pub(super) next_act: u64,
    pub(super) next_pre: u64,
    pub(super) next_rd: u64,
    pub(super) next_wr: u64,
    pub(super) rd: List,
    pub(super) wr: List,
}

impl Bank {
    pub(super) const EMPTY: Bank = Bank {
        row: CLOSED,
        rd_hits: 0,
        wr_hits: 0,
        cand_kind: C_NONE,
        cand_slot: NIL,
        next_act: 0,
        next_pre: 0,
        next_rd: 0,
        next_wr: 0,
        rd: List {
            head: NIL,
            tail: NIL,
        },
        wr: List {
            head: NIL,
            tail: NIL,
        },
    };
}

/// A queued request.
#[derive(Clone, Copy, Debug, serde::Serialize, serde::Deserialize)]
pub(super) struct Slot {
    /// First DRAM clock it may be scheduled at.
    pub(super) arrival: u64,
    /// SM cycle it was enqueued.
    pub(super) enq: u64,
    pub(super) seq: u64,
    pub(super) tag: u32,
    pub(super) row: u32,
    /// First column.
    pub(super) col: u16,
    pub(super) prev: u16,
    pub(super) next: u16,
    /// Bursts still to issue.
    pub(super) left: u8,
    pub(super) class: u8,
    pub(super) write: bool,
}

impl Slot {
    pub(super) const EMPTY: Slot = Slot {
        arrival: 0,
        enq: 0,
        seq: 0,
        tag: 0,
        row: 0,
        col: 0,
        prev: NIL,
        next: NIL,
        left: 0,
        class: UNCLASSIFIED,
        write: false,
    };
}

/// A completion waiting for its clock.
#[derive(Clone, Copy, Debug, serde::Serialize, serde::Deserialize)]
pub(super) struct Ret {
    pub(super) clock: u64,
    pub(super) tag: u32,
    /// SM cycles from enqueue to completion (saturated to 31 bits), with
    /// bit 31 set for a write.
    pub(super) lat_w: u32,
}

pub(super) const WRITE_BIT: u32 = 1 << 31;

pub(super) fn mul(a: usize, b: usize) -> Result<usize, BuildError> {
    a.checked_mul(b).ok_or(BuildError::TooLarge)
}

pub(super) fn bits(mut m: u64) -> impl Iterator<Item = usize> {
    core::iter::from_fn(move || {
        if m == 0 {
            None
        } else {
            let b = m.trailing_zeros() as usize;
            m &= m - 1;
            Some(b)
        }
    })
}

/// `a` if `c`, else `b`, as arithmetic rather than a branch.
#[inline(always)]
pub(super) fn select(c: bool, a: usize, b: usize) -> usize {
    let m = (c as usize).wrapping_neg();
    (a & m) | (b & !m)
}
