//! The one way code makes a [`Kernel`]: declarations, an interned
//! expression table, and role programs written instruction by instruction.
//!
//! Generators, importers, the text assembler, [`crate::samples`] and the
//! tests all fill kernels through a [`Builder`]. It owns or borrows the
//! kernel (`Builder<Kernel>` or `Builder<&mut Kernel>`, so a caller without
//! a heap fills a `static` in place), hands out the indices instructions
//! refer to, patches loop ends, closes each role's program range, and
//! checks every fixed capacity as it goes: a full table is a
//! [`BuilderError`] naming the table, never a panic. [`Builder::finish`]
//! checks that nothing is left open and validates the kernel.
//!
//! ```
//! use simfa_core::builder::Builder;
//! use simfa_core::{Expr, Instr, Kernel};
//!
//! let mut b = Builder::new(Kernel::default(), "tiny").unwrap();
//! b.grid([2, 1, 1]);
//! b.begin_role("main", 1, 32).unwrap();
//! let l = b.loop_begin(Expr::constant(3)).unwrap();
//! b.op(Instr::Bubble { cycles: 10 }).unwrap();
//! b.loop_end(l).unwrap();
//! b.op(Instr::Exit).unwrap();
//! b.end_role().unwrap();
//! let k = b.finish().unwrap();
//! assert_eq!(k.code.len(), 4);
//! ```

use core::borrow::BorrowMut;
use core::fmt;

use crate::error::KernelError;
use crate::isa::{Expr, ExprId, Instr, Ref, MAX_LOOP_DEPTH};
use crate::kernel::{CtaOrder, Kernel, MbarDecl, Name, Role, StageDecl};
use crate::tensor_map::TensorMap;

/// Why a [`Builder`] call failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum BuilderError {
    /// A fixed table of the kernel is full.
    Full {
        /// The table, e.g. `"instruction"`.
        table: &'static str,
        /// Its capacity.
        max: usize,
    },
    /// A name is longer than the 24 bytes a [`Name`] holds.
    NameTooLong {
        /// What the name is for, e.g. `"role"`.
        what: &'static str,
    },
    /// A role was begun while another one was open.
    RoleOpen,
    /// An instruction, loop or `end_role` came outside any role.
    NoRole,
    /// `loop_end` did not name the innermost open loop, or loops nest
    /// deeper than [`MAX_LOOP_DEPTH`].
    Loop {
        /// What is wrong.
        problem: &'static str,
    },
    /// A role (or a loop in it) was still open at `end_role`/`finish`.
    Unclosed {
        /// `"role"` or `"loop"`.
        what: &'static str,
    },
    /// A role count, register count or program length does not fit its field.
    OutOfRange {
        /// The field.
        field: &'static str,
    },
    /// The finished kernel is invalid.
    Invalid(KernelError),
}

impl fmt::Display for BuilderError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BuilderError::Full { table, max } => {
                write!(f, "too many {table}s: a kernel holds at most {max}")
            }
            BuilderError::NameTooLong { what } => {
                write!(f, "{what} name longer than 24 bytes")
            }
            BuilderError::RoleOpen => write!(f, "a role was begun inside another role"),
            BuilderError::NoRole => write!(f, "an instruction outside any role"),
            BuilderError::Loop { problem } => write!(f, "loop: {problem}"),
            BuilderError::Unclosed { what } => write!(f, "a {what} was left open"),
            BuilderError::OutOfRange { field } => write!(f, "{field} out of range"),
            BuilderError::Invalid(e) => write!(f, "invalid kernel: {e}"),
        }
    }
}

impl core::error::Error for BuilderError {}

impl From<KernelError> for BuilderError {
    fn from(e: KernelError) -> Self {
        BuilderError::Invalid(e)
    }
}

/// A name of at most 24 bytes, or [`BuilderError::NameTooLong`].
pub fn name(what: &'static str, s: &str) -> Result<Name, BuilderError> {
    let mut n = Name::new();
    n.push_str(s)
        .map_err(|_| BuilderError::NameTooLong { what })?;
    Ok(n)
}

