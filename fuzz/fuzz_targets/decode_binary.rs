//! Arbitrary bytes into the binary kernel decoder: it must return a kernel
//! or a typed error, never panic; a decoded kernel must re-encode to the
//! same bytes.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(k) = simfa_core::encode::decode(data) {
        let again = simfa_std::load::encode_kernel(&k);
        assert_eq!(again.as_slice(), data, "decode/encode must round-trip exactly");
    }
});
