//! The transaction-level memory model against the line-level reference on
//! the small agreement suite (`simfa agreement --quick`): FA3 at three head
//! dims, causal and not, a few GEMMs, pointer-chase points and TMA
//! throughput cells, point by point.

use simfa_core::config::MemoryModel;
use simfa_core::observer::{Event, Observer};
use simfa_core::{Cycle, GpuConfig};
use simfa_std::agreement::{agreement, Suite};
use simfa_std::gen::gemm::A_BASE;
use simfa_std::gen::{gemm, Calibration, GemmParams};
use std::collections::HashMap;

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
        // Workload cycles and chase latencies: within the 3%.
        // Throughput cells near the HBM's peak are the model's known
        // miss: the two HBM models agree on the same DRAM traffic (see
        // `txn::hbm`'s tests), but the transaction model books an
        // operation's DRAM requests at its issue, ahead of other SMs'
        // earlier lines (`booking_order_drift` below), and sustains up to
        // 18% more on the full table (`simfa agreement`). Bounded here so
        // that it cannot grow.
        let limit = if p.group == "tma-bw" { 12.0 } else { 3.0 };
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
    assert!(a.mape_percent < 2.0, "MAPE {}", a.mape_percent);
}

/// DRAM hand-overs and completions by line address (first of each).
#[derive(Default)]
struct DramTimes {
    sent: HashMap<u64, u64>,
    done: HashMap<u64, u64>,
}

impl Observer for DramTimes {
    fn on_event(&mut self, c: Cycle, e: &Event) {
        match *e {
            Event::DramRequest { addr, .. } => {
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

/// The experiment behind the GEMM and TMA-cell misses of `simfa
/// agreement` (README, "Agreement of the two hierarchy models"): in the
/// calibrated 4096x128x1024 GEMM (32 CTAs) both models hand CTA 0's first
/// A tile to the DRAM at the same cycles, but the transaction model has
/// booked its lines when the operation issued, before the other SMs'
/// lines, so they meet an idle DRAM. Prints the run's cycles and the
/// median DRAM latency of those lines under each model:
/// `cargo test --release -p simfa-tests --test agreement
/// booking_order_drift -- --ignored --nocapture`.
#[test]
#[ignore]
fn booking_order_drift() {
    let p = GemmParams::new(4096, 128, 1024).calibrated(Calibration::H800);
    let k = gemm(&p).unwrap();
    // CTA 0's A tile of the first iteration: 128 rows of 2 KiB, the first
    // 128 bytes of each.
    let tile: Vec<u64> = (0..128).map(|r| A_BASE + r * 2048).collect();
    for memory in [MemoryModel::Transaction, MemoryModel::Line] {
        let mut cfg = GpuConfig::h800();
        cfg.memory = memory;
        let mut t = DramTimes::default();
        let out = simfa_std::run::simulate(&cfg, &k, &mut t).unwrap();
        let mut lat: Vec<u64> = tile
            .iter()
            .filter_map(|x| Some(t.done.get(x)? - t.sent.get(x)?))
            .collect();
        lat.sort_unstable();
        assert_eq!(lat.len(), tile.len(), "{memory}");
        println!(
            "{memory}: {} cycles; CTA 0's first A tile: median DRAM latency {} cycles (min {}, max {})",
            out.summary.cycles,
            lat[lat.len() / 2],
            lat[0],
            lat[lat.len() - 1]
        );
    }
}
