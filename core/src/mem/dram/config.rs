//! DRAM configuration: organisation, timing, clock ratio, queues and
//! address mapping, with range checks. The presets are in `presets.rs`.

use serde::{Deserialize, Serialize};

use crate::error::ConfigError;
use crate::time::Ratio;

/// DRAM timing parameters, all in DRAM clocks (tCK).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DramTiming {
    /// Clocks one burst occupies the data bus.
    pub n_bl: u32,
    /// Read latency: RD to first data.
    pub n_cl: u32,
    /// ACT to RD, same bank.
    pub n_rcdrd: u32,
    /// ACT to WR, same bank.
    pub n_rcdwr: u32,
    /// PRE to ACT, same bank.
    pub n_rp: u32,
    /// ACT to PRE, same bank.
    pub n_ras: u32,
    /// ACT to ACT, same bank.
    pub n_rc: u32,
    /// Write recovery: end of write data to PRE, same bank.
    pub n_wr: u32,
    /// RD to PRE, same bank.
    pub n_rtp: u32,
    /// Write latency: WR to first data.
    pub n_cwl: u32,
    /// Column command to column command of the same kind, different bank
    /// groups.
    pub n_ccds: u32,
    /// Column command to column command of the same kind, same bank group.
    pub n_ccdl: u32,
    /// ACT to ACT, different bank groups.
    pub n_rrds: u32,
    /// ACT to ACT, same bank group.
    pub n_rrdl: u32,
    /// Window in which at most four ACTs may issue (per pseudo-channel).
    pub n_faw: u32,
    /// End of write data to RD, different bank groups.
    pub n_wtrs: u32,
    /// End of write data to RD, same bank group.
    pub n_wtrl: u32,
    /// RD to WR (bus turnaround), any banks.
    pub n_rtw: u32,
    /// All-bank refresh cycle: REF to ACT or REF.
    pub n_rfc: u32,
    /// Average refresh interval.
    pub n_refi: u32,
}

/// A DRAM system: organisation, timing, clocks, queues and mapping.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DramConfig {
    /// Independent channels in total (HBM pseudo-channels).
    pub channels: u16,
    /// Bank groups per channel.
    pub bank_groups: u8,
    /// Banks per bank group.
    pub banks_per_group: u8,
    /// Rows per bank.
    pub rows: u32,
    /// Columns per row, counted in bursts.
    pub columns: u16,
    /// Bytes one burst moves.
    pub burst_bytes: u16,
    /// Bytes of one request (the L2 line, 128).
    pub line_bytes: u16,
    /// Timing in DRAM clocks.
    pub timing: DramTiming,
    /// DRAM clocks per SM cycle.
    pub clock: Ratio,
    /// DRAM clocks of controller and PHY pipeline added to every
    /// completion.
    pub ctrl_latency: u32,
    /// Read-queue entries per channel.
    pub read_queue: u16,
    /// Write-queue entries per channel.
    pub write_queue: u16,
    /// Writes queued at which a channel starts draining writes.
    pub write_high: u16,
    /// Writes queued at which a draining channel returns to reads (when
    /// reads wait).
    pub write_low: u16,
    /// Address mapping.
    pub mapping: AddressMapping,
}

impl DramConfig {
    /// Banks per channel.
    pub const fn banks(&self) -> usize {
        self.bank_groups as usize * self.banks_per_group as usize
    }

    /// Bursts (column commands) per line request.
    pub const fn bursts_per_line(&self) -> u16 {
        self.line_bytes / self.burst_bytes
    }

    /// Line slots per row.
    pub const fn lines_per_row(&self) -> u16 {
        self.columns / self.bursts_per_line()
    }

    /// Peak data-bus bandwidth of one channel, bytes per DRAM clock.
    pub const fn channel_peak(&self) -> Ratio {
        Ratio::new(self.burst_bytes as u32, self.timing.n_bl)
    }

    /// The DRAM clock at which channel `c`'s first refresh is due:
    /// `n_refi * (c + 1) / channels`, so the channels' refreshes are
    /// staggered over an interval (later ones every `n_refi`). Both memory
    /// models refresh on this schedule.
    pub const fn first_refresh_due(&self, c: usize) -> u64 {
        let n = if self.channels == 0 {
            1
        } else {
            self.channels as u64
        };
        self.timing.n_refi as u64 * (c as u64 + 1) / n
    }

    /// Peak bandwidth of all channels in bytes per SM cycle, as `(num,
    /// den)`: `channels * burst_bytes / n_bl * clock` (`den` at least 1).
    pub const fn peak_bytes_per_cycle(&self) -> (u128, u128) {
        let num = self.channels as u128 * self.burst_bytes as u128 * self.clock.num as u128;
        let den = self.timing.n_bl as u128 * self.clock.den as u128;
        (num, if den == 0 { 1 } else { den })
    }

