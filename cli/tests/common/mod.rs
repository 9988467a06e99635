//! Helpers shared by the CLI's end-to-end tests: running the binary,
//! reading its output, scratch directories.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::atomic::{AtomicU32, Ordering};

/// Runs the binary. Every simulating command (`run`, `gemm`, `fa3`) runs
/// with the read-after-transfer checker on, except resumed runs (the
/// checker would only see their second half).
pub fn simfa(args: &[&str]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_simfa"));
    cmd.args(args);
    let simulates = matches!(args.first(), Some(&"run" | &"gemm" | &"fa3"));
    if simulates && !args.contains(&"--check") && !args.contains(&"--resume") {
        cmd.arg("--check");
    }
    cmd.output().expect("the simfa binary runs")
}

/// Runs the binary exactly as given (no implicit `--check`).
pub fn simfa_unchecked(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_simfa"))
        .args(args)
        .output()
        .expect("the simfa binary runs")
}

/// A fresh scratch directory, removed when dropped.
pub struct Scratch(pub PathBuf);

impl Scratch {
    pub fn new(tag: &str) -> Scratch {
        static N: AtomicU32 = AtomicU32::new(0);
        let d = std::env::temp_dir().join(format!(
            "simfa-cli-{tag}-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&d).unwrap();
        Scratch(d)
    }

    pub fn file(&self, name: &str, contents: &str) -> PathBuf {
        let p = self.0.join(name);
        std::fs::write(&p, contents).unwrap();
        p
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

pub fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

pub fn json(o: &Output) -> serde_json::Value {
    assert_eq!(o.status.code(), Some(0), "stderr: {}", stderr(o));
    serde_json::from_slice(&o.stdout).expect("stdout is exactly one JSON value")
}
