//! Throughput of the memory system alone: cache-line requests per wall
//! second through the coalescers, the L2 and the HBM controllers, on one
//! core. Run with `cargo bench -p simfa-tests --bench memory`.
//!
//! Three request streams on the H800 preset, each kept at the TMA engines'
//! in-flight limit (256 lines per SM) like a bandwidth-bound kernel:
//! streaming (every SM reads its own contiguous range: L2 misses, row hits
//! in DRAM), reuse (all SMs read the same 8 MiB: L2 hits and coalescing) and
//! random (uniform over 4 GiB: misses and row conflicts). Each stream runs
//! five times; the median rate is reported.

use std::time::Instant;

use simfa_core::arena::{Arena, Layout};
use simfa_core::mem::system::{LineRequest, MemorySystem};
use simfa_core::rand::Rng;
use simfa_core::GpuConfig;

fn stream(name: &str, total: u64, addr: impl Fn(u16, u64, &mut Rng) -> u64) -> f64 {
    let cfg = GpuConfig::h800();
    let sms = cfg.sms;
    let per_sm = cfg.tma.max_lines as u64;
    let mut l = Layout::new();
    MemorySystem::layout(&cfg.l2, &cfg.dram, sms, cfg.tma.max_lines, &mut l).unwrap();
    let mut buf = vec![0u8; l.bytes()];
    let mut a = Arena::new(&mut buf);
    let mut mem = MemorySystem::new(&cfg.l2, &cfg.dram, sms, cfg.tma.max_lines, 1, &mut a).unwrap();
    let mut rng = Rng::new(7);
    let mut inflight = vec![0u64; sms as usize];
    let mut issued = vec![0u64; sms as usize];
    let mut done = 0u64;
    let mut sent = 0u64;
    let mut now = 0u64;
    let start = Instant::now();
    while done < total {
        // Each SM offers one request per cycle while below its limit.
        for sm in 0..sms {
            let s = sm as usize;
            if inflight[s] < per_sm && sent < total {
                let r = LineRequest {
                    sm,
                    addr: addr(sm, issued[s], &mut rng),
                    write: false,
                    token: sm as u32,
                };
                if mem.try_request(now, &r).is_ok() {
                    inflight[s] += 1;
                    issued[s] += 1;
                    sent += 1;
                }
            }
        }
        mem.advance(now, &mut |token, _| {
            inflight[token as usize] -= 1;
            done += 1;
        });
        now += 1;
    }
    let secs = start.elapsed().as_secs_f64();
    if std::env::var_os("SIMFA_BENCH_STATS").is_some() {
        eprintln!("  {:?}\n  {:?}", mem.stats(), mem.dram().stats());
    }
    let rate = total as f64 / secs;
    eprintln!(
        "  {name:<10} {total} lines in {now} cycles, {:.3} s: {:.1} M lines/s ({:.1} B/cycle)",
        secs,
        rate / 1e6,
        total as f64 * 128.0 / now as f64
    );
    rate
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

fn main() {
    let total: u64 = std::env::var("SIMFA_BENCH_LINES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2_000_000);
    for (name, f) in [
        (
            "streaming",
            &(|sm: u16, i: u64, _: &mut Rng| ((sm as u64) << 32) + i * 128)
                as &dyn Fn(u16, u64, &mut Rng) -> u64,
        ),
        ("reuse", &|_, i, _| (i % 65536) * 128),
        ("random", &|_, _, r: &mut Rng| r.below(1 << 25) * 128),
    ] {
        let runs: Vec<f64> = (0..5).map(|_| stream(name, total, f)).collect();
        println!(
            "{name}: median {:.1} M cache-line requests per second",
            median(runs) / 1e6
        );
    }
}