    /// Peak bandwidth of all channels in bytes per second for an SM clock
    /// of `sm_clock_mhz`: [`DramConfig::peak_bytes_per_cycle`] times the
    /// clock, rounded down.
    pub const fn peak_bytes_per_second(&self, sm_clock_mhz: u32) -> u64 {
        let (num, den) = self.peak_bytes_per_cycle();
        (num * sm_clock_mhz as u128 * 1_000_000 / den) as u64
    }

    /// Completions that can be pending at once in one channel's return
    /// pipeline: at most one column command issues per clock, and a
    /// request's data returns at most `max(CL, CWL) + BL + ctrl_latency`
    /// clocks after its last one.
    pub(super) const fn return_slots(&self) -> usize {
        let t = &self.timing;
        let lat = if t.n_cl > t.n_cwl { t.n_cl } else { t.n_cwl };
        lat as usize + t.n_bl as usize + self.ctrl_latency as usize + 1
    }

    /// The most requests the DRAM can hold at once, queued or returning; a
    /// bound on the completions one [`super::Dram::advance`] reports.
    pub const fn queue_capacity(&self) -> usize {
        self.channels as usize
            * (self.read_queue as usize + self.write_queue as usize + self.return_slots())
    }

    /// Checks every field's range.
    pub fn validate(&self) -> Result<(), ConfigError> {
        fn check(ok: bool, field: &'static str, problem: &'static str) -> Result<(), ConfigError> {
            if ok {
                Ok(())
            } else {
                Err(ConfigError { field, problem })
            }
        }
        const MAX: u32 = 1 << 20;
        check(
            (1..=4096).contains(&self.channels),
            "dram.channels",
            "must be in 1..=4096",
        )?;
        check(
            self.bank_groups >= 1,
            "dram.bank_groups",
            "must be positive",
        )?;
        check(
            self.banks_per_group >= 1,
            "dram.banks_per_group",
            "must be positive",
        )?;
        check(
            self.banks() <= 64,
            "dram.banks_per_group",
            "bank_groups * banks_per_group must be at most 64",
        )?;
        check(self.rows >= 1, "dram.rows", "must be positive")?;
        check(
            self.burst_bytes >= 1,
            "dram.burst_bytes",
            "must be positive",
        )?;
        check(
            self.line_bytes >= self.burst_bytes && self.line_bytes % self.burst_bytes == 0,
            "dram.line_bytes",
            "must be a positive multiple of burst_bytes",
        )?;
        check(
            self.bursts_per_line() <= 64,
            "dram.line_bytes",
            "at most 64 bursts per line",
        )?;
        check(
            self.columns >= self.bursts_per_line() && self.columns % self.bursts_per_line() == 0,
            "dram.columns",
            "must be a positive multiple of line_bytes / burst_bytes",
        )?;
        let t = &self.timing;
        let fields: [(u32, &'static str); 20] = [
            (t.n_bl, "dram.timing.n_bl"),
            (t.n_cl, "dram.timing.n_cl"),
            (t.n_rcdrd, "dram.timing.n_rcdrd"),
            (t.n_rcdwr, "dram.timing.n_rcdwr"),
            (t.n_rp, "dram.timing.n_rp"),
            (t.n_ras, "dram.timing.n_ras"),
            (t.n_rc, "dram.timing.n_rc"),
            (t.n_wr, "dram.timing.n_wr"),
            (t.n_rtp, "dram.timing.n_rtp"),
            (t.n_cwl, "dram.timing.n_cwl"),
            (t.n_ccds, "dram.timing.n_ccds"),
            (t.n_ccdl, "dram.timing.n_ccdl"),
            (t.n_rrds, "dram.timing.n_rrds"),
            (t.n_rrdl, "dram.timing.n_rrdl"),
            (t.n_faw, "dram.timing.n_faw"),
            (t.n_wtrs, "dram.timing.n_wtrs"),
            (t.n_wtrl, "dram.timing.n_wtrl"),
            (t.n_rtw, "dram.timing.n_rtw"),
            (t.n_rfc, "dram.timing.n_rfc"),
            (t.n_refi, "dram.timing.n_refi"),
        ];
        for (v, name) in fields {
            check((1..=MAX).contains(&v), name, "must be in 1..=2^20 clocks")?;
        }
        check(
            t.n_ccdl >= t.n_ccds,
            "dram.timing.n_ccdl",
            "must be at least n_ccds",
        )?;
        check(
            t.n_rrdl >= t.n_rrds,
            "dram.timing.n_rrdl",
            "must be at least n_rrds",
        )?;
        check(
            t.n_wtrl >= t.n_wtrs,
            "dram.timing.n_wtrl",
            "must be at least n_wtrs",
        )?;
        check(
            t.n_rc >= t.n_ras,
            "dram.timing.n_rc",
            "must be at least n_ras",
        )?;
        check(
            t.n_rtw + t.n_cwl >= t.n_cl + t.n_bl,
            "dram.timing.n_rtw",
            "n_rtw + n_cwl must be at least n_cl + n_bl (read and write data would collide)",
        )?;
        check(
            t.n_refi > t.n_rfc,
            "dram.timing.n_refi",
            "must exceed n_rfc",
        )?;
        check(
            self.clock.num > 0 && self.clock.den > 0,
            "dram.clock",
            "numerator and denominator must be positive",
        )?;
        check(
            self.ctrl_latency <= MAX,
            "dram.ctrl_latency",
            "must be at most 2^20 clocks",
        )?;
        check(
            (1..=2048).contains(&self.read_queue),
            "dram.read_queue",
            "must be in 1..=2048",
        )?;
        check(
            (1..=2048).contains(&self.write_queue),
            "dram.write_queue",
            "must be in 1..=2048",
        )?;
        check(
            (1..=self.write_queue).contains(&self.write_high),
            "dram.write_high",
            "must be in 1..=write_queue",
        )?;
        check(
            self.write_low < self.write_high,
            "dram.write_low",
            "must be below write_high",
        )?;
        check(
            self.mapping.is_permutation(),
            "dram.mapping",
            "must name every field exactly once",
        )?;
        Ok(())
    }
}

/// One digit of the line index.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MapField {
    /// The pseudo-channel.
    Channel,
    /// The bank group.
    BankGroup,
    /// The bank within its group.
    Bank,
    /// The line slot within the row (each is `line_bytes / burst_bytes`
    /// consecutive columns).
    Column,
    /// The row.
    Row,
}

