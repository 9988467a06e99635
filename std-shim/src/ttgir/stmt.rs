//! Statements: the token stream cut into one operation (or one region
//! brace, or one alias definition) each, and the parts of an operation's
//! text that the instrumentation reads.
//!
//! A statement starts at the first token of a line and ends at the first
//! newline outside its brackets that does not split it between an operand
//! or type and a `,` `:` `=` `->` or `*`, or at a `{` that ends its line and
//! opens a region (an op with regions is cut into its header, its regions' own
//! statements and the lines that close them). A `{` at the end of a line is
//! an attribute dictionary instead when the next line starts like one
//! (`name =` or `"name" =`), so an op whose attributes or operands span
//! several lines stays one statement.
//!
//! [`OpView`] splits one statement the way both MLIR op syntaxes print it:
//!
//! ```text
//! %r:2 = dialect.op %a[%i, %j] %b, 4 {attr = 1 : i32} : T1, T2 -> T3 loc(#loc)
//! %r = "dialect.op"(%a, %b) <{prop = 1 : i32}> ({...}) {attr} : (T1, T2) -> T3
//! ```

use super::error::{TtgirError, TtgirErrorKind};
use super::lex::{Token, TokenKind};

/// One statement: a range of tokens and the bytes they cover.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Stmt {
    /// Index of the first token.
    pub first: usize,
    /// Index just past the last token.
    pub last: usize,
    /// Byte offset of the first token.
    pub start: usize,
    /// Byte offset just past the last token.
    pub end: usize,
}

/// Cuts `tokens` (of `src`) into statements.
pub fn statements(src: &str, tokens: &[Token]) -> Vec<Stmt> {
    let mut out = Vec::new();
    let mut open: Option<usize> = None;
    let mut depth: i64 = 0;
    let close = |out: &mut Vec<Stmt>, first: usize, last: usize| {
        if last > first {
            out.push(Stmt {
                first,
                last,
                start: tokens[first].start,
                end: tokens[last - 1].end,
            });
        }
    };
    for (i, t) in tokens.iter().enumerate() {
        if t.kind == TokenKind::Newline {
            if let Some(first) = open {
                if depth <= 0 && !continues(src, tokens, first, i) {
                    close(&mut out, first, i);
                    open = None;
                }
            }
            continue;
        }
        let first = *open.get_or_insert_with(|| {
            depth = 0;
            i
        });
        match t.kind {
            TokenKind::Open(b'{') if opens_region(tokens, i) => {
                close(&mut out, first, i + 1);
                open = None;
            }
            TokenKind::Open(_) => depth += 1,
            TokenKind::Close(_) => depth -= 1,
            _ => {}
        }
    }
    if let Some(first) = open {
        close(&mut out, first, tokens.len());
    }
    out
}

/// Checks that every bracket of `tokens` is closed by the end of `src`
/// (naming the innermost one left open),
/// except the braces that open regions: an excerpt cut after a function
/// header (`tt.func @f(...) {` and nothing after its body) is still read.
pub fn check_closed(file: &str, src: &str, tokens: &[Token]) -> Result<(), TtgirError> {
    let mut open: Vec<usize> = Vec::new();
    for (i, t) in tokens.iter().enumerate() {
        match t.kind {
            TokenKind::Open(_) => open.push(i),
            TokenKind::Close(_) => {
                open.pop();
            }
            _ => {}
        }
    }
    for i in open.into_iter().rev() {
        let t = &tokens[i];
        if let TokenKind::Open(c) = t.kind {
            if !(c == b'{' && opens_region(tokens, i)) {
                return Err(TtgirError::at(
                    file,
                    src,
                    t.start,
                    TtgirErrorKind::Unclosed(c as char),
                ));
            }
        }
    }
    Ok(())
}

/// Whether the statement starting at `tokens[first]` goes on past the
/// newline at `tokens[nl]`: its line ends in `,` `:` `=` `->` or `*`, or the
/// next line starts with one of `:` `->` `*` (a block label `^bb0(...):`
/// ends at its colon). A `proton.record` line always starts a statement of
/// its own, so a record is never taken for the rest of the op before it.
fn continues(src: &str, tokens: &[Token], first: usize, nl: usize) -> bool {
    let joins = |t: &Token| {
        t.kind == TokenKind::Arrow || t.is_punct(b',') || t.is_punct(b':') || t.is_punct(b'*')
    };
    let last = &tokens[nl - 1];
    if tokens[first].kind == TokenKind::Caret {
        return false;
    }
    let next = tokens[nl..].iter().find(|t| t.kind != TokenKind::Newline);
    if next.is_some_and(|t| t.text(src) == "proton.record") {
        return false;
    }
    if joins(last) || last.is_punct(b'=') {
        return true;
    }
    tokens[nl..]
        .iter()
        .find(|t| t.kind != TokenKind::Newline)
        .is_some_and(|t| joins(t) && !t.is_punct(b','))
}

