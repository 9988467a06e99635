//! Which TTGIR ops the instrumentation wraps (one table), and how each
//! one's [`Scope`](super::Scope) is read from its operands, types and layouts.
//!
//! # WGMMA shapes
//!
//! `M` and `N` are the result tile's dimensions, `K` the second dimension
//! of A (A is M x K, B is K x N; a mismatch is an error). The instruction
//! shape comes from the accumulator's `#ttg.nvidia_mma` layout (version 3,
//! the Hopper WGMMA layout): Triton's `instrShape = [16, n, k]` is what one
//! *warp* covers, and a WarpGroup's four warps stack along M, so one
//! WarpGroup instruction is `m64nNkK` (paper section V-A4: WG-level
//! granularity): `instrM = 4 x instrShape[0]` (64), `instrN = instrShape[1]`,
//! `instrK = instrShape[2]`. `warpsPerCTA = [wm, wn]` spreads the tile over
//! `wm / 4` WarpGroups along M and `wn` along N; when that is more than one
//! WarpGroup the scope says so (`wgs=AxB`) and each WarpGroup issues
//! `ceil(M/(instrM*A)) x ceil(N/(instrN*B)) x ceil(K/instrK)` instructions.
//! `f32` operands are multiplied at TF32 precision (the only `f32` WGMMA
//! on Hopper), so their `dtype` is `TF32`. A `tensor<...>` A operand lives
//! in registers: mode `RS`; a memdesc A: `SS`.
//!
//! # TMA copies
//!
//! The box is the shared-memory (or register) tile the copy writes or
//! reads: the result memdesc of `async_tma_copy_global_to_local`, the
//! result tensor of `tt.descriptor_load`, the source of a store. The
//! descriptor is the first SSA operand, the coordinates are the operands in
//! its `[...]` (in generic syntax: the operands between the descriptor and
//! the first memdesc, or all but the descriptor and the source of a
//! store), and the barrier of an asynchronous copy is its second memdesc
//! operand in custom syntax (`%desc[..] %result, %barrier, %pred`) or the
//! first in generic syntax (operand order `desc, coords, barrier, result,
//! pred`).
//!
//! # MBarriers
//!
//! The barrier is the first SSA operand. A wait's phase is its second
//! operand. An arrive's count is its integer operand or `count` attribute,
//! and 1 when it has neither (the legacy `mbarrier_arrive`, which arrives
//! once). An expect's bytes are its integer operand or `size` attribute.

use super::error::{TtgirError, TtgirErrorKind};
use super::scope::{Dtype, ScopeKind, ScopeOp, TmaCopy, Wgmma, WgmmaMode};
use super::stmt::OpView;
use super::types::{find_int, find_ints, parse_type, Aliases, TypeInfo};

/// One recognised op: its full name, its scope kind, and whether it is an
/// asynchronous TMA copy that completes on an mbarrier operand.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KnownOp {
    /// The op's name as TTGIR spells it.
    pub name: &'static str,
    /// The scope it gets.
    pub kind: ScopeKind,
    /// Whether it takes an mbarrier operand (TMA loads into shared memory).
    pub barrier: bool,
}

const fn op(name: &'static str, kind: ScopeKind, barrier: bool) -> KnownOp {
    KnownOp {
        name,
        kind,
        barrier,
    }
}

use ScopeKind::{MbArrive, MbExpect, MbWait, TmaLoad, TmaStore, Wgmma as Dot, WgmmaWait};

