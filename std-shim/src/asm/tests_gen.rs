//! A seeded generator of random, valid program text.

use std::fmt::Write as _;

pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(seed ^ 0x9e37_79b9_7f4a_7c15 | 1)
    }

    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

fn var(r: &mut Rng, depth: usize) -> String {
    let i = r.below(5 + depth as u64) as usize;
    ["cta", "cx", "cy", "cz", "wg"]
        .get(i)
        .map_or_else(|| format!("l{}", i - 5), |v| v.to_string())
}

fn int(r: &mut Rng) -> String {
    let v = r.below(5000);
    if r.below(4) == 0 {
        format!("{v:#x}")
    } else {
        v.to_string()
    }
}

pub fn expr(r: &mut Rng, depth: usize) -> String {
    let rem = if r.below(3) == 0 { 1 + r.below(16) } else { 0 };
    expr_rem(r, depth, rem)
}

/// A random expression; `% rem` is appended when `rem` is not 0.
pub fn expr_rem(r: &mut Rng, depth: usize, rem: u64) -> String {
    let mut s = String::new();
    for i in 0..1 + r.below(3) {
        let neg = r.below(3) == 0;
        s.push_str(match (i, neg) {
            (0, true) => "-",
            (0, false) => "",
            (_, true) => " - ",
            (_, false) => {
                if r.below(2) == 0 {
                    " + "
                } else {
                    "+"
                }
            }
        });
        let t = match r.below(4) {
            0 => int(r),
            1 => var(r, depth),
            2 => format!("{}*{}", var(r, depth), int(r)),
            _ => format!("{}*{}", int(r), var(r, depth)),
        };
        s.push_str(&t);
    }
    if r.below(3) == 0 {
        s = format!("({s})");
    }
    if r.below(3) == 0 {
        let _ = write!(s, " / {}", 1 + r.below(16));
    }
    if rem != 0 {
        let _ = write!(s, " % {rem}");
    }
    s
}

/// `NAME` or `NAME[EXPR % len]`, always in range when constant.
fn decl_ref(r: &mut Rng, name: &str, len: u64, depth: usize) -> String {
    match r.below(3) {
        0 => name.to_string(),
        1 => format!("{name}[{}]", r.below(len)),
        _ => format!("{name}[{}]", expr_rem(r, depth, len)),
    }
}

fn instr(r: &mut Rng, depth: usize) -> String {
    let e = |r: &mut Rng| expr(r, depth);
    match r.below(17) {
        0 => format!(
            "tma.load A, {}, [{}, {}]",
            decl_ref(r, "full", 4, depth),
            e(r),
            e(r)
        ),
        1 => format!(
            "tma.load B, {}, [{}, {}, {}]",
            decl_ref(r, "full", 4, depth),
            e(r),
            e(r),
            e(r)
        ),
        2 => format!("tma.store B,[{},{} ,{}]", e(r), e(r), e(r)),
        3 => format!(
            "bulk.load {}, {}, {}",
            decl_ref(r, "one", 1, depth),
            e(r),
            r.below(1 << 20)
        ),
        4 => format!("bulk.store {} , {}", e(r), r.below(1 << 32)),
        5 => format!("store.wait {}", r.below(256)),
        6 => format!(
            "mbar.init {}, {}",
            decl_ref(r, "full", 4, depth),
            1 + r.below(4)
        ),
        7 => format!("mbar.arrive {}", decl_ref(r, "one", 1, depth)),
        8 => format!(
            "mbar.expect_tx {}, {}",
            decl_ref(r, "full", 4, depth),
            r.below(1 << 32)
        ),
        9 => format!("mbar.wait {}, {}", decl_ref(r, "full", 4, depth), e(r)),
        10 => format!("stage.acquire {}", decl_ref(r, "ring", 3, depth)),
        11 => format!("stage.release {}", decl_ref(r, "ring", 3, depth)),
        12 => {
            let n = 8 * (1 + r.below(32));
            let mode = ["", " ss", " rs"][r.below(3) as usize];
            if r.below(2) == 0 {
                format!("wgmma {n}{mode}")
            } else {
                format!("wgmma m64n{n}k16{mode}")
            }
        }
        13 => "wgmma.commit".to_string(),
        14 => format!("wgmma.wait {}", r.below(256)),
        15 => {
            let op = if r.below(2) == 0 {
                "bar.sync"
            } else {
                "bar.arrive"
            };
            format!(
                "{op} {}, {}",
                expr_rem(r, depth, 16),
                128 * (1 + r.below(8))
            )
        }
        _ => match r.below(3) {
            0 => format!("bubble {}", r.below(1 << 32)),
            1 => {
                // One to four classes, in any order, zero and huge counts.
                let mut classes = vec!["fp32", "mufu", "fp16", "int"];
                let mut parts = Vec::new();
                for _ in 0..1 + r.below(4) {
                    let c = classes.remove(r.below(classes.len() as u64) as usize);
                    let ops = [0, 1, r.below(1 << 20), (1 << 32) - 1][r.below(4) as usize];
                    parts.push(format!("{c}={ops}"));
                }
                format!("compute {}", parts.join(" "))
            }
            _ => "exit".to_string(),
        },
    }
}

fn body(r: &mut Rng, out: &mut String, depth: usize, budget: &mut u32) {
    let n = 1 + r.below(5);
    for i in 0..n {
        let indent = "    ".repeat(depth + 1);
        if i > 0 && depth < 2 && *budget > 2 && r.below(4) == 0 {
            *budget -= 2;
            let _ = writeln!(out, "{indent}loop {} {{", expr(r, depth));
            body(r, out, depth + 1, budget);
            let _ = writeln!(out, "{indent}}}");
        } else if *budget > 0 || i == 0 {
            *budget = budget.saturating_sub(1);
            let comment = if r.below(8) == 0 { "  # note" } else { "" };
            let _ = writeln!(out, "{indent}{}{comment}", instr(r, depth));
        }
    }
}

pub fn program(seed: u64) -> String {
    let mut r = Rng::new(seed);
    let mut out = String::from(
        "kernel gen\ngrid 4 2\nsmem 1024\n\
         tensormap A base=0 elem=2 dims=[256, 256] strides=[512] box=[64, 64]\n\
         tensormap B base=0x100 elem=4 dims=[64, 64, 8] strides=[256, 16384] box=[16, 8, 2]\n\
         mbarrier full[4] count=1\nmbarrier one count=2\nstage ring[3] consumers=1\n",
    );
    let mut budget = 36;
    for i in 0..1 + r.below(3) {
        if r.below(6) == 0 {
            let _ = writeln!(out, "role s{i} count=1 regs=8 stream");
            continue;
        }
        let _ = writeln!(
            out,
            "\nrole r{i} count={} regs={} {{",
            1 + r.below(2),
            r.below(256)
        );
        body(&mut r, &mut out, 0, &mut budget);
        out.push_str("}\n");
    }
    out
}
