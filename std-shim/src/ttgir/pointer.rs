//! Loads and stores through pointers as simfa instructions.
//!
//! # Where a pointer tile lies
//!
//! A pointer tensor is affine in its indices ([`super::affine::Lin`]):
//! each of its dimensions steps by one of its tensor's strides (the
//! element size for the unit-stride dimension, `strides[k]` for the
//! others; a dimension that steps by none is an error). So it is a box of
//! the tensor the launch gives its pointer argument, at the origin its
//! byte offset decomposes into ([`place`]). Each distinct box shape of a
//! pointer argument is one tensor map, declared from CTA 0's run; its box
//! is no larger than 256 elements or the tensor along each dimension, and a
//! tile larger than that is several instructions.
//!
//! # What they become
//!
//! - **`cp.async` copies** (`async_copy_global_to_local`) are `ld.global`s
//!   by WarpGroup 0, completing on the mbarrier of their commit group: a
//!   ring of [`RING`] mbarriers (count 1), group `g` on barrier `g % RING`
//!   and phase `g / RING`. The first copy of a group expects its bytes as
//!   it goes; `async_commit_group` arrives; `async_wait {num = N}` waits, in
//!   every WarpGroup, for each group but the newest `N` not waited yet
//!   (the CTA-wide barrier Triton places after the wait is then implied).
//! - **Loads into registers** (`tt.load`) are the same, one group per
//!   load on a second ring, and each WarpGroup waits for a load where the
//!   interpreter sees its registers first read ([`super::interp::Effect::Use`]).
//! - **Stores from registers** (`tt.store`) are `st.global`s by
//!   WarpGroup 0.
//!
//! Like TMA copies in a kernel without warp specialisation, a load or store
//! is issued once per CTA (the SM's load/store unit it goes through is
//! shared by its WarpGroups, so the split among warps changes nothing the
//! model times). Masks: a load or store whose mask holds nowhere moves
//! nothing; otherwise the whole box is taken, and the part outside the
//! tensor moves nothing.
//!
//! A ring barrier is reused only after its previous group was waited for: a
//! kernel with more than [`RING`] groups in flight waits for the oldest.

use std::collections::{HashMap, VecDeque};

use simfa_core::{Op, TensorMap};

use super::interp::PtrTile;
use super::launch::{Launch, Tensor};

/// One `ld.global` or `st.global` of a pointer tile: tensor map,
/// coordinates (innermost first) and bytes per sector request.
pub type PtrOp = (u8, [i64; 5], u8);

/// Pushes the `ld.global`s `ops` completing on `bar` to `q`, through the
/// SM's L1 when `l1` says so.
pub fn ld_globals(ops: &[PtrOp], bar: u16, l1: bool, q: &mut VecDeque<Op>) {
    for &(map, coords, segment) in ops {
        q.push_back(Op::LdGlobal {
            map,
            bar,
            coords,
            segment,
            l1,
        });
    }
}

/// Whether a load of `tile` goes through the L1: a load into registers
/// (`ld.global`, cached at all levels by default) and a `cp.async` of
/// fewer than 16 bytes per thread (`cp.async.ca`; Triton makes 16-byte
/// ones `cp.async.cg`, which bypass the L1), unless the load asks for the
/// L2 only.
pub fn through_l1(tile: &PtrTile, into_registers: bool) -> bool {
    !tile.l2_only && (into_registers || tile.vector < 16)
}

/// mbarriers per ring.
pub const RING: u64 = 16;

/// Where a tile lies in a tensor: elements per dimension and the origin,
/// both innermost first.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Placement {
    /// Elements per tensor dimension.
    pub block: Vec<u32>,
    /// The first element's index per tensor dimension.
    pub origin: Vec<i64>,
}

