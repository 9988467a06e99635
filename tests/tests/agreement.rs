//! The transaction-level memory model against the line-level reference on
//! the small agreement suite (`simfa agreement --quick`): FA3 at three head
//! dims, causal and not, a few GEMMs, pointer-chase points and TMA
//! throughput cells, point by point.

use simfa_core::config::MemoryModel;
use simfa_core::mem::config::ArrivalController;
use simfa_core::observer::{Event, Observer};
use simfa_core::{Cycle, GpuConfig, Kernel};
use simfa_std::calibration::agreement::{agreement, Suite};
use simfa_std::gen::gemm::A_BASE;
use simfa_std::gen::{gemm, Calibration, GemmParams};
use simfa_std::run::RunOutcome;
use std::collections::HashMap;

/// The default transaction model (the arrival-order controller for the
/// memory-bound kernels and grids of less than a wave: here the pointer
/// chase, the TMA throughput cells and the small FA3s and GEMMs) is
/// within the 3% on every point.
#[test]
fn transaction_model_follows_the_line_model() {
    let a = agreement(&GpuConfig::h800(), Suite::Quick, &|_, _| {}).unwrap();
    let count = |g: &str| a.points.iter().filter(|p| p.group == g).count();
    assert_eq!(count("fa3"), 12);
    assert_eq!(count("gemm"), 3);
    assert_eq!(count("pchase"), 8);
    assert_eq!(count("tma-bw"), 6);
    for p in &a.points {
        assert!(p.line > 0.0 && p.transaction > 0.0, "{p:?}");
        assert_within(p, 3.0);
    }
    assert!(a.mape_percent < 1.0, "MAPE {}", a.mape_percent);
}

/// With the HBM service model alone deciding landings
/// (`arrival_controller = "off"`): FA3 cycles and chase latencies within
/// 3%. Throughput cells near the HBM's peak are its known miss: the two
/// HBM models agree on the same DRAM traffic (see `txn::hbm`'s tests),
/// but the service model has no FR-FCFS wait of a row switch behind
/// younger row hits, so no latency tail, and it sustains up to 10% more
/// on the full table and 12.4% more on this one's bulk 8 KB cell
/// (`simfa agreement [--quick] --arrival-controller=off`). The
/// GEMMs of less than a wave (which `"auto"` lands by the controller)
/// are its other: a chunk's lines reach the HBM model before the next
/// SM's lines that arrive with them, and a DRAM row's eight lines share
/// one channel (256x256x512: -3.1%). Both bounded here so that they
/// cannot grow.
#[test]
fn service_model_alone_follows_the_line_model_but_on_throughput_cells() {
    let mut cfg = GpuConfig::h800();
    cfg.transaction.arrival_controller = ArrivalController::Off;
    let a = agreement(&cfg, Suite::Quick, &|_, _| {}).unwrap();
    assert_eq!(a.points.len(), 29);
    for p in &a.points {
        let limit = match p.group {
            "tma-bw" => 13.0,
            "gemm" => 4.0,
            _ => 3.0,
        };
        assert_within(p, limit);
    }
    assert!(a.mape_percent < 2.0, "MAPE {}", a.mape_percent);
}

/// With the arrival-order controller deciding every kernel's landings,
/// FA3 and the GEMMs included, every point is within the 3%.
#[test]
fn arrival_controller_follows_the_line_model_everywhere() {
    let mut cfg = GpuConfig::h800();
    cfg.transaction.arrival_controller = ArrivalController::On;
    let a = agreement(&cfg, Suite::Quick, &|_, _| {}).unwrap();
    assert_eq!(a.points.len(), 29);
    for p in &a.points {
        assert_within(p, 3.0);
    }
    assert!(a.mape_percent < 1.0, "MAPE {}", a.mape_percent);
}

