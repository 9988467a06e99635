//! Tests of the lowering ([`super`]): a hand-written two-WarpGroup kernel
//! whose streams are derived by hand, pulled streams against whole ones,
//! and runs of Triton's GEMM through the source and through an op file.

use simfa_core::{GpuConfig, Op, StreamSource, WgmmaMode, Work};

use super::*;
use crate::proton::ops_file::{OpsFile, OpsWriter};
use crate::ttgir::source::TtgirSource;
use crate::ttgir::tree::parse;

const RING: &str = "#mma = #ttg.nvidia_mma<{versionMajor = 3, versionMinor = 0, warpsPerCTA = [8, 1], instrShape = [16, 64, 16]}>
#shared = #ttg.nvmma_shared<{swizzlingByteWidth = 128, transposed = false, elementBitWidth = 16}>
#bar = #ttg.swizzled_shared<{vec = 1, perPhase = 1, maxPhase = 1, order = [0]}>
#smem = #ttg.shared_memory
module attributes {\"ttg.num-warps\" = 8 : i32} {
  tt.func public @ring(%a: !tt.tensordesc<128x64xf16, #shared>, %n: i32) {
    %true = arith.constant true
    %c0 = arith.constant 0 : i32
    %c1 = arith.constant 1 : i32
    %c2 = arith.constant 2 : i32
    %c64 = arith.constant 64 : i32
    %c128 = arith.constant 128 : i32
    %acc0 = arith.constant dense<0.000000e+00> : tensor<128x64xf32, #mma>
    %pid = tt.get_program_id x : i32
    %row = arith.muli %pid, %c128 : i32
    %buf = ttg.local_alloc : () -> !ttg.memdesc<2x128x64xf16, #shared, #smem, mutable>
    %bb = ttg.local_alloc : () -> !ttg.memdesc<64x64xf16, #shared, #smem, mutable>
    %bars = ttg.local_alloc : () -> !ttg.memdesc<2x1xi64, #bar, #smem, mutable>
    %b0 = ttg.memdesc_index %bars[%c0] : !ttg.memdesc<2x1xi64, #bar, #smem, mutable> -> !ttg.memdesc<1xi64, #bar, #smem, mutable>
    ttng.init_barrier %b0, 1 : !ttg.memdesc<1xi64, #bar, #smem, mutable>
    %b1 = ttg.memdesc_index %bars[%c1] : !ttg.memdesc<2x1xi64, #bar, #smem, mutable> -> !ttg.memdesc<1xi64, #bar, #smem, mutable>
    ttng.init_barrier %b1, 1 : !ttg.memdesc<1xi64, #bar, #smem, mutable>
    %r = scf.for %i = %c0 to %n step %c1 iter_args(%acc = %acc0) -> (tensor<128x64xf32, #mma>)  : i32 {
      %slot = arith.remsi %i, %c2 : i32
      %ph = arith.divsi %i, %c2 : i32
      %b = ttg.memdesc_index %bars[%slot] : !ttg.memdesc<2x1xi64, #bar, #smem, mutable> -> !ttg.memdesc<1xi64, #bar, #smem, mutable>
      %s = ttg.memdesc_index %buf[%slot] : !ttg.memdesc<2x128x64xf16, #shared, #smem, mutable> -> !ttg.memdesc<128x64xf16, #shared, #smem, mutable>
      %k = arith.muli %i, %c64 : i32
      ttng.barrier_expect %b, 16384, %true : !ttg.memdesc<1xi64, #bar, #smem, mutable>
      ttng.async_tma_copy_global_to_local %a[%row, %k] %s, %b, %true : !tt.tensordesc<128x64xf16, #shared>, !ttg.memdesc<1xi64, #bar, #smem, mutable> -> !ttg.memdesc<128x64xf16, #shared, #smem, mutable>
      ttng.wait_barrier %b, %ph : !ttg.memdesc<1xi64, #bar, #smem, mutable>
      %d = ttng.warp_group_dot %s, %bb, %acc {inputPrecision = 0 : i32, isAsync = true} : !ttg.memdesc<128x64xf16, #shared, #smem, mutable> * !ttg.memdesc<64x64xf16, #shared, #smem, mutable> -> tensor<128x64xf32, #mma>
      %w = ttng.warp_group_dot_wait %d {pendings = 0 : i32} : tensor<128x64xf32, #mma>
      %e = math.exp2 %w : tensor<128x64xf32, #mma>
      scf.yield %e : tensor<128x64xf32, #mma>
    }
    tt.return
  }
}
";

