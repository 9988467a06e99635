//! Register tensors of addresses and offsets, and the masks that guard
//! their loads, as the interpreter follows them.
//!
//! A kernel that loads through pointers (`tl.load(ptr + offsets)`) builds
//! its address tensor from `make_range`, `splat`, `expand_dims`,
//! `broadcast`, integer arithmetic and `addptr`. Every such tensor is
//! affine in its indices: the element at `(i0, i1, ...)` is
//! `base + coef[0] * i0 + coef[1] * i1 + ...` ([`Lin`]). A mask built by
//! comparing one with a bound holds on a box of indices ([`Mask`]). That
//! is all a load's timing needs: which box of which tensor it reads, and
//! whether any of it is read at all.
//!
//! Two simplifications, both on the safe side of "what moves": a remainder
//! or quotient by a bound is followed where the values all lie in one
//! period of it (the tutorial's `offs % M` on full tiles is the identity;
//! `(pid * 1024 + i) % 1024` is `i`), and any other remainder or division
//! makes the tensor opaque; a mask that is not a box (a comparison of a tensor that
//! varies along several dimensions) is taken as all true.

/// The most dimensions of a register tensor the interpreter follows.
pub const MAX_RANK: usize = 4;

/// An integer or pointer tensor whose element at index `i` is
/// `base + sum(coef[d] * i[d])`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Lin {
    /// Dimensions in use.
    pub rank: u8,
    /// Elements per dimension, outermost first.
    pub shape: [u32; MAX_RANK],
    /// The value at index 0 (for a pointer tensor, bytes past its argument).
    pub base: i64,
    /// The step per index along each dimension (bytes for a pointer tensor).
    pub coef: [i64; MAX_RANK],
    /// For a pointer tensor, the pointer argument it is an offset from.
    pub ptr: Option<u16>,
}

/// An integer or pointer tensor that is affine in its indices plus a
/// multiple of a 1-D integer tensor loaded from memory, broadcast along
/// the other dimensions: a gather's addresses, as
/// `table + rows[:, None] * D + cols[None, :]` with `rows = tl.load(...)`.
/// Its element at index `i` is `lin(i) + scale * idx[i[dim]]`, where
/// `idx[g]` is the element `from.1 + g * from.2` bytes into pointer
/// argument `from.0`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Gather {
    /// The affine part (for a pointer tensor, its `ptr` the argument).
    pub lin: Lin,
    /// The dimension the loaded indices run along ([`Gather::WHOLE`]: one
    /// loaded scalar offsets the whole tensor).
    pub dim: u8,
    /// The indices' multiplier (bytes per index in a pointer tensor).
    pub scale: i64,
    /// What each index is divided by first (`tokens // top_k`), at least 1.
    pub div: i64,
    /// The load that read the indices.
    pub load: u64,
    /// Where they were read: pointer argument, byte offset of the first,
    /// bytes between two.
    pub from: (u16, i64, i64),
}

impl Gather {
    /// [`Gather::dim`] of a gather by one loaded scalar.
    pub const WHOLE: u8 = u8::MAX;

    /// A rank-0 gather's offsets made a tensor of `shape`.
    pub fn splat(&self, rank: u8, shape: [u32; MAX_RANK]) -> Gather {
        Gather {
            lin: Lin::splat(rank, shape, self.lin.base, self.lin.ptr),
            ..*self
        }
    }

    /// Tiles a load through it moves: one per index.
    pub fn rows(&self) -> u32 {
        match self.dim {
            Gather::WHOLE => 1,
            d => self.lin.shape[d as usize],
        }
    }

    /// The indices of load `load`, read from the rank-1 pointer tensor
    /// `from` (an integer tensor of their shape, 0 plus each index).
    pub fn loaded(load: u64, from: &Lin) -> Option<Gather> {
        let ptr = from.ptr?;
        (from.rank == 1).then(|| Gather {
            lin: Lin::splat(1, from.shape, 0, None),
            dim: 0,
            scale: 1,
            div: 1,
            load,
            from: (ptr, from.base, from.coef[0]),
        })
    }

