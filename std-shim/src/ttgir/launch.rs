//! The launch file of `simfa ttgir run`: what the host passes to a Triton
//! kernel, which the TTGIR does not hold.
//!
//! ```toml
//! kernel = "matmul_kernel"   # the tt.func; optional when the module has one public function
//! grid = [64, 32, 1]         # program ids along x, y, z
//! regs = 168                 # registers per thread (default 168)
//! max_steps = 268435456      # ops one CTA may execute before it is taken for a hang
//!
//! [args]                     # scalar arguments, by name without `%` or by position `argN`
//! K = 8192
//!
//! [tensors.a_desc]           # a TMA descriptor argument, by name or `argN`
//! base = 0x18000000          # global address of element 0
//! elem = 2                   # bytes per element
//! dims = [8192, 8192]        # elements per dimension, innermost first
//! strides = [16384]          # bytes between rows of dimensions 1.. (default: packed)
//!
//! [tensors.sizes]            # a tensor whose contents steer the kernel
//! base = 0x30000000
//! elem = 4
//! values = [1024, 1024, 1024, 512, 512, 512]  # its elements, in memory order
//!
//! [buffers.a0]               # memory reached only through pointers loaded from memory
//! base = 0x40000000
//! elem = 2
//! dims = [1024, 1024]
//! ```
//!
//! A host descriptor (`!tt.tensordesc`) is followed in the signature by its
//! shape (`i32`) and strides (`i64`) arguments (`%a_desc.shape.0`, ...,
//! outermost first, strides in elements); they are taken from the tensor
//! unless `[args]` gives them. Pointer and float arguments need no value.
//! Every key must name an argument of the kernel, and every integer
//! argument must get a value.
//!
//! A tensor's `values` are what a scalar load from it gives (a grouped
//! GEMM's sizes, its table of matrix addresses, a lock's count): with them
//! a loop bound, branch or address may come from memory. `[buffers]` are
//! the tensors such loaded addresses point into ([`super::global`]).

use std::collections::BTreeMap;

use serde::Deserialize;
use simfa_core::TensorMap;

use super::tree::Func;
use super::value::{int_bits, wrap, Value};

/// A launch file that cannot be used, and why.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{file}: {why}")]
pub struct LaunchError {
    /// The launch file's name.
    pub file: String,
    /// What is wrong.
    pub why: String,
}

/// One tensor the host passes.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Tensor {
    /// Global address of element 0.
    pub base: u64,
    /// Bytes per element.
    pub elem: u8,
    /// Elements per dimension, innermost first (a pointer argument that
    /// the kernel makes descriptors from needs none: the kernel gives them;
    /// a tensor with `values` and no dims is a vector of them).
    #[serde(default)]
    pub dims: Vec<u64>,
    /// Bytes between rows of dimensions 1.., innermost first.
    #[serde(default)]
    pub strides: Vec<u64>,
    /// Its contents, element by element in memory order (a memory image
    /// for the scalar loads whose values the kernel's control flow or
    /// addresses need); empty when not given.
    #[serde(default)]
    pub values: Vec<i64>,
}

impl Tensor {
    /// The byte stride of dimension `i` (innermost first): given, or
    /// packed.
    pub fn stride(&self, i: usize) -> u64 {
        if i == 0 {
            return self.elem as u64;
        }
        match self.strides.get(i - 1) {
            Some(&s) => s,
            None => self.dims[..i]
                .iter()
                .fold(self.elem as u64, |a, &d| a.saturating_mul(d)),
        }
    }
}

/// A launch: the function, the grid and the arguments.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Launch {
    /// The `tt.func` to run (the module's only public one if absent).
    pub kernel: Option<String>,
    /// Program ids along x, y and z.
    pub grid: [u32; 3],
    /// Registers per thread (168 if absent): with the shared memory, what
    /// decides how many CTAs an SM holds.
    #[serde(default)]
    pub regs: Option<u32>,
    /// Shared memory per CTA in bytes, as Triton's allocator laid it out
    /// (`kernel.metadata.shared`; the compile script and
    /// `simfa.triton.compile` give it). Without it, the most bytes of
    /// buffers CTA 0 holds at once (from `local_alloc` to
    /// `local_dealloc`).
    #[serde(default)]
    pub smem: Option<u32>,
    /// Ops one CTA may execute in the interpreter before it is taken for
    /// a kernel that never ends (default [`DEFAULT_MAX_STEPS`]).
    #[serde(default)]
    pub max_steps: Option<u64>,
    /// Scalar arguments.
    #[serde(default)]
    pub args: BTreeMap<String, i64>,
    /// Tensor descriptor arguments.
    #[serde(default)]
    pub tensors: BTreeMap<String, Tensor>,
    /// Memory the kernel reaches only through pointers it loads from
    /// memory (not arguments), by a name of the launch's choosing.
    #[serde(default)]
    pub buffers: BTreeMap<String, Tensor>,
}

