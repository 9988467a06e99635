//! The element-wise work of a tensor op in registers: how many operations
//! of each SM unit class it costs the CTA, from its tensor's shape and
//! element type. The interpreter reports it as [`Effect::Compute`]; the
//! lowering spreads it over the CTA's WarpGroups as `compute` work, which
//! runs on the SM's shared units as the generators' does.
//!
//! One operation per element, by class:
//!
//! | ops | class |
//! |---|---|
//! | float `arith` (add, sub, mul, max, min, neg, abs, cmp, select, fma) | `fp32` on `f32`, `fp16` on 16-bit floats |
//! | `arith.divf` | `fp32` and `mufu` (a reciprocal) |
//! | `math.exp2`, `log2`, `sqrt`, `rsqrt`, `sin`, `cos`, `tanh`, `erf` | `mufu` |
//! | `math.exp`, `math.log` | `mufu` and `fp32` (the base change) |
//! | conversions (`truncf`, `extf`, `sitofp`, `fptosi`, ...) | `fp16` |
//! | integer `arith` on tensors | `int` |
//! | `tt.reduce` | `fp32` per element of its input |
//!
//! The ops that cost nothing are [`FREE`]: shape-only ops, views of
//! shared memory, barrier invalidation, descriptor
//! fences and hints (layout conversions and shared-memory loads and stores
//! of tensors are timed as shared-memory moves). Any op that is neither
//! executed, timed, priced here nor in [`FREE`] is an error naming it.

use super::super::stmt::OpView;

/// Ops that cost nothing and change nothing the schedule depends on.
pub const FREE: &[&str] = &[
    // Shapes and layouts of register tensors.
    "tt.splat",
    "tt.broadcast",
    "tt.expand_dims",
    "tt.reshape",
    "tt.trans",
    "tt.make_range",
    "tt.join",
    "tt.split",
    "tt.cat",
    // Views of shared memory.
    "ttg.memdesc_trans",
    "ttg.memdesc_reshape",
    "ttg.memdesc_reinterpret",
    // Ends of lifetimes, fences and hints.
    "ttng.inval_barrier",
    "triton_nvidia_gpu.inval_barrier",
    "ttng.tensormap_fenceproxy_acquire",
    // Shared-memory fences order the async proxy: the simulator's
    // transfers are already ordered by the events that complete them.
    "ttng.fence_async_shared",
    "triton_nvidia_gpu.fence_async_shared",
    "tt.assume",
    "llvm.intr.assume",
    "tt.print",
    "tt.assert",
    "proton.record",
    "tt.proton_record",
    // Programmatic dependent launch: one kernel is simulated, so there is
    // no earlier grid to wait for and no later one to release.
    "tt.grid_dependency_wait",
    "tt.grid_dependency_launch_dependents",
];
use super::super::types::parse_type;
use super::Effect;