    /// With a dimension of size 1 inserted at `axis`.
    pub fn expand(&self, axis: usize) -> Option<Gather> {
        let lin = self.lin.expand(axis)?;
        let dim = if self.dim == Gather::WHOLE {
            self.dim
        } else if axis <= self.dim as usize {
            self.dim + 1
        } else {
            self.dim
        };
        Some(Gather { lin, dim, ..*self })
    }

    /// Broadcast to `shape` along the dimensions of size 1 (the indices'
    /// own dimension keeps its size).
    pub fn broadcast(&self, rank: u8, shape: [u32; MAX_RANK]) -> Option<Gather> {
        let d = self.dim as usize;
        (self.dim == Gather::WHOLE || shape[d] == self.lin.shape[d]).then_some(())?;
        Some(Gather {
            lin: self.lin.broadcast(rank, shape)?,
            ..*self
        })
    }

    /// `arith` op `op` with the affine tensor `b` (`flip`: `b` is the
    /// left operand): a sum keeps the indices; a product by a uniform
    /// tensor scales them.
    pub fn with(&self, op: &str, b: &Lin, flip: bool) -> Option<Gather> {
        let lin = if flip {
            Lin::binary(op, b, &self.lin)?
        } else {
            Lin::binary(op, &self.lin, b)?
        };
        // The raw indices divided by a positive constant: a new divisor.
        let raw = self.scale == 1 && self.lin.uniform() && self.lin.base == 0;
        if matches!(op, "divsi" | "divui") && !flip && raw && b.uniform() && b.base > 0 {
            return Some(Gather {
                div: self.div.checked_mul(b.base)?,
                lin: Lin {
                    ptr: None,
                    ..self.lin
                },
                ..*self
            });
        }
        let scale = match op {
            "addi" => self.scale,
            "subi" if !flip => self.scale,
            "muli" if b.uniform() && self.lin.ptr.is_none() => self.scale.wrapping_mul(b.base),
            _ => return None,
        };
        Some(Gather {
            lin,
            scale,
            ..*self
        })
    }

    /// The affine tensor of index `g` along the gathered dimension, whose
    /// loaded index is `idx`: that dimension of size 1.
    pub fn row(&self, g: u32, idx: i64) -> Lin {
        let mut l = self.lin;
        let idx = idx.div_euclid(self.div.max(1));
        l.base = l.base.wrapping_add(self.scale.wrapping_mul(idx));
        if self.dim != Gather::WHOLE {
            let d = self.dim as usize;
            l.base = l.base.wrapping_add(l.coef[d].wrapping_mul(g as i64));
            l.shape[d] = 1;
            l.coef[d] = 0;
        }
        l
    }
}

/// An `i1` tensor that holds where `lo[d] <= i[d] < hi[d]` along every
/// dimension (nowhere when some `lo[d] >= hi[d]`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Mask {
    /// Dimensions in use.
    pub rank: u8,
    /// Elements per dimension, outermost first.
    pub shape: [u32; MAX_RANK],
    /// First index that holds, per dimension.
    pub lo: [u32; MAX_RANK],
    /// One past the last index that holds, per dimension.
    pub hi: [u32; MAX_RANK],
}

/// A shape of at most [`MAX_RANK`] dimensions that each fit a `u32`.
pub fn shape_of(dims: &[u64]) -> Option<(u8, [u32; MAX_RANK])> {
    if dims.len() > MAX_RANK {
        return None;
    }
    let mut s = [1u32; MAX_RANK];
    for (o, &d) in s.iter_mut().zip(dims) {
        *o = u32::try_from(d).ok()?;
    }
    Some((dims.len() as u8, s))
}

impl Lin {
    /// The same value at every index of `shape`.
    pub fn splat(rank: u8, shape: [u32; MAX_RANK], v: i64, ptr: Option<u16>) -> Lin {
        Lin {
            rank,
            shape,
            base: v,
            coef: [0; MAX_RANK],
            ptr,
        }
    }

    /// Every element times `k` (element offsets to bytes).
    pub fn scaled(&self, k: i64) -> Lin {
        Lin {
            base: self.base.wrapping_mul(k),
            coef: self.coef.map(|c| c.wrapping_mul(k)),
            ..*self
        }
    }

    /// Whether every element is the same.
    pub fn uniform(&self) -> bool {
        self.coef[..self.rank as usize].iter().all(|&c| c == 0)
    }

