//! Mean latency of request streams through this model and through the
//! line-level controller: `cargo test --release -p simfa-core
//! stream_latency -- --ignored --nocapture`.

use super::*;

/// Mean completion of a stream through both models.
fn compare(cfg: &DramConfig, reqs: &[(u64, u64, bool)]) -> (f64, f64) {
    let (h, d, _, _) = compare_all(cfg, reqs);
    (h, d)
}

/// Mean latency and every completion, through both models.
pub(super) fn compare_all(
    cfg: &DramConfig,
    reqs: &[(u64, u64, bool)],
) -> (f64, f64, Vec<u64>, Vec<u64>) {
    let (stages, hstats) = hbm_stages(cfg, reqs);
    let hdone: Vec<u64> = stages.iter().map(|s| s[0]).collect();
    let lb = cfg.line_bytes as u64;
    let bytes: Vec<(u64, u64, bool)> = reqs.iter().map(|&(t, l, w)| (t, l * lb, w)).collect();
    let (done, dstats) = crate::mem::dram::tests::served_in_cycle_order(cfg, &bytes);
    let mean = |c: &[u64]| {
        let sum: u64 = c.iter().zip(reqs).map(|(c, r)| c - r.0).sum();
        sum as f64 / reqs.len() as f64
    };
    if ::std::env::var("SIMFA_TRACE").is_ok() {
        ::std::println!("this model: {hstats:?}");
        ::std::println!("line-level: {dstats:?}");
    }
    (mean(&hdone), mean(&done), hdone, done)
}

/// The trace named by `SIMFA_TRACE` (timed format) on preset
/// `SIMFA_GPU` (default h800-pcie; `SIMFA_RQ=N` sets the line-level
/// controller's read queue to `N` entries): its DRAM configuration, each
/// request as `(cycle, DRAM line, write)` in file order (cycle order),
/// and each request's address as the trace gives it. `None` without
/// `SIMFA_TRACE`.
#[allow(clippy::type_complexity)]
fn read_trace() -> Option<(DramConfig, Vec<(u64, u64, bool)>, Vec<u64>)> {
    let path = ::std::env::var("SIMFA_TRACE").ok()?;
    let gpu = ::std::env::var("SIMFA_GPU").unwrap_or("h800-pcie".into());
    let g = crate::GpuConfig::preset(&gpu).unwrap();
    let text = ::std::fs::read_to_string(path).unwrap();
    let (mut reqs, mut addrs) = (Vec::new(), Vec::new());
    for l in text.lines() {
        let mut it = l.split_whitespace();
        let t: u64 = it.next().unwrap().parse().unwrap();
        let w = it.next().unwrap() == "ST";
        let a = it.next().unwrap().trim_start_matches("0x");
        let a = u64::from_str_radix(a, 16).unwrap();
        addrs.push(a);
        reqs.push((t, g.l2.dram_address(a) / g.dram.line_bytes as u64, w));
    }
    let mut d = g.dram;
    if let Ok(q) = ::std::env::var("SIMFA_RQ") {
        d.read_queue = q.parse().unwrap();
    }
    Some((d, reqs, addrs))
}

