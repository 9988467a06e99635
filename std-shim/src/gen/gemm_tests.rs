//! Tests of the GEMM generator (a child module of `gemm`).

use std::collections::BTreeMap;

use super::*;
use crate::gen::gemm_params::*;
use simfa_core::config::MemoryModel;
use simfa_core::{Cycle, Event, GpuConfig, Observer};

/// The generator as it was before the tile, pipeline and persistence
/// parameters (plus the epilogue's `compute` of the FP16 conversion): the
/// default kernel must stay byte-identical to it (the golden digests depend
/// on it).
fn legacy_gemm(p: &GemmParams) -> Result<Kernel, GenError> {
    for (dim, value, tile) in [("M", p.m, 128), ("N", p.n, 128), ("K", p.k, 64)] {
        if value % tile != 0 {
            return Err(GenError::NotMultiple { dim, value, tile });
        }
    }
    let mut k = Kb::new(
        Kernel::default(),
        &name(&format!("gemm_{}x{}x{}", p.m, p.n, p.k)),
    )?;
    k.grid([p.n / 128, p.m / 128, 1]);
    k.smem(65536);
    let e = ELEM_BYTES as u64;
    let b_base = after(A_BASE, p.m as u64 * p.k as u64 * e);
    let c_base = after(b_base, p.k as u64 * p.n as u64 * e);
    let maps = [
        map2d("A", A_BASE, p.m, p.k, 64, 128),
        map2d("B", b_base, p.k, p.n, 128, 64),
        map2d("C", c_base, p.m, p.n, 128, 128),
    ];
    let (a, b, c) = (0u8, 1u8, 2u8);
    for m in maps {
        k.map(m)?;
    }
    k.mbarriers("full", 1, 1)?;

    // In order of first use, as the text assembly numbers them.
    let trips = Expr::constant((p.k / 64) as i64);
    k.expr(trips)?;
    let zero = k.expr(Expr::constant(0))?;
    let k_off = k.expr(Expr {
        l: [64_i64, 0, 0, 0],
        ..Expr::constant(0)
    })?;
    let row = k.expr(Expr {
        c: [0, 128_i64, 0],
        ..Expr::constant(0)
    })?;
    let col = k.expr(Expr {
        c: [128_i64, 0, 0],
        ..Expr::constant(0)
    })?;
    let parity = k.expr(Expr {
        l: [1, 0, 0, 0],
        rem: 2,
        ..Expr::constant(0)
    })?;
    let full = Ref { decl: 0, idx: zero };
    let maps = &k.kernel().maps;
    let tile_bytes = maps[a as usize].full_box_bytes() + maps[b as usize].full_box_bytes();

    k.begin_role("main", 1, 168)?;
    let begin = k.loop_begin(trips)?;
    k.op(Instr::MbarExpectTx {
        bar: full,
        bytes: tile_bytes as u32,
    })?;
    k.op(Instr::TmaLoad {
        map: a,
        bar: full,
        coords: [k_off, row, zero, zero, zero],
        multicast: 0,
    })?;
    k.op(Instr::TmaLoad {
        map: b,
        bar: full,
        coords: [col, k_off, zero, zero, zero],
        multicast: 0,
    })?;
    k.op(Instr::MbarArrive { bar: full })?;
    k.op(Instr::MbarWait { bar: full, parity })?;
    for _ in 0..(128 / 64) * (64 / 16) {
        k.op(Instr::Wgmma {
            n: 128_u16,
            mode: simfa_core::WgmmaMode::Ss,
        })?;
    }
    k.op(Instr::WgmmaCommit)?;
    k.op(Instr::WgmmaWait { n: 0 })?;
    k.loop_end(begin)?;
    k.op(Instr::Compute {
        work: simfa_core::Work {
            fp16: 128 * 128,
            ..Default::default()
        },
    })?;
    k.op(Instr::TmaStore {
        map: c,
        coords: [col, row, zero, zero, zero],
    })?;
    k.op(Instr::StoreWait { n: 0 })?;
    k.op(Instr::Exit)?;
    k.end_role()?;
    Ok(k.finish()?)
}

