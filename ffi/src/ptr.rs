//! Checked conversions from C pointers to Rust references and slices.
//!
//! Every check that can be made is made here: null, alignment, and a
//! length that fits `isize`. What cannot be checked — that a pointer really
//! points at `len` live bytes the caller does not use concurrently — is
//! the caller's contract, written on each entry point.

use core::mem::MaybeUninit;

use crate::SimfaStatus;

/// `&mut T` for an output pointer.
///
/// # Safety
///
/// A non-null, aligned `p` must point at memory valid for writes of a `T`
/// that nothing else accesses during the call. The target may be
/// uninitialised: it is only written through the returned `MaybeUninit`.
pub(crate) unsafe fn out<'a, T>(p: *mut T) -> Result<&'a mut MaybeUninit<T>, SimfaStatus> {
    if p.is_null() {
        return Err(SimfaStatus::NullPointer);
    }
    if !p.is_aligned() {
        return Err(SimfaStatus::BadAlignment);
    }
    // SAFETY: non-null and aligned (checked); valid for writes and
    // unaliased by the caller's contract; `MaybeUninit` makes no claim
    // about the current contents.
    Ok(unsafe { &mut *p.cast::<MaybeUninit<T>>() })
}

/// Writes `v` through an output pointer.
///
/// # Safety
///
/// As [`out`].
pub(crate) unsafe fn put<T>(p: *mut T, v: T) -> Result<(), SimfaStatus> {
    // SAFETY: forwarded contract.
    unsafe { out(p) }?.write(v);
    Ok(())
}

/// `&T` for an input pointer.
///
/// # Safety
///
/// A non-null, aligned `p` must point at an initialised `T` that nothing
/// writes during the call.
pub(crate) unsafe fn input<'a, T>(p: *const T) -> Result<&'a T, SimfaStatus> {
    if p.is_null() {
        return Err(SimfaStatus::NullPointer);
    }
    if !p.is_aligned() {
        return Err(SimfaStatus::BadAlignment);
    }
    // SAFETY: checked non-null and aligned; initialised and not written
    // concurrently by the caller's contract.
    Ok(unsafe { &*p })
}

/// An input byte slice. A null pointer is accepted only with `len == 0`.
///
/// # Safety
///
/// A non-null `p` must point at `len` initialised bytes that nothing
/// writes during the call.
pub(crate) unsafe fn bytes<'a>(p: *const u8, len: usize) -> Result<&'a [u8], SimfaStatus> {
    if p.is_null() {
        return if len == 0 {
            Ok(&[])
        } else {
            Err(SimfaStatus::NullPointer)
        };
    }
    if len > isize::MAX as usize {
        return Err(SimfaStatus::BadArgument);
    }
    // SAFETY: non-null, `u8` needs no alignment, length within isize; the
    // bytes are live and unwritten by the caller's contract.
    Ok(unsafe { core::slice::from_raw_parts(p, len) })
}

/// An output byte slice. A null pointer is accepted only with `len == 0`
/// (the "how big must it be?" query).
///
/// # Safety
///
/// A non-null `p` must point at `len` bytes valid for writes that nothing
/// else accesses during the call (they need not be initialised: callers
/// only write them, and [`bytes_mut`] zeroes nothing, so the slice is
/// created over memory the caller promised is writable; Rust treats `u8`
/// slices of C memory as initialised, which C callers' buffers are).
pub(crate) unsafe fn bytes_mut<'a>(p: *mut u8, len: usize) -> Result<&'a mut [u8], SimfaStatus> {
    if p.is_null() {
        return if len == 0 {
            Ok(&mut [])
        } else {
            Err(SimfaStatus::NullPointer)
        };
    }
    if len > isize::MAX as usize {
        return Err(SimfaStatus::BadArgument);
    }
    // SAFETY: non-null, `u8` needs no alignment, length within isize;
    // writable and unaliased by the caller's contract.
    Ok(unsafe { core::slice::from_raw_parts_mut(p, len) })
}