/// Every op the pass instruments; everything else passes through. Both
/// dialect spellings appear: `ttng.`/`tt.` (current Triton) and
/// `triton_nvidia_gpu.` (late 2024 and before).
pub const KNOWN_OPS: &[KnownOp] = &[
    op("ttng.async_tma_copy_global_to_local", TmaLoad, true),
    op(
        "triton_nvidia_gpu.async_tma_copy_global_to_local",
        TmaLoad,
        true,
    ),
    op("ttng.async_tma_gather", TmaLoad, true),
    op("triton_nvidia_gpu.async_tma_gather", TmaLoad, true),
    op("tt.descriptor_load", TmaLoad, false),
    op("tt.experimental_descriptor_load", TmaLoad, false),
    op("tt.descriptor_gather", TmaLoad, false),
    op("tt.experimental_descriptor_gather", TmaLoad, false),
    op("ttng.async_tma_copy_local_to_global", TmaStore, false),
    op(
        "triton_nvidia_gpu.async_tma_copy_local_to_global",
        TmaStore,
        false,
    ),
    op("ttng.async_tma_reduce", TmaStore, false),
    op("ttng.async_tma_scatter", TmaStore, false),
    op("tt.descriptor_store", TmaStore, false),
    op("tt.experimental_descriptor_store", TmaStore, false),
    op("tt.descriptor_scatter", TmaStore, false),
    op("tt.descriptor_reduce", TmaStore, false),
    op("ttng.warp_group_dot", Dot, false),
    op("triton_nvidia_gpu.warp_group_dot", Dot, false),
    op("triton_nvidia_gpu.dot_async", Dot, false),
    op("ttng.warp_group_dot_wait", WgmmaWait, false),
    op("triton_nvidia_gpu.warp_group_dot_wait", WgmmaWait, false),
    op("triton_nvidia_gpu.dot_wait", WgmmaWait, false),
    op("ttng.wait_barrier", MbWait, false),
    op("triton_nvidia_gpu.wait_barrier", MbWait, false),
    op("triton_nvidia_gpu.mbarrier_wait", MbWait, false),
    op("ttng.arrive_barrier", MbArrive, false),
    op("triton_nvidia_gpu.arrive_barrier", MbArrive, false),
    op("triton_nvidia_gpu.mbarrier_arrive", MbArrive, false),
    op("ttng.barrier_expect", MbExpect, false),
    op("triton_nvidia_gpu.barrier_expect", MbExpect, false),
];

/// The table entry of op `name`, if the pass instruments it.
pub fn recognise(name: &str) -> Option<&'static KnownOp> {
    KNOWN_OPS.iter().find(|k| k.name == name)
}

/// What a scope derivation needs besides the op: the input (for error
/// positions), its aliases, and where the op starts.
pub struct Ctx<'a, 'b> {
    /// The input's name.
    pub file: &'b str,
    /// The whole input.
    pub src: &'a str,
    /// The input's alias definitions.
    pub aliases: &'b Aliases<'a>,
    /// Byte offset of the op's statement.
    pub at: usize,
}

impl<'a> Ctx<'a, '_> {
    fn fail(&self, kind: &'static str, op: &str, why: impl Into<String>) -> TtgirError {
        TtgirError::at(
            self.file,
            self.src,
            self.at,
            TtgirErrorKind::Underivable {
                kind,
                op: op.to_string(),
                why: why.into(),
            },
        )
    }

    /// The type `text` with a type alias (`!t`) resolved, parsed.
    fn ty(&self, text: &'a str) -> Option<TypeInfo<'a>> {
        let resolved = self.aliases.resolve(text, self.at).unwrap_or(text);
        parse_type(resolved)
    }

    /// `text` with attribute aliases followed, or an unknown-alias error.
    fn attr(&self, op: &str, text: &'a str) -> Result<&'a str, TtgirError> {
        self.aliases.resolve(text, self.at).map_err(|alias| {
            TtgirError::at(
                self.file,
                self.src,
                self.at,
                TtgirErrorKind::UnknownAlias {
                    op: op.to_string(),
                    alias: alias.trim_start_matches('#').to_string(),
                },
            )
        })
    }
}

/// The scope (without its site number) of recognised op `v`.
pub fn derive<'a>(
    ctx: &Ctx<'a, '_>,
    known: &KnownOp,
    v: &OpView<'a>,
) -> Result<ScopeOp, TtgirError> {
    match known.kind {
        Dot => wgmma(ctx, v).map(ScopeOp::Wgmma),
        WgmmaWait => {
            let k = known.kind.name();
            let pendings = attr_int(v, "pendings")
                .ok_or_else(|| ctx.fail(k, v.name, "no `pendings` attribute"))?;
            let pendings =
                u32::try_from(pendings).map_err(|_| ctx.fail(k, v.name, "negative `pendings`"))?;
            Ok(ScopeOp::WgmmaWait { pendings })
        }
        TmaLoad => tma(ctx, known, v).map(ScopeOp::TmaLoad),
        TmaStore => tma(ctx, known, v).map(ScopeOp::TmaStore),
        MbWait | MbArrive | MbExpect => mbarrier(ctx, known, v),
    }
}

