//! A scanner for MLIR text: cuts the input into tokens with byte spans,
//! skipping `//` comments, and checks that every bracket is balanced.
//!
//! It knows just enough of MLIR's lexical grammar to never be fooled by a
//! bracket or quote inside a string or a comment: string literals (with
//! `\"`, `\\` and `\XX` escapes), SSA values (`%x`, `%12#0`), symbols
//! (`@f`, `@"f"`), attribute and type aliases or dialect names (`#mma`,
//! `!ttg.memdesc`), block labels (`^bb0`), words (identifiers, keywords and
//! numbers, `128x64xf16` included), the arrow `->`, the ellipsis `...`, the
//! eight brackets and any other character as a one-character token.
//! Newlines are tokens too: statements end at them.

use super::error::{TtgirError, TtgirErrorKind};

/// What a token is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TokenKind {
    /// A line break (`\n`).
    Newline,
    /// A string literal, quotes included.
    Str,
    /// An SSA value use or definition, `%name` (with an optional `#N`).
    Ssa,
    /// A symbol reference, `@name` or `@"name"`.
    Symbol,
    /// An attribute alias or dialect attribute, `#name` / `#dialect.attr`.
    Hash,
    /// A type alias or dialect type, `!name` / `!dialect.type`.
    Bang,
    /// A block label, `^bb0`.
    Caret,
    /// An identifier, keyword or number (`ttng.wait_barrier`, `i32`,
    /// `128x64xf16`, `0.000000e+00`, `-1`).
    Word,
    /// `->`.
    Arrow,
    /// `...`.
    Ellipsis,
    /// One of `( [ { <`.
    Open(u8),
    /// One of `) ] } >`.
    Close(u8),
    /// Any other single character (`,` `:` `=` `*` `?` ...; a non-ASCII
    /// character outside a string is one token of its full UTF-8 length).
    Punct(u8),
}

/// One token: its kind and its byte span in the input.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Token {
    /// What the token is.
    pub kind: TokenKind,
    /// Byte offset of its first byte.
    pub start: usize,
    /// Byte offset just past its last byte.
    pub end: usize,
}

impl Token {
    /// The token's text in `src`.
    pub fn text<'a>(&self, src: &'a str) -> &'a str {
        src.get(self.start..self.end).unwrap_or("")
    }

    /// Whether the token is the punctuation character `c`.
    pub fn is_punct(&self, c: u8) -> bool {
        self.kind == TokenKind::Punct(c)
    }
}

/// Characters that may continue an identifier, SSA name or alias.
fn is_id_char(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'_' | b'$' | b'.' | b'-')
}

/// Characters of a word (identifier or number); `-` is not one (it starts
/// `->`), except right after the `e` of an exponent.
fn is_word_char(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'_' | b'$' | b'.')
}

fn closer(open: u8) -> u8 {
    match open {
        b'(' => b')',
        b'[' => b']',
        b'{' => b'}',
        _ => b'>',
    }
}

/// Length of the UTF-8 character starting with byte `b` (1 for a stray
/// continuation byte, which cannot occur in a `&str` anyway).
fn char_len(b: u8) -> usize {
    match b {
        0xF0..=0xFF => 4,
        0xE0..=0xEF => 3,
        0xC0..=0xDF => 2,
        _ => 1,
    }
}

