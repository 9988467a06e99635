//! The snapshot codec: the typed errors of save and restore and the
//! writer and reader of a snapshot's body.
//!
//! A body is a sequence of postcard-encoded values and tables (a length,
//! then every element). `Writer` writes one into a caller buffer, or,
//! counting, adds up an upper bound of its size without a buffer, so a
//! caller can size the buffer before a run. `Reader` decodes one,
//! checking every table length and every bounded count it is asked to.
//! Nothing here allocates or knows what is being saved: every layer of
//! the core (the event wheel, the memory models, the simulator) writes its
//! own state through these two types, and the simulator's snapshot format
//! (header, fingerprint, checksum) is in `sim::snapshot`.

use core::fmt;

use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::error::BuildError;

/// The first eight bytes of every snapshot.
pub const SNAPSHOT_MAGIC: [u8; 8] = *b"SIMFASNP";

/// The snapshot format version this build writes and reads.
pub const SNAPSHOT_VERSION: u32 = 15;

/// Why a snapshot could not be written or restored.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum SnapshotError {
    /// The output buffer is too small (see [`crate::Simulator::snapshot_size`]).
    BufferTooSmall {
        /// Bytes of the buffer.
        available: usize,
    },
    /// The bytes end before the snapshot does.
    Truncated,
    /// The bytes do not start with `SIMFASNP`.
    BadMagic,
    /// The snapshot was written by another format version.
    Version {
        /// The version in the snapshot.
        found: u32,
    },
    /// The snapshot is of another configuration or kernel.
    Mismatch,
    /// The body does not match its checksum.
    Checksum,
    /// The body decodes to something impossible.
    Corrupt {
        /// What was wrong.
        what: &'static str,
    },
    /// The fresh simulator could not be built.
    Build(BuildError),
}

impl fmt::Display for SnapshotError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SnapshotError::BufferTooSmall { available } => {
                write!(f, "snapshot buffer of {available} bytes too small")
            }
            SnapshotError::Truncated => f.write_str("snapshot truncated"),
            SnapshotError::BadMagic => f.write_str("not a simfa snapshot (bad magic)"),
            SnapshotError::Version { found } => write!(
                f,
                "snapshot format version {found}, this build reads version {SNAPSHOT_VERSION}"
            ),
            SnapshotError::Mismatch => {
                f.write_str("snapshot is of another configuration or kernel")
            }
            SnapshotError::Checksum => f.write_str("snapshot corrupt (checksum mismatch)"),
            SnapshotError::Corrupt { what } => write!(f, "snapshot corrupt: {what}"),
            SnapshotError::Build(e) => write!(f, "cannot build the simulator: {e}"),
        }
    }
}

impl core::error::Error for SnapshotError {}

impl From<BuildError> for SnapshotError {
    fn from(e: BuildError) -> Self {
        SnapshotError::Build(e)
    }
}

/// Upper bound of the postcard encoding of one value of type `T`: varints
/// take at most 1.5 times their bytes (a `u16` in 3) and every enum or
/// option level adds a tag byte that a niche may hide in memory.
pub(crate) const fn bound<T>() -> usize {
    2 * core::mem::size_of::<T>() + 2
}

/// Writes the body of a snapshot, or (with no buffer) adds up the bound of
/// what it would write.
pub(crate) struct Writer<'b> {
    buf: Option<&'b mut [u8]>,
    pos: usize,
}

impl<'b> Writer<'b> {
    /// A writer into `buf`.
    pub(crate) fn new(buf: &'b mut [u8]) -> Self {
        Writer {
            buf: Some(buf),
            pos: 0,
        }
    }

    /// A writer that only adds up the bound of what it would write.
    pub(crate) fn counting() -> Self {
        Writer { buf: None, pos: 0 }
    }

    /// Bytes written (or, counting, their bound) so far.
    pub(crate) fn len(&self) -> usize {
        self.pos
    }

