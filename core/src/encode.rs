//! The compact binary kernel encoding.
//!
//! Layout: the 8 magic bytes `SIMFAKRN`, a little-endian `u16` format
//! version, then the [`Kernel`] in postcard. Decoding treats its input as
//! hostile: every failure is a [`DecodeError`], and a decoded kernel is
//! validated before it is returned.

use crate::error::DecodeError;
use crate::kernel::Kernel;

/// The magic bytes that open every binary kernel.
pub const MAGIC: [u8; 8] = *b"SIMFAKRN";
/// The format version this build writes and reads.
pub const VERSION: u16 = 1;
/// Bytes of the header (magic + version).
pub const HEADER_LEN: usize = MAGIC.len() + 2;

/// True when `bytes` start with the binary kernel magic.
pub fn is_binary(bytes: &[u8]) -> bool {
    bytes.starts_with(&MAGIC)
}

/// Encodes `kernel` into `buf`, returning the used prefix.
pub fn encode<'b>(kernel: &Kernel, buf: &'b mut [u8]) -> Result<&'b mut [u8], DecodeError> {
    if buf.len() < HEADER_LEN {
        return Err(DecodeError::BufferFull);
    }
    buf[..MAGIC.len()].copy_from_slice(&MAGIC);
    buf[MAGIC.len()..HEADER_LEN].copy_from_slice(&VERSION.to_le_bytes());
    let body = postcard::to_slice(kernel, &mut buf[HEADER_LEN..])
        .map_err(|_| DecodeError::BufferFull)?
        .len();
    Ok(&mut buf[..HEADER_LEN + body])
}

/// Decodes and validates a binary kernel.
pub fn decode(bytes: &[u8]) -> Result<Kernel, DecodeError> {
    if bytes.len() < HEADER_LEN {
        if !MAGIC.starts_with(bytes) {
            return Err(DecodeError::BadMagic);
        }
        return Err(DecodeError::Truncated);
    }
    if !is_binary(bytes) {
        return Err(DecodeError::BadMagic);
    }
    let version = u16::from_le_bytes([bytes[8], bytes[9]]);
    if version != VERSION {
        return Err(DecodeError::BadVersion { found: version });
    }
    let (kernel, rest): (Kernel, &[u8]) =
        postcard::take_from_bytes(&bytes[HEADER_LEN..]).map_err(|_| DecodeError::Malformed)?;
    if !rest.is_empty() {
        return Err(DecodeError::TrailingBytes);
    }
    kernel.validate().map_err(DecodeError::Invalid)?;
    Ok(kernel)
}
