//! Reading MLIR types and attributes as text: shapes and element types of
//! `tensor<...>`, `!ttg.memdesc<...>` and `!tt.tensordesc<...>`, integer
//! fields of attribute dictionaries and layouts, and `#alias = ...`
//! definitions.

use std::cell::RefCell;
use std::collections::HashMap;
use std::hash::BuildHasherDefault;

use fnv::FnvHasher;

use super::lex::{tokenize, Token, TokenKind};

/// A shaped (or scalar) type, read from its text.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TypeInfo<'a> {
    /// The type's name: `tensor`, `!ttg.memdesc`, `!tt.tensordesc`, `i32`.
    pub head: &'a str,
    /// The dimensions (`128x64xf16` gives `[128, 64]`; none for a scalar).
    pub shape: Vec<u64>,
    /// The element type (`f16`, `i64`, ...).
    pub elem: &'a str,
    /// The parameters after the first (`#mma`, `#shared`, `mutable`, ...).
    pub params: Vec<&'a str>,
}

impl TypeInfo<'_> {
    /// Whether the type is a shared-memory descriptor (`!ttg.memdesc`,
    /// `!tt.memdesc`, `!triton_gpu.memdesc`).
    pub fn is_memdesc(&self) -> bool {
        self.head.starts_with('!') && self.head.ends_with(".memdesc")
    }

    /// Whether the type is a register tensor (`tensor<...>`).
    pub fn is_tensor(&self) -> bool {
        self.head == "tensor"
    }

    /// Whether the type is a TMA tensor descriptor (`!tt.tensordesc<...>`).
    pub fn is_tensordesc(&self) -> bool {
        self.head.starts_with('!') && self.head.ends_with("tensordesc")
    }

    /// Whether the type looks like an mbarrier allocation: a memdesc of
    /// `i64` elements with one element.
    pub fn is_barrier(&self) -> bool {
        self.is_memdesc() && self.elem == "i64" && self.shape.iter().product::<u64>() == 1
    }

    /// Its elements, saturating (a scalar has one).
    pub fn elements(&self) -> u64 {
        self.shape.iter().fold(1u64, |a, &d| a.saturating_mul(d))
    }

    /// The bytes it holds, if its element type has a size and the product
    /// fits.
    pub fn bytes(&self) -> Option<u64> {
        let elem = match self.elem {
            "i1" => 1,
            e => super::dtype::Dtype::from_mlir(e)?.bytes(),
        };
        self.shape.iter().try_fold(elem, |a, &d| a.checked_mul(d))
    }

    /// The layout parameter (the second one of a tensor), if any.
    pub fn encoding(&self) -> Option<&str> {
        self.params.first().copied()
    }
}

/// Top-level tokens of `toks` (between an outer bracket pair) split at `,`;
/// each piece as a byte range of the text the tokens came from.
fn split_commas(toks: &[Token]) -> Vec<(usize, usize)> {
    let mut depth = 0i32;
    let mut out = Vec::new();
    let mut from: Option<usize> = None;
    let mut to = 0;
    for t in toks {
        match t.kind {
            TokenKind::Open(_) => depth += 1,
            TokenKind::Close(_) => depth -= 1,
            TokenKind::Punct(b',') if depth == 0 => {
                if let Some(f) = from.take() {
                    out.push((f, to));
                }
                continue;
            }
            TokenKind::Newline => continue,
            _ => {}
        }
        from.get_or_insert(t.start);
        to = t.end;
    }
    if let Some(f) = from {
        out.push((f, to));
    }
    out
}

/// Reads a type's text: `head<dims x elem, params...>` or a bare scalar
/// type. `None` for text that is not one type.
pub fn parse_type(text: &str) -> Option<TypeInfo<'_>> {
    let text = text.trim();
    // The interpreter reads the same few types at every execution of an
    // op: each text is parsed once per thread, and its parts kept as
    // ranges of it.
    let key = (text.as_ptr() as usize, text.len());
    let range = |part: &str| {
        let from = part.as_ptr() as usize - text.as_ptr() as usize;
        (from, from + part.len())
    };
    let hit = PARSED.with(|seen| {
        let seen = seen.borrow();
        let p = seen.get(&key).filter(|p| &*p.text == text)?;
        let at = |(a, b): (usize, usize)| &text[a..b];
        Some(
            p.parts
                .as_ref()
                .map(|(head, shape, elem, params)| TypeInfo {
                    head: at(*head),
                    shape: shape.clone(),
                    elem: at(*elem),
                    params: params.iter().map(|&r| at(r)).collect(),
                }),
        )
    });
    if let Some(t) = hit {
        return t;
    }
    let t = parse_type_text(text);
    PARSED.with(|seen| {
        let mut seen = seen.borrow_mut();
        if seen.len() >= PARSED_MAX {
            seen.clear();
        }
        let parts = t.as_ref().map(|t| {
            let params = t.params.iter().map(|p| range(p)).collect();
            (range(t.head), t.shape.clone(), range(t.elem), params)
        });
        seen.insert(
            key,
            Parsed {
                text: text.into(),
                parts,
            },
        );
    });
    t
}

