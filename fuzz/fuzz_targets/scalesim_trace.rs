//! Arbitrary bytes as SCALE-Sim traces: rows, or a typed error naming the
//! file, a line the input has and a column, never a panic. The bytes are
//! read as one trace, then split at `|` into a layer's six traces (IFMAP,
//! FILTER, OFMAP SRAM; IFMAP, FILTER, OFMAP DRAM) and checked as a layer.
#![no_main]

use libfuzzer_sys::fuzz_target;
use simfa_std::scalesim::trace::TraceReader;
use simfa_std::scalesim::{check_layer, CheckOptions, ScaleSimError};

const FILES: [&str; 6] = [
    "IFMAP_SRAM_TRACE.csv",
    "FILTER_SRAM_TRACE.csv",
    "OFMAP_SRAM_TRACE.csv",
    "IFMAP_DRAM_TRACE.csv",
    "FILTER_DRAM_TRACE.csv",
    "OFMAP_DRAM_TRACE.csv",
];

fn lines(data: &[u8]) -> u64 {
    data.iter().filter(|&&b| b == b'\n').count() as u64 + 1
}

fuzz_target!(|data: &[u8]| {
    let mut r = TraceReader::new("t.csv", data);
    let mut addrs = Vec::new();
    let mut rows = 0u64;
    loop {
        match r.next_row(&mut addrs) {
            Ok(Some(_)) => rows += 1,
            Ok(None) => break,
            Err(ScaleSimError::At { file, line, column, .. }) => {
                assert_eq!(file, "t.csv");
                assert!(line >= 1 && line <= lines(data), "line {line}");
                assert!(column >= 1);
                break;
            }
            Err(e) => panic!("an in-memory trace failed without a place: {e}"),
        }
    }
    assert!(rows <= lines(data));

    let parts: Vec<&[u8]> = data.splitn(6, |&b| b == b'|').collect();
    if parts.len() < 6 {
        return;
    }
    let dir = tempfile::tempdir().expect("a temporary directory");
    for (name, part) in FILES.iter().zip(&parts) {
        std::fs::write(dir.path().join(name), part).expect("writable");
    }
    for hit_latency in [0, 1, u64::MAX] {
        let opts = CheckOptions {
            hit_latency,
            ..CheckOptions::default()
        };
        match check_layer(dir.path(), &opts) {
            Ok(l) => {
                for op in &l.operands {
                    assert!(op.addresses <= op.reads);
                    assert!(op.total() <= op.reads);
                    assert!(op.violating_addresses.iter().all(|&n| n <= op.addresses));
                }
            }
            Err(e) => assert!(e.to_string().contains(dir.path().to_str().unwrap())),
        }
    }
});
