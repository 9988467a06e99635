//! Tests of the GEMM generator's rasterisation and addresses: the tile each
//! CTA and WarpGroup computes follows Triton's grouped order, and the CTAs
//! of a row block load identical A lines (a child module of `gemm`).

use super::*;
use crate::gen::gemm_params::*;
use simfa_core::isa::EvalCtx;

fn variant(m: u32, n: u32, k: u32) -> GemmParams {
    GemmParams::new(m, n, k)
}

/// Triton's grouped program-id mapping: (pid_m, pid_n) of program `pid`.
fn triton(pid: u64, npm: u64, npn: u64, g: u64) -> (u64, u64) {
    let in_group = g * npn;
    let first = pid / in_group * g;
    let size = (npm - first).min(g);
    (first + pid % in_group % size, pid % in_group / size)
}

/// Global address of the box origin `coords` of map `m`.
fn origin(m: &TensorMap, coords: &[i64]) -> u64 {
    let mut a = m.base + coords[0] as u64 * m.elem_bytes as u64;
    for (&c, &stride) in coords.iter().zip(&m.strides).take(m.rank as usize).skip(1) {
        a += c as u64 * stride;
    }
    a
}

fn eval_coords(k: &Kernel, i: &Instr, ctx: &EvalCtx) -> (u8, Vec<i64>) {
    let (map, c) = match *i {
        Instr::TmaLoad { map, coords, .. } | Instr::TmaStore { map, coords } => (map, coords),
        _ => unreachable!(),
    };
    let rank = k.maps[map as usize].rank as usize;
    (
        map,
        c[..rank]
            .iter()
            .map(|&e| k.exprs[e as usize].eval(ctx))
            .collect(),
    )
}

/// (pid_m, pid_n, k offset) of every TMA load and the C rows stored, for
/// the WarpGroup `wg` of the CTA `cta` at loop counters `l`, through the
/// true row-major addresses.
fn tiles_at(k: &Kernel, p: &GemmParams, cta: u32, wg: u8, l: [u32; 4]) -> Vec<(u8, u64, u64)> {
    let ctx = EvalCtx {
        cta,
        c: k.cta_coords(cta),
        wg,
        l,
    };
    let [a_base, b_base, c_base] = tensor_bases(p);
    let mut out = vec![];
    for i in k.code.iter() {
        if !matches!(i, Instr::TmaLoad { .. } | Instr::TmaStore { .. }) {
            continue;
        }
        let (map, c) = eval_coords(k, i, &ctx);
        let addr = origin(&k.maps[map as usize], &c);
        // (row, col) of the origin in the row-major tensor
        let (base, cols) = match map {
            MAP_A => (a_base, p.k),
            MAP_B => (b_base, p.n),
            _ => (c_base, p.n),
        };
        let e = (addr - base) / 2;
        out.push((map, e / cols as u64, e % cols as u64));
    }
    out
}

#[test]
fn grouped_rasterisation_follows_triton() {
    // 8 x 8 tiles, bands of 4 row blocks: CTAs 0..4 walk down column 0.
    let p = GemmParams {
        group_m: 4,
        ..variant(1024, 1024, 128)
    };
    let k = gemm(&p).unwrap();
    assert_eq!(k.order, CtaOrder::Grouped { rows: 4 });
    let first: Vec<[u32; 3]> = (0..6).map(|i| k.cta_coords(i)).collect();
    assert_eq!(
        first,
        [
            [0, 0, 0],
            [0, 1, 0],
            [0, 2, 0],
            [0, 3, 0],
            [1, 0, 0],
            [1, 1, 0]
        ]
    );
    // Every variant, including a tail band (5 row blocks in bands of 2) and
    // persistent kernels, maps CTA/iteration to Triton's tile, at the true
    // row-major addresses of A, B and C.
    let cases = [
        p,
        GemmParams {
            group_m: 2,
            ..variant(640, 512, 128)
        },
        GemmParams {
            persistent: true,
            ctas: 6,
            ..p
        },
        GemmParams {
            persistent: true,
            ctas: 7,
            stages: 2,
            consumers: 2,
            ..p
        },
        GemmParams {
            persistent: true,
            ctas: 3,
            group_m: 1,
            ..variant(512, 768, 128)
        },
    ];
    for p in cases {
        let k = gemm(&p).unwrap();
        let (npm, npn) = (p.tiles_m() as u64, p.tiles_n() as u64);
        let (bm, bn) = (p.block_m as u64, p.block_n as u64);
        let mut seen = vec![false; p.tiles() as usize];
        let ctas = k.ctas() as u32;
        for cta in 0..ctas {
            let per_cta = if p.persistent {
                (p.tiles() as u32 - cta).div_ceil(ctas)
            } else {
                1
            };
            for t in 0..per_cta {
                let pid = cta as u64 + t as u64 * ctas as u64;
                let (pm, pn) = triton(pid, npm, npn, p.group_m as u64);
                assert!(!seen[(pm * npn + pn) as usize]);
                seen[(pm * npn + pn) as usize] = true;
                for wg in 0..p.consumers as u8 {
                    // K iteration 1 (l1 when persistent)
                    let l = if p.persistent {
                        [t, 1, 0, 0]
                    } else {
                        [1, 0, 0, 0]
                    };
                    let got = tiles_at(&k, &p, cta, wg, l);
                    let h = p.rows_per_consumer() as u64;
                    let want = vec![
                        (MAP_A, pm * bm, p.block_k as u64),
                        (MAP_B, p.block_k as u64, pn * bn),
                        (MAP_C, pm * bm + wg as u64 * h, pn * bn),
                    ];
                    assert_eq!(got, want, "{p:?} cta {cta} tile {t} wg {wg}");
                }
            }
            // The tile loop's trip count.
            if p.persistent {
                let ctx = EvalCtx {
                    cta,
                    ..EvalCtx::default()
                };
                let Instr::LoopBegin { count, .. } = k.code[0] else {
                    panic!()
                };
                assert_eq!(k.exprs[count as usize].eval(&ctx), per_cta as i64);
            }
        }
        assert!(seen.iter().all(|&s| s), "{p:?}");
    }
}

