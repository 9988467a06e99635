//! Loads and stores through pointers: the address tensors a kernel builds
//! ([`super::super::affine`]), `tt.load` into registers, `tt.store` from
//! them, and `cp.async` copies into shared memory with their commit groups
//! and waits.
//!
//! A load or store of one scalar moves the 16-byte run that holds it.
//!
//! A load into registers is load number `n` of the run: its result is
//! [`Value::Loaded`], and the first op that reads it waits for it
//! ([`Effect::Use`]), as a warp's scoreboard stalls at the first use of a
//! loaded register, not at the load.

use super::super::affine::{shape_of, Lin, Mask};
use super::super::dtype::Dtype;
use super::super::error::TtgirError;
use super::super::stmt::OpView;
use super::super::tree::Node;
use super::super::types::{find_int, parse_type};
use super::super::value::{int_bits, Value};
use super::{key, Effect, EffectSink, Interp, PtrTile};

impl<'m, 'a> Interp<'m, 'a> {
    /// Waits for the loads whose registers op `n` reads first.
    pub(super) fn use_loads(&mut self, n: &'m Node<'a>, sink: &mut impl EffectSink<'m>) {
        for o in n.view.operands.iter().filter(|o| o.is_ssa()) {
            match self.vals.get(&key(o.text)) {
                Some(&Value::Loaded(load)) => {
                    self.emit(sink, n, Effect::Use { load });
                    self.vals.insert(key(o.text), Value::Opaque);
                }
                // Kept, so that a use needing its value can say where it
                // comes from (a later wait for the same load is nothing).
                Some(&Value::Unknown { load, .. }) => self.emit(sink, n, Effect::Use { load }),
                Some(&Value::Gather(g)) => self.emit(sink, n, Effect::Use { load: g.load }),
                _ => {}
            }
        }
    }

    /// `make_range`, `splat`, `expand_dims`, `broadcast` and
    /// `convert_layout`: the value in its new shape (opaque when it is not
    /// an address, offset or mask), defined and returned.
    pub(super) fn shaping(&mut self, n: &Node<'a>, op: &str) -> Result<Value, TtgirError> {
        let v = &n.view;
        let shape = out_shape(v);
        let arg = match Self::ssa(n).first() {
            Some(s) => self.get(n, s)?,
            None => Value::Opaque,
        };
        let r = match (op, arg, shape) {
            ("make_range", _, Some((1, s))) => {
                let start = v.attrs.iter().find_map(|a| find_int(a, "start"));
                match start {
                    Some(base) => Value::Lin(Lin {
                        coef: [1, 0, 0, 0],
                        ..Lin::splat(1, s, base, None)
                    }),
                    None => Value::Opaque,
                }
            }
            ("splat", Value::Int { v, bits: 1 }, Some((r, s))) => {
                let mut m = Mask::full(r, s);
                if v == 0 {
                    m.hi = [0; 4];
                }
                Value::Mask(m)
            }
            ("splat", Value::Int { v, .. }, Some((r, s))) => Value::Lin(Lin::splat(r, s, v, None)),
            ("splat", Value::Ptr { arg, off }, Some((r, s))) => {
                Value::Lin(Lin::splat(r, s, off, Some(arg)))
            }
            ("splat", Value::Gather(g), Some((r, s))) => Value::Gather(g.splat(r, s)),
            ("splat", u @ Value::Unknown { .. }, Some((r, s))) => {
                super::gather::scalar(&u).map_or(Value::Opaque, |g| Value::Gather(g.splat(r, s)))
            }
            ("expand_dims", x, _) => {
                let axis = v
                    .attrs
                    .iter()
                    .find_map(|a| find_int(a, "axis"))
                    .and_then(|a| usize::try_from(a).ok());
                match (x, axis) {
                    (Value::Lin(l), Some(a)) => l.expand(a).map_or(Value::Opaque, Value::Lin),
                    (Value::Gather(g), Some(a)) => g.expand(a).map_or(Value::Opaque, Value::Gather),
                    (Value::Mask(m), Some(a)) => m.expand(a).map_or(Value::Opaque, Value::Mask),
                    _ => Value::Opaque,
                }
            }
            ("broadcast", Value::Lin(l), Some((r, s))) => {
                l.broadcast(r, s).map_or(Value::Opaque, Value::Lin)
            }
            ("broadcast", Value::Mask(m), Some((r, s))) => {
                m.broadcast(r, s).map_or(Value::Opaque, Value::Mask)
            }
            ("broadcast", Value::Gather(g), Some((r, s))) => {
                g.broadcast(r, s).map_or(Value::Opaque, Value::Gather)
            }
            ("convert_layout", x @ (Value::Lin(_) | Value::Mask(_) | Value::Gather(_)), _) => x,
            _ => Value::Opaque,
        };
        self.define(v, &[r]);
        Ok(r)
    }