/// Cuts `src` into tokens, checking that strings are terminated and that
/// every closing bracket closes the innermost open one; `file` names the
/// input in errors. Brackets still open at the end are left to
/// [`check_closed`](super::stmt::check_closed), which knows regions.
pub fn tokenize(file: &str, src: &str) -> Result<Vec<Token>, TtgirError> {
    let b = src.as_bytes();
    let n = b.len();
    let mut out = Vec::new();
    let mut open: Vec<(u8, usize)> = Vec::new();
    let err = |at: usize, kind| TtgirError::at(file, src, at, kind);
    let mut i = 0usize;
    while i < n {
        let c = b[i];
        let start = i;
        let kind = match c {
            b'\n' => {
                i += 1;
                TokenKind::Newline
            }
            b' ' | b'\t' | b'\r' | 0x0B | 0x0C => {
                i += 1;
                continue;
            }
            b'/' if b.get(i + 1) == Some(&b'/') => {
                while i < n && b[i] != b'\n' {
                    i += 1;
                }
                continue;
            }
            b'"' => {
                i = string_end(b, i)
                    .ok_or_else(|| err(start, TtgirErrorKind::UnterminatedString))?;
                TokenKind::Str
            }
            b'%' | b'#' | b'!' | b'^' | b'@' => {
                i += 1;
                if c == b'@' && b.get(i) == Some(&b'"') {
                    i = string_end(b, i)
                        .ok_or_else(|| err(i, TtgirErrorKind::UnterminatedString))?;
                } else {
                    while i < n && is_id_char(b[i]) {
                        // `%x->` never occurs, but `#a->` in a malformed
                        // file must not swallow the arrow.
                        if b[i] == b'-' && b.get(i + 1) == Some(&b'>') {
                            break;
                        }
                        i += 1;
                    }
                    if c == b'%' && b.get(i) == Some(&b'#') {
                        let mut j = i + 1;
                        while j < n && b[j].is_ascii_digit() {
                            j += 1;
                        }
                        if j > i + 1 {
                            i = j;
                        }
                    }
                }
                match c {
                    b'%' => TokenKind::Ssa,
                    b'#' => TokenKind::Hash,
                    b'!' => TokenKind::Bang,
                    b'^' => TokenKind::Caret,
                    _ => TokenKind::Symbol,
                }
            }
            b'-' if b.get(i + 1) == Some(&b'>') => {
                i += 2;
                TokenKind::Arrow
            }
            b'.' if b.get(i + 1) == Some(&b'.') && b.get(i + 2) == Some(&b'.') => {
                i += 3;
                TokenKind::Ellipsis
            }
            b'(' | b'[' | b'{' | b'<' => {
                open.push((c, i));
                i += 1;
                TokenKind::Open(c)
            }
            b')' | b']' | b'}' | b'>' => {
                match open.pop() {
                    Some((o, _)) if closer(o) == c => {}
                    Some((o, _)) => {
                        return Err(err(
                            i,
                            TtgirErrorKind::Mismatched {
                                found: c as char,
                                open: o as char,
                            },
                        ))
                    }
                    None => return Err(err(i, TtgirErrorKind::UnopenedBracket(c as char))),
                }
                i += 1;
                TokenKind::Close(c)
            }
            _ if is_word_char(c)
                || (c == b'-' && b.get(i + 1).is_some_and(|d| d.is_ascii_digit())) =>
            {
                i += 1;
                while i < n {
                    let d = b[i];
                    let exponent_sign = matches!(d, b'+' | b'-')
                        && matches!(b[i - 1], b'e' | b'E')
                        && b[start].is_ascii_digit() | (b[start] == b'-')
                        && b.get(i + 1).is_some_and(|x| x.is_ascii_digit());
                    if is_word_char(d) || exponent_sign {
                        i += 1;
                    } else {
                        break;
                    }
                }
                TokenKind::Word
            }
            _ => {
                i = (i + char_len(c)).min(n);
                TokenKind::Punct(c)
            }
        };
        out.push(Token {
            kind,
            start,
            end: i,
        });
    }
    Ok(out)
}

/// The offset just past the closing quote of the string opening at
/// `b[at]`, or `None` if the line or the input ends first.
fn string_end(b: &[u8], at: usize) -> Option<usize> {
    let mut i = at + 1;
    while i < b.len() {
        match b[i] {
            b'"' => return Some(i + 1),
            b'\\' => i += 2,
            b'\n' => return None,
            _ => i += 1,
        }
    }
    None
}

