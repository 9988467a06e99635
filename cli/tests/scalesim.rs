//! `simfa check scalesim` through the real binary on the hand-made traces
//! of `tests/fixtures/scalesim/`: exit status 1 with the violations, 0 when
//! clean, the JSON form, and `--compare`.

mod common;
use common::{s, simfa_unchecked};

use std::path::{Path, PathBuf};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/fixtures/scalesim")
        .join(name)
}

#[test]
fn violations_exit_1_and_are_listed() {
    let k = fixture("kinds");
    let o = simfa_unchecked(&["check", "scalesim", s(&k)]);
    assert_eq!(o.status.code(), Some(1));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        out.contains(
            "violating addresses: read-without-transfer 1, read-before-transfer 1, hit-too-soon 1"
        ),
        "{out}"
    );
    assert!(out.contains("cold interval  5 cycles (-2..3)"), "{out}");
    assert!(
        out.contains("before its earliest transfer completed at cycle 10"),
        "{out}"
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("3 violating reads"), "{err}");
}

#[test]
fn clean_exits_0_and_json_has_the_counts() {
    let c = fixture("clean");
    let o = simfa_unchecked(&["check", "scalesim", s(&c)]);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let k = fixture("kinds");
    let o = simfa_unchecked(&["check", "scalesim", s(&k), "--json"]);
    assert_eq!(o.status.code(), Some(1));
    let j: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let ifmap = &j["layers"][0]["operands"][0];
    assert_eq!(ifmap["violating_addresses"], serde_json::json!([1, 1, 1]));
    assert_eq!(ifmap["first"][0]["kind"], "read-without-transfer");
    assert_eq!(j["layers"][0]["compute_field"]["cycles"], 2);
}

#[test]
fn compare_ranks_and_fails_with_a_failing_run() {
    let (k, c) = (fixture("kinds"), fixture("clean"));
    let o = simfa_unchecked(&["check", "scalesim", "--compare", s(&k), s(&c)]);
    assert_eq!(o.status.code(), Some(1));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        out.contains("fastest: compute field os = ws; cold interval os = ws"),
        "{out}"
    );
    assert!(out.contains("1 of 2 runs fail"), "{out}");
    let o = simfa_unchecked(&["check", "scalesim", "--compare", s(&c), s(&c)]);
    assert_eq!(o.status.code(), Some(0));
}