#[test]
fn real_addresses_share_a_row_block_of_a() {
    // CTAs of one tile row load identical A boxes; those of one column
    // identical B boxes; every map is the row-major layout of its tensor.
    let p = variant(512, 512, 256);
    let k = gemm(&p).unwrap();
    let a0 = tiles_at(&k, &p, 0, 0, [2, 0, 0, 0]);
    let a1 = tiles_at(&k, &p, 1, 0, [2, 0, 0, 0]);
    let a4 = tiles_at(&k, &p, 4, 0, [2, 0, 0, 0]);
    assert_eq!(a0[0], a1[0]);
    assert_ne!(a0[0], a4[0]);
    assert_eq!(a0[1], a4[1]);
    for (m, cols) in k.maps.iter().zip([p.k, p.n, p.n]) {
        assert_eq!(m.strides[1], cols as u64 * 2);
    }
    let pk = GemmParams {
        persistent: true,
        group_m: 2,
        ..p
    };
    let k = gemm(&pk).unwrap();
    let [a, _, c] = [&k.maps[0], &k.maps[1], &k.maps[2]];
    assert_eq!(a.rank, 4);
    assert_eq!(a.dims[..4], [256, 128, 2, 2]);
    assert_eq!(a.strides[1..4], [512, 512 * 128, 512 * 256]);
    assert_eq!(c.dims[..4], [512, 128, 2, 2]);
    assert_eq!(c.full_box_bytes(), 128 * 128 * 2);
}

/// The box origins (map, evaluated coordinates) of every TMA copy the
/// WarpGroup `wg` of role `role` in CTA `cta` issues, in program order,
/// loops run with their evaluated trip counts.
fn walk(k: &Kernel, role: usize, cta: u32, wg: u8) -> Vec<(u8, Vec<i64>)> {
    let r = &k.roles[role];
    let (start, end) = (r.start as usize, r.start as usize + r.len as usize);
    let mut ctx = EvalCtx {
        cta,
        c: k.cta_coords(cta),
        wg,
        l: [0; 4],
    };
    let mut out = vec![];
    // (begin pc, trip count) of the open loops
    let mut open: Vec<(usize, i64)> = vec![];
    let mut pc = start;
    while pc < end {
        match k.code[pc] {
            Instr::LoopBegin { count, end: e } => {
                let n = k.exprs[count as usize].eval(&ctx);
                if n <= 0 {
                    pc = e as usize + 1;
                    continue;
                }
                ctx.l[open.len()] = 0;
                open.push((pc, n));
            }
            Instr::LoopEnd { .. } => {
                let d = open.len() - 1;
                ctx.l[d] += 1;
                if (ctx.l[d] as i64) < open[d].1 {
                    pc = open[d].0 + 1;
                    continue;
                }
                ctx.l[d] = 0;
                open.pop();
            }
            Instr::Exit => break,
            i @ (Instr::TmaLoad { .. } | Instr::TmaStore { .. }) => {
                out.push(eval_coords(k, &i, &ctx));
            }
            _ => {}
        }
        pc += 1;
    }
    out
}

