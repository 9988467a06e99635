//! The one error type of the SCALE-Sim checker.
//!
//! Every input problem names its file and, where it has one, the line and
//! column (1-based, in bytes) as `FILE:LINE:COLUMN: what`; the CLI turns any
//! of them into exit status 2.

use std::path::Path;

use thiserror::Error;

/// What is wrong at one place of a CSV or configuration file.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum Fault {
    /// A byte no number contains.
    #[error("unexpected byte {0:#04x}")]
    UnexpectedByte(u8),
    /// A field that should hold a number is empty.
    #[error("empty {0} field")]
    Empty(&'static str),
    /// Not a number at all.
    #[error("{0:?} is not a number")]
    NotANumber(String),
    /// A number with a fractional part where an integer belongs.
    #[error("{0:?} is not an integer")]
    NotAnInteger(String),
    /// An integer beyond what SCALE-Sim can write (2^53 in magnitude: it
    /// prints DRAM traces as floats).
    #[error("{0:?} is out of range")]
    OutOfRange(String),
    /// A negative address other than SCALE-Sim's idle marker -1.
    #[error("negative address {0}")]
    NegativeAddress(i64),
    /// A row whose field count differs from the file's first row.
    #[error("row has {found} fields, the first row has {expected}")]
    FieldCount {
        /// Fields in this row.
        found: usize,
        /// Fields in the file's first row.
        expected: usize,
    },
    /// The file ends in the middle of a line (SCALE-Sim ends every row,
    /// the last included, with a newline).
    #[error("truncated: the last line has no newline")]
    Truncated,
    /// A line longer than [`super::trace::MAX_LINE`] bytes.
    #[error("line longer than {0} bytes")]
    LineTooLong(usize),
    /// A DRAM trace row with another number of address lanes than the
    /// words per cycle the configuration fetches.
    #[error("row has {found} address lanes, but the configuration fetches {expected} words per cycle (is --cfg this run's?)")]
    Lanes {
        /// Lanes in the row.
        found: usize,
        /// Words per cycle configured.
        expected: u64,
    },
    /// An SRAM trace that ends while another of the layer's SRAM traces
    /// goes on (each has one row per demand cycle).
    #[error("the file ends here, but {0} has more rows")]
    EndsEarly(String),
    /// A line of a configuration file that is neither a section header, a
    /// `key = value` pair nor a comment.
    #[error("expected `[section]` or `key = value`")]
    Syntax,
    /// A configuration value that is not one of those allowed.
    #[error("{key} = {value:?}: {expected}")]
    BadValue {
        /// The key.
        key: String,
        /// Its value.
        value: String,
        /// What it should be.
        expected: &'static str,
    },
}

/// Why a SCALE-Sim run could not be checked.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum ScaleSimError {
    /// A file could not be opened or read.
    #[error("{file}: {source}")]
    Io {
        /// The file.
        file: String,
        /// The operating system's error.
        source: std::io::Error,
    },
    /// A malformed line.
    #[error("{file}:{line}:{column}: {fault}")]
    At {
        /// The file.
        file: String,
        /// 1-based line.
        line: u64,
        /// 1-based byte column.
        column: u64,
        /// What is wrong there.
        fault: Fault,
    },
    /// A run directory without the files a SCALE-Sim run writes.
    #[error("{dir}: {what}")]
    NotARun {
        /// The directory.
        dir: String,
        /// What is missing.
        what: String,
    },
    /// Inputs that cannot come from one run: a topology with another
    /// number of layers than the traces, runs of different topologies
    /// compared.
    #[error("{file}: {what}")]
    Inconsistent {
        /// The file that disagrees.
        file: String,
        /// How.
        what: String,
    },
}

impl ScaleSimError {
    /// An I/O error on `file`.
    pub fn io(file: &Path, source: std::io::Error) -> Self {
        ScaleSimError::Io {
            file: file.display().to_string(),
            source,
        }
    }

    /// A fault at `line`:`column` of `file`.
    pub fn at(file: &str, line: u64, column: u64, fault: Fault) -> Self {
        ScaleSimError::At {
            file: file.to_string(),
            line,
            column,
            fault,
        }
    }
}