const RING_LAUNCH: &str =
    "grid = [2, 1, 1]\n[args]\nn = 3\n[tensors.a]\nbase = 0x10000\nelem = 2\ndims = [1024, 256]\n";

fn ring_module(src: &str) -> Module<'_> {
    parse("ring.mlir", src).unwrap()
}

fn launch() -> Launch {
    Launch::parse("ring.toml", RING_LAUNCH).unwrap()
}

/// The declarations and CTA 1's two streams, derived by hand: WarpGroup 0
/// initialises the two barriers, both meet at a CTA-wide barrier, then
/// per iteration WarpGroup 0 expects, arrives and loads, both wait at the
/// slot's parity, issue their half of the dot (4 m64n64k16 WGMMAs each),
/// wait for it and do their half of the exponentials (4096 MUFU ops).
#[test]
fn a_two_warpgroup_ring_lowers_as_derived() {
    let m = ring_module(RING);
    let p = Program::new(&m, &launch(), "ring.toml").unwrap();
    let k = &p.kernel;
    assert_eq!(k.grid, [2, 1, 1]);
    assert_eq!(k.smem_bytes, 2 * 128 * 64 * 2 + 64 * 64 * 2 + 16);
    assert_eq!(k.maps.len(), 1);
    assert_eq!(k.maps[0].boxdim[..2], [64, 128]);
    assert_eq!(k.mbarriers.len(), 1);
    assert_eq!((k.mbarriers[0].len, k.mbarriers[0].count), (2, 1));
    assert_eq!((k.roles.len(), k.roles[0].count), (1, 2));
    let s = p.streams(1, 0).unwrap();
    let sync = Op::BarSync {
        id: 0,
        threads: 256,
    };
    let dot = Op::Wgmma {
        n: 64,
        mode: WgmmaMode::Ss,
    };
    let exp = Op::Compute {
        work: Work {
            mufu: 4096,
            ..Work::default()
        },
    };
    let mut wg0 = vec![
        Op::MbarInit { bar: 0, count: 1 },
        Op::MbarInit { bar: 1, count: 1 },
        sync,
    ];
    let mut wg1 = vec![sync];
    for i in 0..3u16 {
        let bar = i % 2;
        let wait = Op::MbarWait {
            bar,
            parity: (i / 2 % 2) as u8,
        };
        wg0.extend([
            Op::MbarExpectTx { bar, bytes: 16384 },
            Op::MbarArrive { bar, count: 1 },
            Op::TmaLoad {
                map: 0,
                bar,
                coords: [64 * i as i64, 128, 0, 0, 0],
                multicast: 0,
            },
        ]);
        for w in [&mut wg0, &mut wg1] {
            w.push(wait);
            w.extend([dot; 4]);
            w.extend([Op::WgmmaCommit, Op::WgmmaWait { n: 0 }, exp]);
        }
    }
    assert_eq!(s[0], wg0);
    assert_eq!(s[1], wg1);
}

/// Pulling the streams one op at a time, one WarpGroup wholly before the
/// other, gives the whole streams, and the CTA is dropped at the end.
#[test]
fn pulled_streams_are_the_whole_streams() {
    let m = ring_module(RING);
    let p = Program::new(&m, &launch(), "ring.toml").unwrap();
    let whole = p.streams(0, 0).unwrap();
    let mut src = TtgirSource::new(&p);
    for wg in [1u8, 0] {
        let mut got = Vec::new();
        let mut pos = 0;
        while let Some(op) = src.pull(0, 0, wg, pos).unwrap() {
            got.push(op);
            pos += 1;
        }
        assert_eq!(got, whole[wg as usize]);
    }
    assert_eq!(src.resident(), 0);
    // A pull from an earlier place (a resumed run) starts the CTA again.
    assert_eq!(src.pull(0, 0, 0, 2).unwrap(), Some(whole[0][2]));
    assert_eq!(src.pull(0, 0, 0, 1).unwrap(), Some(whole[0][1]));
    assert!(src.pull(0, 1, 0, 0).is_err());
    assert!(src.error().unwrap().contains("no stream for role 1"));
}

