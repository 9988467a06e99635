//! Arbitrary bytes into the binary kernel decoder: it must return a kernel
//! or a typed error, never panic; a decoded kernel must re-encode to bytes
//! that decode to the same kernel and re-encode to themselves (postcard
//! accepts overlong varints, so the input itself need not be canonical).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(k) = simfa_core::encode::decode(data) {
        let canonical = simfa_std::load::encode_kernel(&k);
        let again = simfa_core::encode::decode(&canonical)
            .expect("the encoding of a decoded kernel decodes");
        assert_eq!(again, k, "decode(encode(k)) must give k back");
        assert_eq!(
            simfa_std::load::encode_kernel(&again),
            canonical,
            "the canonical encoding must be stable"
        );
    }
});
