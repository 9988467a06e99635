//! Tests of [`super`] (hbm.rs).

use super::*;
use crate::mem::dram::{AddressMapping, Dram};

/// A lone request gets the line-level controller's latency: the same
/// completion cycle for row misses, hits and conflicts, reads and
/// writes, on every preset.
#[test]
fn lone_requests_match_the_line_level_controller() {
    for cfg in [
        DramConfig::hbm3_h100(),
        DramConfig::hbm2e_h800_pcie(),
        DramConfig::hbm3e_h200(),
    ] {
        // The lines below are picked for the interleaved map.
        let cfg = DramConfig {
            mapping: AddressMapping::INTERLEAVED,
            ..cfg
        };
        let mut l = Layout::new();
        Hbm::layout(&cfg, &mut l).unwrap();
        Dram::layout(&cfg, &mut l).unwrap();
        let mut buf = vec![0u8; l.bytes()];
        let mut a = Arena::new(&mut buf);
        let mut hbm = Hbm::new(&cfg, &mut a).unwrap();
        let mut dram = Dram::new(&cfg, &mut a).unwrap();
        let lb = cfg.line_bytes as u64;
        // Same bank: miss, hit (next line slot of the row), conflict
        // (another row), each well after the previous one finished;
        // then a write and a read of another channel.
        let per_row = cfg.lines_per_row() as u64;
        let stride_row = cfg.channels as u64 * cfg.banks() as u64 * per_row;
        let reqs = [
            (100u64, 0u64, false),
            (2000, cfg.channels as u64 * cfg.banks() as u64, false),
            (4000, stride_row, false),
            (6000, 3, true),
            (8000, 3 + stride_row, false),
        ];
        for (now, line, write) in reqs {
            let d = cfg.decode(line * lb);
            let bank = d.bank_group as usize * cfg.banks_per_group as usize + d.bank as usize;
            let got = hbm.access(now, d.channel, bank, d.row, write);
            dram.try_enqueue(now, line * lb, write, 7).unwrap();
            let mut done = None;
            let mut t = now;
            while done.is_none() {
                t += 1;
                dram.advance(t, &mut |c| done = Some(c.cycle));
            }
            assert_eq!(Some(got), done, "line {line} at {now}");
        }
        assert_eq!(hbm.stats().row_hits, 1);
        assert_eq!(hbm.stats().row_conflicts, 1);
    }
}