/// A type's text as [`parse_type`] read it, its parts as byte ranges of
/// it: head, shape, element type, parameters.
struct Parsed {
    text: Box<str>,
    #[allow(clippy::type_complexity)]
    parts: Option<(
        (usize, usize),
        Vec<u64>,
        (usize, usize),
        Vec<(usize, usize)>,
    )>,
}

/// The most type texts [`parse_type`] keeps per thread before it starts
/// over.
const PARSED_MAX: usize = 1 << 14;

thread_local! {
    static PARSED: RefCell<HashMap<(usize, usize), Parsed, BuildHasherDefault<FnvHasher>>> =
        RefCell::default();
}

/// [`parse_type`] without the memo.
fn parse_type_text(text: &str) -> Option<TypeInfo<'_>> {
    let toks = tokenize("", text).ok()?;
    let head = toks.first()?;
    if !matches!(head.kind, TokenKind::Word | TokenKind::Bang) {
        return None;
    }
    let head_text = head.text(text);
    if toks.len() == 1 {
        return Some(TypeInfo {
            head: head_text,
            shape: Vec::new(),
            elem: head_text,
            params: Vec::new(),
        });
    }
    let open = toks.get(1)?;
    let close = toks.last()?;
    if open.kind != TokenKind::Open(b'<') || close.kind != TokenKind::Close(b'>') {
        return None;
    }
    let pieces = split_commas(&toks[2..toks.len() - 1]);
    let first = pieces.first().and_then(|&(a, b)| text.get(a..b))?;
    let (shape, elem) = dims(first)?;
    let params = pieces[1..]
        .iter()
        .filter_map(|&(a, b)| text.get(a..b))
        .collect();
    Some(TypeInfo {
        head: head_text,
        shape,
        elem,
        params,
    })
}

/// Splits `128x64xf16` into `[128, 64]` and `f16`; an element type alone
/// (`f16`, or a nested type `tensor<...>`) has no dimensions.
fn dims(s: &str) -> Option<(Vec<u64>, &str)> {
    let mut shape = Vec::new();
    let mut rest = s;
    loop {
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        if digits == 0 || rest.as_bytes().get(digits) != Some(&b'x') {
            break;
        }
        shape.push(rest.get(..digits)?.parse().ok()?);
        rest = rest.get(digits + 1..)?;
    }
    if rest.is_empty() {
        return None;
    }
    Some((shape, rest))
}

/// The tokens of `text`, or none if it does not scan.
fn tokens(text: &str) -> Vec<Token> {
    tokenize("", text).unwrap_or_default()
}

/// The integer of the first `key = N` in `text` (an attribute dictionary
/// or layout).
pub fn find_int(text: &str, key: &str) -> Option<i64> {
    let t = tokens(text);
    t.windows(3).find_map(|w| {
        (w[0].kind == TokenKind::Word && w[0].text(text) == key && w[1].is_punct(b'='))
            .then(|| w[2].text(text).parse().ok())
            .flatten()
    })
}

/// The integers of the first `key = [a, b, ...]` in `text`.
pub fn find_ints(text: &str, key: &str) -> Option<Vec<i64>> {
    let t = tokens(text);
    let at = t.windows(3).position(|w| {
        w[0].kind == TokenKind::Word
            && w[0].text(text) == key
            && w[1].is_punct(b'=')
            && w[2].kind == TokenKind::Open(b'[')
    })?;
    let mut out = Vec::new();
    for tok in &t[at + 3..] {
        match tok.kind {
            TokenKind::Close(b']') => return Some(out),
            TokenKind::Punct(b',') | TokenKind::Newline => {}
            TokenKind::Word => out.push(tok.text(text).parse().ok()?),
            _ => return None,
        }
    }
    None
}

/// The `#name = value` and `!name = value` definitions of a file, in order.
#[derive(Clone, Debug, Default)]
pub struct Aliases<'a> {
    /// Each name's definitions, in order: where, and as what.
    defs: HashMap<&'a str, Vec<(usize, &'a str)>, BuildHasherDefault<FnvHasher>>,
}

impl<'a> Aliases<'a> {
    /// The definitions among the statements `stmts` of `src` (cut from
    /// `tokens`): every `#name = value` and `!name = value`.
    pub fn of(src: &'a str, tokens: &[Token], stmts: &[super::stmt::Stmt]) -> Self {
        let mut aliases = Aliases::default();
        for s in stmts {
            if let [name, eq, value, ..] = &tokens[s.first..s.last] {
                if matches!(name.kind, TokenKind::Hash | TokenKind::Bang) && eq.is_punct(b'=') {
                    aliases.define(
                        name.text(src),
                        s.start,
                        src.get(value.start..s.end).unwrap_or(""),
                    );
                }
            }
        }
        aliases
    }
}

