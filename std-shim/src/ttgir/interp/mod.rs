//! The TTGIR interpreter: runs a kernel's scalar part for one CTA, exactly
//! as the GPU computes it, and reports the timing-visible ops it reaches
//! with their operands' values ([`Effect`]).
//!
//! Integer `arith` ops (at their widths, [`super::value`]), `scf.for` (a
//! trip count of zero when the lower bound is not below the upper),
//! `scf.while`, `scf.if`, `scf.yield`, `scf.condition`,
//! `tt.get_program_id`, `tt.get_num_programs`, `tt.call` and `tt.return`
//! are evaluated, so tile indices, loop bounds, TMA coordinates, ring slots
//! and barrier phases come out as the kernel computes them. Tensor values
//! in registers, floats and pointers are opaque: an op that reads one gives
//! an opaque result, and a branch or loop bound that needs one is an error.
//! Shared-memory buffers are named by their `local_alloc` and the indices
//! `memdesc_index` takes. A predicated op whose `i1` operand is false has
//! no effect. Every op counts against a step budget, so a kernel that
//! never ends is an error, not a hang.
//!
//! The interpreter keeps its place in an explicit stack of frames (a
//! block, the next op in it, and what the block is the body of), so a run
//! can stop after some effects and go on later ([`Interp::resume`]): the
//! simulator's pulls drive it, and a CTA's effects never need to be held
//! all at once.

mod effect;
mod gather;
mod memory;
mod ops;
mod work;

use std::cell::RefCell;
use std::collections::HashMap;
use std::hash::BuildHasherDefault;
use std::sync::Arc;

use fnv::FnvHasher;

pub use effect::{Effect, EffectSink, Origin, PtrTile};

use super::error::{TtgirError, TtgirErrorKind};
use super::global::Global;
use super::tree::{Block, Func, Module, Node, Region};
use super::value::{wrap, Value};

/// How a block ended.
enum Flow {
    /// It ran to its end without a terminator.
    Next,
    /// `scf.yield` (or a partition's terminator) with values.
    Yield(Vec<Value>),
    /// `scf.condition(%c) values`.
    Condition(bool, Vec<Value>),
    /// `tt.return` with values.
    Return(Vec<Value>),
}

/// Values by SSA name and result index (`%r#1` is `("%r", 1)`, `%x` is
/// `("%x", 0)`).
type Values<'a> = HashMap<(&'a str, u32), Value, BuildHasherDefault<FnvHasher>>;

/// `%r#1` as `("%r", 1)`.
fn key(name: &str) -> (&str, u32) {
    match name.split_once('#') {
        Some((base, i)) => (base, i.parse().unwrap_or(u32::MAX)),
        None => (name, 0),
    }
}

/// Where op `n`'s effects come from.
fn origin<'m>(n: &'m Node<'_>) -> Origin<'m> {
    Origin {
        at: n.stmt.start,
        op: n.view.name,
    }
}

/// What a frame's block is the body of.
enum Kind<'m, 'a> {
    /// The function the run started with.
    Entry,
    /// A called function: the caller's values wait here.
    Call {
        node: &'m Node<'a>,
        caller: Values<'a>,
    },
    /// An iteration of `scf.for`.
    For {
        node: &'m Node<'a>,
        iv: &'a str,
        i: i64,
        ub: i64,
        step: i64,
        bits: u8,
        names: Vec<&'a str>,
    },
    /// The before (`true`) or do region of `scf.while`.
    While {
        node: &'m Node<'a>,
        before: bool,
        args: Vec<&'a str>,
    },
    /// A branch of `scf.if`.
    If { node: &'m Node<'a> },
}

/// A block being run.
struct Frame<'m, 'a> {
    block: &'m Block<'a>,
    next: usize,
    kind: Kind<'m, 'a>,
}

