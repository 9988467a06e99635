//! Arbitrary bytes as an FA3 event log: a kernel and its op file, or a
//! typed error naming the log and line, never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use simfa_core::GpuConfig;

fuzz_target!(|data: &[u8]| {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let log = dir.path().join("f.log");
    std::fs::write(&log, data).expect("writable");
    let cfg = GpuConfig::h800();
    if let Err(e) = simfa_std::fa3log::import_fa3_log(&log, &cfg, &dir.path().join("f.ops")) {
        assert!(!e.to_string().is_empty());
    }
});
