//! Expressions: `[-]term (+|- term)* [/ INT] [% INT] [* INT]`, the sum
//! optionally in parentheses, where a term is an integer, a variable, or a
//! product of the two. The division and the remainder apply to the whole
//! sum; the final scale (allowed only after `/` or `%`) to their result.

use core::fmt::Write as _;

use simfa_core::isa::MAX_LOOP_DEPTH;
use simfa_core::Expr;

use super::lex::{parse_int, show, Line, Mode, Tok};
use super::AsmError;

/// Variable names in canonical print order; slot `i + 1` of the accumulator.
const VARS: [&str; 5 + MAX_LOOP_DEPTH] = ["cta", "cx", "cy", "cz", "wg", "l0", "l1", "l2", "l3"];

/// Index of the first loop counter in [`VARS`].
const LOOP0: usize = 5;

/// The expected-term hint used in messages.
const TERM_HINT: &str = "an expression (integer or cta, cx, cy, cz, wg, l0..l3)";

/// Parses one expression at loop depth `depth` (counters `l0..l{depth-1}`
/// are in scope). Returns the expression and the byte offset where it starts.
pub(super) fn parse_expr(l: &mut Line<'_>, depth: usize) -> Result<(Expr, usize), AsmError> {
    let start = l.peek(Mode::Expr)?.at;
    let paren = l.eat('(')?;
    // acc[0] is the constant, acc[1 + i] the coefficient of VARS[i].
    let mut acc = [0i128; 1 + VARS.len()];
    let mut sign: i128 = if l.eat('-')? { -1 } else { 1 };
    loop {
        let (slot, value) = term(l, depth)?;
        acc[slot] = acc[slot]
            .checked_add(sign * value)
            .ok_or_else(|| l.err(start, "integer overflow in expression"))?;
        sign = match l.peek(Mode::Expr)?.tok {
            Tok::Punct('+') => 1,
            Tok::Punct('-') => -1,
            _ => break,
        };
        l.next(Mode::Expr)?;
    }
    if paren {
        l.expect(')', "to close '('")?;
    }
    let div = divisor(l, '/', "division")?;
    let rem = divisor(l, '%', "remainder")?;
    let t = l.peek(Mode::Expr)?;
    if rem != 0 && t.tok == Tok::Punct('/') {
        return Err(l.err(t.at, "'/' must come before '%' in an expression"));
    }
    let mut mul = 0;
    if div != 0 || rem != 0 {
        mul = scale(l)?;
    }
    let mut e = Expr {
        div,
        rem,
        mul,
        ..Expr::default()
    };
    e.k = i64::try_from(acc[0]).map_err(|_| {
        l.err(
            start,
            format!(
                "integer overflow: constant term {} does not fit in i64",
                acc[0]
            ),
        )
    })?;
    for (i, name) in VARS.iter().enumerate() {
        let c = i64::try_from(acc[1 + i]).map_err(|_| {
            l.err(
                start,
                format!(
                    "integer overflow: coefficient {} of {name} does not fit in i64",
                    acc[1 + i]
                ),
            )
        })?;
        match i {
            0 => e.cta = c,
            1..=3 => e.c[i - 1] = c,
            4 => e.wg = c,
            _ => e.l[i - LOOP0] = c,
        }
    }
    Ok((e, start))
}

/// One term: returns its accumulator slot and value.
fn term(l: &mut Line<'_>, depth: usize) -> Result<(usize, i128), AsmError> {
    let t = l.next(Mode::Expr)?;
    match t.tok {
        Tok::Int(s) => {
            let v = int(l, s, t.at)?;
            if !l.eat('*')? {
                return Ok((0, v));
            }
            let t = l.next(Mode::Expr)?;
            match t.tok {
                Tok::Ident(name) => Ok((var(l, name, t.at, depth)?, v)),
                tok => Err(l.err(t.at, format!("expected a variable after '*', found {tok}"))),
            }
        }
        Tok::Ident(name) => {
            let slot = var(l, name, t.at, depth)?;
            if !l.eat('*')? {
                return Ok((slot, 1));
            }
            let t = l.next(Mode::Expr)?;
            match t.tok {
                Tok::Int(s) => Ok((slot, int(l, s, t.at)?)),
                tok => Err(l.err(t.at, format!("expected an integer after '*', found {tok}"))),
            }
        }
        tok => Err(l.err(t.at, format!("expected {TERM_HINT}, found {tok}"))),
    }
}

fn int(l: &Line<'_>, s: &str, at: usize) -> Result<i128, AsmError> {
    parse_int(s).map(i128::from).map_err(|m| l.err(at, m))
}

