//! Op files: the explicit per-WarpGroup instruction streams of an imported
//! trace, read back through [`StreamSource`] in bounded memory.
//!
//! A kernel imported from a trace declares its roles `stream`; the
//! instructions live beside it in an op file (`KERNEL.ops`):
//!
//! ```text
//! "SFOPS\0\x03\0"                      8 bytes, magic and version 3
//! op bytes                             every stream's ops, postcard-encoded, back to back
//! index entry * N                      24 bytes each: cta u32, role u8, wg u8, 0u16,
//!                                      ops u64, offset u64 (from the file start)
//! N u64, index offset u64, "SFOPSEND"  the 24-byte footer
//! ```
//!
//! (all integers little-endian). Entries are sorted by `(cta, role, wg)`,
//! unique, and each stream's bytes lie between the magic and the index. A
//! WarpGroup without an entry has an empty stream (it exits at once).
//!
//! [`OpsFile`] keeps the index and, per WarpGroup being pulled, a cursor
//! with a 4 KiB buffer, dropped when its stream ends: memory grows with the
//! resident WarpGroups, not with the trace. Pulls come in increasing
//! position per WarpGroup; a pull at an earlier or later position (a run
//! resumed from a snapshot) re-reads or skips from the stream's start.

use std::collections::HashMap;
use std::fs::File;
use std::io::{BufWriter, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use simfa_core::source::SourceError;
use simfa_core::{Kernel, Op, StreamSource};

const MAGIC: &[u8; 8] = b"SFOPS\0\x03\0";
const END: &[u8; 8] = b"SFOPSEND";
const ENTRY: usize = 24;
const FOOTER: usize = 24;
/// Bytes read at a time per cursor.
const BUF: usize = 4096;
/// More than any op's postcard encoding.
const MAX_OP: usize = 64;

/// Why an op file could not be written or read.
#[derive(Debug, thiserror::Error)]
pub enum OpsError {
    /// The file could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The file is not an op file or is damaged.
    #[error("{path}: not a valid op file: {problem}")]
    Format {
        /// The file.
        path: String,
        /// What is wrong.
        problem: String,
    },
    /// Streams were written out of order.
    #[error("op streams must be written in (cta, role, wg) order, each once")]
    Order,
}

/// Where one WarpGroup's stream lies.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Entry {
    key: (u32, u8, u8),
    ops: u64,
    offset: u64,
}

/// Writes an op file stream by stream, into a temporary file beside it
/// that [`OpsWriter::finish`] renames into place (a failed import leaves
/// nothing behind).
pub struct OpsWriter {
    out: BufWriter<tempfile::NamedTempFile>,
    dest: PathBuf,
    path: String,
    at: u64,
    index: Vec<Entry>,
}

impl OpsWriter {
    /// Starts the op file `path` (replaced when finished).
    pub fn create(path: &Path) -> Result<Self, OpsError> {
        let p = path.display().to_string();
        let io = |source| OpsError::Io {
            path: p.clone(),
            source,
        };
        let dir = match path.parent() {
            Some(d) if !d.as_os_str().is_empty() => d,
            _ => Path::new("."),
        };
        let tmp = tempfile::NamedTempFile::new_in(dir).map_err(io)?;
        let mut out = BufWriter::new(tmp);
        out.write_all(MAGIC).map_err(io)?;
        Ok(OpsWriter {
            out,
            dest: path.to_path_buf(),
            path: p,
            at: MAGIC.len() as u64,
            index: Vec::new(),
        })
    }

    /// Starts the stream of WarpGroup `wg` of role `role` in CTA `cta`;
    /// streams come in increasing `(cta, role, wg)` order.
    pub fn begin(&mut self, cta: u32, role: u8, wg: u8) -> Result<(), OpsError> {
        let key = (cta, role, wg);
        if self.index.last().is_some_and(|e| e.key >= key) {
            return Err(OpsError::Order);
        }
        self.index.push(Entry {
            key,
            ops: 0,
            offset: self.at,
        });
        Ok(())
    }

    /// Appends `op` to the current stream.
    pub fn push(&mut self, op: &Op) -> Result<(), OpsError> {
        let Some(e) = self.index.last_mut() else {
            return Err(OpsError::Order);
        };
        let mut buf = [0u8; MAX_OP];
        let bytes = postcard::to_slice(op, &mut buf).map_err(|e| OpsError::Format {
            path: self.path.clone(),
            problem: format!("cannot encode {op:?}: {e}"),
        })?;
        e.ops += 1;
        self.at += bytes.len() as u64;
        let path = &self.path;
        self.out.write_all(bytes).map_err(|source| OpsError::Io {
            path: path.clone(),
            source,
        })
    }