/// The first `key = N` in the op's attributes.
fn attr_int(v: &OpView<'_>, key: &str) -> Option<i64> {
    v.attrs.iter().find_map(|a| find_int(a, key))
}

fn ssa_operands<'a>(v: &OpView<'a>) -> Vec<&'a str> {
    v.operands
        .iter()
        .filter(|o| o.is_ssa() && o.group == 0)
        .map(|o| o.text)
        .collect()
}

fn wgmma<'a>(ctx: &Ctx<'a, '_>, v: &OpView<'a>) -> Result<Wgmma, TtgirError> {
    let k = Dot.name();
    let fail = |why: String| ctx.fail(k, v.name, why);
    let (a_text, b_text) = match v.ins.as_slice() {
        [a, b, ..] => (*a, *b),
        _ => return Err(fail("the type signature lacks the A and B types".into())),
    };
    let d_text = v
        .outs
        .first()
        .copied()
        .or_else(|| v.ins.get(2).copied())
        .ok_or_else(|| fail("the type signature lacks the result type".into()))?;
    let parse = |what: &str, t: &'a str| {
        let ty = ctx
            .ty(t)
            .filter(|ty| ty.shape.len() == 2)
            .ok_or_else(|| fail(format!("{what} type `{t}` is not a 2-D tensor or memdesc")))?;
        if ty.is_tensor() || ty.is_memdesc() {
            Ok(ty)
        } else {
            Err(fail(format!(
                "{what} type `{t}` is not a tensor or memdesc"
            )))
        }
    };
    let a = parse("A", a_text)?;
    let b = parse("B", b_text)?;
    let d = parse("result", d_text)?;
    let (m, n, kk) = (d.shape[0], d.shape[1], a.shape[1]);
    if a.shape[0] != m || b.shape != [kk, n] {
        return Err(fail(format!(
            "A is {}x{}, B is {}x{} and the result {}x{}: not MxK * KxN -> MxN",
            a.shape[0], a.shape[1], b.shape[0], b.shape[1], m, n
        )));
    }
    let dtype = match Dtype::from_mlir(a.elem) {
        Some(Dtype::Fp32) => Dtype::Tf32,
        Some(d @ (Dtype::Fp16 | Dtype::Bf16 | Dtype::Fp8E4M3 | Dtype::Fp8E5M2 | Dtype::Int8)) => d,
        _ => return Err(fail(format!("no WGMMA multiplies `{}` operands", a.elem))),
    };
    let acc = match Dtype::from_mlir(d.elem) {
        Some(d @ (Dtype::Fp32 | Dtype::Fp16 | Dtype::Int32)) => d,
        _ => return Err(fail(format!("no WGMMA accumulates in `{}`", d.elem))),
    };
    let mode = if a.is_tensor() {
        WgmmaMode::Rs
    } else {
        WgmmaMode::Ss
    };
    let enc_text = d
        .encoding()
        .ok_or_else(|| fail(format!("the result type `{d_text}` has no layout")))?;
    let layout = ctx.attr(v.name, enc_text)?;
    let head = layout.split('<').next().unwrap_or("");
    if !(head.ends_with("nvidia_mma") || head.ends_with(".mma")) {
        return Err(fail(format!(
            "the result layout `{layout}` is not an NVIDIA MMA layout"
        )));
    }
    if let Some(major) = find_int(layout, "versionMajor") {
        if major != 3 {
            return Err(fail(format!(
                "the result layout is MMA version {major}, not the Hopper WGMMA layout (3)"
            )));
        }
    }
    let instr = find_ints(layout, "instrShape")
        .filter(|s| s.len() == 3 && s.iter().all(|&x| x > 0 && x <= 1024))
        .ok_or_else(|| fail(format!("the layout `{layout}` has no 3-element instrShape")))?;
    let warps = find_ints(layout, "warpsPerCTA")
        .filter(|w| w.len() == 2 && w.iter().all(|&x| (1..=64).contains(&x)))
        .ok_or_else(|| {
            fail(format!(
                "the layout `{layout}` has no 2-element warpsPerCTA"
            ))
        })?;
    if warps[0] % 4 != 0 {
        return Err(fail(format!(
            "warpsPerCTA [{}, {}] does not make whole WarpGroups along M",
            warps[0], warps[1]
        )));
    }
    let dim = |x: u64, what: &str| {
        u32::try_from(x)
            .ok()
            .filter(|&x| x > 0)
            .ok_or_else(|| fail(format!("{what} = {x} is out of range")))
    };
    Ok(Wgmma {
        m: dim(m, "M")?,
        n: dim(n, "N")?,
        k: dim(kk, "K")?,
        instr_m: 4 * instr[0] as u32,
        instr_n: instr[1] as u32,
        instr_k: instr[2] as u32,
        dtype,
        acc,
        mode,
        wgs: (warps[0] as u32 / 4, warps[1] as u32),
    })
}

