//! The line lexer: an on-demand cursor over one source line.
//!
//! Tokens are identifiers, integer literals, punctuation and the end of the
//! line (a `#` or `//` comment also ends it). Identifiers come in two
//! flavours: in [`Mode::Name`] they may contain `.` and `-` (names and
//! mnemonics such as `tma.load` or `full-bar`); in [`Mode::Expr`] they may not,
//! so `l0-1` reads as `l0 - 1`.

use core::fmt;

use super::AsmError;

/// Longest excerpt of the source quoted in a message.
const SHOW_MAX: usize = 32;

/// What a token is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Tok<'a> {
    /// An identifier.
    Ident(&'a str),
    /// An integer literal, as written (decimal or `0x` hex, `_` separators).
    Int(&'a str),
    /// One of `[ ] ( ) { } , = + - * / %`.
    Punct(char),
    /// End of the line or start of a comment.
    Eol,
}

impl fmt::Display for Tok<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Tok::Ident(s) | Tok::Int(s) => write!(f, "'{}'", show(s)),
            Tok::Punct(c) => write!(f, "'{c}'"),
            Tok::Eol => f.write_str("end of line"),
        }
    }
}

/// A token and the byte offset in its line where it starts.
#[derive(Clone, Copy, Debug)]
pub(super) struct Token<'a> {
    /// The token.
    pub tok: Tok<'a>,
    /// Byte offset of its first character.
    pub at: usize,
}

/// How identifiers are lexed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Mode {
    /// Names and mnemonics: `[A-Za-z_][A-Za-z0-9_.-]*`.
    Name,
    /// Expression variables: `[A-Za-z_][A-Za-z0-9_]*`.
    Expr,
}

/// A source position, 1-based.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub(super) struct Pos {
    /// Line.
    pub line: u32,
    /// Column in characters.
    pub col: u32,
}

impl Pos {
    /// The position 1:1.
    pub const START: Pos = Pos { line: 1, col: 1 };
}

/// A string quoted in a message, shortened when long.
pub(super) fn show(s: &str) -> String {
    match s.char_indices().nth(SHOW_MAX) {
        Some((i, _)) => format!("{}...", &s[..i]),
        None => s.to_string(),
    }
}

/// Builds an error at `pos` in `file`.
pub(super) fn error(file: &str, pos: Pos, msg: impl Into<String>) -> AsmError {
    AsmError {
        file: file.to_string(),
        line: pos.line,
        col: pos.col,
        msg: msg.into(),
    }
}

/// A cursor over one line.
pub(super) struct Line<'a> {
    text: &'a str,
    no: u32,
    pos: usize,
    file: &'a str,
}

fn saturate(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

impl<'a> Line<'a> {
    /// A cursor at the start of line `no` (1-based) with text `text`.
    pub fn new(text: &'a str, no: u32, file: &'a str) -> Self {
        Line {
            text,
            no,
            pos: 0,
            file,
        }
    }

    /// The source position of byte offset `at`.
    pub fn pos_of(&self, at: usize) -> Pos {
        let at = at.min(self.text.len());
        let col = self.text.get(..at).map_or(at, |s| s.chars().count());
        Pos {
            line: self.no,
            col: saturate(col).saturating_add(1),
        }
    }

    /// An error at byte offset `at`.
    pub fn err(&self, at: usize, msg: impl Into<String>) -> AsmError {
        error(self.file, self.pos_of(at), msg)
    }

    /// The next token without consuming it.
    pub fn peek(&self, mode: Mode) -> Result<Token<'a>, AsmError> {
        self.scan(mode).map(|(t, _)| t)
    }

    /// Consumes and returns the next token.
    pub fn next(&mut self, mode: Mode) -> Result<Token<'a>, AsmError> {
        let (t, end) = self.scan(mode)?;
        self.pos = end;
        Ok(t)
    }

    /// True (and consumed) when the next token is `c`.
    pub fn eat(&mut self, c: char) -> Result<bool, AsmError> {
        if self.peek(Mode::Expr)?.tok == Tok::Punct(c) {
            self.next(Mode::Expr)?;
            return Ok(true);
        }
        Ok(false)
    }

    /// Consumes `c` or fails with `expected 'c' {context}, found ...`.
    pub fn expect(&mut self, c: char, context: &str) -> Result<Token<'a>, AsmError> {
        let t = self.next(Mode::Name)?;
        if t.tok != Tok::Punct(c) {
            return Err(self.err(t.at, format!("expected '{c}' {context}, found {}", t.tok)));
        }
        Ok(t)
    }

    /// Fails unless the rest of the line is empty.
    pub fn expect_eol(&mut self, context: &str) -> Result<(), AsmError> {
        let t = self.next(Mode::Name)?;
        if t.tok != Tok::Eol {
            return Err(self.err(
                t.at,
                format!("expected end of line {context}, found {}", t.tok),
            ));
        }
        Ok(())
    }

    fn scan(&self, mode: Mode) -> Result<(Token<'a>, usize), AsmError> {
        let b = self.text.as_bytes();
        let mut i = self.pos;
        while i < b.len() && matches!(b[i], b' ' | b'\t' | b'\r') {
            i += 1;
        }
        let tok = |tok, end| Ok((Token { tok, at: i }, end));
        let Some(&c) = b.get(i) else {
            return tok(Tok::Eol, i);
        };
        if c == b'#' || (c == b'/' && b.get(i + 1) == Some(&b'/')) {
            return tok(Tok::Eol, i);
        }
        let word_end = |extra: bool| {
            let mut j = i + 1;
            while j < b.len()
                && (b[j].is_ascii_alphanumeric()
                    || b[j] == b'_'
                    || (extra && matches!(b[j], b'.' | b'-')))
            {
                j += 1;
            }
            j
        };
        if c.is_ascii_alphabetic() || c == b'_' {
            let j = word_end(mode == Mode::Name);
            return tok(Tok::Ident(&self.text[i..j]), j);
        }
        if c.is_ascii_digit() {
            let j = word_end(false);
            return tok(Tok::Int(&self.text[i..j]), j);
        }
        if b"[](){},=+-*/%".contains(&c) {
            return tok(Tok::Punct(c as char), i + 1);
        }
        let ch = self.text[i..].chars().next().unwrap_or('?');
        Err(self.err(i, format!("unexpected character {ch:?}")))
    }
}

/// Reads an integer literal: decimal or `0x`/`0X` hex, `_` separators.
pub(super) fn parse_int(text: &str) -> Result<u64, String> {
    let (digits, radix) = match text.strip_prefix("0x").or_else(|| text.strip_prefix("0X")) {
        Some(rest) => (rest, 16),
        None => (text, 10),
    };
    let mut v: u64 = 0;
    let mut any = false;
    for ch in digits.chars() {
        if ch == '_' {
            continue;
        }
        let d = ch
            .to_digit(radix)
            .ok_or_else(|| format!("invalid integer '{}'", show(text)))?;
        v = v
            .checked_mul(radix as u64)
            .and_then(|v| v.checked_add(d as u64))
            .ok_or_else(|| format!("integer overflow: '{}' does not fit in 64 bits", show(text)))?;
        any = true;
    }
    if !any {
        return Err(format!("invalid integer '{}'", show(text)));
    }
    Ok(v)
}
