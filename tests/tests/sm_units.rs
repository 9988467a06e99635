//! The SM's shared SIMT units and their interaction with the tensor pipe
//! (`compute` instructions), and the WGMMA law's small-N floors: small
//! kernels whose cycles are derived by hand in the comments and asserted
//! exactly.

use simfa_core::config::MemoryModel;
use simfa_core::{GpuConfig, Instr, Ratio, WgmmaMode, Work};
use simfa_tests::{run, Builder};

/// An H800 on the fixed port whose tensor pipe takes `share` of the SIMT
/// issue bandwidth while busy (set here, so the tests do not move with
/// the calibrated preset).
fn cfg(share: Ratio) -> GpuConfig {
    let mut c = GpuConfig::h800();
    c.memory = MemoryModel::Fixed;
    c.units.rf_share = share;
    c
}

fn work(fp32: u32, mufu: u32, fp16: u32, int: u32) -> Work {
    Work {
        fp32,
        mufu,
        fp16,
        int,
    }
}

/// One role per work item, one WarpGroup each, each issuing one `compute`.
fn computes(works: &[Work]) -> simfa_core::Kernel {
    let mut b = Builder::new("units", [1, 1, 1]);
    for (i, w) in works.iter().enumerate() {
        b.role(&format!("wg{i}"), 1, 64);
        b.op(Instr::Compute { work: *w });
    }
    b.finish()
}

/// WarpGroup 0 issues `wgmmas` m64n256k16, commits and waits; WarpGroup 1
/// issues one `compute` of `w`.
fn gemm_beside(wgmmas: usize, w: Work) -> simfa_core::Kernel {
    let mut b = Builder::new("tensor+simt", [1, 1, 1]);
    b.role("gemm", 1, 64);
    for _ in 0..wgmmas {
        b.op(Instr::Wgmma {
            n: 256,
            mode: WgmmaMode::Ss,
        });
    }
    b.op(Instr::WgmmaCommit);
    b.op(Instr::WgmmaWait { n: 0 });
    b.role("simt", 1, 64);
    b.op(Instr::Compute { work: w });
    b.finish()
}

/// 1024 MUFU operations at 16 per cycle take 64 cycles alone: compute at
/// 0, woken at 64, exit at 64, the kernel ends at 65.
///
/// Two WarpGroups: WG 0 issues at 0, WG 1 at 1 (one issue per SM per
/// cycle). In [0, 1) WG 0 has the MUFU to itself (16 done); from 1 each
/// gets 8 per cycle: WG 0's 1008 left take 126 cycles (done at 127), when
/// WG 1 has 16 left, which it finishes alone in one cycle (128). Both took
/// 127 cycles, twice the 64 of one alone (less the cycle WG 0 had alone).
#[test]
fn two_warpgroups_on_the_mufu_take_twice_as_long() {
    let c = cfg(Ratio::new(0, 1));
    let alone = run(&c, &computes(&[work(0, 1024, 0, 0)])).unwrap();
    assert_eq!(alone.stats.compute_cycles, 64);
    assert_eq!(alone.cycles, 65);
    let both = run(&c, &computes(&[work(0, 1024, 0, 0); 2])).unwrap();
    assert_eq!(both.stats.compute_cycles, 127 + 127);
    assert_eq!(both.cycles, 129);
}

/// Different units overlap: 1024 MUFU operations (64 cycles) and 4096 INT
/// operations (64 cycles at 64 per cycle) together need 0.5 + 2 of the 4
/// warp instructions the SM issues per cycle, so neither slows: WG 0 done
/// at 64, WG 1 (issued at 1) at 65; the kernel ends at 66.
///
/// Issue-bound classes share the issue slots: 8192 FP32 operations (64
/// cycles, 4 warp instructions per cycle) and 16384 FP16 results (64
/// cycles, 4 per cycle) would need 8: both run at half speed. WG 0 alone
/// in [0, 1) does 128; then 64 per cycle for its 8064 left: done at 127,
/// when WG 1 has 256 FP16 results left, one cycle alone (128). Ends at 129.
#[test]
fn units_overlap_and_share_the_issue_slots() {
    let c = cfg(Ratio::new(0, 1));
    let s = run(&c, &computes(&[work(0, 1024, 0, 0), work(0, 0, 0, 4096)])).unwrap();
    assert_eq!(s.stats.compute_cycles, 64 + 64);
    assert_eq!(s.cycles, 66);
    let s = run(&c, &computes(&[work(8192, 0, 0, 0), work(0, 0, 16384, 0)])).unwrap();
    assert_eq!(s.stats.compute_cycles, 127 + 127);
    assert_eq!(s.cycles, 129);
}