/// Where pointer tile `tile` lies in tensor `t`.
pub fn place(t: &Tensor, tile: &PtrTile) -> Result<Placement, String> {
    let n = t.dims.len();
    if n == 0 {
        return Err("its tensor has no dims in the launch file".into());
    }
    if tile.elem != t.elem as u32 {
        return Err(format!(
            "it moves {}-byte elements and its tensor has {}-byte ones",
            tile.elem, t.elem
        ));
    }
    let lin = &tile.lin;
    let mut block = vec![1u32; n];
    for d in 0..lin.rank as usize {
        let (size, step) = (lin.shape[d], lin.coef[d]);
        if size <= 1 || step == 0 {
            continue;
        }
        match (0..n).find(|&k| t.stride(k) as i64 == step && block[k] == 1) {
            Some(k) => block[k] = size,
            None => {
                return Err(format!(
                    "its dimension {d} steps {step} bytes, which is no stride of its tensor ({} bytes per element, strides {:?})",
                    t.elem, t.strides
                ))
            }
        }
    }
    let mut origin = vec![0i64; n];
    let mut off = lin.base;
    for k in (0..n).rev() {
        let s = t.stride(k).max(1) as i64;
        origin[k] = off.div_euclid(s);
        off -= origin[k].saturating_mul(s);
    }
    Ok(Placement { block, origin })
}

/// The tensor map for `block` (innermost first) of tensor `t` of argument
/// `name`: its box no larger than 256 elements or the tensor per dimension.
pub fn map_for(name: &str, t: &Tensor, block: &[u32]) -> Result<TensorMap, String> {
    // A tensor narrower than a 16-byte run (a table of two i32) is read
    // as the run that holds it, as the scalar loads from it are.
    let run = (16 / t.elem.max(1) as u64).max(1);
    let widened;
    let t = match t.dims.first() {
        Some(&d) if d < run && t.dims.len() == 1 => {
            widened = Tensor {
                dims: vec![run],
                ..t.clone()
            };
            &widened
        }
        _ => t,
    };
    let boxdim: Vec<u32> = block
        .iter()
        .zip(&t.dims)
        .map(|(&b, &d)| b.min(256).min(u32::try_from(d).unwrap_or(u32::MAX)).max(1))
        .collect();
    if (boxdim[0] as u64 * t.elem as u64) % 16 != 0 {
        return Err(format!(
            "a tile {} bytes wide along its unit-stride dimension (simfa moves boxes of whole 16-byte runs)",
            boxdim[0] as u64 * t.elem as u64
        ));
    }
    let outer_first: Vec<u32> = boxdim.iter().rev().copied().collect();
    Launch::map(name, t, &outer_first)
}

/// A CTA role's loads in flight: commit groups and loads into registers.
#[derive(Debug, Default)]
pub struct Inflight {
    /// Groups committed.
    committed: u64,
    /// Groups every WarpGroup has waited for (the oldest `waited`).
    waited: u64,
    /// Whether the group after the committed ones has its barrier.
    open: bool,
    /// Loads into registers not waited for yet, oldest first.
    loads: VecDeque<u64>,
}

/// Barrier and parity of item `i` of a ring starting at barrier `base`.
fn slot(base: u16, i: u64) -> (u16, u8) {
    (base + (i % RING) as u16, ((i / RING) & 1) as u8)
}

/// Pushes `op` to every WarpGroup's queue.
pub fn all(out: &mut [VecDeque<Op>], op: Op) {
    for s in out.iter_mut() {
        s.push_back(op);
    }
}

/// The two rings of a role (first barrier of each), if it has them.
#[derive(Clone, Copy, Debug, Default)]
pub struct Rings {
    /// Commit groups of `cp.async` copies.
    pub groups: Option<u16>,
    /// Loads into registers.
    pub loads: Option<u16>,
}

