//! Why a calibration or validation could not run: a data file that cannot
//! be read or parsed, or a point whose simulation failed.

use crate::gen::BenchError;

/// Why a calibration could not run.
#[derive(Debug, thiserror::Error)]
pub enum CalibError {
    /// The data file could not be read.
    #[error("cannot read {path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// The cause.
        source: std::io::Error,
    },
    /// A line of the data file is malformed.
    #[error("{origin}:{line}: {problem}")]
    Parse {
        /// The file.
        origin: String,
        /// 1-based line.
        line: usize,
        /// What is wrong.
        problem: String,
    },
    /// The data file has no data rows.
    #[error("{origin}: no data rows")]
    Empty {
        /// The file.
        origin: String,
    },
    /// A point's simulation failed.
    #[error("working set {working_set_kb} kB: {source}")]
    Point {
        /// The point.
        working_set_kb: f64,
        /// The cause.
        source: BenchError,
    },
    /// A simulated point of a dataset failed.
    #[error("{what}: {source}")]
    Run {
        /// The point.
        what: String,
        /// The cause.
        source: BenchError,
    },
    /// A throughput cell's simulation failed.
    #[error("{copy} with {blocks_per_sm} blocks per SM: {source}")]
    Cell {
        /// The copy label.
        copy: String,
        /// Blocks per SM.
        blocks_per_sm: u32,
        /// The cause.
        source: BenchError,
    },
}

impl CalibError {
    /// True for errors in the input (files, parameters, configuration), as
    /// opposed to simulation failures.
    pub fn is_input_error(&self) -> bool {
        match self {
            CalibError::Io { .. } | CalibError::Parse { .. } | CalibError::Empty { .. } => true,
            CalibError::Point { source, .. }
            | CalibError::Cell { source, .. }
            | CalibError::Run { source, .. } => source.is_input_error(),
        }
    }
}