/// Appends `x` to table `v`; returns its index, or [`BuilderError::Full`]
/// naming `table`.
fn push<T, const N: usize>(
    v: &mut heapless::Vec<T, N>,
    x: T,
    table: &'static str,
) -> Result<usize, BuilderError> {
    v.push(x)
        .map_err(|_| BuilderError::Full { table, max: N })?;
    Ok(v.len() - 1)
}

/// A role's WarpGroup count and registers per thread in their fields.
fn role_fields(count: u32, regs: u32) -> Result<(u8, u16), BuilderError> {
    let count = u8::try_from(count).map_err(|_| BuilderError::OutOfRange {
        field: "role WarpGroup count",
    })?;
    let regs = u16::try_from(regs).map_err(|_| BuilderError::OutOfRange {
        field: "registers per thread",
    })?;
    Ok((count, regs))
}

/// An open role: its declaration fields and where its program starts.
#[derive(Clone, Copy, Debug)]
struct Open {
    count: u8,
    regs: u16,
    start: u16,
}

/// Fills a kernel; see the [module documentation](self).
pub struct Builder<K: BorrowMut<Kernel>> {
    k: K,
    role: Option<(Name, Open)>,
    loops: heapless::Vec<u16, MAX_LOOP_DEPTH>,
}

impl<K: BorrowMut<Kernel>> Builder<K> {
    /// Starts kernel `name` in `k`, clearing whatever `k` held: a 1x1x1
    /// grid, linear order, no shared memory, empty tables.
    pub fn new(mut k: K, kernel_name: &str) -> Result<Self, BuilderError> {
        let n = name("kernel", kernel_name)?;
        let kk = k.borrow_mut();
        kk.name = n;
        kk.grid = [1, 1, 1];
        kk.order = CtaOrder::Linear;
        kk.smem_bytes = 0;
        kk.roles.clear();
        kk.maps.clear();
        kk.mbarriers.clear();
        kk.stages.clear();
        kk.exprs.clear();
        kk.code.clear();
        Ok(Builder {
            k,
            role: None,
            loops: heapless::Vec::new(),
        })
    }

    /// The kernel so far.
    pub fn kernel(&self) -> &Kernel {
        self.k.borrow()
    }

    /// Sets the grid in CTAs (x, y, z).
    pub fn grid(&mut self, grid: [u32; 3]) {
        self.k.borrow_mut().grid = grid;
    }

    /// Sets the CTA rasterisation order.
    pub fn order(&mut self, order: CtaOrder) {
        self.k.borrow_mut().order = order;
    }

    /// Sets the shared memory per CTA, bytes.
    pub fn smem(&mut self, bytes: u32) {
        self.k.borrow_mut().smem_bytes = bytes;
    }

    /// Declares tensor map `m`; returns its index.
    pub fn map(&mut self, m: TensorMap) -> Result<u8, BuilderError> {
        Ok(push(&mut self.k.borrow_mut().maps, m, "tensor map")? as u8)
    }

    /// Declares an array of `len` mbarriers completing a phase after
    /// `count` arrivals; returns the declaration's index.
    pub fn mbarriers(&mut self, nm: &str, len: u16, count: u16) -> Result<u8, BuilderError> {
        let d = MbarDecl {
            name: name("mbarrier", nm)?,
            len,
            count,
        };
        let v = &mut self.k.borrow_mut().mbarriers;
        Ok(push(v, d, "mbarrier declaration")? as u8)
    }

    /// Declares an array of `len` ring stages freed by `consumers`
    /// releases; returns the declaration's index.
    pub fn stages(&mut self, nm: &str, len: u16, consumers: u16) -> Result<u8, BuilderError> {
        let d = StageDecl {
            name: name("stage", nm)?,
            len,
            consumers,
        };
        let v = &mut self.k.borrow_mut().stages;
        Ok(push(v, d, "stage declaration")? as u8)
    }

    /// The index of expression `e`: an identical one already in the table,
    /// or `e` appended.
    pub fn expr(&mut self, e: Expr) -> Result<ExprId, BuilderError> {
        let exprs = &mut self.k.borrow_mut().exprs;
        if let Some(i) = exprs.iter().position(|x| *x == e) {
            return Ok(i as ExprId);
        }
        Ok(push(exprs, e, "distinct expression")? as ExprId)
    }

    /// The index of the constant expression `v`.
    pub fn konst(&mut self, v: i64) -> Result<ExprId, BuilderError> {
        self.expr(Expr::constant(v))
    }

