//! Error tests: each error is located at the right line and column.

use super::{parse, parse_bytes, round_trip, AsmError};
use simfa_core::CtaOrder;

/// Header used by the error tests: lines 1-6; a body line is line 7.
pub(super) const BASE: &str = "\
kernel t
grid 1
tensormap A base=0 elem=2 dims=[64, 64] strides=[128] box=[64, 64]
mbarrier bar[2] count=1
stage st[2] consumers=1
role r count=1 regs=32 {
";

fn err(src: &str) -> AsmError {
    match parse(src, "t.s") {
        Ok(k) => panic!("parsed:\n{src}\n{k:?}"),
        Err(e) => e,
    }
}

/// Asserts an error at `line:col` whose message contains `msg`.
#[track_caller]
fn check(src: &str, line: u32, col: u32, msg: &str) {
    let e = err(src);
    assert_eq!((e.line, e.col), (line, col), "{e}");
    assert!(e.msg.contains(msg), "message {:?} lacks {msg:?}", e.msg);
    assert_eq!(e.file, "t.s");
    assert!(e.to_string().starts_with(&format!("t.s:{line}:{col}: ")));
}

/// An error in the single body line `body` (line 7).
#[track_caller]
fn check_body(body: &str, col: u32, msg: &str) {
    check(&format!("{BASE}{body}\n}}\n"), 7, col, msg);
}

#[test]
fn base_is_valid() {
    parse(&format!("{BASE}    exit\n}}\n"), "t.s").unwrap();
}

#[test]
fn errors_in_instructions() {
    check_body("    wgmmma 64", 5, "unknown instruction 'wgmmma'");
    check_body("    tma.load Q, bar, [0, 0]", 14, "unknown tensor map 'Q'");
    check_body(
        "    tma.load A[0], bar, [0, 0]",
        15,
        "expected ',' after tensor map name, found '['",
    );
    check_body("    mbar.arrive nope", 17, "unknown mbarrier 'nope'");
    check_body("    stage.acquire zz", 19, "unknown stage 'zz'");
    check_body(
        "    stage.acquire bar",
        19,
        "'bar' is an mbarrier, not a stage",
    );
    check_body(
        "    tma.load A, bar[1], [0, 0, 0]",
        25,
        "tensor map 'A' has rank 2, so tma.load needs 2 coordinates, found 3",
    );
    check_body("    tma.store A, [cx]", 18, "needs 2 coordinates, found 1");
    check_body(
        "    wgmma 100",
        11,
        "wgmma N=100 is not a Hopper shape (multiple of 8 in 8..=256)",
    );
    check_body(
        "    wgmma m64n264k16",
        11,
        "wgmma N=264 is not a Hopper shape",
    );
    check_body("    wgmma m64n", 11, "expected a wgmma shape");
    check_body("    mbar.wait bar, cta / 0", 26, "division by zero");
    check_body("    mbar.wait bar, cta % 0", 26, "remainder by zero");
    check_body(
        "    mbar.wait bar, cta / -2",
        27,
        "division by a negative number",
    );
    check_body(
        "    bulk.store 9223372036854775807 + 1, 16",
        16,
        "integer overflow",
    );
    check_body(
        "    bulk.store 99999999999999999999, 16",
        16,
        "integer overflow",
    );
    check_body(
        "    bulk.store cx*9223372036854775807 + cx, 16",
        16,
        "integer overflow: coefficient 9223372036854775808 of cx",
    );
    check_body(
        "    bubble 4294967296",
        12,
        "integer overflow: cycle count 4294967296 is out of range",
    );
    check_body(
        "    bulk.store l0, 16",
        16,
        "loop counter 'l0' used outside any loop",
    );
    check_body("    bulk.store foo, 16", 16, "unknown variable 'foo'");
    check_body(
        "    mbar.arrive bar[2]",
        21,
        "index 2 out of range for mbarrier 'bar[2]'",
    );
    check_body(
        "    bar.sync 16, 128",
        14,
        "named barrier id 16 out of range",
    );
    check_body("    bar.sync 0, 100", 17, "multiple of 128");
    check_body("    mbar.init bar, 0", 20, "arrival count >= 1");
    check_body(
        "    exit now",
        10,
        "expected end of line after the exit operands, found 'now'",
    );
    check_body(
        "    mbar.wait bar, 1 % 2 / 2",
        26,
        "'/' must come before '%'",
    );
    check_body("    grid 2", 5, "'grid' statement inside a role body");
    check_body("    bubble 1 $", 14, "unexpected character '$'");
}

#[test]
fn errors_in_loops() {
    // l1 at depth 1 (line 8)
    check(
        &format!("{BASE}    loop 4 {{\n        bulk.store l1*16, 16\n    }}\n}}\n"),
        8,
        20,
        "loop counter 'l1' used at loop depth 1 (only l0 is in scope)",
    );
    // empty loop body: KernelError::EmptyLoop mapped to the loop's line
    check(
        &format!("{BASE}    bubble 1\n    loop 4 {{\n    }}\n}}\n"),
        8,
        5,
        "loop body has no timed instruction",
    );
    // a loop holding only an empty loop
    check(
        &format!("{BASE}    loop 4 {{\n      loop 2 {{\n      }}\n    }}\n}}\n"),
        8,
        7,
        "loop body has no timed instruction",
    );
    // unclosed loop: points at its '{'
    check(
        &format!("{BASE}    loop 2 {{\n        bubble 1\n"),
        7,
        12,
        "unclosed '{' of loop",
    );
    // unclosed role
    check(
        &format!("{BASE}    exit\n"),
        6,
        24,
        "unclosed '{' of role 'r'",
    );
    // stray '}'
    check(
        &format!("{BASE}    exit\n}}\n  }}\n"),
        9,
        3,
        "unexpected '}'",
    );
    check(
        &format!("{BASE}    loop 2 {{ bubble 1\n    }}\n}}\n"),
        7,
        14,
        "expected end of line after '{'",
    );
    // five nested loops
    let mut s = BASE.to_string();
    for _ in 0..5 {
        s.push_str("loop 2 {\n");
    }
    check(&s, 11, 1, "loops nest deeper than 4");
}

#[test]
fn errors_in_declarations() {
    let long = "mbarrier abcdefghijklmnopqrstuvwxyz count=1";
    check(
        &format!("kernel t\ngrid 1\n{long}\n"),
        3,
        10,
        "name 'abcdefghijklmnopqrstuvwxyz' is longer than 24 bytes",
    );
    check(
        &format!("{BASE}    exit\n}}\nstage bar consumers=1\n"),
        9,
        7,
        "duplicate declaration 'bar' (already declared as an mbarrier at line 4)",
    );
    check(
        &format!("{BASE}    exit\n}}\nrole r\n"),
        9,
        6,
        "duplicate declaration 'r' (already declared as a role",
    );
    check(
        &format!("{BASE}    exit\n}}\ngrid 2\n"),
        9,
        1,
        "duplicate 'grid' statement (first at line 2)",
    );
    check(
        "kernel t\ngrid 0\nrole r {\n}\n",
        2,
        1,
        "grid dimensions must be >= 1",
    );
    check(
        "kernel t\ngrid 1\ntensormap X base=0 elem=1 dims=[64] strides=[] box=[65]\nrole r {\n}\n",
        3,
        1,
        "tensor map 'X': the box's inner extent must span a multiple of 16 bytes",
    );
    check(
        "kernel t\ngrid 1\ntensormap X base=0 elem=1 dims=[64] strides=[16] box=[64]\n",
        3,
        37,
        "needs 0 strides, found 1",
    );
    check(
        "kernel t\ngrid 1\ntensormap X base=0 elem=1 dims=[64, 2] box=[64, 1]\n",
        3,
        51,
        "tensormap 'X' is missing 'strides='",
    );
    // a rank-1 map may leave out its (empty) strides
    let k = parse(
        "kernel t\ngrid 1\ntensormap X base=0 elem=2 dims=[64] box=[64]\nrole a {\n exit\n}\n",
        "t.s",
    )
    .unwrap();
    assert_eq!(k.maps[0].strides, [2, 0, 0, 0, 0]);
    round_trip(&k);
    check(
        "kernel t\ngrid 1\nrole a count=4 {\n}\nrole b count=5 stream\n",
        5,
        1,
        "at most 8 WarpGroups",
    );
    check(
        "kernel t\ngrid 1\nrole a count=0 {\n}\n",
        3,
        14,
        "role 'a' needs count >= 1",
    );
    check("kernel t\ngrid 1\n", 1, 1, "kernel has no roles");
    check(
        "grid 1\nrole a {\n}\n",
        1,
        1,
        "missing 'kernel NAME' statement",
    );
    check("kernel t\nrole a {\n}\n", 1, 1, "missing 'grid");
    check(
        "kernel t\ngrid 1\nwgmma 64\n",
        3,
        1,
        "instruction 'wgmma' outside a role body",
    );
    check("kernel t\ngrid 1\nfoo\n", 3, 1, "unknown statement 'foo'");
    check("kernel t\ngrid 1\norder grouped 0\n", 3, 15, "rows >= 1");
    check(
        "kernel t\ngrid 1\nmbarrier m[200] count=1\nmbarrier n[57] count=1\n",
        4,
        12,
        "more than 256 mbarriers per CTA",
    );
    check(
        "kernel t\ngrid 1 2 3 4\n",
        2,
        12,
        "expected end of line after the 'grid' statement, found '4'",
    );
}

#[test]
fn non_utf8_is_located() {
    let e = parse_bytes(b"kernel t\ngrid 1\n  \xc3\xa9\xff rest\n", "bin.s").unwrap_err();
    assert_eq!((e.file.as_str(), e.line, e.col), ("bin.s", 3, 4), "{e}");
    assert!(e.msg.contains("invalid UTF-8: unexpected byte 0xff"), "{e}");
    // valid bytes parse as text; non-ASCII characters are counted as one column
    let e = parse_bytes("kernel t\ngrid 1\n é\n".as_bytes(), "u.s").unwrap_err();
    assert_eq!((e.line, e.col), (3, 2), "{e}");
    assert!(e.msg.contains("unexpected character 'é'"), "{e}");
}

#[test]
fn capacities_are_errors() {
    let mut s = BASE.to_string();
    for _ in 0..simfa_core::kernel::MAX_CODE + 1 {
        s.push_str("    bubble 1\n");
    }
    s.push_str("}\n");
    check(
        &s,
        7 + 1024,
        5,
        "too many instructions: a kernel holds at most 1024",
    );
    let mut s = BASE.to_string();
    for i in 0..300 {
        s.push_str(&format!("    bulk.store {i}, 16\n"));
    }
    s.push_str("}\n");
    // bar's element 0 is not used, so expressions 0..=255 fit and 256 is the 257th
    check(&s, 7 + 256, 16, "too many distinct expressions");
    let mut s = "kernel t\ngrid 1\n".to_string();
    for i in 0..9 {
        s.push_str(&format!("role r{i} stream\n"));
    }
    check(&s, 11, 1, "too many roles (at most 8)");
}

#[test]
fn windows_line_endings_and_defaults() {
    let k = parse(
        "kernel t\r\ngrid 3\r\nrole a {\r\n  exit\r\n}\r\n",
        "crlf.s",
    )
    .unwrap();
    assert_eq!(k.grid, [3, 1, 1]);
    assert_eq!(k.order, CtaOrder::Linear);
    assert_eq!(
        (k.roles[0].count, k.roles[0].regs, k.roles[0].len),
        (1, 0, 1)
    );
    round_trip(&k);
    let bom = parse("\u{feff}kernel t\ngrid 3\nrole a {\n  exit\n}\n", "bom.s").unwrap();
    assert_eq!(bom, k);
}

#[test]
fn declaration_capacities() {
    let mut s = "kernel t\ngrid 1\n".to_string();
    for i in 0..33 {
        s.push_str(&format!(
            "tensormap m{i} base=0 elem=2 dims=[64] strides=[] box=[64]\n"
        ));
    }
    check(&s, 35, 1, "too many tensor maps (at most 32)");
    let mut s = "kernel t\ngrid 1\n".to_string();
    for i in 0..17 {
        s.push_str(&format!("stage s{i} consumers=1\n"));
    }
    check(&s, 19, 1, "too many stage declarations (at most 16)");
}
