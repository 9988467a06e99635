//! A progress bar on stderr for long runs (indicatif).

use std::io::IsTerminal;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// A bar of CTAs retired, with the simulated cycle, that appears once a run
/// has taken longer than [`Progress::DELAY`]; nothing when disabled or when
/// stderr is not a terminal.
pub struct Progress {
    enabled: bool,
    start: Instant,
    bar: Option<ProgressBar>,
    template: &'static str,
}

impl Progress {
    /// How long a run goes before the bar appears.
    pub const DELAY: Duration = Duration::from_secs(1);

    /// A display that is active only if `wanted` and stderr is a terminal.
    pub fn new(wanted: bool) -> Self {
        Progress {
            enabled: wanted && std::io::stderr().is_terminal(),
            start: Instant::now(),
            bar: None,
            template: "simulating [{elapsed_precise}] {bar:30} {pos}/{len} CTAs, cycle {msg}",
        }
    }

    /// A bar of `simfa gemm --tune`'s candidates decided, active only if
    /// `wanted` and stderr is a terminal.
    pub fn tuning(wanted: bool) -> Self {
        let mut p = Progress::new(wanted);
        p.template = "tuning [{elapsed_precise}] {bar:30} {pos}/{len} candidates";
        p
    }

    /// Records the state of the run, drawing the bar if it is shown.
    pub fn update(&mut self, cycle: u64, retired: u32, total: u32) {
        self.show(retired as u64, total as u64, cycle);
    }

    /// Records `done` of `total` with `msg`, drawing the bar if it is shown.
    pub fn show(&mut self, done: u64, total: u64, msg: impl ToString) {
        if !self.enabled || self.start.elapsed() < Self::DELAY {
            return;
        }
        let template = self.template;
        let bar = self.bar.get_or_insert_with(|| {
            let b =
                ProgressBar::with_draw_target(Some(total), ProgressDrawTarget::stderr_with_hz(4));
            b.set_style(
                ProgressStyle::with_template(template)
                    .unwrap_or_else(|_| ProgressStyle::default_bar()),
            );
            b
        });
        bar.set_position(done);
        bar.set_message(msg.to_string());
    }

    /// Erases the bar if it was shown.
    pub fn finish(&mut self) {
        if let Some(b) = self.bar.take() {
            b.finish_and_clear();
        }
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        self.finish();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn disabled_progress_draws_nothing() {
        let mut p = Progress::new(false);
        p.update(10, 1, 2);
        assert!(p.bar.is_none());
        p.finish();
    }

    #[test]
    fn the_bar_appears_only_after_the_delay() {
        let mut p = Progress::new(false);
        p.enabled = true;
        p.update(10, 1, 4);
        assert!(p.bar.is_none(), "no bar within the first second");
        p.start -= Progress::DELAY;
        p.update(20, 2, 4);
        let b = p.bar.as_ref().expect("a bar after the delay");
        assert_eq!((b.position(), b.length()), (2, Some(4)));
        assert_eq!(b.message(), "20");
        p.finish();
        assert!(p.bar.is_none());
    }
}
