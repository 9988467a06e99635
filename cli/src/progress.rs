//! A one-line progress display on stderr for long runs.

use std::io::{IsTerminal, Write};
use std::time::{Duration, Instant};

/// Shows `cycle N, CTAs r/t` on one `\r`-updated stderr line once a run has
/// taken longer than [`Progress::DELAY`]; does nothing when disabled or when
/// stderr is not a terminal.
pub struct Progress {
    enabled: bool,
    start: Instant,
    width: usize,
}

impl Progress {
    /// How long a run goes before the line appears.
    pub const DELAY: Duration = Duration::from_secs(1);

    /// A display that is active only if `wanted` and stderr is a terminal.
    pub fn new(wanted: bool) -> Self {
        Progress {
            enabled: wanted && std::io::stderr().is_terminal(),
            start: Instant::now(),
            width: 0,
        }
    }

    /// Records the state of the run, redrawing the line if it is shown.
    pub fn update(&mut self, cycle: u64, retired: u32, total: u32) {
        if !self.enabled || self.start.elapsed() < Self::DELAY {
            return;
        }
        let pct = if total == 0 {
            100.0
        } else {
            retired as f64 * 100.0 / total as f64
        };
        let line = format!("simulating: cycle {cycle}, CTAs {retired}/{total} ({pct:.0}%)");
        let pad = self.width.saturating_sub(line.len());
        self.width = line.len();
        let mut err = std::io::stderr().lock();
        let _ = write!(err, "\r{line}{:pad$}", "");
        let _ = err.flush();
    }

    /// Erases the line if it was shown.
    pub fn finish(&mut self) {
        if self.width > 0 {
            let mut err = std::io::stderr().lock();
            let _ = write!(err, "\r{:w$}\r", "", w = self.width);
            let _ = err.flush();
            self.width = 0;
        }
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        self.finish();
    }
}
