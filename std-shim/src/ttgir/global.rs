//! Global memory as a launch describes it: the tensors the kernel's
//! pointer arguments point into, the buffers it reaches only through
//! pointers it loads from memory (a grouped GEMM's table of matrices), and
//! the contents the launch gives some of them.
//!
//! A pointer is named by a *pointer id*: an argument's position, or
//! [`BUFFER_ID`] plus the buffer's place in the launch's `[buffers]`
//! (sorted by name). An address maps back to the one tensor or buffer that
//! holds it ([`Global::find`]), so an integer loaded from memory and
//! turned into a pointer (`tt.int_to_ptr`) lands in the tensor it points
//! into.
//!
//! Contents (`values = [...]`) are what the memory holds for the whole
//! run: the kernel's own stores and atomics do not change them. A load
//! from a tensor without them gives a value the schedule must not depend
//! on.

use super::launch::{Launch, Tensor};
use super::tree::Func;
use super::value::Value;

/// The pointer id of the first of the launch's `[buffers]`.
pub const BUFFER_ID: u16 = 0x8000;

/// One tensor or buffer of the launch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Region {
    /// Its pointer id.
    pub id: u16,
    /// Its name (the argument's, without `%`, or the buffer's).
    pub name: String,
    /// The tensor: base, element size, shape and contents.
    pub tensor: Tensor,
}

impl Region {
    /// One past its last byte.
    /// Bytes of the tensor or buffer.
    pub fn bytes(&self) -> u64 {
        self.end() - self.tensor.base
    }

    fn end(&self) -> u64 {
        let t = &self.tensor;
        let shaped = match t.dims.len() {
            0 => 0,
            r => t.stride(r - 1).saturating_mul(t.dims[r - 1]),
        };
        let given = (t.values.len() as u64).saturating_mul(t.elem as u64);
        t.base.saturating_add(shaped.max(given).max(t.elem as u64))
    }
}

/// The tensors and buffers of a launch, by pointer id.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Global {
    regions: Vec<Region>,
}

impl Global {
    /// The memory `launch` gives kernel `f`, whose arguments bound to
    /// `args` ([`Launch::bind`]).
    pub fn new(launch: &Launch, f: &Func<'_>, args: &[Value]) -> Global {
        let mut regions = Vec::new();
        for (i, v) in args.iter().enumerate() {
            if let Value::Ptr { arg, .. } = v {
                let (name, _) = f.args[i];
                if let Some(t) = launch.tensor(name, i) {
                    regions.push(Region {
                        id: *arg,
                        name: name.trim_start_matches('%').to_string(),
                        tensor: t.clone(),
                    });
                }
            }
        }
        for (i, (name, t)) in launch.buffers.iter().enumerate() {
            regions.push(Region {
                id: BUFFER_ID + i as u16,
                name: name.clone(),
                tensor: t.clone(),
            });
        }
        Global { regions }
    }

    /// Whether the launch has buffers: memory the kernel reaches through
    /// pointers it loads, so that which tensors a CTA touches depends on
    /// the CTA.
    pub fn has_buffers(&self) -> bool {
        self.regions.iter().any(|r| r.id >= BUFFER_ID)
    }

    /// The tensor or buffer of pointer id `id`.
    pub fn region(&self, id: u16) -> Option<&Region> {
        self.regions.iter().find(|r| r.id == id)
    }

    /// Every tensor and buffer.
    pub fn regions(&self) -> &[Region] {
        &self.regions
    }

    /// The global address of byte offset `off` into pointer id `id`'s
    /// tensor or buffer (the inverse of [`Global::find`]).
    pub fn address(&self, id: u16, off: i64) -> Option<u64> {
        self.region(id)
            .map(|r| r.tensor.base.wrapping_add(off as u64))
    }

    /// The pointer to global address `addr`: the tensor or buffer that
    /// holds it and the offset into it.
    pub fn find(&self, addr: u64) -> Option<Value> {
        self.regions
            .iter()
            .find(|r| r.tensor.base <= addr && addr < r.end())
            .map(|r| Value::Ptr {
                arg: r.id,
                off: (addr - r.tensor.base) as i64,
            })
    }

    /// What the launch says pointer id `id` holds at byte offset `off`
    /// (an element of the tensor's own size), if it gives its contents.
    pub fn value(&self, id: u16, off: i64) -> Result<Option<i64>, String> {
        let Some(r) = self.region(id) else {
            return Ok(None);
        };
        let t = &r.tensor;
        if t.values.is_empty() {
            return Ok(None);
        }
        let elem = t.elem as i64;
        if off < 0 || off % elem != 0 {
            return Err(format!(
                "a load at byte {off} of `{}`, not an element of its {elem}-byte values",
                r.name
            ));
        }
        match t.values.get((off / elem) as usize) {
            Some(&v) => Ok(Some(v)),
            None => Err(format!(
                "a load of element {} of `{}`, which gives {} values",
                off / elem,
                r.name,
                t.values.len()
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ttgir::tree::parse;

    #[test]
    fn addresses_map_back_to_their_tensor_and_values_are_read_by_element() {
        let m = parse(
            "k.mlir",
            "tt.func public @k(%t: !tt.ptr<i64>, %s: !tt.ptr<i32>) {\n  tt.return\n}\n",
        )
        .unwrap();
        let f = m.func(None).unwrap();
        let l = Launch::parse(
            "l.toml",
            "grid = [1, 1, 1]\n[tensors.t]\nbase = 0x1000\nelem = 8\nvalues = [0x20000, 0x30000]\n\
             [tensors.s]\nbase = 0x2000\nelem = 4\ndims = [3]\nvalues = [7, -1, 9]\n\
             [buffers.a]\nbase = 0x20000\nelem = 2\ndims = [64, 64]\n\
             [buffers.b]\nbase = 0x30000\nelem = 2\ndims = [64]\n",
        )
        .unwrap();
        let args = l.bind("l.toml", f).unwrap();
        let g = Global::new(&l, f, &args);
        assert!(g.has_buffers());
        assert_eq!(
            g.find(0x20000 + 8190),
            Some(Value::Ptr {
                arg: BUFFER_ID,
                off: 8190
            })
        );
        assert_eq!(
            g.find(0x20000 + 8192),
            None,
            "64 x 64 halves end at 8192 bytes"
        );
        assert_eq!(
            g.find(0x30002),
            Some(Value::Ptr {
                arg: BUFFER_ID + 1,
                off: 2
            })
        );
        assert_eq!(g.find(0x1008), Some(Value::Ptr { arg: 0, off: 8 }));
        assert_eq!(g.value(0, 8), Ok(Some(0x30000)));
        assert_eq!(g.value(1, 4), Ok(Some(-1)));
        assert!(g.value(1, 12).unwrap_err().contains("gives 3 values"));
        assert!(g.value(1, 2).unwrap_err().contains("not an element"));
        assert_eq!(g.value(BUFFER_ID, 0), Ok(None), "no contents given");
        assert_eq!(g.region(BUFFER_ID + 1).map(|r| r.name.as_str()), Some("b"));
    }
}
