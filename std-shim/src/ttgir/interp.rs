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

use std::collections::HashMap;
use std::hash::BuildHasherDefault;

use fnv::FnvHasher;

use super::error::{TtgirError, TtgirErrorKind};
use super::scope::{ScopeOp, Wgmma};
use super::stmt::OpView;
use super::tree::{Block, Func, Module, Node, Region};
use super::types::{find_int, parse_type};
use super::value::{binary, compare, int_bits, wrap, MemRef, Value};

/// One timing-visible op reached by a CTA, with its operands' values.
#[derive(Clone, Debug, PartialEq)]
pub enum Effect<'m> {
    /// `local_alloc` of `bytes` of shared memory.
    Alloc {
        /// The buffer.
        mem: MemRef,
        /// Its size.
        bytes: u64,
    },
    /// `init_barrier` with an arrival count.
    InitBarrier {
        /// The barrier.
        bar: MemRef,
        /// Arrivals per phase.
        count: u32,
    },
    /// `barrier_expect` of `bytes`.
    Expect {
        /// The barrier.
        bar: MemRef,
        /// Bytes of transactions expected.
        bytes: u64,
    },
    /// `arrive_barrier`.
    Arrive {
        /// The barrier.
        bar: MemRef,
        /// Arrivals.
        count: u32,
    },
    /// `wait_barrier` for a phase parity.
    Wait {
        /// The barrier.
        bar: MemRef,
        /// The phase parity waited for.
        phase: u32,
    },
    /// A TMA copy from global memory (to shared memory, completing on
    /// `bar`, or to registers).
    TmaLoad {
        /// The kernel argument of the descriptor.
        desc: u16,
        /// Coordinates, outermost first (as the kernel passes them).
        coords: Vec<i64>,
        /// The box, outermost dimension first.
        box_shape: &'m [u32],
        /// Bytes moved.
        bytes: u64,
        /// The barrier it completes on.
        bar: Option<MemRef>,
    },
    /// A TMA copy to global memory.
    TmaStore {
        /// The kernel argument of the descriptor.
        desc: u16,
        /// Coordinates, outermost first.
        coords: Vec<i64>,
        /// The box, outermost dimension first.
        box_shape: &'m [u32],
        /// Bytes moved.
        bytes: u64,
    },
    /// `async_tma_store_wait` until at most `pendings` stores are in flight.
    StoreWait {
        /// Stores allowed to remain in flight.
        pendings: u32,
    },
    /// A `warp_group_dot`.
    Wgmma(&'m Wgmma),
    /// A `warp_group_dot_wait`.
    WgmmaWait {
        /// Dots allowed to remain in flight.
        pendings: u32,
    },
    /// `fence_async_shared`.
    Fence,
}

/// Where the effects of a CTA go; the op's byte offset comes with each.
pub trait EffectSink<'m> {
    /// One effect of the op at byte `at` of the input.
    fn effect(&mut self, at: usize, e: Effect<'m>);
}

impl<'m> EffectSink<'m> for Vec<(usize, Effect<'m>)> {
    fn effect(&mut self, at: usize, e: Effect<'m>) {
        self.push((at, e));
    }
}