/// Replays a timed DRAM trace (`simfa run --dram-trace F
/// --dram-trace-format timed`; preset `SIMFA_GPU`, default h800-pcie)
/// through both models,
/// in cycle order, and prints their counters, mean latencies and last
/// completions: `SIMFA_TRACE=F cargo test --release -p simfa-core
/// trace_replay -- --ignored --nocapture`. It isolates the HBM: a gap
/// between the two models on the same trace is this model's, a gap
/// between two runs' traces is upstream of it (the findings behind
/// the FR-FCFS batching and the refresh rule are in their commit's
/// message).
#[test]
#[ignore]
fn trace_replay() {
    let Some((cfg, reqs, addrs)) = read_trace() else {
        return;
    };
    let (h, d, hd, dd) = compare_all(&cfg, &reqs);
    ::std::println!(
        "mean latency {h:.0} / {d:.0} cycles; last completion {} / {}",
        hd.iter().max().unwrap(),
        dd.iter().max().unwrap()
    );
    // The tails, per request and per 16 KiB block of addresses (one
    // bulk copy of the 16 KiB throughput cell: its first request's
    // arrival to its last completion).
    for (name, done) in [("this model", &hd), ("line-level", &dd)] {
        let pct = |v: &mut Vec<u64>, p: usize| {
            v.sort_unstable();
            v[(v.len() - 1) * p / 100]
        };
        let mut lat: Vec<u64> = done.iter().zip(&reqs).map(|(d, r)| d - r.0).collect();
        let mut blocks = ::std::collections::HashMap::<u64, (u64, u64)>::new();
        for (i, a) in addrs.iter().enumerate() {
            let b = blocks.entry(a >> 14).or_insert((u64::MAX, 0));
            *b = (b.0.min(reqs[i].0), b.1.max(done[i]));
        }
        let mut span: Vec<u64> = blocks.values().map(|b| b.1 - b.0).collect();
        ::std::println!(
            "{name}: latency p50 {} p90 {} p99 {}; 16 KiB block p50 {} p90 {}",
            pct(&mut lat, 50),
            pct(&mut lat, 90),
            pct(&mut lat, 99),
            pct(&mut span, 50),
            pct(&mut span, 90)
        );
    }
    // This model again, in cycle order (the same as above for a
    // timed export, not for a hand-over trace).
    let (st, stats) = hbm_stages_in_cycle_order(&cfg, &reqs);
    let sum: u64 = st.iter().zip(&reqs).map(|(s, r)| s[0] - r.0).sum();
    ::std::println!(
        "this model in cycle order: mean latency {:.0} cycles, {stats:?}",
        sum as f64 / reqs.len().max(1) as f64
    );
}

/// How local a timed trace's arrival stream is, whatever serves it:
/// of each bank's consecutive requests in cycle order, how many are
/// for the row of the one before (`SIMFA_TRACE`, `SIMFA_GPU` as for
/// [`trace_replay`]; `cargo test --release -p simfa-core
/// stream_locality -- --ignored --nocapture`).
#[test]
#[ignore]
fn stream_locality() {
    let Some((cfg, reqs, _)) = read_trace() else {
        return;
    };
    let lb = cfg.line_bytes as u64;
    let mut by_cycle: Vec<(u64, u64)> = reqs.iter().map(|r| (r.0, r.1)).collect();
    by_cycle.sort_by_key(|r| r.0);
    let mut open = ::std::collections::HashMap::new();
    let (mut same, mut other) = (0u64, 0u64);
    for &(_, line) in &by_cycle {
        let d = cfg.decode(line * lb);
        match open.insert((d.channel, d.bank_group, d.bank), d.row) {
            Some(r) if r == d.row => same += 1,
            Some(_) => other += 1,
            None => {}
        }
    }
    ::std::println!(
        "each bank's consecutive arrivals: {same} for the same row, {other} for another"
    );
}

/// [`hbm_stages`] of `reqs` served in cycle order (ties in the order
/// given), reported in the order given.
fn hbm_stages_in_cycle_order(
    cfg: &DramConfig,
    reqs: &[(u64, u64, bool)],
) -> (Vec<[u64; 3]>, HbmStats) {
    let mut by_cycle: Vec<usize> = (0..reqs.len()).collect();
    by_cycle.sort_by_key(|&i| reqs[i].0);
    let sorted: Vec<(u64, u64, bool)> = by_cycle.iter().map(|&i| reqs[i]).collect();
    let (st, stats) = hbm_stages(cfg, &sorted);
    let mut out = vec![[0u64; 3]; reqs.len()];
    for (st, &i) in st.into_iter().zip(&by_cycle) {
        out[i] = st;
    }
    (out, stats)
}

/// Each request of `reqs` through this model alone, in the order
/// given: its completion and, in DRAM clocks, its wait for its bank
/// (row commands: first column command less arrival) and for its
/// column and bus slots (data start less first column command).
fn hbm_stages(cfg: &DramConfig, reqs: &[(u64, u64, bool)]) -> (Vec<[u64; 3]>, HbmStats) {
    let lb = cfg.line_bytes as u64;
    super::tests::with_hbm(cfg, |hbm| {
        let st = reqs
            .iter()
            .map(|&(now, line, write)| {
                let d = cfg.decode(line * lb);
                let bank = d.bank_group as usize * cfg.banks_per_group as usize + d.bank as usize;
                let done = hbm.access(now, d.channel, bank, d.row, write);
                let [a, first, col] = hbm.stages;
                [done, first.saturating_sub(a), col.saturating_sub(first)]
            })
            .collect();
        (st, hbm.stats())
    })
}

/// Where the GEMM generator puts A (`simfa_std::gen::gemm::A_BASE`,
/// which the core cannot name).
const GEMM_A_BASE: u64 = 0x1000_0000;

