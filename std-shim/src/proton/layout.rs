//! Real address recovery (paper section V-C) and the kernel header of a
//! trace recorded on a GPU: the host-side facts a Proton trace does not
//! carry, given as a layout file, and what the instrumented TTGIR adds.
//!
//! ```toml
//! kernel = "matmul"          # the kernel's name (default: the trace's file stem)
//! grid = [32, 32, 1]         # CTAs; pid_n = cta % grid[0], pid_m = cta / grid[0]
//! warpgroups = 1             # WarpGroups per CTA (default: the TTGIR's num-warps / 4, else 1)
//! regs = 168                 # registers per thread (default 168)
//! smem = 98304               # shared memory per CTA, bytes (default 0)
//!
//! [tensors.arg0]             # a TMA descriptor, by its SSA name without `%`
//! base = 0x10000000          # global address of element 0
//! elem = 2                   # bytes per element
//! dims = [4096, 4096]        # elements per dimension, innermost first
//! strides = [8192]           # bytes between rows of dimensions 1.., as in the text assembly
//! coords = ["k", "pid_m"]    # a box's origin per dimension, in boxes
//!
//! [barriers.b]               # an mbarrier array, by its SSA name without `%`
//! len = 3                    # barriers in the ring
//! count = 1                  # arrivals that complete a phase
//! ```
//!
//! A coordinate term is `"k"` (how many times this WarpGroup has executed
//! the site before), `"pid_m"`, `"pid_n"` or an integer (a fixed box
//! index); the origin along a dimension is the term times the box's extent
//! there (the box comes from the scope). For the tiled GEMM of section V-B,
//! A is `["k", "pid_m"]`, B `["pid_n", "k"]` and C `["pid_n", "pid_m"]`:
//! CTAs of one row block read the same A tiles, so the L2 sees their reuse.
//! A tensor map is declared for each tensor of the layout, in name order,
//! with the box of the first scope that names it.

use std::collections::BTreeMap;
use std::path::Path;

use serde::Deserialize;
use simfa_core::builder::Builder;
use simfa_core::{Kernel, TensorMap};

use super::error::ImportError;
use crate::ttgir::{Scope, ScopeOp};

/// One coordinate term.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Term {
    /// The site's iteration count in the WarpGroup.
    K,
    /// The CTA's row block: `cta / grid[0]`.
    PidM,
    /// The CTA's column block: `cta % grid[0]`.
    PidN,
    /// A fixed box index.
    Fixed(i64),
}

#[derive(Deserialize)]
#[serde(untagged)]
enum RawTerm {
    Name(String),
    Int(i64),
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawTensor {
    base: u64,
    elem: u8,
    dims: Vec<u64>,
    #[serde(default)]
    strides: Vec<u64>,
    coords: Vec<RawTerm>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawBarrier {
    len: u16,
    #[serde(default = "one")]
    count: u16,
}

fn one() -> u16 {
    1
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawLayout {
    kernel: Option<String>,
    grid: [u32; 3],
    warpgroups: Option<u32>,
    #[serde(default = "default_regs")]
    regs: u32,
    #[serde(default)]
    smem: u32,
    #[serde(default)]
    tensors: BTreeMap<String, RawTensor>,
    #[serde(default)]
    barriers: BTreeMap<String, RawBarrier>,
}

fn default_regs() -> u32 {
    168
}

/// A tensor's layout.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TensorLayout {
    /// Global address of element 0.
    pub base: u64,
    /// Bytes per element.
    pub elem: u8,
    /// Elements per dimension, innermost first.
    pub dims: Vec<u64>,
    /// Bytes between rows of dimensions 1.., innermost first.
    pub strides: Vec<u64>,
    /// A box's origin per dimension, in boxes.
    pub coords: Vec<Term>,
}

/// A layout file, read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Layout {
    /// Kernel name.
    pub kernel: Option<String>,
    /// Grid in CTAs.
    pub grid: [u32; 3],
    /// WarpGroups per CTA, if given.
    pub warpgroups: Option<u32>,
    /// Registers per thread.
    pub regs: u32,
    /// Shared memory per CTA.
    pub smem: u32,
    /// Tensors by descriptor name.
    pub tensors: BTreeMap<String, TensorLayout>,
    /// mbarrier arrays by name: length and arrival count.
    pub barriers: BTreeMap<String, (u16, u16)>,
}

fn bad(path: &str, problem: String) -> ImportError {
    ImportError::Header {
        path: path.into(),
        problem,
    }
}

impl Layout {
    /// Reads the layout file at `path`.
    pub fn read(path: &Path) -> Result<Layout, ImportError> {
        let p = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|source| ImportError::Io {
            path: p.clone(),
            source,
        })?;
        Layout::parse(&text, &p)
    }