impl Rings {
    /// The barrier of the open group, opened (after waiting for the group
    /// that used its barrier last, if none has) when it is not yet.
    fn group_bar(&self, st: &mut Inflight, out: &mut [VecDeque<Op>]) -> Result<u16, String> {
        let base = self
            .groups
            .ok_or("cp.async copies outside the kernel's own warps")?;
        let g = st.committed;
        if !st.open {
            while st.waited + RING <= g {
                let (bar, parity) = slot(base, st.waited);
                all(out, Op::MbarWait { bar, parity });
                st.waited += 1;
            }
            st.open = true;
        }
        Ok(slot(base, g).0)
    }

    /// A copy into shared memory (`regs: None`) or a load into registers
    /// of `bytes`, whose copies `ops` pushes for the barrier it is given.
    pub fn load(
        &self,
        st: &mut Inflight,
        regs: Option<u64>,
        bytes: u32,
        ops: impl FnOnce(u16, &mut VecDeque<Op>),
        out: &mut [VecDeque<Op>],
    ) -> Result<(), String> {
        let (bar, arrive) = match regs {
            None => (self.group_bar(st, out)?, false),
            Some(id) => {
                let base = self.loads.ok_or("loads outside the kernel's own warps")?;
                while let Some(&old) = st.loads.front() {
                    if old + RING > id {
                        break;
                    }
                    let (bar, parity) = slot(base, old);
                    all(out, Op::MbarWait { bar, parity });
                    st.loads.pop_front();
                }
                st.loads.push_back(id);
                (slot(base, id).0, true)
            }
        };
        out[0].push_back(Op::MbarExpectTx { bar, bytes });
        ops(bar, &mut out[0]);
        if arrive {
            out[0].push_back(Op::MbarArrive { bar, count: 1 });
        }
        Ok(())
    }

    /// `async_commit_group`.
    pub fn commit(&self, st: &mut Inflight, out: &mut [VecDeque<Op>]) -> Result<(), String> {
        let bar = self.group_bar(st, out)?;
        out[0].push_back(Op::MbarArrive { bar, count: 1 });
        st.committed += 1;
        st.open = false;
        Ok(())
    }

    /// `async_wait` until at most `pendings` groups are in flight.
    pub fn wait(&self, st: &mut Inflight, pendings: u32, out: &mut [VecDeque<Op>]) {
        let Some(base) = self.groups else { return };
        let target = st.committed.saturating_sub(pendings as u64);
        while st.waited < target {
            let (bar, parity) = slot(base, st.waited);
            all(out, Op::MbarWait { bar, parity });
            st.waited += 1;
        }
    }

    /// The first read of load `id`'s registers.
    pub fn use_load(&self, st: &mut Inflight, id: u64, out: &mut [VecDeque<Op>]) {
        let (Some(base), Some(at)) = (self.loads, st.loads.iter().position(|&l| l == id)) else {
            return;
        };
        st.loads.remove(at);
        let (bar, parity) = slot(base, id);
        all(out, Op::MbarWait { bar, parity });
    }
}

/// Tensor maps of pointer tiles, by argument and block (innermost first).
pub type PtrMaps = HashMap<(u16, Vec<u32>), u8>;

#[cfg(test)]
mod tests {
    use super::super::affine::{shape_of, Lin};
    use super::*;

    fn tensor() -> Tensor {
        Tensor {
            base: 0x1000_0000,
            elem: 2,
            dims: vec![4096, 1024],
            strides: vec![8192],
            values: Vec::new(),
        }
    }

    fn tile(shape: &[u64], coef: [i64; 4], base: i64) -> PtrTile {
        let (rank, shape) = shape_of(shape).unwrap();
        PtrTile {
            lin: Lin {
                rank,
                shape,
                base,
                coef,
                ptr: Some(0),
            },
            elem: 2,
            segment: 32,
            vector: 16,
            l2_only: false,
        }
    }