/// The order of the fields in the line index, lowest digit first. Every
/// field appears exactly once.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct AddressMapping(pub [MapField; 5]);

impl AddressMapping {
    /// The default: consecutive lines go to consecutive pseudo-channels,
    /// then bank groups, then banks, then line slots of a row, then rows.
    /// Spreads any stream over every channel and bank.
    pub const INTERLEAVED: AddressMapping = AddressMapping([
        MapField::Channel,
        MapField::BankGroup,
        MapField::Bank,
        MapField::Column,
        MapField::Row,
    ]);

    /// "row-bank-bank group-channel-column" (highest first): the lines of one row of
    /// one bank are consecutive (a whole DRAM page, `lines_per_row` lines,
    /// e.g. 1 KiB), then come the channels, bank groups, banks and rows.
    /// NVIDIA GPUs keep address bits 0 to 9 in one bank of one memory
    /// module (reverse-engineered on Pascal and Volta: the bank and module
    /// hashes start at bit 10), so a sequential stream reads whole rows;
    /// the presets use this map.
    pub const ROW_CHUNKED: AddressMapping = AddressMapping([
        MapField::Column,
        MapField::Channel,
        MapField::BankGroup,
        MapField::Bank,
        MapField::Row,
    ]);

    /// "row-bank-column-channel" (highest first): consecutive lines go to
    /// consecutive channels, then fill a row of one bank, then move to the
    /// next bank group, then bank, then row. Sequential streams stay in
    /// open rows.
    pub const ROW_BANK_COLUMN_CHANNEL: AddressMapping = AddressMapping([
        MapField::Channel,
        MapField::Column,
        MapField::BankGroup,
        MapField::Bank,
        MapField::Row,
    ]);

    /// True when every field appears exactly once.
    pub fn is_permutation(&self) -> bool {
        let all = [
            MapField::Channel,
            MapField::BankGroup,
            MapField::Bank,
            MapField::Column,
            MapField::Row,
        ];
        all.iter()
            .all(|f| self.0.iter().filter(|g| *g == f).count() == 1)
    }
}

impl Default for AddressMapping {
    fn default() -> Self {
        AddressMapping::INTERLEAVED
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn invalid_fields_are_named() {
        let mut c = DramConfig::hbm3_h100();
        c.timing.n_rcdrd = 0;
        assert_eq!(c.validate().unwrap_err().field, "dram.timing.n_rcdrd");
        let mut c = DramConfig::hbm3_h100();
        c.clock.den = 0;
        assert_eq!(c.validate().unwrap_err().field, "dram.clock");
        let mut c = DramConfig::hbm3_h100();
        c.write_low = c.write_high;
        assert_eq!(c.validate().unwrap_err().field, "dram.write_low");
        let mut c = DramConfig::hbm3_h100();
        c.line_bytes = 100;
        assert_eq!(c.validate().unwrap_err().field, "dram.line_bytes");
        let mut c = DramConfig::hbm3_h100();
        c.timing.n_rtw = 1;
        assert_eq!(c.validate().unwrap_err().field, "dram.timing.n_rtw");
        let mut c = DramConfig::hbm3_h100();
        c.bank_groups = 16;
        c.banks_per_group = 8;
        assert_eq!(c.validate().unwrap_err().field, "dram.banks_per_group");
    }
}
