//! The caller-provided arena every table of a simulation is carved from.
//!
//! The simulator never allocates. Its caller asks how many bytes a
//! (configuration, kernel) pair needs ([`crate::Simulator::arena_size`]), hands
//! in one `&mut [u8]` of at least that size, and the simulator carves all of
//! its tables out of it once, at construction. The size is computed by the
//! same sequence of carvings run on a [`Layout`], which adds the worst-case
//! alignment padding of every table, so the figure does not depend on where
//! the caller's buffer happens to start.

use core::mem::{align_of, size_of};

use crate::error::{BuildError, Capacity};

/// Counts the bytes a sequence of typed tables needs, padding included.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Layout {
    bytes: usize,
}

impl Layout {
    /// An empty layout.
    pub const fn new() -> Self {
        Layout { bytes: 0 }
    }

    /// Accounts for a table of `n` values of `T`.
    pub fn add<T>(&mut self, n: usize) -> Result<(), BuildError> {
        let table = size_of::<T>()
            .checked_mul(n)
            .and_then(|b| b.checked_add(align_of::<T>() - 1))
            .ok_or(BuildError::TooLarge)?;
        self.bytes = self.bytes.checked_add(table).ok_or(BuildError::TooLarge)?;
        Ok(())
    }

    /// The total number of bytes.
    pub const fn bytes(&self) -> usize {
        self.bytes
    }
}

/// A bump allocator over a borrowed byte buffer that hands out disjoint,
/// initialised, correctly aligned slices of `Copy` values.
#[derive(Debug)]
pub struct Arena<'a> {
    rest: &'a mut [u8],
    used: usize,
}

impl<'a> Arena<'a> {
    /// Wraps a caller-provided buffer.
    pub fn new(buf: &'a mut [u8]) -> Self {
        Arena { rest: buf, used: 0 }
    }

    /// Bytes handed out so far, padding included.
    pub const fn used(&self) -> usize {
        self.used
    }

    /// Bytes still available.
    pub fn remaining(&self) -> usize {
        self.rest.len()
    }

    /// Carves a slice of `n` copies of `init`. Fails with
    /// [`BuildError::ArenaTooSmall`] naming `what` when the buffer is exhausted.
    pub fn alloc<T: Copy>(
        &mut self,
        n: usize,
        init: T,
        what: Capacity,
    ) -> Result<&'a mut [T], BuildError> {
        let buf = core::mem::take(&mut self.rest);
        let pad = buf.as_ptr().align_offset(align_of::<T>());
        let need = size_of::<T>()
            .checked_mul(n)
            .and_then(|b| b.checked_add(pad))
            .filter(|&b| b <= buf.len());
        let Some(need) = need else {
            let available = buf.len();
            self.rest = buf;
            return Err(BuildError::ArenaTooSmall {
                table: what,
                available,
            });
        };
        let (head, tail) = buf.split_at_mut(need);
        self.rest = tail;
        self.used += need;
        let ptr = head[pad..].as_mut_ptr().cast::<T>();
        // SAFETY: `ptr` is aligned for `T` (align_offset above), points to
        // `n * size_of::<T>()` bytes exclusively borrowed for `'a` (split off
        // `head`), and every element is written before the slice is formed.
        // `T: Copy` has no destructor, so leaking the values is sound.
        unsafe {
            for i in 0..n {
                ptr.add(i).write(init);
            }
            Ok(core::slice::from_raw_parts_mut(ptr, n))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn layout_covers_any_start_alignment() {
        let mut l = Layout::new();
        l.add::<u8>(3).unwrap();
        l.add::<u64>(5).unwrap();
        l.add::<u32>(7).unwrap();
        for start in 0..8 {
            let mut buf = [0u8; 256];
            let mut a = Arena::new(&mut buf[start..start + l.bytes()]);
            a.alloc(3, 1u8, Capacity::Threads).unwrap();
            let x = a.alloc(5, 2u64, Capacity::Threads).unwrap();
            assert_eq!(x.as_ptr() as usize % 8, 0);
            a.alloc(7, 3u32, Capacity::Threads).unwrap();
        }
    }

    #[test]
    fn slices_are_disjoint_and_initialised() {
        let mut buf = [0u8; 128];
        let mut a = Arena::new(&mut buf);
        let x = a.alloc(4, 7u32, Capacity::Threads).unwrap();
        let y = a.alloc(4, 9u32, Capacity::Threads).unwrap();
        x[0] = 1;
        assert_eq!(y, &[9, 9, 9, 9]);
        assert_eq!(&x[1..], &[7, 7, 7]);
        let xr = x.as_ptr_range();
        let yr = y.as_ptr_range();
        assert!(xr.end <= yr.start);
    }

    #[test]
    fn exhaustion_is_a_typed_error() {
        let mut buf = [0u8; 16];
        let mut a = Arena::new(&mut buf);
        let e = a.alloc(100, 0u64, Capacity::EventQueue).unwrap_err();
        assert!(matches!(
            e,
            BuildError::ArenaTooSmall {
                table: Capacity::EventQueue,
                ..
            }
        ));
        // The arena is still usable after a failure.
        assert!(a.alloc(1, 0u8, Capacity::EventQueue).is_ok());
    }

    /// Over-aligned element type (size 32, alignment 32).
    #[derive(Clone, Copy, Debug, PartialEq)]
    #[repr(align(32))]
    struct A32([u8; 5]);

    /// Odd-sized, byte-aligned element type.
    #[derive(Clone, Copy, Debug, PartialEq)]
    struct Tri([u8; 3]);

    /// One table request of a random carving sequence: element kind and count.
    #[derive(Clone, Copy, Debug)]
    enum Kind {
        U8,
        U16,
        U32,
        U64,
        U128,
        A32,
        Tri,
        Unit,
    }

    /// A carved region: start address, byte length, alignment asked for,
    /// and a check that it still holds the value it was initialised with.
    struct Region<'a> {
        start: usize,
        bytes: usize,
        align: usize,
        intact: Box<dyn Fn() -> bool + 'a>,
    }