/// Replays a DRAM trace of the calibrated 4096x128x1024 GEMM through
/// this model in the trace's order and in cycle order, and through the
/// line-level controller, and prints per CTA the median latency of its
/// first A tile (A rows of 2 KiB, CTA `c` reading rows
/// `128c..128c+127`) and, for this model, the tile's mean waits for
/// its bank and for column and bus slots (DRAM clocks). The trace is
/// either the timed export (`simfa gemm --m 4096 --n 128 --k 1024
/// --calibrated --memory M --dram-trace F --dram-trace-format timed`,
/// in cycle order) or the transaction run's requests in the order its
/// HBM was handed them (`SIMFA_HANDOVER_TRACE=F cargo test --release -p
/// simfa-tests --test agreement first_tile_dram_latency -- --ignored`):
/// `SIMFA_GPU=h800 SIMFA_TRACE=F cargo test --release -p simfa-core
/// first_tiles_replayed -- --ignored --nocapture`. Inside a
/// transaction-model run those medians rise with the CTA index (see
/// `first_tile_dram_latency` in `tests/tests/agreement.rs`); the
/// hand-over trace replayed in its own order gives the same rise, in
/// cycle order none.
#[test]
#[ignore]
fn first_tiles_replayed() {
    let Some((cfg, reqs, addrs)) = read_trace() else {
        return;
    };
    let mut first = ::std::collections::HashMap::new();
    for (i, a) in addrs.iter().enumerate() {
        first.entry(*a).or_insert(i);
    }
    // Request indices of each CTA's first A tile.
    let tiles: Vec<Vec<usize>> = (0..32u64)
        .map(|c| {
            (0..128u64)
                .filter_map(|r| first.get(&(GEMM_A_BASE + (128 * c + r) * 2048)).copied())
                .collect()
        })
        .collect();
    let median = |done: &dyn Fn(usize) -> u64| -> Vec<u64> {
        tiles
            .iter()
            .map(|t| {
                let mut lat: Vec<u64> = t.iter().map(|&i| done(i) - reqs[i].0).collect();
                lat.sort_unstable();
                lat.get(lat.len() / 2).copied().unwrap_or(0)
            })
            .collect()
    };
    let mean = |st: &[[u64; 3]], k: usize| -> Vec<u64> {
        tiles
            .iter()
            .map(|t| t.iter().map(|&i| st[i][k]).sum::<u64>() / t.len().max(1) as u64)
            .collect()
    };
    let in_cycle_order = hbm_stages_in_cycle_order(&cfg, &reqs).0;
    let in_trace_order = hbm_stages(&cfg, &reqs).0;
    for (name, st) in [
        ("this model, trace order", &in_trace_order),
        ("this model, cycle order", &in_cycle_order),
    ] {
        ::std::println!(
            "{name}: first-tile medians of CTA 0 to 31: {:?}",
            median(&|i| st[i][0])
        );
        ::std::println!("  mean bank wait (clocks): {:?}", mean(st, 1));
        ::std::println!("  mean column and bus wait (clocks): {:?}", mean(st, 2));
    }
    let (_, _, _, dd) = compare_all(&cfg, &reqs);
    ::std::println!(
        "line-level: first-tile medians of CTA 0 to 31: {:?}",
        median(&|i| dd[i])
    );
}

#[test]
#[ignore]
fn stream_latency_both_models() {
    let cfg = DramConfig::hbm3_h100();
    let mut x = 12345u64;
    let mut rnd = || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    for (gap_num, label) in [(8u64, "light"), (2, "medium"), (1, "heavy")] {
        for pattern in ["random", "strided8", "seq"] {
            let mut reqs = Vec::new();
            let mut now = 100u64;
            for i in 0..20000u64 {
                let line = match pattern {
                    "random" => rnd() % (1 << 24),
                    "strided8" => 1_000_000 + 8 * i,
                    _ => 2_000_000 + i,
                };
                let line = {
                    let a = line;
                    a ^ (a >> 7) ^ (a >> 14)
                };
                reqs.push((now, line, false));
                if i % gap_num == 0 {
                    now += 1;
                }
            }
            let (h, d) = compare(&cfg, &reqs);
            ::std::println!(
                "{label} {pattern}: hbm {h:.0} dram {d:.0} ({:+.1}%)",
                (h - d) / d * 100.0
            );
        }
    }
}
