//! Arbitrary text into the assembly parser: a kernel or a positioned error,
//! never a panic; a parsed kernel prints to text that parses back to it.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(k) = simfa_std::asm::parse_bytes(data, "fuzz.sasm") {
        let text = simfa_std::asm::print(&k);
        let again = simfa_std::asm::parse(&text, "printed.sasm").expect("printed text must parse");
        assert_eq!(again, k);
    }
});
