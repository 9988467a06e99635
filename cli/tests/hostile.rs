//! Every malformed input in `tests/hostile/` through the real `simfa`
//! binary (kernels through `run` and `convert`, configurations through
//! `run --config`, TTGIR files through `ttgir sites` and `ttgir
//! instrument`, TTGIR kernels and launch files through `ttgir run` and
//! `ttgir gen`, Proton traces through `import proton`, FA3 event logs through
//! `import fa3-log`, SCALE-Sim traces and configurations through `check
//! scalesim`): the exit status and message that `tests/hostile/expect.toml`
//! gives, the file named in the message, no panic, no hang, and no output
//! file (or temporary file) left behind by a failed command.

mod common;
use common::{s, Scratch};

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

/// Longest any one command may take (a debug build on a loaded machine);
/// a hang fails the test instead of stalling the suite.
const TIMEOUT: Duration = Duration::from_secs(120);

fn hostile_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/hostile")
        .canonicalize()
        .expect("tests/hostile exists")
}

fn valid_kernel() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../examples/ring.sasm")
        .canonicalize()
        .expect("examples/ring.sasm exists")
}

/// Runs `simfa args`, killing it after [`TIMEOUT`].
fn simfa_timed(args: &[&str]) -> Result<Output, String> {
    let mut child = Command::new(env!("CARGO_BIN_EXE_simfa"))
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot start simfa: {e}"))?;
    let start = Instant::now();
    loop {
        match child.try_wait() {
            Ok(Some(_)) => break,
            Ok(None) if start.elapsed() > TIMEOUT => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!("simfa {args:?} still running after {TIMEOUT:?}"));
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(20)),
            Err(e) => return Err(format!("waiting for simfa: {e}")),
        }
    }
    // The pipes hold everything the short-lived process wrote.
    child
        .wait_with_output()
        .map_err(|e| format!("reading simfa's output: {e}"))
}

/// One expectation of `expect.toml`.
struct Case {
    file: String,
    exit: i32,
    error: String,
    /// The file loads (the failure comes later: a CTA that does not fit
    /// the GPU, a simulation error), so `convert` succeeds. Default: only
    /// for exit status 1.
    loads: bool,
}

fn cases() -> Vec<Case> {
    let text = std::fs::read_to_string(hostile_dir().join("expect.toml")).unwrap();
    let table: toml::Table = text.parse().expect("expect.toml is valid TOML");
    table
        .into_iter()
        .map(|(file, v)| {
            let exit = v["exit"].as_integer().expect("exit is an integer") as i32;
            let error = v["error"].as_str().expect("error is a string").to_string();
            let loads = v
                .get("loads")
                .map_or(exit != 2, |l| l.as_bool().expect("loads is a boolean"));
            Case {
                file,
                exit,
                error,
                loads,
            }
        })
        .collect()
}

/// Checks one command's outcome; `out_dir` must hold nothing afterwards.
fn check(case: &Case, what: &str, args: &[&str], path: &str, out_dir: &Path) -> Result<(), String> {
    let o = simfa_timed(args)?;
    let err = String::from_utf8_lossy(&o.stderr);
    let fail = |why: &str| Err(format!("{} ({what}): {why}\nstderr: {err}", case.file));
    if err.contains("panicked") || o.status.code() == Some(101) {
        return fail("panicked");
    }
    if o.status.code() != Some(case.exit) {
        return fail(&format!(
            "exit status {:?}, expected {}",
            o.status.code(),
            case.exit
        ));
    }
    if !err.starts_with("error: ") {
        return fail("the message does not start with 'error: '");
    }
    if !err.contains(path) {
        return fail("the message does not name the file");
    }
    if !err.contains(&case.error) {
        return fail(&format!("the message lacks {:?}", case.error));
    }
    if !o.stdout.is_empty() {
        return fail("a failed command printed a partial report on stdout");
    }
    let left: Vec<_> = std::fs::read_dir(out_dir)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    if !left.is_empty() {
        return fail(&format!("files left behind: {left:?}"));
    }
    Ok(())
}

/// A file of `tests/fixtures/ttgir-compiled/`.
fn ttgir_compiled(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/fixtures/ttgir-compiled")
        .join(name)
        .canonicalize()
        .expect("the compiled TTGIR fixture exists")
}

/// The valid SCALE-Sim layer that hostile traces are dropped into.
fn scalesim_clean() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/fixtures/scalesim/clean")
        .canonicalize()
        .expect("tests/fixtures/scalesim/clean exists")
}