#[test]
fn shape_and_program() {
    let k = gemm(&GemmParams::new(256, 512, 192)).unwrap();
    assert_eq!(k.name.as_str(), "gemm_256x512x192");
    assert_eq!(k.grid, [4, 2, 1]);
    assert_eq!(k.roles.len(), 1);
    assert_eq!(k.roles[0].name.as_str(), "main");
    assert_eq!(k.roles[0].regs, 168);
    assert_eq!(k.smem_bytes, 65536);
    // loop begin + 15 per iteration + loop end + compute, store,
    // store.wait, exit
    assert_eq!(k.code.len(), 1 + 15 + 1 + 4);
    assert_eq!(k.roles[0].len as usize, k.code.len());
    assert_eq!(
        k.code
            .iter()
            .filter(|i| matches!(
                i,
                Instr::Wgmma {
                    n: 128,
                    mode: simfa_core::WgmmaMode::Ss
                }
            ))
            .count(),
        8
    );
    assert_eq!(
        k.code[1],
        Instr::MbarExpectTx {
            bar: Ref { decl: 0, idx: 1 },
            bytes: 32768
        }
    );
    assert_eq!(k.code[16], Instr::LoopEnd { begin: 0 });
    assert!(matches!(k.code[0], Instr::LoopBegin { end: 16, .. }));
    assert_eq!(k.code.last(), Some(&Instr::Exit));
    k.validate().unwrap();
    k.check_fits(&GpuConfig::h800()).unwrap();
    assert_eq!(k.mbarriers.len(), 1);
    assert_eq!(k.mbarriers[0].name.as_str(), "full");
}

#[test]
fn tensor_maps() {
    let k = gemm(&GemmParams::new(256, 384, 128)).unwrap();
    let [a, b, c] = [&k.maps[0], &k.maps[1], &k.maps[2]];
    assert_eq!((a.dims[0], a.dims[1], a.strides[1]), (128, 256, 256));
    assert_eq!((b.dims[0], b.dims[1], b.strides[1]), (384, 128, 768));
    assert_eq!((c.dims[0], c.dims[1], c.strides[1]), (384, 256, 768));
    assert_eq!(a.full_box_bytes() + b.full_box_bytes(), 32768);
    assert_eq!(c.full_box_bytes(), 32768);
    assert_eq!(a.base, 0x1000_0000);
    assert_eq!(b.base % (1 << 20), 0);
    assert!(b.base >= a.base + 256 * 128 * 2);
    assert!(c.base >= b.base + 128 * 384 * 2 && c.base % (1 << 20) == 0);
}

#[test]
fn exprs_are_deduplicated() {
    let k = gemm(&GemmParams::default()).unwrap();
    for (i, e) in k.exprs.iter().enumerate() {
        assert!(!k.exprs[..i].contains(e), "expr {i} duplicated");
    }
    // trip count, zero, l0*64, cy*128, cx*128, l0%2
    assert_eq!(k.exprs.len(), 6);
    assert_eq!(k.exprs[0], Expr::constant(64));
    assert_eq!(k.exprs[1], Expr::constant(0));
}

