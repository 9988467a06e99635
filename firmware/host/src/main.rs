//! Builds the fixed sample kernels of [`simfa_core::samples`], simulates
//! each and prints `NAME CYCLES DIGEST` per sample and the combined digest,
//! in the same format as the Cortex-M firmware (`firmware/device/src/main.rs`),
//! then the fixed-port samples with the external memory port served here.
//! With `--arena` it also prints each sample's arena size to stderr.

use simfa_core::config::MemoryModel;
use simfa_core::samples::{self, SAMPLES};
use simfa_core::{Kernel, NoStream, Simulator};
use std::process::ExitCode;

fn main() -> ExitCode {
    let show_arena = std::env::args().any(|a| a == "--arena");
    let mut kernel = Box::new(Kernel::default());
    let mut results = [(0u64, 0u64); SAMPLES];
    for (i, result) in results.iter_mut().enumerate() {
        let cfg = samples::build(i, &mut kernel).expect("a sample");
        let need = match Simulator::<NoStream>::arena_size(&cfg, &kernel) {
            Ok(n) => n,
            Err(e) => {
                eprintln!("error: {}: {e}", samples::name(i));
                return ExitCode::FAILURE;
            }
        };
        if show_arena {
            eprintln!("{} arena {need} bytes", samples::name(i));
        }
        let mut arena = vec![0u8; need];
        let summary = match Simulator::new(&cfg, &kernel, &mut arena).map(|mut s| s.run(&mut ())) {
            Ok(Ok(s)) => s,
            Ok(Err(e)) => {
                eprintln!("error: {}: {e}", samples::name(i));
                return ExitCode::FAILURE;
            }
            Err(e) => {
                eprintln!("error: {}: {e}", samples::name(i));
                return ExitCode::FAILURE;
            }
        };
        *result = (summary.cycles, summary.digest);
        println!(
            "{} {} {:016x}",
            samples::name(i),
            summary.cycles,
            summary.digest
        );
    }
    println!("combined {:016x}", samples::combine(&results));
    // The fixed-port samples again with memory = "external", served here
    // as the fixed port would (as the firmware does).
    for i in [0, 3] {
        let mut cfg = samples::build(i, &mut kernel).expect("a sample");
        cfg.memory = MemoryModel::External;
        let need = Simulator::<NoStream>::arena_size(&cfg, &kernel).expect("an arena size");
        let mut arena = vec![0u8; need];
        let mut sim = Simulator::new(&cfg, &kernel, &mut arena).expect("a simulator");
        let Some(Ok(summary)) = samples::run_external(&mut sim, &cfg) else {
            eprintln!("error: {}+external: the run failed", samples::name(i));
            return ExitCode::FAILURE;
        };
        println!(
            "{}+external {} {:016x}",
            samples::name(i),
            summary.cycles,
            summary.digest
        );
    }
    ExitCode::SUCCESS
}
