//! Tests of [`super`].

use super::*;
use crate::gen::{gemm, pchase, tma_bw, CopyKind, GemmParams, PchaseParams, TmaBwParams};
use crate::run::simulate;
use simfa_core::config::MemoryModel;
use simfa_core::{Fault, Kernel};

/// Runs `k` on `cfg` with a checker; the run itself may fail (a fault
/// can break a kernel's synchronisation).
fn check(cfg: &GpuConfig, k: &Kernel) -> ConsistencyChecker {
    let mut c = ConsistencyChecker::new(cfg);
    let _ = simulate(cfg, k, &mut c);
    c
}

fn fixed() -> GpuConfig {
    let mut cfg = GpuConfig::h800();
    cfg.memory = MemoryModel::Fixed;
    cfg
}

fn line() -> GpuConfig {
    let mut cfg = GpuConfig::h800();
    cfg.memory = MemoryModel::Line;
    cfg
}

fn gemm_k(m: u32, n: u32, k: u32) -> Kernel {
    gemm(&GemmParams::new(m, n, k)).unwrap()
}

fn count(c: &ConsistencyChecker, kind: ViolationKind) -> u64 {
    c.counts()[kind.index()].1
}

fn first(c: &ConsistencyChecker, kind: ViolationKind) -> Violation {
    *c.violations()
        .iter()
        .find(|v| v.kind == kind)
        .unwrap_or_else(|| panic!("no {kind} kept: {}", c.summary()))
}

#[test]
fn clean_gemm_runs_are_clean() {
    for (m, n, k) in [(256, 256, 256), (1024, 1024, 512)] {
        let kernel = gemm_k(m, n, k);
        for cfg in [GpuConfig::h800(), line(), fixed()] {
            let mut c = ConsistencyChecker::new(&cfg);
            simulate(&cfg, &kernel, &mut c).unwrap();
            assert!(
                c.is_clean(),
                "{m}x{n}x{k} {:?}: {}",
                cfg.memory,
                c.summary()
            );
            let (reads, wgmmas) = c.checked();
            assert!(wgmmas > 0);
            assert_eq!(reads > 0, cfg.memory.is_hierarchy());
            assert!(c.summary().contains("clean"), "{}", c.summary());
        }
    }
}

#[test]
fn clean_microbenchmarks_are_clean() {
    let cfg = GpuConfig::h800();
    let chase = pchase(&PchaseParams {
        measured_hops: 256,
        ..PchaseParams::new(256 * 1024)
    })
    .unwrap();
    let bulk = tma_bw(&TmaBwParams {
        total_bytes: 4 << 20,
        ..TmaBwParams::new(CopyKind::Bulk { bytes: 8192 }, 2, &cfg)
    })
    .unwrap();
    let tensor = tma_bw(&TmaBwParams {
        total_bytes: 4 << 20,
        ..TmaBwParams::new(CopyKind::Tensor2d { boxdim: [64, 32] }, 1, &cfg)
    })
    .unwrap();
    for k in [&chase, &bulk, &tensor] {
        for cfg in [GpuConfig::h800(), line(), fixed()] {
            let mut c = ConsistencyChecker::new(&cfg);
            simulate(&cfg, k, &mut c).unwrap();
            assert!(c.is_clean(), "{} {:?}: {}", k.name, cfg.memory, c.summary());
        }
    }
}

#[test]
fn checking_changes_neither_cycles_nor_digest() {
    let k = gemm_k(256, 256, 256);
    for cfg in [GpuConfig::h800(), line(), fixed()] {
        let plain = simulate(&cfg, &k, &mut ()).unwrap().summary;
        let mut c = ConsistencyChecker::new(&cfg);
        let checked = simulate(&cfg, &k, &mut c).unwrap().summary;
        assert_eq!(plain, checked);
    }
}

#[test]
fn early_tma_on_the_fixed_port_is_caught() {
    let mut cfg = fixed();
    cfg.fault = Fault::EarlyTma { cycles: 100 };
    let c = check(&cfg, &gemm_k(256, 256, 256));
    assert!(!c.is_clean());
    let e = first(&c, ViolationKind::EarlyCompletion);
    let lands = e.transfer_cycle.expect("the port's landing is known");
    assert_eq!(lands, e.cycle + 100, "{e}");
    let msg = e.to_string();
    assert!(
        msg.contains(&format!("signalled complete at cycle {}", e.cycle)),
        "{msg}"
    );
    assert!(msg.contains(&format!("landed (at cycle {lands})")), "{msg}");
    let r = first(&c, ViolationKind::ReadBeforeLanding);
    assert!(r.transfer_cycle.unwrap() > r.cycle, "{r}");
    assert!(r.to_string().contains("WGMMA of SM"), "{r}");
    assert_eq!(count(&c, ViolationKind::NoTransfer), 0);
}

#[test]
fn early_tma_in_the_transaction_model_is_caught() {
    let mut cfg = GpuConfig::h800();
    cfg.fault = Fault::EarlyTma { cycles: 100 };
    let c = check(&cfg, &gemm_k(256, 256, 256));
    let e = first(&c, ViolationKind::EarlyCompletion);
    // The landing is known when the operation is issued.
    let lands = e.transfer_cycle.expect("known at issue");
    assert!(lands > e.cycle, "{e}");
    assert!(count(&c, ViolationKind::ReadBeforeLanding) > 0);
    assert_eq!(
        count(&c, ViolationKind::BeforeTransfer),
        0,
        "{}",
        c.summary()
    );
}

