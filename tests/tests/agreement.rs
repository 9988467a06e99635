//! The transaction-level memory model against the line-level reference on
//! the small agreement suite (`simfa agreement --quick`): FA3 at three head
//! dims, causal and not, a few GEMMs, pointer-chase points and TMA
//! throughput cells, point by point.

use simfa_core::GpuConfig;
use simfa_std::agreement::{agreement, Suite};

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
        // `txn::hbm`'s tests), but the transaction model hands the DRAM
        // requests over sooner (11,126 against 7,657 in the first 500
        // cycles of the 2-D cell below) and sustains up to 18% more on
        // the full table (`simfa agreement`). Bounded here so that it
        // cannot grow.
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
