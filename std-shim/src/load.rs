//! Loading and saving kernels in either encoding.
//!
//! A kernel file is either the compact binary encoding
//! ([`simfa_core::encode`], recognised by its magic bytes) or the text
//! assembly ([`crate::asm`]); [`load_kernel`] tells them apart by content, not
//! by name. [`save_kernel`] writes atomically: the bytes go to a temporary
//! file in the target's directory which is then renamed over the target, so
//! a failure never leaves a half-written file behind.

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use simfa_core::encode::{self, HEADER_LEN, MAGIC, VERSION};
use simfa_core::{DecodeError, Kernel};

use crate::asm::{self, AsmError};

/// Why a kernel could not be loaded or saved. Every variant names the file.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// Reading or writing the file failed.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// A binary kernel could not be decoded.
    #[error("{path}: {source}")]
    Decode {
        /// The file.
        path: String,
        /// The decoder's error.
        #[source]
        source: DecodeError,
    },
    /// A text kernel could not be parsed (the error carries
    /// `file:line:col`).
    #[error("{0}")]
    Asm(#[from] AsmError),
}

/// A kernel file encoding.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Format {
    /// The text assembly.
    Text,
    /// The compact binary encoding.
    Binary,
}

impl Format {
    /// The encoding a file name asks for: `.sfk` and `.bin` are binary,
    /// anything else is text.
    pub fn from_path(path: &Path) -> Format {
        match path.extension().and_then(|e| e.to_str()) {
            Some(e) if e.eq_ignore_ascii_case("sfk") || e.eq_ignore_ascii_case("bin") => {
                Format::Binary
            }
            _ => Format::Text,
        }
    }
}

/// Reads a kernel file in either encoding.
pub fn load_kernel(path: &Path) -> Result<Kernel, LoadError> {
    let name = path.display().to_string();
    let bytes = fs::read(path).map_err(|source| LoadError::Io {
        path: name.clone(),
        source,
    })?;
    decode_kernel(&bytes, &name)
}

/// Decodes a kernel in either encoding from memory; `name` is the file name
/// used in errors.
///
/// Content decides the encoding: bytes that open with the magic are binary.
/// So that a damaged binary file gets a binary error ("truncated", "wrong
/// magic") rather than a confusing text-syntax one, two more cases go to the
/// binary decoder: a non-empty file that is a proper prefix of the magic
/// (cut inside its header), and a file named `.sfk`/`.bin` whose bytes are
/// not text (not UTF-8, or holding a NUL byte).
pub fn decode_kernel(bytes: &[u8], name: &str) -> Result<Kernel, LoadError> {
    if looks_binary(bytes, name) {
        encode::decode(bytes).map_err(|source| LoadError::Decode {
            path: name.to_string(),
            source,
        })
    } else {
        Ok(asm::parse_bytes(bytes, name)?)
    }
}

fn looks_binary(bytes: &[u8], name: &str) -> bool {
    if encode::is_binary(bytes) {
        return true;
    }
    if !bytes.is_empty() && bytes.len() < MAGIC.len() && MAGIC.starts_with(bytes) {
        return true;
    }
    let not_text = bytes.contains(&0) || std::str::from_utf8(bytes).is_err();
    not_text && Format::from_path(Path::new(name)) == Format::Binary
}

/// The binary encoding of `k`: magic, little-endian version, postcard body
/// (byte for byte what [`simfa_core::encode::encode`] writes).
pub fn encode_kernel(k: &Kernel) -> Vec<u8> {
    let body = postcard::to_stdvec(k).expect("postcard serialises every kernel into a Vec");
    let mut out = Vec::with_capacity(HEADER_LEN + body.len());
    out.extend_from_slice(&MAGIC);
    out.extend_from_slice(&VERSION.to_le_bytes());
    out.extend_from_slice(&body);
    out
}

/// Writes `k` to `path` in `format`, atomically.
pub fn save_kernel(k: &Kernel, path: &Path, format: Format) -> Result<(), LoadError> {
    let bytes = match format {
        Format::Text => asm::print(k).into_bytes(),
        Format::Binary => encode_kernel(k),
    };
    write_atomic(path, &bytes).map_err(|source| LoadError::Io {
        path: path.display().to_string(),
        source,
    })
}

