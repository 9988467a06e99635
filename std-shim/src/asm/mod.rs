//! Text assembly: parser and printer.
//!
//! A kernel in text form is line oriented; `#` or `//` start a comment.
//! Top-level statements declare the kernel (`kernel`, `grid`, `cluster`, `order`,
//! `smem`), its tensor maps, mbarrier and stage arrays, and its WarpGroup
//! roles, whose bodies hold one instruction per line:
//!
//! ```text
//! kernel gemm
//! grid 8 4
//! order grouped 2
//! smem 98304
//!
//! tensormap A base=0x10000000 elem=2 dims=[4096, 1024] strides=[8192] box=[64, 128]
//! mbarrier full[2] count=1
//!
//! role producer count=1 regs=40 {
//!     loop 64 {
//!         mbar.expect_tx full[l0 % 2], 16384
//!         tma.load A, full[l0 % 2], [l0*64, cy*128]
//!     }
//! }
//! ```
//!
//! Expressions are sums of integers, variables (`cta`, `cx`, `cy`, `cz`,
//! `wg`, loop counters `l0`..`l3`, outermost first) and products of the two,
//! optionally followed by `/ INT` (floor division) and `% INT` (Euclidean
//! remainder) applying to the whole sum: `(l0 + 1) / 2 % 2`.
//!
//! [`print()`] writes canonical text that [`parse`] reads back to an identical
//! kernel. Every failure is an [`AsmError`] with a source position; the
//! parser never panics.

mod expr;
mod lex;
mod parse;
mod print;
#[cfg(test)]
mod tests;

use simfa_core::Kernel;

/// A parse error at a source position.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{file}:{line}:{col}: {msg}")]
pub struct AsmError {
    /// The file name given to [`parse`] or [`parse_bytes`].
    pub file: String,
    /// Line, 1-based.
    pub line: u32,
    /// Column in characters, 1-based.
    pub col: u32,
    /// What was expected and what was found.
    pub msg: String,
}

/// Parses text assembly into a validated [`Kernel`]. `file` names the
/// source in error messages.
pub fn parse(src: &str, file: &str) -> Result<Kernel, AsmError> {
    parse::parse_str(src, file)
}

/// Parses text assembly given as bytes: like [`parse`], but input that is
/// not UTF-8 is an error at the line and column of the first bad byte.
pub fn parse_bytes(bytes: &[u8], file: &str) -> Result<Kernel, AsmError> {
    match std::str::from_utf8(bytes) {
        Ok(src) => parse(src, file),
        Err(e) => {
            let good = std::str::from_utf8(&bytes[..e.valid_up_to()]).unwrap_or_default();
            let line = good.matches('\n').count() + 1;
            let col = good.rsplit('\n').next().map_or(0, |s| s.chars().count()) + 1;
            let bad = bytes.get(e.valid_up_to()).copied().unwrap_or(0);
            Err(AsmError {
                file: file.to_string(),
                line: u32::try_from(line).unwrap_or(u32::MAX),
                col: u32::try_from(col).unwrap_or(u32::MAX),
                msg: format!("invalid UTF-8: unexpected byte 0x{bad:02x}"),
            })
        }
    }
}

/// Prints `k` as canonical text assembly. For a kernel that came out of
/// [`parse`], `parse(&print(&k))` gives back `k` exactly.
pub fn print(k: &Kernel) -> String {
    print::print_kernel(k)
}