    /// A reference to element `idx` of declaration `decl`.
    pub fn at(&mut self, decl: u8, idx: Expr) -> Result<Ref, BuilderError> {
        Ok(Ref {
            decl,
            idx: self.expr(idx)?,
        })
    }

    /// Box coordinates: one interned expression per dimension, then the
    /// constant 0 for the unused slots (numbered in that order, as the
    /// text assembly numbers them).
    pub fn coords(&mut self, dims: &[Expr]) -> Result<[ExprId; 5], BuilderError> {
        let mut c = [0; 5];
        let n = dims.len().min(5);
        for (slot, e) in c.iter_mut().zip(&dims[..n]) {
            *slot = self.expr(*e)?;
        }
        if n < 5 {
            let zero = self.konst(0)?;
            c[n..].fill(zero);
        }
        Ok(c)
    }

    /// Appends instruction `i` to the open role's program; returns its
    /// index in the code table.
    pub fn op(&mut self, i: Instr) -> Result<u16, BuilderError> {
        if self.role.is_none() {
            return Err(BuilderError::NoRole);
        }
        Ok(push(&mut self.k.borrow_mut().code, i, "instruction")? as u16)
    }

    /// Opens a loop of `count` trips; returns its `LoopBegin` index for
    /// [`Builder::loop_end`].
    pub fn loop_begin(&mut self, count: Expr) -> Result<u16, BuilderError> {
        if self.loops.is_full() {
            return Err(BuilderError::Loop {
                problem: "loops nest deeper than MAX_LOOP_DEPTH",
            });
        }
        let c = self.expr(count)?;
        let at = self.op(Instr::LoopBegin { count: c, end: 0 })?;
        let _ = self.loops.push(at);
        Ok(at)
    }

    /// Closes the innermost loop, which `begin` must name.
    pub fn loop_end(&mut self, begin: u16) -> Result<(), BuilderError> {
        if self.loops.last() != Some(&begin) {
            return Err(BuilderError::Loop {
                problem: "loop_end does not close the innermost open loop",
            });
        }
        let end = self.op(Instr::LoopEnd { begin })?;
        self.loops.pop();
        let code = &mut self.k.borrow_mut().code;
        if let Instr::LoopBegin { count, .. } = code[begin as usize] {
            code[begin as usize] = Instr::LoopBegin { count, end };
        }
        Ok(())
    }

    /// The loop depth at the next instruction (the innermost open loop's
    /// counter is `l[depth - 1]`).
    pub fn depth(&self) -> usize {
        self.loops.len()
    }

    /// Opens role `nm`: `count` WarpGroups of `regs` registers per thread
    /// running the program written until [`Builder::end_role`].
    pub fn begin_role(&mut self, nm: &str, count: u32, regs: u32) -> Result<(), BuilderError> {
        if self.role.is_some() {
            return Err(BuilderError::RoleOpen);
        }
        let n = name("role", nm)?;
        let (count, regs) = role_fields(count, regs)?;
        let start = self.kernel().code.len() as u16;
        self.role = Some((n, Open { count, regs, start }));
        Ok(())
    }

    /// Closes the open role's program and declares the role.
    pub fn end_role(&mut self) -> Result<(), BuilderError> {
        let Some((n, o)) = self.role.take() else {
            return Err(BuilderError::NoRole);
        };
        if !self.loops.is_empty() {
            return Err(BuilderError::Unclosed { what: "loop" });
        }
        let len = self.kernel().code.len() as u16 - o.start;
        self.push_role(Role {
            name: n,
            count: o.count,
            regs: o.regs,
            start: o.start,
            len,
            stream: false,
        })
    }

    /// Declares role `nm` whose instructions come from a
    /// [`crate::StreamSource`] rather than a program.
    pub fn stream_role(&mut self, nm: &str, count: u32, regs: u32) -> Result<(), BuilderError> {
        if self.role.is_some() {
            return Err(BuilderError::RoleOpen);
        }
        let (count, regs) = role_fields(count, regs)?;
        // A stream role has no program: start 0, length 0, as the text
        // assembly writes it.
        self.push_role(Role {
            name: name("role", nm)?,
            count,
            regs,
            start: 0,
            len: 0,
            stream: true,
        })
    }

