//! Tests of the text assembly: a sample, round trips, errors and fuzzing.

use proptest::prelude::*;
use simfa_core::isa::EvalCtx;
use simfa_core::{CtaOrder, DecodeError, Expr, Instr, Kernel};

use crate::load::{decode_kernel, encode_kernel};

use super::expr::{expr_string, parse_expr_text};
use super::{parse, parse_bytes, print, AsmError};

/// A GEMM-like warp-specialised kernel using every instruction.
const SAMPLE: &str = "\
# GEMM-like warp-specialised kernel: one producer, two consumers.
kernel gemm_ws
grid 8 4
order grouped 2
smem 196608

tensormap A base=0x1000_0000 elem=2 dims=[4096, 1024] strides=[8192] box=[64, 128]
tensormap B base=0x2000_0000 elem=2 dims=[4096, 2048] strides=[8192] box=[64, 256]
tensormap C base=0x3000_0000 elem=2 dims=[2048, 1024, 1] strides=[4096, 4194304] box=[64, 64, 1]
mbarrier full[4] count=1
mbarrier empty[4] count=2
mbarrier done count=1
stage ring[2] consumers=2

role producer count=1 regs=40 {
    mbar.init done, 1
    loop 64 {
        mbar.wait empty[l0 % 4], (l0 + 4) / 4 % 2
        mbar.expect_tx full[l0 % 4], 49152
        tma.load A, full[l0 % 4], [l0*64, cy*128]
        tma.load B, full[l0 % 4], [l0*64, cx*256]
    }
    stage.acquire ring[1]
    bulk.load done, 0x4000_0000 + cta*256, 256
    exit
}

role consumer count=2 regs=232 {   // two math WarpGroups
    loop 64 {
        mbar.wait full[l0 % 4], l0 / 4 % 2
        wgmma 256
        wgmma m64n128k16
        wgmma.commit
        wgmma.wait 1
        mbar.arrive empty[l0 % 4]
    }
    wgmma.wait 0
    bar.sync 1, 256
    bar.arrive wg + 2, 128
    loop 2 {
        loop l0 + 1 {
            tma.store C, [cx*128 + wg*64, cy*64 + l1*32 - 16, 0]
            bulk.store 0x5000_0000 + cta*4096 + l0*1024 + l1*64, 64
        }
        store.wait 0
    }
    stage.release ring[wg]
    bubble 100
    exit
}

role tracer count=1 regs=24 stream
";

fn round_trip(k: &Kernel) {
    let text = print(k);
    let k2 = parse(&text, "printed").unwrap_or_else(|e| panic!("reparse failed: {e}\n{text}"));
    assert_eq!(&k2, k, "reparse differs:\n{text}");
    assert_eq!(print(&k2), text, "print is not stable");
}

