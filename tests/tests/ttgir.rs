//! The TTGIR instrumentation pass on the five real TTGIR samples in
//! `tests/fixtures/ttgir/` (copies of the project's shared fixtures): the
//! sites found (counted by hand from the files), exact scope strings, every
//! other byte unchanged, idempotence, and the hostile `tests/hostile/ttgir_*`
//! inputs rejected with a position.

use std::path::{Path, PathBuf};

use simfa_std::ttgir::{decode, instrument, sites, Scope, ScopeKind, Site};

fn dir(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(rel)
}

fn read(name: &str) -> String {
    std::fs::read_to_string(dir("fixtures/ttgir").join(name)).expect("fixture exists")
}

use ScopeKind::{MbArrive, MbExpect, MbWait, TmaLoad, TmaStore, Wgmma, WgmmaWait};

/// Each fixture and the kinds of its sites in file order, counted by hand.
const FIXTURES: &[(&str, &[ScopeKind])] = &[
    (
        "01_gluon_frontend_hopper_ops.mlir",
        // test_async_tma: load, expect, wait, store; test_mbarrier: expect,
        // arrive, wait; test_warpgroup_mma: two dots; test_warpgroup_mma_wait.
        &[
            TmaLoad, MbExpect, MbWait, TmaStore, MbExpect, MbArrive, MbWait, Wgmma, Wgmma,
            WgmmaWait,
        ],
    ),
    // Two wait_barrier and two arrive_barrier ops; the CHECK comments hold
    // the same op names and must not count.
    (
        "02_ttng_ops_roundtrip.mlir",
        &[MbWait, MbWait, MbArrive, MbArrive],
    ),
    ("04_triton_hopper_two_dot_header.mlir", &[Wgmma, Wgmma]),
    // One dot and its wait; the legacy `tt.proton_record` ops pass through.
    (
        "05_legacy_proton_gemm_s3_excerpt.ttgir",
        &[Wgmma, WgmmaWait],
    ),
    // Proton records and warp_specialize regions, no TMA/WGMMA/mbarrier op.
    ("06_proton_record_ops.mlir", &[]),
];

fn scope_strings(s: &[Site]) -> Vec<String> {
    s.iter().map(|x| x.scope.to_string()).collect()
}

/// `text` without the lines holding SIMFA records.
fn without_records(text: &str) -> String {
    text.split_inclusive('\n')
        .filter(|l| {
            let t = l.trim_start();
            !(t.starts_with("proton.record start \"SIMFA|")
                || t.starts_with("proton.record end \"SIMFA|"))
        })
        .collect()
}

