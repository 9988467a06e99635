//! Role bodies: one instruction per line, and `loop COUNT {`.

use simfa_core::isa::{ExprId, MAX_LOOP_DEPTH};
use simfa_core::kernel::{
    MAX_CODE, MAX_COUNTERS, MAX_EXPRS, MAX_LOCKS, NAMED_BARRIERS, WG_THREADS,
};
use simfa_core::{Expr, Instr, Ref, UnitClass, WgmmaMode, Work};

use super::super::expr::parse_expr;
use super::super::lex::{error, parse_int, show, Line, Mode, Pos, Tok};
use super::super::AsmError;
use super::{uint, Block, Kind, Parser, STATEMENTS};

/// Reads the N of `wgmma N` or `wgmma m64nNk16` and checks it is a Hopper shape.
fn wgmma_n(l: &mut Line<'_>) -> Result<u16, AsmError> {
    let t = l.next(Mode::Name)?;
    let n = match t.tok {
        Tok::Int(s) => parse_int(s).map_err(|m| l.err(t.at, m))?,
        Tok::Ident(s) => {
            let mid = s
                .strip_prefix("m64n")
                .and_then(|s| s.strip_suffix("k16"))
                .filter(|m| !m.is_empty() && m.bytes().all(|b| b.is_ascii_digit()));
            let Some(mid) = mid else {
                return Err(l.err(
                    t.at,
                    format!(
                        "expected a wgmma shape (N or m64nNk16), found '{}'",
                        show(s)
                    ),
                ));
            };
            parse_int(mid).map_err(|m| l.err(t.at, m))?
        }
        tok => {
            return Err(l.err(
                t.at,
                format!("expected a wgmma shape (N or m64nNk16), found {tok}"),
            ))
        }
    };
    if !(8..=256).contains(&n) || n % 8 != 0 {
        return Err(l.err(
            t.at,
            format!("wgmma N={n} is not a Hopper shape (multiple of 8 in 8..=256)"),
        ));
    }
    Ok(n as u16)
}

/// Reads the optional operand mode after a wgmma shape: `ss` (default) or `rs`.
fn wgmma_mode(l: &mut Line<'_>) -> Result<WgmmaMode, AsmError> {
    let t = l.peek(Mode::Name)?;
    match t.tok {
        Tok::Eol => Ok(WgmmaMode::Ss),
        Tok::Ident("ss") => {
            l.next(Mode::Name)?;
            Ok(WgmmaMode::Ss)
        }
        Tok::Ident("rs") => {
            l.next(Mode::Name)?;
            Ok(WgmmaMode::Rs)
        }
        tok => Err(l.err(
            t.at,
            format!("expected the wgmma operand mode 'ss' or 'rs', found {tok}"),
        )),
    }
}

/// Reads `compute CLASS=OPS ...`: operation counts per unit class (`fp32`,
/// `mufu`, `fp16`, `int`), each at most once, at least one.
fn compute_work(l: &mut Line<'_>, at: usize) -> Result<Work, AsmError> {
    let mut w = Work::default();
    let mut seen = [false; 4];
    loop {
        let t = l.peek(Mode::Name)?;
        let name = match t.tok {
            Tok::Eol => break,
            Tok::Ident(s) => s,
            tok => {
                return Err(l.err(
                    t.at,
                    format!("expected a unit class (fp32=, mufu=, fp16=, int=), found {tok}"),
                ))
            }
        };
        let Some(i) = UnitClass::ALL.iter().position(|c| c.name() == name) else {
            return Err(l.err(
                t.at,
                format!(
                    "unknown unit class '{}' (expected fp32, mufu, fp16 or int)",
                    show(name)
                ),
            ));
        };
        l.next(Mode::Name)?;
        if seen[i] {
            return Err(l.err(t.at, format!("duplicate '{name}=' in compute")));
        }
        seen[i] = true;
        l.expect('=', &format!("after '{name}'"))?;
        let ops = uint(l, "operation count", u32::MAX as u64)? as u32;
        w.set(UnitClass::ALL[i], ops);
    }
    if !seen.contains(&true) {
        return Err(l.err(
            at,
            "compute needs at least one CLASS=OPS operand (fp32, mufu, fp16, int)",
        ));
    }
    Ok(w)
}