/// Writes `bytes` to `path` through a temporary file in the same directory
/// and a rename; on failure the temporary file is removed and `path` is
/// untouched.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let file_name = path.file_name().ok_or_else(|| {
        std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "the output path does not name a file",
        )
    })?;
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let mut tmp_name = std::ffi::OsString::from(".");
    tmp_name.push(file_name);
    tmp_name.push(format!(
        ".{}.{}.tmp",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    ));
    let tmp = dir.join(tmp_name);
    let result = (|| {
        let mut f = fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
        drop(f);
        fs::rename(&tmp, path)
    })();
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gen::{gemm, GemmParams};

    fn scratch(tag: &str) -> PathBuf {
        static N: AtomicU64 = AtomicU64::new(0);
        let d = std::env::temp_dir().join(format!(
            "simfa-load-{tag}-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        fs::create_dir_all(&d).unwrap();
        d
    }

    fn kernel() -> Kernel {
        gemm(&GemmParams::new(256, 384, 128)).unwrap()
    }

    #[test]
    fn format_from_path() {
        assert_eq!(Format::from_path(Path::new("a/b.sfk")), Format::Binary);
        assert_eq!(Format::from_path(Path::new("b.BIN")), Format::Binary);
        assert_eq!(Format::from_path(Path::new("b.sasm")), Format::Text);
        assert_eq!(Format::from_path(Path::new("noext")), Format::Text);
    }

    #[test]
    fn encode_matches_core() {
        let k = kernel();
        let mut buf = vec![0u8; 1 << 16];
        let core = encode::encode(&k, &mut buf).unwrap().to_vec();
        assert_eq!(encode_kernel(&k), core);
        assert_eq!(decode_kernel(&core, "mem").unwrap(), k);
    }

    #[test]
    fn round_trip_both_formats() {
        let d = scratch("rt");
        let k = kernel();
        let bin = d.join("k.sfk");
        save_kernel(&k, &bin, Format::Binary).unwrap();
        assert!(fs::read(&bin).unwrap().starts_with(&MAGIC));
        assert_eq!(load_kernel(&bin).unwrap(), k);
        // The text form may number expressions differently; it must print
        // back identically and simulate identically.
        let text = d.join("k.sasm");
        save_kernel(&k, &text, Format::Text).unwrap();
        assert!(!fs::read(&text).unwrap().starts_with(&MAGIC));
        let back = load_kernel(&text).unwrap();
        assert_eq!(asm::print(&back), asm::print(&k));
        let cfg = simfa_core::GpuConfig::h800();
        let digest = |k: &Kernel| {
            crate::run::simulate(&cfg, k, &mut ())
                .unwrap()
                .summary
                .digest
        };
        assert_eq!(digest(&back), digest(&k));
        // Overwriting works, and text converts to binary and back.
        save_kernel(&back, &bin, Format::Binary).unwrap();
        save_kernel(&load_kernel(&bin).unwrap(), &text, Format::Text).unwrap();
        assert_eq!(load_kernel(&text).unwrap(), back);
        let left: Vec<_> = fs::read_dir(&d)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(left.len(), 2, "no temporary files remain: {left:?}");
        fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn atomic_write_into_missing_dir_leaves_nothing() {
        let d = scratch("missing");
        let target = d.join("no-such-dir").join("k.sfk");
        let e = save_kernel(&kernel(), &target, Format::Binary).unwrap_err();
        assert!(matches!(e, LoadError::Io { .. }));
        assert!(e.to_string().contains("k.sfk"), "{e}");
        assert!(!target.exists());
        assert!(!d.join("no-such-dir").exists());
        assert_eq!(fs::read_dir(&d).unwrap().count(), 0);
        fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn load_errors_name_the_file() {
        let e = load_kernel(Path::new("/nonexistent/simfa/k.sfk")).unwrap_err();
        assert!(
            matches!(e, LoadError::Io { .. }) && e.to_string().contains("/nonexistent/simfa/k.sfk")
        );
        let mut bytes = encode_kernel(&kernel());
        bytes.push(0);
        let e = decode_kernel(&bytes, "x.sfk").unwrap_err();
        assert!(matches!(
            e,
            LoadError::Decode {
                source: DecodeError::TrailingBytes,
                ..
            }
        ));
        assert!(e.to_string().starts_with("x.sfk: "), "{e}");
        // Damaged binaries get binary errors, not text-syntax ones.
        let e = decode_kernel(&bytes[..5], "x.sasm").unwrap_err();
        assert!(e.to_string().contains("truncated"), "{e}");
        let mut wrong = bytes.clone();
        wrong[7] = b'X';
        let e = decode_kernel(&wrong, "x.sfk").unwrap_err();
        assert!(e.to_string().contains("wrong magic"), "{e}");
        // ... but text in a binary-named file is still text.
        let e = decode_kernel(b"kernel k\ngrid 0\n", "x.bin").unwrap_err();
        assert!(matches!(e, LoadError::Asm(_)), "{e}");
        bytes.truncate(HEADER_LEN + 3);
        assert!(matches!(
            decode_kernel(&bytes, "x").unwrap_err(),
            LoadError::Decode { .. }
        ));
    }
}
