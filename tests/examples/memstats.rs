//! The memory hierarchy's counters for one kernel under one configuration
//! file (a calibration aid): `memstats KERNEL CONFIG.toml` prints the
//! cycles and every field of `MemStats` (far reads, shadow copies and their
//! hits, MSHR merges, which the reports do not show).
use simfa_core::{NoStream, Simulator};
use std::path::Path;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [kernel, config] = &args[..] else {
        eprintln!("usage: memstats KERNEL CONFIG.toml");
        std::process::exit(2);
    };
    let k = simfa_std::load::load_kernel(Path::new(kernel)).unwrap_or_else(|e| {
        eprintln!("{kernel}: {e}");
        std::process::exit(2)
    });
    let cfg = simfa_std::config::load_config(Path::new(config)).unwrap_or_else(|e| {
        eprintln!("{config}: {e}");
        std::process::exit(2)
    });
    let bytes = Simulator::<NoStream>::arena_size(&cfg, &k).unwrap_or_else(|e| {
        eprintln!("{kernel}: {e}");
        std::process::exit(2)
    });
    let mut arena = vec![0u8; bytes];
    let mut sim = Simulator::new(&cfg, &k, &mut arena).unwrap_or_else(|e| {
        eprintln!("{kernel}: {e}");
        std::process::exit(2)
    });
    let s = sim.run(&mut ()).unwrap_or_else(|e| {
        eprintln!("{kernel}: {e}");
        std::process::exit(1)
    });
    println!("cycles {}", s.cycles);
    println!("{:#?}", s.memory);
}