/// (row, col) of the element at the box origin `c` of map `map`.
fn row_col(k: &Kernel, p: &GemmParams, map: u8, c: &[i64]) -> (u64, u64) {
    let [a_base, b_base, c_base] = tensor_bases(p);
    let (base, cols) = match map_tensor(k, map) {
        MAP_A => (a_base, p.k),
        MAP_B => (b_base, p.n),
        _ => (c_base, p.n),
    };
    let e = (origin(&k.maps[map as usize], c) - base) / 2;
    (e / cols as u64, e % cols as u64)
}

/// The tensor (`MAP_A`, `MAP_B` or `MAP_C`) map `map` views.
fn map_tensor(k: &Kernel, map: u8) -> u8 {
    match k.maps[map as usize].name.as_str() {
        "A" | "A_last" => MAP_A,
        "B" => MAP_B,
        _ => MAP_C,
    }
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(48))]

    /// A persistent kernel over any grouped raster, the last group partial
    /// or not, visits every tile once, in Triton's order (CTA `c` takes
    /// tiles `c, c + grid, ...` of it), its producer loading that tile's A
    /// rows and B columns over the whole of K; with M not a whole number of
    /// row blocks too. A map that covers the last row block clips it.
    #[test]
    fn persistent_grouped_raster_visits_every_tile_once(
        rows in 1u32..12, cols in 1u32..7, kb in 1u32..4,
        group in 1u32..10, ctas in 1u32..20, stages in 1u32..4,
        clip in proptest::prop_oneof![proptest::strategy::Just(0u32), 1u32..128],
    ) {
        let p = GemmParams {
            persistent: true,
            ctas,
            group_m: group,
            stages,
            consumers: if stages > 1 { 2 } else { 1 },
            ..variant(rows * 128 - clip, cols * 128, kb * 64)
        };
        let k = gemm(&p).unwrap();
        k.validate().unwrap();
        // No map of A or C reaches past its tensor, so TMA clips the last
        // row block.
        let [a_base, _, c_base] = tensor_bases(&p);
        for (i, m) in k.maps.iter().enumerate() {
            let last = m.base
                + (0..m.rank as usize)
                    .map(|d| (m.dims[d] - 1) * if d == 0 { 2 } else { m.strides[d] })
                    .sum::<u64>();
            let end = match map_tensor(&k, i as u8) {
                MAP_A => a_base + p.m as u64 * p.k as u64 * 2,
                MAP_B => continue,
                _ => c_base + p.m as u64 * p.n as u64 * 2,
            };
            proptest::prop_assert!(last < end, "map {} ends past its tensor", m.name);
        }
        let (npm, npn) = (rows as u64, cols as u64);
        let grid = k.ctas() as u32;
        let consumer = k.roles.len() - 1;
        let mut seen = vec![0u32; (npm * npn) as usize];
        for cta in 0..grid {
            let stores: Vec<(u64, u64)> = walk(&k, consumer, cta, 1)
                .into_iter()
                .filter(|(m, _)| map_tensor(&k, *m) == MAP_C)
                .map(|(m, c)| row_col(&k, &p, m, &c))
                .collect();
            let want: Vec<(u64, u64)> = (cta as u64..npm * npn)
                .step_by(grid as usize)
                .map(|pid| {
                    let (pm, pn) = triton(pid, npm, npn, group as u64);
                    let h = p.rows_per_consumer() as u64;
                    (pm * 128 + if p.consumers > 1 { h } else { 0 }, pn * 128)
                })
                .collect();
            proptest::prop_assert_eq!(&stores, &want, "cta {}", cta);
            for (r, c) in &want {
                seen[(r / 128 * npn + c / 128) as usize] += 1;
            }
            // The loads: per tile, kb iterations of A (its rows) and B
            // (its columns).
            let loads: Vec<(u8, (u64, u64))> = walk(&k, 0, cta, 0)
                .into_iter()
                .filter(|(m, _)| map_tensor(&k, *m) != MAP_C)
                .map(|(m, c)| (map_tensor(&k, m), row_col(&k, &p, m, &c)))
                .collect();
            let want_loads: Vec<(u8, (u64, u64))> = want
                .iter()
                .flat_map(|&(r, c)| {
                    (0..kb as u64).flat_map(move |i| {
                        [(MAP_A, (r / 128 * 128, i * 64)), (MAP_B, (i * 64, c))]
                    })
                })
                .collect();
            proptest::prop_assert_eq!(loads, want_loads, "cta {}", cta);
        }
        proptest::prop_assert!(seen.iter().all(|&n| n == 1), "{:?}", seen);
    }
}
