//! The semantics of one op that is not control flow: integer `arith`,
//! program ids, shared-memory buffers and barriers, and the TMA, WGMMA and
//! mbarrier ops the interpreter reports ([`Effect`]).

use super::super::error::TtgirError;
use super::super::global::BUFFER_ID;
use super::super::scope::ScopeOp;
use super::super::stmt::OpView;
use super::super::tree::Node;
use super::super::types::{find_int, parse_type};
use super::super::value::{binary, compare, int_bits, wrap, MemRef, Value};
use super::{key, Effect, EffectSink, Interp};

impl<'m, 'a> Interp<'m, 'a> {
    /// The value of operand `name`.
    pub(super) fn get(&self, n: &Node<'a>, name: &str) -> Result<Value, TtgirError> {
        self.vals
            .get(&key(name))
            .copied()
            .ok_or_else(|| self.fail(n, format!("`{name}` is used before it is defined")))
    }

    /// Operand `name` as an integer of its width.
    pub(super) fn int(&self, n: &Node<'a>, name: &str) -> Result<(i64, u8), TtgirError> {
        match self.get(n, name)? {
            Value::Int { v, bits } => Ok((v, bits)),
            Value::Poison(at) => {
                let (line, col) = super::super::error::position(self.module.src, at as usize);
                Err(self.fail(
                    n,
                    format!("`{name}` is undefined: it comes from a division by zero or an oversized shift at {line}:{col}"),
                ))
            }
            Value::Unknown { from, .. } => {
                let tensor = self
                    .global
                    .region(from)
                    .map_or_else(|| format!("pointer {from}"), |r| format!("`{}`", r.name));
                Err(self.fail(
                    n,
                    format!(
                        "`{name}` comes from memory: a load from {tensor}, whose contents the launch does not give (add `values = [...]` to its [tensors] or [buffers] entry)"
                    ),
                ))
            }
            other => Err(self.fail(
                n,
                format!("`{name}` must be an integer here, and is {}", kind(&other)),
            )),
        }
    }

    /// Operand `name` as an integer: a literal (64 bits wide) or an
    /// integer value.
    pub(super) fn int_operand(&self, n: &Node<'a>, name: &str) -> Result<(i64, u8), TtgirError> {
        match name.parse::<i64>() {
            Ok(x) => Ok((x, 64)),
            Err(_) => self.int(n, name),
        }
    }

