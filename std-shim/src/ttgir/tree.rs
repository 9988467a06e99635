//! TTGIR as a tree: the module's functions, each a nest of regions, blocks
//! and ops, built from the statements [`super::stmt`] cuts, for the
//! interpreter ([`super::interp`]) to walk.
//!
//! A statement that ends with a `{` opening a region starts a region: of
//! a new op when it starts like one (`%r = scf.for ... {`, `tt.func @f(...)
//! {`), otherwise of the op just read (`} else {`, `} do {`, `default {`,
//! `partition0(...) num_warps(4) {`). A statement that starts with `}`
//! closes the innermost region; what follows the brace on its line (the
//! loop's `{tt.num_stages = 3 : i32}`, a generic op's `) : (T) -> T`) is
//! kept as the op's tail. A block label `^bb0(...):` starts a block. Alias
//! definitions and elisions (`...`) are skipped.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use super::error::{TtgirError, TtgirErrorKind};
use super::lex::{tokenize, Token, TokenKind};
use super::ops::{derive, recognise, Ctx};
use super::scope::ScopeOp;
use super::stmt::{check_closed, closing_signature, op_view, statements, OpView, Stmt};
use super::types::Aliases;

/// One op with its regions.
#[derive(Clone, Debug)]
pub struct Node<'a> {
    /// The op's statement (for a region op, its header line).
    pub stmt: Stmt,
    /// The op's parts.
    pub view: OpView<'a>,
    /// What a recognised timing-visible op is (TMA copy, WGMMA, mbarrier
    /// op), with its static shapes.
    pub scope: Option<ScopeOp>,
    /// Its regions, in order.
    pub regions: Vec<Region<'a>>,
    /// The statement that opened each region (the op's own header for the
    /// first).
    pub region_heads: Vec<Stmt>,
    /// The text after the last closing brace (attributes, a generic op's
    /// types), empty for an op without regions.
    pub tail: &'a str,
}

/// A region: its blocks.
#[derive(Clone, Debug, Default)]
pub struct Region<'a> {
    /// The blocks, the entry block first.
    pub blocks: Vec<Block<'a>>,
}

/// A block: its arguments (from a `^bb0(%a: T, ...)` label) and ops.
#[derive(Clone, Debug, Default)]
pub struct Block<'a> {
    /// The argument names of its label, if it has one.
    pub args: Vec<&'a str>,
    /// Its ops, in order.
    pub ops: Vec<Node<'a>>,
}

/// One `tt.func`.
#[derive(Clone, Debug)]
pub struct Func<'a> {
    /// The symbol, without `@`.
    pub name: &'a str,
    /// Whether it is `public` (a kernel entry).
    pub public: bool,
    /// The arguments: SSA name and type text.
    pub args: Vec<(&'a str, &'a str)>,
    /// The body.
    pub body: Region<'a>,
    /// Byte offset of its header.
    pub at: usize,
}

/// A parsed TTGIR module.
#[derive(Debug)]
pub struct Module<'a> {
    /// The input's name, for errors.
    pub file: String,
    /// The input.
    pub src: &'a str,
    /// The module's attribute text (`module attributes {...}`), empty
    /// without one.
    pub attrs: &'a str,
    /// Its functions, in order.
    pub funcs: Vec<Func<'a>>,
    /// Its `#name = ...` and `!name = ...` definitions.
    pub aliases: Aliases<'a>,
    /// The blocked layouts read so far, by the place and length of their
    /// text ([`Module::blocked`] runs for every address tensor op).
    blocked_seen: Mutex<HashMap<(usize, usize), SeenLayout>>,
}

/// A layout text's blocked layout, if it is one.
type SeenLayout = Option<Arc<BlockedLayout>>;

/// A `#ttg.blocked` layout's `sizePerThread`, `threadsPerWarp` and
/// `order`.
pub type BlockedLayout = [Vec<i64>; 3];

impl<'a> Module<'a> {
    /// An error at byte `at` of the input.
    pub fn error(&self, at: usize, kind: TtgirErrorKind) -> TtgirError {
        TtgirError::at(&self.file, self.src, at, kind)
    }