/// Ops a CTA may execute when the launch does not say: 2^28, a quarter of
/// a minute of interpretation; the persistent 8192^3 GEMM's CTAs take
/// under 2^18 each.
pub const DEFAULT_MAX_STEPS: u64 = 1 << 28;

/// `name` cut to the 24 bytes simfa's names hold, at a character
/// boundary (a kernel's or a tensor's name may be longer).
pub fn short_name(name: &str) -> &str {
    let mut end = name.len().min(24);
    while !name.is_char_boundary(end) {
        end -= 1;
    }
    &name[..end]
}

/// The most buffers a launch may have (descriptors made over them are
/// keyed by their place among them, in 11 bits).
pub const MAX_BUFFERS: usize = 2047;

/// The most values a tensor's contents may have.
pub const MAX_VALUES: usize = 1 << 20;

/// The most CTAs a launch may have (CUDA's grid limit along x).
pub const MAX_CTAS: u64 = (1 << 31) - 1;

impl Launch {
    /// Parses launch file `text`, named `file` in errors.
    pub fn parse(file: &str, text: &str) -> Result<Launch, LaunchError> {
        let fail = |why: String| LaunchError {
            file: file.to_string(),
            why,
        };
        let mut l: Launch = toml::from_str(text).map_err(|e| fail(e.to_string()))?;
        // Contents without a shape are a vector of them.
        for t in l.tensors.values_mut().chain(l.buffers.values_mut()) {
            if t.dims.is_empty() && !t.values.is_empty() {
                t.dims = vec![t.values.len() as u64];
            }
        }
        if l.grid.contains(&0) {
            return Err(fail(format!("grid {:?} has an empty dimension", l.grid)));
        }
        let ctas = l.grid.iter().map(|&g| g as u64).product::<u64>();
        if ctas > MAX_CTAS {
            return Err(fail(format!(
                "grid {:?} is {ctas} CTAs, more than {MAX_CTAS}",
                l.grid
            )));
        }
        if l.buffers.len() > MAX_BUFFERS {
            return Err(fail(format!(
                "{} buffers, more than {MAX_BUFFERS}",
                l.buffers.len()
            )));
        }
        let all = l.tensors.iter().map(|t| ("tensor", t));
        for (what, (name, t)) in all.chain(l.buffers.iter().map(|b| ("buffer", b))) {
            let bad = |why: &str| fail(format!("{what} `{name}`: {why}"));
            if !matches!(t.elem, 1 | 2 | 4 | 8) {
                return Err(bad("elem must be 1, 2, 4 or 8 bytes"));
            }
            if t.dims.len() > 5 || t.dims.contains(&0) {
                return Err(bad("dims must be 1 to 5 non-zero sizes"));
            }
            if t.strides.len() > t.dims.len().saturating_sub(1) {
                return Err(bad("more strides than dimensions past the first"));
            }
            if t.strides.iter().any(|s| s % 16 != 0) {
                return Err(bad("strides must be multiples of 16 bytes"));
            }
            if t.base % 16 != 0 {
                return Err(bad("base must be 16-byte aligned"));
            }
            let bits = 8 * t.elem as u32;
            if let Some(v) = t
                .values
                .iter()
                .find(|&&v| bits < 64 && (v < -(1i64 << (bits - 1)) || v >= (1i64 << bits)))
            {
                return Err(bad(&format!("value {v} does not fit {} bytes", t.elem)));
            }
            if t.values.len() > MAX_VALUES {
                return Err(bad(&format!("more than {MAX_VALUES} values")));
            }
        }
        Ok(l)
    }

    /// The tensor passed as argument `name` (position `i`).
    pub fn tensor(&self, name: &str, i: usize) -> Option<&Tensor> {
        self.tensors
            .get(name.trim_start_matches('%'))
            .or_else(|| self.tensors.get(&format!("arg{i}")))
    }

