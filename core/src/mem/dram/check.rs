//! An independent checker of DRAM command streams.
//!
//! [`TimingChecker`] keeps its own history (per bank: open row, last ACT,
//! PRE, RD and WR; per bank group: last ACT, RD and WR; per channel: the
//! last command, RD, WR, REF, the last four ACTs and the end of the data
//! on the bus) and checks every command against the JEDEC rules written
//! out here from the timing parameters, separately from the scheduler's
//! bookkeeping:
//!
//! | command | constraint (earliest legal clock) |
//! |---|---|
//! | any | one command per clock per channel, in clock order ("command bus"); no more than 9 * tREFI since the last REF ("tREFI") |
//! | ACT | bank closed; last REF + tRFC; bank's ACT + tRC; bank's PRE + tRP; group's ACT + tRRD_L; channel's ACT + tRRD_S; 4th-last ACT + tFAW |
//! | PRE | bank open; ACT + tRAS; RD + tRTP; WR + CWL + BL + tWR |
//! | PREA | the PRE rules for every open bank |
//! | RD | bank open at that row; ACT + tRCD_RD; group's RD + tCCD_L; channel's RD + tCCD_S; group's WR + CWL + BL + tWTR_L; channel's WR + CWL + BL + tWTR_S; data bus free at RD + CL |
//! | WR | bank open at that row; ACT + tRCD_WR; group's WR + tCCD_L; channel's WR + tCCD_S; channel's RD + tRTW; data bus free at WR + CWL |
//! | REF | every bank closed; each bank's ACT + tRC and PRE + tRP; last REF + tRFC |
//!
//! Its tables come from an arena like the controller's, so it runs in `no_std`.

use core::fmt;

use super::config::{DramConfig, DramTiming};
use super::{Command, CommandKind};
use crate::arena::{Arena, Layout};
use crate::error::{BuildError, Capacity};

/// A command that breaks a rule.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Violation {
    /// The rule, e.g. `"tRCD"`, `"tFAW"`, `"RD to closed bank"`.
    pub constraint: &'static str,
    /// The offending command.
    pub command: Command,
    /// The earliest clock at which it would have been legal, or `None` for
    /// a protocol error that no waiting fixes.
    pub earliest: Option<u64>,
    /// The clock at which it issued.
    pub actual: u64,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} violated by {}", self.constraint, self.command)?;
        if let Some(e) = self.earliest {
            write!(f, ": earliest legal clock {e}, issued at {}", self.actual)?;
        }
        Ok(())
    }
}

impl core::error::Error for Violation {}

#[derive(Clone, Copy, Debug)]
struct BankHist {
    open: Option<u32>,
    act: Option<u64>,
    pre: Option<u64>,
    rd: Option<u64>,
    wr: Option<u64>,
}

#[derive(Clone, Copy, Debug)]
struct GroupHist {
    act: Option<u64>,
    rd: Option<u64>,
    wr: Option<u64>,
}

#[derive(Clone, Copy, Debug)]
struct ChanHist {
    last: Option<u64>,
    act: Option<u64>,
    rd: Option<u64>,
    wr: Option<u64>,
    refresh: Option<u64>,
    /// The last four ACT clocks, oldest first once full.
    acts: [u64; 4],
    n_acts: usize,
    /// Clock at which the data of the last column command leaves the bus.
    data_end: u64,
}

/// Verifies a command stream against the timing of a [`DramConfig`].
#[derive(Debug)]
pub struct TimingChecker<'a> {
    t: DramTiming,
    columns: u16,
    groups: usize,
    per_group: usize,
    banks: &'a mut [BankHist],
    group_hist: &'a mut [GroupHist],
    chans: &'a mut [ChanHist],
    checked: u64,
}

/// Fails when `cmd` issued before `prev + gap`.
fn after(rule: &'static str, prev: Option<u64>, gap: u64, cmd: &Command) -> Result<(), Violation> {
    match prev {
        Some(p) if cmd.clock < p + gap => Err(Violation {
            constraint: rule,
            command: *cmd,
            earliest: Some(p + gap),
            actual: cmd.clock,
        }),
        _ => Ok(()),
    }
}

fn protocol(rule: &'static str, cmd: &Command) -> Result<(), Violation> {
    Err(Violation {
        constraint: rule,
        command: *cmd,
        earliest: None,
        actual: cmd.clock,
    })
}