impl<'a> Aliases<'a> {
    /// Records that `name` (with its `#` or `!`) is defined as `value` by
    /// the statement at byte `at`.
    pub fn define(&mut self, name: &'a str, at: usize, value: &'a str) {
        self.defs.entry(name).or_default().push((at, value));
    }

    /// The definition of `name` that a use at byte `at` sees: the last one
    /// before it, else the first one after it (MLIR prints `#loc` aliases
    /// at the end of the file).
    pub fn get(&self, name: &str, at: usize) -> Option<&'a str> {
        let mut found = None;
        for &(pos, v) in self.defs.get(name)? {
            if pos < at || found.is_none() {
                found = Some(v);
            }
            if pos > at {
                break;
            }
        }
        found
    }

    /// `text` with aliases followed until it is not a bare alias name
    /// (at most a few steps, so a cycle ends); `Err` with the unknown name.
    pub fn resolve(&self, text: &'a str, at: usize) -> Result<&'a str, &'a str> {
        let mut cur = text.trim();
        for _ in 0..8 {
            let bare = (cur.starts_with('#') || cur.starts_with('!'))
                && cur.len() > 1
                && !cur.contains(['<', ' ', '(']);
            if !bare {
                return Ok(cur);
            }
            match self.get(cur, at) {
                Some(v) => cur = v.trim(),
                // A dialect attribute without parameters (`#ttg.shared_memory`)
                // is not an alias.
                None if cur.contains('.') => return Ok(cur),
                None => return Err(cur),
            }
        }
        Ok(cur)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memdesc_and_tensor_types() {
        let t = parse_type("!ttg.memdesc<128x64xf16, #shared, #smem, mutable>").unwrap();
        assert!(t.is_memdesc());
        assert_eq!(t.shape, [128, 64]);
        assert_eq!(t.elem, "f16");
        assert_eq!(t.params, ["#shared", "#smem", "mutable"]);
        let t =
            parse_type("tensor<128x64xf16, #ttg.dot_op<{opIdx = 0, parent = #mma, kWidth = 2}>>")
                .unwrap();
        assert!(t.is_tensor());
        assert_eq!(
            t.encoding(),
            Some("#ttg.dot_op<{opIdx = 0, parent = #mma, kWidth = 2}>")
        );
        let b = parse_type("!ttg.memdesc<1xi64, #shared1, #smem, mutable>").unwrap();
        assert!(b.is_barrier());
    }

    #[test]
    fn tensordesc_nests_its_block_type() {
        let t = parse_type("!tt.tensordesc<tensor<128x128xf16, #shared>>").unwrap();
        assert!(t.is_tensordesc());
        assert_eq!(t.elem, "tensor<128x128xf16, #shared>");
        let inner = parse_type(t.elem).unwrap();
        assert_eq!(inner.shape, [128, 128]);
    }

    #[test]
    fn scalars_and_non_types() {
        let t = parse_type("i32").unwrap();
        assert!(t.shape.is_empty());
        assert_eq!(t.elem, "i32");
        assert!(parse_type("").is_none());
        assert!(parse_type("tensor<>").is_none());
        assert!(parse_type("tensor<128x>").is_none());
        assert!(parse_type("%x").is_none());
    }

    #[test]
    fn integer_fields() {
        let m = "#ttg.nvidia_mma<{versionMajor = 3, versionMinor = 0, warpsPerCTA = [8, 1], instrShape = [16, 256, 16]}>";
        assert_eq!(find_int(m, "versionMajor"), Some(3));
        assert_eq!(find_ints(m, "warpsPerCTA"), Some(vec![8, 1]));
        assert_eq!(find_ints(m, "instrShape"), Some(vec![16, 256, 16]));
        assert_eq!(find_ints(m, "nope"), None);
        assert_eq!(find_int("{pendings = 1 : i32}", "pendings"), Some(1));
    }

    #[test]
    fn aliases_resolve_to_the_nearest_definition() {
        let mut a = Aliases::default();
        a.define("#mma", 0, "#ttg.nvidia_mma<{instrShape = [16, 32, 16]}>");
        a.define("#mma", 100, "#ttg.nvidia_mma<{instrShape = [16, 64, 16]}>");
        a.define("#b", 150, "#mma");
        assert!(a.resolve("#mma", 50).unwrap().contains("32"));
        assert!(a.resolve("#mma", 200).unwrap().contains("64"));
        assert!(a.resolve("#b", 200).unwrap().contains("64"));
        assert_eq!(a.resolve("#zzz", 10), Err("#zzz"));
        assert_eq!(
            a.resolve("#ttg.shared_memory", 10),
            Ok("#ttg.shared_memory")
        );
    }
}