    /// The function called `name`, or the only public one when `name` is
    /// `None`.
    pub fn func(&self, name: Option<&str>) -> Option<&Func<'a>> {
        match name {
            Some(n) => self.funcs.iter().find(|f| f.name == n),
            None => {
                let mut public = self.funcs.iter().filter(|f| f.public);
                match (public.next(), public.next()) {
                    (Some(f), None) => Some(f),
                    _ => None,
                }
            }
        }
    }

    /// The layout a tensor or memdesc type `ty` (at byte `at`) names: the
    /// definition of its `#alias`, or the layout written inline
    /// (`#ttg.dot_op<...>`); `None` without one.
    pub fn layout<'t>(&'t self, ty: &'t str, at: usize) -> Option<&'t str> {
        let start = ty.find('#')?;
        let name = ty[start..]
            .split(|c: char| c == ',' || c == '>' || c.is_whitespace())
            .next()?;
        Some(self.aliases.get(name, at).unwrap_or(&ty[start..]))
    }

    /// The swizzle span, in bytes, of the shared layout a tensor or
    /// descriptor type `ty` (at byte `at`) names: its layout's
    /// `swizzlingByteWidth` (`None` without one).
    pub fn swizzle_bytes(&self, ty: &str, at: usize) -> Option<u64> {
        let w = super::types::find_int(self.layout(ty, at)?, "swizzlingByteWidth")?;
        u64::try_from(w).ok().filter(|&w| w > 0)
    }

    /// The `#ttg.blocked` layout a tensor type `ty` (at byte `at`) names:
    /// `sizePerThread`, `threadsPerWarp` and `order` (`None` for another
    /// layout).
    pub fn blocked(&self, ty: &str, at: usize) -> Option<Arc<BlockedLayout>> {
        let value = self.layout(ty, at)?;
        let key = (value.as_ptr() as usize, value.len());
        let mut seen = self.blocked_seen.lock().unwrap_or_else(|e| e.into_inner());
        seen.entry(key)
            .or_insert_with(|| {
                if !value.starts_with("#ttg.blocked<") && !value.starts_with("#triton_gpu.blocked<")
                {
                    return None;
                }
                let f = |k| super::types::find_ints(value, k);
                Some(Arc::new([
                    f("sizePerThread")?,
                    f("threadsPerWarp")?,
                    f("order")?,
                ]))
            })
            .clone()
    }

    /// The integer module attribute `key` (`"ttg.num-warps" = 8 : i32`).
    pub fn attr_int(&self, key: &str) -> Option<i64> {
        let toks = tokenize("", self.attrs).ok()?;
        let quoted = format!("\"{key}\"");
        toks.windows(3).find_map(|w| {
            let k = w[0].text(self.attrs);
            ((k == key || k == quoted) && w[1].is_punct(b'='))
                .then(|| w[2].text(self.attrs).parse().ok())
                .flatten()
        })
    }
}

/// A region being filled: the op that owns it and the region so far.
struct Frame<'a> {
    node: Node<'a>,
    region: Region<'a>,
}

impl<'a> Frame<'a> {
    /// A new region of `node`, its entry block taking `args`.
    fn open(node: Node<'a>, args: Vec<&'a str>) -> Self {
        Frame {
            node,
            region: Region {
                blocks: vec![Block {
                    args,
                    ops: Vec::new(),
                }],
            },
        }
    }
}

fn malformed(file: &str, src: &str, at: usize, why: &str) -> TtgirError {
    TtgirError::at(
        file,
        src,
        at,
        TtgirErrorKind::Malformed {
            why: why.to_string(),
        },
    )
}

