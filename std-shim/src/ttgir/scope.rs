//! Scope strings: what one instrumented TTGIR op was, written into the name
//! of its `proton.record` markers so that a Proton trace can be translated
//! back into simulator instructions (paper section V-A2).
//!
//! The grammar is `SIMFA|KIND|field=value|...|site=N`, fields in exactly
//! this order (`[...]` marks an optional field):
//!
//! ```text
//! SIMFA|WGMMA|M=..|N=..|K=..|instrM=..|instrN=..|instrK=..|dtype=D|acc=D|mode=SS|RS[|wgs=AxB]|site=N
//! SIMFA|WGMMA_WAIT|pendings=N|site=N
//! SIMFA|TMA_LOAD|desc=%v|box=AxB..|dtype=D|bytes=N[|bar=%v]|coords=N|site=N
//! SIMFA|TMA_STORE|desc=%v|box=AxB..|dtype=D|bytes=N[|bar=%v]|coords=N|site=N
//! SIMFA|MB_WAIT|bar=%v|phase=%v|site=N
//! SIMFA|MB_ARRIVE|bar=%v|count=N|site=N
//! SIMFA|MB_EXPECT|bar=%v|bytes=N|site=N
//! ```
//!
//! `D` is one of [`Dtype`]'s names (`FP16`, `BF16`, `FP8E4M3`, `FP8E5M2`,
//! `TF32`, `FP32`, `FP64`, `INT8`, `INT16`, `INT32`, `INT64`). `%v` is an
//! SSA value of the instrumented function as the TTGIR spells it (`%1`,
//! `%arg0`, `%136#0`); the phase may also be an integer. `bytes` of a TMA
//! copy is the box's element count times the element size (a parsed scope
//! must agree). `wgs=AxB` appears when the dot is spread over more than one
//! WarpGroup: A WarpGroups along M and B along N, each issuing its own
//! share of the instructions. Numbers are decimal without sign.

use std::fmt;
use std::str::FromStr;

pub use super::dtype::Dtype;

/// Where a WGMMA's A operand comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum WgmmaMode {
    /// A and B both in shared memory.
    Ss,
    /// A in registers (a `tensor<...>` operand), B in shared memory.
    Rs,
}

impl WgmmaMode {
    /// `SS` or `RS`.
    pub fn name(self) -> &'static str {
        match self {
            WgmmaMode::Ss => "SS",
            WgmmaMode::Rs => "RS",
        }
    }
}

/// The shape of one `warp_group_dot`: the CTA's tile and one WarpGroup
/// instruction.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Wgmma {
    /// Rows of the result tile.
    pub m: u32,
    /// Columns of the result tile.
    pub n: u32,
    /// The reduction depth.
    pub k: u32,
    /// Rows one WarpGroup instruction covers (64 on Hopper).
    pub instr_m: u32,
    /// Columns one instruction covers.
    pub instr_n: u32,
    /// Depth one instruction covers.
    pub instr_k: u32,
    /// The A and B element type.
    pub dtype: Dtype,
    /// The accumulator element type.
    pub acc: Dtype,
    /// SS or RS.
    pub mode: WgmmaMode,
    /// WarpGroups sharing the tile: (along M, along N); `(1, 1)` is not
    /// written.
    pub wgs: (u32, u32),
}

impl Wgmma {
    /// The WarpGroup instructions one WarpGroup issues for this dot, and
    /// their N: `ceil(M / (instrM A)) x ceil(N / (instrN B)) x ceil(K /
    /// instrK)` for `wgs = (A, B)`; an error when that is not a Hopper
    /// WGMMA group (N not a multiple of 8 in 8..=256, or more than 4096).
    pub fn per_warpgroup(&self) -> Result<(u64, u16), String> {
        let per = |x: u32, d: u32| x.div_ceil(d.max(1)) as u64;
        let count = per(self.m, self.instr_m * self.wgs.0)
            * per(self.n, self.instr_n * self.wgs.1)
            * per(self.k, self.instr_k);
        let n = u16::try_from(self.instr_n).unwrap_or(0);
        if !(8..=256).contains(&n) || n % 8 != 0 || count > 4096 {
            return Err(format!(
                "{count} WGMMAs of N = {} is not a Hopper WGMMA group",
                self.instr_n
            ));
        }
        Ok((count, n))
    }
}