    /// The bytes a `convert_layout`, `local_load`, `local_store` or
    /// `local_alloc` of a data tensor moves through shared memory (`None`
    /// for none): a conversion stores and loads the tensor, except into a
    /// WGMMA operand layout (`#ttg.dot_op`), which Hopper's lowering does
    /// in registers.
    pub(super) fn shared_bytes(&self, n: &Node<'a>, op: &str) -> Option<u64> {
        let v = &n.view;
        fn tensor(t: &str) -> Option<super::super::types::TypeInfo<'_>> {
            parse_type(t.trim().trim_start_matches('(').trim_end_matches(')'))
        }
        match op {
            "convert_layout" => {
                let to = v.outs.first()?;
                if self
                    .module
                    .layout(to, n.stmt.start)
                    .is_some_and(|l| l.contains("dot_op<"))
                {
                    return None;
                }
                Some(2 * tensor(to)?.bytes()?)
            }
            "local_load" => tensor(v.outs.first()?)?.bytes(),
            "local_store" | "local_alloc" => {
                let t = tensor(v.ins.first()?)?;
                t.is_tensor().then(|| t.bytes()).flatten()
            }
            _ => None,
        }
    }

    /// Integer `arith` on address, offset and mask tensors: an affine
    /// result or a box mask where there is one, opaque otherwise.
    pub(super) fn tensor_arith(&self, n: &Node<'a>, op: &str) -> Result<Value, TtgirError> {
        if op == "constant" {
            return Ok(self.dense_constant(n));
        }
        let vals = self.values(n, &Self::ssa(n))?;
        Ok(match (op, vals.as_slice()) {
            ("cmpi", [Value::Lin(a), Value::Lin(b)]) => {
                let pred = Self::predicate(n);
                let m = if b.uniform() {
                    a.compare(pred, b.base)
                } else if a.uniform() {
                    b.compare(flipped(pred), a.base)
                } else {
                    None
                };
                // A comparison that is not a box holds everywhere.
                Value::Mask(m.unwrap_or(Mask::full(a.rank, a.shape)))
            }
            // `tl.where(mask, a, b)`: where the mask holds everywhere or
            // nowhere, one side; otherwise the side it keeps (`tl.where(
            // offs < M, offs, 0)` clamps the rows past the tensor, which
            // move nothing as `offs` does either).
            ("select", [Value::Mask(m), a, b]) => {
                if m.empty() {
                    *b
                } else {
                    *a
                }
            }
            ("andi" | "ori", [Value::Mask(a), Value::Mask(b)]) => {
                Mask::combine(op, a, b).map_or(Value::Opaque, Value::Mask)
            }
            // Offsets stay far inside every width Triton uses.
            ("extsi" | "extui" | "trunci" | "index_cast" | "index_castui", [Value::Lin(a)]) => {
                Value::Lin(*a)
            }
            (
                "extsi" | "extui" | "trunci" | "index_cast" | "index_castui",
                [g @ Value::Gather(_)],
            ) => *g,
            (_, [Value::Gather(g), Value::Lin(b)]) => {
                g.with(op, b, false).map_or(Value::Opaque, Value::Gather)
            }
            (_, [Value::Lin(b), Value::Gather(g)]) => {
                g.with(op, b, true).map_or(Value::Opaque, Value::Gather)
            }
            (_, [Value::Lin(a), Value::Lin(b)]) => {
                Lin::binary(op, a, b).map_or(Value::Opaque, Value::Lin)
            }
            _ => Value::Opaque,
        })
    }

    /// `arith.constant dense<K> : tensor<...xiN>`: a uniform offset
    /// tensor (or mask, for `i1`).
    fn dense_constant(&self, n: &Node<'a>) -> Value {
        let v = &n.view;
        let text = self.module.src.get(n.stmt.start..n.stmt.end).unwrap_or("");
        let (Some(ty), Some(i)) = (
            v.ins.first().and_then(|t| parse_type(t)),
            text.find("dense<"),
        ) else {
            return Value::Opaque;
        };
        let lit = text[i + 6..].split('>').next().unwrap_or("").trim();
        let Some((r, s)) = shape_of(&ty.shape) else {
            return Value::Opaque;
        };
        match (int_bits(ty.elem), lit) {
            (Some(1), "true") => Value::Mask(Mask::full(r, s)),
            (Some(1), "false") => Value::Mask(Mask {
                hi: [0; 4],
                ..Mask::full(r, s)
            }),
            (Some(_), l) => match l.parse::<i64>() {
                Ok(k) => Value::Lin(Lin::splat(r, s, k, None)),
                Err(_) => Value::Opaque,
            },
            _ => Value::Opaque,
        }
    }

    /// `tt.addptr`: a pointer, or pointer tensor, moved by whole elements.
    pub(super) fn addptr(
        &mut self,
        n: &'m Node<'a>,
        sink: &mut impl EffectSink<'m>,
    ) -> Result<(), TtgirError> {
        let v = &n.view;
        let ssa = Self::ssa(n);
        let vals = self.values(n, &ssa)?;
        let elem = v.ins.first().and_then(|t| pointee_bytes(t)).unwrap_or(1) as i64;
        let r = match vals.as_slice() {
            [Value::Ptr { arg, off }, Value::Int { v, .. }] => Value::Ptr {
                arg: *arg,
                off: off.wrapping_add(v.wrapping_mul(elem)),
            },
            // A CTA's own slot of a global scratch buffer (Triton 3.6
            // offsets the scratch of in-kernel descriptors by program).
            [s @ Value::Scratch(_), _] => *s,
            [Value::Lin(p), Value::Lin(o)] if p.ptr.is_some() && o.ptr.is_none() => {
                Lin::binary("addi", p, &o.scaled(elem)).map_or(Value::Opaque, Value::Lin)
            }
            // A pointer plus an index loaded from memory (a paged cache's
            // block, an expert's weights): a gather of one tile.
            [Value::Ptr { arg, off }, u @ Value::Unknown { .. }] => super::gather::scalar(u)
                .and_then(|g| {
                    super::gather::addptr(&Lin::splat(0, [1; 4], *off, Some(*arg)), &g, elem)
                })
                .map_or(Value::Opaque, Value::Gather),
            [Value::Gather(g), Value::Int { v, .. }] if g.lin.ptr.is_some() => {
                let mut g = *g;
                g.lin.base = g.lin.base.wrapping_add(v.wrapping_mul(elem));
                Value::Gather(g)
            }
            [Value::Lin(p), Value::Gather(g)] if p.ptr.is_some() && g.lin.ptr.is_none() => {
                super::gather::addptr(p, g, elem).map_or(Value::Opaque, Value::Gather)
            }
            [Value::Gather(g), Value::Lin(o)] if g.lin.ptr.is_some() && o.ptr.is_none() => g
                .with("addi", &o.scaled(elem), false)
                .map_or(Value::Opaque, Value::Gather),
            _ => Value::Opaque,
        };
        if let Some(t) = v.ins.first().and_then(|t| parse_type(t)) {
            if t.is_tensor() {
                let e = Effect::Compute {
                    fp32: 0,
                    mufu: 0,
                    fp16: 0,
                    int: t.elements(),
                };
                let e = self.per_vector(n, e);
                self.emit(sink, n, e);
            }
        }
        self.define(v, &[r]);
        Ok(())
    }

    /// The work `e` of an op on an address, offset or mask tensor, one
    /// operation per vector instead of per element: Triton's lowering
    /// keeps one address (and predicate) per run of `sizePerThread`
    /// contiguous elements and folds the rest into immediate offsets.
    pub(super) fn per_vector(&self, n: &Node<'a>, e: Effect<'m>) -> Effect<'m> {
        let v = &n.view;
        let ty = v.outs.first().or(v.ins.first()).copied().unwrap_or("");
        let vec = self
            .module
            .blocked(ty, n.stmt.start)
            .and_then(|b| {
                let [spt, _, order] = &*b;
                let fast = usize::try_from(*order.first()?).ok()?;
                u64::try_from(*spt.get(fast)?).ok()
            })
            .unwrap_or(1)
            .max(1);
        match e {
            Effect::Compute {
                fp32,
                mufu,
                fp16,
                int,
            } => Effect::Compute {
                fp32: fp32.div_ceil(vec),
                mufu: mufu.div_ceil(vec),
                fp16: fp16.div_ceil(vec),
                int: int.div_ceil(vec),
            },
            other => other,
        }
    }

    /// `tt.load`, `tt.store` and `ttg.async_copy_global_to_local` through
    /// a pointer tensor; `ttg.async_commit_group` and `ttg.async_wait`.
    pub(super) fn memory(
        &mut self,
        n: &'m Node<'a>,
        op: &str,
        sink: &mut impl EffectSink<'m>,
    ) -> Result<(), TtgirError> {
        let v = &n.view;
        let ssa = Self::ssa(n);
        match op {
            "async_commit_group" => {
                self.emit(sink, n, Effect::AsyncCommit);
                self.define(v, &[]);
                return Ok(());
            }
            "async_wait" => {
                let num = v.attrs.iter().find_map(|a| find_int(a, "num")).unwrap_or(0);
                let pendings = u32::try_from(num).map_err(|_| self.fail(n, "a negative num"))?;
                self.emit(sink, n, Effect::AsyncWait { pendings });
                self.define(v, &[]);
                return Ok(());
            }
            _ => {}
        }
        // The mask: `tt.load %p, %mask, %other`, `tt.store %p, %v, %mask`,
        // `async_copy_global_to_local %p, %buf mask %m other %o`.
        let mask_name = match op {
            "load" => ssa.get(1).copied(),
            "store" => ssa.get(2).copied(),
            _ => v
                .operands
                .windows(2)
                .find(|w| w[0].text == "mask" && w[1].is_ssa())
                .map(|w| w[1].text),
        };
        let off = match mask_name {
            Some(m) => masked_off(&self.get(n, m)?),
            None => false,
        };
        let ptr_name = ssa.first().copied().unwrap_or("");
        if off {
            // Masked off everywhere: nothing moves, whatever the pointer
            // (a pipelined kernel's address past its last tile may be
            // undefined).
            self.define(v, &[]);
            return Ok(());
        }
        if let Value::Gather(g) = self.get(n, ptr_name)? {
            return self.gather(n, op, g, sink);
        }
        let tile = self.ptr_tile(n, ptr_name)?;
        let result = match op {
            "store" => {
                self.emit(sink, n, Effect::PtrStore { tile });
                None
            }
            "load" => {
                let ty = v.ins.first().copied().unwrap_or("");
                let bits = pointee(ty)
                    .filter(|_| !ty.contains("tensor<"))
                    .and_then(int_bits);
                let ptr = self.get(n, ptr_name)?;
                // A volatile scalar load spun on is a flag's poll, timed by
                // the wait its comparison makes (`poll_compare`).
                let polled = match (ptr, bits) {
                    (Value::Ptr { arg, off }, Some(_))
                        if self.spins()
                            && v.attrs.iter().any(|a| a.contains("isVolatile = true")) =>
                    {
                        self.global.address(arg, off)
                    }
                    _ => None,
                };
                if let Some(addr) = polled {
                    self.define(v, &[Value::Polled { addr }]);
                    return Ok(());
                }
                let load = self.load_into_registers(n, tile, sink);
                // A scalar whose contents the launch gives: its value, read
                // as soon as it arrives (a size, an address or a count the
                // next ops compute with).
                match (ptr, bits) {
                    (Value::Ptr { arg, off }, Some(bits)) => {
                        match self
                            .global
                            .value(arg, off)
                            .map_err(|why| self.fail(n, why))?
                        {
                            Some(x) => {
                                self.emit_wait_now(sink, n, load);
                                Some(Value::Int {
                                    v: super::super::value::wrap(x, bits),
                                    bits,
                                })
                            }
                            None => Some(Value::Unknown {
                                load,
                                from: arg,
                                at: (off, (bits / 8).max(1)),
                                linear: Some((1, 0)),
                            }),
                        }
                    }
                    // A row of integers may be a gather's indices.
                    (Value::Lin(l), None) if pointee(ty).and_then(int_bits).is_some() => Some(
                        super::super::affine::Gather::loaded(load, &l)
                            .map_or(Value::Loaded(load), Value::Gather),
                    ),
                    _ => Some(Value::Loaded(load)),
                }
            }
            _ => {
                self.emit(sink, n, Effect::PtrLoad { tile, regs: None });
                None
            }
        };
        self.define(v, &[result.unwrap_or(Value::Opaque)]);
        Ok(())
    }

    /// What a load, store or atomic through pointer operand `ptr_name`
    /// (a pointer tensor, or one scalar pointer) moves.
    fn ptr_tile(&self, n: &Node<'a>, ptr_name: &str) -> Result<PtrTile, TtgirError> {
        let v = &n.view;
        let ty = v.ins.first().copied().unwrap_or("");
        match self.get(n, ptr_name)? {
            Value::Lin(l) if l.ptr.is_some() => self.tile(n, l, ty),
            Value::Ptr { arg, off } => {
                // One scalar moves as the 16-byte run that holds it (one
                // request).
                let elem = pointee_bytes(ty)
                    .filter(|&e| (1..=16).contains(&e))
                    .ok_or_else(|| self.fail(n, format!("no pointee type of 1 to 16 bytes in `{ty}`")))?;
                let run = 16 / elem as u32;
                Ok(PtrTile {
                    lin: Lin {
                        coef: [elem as i64, 0, 0, 0],
                        ..Lin::splat(1, [run, 1, 1, 1], off - off.rem_euclid(16), Some(arg))
                    },
                    elem: elem as u32,
                    segment: 16,
                    vector: elem as u32,
                    l2_only: l2_only(v),
                })
            }
            other => Err(self.fail(
                n,
                format!(
                    "`{ptr_name}` must be a pointer tensor at an affine offset from a pointer argument with a [tensors] entry (or an address in one of its tensors or [buffers]), and is {}",
                    super::ops::kind(&other)
                ),
            )),
        }
    }

    /// Reports a load of `tile` into registers by op `n`: its number.
    fn load_into_registers(
        &mut self,
        n: &'m Node<'a>,
        tile: PtrTile,
        sink: &mut impl EffectSink<'m>,
    ) -> u64 {
        let load = self.loads;
        self.loads += 1;
        let regs = Some(load);
        self.emit(sink, n, Effect::PtrLoad { tile, regs });
        load
    }

    /// `tt.atomic_rmw` and `tt.atomic_cas`: a read-modify-write at the L2,
    /// timed as a load of the box into registers (the old values come back
    /// to the threads) and a store of it (the new values reach the L2).
    /// Spin locks ([`Self::lock`]) and flags ([`Self::flag`]) are the
    /// simulator's; other atomics are taken as uncontended: a
    /// compare-and-swap of a scalar succeeds at its first try (it returns
    /// its comparand); any other result is a loaded value, waited for at
    /// its first use.
    pub(super) fn atomic(
        &mut self,
        n: &'m Node<'a>,
        op: &str,
        sink: &mut impl EffectSink<'m>,
    ) -> Result<(), TtgirError> {
        let v = &n.view;
        let ssa = Self::ssa(n);
        let off = match (op, ssa.get(2)) {
            ("atomic_rmw", Some(m)) => masked_off(&self.get(n, m)?),
            _ => false,
        };
        if off {
            self.define(v, &[]);
            return Ok(());
        }
        // A flag's add goes before the atomic's own load and store.
        let mut add = None;
        if let Some(a) = self.scalar_atomic(n)? {
            if let Some(r) = self.lock(n, op, a, sink) {
                self.define(v, &[r]);
                return Ok(());
            }
            match self.flag(n, op, a) {
                Some(Flag::Wait {
                    addr,
                    value: (c, bits),
                }) => {
                    self.emit(sink, n, Effect::FlagWait { addr, count: c });
                    self.define(v, &[Value::Int { v: c, bits }]);
                    return Ok(());
                }
                Some(Flag::Add { addr, amount }) => add = Some(Effect::FlagAdd { addr, amount }),
                None => {}
            }
        }
        let tile = self.ptr_tile(n, ssa.first().copied().unwrap_or(""))?;
        if let Some(e) = add {
            self.emit(sink, n, e);
        }
        let load = self.load_into_registers(n, tile, sink);
        self.emit(sink, n, Effect::PtrStore { tile });
        let cmp = match (op, ssa.get(1)) {
            ("atomic_cas", Some(c)) => Some(self.get(n, c)?),
            _ => None,
        };
        let r = match cmp {
            Some(c @ Value::Int { .. }) => {
                self.emit_wait_now(sink, n, load);
                c
            }
            _ => Value::Loaded(load),
        };
        self.define(v, &[r]);
        Ok(())
    }

    /// A spin lock's atomic, or `None` for any other: `atomic_cas(p, 0, v)`
    /// with `v` not 0 on a scalar pointer, in the condition of the
    /// `scf.while` that spins on it, takes the lock at `p` and gives the
    /// old value 0 (the loop ends; the simulator holds the CTA until the
    /// lock is free); `atomic_rmw exch` of 0 on a lock the run holds
    /// releases it and gives the old value 1. A compare-and-swap tried
    /// once (a claim) is no lock.
    fn lock(
        &mut self,
        n: &'m Node<'a>,
        op: &str,
        ScalarAtomic { addr, ints }: ScalarAtomic,
        sink: &mut impl EffectSink<'m>,
    ) -> Option<Value> {
        let held = self.held.iter().position(|&h| h == addr);
        // Whether it takes (true) or releases the lock, the width of the
        // word, and the old value it gives.
        let (acquire, bits, old) = if op == "atomic_cas" {
            match ints {
                [Some((0, bits)), Some((new, _))] if self.spins() && new != 0 && held.is_none() => {
                    self.held.push(addr);
                    (true, bits, 0)
                }
                _ => return None,
            }
        } else {
            match (held, ints[0]) {
                (Some(i), Some((0, bits))) if Self::rmw_kind(n) == Some("exch") => {
                    self.held.swap_remove(i);
                    (false, bits, 1)
                }
                _ => return None,
            }
        };
        self.emit(sink, n, Effect::Lock { addr, acquire });
        Some(Value::Int { v: old, bits })
    }

    /// A flag's atomic, or `None` for any other: `atomic_cas(p, c, c)`
    /// (`c` not 0, a read that changes nothing) on a scalar pointer, in the
    /// condition of the `scf.while` that spins on it, waits until the word
    /// holds `c` and gives `c` (the loop ends; the simulator holds the CTA
    /// until the grid's counter of the word has reached `c`); a scalar
    /// `atomic_rmw add` of `v`, or `exch` of `v` on a word the run holds
    /// no lock on (a flag set, on a word that starts at 0), adds `v` to
    /// the word's counter.
    fn flag(
        &self,
        n: &'m Node<'a>,
        op: &str,
        ScalarAtomic { addr, ints }: ScalarAtomic,
    ) -> Option<Flag> {
        if op == "atomic_cas" {
            return match ints {
                [Some(c), Some((new, _))] if self.spins() && c.0 != 0 && c.0 == new => {
                    Some(Flag::Wait { addr, value: c })
                }
                _ => None,
            };
        }
        match (Self::rmw_kind(n), ints[0]) {
            (Some("add" | "exch"), Some((v, _))) if v > 0 && !self.held.contains(&addr) => {
                Some(Flag::Add { addr, amount: v })
            }
            _ => None,
        }
    }

    /// Whether comparison `n` reads a flag polled by a volatile load.
    pub(super) fn polled(&self, n: &'m Node<'a>) -> Result<bool, TtgirError> {
        Ok(self
            .values(n, &Self::ssa(n))?
            .iter()
            .any(|x| matches!(x, Value::Polled { .. })))
    }

    /// `arith.cmpi` of a polled flag with a constant, the condition of the
    /// loop that spins on it: waits until the flag's counter lets the loop
    /// end (`ne c`: until it holds `c`; `eq 0`: until it is set; `slt c`,
    /// `ult c`: until it has reached `c`; `sle c`, `ule c`: past `c`) and
    /// gives false, so the loop ends at once. Any other comparison of a
    /// polled flag is an error.
    pub(super) fn poll_compare(
        &mut self,
        n: &'m Node<'a>,
        sink: &mut impl EffectSink<'m>,
    ) -> Result<(), TtgirError> {
        let v = &n.view;
        let vals = self.values(n, &Self::ssa(n))?;
        let pred = Self::predicate(n);
        let (addr, c, pred) = match vals.as_slice() {
            [Value::Polled { addr, .. }, Value::Int { v: c, .. }] => (*addr, *c, pred),
            [Value::Int { v: c, .. }, Value::Polled { addr, .. }] => (*addr, *c, flipped(pred)),
            _ => return Err(self.fail(n, "a polled flag compared with anything but a constant")),
        };
        let count = match (pred, c) {
            ("ne", c) => c,
            ("eq", 0) => 1,
            ("slt" | "ult", c) => c,
            ("sle" | "ule", c) => c + 1,
            _ => {
                return Err(self.fail(
                    n,
                    format!("a spin on a polled flag with `cmpi {pred}, {c}` (simfa waits on `ne`, `eq 0`, `slt`, `sle`)"),
                ))
            }
        };
        self.emit(sink, n, Effect::FlagWait { addr, count });
        self.define(v, &[Value::Int { v: 0, bits: 1 }]);
        Ok(())
    }

    /// An atomic on a scalar pointer into the launch's memory: the word's
    /// address and its operands 1 and 2 (a CAS's comparand and new value,
    /// an RMW's value and mask) where they are integers, with their
    /// widths; `None` for an atomic on a tensor of pointers.
    fn scalar_atomic(&self, n: &'m Node<'a>) -> Result<Option<ScalarAtomic>, TtgirError> {
        let ssa = Self::ssa(n);
        let Value::Ptr { arg, off } = self.get(n, ssa.first().copied().unwrap_or(""))? else {
            return Ok(None);
        };
        let Some(addr) = self.global.address(arg, off) else {
            return Ok(None);
        };
        let mut ints = [None; 2];
        for (i, slot) in ints.iter_mut().enumerate() {
            if let Some(x) = ssa.get(i + 1) {
                if let Value::Int { v, bits } = self.get(n, x)? {
                    *slot = Some((v, bits));
                }
            }
        }
        Ok(Some(ScalarAtomic { addr, ints }))
    }

    /// Whether the op being run is in the condition of an `scf.while`
    /// (the loop that spins on it).
    pub(super) fn spins(&self) -> bool {
        matches!(
            self.stack.last().map(|f| &f.kind),
            Some(super::Kind::While { before: true, .. })
        )
    }

    /// An `atomic_rmw`'s operation (`add`, `exch`, ...).
    fn rmw_kind(n: &Node<'a>) -> Option<&'a str> {
        const KINDS: [&str; 9] = [
            "add", "fadd", "and", "or", "xor", "max", "min", "umax", "umin",
        ];
        n.view
            .operands
            .iter()
            .find(|o| o.text == "exch" || KINDS.contains(&o.text))
            .map(|o| o.text)
    }

    /// `tt.int_to_ptr`, `tt.ptr_to_int` and `tt.bitcast`: an address
    /// loaded from memory becomes a pointer into the launch's tensor or
    /// buffer that holds it, and back; a bitcast pointer (or pointer
    /// tensor, kept in bytes) is the same address.
    pub(super) fn pointer_cast(&mut self, n: &Node<'a>, op: &str) -> Result<(), TtgirError> {
        let v = &n.view;
        let ssa = Self::ssa(n);
        let x = self.get(n, ssa.first().copied().unwrap_or(""))?;
        let r = match (op, x) {
            ("int_to_ptr", Value::Int { v: addr, .. }) => {
                self.global.find(addr as u64).ok_or_else(|| {
                    self.fail(
                        n,
                        format!(
                            "address {addr:#x} is in no tensor or [buffers] entry of the launch"
                        ),
                    )
                })?
            }
            ("ptr_to_int", Value::Ptr { arg, off }) => match self.global.address(arg, off) {
                Some(a) => Value::Int {
                    v: a as i64,
                    bits: 64,
                },
                None => Value::Opaque,
            },
            ("bitcast", p @ (Value::Ptr { .. } | Value::Lin(_))) => p,
            _ => Value::Opaque,
        };
        self.define(v, &[r]);
        Ok(())
    }

    /// The box a pointer tensor `l` of type `ty` moves, with the bytes each
    /// sector request carries: a warp's contiguous run along the tensor's
    /// unit-stride dimension (from its `#ttg.blocked` layout), at most a
    /// 32-byte sector; one element when no dimension is contiguous.
    pub(super) fn tile(&self, n: &Node<'a>, lin: Lin, ty: &str) -> Result<PtrTile, TtgirError> {
        let elem = pointee_bytes(ty)
            .ok_or_else(|| self.fail(n, format!("no pointee type with a size in `{ty}`")))?;
        let r = lin.rank as usize;
        let unit = (0..r).find(|&d| lin.coef[d] == elem as i64 && lin.shape[d] > 1);
        let (run, vector) = match (unit, self.module.blocked(ty, n.stmt.start).as_deref()) {
            (Some(d), Some([spt, tpw, order])) => {
                let per_thread = spt.get(d).copied().unwrap_or(1).max(1) as u64;
                let threads = if order.first() == Some(&(d as i64)) {
                    tpw.get(d).copied().unwrap_or(1).max(1) as u64
                } else {
                    1
                };
                let vector = elem.saturating_mul(per_thread);
                (vector.saturating_mul(threads), vector)
            }
            (Some(_), None) => (32, 16),
            (None, _) => (elem, elem),
        };
        Ok(PtrTile {
            lin,
            elem: u32::try_from(elem).unwrap_or(u32::MAX),
            segment: run.clamp(1, 32) as u8,
            vector: u32::try_from(vector).unwrap_or(u32::MAX),
            l2_only: l2_only(&n.view),
        })
    }
}