/// A CTA that spends its step budget fails the pull, and the error names
/// the op and the CTA: CTA 0 (the probe) ends at once, CTA 1 spins.
#[test]
fn a_runaway_cta_fails_its_pull() {
    let src = "tt.func public @spin() {
  %c0 = arith.constant 0 : i32
  %pid = tt.get_program_id x : i32
  %spin = arith.cmpi ne, %pid, %c0 : i32
  %r = scf.while (%go = %spin) : (i1) -> i1 {
    scf.condition(%go) %go : i1
  } do {
  ^bb0(%g: i1):
    scf.yield %g : i1
  }
  tt.return
}
";
    let m = parse("spin.mlir", src).unwrap();
    let l = Launch::parse("spin.toml", "grid = [2, 1, 1]\nmax_steps = 1000\n").unwrap();
    let p = Program::new(&m, &l, "spin.toml").unwrap();
    let mut src = TtgirSource::new(&p);
    assert_eq!(src.pull(0, 0, 0, 0).unwrap(), None);
    assert!(src.pull(1, 0, 0, 0).is_err());
    let err = src.error().unwrap();
    assert!(
        err.contains("in CTA (1, 0, 0): the step budget of 1000 ops"),
        "{err}"
    );
}

use crate::ttgir::compiled_fixture as compiled;

