//! Golden digests and the shipped examples.
//!
//! A golden digest moves only when the timing model changes. When it does,
//! update the constant in the same commit and say why in the message.

use simfa_core::GpuConfig;
use simfa_std::gen::{gemm, GemmParams};
use simfa_std::{asm, load};
use simfa_tests::run;

const GOLDEN_GEMM_1024: (u64, u64) = (59883, 0xfcb5_af5b_6b70_b5cc);

#[test]
fn golden_gemm_1024_fixed_port() {
    let k = gemm(&GemmParams::new(1024, 1024, 1024)).unwrap();
    let mut cfg = GpuConfig::h800();
    cfg.memory = simfa_core::config::MemoryModel::Fixed;
    let s = run(&cfg, &k).unwrap();
    assert_eq!(
        (s.cycles, s.digest),
        GOLDEN_GEMM_1024,
        "digest {:016x}",
        s.digest
    );
}

/// The same GEMM through the calibrated line-level L2/HBM hierarchy
/// (`memory = "line"`, the reference model: this digest must not move when
/// the transaction-level model changes).
#[test]
fn golden_gemm_1024_hierarchy() {
    let k = gemm(&GemmParams::new(1024, 1024, 1024)).unwrap();
    let mut cfg = GpuConfig::h800();
    cfg.memory = simfa_core::config::MemoryModel::Line;
    let s = run(&cfg, &k).unwrap();
    assert_eq!(
        (s.cycles, s.digest),
        GOLDEN_GEMM_1024_HIERARCHY,
        "digest {:016x}",
        s.digest
    );
}

const GOLDEN_GEMM_1024_HIERARCHY: (u64, u64) = (38525, 0x7e08_8357_7a5b_2408);

#[test]
fn gemm_digest_is_identical_through_both_encodings() {
    let k = gemm(&GemmParams::new(512, 256, 2048)).unwrap();
    let via_text = asm::parse(&asm::print(&k), "gemm.sasm").unwrap();
    let via_binary = load::decode_kernel(&load::encode_kernel(&k), "gemm.sfk").unwrap();
    assert_eq!(via_text, k);
    assert_eq!(via_binary, k);
    let cfg = GpuConfig::h800();
    let d = run(&cfg, &k).unwrap().digest;
    assert_eq!(run(&cfg, &via_text).unwrap().digest, d);
    assert_eq!(run(&cfg, &via_binary).unwrap().digest, d);
}

fn example(name: &str) -> simfa_core::Kernel {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../examples")
        .join(name);
    load::load_kernel(&path).unwrap()
}

/// The ring example runs four independent CTAs; each is the two-stage ring
/// of `exact_cycles::producer_consumer_two_stage_ring` on the H800 port.
#[test]
fn examples_run_and_round_trip() {
    let cfg = GpuConfig::h800();
    let ring = example("ring.sasm");
    let s = run(&cfg, &ring).unwrap();
    assert_eq!(s.stats.ctas_retired, 4);
    assert_eq!(s.stats.bytes_loaded, 4 * 4 * 512);
    let text = asm::print(&ring);
    assert_eq!(asm::parse(&text, "again.sasm").unwrap(), ring);
    let dl = example("deadlock.sasm");
    assert!(matches!(
        run(&cfg, &dl),
        Err(simfa_core::SimError::Deadlock { waiting: 2, .. })
    ));
}

/// The fixed sample set of `simfa_core::samples`, whose digests
/// `scripts/crossdigest.sh` also checks on aarch64 and on a Cortex-M3: the
/// same values there as here.
#[test]
fn golden_samples_match_other_machines() {
    use simfa_core::samples::{self, SAMPLES};
    let mut results = Vec::new();
    for i in 0..SAMPLES {
        let mut k = Box::new(simfa_core::Kernel::default());
        let cfg = samples::build(i, &mut k).unwrap();
        let s = run(&cfg, &k).unwrap();
        results.push((s.cycles, s.digest));
    }
    assert_eq!(results, GOLDEN_SAMPLES, "{:#x?}", results);
    assert_eq!(samples::combine(&results), 0x27e1_ee43_7e8e_d84f);
}

const GOLDEN_SAMPLES: [(u64, u64); 6] = [
    (3063, 0x656e_1f80_32c5_1afe),
    (4130, 0xdf78_3aec_d13f_0e9f),
    (4155, 0xd117_ad38_e926_39da),
    (5240, 0x3628_7dca_c152_4ff0),
    (15430, 0x4328_4a89_ff66_57b7),
    (14621, 0x2a71_7986_2faa_f793),
];
