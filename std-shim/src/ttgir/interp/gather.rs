//! Gathers and scatters: loads and stores through pointer tensors made
//! from indices the kernel loaded (`table + rows[:, None] * D + cols`,
//! with `rows = tl.load(idx + offs)`: an embedding lookup, a MoE token
//! gather, a paged cache's blocks).
//!
//! A 1-D integer tensor loaded into registers keeps where it was read
//! ([`Gather::loaded`]); shaping, a sum with an affine tensor, a product
//! by a uniform one and `addptr` keep it a [`Gather`]. A load or store
//! through one moves one tile per index along the gathered dimension, at
//! the row the index names: one `ld.global` or `st.global` each, issued
//! after the indices have arrived.
//!
//! The index values come from the launch file's `values` for the index
//! tensor when it gives them. Otherwise each index is taken to be its own
//! position in the index tensor (the identity permutation: row `i` for
//! the `i`-th index), wrapped around the rows the gathered tensor holds,
//! so that every row is read once, at the addresses a sorted gather would
//! read (a MoE kernel's block `b` uses expert `b` modulo the experts); a
//! launch that gives the real indices gets their locality.

use super::super::affine::{Gather, Lin, MAX_RANK};
use super::super::error::TtgirError;
use super::super::tree::Node;
use super::super::value::Value;
use super::{Effect, EffectSink, Interp};

/// The loaded scalar `u` ([`Value::Unknown`] with its linear form) as
/// the offsets of a gather of one tile (rank 0).
pub(super) fn scalar(u: &Value) -> Option<Gather> {
    match *u {
        Value::Unknown {
            load,
            from,
            at,
            linear: Some((scale, add)),
        } => Some(Gather {
            lin: Lin::splat(0, [1; MAX_RANK], add, None),
            dim: Gather::WHOLE,
            scale,
            div: 1,
            load,
            from: (from, at.0, at.1 as i64),
        }),
        _ => None,
    }
}

/// Most rows one gather may move (a tile's rows; more is a hostile type).
pub const MAX_ROWS: u32 = 1 << 16;

/// `addptr` of pointer tensor `p` and gathered offsets `g` of `elem`-byte
/// elements: the gathered addresses.
pub(super) fn addptr(p: &Lin, g: &Gather, elem: i64) -> Option<Gather> {
    Some(Gather {
        lin: Lin::binary("addi", p, &g.lin.scaled(elem))?,
        scale: g.scale.wrapping_mul(elem),
        ..*g
    })
}

impl<'m, 'a> Interp<'m, 'a> {
    /// `tt.load`, `tt.store` or `async_copy_global_to_local` through the
    /// gathered addresses `g`.
    pub(super) fn gather(
        &mut self,
        n: &'m Node<'a>,
        op: &str,
        g: Gather,
        sink: &mut impl EffectSink<'m>,
    ) -> Result<(), TtgirError> {
        let v = &n.view;
        if g.lin.ptr.is_none() {
            return Err(self.fail(
                n,
                "the gathered offsets are not added to a pointer argument with a [tensors] entry",
            ));
        }
        let ty = v.ins.first().copied().unwrap_or("");
        let (arg, first, step) = g.from;
        let rows = g.rows();
        if rows > MAX_ROWS {
            return Err(self.fail(
                n,
                format!("a gather of {rows} rows (at most {MAX_ROWS} are followed)"),
            ));
        }
        // How many scaled indices the gathered tensor holds: stand-in
        // indices wrap around it.
        let span = g
            .lin
            .ptr
            .and_then(|p| self.global.region(p))
            .map_or(0, |r| r.bytes() as i64 / g.scale.abs().max(1));
        let mut tiles = Vec::with_capacity(rows as usize);
        for r in 0..rows {
            let at = first.wrapping_add(step.wrapping_mul(r as i64));
            let idx = match self.global.value(arg, at).map_err(|w| self.fail(n, w))? {
                Some(x) => x,
                // The identity permutation: the index's own position,
                // divided as the kernel divides it, inside the tensor.
                None => {
                    let q = (at / step.max(1)).div_euclid(g.div.max(1));
                    let q = if span > 0 { q.rem_euclid(span) } else { q };
                    q.wrapping_mul(g.div.max(1))
                }
            };
            tiles.push(self.tile(n, g.row(r, idx), ty)?);
        }
        let result = match op {
            "store" => {
                self.emit(sink, n, Effect::Scatter { tiles });
                None
            }
            "load" => {
                let load = self.loads;
                self.loads += 1;
                self.emit(
                    sink,
                    n,
                    Effect::Gather {
                        tiles,
                        regs: Some(load),
                    },
                );
                Some(Value::Loaded(load))
            }
            _ => {
                self.emit(sink, n, Effect::Gather { tiles, regs: None });
                None
            }
        };
        self.define(v, &[result.unwrap_or(Value::Opaque)]);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::super::super::affine::{Gather, Lin};

    /// `rows` (64 indices at byte 256 of argument 0, i32) times 128, as a
    /// column, plus `cols` (0..128) as a row, added to the fp16 table of
    /// argument 1: row `r`'s tile is the 128 elements at `idx * 256` bytes.
    #[test]
    fn a_gather_row_is_its_index_times_the_row_pitch() {
        let idx = Lin {
            coef: [4, 0, 0, 0],
            ..Lin::splat(1, [64, 1, 1, 1], 256, Some(0))
        };
        let g = Gather::loaded(7, &idx).unwrap();
        let rows = g.expand(1).unwrap();
        let scaled = rows
            .with("muli", &Lin::splat(2, [64, 1, 1, 1], 128, None), false)
            .unwrap();
        let cols = Lin {
            coef: [0, 1, 0, 0],
            ..Lin::splat(2, [1, 128, 1, 1], 0, None)
        }
        .broadcast(2, [64, 128, 1, 1])
        .unwrap();
        let offs = scaled
            .broadcast(2, [64, 128, 1, 1])
            .unwrap()
            .with("addi", &cols, false)
            .unwrap();
        let table = Lin::splat(2, [64, 128, 1, 1], 0, Some(1));
        let p = super::addptr(&table, &offs, 2).unwrap();
        assert_eq!((p.dim, p.scale, p.load, p.from), (0, 256, 7, (0, 256, 4)));
        let r = p.row(5, 1000);
        // `rows // 2` before the product: index 1000 is row 500.
        let halves = g
            .with("divsi", &Lin::splat(1, [64, 1, 1, 1], 2, None), false)
            .unwrap();
        assert_eq!(halves.div, 2);
        assert_eq!(halves.row(0, 1001).base, 500);
        assert_eq!(r.shape[..2], [1, 128]);
        assert_eq!(r.coef[..2], [0, 2]);
        assert_eq!(r.base, 1000 * 256);
        assert_eq!(r.ptr, Some(1));
        // A product by a tensor that varies is no gather.
        let varying = Lin {
            coef: [1, 0, 0, 0],
            ..Lin::splat(2, [64, 1, 1, 1], 0, None)
        };
        assert!(rows.with("muli", &varying, false).is_none());
    }
}