/// Whether the `{` at `tokens[i]` ends its line and the next line does not
/// look like the inside of an attribute dictionary.
fn opens_region(tokens: &[Token], i: usize) -> bool {
    if tokens.get(i + 1).map(|t| t.kind) != Some(TokenKind::Newline) {
        return false;
    }
    let mut rest = tokens[i + 1..]
        .iter()
        .filter(|t| t.kind != TokenKind::Newline);
    match (rest.next(), rest.next()) {
        (Some(a), Some(b)) => {
            let key = matches!(a.kind, TokenKind::Word | TokenKind::Str);
            !(key && b.is_punct(b'='))
        }
        _ => true,
    }
}

/// The parts of one operation statement.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct OpView<'a> {
    /// Result names (`%r`), with the count of a `%r:3` group (1 otherwise).
    pub results: Vec<(&'a str, u32)>,
    /// The op name without quotes (`ttng.wait_barrier`).
    pub name: &'a str,
    /// Whether the op is in generic syntax (`"name"(...)`).
    pub generic: bool,
    /// Operands in order: SSA values, integer literals and keywords.
    pub operands: Vec<Operand<'a>>,
    /// Attribute text: the generic `<{...}>` properties and every `{...}`
    /// attribute dictionary, braces included.
    pub attrs: Vec<&'a str>,
    /// The type signature's input side (or all of it without `->`), cut at
    /// top-level `,` and `*`, a generic `( ... )` unwrapped.
    pub ins: Vec<&'a str>,
    /// The type signature's result side (after `->`).
    pub outs: Vec<&'a str>,
}

/// One operand of an op in custom or generic syntax.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Operand<'a> {
    /// The token text (`%c0_i32`, `32768`, `deps`).
    pub text: &'a str,
    /// What the token is.
    pub kind: TokenKind,
    /// 0 outside brackets, `k` inside the `k`-th top-level `[...]` group
    /// (the first holds a TMA copy's coordinates).
    pub group: u8,
}

impl Operand<'_> {
    /// Whether the operand is an SSA value.
    pub fn is_ssa(&self) -> bool {
        self.kind == TokenKind::Ssa
    }

    /// The operand as an integer literal.
    pub fn int(&self) -> Option<i64> {
        if self.kind == TokenKind::Word {
            self.text.parse().ok()
        } else {
            None
        }
    }
}

/// Reads statement `s` as an operation, or `None` when it does not start
/// like one (a closing brace, an alias definition, an elision `...`).
pub fn op_view<'a>(src: &'a str, tokens: &[Token], s: &Stmt) -> Option<OpView<'a>> {
    let toks = &tokens[s.first..s.last];
    let mut v = OpView::default();
    let mut i = 0;
    // Results: `%a, %b:2 = `.
    if toks.first()?.kind == TokenKind::Ssa {
        loop {
            let name = toks.get(i).filter(|t| t.kind == TokenKind::Ssa)?;
            i += 1;
            let mut count = 1;
            if toks.get(i).is_some_and(|t| t.is_punct(b':')) {
                count = toks.get(i + 1)?.text(src).parse().ok()?;
                i += 2;
            }
            v.results.push((name.text(src), count));
            match toks.get(i) {
                Some(t) if t.is_punct(b',') => i += 1,
                Some(t) if t.is_punct(b'=') => {
                    i += 1;
                    break;
                }
                _ => return None,
            }
        }
    }
    let head = toks.get(i)?;
    match head.kind {
        TokenKind::Word if head.text(src).contains('.') => {
            v.name = head.text(src);
        }
        TokenKind::Str if toks.get(i + 1).map(|t| t.kind) == Some(TokenKind::Open(b'(')) => {
            let lit = head.text(src);
            v.name = lit.get(1..lit.len().saturating_sub(1)).unwrap_or("");
            v.generic = true;
        }
        _ => return None,
    }
    i += 1;
    let mut depth = 0i32;
    let mut groups = 0u8;
    let mut group = 0u8;
    let mut sig_at = None;
    let mut attr_open: Option<(usize, i32)> = None;
    while i < toks.len() {
        let t = &toks[i];
        match t.kind {
            TokenKind::Word if depth == 0 && t.text(src) == "loc" => break,
            TokenKind::Punct(b':') if depth == 0 => {
                sig_at = Some(i + 1);
                break;
            }
            TokenKind::Open(b'{') if attr_open.is_none() => {
                attr_open = Some((t.start, depth));
                depth += 1;
            }
            TokenKind::Open(b'[') => {
                depth += 1;
                if depth == 1 && !v.generic {
                    groups = groups.saturating_add(1);
                    group = groups;
                }
            }
            TokenKind::Open(_) => depth += 1,
            TokenKind::Close(c) => {
                depth -= 1;
                if let Some((at, d)) = attr_open {
                    if c == b'}' && depth == d {
                        v.attrs.push(src.get(at..t.end).unwrap_or(""));
                        attr_open = None;
                    }
                }
                if depth == 0 {
                    group = 0;
                }
            }
            TokenKind::Ssa | TokenKind::Word if attr_open.is_none() => {
                let top = if v.generic { depth == 1 } else { depth <= 1 };
                if top {
                    v.operands.push(Operand {
                        text: t.text(src),
                        kind: t.kind,
                        group,
                    });
                }
            }
            _ => {}
        }
        i += 1;
    }
    if let Some(at) = sig_at {
        (v.ins, v.outs) = signature(src, &toks[at..]);
    }
    Some(v)
}

