//! DRAM configuration: organisation, timing, clock ratio, queues, mapping,
//! and the HBM presets of the Hopper parts.
//!
//! # Preset derivation
//!
//! HBM3 timings start from the JEDEC-derived 6400 MT/s grade Ramulator 2
//! uses (`reference/calibration.md` §4, tCK = 0.625 ns). HBM3 moves four
//! bits per pin per clock, so a part whose pins run at `mts` MT/s has a
//! clock of `mts / 4` MHz. Parameters that are times in the standard
//! (CL, CWL, tRCD, tRP, tRAS, tRC, tWR, tRTP, the RD-to-WR turnaround) are
//! rescaled to that clock and rounded up: `ceil(n * mts / 6400)`. nBL,
//! nCCD_S/L, nRRD_S/L, nFAW and nWTR_S/L stay in clocks. tRFC (all-bank)
//! comes from the channel-density table of §4 (8 Gb per 64-bit channel:
//! 350 ns; 12 Gb: 450 ns) and tREFI is 3.9 us, rounded down so refresh is
//! never late. The controller pipeline (`ctrl_latency`) is an assumption of
//! 40 ns, not a fit: calibrate it against the pointer-chase plateau of §1.
//!
//! | preset | units | width | MT/s | DRAM clock | peak |
//! |---|---|---|---|---|---|
//! | `hbm3_h100` | 160 pseudo-channels | 32 bit | 5230 | 1307.5 MHz | 3.347 TB/s |
//! | `hbm3_h20` | 96 channels | 64 bit | 5208 | 1302 MHz | 3.9997 TB/s |
//! | `hbm3e_h200` | 192 pseudo-channels | 32 bit | 6250 | 1562.5 MHz | 4.800 TB/s |
//! | `hbm2e_h800_pcie` | 80 pseudo-channels | 64 bit | 3125 | 1562.5 MHz | 2.000 TB/s |

use serde::{Deserialize, Serialize};

use super::map::AddressMapping;
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