#[test]
fn bad_shapes() {
    let e = gemm(&GemmParams::new(128, 128, 0)).unwrap_err();
    assert_eq!(e, GenError::Zero { dim: "K" });
    assert!(e.to_string().contains('K'));
    assert_eq!(
        gemm(&GemmParams::new(0, 128, 64)).unwrap_err(),
        GenError::Zero { dim: "M" }
    );
    // Rows of N and K elements must be whole 16-byte units (TMA strides).
    let e = gemm(&GemmParams::new(128, 201, 64)).unwrap_err();
    assert_eq!(
        e,
        GenError::NotMultiple {
            dim: "N",
            value: 201,
            tile: 8
        }
    );
    assert!(e.to_string().contains("N = 201"), "{e}");
    let e = gemm(&GemmParams::new(128, 128, 100)).unwrap_err();
    assert!(matches!(
        e,
        GenError::NotMultiple {
            dim: "K",
            tile: 8,
            ..
        }
    ));
    // Any M, and N, K off the tile: the edge tiles are clipped.
    let k = gemm(&GemmParams::new(100, 200, 96)).unwrap();
    assert_eq!(k.grid, [2, 1, 1]);
    // A persistent kernel clips the last row block too: its maps of A and
    // C are the 100 rows.
    let k = gemm(&GemmParams {
        persistent: true,
        stages: 2,
        ..GemmParams::new(100, 256, 64)
    })
    .unwrap();
    assert_eq!((k.maps[0].dims[1], k.maps[2].dims[1]), (100, 100));
    // 2^25 x 2^25 tiles: the grid is too large.
    let big = u32::MAX / 128 * 128;
    assert!(matches!(
        gemm(&GemmParams::new(big, big, 64)),
        Err(GenError::Invalid(_))
    ));
    // Long names are cut, not refused.
    let k = gemm(&GemmParams::new(1 << 20, 1 << 20, 1 << 20)).unwrap();
    assert_eq!(k.name.len(), 24);
}

#[test]
fn runs_and_loads_match_expect_tx() {
    let p = GemmParams::new(256, 256, 256);
    let k = gemm(&p).unwrap();
    let cfg = GpuConfig::h800();
    let out = crate::run::simulate(&cfg, &k, &mut ()).unwrap();
    let s = out.summary.stats;
    assert_eq!(s.wgmmas, 4 * 4 * 8);
    assert_eq!(s.bytes_loaded, 4 * 4 * 32768);
    assert_eq!(s.bytes_stored, 4 * 32768);
    assert_eq!(out.flops, 2 * 256 * 256 * 256);
    // loop begin/end are not counted: 15 per iteration + 4.
    assert_eq!(s.instructions, 4 * (4 * 15 + 4));
}

#[test]
fn default_kernel_is_byte_identical_to_the_legacy_generator() {
    for p in [
        GemmParams::default(),
        GemmParams::new(1024, 1024, 1024),
        GemmParams::new(256, 512, 192),
        GemmParams::new(512, 256, 2048),
        GemmParams::new(128, 128, 64),
        GemmParams::new(1 << 20, 1 << 20, 1 << 20),
    ] {
        let new = gemm(&p).unwrap();
        assert_eq!(new, legacy_gemm(&p).unwrap(), "{p:?}");
        assert_eq!(
            crate::load::encode_kernel(&new),
            crate::load::encode_kernel(&legacy_gemm(&p).unwrap())
        );
    }
    // A zero dimension is refused by both; shapes off the tile, which the
    // legacy generator refused, are clipped edge tiles now.
    assert_eq!(
        gemm(&GemmParams::new(128, 0, 64)).unwrap_err(),
        GenError::Zero { dim: "N" }
    );
    for p in [GemmParams::new(100, 128, 64), GemmParams::new(128, 128, 96)] {
        assert!(legacy_gemm(&p).is_err());
        assert!(gemm(&p).is_ok());
    }
}