/// A TMA copy: its descriptor, box and barrier.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct TmaCopy {
    /// The descriptor's SSA value.
    pub desc: String,
    /// The box (the tile one copy moves), outermost dimension first.
    pub box_shape: Vec<u32>,
    /// The element type.
    pub dtype: Dtype,
    /// Bytes one copy moves: the box's elements times the element size.
    pub bytes: u64,
    /// The mbarrier the copy completes on (loads through
    /// `async_tma_copy_global_to_local`; none for descriptor loads and
    /// stores).
    pub bar: Option<String>,
    /// Number of coordinate operands.
    pub coords: u32,
}

impl TmaCopy {
    /// The bytes a box of `box_shape` elements of `dtype` holds, if it
    /// fits in a `u64`.
    pub fn box_bytes(box_shape: &[u32], dtype: Dtype) -> Option<u64> {
        box_shape
            .iter()
            .try_fold(dtype.bytes(), |acc, &d| acc.checked_mul(u64::from(d)))
    }
}

/// What an instrumented op is.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum ScopeOp {
    /// `warp_group_dot`.
    Wgmma(Wgmma),
    /// `warp_group_dot_wait`: wait until at most `pendings` dots are in
    /// flight.
    WgmmaWait {
        /// Dots allowed to remain in flight.
        pendings: u32,
    },
    /// A TMA copy from global to shared memory (or to registers, for
    /// `tt.descriptor_load`).
    TmaLoad(TmaCopy),
    /// A TMA copy from shared memory (or registers) to global memory.
    TmaStore(TmaCopy),
    /// An mbarrier wait for a phase.
    MbWait {
        /// The barrier's SSA value.
        bar: String,
        /// The phase parity: an SSA value or an integer.
        phase: String,
    },
    /// An mbarrier arrive.
    MbArrive {
        /// The barrier's SSA value.
        bar: String,
        /// Arrivals counted.
        count: u32,
    },
    /// An mbarrier expect-transaction of `bytes`.
    MbExpect {
        /// The barrier's SSA value.
        bar: String,
        /// Bytes the barrier waits for.
        bytes: u64,
    },
}

/// The kind of a scope: its second field.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ScopeKind {
    /// `WGMMA`.
    Wgmma,
    /// `WGMMA_WAIT`.
    WgmmaWait,
    /// `TMA_LOAD`.
    TmaLoad,
    /// `TMA_STORE`.
    TmaStore,
    /// `MB_WAIT`.
    MbWait,
    /// `MB_ARRIVE`.
    MbArrive,
    /// `MB_EXPECT`.
    MbExpect,
}

impl ScopeKind {
    /// Every kind.
    pub const ALL: [ScopeKind; 7] = [
        ScopeKind::Wgmma,
        ScopeKind::WgmmaWait,
        ScopeKind::TmaLoad,
        ScopeKind::TmaStore,
        ScopeKind::MbWait,
        ScopeKind::MbArrive,
        ScopeKind::MbExpect,
    ];

    /// The name in a scope string.
    pub fn name(self) -> &'static str {
        match self {
            ScopeKind::Wgmma => "WGMMA",
            ScopeKind::WgmmaWait => "WGMMA_WAIT",
            ScopeKind::TmaLoad => "TMA_LOAD",
            ScopeKind::TmaStore => "TMA_STORE",
            ScopeKind::MbWait => "MB_WAIT",
            ScopeKind::MbArrive => "MB_ARRIVE",
            ScopeKind::MbExpect => "MB_EXPECT",
        }
    }
}

