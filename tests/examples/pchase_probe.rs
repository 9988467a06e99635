//! Prints the memory-system counters of pointer chases (a calibration aid).
use simfa_core::{GpuConfig, NoStream, Simulator};
use simfa_std::gen::pchase::{pchase, PchaseParams};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let cfg = GpuConfig::h800_pcie();
    for a in &args {
        let mb: f64 = a.parse().unwrap();
        let p = PchaseParams::new((mb * 1e6) as u64);
        let k = pchase(&p).unwrap();
        let mut arena = vec![0u8; Simulator::<NoStream>::arena_size(&cfg, &k).unwrap()];
        let mut sim = Simulator::new(&cfg, &k, &mut arena).unwrap();
        let s = sim.run(&mut ()).unwrap();
        let hops = p.warmup() + p.measured_hops;
        println!(
            "{mb} MB: {} cycles, {:.1}/hop overall, {:?}",
            s.cycles,
            s.cycles as f64 / hops as f64,
            sim.mem_stats().unwrap()
        );
    }
}
