//! `simfa_std::scalesim` on hand-made SCALE-Sim traces with known answers
//! (`tests/fixtures/scalesim/`, see its README), and the check that the
//! SCALE-Sim checker judges every read exactly as the shared rules
//! (`check::rules`) do.

use std::path::{Path, PathBuf};

use simfa_std::check::rules::classify_read;
use simfa_std::check::ViolationKind;
use simfa_std::scalesim::check::KINDS;
use simfa_std::scalesim::compare::compare;
use simfa_std::scalesim::{check_layer, check_run, CheckOptions, Dataflow, RunSpec};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures/scalesim")
        .join(name)
}

fn spec(name: &str) -> RunSpec {
    RunSpec {
        dir: fixture(name),
        ..RunSpec::default()
    }
}

#[test]
fn each_kind_is_found_once_at_its_address() {
    let r = check_run(&spec("kinds")).unwrap();
    assert_eq!(r.dataflow(), Some(Dataflow::Ws));
    assert_eq!(r.layers.len(), 1);
    let l = &r.layers[0];
    assert_eq!(l.name, "tiny");
    assert_eq!(l.check.rows, 3);
    assert_eq!(
        (l.check.compute_field.first, l.check.compute_field.last),
        (0, 2)
    );
    let cold = l.check.cold_interval.unwrap();
    assert_eq!((cold.first, cold.last, cold.cycles), (-2, 3, 5));
    let [ifmap, filter] = &l.check.operands;
    assert_eq!((ifmap.reads, ifmap.addresses, ifmap.transferred), (5, 5, 4));
    assert_eq!(ifmap.violating_addresses, [1, 1, 1]);
    assert_eq!(ifmap.violating_reads, [1, 1, 1]);
    let found: Vec<(ViolationKind, u64, i64, i64, Option<i64>)> = ifmap
        .first
        .iter()
        .map(|v| (v.kind, v.addr, v.lookup, v.served, v.transfer))
        .collect();
    assert_eq!(
        found,
        [
            (ViolationKind::NoTransfer, 5, 1, 2, None),
            (ViolationKind::BeforeTransfer, 6, 2, 3, Some(10)),
            (ViolationKind::HitTooSoon, 7, 2, 3, Some(3)),
        ]
    );
    assert_eq!(filter.total(), 0);
    assert_eq!((filter.reads, filter.addresses), (3, 2));
    assert_eq!(r.total(), 3);
    assert!(!r.is_clean());
}

#[test]
fn the_clean_fixture_is_clean() {
    let r = check_run(&spec("clean")).unwrap();
    assert!(r.is_clean(), "{r:?}");
    assert_eq!(r.layers[0].name, "layer0");
    assert_eq!(r.dataflow(), Some(Dataflow::Os));
}

#[test]
fn the_hit_latency_decides_hit_too_soon() {
    let mut s = spec("kinds");
    s.hit_latency = Some(0);
    let r = check_run(&s).unwrap();
    assert_eq!(r.layers[0].check.operands[0].violating_addresses, [1, 1, 0]);
    s.hit_latency = Some(2);
    let r = check_run(&s).unwrap();
    // Now addresses 1 and 2 (returned 1 cycle after their request) are too soon too.
    assert_eq!(r.layers[0].check.operands[0].violating_addresses, [1, 1, 3]);
}

#[test]
fn a_wrong_configuration_is_refused() {
    // The fixture's DRAM rows have 2 lanes; a configuration fetching 4
    // words per cycle cannot describe it.
    let dir = scratch("wrongcfg");
    let cfg = dir.join("scale.cfg");
    std::fs::write(
        &cfg,
        "[layout]\nIfmapSRAMBankBandwidth: 4\n[run_presets]\nInterfaceBandwidth: USER\n",
    )
    .unwrap();
    let mut s = spec("kinds");
    s.cfg = Some(cfg);
    let e = check_run(&s).unwrap_err().to_string();
    assert!(e.contains("IFMAP_DRAM_TRACE.csv"), "{e}");
    assert!(e.contains(":1:13: row has 2 address lanes"), "{e}");
}

#[test]
fn compare_keeps_ties_and_finds_flips() {
    let kinds = check_run(&spec("kinds")).unwrap();
    let clean = check_run(&spec("clean")).unwrap();
    let c = compare(&[kinds.clone(), clean.clone()]).unwrap();
    let l = &c.layers[0];
    assert_eq!(l.fastest_compute_field, ["os", "ws"]);
    assert_eq!(l.fastest_cold_interval, ["os", "ws"]);
    assert!(!l.flips);
    assert_eq!(c.failing_runs, 1);
    // Make ws faster by compute field and slower by cold interval.
    let mut ws = kinds;
    ws.layers[0].check.compute_field.cycles = 1;
    ws.layers[0].check.cold_interval.as_mut().unwrap().cycles = 9;
    let c = compare(&[ws, clean]).unwrap();
    let l = &c.layers[0];
    assert_eq!(l.by_compute_field, ["ws", "os"]);
    assert_eq!(l.by_cold_interval, ["os", "ws"]);
    assert!(l.flips);
    assert_eq!(c.flipped, 1);
}

fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("simfa-scalesim-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// One read of address 9, requested at cycle 0 (the first demand row) and
/// returned at `served`, with its transfer completing at `done` (none if
/// `None`): the checker's verdict must be the shared rules' verdict.
#[test]
fn the_checker_applies_the_shared_rules() {
    let d = scratch("rules");
    let w = |f: &str, t: &str| std::fs::write(d.join(f), t).unwrap();
    w("FILTER_SRAM_TRACE.csv", "0,-1\n");
    w("FILTER_DRAM_TRACE.csv", "");
    w("OFMAP_DRAM_TRACE.csv", "");
    w("OFMAP_SRAM_TRACE.csv", "0,-1\n");
    // Every verdict the rules can give, clean included, must come up.
    let mut seen = std::collections::BTreeSet::new();
    for served in -2i64..=3 {
        for done in [None, Some(-3), Some(-1), Some(0), Some(1), Some(2), Some(4)] {
            for hl in 0..=2u64 {
                w("IFMAP_SRAM_TRACE.csv", &format!("{served},9\n"));
                w(
                    "IFMAP_DRAM_TRACE.csv",
                    &done.map_or(String::new(), |c| format!("{c}.0,9.0\n")),
                );
                let opts = CheckOptions {
                    hit_latency: hl,
                    ..CheckOptions::default()
                };
                let l = check_layer(&d, &opts).unwrap();
                let want = classify_read(done, 0, served, Some(hl));
                let got: Vec<ViolationKind> = KINDS
                    .iter()
                    .zip(l.operands[0].violating_reads)
                    .filter(|(_, n)| *n > 0)
                    .map(|(k, _)| *k)
                    .collect();
                assert_eq!(
                    got,
                    want.into_iter().collect::<Vec<_>>(),
                    "served {served}, transfer {done:?}, hit latency {hl}"
                );
                seen.insert(format!("{want:?}"));
            }
        }
    }
    assert_eq!(seen.len(), KINDS.len() + 1, "verdicts met: {seen:?}");
    let _ = std::fs::remove_dir_all(&d);
}
