//! Runs a kernel file on a preset and prints every counter, memory
//! hierarchy included (a calibration aid): `probe FILE [GPU] [MEMORY]`.
use simfa_core::config::MemoryModel;
use simfa_core::{GpuConfig, NoStream, Simulator};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let k = simfa_std::load::load_kernel(std::path::Path::new(&args[0])).unwrap();
    let mut cfg = GpuConfig::preset(args.get(1).map_or("h800", |s| s.as_str())).unwrap();
    if let Some(m) = args.get(2) {
        cfg.memory = MemoryModel::from_name(m).expect("a memory model");
    }
    let mut arena = vec![0u8; Simulator::<NoStream>::arena_size(&cfg, &k).unwrap()];
    let mut sim = Simulator::new(&cfg, &k, &mut arena).unwrap();
    let s = sim.run(&mut ()).unwrap();
    println!("{s:#?}");
    println!("{:#?}", sim.mem_stats());
}