/// Whether mask or predicate `m` holds nowhere.
fn masked_off(m: &Value) -> bool {
    match m {
        Value::Mask(m) => m.empty(),
        Value::Int { v, bits: 1 } => *v == 0,
        _ => false,
    }
}

/// The shape of op `v`'s result type.
fn out_shape(v: &OpView<'_>) -> Option<(u8, [u32; 4])> {
    let t = parse_type(v.outs.first().or(v.ins.first())?.trim())?;
    if !t.is_tensor() {
        return None;
    }
    shape_of(&t.shape)
}

/// Whether a load asks to bypass the L1: cache modifier `cg` (cache at
/// the L2) or `cv` (fetch again), as Triton 3.9 writes it
/// (`cachePolicy = #tt.cache_policy<cache_modifier = cg, ...>`) and as
/// earlier releases do (`cache = cg`).
fn l2_only(v: &OpView<'_>) -> bool {
    v.attrs.iter().any(|a| {
        [
            "cache_modifier = cg",
            "cache_modifier = cv",
            "cache = cg",
            "cache = cv",
        ]
        .iter()
        .any(|m| a.contains(m))
    })
}

/// The element type `T` a `!tt.ptr<T>` (or tensor of them) points to.
fn pointee(ty: &str) -> Option<&str> {
    let i = ty.find("ptr<")?;
    Some(ty[i + 4..].split(['>', ',']).next()?.trim())
}

/// The bytes of the element a `!tt.ptr<T>` (or tensor of them) points to.
pub(super) fn pointee_bytes(ty: &str) -> Option<u64> {
    match pointee(ty)? {
        "i1" | "i8" => Some(1),
        e => Dtype::from_mlir(e).map(Dtype::bytes),
    }
}

/// The predicate with its operands swapped (`a < b` is `b > a`).
fn flipped(pred: &str) -> &str {
    match pred {
        "slt" => "sgt",
        "sgt" => "slt",
        "sle" => "sge",
        "sge" => "sle",
        "ult" => "ugt",
        "ugt" => "ult",
        "ule" => "uge",
        "uge" => "ule",
        p => p,
    }
}

/// A scalar atomic's word and integer operands ([`Interp::scalar_atomic`]).
#[derive(Clone, Copy)]
struct ScalarAtomic {
    addr: u64,
    ints: [Option<(i64, u8)>; 2],
}

/// What a flag's atomic does ([`Interp::flag`]).
enum Flag {
    /// Spins until the word at `addr` holds `value` (and its width).
    Wait { addr: u64, value: (i64, u8) },
    /// Adds `amount` to the word at `addr`.
    Add { addr: u64, amount: i64 },
}