/// Triton's GEMM simulates to the same cycles and digest twice through
/// the source, and through an op file of its streams (`ttgir gen`).
#[test]
fn runs_are_deterministic_and_match_the_op_file() {
    let src = compiled("tma_gemm.ttgir");
    let text = compiled("tma_gemm.launch.toml");
    let m = parse("tma_gemm.ttgir", &src).unwrap();
    let l = Launch::parse("tma_gemm.launch.toml", &text).unwrap();
    let p = Program::new(&m, &l, "tma_gemm.launch.toml").unwrap();
    let cfg = GpuConfig::h100();
    let run = || {
        crate::run::simulate_from(
            &cfg,
            &p.kernel,
            TtgirSource::new(&p),
            &mut (),
            |_, _, _| {},
            &Default::default(),
        )
        .unwrap()
        .summary
    };
    let (a, b) = (run(), run());
    assert_eq!((a.cycles, a.digest), (b.cycles, b.digest));
    let dir = std::env::temp_dir().join(format!("simfa-ttgir-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("k.ops");
    let mut w = OpsWriter::create(&path).unwrap();
    for cta in 0..64 {
        for (wg, s) in p.streams(cta, 0).unwrap().iter().enumerate() {
            w.begin(cta, 0, wg as u8).unwrap();
            for op in s {
                w.push(op).unwrap();
            }
        }
    }
    w.finish().unwrap();
    let mut file = OpsFile::open(&path).unwrap();
    let c = crate::run::simulate_from(
        &cfg,
        &p.kernel,
        &mut file,
        &mut (),
        |_, _, _| {},
        &Default::default(),
    )
    .unwrap()
    .summary;
    std::fs::remove_dir_all(&dir).ok();
    assert_eq!((a.cycles, a.digest), (c.cycles, c.digest));
    // 64 CTAs of 16 k-steps of 8 m64n128k16 WGMMAs.
    assert_eq!(a.stats.wgmmas, 64 * 16 * 8);
}

/// Gluon's warp-specialised GEMM: two roles, the one-warp producer
/// partition (24 registers requested) with every TMA load and expect of
/// the CTA, the default partition with every WGMMA; both meet at the
/// `warp_specialize` before anything else of theirs.
#[test]
fn warp_specialize_partitions_become_roles() {
    let src = compiled("gluon_ws_gemm.ttgir");
    let text = compiled("gluon_ws_gemm.launch.toml");
    let m = parse("gluon_ws_gemm.ttgir", &src).unwrap();
    let l = Launch::parse("gluon_ws_gemm.launch.toml", &text).unwrap();
    let p = Program::new(&m, &l, "gluon_ws_gemm.launch.toml").unwrap();
    assert_eq!(p.roles(), 2);
    let k = &p.kernel;
    assert_eq!(
        (k.roles[0].count, k.roles[1].count, k.roles[1].regs),
        (1, 1, 24)
    );
    // CTA 3 of 132 has tiles 3 and 135 of the 16 x 16 tiles, 32 k-steps
    // each.
    let consumer = p.streams(3, 0).unwrap();
    let producer = p.streams(3, 1).unwrap();
    let count = |s: &[Op], f: fn(&Op) -> bool| s.iter().filter(|o| f(o)).count();
    let loads = |o: &Op| matches!(o, Op::TmaLoad { .. });
    let dots = |o: &Op| matches!(o, Op::Wgmma { .. });
    // A's 128x64 block is one copy; B's 64x128 block is two: its rows of
    // 256 bytes are twice the layout's 128-byte swizzle span.
    assert_eq!(k.maps[1].boxdim[..2], [64, 64]);
    assert_eq!(count(&producer[0], loads), 2 * 32 * 3);
    assert_eq!(count(&consumer[0], loads), 0);
    assert_eq!(count(&producer[0], dots), 0);
    assert_eq!(count(&consumer[0], dots), 2 * 32 * 8);
    let meet = Op::BarSync {
        id: 1,
        threads: 256,
    };
    assert_eq!(producer[0][0], meet);
    let first_meet = consumer[0].iter().position(|o| *o == meet).unwrap();
    assert!(consumer[0][..first_meet]
        .iter()
        .all(|o| matches!(o, Op::MbarInit { .. })));
    // Tile 3 of a row-major 16 x 16 walk is at row 0, column 3: the
    // producer's first loads are A at (0, 0) and B's two halves at (0,
    // 384) and (0, 448) (innermost first: [k, row] and [column, k]).
    assert!(
        matches!(
            producer[0][4],
            Op::TmaLoad {
                coords: [0, 0, ..],
                ..
            }
        ),
        "{:?}",
        &producer[0][..6]
    );
    assert!(
        matches!(
            producer[0][5],
            Op::TmaLoad {
                coords: [384, 0, ..],
                ..
            }
        ),
        "{:?}",
        &producer[0][..6]
    );
}

/// Shared memory is the most bytes of buffers held at once (a buffer freed
/// by `local_dealloc` before another is allocated does not add to it), or
/// the launch's `smem`, Triton's own layout.
#[test]
fn shared_memory_is_the_peak_of_live_buffers_or_the_launch_s() {
    let freed = RING.replace(
        "    %bb = ttg.local_alloc",
        "    %tmp = ttg.local_alloc : () -> !ttg.memdesc<128x128xf16, #shared, #smem, mutable>\n    ttg.local_dealloc %tmp : !ttg.memdesc<128x128xf16, #shared, #smem, mutable>\n    %bb = ttg.local_alloc",
    );
    let m = ring_module(&freed);
    let p = Program::new(&m, &launch(), "ring.toml").unwrap();
    assert_eq!(p.kernel.smem_bytes, 2 * 128 * 64 * 2 + 128 * 128 * 2);
    let given = Launch::parse("ring.toml", &format!("smem = 70000\n{RING_LAUNCH}")).unwrap();
    let p = Program::new(&m, &given, "ring.toml").unwrap();
    assert_eq!(p.kernel.smem_bytes, 70000);
}

/// A descriptor load into registers (`tt.descriptor_load`, as Triton
/// before 3.9 leaves it in TTGIR) is a TMA copy on the ring of loads into
/// registers, waited for where its registers are first read.
#[test]
fn a_descriptor_load_into_registers_waits_at_first_use() {
    let src = "#shared = #ttg.nvmma_shared<{swizzlingByteWidth = 128, transposed = false, elementBitWidth = 16}>
#blocked = #ttg.blocked<{sizePerThread = [1, 8], threadsPerWarp = [2, 16], warpsPerCTA = [4, 1], order = [1, 0]}>
module attributes {\"ttg.num-warps\" = 4 : i32} {
  tt.func public @k(%d: !tt.tensordesc<tensor<64x64xf16, #shared>>) {
    %c0 = arith.constant 0 : i32
    %x = tt.descriptor_load %d[%c0, %c0] : !tt.tensordesc<tensor<64x64xf16, #shared>> -> tensor<64x64xf16, #blocked>
    %c1 = arith.constant 1 : i32
    %y = arith.addf %x, %x : tensor<64x64xf16, #blocked>
    tt.return
  }
}
";
    let m = parse("d.mlir", src).unwrap();
    let launch = Launch::parse(
        "d.toml",
        "grid = [1, 1, 1]\n[tensors.d]\nbase = 0x10000\nelem = 2\ndims = [1024, 1024]\n",
    )
    .unwrap();
    let p = Program::new(&m, &launch, "d.toml").unwrap();
    let s = p.streams(0, 0).unwrap();
    let bar = p.kernel.mbar_base(0);
    assert_eq!(
        s[0][..4],
        [
            Op::MbarExpectTx { bar, bytes: 8192 },
            Op::TmaLoad {
                map: 0,
                bar,
                coords: [0; 5],
                multicast: 0
            },
            Op::MbarArrive { bar, count: 1 },
            Op::MbarWait { bar, parity: 0 },
        ]
    );
    assert!(matches!(s[0][4], Op::Compute { .. }));
}

/// The shape and stride arguments after a host descriptor come from its
/// tensor by position, whatever Triton named them (3.9: `%d.shape.0`; 3.6:
/// `%d_0`).
#[test]
fn descriptor_shapes_and_strides_bind_by_position() {
    let src = "module attributes {\"ttg.num-warps\" = 4 : i32} {
  tt.func public @k(%d: !tt.tensordesc<tensor<64x64xf16, #shared>>, %d_0: i32, %d_1: i32, %d_2: i64, %d_3: i64, %n: i32) {
    tt.return
  }
}
";
    let m = parse("p.mlir", src).unwrap();
    let l = Launch::parse(
        "p.toml",
        "grid = [1, 1, 1]\n[args]\nn = 7\n[tensors.d]\nbase = 0x10000\nelem = 2\ndims = [256, 512]\n",
    )
    .unwrap();
    let v = l.bind("p.toml", m.func(None).unwrap()).unwrap();
    let ints: Vec<i64> = v[1..]
        .iter()
        .map(|x| match x {
            Value::Int { v, .. } => *v,
            _ => -1,
        })
        .collect();
    // Shape outermost first (512 rows of 256), strides in elements.
    assert_eq!(ints, [512, 256, 256, 1, 7]);
}

/// A tile only later CTAs move (CTA 0's loop has no trips, as a causal
/// kernel's first block skips the blocks before the diagonal) gets its
/// tensor map from the CTAs probed after CTA 0, from the grid's far end
/// inwards, and every CTA's stream lowers.
#[test]
fn tiles_cta_0_never_moves_are_declared_from_later_ctas() {
    let src = "#l = #ttg.blocked<{sizePerThread = [4], threadsPerWarp = [32], warpsPerCTA = [4], order = [0]}>
#l2 = #ttg.blocked<{sizePerThread = [1, 4], threadsPerWarp = [2, 16], warpsPerCTA = [4, 1], order = [1, 0]}>
module attributes {\"ttg.num-warps\" = 4 : i32} {
  tt.func public @tri(%p: !tt.ptr<f16>) {
    %c0 = arith.constant 0 : i32
    %c1 = arith.constant 1 : i32
    %pid = tt.get_program_id x : i32
    %r = tt.make_range {end = 64 : i32, start = 0 : i32} : tensor<64xi32, #l>
    %ps = tt.splat %p : !tt.ptr<f16> -> tensor<64x!tt.ptr<f16>, #l>
    %row = tt.addptr %ps, %r : tensor<64x!tt.ptr<f16>, #l>, tensor<64xi32, #l>
    %x = tt.load %row : tensor<64x!tt.ptr<f16>, #l>
    scf.for %i = %c0 to %pid step %c1  : i32 {
      %c = tt.make_range {end = 32 : i32, start = 0 : i32} : tensor<32xi32, #l>
      %ce = tt.expand_dims %c {axis = 0 : i32} : tensor<32xi32, #l> -> tensor<1x32xi32, #l2>
      %cb = tt.broadcast %ce : tensor<1x32xi32, #l2> -> tensor<2x32xi32, #l2>
      %q = tt.splat %p : !tt.ptr<f16> -> tensor<2x32x!tt.ptr<f16>, #l2>
      %t = tt.addptr %q, %cb : tensor<2x32x!tt.ptr<f16>, #l2>, tensor<2x32xi32, #l2>
      %y = tt.load %t : tensor<2x32x!tt.ptr<f16>, #l2>
    }
    tt.return
  }
}
";
    let m = parse("tri.mlir", src).unwrap();
    let l = Launch::parse(
        "tri.toml",
        "grid = [4, 1, 1]\n[tensors.p]\nbase = 0x10000\nelem = 2\ndims = [1024]\n",
    )
    .unwrap();
    let p = Program::new(&m, &l, "tri.toml").unwrap();
    // The 64-element row and the 32-element tile: two maps.
    assert_eq!(p.kernel.maps.len(), 2);
    for cta in 0..4 {
        let s = p.streams(cta, 0).unwrap();
        let loads = s[0]
            .iter()
            .filter(|o| matches!(o, Op::LdGlobal { .. }))
            .count();
        assert!(loads > cta as usize, "CTA {cta}: {loads} loads");
        // Loads into registers are plain `ld.global`s, through the L1.
        assert!(!s[0]
            .iter()
            .any(|o| matches!(o, Op::LdGlobal { l1: false, .. })));
    }
}

/// A WGMMA's i1 operand is `useC` (whether it adds to its accumulator),
/// not a predicate: with it false, as Gluon's pipelined GEMMs start each
/// tile, the dot is issued all the same.
#[test]
fn a_dot_that_does_not_use_its_accumulator_is_still_issued() {
    let src = RING
        .replace(
            "%true = arith.constant true",
            "%true = arith.constant true\n    %false = arith.constant false",
        )
        .replace("%bb, %acc {", "%bb, %acc, %false {");
    let m = ring_module(&src);
    let p = Program::new(&m, &launch(), "ring.toml").unwrap();
    let s = p.streams(1, 0).unwrap();
    let dots = |w: &Vec<Op>| w.iter().filter(|o| matches!(o, Op::Wgmma { .. })).count();
    assert_eq!((dots(&s[0]), dots(&s[1])), (12, 12));
}

/// A TMA block larger than 256 elements along a dimension is several
/// hardware copies of a box of at most 256, as Triton's descriptors clamp
/// it: a 1-D block of 8192 fp32 is 32 copies of 256.
#[test]
fn a_block_over_256_elements_is_several_copies() {
    let src = "#shared = #ttg.nvmma_shared<{swizzlingByteWidth = 0, transposed = false, elementBitWidth = 32}>
#bar = #ttg.swizzled_shared<{vec = 1, perPhase = 1, maxPhase = 1, order = [0]}>
#smem = #ttg.shared_memory
module attributes {\"ttg.num-warps\" = 4 : i32} {
  tt.func public @copy(%a: !tt.tensordesc<8192xf32, #shared>) {
    %true = arith.constant true
    %c0 = arith.constant 0 : i32
    %pid = tt.get_program_id x : i32
    %c8192 = arith.constant 8192 : i32
    %x = arith.muli %pid, %c8192 : i32
    %buf = ttg.local_alloc : () -> !ttg.memdesc<8192xf32, #shared, #smem, mutable>
    %b = ttg.local_alloc : () -> !ttg.memdesc<1xi64, #bar, #smem, mutable>
    ttng.init_barrier %b, 1 : !ttg.memdesc<1xi64, #bar, #smem, mutable>
    ttng.barrier_expect %b, 32768, %true : !ttg.memdesc<1xi64, #bar, #smem, mutable>
    ttng.async_tma_copy_global_to_local %a[%x] %buf, %b, %true : !tt.tensordesc<8192xf32, #shared>, !ttg.memdesc<1xi64, #bar, #smem, mutable> -> !ttg.memdesc<8192xf32, #shared, #smem, mutable>
    ttng.wait_barrier %b, %c0 : !ttg.memdesc<1xi64, #bar, #smem, mutable>
    tt.return
  }
}
";
    let m = ring_module(src);
    let l = Launch::parse(
        "copy.toml",
        "grid = [4, 1, 1]\n[tensors.a]\nbase = 0x100000\nelem = 4\ndims = [32768]\n",
    )
    .unwrap();
    let p = Program::new(&m, &l, "copy.toml").unwrap();
    assert_eq!(p.kernel.maps[0].boxdim[0], 256);
    let s = p.streams(2, 0).unwrap();
    let loads: Vec<i64> = s[0]
        .iter()
        .filter_map(|o| match o {
            Op::TmaLoad { coords, .. } => Some(coords[0]),
            _ => None,
        })
        .collect();
    assert_eq!(loads, (0..32).map(|i| 16384 + 256 * i).collect::<Vec<_>>());
}

/// A flag between CTAs: CTA 1 works, then sets the flag (`atomic_xchg` of
/// 1, after its stores: a store wait, then the counter's add); CTA 0 spins
/// on it (`atomic_cas(p, 1, 1)` until it gives 1), so it ends a crossing
/// and a poll's round trip after CTA 1's add, where without the setter
/// it never would.
#[test]
fn a_cta_waits_for_the_flag_another_sets() {
    let src = "module attributes {\"ttg.num-warps\" = 4 : i32} {
  tt.func public @sig(%flags: !tt.ptr<i32>, %x: !tt.ptr<f32>) {
    %c0 = arith.constant 0 : i32
    %c1 = arith.constant 1 : i32
    %true = arith.constant true
    %v = arith.constant 1.000000e+00 : f32
    %pid = tt.get_program_id x : i32
    %setter = arith.cmpi eq, %pid, %c1 : i32
    scf.if %setter {
      tt.store %x, %v : !tt.ptr<f32>
      %o = tt.atomic_rmw exch, acq_rel, gpu, %flags, %c1, %true : (!tt.ptr<i32>, i32, i1) -> i32
    } else {
      scf.while : () -> () {
        %o = tt.atomic_cas acq_rel, gpu, %flags, %c1, %c1 : (!tt.ptr<i32>, i32, i32) -> i32
        %t = arith.cmpi ne, %o, %c1 : i32
        scf.condition(%t)
      } do {
        scf.yield
      }
    }
    tt.return
  }
}
";
    let m = ring_module(src);
    let launch = |grid: u32| {
        Launch::parse(
            "sig.toml",
            &format!(
                "grid = [{grid}, 1, 1]\n[tensors.flags]\nbase = 0x4000\nelem = 4\ndims = [8]\n\
                 [tensors.x]\nbase = 0x8000\nelem = 4\ndims = [8]\n"
            ),
        )
        .unwrap()
    };
    let l = launch(2);
    let p = Program::new(&m, &l, "sig.toml").unwrap();
    let counter = super::counter_index(0x4000);
    let setter = &p.streams(1, 0).unwrap()[0];
    let at = |s: &[Op], f: &dyn Fn(&Op) -> bool| s.iter().position(f);
    let add =
        at(setter, &|o| *o == Op::CounterAdd { counter, amount: 1 }).expect("the setter adds");
    let drain = at(setter, &|o| *o == Op::StoreWait { n: 0 }).unwrap();
    assert!(drain < add, "{setter:?}");
    let waiter = &p.streams(0, 0).unwrap()[0];
    assert_eq!(waiter, &[Op::CounterWait { counter, count: 1 }]);
    let cfg = GpuConfig::h100();
    // When each CTA issued its ops (its wait: the try that passed) and
    // when it retired (as an `exit`).
    #[derive(Default)]
    struct Issued(Vec<(u64, u32, Op)>);
    impl simfa_core::Observer for Issued {
        fn on_event(&mut self, cycle: simfa_core::Cycle, e: &simfa_core::Event) {
            match *e {
                simfa_core::Event::Issue { who, op } => self.0.push((cycle.get(), who.cta, op)),
                simfa_core::Event::CtaRetire { cta, .. } => {
                    self.0.push((cycle.get(), cta, Op::Exit))
                }
                _ => {}
            }
        }
    }
    let run = |p: &Program, seen: &mut Issued| {
        crate::run::simulate_from(
            &cfg,
            &p.kernel,
            TtgirSource::new(p),
            seen,
            |_, _, _| {},
            &Default::default(),
        )
    };
    let mut seen = Issued::default();
    run(&p, &mut seen).unwrap();
    let when = |cta: u32, f: &dyn Fn(&Op) -> bool| {
        seen.0
            .iter()
            .find(|(_, c, o)| *c == cta && f(o))
            .map(|e| e.0)
            .unwrap()
    };
    let added = when(1, &|o| matches!(o, Op::CounterAdd { .. }));
    let passed = when(0, &|o| matches!(o, Op::CounterWait { .. }));
    let retired = when(0, &|o| *o == Op::Exit);
    // The wait passes when the add lands, and the CTA ends after its poll.
    assert_eq!(passed, added + cfg.atomic_crossing(), "{:?}", seen.0);
    assert!(retired >= passed + cfg.atomic_round_trip(), "{:?}", seen.0);
    // Alone, the waiter never sees its flag set.
    let l1 = launch(1);
    let alone = Program::new(&m, &l1, "sig.toml").unwrap();
    let err = run(&alone, &mut Issued::default()).unwrap_err().to_string();
    assert!(err.contains("counter"), "{err}");
}