/// Point `p`'s transaction figure is within `limit` percent of the line
/// model's.
fn assert_within(p: &simfa_std::calibration::agreement::AgreementPoint, limit: f64) {
    assert!(
        p.error_percent.abs() <= limit,
        "{} {}: line {} transaction {} ({:+.2}%)",
        p.group,
        p.name,
        p.line,
        p.transaction,
        p.error_percent
    );
}

/// DRAM hand-overs and completions by line address (first of each), and
/// every request in the order the model handed it to its DRAM.
#[derive(Default)]
struct DramTimes {
    order: Vec<(u64, bool, u64)>,
    /// Cycle each line first left its SM's engine (line-level model only).
    emitted: HashMap<u64, u64>,
    sent: HashMap<u64, u64>,
    done: HashMap<u64, u64>,
}

impl Observer for DramTimes {
    fn on_event(&mut self, c: Cycle, e: &Event) {
        match *e {
            Event::TmaLineRequest { addr, .. } => {
                self.emitted.entry(addr).or_insert(c.0);
            }
            Event::DramRequest { addr, write } => {
                self.order.push((c.0, write, addr));
                self.sent.entry(addr).or_insert(c.0);
            }
            Event::DramDone { addr } => {
                self.done.entry(addr).or_insert(c.0);
            }
            _ => {}
        }
    }
    fn wants_detail(&self) -> bool {
        true
    }
}

impl DramTimes {
    /// Prints how far the order the model handed its DRAM requests over
    /// in strays from their cycle order; with `SIMFA_HANDOVER_TRACE=F`
    /// and the transaction model, writes them to `F` in that order, in the
    /// timed trace format (`simfa-core`'s `trace_replay` and
    /// `first_tiles_replayed` replay it).
    fn report_order(&self, memory: MemoryModel) {
        let (mut late, mut lag, mut seen) = (0usize, 0u64, 0u64);
        for &(c, _, _) in &self.order {
            late += (c < seen) as usize;
            lag = lag.max(seen.saturating_sub(c));
            seen = seen.max(c);
        }
        println!(
            "{memory}: {} DRAM requests, {late} handed over after a later one, by up to {lag} cycles",
            self.order.len()
        );
        if let (MemoryModel::Transaction, Ok(path)) =
            (memory, std::env::var("SIMFA_HANDOVER_TRACE"))
        {
            let text: String = self
                .order
                .iter()
                .map(|&(c, w, a)| format!("{c} {} 0x{a:x}\n", if w { "ST" } else { "LD" }))
                .collect();
            std::fs::write(&path, text).unwrap();
        }
    }
}

/// The kernel file `SIMFA_KERNEL` (any workload, e.g. `simfa gen tma-bw
/// --copy bulk --bytes 16KiB --total 64MiB -o F`) on the H800 under both
/// models: cycles and DRAM row hits, and the hand-over order report of
/// `DramTimes::report_order` (`SIMFA_HANDOVER_TRACE` as there):
/// `SIMFA_KERNEL=F cargo test --release -p simfa-tests --test agreement
/// handover_order -- --ignored --nocapture` (`SIMFA_RQ=N`: the
/// line-level controller's read queues hold `N` requests).
#[test]
#[ignore]
fn handover_order() {
    let Ok(path) = std::env::var("SIMFA_KERNEL") else {
        return;
    };
    let k = simfa_std::load::load_kernel(std::path::Path::new(&path)).unwrap();
    each_model(&k, |memory, t, out| {
        println!(
            "{memory}: {} cycles, {} DRAM row hits of {} requests",
            out.summary.cycles,
            out.summary.memory.map_or(0, |m| m.dram_row_hits),
            t.order.len()
        );
        // How closely the lines of each 16 KiB block (one bulk copy of
        // the 16 KiB throughput cell) leave the engine and reach the DRAM.
        let spans = |at: &HashMap<u64, u64>| -> Option<u64> {
            let mut blocks: HashMap<u64, (u64, u64)> = HashMap::new();
            for (&a, &c) in at {
                let b = blocks.entry(a >> 14).or_insert((c, c));
                *b = (b.0.min(c), b.1.max(c));
            }
            let mut s: Vec<u64> = blocks.values().map(|&(lo, hi)| hi - lo).collect();
            s.sort_unstable();
            s.get(s.len() / 2).copied()
        };
        println!(
            "{memory}: median span of a 16 KiB block's DRAM requests {:?} cycles, of its lines' emissions {:?}",
            spans(&t.sent),
            spans(&t.emitted)
        );
        // Engine to DRAM, where the model reports emissions.
        let mut w: Vec<u64> = t
            .emitted
            .iter()
            .filter_map(|(a, e)| Some(t.sent.get(a)?.saturating_sub(*e)))
            .collect();
        w.sort_unstable();
        if !w.is_empty() {
            let q = |p: usize| w[(w.len() - 1) * p / 100];
            println!(
                "{memory}: engine to DRAM per line: median {}, p90 {}, p99 {}, max {} cycles",
                q(50),
                q(90),
                q(99),
                q(100)
            );
        }
    });
}