    /// Operand `name` as a shared-memory buffer.
    pub(super) fn mem(&self, n: &Node<'a>, name: &str) -> Result<MemRef, TtgirError> {
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
    pub(super) fn define(&mut self, v: &OpView<'a>, values: &[Value]) {
        let mut it = values.iter();
        for &(name, count) in &v.results {
            for i in 0..count {
                let val = it.next().copied().unwrap_or(Value::Opaque);
                self.vals.insert((name, i), val);
            }
        }
    }

    /// Binds names to values (block arguments, loop variables).
    pub(super) fn bind(&mut self, names: &[&'a str], values: &[Value]) {
        for (name, v) in names.iter().zip(values) {
            self.vals.insert(key(name), *v);
        }
    }

    /// Whether the op's `i1` operands (its predicates) all hold.
    pub(super) fn enabled(&self, n: &Node<'a>) -> bool {
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
    pub(super) fn ssa(n: &Node<'a>) -> Vec<&'a str> {
        n.view
            .operands
            .iter()
            .filter(|o| o.is_ssa() && o.group == 0)
            .map(|o| o.text)
            .collect()
    }

    /// A comparison's predicate (`eq`, `slt`, ...): its first operand that
    /// is no SSA value.
    pub(super) fn predicate(n: &Node<'a>) -> &'a str {
        n.view
            .operands
            .iter()
            .find(|o| !o.is_ssa())
            .map(|o| o.text)
            .unwrap_or("")
    }

    /// The values of `names`.
    pub(super) fn values(&self, n: &Node<'a>, names: &[&str]) -> Result<Vec<Value>, TtgirError> {
        names.iter().map(|s| self.get(n, s)).collect()
    }

    /// Executes op `n`, which is not control flow.
    pub(super) fn simple(
        &mut self,
        n: &'m Node<'a>,
        sink: &mut impl EffectSink<'m>,
    ) -> Result<(), TtgirError> {
        let v = &n.view;
        let name = v.name;
        if self.loads > 0 {
            self.use_loads(n, sink);
        }
        if let Some(s) = &n.scope {
            let r = self.scoped(n, s, sink)?;
            self.define(v, &[r]);
            return Ok(());
        }
        let (dialect, op) = name.split_once('.').unwrap_or(("", name));
        match (dialect, op) {
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
            ("ttg" | "triton_gpu", "convert_layout") => {
                // Address tensors are recomputed in the new layout; data
                // goes through shared memory.
                if !matches!(self.shaping(n, op)?, Value::Lin(_) | Value::Mask(_)) {
                    if let Some(bytes) = self.shared_bytes(n, op) {
                        self.emit(sink, n, Effect::SharedMove { bytes });
                    }
                }
            }
            ("ttg" | "triton_gpu", "local_load" | "local_store") => {
                if let Some(bytes) = self.shared_bytes(n, op) {
                    self.emit(sink, n, Effect::SharedMove { bytes });
                }
                self.define(v, &[]);
            }
            ("tt", "make_range" | "splat" | "expand_dims" | "broadcast") => {
                self.shaping(n, op)?;
            }
            ("tt", "addptr") => self.addptr(n, sink)?,
            // Integer arithmetic outside `arith` (Philox's high multiply).
            ("tt", "mulhiui") if !on_tensor(v) => {
                let r = self.arith(n, op)?;
                self.define(v, &[r]);
            }
            ("tt", "atomic_rmw" | "atomic_cas") => self.atomic(n, op, sink)?,
            ("ttg", "barrier") | ("gpu", "barrier") => {
                if self.enabled(n) {
                    self.emit(sink, n, Effect::Barrier);
                }
                self.define(v, &[]);
            }
            ("tt", "int_to_ptr" | "ptr_to_int") => self.pointer_cast(n, op)?,
            // A pointer (or pointer tensor) keeps its address; other bits
            // reinterpreted (Philox's integers as floats) cost nothing.
            ("tt", "bitcast") => self.pointer_cast(n, op)?,
            // Programmatic dependent launch as Triton 3.6 writes it (inline
            // `griddepcontrol`): free, as `tt.grid_dependency_wait` is.
            ("tt", "elementwise_inline_asm") if self.is_griddepcontrol(n) => {
                self.define(v, &[]);
            }
            ("tt", "load" | "store")
            | ("ttg", "async_copy_global_to_local" | "async_commit_group" | "async_wait") => {
                self.memory(n, op, sink)?
            }
            // A flag is polled only in the condition of the loop spinning on it.
            ("arith", "cmpi") if self.spins() && self.polled(n)? => self.poll_compare(n, sink)?,
            ("arith", _) => {
                let mut r = self.arith(n, op)?;
                if r == Value::Opaque && on_tensor(v) {
                    r = self.tensor_arith(n, op)?;
                }
                // Tensor math costs its work (address arithmetic one op per
                // vector); a dense constant nothing; scalars are executed.
                if on_tensor(v) {
                    match super::work::tensor_work(v) {
                        Some(w) if matches!(r, Value::Lin(_) | Value::Mask(_)) => {
                            let e = self.per_vector(n, w);
                            self.emit(sink, n, e)
                        }
                        Some(w) => self.emit(sink, n, w),
                        None if op == "constant" => {}
                        None => return Err(self.unsupported(n)),
                    }
                }
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
                    .and_then(|t| parse_type(t))
                    .and_then(|t| t.bytes())
                    .unwrap_or(0);
                self.emit(sink, n, Effect::Alloc { mem, bytes });
                if let Some(bytes) = self.shared_bytes(n, "local_alloc") {
                    self.emit(sink, n, Effect::SharedMove { bytes });
                }
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
                    .and_then(|t| parse_type(t))
                    .and_then(|t| t.shape.first().copied())
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
            ("ttg", "local_dealloc") | ("triton_gpu", "local_dealloc") => {
                let ssa = Self::ssa(n);
                let mem = self.mem(n, ssa.first().copied().unwrap_or(""))?;
                self.emit(sink, n, Effect::Dealloc { mem });
            }
            ("ttng", "init_barrier") | ("triton_nvidia_gpu", "init_barrier") => {
                let ssa = Self::ssa(n);
                let bar = self.mem(n, ssa.first().copied().unwrap_or(""))?;
                let count = v.operands.iter().find_map(|o| o.int()).unwrap_or(1);
                let count = u32::try_from(count).map_err(|_| self.fail(n, "a negative count"))?;
                self.emit(sink, n, Effect::InitBarrier { bar, count });
            }
            ("ttng", "async_tma_store_wait") | ("triton_nvidia_gpu", "async_tma_store_wait") => {
                let pendings = v
                    .attrs
                    .iter()
                    .find_map(|a| find_int(a, "pendings"))
                    .unwrap_or(0);
                let pendings =
                    u32::try_from(pendings).map_err(|_| self.fail(n, "negative pendings"))?;
                self.emit(sink, n, Effect::StoreWait { pendings });
            }
            ("ttg", "global_scratch_alloc") => {
                self.define(v, &[Value::Scratch(n.stmt.start as u32)]);
            }
            ("ttng", "tensormap_create") => self.tensormap_create(n, sink)?,
            ("ttng", "reinterpret_tensor_descriptor") => {
                let ssa = Self::ssa(n);
                let key = match self.get(n, ssa.first().copied().unwrap_or(""))? {
                    Value::Scratch(s) => self.made.get(&s).copied(),
                    Value::Desc(d) => Some(d),
                    _ => None,
                }
                .ok_or_else(|| {
                    self.fail(
                        n,
                        "reinterprets memory that no tensormap_create has written",
                    )
                })?;
                self.define(v, &[Value::Desc(key)]);
            }
            _ => {
                // Tensor math and conversions cost their work; the ops of
                // the free table nothing; anything else is not supported.
                match super::work::tensor_work(v) {
                    Some(w) => self.emit(sink, n, w),
                    None if super::work::FREE.contains(&name) => {}
                    // One thread's scalar math costs next to nothing.
                    None if dialect == "math" && !on_tensor(v) => {}
                    None => return Err(self.unsupported(n)),
                }
                self.define(v, &[]);
            }
        }
        Ok(())
    }

    /// Whether inline assembly op `n` is `griddepcontrol` (programmatic
    /// dependent launch's wait or release) and nothing else.
    fn is_griddepcontrol(&self, n: &Node<'a>) -> bool {
        let text = self.module.src.get(n.stmt.start..n.stmt.end).unwrap_or("");
        let asm = text.split('"').nth(1).unwrap_or("");
        let code = asm.split("//").next().unwrap_or("");
        let mut parts = code.split(';').map(str::trim).filter(|p| !p.is_empty());
        matches!(
            (parts.next(), parts.next()),
            (
                Some("griddepcontrol.wait" | "griddepcontrol.launch_dependents"),
                None
            )
        )
    }

    /// The error of an op the interpreter neither executes, times, prices
    /// nor lists as free.
    fn unsupported(&self, n: &Node<'a>) -> TtgirError {
        self.module.error(
            n.stmt.start,
            super::super::error::TtgirErrorKind::Unsupported {
                op: n.view.name.to_string(),
            },
        )
    }

    /// A recognised TMA, WGMMA or mbarrier op.
    fn scoped(
        &mut self,
        n: &'m Node<'a>,
        s: &'m ScopeOp,
        sink: &mut impl EffectSink<'m>,
    ) -> Result<Value, TtgirError> {
        // A WGMMA's i1 operand is `useC` (whether it adds to its
        // accumulator, in the same time), not a predicate.
        if !matches!(s, ScopeOp::Wgmma(_)) && !self.enabled(n) {
            return Ok(Value::Opaque);
        }
        let mut result = Value::Opaque;
        let e = match s {
            ScopeOp::Wgmma(w) => Effect::Wgmma {
                shape: w,
                sync: !n.view.attrs.iter().any(|a| a.contains("isAsync = true")),
            },
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
                    ScopeOp::TmaLoad(_) => {
                        let bar = c.bar.as_deref().map(|b| self.mem(n, b)).transpose()?;
                        // A load into registers (`tt.descriptor_load`):
                        // waited for where its registers are first read.
                        let regs = bar.is_none().then(|| {
                            self.loads += 1;
                            self.loads - 1
                        });
                        if let Some(load) = regs {
                            result = Value::Loaded(load);
                        }
                        Effect::TmaLoad {
                            desc,
                            coords,
                            box_shape: &c.box_shape,
                            bytes: c.bytes,
                            bar,
                            regs,
                        }
                    }
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
                let (phase, _) = self.int_operand(n, phase)?;
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
        self.emit(sink, n, e);
        Ok(result)
    }

    /// `ttng.tensormap_create %scratch, %ptr, [box], [dims], [strides],
    /// [element strides]`: a descriptor over pointer argument `%ptr`
    /// (innermost first throughout), written into `%scratch`.
    fn tensormap_create(
        &mut self,
        n: &'m Node<'a>,
        sink: &mut impl EffectSink<'m>,
    ) -> Result<(), TtgirError> {
        let group = |k: u8| -> Vec<&'a str> {
            n.view
                .operands
                .iter()
                .filter(|o| o.group == k)
                .map(|o| o.text)
                .collect()
        };
        let ssa = Self::ssa(n);
        let (Some(&scratch), Some(&ptr)) = (ssa.first(), ssa.get(1)) else {
            return Err(self.fail(
                n,
                "not `tensormap_create %scratch, %ptr, [box], [dims], [strides], [elem strides]`",
            ));
        };
        let (boxes, dims, strides) = (group(1), group(2), group(3));
        let Value::Scratch(at) = self.get(n, scratch)? else {
            return Err(self.fail(n, format!("`{scratch}` is not a global scratch buffer")));
        };
        let ptr = match self.get(n, ptr)? {
            Value::Ptr { arg, off: 0 } => arg,
            other => {
                return Err(self.fail(
                    n,
                    format!(
                        "`{ptr}` must be a pointer argument with a [tensors] entry in the launch, and is {}",
                        kind(&other)
                    ),
                ))
            }
        };
        let ints = |names: &[&str]| -> Result<Vec<i64>, TtgirError> {
            names
                .iter()
                .map(|s| self.int_operand(n, s).map(|(v, _)| v))
                .collect()
        };
        let positive = |v: Vec<i64>, what: &str| -> Result<Vec<u64>, TtgirError> {
            v.into_iter()
                .map(|x| {
                    u64::try_from(x)
                        .ok()
                        .filter(|&x| x > 0)
                        .ok_or_else(|| self.fail(n, format!("a {what} of {x}")))
                })
                .collect()
        };
        let boxdim = positive(ints(&boxes)?, "box size")?
            .into_iter()
            .map(|b| u32::try_from(b).unwrap_or(u32::MAX))
            .collect();
        let dims = positive(ints(&dims)?, "dimension")?;
        let strides = positive(ints(&strides)?, "stride")?;
        // One key per op and buffer: a grouped kernel makes a descriptor
        // at one op over each group's matrix.
        let slot = match ptr.checked_sub(BUFFER_ID) {
            Some(buffer) => u32::from(buffer) + 1,
            None => 0,
        };
        let site = n.stmt.start as u32;
        if slot > 0 && site >= 1 << 20 {
            return Err(self.fail(
                n,
                "a descriptor over a loaded pointer made more than 1 MiB into the file",
            ));
        }
        let key = super::super::value::MADE_DESC | slot << 20 | site;
        self.made.insert(at, key);
        self.emit(
            sink,
            n,
            Effect::MakeDesc {
                key,
                ptr,
                boxdim,
                dims,
                strides,
            },
        );
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
            .map(|s| self.int_operand(n, s).map(|(v, _)| v))
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
        if let ("select", [Value::Int { v: c, .. }, a, b]) = (op, vals.as_slice()) {
            // Whatever the kind of the values chosen between (buffers too).
            return Ok(if *c != 0 { *a } else { *b });
        }
        // Conversions to floats are opaque; integer ops on an undefined
        // value are undefined; anything else on a non-integer is opaque.
        if matches!(op, "sitofp" | "uitofp") {
            return Ok(Value::Opaque);
        }
        if let Some(p) = vals.iter().find(|x| matches!(x, Value::Poison(_))) {
            return Ok(*p);
        }
        if let Some(&u) = vals.iter().find(|x| matches!(x, Value::Unknown { .. })) {
            return Ok(unknown_arith(op, u, &vals));
        }
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
                let pred = Self::predicate(n);
                let bits = ints[0].1;
                let r = compare(pred, ints[0].0, ints[1].0, bits).map_err(|w| self.fail(n, w))?;
                Ok(Value::Int {
                    v: -(r as i64),
                    bits: 1,
                })
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
                    "extui" | "index_castui" => super::super::value::unsigned(x, from) as i64,
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
                match binary(op, ints[0].0, ints[1].0, bits) {
                    Ok(r) => Ok(Value::Int { v: r, bits }),
                    // The GPU gives some value and goes on; so do we.
                    Err(w) if w != super::super::value::NOT_INTEGER => {
                        Ok(Value::Poison(n.stmt.start as u32))
                    }
                    Err(w) => Err(self.fail(n, w)),
                }
            }
        }
    }

    /// The `iter_args(%a = %x, ...)` (or a `while`'s `(%a = %x, ...)`)
    /// among the operands from `from` on: the names and their initial values.
    pub(super) fn iter_args(
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
}

/// Whether op `v`'s type is a tensor.
fn on_tensor(v: &OpView<'_>) -> bool {
    v.outs
        .first()
        .or(v.ins.first())
        .is_some_and(|t| t.trim_start().starts_with("tensor<"))
}

/// Integer op `op` on operands `vals`, one of them the loaded integer `u`:
/// still `scale * loaded + add` after a sum or difference with an integer,
/// a product by one and a width change; any other math keeps only where
/// it was loaded.
fn unknown_arith(op: &str, u: Value, vals: &[Value]) -> Value {
    let Value::Unknown {
        load,
        from,
        at,
        linear: Some((scale, add)),
    } = u
    else {
        return u;
    };
    let linear = match (op, vals) {
        ("extsi" | "extui" | "trunci" | "index_cast" | "index_castui", [_]) => Some((scale, add)),
        ("addi", [Value::Int { v, .. }, _] | [_, Value::Int { v, .. }]) => {
            Some((scale, add.wrapping_add(*v)))
        }
        ("subi", [_, Value::Int { v, .. }]) => Some((scale, add.wrapping_sub(*v))),
        ("muli", [Value::Int { v, .. }, _] | [_, Value::Int { v, .. }]) => {
            Some((scale.wrapping_mul(*v), add.wrapping_mul(*v)))
        }
        _ => None,
    };
    Value::Unknown {
        load,
        from,
        at,
        linear,
    }
}

/// What a value is, for errors.
pub(super) fn kind(v: &Value) -> &'static str {
    match v {
        Value::Int { .. } => "an integer",
        Value::Desc(_) => "a tensor descriptor",
        Value::Ptr { .. } => "a pointer argument",
        Value::Lin(_) => "an integer or pointer tensor",
        Value::Mask(_) => "a mask tensor",
        Value::Gather(_) => "a tensor of offsets made from loaded indices",
        Value::Loaded(_) => "a tensor loaded from memory",
        Value::Unknown { .. } => "an integer loaded from memory",
        Value::Polled { .. } => "a flag polled by a volatile load",
        Value::Poison(_) => "an undefined integer (from a division by zero)",
        Value::Scratch(_) => "a global scratch buffer",
        Value::Mem(_) => "a shared-memory buffer",
        Value::Opaque => "a tensor, float or pointer",
    }
}