/// Parses `src` (read from `file`) into a module.
pub fn parse<'a>(file: &str, src: &'a str) -> Result<Module<'a>, TtgirError> {
    let tokens = tokenize(file, src)?;
    check_closed(file, src, &tokens)?;
    let stmts = statements(src, &tokens);
    let aliases = Aliases::of(src, &tokens, &stmts);
    let mut module_attrs = "";
    let mut modules = 0u32;
    // The root: the module's body (or the file, for a module without a
    // header).
    let root = Node {
        stmt: Stmt {
            first: 0,
            last: 0,
            start: 0,
            end: 0,
        },
        view: OpView::default(),
        scope: None,
        regions: Vec::new(),
        region_heads: Vec::new(),
        tail: "",
    };
    let mut stack: Vec<Frame<'a>> = vec![Frame::open(root, Vec::new())];
    for s in &stmts {
        let toks = &tokens[s.first..s.last];
        let Some(first) = toks.first() else { continue };
        let text = src.get(s.start..s.end).unwrap_or("");
        let opens = toks.last().is_some_and(|t| t.kind == TokenKind::Open(b'{'))
            && tokens
                .get(s.last)
                .map_or(true, |t| t.kind == TokenKind::Newline);
        let closes = first.kind == TokenKind::Close(b'}');
        if matches!(first.kind, TokenKind::Hash | TokenKind::Bang) && !opens {
            // `#name = #dialect<...>`: read by `Aliases::of`.
            continue;
        }
        if closes && stack.len() == 1 && modules > 0 {
            // The module's own closing brace.
            modules -= 1;
            continue;
        }
        if closes {
            let mut f = stack
                .pop()
                .filter(|_| !stack.is_empty())
                .ok_or_else(|| malformed(file, src, s.start, "`}` closes no region"))?;
            f.node.regions.push(f.region);
            f.node.tail = text.get(1..).unwrap_or("").trim();
            // A generic op's types come on the line that closes it.
            let (ins, outs) = closing_signature(src, &tokens, s);
            if !ins.is_empty() || !outs.is_empty() {
                (f.node.view.ins, f.node.view.outs) = (ins, outs);
            }
            if opens {
                // `} else {`: the same op's next region.
                f.node.region_heads.push(*s);
                stack.push(Frame::open(f.node, Vec::new()));
            } else {
                let top = stack.last_mut().expect("the root stays");
                current_block(&mut top.region).ops.push(f.node);
            }
            continue;
        }
        if first.kind == TokenKind::Caret {
            let top = stack.last_mut().expect("the root stays");
            top.region.blocks.push(Block {
                args: block_args(src, toks),
                ops: Vec::new(),
            });
            continue;
        }
        let is_module = first.kind == TokenKind::Word && first.text(src) == "module";
        if is_module {
            if let Some(i) = text.find("attributes") {
                module_attrs = text[i..].trim_end_matches('{').trim();
            }
            if opens {
                // The module's body is the root's.
                modules += 1;
                continue;
            }
        }
        let view = op_view(src, &tokens, s);
        match (view, opens) {
            (Some(view), _) if !view.name.is_empty() => {
                let scope = match recognise(view.name) {
                    Some(k) => {
                        let ctx = Ctx {
                            file,
                            src,
                            aliases: &aliases,
                            at: s.start,
                        };
                        Some(derive(&ctx, k, &view)?)
                    }
                    None => None,
                };
                let node = Node {
                    stmt: *s,
                    view,
                    scope,
                    regions: Vec::new(),
                    region_heads: if opens { vec![*s] } else { Vec::new() },
                    tail: "",
                };
                if opens {
                    stack.push(Frame::open(node, Vec::new()));
                } else {
                    let top = stack.last_mut().expect("the root stays");
                    current_block(&mut top.region).ops.push(node);
                }
            }
            (_, true) => {
                // `default {`, `partition0(%a: T) num_warps(4) {`: a
                // further region of the op just read in this block, whose
                // arguments (a partition's captures) its header names.
                let top = stack.last_mut().expect("the root stays");
                let mut node = current_block(&mut top.region).ops.pop().ok_or_else(|| {
                    malformed(file, src, s.start, "a region that belongs to no op")
                })?;
                node.region_heads.push(*s);
                stack.push(Frame::open(node, block_args(src, toks)));
            }
            _ => {}
        }
    }
    // An unclosed module body (or a file without a module) is read as far
    // as it goes; a function left open is an error.
    while stack.len() > 1 {
        let f = stack.pop().expect("checked");
        if f.node.view.name == "tt.func" {
            return Err(malformed(
                file,
                src,
                f.node.stmt.start,
                "the function's body is never closed",
            ));
        }
        let mut node = f.node;
        node.regions.push(f.region);
        let top = stack.last_mut().expect("the root stays");
        current_block(&mut top.region).ops.push(node);
    }
    let root = stack.pop().expect("the root stays");
    let mut funcs = Vec::new();
    for block in root.region.blocks {
        for node in block.ops {
            if node.view.name == "tt.func" {
                funcs.push(func(file, src, &tokens, node)?);
            }
        }
    }
    Ok(Module {
        file: file.to_string(),
        src,
        attrs: module_attrs,
        funcs,
        aliases,
        blocked_seen: Mutex::default(),
    })
}

