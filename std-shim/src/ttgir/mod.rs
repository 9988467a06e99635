//! The TTGIR front end, two ways from a Triton or Gluon kernel to a
//! simulation.
//!
//! - **Executing the TTGIR** ([`tree`], [`interp`], [`launch`], [`lower`]):
//!   `simfa ttgir run` parses the module into functions and regions, runs
//!   every CTA's scalar code exactly with the host's arguments (a launch
//!   file), and turns the TMA copies, WGMMAs, mbarrier ops and element-wise
//!   work it reaches into a simfa kernel's WarpGroup streams, made as the
//!   simulator pulls them. No GPU and no trace.
//! - **Instrumenting it** for a trace: a source-to-source pass that wraps
//!   the timing-visible ops of Triton GPU IR (MLIR text) in Proton records,
//!   the first half of the paper's operator-agnostic path (section V-A2);
//!   the recorded trace is imported by [`crate::proton`].
//!
//! [`instrument`] wraps every TMA copy, WGMMA and WGMMA wait, and mbarrier
//! wait, arrive and expect in `proton.record start "<scope>"` /
//! `proton.record end "<scope>"`, where the [`Scope`] string says what the
//! op is and what a trace translator needs to simulate it. [`sites`] lists
//! the same ops without changing anything. Both read either op syntax
//! (custom and generic), both dialect spellings (`ttng.`/`ttg.` and the
//! older `triton_nvidia_gpu.`/`triton_gpu.`), regions, attribute
//! dictionaries, `#alias` definitions and `loc(...)`; every op the pass does
//! not know is copied byte for byte.
//!
//! The input is scanned ([`lex`]), cut into statements ([`stmt`]), the
//! recognised ones matched against one table and their scopes read from
//! their types and layouts ([`ops`], [`types`]), and records inserted
//! ([`pass`]). Malformed input (an unterminated string, unbalanced
//! brackets, an op whose shapes cannot be derived, an unknown alias) is a
//! [`TtgirError`] naming the file, line and column; no input panics.

pub mod affine;
pub mod dtype;
pub mod error;
pub mod global;
pub mod interp;
pub mod launch;
pub mod lex;
pub mod lower;
pub mod ops;
pub mod pass;
pub mod pointer;
mod registers;
pub mod scope;
pub mod simulate;
pub mod source;
pub mod stmt;
pub mod tree;
pub mod types;
pub mod value;

pub use error::{TtgirError, TtgirErrorKind};
pub use ops::{KnownOp, KNOWN_OPS};
pub use pass::{instrument, sites, Instrumented, Site};
pub use scope::{Dtype, Scope, ScopeError, ScopeKind, ScopeOp, TmaCopy, Wgmma, WgmmaMode};

/// The bytes of a file as text, or an error at the first byte that is not
/// UTF-8 (`file` names the input).
pub fn decode<'a>(file: &str, bytes: &'a [u8]) -> Result<&'a str, TtgirError> {
    std::str::from_utf8(bytes).map_err(|e| {
        let ok = e.valid_up_to();
        // The valid prefix positions the error.
        let prefix = std::str::from_utf8(&bytes[..ok]).unwrap_or("");
        TtgirError::at(file, prefix, ok, TtgirErrorKind::NotUtf8)
    })
}

/// A file of `tests/fixtures/ttgir-compiled/` (the kernels Triton 3.9
/// compiled and their launch files), for the tests.
#[cfg(test)]
pub(crate) fn compiled_fixture(name: &str) -> String {
    let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/fixtures/ttgir-compiled")
        .join(name);
    std::fs::read_to_string(p).expect("fixture exists")
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// A small file with every construct the scanner knows.
    const SEED: &str = "#mma = #ttg.nvidia_mma<{versionMajor = 3, warpsPerCTA = [4, 1], instrShape = [16, 64, 16]}>\n\
module attributes {\"ttg.num-warps\" = 4 : i32} {\n\
  tt.func @f(%d: !tt.tensordesc<tensor<64x64xf16, #s>>) {\n\
    ttng.async_tma_copy_global_to_local %d[%c0, %c1] %0, %1, %t : !tt.tensordesc<tensor<64x64xf16, #s>>, !ttg.memdesc<1xi64, #b> -> !ttg.memdesc<64x64xf16, #s> loc(\"f.py\":3:4)\n\
    %2 = ttng.warp_group_dot %0, %0, %c : !ttg.memdesc<64x64xf16, #s> * !ttg.memdesc<64x64xf16, #s> -> tensor<64x64xf32, #mma>\n\
    \"ttng.wait_barrier\"(%1, %p) : (!ttg.memdesc<1xi64, #b>, i32) -> ()\n\
    tt.return // done\n\
  }\n\
}\n";

    #[test]
    fn seed_instruments() {
        let out = instrument("seed", SEED).unwrap();
        assert_eq!(out.sites.len(), 3);
        assert_eq!(instrument("seed", &out.text).unwrap().text, out.text);
    }

    #[test]
    fn decode_reports_the_first_bad_byte() {
        let e = decode("b.mlir", b"ab\ncd\xff").unwrap_err();
        assert_eq!((e.line, e.column, e.kind), (2, 3, TtgirErrorKind::NotUtf8));
        assert_eq!(decode("b", b"ok").unwrap(), "ok");
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]

        #[test]
        fn random_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..400)) {
            if let Ok(text) = decode("r", &bytes) {
                let _ = sites("r", text);
                let _ = instrument("r", text);
            }
        }

        #[test]
        fn random_mlir_like_text_never_panics(text in "[%#!@^a-z0-9_.:=,*<>(){}\\[\\]\" \n\\\\-]{0,300}") {
            let _ = instrument("r", &text);
        }

        #[test]
        fn mutated_seed_never_panics(cut in 0usize..2000, len in 0usize..40, insert in "[ -~\n]{0,8}") {
            let mut s = SEED.to_string();
            let a = cut % (s.len() + 1);
            let b = (a + len).min(s.len());
            if s.is_char_boundary(a) && s.is_char_boundary(b) {
                s.replace_range(a..b, &insert);
                if let Ok(out) = instrument("m", &s) {
                    // Whatever parses instruments idempotently.
                    let again = instrument("m", &out.text);
                    prop_assert_eq!(again.map(|o| o.text), Ok(out.text));
                }
            }
        }
    }
}
