//! `simfa sweep`, end to end: outputs that do not depend on `-j` or on
//! sharding, plan errors, failed points, resuming.

mod common;

use std::collections::BTreeMap;
use std::path::Path;

use common::{s, simfa_unchecked as simfa, stderr, Scratch};

/// A tiny plan: two SM counts x two tensor speeds x two workloads (a
/// small GEMM and a small FA3), with a plot; 8 points in seconds.
const PLAN: &str = r#"gpu = "h800"

[[axis]]
key = "sms"
values = [4, 8]

[[axis]]
key = "wgmma_cycles_per_n"
values = ["1/2", { num = 1, den = 4 }]

[[axis]]
key = "workload"
values = [
  { kind = "gemm", m = 256, n = 256, k = 128 },
  { kind = "fa3", heads = 2, kv_heads = 1, seqlen = 256, hdim = 64 },
]

[output]
columns = ["cycles", "analytic.bound_cycles", "error"]
plot = { metric = "cycles", x = "sms" }
"#;

/// Every file of a sweep directory (shard subdirectories left out).
fn files(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut m = BTreeMap::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let e = e.unwrap();
        if e.file_type().unwrap().is_file() {
            let name = e.file_name().to_string_lossy().into_owned();
            m.insert(name, std::fs::read(e.path()).unwrap());
        }
    }
    m
}

fn sweep(args: &[&str]) -> std::process::Output {
    let mut v = vec!["sweep"];
    v.extend_from_slice(args);
    let o = simfa(&v);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    o
}

#[test]
fn output_does_not_depend_on_jobs_or_shards() {
    let t = Scratch::new("sweep-jobs");
    let plan = t.file("plan.toml", PLAN);
    let (one, two, sharded, merged) = (
        t.path("one"),
        t.path("two"),
        t.path("sharded"),
        t.path("merged"),
    );
    sweep(&[s(&plan), "-o", s(&one), "-j", "1"]);
    sweep(&[s(&plan), "-o", s(&two), "-j", "2"]);
    let a = files(&one);
    assert_eq!(
        a.keys().collect::<Vec<_>>(),
        ["plot.svg", "points.csv", "points.jsonl", "sweep.json"]
    );
    assert_eq!(a, files(&two), "-j 1 and -j 2 differ");
    let lines = String::from_utf8(a["points.jsonl"].clone()).unwrap();
    assert_eq!(lines.lines().count(), 8);
    for (i, l) in lines.lines().enumerate() {
        let v: serde_json::Value = serde_json::from_str(l).unwrap();
        assert_eq!(v["index"], i);
        assert_eq!(v["status"], "ok", "{l}");
        assert!(v["report"]["analytic"]["bound_cycles"].as_u64().unwrap() > 0);
    }
    // Three shards, one of them run through the environment as a Slurm
    // array task would, merged.
    for i in 0..2 {
        sweep(&[s(&plan), "-o", s(&sharded), "--shard", &format!("{i}/3")]);
    }
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_simfa"))
        .args(["sweep", s(&plan), "-o", s(&sharded), "--shard", "env"])
        .env("SLURM_ARRAY_TASK_ID", "2")
        .env("SLURM_ARRAY_TASK_COUNT", "3")
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let shards: Vec<String> = (0..3)
        .map(|i| s(&sharded.join(format!("shard-{i}-of-3"))).to_string())
        .collect();
    // Missing a shard is an error.
    let o = simfa(&["sweep", "merge", s(&merged), &shards[0], &shards[1]]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("in no shard"), "{}", stderr(&o));
    let mut args = vec!["merge", s(&merged)];
    args.extend(shards.iter().map(String::as_str));
    sweep(&args);
    assert_eq!(
        a,
        files(&merged),
        "sharded and merged differs from unsharded"
    );
}