fn tma<'a>(ctx: &Ctx<'a, '_>, known: &KnownOp, v: &OpView<'a>) -> Result<TmaCopy, TtgirError> {
    let k = known.kind.name();
    let fail = |why: String| ctx.fail(k, v.name, why);
    let ssa = ssa_operands(v);
    let desc = ssa
        .first()
        .ok_or_else(|| fail("no descriptor operand".into()))?
        .to_string();
    let ins: Vec<Option<TypeInfo<'_>>> = v.ins.iter().map(|t| ctx.ty(t)).collect();
    let first_memdesc = ins
        .iter()
        .position(|t| t.as_ref().is_some_and(TypeInfo::is_memdesc));
    let coords = if v.generic {
        match (known.kind, first_memdesc) {
            (TmaLoad, Some(i)) => ins[1.min(i)..i]
                .iter()
                .filter(|t| t.as_ref().map_or(true, |t| t.elem != "i16"))
                .count(),
            (TmaLoad, None) => ins.len().saturating_sub(1),
            _ => ins.len().saturating_sub(2),
        }
    } else {
        v.operands.iter().filter(|o| o.group == 1).count()
    };
    let bar = if !known.barrier {
        None
    } else if v.generic {
        first_memdesc
            .and_then(|i| v.operands.get(i))
            .map(|o| o.text.to_string())
    } else {
        // `%desc[coords] %result, %barrier, %pred`.
        ssa.get(2).map(|s| s.to_string())
    };
    if known.barrier && bar.is_none() {
        return Err(fail("no barrier operand".into()));
    }
    let shaped = |t: &TypeInfo<'_>| {
        (t.is_memdesc() || t.is_tensor()) && !t.shape.is_empty() && !t.is_barrier()
    };
    let outs: Vec<TypeInfo<'_>> = v.outs.iter().filter_map(|t| ctx.ty(t)).collect();
    let from_outs = if known.kind == TmaLoad {
        outs.into_iter().find(|t| shaped(t))
    } else {
        None
    };
    let boxed = from_outs
        .or_else(|| ins.iter().rev().flatten().find(|t| shaped(t)).cloned())
        .ok_or_else(|| fail("no shared-memory or tensor type gives the box".into()))?;
    let dtype = Dtype::from_mlir(boxed.elem)
        .ok_or_else(|| fail(format!("unsupported element type `{}`", boxed.elem)))?;
    let box_shape: Vec<u32> = boxed
        .shape
        .iter()
        .map(|&d| u32::try_from(d).ok().filter(|&d| d > 0))
        .collect::<Option<_>>()
        .ok_or_else(|| fail("a box dimension is 0 or too large".into()))?;
    let bytes = TmaCopy::box_bytes(&box_shape, dtype)
        .ok_or_else(|| fail("the box's size overflows".into()))?;
    Ok(TmaCopy {
        desc,
        box_shape,
        dtype,
        bytes,
        bar,
        coords: u32::try_from(coords).unwrap_or(u32::MAX),
    })
}