#[test]
fn sample_parses() {
    let k = parse(SAMPLE, "sample.s").unwrap();
    assert_eq!(k.name.as_str(), "gemm_ws");
    assert_eq!(k.grid, [8, 4, 1]);
    assert_eq!(k.order, CtaOrder::Grouped { rows: 2 });
    assert_eq!(k.smem_bytes, 196608);
    assert_eq!(k.maps[0].base, 0x1000_0000);
    assert_eq!(k.maps[0].strides, [2, 8192, 0, 0, 0]);
    assert_eq!(k.maps[2].rank, 3);
    assert_eq!(k.maps[2].boxdim, [64, 64, 1, 0, 0]);
    assert_eq!((k.mbarriers[1].len, k.mbarriers[1].count), (4, 2));
    assert_eq!(k.mbarriers[2].len, 1);
    assert_eq!(k.stages[0].consumers, 2);

    let names: Vec<_> = k
        .roles
        .iter()
        .map(|r| (r.name.as_str(), r.count, r.regs, r.start, r.len, r.stream))
        .collect();
    assert_eq!(
        names,
        [
            ("producer", 1, 40, 0, 10, false),
            ("consumer", 2, 232, 10, 21, false),
            ("tracer", 1, 24, 0, 0, true)
        ]
    );
    let Instr::LoopBegin { count, end: 6 } = k.code[1] else {
        panic!("{:?}", k.code[1])
    };
    assert_eq!(k.exprs[count as usize], Expr::constant(64));
    assert_eq!(k.code[6], Instr::LoopEnd { begin: 1 });

    let ctx = EvalCtx {
        cta: 9,
        c: [2, 5, 0],
        wg: 1,
        l: [3, 0, 0, 0],
    };
    let Instr::TmaLoad {
        map, bar, coords, ..
    } = k.code[4]
    else {
        panic!("{:?}", k.code[4])
    };
    assert_eq!((map, bar.decl), (0, 0));
    assert_eq!(k.exprs[bar.idx as usize].eval(&ctx), 3);
    let at = |i: usize| k.exprs[coords[i] as usize].eval(&ctx);
    assert_eq!([at(0), at(1)], [192, 640]);
    assert_eq!(k.exprs[coords[2] as usize], Expr::constant(0));
    assert_eq!(coords[2..], [coords[2]; 3]);

    // mbar.wait empty[l0 % 4], (l0 + 4) / 4 % 2 at l0 = 5: (9 div 4) mod 2 = 0.
    let Instr::MbarWait { parity, .. } = k.code[2] else {
        panic!()
    };
    let mut c5 = ctx;
    c5.l[0] = 5;
    assert_eq!(k.exprs[parity as usize].eval(&c5), 0);
    assert!(matches!(k.code[12], Instr::Wgmma { n: 256, .. }));
    assert!(matches!(k.code[13], Instr::Wgmma { n: 128, .. }));
    // the nested loops: outer 21..=27, inner 22..=25.
    assert!(matches!(k.code[21], Instr::LoopBegin { end: 27, .. }));
    assert!(matches!(k.code[22], Instr::LoopBegin { end: 25, .. }));
    assert_eq!(k.code[25], Instr::LoopEnd { begin: 22 });
    let Instr::TmaStore { coords, .. } = k.code[23] else {
        panic!("{:?}", k.code[23])
    };
    let mut c = ctx;
    c.l = [1, 1, 0, 0];
    assert_eq!(k.exprs[coords[1] as usize].eval(&c), 5 * 64 + 32 - 16);
    assert_eq!(k.code[30], Instr::Exit);
    // the expression table is deduplicated
    for (i, e) in k.exprs.iter().enumerate() {
        assert!(!k.exprs[..i].contains(e), "duplicate expression {i}");
    }
}

#[test]
fn sample_round_trips() {
    let k = parse(SAMPLE, "sample.s").unwrap();
    round_trip(&k);
    let text = print(&k);
    assert!(text.contains("    loop 2 {\n        loop l0 + 1 {\n            tma.store C, [cx*128 + wg*64, cy*64 + l1*32 - 16, 0]"));
    assert!(text.contains("mbar.wait empty[l0 % 4], (l0 + 4) / 4 % 2\n"));
    assert!(text.contains(
        "tensormap A base=0x10000000 elem=2 dims=[4096, 1024] strides=[8192] box=[64, 128]\n"
    ));
    assert!(text.contains("role tracer count=1 regs=24 stream\n"));
}

#[test]
fn expressions_print_canonically() {
    let cases = [
        ("16 + l0*64 + 128*cx", "cx*128 + l0*64 + 16"),
        ("-cx + 3 - l0", "-cx - l0 + 3"),
        ("l0 + l0", "l0*2"),
        ("l0 - l0", "0"),
        ("l0-1", "l0 - 1"),
        ("(l0 + 1) / 2 % 2", "(l0 + 1) / 2 % 2"),
        ("l0 + 1 / 2", "(l0 + 1) / 2"),
        ("(wg) % 3", "wg % 3"),
        ("0x10 + 1_000", "1016"),
        ("-9223372036854775808", "-9223372036854775808"),
    ];
    for (src, want) in cases {
        let e = parse_expr_text(src, 2).unwrap_or_else(|e| panic!("{src}: {e}"));
        assert_eq!(expr_string(&e), want, "{src}");
        assert_eq!(parse_expr_text(want, 2).unwrap(), e);
    }
}

fn any_coef() -> impl Strategy<Value = i64> {
    prop_oneof![3 => Just(0), 1 => Just(1), 1 => Just(-1), 1 => Just(i64::MIN), 2 => any::<i64>()]
}

fn any_div() -> impl Strategy<Value = i64> {
    prop_oneof![2 => Just(0), 1 => 1..=i64::MAX]
}