/// The content of a string literal token (quotes removed, escapes `\"`,
/// `\\`, `\n`, `\t` and `\XX` decoded; an invalid escape is kept as is).
pub fn unquote(lit: &str) -> String {
    let inner = lit
        .strip_prefix('"')
        .and_then(|s| s.strip_suffix('"'))
        .unwrap_or(lit);
    let mut out = Vec::with_capacity(inner.len());
    let b = inner.as_bytes();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\' && i + 1 < b.len() {
            let e = b[i + 1];
            let hex = |x: u8| (x as char).to_digit(16);
            match e {
                b'"' | b'\\' => {
                    out.push(e);
                    i += 2;
                }
                b'n' => {
                    out.push(b'\n');
                    i += 2;
                }
                b't' => {
                    out.push(b'\t');
                    i += 2;
                }
                _ => match (hex(e), b.get(i + 2).and_then(|&x| hex(x))) {
                    (Some(h), Some(l)) => {
                        out.push((h * 16 + l) as u8);
                        i += 3;
                    }
                    _ => {
                        out.push(b'\\');
                        i += 1;
                    }
                },
            }
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kinds(src: &str) -> Vec<(TokenKind, String)> {
        tokenize("t", src)
            .unwrap()
            .into_iter()
            .map(|t| (t.kind, t.text(src).to_string()))
            .collect()
    }

    #[test]
    fn ssa_words_types_and_arrows() {
        let k = kinds("%136:3 = ttng.x %a#1 : !ttg.memdesc<128x64xf16> -> f32 // c\n");
        let texts: Vec<&str> = k.iter().map(|(_, t)| t.as_str()).collect();
        assert_eq!(
            texts,
            [
                "%136",
                ":",
                "3",
                "=",
                "ttng.x",
                "%a#1",
                ":",
                "!ttg.memdesc",
                "<",
                "128x64xf16",
                ">",
                "->",
                "f32",
                "\n"
            ]
        );
        assert_eq!(k[0].0, TokenKind::Ssa);
        assert_eq!(k[11].0, TokenKind::Arrow);
    }

    #[test]
    fn numbers_with_exponents_and_signs() {
        let k = kinds("0.000000e+00 -1 1.5E-3");
        let texts: Vec<&str> = k.iter().map(|(_, t)| t.as_str()).collect();
        assert_eq!(texts, ["0.000000e+00", "-1", "1.5E-3"]);
    }

    #[test]
    fn strings_hide_brackets_and_comments() {
        let k = kinds(r#"loc("a(b\"//{" : 1)"#);
        assert_eq!(k.len(), 6);
        assert_eq!(k[2].1, r#""a(b\"//{""#);
        assert_eq!(unquote(&k[2].1), "a(b\"//{");
    }

    #[test]
    fn comments_hide_brackets() {
        assert!(tokenize("t", "// ( { [\nx\n").is_ok());
    }

    #[test]
    fn unterminated_string_is_an_error_at_its_quote() {
        let e = tokenize("f.mlir", "a\n  b \"oops\nc").unwrap_err();
        assert_eq!(e.kind, TtgirErrorKind::UnterminatedString);
        assert_eq!((e.line, e.column), (2, 5));
    }

    #[test]
    fn unbalanced_brackets_are_errors() {
        let e = tokenize("f", "a(]").unwrap_err();
        assert_eq!(
            e.kind,
            TtgirErrorKind::Mismatched {
                found: ']',
                open: '('
            }
        );
        let e = tokenize("f", "}").unwrap_err();
        assert_eq!(e.kind, TtgirErrorKind::UnopenedBracket('}'));
    }

    #[test]
    fn non_ascii_outside_strings_is_one_token() {
        let k = kinds("é x");
        assert_eq!(k[0].1, "é");
        assert_eq!(k[1].1, "x");
    }

    #[test]
    fn unquote_decodes_hex_escapes() {
        assert_eq!(unquote(r#""a\41\\""#), "aA\\");
        assert_eq!(unquote(r#""\q""#), "\\q");
    }
}