fn mbarrier(ctx: &Ctx<'_, '_>, known: &KnownOp, v: &OpView<'_>) -> Result<ScopeOp, TtgirError> {
    let k = known.kind.name();
    let fail = |why: &str| ctx.fail(k, v.name, why);
    let bar = ssa_operands(v)
        .first()
        .ok_or_else(|| fail("no barrier operand"))?
        .to_string();
    let int_operand = v.operands.iter().skip(1).find_map(|o| o.int());
    Ok(match known.kind {
        MbWait => {
            let phase = v
                .operands
                .get(1)
                .filter(|o| o.is_ssa() || o.int().is_some_and(|p| p >= 0))
                .map(|o| o.text.to_string())
                .ok_or_else(|| fail("no phase operand"))?;
            ScopeOp::MbWait { bar, phase }
        }
        MbArrive => {
            let count = int_operand.or_else(|| attr_int(v, "count")).unwrap_or(1);
            let count = u32::try_from(count).map_err(|_| fail("the count is out of range"))?;
            ScopeOp::MbArrive { bar, count }
        }
        _ => {
            let bytes = int_operand
                .or_else(|| attr_int(v, "size"))
                .ok_or_else(|| fail("no byte count"))?;
            let bytes = u64::try_from(bytes).map_err(|_| fail("negative byte count"))?;
            ScopeOp::MbExpect { bar, bytes }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::super::lex::tokenize;
    use super::super::stmt::{op_view, statements};
    use super::*;

    const MMA: &str = "#ttg.nvidia_mma<{versionMajor = 3, versionMinor = 0, warpsPerCTA = [8, 1], instrShape = [16, 256, 16]}>";

    fn derive_one(line: &str) -> Result<ScopeOp, TtgirError> {
        let toks = tokenize("t", line).unwrap();
        let s = statements(line, &toks);
        let v = op_view(line, &toks, &s[0]).unwrap();
        let mut aliases = Aliases::default();
        aliases.define("#mma", 0, MMA);
        let ctx = Ctx {
            file: "t",
            src: line,
            aliases: &aliases,
            at: 10,
        };
        derive(&ctx, recognise(v.name).unwrap(), &v)
    }

    #[test]
    fn every_name_is_listed_once() {
        for (i, a) in KNOWN_OPS.iter().enumerate() {
            assert!(
                KNOWN_OPS[i + 1..].iter().all(|b| b.name != a.name),
                "{}",
                a.name
            );
        }
        assert!(recognise("ttng.inval_barrier").is_none());
    }

    #[test]
    fn wgmma_rs_with_two_warpgroups() {
        let op = derive_one("%1 = ttng.warp_group_dot %a, %b, %c : tensor<128x64xbf16, #ttg.dot_op<{opIdx = 0, parent = #mma, kWidth = 2}>> * !ttg.memdesc<64x256xbf16, #s, #smem> -> tensor<128x256xf32, #mma>").unwrap();
        let ScopeOp::Wgmma(w) = op else { panic!() };
        assert_eq!((w.m, w.n, w.k), (128, 256, 64));
        assert_eq!((w.instr_m, w.instr_n, w.instr_k), (64, 256, 16));
        assert_eq!(
            (w.dtype, w.acc, w.mode, w.wgs),
            (Dtype::Bf16, Dtype::Fp32, WgmmaMode::Rs, (2, 1))
        );
    }

    #[test]
    fn wgmma_generic_syntax_with_f32_operands_is_tf32() {
        let op = derive_one("%1 = \"ttng.warp_group_dot\"(%a, %b, %c) <{inputPrecision = 0 : i32}> : (!ttg.memdesc<64x32xf32, #s>, !ttg.memdesc<32x64xf32, #s>, tensor<64x64xf32, #mma>) -> tensor<64x64xf32, #mma>").unwrap();
        let ScopeOp::Wgmma(w) = op else { panic!() };
        assert_eq!(
            (w.m, w.n, w.k, w.dtype, w.mode),
            (64, 64, 32, Dtype::Tf32, WgmmaMode::Ss)
        );
    }

    #[test]
    fn wgmma_errors() {
        let e = derive_one("%1 = ttng.warp_group_dot %a, %b, %c : !ttg.memdesc<128x64xf16> * !ttg.memdesc<32x64xf16> -> tensor<128x64xf32, #mma>").unwrap_err();
        assert!(e.to_string().contains("not MxK * KxN"), "{e}");
        let e = derive_one("%1 = ttng.warp_group_dot %a, %b, %c : !ttg.memdesc<128x64xf16> * !ttg.memdesc<64x64xf16> -> tensor<128x64xf32, #mma9>").unwrap_err();
        assert_eq!(
            e.kind,
            TtgirErrorKind::UnknownAlias {
                op: "ttng.warp_group_dot".into(),
                alias: "mma9".into()
            }
        );
        let e = derive_one("%1 = ttng.warp_group_dot %a, %b, %c : !ttg.memdesc<128x64xf16> * !ttg.memdesc<64x64xf16> -> tensor<128x64xf32, #ttg.blocked<{}>>").unwrap_err();
        assert!(e.to_string().contains("not an NVIDIA MMA layout"), "{e}");
        let e = derive_one("%1 = ttng.warp_group_dot %a, %b, %c").unwrap_err();
        assert!(e.to_string().contains("lacks the A and B"), "{e}");
    }

    #[test]
    fn tma_load_custom_and_generic() {
        let custom = derive_one("ttng.async_tma_copy_global_to_local %arg0[%c0, %c1] %0, %1, %true : !tt.tensordesc<tensor<128x64xf16, #s>>, !ttg.memdesc<1xi64, #b> -> !ttg.memdesc<128x64xf16, #s>").unwrap();
        let generic = derive_one("\"ttng.async_tma_copy_global_to_local\"(%arg0, %c0, %c1, %1, %0, %true) : (!tt.tensordesc<tensor<128x64xf16, #s>>, i32, i32, !ttg.memdesc<1xi64, #b>, !ttg.memdesc<128x64xf16, #s>, i1) -> ()").unwrap();
        assert_eq!(custom, generic);
        let ScopeOp::TmaLoad(t) = custom else {
            panic!()
        };
        assert_eq!(t.desc, "%arg0");
        assert_eq!(t.box_shape, [128, 64]);
        assert_eq!((t.dtype, t.bytes, t.coords), (Dtype::Fp16, 16384, 2));
        assert_eq!(t.bar.as_deref(), Some("%1"));
    }

    #[test]
    fn descriptor_load_and_store() {
        let l = derive_one("%5 = tt.descriptor_load %d[%x, %y] : !tt.tensordesc<tensor<64x64xf8E4M3FN>> -> tensor<64x64xf8E4M3FN, #blocked>").unwrap();
        let ScopeOp::TmaLoad(t) = l else { panic!() };
        assert_eq!((t.bytes, t.coords, t.bar), (4096, 2, None));
        let s = derive_one("tt.descriptor_store %d[%x, %y], %v : !tt.tensordesc<tensor<64x32xf32>>, tensor<64x32xf32, #blocked>").unwrap();
        let ScopeOp::TmaStore(t) = s else { panic!() };
        assert_eq!(
            (t.box_shape.as_slice(), t.bytes, t.coords),
            ([64u32, 32].as_slice(), 8192, 2)
        );
    }

    #[test]
    fn mbarrier_ops() {
        assert_eq!(
            derive_one("ttng.wait_barrier %alloc, %phase deps %d1 : !a, !b").unwrap(),
            ScopeOp::MbWait {
                bar: "%alloc".into(),
                phase: "%phase".into()
            }
        );
        assert_eq!(
            derive_one("ttng.arrive_barrier %alloc, 2, %pred : !a").unwrap(),
            ScopeOp::MbArrive {
                bar: "%alloc".into(),
                count: 2
            }
        );
        assert_eq!(
            derive_one("\"ttng.arrive_barrier\"(%a) <{count = 3 : i32}> : (!a) -> ()").unwrap(),
            ScopeOp::MbArrive {
                bar: "%a".into(),
                count: 3
            }
        );
        assert_eq!(
            derive_one("ttng.barrier_expect %1, 32768, %true : !a").unwrap(),
            ScopeOp::MbExpect {
                bar: "%1".into(),
                bytes: 32768
            }
        );
        assert!(derive_one("ttng.barrier_expect %1, %true : !a").is_err());
        assert!(derive_one("ttng.wait_barrier %alloc : !a").is_err());
    }
}
