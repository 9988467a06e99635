//! Tests of `simfa validate` ([`super`]).

use super::*;

#[test]
fn unknown_datasets_are_named() {
    let o = ValidateOptions {
        only: vec!["nope".into()],
        ..ValidateOptions::default()
    };
    let e = validate(&o, &|_, _, _| {}).unwrap_err().to_string();
    assert!(e.contains("unknown dataset `nope`"), "{e}");
}

#[test]
fn the_small_datasets_validate() {
    let o = ValidateOptions {
        only: vec!["wgmma-latency".into(), "clocks".into()],
        ..ValidateOptions::default()
    };
    let v = validate(&o, &|_, _, _| {}).unwrap();
    assert_eq!(v.datasets.len(), 2);
    let lat = &v.datasets[0];
    assert_eq!(lat.points.len(), 12);
    // The WGMMA law reproduces Luo et al.'s latencies exactly.
    assert_eq!(lat.mape_percent, 0.0, "{}", v.to_text());
    assert_eq!(lat.status, "in-sample");
    let t = v.to_text();
    assert!(
        t.contains("wgmma-latency") && t.contains("m64n8k16 rs"),
        "{t}"
    );
}

#[test]
fn the_markdown_table_has_a_header_and_a_row_per_dataset() {
    let p = |label: &str, error_percent| Point {
        label: label.into(),
        measured: 100.0,
        simulated: 100.0 + error_percent,
        error_percent,
    };
    let v = Validation {
        memory_model: "transaction".into(),
        arrival_controller: "auto".into(),
        datasets: vec![dataset(
            "gemm-h20",
            "data/gemm_dense.csv",
            "h20",
            "TFLOP/s",
            "tensor_sustained_mhz",
            vec![p("1024^3", 16.0), p("2048^3", -1.0)],
        )],
    };
    let m = v.to_markdown();
    let lines: Vec<&str> = m.lines().collect();
    assert_eq!(
        lines[0],
        "Memory model: transaction (arrival-order controller: auto)."
    );
    assert_eq!(
        lines[2],
        "| dataset | GPU | points | MAPE | worst point | status |"
    );
    assert_eq!(lines[3], "|---|---|---:|---:|---|---|");
    assert_eq!(
        lines[4],
        "| `gemm-h20` | h20 | 2 | 8.5% | +16.0% (1024^3) | in-sample: tensor_sustained_mhz |"
    );
    assert_eq!(lines.len(), 5, "{m}");
    assert_eq!(markdown_cell("a|b\nc"), "a\\|b c");
}

#[test]
fn the_variants_order_is_per_size_and_by_throughput() {
    let v = |kernel: &str, n: u32, tflops: f64| data::GemmVariant {
        kernel: kernel.into(),
        n,
        tile: [128, 128, 64],
        stages: 2,
        consumers: 1,
        persistent_ctas: 0,
        cluster_m: 1,
        wgmma_n: 128,
        tflops,
    };
    let (a, b, c) = (
        v("a", 12288, 700.0),
        v("b", 6144, 600.0),
        v("c", 6144, 650.0),
    );
    let ran = [(&a, 100.0), (&b, 700.0), (&c, 690.0)];
    let o = variant_orders(&ran);
    assert_eq!(o.len(), 2);
    assert_eq!((o[0].n, o[1].n), (6144, 12288));
    assert_eq!(o[0].measured, "c > b");
    assert_eq!(o[0].simulated, "b > c");
    assert_eq!(o[1].measured, "a");
}