/// Reads an optional `, WORD=DIMS` after an instruction's operands, DIMS
/// being one or more of the cluster dimensions `x`, `y`, `z` (each at
/// most once): the dimension mask of [`simfa_core::cluster`], 0 when absent.
fn dims_mask(l: &mut Line<'_>, word: &str) -> Result<u8, AsmError> {
    if l.peek(Mode::Name)?.tok == Tok::Eol {
        return Ok(0);
    }
    l.expect(',', "after the operands")?;
    let t = l.next(Mode::Name)?;
    if t.tok != Tok::Ident(word) {
        return Err(l.err(t.at, format!("expected '{word}=DIMS', found {}", t.tok)));
    }
    l.expect('=', &format!("after '{word}'"))?;
    let t = l.next(Mode::Name)?;
    let bad = |l: &Line<'_>, found: String| {
        l.err(
            t.at,
            format!("expected cluster dimensions (x, y, z, each at most once, e.g. 'y' or 'xy'), found {found}"),
        )
    };
    let Tok::Ident(s) = t.tok else {
        return Err(bad(l, t.tok.to_string()));
    };
    let mut mask = 0u8;
    for c in s.chars() {
        let bit = match c {
            'x' => 1,
            'y' => 2,
            'z' => 4,
            _ => return Err(bad(l, format!("'{}'", show(s)))),
        };
        if mask & bit != 0 {
            return Err(bad(l, format!("'{}'", show(s))));
        }
        mask |= bit;
    }
    Ok(mask)
}

/// Reads a named-barrier thread count: a non-zero multiple of 128 up to 1024.
fn threads(l: &mut Line<'_>) -> Result<u16, AsmError> {
    let at = l.peek(Mode::Name)?.at;
    let n = uint(l, "thread count", u16::MAX as u64)?;
    if n == 0 || n % WG_THREADS as u64 != 0 || n > 1024 {
        return Err(l.err(
            at,
            format!("named-barrier thread count must be a non-zero multiple of {WG_THREADS} up to 1024, found {n}"),
        ));
    }
    Ok(n as u16)
}