    /// Parses layout text; errors name `origin`.
    pub fn parse(text: &str, origin: &str) -> Result<Layout, ImportError> {
        let raw: RawLayout = toml::from_str(text).map_err(|e| bad(origin, e.to_string()))?;
        let mut tensors = BTreeMap::new();
        for (name, t) in raw.tensors {
            let rank = t.dims.len();
            if !(1..=5).contains(&rank) || t.coords.len() != rank || t.strides.len() + 1 != rank {
                return Err(bad(
                    origin,
                    format!(
                        "tensors.{name}: {rank} dims need as many coords and {} strides",
                        rank.saturating_sub(1)
                    ),
                ));
            }
            let coords = t
                .coords
                .into_iter()
                .map(|c| match c {
                    RawTerm::Int(i) => Ok(Term::Fixed(i)),
                    RawTerm::Name(s) => match s.as_str() {
                        "k" => Ok(Term::K),
                        "pid_m" => Ok(Term::PidM),
                        "pid_n" => Ok(Term::PidN),
                        _ => Err(bad(
                            origin,
                            format!(
                                "tensors.{name}.coords: `{s}` is not k, pid_m, pid_n or a number"
                            ),
                        )),
                    },
                })
                .collect::<Result<Vec<_>, _>>()?;
            tensors.insert(
                name,
                TensorLayout {
                    base: t.base,
                    elem: t.elem,
                    dims: t.dims,
                    strides: t.strides,
                    coords,
                },
            );
        }
        Ok(Layout {
            kernel: raw.kernel,
            grid: raw.grid,
            warpgroups: raw.warpgroups,
            regs: raw.regs,
            smem: raw.smem,
            tensors,
            barriers: raw
                .barriers
                .into_iter()
                .map(|(n, b)| (n, (b.len, b.count)))
                .collect(),
        })
    }

    /// The box origin of the k-th copy of tensor `t` by CTA `cta`, for a
    /// box of `boxdim` (innermost first).
    pub fn origin(&self, t: &TensorLayout, boxdim: &[u32; 5], cta: u32, k: u64) -> [i64; 5] {
        let gx = self.grid[0].max(1);
        let mut c = [0i64; 5];
        for (d, term) in t.coords.iter().enumerate().take(5) {
            let n = match *term {
                Term::K => k as i64,
                Term::PidM => (cta / gx) as i64,
                Term::PidN => (cta % gx) as i64,
                Term::Fixed(v) => v,
            };
            c[d] = n.saturating_mul(boxdim[d] as i64);
        }
        c
    }