    fn push_role(&mut self, r: Role) -> Result<(), BuilderError> {
        push(&mut self.k.borrow_mut().roles, r, "role").map(|_| ())
    }

    /// Checks that no role or loop is open, validates the kernel and hands
    /// it back.
    pub fn finish(self) -> Result<K, BuilderError> {
        if self.role.is_some() {
            return Err(BuilderError::Unclosed { what: "role" });
        }
        self.k.borrow().validate()?;
        Ok(self.k)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::{MAX_CODE, MAX_EXPRS};

    fn one_role() -> Builder<Kernel> {
        let mut b = Builder::new(Kernel::default(), "t").unwrap();
        b.begin_role("main", 1, 32).unwrap();
        b
    }

    #[test]
    fn expressions_are_interned() {
        let mut b = one_role();
        let a = b.konst(7).unwrap();
        let c = b.konst(8).unwrap();
        assert_eq!(b.konst(7).unwrap(), a);
        assert_ne!(a, c);
        assert_eq!(b.kernel().exprs.len(), 2);
    }

    #[test]
    fn loops_are_patched_and_checked() {
        let mut b = one_role();
        let outer = b.loop_begin(Expr::constant(2)).unwrap();
        let inner = b.loop_begin(Expr::constant(3)).unwrap();
        assert_eq!(
            b.loop_end(outer),
            Err(BuilderError::Loop {
                problem: "loop_end does not close the innermost open loop"
            })
        );
        b.loop_end(inner).unwrap();
        assert_eq!(b.end_role(), Err(BuilderError::Unclosed { what: "loop" }));
    }

    #[test]
    fn loop_end_index_is_written_into_loop_begin() {
        let mut b = one_role();
        let l = b.loop_begin(Expr::constant(2)).unwrap();
        b.op(Instr::Bubble { cycles: 1 }).unwrap();
        b.loop_end(l).unwrap();
        b.op(Instr::Exit).unwrap();
        b.end_role().unwrap();
        let k = b.finish().unwrap();
        assert!(matches!(k.code[0], Instr::LoopBegin { end: 2, .. }));
        assert_eq!(k.roles[0].len, 4);
    }

    #[test]
    fn capacity_errors_name_the_table() {
        let mut b = one_role();
        for _ in 0..MAX_CODE {
            b.op(Instr::Bubble { cycles: 1 }).unwrap();
        }
        assert_eq!(
            b.op(Instr::Exit),
            Err(BuilderError::Full {
                table: "instruction",
                max: MAX_CODE
            })
        );
        let mut b = Builder::new(Kernel::default(), "t").unwrap();
        for i in 0..MAX_EXPRS {
            b.konst(i as i64).unwrap();
        }
        assert!(matches!(
            b.konst(-1),
            Err(BuilderError::Full {
                table: "distinct expression",
                ..
            })
        ));
    }

    #[test]
    fn misuse_is_an_error() {
        let mut b = Builder::new(Kernel::default(), "t").unwrap();
        assert_eq!(b.op(Instr::Exit), Err(BuilderError::NoRole));
        assert_eq!(b.end_role(), Err(BuilderError::NoRole));
        b.begin_role("a", 1, 32).unwrap();
        assert_eq!(b.begin_role("b", 1, 32), Err(BuilderError::RoleOpen));
        assert_eq!(
            b.begin_role("c", 300, 32),
            Err(BuilderError::RoleOpen),
            "a role is still open"
        );
        assert!(Builder::new(Kernel::default(), "a name far longer than 24 bytes").is_err());
        assert!(matches!(
            one_role().finish(),
            Err(BuilderError::Unclosed { what: "role" })
        ));
    }

    #[test]
    fn builds_in_place() {
        let mut k = Kernel::default();
        k.exprs.push(Expr::constant(99)).unwrap();
        let mut b = Builder::new(&mut k, "inplace").unwrap();
        b.begin_role("main", 1, 32).unwrap();
        b.op(Instr::Exit).unwrap();
        b.end_role().unwrap();
        b.finish().unwrap();
        assert_eq!(k.name.as_str(), "inplace");
        assert!(k.exprs.is_empty(), "new() clears the old tables");
    }
}