/// Resolves a variable name to its accumulator slot, checking loop scope.
fn var(l: &Line<'_>, name: &str, at: usize, depth: usize) -> Result<usize, AsmError> {
    let Some(i) = VARS.iter().position(|v| *v == name) else {
        return Err(l.err(
            at,
            format!(
                "unknown variable '{}' (expected cta, cx, cy, cz, wg or l0..l3)",
                show(name)
            ),
        ));
    };
    if i >= LOOP0 && i - LOOP0 >= depth {
        let msg = match depth {
            0 => format!("loop counter '{name}' used outside any loop"),
            1 => format!("loop counter '{name}' used at loop depth 1 (only l0 is in scope)"),
            d => format!(
                "loop counter '{name}' used at loop depth {d} (only l0..l{} are in scope)",
                d - 1
            ),
        };
        return Err(l.err(at, msg));
    }
    Ok(1 + i)
}

/// An optional `/ INT` or `% INT`: 0 when absent.
fn divisor(l: &mut Line<'_>, op: char, what: &str) -> Result<i64, AsmError> {
    if !l.eat(op)? {
        return Ok(0);
    }
    let neg = l.eat('-')?;
    let t = l.next(Mode::Expr)?;
    let Tok::Int(s) = t.tok else {
        return Err(l.err(
            t.at,
            format!("expected an integer after '{op}', found {}", t.tok),
        ));
    };
    let v = int(l, s, t.at)?;
    if v == 0 {
        return Err(l.err(t.at, format!("{what} by zero")));
    }
    if neg {
        return Err(l.err(
            t.at,
            format!("{what} by a negative number (-{v}): the divisor must be positive"),
        ));
    }
    i64::try_from(v).map_err(|_| {
        l.err(
            t.at,
            format!("integer overflow: {what} by {v} (at most {})", i64::MAX),
        )
    })
}

/// An optional `* INT` after a division or remainder: 0 when absent.
fn scale(l: &mut Line<'_>) -> Result<i64, AsmError> {
    if !l.eat('*')? {
        return Ok(0);
    }
    let neg = l.eat('-')?;
    let t = l.next(Mode::Expr)?;
    let Tok::Int(s) = t.tok else {
        return Err(l.err(
            t.at,
            format!("expected an integer after '*', found {}", t.tok),
        ));
    };
    let v = int(l, s, t.at)?;
    let v = if neg { -v } else { v };
    if v == 0 {
        return Err(l.err(t.at, "scale by zero"));
    }
    i64::try_from(v).map_err(|_| {
        l.err(
            t.at,
            format!("integer overflow: scale {v} does not fit in i64"),
        )
    })
}

/// Appends the canonical text of `e`: `cx*128 + l0*64 + 16`, with
/// parentheses around a sum of several terms followed by `/` or `%`.
pub(super) fn write_expr(out: &mut String, e: &Expr) {
    let coefs = [
        e.cta, e.c[0], e.c[1], e.c[2], e.wg, e.l[0], e.l[1], e.l[2], e.l[3],
    ];
    let mut terms: Vec<(i64, Option<&str>)> = VARS
        .iter()
        .zip(coefs)
        .filter(|(_, c)| *c != 0)
        .map(|(v, c)| (c, Some(*v)))
        .collect();
    if e.k != 0 || terms.is_empty() {
        terms.push((e.k, None));
    }
    let paren = (e.div != 0 || e.rem != 0 || e.mul != 0) && terms.len() > 1;
    if paren {
        out.push('(');
    }
    for (i, (c, v)) in terms.iter().enumerate() {
        let neg = *c < 0;
        match (i, neg) {
            (0, true) => out.push('-'),
            (0, false) => {}
            (_, true) => out.push_str(" - "),
            (_, false) => out.push_str(" + "),
        }
        let mag = c.unsigned_abs();
        match v {
            Some(name) if mag == 1 => out.push_str(name),
            Some(name) => {
                let _ = write!(out, "{name}*{mag}");
            }
            None => {
                let _ = write!(out, "{mag}");
            }
        }
    }
    if paren {
        out.push(')');
    }
    if e.div != 0 {
        let _ = write!(out, " / {}", e.div);
    }
    if e.rem != 0 {
        let _ = write!(out, " % {}", e.rem);
    }
    if e.mul != 0 {
        let _ = write!(out, " * {}", e.mul);
    }
}

/// The canonical text of `e`.
#[cfg(test)]
pub(super) fn expr_string(e: &Expr) -> String {
    let mut s = String::new();
    write_expr(&mut s, e);
    s
}

/// Parses a line holding just one expression at loop depth `depth`.
#[cfg(test)]
pub(super) fn parse_expr_text(s: &str, depth: usize) -> Result<Expr, AsmError> {
    let mut l = Line::new(s, 1, "expr");
    let (e, _) = parse_expr(&mut l, depth)?;
    l.expect_eol("after the expression")?;
    Ok(e)
}