/// The phases of one `compute` run one after the other: 2048 FP32 (16
/// cycles) then 1024 MUFU (64) then 512 FP16 (2) take 82 cycles.
#[test]
fn phases_of_one_compute_are_serial() {
    let s = run(
        &cfg(Ratio::new(0, 1)),
        &computes(&[work(2048, 1024, 512, 0)]),
    )
    .unwrap();
    assert_eq!(s.stats.compute_cycles, 82);
}

/// The tensor pipe takes `rf_share` (here 1/2) of the issue bandwidth
/// while it runs. WG 0 issues two m64n256k16 (pipe [0, 128) and [128,
/// 256)), commits at 2 and stalls in its wait at 3; WG 1 issues 16384 FP32
/// operations at 4 (128 cycles alone). Under the busy pipe FP32 gets 2 of
/// the 4 warp instructions, 64 operations per cycle: 252 cycles to 256
/// bring 16128; the pipe drains at 256 and the last 256 take 2 cycles at
/// full rate: done at 258. WG 0 passes its wait at 256 and exits; WG 1
/// exits at 258; the kernel ends at 259.
///
/// MUFU-bound work needs half a warp instruction per cycle and passes at
/// full rate even with 7/8 of issue taken: 1024 operations, 64 cycles.
#[test]
fn a_busy_tensor_pipe_slows_issue_bound_simt_work() {
    let k = gemm_beside(2, work(16384, 0, 0, 0));
    let s = run(&cfg(Ratio::new(1, 2)), &k).unwrap();
    assert_eq!(s.stats.compute_cycles, 258 - 4);
    assert_eq!(s.cycles, 259);
    // Without the interaction it takes 128 cycles, done at 132; the kernel
    // ends with WG 0 (wait passes at 256, exit 257).
    let s = run(&cfg(Ratio::new(0, 1)), &k).unwrap();
    assert_eq!(s.stats.compute_cycles, 128);
    assert_eq!(s.cycles, 258);

    let s = run(&cfg(Ratio::new(7, 8)), &gemm_beside(1, work(0, 1024, 0, 0))).unwrap();
    assert_eq!(s.stats.compute_cycles, 64);
}

/// The H20's tensor pipe is 3.95 times slower, so it moves its
/// accumulators through the register file 40/79 as often as the H800's and
/// takes 40/79 of the share: with `rf_share` 79/80 that is exactly 1/4,
/// and the 16384 FP32 operations under one m64n256k16 (ceil(256 * 79/40) =
/// 506 cycles, [0, 506)) issued at 3 get 3 of the 4 warp instructions, 96
/// operations per cycle: ceil(16384 / 96) = 171 cycles. WG 0 passes its
/// wait at 506 and exits at 507; the kernel ends at 508.
#[test]
fn the_h20_pipe_takes_its_share_in_proportion() {
    let mut c = GpuConfig::h20();
    c.memory = MemoryModel::Fixed;
    c.units.rf_share = Ratio::new(79, 80);
    let s = run(&c, &gemm_beside(1, work(16384, 0, 0, 0))).unwrap();
    assert_eq!(s.stats.compute_cycles, 171);
    assert_eq!(s.cycles, 508);
}

/// Small-N WGMMAs are bound by their shared-memory operand reads (SS) or
/// the pipeline's floor (RS), as Luo et al. measured on the H800: one
/// m64n8k16 SS reads 2048 + 256 bytes at 128 per cycle, 18 cycles; RS
/// reads 256 and takes the 13-cycle floor. Wgmma at 0, commit 1, wait 2
/// passes at 18 (13), exit, the kernel ends at 20 (15).
#[test]
fn small_n_wgmmas_take_their_floor() {
    for (mode, cycles) in [(WgmmaMode::Ss, 20), (WgmmaMode::Rs, 15)] {
        let mut b = Builder::new("small", [1, 1, 1]);
        b.role("main", 1, 64);
        b.op(Instr::Wgmma { n: 8, mode });
        b.op(Instr::WgmmaCommit);
        b.op(Instr::WgmmaWait { n: 0 });
        let s = run(&cfg(Ratio::new(0, 1)), &b.finish()).unwrap();
        assert_eq!(s.cycles, cycles, "{mode:?}");
    }
}

/// A `compute` with nothing to do issues like any instruction and costs
/// no time.
#[test]
fn an_empty_compute_is_free() {
    let s = run(&cfg(Ratio::new(0, 1)), &computes(&[work(0, 0, 0, 0)])).unwrap();
    assert_eq!(s.stats.compute_cycles, 0);
    assert_eq!(s.cycles, 2);
}