prop_compose! {
    fn any_expr()(k in prop_oneof![Just(0i64), any::<i64>(), -100i64..100],
                  v in proptest::array::uniform9(any_coef()),
                  div in any_div(), rem in any_div(),
                  mul in prop_oneof![2 => Just(0i64), 1 => Just(32i64), 1 => any::<i64>()]) -> Expr {
        let mul = if (div == 0 && rem == 0) || mul == 0 { 0 } else { mul };
        Expr { k, cta: v[0], c: [v[1], v[2], v[3]], wg: v[4], l: [v[5], v[6], v[7], v[8]], div, rem, mul }
    }
}

proptest! {
    #[test]
    fn expr_round_trips(e in any_expr()) {
        let text = expr_string(&e);
        prop_assert_eq!(parse_expr_text(&text, 4).map_err(|e| TestCaseError::fail(e.to_string()))?, e, "{}", text);
    }

    #[test]
    fn random_programs_round_trip(seed in any::<u64>()) {
        let src = gen::program(seed);
        let k = parse(&src, "gen.s").map_err(|e| TestCaseError::fail(format!("{e}\n{src}")))?;
        round_trip(&k);
    }

    /// The binary encoding round-trips the same random programs: decoding
    /// the encoding gives the identical kernel, re-encoding gives identical
    /// bytes, the core's allocation-free encoder writes the same bytes (and
    /// reports a buffer one byte short as full), and the text and binary
    /// paths agree (text -> kernel -> binary -> kernel -> text is stable).
    #[test]
    fn random_programs_round_trip_through_binary(seed in any::<u64>()) {
        let src = gen::program(seed);
        let k = parse(&src, "gen.s").map_err(|e| TestCaseError::fail(format!("{e}\n{src}")))?;
        let bytes = encode_kernel(&k);
        let decoded = |bytes: &[u8], name: &str| {
            decode_kernel(bytes, name).map_err(|e| TestCaseError::fail(format!("{e}\n{src}")))
        };
        let k2 = decoded(&bytes, "gen.sfk")?;
        prop_assert_eq!(&k2, &k);
        prop_assert_eq!(encode_kernel(&k2), bytes.clone());
        // Content, not the name, picks the decoder.
        prop_assert_eq!(&decoded(&bytes, "gen.s")?, &k);

        let mut buf = vec![0u8; bytes.len()];
        let core = simfa_core::encode::encode(&k, &mut buf)
            .map_err(|e| TestCaseError::fail(format!("{e:?}")))?;
        prop_assert_eq!(&core[..], &bytes[..]);
        let short = simfa_core::encode::encode(&k, &mut buf[..bytes.len() - 1]);
        prop_assert_eq!(short.err(), Some(DecodeError::BufferFull));
        prop_assert_eq!(&simfa_core::encode::decode(&bytes).map_err(|e| TestCaseError::fail(format!("{e:?}")))?, &k);

        let text = print(&k);
        let from_text = decoded(text.as_bytes(), "printed.s")?;
        prop_assert_eq!(&from_text, &k);
        let via_binary = decoded(&encode_kernel(&from_text), "printed.sfk")?;
        prop_assert_eq!(print(&via_binary), text);
    }
}

#[path = "tests_errors.rs"]
mod errors;
#[path = "tests_gen.rs"]
mod gen;

use errors::BASE;

/// Every prefix of the sample and thousands of byte mutations parse or fail
/// without panicking; whatever parses round-trips.
#[test]
fn fuzz_prefixes_and_mutations() {
    let bytes = SAMPLE.as_bytes();
    for n in 0..=bytes.len() {
        if let Ok(k) = parse_bytes(&bytes[..n], "prefix") {
            round_trip(&k);
        }
    }
    let alphabet = b"{}[](),=+-*/%#\n \t0123456789xl_.abz\xff\xc3";
    let mut r = gen::Rng::new(7);
    let mut parsed = 0;
    for _ in 0..4000 {
        let mut m = bytes.to_vec();
        for _ in 0..1 + r.below(4) {
            let i = r.below(m.len() as u64) as usize;
            let b = if r.below(4) == 0 {
                r.next() as u8
            } else {
                alphabet[r.below(alphabet.len() as u64) as usize]
            };
            match r.below(3) {
                0 => m[i] = b,
                1 => m.insert(i, b),
                _ => {
                    m.remove(i);
                }
            }
        }
        if let Ok(k) = parse_bytes(&m, "mutant") {
            parsed += 1;
            round_trip(&k);
        }
    }
    assert!(parsed > 100, "only {parsed} mutants parsed");
}