#[test]
fn every_fixture_is_in_the_list() {
    let mut on_disk: Vec<String> = std::fs::read_dir(dir("fixtures/ttgir"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n != "README.md")
        .collect();
    on_disk.sort();
    let listed: Vec<&str> = FIXTURES.iter().map(|f| f.0).collect();
    assert_eq!(on_disk, listed);
}

#[test]
fn every_fixture_yields_its_sites() {
    for (name, kinds) in FIXTURES {
        let found = sites(name, &read(name)).unwrap_or_else(|e| panic!("{e}"));
        let got: Vec<ScopeKind> = found.iter().map(Site::kind).collect();
        assert_eq!(&got, kinds, "{name}");
        for (i, s) in found.iter().enumerate() {
            assert_eq!(
                s.scope.site as usize, i,
                "{name}: sites numbered in file order"
            );
            let text = s.scope.to_string();
            assert_eq!(text.parse::<Scope>(), Ok(s.scope.clone()), "{name}: {text}");
        }
    }
}

#[test]
fn exact_scopes_of_the_fixtures() {
    let legacy = sites("05", &read("05_legacy_proton_gemm_s3_excerpt.ttgir")).unwrap();
    // instrShape [16, 256, 16] with warpsPerCTA [8, 1]: two WarpGroups along
    // M, each issuing m64n256k16 instructions; A and B in shared memory.
    assert_eq!(
        scope_strings(&legacy),
        [
            "SIMFA|WGMMA|M=128|N=256|K=64|instrM=64|instrN=256|instrK=16|dtype=FP16|acc=FP32|mode=SS|wgs=2x1|site=0",
            "SIMFA|WGMMA_WAIT|pendings=1|site=1",
        ]
    );
    assert_eq!(legacy[0].line, 18);
    assert_eq!(legacy[0].op, "triton_nvidia_gpu.warp_group_dot");

    let gluon = scope_strings(&sites("01", &read("01_gluon_frontend_hopper_ops.mlir")).unwrap());
    assert_eq!(
        gluon[0],
        "SIMFA|TMA_LOAD|desc=%arg0|box=128x128|dtype=FP16|bytes=32768|bar=%1|coords=2|site=0"
    );
    assert_eq!(gluon[1], "SIMFA|MB_EXPECT|bar=%1|bytes=32768|site=1");
    assert_eq!(gluon[2], "SIMFA|MB_WAIT|bar=%1|phase=%c0_i32_2|site=2");
    assert_eq!(
        gluon[3],
        "SIMFA|TMA_STORE|desc=%arg0|box=128x128|dtype=FP16|bytes=32768|coords=2|site=3"
    );
    assert_eq!(gluon[5], "SIMFA|MB_ARRIVE|bar=%0|count=1|site=5");
    // The second module's #mma (instrShape [16, 32, 16], warpsPerCTA [4, 1]):
    // one WarpGroup, f16 accumulator.
    assert_eq!(
        gluon[7],
        "SIMFA|WGMMA|M=128|N=128|K=128|instrM=64|instrN=32|instrK=16|dtype=FP16|acc=FP16|mode=SS|site=7"
    );
    assert_eq!(gluon[9], "SIMFA|WGMMA_WAIT|pendings=1|site=9");

    let two_dot =
        scope_strings(&sites("04", &read("04_triton_hopper_two_dot_header.mlir")).unwrap());
    // The second dot's A is a register tensor (a dot_op layout): RS; its
    // accumulator layout is #mma1.
    assert_eq!(
        two_dot,
        [
            "SIMFA|WGMMA|M=128|N=64|K=128|instrM=64|instrN=64|instrK=16|dtype=FP16|acc=FP32|mode=SS|wgs=2x1|site=0",
            "SIMFA|WGMMA|M=128|N=128|K=64|instrM=64|instrN=128|instrK=16|dtype=FP16|acc=FP32|mode=RS|wgs=2x1|site=1",
        ]
    );

    let barriers = scope_strings(&sites("02", &read("02_ttng_ops_roundtrip.mlir")).unwrap());
    assert_eq!(barriers[0], "SIMFA|MB_WAIT|bar=%alloc|phase=%phase|site=0");
    assert_eq!(barriers[3], "SIMFA|MB_ARRIVE|bar=%alloc|count=2|site=3");
}

#[test]
fn only_records_are_added() {
    for (name, kinds) in FIXTURES {
        let src = read(name);
        let out = instrument(name, &src).unwrap();
        assert_eq!(without_records(&out.text), src, "{name}");
        let added = out.text.lines().count() - src.lines().count();
        assert_eq!(added, 2 * kinds.len(), "{name}");
    }
}

#[test]
fn records_take_the_ops_indentation() {
    let out = instrument("05", &read("05_legacy_proton_gemm_s3_excerpt.ttgir")).unwrap();
    let lines: Vec<&str> = out.text.lines().collect();
    let dot = lines
        .iter()
        .position(|l| l.contains("triton_nvidia_gpu.warp_group_dot %132"))
        .unwrap();
    assert!(lines[dot - 1].starts_with("      proton.record start \"SIMFA|WGMMA|M=128|N=256"));
    assert!(lines[dot + 1].starts_with("      proton.record end \"SIMFA|WGMMA|M=128|N=256"));
    assert!(lines[dot].ends_with("loc(#loc)"));
}

#[test]
fn the_output_is_valid_input_and_instrumenting_twice_changes_nothing() {
    for (name, _) in FIXTURES {
        let once = instrument(name, &read(name)).unwrap();
        let twice = instrument(name, &once.text).unwrap();
        assert_eq!(twice.text, once.text, "{name}");
        let listed = sites(name, &once.text).unwrap();
        assert_eq!(scope_strings(&listed), scope_strings(&once.sites), "{name}");
    }
}

#[test]
fn hostile_ttgir_inputs_are_rejected_with_a_position() {
    let mut n = 0;
    for e in std::fs::read_dir(dir("hostile")).unwrap() {
        let path = e.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if !name.starts_with("ttgir_") {
            continue;
        }
        n += 1;
        let bytes = std::fs::read(&path).unwrap();
        let err = decode(&name, &bytes)
            .and_then(|text| instrument(&name, text).map(|_| ()))
            .expect_err(&name);
        assert_eq!(err.file, name);
        assert!(err.line >= 1 && err.column >= 1, "{err}");
        assert!(err
            .to_string()
            .starts_with(&format!("{name}:{}:", err.line)));
    }
    assert!(n >= 8, "only {n} hostile TTGIR files");
}

/// Mutated fixtures (bytes deleted, duplicated or replaced by MLIR
/// punctuation at pseudo-random places) never panic, and whatever still
/// instruments, instruments idempotently.
#[test]
fn mutated_fixtures_never_panic() {
    const PIECES: &[&str] = &[
        "", "\"", "{", "}", "(", ")", "<", ">", "[", "]", "\n", "%", "#mma", ":", "->", "\\",
    ];
    let mut state: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut next = move |n: usize| {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        (state % n.max(1) as u64) as usize
    };
    for (name, _) in FIXTURES {
        let src = read(name);
        for _ in 0..300 {
            let mut s = src.clone();
            for _ in 0..1 + next(3) {
                let a = next(s.len() + 1);
                let b = (a + next(12)).min(s.len());
                if s.is_char_boundary(a) && s.is_char_boundary(b) {
                    s.replace_range(a..b, PIECES[next(PIECES.len())]);
                }
            }
            let _ = sites(name, &s);
            if let Ok(once) = instrument(name, &s) {
                let twice = instrument(name, &once.text).map(|o| o.text);
                assert_eq!(twice.as_ref(), Ok(&once.text), "{name} mutated:\n{s}");
            }
        }
    }
}