    /// The smallest and largest element (saturating).
    pub fn range(&self) -> (i64, i64) {
        let (mut lo, mut hi) = (self.base, self.base);
        for d in 0..self.rank as usize {
            let span = self.coef[d].saturating_mul(self.shape[d].saturating_sub(1) as i64);
            if span < 0 {
                lo = lo.saturating_add(span);
            } else {
                hi = hi.saturating_add(span);
            }
        }
        (lo, hi)
    }

    /// With a dimension of size 1 inserted at `axis`.
    pub fn expand(&self, axis: usize) -> Option<Lin> {
        let r = self.rank as usize;
        if axis > r || r >= MAX_RANK {
            return None;
        }
        let mut out = *self;
        out.rank += 1;
        out.shape = insert(self.shape, r, axis, 1);
        out.coef = insert(self.coef, r, axis, 0);
        Some(out)
    }

    /// Broadcast to `shape` (dimensions of size 1 grow and stay constant).
    pub fn broadcast(&self, rank: u8, shape: [u32; MAX_RANK]) -> Option<Lin> {
        if rank != self.rank {
            return None;
        }
        let mut out = *self;
        for (d, &to) in shape.iter().enumerate().take(rank as usize) {
            if self.shape[d] != to {
                if self.shape[d] != 1 {
                    return None;
                }
                out.coef[d] = 0;
            }
        }
        out.shape = shape;
        Some(out)
    }

    /// `arith` op `op` on two tensors of one shape (a splat scalar is a
    /// uniform tensor): the affine result, or `None` when it is not one.
    pub fn binary(op: &str, a: &Lin, b: &Lin) -> Option<Lin> {
        if a.rank != b.rank || a.shape != b.shape {
            return None;
        }
        let mut out = *a;
        out.ptr = a.ptr.or(b.ptr);
        let zip = |f: fn(i64, i64) -> i64| {
            let mut c = [0i64; MAX_RANK];
            for (d, o) in c.iter_mut().enumerate() {
                *o = f(a.coef[d], b.coef[d]);
            }
            c
        };
        match op {
            "addi" => {
                out.base = a.base.wrapping_add(b.base);
                out.coef = zip(i64::wrapping_add);
            }
            "subi" if b.ptr.is_none() => {
                out.base = a.base.wrapping_sub(b.base);
                out.coef = zip(i64::wrapping_sub);
            }
            "muli" if b.uniform() && a.ptr.is_none() => {
                out.base = a.base.wrapping_mul(b.base);
                out.coef = a.coef.map(|c| c.wrapping_mul(b.base));
            }
            "muli" if a.uniform() && b.ptr.is_none() => {
                out.base = b.base.wrapping_mul(a.base);
                out.coef = b.coef.map(|c| c.wrapping_mul(a.base));
            }
            // A remainder by a bound the values stay under is the identity.
            "remsi" | "remui" if b.uniform() && b.base > 0 => {
                let (lo, hi) = a.range();
                if lo < 0 || hi / b.base != lo / b.base {
                    return None;
                }
                out.base = a.base.wrapping_sub(lo / b.base * b.base);
            }
            // A quotient that is the same for every value: uniform.
            "divsi" | "divui" if b.uniform() && b.base > 0 && a.ptr.is_none() => {
                let (lo, hi) = a.range();
                if lo < 0 || hi / b.base != lo / b.base {
                    return None;
                }
                out.base = lo / b.base;
                out.coef = [0; MAX_RANK];
            }
            _ => return None,
        }
        Some(out)
    }