fn current_block<'r, 'a>(r: &'r mut Region<'a>) -> &'r mut Block<'a> {
    if r.blocks.is_empty() {
        r.blocks.push(Block::default());
    }
    r.blocks.last_mut().expect("just pushed")
}

/// The argument names of a block label `^bb0(%a: T, %b: U):` (or of a
/// partition header `partition0(%a: T) num_warps(4) {`).
fn block_args<'a>(src: &'a str, toks: &[Token]) -> Vec<&'a str> {
    let mut depth = 0;
    let mut out = Vec::new();
    let mut expect_name = false;
    for t in toks {
        match t.kind {
            TokenKind::Open(_) => {
                depth += 1;
                expect_name = depth == 1;
            }
            TokenKind::Close(_) => depth -= 1,
            TokenKind::Punct(b',') if depth == 1 => expect_name = true,
            TokenKind::Ssa if depth == 1 && expect_name => {
                out.push(t.text(src));
                expect_name = false;
            }
            _ => {}
        }
    }
    out
}

/// A `tt.func` node as a function: its symbol, visibility and arguments.
fn func<'a>(
    file: &str,
    src: &'a str,
    tokens: &[Token],
    node: Node<'a>,
) -> Result<Func<'a>, TtgirError> {
    let toks = &tokens[node.stmt.first..node.stmt.last];
    let at = node.stmt.start;
    let sym = toks
        .iter()
        .position(|t| t.kind == TokenKind::Symbol)
        .ok_or_else(|| malformed(file, src, at, "a function without a name"))?;
    let name = toks[sym]
        .text(src)
        .trim_start_matches('@')
        .trim_matches('"');
    let public = toks[..sym].iter().any(|t| t.text(src) == "public");
    let mut args = Vec::new();
    if toks.get(sym + 1).map(|t| t.kind) == Some(TokenKind::Open(b'(')) {
        // `(%a: T {attrs} loc(...), ...)`: each name, and its type up to
        // the first top-level `{` or `loc`.
        let mut depth = 0i32;
        let mut i = sym + 1;
        let mut cur: Option<(&'a str, usize, Option<usize>)> = None;
        while i < toks.len() {
            let t = &toks[i];
            match t.kind {
                TokenKind::Open(_) => {
                    depth += 1;
                    if depth == 2 && t.kind == TokenKind::Open(b'{') {
                        if let Some(c) = cur.as_mut() {
                            c.2.get_or_insert(t.start);
                        }
                    }
                }
                TokenKind::Close(_) => {
                    depth -= 1;
                    if depth == 0 {
                        push_arg(src, &mut args, cur.take(), t.start);
                        break;
                    }
                }
                TokenKind::Ssa if depth == 1 => {
                    cur = Some((t.text(src), 0, None));
                }
                TokenKind::Punct(b':') if depth == 1 => {
                    if let Some(c) = cur.as_mut() {
                        c.1 = t.end;
                    }
                }
                TokenKind::Word if depth == 1 && t.text(src) == "loc" => {
                    if let Some(c) = cur.as_mut() {
                        c.2.get_or_insert(t.start);
                    }
                }
                TokenKind::Punct(b',') if depth == 1 => {
                    push_arg(src, &mut args, cur.take(), t.start);
                }
                _ => {}
            }
            i += 1;
        }
    }
    let body = node.regions.into_iter().next().unwrap_or_default();
    Ok(Func {
        name,
        public,
        args,
        body,
        at,
    })
}