    fn take<'a, T: Copy + PartialEq + 'a>(
        a: &mut Arena<'a>,
        n: usize,
        init: T,
    ) -> Result<Region<'a>, BuildError> {
        let s: &'a [T] = a.alloc(n, init, Capacity::Threads)?;
        Ok(Region {
            start: s.as_ptr() as usize,
            bytes: core::mem::size_of_val(s),
            align: align_of::<T>(),
            intact: Box::new(move || s.len() == n && s.iter().all(|x| *x == init)),
        })
    }

    /// Carves request `(kind, n)` with a fill value derived from `tag`.
    fn carve<'a>(
        a: &mut Arena<'a>,
        kind: Kind,
        n: usize,
        tag: u8,
    ) -> Result<Region<'a>, BuildError> {
        let t = tag as u128 * 0x0101_0101_0101_0101_0101_0101_0101_0101;
        match kind {
            Kind::U8 => take(a, n, tag),
            Kind::U16 => take(a, n, t as u16),
            Kind::U32 => take(a, n, t as u32),
            Kind::U64 => take(a, n, t as u64),
            Kind::U128 => take(a, n, t),
            Kind::A32 => take(a, n, A32([tag; 5])),
            Kind::Tri => take(a, n, Tri([tag, !tag, tag])),
            Kind::Unit => take(a, n, ()),
        }
    }

    fn layout_of(seq: &[(Kind, usize)]) -> Layout {
        let mut l = Layout::new();
        for &(kind, n) in seq {
            match kind {
                Kind::U8 => l.add::<u8>(n),
                Kind::U16 => l.add::<u16>(n),
                Kind::U32 => l.add::<u32>(n),
                Kind::U64 => l.add::<u64>(n),
                Kind::U128 => l.add::<u128>(n),
                Kind::A32 => l.add::<A32>(n),
                Kind::Tri => l.add::<Tri>(n),
                Kind::Unit => l.add::<()>(n),
            }
            .unwrap();
        }
        l
    }

    fn any_kind() -> impl Strategy<Value = Kind> {
        prop_oneof![
            Just(Kind::U8),
            Just(Kind::U16),
            Just(Kind::U32),
            Just(Kind::U64),
            Just(Kind::U128),
            Just(Kind::A32),
            Just(Kind::Tri),
            Just(Kind::Unit),
        ]
    }

    fn any_seq() -> impl Strategy<Value = ::std::vec::Vec<(Kind, usize)>> {
        proptest::collection::vec(
            (any_kind(), prop_oneof![Just(0usize), 1usize..4, 0usize..40]),
            0..12,
        )
    }

    /// The regions, bytes used and bytes left of a carving sequence, or the
    /// index, error and bytes available of its first failing request.
    type Carved<'a> =
        Result<(::std::vec::Vec<Region<'a>>, usize, usize), (usize, BuildError, usize)>;

    /// Carves `seq` from `buf[start..start + len]`; `Ok` with the regions and
    /// bytes used, or the index of the first failing request and its error.
    fn carve_all<'a>(buf: &'a mut [u8], seq: &[(Kind, usize)]) -> Carved<'a> {
        let mut a = Arena::new(buf);
        let mut out = ::std::vec::Vec::new();
        for (i, &(kind, n)) in seq.iter().enumerate() {
            let before = a.remaining();
            match carve(&mut a, kind, n, i as u8 + 1) {
                Ok(r) => out.push(r),
                Err(e) => {
                    assert_eq!(a.remaining(), before, "a failed carving consumed bytes");
                    return Err((i, e, before));
                }
            }
        }
        Ok((out, a.used(), a.remaining()))
    }

    proptest! {
        /// Random carving sequences from a buffer of exactly the size the
        /// layout computes, at every start alignment: every request succeeds,
        /// every region lies in the buffer, is aligned as asked, keeps its
        /// initial value (no later carving overlapped it) and follows the
        /// previous one with less padding than its alignment; the layout
        /// exceeds the bytes used by exactly the alignment slack it reserved.
        /// A buffer of exactly the bytes used at that start also suffices and
        /// one byte less fails with a typed error.
        #[test]
        fn carvings_are_disjoint_aligned_and_fit_the_layout(seq in any_seq(), start in 0usize..64) {
            let l = layout_of(&seq);
            let mut storage = ::std::vec![0u8; l.bytes() + 64];
            let buf = &mut storage[start..start + l.bytes()];
            let lo = buf.as_ptr() as usize;
            let hi = lo + buf.len();
            let (regions, used, remaining) = carve_all(buf, &seq)
                .map_err(|(i, e, _)| TestCaseError::fail(::std::format!("request {i} failed: {e:?}")))?;
            prop_assert_eq!(used + remaining, l.bytes());
            let mut cursor = lo;
            let mut slack = 0usize;
            for (i, r) in regions.iter().enumerate() {
                prop_assert!(r.start >= lo && r.start + r.bytes <= hi, "region {} outside the buffer", i);
                prop_assert_eq!(r.start % r.align, 0, "region {} misaligned", i);
                prop_assert!(r.start >= cursor, "region {} overlaps its predecessor", i);
                let pad = r.start - cursor;
                prop_assert!(pad < r.align, "region {} padded by {} for alignment {}", i, pad, r.align);
                slack += r.align - 1 - pad;
                cursor = r.start + r.bytes;
                prop_assert!((r.intact)(), "region {} was overwritten", i);
            }
            prop_assert_eq!(cursor - lo, used);
            prop_assert_eq!(l.bytes() - used, slack);
            for (i, a) in regions.iter().enumerate() {
                for b in &regions[..i] {
                    let disjoint = a.bytes == 0 || b.bytes == 0
                        || a.start >= b.start + b.bytes || b.start >= a.start + a.bytes;
                    prop_assert!(disjoint, "regions overlap");
                }
            }
            drop(regions);

            // The same start with exactly the bytes used: same regions fit.
            let buf = &mut storage[start..start + used];
            prop_assert!(carve_all(buf, &seq).is_ok());
            if used > 0 {
                let buf = &mut storage[start..start + used - 1];
                match carve_all(buf, &seq) {
                    Ok(_) => return Err(TestCaseError::fail("one byte short succeeded")),
                    Err((_, e, _)) => prop_assert!(
                        matches!(e, BuildError::ArenaTooSmall { table: Capacity::Threads, .. }),
                        "{:?}", e
                    ),
                }
            }
        }

        /// With only byte-aligned tables the layout reserves no slack, so it
        /// is exact: its size fits and one byte less does not.
        #[test]
        fn byte_aligned_layouts_are_exact(
            seq in proptest::collection::vec(
                (prop_oneof![Just(Kind::U8), Just(Kind::Tri), Just(Kind::Unit)], 0usize..40),
                0..12,
            )
        ) {
            let l = layout_of(&seq);
            let mut storage = ::std::vec![0u8; l.bytes()];
            prop_assert!(carve_all(&mut storage, &seq).is_ok());
            if l.bytes() > 0 {
                prop_assert!(carve_all(&mut storage[1..], &seq).is_err());
            }
        }
    }
}
