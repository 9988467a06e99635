//! The statement parser: top-level declarations and role bodies.

use simfa_core::cluster::MAX_CLUSTER;
use simfa_core::kernel::Name;
use simfa_core::{CtaOrder, Instr, Kernel, KernelError};

use super::lex::{error, parse_int, show, Line, Mode, Pos, Tok};
use super::AsmError;

/// Longest name, in bytes.
const NAME_MAX: usize = 24;

/// Instruction mnemonics (for "outside a role body" messages).
const MNEMONICS: [&str; 20] = [
    "tma.load",
    "tma.store",
    "bulk.load",
    "bulk.store",
    "store.wait",
    "mbar.init",
    "mbar.arrive",
    "mbar.expect_tx",
    "mbar.wait",
    "stage.acquire",
    "stage.release",
    "wgmma",
    "wgmma.commit",
    "wgmma.wait",
    "bar.sync",
    "bar.arrive",
    "bubble",
    "compute",
    "loop",
    "exit",
];

/// Top-level statement keywords.
const STATEMENTS: [&str; 9] = [
    "kernel",
    "grid",
    "cluster",
    "order",
    "smem",
    "tensormap",
    "mbarrier",
    "stage",
    "role",
];

/// The three kinds of named declarations (one namespace).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Map,
    Mbar,
    Stage,
}

impl Kind {
    fn noun(self) -> &'static str {
        match self {
            Kind::Map => "tensor map",
            Kind::Mbar => "mbarrier",
            Kind::Stage => "stage",
        }
    }

    fn article(self) -> &'static str {
        match self {
            Kind::Map => "a tensor map",
            Kind::Mbar => "an mbarrier",
            Kind::Stage => "a stage",
        }
    }
}

/// An open `{ ... }` block.
enum Block {
    Role { role: usize, pos: Pos },
    Loop { begin: usize, pos: Pos },
}

/// Parser state: the kernel being built and where each part came from.
struct Parser<'f> {
    file: &'f str,
    k: Kernel,
    kernel_pos: Option<Pos>,
    grid_pos: Option<Pos>,
    cluster_pos: Option<Pos>,
    order_pos: Option<Pos>,
    smem_pos: Option<Pos>,
    code_pos: Vec<Pos>,
    map_pos: Vec<Pos>,
    mbar_pos: Vec<Pos>,
    stage_pos: Vec<Pos>,
    role_pos: Vec<Pos>,
    blocks: Vec<Block>,
}

/// Parses a whole source text.
pub(super) fn parse_str(src: &str, file: &str) -> Result<Kernel, AsmError> {
    let mut p = Parser {
        file,
        k: Kernel::default(),
        kernel_pos: None,
        grid_pos: None,
        cluster_pos: None,
        order_pos: None,
        smem_pos: None,
        code_pos: Vec::new(),
        map_pos: Vec::new(),
        mbar_pos: Vec::new(),
        stage_pos: Vec::new(),
        role_pos: Vec::new(),
        blocks: Vec::new(),
    };
    // a byte-order mark is not part of the first line
    let src = src.strip_prefix('\u{feff}').unwrap_or(src);
    for (i, text) in src.split('\n').enumerate() {
        let no = u32::try_from(i + 1).unwrap_or(u32::MAX);
        p.statement(&mut Line::new(text, no, file))?;
    }
    p.finish()
}

/// Reads a non-negative integer no larger than `max`.
fn uint(l: &mut Line<'_>, what: &str, max: u64) -> Result<u64, AsmError> {
    let t = l.next(Mode::Name)?;
    let Tok::Int(s) = t.tok else {
        return Err(l.err(
            t.at,
            format!("expected {what} (a non-negative integer), found {}", t.tok),
        ));
    };
    let v = parse_int(s).map_err(|m| l.err(t.at, m))?;
    if v > max {
        return Err(l.err(
            t.at,
            format!("integer overflow: {what} {v} is out of range (at most {max})"),
        ));
    }
    Ok(v)
}