    /// Writes one value.
    pub fn val<T: Serialize>(&mut self, v: &T) -> Result<(), SnapshotError> {
        match &mut self.buf {
            None => {
                self.pos += bound::<T>();
                Ok(())
            }
            Some(b) => {
                let available = b.len();
                let rest = b
                    .get_mut(self.pos..)
                    .ok_or(SnapshotError::BufferTooSmall { available })?;
                let n = postcard::to_slice(v, rest)
                    .map_err(|_| SnapshotError::BufferTooSmall { available })?
                    .len();
                self.pos += n;
                Ok(())
            }
        }
    }

    /// Writes a table: its length, then every element.
    pub fn slice<T: Serialize>(&mut self, s: &[T]) -> Result<(), SnapshotError> {
        self.val(&(s.len() as u64))?;
        if self.buf.is_none() {
            self.pos += s.len() * bound::<T>();
            return Ok(());
        }
        s.iter().try_for_each(|x| self.val(x))
    }
}

/// Reads the body of a snapshot.
pub(crate) struct Reader<'b> {
    buf: &'b [u8],
}

impl<'b> Reader<'b> {
    /// A reader over `buf`.
    pub(crate) fn new(buf: &'b [u8]) -> Self {
        Reader { buf }
    }

    /// True when every byte was read.
    pub(crate) fn is_empty(&self) -> bool {
        self.buf.is_empty()
    }

    /// Reads one value.
    pub fn val<T: DeserializeOwned>(&mut self) -> Result<T, SnapshotError> {
        let (v, rest) = postcard::take_from_bytes(self.buf).map_err(|e| match e {
            postcard::Error::DeserializeUnexpectedEnd => SnapshotError::Truncated,
            _ => SnapshotError::Corrupt {
                what: "undecodable value",
            },
        })?;
        self.buf = rest;
        Ok(v)
    }

    /// Reads a `usize` written as `u64` and checks it is at most `max`.
    pub fn at_most(&mut self, max: usize, what: &'static str) -> Result<usize, SnapshotError> {
        let v: u64 = self.val()?;
        if v > max as u64 {
            return Err(SnapshotError::Corrupt { what });
        }
        Ok(v as usize)
    }

    /// Reads a table written by [`Writer::slice`] into `s`, whose length
    /// must match.
    pub fn slice<T: DeserializeOwned>(&mut self, s: &mut [T]) -> Result<(), SnapshotError> {
        let n: u64 = self.val()?;
        if n != s.len() as u64 {
            return Err(SnapshotError::Corrupt {
                what: "table length",
            });
        }
        for x in s.iter_mut() {
            *x = self.val()?;
        }
        Ok(())
    }
}

/// The bytes `save` writes into a snapshot body (tests).
#[cfg(test)]
pub(crate) fn saved(
    save: impl Fn(&mut Writer<'_>) -> Result<(), SnapshotError>,
) -> ::std::vec::Vec<u8> {
    let mut count = Writer::counting();
    save(&mut count).unwrap();
    let mut buf = ::std::vec![0u8; count.len()];
    let mut w = Writer::new(&mut buf);
    save(&mut w).unwrap();
    let n = w.len();
    buf.truncate(n);
    buf
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reader_rejects_short_and_mismatched_tables() {
        let mut buf = [0u8; 64];
        let mut w = Writer::new(&mut buf);
        w.slice(&[1u32, 2, 3]).unwrap();
        let n = w.pos;
        let mut dst = [0u32; 3];
        Reader { buf: &buf[..n] }.slice(&mut dst).unwrap();
        assert_eq!(dst, [1, 2, 3]);
        let mut two = [0u32; 2];
        assert_eq!(
            Reader { buf: &buf[..n] }.slice(&mut two),
            Err(SnapshotError::Corrupt {
                what: "table length"
            })
        );
        for cut in 0..n {
            assert_eq!(
                Reader { buf: &buf[..cut] }.slice(&mut dst),
                Err(SnapshotError::Truncated)
            );
        }
        let mut w = Writer::new(&mut buf[..2]);
        assert!(matches!(
            w.slice(&[u64::MAX; 4]),
            Err(SnapshotError::BufferTooSmall { .. })
        ));
    }
}