#[test]
fn plan_errors_name_file_line_and_key() {
    let t = Scratch::new("sweep-errors");
    let head = "gpu = \"h800\"\nworkload = { kind = \"gemm\", m = 256, n = 256, k = 128 }\n";
    for (name, body, line, key) in [
        (
            "unknown.toml",
            "[[axis]]\nkey = \"l2.slicez\"\nvalues = [40]\n",
            3,
            "l2.slicez",
        ),
        (
            "empty.toml",
            "[[axis]]\nkey = \"sms\"\nvalues = []\n",
            3,
            "sms",
        ),
        (
            "range.toml",
            "[[axis]]\nkey = \"sms\"\nrange = { from = 8, to = 4, step = 1 }\n",
            3,
            "sms",
        ),
        (
            "type.toml",
            "\n[[axis]]\nkey = \"clock_mhz\"\nvalues = [1830, \"fast\"]\n",
            4,
            "clock_mhz",
        ),
    ] {
        let plan = t.file(name, &format!("{head}{body}"));
        let out = t.path(&format!("{name}.out"));
        let o = simfa(&["sweep", s(&plan), "-o", s(&out)]);
        assert_eq!(o.status.code(), Some(2), "{name}: {}", stderr(&o));
        let want = format!("{}:{line}: {key}: ", s(&plan));
        assert!(stderr(&o).contains(&want), "{name}: {}", stderr(&o));
        assert!(!out.exists(), "{name}: wrote {}", out.display());
    }
    // A bad workload field names the workload's line.
    let plan = t.file(
        "workload.toml",
        "gpu = \"h800\"\n\nworkload = { kind = \"gemm\", m = 256, n = 256, k = 128, q = 1 }\n",
    );
    let o = simfa(&["sweep", s(&plan), "-o", s(&t.path("w.out"))]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains(&format!("{}:3: workload: ", s(&plan))),
        "{}",
        stderr(&o)
    );
    assert!(!t.path("w.out").exists());
}

#[test]
fn failed_points_are_recorded_and_the_sweep_resumes() {
    let t = Scratch::new("sweep-fail");
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let deadlock = root.join("examples/deadlock.sasm");
    let plan = t.file(
        "plan.toml",
        &format!(
            "gpu = \"h800\"\n[[axis]]\nkey = \"sms\"\nvalues = [0, 4]\n\
             [[axis]]\nkey = \"workload\"\nvalues = [\
             {{ kind = \"gemm\", m = 256, n = 256, k = 128 }}, \
             {{ kind = \"kernel\", file = \"{}\" }}]\n",
            s(&deadlock)
        ),
    );
    let out = t.path("out");
    let o = sweep(&[s(&plan), "-o", s(&out)]);
    assert!(
        stderr(&o).contains("4 points (0 done before, 4 run, 3 failed)"),
        "{}",
        stderr(&o)
    );
    let text = std::fs::read_to_string(out.join("points.jsonl")).unwrap();
    let rows: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let status: Vec<&str> = rows.iter().map(|r| r["status"].as_str().unwrap()).collect();
    assert_eq!(status, ["failed", "failed", "ok", "failed"]);
    assert!(
        rows[0]["error"].as_str().unwrap().contains("sms"),
        "{}",
        rows[0]
    );
    assert!(
        rows[3]["error"].as_str().unwrap().contains("deadlock"),
        "{}",
        rows[3]
    );
    let csv = std::fs::read_to_string(out.join("points.csv")).unwrap();
    assert_eq!(csv.lines().count(), 5, "{csv}");

    // Resume: drop one finished row and cut another short, as a killed
    // sweep leaves them; only those two run again, and the files come out
    // as before.
    let before = files(&out);
    let mut lines: Vec<&str> = text.lines().collect();
    lines.remove(2);
    let cut = &lines[0][..20];
    let partial = format!("{}\n{}\n{cut}", lines[1], lines[2]);
    std::fs::write(out.join("points.jsonl"), partial).unwrap();
    let o = sweep(&[s(&plan), "-o", s(&out)]);
    assert!(
        stderr(&o).contains("4 points (2 done before, 2 run, 3 failed)"),
        "{}",
        stderr(&o)
    );
    assert_eq!(before, files(&out));
    // Nothing left to do.
    let o = sweep(&[s(&plan), "-o", s(&out), "-j", "1"]);
    assert!(
        stderr(&o).contains("(4 done before, 0 run"),
        "{}",
        stderr(&o)
    );
    assert_eq!(before, files(&out));
}
