//! The memory hierarchy's counters for one kernel under one configuration
//! file (a calibration aid): `memstats KERNEL CONFIG.toml [WINDOW]` prints
//! the cycles and every field of `MemStats` (far reads, shadow copies and
//! their hits, MSHR merges, which the reports do not show). With `WINDOW`
//! (cycles) it also counts the reads each L2 slice answers in every window
//! and prints how evenly the slices share them: the busiest slice's reads
//! over the mean slice's, summed over the windows (so weighted by traffic),
//! and the mean share of slices that answer nothing in a window.
use simfa_core::{Cycle, Event, NoStream, Observer, Simulator};
use std::collections::BTreeMap;
use std::path::Path;

/// Reads answered per (window, slice).
struct SliceLoad {
    window: u64,
    counts: BTreeMap<u64, Vec<u32>>,
    slices: usize,
}

impl Observer for SliceLoad {
    fn on_event(&mut self, _c: Cycle, e: &Event) {
        if let Event::LineServed { slice, served, .. } = *e {
            let w = self.counts.entry(served / self.window).or_default();
            w.resize(self.slices, 0);
            w[slice as usize] += 1;
        }
    }
    fn wants_detail(&self) -> bool {
        true
    }
}

fn fail(what: &str, e: impl std::fmt::Display, code: i32) -> ! {
    eprintln!("{what}: {e}");
    std::process::exit(code)
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (kernel, config, window) = match &args[..] {
        [k, c] => (k, c, None),
        [k, c, w] => (
            k,
            c,
            Some(w.parse::<u64>().unwrap_or_else(|e| fail(w, e, 2))),
        ),
        _ => fail("usage", "memstats KERNEL CONFIG.toml [WINDOW]", 2),
    };
    let k = simfa_std::load::load_kernel(Path::new(kernel)).unwrap_or_else(|e| fail(kernel, e, 2));
    let cfg =
        simfa_std::config::load_config(Path::new(config)).unwrap_or_else(|e| fail(config, e, 2));
    let bytes = Simulator::<NoStream>::arena_size(&cfg, &k).unwrap_or_else(|e| fail(kernel, e, 2));
    let mut arena = vec![0u8; bytes];
    let mut sim = Simulator::new(&cfg, &k, &mut arena).unwrap_or_else(|e| fail(kernel, e, 2));
    let mut load = SliceLoad {
        window: window.unwrap_or(1).max(1),
        counts: BTreeMap::new(),
        slices: cfg.l2.slices as usize,
    };
    let s = match window {
        Some(_) => sim.run(&mut load),
        None => sim.run(&mut ()),
    }
    .unwrap_or_else(|e| fail(kernel, e, 1));
    println!("cycles {}", s.cycles);
    println!("{:#?}", s.memory);
    if window.is_some() && !load.counts.is_empty() {
        let (mut peak, mut mean, mut idle, mut n) = (0f64, 0f64, 0f64, 0f64);
        for w in load.counts.values() {
            let total: u32 = w.iter().sum();
            mean += total as f64 / w.len() as f64;
            peak += *w.iter().max().unwrap_or(&0) as f64;
            idle += w.iter().filter(|&&c| c == 0).count() as f64 / w.len() as f64;
            n += 1.0;
        }
        println!(
            "slices: {} windows of {} cycles; busiest over mean {:.2}; idle slices {:.1}%",
            n,
            load.window,
            peak / mean,
            100.0 * idle / n
        );
    }
}
