//! Address mapping: which pseudo-channel, bank and row a line lives in.
//!
//! An address is first turned into a line index (`addr / line_bytes`; the
//! offset within the line is ignored). The line index is then read as a
//! mixed-radix number whose digits, lowest first, are the fields named by
//! an [`AddressMapping`]: the channel digit has radix `channels`, the bank
//! group digit `bank_groups`, the bank digit `banks_per_group`, the column
//! digit the number of lines per row, and the row digit `rows`. Radixes need
//! not be powers of two (H100 has 160 pseudo-channels); whatever is left
//! above the highest digit wraps around.
//!
//! The L2 folds higher line bits into the address before it gets here
//! (`l2.dram_hash`), so strided streams spread over channels and banks.

use super::config::{DramConfig, MapField};

/// A decoded DRAM location of one line.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct DramAddr {
    /// Pseudo-channel.
    pub channel: u16,
    /// Bank group.
    pub bank_group: u8,
    /// Bank within the group.
    pub bank: u8,
    /// Row.
    pub row: u32,
    /// Line slot within the row; its first column is
    /// `line * (line_bytes / burst_bytes)`.
    pub line: u16,
}

impl DramConfig {
    /// The radix of one field.
    fn radix(&self, f: MapField) -> u64 {
        match f {
            MapField::Channel => self.channels as u64,
            MapField::BankGroup => self.bank_groups as u64,
            MapField::Bank => self.banks_per_group as u64,
            MapField::Column => self.lines_per_row() as u64,
            MapField::Row => self.rows as u64,
        }
    }

    /// Where the line holding byte `addr` lives. Requires a valid
    /// configuration (no zero radix).
    pub fn decode(&self, addr: u64) -> DramAddr {
        // Powers of two (most radices) by shifts: a division costs tens of
        // cycles, and every DRAM request is decoded.
        let split = |x: u64, r: u64| {
            if r.is_power_of_two() {
                (x & (r - 1), x >> r.trailing_zeros())
            } else {
                (x % r, x / r)
            }
        };
        let mut rest = split(addr, self.line_bytes as u64).1;
        let mut a = DramAddr::default();
        for f in self.mapping.0 {
            let (v, next) = split(rest, self.radix(f));
            rest = next;
            // Each digit is below its radix, which fits its field.
            match f {
                MapField::Channel => a.channel = v as u16,
                MapField::BankGroup => a.bank_group = v as u8,
                MapField::Bank => a.bank = v as u8,
                MapField::Column => a.line = v as u16,
                MapField::Row => a.row = v as u32,
            }
        }
        a
    }

    /// The first byte address of the line at `a` (the inverse of
    /// [`DramConfig::decode`] for in-range fields).
    pub fn compose(&self, a: &DramAddr) -> u64 {
        // Horner's rule from the highest digit down.
        let mut line = 0u64;
        for f in self.mapping.0.iter().rev().copied() {
            let v = match f {
                MapField::Channel => a.channel as u64,
                MapField::BankGroup => a.bank_group as u64,
                MapField::Bank => a.bank as u64,
                MapField::Column => a.line as u64,
                MapField::Row => a.row as u64,
            };
            line = line * self.radix(f) + v;
        }
        line * self.line_bytes as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mem::dram::AddressMapping;

    #[test]
    fn interleaved_interleaves_channels_then_groups_then_banks() {
        let mut c = DramConfig::hbm3_h100();
        c.mapping = AddressMapping::INTERLEAVED;
        let a = |l: u64| c.decode(l * 128);
        assert_eq!(a(0), DramAddr::default());
        assert_eq!(a(1).channel, 1);
        assert_eq!(a(159).channel, 159);
        let x = a(160);
        assert_eq!((x.channel, x.bank_group, x.bank), (0, 1, 0));
        let x = a(160 * 4);
        assert_eq!((x.channel, x.bank_group, x.bank), (0, 0, 1));
        let x = a(160 * 16);
        assert_eq!((x.channel, x.bank_group, x.bank, x.line), (0, 0, 0, 1));
        // Bytes within a line map to the line.
        assert_eq!(c.decode(160 * 16 * 128 + 127), x);
    }

    #[test]
    fn row_bank_column_channel_fills_rows() {
        let mut c = DramConfig::hbm3_h100();
        c.mapping = AddressMapping::ROW_BANK_COLUMN_CHANNEL;
        let x = c.decode(160 * 128);
        assert_eq!((x.channel, x.line, x.bank_group), (0, 1, 0));
        let x = c.decode(160 * 8 * 128);
        assert_eq!((x.channel, x.line, x.bank_group), (0, 0, 1));
    }

    #[test]
    fn compose_inverts_decode() {
        for m in [
            AddressMapping::INTERLEAVED,
            AddressMapping::ROW_BANK_COLUMN_CHANNEL,
            AddressMapping::ROW_CHUNKED,
        ] {
            let mut c = DramConfig::hbm3_h100();
            c.mapping = m;
            for l in [0u64, 1, 159, 160, 7777, 123_456_789, 654_321_987] {
                let a = c.decode(l * 128);
                assert_eq!(c.compose(&a), l * 128);
            }
        }
    }

    /// The presets' map, behind the L2's DRAM hash: a row's lines are
    /// consecutive, and the hash spreads rows 8 KiB apart over more
    /// channels than plain modulo piles them onto.
    #[test]
    fn presets_keep_rows_whole_and_spread_strided_rows() {
        for g in [crate::GpuConfig::h800(), crate::GpuConfig::h800_pcie()] {
            let c = g.dram;
            assert_eq!(c.mapping, AddressMapping::ROW_CHUNKED);
            assert!(g.l2.dram_hash);
            let at = |addr: u64| c.decode(g.l2.dram_address(addr));
            let per_row = c.lines_per_row() as u64;
            // Every line of a row-sized, row-aligned chunk is in one row.
            for chunk in [0u64, 1, 79, 80, 12_345] {
                let first = at(chunk * per_row * 128);
                let mut cols = vec![false; per_row as usize];
                for l in 0..per_row {
                    let d = at((chunk * per_row + l) * 128);
                    cols[d.line as usize] = true;
                    assert_eq!(
                        (d.channel, d.bank_group, d.bank, d.row),
                        (first.channel, first.bank_group, first.bank, first.row)
                    );
                }
                assert!(cols.iter().all(|&x| x), "chunk {chunk}: {cols:?}");
            }
            // 32 rows 8 KiB apart (a 2-D box of a tensor 8 KiB wide).
            let chans = |f: &dyn Fn(u64) -> DramAddr| {
                let mut v: Vec<u16> = (0..32u64).map(|k| f(k * 8192).channel).collect();
                v.sort_unstable();
                v.dedup();
                v.len()
            };
            let hashed = chans(&at);
            let plain = chans(&|a| c.decode(a));
            assert!(hashed > plain, "{hashed} {plain}");
        }
    }

    #[test]
    fn permutation_check() {
        assert!(AddressMapping::INTERLEAVED.is_permutation());
        let mut m = AddressMapping::INTERLEAVED;
        m.0[1] = MapField::Channel;
        assert!(!m.is_permutation());
    }
}