impl Parser<'_> {
    /// Parses one line of a role body starting with the identifier `word`.
    pub(super) fn instruction(
        &mut self,
        l: &mut Line<'_>,
        word: &str,
        at: usize,
    ) -> Result<(), AsmError> {
        let pos = l.pos_of(at);
        let depth = self.depth();
        let comma =
            |l: &mut Line<'_>, after: &str| l.expect(',', &format!("after {after}")).map(|_| ());
        let ins = match word {
            "tma.load" | "tma.store" => {
                let map = self.lookup(l, Kind::Map)?;
                comma(l, "tensor map name")?;
                if word == "tma.load" {
                    let bar = self.decl_ref(l, Kind::Mbar, depth)?;
                    comma(l, "mbarrier")?;
                    let coords = self.coords(l, map, word, depth)?;
                    let multicast = dims_mask(l, "multicast")?;
                    Instr::TmaLoad {
                        map: map as u8,
                        bar,
                        coords,
                        multicast,
                    }
                } else {
                    let coords = self.coords(l, map, word, depth)?;
                    Instr::TmaStore {
                        map: map as u8,
                        coords,
                    }
                }
            }
            "st.global" => {
                let map = self.lookup(l, Kind::Map)?;
                comma(l, "tensor map name")?;
                let coords = self.coords(l, map, word, depth)?;
                comma(l, "coordinates")?;
                let segment = uint(l, "segment bytes (1 to 32)", 32)? as u8;
                Instr::StGlobal {
                    map: map as u8,
                    coords,
                    segment,
                }
            }
            "ld.global" | "ld.global.ca" => {
                let map = self.lookup(l, Kind::Map)?;
                comma(l, "tensor map name")?;
                let bar = self.decl_ref(l, Kind::Mbar, depth)?;
                comma(l, "mbarrier")?;
                let coords = self.coords(l, map, word, depth)?;
                comma(l, "coordinates")?;
                let segment = uint(l, "segment bytes (1 to 32)", 32)? as u8;
                Instr::LdGlobal {
                    map: map as u8,
                    bar,
                    coords,
                    segment,
                    l1: word == "ld.global.ca",
                }
            }
            "bulk.load" => {
                let bar = self.decl_ref(l, Kind::Mbar, depth)?;
                comma(l, "mbarrier")?;
                let addr = self.expr(l, depth)?;
                comma(l, "address")?;
                let bytes = uint(l, "byte count", u32::MAX as u64)? as u32;
                Instr::BulkLoad { bar, addr, bytes }
            }
            "bulk.store" => {
                let addr = self.expr(l, depth)?;
                comma(l, "address")?;
                let bytes = uint(l, "byte count", u32::MAX as u64)? as u32;
                Instr::BulkStore { addr, bytes }
            }
            "store.wait" => Instr::StoreWait {
                n: uint(l, "store count", u8::MAX as u64)? as u8,
            },
            "mbar.init" => {
                let bar = self.decl_ref(l, Kind::Mbar, depth)?;
                comma(l, "mbarrier")?;
                let cat = l.peek(Mode::Name)?.at;
                let count = uint(l, "arrival count", u16::MAX as u64)? as u16;
                if count == 0 {
                    return Err(l.err(cat, "mbar.init needs an arrival count >= 1"));
                }
                Instr::MbarInit { bar, count }
            }
            "mbar.arrive" => Instr::MbarArrive {
                bar: self.decl_ref(l, Kind::Mbar, depth)?,
            },
            "mbar.expect_tx" => {
                let bar = self.decl_ref(l, Kind::Mbar, depth)?;
                comma(l, "mbarrier")?;
                let bytes = uint(l, "byte count", u32::MAX as u64)? as u32;
                Instr::MbarExpectTx { bar, bytes }
            }
            "mbar.wait" => {
                let bar = self.decl_ref(l, Kind::Mbar, depth)?;
                comma(l, "mbarrier")?;
                let parity = self.expr(l, depth)?;
                Instr::MbarWait { bar, parity }
            }
            "stage.acquire" => Instr::StageAcquire {
                stage: self.decl_ref(l, Kind::Stage, depth)?,
            },
            "stage.release" => Instr::StageRelease {
                stage: self.decl_ref(l, Kind::Stage, depth)?,
                cluster: dims_mask(l, "cluster")?,
            },
            "wgmma" => Instr::Wgmma {
                n: wgmma_n(l)?,
                mode: wgmma_mode(l)?,
            },
            "wgmma.commit" => Instr::WgmmaCommit,
            "wgmma.wait" => Instr::WgmmaWait {
                n: uint(l, "group count", u8::MAX as u64)? as u8,
            },
            "bar.sync" | "bar.arrive" => {
                let id = self.expr_below(l, depth, "named barrier id", NAMED_BARRIERS)?;
                comma(l, "barrier id")?;
                let threads = threads(l)?;
                if word == "bar.sync" {
                    Instr::BarSync { id, threads }
                } else {
                    Instr::BarArrive { id, threads }
                }
            }
            "lock.acquire" | "lock.release" => {
                let lock = self.expr_below(l, depth, "lock", MAX_LOCKS)?;
                if word == "lock.acquire" {
                    Instr::LockAcquire { lock }
                } else {
                    Instr::LockRelease { lock }
                }
            }
            "counter.add" | "counter.wait" => {
                let counter = self.expr_below(l, depth, "counter", MAX_COUNTERS)?;
                comma(l, "counter")?;
                let (e, at) = parse_expr(l, depth)?;
                let n = self.intern(e, l, at)?;
                if word == "counter.add" {
                    Instr::CounterAdd { counter, amount: n }
                } else {
                    Instr::CounterWait { counter, count: n }
                }
            }
            "smem.move" => Instr::SmemMove {
                bytes: uint(l, "byte count", u32::MAX as u64)? as u32,
            },
            "bubble" => Instr::Bubble {
                cycles: uint(l, "cycle count", u32::MAX as u64)? as u32,
            },
            "compute" => Instr::Compute {
                work: compute_work(l, at)?,
            },
            "exit" => Instr::Exit,
            "loop" => return self.open_loop(l, at),
            w if STATEMENTS.contains(&w) => {
                return Err(l.err(
                    at,
                    format!("'{w}' statement inside a role body (close the role with '}}' first)"),
                ))
            }
            w => return Err(l.err(at, format!("unknown instruction '{}'", show(w)))),
        };
        l.expect_eol(&format!("after the {word} operands"))?;
        self.push_code(ins, pos)
    }

    /// `loop COUNT {`: emits a `LoopBegin` whose `end` is patched at `}`.
    fn open_loop(&mut self, l: &mut Line<'_>, at: usize) -> Result<(), AsmError> {
        let depth = self.depth();
        if depth >= MAX_LOOP_DEPTH {
            return Err(l.err(
                at,
                format!("loops nest deeper than {MAX_LOOP_DEPTH} (MAX_LOOP_DEPTH)"),
            ));
        }
        let count = self.expr(l, depth)?;
        let brace = l.expect('{', "after the loop count")?.at;
        l.expect_eol("after '{' (the loop body starts on the next line)")?;
        let begin = self.k.code.len();
        self.push_code(Instr::LoopBegin { count, end: 0 }, l.pos_of(at))?;
        self.blocks.push(Block::Loop {
            begin,
            pos: l.pos_of(brace),
        });
        Ok(())
    }

    pub(super) fn push_code(&mut self, ins: Instr, pos: Pos) -> Result<(), AsmError> {
        self.k.code.push(ins).map_err(|_| {
            error(
                self.file,
                pos,
                format!("too many instructions: a kernel holds at most {MAX_CODE} (MAX_CODE)"),
            )
        })?;
        self.code_pos.push(pos);
        Ok(())
    }

    /// Interns an expression: reuses an identical one or appends it.
    fn intern(&mut self, e: Expr, l: &Line<'_>, at: usize) -> Result<ExprId, AsmError> {
        if let Some(i) = self.k.exprs.iter().position(|x| *x == e) {
            return Ok(i as ExprId);
        }
        self.k.exprs.push(e).map_err(|_| {
            l.err(
                at,
                format!(
                    "too many distinct expressions: a kernel holds at most {MAX_EXPRS} (MAX_EXPRS)"
                ),
            )
        })?;
        Ok((self.k.exprs.len() - 1) as ExprId)
    }

    fn depth(&self) -> usize {
        self.blocks
            .iter()
            .filter(|b| matches!(b, Block::Loop { .. }))
            .count()
    }

    fn expr(&mut self, l: &mut Line<'_>, depth: usize) -> Result<ExprId, AsmError> {
        let (e, at) = parse_expr(l, depth)?;
        self.intern(e, l, at)
    }

    /// An expression for an index below `len` of `what` (a named barrier,
    /// a lock): a constant outside `0..len` is an error here; a variable
    /// one is checked when the instruction runs.
    fn expr_below(
        &mut self,
        l: &mut Line<'_>,
        depth: usize,
        what: &str,
        len: usize,
    ) -> Result<ExprId, AsmError> {
        let (e, at) = parse_expr(l, depth)?;
        let v = e.eval(&Default::default());
        if e.is_constant() && !(0..len as i64).contains(&v) {
            return Err(l.err(at, format!("{what} {v} out of range (0..{len})")));
        }
        self.intern(e, l, at)
    }

    /// Looks up a declaration of `kind` by name.
    fn lookup(&self, l: &mut Line<'_>, kind: Kind) -> Result<usize, AsmError> {
        let t = l.next(Mode::Name)?;
        let Tok::Ident(n) = t.tok else {
            return Err(l.err(
                t.at,
                format!("expected {} name, found {}", kind.noun(), t.tok),
            ));
        };
        let find = |k: Kind| match k {
            Kind::Map => self.k.maps.iter().position(|m| m.name == n),
            Kind::Mbar => self.k.mbarriers.iter().position(|d| d.name == n),
            Kind::Stage => self.k.stages.iter().position(|d| d.name == n),
        };
        if let Some(i) = find(kind) {
            return Ok(i);
        }
        for other in [Kind::Map, Kind::Mbar, Kind::Stage] {
            if other != kind && find(other).is_some() {
                return Err(l.err(
                    t.at,
                    format!("'{n}' is {}, not {}", other.article(), kind.article()),
                ));
            }
        }
        Err(l.err(t.at, format!("unknown {} '{}'", kind.noun(), show(n))))
    }

    /// `NAME` or `NAME[EXPR]` of an mbarrier or stage array.
    fn decl_ref(&mut self, l: &mut Line<'_>, kind: Kind, depth: usize) -> Result<Ref, AsmError> {
        let decl = self.lookup(l, kind)?;
        let len = match kind {
            Kind::Stage => self.k.stages[decl].len,
            _ => self.k.mbarriers[decl].len,
        };
        let (e, at) = if l.eat('[')? {
            let r = parse_expr(l, depth)?;
            l.expect(']', &format!("after the {} index", kind.noun()))?;
            r
        } else {
            (Expr::constant(0), l.peek(Mode::Name)?.at)
        };
        if e.is_constant() {
            let v = e.eval(&Default::default());
            if !(0..len as i64).contains(&v) {
                let n = match kind {
                    Kind::Stage => &self.k.stages[decl].name,
                    _ => &self.k.mbarriers[decl].name,
                };
                return Err(l.err(
                    at,
                    format!("index {v} out of range for {} '{n}[{len}]'", kind.noun()),
                ));
            }
        }
        let idx = self.intern(e, l, at)?;
        Ok(Ref {
            decl: decl as u8,
            idx,
        })
    }

    /// `[e0, e1, ...]`: exactly the map's rank; unused slots get constant 0.
    fn coords(
        &mut self,
        l: &mut Line<'_>,
        map: usize,
        op: &str,
        depth: usize,
    ) -> Result<[ExprId; 5], AsmError> {
        let open = l.expect('[', "to open the coordinate list")?.at;
        let mut es = Vec::new();
        if !l.eat(']')? {
            loop {
                es.push(parse_expr(l, depth)?);
                if l.eat(']')? {
                    break;
                }
                l.expect(',', "or ']' in the coordinate list")?;
            }
        }
        let m = &self.k.maps[map];
        let rank = m.rank as usize;
        if es.len() != rank {
            let msg = format!(
                "tensor map '{}' has rank {rank}, so {op} needs {rank} coordinates, found {}",
                m.name,
                es.len()
            );
            return Err(l.err(open, msg));
        }
        let mut ids = [0; 5];
        for (id, (e, at)) in ids.iter_mut().zip(es) {
            *id = self.intern(e, l, at)?;
        }
        if rank < 5 {
            let zero = self.intern(Expr::constant(0), l, open)?;
            ids[rank..].fill(zero);
        }
        Ok(ids)
    }
}
