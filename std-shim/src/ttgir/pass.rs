//! The instrumentation pass and the site lister.
//!
//! Every recognised op (see [`KNOWN_OPS`](super::ops::KNOWN_OPS)) is
//! wrapped in a pair of current-syntax Proton records carrying its scope:
//!
//! ```text
//!     proton.record start "SIMFA|MB_WAIT|bar=%1|phase=%c0|site=2"
//!     ttng.wait_barrier %1, %c0, %true : !ttg.memdesc<1xi64, #shared1, #smem, mutable>
//!     proton.record end "SIMFA|MB_WAIT|bar=%1|phase=%c0|site=2"
//! ```
//!
//! The records are new lines with the op's indentation and line ending;
//! every other byte of the input is copied unchanged. Sites are numbered
//! from 0 in file order. An op already wrapped by a `SIMFA|` start record
//! right before it and an end record right after it keeps its records
//! (their scope rewritten only if it is stale), so instrumenting the output
//! again changes nothing.

use super::error::{position, TtgirError, TtgirErrorKind};
use super::lex::{tokenize, unquote, Token, TokenKind};
use super::ops::{derive, recognise, Ctx};
use super::scope::{Scope, ScopeKind};
use super::stmt::{check_closed, op_view, statements, Stmt};
use super::types::Aliases;

/// One instrumented op.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Site {
    /// The scope its records carry.
    pub scope: Scope,
    /// The op's name as written (`ttng.warp_group_dot`).
    pub op: String,
    /// 1-based line of the op's first token.
    pub line: u32,
    /// 1-based byte column of the op's first token.
    pub column: u32,
}

impl Site {
    /// The scope's kind.
    pub fn kind(&self) -> ScopeKind {
        self.scope.kind()
    }
}

/// The result of the pass: the instrumented text and its sites.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Instrumented {
    /// The instrumented TTGIR.
    pub text: String,
    /// The sites, in file order (positions in the input).
    pub sites: Vec<Site>,
}

/// A `proton.record start|end "SIMFA|..."` statement.
#[derive(Clone, Copy, Debug)]
struct Record {
    start: bool,
    /// The string literal token holding the scope.
    name: Token,
}

/// What the pass found in one input.
struct Analysis {
    stmts: Vec<Stmt>,
    /// Per statement: its SIMFA record, if it is one.
    records: Vec<Option<Record>>,
    /// (statement index, site).
    sites: Vec<(usize, Site)>,
}

/// Reads `src` (named `file` in errors): statements, records and sites.
fn analyse(file: &str, src: &str) -> Result<Analysis, TtgirError> {
    let tokens = tokenize(file, src)?;
    check_closed(file, src, &tokens)?;
    let stmts = statements(src, &tokens);
    let aliases = Aliases::of(src, &tokens, &stmts);
    let records = stmts
        .iter()
        .map(|s| record(src, &tokens[s.first..s.last]))
        .collect();
    let mut sites = Vec::new();
    for (i, s) in stmts.iter().enumerate() {
        let Some(v) = op_view(src, &tokens, s) else {
            continue;
        };
        let Some(known) = recognise(v.name) else {
            continue;
        };
        let ctx = Ctx {
            file,
            src,
            aliases: &aliases,
            at: s.start,
        };
        let op = derive(&ctx, known, &v)?;
        let site = u32::try_from(sites.len()).map_err(|_| {
            TtgirError::at(
                file,
                src,
                s.start,
                TtgirErrorKind::Underivable {
                    kind: known.kind.name(),
                    op: v.name.to_string(),
                    why: "more than 2^32 sites".into(),
                },
            )
        })?;
        let (line, column) = position(src, s.start);
        sites.push((
            i,
            Site {
                scope: Scope { op, site },
                op: v.name.to_string(),
                line,
                column,
            },
        ));
    }
    Ok(Analysis {
        stmts,
        records,
        sites,
    })
}

/// The statement `toks` as a SIMFA record, if it is one.
fn record(src: &str, toks: &[Token]) -> Option<Record> {
    let [op, which, name, ..] = toks else {
        return None;
    };
    if op.text(src) != "proton.record" || name.kind != TokenKind::Str {
        return None;
    }
    let start = match which.text(src) {
        "start" => true,
        "end" => false,
        _ => return None,
    };
    unquote(name.text(src))
        .starts_with("SIMFA|")
        .then_some(Record { start, name: *name })
}

/// The recognised ops of `src` (named `file` in errors), in file order.
pub fn sites(file: &str, src: &str) -> Result<Vec<Site>, TtgirError> {
    Ok(analyse(file, src)?
        .sites
        .into_iter()
        .map(|(_, s)| s)
        .collect())
}