#[test]
fn early_tma_in_the_line_model_is_caught_with_its_last_line() {
    let mut cfg = line();
    cfg.fault = Fault::EarlyTma { cycles: 0 };
    let c = check(&cfg, &gemm_k(256, 256, 256));
    let e = first(&c, ViolationKind::EarlyCompletion);
    // The landing became known when the last line came back.
    let lands = e.transfer_cycle.expect("landed by the end of the run");
    assert!(lands > e.cycle, "{e}");
    let Site::Op {
        addr: Some(addr), ..
    } = e.site
    else {
        panic!("no line address: {e}");
    };
    assert!(
        e.to_string().contains(&format!("last line {addr:#x}")),
        "{e}"
    );
    let r = first(&c, ViolationKind::ReadBeforeLanding);
    assert!(r.transfer_cycle.is_some_and(|t| t > r.cycle), "{r}");
    assert!(count(&c, ViolationKind::ReadBeforeLanding) > 0);
    // The L2 itself stayed consistent.
    assert_eq!(
        count(&c, ViolationKind::BeforeTransfer),
        0,
        "{}",
        c.summary()
    );
}

#[test]
fn early_hit_is_caught_with_the_line_and_its_fill() {
    for cfg in [GpuConfig::h800(), line()] {
        early_hit_is_caught_on(cfg);
    }
}

fn early_hit_is_caught_on(mut cfg: GpuConfig) {
    cfg.fault = Fault::EarlyHit;
    let c = check(&cfg, &gemm_k(256, 256, 256));
    assert!(
        count(&c, ViolationKind::BeforeTransfer) > 0,
        "{}",
        c.summary()
    );
    let v = first(&c, ViolationKind::BeforeTransfer);
    let Site::Line { addr, at, .. } = v.site else {
        panic!("not a line: {v}");
    };
    let fill = v.transfer_cycle.expect("the fill completed later");
    assert!(v.cycle < fill);
    let msg = v.to_string();
    assert!(msg.contains(&format!("line {addr:#x}")), "{msg}");
    assert!(msg.contains(&format!("looked up at cycle {at}")), "{msg}");
    assert!(
        msg.contains(&format!("answered at cycle {}", v.cycle)),
        "{msg}"
    );
    assert!(
        msg.contains(&format!("completed (at cycle {fill})")),
        "{msg}"
    );
    // Unresolved reads stay counted as reads without a transfer.
    assert_eq!(
        count(&c, ViolationKind::ReadBeforeLanding),
        0,
        "{}",
        c.summary()
    );
}

const RING: &str = include_str!("../../examples/ring.sasm");

#[test]
fn early_stage_is_caught_as_an_overwrite() {
    let k = crate::asm::parse(RING, "ring.sasm").unwrap();
    for mut cfg in [GpuConfig::h800(), line(), fixed()] {
        let clean = check(&cfg, &k);
        assert!(clean.is_clean(), "{}", clean.summary());
        cfg.fault = Fault::EarlyStage;
        let c = check(&cfg, &k);
        let v = first(&c, ViolationKind::Overwrite);
        assert!(
            matches!(
                v.site,
                Site::Stage {
                    released: 0,
                    needed: 1,
                    ..
                }
            ),
            "{v}"
        );
        assert!(
            v.to_string().contains("before its consumers released it"),
            "{v}"
        );
    }
}

/// A kernel bug rather than a model fault: `expect_tx` covers one of two
/// loads, so the phase completes when the first lands and the WGMMA reads
/// the second before it does.
#[test]
fn short_expect_tx_is_caught_as_a_read_before_landing() {
    let src = "kernel short_tx\ngrid 1\nsmem 4096\n\
        tensormap X base=0x1000 elem=2 dims=[1048576] box=[256]\n\
        mbarrier full[1] count=1\n\
        role main count=1 regs=24 {\n\
          mbar.expect_tx full[0], 512\n\
          tma.load X, full[0], [0]\n\
          tma.load X, full[0], [256]\n\
          mbar.arrive full[0]\n\
          mbar.wait full[0], 0\n\
          wgmma 64\n\
          wgmma.commit\n\
          wgmma.wait 0\n\
          exit\n\
        }\n";
    let k = crate::asm::parse(src, "short_tx.sasm").unwrap();
    let c = check(&fixed(), &k);
    assert_eq!(
        count(&c, ViolationKind::ReadBeforeLanding),
        1,
        "{}",
        c.summary()
    );
    let v = first(&c, ViolationKind::ReadBeforeLanding);
    assert!(
        matches!(
            v.site,
            Site::Barrier {
                bar: 0,
                phase: 1,
                op: 1,
                ..
            }
        ),
        "{v}"
    );
    assert!(v.transfer_cycle.unwrap() > v.cycle, "{v}");
    assert!(
        c.summary().contains("read-before-landing 1"),
        "{}",
        c.summary()
    );
}

#[test]
fn summary_keeps_the_first_violations_and_counts_all() {
    let mut cfg = GpuConfig::h800();
    cfg.fault = Fault::EarlyTma { cycles: 100 };
    let c = check(&cfg, &gemm_k(256, 256, 256));
    assert!(c.total() > KEPT as u64);
    assert_eq!(c.violations().len(), KEPT);
    let s = c.summary();
    assert!(s.contains("violation(s)"), "{s}");
    assert!(s.contains("by kind: "), "{s}");
    let listed = s
        .lines()
        .filter(|l| l.contains("early-completion: "))
        .count();
    assert!(listed <= SHOWN, "{s}");
}
