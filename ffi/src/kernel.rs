//! The sample kernels in the binary kernel encoding.

use postcard::ser_flavors::Flavor;
use simfa_core::{encode, samples, Kernel};

use crate::{guard, ptr, SimfaStatus};

/// A postcard flavor that only counts bytes.
struct Count(usize);

impl Flavor for Count {
    type Output = usize;

    fn try_push(&mut self, _: u8) -> postcard::Result<()> {
        self.0 += 1;
        Ok(())
    }

    fn finalize(self) -> postcard::Result<usize> {
        Ok(self.0)
    }
}

/// Bytes of `k` in the binary kernel encoding.
pub(crate) fn encoded_len(k: &Kernel) -> usize {
    encode::HEADER_LEN + postcard::serialize_with_flavor(k, Count(0)).unwrap_or(usize::MAX / 2)
}

/// The number of sample kernels (`core::samples::SAMPLES`).
#[no_mangle]
pub extern "C" fn simfa_sample_count() -> u32 {
    samples::SAMPLES as u32
}

/// Writes sample `index`'s kernel, binary-encoded, into `buf` (`len`
/// bytes) and its length into `*written`. With a buffer too small (or
/// `buf` null and `len` 0: the size query) it returns `BufferTooSmall`
/// with the size needed in `*written`. Its configuration comes from
/// `simfa_config_sample`.
///
/// # Safety
///
/// `buf` must point at `len` writable bytes (or be null with `len` 0);
/// `written` at a writable, aligned `size_t`.
#[no_mangle]
pub unsafe extern "C" fn simfa_sample_kernel(
    index: u32,
    buf: *mut u8,
    len: usize,
    written: *mut usize,
) -> SimfaStatus {
    guard(|| {
        // SAFETY: the caller's contract above.
        let written = unsafe { ptr::out(written) }?;
        // SAFETY: the caller's contract above.
        let buf = unsafe { ptr::bytes_mut(buf, len) }?;
        let mut k = Kernel::default();
        samples::build(index as usize, &mut k).ok_or(SimfaStatus::BadArgument)?;
        let need = encoded_len(&k);
        written.write(need);
        if buf.len() < need {
            return Err(SimfaStatus::BufferTooSmall);
        }
        let n = encode::encode(&k, buf)
            .map_err(|_| SimfaStatus::BufferTooSmall)?
            .len();
        written.write(n);
        Ok(())
    })
}