/// One change to the input: replace `start..end` by `text`.
struct Edit {
    start: usize,
    end: usize,
    text: String,
}

/// Instruments `src` (named `file` in errors).
pub fn instrument(file: &str, src: &str) -> Result<Instrumented, TtgirError> {
    let a = analyse(file, src)?;
    let bytes = src.as_bytes();
    let mut edits: Vec<Edit> = Vec::new();
    for (i, site) in &a.sites {
        let i = *i;
        let quoted = format!("\"{}\"", site.scope);
        let before = i.checked_sub(1).and_then(|j| a.records[j]);
        let after = a.records.get(i + 1).copied().flatten();
        if let (Some(b), Some(e)) = (before, after) {
            if b.start && !e.start {
                for r in [b, e] {
                    if src.get(r.name.start..r.name.end) != Some(quoted.as_str()) {
                        edits.push(Edit {
                            start: r.name.start,
                            end: r.name.end,
                            text: quoted.clone(),
                        });
                    }
                }
                continue;
            }
        }
        let s = a.stmts[i];
        let line_start = bytes[..s.start]
            .iter()
            .rposition(|&b| b == b'\n')
            .map_or(0, |p| p + 1);
        let lead = src.get(line_start..s.start).unwrap_or("");
        let at_line_start = lead.bytes().all(|b| b == b' ' || b == b'\t');
        let indent: String = if at_line_start {
            lead.to_string()
        } else {
            " ".repeat(lead.len())
        };
        let newline = bytes[s.end..]
            .iter()
            .position(|&b| b == b'\n')
            .map(|p| s.end + p);
        let eol = match newline {
            Some(p) if p > 0 && bytes[p - 1] == b'\r' => "\r\n",
            _ => "\n",
        };
        let start_rec = format!("proton.record start {quoted}");
        let end_rec = format!("proton.record end {quoted}");
        edits.push(if at_line_start {
            Edit {
                start: line_start,
                end: line_start,
                text: format!("{indent}{start_rec}{eol}"),
            }
        } else {
            Edit {
                start: s.start,
                end: s.start,
                text: format!("{start_rec}{eol}{indent}"),
            }
        });
        edits.push(match newline {
            Some(p) => Edit {
                start: p + 1,
                end: p + 1,
                text: format!("{indent}{end_rec}{eol}"),
            },
            None => Edit {
                start: src.len(),
                end: src.len(),
                text: format!("{eol}{indent}{end_rec}"),
            },
        });
    }
    // Edits come in file order except that an op's end record and the next
    // op's start record may share a position: a stable sort keeps them so.
    edits.sort_by_key(|e| e.start);
    let extra: usize = edits.iter().map(|e| e.text.len()).sum();
    let mut text = String::with_capacity(src.len() + extra);
    let mut at = 0;
    for e in &edits {
        if e.start < at {
            continue;
        }
        text.push_str(src.get(at..e.start).unwrap_or(""));
        text.push_str(&e.text);
        at = e.end;
    }
    text.push_str(src.get(at..).unwrap_or(""));
    Ok(Instrumented {
        text,
        sites: a.sites.into_iter().map(|(_, s)| s).collect(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_op_ending_in_a_colon_does_not_swallow_its_record() {
        // Found by the mutation property test: the `:` that ends this line
        // would join the `proton.record end` line to the op, and a second
        // pass would wrap it again.
        let src = "\"ttng.wait_barrier\"(%1, %p) : (!ttg.memdesc<1xi64, #b>, i32):\n";
        let once = instrument("t", src).unwrap().text;
        assert_eq!(once.matches("proton.record start").count(), 1, "{once}");
        assert_eq!(instrument("t", &once).unwrap().text, once);
    }

    const SRC: &str = "\
#mma = #ttg.nvidia_mma<{versionMajor = 3, versionMinor = 0, warpsPerCTA = [4, 1], instrShape = [16, 128, 16]}>
module {
  tt.func @k(%d: !tt.tensordesc<tensor<128x64xf16, #s>>) {
    %0 = ttg.local_alloc : () -> !ttg.memdesc<128x64xf16, #s, #smem, mutable>
    scf.for %i = %a to %b step %c {
      ttng.wait_barrier %1, %c0 : !ttg.memdesc<1xi64, #b, #smem, mutable> loc(#loc3)
      %2 = ttng.warp_group_dot %0, %4, %acc {isAsync = true} :
          !ttg.memdesc<128x64xf16, #s, #smem> * !ttg.memdesc<64x128xf16, #s, #smem> -> tensor<128x128xf32, #mma>
      %3 = ttng.warp_group_dot_wait %2 {pendings = 0 : i32} : tensor<128x128xf32, #mma>
      scf.yield
    }
    tt.return
  }
}
";

    #[test]
    fn wraps_ops_in_regions_and_multiline_ops() {
        let out = instrument("t", SRC).unwrap();
        assert_eq!(out.sites.len(), 3);
        assert_eq!(out.sites[0].line, 6);
        assert_eq!(out.sites[1].line, 7);
        let wait = "SIMFA|MB_WAIT|bar=%1|phase=%c0|site=0";
        assert!(out.text.contains(&format!(
            "      proton.record start \"{wait}\"\n      ttng.wait_barrier %1, %c0 : !ttg.memdesc<1xi64, #b, #smem, mutable> loc(#loc3)\n      proton.record end \"{wait}\"\n"
        )));
        let dot = "SIMFA|WGMMA|M=128|N=128|K=64|instrM=64|instrN=128|instrK=16|dtype=FP16|acc=FP32|mode=SS|site=1";
        assert!(out.text.contains(&format!(
            "-> tensor<128x128xf32, #mma>\n      proton.record end \"{dot}\"\n      proton.record start \"SIMFA|WGMMA_WAIT|pendings=0|site=2\"\n"
        )), "{}", out.text);
    }

    #[test]
    fn ops_inside_warp_specialize_partitions() {
        let src = "\
    ttg.warp_specialize(%bar)
    default {
      ttng.wait_barrier %bar, %c0 : !ttg.memdesc<1xi64, #b, #smem, mutable>
      ttg.warp_yield
    }
    partition0(%arg0: !ttg.memdesc<1xi64, #b, #smem, mutable>) num_warps(1) {
      \"ttng.arrive_barrier\"(%arg0) <{count = 1 : i32}> : (!ttg.memdesc<1xi64, #b, #smem, mutable>) -> ()
      ttg.warp_return
    } : (!ttg.memdesc<1xi64, #b, #smem, mutable>) -> ()
";
        let out = instrument("t", src).unwrap();
        let kinds: Vec<ScopeKind> = out.sites.iter().map(Site::kind).collect();
        assert_eq!(kinds, [ScopeKind::MbWait, ScopeKind::MbArrive]);
        assert_eq!(out.sites[1].line, 7);
        assert!(out.text.contains(
            "      proton.record start \"SIMFA|MB_ARRIVE|bar=%arg0|count=1|site=1\"\n      \"ttng.arrive_barrier\""
        ));
        assert_eq!(instrument("t", &out.text).unwrap().text, out.text);
    }

    #[test]
    fn instrumenting_twice_changes_nothing() {
        let once = instrument("t", SRC).unwrap();
        let twice = instrument("t", &once.text).unwrap();
        assert_eq!(once.text, twice.text);
        let scopes = |s: &[Site]| s.iter().map(|x| x.scope.clone()).collect::<Vec<_>>();
        assert_eq!(scopes(&once.sites), scopes(&twice.sites));
    }

    #[test]
    fn stale_records_are_rewritten() {
        let once = instrument("t", SRC).unwrap().text;
        let stale = once.replace("site=0", "site=7");
        assert_eq!(instrument("t", &stale).unwrap().text, once);
    }

    #[test]
    fn crlf_and_missing_final_newline() {
        let src = "  ttng.arrive_barrier %0, 1 : !a\r\n  ttng.arrive_barrier %0, 2 : !a";
        let out = instrument("t", src).unwrap().text;
        assert_eq!(
            out,
            "  proton.record start \"SIMFA|MB_ARRIVE|bar=%0|count=1|site=0\"\r\n  ttng.arrive_barrier %0, 1 : !a\r\n  proton.record end \"SIMFA|MB_ARRIVE|bar=%0|count=1|site=0\"\r\n  proton.record start \"SIMFA|MB_ARRIVE|bar=%0|count=2|site=1\"\n  ttng.arrive_barrier %0, 2 : !a\n  proton.record end \"SIMFA|MB_ARRIVE|bar=%0|count=2|site=1\""
        );
        assert_eq!(instrument("t", &out).unwrap().text, out);
    }

    #[test]
    fn unknown_input_is_copied() {
        let src = "foo.bar %x {a = \"}\"} : i32 // ttng.wait_barrier\n\"x.y\"() : () -> ()\n";
        assert_eq!(instrument("t", src).unwrap().text, src);
    }

    #[test]
    fn errors_carry_positions() {
        let e = instrument("f.mlir", "x\n  ttng.barrier_expect %1, %p : !a\n").unwrap_err();
        assert_eq!((e.file.as_str(), e.line, e.column), ("f.mlir", 2, 3));
        assert!(matches!(
            e.kind,
            TtgirErrorKind::Underivable {
                kind: "MB_EXPECT",
                ..
            }
        ));
    }
}
