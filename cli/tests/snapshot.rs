//! End-to-end tests of `--save-at CYCLE FILE` and `--resume FILE`.

mod common;
use common::{json, s, simfa, stderr, Scratch};

fn gen(dir: &Scratch, name: &str, k: &str) -> std::path::PathBuf {
    let p = dir.path(name);
    let o = simfa(&[
        "gen",
        "gemm",
        "--m",
        "256",
        "--n",
        "256",
        "--k",
        k,
        "-o",
        s(&p),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    p
}

#[test]
fn resumed_run_reports_the_uninterrupted_run() {
    let dir = Scratch::new("snap");
    let k = gen(&dir, "k.sasm", "512");
    let snap = dir.path("snap.bin");
    for gpu in ["h800", "h20"] {
        let straight = json(&simfa(&["run", s(&k), "--gpu", gpu, "--json"]));
        let saving = json(&simfa(&[
            "run",
            s(&k),
            "--gpu",
            gpu,
            "--json",
            "--save-at",
            "5000",
            s(&snap),
        ]));
        assert_eq!(saving, straight);
        assert!(snap.exists());
        let resumed = json(&simfa(&[
            "run",
            s(&k),
            "--gpu",
            gpu,
            "--json",
            "--resume",
            s(&snap),
        ]));
        assert_eq!(resumed["digest"], straight["digest"]);
        // The resumed run has no checker report (see `common::simfa`).
        let mut unchecked = straight.clone();
        assert_eq!(unchecked["check"]["clean"], true);
        unchecked.as_object_mut().unwrap().remove("check");
        assert_eq!(resumed, unchecked);
    }
    // Text output prints the same digest.
    let o = simfa(&["run", s(&k), "--resume", s(&snap), "--gpu", "h20"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let straight = json(&simfa(&["run", s(&k), "--gpu", "h20", "--json"]));
    let digest = straight["digest"].as_str().unwrap();
    assert!(String::from_utf8_lossy(&o.stdout).contains(digest));
}

#[test]
fn damaged_or_foreign_snapshots_exit_2_naming_the_file() {
    let dir = Scratch::new("snap-bad");
    let k = gen(&dir, "k.sasm", "512");
    let other = gen(&dir, "other.sasm", "1024");
    let snap = dir.path("snap.bin");
    let o = simfa(&["run", s(&k), "--save-at", "3000", s(&snap), "--json"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let good = std::fs::read(&snap).unwrap();

    let mut flipped = good.clone();
    let mid = flipped.len() / 2;
    flipped[mid] ^= 0x10;
    let truncated = good[..good.len() - 100].to_vec();
    let mut magic = good.clone();
    magic[0] = b'X';
    let cases: [(&str, Vec<u8>); 4] = [
        ("flipped.bin", flipped),
        ("truncated.bin", truncated),
        ("magic.bin", magic),
        ("empty.bin", Vec::new()),
    ];
    for (name, bytes) in cases {
        let p = dir.path(name);
        std::fs::write(&p, bytes).unwrap();
        let o = simfa(&["run", s(&k), "--resume", s(&p)]);
        assert_eq!(o.status.code(), Some(2), "{name}: {}", stderr(&o));
        assert!(stderr(&o).contains(name), "{name}: {}", stderr(&o));
    }
    // Another kernel.
    let o = simfa(&["run", s(&other), "--resume", s(&snap)]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("snap.bin"), "{}", stderr(&o));
    assert!(stderr(&o).contains("another"), "{}", stderr(&o));
    // A missing file.
    let o = simfa(&["run", s(&k), "--resume", s(&dir.path("missing.bin"))]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("missing.bin"), "{}", stderr(&o));
    // A bad cycle.
    let o = simfa(&["run", s(&k), "--save-at", "soon", s(&snap)]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
}