    /// Writes the index and footer; returns the number of ops written.
    pub fn finish(mut self) -> Result<u64, OpsError> {
        let mut tail = Vec::with_capacity(self.index.len() * ENTRY + FOOTER);
        for e in &self.index {
            tail.extend_from_slice(&e.key.0.to_le_bytes());
            tail.extend_from_slice(&[e.key.1, e.key.2, 0, 0]);
            tail.extend_from_slice(&e.ops.to_le_bytes());
            tail.extend_from_slice(&e.offset.to_le_bytes());
        }
        tail.extend_from_slice(&(self.index.len() as u64).to_le_bytes());
        tail.extend_from_slice(&self.at.to_le_bytes());
        tail.extend_from_slice(END);
        let path = self.path.clone();
        let io = |source| OpsError::Io {
            path: path.clone(),
            source,
        };
        self.out.write_all(&tail).map_err(io)?;
        let tmp = self.out.into_inner().map_err(|e| io(e.into_error()))?;
        tmp.persist(&self.dest).map_err(|e| io(e.error))?;
        Ok(self.index.iter().map(|e| e.ops).sum())
    }
}

/// A pull in progress: where the next op of one WarpGroup's stream is.
struct Cursor {
    entry: usize,
    /// Position of the next op.
    pos: u64,
    /// File offset of `buf[0]`.
    file_at: u64,
    buf: Vec<u8>,
    /// Next unread byte of `buf`.
    i: usize,
}

/// An op file opened as a [`StreamSource`].
pub struct OpsFile {
    file: File,
    path: String,
    index: Vec<Entry>,
    /// End of the op bytes (the index offset).
    data_end: u64,
    cursors: HashMap<(u32, u8, u8), Cursor>,
    error: Option<String>,
}

impl OpsFile {
    /// Opens op file `path` and checks its index.
    pub fn open(path: &Path) -> Result<Self, OpsError> {
        let p = path.display().to_string();
        let io = |source| OpsError::Io {
            path: p.clone(),
            source,
        };
        let bad = |problem: String| OpsError::Format {
            path: p.clone(),
            problem,
        };
        let mut file = File::open(path).map_err(io)?;
        let len = file.metadata().map_err(io)?.len();
        if len < (MAGIC.len() + FOOTER) as u64 {
            return Err(bad(format!("{len} bytes is too short")));
        }
        let mut magic = [0u8; 8];
        file.read_exact(&mut magic).map_err(io)?;
        if magic[..6] == MAGIC[..6] && magic != *MAGIC {
            let v = u16::from_le_bytes([magic[6], magic[7]]);
            let ours = u16::from_le_bytes([MAGIC[6], MAGIC[7]]);
            return Err(bad(format!(
                "op file version {v}, this build reads version {ours} (write it again)"
            )));
        }
        if &magic != MAGIC {
            return Err(bad("bad magic".into()));
        }
        let mut foot = [0u8; FOOTER];
        file.seek(SeekFrom::Start(len - FOOTER as u64))
            .map_err(io)?;
        file.read_exact(&mut foot).map_err(io)?;
        if &foot[16..] != END {
            return Err(bad("no footer (truncated?)".into()));
        }
        let n = u64::from_le_bytes(foot[0..8].try_into().unwrap());
        let at = u64::from_le_bytes(foot[8..16].try_into().unwrap());
        let room = len - FOOTER as u64;
        if at < MAGIC.len() as u64 || at > room || n.checked_mul(ENTRY as u64) != Some(room - at) {
            return Err(bad(format!(
                "index of {n} entries at offset {at} does not fit the file"
            )));
        }
        let mut raw = vec![0u8; (room - at) as usize];
        file.seek(SeekFrom::Start(at)).map_err(io)?;
        file.read_exact(&mut raw).map_err(io)?;
        let mut index = Vec::with_capacity(n as usize);
        for (i, c) in raw.chunks_exact(ENTRY).enumerate() {
            let e = Entry {
                key: (u32::from_le_bytes(c[0..4].try_into().unwrap()), c[4], c[5]),
                ops: u64::from_le_bytes(c[8..16].try_into().unwrap()),
                offset: u64::from_le_bytes(c[16..24].try_into().unwrap()),
            };
            if e.offset < MAGIC.len() as u64 || e.offset > at {
                return Err(bad(format!("entry {i}: offset {} out of range", e.offset)));
            }
            if index.last().is_some_and(|l: &Entry| l.key >= e.key) {
                return Err(bad(format!("entry {i}: streams not sorted or repeated")));
            }
            index.push(e);
        }
        Ok(OpsFile {
            file,
            path: p,
            index,
            data_end: at,
            cursors: HashMap::new(),
            error: None,
        })
    }