const fn gcd(a: u64, b: u64) -> u64 {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

/// `num / den` in lowest terms (both fit `u32` for every preset).
const fn ratio(num: u64, den: u64) -> Ratio {
    let g = gcd(num, den);
    Ratio::new((num / g) as u32, (den / g) as u32)
}

/// `ceil(n * num / den)`.
const fn scale(n: u32, num: u32, den: u32) -> u32 {
    (n as u64 * num as u64).div_ceil(den as u64) as u32
}

/// HBM3 timing for pins at `mts` MT/s (clock `mts / 4` MHz) with an
/// all-bank refresh cycle of `rfc_ns`, from the 6400 MT/s grade.
const fn hbm3_timing(mts: u32, rfc_ns: u32) -> DramTiming {
    // Clock-scaled parameters: n(6400) * 0.625 ns / tCK = n * mts / 6400.
    macro_rules! s {
        ($n:expr) => {
            scale($n, mts, 6400)
        };
    }
    DramTiming {
        n_bl: 2,
        n_cl: s!(20),
        n_rcdrd: s!(31),
        n_rcdwr: s!(15),
        n_rp: s!(26),
        n_ras: s!(45),
        n_rc: s!(72),
        n_wr: s!(33),
        n_rtp: s!(9),
        n_cwl: s!(10),
        n_ccds: 2,
        n_ccdl: 4,
        n_rrds: 4,
        n_rrdl: 5,
        n_faw: 24,
        n_wtrs: 7,
        n_wtrl: 10,
        n_rtw: s!(20),
        // Nanoseconds to clocks: ns * (mts / 4) MHz / 1000.
        n_rfc: scale(rfc_ns, mts, 4000),
        n_refi: (3900 * mts as u64 / 4000) as u32,
    }
}

/// An HBM3-family configuration with the common organisation: 4 bank
/// groups of 4 banks, 32 columns of bursts per row, 128-byte lines.
const fn hbm3(channels: u16, burst_bytes: u16, rows: u32, mts: u32, rfc_ns: u32, sm_mhz: u32) -> DramConfig {
    DramConfig {
        channels,
        bank_groups: 4,
        banks_per_group: 4,
        rows,
        columns: 32,
        burst_bytes,
        line_bytes: 128,
        timing: hbm3_timing(mts, rfc_ns),
        // DRAM clocks per SM cycle: (mts / 4) / sm_mhz.
        clock: ratio(mts as u64, 4 * sm_mhz as u64),
        ctrl_latency: scale(40, mts, 4000),
        read_queue: 32,
        write_queue: 32,
        write_high: 24,
        write_low: 8,
        mapping: AddressMapping::INTERLEAVED,
    }
}

impl DramConfig {
    /// H100 / H800 SXM5: 5 HBM3 stacks of 16 channels x 2 pseudo-channels
    /// = 160 pseudo-channels of 32 bits (5120 bits), 16 GB stacks of 8 Gb
    /// channels (32768 rows of 1 KiB per bank), 5.23 Gb/s per pin: DRAM
    /// clock 1307.5 MHz, `clock` = 1307.5 / 1830 = 523/732. A BL8 burst is
    /// 32 bytes in `n_bl` = 2 clocks, so the peak is 160 * 16 B *
    /// 1.3075 GHz = 3.347 TB/s (rated 3.35). Timing: the 6400 grade scaled
    /// by 5230/6400 (CL 17, tRCD 26/13, tRP 22, tRAS 37, tRC 59, tWR 27,
    /// tRTP 8, CWL 9, tRTW 17), tRFC 350 ns = 458, tREFI = 5099.
    pub const fn hbm3_h100() -> Self {
        hbm3(160, 32, 32768, 5230, 350, 1830)
    }

    /// H20: the paper's "96-channel HBM3", 96 GB in 6 stacks. 96 channels
    /// at HBM3 pin rates cannot carry 4.0 TB/s as 32-bit pseudo-channels
    /// (that would need 10.4 Gb/s per pin), so each of the 96 units is a
    /// full 64-bit channel (its two pseudo-channels in lockstep: 64-byte
    /// bursts, 2 KiB rows, 32768 rows), 6144 bits in all. 4.0 TB/s over
    /// 6144 pins is 5.208 Gb/s per pin: DRAM clock 1302 MHz, `clock` =
    /// 1302 / 1830 = 217/305, peak 96 * 32 B * 1.302 GHz = 3.9997 TB/s.
    /// Timing: the 6400 grade scaled by 5208/6400, tRFC 350 ns (8 Gb per
    /// channel).
    pub const fn hbm3_h20() -> Self {
        hbm3(96, 64, 32768, 5208, 350, 1830)
    }

    /// H200: HBM3e at 4.8 TB/s, 141 GB in 6 stacks of 24 GB: 6 x 16 x 2 =
    /// 192 pseudo-channels of 32 bits (6144 bits), 12 Gb channels (49152
    /// rows of 1 KiB per bank). 4.8 TB/s over 6144 pins is 6.25 Gb/s per
    /// pin: DRAM clock 1562.5 MHz, `clock` = 1562.5 / 1830 = 625/732, peak
    /// 192 * 16 B * 1.5625 GHz = 4.800 TB/s. Timing: the 6400 grade scaled
    /// by 6250/6400, tRFC 450 ns (12 Gb channel, "up to 16 Gb" row of §4).
    /// SM clock 1830 MHz as for the H100.
    pub const fn hbm3e_h200() -> Self {
        hbm3(192, 32, 49152, 6250, 450, 1830)
    }

    /// H800 PCIe: HBM2e at 2.0 TB/s, 80 GB in 5 stacks of 8 channels x 2
    /// pseudo-channels = 80 pseudo-channels of 64 bits (5120 bits), 4 bank
    /// groups x 4 banks, 1 KiB rows (32 BL4 bursts of 32 bytes), 65536 rows.
    /// 2.0 TB/s over 5120 pins is 3.125 Gb/s per pin; HBM2e is double data
    /// rate, so the clock is 1562.5 MHz, `clock` = 1562.5 / 1755 = 625/702,
    /// and a BL4 burst takes `n_bl` = 2 clocks: peak 80 * 16 B *
    /// 1.5625 GHz = 2.000 TB/s.
    ///
    /// Timing: DRAMsim3's JEDEC HBM2 table (`configs/HBM2_8Gb_x128.ini`,
    /// every value in ns at tCK = 1 ns: CL 14, CWL 4, tRCDRD 14, tRCDWR 14,
    /// tRP 14, tRAS 34, tWR 16, tRTP_L 6, tCCD_S 1, tCCD_L 2, tRRD_S 4,
    /// tRRD_L 6, tWTR_S 6, tWTR_L 8, tFAW 30), each scaled to tCK = 0.64 ns
    /// and rounded up; tRC = tRAS + tRP; the RD-to-WR turnaround is
    /// Ramulator's CL + BL + 2 - CWL; tRFC 450 ns (16 Gb channels, the
    /// Ramulator 2 HBM2 table); tREFI 3.9 us rounded down.
    pub const fn hbm2e_h800_pcie() -> Self {
        const MTS: u32 = 3125;
        // ns to clocks at MTS / 2 MHz.
        macro_rules! s {
            ($ns:expr) => {
                scale($ns, MTS, 2000)
            };
        }
        let (n_cl, n_cwl, n_bl) = (s!(14), s!(4), 2);
        DramConfig {
            channels: 80,
            bank_groups: 4,
            banks_per_group: 4,
            rows: 65536,
            columns: 32,
            burst_bytes: 32,
            line_bytes: 128,
            timing: DramTiming {
                n_bl,
                n_cl,
                n_rcdrd: s!(14),
                n_rcdwr: s!(14),
                n_rp: s!(14),
                n_ras: s!(34),
                n_rc: s!(34 + 14),
                n_wr: s!(16),
                n_rtp: s!(6),
                n_cwl,
                n_ccds: s!(1),
                n_ccdl: s!(2),
                n_rrds: s!(4),
                n_rrdl: s!(6),
                n_faw: s!(30),
                n_wtrs: s!(6),
                n_wtrl: s!(8),
                n_rtw: n_cl + n_bl + 2 - n_cwl,
                n_rfc: s!(450),
                n_refi: (3900 * MTS as u64 / 2000) as u32,
            },
            clock: ratio(MTS as u64, 2 * 1755),
            ctrl_latency: s!(40),
            read_queue: 32,
            write_queue: 32,
            write_high: 24,
            write_low: 8,
            mapping: AddressMapping::INTERLEAVED,
        }
    }

    /// The DRAM of a GPU preset (names as in [`crate::PRESETS`]).
    pub fn preset(gpu: &str) -> Option<Self> {
        match gpu {
            "h800" | "h100" => Some(Self::hbm3_h100()),
            "h20" => Some(Self::hbm3_h20()),
            "h200" => Some(Self::hbm3e_h200()),
            "h800-pcie" => Some(Self::hbm2e_h800_pcie()),
            _ => None,
        }
    }

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

    /// Peak bandwidth of all channels in bytes per second for an SM clock
    /// of `sm_clock_mhz`: `channels * burst_bytes / n_bl * clock *
    /// sm_clock`, rounded down.
    pub const fn peak_bytes_per_second(&self, sm_clock_mhz: u32) -> u64 {
        let num = self.channels as u128
            * self.burst_bytes as u128
            * self.clock.num as u128
            * sm_clock_mhz as u128
            * 1_000_000;
        let den = self.timing.n_bl as u128 * self.clock.den as u128;
        (num / den) as u64
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
        check((1..=4096).contains(&self.channels), "dram.channels", "must be in 1..=4096")?;
        check(self.bank_groups >= 1, "dram.bank_groups", "must be positive")?;
        check(self.banks_per_group >= 1, "dram.banks_per_group", "must be positive")?;
        check(self.banks() <= 64, "dram.banks_per_group", "bank_groups * banks_per_group must be at most 64")?;
        check(self.rows >= 1, "dram.rows", "must be positive")?;
        check(self.burst_bytes >= 1, "dram.burst_bytes", "must be positive")?;
        check(
            self.line_bytes >= self.burst_bytes && self.line_bytes % self.burst_bytes == 0,
            "dram.line_bytes",
            "must be a positive multiple of burst_bytes",
        )?;
        check(self.bursts_per_line() <= 64, "dram.line_bytes", "at most 64 bursts per line")?;
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
        check(t.n_ccdl >= t.n_ccds, "dram.timing.n_ccdl", "must be at least n_ccds")?;
        check(t.n_rrdl >= t.n_rrds, "dram.timing.n_rrdl", "must be at least n_rrds")?;
        check(t.n_wtrl >= t.n_wtrs, "dram.timing.n_wtrl", "must be at least n_wtrs")?;
        check(t.n_rc >= t.n_ras, "dram.timing.n_rc", "must be at least n_ras")?;
        check(
            t.n_rtw + t.n_cwl >= t.n_cl + t.n_bl,
            "dram.timing.n_rtw",
            "n_rtw + n_cwl must be at least n_cl + n_bl (read and write data would collide)",
        )?;
        check(t.n_refi > t.n_rfc, "dram.timing.n_refi", "must exceed n_rfc")?;
        check(
            self.clock.num > 0 && self.clock.den > 0,
            "dram.clock",
            "numerator and denominator must be positive",
        )?;
        check(self.ctrl_latency <= MAX, "dram.ctrl_latency", "must be at most 2^20 clocks")?;
        check((1..=2048).contains(&self.read_queue), "dram.read_queue", "must be in 1..=2048")?;
        check((1..=2048).contains(&self.write_queue), "dram.write_queue", "must be in 1..=2048")?;
        check(
            (1..=self.write_queue).contains(&self.write_high),
            "dram.write_high",
            "must be in 1..=write_queue",
        )?;
        check(self.write_low < self.write_high, "dram.write_low", "must be below write_high")?;
        check(self.mapping.is_permutation(), "dram.mapping", "must name every field exactly once")?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn h100_derivation() {
        let c = DramConfig::hbm3_h100();
        let t = c.timing;
        assert_eq!(c.clock, Ratio::new(523, 732));
        assert_eq!(
            (t.n_cl, t.n_rcdrd, t.n_rcdwr, t.n_rp, t.n_ras, t.n_rc, t.n_wr, t.n_rtp, t.n_cwl, t.n_rtw),
            (17, 26, 13, 22, 37, 59, 27, 8, 9, 17)
        );
        assert_eq!((t.n_rfc, t.n_refi), (458, 5099));
        assert_eq!(c.ctrl_latency, 53);
        // At the 6400 grade the table comes back unchanged.
        let g = hbm3_timing(6400, 350);
        assert_eq!((g.n_cl, g.n_rcdrd, g.n_rc, g.n_refi, g.n_rfc), (20, 31, 72, 6240, 560));
    }

    #[test]
    fn hbm2e_derivation() {
        let c = DramConfig::hbm2e_h800_pcie();
        let t = c.timing;
        assert_eq!(c.clock, Ratio::new(625, 702));
        assert_eq!(
            (t.n_cl, t.n_cwl, t.n_rcdrd, t.n_rp, t.n_ras, t.n_rc, t.n_wr, t.n_rtp, t.n_rtw),
            (22, 7, 22, 22, 54, 75, 25, 10, 19)
        );
        assert_eq!((t.n_ccds, t.n_ccdl, t.n_rrds, t.n_rrdl, t.n_faw), (2, 4, 7, 10, 47));
        assert_eq!((t.n_wtrs, t.n_wtrl, t.n_rfc, t.n_refi), (10, 13, 704, 6093));
    }

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