/// A SCALE-Sim trace (`scalesim_sram_*` as the IFMAP SRAM trace,
/// `scalesim_dram_*` as the IFMAP DRAM trace) in a copy of the clean
/// fixture, checked there; the message must name the copy.
fn run_scalesim_trace(case: &Case, path: &Path, out_dir: &Path) -> Result<(), String> {
    let run = Scratch::new("hostile-scalesim");
    for e in std::fs::read_dir(scalesim_clean()).unwrap() {
        let e = e.unwrap();
        std::fs::copy(e.path(), run.0.join(e.file_name())).unwrap();
    }
    let role = if case.file.starts_with("scalesim_sram_") {
        "IFMAP_SRAM_TRACE.csv"
    } else {
        "IFMAP_DRAM_TRACE.csv"
    };
    let target = run.0.join(role);
    std::fs::copy(path, &target).unwrap();
    let args = ["check", "scalesim", s(&run.0)];
    check(case, "check scalesim", &args, s(&target), out_dir)
}

fn run_case(case: &Case) -> Result<(), String> {
    let path = hostile_dir().join(&case.file);
    let p = s(&path);
    let scratch = Scratch::new("hostile");
    let trace = scratch.path("out.trace");
    if case.file.ends_with(".csv") {
        return run_scalesim_trace(case, &path, &scratch.0);
    }
    if case.file.ends_with(".cfg") {
        let clean = scalesim_clean();
        let args = ["check", "scalesim", s(&clean), "--cfg", p];
        return check(case, "check scalesim --cfg", &args, p, &scratch.0);
    }
    if case.file.ends_with(".mlir") {
        check(case, "ttgir sites", &["ttgir", "sites", p], p, &scratch.0)?;
        let out = scratch.path("out.mlir");
        let args = ["ttgir", "instrument", p, "-o", s(&out)];
        return check(case, "ttgir instrument", &args, p, &scratch.0);
    }
    if case.file.ends_with(".ttgir") {
        let launch = ttgir_compiled("hostile.launch.toml");
        let args = ["ttgir", "run", p, "--launch", s(&launch)];
        check(case, "ttgir run", &args, p, &scratch.0)?;
        let out = scratch.path("out.sfk");
        let args = ["ttgir", "gen", p, "--launch", s(&launch), "-o", s(&out)];
        return check(case, "ttgir gen", &args, p, &scratch.0);
    }
    if case.file.ends_with(".launch") {
        let kernel = ttgir_compiled("tma_gemm.ttgir");
        let args = ["ttgir", "run", s(&kernel), "--launch", p];
        return check(case, "ttgir run --launch", &args, p, &scratch.0);
    }
    if case.file.ends_with(".log") {
        let out = scratch.path("out.sfk");
        let args = ["import", "fa3-log", p, "-o", s(&out)];
        return check(case, "import fa3-log", &args, p, &scratch.0);
    }
    if case.file.ends_with(".json") {
        let out = scratch.path("out.sfk");
        let args = ["import", "proton", p, "-o", s(&out)];
        return check(case, "import proton", &args, p, &scratch.0);
    }
    if case.file.ends_with(".toml") {
        let k = valid_kernel();
        let args = [
            "run",
            s(&k),
            "--config",
            p,
            "--json",
            "--dram-trace",
            s(&trace),
        ];
        return check(case, "run --config", &args, p, &scratch.0);
    }
    let args = ["run", p, "--json", "--dram-trace", s(&trace)];
    check(case, "run", &args, p, &scratch.0)?;
    if !case.loads {
        // A file that does not load converts to nothing, in either encoding.
        for out in ["out.sfk", "out.sasm"] {
            let out = scratch.path(out);
            check(case, "convert", &["convert", p, s(&out)], p, &scratch.0)?;
        }
    }
    Ok(())
}

#[test]
fn every_hostile_input_fails_cleanly() {
    let cases = cases();
    let mut on_disk: Vec<String> = std::fs::read_dir(hostile_dir())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n != "expect.toml")
        .collect();
    on_disk.sort();
    let mut expected: Vec<String> = cases.iter().map(|c| c.file.clone()).collect();
    expected.sort();
    assert_eq!(
        on_disk, expected,
        "every file in tests/hostile/ needs an entry in expect.toml and every entry a file"
    );
    for kind in [".sasm", ".sfk", ".toml", ".mlir", ".json", ".log", ".csv"] {
        assert!(
            cases.iter().filter(|c| c.file.ends_with(kind)).count() >= 8,
            "too few {kind} cases"
        );
    }
    // Two workers: the cases are independent processes.
    let (a, b): (Vec<&Case>, Vec<&Case>) = {
        let (a, b): (Vec<_>, Vec<_>) = cases.iter().enumerate().partition(|(i, _)| i % 2 == 0);
        (
            a.into_iter().map(|(_, c)| c).collect(),
            b.into_iter().map(|(_, c)| c).collect(),
        )
    };
    let work = |part: Vec<&Case>| -> Vec<String> {
        part.into_iter().filter_map(|c| run_case(c).err()).collect()
    };
    let failures: Vec<String> = std::thread::scope(|sc| {
        let ha = sc.spawn(|| work(a));
        let mut f = work(b);
        f.extend(ha.join().unwrap());
        f
    });
    assert!(
        failures.is_empty(),
        "{} of {} hostile inputs misbehaved:\n\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n\n")
    );
}