    /// Streams in the file.
    pub fn streams(&self) -> usize {
        self.index.len()
    }

    /// Ops in the file, all streams together.
    pub fn ops(&self) -> u64 {
        self.index.iter().map(|e| e.ops).sum()
    }

    /// Why the last failed pull failed (the simulator reports only that it
    /// did).
    pub fn error(&self) -> Option<&str> {
        self.error.as_deref()
    }

    fn fail(&mut self, problem: String) -> SourceError {
        self.error = Some(format!("{}: {problem}", self.path));
        SourceError
    }

    /// Reads more bytes into `c`'s buffer, keeping what is unread.
    fn refill(&mut self, key: (u32, u8, u8)) -> Result<(), String> {
        let c = self.cursors.get_mut(&key).expect("cursor");
        let start = c.file_at + c.i as u64;
        let n = (self.data_end.saturating_sub(start)).min(BUF as u64) as usize;
        c.buf.clear();
        c.buf.resize(n, 0);
        c.file_at = start;
        c.i = 0;
        self.file
            .seek(SeekFrom::Start(start))
            .and_then(|_| self.file.read_exact(&mut c.buf))
            .map_err(|e| e.to_string())
    }

    /// Decodes the next op of cursor `key`.
    fn next_op(&mut self, key: (u32, u8, u8)) -> Result<Op, String> {
        {
            let c = &self.cursors[&key];
            if c.buf.len() - c.i < MAX_OP {
                self.refill(key)?;
            }
        }
        let c = self.cursors.get_mut(&key).expect("cursor");
        let (op, rest) = postcard::take_from_bytes::<Op>(&c.buf[c.i..]).map_err(|e| {
            format!(
                "op {} of CTA {} role {} wg {}: {e}",
                c.pos, key.0, key.1, key.2
            )
        })?;
        c.i = c.buf.len() - rest.len();
        c.pos += 1;
        Ok(op)
    }
}

impl StreamSource for OpsFile {
    fn pull(&mut self, cta: u32, role: u8, wg: u8, pos: u64) -> Result<Option<Op>, SourceError> {
        let key = (cta, role, wg);
        let Ok(entry) = self.index.binary_search_by(|e| e.key.cmp(&key)) else {
            return Ok(None);
        };
        let e = self.index[entry];
        if pos >= e.ops {
            self.cursors.remove(&key);
            return Ok(None);
        }
        let restart = self.cursors.get(&key).map_or(true, |c| c.pos > pos);
        if restart {
            self.cursors.insert(
                key,
                Cursor {
                    entry,
                    pos: 0,
                    file_at: e.offset,
                    buf: Vec::new(),
                    i: 0,
                },
            );
        }
        loop {
            let at = self.cursors[&key].pos;
            debug_assert_eq!(self.cursors[&key].entry, entry);
            match self.next_op(key) {
                Ok(op) if at == pos => {
                    if pos + 1 == e.ops {
                        self.cursors.remove(&key);
                    }
                    return Ok(Some(op));
                }
                Ok(_) => {}
                Err(problem) => return Err(self.fail(problem)),
            }
        }
    }
}

/// Writes the op file `path` of kernel `k` from `source`: every stream
/// role's WarpGroups in every CTA, each pulled to its exit, so that `k`
/// saved beside it runs from the file as it runs from `source`.
pub fn write_streams(
    path: &Path,
    k: &Kernel,
    mut source: impl StreamSource,
) -> Result<(), OpsError> {
    let mut w = OpsWriter::create(path)?;
    for cta in 0..k.ctas().min(u32::MAX as u64) as u32 {
        for (role, r) in k.roles.iter().enumerate().filter(|(_, r)| r.stream) {
            for wg in 0..r.count {
                w.begin(cta, role as u8, wg)?;
                for pos in 0.. {
                    let op =
                        source
                            .pull(cta, role as u8, wg, pos)
                            .map_err(|_| OpsError::Format {
                                path: path.display().to_string(),
                                problem: format!(
                                    "no op {pos} for CTA {cta}, role {role}, WarpGroup {wg}"
                                ),
                            })?;
                    match op {
                        Some(op) => {
                            w.push(&op)?;
                            if op == Op::Exit {
                                break;
                            }
                        }
                        None => break,
                    }
                }
            }
        }
    }
    w.finish().map(|_| ())
}