/// Runs `f` on a fresh service model of `cfg`.
pub(super) fn with_hbm<R>(cfg: &DramConfig, f: impl FnOnce(&mut Hbm<'_>) -> R) -> R {
    let mut l = Layout::new();
    Hbm::layout(cfg, &mut l).unwrap();
    let mut buf = vec![0u8; l.bytes()];
    let mut a = Arena::new(&mut buf);
    f(&mut Hbm::new(cfg, &mut a).unwrap())
}

/// FR-FCFS serves a queued hit before switching rows: a request for
/// the row a switch closes, arriving before that PRE, is a hit; so is
/// a request handed over late whose row opened while it was queued.
/// Others stay row conflicts.
#[test]
fn queued_requests_hit_the_rows_open_while_they_wait() {
    let cfg = DramConfig::hbm3_h100();
    with_hbm(&cfg, |hbm| {
        hbm.access(1000, 0, 0, 5, false);
        // Row 6 must wait for row 5's tRAS; row 5 arrives meanwhile.
        hbm.access(1001, 0, 0, 6, false);
        hbm.access(1002, 0, 0, 5, false);
        assert_eq!(hbm.stats().row_hits, 1, "{:?}", hbm.stats());
        // A backlog on the channel's bus: 256 lines of other banks,
        // row hits but for the first of each bank.
        for i in 0..256 {
            hbm.access(780, 0, 1 + i % 15, 100, false);
        }
        let before = hbm.stats();
        // Handed over late: 200 cycles (more than tRC) before row 6
        // opened for the request of cycle 1001, and queued (behind the
        // backlog) until after that.
        hbm.access(801, 0, 0, 6, false);
        assert_eq!(hbm.stats().row_hits, before.row_hits + 1);
        // A row the bank did not open while it waited: a conflict.
        hbm.access(802, 0, 0, 9, false);
        assert_eq!(hbm.stats().row_hits, before.row_hits + 1);
        assert_eq!(hbm.stats().row_conflicts, before.row_conflicts + 1);
    });
}

/// The eight lines of one DRAM row, arriving together, leave their
/// bank tCCD_L per burst apart, as the line-level controller serves
/// them: the same completion cycles (the first line's column commands
/// may start mid-slot of the bank group's calendar; before the bank
/// kept its next column clock, the second then took the next slot,
/// less than a line's bursts later).
#[test]
fn a_rows_lines_leave_their_bank_a_line_of_bursts_apart() {
    for cfg in [DramConfig::hbm3_h100(), DramConfig::hbm2e_h800_pcie()] {
        let per_row = cfg.lines_per_row() as u64;
        assert_eq!(cfg.mapping, AddressMapping::ROW_CHUNKED);
        for start in [1000u64, 1003, 1010] {
            let reqs: Vec<(u64, u64, bool)> = (0..per_row)
                .map(|l| (start, 40 * per_row + l, false))
                .collect();
            let (_, _, h, d) = super::experiment::compare_all(&cfg, &reqs);
            assert_eq!(h, d, "{start}");
            let gaps: Vec<u64> = h.windows(2).map(|w| w[1] - w[0]).collect();
            assert!(gaps.iter().all(|&g| g > 0), "{gaps:?}");
        }
    }
}

/// A channel with a long backlog on its bus refreshes on time, as the
/// line-level controller does (its queue holds only what it can issue
/// soon): the same burst of reads ends within 3% of it (1.0% sooner;
/// pushing the PREA behind the backlog's column commands, which lost
/// tRFC twice, ended 4.4% later).
#[test]
fn a_backlog_does_not_hold_the_refresh_back() {
    // The lines below are picked for the interleaved map.
    let cfg = DramConfig {
        mapping: AddressMapping::INTERLEAVED,
        ..DramConfig::hbm3_h100()
    };
    // 600 reads to channel 100 within 300 cycles (its bus needs about
    // 4800 clocks for them), over its 16 banks and a few rows, from
    // shortly before its first refresh is due.
    let ch = 100u64;
    let due = cfg.clock.div_ceil(cfg.first_refresh_due(ch as usize));
    let reqs: Vec<(u64, u64, bool)> = (0..600u64)
        .map(|i| {
            let bank = i % 16;
            let row = i / 160;
            let line = ch + cfg.channels as u64 * (bank + 16 * (i / 16 % 10 + row * 80));
            (due - 200 + i / 2, line, false)
        })
        .collect();
    for &(_, line, _) in &reqs {
        let d = cfg.decode(line * cfg.line_bytes as u64);
        assert_eq!(d.channel as u64, ch);
    }
    let (_, _, h, d) = super::experiment::compare_all(&cfg, &reqs);
    let (h, d) = (*h.iter().max().unwrap(), *d.iter().max().unwrap());
    assert!(h.abs_diff(d) * 100 <= 3 * d, "{h} against {d}");
}

#[test]
fn a_busy_channel_spreads_requests_over_its_bus() {
    let cfg = DramConfig::hbm3_h100();
    with_hbm(&cfg, |hbm| {
        // 64 reads to the 16 banks of channel 0 at once: the bus carries
        // 4 bursts of 2 clocks per line, so they finish about 64 * 8
        // clocks after the first.
        let mut last = 0;
        let mut first = u64::MAX;
        for i in 0..64u32 {
            let done = hbm.access(1000, 0, (i % 16) as usize, i / 16, false);
            first = first.min(done);
            last = last.max(done);
        }
        let clocks = cfg.clock.mul_ceil(last - first);
        assert!((60 * 8..=80 * 8).contains(&clocks), "{clocks}");
    });
}

/// A refresh longer than its interval (tRP + tRFC above tREFI, which
/// validation allows as long as tRFC alone fits) slows a channel down
/// but never stops it.
#[test]
fn a_refresh_longer_than_its_interval_still_serves() {
    let mut cfg = DramConfig::hbm3_h100();
    cfg.timing.n_refi = cfg.timing.n_rfc + 1;
    cfg.validate().unwrap();
    with_hbm(&cfg, |hbm| {
        let mut last = 0;
        for i in 0..2000u32 {
            last = last.max(hbm.access(i as u64, 0, (i % 16) as usize, i / 64, false));
        }
        assert!(last > 2000, "{last}");
    });
}

/// A channel kept busy for many refresh intervals carries no more than
/// the refresh leaves it: every tREFI its bus loses tRP + tRFC, also
/// to requests handed over after the refresh was applied.
#[test]
fn refresh_costs_a_saturated_channel_its_time() {
    let cfg = DramConfig::hbm3_h100();
    with_hbm(&cfg, |hbm| {
        let t = &cfg.timing;
        let per_row = cfg.lines_per_row() as u32;
        let banks = cfg.banks() as u32;
        // Two reads per SM cycle to channel 0 (more than its bus carries),
        // row hits but for one row change per bank and row, arriving
        // over about 20 refresh intervals, handed over in bursts of 64
        // in reverse time order so that later arrivals come first.
        let cycles = cfg.clock.div_ceil(20 * t.n_refi as u64);
        let n = 2 * cycles as u32;
        let (mut first, mut last) = (u64::MAX, 0);
        for burst in 0..n.div_ceil(64) {
            for j in (0..64).rev() {
                let i = burst * 64 + j;
                if i >= n {
                    continue;
                }
                let done = hbm.access(
                    i as u64 / 2,
                    0,
                    (i % banks) as usize,
                    i / (banks * per_row),
                    false,
                );
                first = first.min(done);
                last = last.max(done);
            }
        }
        let bl = cfg.bursts_per_line() as u64 * t.n_ccds.max(t.n_bl) as u64;
        let span = cfg.clock.mul_ceil(last - first);
        let busy = n as u64 * bl;
        let refi = t.n_refi as u64;
        let left = refi - t.n_rp as u64 - t.n_rfc as u64;
        // Bus busy at most the share of each interval the refresh leaves
        // (plus one interval of slack at the ends), and not much less.
        assert!(
            busy * refi <= (span + refi) * left,
            "busy {busy} of {span} clocks"
        );
        assert!(busy * 10 >= span * 7, "busy {busy} of {span} clocks");
        assert!(hbm.stats().refreshes >= 15, "{:?}", hbm.stats());
    });
}
