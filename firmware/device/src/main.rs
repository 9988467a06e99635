//! simfa on a Cortex-M3: builds the fixed sample kernels of
//! [`simfa_core::samples`], simulates each in a static arena (no heap, no
//! allocator) and prints `NAME CYCLES DIGEST` per sample and the combined
//! digest over semihosting, then the fixed-port samples again with the
//! external memory port served by this program, exactly as the host
//! program `firmware/host` does, so `scripts/crossdigest.sh` can compare
//! the outputs byte for byte.
//!
//! Run it with `cargo run --release` inside `firmware/device/` (QEMU
//! `mps2-an385`, see `.cargo/config.toml`). It exits through semihosting:
//! status 0 when every sample ran, 1 otherwise.
#![no_std]
#![no_main]

use cortex_m_rt::entry;
use cortex_m_semihosting::{debug, hprintln};
use heapless::{String, Vec};
use simfa_core::samples::{self, SAMPLES};
use simfa_core::config::MemoryModel;
use simfa_core::{Cluster, CtaOrder, Kernel, NoStream, Simulator};

/// Bytes of the static arena; every sample's `Simulator::arena_size` must
/// fit (the host program prints the largest).
const ARENA_BYTES: usize = 512 * 1024;

/// An empty kernel, built at compile time so it can live in a `static`.
const EMPTY: Kernel = Kernel {
    name: String::new(),
    grid: [1, 1, 1],
    order: CtaOrder::Linear,
    cluster: Cluster::NONE,
    smem_bytes: 0,
    roles: Vec::new(),
    maps: Vec::new(),
    mbarriers: Vec::new(),
    stages: Vec::new(),
    exprs: Vec::new(),
    code: Vec::new(),
};

/// Waits forever (semihosting's exit has already stopped QEMU).
fn halt() -> ! {
    loop {
        core::hint::spin_loop();
    }
}

fn fail(what: &str) -> ! {
    hprintln!("error: {}", what);
    debug::exit(debug::EXIT_FAILURE);
    halt()
}

#[entry]
fn main() -> ! {
    // cortex-m-rt turns these into `&'static mut` references, safely.
    static mut KERNEL: Kernel = EMPTY;
    static mut ARENA: [u8; ARENA_BYTES] = [0; ARENA_BYTES];

    let mut results = [(0u64, 0u64); SAMPLES];
    for (i, result) in results.iter_mut().enumerate() {
        let Some(cfg) = samples::build(i, KERNEL) else {
            fail("no such sample")
        };
        let kernel: &Kernel = KERNEL;
        let need = match Simulator::<NoStream>::arena_size(&cfg, kernel) {
            Ok(n) => n,
            Err(_) => fail("cannot size the arena"),
        };
        if need > ARENA.len() {
            hprintln!(
                "error: {} needs {} arena bytes, ARENA_BYTES is {}",
                samples::name(i),
                need,
                ARENA_BYTES
            );
            fail("arena too small");
        }
        let mut sim = match Simulator::new(&cfg, kernel, &mut ARENA[..need]) {
            Ok(s) => s,
            Err(_) => fail("cannot build the simulator"),
        };
        let summary = match sim.run(&mut ()) {
            Ok(s) => s,
            Err(_) => fail("the simulation failed"),
        };
        *result = (summary.cycles, summary.digest);
        hprintln!(
            "{} {} {:016x}",
            samples::name(i),
            summary.cycles,
            summary.digest
        );
    }
    hprintln!("combined {:016x}", samples::combine(&results));
    // The fixed-port samples again with memory = "external", this program
    // answering the port's requests as the fixed port would.
    for i in [0, 3] {
        let Some(mut cfg) = samples::build(i, KERNEL) else {
            fail("no such sample")
        };
        cfg.memory = MemoryModel::External;
        let kernel: &Kernel = KERNEL;
        let need = match Simulator::<NoStream>::arena_size(&cfg, kernel) {
            Ok(n) if n <= ARENA.len() => n,
            _ => fail("cannot size the external arena"),
        };
        let mut sim = match Simulator::new(&cfg, kernel, &mut ARENA[..need]) {
            Ok(s) => s,
            Err(_) => fail("cannot build the external simulator"),
        };
        let summary = match samples::run_external(&mut sim, &cfg) {
            Some(Ok(s)) => s,
            _ => fail("the external run failed"),
        };
        hprintln!(
            "{}+external {} {:016x}",
            samples::name(i),
            summary.cycles,
            summary.digest
        );
    }
    debug::exit(debug::EXIT_SUCCESS);
    halt()
}

#[panic_handler]
fn panic(info: &core::panic::PanicInfo) -> ! {
    hprintln!("panic: {}", info);
    debug::exit(debug::EXIT_FAILURE);
    halt()
}