#[test]
fn generator_covers_the_instruction_set() {
    let all: String = (0..300).map(gen::program).collect();
    for m in [
        "tma.load A",
        "tma.load B",
        "tma.store",
        "bulk.load",
        "bulk.store",
        "store.wait",
        "mbar.init",
        "mbar.arrive",
        "mbar.expect_tx",
        "mbar.wait",
        "stage.acquire",
        "stage.release",
        "wgmma 8",
        "wgmma m64n",
        "wgmma.commit",
        "wgmma.wait",
        "bar.sync",
        "bar.arrive",
        "bubble",
        "exit",
        "\n        loop ",
        "stream",
        ") / ",
        "l1",
    ] {
        assert!(all.contains(m), "generator never emits {m:?}");
    }
}

/// A kernel whose expression table is shuffled and padded with unused
/// entries prints to text that parses back to the canonical kernel.
#[test]
fn non_canonical_expression_tables_print_equivalently() {
    let k = parse(SAMPLE, "sample.s").unwrap();
    let mut shuffled = k.clone();
    let n = k.exprs.len();
    shuffled.exprs.clear();
    shuffled.exprs.push(Expr::constant(12345)).unwrap();
    for e in k.exprs.iter().rev() {
        shuffled.exprs.push(*e).unwrap();
    }
    let map = |id: u16| (n - id as usize) as u16;
    for ins in shuffled.code.iter_mut() {
        match ins {
            Instr::TmaLoad { bar, coords, .. } => {
                bar.idx = map(bar.idx);
                coords.iter_mut().for_each(|c| *c = map(*c));
            }
            Instr::TmaStore { coords, .. } => coords.iter_mut().for_each(|c| *c = map(*c)),
            Instr::BulkLoad { bar, addr, .. } => {
                bar.idx = map(bar.idx);
                *addr = map(*addr);
            }
            Instr::BulkStore { addr, .. } => *addr = map(*addr),
            Instr::MbarInit { bar, .. }
            | Instr::MbarArrive { bar }
            | Instr::MbarExpectTx { bar, .. } => bar.idx = map(bar.idx),
            Instr::MbarWait { bar, parity } => {
                bar.idx = map(bar.idx);
                *parity = map(*parity);
            }
            Instr::StageAcquire { stage } | Instr::StageRelease { stage, .. } => {
                stage.idx = map(stage.idx)
            }
            Instr::BarSync { id, .. } | Instr::BarArrive { id, .. } => *id = map(*id),
            Instr::LoopBegin { count, .. } => *count = map(*count),
            _ => {}
        }
    }
    shuffled.validate().unwrap();
    assert_ne!(shuffled, k);
    assert_eq!(print(&shuffled), print(&k));
    assert_eq!(parse(&print(&shuffled), "p").unwrap(), k);
}

/// Lines of random tokens never make the parser panic or hang.
fn token_soup() -> impl Strategy<Value = String> {
    let tokens = [
        "kernel",
        "grid",
        "role",
        "r",
        "{",
        "}",
        "loop",
        "l0",
        "l1",
        "l3",
        "cta",
        "cx",
        "wg",
        "[",
        "]",
        "(",
        ")",
        ",",
        "=",
        "+",
        "-",
        "*",
        "/",
        "%",
        "0",
        "1",
        "4",
        "0x10",
        "99999999999999999999",
        "count",
        "regs",
        "stream",
        "tma.load",
        "A",
        "bar",
        "st",
        "mbar.wait",
        "stage.acquire",
        "wgmma",
        "m64n64k16",
        "bubble",
        "exit",
        "\n",
        "\n",
        "\n",
        "#",
        "tensormap",
        "base",
        "dims",
        "box",
        "strides",
        "elem",
        "mbarrier",
        "stage",
        "consumers",
    ];
    proptest::collection::vec(proptest::sample::select(tokens.to_vec()), 0..120)
        .prop_map(|v| v.join(" "))
}

proptest! {
    #[test]
    fn token_soup_never_panics(tail in token_soup(), prefix in 0usize..3) {
        let head = ["", "kernel t\ngrid 1\n", BASE][prefix];
        if let Ok(k) = parse(&format!("{head}{tail}"), "soup") {
            round_trip(&k);
        }
    }

    #[test]
    fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..400)) {
        let _ = parse_bytes(&bytes, "bytes");
        let mut with_base = BASE.as_bytes().to_vec();
        with_base.extend_from_slice(&bytes);
        let _ = parse_bytes(&with_base, "bytes");
    }
}