    #[test]
    fn loads_into_registers_and_narrow_copies_go_through_the_l1() {
        let t = |vector| PtrTile {
            vector,
            ..tile(&[64], [2, 0, 0, 0], 0)
        };
        assert!(through_l1(&t(16), true));
        assert!(through_l1(&t(4), true));
        // cp.async: 16 bytes a thread is `.cg`, fewer is `.ca`.
        assert!(!through_l1(&t(16), false));
        assert!(through_l1(&t(8), false));
        // `cache_modifier=".cg"` keeps a load out of the L1.
        let cg = PtrTile {
            l2_only: true,
            ..t(4)
        };
        assert!(!through_l1(&cg, true));
    }

    #[test]
    fn a_row_major_tile_is_a_box_at_its_origin() {
        // A 128x64 tile at row 256, column 192 of a 1024x4096 fp16 matrix.
        let t = tensor();
        let p = place(&t, &tile(&[128, 64], [8192, 2, 0, 0], 256 * 8192 + 192 * 2)).unwrap();
        assert_eq!(p.block, vec![64, 128]);
        assert_eq!(p.origin, vec![192, 256]);
        // The same tile read column-major (its dimensions swapped).
        let p = place(&t, &tile(&[64, 128], [2, 8192, 0, 0], 0)).unwrap();
        assert_eq!(p.block, vec![64, 128]);
        // A step that is no stride is an error naming it.
        let e = place(&t, &tile(&[128, 64], [8000, 2, 0, 0], 0)).unwrap_err();
        assert!(e.contains("steps 8000 bytes"), "{e}");
        let m = map_for("a", &t, &[64, 512]).unwrap();
        assert_eq!(&m.boxdim[..2], &[64, 256]);
        assert!(map_for("a", &t, &[4, 16]).is_err());
    }

    #[test]
    fn groups_wait_in_order_and_reuse_their_barriers_after_a_wait() {
        let rings = Rings {
            groups: Some(10),
            loads: Some(40),
        };
        let mut st = Inflight::default();
        let mut out = vec![VecDeque::new(), VecDeque::new()];
        for _ in 0..3 {
            rings
                .load(
                    &mut st,
                    None,
                    128,
                    |b, q| ld_globals(&[(0, [0; 5], 32)], b, false, q),
                    &mut out,
                )
                .unwrap();
            rings.commit(&mut st, &mut out).unwrap();
        }
        rings.wait(&mut st, 1, &mut out);
        let waits: Vec<Op> = out[1].iter().copied().collect();
        assert_eq!(
            waits,
            vec![
                Op::MbarWait { bar: 10, parity: 0 },
                Op::MbarWait { bar: 11, parity: 0 }
            ]
        );
        // WarpGroup 0 expects, copies and arrives on each group's barrier.
        assert_eq!(
            out[0][0],
            Op::MbarExpectTx {
                bar: 10,
                bytes: 128
            }
        );
        assert!(matches!(out[0][1], Op::LdGlobal { bar: 10, .. }));
        assert_eq!(out[0][2], Op::MbarArrive { bar: 10, count: 1 });
        // Group RING + 2 reuses group 2's barrier, so it waits for it first.
        for _ in 3..RING + 2 {
            rings.commit(&mut st, &mut out).unwrap();
        }
        out[1].clear();
        rings.commit(&mut st, &mut out).unwrap();
        assert_eq!(
            out[1].iter().copied().collect::<Vec<_>>(),
            vec![Op::MbarWait { bar: 12, parity: 0 }]
        );
        // A load into registers is waited for at its first use only.
        out[1].clear();
        rings
            .load(
                &mut st,
                Some(0),
                64,
                |b, q| ld_globals(&[(0, [0; 5], 32)], b, true, q),
                &mut out,
            )
            .unwrap();
        rings.use_load(&mut st, 0, &mut out);
        rings.use_load(&mut st, 0, &mut out);
        assert_eq!(
            out[1].iter().copied().collect::<Vec<_>>(),
            vec![Op::MbarWait { bar: 40, parity: 0 }]
        );
    }
}