/// A CTA's run of one kernel.
pub struct Interp<'m, 'a> {
    module: &'m Module<'a>,
    vals: Values<'a>,
    cta: [u32; 3],
    grid: [u32; 3],
    steps: u64,
    budget: u64,
    stack: Vec<Frame<'m, 'a>>,
    returned: Option<Vec<Value>>,
    /// Which warps this run is: the default partition (the function's
    /// own warps) or worker partition `p` of `ttg.warp_specialize`.
    role: Role,
    /// The descriptor key each global scratch buffer holds, by the
    /// buffer's allocating op.
    made: HashMap<u32, u32>,
    /// Whether effects are reported: a worker partition's run goes
    /// through the function's code before the `warp_specialize` without
    /// reporting it (those warps sit idle there).
    loud: bool,
    /// Loads into registers so far (the next one's number).
    loads: u64,
    /// The launch's tensors and buffers, with the contents it gives.
    global: Arc<Global>,
    /// Global addresses of the spin locks the run holds.
    held: Vec<u64>,
    /// Waits for loads into registers, and the element-wise work after
    /// them, held back so that the block's next loads into registers are
    /// issued before them (see [`Interp::emit`]).
    deferred: RefCell<Vec<(Origin<'m>, Effect<'m>)>>,
}

/// The warps a run stands for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// The function's own warps: its code, and the default region of a
    /// `ttg.warp_specialize`.
    Default,
    /// Worker partition `p` (`partitionP`) of the kernel's
    /// `ttg.warp_specialize`: its region, and nothing else.
    Worker(u8),
}

impl Role {
    /// The warps of simfa role `role`: 0 the function's own, `p + 1`
    /// worker partition `p`.
    pub fn of(role: u8) -> Role {
        match role {
            0 => Role::Default,
            r => Role::Worker(r - 1),
        }
    }
}

/// The deepest chain of calls and nested regions a kernel may make.
const MAX_DEPTH: usize = 256;

/// An empty block, the body of a function or region without ops.
static EMPTY: Block<'static> = Block {
    args: Vec::new(),
    ops: Vec::new(),
};

impl<'m, 'a> Interp<'m, 'a> {
    /// An interpreter for CTA `cta` of a `grid` launch of `module`, which
    /// may execute at most `budget` ops.
    pub fn new(module: &'m Module<'a>, cta: [u32; 3], grid: [u32; 3], budget: u64) -> Self {
        Interp {
            module,
            vals: Values::default(),
            cta,
            grid,
            steps: 0,
            budget,
            stack: Vec::new(),
            returned: None,
            role: Role::Default,
            made: HashMap::new(),
            loud: true,
            loads: 0,
            global: Arc::default(),
            held: Vec::new(),
            deferred: RefCell::new(Vec::new()),
        }
    }

    /// The same interpreter reading global memory as `global` describes
    /// it: scalar loads from tensors with contents give their values, and
    /// addresses loaded from memory become pointers into its tensors.
    pub fn with_global(mut self, global: Arc<Global>) -> Self {
        self.global = global;
        self
    }

    /// The same interpreter running as `role`'s warps.
    pub fn as_role(mut self, role: Role) -> Self {
        self.role = role;
        self.loud = role == Role::Default;
        self
    }

    /// Reports effect `e` of op `n` (unless this run is a worker's before
    /// its partition), in the order the SM issues it: as ptxas schedules a
    /// block, a load into registers is issued before the waits for earlier
    /// loads (and the element-wise work after them) in the same block, so
    /// those are held back until an effect of another kind, or the block's
    /// end ([`Interp::flush`]). A hoisted load never needs a held-back
    /// load's data: an address or mask made from loaded data is not a
    /// pointer tile the interpreter can follow.
    fn emit(&self, sink: &mut impl EffectSink<'m>, n: &'m Node<'a>, e: Effect<'m>) {
        if !self.loud {
            return;
        }
        let from = origin(n);
        let mut held = self.deferred.borrow_mut();
        match e {
            Effect::Use { .. } => held.push((from, e)),
            Effect::Compute { .. } if !held.is_empty() => held.push((from, e)),
            Effect::PtrLoad { regs: Some(_), .. } => sink.effect(from, e),
            _ => {
                for (f, x) in held.drain(..) {
                    sink.effect(f, x);
                }
                sink.effect(from, e);
            }
        }
    }

    /// Reports a wait for load `load` whose value the next ops compute
    /// with (a size, an address): at once, after anything held back.
    fn emit_wait_now(&self, sink: &mut impl EffectSink<'m>, n: &'m Node<'a>, load: u64) {
        self.flush(sink);
        if self.loud {
            sink.effect(origin(n), Effect::Use { load });
        }
    }