/// How a block ended.
enum Flow {
    /// It ran to its end (or to an op that ends nothing).
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

/// A CTA's run of one kernel.
pub struct Interp<'m, 'a> {
    module: &'m Module<'a>,
    vals: Values<'a>,
    cta: [u32; 3],
    grid: [u32; 3],
    steps: u64,
    budget: u64,
    depth: u32,
}

/// The deepest chain of calls a kernel may make.
const MAX_CALL_DEPTH: u32 = 64;

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
            depth: 0,
        }
    }

    /// Ops executed so far.
    pub fn steps(&self) -> u64 {
        self.steps
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

    /// Runs `f` with its arguments bound to `args` (one per argument);
    /// returns what it returns.
    pub fn run(
        &mut self,
        f: &'m Func<'a>,
        args: &[Value],
        sink: &mut impl EffectSink<'m>,
    ) -> Result<Vec<Value>, TtgirError> {
        for ((name, _), v) in f.args.iter().zip(args) {
            self.vals.insert(key(name), *v);
        }
        match self.region(&f.body, sink)? {
            Flow::Return(v) | Flow::Yield(v) => Ok(v),
            _ => Ok(Vec::new()),
        }
    }

    /// Runs the entry block of `r` (the first with ops).
    fn region(
        &mut self,
        r: &'m Region<'a>,
        sink: &mut impl EffectSink<'m>,
    ) -> Result<Flow, TtgirError> {
        match entry(r) {
            Some(b) => self.block(b, sink),
            None => Ok(Flow::Next),
        }
    }

    fn block(
        &mut self,
        b: &'m Block<'a>,
        sink: &mut impl EffectSink<'m>,
    ) -> Result<Flow, TtgirError> {
        for n in &b.ops {
            match self.op(n, sink)? {
                Flow::Next => {}
                f => return Ok(f),
            }
        }
        Ok(Flow::Next)
    }

    /// The value of operand `name`.
    fn get(&self, n: &Node<'a>, name: &str) -> Result<Value, TtgirError> {
        self.vals
            .get(&key(name))
            .copied()
            .ok_or_else(|| self.fail(n, format!("`{name}` is used before it is defined")))
    }

    /// Operand `name` as an integer of its width.
    fn int(&self, n: &Node<'a>, name: &str) -> Result<(i64, u8), TtgirError> {
        match self.get(n, name)? {
            Value::Int { v, bits } => Ok((v, bits)),
            other => Err(self.fail(
                n,
                format!("`{name}` must be an integer here, and is {}", kind(&other)),
            )),
        }
    }

    /// Operand `name` as a shared-memory buffer.
    fn mem(&self, n: &Node<'a>, name: &str) -> Result<MemRef, TtgirError> {
        match self.get(n, name)? {
            Value::Mem(m) => Ok(m),
            other => Err(self.fail(
                n,
                format!(
                    "`{name}` must be a shared-memory buffer, and is {}",
                    kind(&other)
                ),
            )),
        }
    }

    /// Binds the op's results to `values` (missing ones are opaque).
    fn define(&mut self, v: &OpView<'a>, values: &[Value]) {
        let mut it = values.iter();
        for &(name, count) in &v.results {
            for i in 0..count {
                let val = it.next().copied().unwrap_or(Value::Opaque);
                self.vals.insert((name, i), val);
            }
        }
    }

    /// Binds names to values (block arguments, loop variables).
    fn bind(&mut self, names: &[&'a str], values: &[Value]) {
        for (name, v) in names.iter().zip(values) {
            self.vals.insert(key(name), *v);
        }
    }

    /// Whether the op's `i1` operands (its predicates) all hold.
    fn enabled(&self, n: &Node<'a>) -> bool {
        n.view
            .operands
            .iter()
            .filter(|o| o.is_ssa() && o.group == 0)
            .all(|o| {
                !matches!(
                    self.vals.get(&key(o.text)),
                    Some(Value::Int { v: 0, bits: 1 })
                )
            })
    }

    /// The SSA operands at top level, in order.
    fn ssa(n: &Node<'a>) -> Vec<&'a str> {
        n.view
            .operands
            .iter()
            .filter(|o| o.is_ssa() && o.group == 0)
            .map(|o| o.text)
            .collect()
    }

    /// The values of `names`.
    fn values(&self, n: &Node<'a>, names: &[&str]) -> Result<Vec<Value>, TtgirError> {
        names.iter().map(|s| self.get(n, s)).collect()
    }

    fn op(&mut self, n: &'m Node<'a>, sink: &mut impl EffectSink<'m>) -> Result<Flow, TtgirError> {
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
        let v = &n.view;
        let name = v.name;
        if let Some(s) = &n.scope {
            self.scoped(n, s, sink)?;
            self.define(v, &[]);
            return Ok(Flow::Next);
        }
        let (dialect, op) = name.split_once('.').unwrap_or(("", name));
        match (dialect, op) {
            ("scf", "for") => return self.for_loop(n, sink),
            ("scf", "if") => return self.if_else(n, sink),
            ("scf", "while") => return self.while_loop(n, sink),
            ("scf", "yield") | ("ttg", "warp_yield") | ("tt", "reduce.return") => {
                let ssa = Self::ssa(n);
                return Ok(Flow::Yield(self.values(n, &ssa)?));
            }
            ("scf", "condition") => {
                let ssa = Self::ssa(n);
                let (&c, rest) = ssa
                    .split_first()
                    .ok_or_else(|| self.fail(n, "no condition operand"))?;
                let (c, _) = self.int(n, c)?;
                return Ok(Flow::Condition(c != 0, self.values(n, rest)?));
            }
            ("tt", "return") | ("ttg", "warp_return") => {
                let ssa = Self::ssa(n);
                return Ok(Flow::Return(self.values(n, &ssa)?));
            }
            ("tt", "call") => {
                let r = self.call(n, sink)?;
                self.define(v, &r);
            }
            ("tt", "get_program_id") | ("tt", "get_num_programs") => {
                let axis = v
                    .operands
                    .iter()
                    .find_map(|o| match o.text {
                        "x" => Some(0),
                        "y" => Some(1),
                        "z" => Some(2),
                        _ => None,
                    })
                    .or_else(|| {
                        v.attrs
                            .iter()
                            .find_map(|a| find_int(a, "axis"))
                            .map(|a| a as usize)
                    })
                    .filter(|&a| a < 3)
                    .ok_or_else(|| self.fail(n, "no axis x, y or z"))?;
                let of = if op == "get_program_id" {
                    self.cta
                } else {
                    self.grid
                };
                self.define(
                    v,
                    &[Value::Int {
                        v: of[axis] as i64,
                        bits: 32,
                    }],
                );
            }
            ("arith", _) => {
                let r = self.arith(n, op)?;
                self.define(v, &[r]);
            }
            ("ttg", "local_alloc") | ("triton_gpu", "local_alloc") => {
                let mem = MemRef {
                    alloc: n.stmt.start as u32,
                    index: 0,
                };
                let bytes = v
                    .outs
                    .first()
                    .and_then(|t| self.module.type_bytes(t))
                    .unwrap_or(0);
                sink.effect(n.stmt.start, Effect::Alloc { mem, bytes });
                self.define(v, &[Value::Mem(mem)]);
            }
            ("ttg", "memdesc_index")
            | ("ttg", "memdesc_subview")
            | ("triton_gpu", "memdesc_subview") => {
                let ssa = Self::ssa(n);
                let base = self.mem(n, ssa.first().copied().unwrap_or(""))?;
                let lead = v
                    .ins
                    .first()
                    .and_then(|t| self.module.type_shape(t))
                    .and_then(|s| s.first().copied())
                    .unwrap_or(1) as i64;
                let idx = v
                    .operands
                    .iter()
                    .find(|o| o.is_ssa() && o.group == 1)
                    .map(|o| self.int(n, o.text).map(|(i, _)| i))
                    .transpose()?
                    .unwrap_or(0);
                let mem = MemRef {
                    alloc: base.alloc,
                    index: base.index.wrapping_mul(lead).wrapping_add(idx),
                };
                self.define(v, &[Value::Mem(mem)]);
            }
            ("ttng", "init_barrier") | ("triton_nvidia_gpu", "init_barrier") => {
                let ssa = Self::ssa(n);
                let bar = self.mem(n, ssa.first().copied().unwrap_or(""))?;
                let count = v.operands.iter().find_map(|o| o.int()).unwrap_or(1);
                let count = u32::try_from(count).map_err(|_| self.fail(n, "a negative count"))?;
                sink.effect(n.stmt.start, Effect::InitBarrier { bar, count });
            }
            ("ttng", "async_tma_store_wait") | ("triton_nvidia_gpu", "async_tma_store_wait") => {
                let pendings = v
                    .attrs
                    .iter()
                    .find_map(|a| find_int(a, "pendings"))
                    .unwrap_or(0);
                let pendings =
                    u32::try_from(pendings).map_err(|_| self.fail(n, "negative pendings"))?;
                sink.effect(n.stmt.start, Effect::StoreWait { pendings });
            }
            ("ttng", "fence_async_shared") | ("triton_nvidia_gpu", "fence_async_shared") => {
                sink.effect(n.stmt.start, Effect::Fence);
            }
            _ => {
                // Tensor math, conversions, layouts, loads and stores
                // through registers: their results do not steer the
                // schedule.
                self.define(v, &[]);
            }
        }
        Ok(Flow::Next)
    }

    /// A recognised TMA, WGMMA or mbarrier op.
    fn scoped(
        &mut self,
        n: &'m Node<'a>,
        s: &'m ScopeOp,
        sink: &mut impl EffectSink<'m>,
    ) -> Result<(), TtgirError> {
        if !self.enabled(n) {
            return Ok(());
        }
        let at = n.stmt.start;
        let e = match s {
            ScopeOp::Wgmma(w) => Effect::Wgmma(w),
            ScopeOp::WgmmaWait { pendings } => Effect::WgmmaWait {
                pendings: *pendings,
            },
            ScopeOp::TmaLoad(c) | ScopeOp::TmaStore(c) => {
                let desc = match self.get(n, &c.desc)? {
                    Value::Desc(d) => d,
                    other => {
                        return Err(self.fail(
                            n,
                            format!(
                            "the descriptor `{}` must be a tensor descriptor argument, and is {}",
                            c.desc,
                            kind(&other)
                        ),
                        ))
                    }
                };
                let coords = self.coords(n, c.coords as usize)?;
                match s {
                    ScopeOp::TmaLoad(_) => Effect::TmaLoad {
                        desc,
                        coords,
                        box_shape: &c.box_shape,
                        bytes: c.bytes,
                        bar: c.bar.as_deref().map(|b| self.mem(n, b)).transpose()?,
                    },
                    _ => Effect::TmaStore {
                        desc,
                        coords,
                        box_shape: &c.box_shape,
                        bytes: c.bytes,
                    },
                }
            }
            ScopeOp::MbWait { bar, phase } => {
                let bar = self.mem(n, bar)?;
                let phase = match phase.parse::<i64>() {
                    Ok(p) => p,
                    Err(_) => self.int(n, phase)?.0,
                };
                Effect::Wait {
                    bar,
                    phase: (phase & 1) as u32,
                }
            }
            ScopeOp::MbArrive { bar, count } => Effect::Arrive {
                bar: self.mem(n, bar)?,
                count: *count,
            },
            ScopeOp::MbExpect { bar, bytes } => Effect::Expect {
                bar: self.mem(n, bar)?,
                bytes: *bytes,
            },
        };
        sink.effect(at, e);
        Ok(())
    }

    /// A TMA copy's `count` coordinates: the operands in its `[...]` in
    /// custom syntax, the ones after the descriptor in generic syntax.
    fn coords(&self, n: &Node<'a>, count: usize) -> Result<Vec<i64>, TtgirError> {
        let names: Vec<&str> = if n.view.generic {
            Self::ssa(n).into_iter().skip(1).take(count).collect()
        } else {
            n.view
                .operands
                .iter()
                .filter(|o| o.group == 1)
                .map(|o| o.text)
                .collect()
        };
        names
            .iter()
            .map(|s| match s.parse::<i64>() {
                Ok(i) => Ok(i),
                Err(_) => self.int(n, s).map(|(v, _)| v),
            })
            .collect()
    }

    /// An integer `arith` op (anything on tensors, floats or opaque values
    /// is opaque).
    fn arith(&self, n: &Node<'a>, op: &str) -> Result<Value, TtgirError> {
        let v = &n.view;
        let ty = v.ins.first().copied().unwrap_or("");
        if op == "constant" {
            let bits = match int_bits(ty) {
                Some(b) => b,
                None if ty.is_empty() => 1,
                None => return Ok(Value::Opaque),
            };
            let lit = v.operands.first().map(|o| o.text).unwrap_or("");
            let x = match lit {
                "true" => 1,
                "false" => 0,
                l => match l.parse::<i64>() {
                    Ok(x) => x,
                    Err(_) => return Ok(Value::Opaque),
                },
            };
            return Ok(Value::Int {
                v: wrap(x, bits),
                bits,
            });
        }
        let ssa = Self::ssa(n);
        let vals = self.values(n, &ssa)?;
        if vals.iter().any(|x| !matches!(x, Value::Int { .. })) {
            return Ok(Value::Opaque);
        }
        let ints: Vec<(i64, u8)> = vals
            .iter()
            .map(|x| match x {
                Value::Int { v, bits } => (*v, *bits),
                _ => (0, 0),
            })
            .collect();
        let need = |k: usize| -> Result<(), TtgirError> {
            if ints.len() < k {
                Err(self.fail(n, format!("{k} operands needed, {} given", ints.len())))
            } else {
                Ok(())
            }
        };
        match op {
            "cmpi" => {
                need(2)?;
                let pred = v
                    .operands
                    .iter()
                    .find(|o| !o.is_ssa())
                    .map(|o| o.text)
                    .unwrap_or("");
                let bits = ints[0].1;
                let r = compare(pred, ints[0].0, ints[1].0, bits).map_err(|w| self.fail(n, w))?;
                Ok(Value::Int {
                    v: -(r as i64),
                    bits: 1,
                })
            }
            "select" => {
                need(3)?;
                Ok(if ints[0].0 != 0 { vals[1] } else { vals[2] })
            }
            "extsi" | "extui" | "trunci" | "index_cast" | "index_castui" | "bitcast" => {
                need(1)?;
                let to = ty
                    .split_once(" to ")
                    .map(|(_, t)| t)
                    .or_else(|| v.outs.first().copied())
                    .and_then(int_bits)
                    .ok_or_else(|| self.fail(n, "no integer result type"))?;
                let (x, from) = ints[0];
                let x = match op {
                    "extui" | "index_castui" => super::value::unsigned(x, from) as i64,
                    _ => x,
                };
                Ok(Value::Int {
                    v: wrap(x, to),
                    bits: to,
                })
            }
            _ => {
                need(2)?;
                let bits = ints[0].1;
                let r = binary(op, ints[0].0, ints[1].0, bits).map_err(|w| self.fail(n, w))?;
                Ok(Value::Int { v: r, bits })
            }
        }
    }

    /// `scf.for %iv = %lb to %ub step %st iter_args(%a = %x, ...)`.
    fn for_loop(
        &mut self,
        n: &'m Node<'a>,
        sink: &mut impl EffectSink<'m>,
    ) -> Result<Flow, TtgirError> {
        let ops = &n.view.operands;
        let text = |i: usize| ops.get(i).map(|o| o.text).unwrap_or("");
        if text(2) != "to" || text(4) != "step" {
            return Err(self.fail(n, "not `scf.for %iv = %lb to %ub step %step`"));
        }
        let iv = text(0);
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
        let mut carried = inits;
        let mut i = lb;
        while i < ub {
            self.bind(&[iv], &[Value::Int { v: i, bits }]);
            self.bind(&names, &carried);
            match self.block(body, sink)? {
                Flow::Yield(v) => carried = v,
                Flow::Return(v) => return Ok(Flow::Return(v)),
                _ => {}
            }
            i = match i.checked_add(step) {
                Some(x) if wrap(x, bits) == x => x,
                _ => break,
            };
        }
        self.define(&n.view, &carried);
        Ok(Flow::Next)
    }

    /// The `iter_args(%a = %x, ...)` (or a `while`'s `(%a = %x, ...)`)
    /// among the operands from `from` on: the names and their initial values.
    fn iter_args(
        &self,
        n: &Node<'a>,
        from: usize,
    ) -> Result<(Vec<&'a str>, Vec<Value>), TtgirError> {
        let ssa: Vec<&'a str> = n.view.operands[from.min(n.view.operands.len())..]
            .iter()
            .filter(|o| o.is_ssa())
            .map(|o| o.text)
            .collect();
        let mut names = Vec::new();
        let mut inits = Vec::new();
        for pair in ssa.chunks(2) {
            if let [name, init] = pair {
                names.push(*name);
                inits.push(self.get(n, init)?);
            }
        }
        Ok((names, inits))
    }

    /// `scf.if %c { ... } else { ... }`.
    fn if_else(
        &mut self,
        n: &'m Node<'a>,
        sink: &mut impl EffectSink<'m>,
    ) -> Result<Flow, TtgirError> {
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
        let flow = match r {
            Some(r) => self.region(r, sink)?,
            None => Flow::Next,
        };
        match flow {
            Flow::Yield(v) => self.define(&n.view, &v),
            Flow::Return(v) => return Ok(Flow::Return(v)),
            _ => self.define(&n.view, &[]),
        }
        Ok(Flow::Next)
    }

    /// `scf.while (%a = %x) : ... { before; scf.condition(%c) %v } do { ^bb0(%b): after; scf.yield }`.
    fn while_loop(
        &mut self,
        n: &'m Node<'a>,
        sink: &mut impl EffectSink<'m>,
    ) -> Result<Flow, TtgirError> {
        let (names, mut carried) = self.iter_args(n, 0)?;
        let (Some(before), Some(after)) = (n.regions.first(), n.regions.get(1)) else {
            return Err(self.fail(n, "a while loop needs a before and a do region"));
        };
        let before_args: Vec<&'a str> = match entry(before) {
            Some(b) if !b.args.is_empty() => b.args.clone(),
            _ => names,
        };
        let after_block = entry(after);
        loop {
            self.bind(&before_args, &carried);
            match self.region(before, sink)? {
                Flow::Condition(true, v) => {
                    if let Some(b) = after_block {
                        self.bind(&b.args, &v);
                        match self.block(b, sink)? {
                            Flow::Yield(y) => carried = y,
                            Flow::Return(r) => return Ok(Flow::Return(r)),
                            _ => carried = Vec::new(),
                        }
                    }
                }
                Flow::Condition(false, v) => {
                    self.define(&n.view, &v);
                    return Ok(Flow::Next);
                }
                Flow::Return(r) => return Ok(Flow::Return(r)),
                _ => return Err(self.fail(n, "the before region ends without `scf.condition`")),
            }
        }
    }

    /// `tt.call @f(%a, ...)`: runs `f` with the operands as its arguments.
    fn call(
        &mut self,
        n: &'m Node<'a>,
        sink: &mut impl EffectSink<'m>,
    ) -> Result<Vec<Value>, TtgirError> {
        let src = self.module.src;
        let head = src.get(n.stmt.start..n.stmt.end).unwrap_or("");
        let callee = head
            .split('@')
            .nth(1)
            .map(|s| {
                s.split(|c: char| c == '(' || c.is_whitespace())
                    .next()
                    .unwrap_or("")
            })
            .unwrap_or("")
            .trim_matches('"');
        let module = self.module;
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
        if self.depth >= MAX_CALL_DEPTH {
            return Err(self.fail(n, format!("calls nest deeper than {MAX_CALL_DEPTH}")));
        }
        let args = self.values(n, &Self::ssa(n))?;
        self.depth += 1;
        let r = self.run(f, &args, sink);
        self.depth -= 1;
        r
    }
}

/// The entry block of `r`: its first block with ops (a region printed
/// with a label starts with an empty block before it).
fn entry<'m, 'a>(r: &'m Region<'a>) -> Option<&'m Block<'a>> {
    r.blocks
        .iter()
        .find(|b| !b.ops.is_empty() || !b.args.is_empty())
}

/// What a value is, for errors.
fn kind(v: &Value) -> &'static str {
    match v {
        Value::Int { .. } => "an integer",
        Value::Desc(_) => "a tensor descriptor",
        Value::Mem(_) => "a shared-memory buffer",
        Value::Opaque => "a tensor, float or pointer",
    }
}

impl Module<'_> {
    /// The shape of type `text`.
    pub fn type_shape(&self, text: &str) -> Option<Vec<u64>> {
        parse_type(text).map(|t| t.shape)
    }

    /// The bytes a `memdesc` or tensor type `text` holds.
    pub fn type_bytes(&self, text: &str) -> Option<u64> {
        let t = parse_type(text)?;
        let elem = match t.elem {
            "i1" => 1,
            e => super::dtype::Dtype::from_mlir(e)?.bytes(),
        };
        t.shape.iter().try_fold(elem, |a, &d| a.checked_mul(d))
    }
}

#[cfg(test)]
#[path = "interp_tests.rs"]
mod tests;
