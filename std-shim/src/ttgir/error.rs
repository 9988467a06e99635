//! The errors of the TTGIR front end: what is wrong, and where.

/// A failure reading or instrumenting a TTGIR file, with the position of
/// the offending text (1-based line and column, the column counted in
/// bytes from the start of the line).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{file}:{line}:{column}: {kind}")]
pub struct TtgirError {
    /// The input's name as the caller gave it (a path, or `<stdin>`).
    pub file: String,
    /// 1-based line of the offending text.
    pub line: u32,
    /// 1-based byte column of the offending text within its line.
    pub column: u32,
    /// What is wrong.
    pub kind: TtgirErrorKind,
}

/// What is wrong with a TTGIR input.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum TtgirErrorKind {
    /// The input is not UTF-8 (MLIR text always is).
    #[error("the input is not UTF-8 text")]
    NotUtf8,
    /// A string literal opened here has no closing quote on its line.
    #[error("unterminated string literal")]
    UnterminatedString,
    /// A closing bracket that does not match the innermost open one.
    #[error("unbalanced bracket: `{found}` closes `{open}`")]
    Mismatched {
        /// The closing bracket found.
        found: char,
        /// The open bracket it would close.
        open: char,
    },
    /// A closing bracket with nothing open.
    #[error("unbalanced bracket: `{0}` with no bracket open")]
    UnopenedBracket(char),
    /// A bracket opened here is never closed.
    #[error("unbalanced bracket: `{0}` is never closed")]
    Unclosed(char),
    /// A recognised op refers to an attribute alias `#name` that the file
    /// never defines.
    #[error("`{op}` uses the attribute alias `#{alias}`, which the file does not define")]
    UnknownAlias {
        /// The op's name.
        op: String,
        /// The alias, without its `#`.
        alias: String,
    },
    /// A recognised op whose scope cannot be derived from its operands,
    /// types and layouts (a WGMMA whose shapes are missing or inconsistent,
    /// a TMA copy without a box type, ...).
    #[error("cannot derive the {kind} scope of `{op}`: {why}")]
    Underivable {
        /// The scope kind (`WGMMA`, `TMA_LOAD`, ...).
        kind: &'static str,
        /// The op's name.
        op: String,
        /// What is missing or inconsistent.
        why: String,
    },
    /// An op the interpreter neither executes, times, prices nor lists as
    /// free (`std-shim/src/ttgir/interp/work.rs` has the tables).
    #[error("op '{op}' is not supported")]
    Unsupported {
        /// The op's name.
        op: String,
    },
    /// The input's structure cannot be read as a module (a `}` closing no
    /// region, a function never closed, a region of no op).
    #[error("malformed TTGIR: {why}")]
    Malformed {
        /// What is wrong.
        why: String,
    },
    /// Executing an op of the kernel failed for one CTA (a division by
    /// zero, an operand of the wrong kind, a value never defined, the step
    /// budget spent).
    #[error("`{op}` in CTA ({x}, {y}, {z}): {why}")]
    Exec {
        /// The op's name.
        op: String,
        /// The CTA's coordinates.
        x: u32,
        /// See `x`.
        y: u32,
        /// See `x`.
        z: u32,
        /// What went wrong.
        why: String,
    },
}

/// Line and column (1-based) of byte `offset` in `text`; offsets past the
/// end give the position just after the last byte.
pub fn position(text: &str, offset: usize) -> (u32, u32) {
    let bytes = text.as_bytes();
    let end = offset.min(bytes.len());
    let mut line = 1u32;
    let mut line_start = 0usize;
    for (i, &b) in bytes[..end].iter().enumerate() {
        if b == b'\n' {
            line = line.saturating_add(1);
            line_start = i + 1;
        }
    }
    let column = u32::try_from(end - line_start + 1).unwrap_or(u32::MAX);
    (line, column)
}

impl TtgirError {
    /// The error `kind` at byte `offset` of `text`, read from `file`.
    pub fn at(file: &str, text: &str, offset: usize, kind: TtgirErrorKind) -> Self {
        let (line, column) = position(text, offset);
        TtgirError {
            file: file.to_string(),
            line,
            column,
            kind,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn positions_are_one_based() {
        let t = "ab\ncd\n";
        assert_eq!(position(t, 0), (1, 1));
        assert_eq!(position(t, 1), (1, 2));
        assert_eq!(position(t, 3), (2, 1));
        assert_eq!(position(t, 100), (3, 1));
    }

    #[test]
    fn message_names_file_line_and_column() {
        let e = TtgirError::at(
            "k.mlir",
            "x\n  \"abc",
            4,
            TtgirErrorKind::UnterminatedString,
        );
        assert_eq!(e.to_string(), "k.mlir:2:3: unterminated string literal");
    }
}