/// Reads `X [Y [Z]]` (the sides of a grid or a cluster, each at most
/// `max`); missing sides are 1.
fn sides(l: &mut Line<'_>, what: &str, max: u64) -> Result<[u64; 3], AsmError> {
    let mut out = [1u64; 3];
    for (i, d) in out.iter_mut().enumerate() {
        if i > 0 && l.peek(Mode::Name)?.tok == Tok::Eol {
            break;
        }
        *d = uint(l, what, max)?;
    }
    Ok(out)
}

/// Reads a name (identifier of at most 24 bytes).
fn name(l: &mut Line<'_>, what: &str) -> Result<(Name, usize), AsmError> {
    let t = l.next(Mode::Name)?;
    let Tok::Ident(s) = t.tok else {
        return Err(l.err(t.at, format!("expected {what} name, found {}", t.tok)));
    };
    let n = Name::try_from(s).map_err(|_| {
        l.err(
            t.at,
            format!("name '{}' is longer than {NAME_MAX} bytes", show(s)),
        )
    })?;
    Ok((n, t.at))
}

impl Parser<'_> {
    fn statement(&mut self, l: &mut Line<'_>) -> Result<(), AsmError> {
        let t = l.next(Mode::Name)?;
        match t.tok {
            Tok::Eol => Ok(()),
            Tok::Punct('}') => {
                l.expect_eol("after '}'")?;
                self.close(l, t.at)
            }
            Tok::Ident(word) if self.blocks.is_empty() => self.top(l, word, t.at),
            Tok::Ident(word) => self.instruction(l, word, t.at),
            tok if self.blocks.is_empty() => {
                Err(l.err(t.at, format!("expected a statement, found {tok}")))
            }
            tok => Err(l.err(
                t.at,
                format!("expected an instruction or '}}', found {tok}"),
            )),
        }
    }

    fn close(&mut self, l: &Line<'_>, at: usize) -> Result<(), AsmError> {
        let pos = l.pos_of(at);
        match self.blocks.pop() {
            None => Err(l.err(at, "unexpected '}': no role or loop is open")),
            Some(Block::Loop { begin, .. }) => {
                let end = self.k.code.len();
                self.push_code(
                    Instr::LoopEnd {
                        begin: begin as u16,
                    },
                    pos,
                )?;
                if let Some(Instr::LoopBegin { end: e, .. }) = self.k.code.get_mut(begin) {
                    *e = end as u16;
                }
                Ok(())
            }
            Some(Block::Role { role, .. }) => {
                let r = &mut self.k.roles[role];
                r.len = (self.k.code.len() - r.start as usize) as u16;
                Ok(())
            }
        }
    }

    fn finish(mut self) -> Result<Kernel, AsmError> {
        match self.blocks.last() {
            Some(Block::Role { role, pos }) => {
                let name = &self.k.roles[*role].name;
                return Err(error(
                    self.file,
                    *pos,
                    format!(
                        "unclosed '{{' of role '{name}': expected '}}' before the end of the file"
                    ),
                ));
            }
            Some(Block::Loop { pos, .. }) => {
                return Err(error(
                    self.file,
                    *pos,
                    "unclosed '{' of loop: expected '}' before the end of the file",
                ))
            }
            None => {}
        }
        let Some(kpos) = self.kernel_pos else {
            return Err(error(
                self.file,
                Pos::START,
                "missing 'kernel NAME' statement",
            ));
        };
        if self.grid_pos.is_none() {
            return Err(error(
                self.file,
                Pos::START,
                "missing 'grid X [Y [Z]]' statement",
            ));
        }
        if self.k.roles.is_empty() {
            return Err(error(
                self.file,
                kpos,
                "kernel has no roles: add 'role NAME count=N regs=R { ... }'",
            ));
        }
        match self.k.validate() {
            Ok(()) => Ok(std::mem::take(&mut self.k)),
            Err(e) => Err(self.locate(e)),
        }
    }

    /// Turns a validation error into an error at the offending source line.
    fn locate(&self, e: KernelError) -> AsmError {
        let at = match e {
            KernelError::BadExpr { at }
            | KernelError::BadTensorMap { at }
            | KernelError::BadMbarrier { at }
            | KernelError::BadStage { at }
            | KernelError::BadWgmmaShape { at, .. }
            | KernelError::BadSegment { at, .. }
            | KernelError::BadClusterMask { at, .. }
            | KernelError::BadThreadCount { at }
            | KernelError::UnbalancedLoop { at }
            | KernelError::LoopTooDeep { at, .. }
            | KernelError::EmptyLoop { at }
            | KernelError::BadLoopCounter { at } => Some(at),
            _ => None,
        };
        let text = e.to_string();
        let (pos, msg) = match (e, at) {
            (_, Some(at)) => {
                let prefix = format!("instruction {at}: ");
                let msg = text.strip_prefix(&prefix).unwrap_or(&text).to_string();
                (self.code_pos.get(at as usize).copied(), msg)
            }
            (KernelError::BadGrid, _) => (self.grid_pos, text),
            (KernelError::BadCluster { .. }, _) => (self.cluster_pos, text),
            (KernelError::BadTensorMapShape { map, problem }, _) => {
                let name = self
                    .k
                    .maps
                    .get(map as usize)
                    .map_or("?", |m| m.name.as_str());
                (
                    self.map_pos.get(map as usize).copied(),
                    format!("tensor map '{name}': {problem}"),
                )
            }
            (KernelError::TooManyWarpGroups, _) => {
                let mut sum = 0usize;
                let i = self.k.roles.iter().position(|r| {
                    sum += r.count as usize;
                    sum > simfa_core::kernel::MAX_WG_PER_CTA
                });
                (i.and_then(|i| self.role_pos.get(i).copied()), text)
            }
            _ => (self.kernel_pos, text),
        };
        error(self.file, pos.unwrap_or(Pos::START), msg)
    }

    fn top(&mut self, l: &mut Line<'_>, word: &str, at: usize) -> Result<(), AsmError> {
        let pos = l.pos_of(at);
        let dup = |seen: Option<Pos>| match seen {
            Some(p) => Err(l.err(
                at,
                format!("duplicate '{word}' statement (first at line {})", p.line),
            )),
            None => Ok(()),
        };
        match word {
            "kernel" => {
                dup(self.kernel_pos)?;
                self.k.name = name(l, "kernel")?.0;
                self.kernel_pos = Some(pos);
            }
            "grid" => {
                dup(self.grid_pos)?;
                self.k.grid = sides(l, "grid size", u32::MAX as u64)?.map(|v| v as u32);
                self.grid_pos = Some(pos);
            }
            "cluster" => {
                dup(self.cluster_pos)?;
                let dims = sides(l, "cluster size", MAX_CLUSTER as u64)?.map(|v| v as u8);
                self.k.cluster = simfa_core::Cluster { dims };
                self.cluster_pos = Some(pos);
            }
            "order" => {
                dup(self.order_pos)?;
                let t = l.next(Mode::Name)?;
                self.k.order = match t.tok {
                    Tok::Ident("linear") => CtaOrder::Linear,
                    Tok::Ident("grouped") => {
                        let at = l.peek(Mode::Name)?.at;
                        let rows = uint(l, "group rows", u32::MAX as u64)? as u32;
                        if rows == 0 {
                            return Err(l.err(at, "grouped CTA order needs rows >= 1"));
                        }
                        CtaOrder::Grouped { rows }
                    }
                    tok => return Err(l.err(t.at, format!("expected 'linear' or 'grouped ROWS', found {tok}"))),
                };
                self.order_pos = Some(pos);
            }
            "smem" => {
                dup(self.smem_pos)?;
                self.k.smem_bytes = uint(l, "shared memory bytes", u32::MAX as u64)? as u32;
                self.smem_pos = Some(pos);
            }
            "tensormap" => return self.tensormap(l, pos),
            "mbarrier" | "stage" => return self.array_decl(l, word == "stage", pos),
            "role" => return self.role(l, pos),
            w if MNEMONICS.contains(&w) => {
                return Err(l.err(at, format!("instruction '{w}' outside a role body (open one with 'role NAME count=N regs=R {{')")))
            }
            w => {
                return Err(l.err(
                    at,
                    format!(
                        "unknown statement '{}' (expected kernel, grid, order, smem, tensormap, mbarrier, stage or role)",
                        show(w)
                    ),
                ))
            }
        }
        l.expect_eol(&format!("after the '{word}' statement"))
    }
}

#[path = "decl.rs"]
mod decl;
#[path = "instr.rs"]
mod instr;