impl<'a> TimingChecker<'a> {
    /// Accounts in `l` for a checker of `cfg`.
    pub fn layout(cfg: &DramConfig, l: &mut Layout) -> Result<(), BuildError> {
        let c = cfg.channels as usize;
        l.add::<BankHist>(c * cfg.banks())?;
        l.add::<GroupHist>(c * cfg.bank_groups as usize)?;
        l.add::<ChanHist>(c)?;
        Ok(())
    }

    /// Bytes of arena [`TimingChecker::new`] needs.
    pub fn arena_size(cfg: &DramConfig) -> Result<usize, BuildError> {
        let mut l = Layout::new();
        Self::layout(cfg, &mut l)?;
        Ok(l.bytes())
    }

    /// A checker for `cfg` with every bank closed and no history.
    pub fn new(cfg: &DramConfig, arena: &mut Arena<'a>) -> Result<Self, BuildError> {
        cfg.validate()?;
        let c = cfg.channels as usize;
        let what = Capacity::MemoryPort;
        let bank = BankHist {
            open: None,
            act: None,
            pre: None,
            rd: None,
            wr: None,
        };
        let group = GroupHist {
            act: None,
            rd: None,
            wr: None,
        };
        let chan = ChanHist {
            last: None,
            act: None,
            rd: None,
            wr: None,
            refresh: None,
            acts: [0; 4],
            n_acts: 0,
            data_end: 0,
        };
        Ok(TimingChecker {
            t: cfg.timing,
            columns: cfg.columns,
            groups: cfg.bank_groups as usize,
            per_group: cfg.banks_per_group as usize,
            banks: arena.alloc(c * cfg.banks(), bank, what)?,
            group_hist: arena.alloc(c * cfg.bank_groups as usize, group, what)?,
            chans: arena.alloc(c, chan, what)?,
            checked: 0,
        })
    }

    /// Commands accepted so far.
    pub fn checked(&self) -> u64 {
        self.checked
    }