    /// The box of indices where `self PRED bound` holds, for a tensor
    /// that varies along one dimension at most (`None` otherwise).
    pub fn compare(&self, pred: &str, bound: i64) -> Option<Mask> {
        let r = self.rank as usize;
        let mut m = Mask::full(self.rank, self.shape);
        let varying: Vec<usize> = (0..r).filter(|&d| self.coef[d] != 0).collect();
        let holds = |x: i64| -> Option<bool> {
            Some(match pred {
                "slt" | "ult" => x < bound,
                "sle" | "ule" => x <= bound,
                "sgt" | "ugt" => x > bound,
                "sge" | "uge" => x >= bound,
                "eq" => x == bound,
                "ne" => x != bound,
                _ => return None,
            })
        };
        match varying.as_slice() {
            [] => {
                if !holds(self.base)? {
                    m.hi = [0; MAX_RANK];
                }
            }
            [d] => {
                let d = *d;
                // The indices along `d` where it holds: a run, since the
                // values are monotonic along `d` (eq/ne are not runs in
                // general and are left to the caller).
                if matches!(pred, "eq" | "ne") {
                    return None;
                }
                let n = self.shape[d];
                let at = |i: u32| {
                    self.base
                        .saturating_add(self.coef[d].saturating_mul(i as i64))
                };
                let h = |i: u32| holds(at(i)) == Some(true);
                // Monotonic: it holds on a prefix or on a suffix of the
                // indices; the boundary is found by bisection.
                let first_change = |from: bool| {
                    let (mut lo, mut hi) = (0u32, n);
                    while lo < hi {
                        let mid = lo + (hi - lo) / 2;
                        if h(mid) == from {
                            lo = mid + 1;
                        } else {
                            hi = mid;
                        }
                    }
                    lo
                };
                if n == 0 {
                    m.hi[d] = 0;
                } else if h(0) {
                    m.hi[d] = first_change(true);
                } else {
                    m.lo[d] = first_change(false);
                    if m.lo[d] >= n {
                        m.hi[d] = 0;
                    }
                }
            }
            _ => return None,
        }
        Some(m)
    }
}

impl Mask {
    /// A mask that holds everywhere.
    pub fn full(rank: u8, shape: [u32; MAX_RANK]) -> Mask {
        Mask {
            rank,
            shape,
            lo: [0; MAX_RANK],
            hi: shape,
        }
    }

    /// Whether it holds nowhere.
    pub fn empty(&self) -> bool {
        (0..self.rank as usize).any(|d| self.lo[d] >= self.hi[d])
    }

    /// Whether it holds everywhere.
    pub fn all(&self) -> bool {
        (0..self.rank as usize).all(|d| self.lo[d] == 0 && self.hi[d] >= self.shape[d])
    }

    /// With a dimension of size 1 inserted at `axis`.
    pub fn expand(&self, axis: usize) -> Option<Mask> {
        let r = self.rank as usize;
        if axis > r || r >= MAX_RANK {
            return None;
        }
        let empty = self.empty();
        let mut out = *self;
        out.rank += 1;
        out.shape = insert(self.shape, r, axis, 1);
        out.lo = insert(self.lo, r, axis, 0);
        out.hi = insert(self.hi, r, axis, if empty { 0 } else { 1 });
        Some(out)
    }

    /// Broadcast to `shape`.
    pub fn broadcast(&self, rank: u8, shape: [u32; MAX_RANK]) -> Option<Mask> {
        if rank != self.rank {
            return None;
        }
        let mut out = *self;
        for (d, &to) in shape.iter().enumerate().take(rank as usize) {
            if self.shape[d] != to {
                if self.shape[d] != 1 {
                    return None;
                }
                if self.hi[d] > self.lo[d] {
                    out.lo[d] = 0;
                    out.hi[d] = to;
                }
            }
        }
        out.shape = shape;
        Some(out)
    }

    /// Where both hold (`andi`), or the smallest box holding where either
    /// does (`ori`, which may hold in more places than the real mask).
    pub fn combine(op: &str, a: &Mask, b: &Mask) -> Option<Mask> {
        if a.rank != b.rank || a.shape != b.shape {
            return None;
        }
        let mut out = *a;
        match op {
            "andi" => {
                for d in 0..a.rank as usize {
                    out.lo[d] = a.lo[d].max(b.lo[d]);
                    out.hi[d] = a.hi[d].min(b.hi[d]);
                }
            }
            "ori" => {
                if a.empty() {
                    return Some(*b);
                }
                if b.empty() {
                    return Some(*a);
                }
                for d in 0..a.rank as usize {
                    out.lo[d] = a.lo[d].min(b.lo[d]);
                    out.hi[d] = a.hi[d].max(b.hi[d]);
                }
            }
            _ => return None,
        }
        Some(out)
    }
}

