//! Why a Proton trace (or an FA3 event log, through the same
//! streaming import) could not be imported.

use super::ops_file::OpsError;

/// Why a trace could not be imported.
#[derive(Debug, thiserror::Error)]
pub enum ImportError {
    /// A file could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The trace is not valid JSON or not a chrome trace.
    #[error("{path}:{line}:{column}: {msg}")]
    Json {
        /// The trace.
        path: String,
        /// Line of the error.
        line: usize,
        /// Column of the error.
        column: usize,
        /// What is wrong.
        msg: String,
    },
    /// The kernel header is missing or invalid.
    #[error("{path}: kernel header: {problem}")]
    Header {
        /// The trace.
        path: String,
        /// What is wrong.
        problem: String,
    },
    /// An event cannot be translated.
    #[error("{path}: event {index} ({name}): {problem}")]
    Event {
        /// The trace.
        path: String,
        /// The event's position in `traceEvents`, from 0.
        index: u64,
        /// Its name.
        name: String,
        /// What is wrong.
        problem: String,
    },
    /// A line of a line-oriented input (an FA3 event log) is malformed.
    #[error("{path}:{line}: {problem}")]
    Line {
        /// The file.
        path: String,
        /// The line, from 1.
        line: u64,
        /// What is wrong.
        problem: String,
    },
    /// The op file could not be written.
    #[error(transparent)]
    Ops(#[from] OpsError),
}
