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
}