/// Runs `k` on the H800 under the transaction and the line model with a
/// [`DramTimes`] observer, reports each run's hand-over order and gives
/// `f` the model, the observer and the outcome.
fn each_model(k: &Kernel, mut f: impl FnMut(MemoryModel, &DramTimes, &RunOutcome)) {
    for memory in [MemoryModel::Transaction, MemoryModel::Line] {
        let mut cfg = GpuConfig::h800();
        cfg.memory = memory;
        if let Ok(q) = std::env::var("SIMFA_RQ") {
            cfg.dram.read_queue = q.parse().unwrap();
        }
        let mut t = DramTimes::default();
        let out = simfa_std::run::simulate(&cfg, k, &mut t).unwrap();
        t.report_order(memory);
        f(memory, &t, &out);
    }
}

/// An experiment behind the GEMM misses of `simfa agreement`
/// (docs/memory.md, docs/experiments.md): in the calibrated
/// 4096x128x1024 GEMM (32 CTAs), the median DRAM latency of each CTA's
/// first A tile rises with the CTA index under the transaction model (CTA
/// 0 meets an idle DRAM) and does not under the line model. Prints the
/// run's cycles and those medians under each model: `cargo test --release
/// -p simfa-tests --test agreement first_tile_dram_latency -- --ignored
/// --nocapture`. (Timing every line at its own engine turn, the
/// interleaved-booking experiment of docs/experiments.md, left the rise in
/// place.)
/// With `SIMFA_HANDOVER_TRACE=F` it also writes the transaction run's DRAM
/// requests to `F` in the order the model handed them to its HBM, for
/// `first_tiles_replayed` in `simfa-core` (`txn::hbm`), which finds the
/// rise there and not in cycle order.
#[test]
#[ignore]
fn first_tile_dram_latency() {
    let p = GemmParams::new(4096, 128, 1024).calibrated(Calibration::H800);
    let k = gemm(&p).unwrap();
    // CTA c's A tile of the first iteration: rows 128c..128c+127 of 2 KiB,
    // the first 128 bytes of each.
    let tile = |c: u64| -> Vec<u64> { (0..128).map(|r| A_BASE + (128 * c + r) * 2048).collect() };
    each_model(&k, |memory, t, out| {
        let mut medians = Vec::new();
        for c in 0..32 {
            let mut lat: Vec<u64> = tile(c)
                .iter()
                .filter_map(|x| Some(t.done.get(x)? - t.sent.get(x)?))
                .collect();
            lat.sort_unstable();
            assert_eq!(lat.len(), 128, "{memory}: CTA {c}");
            medians.push(lat[lat.len() / 2]);
        }
        println!(
            "{memory}: {} cycles; median DRAM latency of each CTA's first A tile, CTA 0 to 31: {:?}",
            out.summary.cycles, medians
        );
    });
}