    /// The kernel header: the layout's grid, tensors (boxes from the
    /// trace's scopes) and barriers, and one role of `warpgroups`
    /// WarpGroups streaming the trace; built through the kernel builder.
    pub fn header(
        &self,
        name: &str,
        scopes: &[Scope],
        ttgir_warpgroups: Option<u32>,
        origin: &str,
    ) -> Result<Kernel, ImportError> {
        let err = |e: &dyn std::fmt::Display| bad(origin, e.to_string());
        let mut b = Builder::new(Kernel::default(), self.kernel.as_deref().unwrap_or(name))
            .map_err(|e| err(&e))?;
        b.grid(self.grid);
        b.smem(self.smem);
        for (n, t) in &self.tensors {
            let boxed = scopes.iter().find_map(|s| match &s.op {
                ScopeOp::TmaLoad(c) | ScopeOp::TmaStore(c)
                    if c.desc.trim_start_matches('%') == n =>
                {
                    Some(c.box_shape.clone())
                }
                _ => None,
            });
            let Some(shape) = boxed else {
                return Err(bad(
                    origin,
                    format!("tensors.{n}: no TMA scope of the trace names %{n}"),
                ));
            };
            let rank = t.dims.len();
            if shape.len() != rank {
                return Err(bad(
                    origin,
                    format!(
                        "tensors.{n}: {rank} dims, but its scopes' box has {}",
                        shape.len()
                    ),
                ));
            }
            let mut m = TensorMap {
                name: simfa_core::builder::name("tensor map", n).map_err(|e| err(&e))?,
                base: t.base,
                elem_bytes: t.elem,
                rank: rank as u8,
                dims: [0; 5],
                strides: [0; 5],
                boxdim: [0; 5],
            };
            m.dims[..rank].copy_from_slice(&t.dims);
            m.strides[0] = t.elem as u64;
            m.strides[1..rank].copy_from_slice(&t.strides);
            for (d, &x) in shape.iter().rev().enumerate() {
                m.boxdim[d] = x;
            }
            b.map(m).map_err(|e| err(&e))?;
        }
        for (n, &(len, count)) in &self.barriers {
            b.mbarriers(n, len, count).map_err(|e| err(&e))?;
        }
        let wgs = self.warpgroups.or(ttgir_warpgroups).unwrap_or(1);
        b.stream_role("main", wgs, self.regs).map_err(|e| err(&e))?;
        b.finish().map_err(|e| err(&e))
    }
}

/// WarpGroups per CTA of a TTGIR module: its `num-warps` attribute / 4.
pub fn ttgir_warpgroups(text: &str) -> Option<u32> {
    let at = text.find("num-warps\"")?;
    let rest = &text[at..];
    let eq = rest.find('=')?;
    let digits: String = rest[eq + 1..]
        .trim_start()
        .chars()
        .take_while(|c| c.is_ascii_digit())
        .collect();
    let warps: u32 = digits.parse().ok()?;
    Some(warps.div_ceil(4).max(1))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layouts_parse_and_place_boxes() {
        let l = Layout::parse(
            "grid = [4, 2, 1]\n[tensors.a]\nbase = 4096\nelem = 2\ndims = [256, 512]\n\
             strides = [512]\ncoords = [\"k\", \"pid_m\"]\n[barriers.full]\nlen = 3\n",
            "l.toml",
        )
        .unwrap();
        let t = &l.tensors["a"];
        // CTA 6 of a 4-wide grid: pid_m 1; its third copy: k = 2.
        assert_eq!(l.origin(t, &[64, 128, 0, 0, 0], 6, 2), [128, 128, 0, 0, 0]);
        assert_eq!(l.barriers["full"], (3, 1));
        let e = |t: &str| Layout::parse(t, "l.toml").unwrap_err().to_string();
        assert!(e("grid = [1]\n").contains("l.toml"));
        assert!(
            e("grid = [1,1,1]\n[tensors.a]\nbase=0\nelem=2\ndims=[4]\ncoords=[\"q\"]\n")
                .contains("`q` is not k")
        );
        assert!(e("grid = [1,1,1]\ncolour = 3\n").contains("colour"));
    }

    #[test]
    fn num_warps_of_a_module() {
        let m = "module attributes {\"ttg.num-warps\" = 8 : i32, \"ttg.num-ctas\" = 1 : i32} {";
        assert_eq!(ttgir_warpgroups(m), Some(2));
        let legacy = "module attributes {\"triton_gpu.num-warps\" = 4 : i32} {";
        assert_eq!(ttgir_warpgroups(legacy), Some(1));
        assert_eq!(ttgir_warpgroups("module {"), None);
    }
}
