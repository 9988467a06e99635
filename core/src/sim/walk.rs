//! Walking a role's compact program: the loop control that brings a
//! WarpGroup to its next instruction, and [`Walk`], which resolves one
//! WarpGroup's whole program into the explicit [`Op`] stream it issues.
//!
//! The issue unit runs the same control ([`control`]) one budget of steps
//! per cycle; a [`Walk`] runs it to the end, so a host can hand the ops of
//! a program built for one CTA to a `stream` role of another kernel (a
//! GEMM whose CTAs each have their own schedule, as stream-K's do).

use crate::isa::{EvalCtx, Frame, Instr, Op, MAX_LOOP_DEPTH};
use crate::kernel::Kernel;

/// Where loop control left a WarpGroup.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Control {
    /// On the non-control instruction at this index.
    At(usize),
    /// Past its program's end (an implicit exit).
    End,
    /// The budget of control steps ran out first.
    Budget,
}

/// The loop stack did not match the code (a corrupt snapshot or program).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Nesting;

/// Runs loop control from `pc` until a non-control instruction, the end of
/// the program (`end`), or `budget` control steps. The open loops'
/// iterations are written into `ctx.l` (the caller starts it at zeros).
#[inline]
pub(crate) fn control(
    k: &Kernel,
    end: usize,
    pc: &mut u16,
    depth: &mut u8,
    loops: &mut [Frame; MAX_LOOP_DEPTH],
    ctx: &mut EvalCtx,
    budget: u32,
) -> Result<Control, Nesting> {
    for _ in 0..budget {
        let at = *pc as usize;
        if at >= end {
            return Ok(Control::End);
        }
        for (i, f) in loops[..*depth as usize].iter().enumerate() {
            ctx.l[i] = f.iter;
        }
        match k.code[at] {
            Instr::LoopBegin { count, end } => {
                let n = k.exprs[count as usize].eval(ctx);
                if n <= 0 {
                    *pc = end + 1;
                } else {
                    let slot = loops.get_mut(*depth as usize).ok_or(Nesting)?;
                    *slot = Frame {
                        begin: at as u16,
                        count: n.min(u32::MAX as i64) as u32,
                        iter: 0,
                    };
                    *depth += 1;
                    *pc += 1;
                }
            }
            Instr::LoopEnd { begin } => {
                let top = (*depth as usize).checked_sub(1);
                let f = top.and_then(|d| loops.get_mut(d)).ok_or(Nesting)?;
                f.iter += 1;
                if f.iter < f.count {
                    *pc = begin + 1;
                } else {
                    *depth -= 1;
                    *pc += 1;
                }
            }
            _ => return Ok(Control::At(at)),
        }
    }
    Ok(Control::Budget)
}

/// Control steps a [`Walk`] takes to reach one instruction before it gives
/// up (loops with no instruction in them, nested deep).
pub const WALK_BUDGET: u32 = 1 << 24;

/// Why a [`Walk`] could not go on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WalkError {
    /// No role of that index.
    Role,
    /// More than [`WALK_BUDGET`] control steps without an instruction.
    Budget,
    /// Loops nested deeper than [`MAX_LOOP_DEPTH`] or unbalanced.
    Nesting,
}

/// One WarpGroup's way through its role's program: each call of
/// [`Walk::next_op`] gives the next [`Op`] it issues, resolved as the
/// simulator resolves it, ending after [`Op::Exit`] or at the program's
/// end.
#[derive(Clone, Copy, Debug)]
pub struct Walk {
    end: usize,
    pc: u16,
    depth: u8,
    loops: [Frame; MAX_LOOP_DEPTH],
    ctx: EvalCtx,
    done: bool,
}

impl Walk {
    /// The walk of WarpGroup `ctx.wg` of role `role` of kernel `k`, for the
    /// CTA in `ctx` (its loop counters are ignored).
    pub fn new(k: &Kernel, role: u8, ctx: EvalCtx) -> Result<Self, WalkError> {
        let r = k.roles.get(role as usize).ok_or(WalkError::Role)?;
        Ok(Walk {
            end: r.start as usize + r.len as usize,
            pc: r.start,
            depth: 0,
            loops: [Frame::EMPTY; MAX_LOOP_DEPTH],
            ctx,
            done: false,
        })
    }

    /// The next op of the walk in `k` (the kernel it was made for), `None`
    /// after its exit.
    pub fn next_op(&mut self, k: &Kernel) -> Result<Option<Op>, WalkError> {
        if self.done {
            return Ok(None);
        }
        // As the issue unit's fetch does.
        self.ctx.l = [0; MAX_LOOP_DEPTH];
        let at = control(
            k,
            self.end.min(k.code.len()),
            &mut self.pc,
            &mut self.depth,
            &mut self.loops,
            &mut self.ctx,
            WALK_BUDGET,
        )
        .map_err(|_| WalkError::Nesting)?;
        match at {
            Control::At(pc) => {
                let op = super::resolve::resolve(k, &k.code[pc], &self.ctx);
                self.pc += 1;
                if op == Op::Exit {
                    self.done = true;
                }
                Ok(Some(op))
            }
            Control::End => {
                self.done = true;
                Ok(None)
            }
            Control::Budget => Err(WalkError::Budget),
        }
    }
}
