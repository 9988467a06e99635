//! Compiles `tests/harness.c` with the system C compiler, links it against
//! the crate's staticlib, runs it, and checks every sample's cycles and
//! digest against the Rust API's. Skips (and says so) only when no C
//! compiler is installed.

use std::path::{Path, PathBuf};
use std::process::Command;

use simfa_core::{samples, Kernel, Simulator};

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

fn parse(stdout: &str) -> Vec<(u64, u64)> {
    stdout
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            match f.as_slice() {
                ["sample", _, c, d] => {
                    Some((c.parse().unwrap(), u64::from_str_radix(d, 16).unwrap()))
                }
                _ => None,
            }
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
    assert_eq!(parse(&stdout), rust_results());
}