fn push_arg<'a>(
    src: &'a str,
    args: &mut Vec<(&'a str, &'a str)>,
    cur: Option<(&'a str, usize, Option<usize>)>,
    end: usize,
) {
    if let Some((name, ty_start, ty_end)) = cur {
        let ty = src
            .get(ty_start..ty_end.unwrap_or(end))
            .unwrap_or("")
            .trim();
        args.push((name, ty));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LOOP: &str = "#s = #ttg.swizzled_shared<{vec = 1}>\n\
module attributes {\"ttg.num-warps\" = 8 : i32} {\n\
  tt.func public @k(%arg0: i32 {tt.divisibility = 16 : i32} loc(\"x\"(#loc)), %d: !tt.tensordesc<64x64xf16, #s>) attributes {noinline = false} {\n\
    %c0 = arith.constant 0 : i32\n\
    %r:2 = scf.for %i = %c0 to %arg0 step %c1 iter_args(%a = %c0, %b = %c0) -> (i32, i32)  : i32 {\n\
      %x = arith.addi %a, %i : i32\n\
      %y = scf.if %t -> (i32) {\n\
        scf.yield %x : i32\n\
      } else {\n\
        scf.yield %a : i32\n\
      }\n\
      scf.yield %x, %y : i32, i32\n\
    } {tt.num_stages = 3 : i32}\n\
    %m = \"tt.reduce\"(%r#0) <{axis = 1 : i32}> ({\n\
    ^bb0(%p: f32, %q: f32):\n\
      %s = arith.addf %p, %q : f32\n\
      tt.reduce.return %s : f32\n\
    }) : (tensor<4xf32>) -> f32\n\
    tt.return\n\
  }\n\
}\n";

    #[test]
    fn regions_nest_and_close() {
        let m = parse("t.mlir", LOOP).unwrap();
        assert_eq!(m.attr_int("ttg.num-warps"), Some(8));
        let f = m.func(None).unwrap();
        assert_eq!(f.name, "k");
        assert!(f.public);
        assert_eq!(
            f.args,
            vec![("%arg0", "i32"), ("%d", "!tt.tensordesc<64x64xf16, #s>")]
        );
        let ops = &f.body.blocks[0].ops;
        let names: Vec<&str> = ops.iter().map(|n| n.view.name).collect();
        assert_eq!(
            names,
            ["arith.constant", "scf.for", "tt.reduce", "tt.return"]
        );
        let lp = &ops[1];
        assert_eq!(lp.regions.len(), 1);
        assert_eq!(lp.tail, "{tt.num_stages = 3 : i32}");
        let body: Vec<&str> = lp.regions[0].blocks[0]
            .ops
            .iter()
            .map(|n| n.view.name)
            .collect();
        assert_eq!(body, ["arith.addi", "scf.if", "scf.yield"]);
        let iff = &lp.regions[0].blocks[0].ops[1];
        assert_eq!(iff.regions.len(), 2);
        let red = &ops[2];
        assert_eq!(red.regions[0].blocks.len(), 2);
        assert_eq!(red.regions[0].blocks[1].args, ["%p", "%q"]);
        assert!(red.tail.starts_with(") : (tensor<4xf32>)"));
        // A generic op's types come from the line that closes it.
        assert_eq!(
            (red.view.ins.clone(), red.view.outs.clone()),
            (vec!["tensor<4xf32>"], vec!["f32"])
        );
        // The loop's attributes on its closing line are not a signature.
        assert!(
            lp.view.outs.is_empty() || lp.view.outs == ["(i32, i32)"],
            "{:?}",
            lp.view.outs
        );
    }

    #[test]
    fn warp_specialize_partitions_are_regions_of_one_op() {
        let src = "tt.func @f() {\n\
  ttg.warp_specialize(%a) attributes {requestedRegisters = array<i32: 24>}\n\
  default {\n\
    ttg.warp_yield\n\
  }\n\
  partition0(%x: i32) num_warps(4) {\n\
    ttg.warp_return\n\
  } : (i32) -> ()\n\
  tt.return\n\
}\n";
        let m = parse("w.mlir", src).unwrap();
        let f = m.func(Some("f")).unwrap();
        assert!(!f.public);
        let ws = &f.body.blocks[0].ops[0];
        assert_eq!(ws.view.name, "ttg.warp_specialize");
        assert_eq!(ws.regions.len(), 2);
        assert_eq!(ws.region_heads.len(), 2);
        assert_eq!(f.body.blocks[0].ops[1].view.name, "tt.return");
    }

    #[test]
    fn stray_braces_and_open_functions_are_errors() {
        let e = parse("b.mlir", "tt.func @f() {\n  tt.return\n").unwrap_err();
        assert!(e.to_string().contains("never closed"), "{e}");
        let e = parse("b.mlir", "}\n").unwrap_err();
        assert!(e.to_string().starts_with("b.mlir:1:1:"), "{e}");
    }
}
