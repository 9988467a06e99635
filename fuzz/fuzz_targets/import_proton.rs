//! Arbitrary bytes as a Proton chrome trace (truncated JSON, events out of
//! order, unmatched names, huge counts): a kernel and its op file, or a
//! typed error naming the trace, never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use simfa_std::proton::import::{import_proton, ImportOptions};

fuzz_target!(|data: &[u8]| {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let trace = dir.path().join("t.json");
    std::fs::write(&trace, data).expect("writable");
    if let Err(e) = import_proton(&trace, &ImportOptions::default(), &dir.path().join("t.ops")) {
        assert!(!e.to_string().is_empty());
    }
});