/// `a`'s first `len` entries with `v` inserted at `at`.
fn insert<T: Copy>(a: [T; MAX_RANK], len: usize, at: usize, v: T) -> [T; MAX_RANK] {
    let mut out = a;
    out[at] = v;
    out[at + 1..=len].copy_from_slice(&a[at..len]);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn range(n: u32) -> Lin {
        let (rank, shape) = shape_of(&[n as u64]).unwrap();
        Lin {
            rank,
            shape,
            base: 0,
            coef: [1, 0, 0, 0],
            ptr: None,
        }
    }

    #[test]
    fn a_tile_of_a_row_major_matrix_is_affine() {
        // offs_m[:, None] * 4096 + offs_k[None, :], as the tutorial builds it.
        let (r2, s) = shape_of(&[128, 64]).unwrap();
        let rows = range(128).expand(1).unwrap();
        let stride = Lin::splat(rows.rank, rows.shape, 4096, None);
        let rows = Lin::binary("muli", &rows, &stride)
            .unwrap()
            .broadcast(r2, s)
            .unwrap();
        let cols = range(64).expand(0).unwrap().broadcast(r2, s).unwrap();
        let off = Lin::binary("addi", &rows, &cols).unwrap();
        assert_eq!(off.coef[..2], [4096, 1]);
        assert_eq!(off.range(), (0, 127 * 4096 + 63));
        // A remainder by a bound above every value changes nothing; one
        // below some is not affine.
        let m = Lin::splat(1, range(128).shape, 128, None);
        assert_eq!(Lin::binary("remsi", &range(128), &m), Some(range(128)));
        let m = Lin::splat(1, range(128).shape, 100, None);
        assert_eq!(Lin::binary("remsi", &range(128), &m), None);
        // In one period of the bound, a remainder shifts and a quotient is
        // uniform: (1024 + i) % 1024 is i, (1024 + i) / 1024 is 1.
        let k = Lin::splat(1, range(128).shape, 1024, None);
        let shifted = Lin::binary("addi", &range(128), &k).unwrap();
        assert_eq!(Lin::binary("remsi", &shifted, &k), Some(range(128)));
        let one = Lin::binary("divsi", &shifted, &k).unwrap();
        assert_eq!((one.base, one.coef), (1, [0; MAX_RANK]));
        let straddles = Lin::binary("addi", &range(128), &m).unwrap();
        let d = Lin::splat(1, range(128).shape, 128, None);
        assert_eq!(Lin::binary("divsi", &straddles, &d), None, "100..228 / 128");
        // Two varying tensors do not multiply.
        assert_eq!(Lin::binary("muli", &range(8), &range(8)), None);
    }

    #[test]
    fn comparisons_give_boxes() {
        let k = range(64).expand(0).unwrap();
        // offs_k < K - k * 64 with 40 left: the first 40 columns.
        let m = k.compare("slt", 40).unwrap();
        assert_eq!((m.lo[1], m.hi[1]), (0, 40));
        let (r2, s) = shape_of(&[128, 64]).unwrap();
        let m = m.broadcast(r2, s).unwrap();
        assert_eq!((m.lo, m.hi), ([0, 0, 0, 0], [128, 40, 1, 1]));
        assert!(!m.empty() && !m.all());
        assert!(k.compare("slt", 0).unwrap().empty());
        assert!(k.compare("sge", 0).unwrap().all());
        // A false scalar predicate splat and-ed in empties the mask.
        let none = Mask {
            hi: [0; MAX_RANK],
            ..Mask::full(r2, s)
        };
        assert!(Mask::combine("andi", &m, &none).unwrap().empty());
        assert_eq!(Mask::combine("ori", &m, &none), Some(m));
        // Decreasing values hold on a suffix; a huge range takes no time.
        let down = Lin {
            coef: [-1, 0, 0, 0],
            ..Lin::splat(1, [u32::MAX, 1, 1, 1], 100, None)
        };
        let m = down.compare("slt", 50).unwrap();
        assert_eq!((m.lo[0], m.hi[0]), (51, u32::MAX));
        assert!(down.compare("sgt", 100).unwrap().empty());
        // Varying along two dimensions is not a box.
        let both = Lin {
            coef: [1, 1, 0, 0],
            ..Lin::splat(r2, s, 0, None)
        };
        assert_eq!(both.compare("slt", 5), None);
    }
}