/// A type signature (the tokens after its `:`) as its input and result
/// sides, each cut into types; without `->`, all of it is the input side.
fn signature<'a>(src: &'a str, toks: &[Token]) -> (Vec<&'a str>, Vec<&'a str>) {
    let sig: Vec<&Token> = toks
        .iter()
        .take_while(|t| !(t.kind == TokenKind::Word && t.text(src) == "loc"))
        .collect();
    let arrow = top_level(&sig, |t| t.kind == TokenKind::Arrow);
    match arrow.first() {
        Some(&a) => (split_types(src, &sig[..a]), split_types(src, &sig[a + 1..])),
        None => (split_types(src, &sig), Vec::new()),
    }
}

/// The type signature on the line that closes a generic op's regions
/// (`}) : (T) -> U`), cut into its input and result types; empty sides when the line
/// has none.
pub fn closing_signature<'a>(
    src: &'a str,
    tokens: &[Token],
    s: &Stmt,
) -> (Vec<&'a str>, Vec<&'a str>) {
    let toks = &tokens[s.first..s.last];
    // The closing brackets the line starts with opened on earlier lines.
    let mut depth = 0u32;
    let colon = toks.iter().position(|t| {
        match t.kind {
            TokenKind::Open(_) => depth += 1,
            TokenKind::Close(_) => depth = depth.saturating_sub(1),
            _ => {}
        }
        depth == 0 && t.is_punct(b':')
    });
    match colon {
        Some(i) => signature(src, &toks[i + 1..]),
        None => (Vec::new(), Vec::new()),
    }
}

/// Indices of the top-level tokens of `toks` that satisfy `f`.
fn top_level(toks: &[&Token], f: impl Fn(&Token) -> bool) -> Vec<usize> {
    let mut depth = 0i32;
    let mut out = Vec::new();
    for (i, t) in toks.iter().enumerate() {
        match t.kind {
            TokenKind::Open(_) => depth += 1,
            TokenKind::Close(_) => depth -= 1,
            _ if depth == 0 && f(t) => out.push(i),
            _ => {}
        }
    }
    out
}

/// One side of a type signature cut into types at top-level `,` and `*`,
/// with a surrounding `( ... )` removed.
fn split_types<'a>(src: &'a str, toks: &[&Token]) -> Vec<&'a str> {
    let mut toks = toks;
    if let (Some(f), Some(l)) = (toks.first(), toks.last()) {
        let wrapped = f.kind == TokenKind::Open(b'(')
            && l.kind == TokenKind::Close(b')')
            && top_level(&toks[1..toks.len() - 1], |_| false).is_empty()
            && balanced_inside(&toks[1..toks.len() - 1]);
        if wrapped {
            toks = &toks[1..toks.len() - 1];
        }
    }
    let cuts = top_level(toks, |t| t.is_punct(b',') || t.is_punct(b'*'));
    let mut out = Vec::new();
    let mut from = 0;
    for c in cuts.into_iter().chain([toks.len()]) {
        if c > from {
            let (a, b) = (toks[from].start, toks[c - 1].end);
            out.push(src.get(a..b).unwrap_or(""));
        }
        from = c + 1;
    }
    out
}

/// Whether `toks` never closes a bracket it did not open (so an outer
/// `(`...`)` pair around it is one pair).
fn balanced_inside(toks: &[&Token]) -> bool {
    let mut depth = 0i32;
    for t in toks {
        match t.kind {
            TokenKind::Open(_) => depth += 1,
            TokenKind::Close(_) => {
                depth -= 1;
                if depth < 0 {
                    return false;
                }
            }
            _ => {}
        }
    }
    depth == 0
}

#[cfg(test)]
mod tests {
    use super::super::lex::tokenize;
    use super::*;