    /// The values of `f`'s arguments: descriptors as [`Value::Desc`] (the
    /// argument's position), integers from `[args]` or from their
    /// descriptor's tensor, everything else opaque. `file` names the
    /// launch in errors.
    pub fn bind(&self, file: &str, f: &Func<'_>) -> Result<Vec<Value>, LaunchError> {
        let fail = |why: String| LaunchError {
            file: file.to_string(),
            why,
        };
        let names: Vec<String> = f
            .args
            .iter()
            .map(|(n, _)| n.trim_start_matches('%').to_string())
            .collect();
        let known = |k: &str| {
            names.iter().any(|n| n == k)
                || k.strip_prefix("arg")
                    .and_then(|i| i.parse::<usize>().ok())
                    .is_some_and(|i| i < names.len())
        };
        for k in self.args.keys().chain(self.tensors.keys()) {
            if !known(k) {
                return Err(fail(format!(
                    "`{k}` is not an argument of `@{}` (it has {})",
                    f.name,
                    names.join(", ")
                )));
            }
        }
        let mut out = Vec::with_capacity(f.args.len());
        for (i, (name, ty)) in f.args.iter().enumerate() {
            let bare = &names[i];
            let v = if ty.starts_with("!tt.tensordesc") {
                match self.tensor(name, i) {
                    None => {
                        return Err(fail(format!(
                            "the descriptor `{bare}` (argument {i}) has no [tensors.{bare}]"
                        )))
                    }
                    Some(t) if t.dims.is_empty() => {
                        return Err(fail(format!("tensor `{bare}`: a descriptor needs dims")))
                    }
                    Some(_) => {}
                }
                let i = u32::try_from(i).map_err(|_| fail("too many arguments".into()))?;
                Value::Desc(i)
            } else if let Some(bits) = int_bits(ty) {
                let given = self
                    .args
                    .get(bare.as_str())
                    .or_else(|| self.args.get(&format!("arg{i}")))
                    .copied();
                let v = match given.or_else(|| self.descriptor_arg(f, i)) {
                    Some(v) => v,
                    None => {
                        return Err(fail(format!(
                            "the {ty} argument `{bare}` (argument {i}) has no value in [args]"
                        )))
                    }
                };
                if wrap(v, bits) != v && !(bits < 64 && v >= 0 && (v as u64) < (1u64 << bits)) {
                    return Err(fail(format!("`{bare}` = {v} does not fit {ty}")));
                }
                Value::Int {
                    v: wrap(v, bits),
                    bits,
                }
            } else if ty.starts_with("!tt.ptr") && self.tensor(name, i).is_some() {
                let i = u16::try_from(i).map_err(|_| fail("too many arguments".into()))?;
                Value::Ptr { arg: i, off: 0 }
            } else {
                Value::Opaque
            };
            out.push(v);
        }
        Ok(out)
    }

    /// Argument `i` if it is one of the shape and stride arguments that
    /// follow a host descriptor in the signature (`rank` i32 shapes, then
    /// `rank` i64 strides in elements, outermost first; Triton 3.9 names
    /// them `%d.shape.j` and `%d.stride.j`, 3.6 `%d_0`, `%d_1`, ...): the
    /// value its tensor gives.
    fn descriptor_arg(&self, f: &Func<'_>, i: usize) -> Option<i64> {
        let p = f.args[..i]
            .iter()
            .rposition(|(_, ty)| ty.starts_with("!tt.tensordesc"))?;
        let t = self.tensor(f.args[p].0, p)?;
        let rank = t.dims.len();
        let k = i - p - 1;
        let v = if k < rank {
            t.dims[rank - 1 - k]
        } else if k < 2 * rank {
            t.stride(rank - 1 - (k - rank)) / t.elem.max(1) as u64
        } else {
            return None;
        };
        i64::try_from(v).ok()
    }