    /// Reports what [`Interp::emit`] held back: before an op with regions,
    /// a call or a block's last op, and when a block ends.
    fn flush(&self, sink: &mut impl EffectSink<'m>) {
        for (f, x) in self.deferred.borrow_mut().drain(..) {
            sink.effect(f, x);
        }
    }

    fn fail(&self, n: &Node<'a>, why: impl Into<String>) -> TtgirError {
        self.module.error(
            n.stmt.start,
            TtgirErrorKind::Exec {
                op: n.view.name.to_string(),
                x: self.cta[0],
                y: self.cta[1],
                z: self.cta[2],
                why: why.into(),
            },
        )
    }

    /// Starts `f` with its arguments bound to `args` (one per argument);
    /// nothing runs until [`Interp::resume`].
    pub fn start(&mut self, f: &'m Func<'a>, args: &[Value]) {
        for ((name, _), v) in f.args.iter().zip(args) {
            self.vals.insert(key(name), *v);
        }
        self.stack.push(Frame {
            block: entry(&f.body).unwrap_or(&EMPTY),
            next: 0,
            kind: Kind::Entry,
        });
    }

    /// Runs `f` to its end; returns what it returns.
    pub fn run(
        &mut self,
        f: &'m Func<'a>,
        args: &[Value],
        sink: &mut impl EffectSink<'m>,
    ) -> Result<Vec<Value>, TtgirError> {
        self.start(f, args);
        self.resume(sink, &mut |_| false)?;
        Ok(self.returned.take().unwrap_or_default())
    }

