//! Declarations: `tensormap`, `mbarrier`, `stage` and `role`.

use simfa_core::kernel::{MAX_DECLS, MAX_MAPS, MAX_MBARRIERS, MAX_ROLES, MAX_STAGES};
use simfa_core::{MbarDecl, Role, StageDecl, TensorMap};

use super::super::lex::{Line, Mode, Pos, Tok};
use super::super::AsmError;
use super::{name, uint, Block, Kind, Parser};

/// Reads `key=`.
fn key(l: &mut Line<'_>, key: &str, context: &str) -> Result<(), AsmError> {
    let t = l.next(Mode::Name)?;
    if t.tok != Tok::Ident(key) {
        return Err(l.err(
            t.at,
            format!("expected '{key}=' {context}, found {}", t.tok),
        ));
    }
    l.expect('=', &format!("after '{key}'"))?;
    Ok(())
}

/// Reads `[INT, ...]` with at most 5 entries, each at most `max`.
fn int_list(l: &mut Line<'_>, what: &str, max: u64) -> Result<Vec<u64>, AsmError> {
    l.expect('[', &format!("to open the {what} list"))?;
    let mut v = Vec::new();
    if l.eat(']')? {
        return Ok(v);
    }
    loop {
        let at = l.peek(Mode::Name)?.at;
        let x = uint(l, what, max)?;
        if v.len() == 5 {
            return Err(l.err(
                at,
                format!("too many {what} entries (at most 5 dimensions)"),
            ));
        }
        v.push(x);
        if l.eat(']')? {
            return Ok(v);
        }
        l.expect(',', &format!("or ']' in the {what} list"))?;
    }
}

