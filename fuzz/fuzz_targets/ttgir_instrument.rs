//! Arbitrary bytes into the TTGIR instrumentation pass: instrumented text
//! or a positioned error, never a panic; what instruments once instruments
//! again to the same text and the same sites.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = simfa_std::ttgir::decode("fuzz.ttgir", data) else {
        return;
    };
    if let Ok(once) = simfa_std::ttgir::instrument("fuzz.ttgir", text) {
        let twice = simfa_std::ttgir::instrument("fuzz.ttgir", &once.text)
            .expect("instrumented text must instrument again");
        assert_eq!(twice.text, once.text);
        assert_eq!(twice.sites.len(), once.sites.len());
    }
});