    /// Checks `cmd` against the history and, when it is legal, records it.
    /// A rejected command leaves the history unchanged.
    pub fn check(&mut self, cmd: &Command) -> Result<(), Violation> {
        let c = cmd.channel as usize;
        if c >= self.chans.len()
            || cmd.bank_group as usize >= self.groups
            || cmd.bank as usize >= self.per_group
        {
            return protocol("address out of range", cmd);
        }
        let t = self.t;
        let g = c * self.groups + cmd.bank_group as usize;
        let bank_base = c * self.groups * self.per_group;
        let b = bank_base + cmd.bank_group as usize * self.per_group + cmd.bank as usize;
        let nbanks = self.groups * self.per_group;
        let ch = self.chans[c];
        let (bl, cl, cwl) = (t.n_bl as u64, t.n_cl as u64, t.n_cwl as u64);

        if let Some(last) = ch.last {
            if cmd.clock <= last {
                return Err(Violation {
                    constraint: "command bus",
                    command: *cmd,
                    earliest: Some(last + 1),
                    actual: cmd.clock,
                });
            }
        }
        // JEDEC lets refresh be postponed by at most 8 intervals.
        let deadline = ch.refresh.unwrap_or(0) + 9 * t.n_refi as u64;
        if cmd.clock > deadline {
            return Err(Violation {
                constraint: "tREFI",
                command: *cmd,
                earliest: None,
                actual: cmd.clock,
            });
        }

        // The PRE rules for bank `i`.
        let pre_ok = |h: &BankHist, cmd: &Command| -> Result<(), Violation> {
            after("tRAS", h.act, t.n_ras as u64, cmd)?;
            after("tRTP", h.rd, t.n_rtp as u64, cmd)?;
            after("tWR", h.wr, cwl + bl + t.n_wr as u64, cmd)
        };

        match cmd.kind {
            CommandKind::Act => {
                let h = self.banks[b];
                if h.open.is_some() {
                    return protocol("ACT to open bank", cmd);
                }
                after("tRFC", ch.refresh, t.n_rfc as u64, cmd)?;
                after("tRC", h.act, t.n_rc as u64, cmd)?;
                after("tRP", h.pre, t.n_rp as u64, cmd)?;
                after("tRRD_L", self.group_hist[g].act, t.n_rrdl as u64, cmd)?;
                after("tRRD_S", ch.act, t.n_rrds as u64, cmd)?;
                if ch.n_acts == 4 {
                    after("tFAW", Some(ch.acts[0]), t.n_faw as u64, cmd)?;
                }
                let h = &mut self.banks[b];
                h.open = Some(cmd.row);
                h.act = Some(cmd.clock);
                self.group_hist[g].act = Some(cmd.clock);
                let ch = &mut self.chans[c];
                ch.act = Some(cmd.clock);
                if ch.n_acts == 4 {
                    ch.acts.rotate_left(1);
                    ch.acts[3] = cmd.clock;
                } else {
                    ch.acts[ch.n_acts] = cmd.clock;
                    ch.n_acts += 1;
                }
            }
            CommandKind::Pre => {
                let h = self.banks[b];
                if h.open.is_none() {
                    return protocol("PRE to closed bank", cmd);
                }
                pre_ok(&h, cmd)?;
                let h = &mut self.banks[b];
                h.open = None;
                h.pre = Some(cmd.clock);
            }
            CommandKind::PreA => {
                for i in bank_base..bank_base + nbanks {
                    let h = self.banks[i];
                    if h.open.is_some() {
                        pre_ok(&h, cmd)?;
                    }
                }
                for h in &mut self.banks[bank_base..bank_base + nbanks] {
                    if h.open.is_some() {
                        h.open = None;
                        h.pre = Some(cmd.clock);
                    }
                }
            }
            CommandKind::Rd | CommandKind::Wr => {
                let read = cmd.kind == CommandKind::Rd;
                let h = self.banks[b];
                match h.open {
                    None if read => return protocol("RD to closed bank", cmd),
                    None => return protocol("WR to closed bank", cmd),
                    Some(r) if r != cmd.row => return protocol("column command to wrong row", cmd),
                    _ => {}
                }
                if cmd.col >= self.columns {
                    return protocol("column out of range", cmd);
                }
                let gh = self.group_hist[g];
                if read {
                    after("tRCD", h.act, t.n_rcdrd as u64, cmd)?;
                    after("tCCD_L", gh.rd, t.n_ccdl as u64, cmd)?;
                    after("tCCD_S", ch.rd, t.n_ccds as u64, cmd)?;
                    after("tWTR_L", gh.wr, cwl + bl + t.n_wtrl as u64, cmd)?;
                    after("tWTR_S", ch.wr, cwl + bl + t.n_wtrs as u64, cmd)?;
                } else {
                    after("tRCD", h.act, t.n_rcdwr as u64, cmd)?;
                    after("tCCD_L", gh.wr, t.n_ccdl as u64, cmd)?;
                    after("tCCD_S", ch.wr, t.n_ccds as u64, cmd)?;
                    after("tRTW", ch.rd, t.n_rtw as u64, cmd)?;
                }
                let start = cmd.clock + if read { cl } else { cwl };
                if start < ch.data_end {
                    return Err(Violation {
                        constraint: "data bus",
                        command: *cmd,
                        earliest: Some(cmd.clock + ch.data_end - start),
                        actual: cmd.clock,
                    });
                }
                let (hb, hg, hc) = (
                    &mut self.banks[b],
                    &mut self.group_hist[g],
                    &mut self.chans[c],
                );
                if read {
                    hb.rd = Some(cmd.clock);
                    hg.rd = Some(cmd.clock);
                    hc.rd = Some(cmd.clock);
                } else {
                    hb.wr = Some(cmd.clock);
                    hg.wr = Some(cmd.clock);
                    hc.wr = Some(cmd.clock);
                }
                hc.data_end = start + bl;
            }
            CommandKind::Ref => {
                for i in bank_base..bank_base + nbanks {
                    let h = self.banks[i];
                    if h.open.is_some() {
                        return protocol("REF with open bank", cmd);
                    }
                    after("tRC", h.act, t.n_rc as u64, cmd)?;
                    after("tRP", h.pre, t.n_rp as u64, cmd)?;
                }
                after("tRFC", ch.refresh, t.n_rfc as u64, cmd)?;
                self.chans[c].refresh = Some(cmd.clock);
            }
        }
        self.chans[c].last = Some(cmd.clock);
        self.checked += 1;
        Ok(())
    }
}