/// Issued instructions per (role, mnemonic), over the whole run.
#[derive(Default)]
struct Issues(BTreeMap<(u8, &'static str), u64>);

impl Observer for Issues {
    fn on_event(&mut self, _: Cycle, e: &Event) {
        if let Event::Issue { who, op } = e {
            *self.0.entry((who.role, op.mnemonic())).or_default() += 1;
        }
    }
}

/// The closed form of [`Issues`] from the shape alone.
fn expected_issues(p: &GemmParams) -> BTreeMap<(u8, &'static str), u64> {
    let t = p.tiles();
    let it = t * p.k_iters() as u64; // tile iterations over the grid
    let ctas = p.grid_ctas();
    let w = p.wgmmas_per_iter() as u64;
    let iter_b = (p.iter_bubble_cycles() > 0) as u64;
    let pro_b = (p.prologue_bubble > 0) as u64;
    let tma = p.epilogue == Epilogue::Tma;
    let drains = if p.persistent && tma { t } else { 0 } + ctas;
    let mut m = BTreeMap::new();
    let mut put = |role: u8, op: &'static str, n: u64| {
        if n > 0 {
            m.insert((role, op), n);
        }
    };
    let (load_role, mma_role, c) = if p.stages == 1 {
        (0, 0, 1)
    } else {
        (0, 1, p.consumers as u64)
    };
    put(load_role, "mbar.expect_tx", it);
    put(load_role, "tma.load", 2 * it);
    put(load_role, "mbar.arrive", it);
    if p.stages >= 2 {
        put(0, "stage.acquire", it);
        put(0, "exit", ctas);
        put(1, "stage.release", it * c);
    }
    put(mma_role, "mbar.wait", it * c);
    put(mma_role, "wgmma", it * w * c);
    put(mma_role, "wgmma.commit", it * c);
    put(mma_role, "wgmma.wait", it * c);
    put(mma_role, "bubble", (it * iter_b + ctas * pro_b) * c);
    put(mma_role, "compute", t * c);
    put(mma_role, if tma { "tma.store" } else { "st.global" }, t * c);
    put(mma_role, "store.wait", drains * c);
    put(mma_role, "exit", ctas * c);
    m
}

fn run(p: &GemmParams) -> (crate::run::RunOutcome, Issues) {
    let k = gemm(p).unwrap();
    k.check_fits(&GpuConfig::h800()).unwrap();
    let mut obs = Issues::default();
    let out = crate::run::simulate(&GpuConfig::h800(), &k, &mut obs).unwrap();
    (out, obs)
}

fn variant(m: u32, n: u32, k: u32) -> GemmParams {
    GemmParams::new(m, n, k)
}

#[test]
fn issue_counts_match_the_closed_form() {
    let base = variant(256, 384, 512);
    let cases = [
        base,
        GemmParams {
            block_n: 64,
            block_k: 32,
            ..base
        }
        .calibrated(Calibration::H800),
        GemmParams { stages: 2, ..base },
        GemmParams {
            stages: 3,
            consumers: 2,
            prologue_bubble: 100,
            iter_bubble: 10,
            ..base
        },
        GemmParams {
            block_m: 256,
            block_n: 96,
            block_k: 128,
            stages: 2,
            consumers: 2,
            ..variant(512, 384, 512)
        },
        GemmParams {
            persistent: true,
            ctas: 4,
            ..base
        },
        GemmParams {
            persistent: true,
            ctas: 5,
            stages: 4,
            consumers: 2,
            group_m: 2,
            iter_bubble: 64,
            ..base
        },
        GemmParams {
            epilogue: Epilogue::Registers,
            ..base
        },
        GemmParams {
            persistent: true,
            ctas: 5,
            stages: 2,
            consumers: 2,
            epilogue: Epilogue::Registers,
            wgmma_n: 64,
            ..base
        },
    ];
    for p in cases {
        let (out, obs) = run(&p);
        assert_eq!(obs.0, expected_issues(&p), "{p:?}");
        let s = out.summary.stats;
        assert_eq!(out.flops, p.flops(), "{p:?}");
        assert_eq!(
            s.wgmmas,
            p.tiles()
                * p.k_iters() as u64
                * (p.block_m / 64 * p.block_k / 16 * p.block_n / p.mma_n()) as u64
        );
        assert_eq!(
            s.bytes_loaded,
            p.tiles() * p.k_iters() as u64 * p.stage_bytes()
        );
        assert_eq!(s.bytes_stored, p.m as u64 * p.n as u64 * 2);
        assert_eq!(s.ctas_retired, p.grid_ctas());
        let bubbles = p.tiles() * p.k_iters() as u64 * p.iter_bubble_cycles()
            + p.grid_ctas() * p.prologue_bubble as u64;
        assert_eq!(s.bubble_cycles, bubbles * p.consumers as u64, "{p:?}");
    }
}

#[test]
fn program_structure_of_a_pipelined_kernel() {
    let p = GemmParams {
        stages: 4,
        consumers: 2,
        ..variant(512, 512, 1024)
    };
    let k = gemm(&p).unwrap();
    assert_eq!(k.roles.len(), 2);
    let (prod, cons) = (&k.roles[0], &k.roles[1]);
    assert_eq!(
        (prod.name.as_str(), prod.count, prod.regs),
        ("producer", 1, 40)
    );
    assert_eq!(
        (cons.name.as_str(), cons.count, cons.regs),
        ("consumer", 2, 104)
    );
    assert_eq!(prod.len + cons.len, k.code.len() as u16);
    assert_eq!(k.mbarriers[0].len, 4);
    assert_eq!(k.stages.len(), 1);
    assert_eq!((k.stages[0].len, k.stages[0].consumers), (4, 2));
    // 4 stages of 32 KiB + the 32 KiB C tile.
    assert_eq!(k.smem_bytes, 4 * 32768 + 32768);
    // Each consumer stores its 64 rows.
    assert_eq!(k.maps[2].boxdim[..2], [128, 64]);
    let wgmmas = k.code[cons.start as usize..]
        .iter()
        .filter(|i| {
            matches!(
                i,
                Instr::Wgmma {
                    n: 128,
                    mode: simfa_core::WgmmaMode::Ss
                }
            )
        })
        .count();
    assert_eq!(wgmmas, 4); // 64 rows x 4 k16 steps
                           // The text assembly round-trips every variant.
    for q in [
        p,
        GemmParams {
            persistent: true,
            group_m: 2,
            ..p
        },
        GemmParams { group_m: 3, ..p },
    ] {
        let k = gemm(&q).unwrap();
        let back = crate::asm::parse(&crate::asm::print(&k), "g.sasm").unwrap();
        assert_eq!(back, k, "{q:?}");
    }
}

#[test]
fn pipelining_is_faster_on_h800() {
    let base = variant(512, 512, 2048);
    let (plain, _) = run(&base);
    let (ring, _) = run(&GemmParams { stages: 4, ..base });
    let (ws, _) = run(&GemmParams {
        stages: 4,
        consumers: 2,
        ..base
    });
    let (c0, c1, c2) = (plain.summary.cycles, ring.summary.cycles, ws.summary.cycles);
    assert!(c1 < c0, "ring {c1} vs plain {c0}");
    assert!(c2 < c0, "2 consumers {c2} vs plain {c0}");
    assert_eq!(plain.flops, ring.flops);
    assert_eq!(plain.flops, ws.flops);
}

#[test]
fn persistent_does_the_same_work() {
    for base in [
        variant(512, 768, 512),
        GemmParams {
            stages: 3,
            consumers: 2,
            ..variant(512, 768, 512)
        },
        // The last row block clipped (its own maps in a persistent kernel).
        GemmParams {
            stages: 3,
            consumers: 2,
            ..variant(500, 768, 512)
        },
    ] {
        let (one, _) = run(&base);
        for (ctas, group_m) in [(5, 1), (7, 2), (100, 4), (1, 1), (7, 3), (9, 8)] {
            let p = GemmParams {
                persistent: true,
                ctas,
                group_m,
                ..base
            };
            let k = gemm(&p).unwrap();
            assert_eq!(k.ctas(), (ctas as u64).min(24));
            let (out, _) = run(&p);
            let (a, b) = (one.summary.stats, out.summary.stats);
            assert_eq!(out.flops, one.flops);
            assert_eq!(b.wgmmas, a.wgmmas);
            assert_eq!(b.bytes_loaded, a.bytes_loaded);
            assert_eq!(b.bytes_stored, a.bytes_stored);
            assert_eq!(b.tma_lines, a.tma_lines, "{p:?}");
        }
    }
}

#[test]
fn bad_params_name_the_parameter() {
    let p = variant(512, 512, 512);
    let cases: Vec<(GemmParams, &str)> = vec![
        (GemmParams { block_m: 96, ..p }, "block_m"),
        (GemmParams { block_m: 320, ..p }, "block_m"),
        (GemmParams { block_m: 0, ..p }, "block_m"),
        (GemmParams { block_n: 12, ..p }, "block_n"),
        (GemmParams { block_n: 264, ..p }, "block_n"),
        (GemmParams { block_k: 8, ..p }, "block_k"),
        (GemmParams { block_k: 512, ..p }, "block_k"),
        (GemmParams { stages: 0, ..p }, "stages"),
        (GemmParams { stages: 65, ..p }, "stages"),
        (GemmParams { stages: 7, ..p }, "stages"), // 7 x 32 KiB + 32 KiB > 227 KiB
        (GemmParams { consumers: 2, ..p }, "consumers"), // stages == 1
        (
            GemmParams {
                stages: 2,
                consumers: 3,
                ..p
            },
            "consumers",
        ),
        (
            GemmParams {
                stages: 2,
                consumers: 0,
                ..p
            },
            "consumers",
        ),
        (
            GemmParams {
                block_m: 64,
                stages: 2,
                consumers: 2,
                ..p
            },
            "consumers",
        ),
        (GemmParams { group_m: 0, ..p }, "group_m"),
        (
            GemmParams {
                persistent: true,
                ctas: 0,
                ..p
            },
            "ctas",
        ),
        (GemmParams { block_n: 256, ..p }, "block_n"), // 128 x 256 accumulator
        (
            GemmParams {
                block_m: 256,
                block_n: 208,
                stages: 2,
                consumers: 2,
                block_k: 16,
                ..variant(512, 416, 512)
            },
            "block_n",
        ), // 2 x 248 + 40 registers per thread
        (
            GemmParams {
                iter_bubble: u32::MAX,
                block_k: 256,
                ..p
            },
            "iter_bubble",
        ),
    ];
    for (q, param) in cases {
        let e = gemm(&q).unwrap_err();
        assert!(
            matches!(&e, GenError::BadParam { param: got, .. } if *got == param),
            "{q:?}: {e:?}"
        );
        assert!(e.to_string().starts_with(param), "{e}");
    }
    // Shapes not a multiple of the chosen tile get a clipped edge tile.
    let k = gemm(&GemmParams { block_n: 96, ..p }).unwrap();
    assert_eq!(k.grid[0], 512u32.div_ceil(96));
    // Limits are reachable: 128 x 256 with 2 consumers, 3 stages.
    let q = GemmParams {
        block_n: 256,
        stages: 3,
        consumers: 2,
        ..p
    };
    gemm(&q).unwrap().check_fits(&GpuConfig::h800()).unwrap();
}

#[test]
fn calibration_bubbles() {
    assert_eq!(
        GemmParams::h800_calibrated(),
        GemmParams {
            prologue_bubble: 4314,
            iter_bubble: 330,
            ..GemmParams::default()
        }
    );
    let p = GemmParams::new(256, 256, 512).calibrated(Calibration::H800);
    let k = gemm(&p).unwrap();
    assert_eq!(k.code[0], Instr::Bubble { cycles: 4314 });
    assert!(k.code.contains(&Instr::Bubble { cycles: 330 }));
    // Scaled with block_k.
    let q = GemmParams { block_k: 32, ..p };
    assert_eq!(q.iter_bubble_cycles(), 165);
    let q = GemmParams { block_k: 48, ..p };
    assert_eq!(q.iter_bubble_cycles(), 248); // 247.5 rounds up
                                             // Bubbles slow the run by at least the serial bubble time of one CTA
                                             // on the fixed port (through the hierarchy a bubble also moves the
                                             // loads it overlaps, and which DRAM refreshes they meet).
    let fixed = GpuConfig {
        memory: MemoryModel::Fixed,
        ..GpuConfig::h800()
    };
    let cycles = |p: &GemmParams| {
        crate::run::simulate(&fixed, &gemm(p).unwrap(), &mut ())
            .unwrap()
            .summary
            .cycles
    };
    let plain = cycles(&GemmParams::new(256, 256, 512));
    assert!(cycles(&p) >= plain + 4314 + 8 * 330);
    assert_eq!(Calibration::NONE.apply(p), GemmParams::new(256, 256, 512));
}

/// Edge tiles: a 200 x 136 x 104 GEMM on 128 x 128 x 64 tiles is 2 x 2
/// tiles of 2 K iterations, every WGMMA of the full tiles issued (the
/// hardware computes whole tiles), the stores clipped to the 200 x 136
/// FP16 elements of C, and the loads completing their full boxes while the
/// memory system moves only the in-bounds rows.
#[test]
fn edge_tiles_are_clipped_by_tma() {
    let p = GemmParams::new(200, 136, 104);
    let k = gemm(&p).unwrap();
    assert_eq!(k.grid, [2, 2, 1]);
    let mut cfg = GpuConfig::h800();
    cfg.memory = simfa_core::config::MemoryModel::Fixed;
    let out = crate::run::simulate(&cfg, &k, &mut ()).unwrap();
    let s = out.summary.stats;
    assert_eq!(s.wgmmas, 4 * 2 * 8);
    assert_eq!(s.bytes_stored, 200 * 136 * 2);
    // 4 CTAs x 2 iterations x (128x64 + 64x128) elements, full boxes.
    assert_eq!(s.bytes_loaded, 4 * 2 * (128 * 64 + 64 * 128) * 2);
    let whole = gemm(&GemmParams::new(256, 256, 128)).unwrap();
    let w = crate::run::simulate(&cfg, &whole, &mut ()).unwrap();
    assert_eq!(w.summary.stats.wgmmas, s.wgmmas);
}

/// The register epilogue stores C with `st.global` in 16-byte requests and
/// sets no shared memory aside for it; narrower WGMMAs tile the columns.
#[test]
fn register_epilogue_and_narrow_wgmmas() {
    let tma = GemmParams {
        stages: 3,
        consumers: 2,
        block_n: 256,
        ..variant(512, 512, 512)
    };
    let reg = GemmParams {
        epilogue: Epilogue::Registers,
        ..tma
    };
    assert_eq!(tma.smem_bytes() - reg.smem_bytes(), 128 * 256 * 2);
    let k = gemm(&reg).unwrap();
    assert_eq!(k.smem_bytes as u64, reg.smem_bytes());
    let stores: Vec<_> = k
        .code
        .iter()
        .filter(|i| matches!(i, Instr::StGlobal { .. } | Instr::TmaStore { .. }))
        .collect();
    assert_eq!(stores.len(), 1);
    assert!(matches!(stores[0], Instr::StGlobal { segment: 16, .. }));
    let narrow = GemmParams { wgmma_n: 64, ..reg };
    assert_eq!(narrow.wgmmas_per_iter(), 4 * reg.wgmmas_per_iter());
    assert!(gemm(&narrow)
        .unwrap()
        .code
        .iter()
        .all(|i| !matches!(i, Instr::Wgmma { n, .. } if *n != 64)));
    for bad in [48, 512, 12] {
        let e = GemmParams {
            wgmma_n: bad,
            ..reg
        }
        .validate()
        .unwrap_err();
        assert!(e.to_string().contains("wgmma_n"), "{e}");
    }
}