impl fmt::Display for ScopeKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// One instrumented op's scope: what it is and its site number (the
/// op's position among the instrumented ops of its file, from 0).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Scope {
    /// What the op is.
    pub op: ScopeOp,
    /// The site number.
    pub site: u32,
}

impl Scope {
    /// The scope's kind.
    pub fn kind(&self) -> ScopeKind {
        match self.op {
            ScopeOp::Wgmma(_) => ScopeKind::Wgmma,
            ScopeOp::WgmmaWait { .. } => ScopeKind::WgmmaWait,
            ScopeOp::TmaLoad(_) => ScopeKind::TmaLoad,
            ScopeOp::TmaStore(_) => ScopeKind::TmaStore,
            ScopeOp::MbWait { .. } => ScopeKind::MbWait,
            ScopeOp::MbArrive { .. } => ScopeKind::MbArrive,
            ScopeOp::MbExpect { .. } => ScopeKind::MbExpect,
        }
    }
}

fn write_box(f: &mut fmt::Formatter<'_>, b: &[u32]) -> fmt::Result {
    for (i, d) in b.iter().enumerate() {
        if i > 0 {
            f.write_str("x")?;
        }
        write!(f, "{d}")?;
    }
    Ok(())
}

impl fmt::Display for Scope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "SIMFA|{}|", self.kind())?;
        match &self.op {
            ScopeOp::Wgmma(w) => {
                write!(
                    f,
                    "M={}|N={}|K={}|instrM={}|instrN={}|instrK={}|dtype={}|acc={}|mode={}|",
                    w.m,
                    w.n,
                    w.k,
                    w.instr_m,
                    w.instr_n,
                    w.instr_k,
                    w.dtype,
                    w.acc,
                    w.mode.name()
                )?;
                if w.wgs != (1, 1) {
                    write!(f, "wgs={}x{}|", w.wgs.0, w.wgs.1)?;
                }
            }
            ScopeOp::WgmmaWait { pendings } => write!(f, "pendings={pendings}|")?,
            ScopeOp::TmaLoad(t) | ScopeOp::TmaStore(t) => {
                write!(f, "desc={}|box=", t.desc)?;
                write_box(f, &t.box_shape)?;
                write!(f, "|dtype={}|bytes={}|", t.dtype, t.bytes)?;
                if let Some(b) = &t.bar {
                    write!(f, "bar={b}|")?;
                }
                write!(f, "coords={}|", t.coords)?;
            }
            ScopeOp::MbWait { bar, phase } => write!(f, "bar={bar}|phase={phase}|")?,
            ScopeOp::MbArrive { bar, count } => write!(f, "bar={bar}|count={count}|")?,
            ScopeOp::MbExpect { bar, bytes } => write!(f, "bar={bar}|bytes={bytes}|")?,
        }
        write!(f, "site={}", self.site)
    }
}

/// Why a string is not a scope, naming the field at fault.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ScopeError {
    /// The string does not start with `SIMFA|`.
    #[error("not a SIMFA scope (it must start with `SIMFA|`)")]
    NotSimfa,
    /// The kind field is not one of the known kinds.
    #[error("unknown scope kind `{0}`")]
    UnknownKind(String),
    /// The string ends before a required field.
    #[error("{kind} scope: field `{field}` is missing")]
    Missing {
        /// The scope kind.
        kind: &'static str,
        /// The field expected next.
        field: &'static str,
    },
    /// A field other than the one expected at this position.
    #[error("{kind} scope: expected field `{field}`, found `{found}`")]
    Unexpected {
        /// The scope kind.
        kind: &'static str,
        /// The field expected.
        field: &'static str,
        /// The text found in its place.
        found: String,
    },
    /// A field's value is malformed.
    #[error("{kind} scope: field `{field}` has an invalid value `{value}`")]
    Invalid {
        /// The scope kind.
        kind: &'static str,
        /// The field.
        field: &'static str,
        /// Its value.
        value: String,
    },
    /// A TMA scope's `bytes` disagrees with its box and element type.
    #[error("{kind} scope: field `bytes` is {bytes}, but the box holds {expected} bytes")]
    Inconsistent {
        /// The scope kind.
        kind: &'static str,
        /// The `bytes` field.
        bytes: u64,
        /// The box's size in bytes.
        expected: u64,
    },
    /// Text after the `site` field.
    #[error("{kind} scope: unexpected text `{text}` after field `site`")]
    Trailing {
        /// The scope kind.
        kind: &'static str,
        /// The text after `site`.
        text: String,
    },
}