    /// Runs on until the run ends (`true`) or `pause` says to stop after
    /// an op (`false`); `pause` sees the sink.
    pub fn resume<S: EffectSink<'m>>(
        &mut self,
        sink: &mut S,
        pause: &mut impl FnMut(&S) -> bool,
    ) -> Result<bool, TtgirError> {
        while let Some(top) = self.stack.last_mut() {
            let Some(n) = top.block.ops.get(top.next) else {
                self.flush(sink);
                self.end(None, Flow::Next)?;
                continue;
            };
            top.next += 1;
            // Loads are not issued ahead into a region or a callee, nor
            // past the block's terminator (its last op).
            if !n.regions.is_empty() || n.view.name == "tt.call" || top.next == top.block.ops.len()
            {
                self.flush(sink);
            }
            self.steps += 1;
            if self.steps > self.budget {
                return Err(self.fail(
                    n,
                    format!(
                        "the step budget of {} ops is spent (a loop that never ends?)",
                        self.budget
                    ),
                ));
            }
            if self.stack.len() > MAX_DEPTH {
                return Err(self.fail(n, format!("calls and regions nest deeper than {MAX_DEPTH}")));
            }
            self.op(n, sink)?;
            if pause(sink) {
                return Ok(self.stack.is_empty());
            }
        }
        Ok(true)
    }

    /// Executes op `n`: control flow moves the stack, anything else is
    /// [`Interp::simple`].
    fn op(&mut self, n: &'m Node<'a>, sink: &mut impl EffectSink<'m>) -> Result<(), TtgirError> {
        if n.scope.is_some() {
            return self.simple(n, sink);
        }
        match n.view.name {
            "scf.for" => self.enter_for(n),
            "scf.if" => {
                let c = Self::ssa(n)
                    .first()
                    .copied()
                    .ok_or_else(|| self.fail(n, "no condition operand"))?;
                let (c, _) = self.int(n, c)?;
                let r = if c != 0 {
                    n.regions.first()
                } else {
                    n.regions.get(1)
                };
                match r.and_then(entry) {
                    Some(block) => self.push(block, Kind::If { node: n }),
                    None => self.define(&n.view, &[]),
                }
                Ok(())
            }
            "scf.while" => {
                let (names, inits) = self.iter_args(n, 0)?;
                let (Some(before), Some(_)) = (n.regions.first(), n.regions.get(1)) else {
                    return Err(self.fail(n, "a while loop needs a before and a do region"));
                };
                let block = entry(before).unwrap_or(&EMPTY);
                let args = if block.args.is_empty() {
                    names
                } else {
                    block.args.clone()
                };
                self.bind(&args, &inits);
                self.push(
                    block,
                    Kind::While {
                        node: n,
                        before: true,
                        args,
                    },
                );
                Ok(())
            }
            "tt.call" => self.enter_call(n),
            "ttg.warp_specialize" => self.enter_partition(n, sink),
            "scf.yield" | "ttg.warp_yield" | "tt.reduce.return" => {
                let v = self.values(n, &Self::ssa(n))?;
                self.end(Some(n), Flow::Yield(v))
            }
            "scf.condition" => {
                let ssa = Self::ssa(n);
                let (&c, rest) = ssa
                    .split_first()
                    .ok_or_else(|| self.fail(n, "no condition operand"))?;
                let (c, _) = self.int(n, c)?;
                let v = self.values(n, rest)?;
                self.end(Some(n), Flow::Condition(c != 0, v))
            }
            "tt.return" | "ttg.warp_return" => {
                let v = self.values(n, &Self::ssa(n))?;
                self.end(Some(n), Flow::Return(v))
            }
            _ => self.simple(n, sink),
        }
    }

    fn push(&mut self, block: &'m Block<'a>, kind: Kind<'m, 'a>) {
        self.stack.push(Frame {
            block,
            next: 0,
            kind,
        });
    }

    /// `scf.for %iv = %lb to %ub step %st iter_args(%a = %x, ...)`: its
    /// first iteration, or its results when it runs none.
    fn enter_for(&mut self, n: &'m Node<'a>) -> Result<(), TtgirError> {
        let ops = &n.view.operands;
        let text = |i: usize| ops.get(i).map(|o| o.text).unwrap_or("");
        if text(2) != "to" || text(4) != "step" {
            return Err(self.fail(n, "not `scf.for %iv = %lb to %ub step %step`"));
        }
        let bound = |s: &str| -> Result<(i64, u8), TtgirError> {
            match s.parse::<i64>() {
                Ok(x) => Ok((x, 64)),
                Err(_) => self.int(n, s),
            }
        };
        let (lb, bits) = bound(text(1))?;
        let (ub, _) = bound(text(3))?;
        let (step, _) = bound(text(5))?;
        if step <= 0 {
            return Err(self.fail(n, format!("a loop step of {step} (it must be positive)")));
        }
        let (names, inits) = self.iter_args(n, 6)?;
        let body = n
            .regions
            .first()
            .and_then(entry)
            .ok_or_else(|| self.fail(n, "a loop without a body"))?;
        if lb >= ub {
            self.define(&n.view, &inits);
            return Ok(());
        }
        let iv = text(0);
        self.bind(&[iv], &[Value::Int { v: lb, bits }]);
        self.bind(&names, &inits);
        self.push(
            body,
            Kind::For {
                node: n,
                iv,
                i: lb,
                ub,
                step,
                bits,
                names,
            },
        );
        Ok(())
    }

    /// `ttg.warp_specialize`: the default partition runs its default region
    /// (whose `warp_yield` gives the op's results); worker partition `p`
    /// runs region `p + 1` with its block arguments bound to the op's
    /// operands, and ends with it. Either reports the partition's start.
    fn enter_partition(
        &mut self,
        n: &'m Node<'a>,
        sink: &mut impl EffectSink<'m>,
    ) -> Result<(), TtgirError> {
        let i = match self.role {
            Role::Default => 0,
            Role::Worker(p) => p as usize + 1,
        };
        let Some(r) = n.regions.get(i) else {
            let why = match i {
                0 => "a warp_specialize without a default region".to_string(),
                i => format!("the kernel has no partition{}", i - 1),
            };
            return Err(self.fail(n, why));
        };
        let block = entry(r).unwrap_or(&EMPTY);
        if i == 0 {
            self.emit(sink, n, Effect::Partition);
            self.push(block, Kind::If { node: n });
        } else {
            let values = self.values(n, &Self::ssa(n))?;
            // Only the partition's captures are visible in it.
            self.vals.clear();
            self.bind(&block.args, &values);
            self.stack.clear();
            self.loud = true;
            self.emit(sink, n, Effect::Partition);
            self.push(block, Kind::Entry);
        }
        Ok(())
    }

    /// `tt.call @f(%a, ...)`: `f` runs with the operands as its
    /// arguments, in values of its own.
    fn enter_call(&mut self, n: &'m Node<'a>) -> Result<(), TtgirError> {
        let module = self.module;
        let head = module.src.get(n.stmt.start..n.stmt.end).unwrap_or("");
        let callee = head
            .split('@')
            .nth(1)
            .and_then(|s| s.split(|c: char| c == '(' || c.is_whitespace()).next())
            .unwrap_or("")
            .trim_matches('"');
        let f = module
            .funcs
            .iter()
            .find(|f| f.name == callee)
            .ok_or_else(|| {
                self.fail(
                    n,
                    format!("calls `@{callee}`, which the module does not define"),
                )
            })?;
        let args = self.values(n, &Self::ssa(n))?;
        let caller = std::mem::take(&mut self.vals);
        for ((name, _), v) in f.args.iter().zip(&args) {
            self.vals.insert(key(name), *v);
        }
        self.push(
            entry(&f.body).unwrap_or(&EMPTY),
            Kind::Call { node: n, caller },
        );
        Ok(())
    }

    /// The top frame's block ended with `flow` (at op `at`): what its
    /// construct does next.
    fn end(&mut self, at: Option<&'m Node<'a>>, flow: Flow) -> Result<(), TtgirError> {
        if let Flow::Return(v) = flow {
            // Out of every region up to the function.
            while let Some(f) = self.stack.pop() {
                match f.kind {
                    Kind::Entry => {
                        self.returned = Some(v);
                        return Ok(());
                    }
                    Kind::Call { node, caller } => {
                        self.vals = caller;
                        self.define(&node.view, &v);
                        return Ok(());
                    }
                    _ => {}
                }
            }
            return Ok(());
        }
        let Some(mut f) = self.stack.pop() else {
            return Ok(());
        };
        let (values, cond) = match flow {
            Flow::Yield(v) => (Some(v), None),
            Flow::Condition(c, v) => (None, Some((c, v))),
            _ => (None, None),
        };
        match f.kind {
            Kind::Entry => self.returned = Some(values.unwrap_or_default()),
            Kind::Call { node, caller } => {
                self.vals = caller;
                self.define(&node.view, &values.unwrap_or_default());
            }
            Kind::If { node } => self.define(&node.view, &values.unwrap_or_default()),
            Kind::For {
                node,
                iv,
                ref mut i,
                ub,
                step,
                bits,
                ref names,
            } => {
                let carried = values.unwrap_or_default();
                let next = i
                    .checked_add(step)
                    .filter(|&x| wrap(x, bits) == x && x < ub);
                match next {
                    Some(x) => {
                        *i = x;
                        self.bind(&[iv], &[Value::Int { v: x, bits }]);
                        self.bind(names, &carried);
                        f.next = 0;
                        self.stack.push(f);
                    }
                    None => self.define(&node.view, &carried),
                }
            }
            Kind::While { node, before, args } => match (before, cond) {
                (true, Some((true, v))) => {
                    let block = node.regions.get(1).and_then(entry).unwrap_or(&EMPTY);
                    self.bind(&block.args, &v);
                    self.push(
                        block,
                        Kind::While {
                            node,
                            before: false,
                            args,
                        },
                    );
                }
                (true, Some((false, v))) => self.define(&node.view, &v),
                (true, None) => {
                    return Err(self.fail(
                        at.unwrap_or(node),
                        "the before region of a while loop ends without `scf.condition`",
                    ))
                }
                (false, _) => {
                    // The do region yielded: back to the before region.
                    let block = node.regions.first().and_then(entry).unwrap_or(&EMPTY);
                    self.bind(&args, &values.unwrap_or_default());
                    self.push(
                        block,
                        Kind::While {
                            node,
                            before: true,
                            args,
                        },
                    );
                }
            },
        }
        Ok(())
    }
}

/// The entry block of `r`: its first block with ops (a region printed
/// with a label starts with an empty block before it).
fn entry<'m, 'a>(r: &'m Region<'a>) -> Option<&'m Block<'a>> {
    r.blocks
        .iter()
        .find(|b| !b.ops.is_empty() || !b.args.is_empty())
}

#[cfg(test)]
mod tests;