impl Parser<'_> {
    /// Fails when `n` is already declared (maps, mbarriers and stages share one namespace).
    pub(super) fn check_new(&self, l: &Line<'_>, n: &str, at: usize) -> Result<(), AsmError> {
        let found = [
            (
                Kind::Map,
                self.k.maps.iter().position(|m| m.name == n),
                &self.map_pos,
            ),
            (
                Kind::Mbar,
                self.k.mbarriers.iter().position(|d| d.name == n),
                &self.mbar_pos,
            ),
            (
                Kind::Stage,
                self.k.stages.iter().position(|d| d.name == n),
                &self.stage_pos,
            ),
        ];
        for (kind, i, pos) in found {
            if let Some(i) = i {
                let line = pos.get(i).map_or(0, |p| p.line);
                return Err(l.err(
                    at,
                    format!(
                        "duplicate declaration '{n}' (already declared as {} at line {line})",
                        kind.article()
                    ),
                ));
            }
        }
        Ok(())
    }

    pub(super) fn tensormap(&mut self, l: &mut Line<'_>, pos: Pos) -> Result<(), AsmError> {
        let (n, at) = name(l, "tensor map")?;
        self.check_new(l, &n, at)?;
        // each key's value and the offset of the key
        let (mut base, mut elem, mut dims, mut strides, mut boxd) = (None, None, None, None, None);
        loop {
            let t = l.next(Mode::Name)?;
            let k = match t.tok {
                Tok::Eol => break,
                Tok::Ident(k @ ("base" | "elem" | "dims" | "strides" | "box")) => k,
                tok => {
                    return Err(l.err(
                        t.at,
                        format!(
                        "expected base=, elem=, dims=, strides= or box= in tensormap, found {tok}"
                    ),
                    ))
                }
            };
            l.expect('=', &format!("after '{k}'"))?;
            let slot_taken = match k {
                "base" => base
                    .replace((uint(l, "base address", u64::MAX)?, t.at))
                    .is_some(),
                "elem" => elem
                    .replace((uint(l, "element size", u8::MAX as u64)?, t.at))
                    .is_some(),
                "dims" => dims
                    .replace((int_list(l, "dims", u64::MAX)?, t.at))
                    .is_some(),
                "strides" => strides
                    .replace((int_list(l, "strides", u64::MAX)?, t.at))
                    .is_some(),
                _ => boxd
                    .replace((int_list(l, "box", u32::MAX as u64)?, t.at))
                    .is_some(),
            };
            if slot_taken {
                return Err(l.err(t.at, format!("duplicate '{k}=' in tensormap '{n}'")));
            }
        }
        let end = l.peek(Mode::Name)?.at;
        let missing = |k: &str| l.err(end, format!("tensormap '{n}' is missing '{k}='"));
        let (base, _) = base.ok_or_else(|| missing("base"))?;
        let (elem, _) = elem.ok_or_else(|| missing("elem"))?;
        let (dims, dims_at) = dims.ok_or_else(|| missing("dims"))?;
        // a rank-1 map has no strides to give: `strides=` may be left out
        let (strides, strides_at) = match strides {
            Some(s) => s,
            None if dims.len() == 1 => (Vec::new(), dims_at),
            None => return Err(missing("strides")),
        };
        let (boxd, box_at) = boxd.ok_or_else(|| missing("box"))?;
        let rank = dims.len();
        if rank == 0 {
            return Err(l.err(
                dims_at,
                format!("tensormap '{n}' needs 1..=5 dims, found none"),
            ));
        }
        if strides.len() != rank - 1 {
            return Err(l.err(
                strides_at,
                format!(
                    "tensormap '{n}' has rank {rank}, so it needs {} strides, found {}",
                    rank - 1,
                    strides.len()
                ),
            ));
        }
        if boxd.len() != rank {
            return Err(l.err(
                box_at,
                format!(
                    "tensormap '{n}' has rank {rank}, so it needs {rank} box extents, found {}",
                    boxd.len()
                ),
            ));
        }
        let mut m = TensorMap {
            name: n,
            base,
            elem_bytes: elem as u8,
            rank: rank as u8,
            dims: [0; 5],
            strides: [0; 5],
            boxdim: [0; 5],
        };
        m.dims[..rank].copy_from_slice(&dims);
        m.strides[0] = elem;
        m.strides[1..rank].copy_from_slice(&strides);
        for (b, &v) in m.boxdim.iter_mut().zip(&boxd) {
            *b = v as u32;
        }
        self.k
            .maps
            .push(m)
            .map_err(|_| l.err(0, format!("too many tensor maps (at most {MAX_MAPS})")))?;
        self.map_pos.push(pos);
        Ok(())
    }

    /// `mbarrier NAME[LEN] count=N` or `stage NAME[LEN] consumers=N`.
    pub(super) fn array_decl(
        &mut self,
        l: &mut Line<'_>,
        stage: bool,
        pos: Pos,
    ) -> Result<(), AsmError> {
        let kind = if stage { Kind::Stage } else { Kind::Mbar };
        let (n, at) = name(l, kind.noun())?;
        self.check_new(l, &n, at)?;
        let (mut len, mut len_at) = (1, at);
        if l.eat('[')? {
            len_at = l.peek(Mode::Name)?.at;
            len = uint(l, "array length", u16::MAX as u64)? as u16;
            if len == 0 {
                return Err(l.err(
                    len_at,
                    format!("{} array '{n}' needs a length >= 1", kind.noun()),
                ));
            }
            l.expect(']', "after the array length")?;
        }
        let field = if stage { "consumers" } else { "count" };
        key(l, field, &format!("after the {} name", kind.noun()))?;
        let at = l.peek(Mode::Name)?.at;
        let count = uint(l, field, u16::MAX as u64)? as u16;
        if count == 0 {
            return Err(l.err(at, format!("{} '{n}' needs {field} >= 1", kind.noun())));
        }
        l.expect_eol(&format!("after the {} declaration", kind.noun()))?;
        let (total, cap) = if stage {
            (self.k.stages_per_cta() + len as usize, MAX_STAGES)
        } else {
            (self.k.mbarriers_per_cta() + len as usize, MAX_MBARRIERS)
        };
        if total > cap {
            return Err(l.err(
                len_at,
                format!(
                    "more than {cap} {}s per CTA ({total} declared)",
                    kind.noun()
                ),
            ));
        }
        let full = || {
            l.err(
                0,
                format!(
                    "too many {} declarations (at most {MAX_DECLS})",
                    kind.noun()
                ),
            )
        };
        if stage {
            let d = StageDecl {
                name: n,
                len,
                consumers: count,
            };
            self.k.stages.push(d).map_err(|_| full())?;
            self.stage_pos.push(pos);
        } else {
            let d = MbarDecl {
                name: n,
                len,
                count,
            };
            self.k.mbarriers.push(d).map_err(|_| full())?;
            self.mbar_pos.push(pos);
        }
        Ok(())
    }

    pub(super) fn role(&mut self, l: &mut Line<'_>, pos: Pos) -> Result<(), AsmError> {
        let (n, at) = name(l, "role")?;
        if let Some(i) = self.k.roles.iter().position(|r| r.name == n) {
            let line = self.role_pos.get(i).map_or(0, |p| p.line);
            return Err(l.err(
                at,
                format!("duplicate declaration '{n}' (already declared as a role at line {line})"),
            ));
        }
        let (mut count, mut regs) = (None, None);
        let (stream, brace) = loop {
            let t = l.next(Mode::Name)?;
            match t.tok {
                Tok::Punct('{') => break (false, l.pos_of(t.at)),
                Tok::Ident("stream") => break (true, l.pos_of(t.at)),
                Tok::Ident(k @ ("count" | "regs")) => {
                    l.expect('=', &format!("after '{k}'"))?;
                    let vat = l.peek(Mode::Name)?.at;
                    let taken = if k == "count" {
                        let c = uint(l, "WarpGroup count", u8::MAX as u64)? as u8;
                        if c == 0 {
                            return Err(l.err(vat, format!("role '{n}' needs count >= 1")));
                        }
                        count.replace(c).is_some()
                    } else {
                        regs.replace(uint(l, "registers per thread", u16::MAX as u64)? as u16)
                            .is_some()
                    };
                    if taken {
                        return Err(l.err(t.at, format!("duplicate '{k}=' in role '{n}'")));
                    }
                }
                tok => {
                    return Err(l.err(
                        t.at,
                        format!(
                        "expected count=, regs=, '{{' or 'stream' after the role name, found {tok}"
                    ),
                    ))
                }
            }
        };
        l.expect_eol(if stream {
            "after 'stream'"
        } else {
            "after '{' (the body starts on the next line)"
        })?;
        let start = if stream { 0 } else { self.k.code.len() as u16 };
        let role = Role {
            name: n,
            count: count.unwrap_or(1),
            regs: regs.unwrap_or(0),
            start,
            len: 0,
            stream,
        };
        self.k
            .roles
            .push(role)
            .map_err(|_| l.err(0, format!("too many roles (at most {MAX_ROLES})")))?;
        self.role_pos.push(pos);
        if !stream {
            self.blocks.push(Block::Role {
                role: self.k.roles.len() - 1,
                pos: brace,
            });
        }
        Ok(())
    }
}
