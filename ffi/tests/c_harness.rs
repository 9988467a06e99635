//! Compiles `tests/harness.c` with the system C compiler, links it against
//! the crate's staticlib, runs it, and checks every sample's cycles and
//! digest against the Rust API's. Skips (and says so) only when no C
//! compiler is installed.

use std::path::{Path, PathBuf};
use std::process::Command;

use simfa_core::config::MemoryModel;
use simfa_core::{samples, Cycle, Kernel, Simulator, Status};

/// The staticlib cargo built for this test run, beside the test binary.
fn staticlib() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let deps = exe.parent().unwrap();
    let profile = deps.parent().unwrap();
    for dir in [profile, deps] {
        let p = dir.join("libsimfa_ffi.a");
        if p.exists() {
            return p;
        }
    }
    panic!("libsimfa_ffi.a not found next to {}", exe.display());
}

fn compiler() -> Option<String> {
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    Command::new(&cc)
        .arg("--version")
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|_| cc)
}

/// Builds the harness; `None` (after a notice) when there is no compiler.
fn build(source: &str, name: &str) -> Option<PathBuf> {
    let Some(cc) = compiler() else {
        eprintln!("SKIPPED: no C compiler (`cc`, or $CC) found; the C harness did not run");
        return None;
    };
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let out = Path::new(env!("CARGO_TARGET_TMPDIR")).join(name);
    let status = Command::new(cc)
        .args([
            "-std=c11",
            "-O1",
            "-Wall",
            "-Wextra",
            "-Werror",
            "-pedantic",
        ])
        .arg("-I")
        .arg(dir.join("../include"))
        .arg(dir.join("tests").join(source))
        .arg(staticlib())
        .args(["-lpthread", "-ldl", "-lm", "-o"])
        .arg(&out)
        .status()
        .unwrap();
    assert!(status.success(), "compiling {source} failed");
    Some(out)
}

/// (cycles, digest) of every sample through the Rust API.
fn rust_results() -> Vec<(u64, u64)> {
    (0..samples::SAMPLES)
        .map(|i| {
            let mut k = Kernel::default();
            let cfg = samples::build(i, &mut k).unwrap();
            let mut arena =
                vec![0u8; Simulator::<simfa_core::NoStream>::arena_size(&cfg, &k).unwrap()];
            let s = Simulator::new(&cfg, &k, &mut arena)
                .unwrap()
                .run(&mut ())
                .unwrap();
            (s.cycles, s.digest)
        })
        .collect()
}

/// The numbers of the lines that start with `tag`: the digest (third
/// field) is hexadecimal, the rest decimal.
fn parse(stdout: &str, tag: &str) -> Vec<Vec<u64>> {
    stdout
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f.first() == Some(&tag)).then(|| {
                f[2..]
                    .iter()
                    .enumerate()
                    .map(|(j, x)| {
                        if j == 1 {
                            u64::from_str_radix(x, 16).unwrap()
                        } else {
                            x.parse().unwrap()
                        }
                    })
                    .collect()
            })
        })
        .collect()
}

/// Every sample with memory = external, answered like the fixed port by a
/// Rust host: (cycles, digest, tma_ops, bytes_loaded, bytes_stored). For
/// the samples on the fixed port, also checks the cycles and counters
/// against the fixed port's own run.
fn rust_external() -> Vec<Vec<u64>> {
    (0..samples::SAMPLES)
        .map(|i| {
            let mut k = Kernel::default();
            let fixed_cfg = samples::build(i, &mut k).unwrap();
            let mut cfg = fixed_cfg.clone();
            cfg.memory = MemoryModel::External;
            let n = Simulator::<simfa_core::NoStream>::arena_size(&cfg, &k).unwrap();
            let mut arena = vec![0u8; n];
            let mut sim = Simulator::new(&cfg, &k, &mut arena).unwrap();
            let mut free_at = vec![0u64; cfg.sms as usize];
            while sim.step(&mut ()).unwrap() == Status::Running {
                while let Some(r) = sim.ext_pop() {
                    let f = &mut free_at[r.sm as usize];
                    let end = r.cycle.max(*f) + cfg.port.bytes_per_cycle.div_ceil(r.bytes);
                    *f = end;
                    let at = Cycle(end + cfg.port.latency as u64);
                    sim.ext_complete(r.id, at).unwrap();
                }
            }
            let s = sim.summary();
            let st = s.stats;
            let row = vec![
                s.cycles,
                s.digest,
                st.tma_ops,
                st.bytes_loaded,
                st.bytes_stored,
            ];
            if fixed_cfg.memory == MemoryModel::Fixed {
                let n = Simulator::<simfa_core::NoStream>::arena_size(&fixed_cfg, &k).unwrap();
                let mut a = vec![0u8; n];
                let f = Simulator::new(&fixed_cfg, &k, &mut a)
                    .unwrap()
                    .run(&mut ())
                    .unwrap();
                let fs = f.stats;
                assert_eq!(
                    row,
                    [
                        f.cycles,
                        f.digest,
                        fs.tma_ops,
                        fs.bytes_loaded,
                        fs.bytes_stored
                    ],
                    "sample {i}: the fixed port's cycles, digest and counters"
                );
            }
            row
        })
        .collect()
}

#[test]
fn c_harness_matches_the_rust_digests() {
    let Some(exe) = build("harness.c", "harness") else {
        return;
    };
    let out = Command::new(&exe).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "harness failed: {}\n{stdout}",
        String::from_utf8_lossy(&out.stderr)
    );
    print!("{stdout}");
    let own: Vec<(u64, u64)> = parse(&stdout, "sample")
        .iter()
        .map(|r| (r[0], r[1]))
        .collect();
    assert_eq!(own, rust_results());
    assert_eq!(parse(&stdout, "external"), rust_external());
}