/// The op file beside kernel file `kernel`: `KERNEL.ops`.
pub fn ops_path(kernel: &Path) -> PathBuf {
    let mut s = kernel.as_os_str().to_owned();
    s.push(".ops");
    PathBuf::from(s)
}

#[cfg(test)]
mod tests {
    use super::*;
    use simfa_core::WgmmaMode;

    fn sample() -> Vec<((u32, u8, u8), Vec<Op>)> {
        let ops = |n: u32| -> Vec<Op> {
            (0..n)
                .map(|i| match i % 3 {
                    0 => Op::Bubble { cycles: i },
                    1 => Op::Wgmma {
                        n: 64,
                        mode: WgmmaMode::Ss,
                    },
                    _ => Op::TmaLoad {
                        map: 0,
                        bar: i as u16,
                        coords: [i as i64 * 64, -3, 0, 0, 0],
                        multicast: 0,
                    },
                })
                .collect()
        };
        vec![
            ((0, 0, 0), ops(5)),
            ((0, 1, 0), ops(3000)),
            ((2, 0, 1), ops(1)),
        ]
    }

    fn write(dir: &Path) -> PathBuf {
        let path = dir.join("k.ops");
        let mut w = OpsWriter::create(&path).unwrap();
        for (k, ops) in sample() {
            w.begin(k.0, k.1, k.2).unwrap();
            for op in &ops {
                w.push(op).unwrap();
            }
        }
        assert_eq!(w.finish().unwrap(), 3006);
        path
    }

    #[test]
    fn streams_read_back_in_order_and_out_of_order() {
        let dir = tempfile::tempdir().unwrap();
        let path = write(dir.path());
        let mut f = OpsFile::open(&path).unwrap();
        assert_eq!((f.streams(), f.ops()), (3, 3006));
        for (k, ops) in sample() {
            for (i, op) in ops.iter().enumerate() {
                assert_eq!(f.pull(k.0, k.1, k.2, i as u64), Ok(Some(*op)));
            }
            assert_eq!(f.pull(k.0, k.1, k.2, ops.len() as u64), Ok(None));
        }
        // A WarpGroup without a stream exits at once.
        assert_eq!(f.pull(1, 0, 0, 0), Ok(None));
        // A resumed run starts mid-stream; going back re-reads.
        let big = &sample()[1].1;
        assert_eq!(f.pull(0, 1, 0, 2500), Ok(Some(big[2500])));
        assert_eq!(f.pull(0, 1, 0, 7), Ok(Some(big[7])));
        assert!(f.cursors.len() <= 1, "finished streams drop their cursors");
    }

    #[test]
    fn damaged_files_are_typed_errors() {
        let dir = tempfile::tempdir().unwrap();
        let path = write(dir.path());
        let good = std::fs::read(&path).unwrap();
        let bad = dir.path().join("bad.ops");
        let cases: Vec<(&str, Vec<u8>)> = vec![
            ("too short", good[..10].to_vec()),
            ("magic", [b"XXXXXXXX", &good[8..]].concat()),
            (
                "op file version 1, this build reads version 3",
                [b"SFOPS\0\x01\0", &good[8..]].concat(),
            ),
            ("footer", good[..good.len() - 1].to_vec()),
            ("does not fit", {
                let mut b = good.clone();
                let n = b.len();
                b[n - 24] ^= 0x40;
                b
            }),
        ];
        for (want, bytes) in cases {
            std::fs::write(&bad, bytes).unwrap();
            let e = OpsFile::open(&bad).err().expect(want).to_string();
            assert!(e.contains("bad.ops") && e.contains(want), "{want}: {e}");
        }
        // Corrupt op bytes fail the pull with a message naming the file.
        let mut b = good.clone();
        for x in &mut b[8..40] {
            *x = 0xFF;
        }
        std::fs::write(&bad, b).unwrap();
        let mut f = OpsFile::open(&bad).unwrap();
        let r = (0..5).map(|i| f.pull(0, 0, 0, i)).find(|r| r.is_err());
        assert_eq!(r, Some(Err(SourceError)));
        assert!(f.error().unwrap().contains("bad.ops"));
    }

    #[test]
    fn out_of_order_streams_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let mut w = OpsWriter::create(&dir.path().join("x.ops")).unwrap();
        w.begin(1, 0, 0).unwrap();
        assert!(matches!(w.begin(0, 3, 0), Err(OpsError::Order)));
        assert!(matches!(w.begin(1, 0, 0), Err(OpsError::Order)));
    }
}