    fn stmts(src: &str) -> Vec<String> {
        let t = tokenize("t", src).unwrap();
        statements(src, &t)
            .iter()
            .map(|s| src[s.start..s.end].to_string())
            .collect()
    }

    fn view(src: &str) -> OpView<'_> {
        let t = tokenize("t", src).unwrap();
        let s = statements(src, &t);
        op_view(src, &t, &s[0]).unwrap()
    }

    #[test]
    fn regions_are_cut_and_multiline_ops_kept() {
        let src =
            "scf.for %i = %a to %b step %c {\n  %0 = foo.bar(%x,\n     %y) : i32\n} {tt.flatten}\n";
        assert_eq!(
            stmts(src),
            [
                "scf.for %i = %a to %b step %c {",
                "%0 = foo.bar(%x,\n     %y) : i32",
                "} {tt.flatten}"
            ]
        );
    }

    #[test]
    fn a_trailing_brace_can_open_an_attribute_dictionary() {
        let src = "module attributes {\n  \"ttg.num-warps\" = 4 : i32\n} {\n  tt.return\n}\n";
        assert_eq!(
            stmts(src),
            [
                "module attributes {\n  \"ttg.num-warps\" = 4 : i32\n} {",
                "tt.return",
                "}"
            ]
        );
    }

    #[test]
    fn only_regions_may_stay_open() {
        let ok = "module {\n  tt.func @f() {\n    tt.return\n";
        let t = tokenize("t", ok).unwrap();
        assert!(check_closed("t", ok, &t).is_ok());
        for (bad, c, line) in [
            ("x\n{ <", '<', 2),
            ("%0 = foo {a = 1 : i32\n", '{', 1),
            ("f(\n", '(', 1),
        ] {
            let t = tokenize("f", bad).unwrap();
            let e = check_closed("f", bad, &t).unwrap_err();
            assert_eq!(
                (e.kind, e.line),
                (TtgirErrorKind::Unclosed(c), line),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn custom_syntax_view() {
        let v = view(
            "%3:2 = ttng.async_tma_copy_global_to_local %arg0[%c0, %c1] %0, %1, %true {x = 1 : i32} : !tt.tensordesc<tensor<128x128xf16, #shared>>, !ttg.memdesc<1xi64, #s> -> !ttg.memdesc<128x128xf16, #shared> loc(#loc)",
        );
        assert_eq!(v.results, [("%3", 2)]);
        assert_eq!(v.name, "ttng.async_tma_copy_global_to_local");
        let ops: Vec<(&str, u8)> = v.operands.iter().map(|o| (o.text, o.group)).collect();
        assert_eq!(
            ops,
            [
                ("%arg0", 0),
                ("%c0", 1),
                ("%c1", 1),
                ("%0", 0),
                ("%1", 0),
                ("%true", 0)
            ]
        );
        assert_eq!(v.attrs, ["{x = 1 : i32}"]);
        assert_eq!(
            v.ins,
            [
                "!tt.tensordesc<tensor<128x128xf16, #shared>>",
                "!ttg.memdesc<1xi64, #s>"
            ]
        );
        assert_eq!(v.outs, ["!ttg.memdesc<128x128xf16, #shared>"]);
    }

    #[test]
    fn generic_syntax_view() {
        let v = view(
            "\"ttng.wait_barrier\"(%0, %c0) <{count = 2 : i32}> {a} : (!ttg.memdesc<1xi64>, i32) -> ()",
        );
        assert!(v.generic);
        assert_eq!(v.name, "ttng.wait_barrier");
        let ops: Vec<&str> = v.operands.iter().map(|o| o.text).collect();
        assert_eq!(ops, ["%0", "%c0"]);
        assert_eq!(v.attrs, ["{count = 2 : i32}", "{a}"]);
        assert_eq!(v.ins, ["!ttg.memdesc<1xi64>", "i32"]);
        assert!(v.outs.is_empty());
    }

    #[test]
    fn dot_signature_splits_at_star() {
        let v = view("%2 = ttng.warp_group_dot %0, %1, %c : !a<1x2xf16> * !b<2x3xf16> -> tensor<1x3xf32, #mma>");
        assert_eq!(v.ins, ["!a<1x2xf16>", "!b<2x3xf16>"]);
        assert_eq!(v.outs, ["tensor<1x3xf32, #mma>"]);
    }

    #[test]
    fn non_ops_have_no_view() {
        let src = "{\n} else {\n#mma = #ttg.nvidia_mma<{}>\n...\n}\n";
        let t = tokenize("t", src).unwrap();
        for s in statements(src, &t) {
            assert!(op_view(src, &t, &s).is_none());
        }
    }
}