/// Whether `s` is an SSA value as TTGIR prints it (`%name`, `%12#1`).
pub fn is_ssa_name(s: &str) -> bool {
    let Some(rest) = s.strip_prefix('%') else {
        return false;
    };
    !rest.is_empty()
        && rest
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'$' | b'.' | b'-' | b'#'))
}

/// A cursor over the `|`-separated fields after the kind.
struct Fields<'a> {
    kind: &'static str,
    parts: std::iter::Peekable<std::str::Split<'a, char>>,
}

impl<'a> Fields<'a> {
    /// The value of the next field, which must be `field`.
    fn take(&mut self, field: &'static str) -> Result<&'a str, ScopeError> {
        let kind = self.kind;
        let part = self
            .parts
            .next()
            .ok_or(ScopeError::Missing { kind, field })?;
        match part.split_once('=') {
            Some((k, v)) if k == field => Ok(v),
            _ => Err(ScopeError::Unexpected {
                kind,
                field,
                found: part.to_string(),
            }),
        }
    }

    /// The value of the next field if it is `field`.
    fn optional(&mut self, field: &'static str) -> Option<&'a str> {
        let next = self.parts.peek()?;
        let (k, v) = next.split_once('=')?;
        if k == field {
            self.parts.next();
            Some(v)
        } else {
            None
        }
    }

    fn invalid(&self, field: &'static str, value: &str) -> ScopeError {
        ScopeError::Invalid {
            kind: self.kind,
            field,
            value: value.to_string(),
        }
    }

    /// A decimal number without sign or leading `+`.
    fn number<T: FromStr>(&self, field: &'static str, v: &str) -> Result<T, ScopeError> {
        if v.is_empty() || !v.bytes().all(|b| b.is_ascii_digit()) {
            return Err(self.invalid(field, v));
        }
        v.parse().map_err(|_| self.invalid(field, v))
    }

    fn num<T: FromStr>(&mut self, field: &'static str) -> Result<T, ScopeError> {
        let v = self.take(field)?;
        self.number(field, v)
    }

    /// A number that must be at least 1.
    fn positive(&mut self, field: &'static str) -> Result<u32, ScopeError> {
        let v = self.take(field)?;
        match self.number::<u32>(field, v)? {
            0 => Err(self.invalid(field, v)),
            n => Ok(n),
        }
    }

    fn dtype(&mut self, field: &'static str) -> Result<Dtype, ScopeError> {
        let v = self.take(field)?;
        Dtype::from_name(v).ok_or_else(|| self.invalid(field, v))
    }

    fn ssa(&mut self, field: &'static str) -> Result<String, ScopeError> {
        let v = self.take(field)?;
        self.ssa_value(field, v)
    }

    fn ssa_value(&self, field: &'static str, v: &str) -> Result<String, ScopeError> {
        if is_ssa_name(v) {
            Ok(v.to_string())
        } else {
            Err(self.invalid(field, v))
        }
    }

    /// `AxB...`, each at least 1, at most `max` of them.
    fn dims(&self, field: &'static str, v: &str, max: usize) -> Result<Vec<u32>, ScopeError> {
        let dims: Vec<u32> = v
            .split('x')
            .map(|d| {
                self.number::<u32>(field, d)
                    .map_err(|_| self.invalid(field, v))
            })
            .collect::<Result<_, _>>()?;
        if dims.len() > max || dims.contains(&0) {
            return Err(self.invalid(field, v));
        }
        Ok(dims)
    }

    fn tma(&mut self) -> Result<TmaCopy, ScopeError> {
        let desc = self.ssa("desc")?;
        let b = self.take("box")?;
        let box_shape = self.dims("box", b, 8)?;
        let dtype = self.dtype("dtype")?;
        let bytes: u64 = self.num("bytes")?;
        let expected =
            TmaCopy::box_bytes(&box_shape, dtype).ok_or_else(|| self.invalid("box", b))?;
        if bytes != expected {
            return Err(ScopeError::Inconsistent {
                kind: self.kind,
                bytes,
                expected,
            });
        }
        let bar = match self.optional("bar") {
            Some(v) => Some(self.ssa_value("bar", v)?),
            None => None,
        };
        let coords = self.num("coords")?;
        Ok(TmaCopy {
            desc,
            box_shape,
            dtype,
            bytes,
            bar,
            coords,
        })
    }
}

impl FromStr for Scope {
    type Err = ScopeError;

    fn from_str(s: &str) -> Result<Scope, ScopeError> {
        let rest = s.strip_prefix("SIMFA|").ok_or(ScopeError::NotSimfa)?;
        let mut parts = rest.split('|').peekable();
        let kind_name = parts.next().unwrap_or("");
        let kind = ScopeKind::ALL
            .into_iter()
            .find(|k| k.name() == kind_name)
            .ok_or_else(|| ScopeError::UnknownKind(kind_name.to_string()))?;
        let mut f = Fields {
            kind: kind.name(),
            parts,
        };
        let op = match kind {
            ScopeKind::Wgmma => {
                let m = f.positive("M")?;
                let n = f.positive("N")?;
                let k = f.positive("K")?;
                let instr_m = f.positive("instrM")?;
                let instr_n = f.positive("instrN")?;
                let instr_k = f.positive("instrK")?;
                let dtype = f.dtype("dtype")?;
                let acc = f.dtype("acc")?;
                let mode = match f.take("mode")? {
                    "SS" => WgmmaMode::Ss,
                    "RS" => WgmmaMode::Rs,
                    v => return Err(f.invalid("mode", v)),
                };
                let wgs = match f.optional("wgs") {
                    Some(v) => match f.dims("wgs", v, 2)?.as_slice() {
                        &[a, b] if (a, b) != (1, 1) => (a, b),
                        _ => return Err(f.invalid("wgs", v)),
                    },
                    None => (1, 1),
                };
                ScopeOp::Wgmma(Wgmma {
                    m,
                    n,
                    k,
                    instr_m,
                    instr_n,
                    instr_k,
                    dtype,
                    acc,
                    mode,
                    wgs,
                })
            }
            ScopeKind::WgmmaWait => ScopeOp::WgmmaWait {
                pendings: f.num("pendings")?,
            },
            ScopeKind::TmaLoad => ScopeOp::TmaLoad(f.tma()?),
            ScopeKind::TmaStore => ScopeOp::TmaStore(f.tma()?),
            ScopeKind::MbWait => {
                let bar = f.ssa("bar")?;
                let v = f.take("phase")?;
                let phase = if v.bytes().all(|b| b.is_ascii_digit()) && !v.is_empty() {
                    v.to_string()
                } else {
                    f.ssa_value("phase", v)?
                };
                ScopeOp::MbWait { bar, phase }
            }
            ScopeKind::MbArrive => ScopeOp::MbArrive {
                bar: f.ssa("bar")?,
                count: f.num("count")?,
            },
            ScopeKind::MbExpect => ScopeOp::MbExpect {
                bar: f.ssa("bar")?,
                bytes: f.num("bytes")?,
            },
        };
        let site = f.num("site")?;
        let rest: Vec<&str> = f.parts.collect();
        if !rest.is_empty() {
            return Err(ScopeError::Trailing {
                kind: kind.name(),
                text: rest.join("|"),
            });
        }
        Ok(Scope { op, site })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const PAPER: &str = "SIMFA|WGMMA|M=128|N=128|K=64|instrM=64|instrN=128|instrK=16|dtype=FP16|acc=FP32|mode=SS|site=17";

    #[test]
    fn the_papers_example_parses_and_prints_back() {
        let s: Scope = PAPER.parse().unwrap();
        assert_eq!(s.site, 17);
        assert_eq!(s.kind(), ScopeKind::Wgmma);
        let ScopeOp::Wgmma(w) = s.op else {
            panic!("not a WGMMA")
        };
        assert_eq!(
            (w.m, w.n, w.k, w.instr_m, w.instr_n, w.instr_k),
            (128, 128, 64, 64, 128, 16)
        );
        assert_eq!(w.mode, WgmmaMode::Ss);
        assert_eq!(s.to_string(), PAPER);
    }

    #[test]
    fn every_kind_round_trips() {
        for text in [
            "SIMFA|WGMMA|M=128|N=256|K=64|instrM=64|instrN=256|instrK=16|dtype=FP16|acc=FP32|mode=SS|wgs=2x1|site=0",
            "SIMFA|WGMMA_WAIT|pendings=1|site=3",
            "SIMFA|TMA_LOAD|desc=%arg0|box=128x128|dtype=FP16|bytes=32768|bar=%1|coords=2|site=0",
            "SIMFA|TMA_LOAD|desc=%d|box=64x64|dtype=FP8E4M3|bytes=4096|coords=2|site=9",
            "SIMFA|TMA_STORE|desc=%arg0|box=128x128|dtype=FP16|bytes=32768|coords=2|site=5",
            "SIMFA|MB_WAIT|bar=%1|phase=%c0_i32_2|site=2",
            "SIMFA|MB_WAIT|bar=%1|phase=0|site=2",
            "SIMFA|MB_ARRIVE|bar=%0|count=1|site=4",
            "SIMFA|MB_EXPECT|bar=%136#0|bytes=32768|site=1",
        ] {
            let s: Scope = text.parse().unwrap_or_else(|e| panic!("{text}: {e}"));
            assert_eq!(s.to_string(), text);
        }
    }

    #[test]
    fn errors_name_the_field() {
        let e = |s: &str| s.parse::<Scope>().unwrap_err();
        assert_eq!(e("WGMMA|M=1"), ScopeError::NotSimfa);
        assert_eq!(e("SIMFA|DOT|site=1"), ScopeError::UnknownKind("DOT".into()));
        assert_eq!(
            e("SIMFA|WGMMA_WAIT|site=1"),
            ScopeError::Unexpected {
                kind: "WGMMA_WAIT",
                field: "pendings",
                found: "site=1".into()
            }
        );
        assert_eq!(
            e("SIMFA|WGMMA_WAIT|pendings=1"),
            ScopeError::Missing {
                kind: "WGMMA_WAIT",
                field: "site"
            }
        );
        let bad_dtype = PAPER.replace("FP16", "FP12");
        assert!(matches!(
            e(&bad_dtype),
            ScopeError::Invalid { field: "dtype", .. }
        ));
        let bad_mode = PAPER.replace("mode=SS", "mode=XX");
        assert!(matches!(
            e(&bad_mode),
            ScopeError::Invalid { field: "mode", .. }
        ));
        let zero = PAPER.replace("M=128", "M=0");
        assert!(matches!(e(&zero), ScopeError::Invalid { field: "M", .. }));
        let signed = PAPER.replace("K=64", "K=+64");
        assert!(matches!(e(&signed), ScopeError::Invalid { field: "K", .. }));
        assert!(matches!(
            e("SIMFA|TMA_LOAD|desc=%a|box=128x128|dtype=FP16|bytes=1|coords=2|site=0"),
            ScopeError::Inconsistent {
                bytes: 1,
                expected: 32768,
                ..
            }
        ));
        assert!(matches!(
            e("SIMFA|TMA_LOAD|desc=a|box=1|dtype=FP16|bytes=2|coords=1|site=0"),
            ScopeError::Invalid { field: "desc", .. }
        ));
        assert!(matches!(
            e("SIMFA|TMA_LOAD|desc=%a|box=1x0|dtype=FP16|bytes=0|coords=1|site=0"),
            ScopeError::Invalid { field: "box", .. }
        ));
        assert!(matches!(
            e("SIMFA|MB_ARRIVE|bar=%0|count=1|site=4|x=1"),
            ScopeError::Trailing { .. }
        ));
        let one_wg = PAPER.replace("|site", "|wgs=1x1|site");
        assert!(matches!(
            e(&one_wg),
            ScopeError::Invalid { field: "wgs", .. }
        ));
    }

    fn ssa() -> impl Strategy<Value = String> {
        "%[a-z_][a-z0-9_]{0,6}(#[0-9])?".prop_map(|s| s)
    }

    fn dtype() -> impl Strategy<Value = Dtype> {
        (0..Dtype::ALL.len()).prop_map(|i| Dtype::ALL[i])
    }

    fn tma() -> impl Strategy<Value = TmaCopy> {
        (
            ssa(),
            prop::collection::vec(1u32..=256, 1..=5),
            dtype(),
            prop::option::of(ssa()),
            0u32..6,
        )
            .prop_map(|(desc, box_shape, dtype, bar, coords)| TmaCopy {
                bytes: TmaCopy::box_bytes(&box_shape, dtype).unwrap(),
                desc,
                box_shape,
                dtype,
                bar,
                coords,
            })
    }

    fn scope_op() -> impl Strategy<Value = ScopeOp> {
        let wgmma = (
            (1u32..1024, 1u32..1024, 1u32..1024),
            (1u32..256, 1u32..512, 1u32..64),
            (dtype(), dtype(), any::<bool>()),
            prop_oneof![Just((1u32, 1u32)), (1u32..4, 2u32..4), (2u32..4, 1u32..4)],
        )
            .prop_map(|((m, n, k), (im, inn, ik), (dtype, acc, rs), wgs)| {
                ScopeOp::Wgmma(Wgmma {
                    m,
                    n,
                    k,
                    instr_m: im,
                    instr_n: inn,
                    instr_k: ik,
                    dtype,
                    acc,
                    mode: if rs { WgmmaMode::Rs } else { WgmmaMode::Ss },
                    wgs,
                })
            });
        prop_oneof![
            wgmma,
            any::<u32>().prop_map(|pendings| ScopeOp::WgmmaWait { pendings }),
            tma().prop_map(ScopeOp::TmaLoad),
            tma().prop_map(ScopeOp::TmaStore),
            (
                ssa(),
                prop_oneof![ssa(), (0u32..2).prop_map(|p| p.to_string())]
            )
                .prop_map(|(bar, phase)| ScopeOp::MbWait { bar, phase }),
            (ssa(), any::<u32>()).prop_map(|(bar, count)| ScopeOp::MbArrive { bar, count }),
            (ssa(), any::<u64>()).prop_map(|(bar, bytes)| ScopeOp::MbExpect { bar, bytes }),
        ]
    }

    proptest! {
        #[test]
        fn parse_inverts_format(op in scope_op(), site in any::<u32>()) {
            let s = Scope { op, site };
            let text = s.to_string();
            prop_assert_eq!(text.parse::<Scope>(), Ok(s));
        }

        #[test]
        fn parsing_junk_never_panics(text in "SIMFA\\|[A-Z_]{0,10}(\\|[a-zA-Z%#0-9=x]{0,12}){0,14}") {
            let _ = text.parse::<Scope>();
        }
    }
}