    /// Tensor map `name` of tensor `t` with a box of `box_shape`
    /// (outermost first, as TTGIR types give it).
    pub fn map(name: &str, t: &Tensor, box_shape: &[u32]) -> Result<TensorMap, String> {
        if box_shape.len() != t.dims.len() {
            return Err(format!(
                "the box {box_shape:?} has {} dimensions and the tensor {}",
                box_shape.len(),
                t.dims.len()
            ));
        }
        let mut m = TensorMap {
            name: simfa_core::builder::name("tensor map", short_name(name.trim_start_matches('%')))
                .map_err(|e| e.to_string())?,
            base: t.base,
            elem_bytes: t.elem,
            rank: t.dims.len() as u8,
            dims: [1; 5],
            strides: [0; 5],
            boxdim: [1; 5],
        };
        for (i, &d) in t.dims.iter().enumerate() {
            m.dims[i] = d;
            m.strides[i] = if i == 0 { 0 } else { t.stride(i) };
            m.boxdim[i] = box_shape[t.dims.len() - 1 - i];
            if u64::from(m.boxdim[i]) > d {
                return Err(format!(
                    "the box {box_shape:?} is larger than the tensor {:?} (innermost first)",
                    t.dims
                ));
            }
        }
        Ok(m)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ttgir::tree::parse;

    const K: &str = "tt.func public @k(%a: !tt.tensordesc<64x32xf16, #s>, %a.shape.0: i32, %a.shape.1: i32, %a.stride.0: i64, %a.stride.1: i64, %n: i32, %p: !tt.ptr<f16>) {\n  tt.return\n}\n";

    #[test]
    fn arguments_come_from_names_positions_and_tensors() {
        let m = parse("k.mlir", K).unwrap();
        let f = m.func(None).unwrap();
        let l = Launch::parse(
            "l.toml",
            "grid = [4, 2, 1]\n[args]\narg5 = 7\n[tensors.a]\nbase = 4096\nelem = 2\ndims = [1024, 512]\n",
        )
        .unwrap();
        let v = l.bind("l.toml", f).unwrap();
        let int = |v: i64, bits: u8| Value::Int { v, bits };
        assert_eq!(
            v,
            vec![
                Value::Desc(0),
                int(512, 32),
                int(1024, 32),
                int(1024, 64),
                int(1, 64),
                int(7, 32),
                Value::Opaque
            ]
        );
        let map = Launch::map("%a", &l.tensors["a"], &[64, 32]).unwrap();
        assert_eq!(map.boxdim[..2], [32, 64]);
        assert_eq!(map.strides[1], 2048);
        assert!(Launch::map("%a", &l.tensors["a"], &[64, 2048]).is_err());
    }

    #[test]
    fn hostile_launches_name_the_file_and_the_problem() {
        let m = parse("k.mlir", K).unwrap();
        let f = m.func(None).unwrap();
        let err = |text: &str| match Launch::parse("l.toml", text) {
            Ok(l) => l.bind("l.toml", f).unwrap_err().to_string(),
            Err(e) => e.to_string(),
        };
        let t = "[tensors.a]\nbase = 0\nelem = 2\ndims = [64, 64]\n";
        assert!(err(&format!("grid = [1, 1, 1]\n{t}")).contains("`n` (argument 5) has no value"));
        assert!(err(&format!("grid = [1, 1, 1]\n[args]\nn = 1\nm = 2\n{t}"))
            .contains("`m` is not an argument of `@k`"));
        assert!(err("grid = [1, 1, 1]\n[args]\nn = 1\n").contains("has no [tensors.a]"));
        assert!(err(&format!("grid = [65536, 65536, 1]\n{t}")).contains("more than 2147483647"));
        assert!(err(&format!("grid = [0, 1, 1]\n{t}")).contains("empty dimension"));
        assert!(
            err(&format!("grid = [1, 1, 1]\n[args]\nn = 4294967296\n{t}"))
                .contains("does not fit i32")
        );
        assert!(
            err("grid = [1, 1, 1]\n[tensors.a]\nbase = 0\nelem = 3\ndims = [4]\n")
                .contains("elem must be")
        );
        assert!(err("grid = [1, 1]\n").starts_with("l.toml: "));
        assert!(err(&format!(
            "grid = [1, 1, 1]\n{t}[tensors.p]\nbase = 0\nelem = 1\nvalues = [256]\n"
        ))
        .contains("tensor `p`: value 256 does not fit 1 bytes"));
        assert!(err(&format!(
            "grid = [1, 1, 1]\n[args]\nn = 1\n{t}[buffers.x]\nbase = 8\nelem = 2\ndims = [4]\n"
        ))
        .contains("buffer `x`: base must be 16-byte aligned"));
        // Contents without dims are a vector of them.
        let l = Launch::parse(
            "l.toml",
            "grid = [1, 1, 1]\n[tensors.p]\nbase = 0\nelem = 4\nvalues = [1, -2, 3]\n",
        )
        .unwrap();
        assert_eq!(l.tensors["p"].dims, vec![3]);
    }
}