/// The work of op `v` if it is element-wise math on a tensor: its
/// [`Effect::Compute`].
pub(super) fn tensor_work(v: &OpView<'_>) -> Option<Effect<'static>> {
    let (dialect, op) = v.name.split_once('.')?;
    // The tensor the op works on: a reduction's input, else its result
    // (or its only type).
    let ty = if v.name == "tt.reduce" {
        v.ins.first()
    } else {
        v.outs.first().or(v.ins.first())
    }?;
    let ty = ty.split(" to ").last().unwrap_or(ty);
    let t = parse_type(ty.trim())?;
    if !t.is_tensor() {
        return None;
    }
    let elems = t.elements();
    let float16 = matches!(t.elem, "f16" | "bf16");
    let float = t.elem.starts_with('f') || t.elem == "bf16";
    let mut w = [0u64; 4];
    let [fp32, mufu, fp16, int] = [0usize, 1, 2, 3];
    match (dialect, op) {
        ("tt", "reduce") => w[fp32] = elems,
        ("math", "exp2" | "log2" | "sqrt" | "rsqrt" | "sin" | "cos" | "tanh" | "erf") => {
            w[mufu] = elems
        }
        // A base change (exp, log) or a correction step (precise sqrt and
        // division, a library function) on top of the MUFU op.
        ("math", "exp" | "log" | "log1p" | "expm1" | "tan" | "atan" | "asin" | "acos")
        | ("tt", "precise_sqrt" | "precise_divf" | "extern_elementwise") => {
            w[mufu] = elems;
            w[fp32] = elems;
        }
        ("math", "fma" | "absf" | "floor" | "ceil" | "trunc" | "round" | "copysign")
        | ("tt", "clampf") => w[if float16 { fp16 } else { fp32 }] = elems,
        ("tt", "fp_to_fp") => w[fp16] = elems,
        ("math", "absi" | "ctlz" | "cttz" | "ctpop") | ("tt", "mulhiui") => w[int] = elems,
        ("arith", "remf") => {
            w[fp32] = 2 * elems;
            w[mufu] = elems;
        }
        ("arith", "divf") => {
            w[fp32] = elems;
            w[mufu] = elems;
        }
        ("arith", "truncf" | "extf" | "sitofp" | "uitofp" | "fptosi" | "fptoui") => w[fp16] = elems,
        (
            "arith",
            "addf" | "subf" | "mulf" | "maxnumf" | "minnumf" | "maximumf" | "minimumf" | "negf"
            | "cmpf",
        ) => w[if float16 { fp16 } else { fp32 }] = elems,
        ("arith", "select") if float => w[if float16 { fp16 } else { fp32 }] = elems,
        (
            "arith",
            "addi" | "subi" | "muli" | "andi" | "ori" | "xori" | "shli" | "shrsi" | "shrui"
            | "cmpi" | "select" | "divsi" | "remsi" | "divui" | "remui" | "maxsi" | "minsi"
            | "maxui" | "minui" | "extsi" | "extui" | "trunci",
        ) => w[int] = elems,
        _ => return None,
    }
    Some(Effect::Compute {
        fp32: w[fp32],
        mufu: w[mufu],
        fp16: w[fp16],
        int: w[int],
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ttgir::lex::tokenize;
    use crate::ttgir::stmt::{op_view, statements};

    fn work(line: &str) -> Option<Effect<'static>> {
        let toks = tokenize("t", line).unwrap();
        let st = statements(line, &toks);
        let v = op_view(line, &toks, &st[0]).unwrap();
        tensor_work(&v)
    }

    fn c(fp32: u64, mufu: u64, fp16: u64, int: u64) -> Option<Effect<'static>> {
        Some(Effect::Compute {
            fp32,
            mufu,
            fp16,
            int,
        })
    }

    #[test]
    fn classes_follow_the_table() {
        assert_eq!(
            work("%p = math.exp2 %s : tensor<128x64xf32, #mma>"),
            c(0, 8192, 0, 0)
        );
        assert_eq!(
            work("%p = arith.mulf %a, %b : tensor<128x64xf32, #mma>"),
            c(8192, 0, 0, 0)
        );
        assert_eq!(
            work("%p = arith.addf %a, %b : tensor<64xbf16, #l>"),
            c(0, 0, 64, 0)
        );
        assert_eq!(
            work("%p = arith.truncf %a : tensor<128x64xf32, #mma> to tensor<128x64xf16, #mma>"),
            c(0, 0, 8192, 0)
        );
        assert_eq!(
            work("%d = arith.divf %a, %b : tensor<128xf32, #l>"),
            c(128, 128, 0, 0)
        );
        assert_eq!(
            work("%i = arith.addi %a, %b : tensor<128xi32, #l>"),
            c(0, 0, 0, 128)
        );
        assert_eq!(
            work("%m = \"tt.reduce\"(%s) <{axis = 1 : i32}> ({"),
            None,
            "a reduction's types come with its closing line (tree.rs reads them)"
        );
        assert_eq!(work("%x = arith.addi %a, %b : i32"), None);
        // Philox's high multiply (dropout's random numbers) is integer work;
        // a libdevice function a MUFU op and its correction.
        assert_eq!(
            work("%h = tt.mulhiui %a, %b : tensor<1024xi32, #l>"),
            c(0, 0, 0, 1024)
        );
        assert_eq!(
            work("%y = tt.extern_elementwise %x {libname = \"\", libpath = \"\", pure = true, symbol = \"__nv_asinf\"} : (tensor<256xf32, #l>) -> tensor<256xf32, #l>"),
            c(256, 256, 0, 0)
        );
        assert_eq!(work("%x = tt.splat %a : f32 -> tensor<128xf32, #l>"), None);
    }
}
