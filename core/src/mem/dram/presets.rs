//! The HBM presets of the Hopper parts and their derivation.
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

use super::config::AddressMapping;
use super::config::{DramConfig, DramTiming};
use crate::time::Ratio;

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
const fn hbm3(
    channels: u16,
    burst_bytes: u16,
    rows: u32,
    mts: u32,
    rfc_ns: u32,
    sm_mhz: u32,
) -> DramConfig {
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
        mapping: AddressMapping::ROW_CHUNKED,
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
            mapping: AddressMapping::ROW_CHUNKED,
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
            (
                t.n_cl, t.n_rcdrd, t.n_rcdwr, t.n_rp, t.n_ras, t.n_rc, t.n_wr, t.n_rtp, t.n_cwl,
                t.n_rtw
            ),
            (17, 26, 13, 22, 37, 59, 27, 8, 9, 17)
        );
        assert_eq!((t.n_rfc, t.n_refi), (458, 5099));
        assert_eq!(c.ctrl_latency, 53);
        // At the 6400 grade the table comes back unchanged.
        let g = hbm3_timing(6400, 350);
        assert_eq!(
            (g.n_cl, g.n_rcdrd, g.n_rc, g.n_refi, g.n_rfc),
            (20, 31, 72, 6240, 560)
        );
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
        assert_eq!(
            (t.n_ccds, t.n_ccdl, t.n_rrds, t.n_rrdl, t.n_faw),
            (2, 4, 7, 10, 47)
        );
        assert_eq!((t.n_wtrs, t.n_wtrl, t.n_rfc, t.n_refi), (10, 13, 704, 6093));
    }
}
