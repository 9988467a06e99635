//! Tests of the TTGIR interpreter ([`super`]): hand-written kernels whose
//! effects are derived by hand, and the kernels Triton 3.9 compiled.

use super::*;
use crate::ttgir::tree::parse;

/// The effects of CTA `cta` of `src`'s only public function, its
/// arguments bound in order to `args`.
fn effects<'m>(
    m: &'m Module<'_>,
    cta: [u32; 3],
    grid: [u32; 3],
    args: &[Value],
) -> Result<Vec<(Origin<'m>, Effect<'m>)>, TtgirError> {
    let f = m.func(None).expect("one public function");
    let mut out = Vec::new();
    Interp::new(m, cta, grid, 1 << 20).run(f, args, &mut out)?;
    Ok(out)
}

type Effects<'m> = [(Origin<'m>, Effect<'m>)];

/// The waits among `e`: barrier index and parity.
fn waits(e: &Effects<'_>) -> Vec<(i64, u32)> {
    e.iter()
        .filter_map(|(_, e)| match e {
            Effect::Wait { bar, phase } => Some((bar.index, *phase)),
            _ => None,
        })
        .collect()
}

/// How many of `e` satisfy `f`.
fn count(e: &Effects<'_>, f: impl Fn(&Effect<'_>) -> bool) -> usize {
    e.iter().filter(|(_, e)| f(e)).count()
}

fn int(v: i64) -> Value {
    Value::Int { v, bits: 32 }
}

use crate::ttgir::compiled_fixture as compiled;

/// Triton's pipelined TMA GEMM (K = 1024, 128x128x64, 3 stages), CTA (1, 2):
/// two loads before the loop and one pair per iteration but the last two,
/// at the CTA's row and column; waits go round the three slots with the
/// phase flipping at each wrap.
#[test]
fn the_pipelined_gemm_walks_its_ring() {
    let src = compiled("tma_gemm.ttgir");
    let m = parse("tma_gemm.ttgir", &src).unwrap();
    let f = m.func(None).unwrap();
    assert_eq!(f.args.len(), 15);
    let mut args = vec![Value::Opaque; 15];
    for (i, d) in [0usize, 5, 10].into_iter().enumerate() {
        args[d] = Value::Desc(i as u32);
        for j in 1..5 {
            args[d + j] = int(1024);
        }
    }
    let e = effects(&m, [1, 2, 0], [8, 8, 1], &args).unwrap();
    let loads: Vec<(u32, Vec<i64>)> = e
        .iter()
        .filter_map(|(_, e)| match e {
            Effect::TmaLoad { desc, coords, .. } => Some((*desc, coords.clone())),
            _ => None,
        })
        .collect();
    // 16 k-steps, each loading A at (128, k) and B at (k, 256).
    assert_eq!(loads.len(), 32);
    for (i, pair) in loads.chunks(2).enumerate() {
        let k = 64 * i as i64;
        assert_eq!(pair[0], (0, vec![128, k]));
        assert_eq!(pair[1], (1, vec![k, 256]));
    }
    let waits = waits(&e);
    assert_eq!(waits.len(), 16);
    for (i, w) in waits.iter().enumerate() {
        assert_eq!(*w, ((i % 3) as i64, ((i / 3) % 2) as u32), "wait {i}");
    }
    let dots = count(&e, |e| matches!(e, Effect::Wgmma { .. }));
    assert_eq!(dots, 16);
    let stores: Vec<&Effect> = e
        .iter()
        .map(|(_, e)| e)
        .filter(|e| matches!(e, Effect::TmaStore { .. }))
        .collect();
    assert_eq!(stores.len(), 1);
    assert!(
        matches!(stores[0], Effect::TmaStore { desc: 2, coords, bytes: 32768, .. } if *coords == [128, 256])
    );
    let expects = count(&e, |e| matches!(e, Effect::Expect { bytes: 32768, .. }));
    assert_eq!(expects, 16);
}

/// Triton's persistent GEMM (128x256x64 tiles, groups of 8 row blocks,
/// 132 programs) on M = N = 4096, K = 512: CTA 5 takes tiles 5, 137, 269
/// and 401, each at the grouped order's row and column, with 8 k-steps.
#[test]
fn the_persistent_gemm_walks_its_tiles_in_groups() {
    let src = compiled("persistent_gemm.ttgir");
    let m = parse("persistent_gemm.ttgir", &src).unwrap();
    let f = m.func(None).unwrap();
    let names: Vec<&str> = f.args.iter().map(|a| a.0).collect();
    assert_eq!(&names[15..18], ["%M", "%N", "%K"]);
    let mut args = vec![int(4096); f.args.len()];
    for (i, d) in [0usize, 5, 10].into_iter().enumerate() {
        args[d] = Value::Desc(i as u32);
    }
    args[17] = int(512);
    let e = effects(&m, [5, 0, 0], [132, 1, 1], &args).unwrap();
    let stores: Vec<Vec<i64>> = e
        .iter()
        .filter_map(|(_, e)| match e {
            Effect::TmaStore { coords, .. } => Some(coords.clone()),
            _ => None,
        })
        .collect();
    let (pid_m, pid_n) = (32i64, 16i64);
    let expect: Vec<Vec<i64>> = [5i64, 137, 269, 401]
        .iter()
        .map(|&t| {
            let in_group = 8 * pid_n;
            let first = t / in_group * 8;
            let size = (pid_m - first).min(8);
            vec![(first + t % size) * 128, (t % in_group) / size * 256]
        })
        .collect();
    assert_eq!(stores, expect);
    let loads = count(&e, |e| matches!(e, Effect::TmaLoad { .. }));
    assert_eq!(loads, 4 * 8 * 2);
    let dots = count(&e, |e| matches!(e, Effect::Wgmma { .. }));
    assert_eq!(dots, 4 * 8);
}

/// A CTA past the last tile runs no iteration: a loop whose lower bound
/// is not below its upper runs zero times.
#[test]
fn a_cta_without_tiles_stores_nothing() {
    let src = compiled("persistent_gemm.ttgir");
    let m = parse("persistent_gemm.ttgir", &src).unwrap();
    let f = m.func(None).unwrap();
    let mut args = vec![int(256); f.args.len()];
    for d in [0usize, 5, 10] {
        args[d] = Value::Desc(d as u32);
    }
    // 2 x 1 tiles: CTA 7 of 132 has none.
    let e = effects(&m, [7, 0, 0], [132, 1, 1], &args).unwrap();
    assert!(e
        .iter()
        .all(|(_, e)| !matches!(e, Effect::TmaLoad { .. } | Effect::TmaStore { .. })));
}

const CONTROL: &str = "#s = #ttg.swizzled_shared<{vec = 1, perPhase = 1, maxPhase = 1, order = [0]}>\n\
#smem = #ttg.shared_memory\n\
module {\n\
  tt.func @twice(%x: i32) -> i32 {\n\
    %r = arith.addi %x, %x : i32\n\
    tt.return %r : i32\n\
  }\n\
  tt.func public @k(%n: i32, %lb: i32) {\n\
    %c0 = arith.constant 0 : i32\n\
    %c1 = arith.constant 1 : i32\n\
    %c3 = arith.constant 3 : i32\n\
    %bar = ttg.local_alloc : () -> !ttg.memdesc<4x1xi64, #s, #smem, mutable>\n\
    %w:2 = scf.while (%i = %c0, %acc = %c0) : (i32, i32) -> (i32, i32) {\n\
      %go = arith.cmpi slt, %i, %n : i32\n\
      scf.condition(%go) %i, %acc : i32, i32\n\
    } do {\n\
    ^bb0(%i2: i32, %acc2: i32):\n\
      %d = tt.call @twice(%i2) : (i32) -> i32\n\
      %s = arith.addi %acc2, %d : i32\n\
      %odd = arith.andi %i2, %c1 : i32\n\
      %isodd = arith.cmpi ne, %odd, %c0 : i32\n\
      %slot = scf.if %isodd -> (i32) {\n\
        scf.yield %c3 : i32\n\
      } else {\n\
        scf.yield %c1 : i32\n\
      }\n\
      %b = ttg.memdesc_index %bar[%slot] : !ttg.memdesc<4x1xi64, #s, #smem, mutable> -> !ttg.memdesc<1xi64, #s, #smem, mutable>\n\
      ttng.wait_barrier %b, %s : !ttg.memdesc<1xi64, #s, #smem, mutable>\n\
      %i3 = arith.addi %i2, %c1 : i32\n\
      scf.yield %i3, %s : i32, i32\n\
    }\n\
    scf.for %j = %lb to %c0 step %c1  : i32 {\n\
      ttng.arrive_barrier %bar, 1 : !ttg.memdesc<4x1xi64, #s, #smem, mutable>\n\
    }\n\
    %q = arith.divsi %w#1, %lb : i32\n\
    tt.return\n\
  }\n\
}\n";

/// `scf.while`, `scf.if`, a call and grouped results: waits on slots 1
/// and 3 by parity of `i`, at the parity of the running sum of `2 i`.
#[test]
fn while_if_and_calls_compute_exactly() {
    let m = parse("control.mlir", CONTROL).unwrap();
    let e = effects(&m, [0, 0, 0], [1, 1, 1], &[int(4), int(2)]).unwrap();
    let waits = waits(&e);
    // sums 0, 2, 6, 12: all even.
    assert_eq!(waits, [(1, 0), (3, 0), (1, 0), (3, 0)]);
    // The for loop from 2 to 0 runs zero times.
    assert!(!e.iter().any(|(_, e)| matches!(e, Effect::Arrive { .. })));
}

/// A division by zero whose result nothing uses is no error (the GPU does
/// not trap); a loop that never ends is an error naming the op, the CTA
/// and the place.
#[test]
fn failures_name_the_op_and_the_cta() {
    let m = parse("control.mlir", CONTROL).unwrap();
    assert!(effects(&m, [0, 0, 0], [1, 1, 1], &[int(1), int(0)]).is_ok());
    // A loop of 2^31 - 1 iterations runs out of a small budget.
    let f = m.func(None).unwrap();
    let mut out = Vec::new();
    let err = Interp::new(&m, [0, 0, 0], [1, 1, 1], 10_000)
        .run(f, &[int(i32::MAX as i64), int(1)], &mut out)
        .unwrap_err()
        .to_string();
    assert!(err.contains("step budget of 10000 ops"), "{err}");
    // An argument never bound is a value used before it is defined.
    let mut out = Vec::new();
    let err = Interp::new(&m, [0, 0, 0], [1, 1, 1], 10_000)
        .run(f, &[], &mut out)
        .unwrap_err()
        .to_string();
    assert!(err.contains("`%n` is used before it is defined"), "{err}");
}

/// An op that is neither executed, timed, priced nor free is an error
/// naming it at its place; the free ones pass.
#[test]
fn unknown_ops_are_not_silently_dropped() {
    let src = "tt.func public @k(%p: !tt.ptr<f16>) {\n  %r = tt.make_range {end = 128 : i32, start = 0 : i32} : tensor<128xi32, #l>\n  %v = tt.histogram %r : tensor<128xi32, #l> -> tensor<16xi32, #l>\n  tt.return\n}\n";
    let m = parse("u.mlir", src).unwrap();
    let err = effects(&m, [0, 0, 0], [1, 1, 1], &[Value::Opaque]).unwrap_err();
    assert_eq!(
        err.to_string(),
        "u.mlir:3:3: op 'tt.histogram' is not supported"
    );
    let src = "tt.func public @k() {\n  %a = arith.constant dense<1> : tensor<4xi32, #l>\n  %b = arith.mului_extended %a, %a : tensor<4xi32, #l>\n  tt.return\n}\n";
    let m = parse("u.mlir", src).unwrap();
    let err = effects(&m, [0, 0, 0], [1, 1, 1], &[]).unwrap_err();
    assert!(
        err.to_string()
            .ends_with("op 'arith.mului_extended' is not supported"),
        "{err}"
    );
}

/// A `warp_specialize` without its regions is an error, not a panic (found
/// by the `ttgir_run` fuzz target).
#[test]
fn a_warp_specialize_without_regions_is_an_error() {
    let src = "tt.func public @k() {\n  ttg.warp_specialize() attributes {requestedRegisters = array<i32: 24>}\n  tt.return\n}\n";
    let m = parse("w.mlir", src).unwrap();
    let err = effects(&m, [0, 0, 0], [1, 1, 1], &[])
        .unwrap_err()
        .to_string();
    assert!(
        err.ends_with("a warp_specialize without a default region"),
        "{err}"
    );
}

/// Address tensors are followed through their arithmetic: a load through
/// one names its box, a masked-off one moves nothing, and the loaded
/// registers are waited for where they are first read.
#[test]
fn loads_through_pointers_name_their_boxes_and_wait_at_first_use() {
    let src = "#blocked = #ttg.blocked<{sizePerThread = [4], threadsPerWarp = [32], warpsPerCTA = [4], order = [0]}>\n\
tt.func public @k(%x: !tt.ptr<f32>, %n: i32) {\n\
  %c = arith.constant 512 : i32\n\
  %pid = tt.get_program_id x : i32\n\
  %s = arith.muli %pid, %c : i32\n\
  %r = tt.make_range {end = 512 : i32, start = 0 : i32} : tensor<512xi32, #blocked>\n\
  %b = tt.splat %s : i32 -> tensor<512xi32, #blocked>\n\
  %o = arith.addi %b, %r : tensor<512xi32, #blocked>\n\
  %nn = tt.splat %n : i32 -> tensor<512xi32, #blocked>\n\
  %m = arith.cmpi slt, %o, %nn : tensor<512xi32, #blocked>\n\
  %p = tt.splat %x : !tt.ptr<f32> -> tensor<512x!tt.ptr<f32>, #blocked>\n\
  %q = tt.addptr %p, %o : tensor<512x!tt.ptr<f32>, #blocked>, tensor<512xi32, #blocked>\n\
  %v = tt.load %q, %m : tensor<512x!tt.ptr<f32>, #blocked>\n\
  %w = arith.addf %v, %v : tensor<512xf32, #blocked>\n\
  tt.store %q, %w, %m : tensor<512x!tt.ptr<f32>, #blocked>\n\
  tt.return\n\
}\n";
    let m = parse("p.mlir", src).unwrap();
    let args = [
        Value::Ptr { arg: 0, off: 0 },
        Value::Int { v: 1000, bits: 32 },
    ];
    let e = effects(&m, [1, 0, 0], [2, 1, 1], &args).unwrap();
    let names: Vec<&str> = e
        .iter()
        .filter(|(_, e)| !matches!(e, Effect::Compute { .. }))
        .map(|(o, _)| o.op)
        .collect();
    assert_eq!(names, ["tt.load", "arith.addf", "tt.store"]);
    let loads: Vec<&PtrTile> = e
        .iter()
        .filter_map(|(_, e)| match e {
            Effect::PtrLoad {
                tile,
                regs: Some(0),
            } => Some(tile),
            _ => None,
        })
        .collect();
    // CTA 1 reads elements 512.. (bytes 2048..), 4 bytes apart; each
    // thread's 4 elements and a warp's 32 threads are one contiguous run.
    assert_eq!(loads.len(), 1);
    assert_eq!((loads[0].lin.base, loads[0].lin.coef[0]), (2048, 4));
    assert_eq!((loads[0].elem, loads[0].segment), (4, 32));
    assert!(e.iter().any(|(_, e)| matches!(e, Effect::Use { load: 0 })));
    // Past the end of the tensor (n = 100) the mask holds nowhere: nothing
    // moves.
    let args = [
        Value::Ptr { arg: 0, off: 0 },
        Value::Int { v: 100, bits: 32 },
    ];
    let e = effects(&m, [1, 0, 0], [2, 1, 1], &args).unwrap();
    assert!(!e
        .iter()
        .any(|(_, e)| matches!(e, Effect::PtrLoad { .. } | Effect::PtrStore { .. })));
}

/// A load's cache modifier: `.cg` (Triton 3.9's `cachePolicy` spelling
/// and the older `cache = cg`) keeps it out of the L1; `.ca` does not;
/// each thread's vector is its four elements.
#[test]
fn a_cg_load_asks_for_the_l2_only() {
    let src = "#blocked = #ttg.blocked<{sizePerThread = [4], threadsPerWarp = [32], warpsPerCTA = [4], order = [0]}>\n\
tt.func public @k(%x: !tt.ptr<f32>) {\n\
  %r = tt.make_range {end = 512 : i32, start = 0 : i32} : tensor<512xi32, #blocked>\n\
  %p = tt.splat %x : !tt.ptr<f32> -> tensor<512x!tt.ptr<f32>, #blocked>\n\
  %q = tt.addptr %p, %r : tensor<512x!tt.ptr<f32>, #blocked>, tensor<512xi32, #blocked>\n\
  %a = tt.load %q {cachePolicy = #tt.cache_policy<cache_modifier = cg, eviction_policy = evict_normal>} : tensor<512x!tt.ptr<f32>, #blocked>\n\
  %b = tt.load %q {cachePolicy = #tt.cache_policy<cache_modifier = ca, eviction_policy = evict_normal>} : tensor<512x!tt.ptr<f32>, #blocked>\n\
  %c = tt.load %q {cache = cg} : tensor<512x!tt.ptr<f32>, #blocked>\n\
  tt.return\n\
}\n";
    let m = parse("p.mlir", src).unwrap();
    let e = effects(&m, [0, 0, 0], [1, 1, 1], &[Value::Ptr { arg: 0, off: 0 }]).unwrap();
    let tiles: Vec<(bool, u32)> = e
        .iter()
        .filter_map(|(_, e)| match e {
            Effect::PtrLoad { tile, .. } => Some((tile.l2_only, tile.vector)),
            _ => None,
        })
        .collect();
    assert_eq!(tiles, [(true, 16), (false, 16), (true, 16)]);
}

/// A division by zero is undefined, not a trap (a pipelined kernel
/// computes a next tile past its last one and masks its loads off): only a
/// use that needs the value is an error, naming where it came from.
#[test]
fn a_division_by_zero_is_undefined_until_used() {
    let src = "tt.func public @k(%n: i32) {\n  %c0 = arith.constant 0 : i32\n  %q = arith.remsi %n, %c0 : i32\n  %r = arith.addi %q, %n : i32\n  %c = arith.cmpi slt, %r, %n : i32\n  tt.return\n}\n";
    let m = parse("d.mlir", src).unwrap();
    assert!(effects(&m, [0, 0, 0], [1, 1, 1], &[Value::Int { v: 7, bits: 32 }]).is_ok());
    let used = src.replace("tt.return", "scf.if %c {\n  }\n  tt.return");
    let m = parse("d.mlir", &used).unwrap();
    let err = effects(&m, [0, 0, 0], [1, 1, 1], &[Value::Int { v: 7, bits: 32 }])
        .unwrap_err()
        .to_string();
    assert!(
        err.contains(
            "`%c` is undefined: it comes from a division by zero or an oversized shift at 3:3"
        ),
        "{err}"
    );
}

/// `tt.mulhiui` on scalars (what is left of Philox's constants in a
/// dropout kernel) is executed exactly: the high half of the unsigned
/// product.
#[test]
fn mulhiui_on_scalars_is_exact() {
    let src = "tt.func public @k() {\n  %a = arith.constant -1 : i32\n  %b = arith.constant 6 : i32\n  %h = tt.mulhiui %a, %b : i32\n  %c0 = arith.constant 0 : i32\n  %c1 = arith.constant 1 : i32\n  scf.for %i = %c0 to %h step %c1 : i32 {\n    ttg.local_dealloc %nowhere : !ttg.memdesc<1xi64>\n  }\n  tt.return\n}\n";
    let m = parse("h.mlir", src).unwrap();
    // 0xffffffff * 6 has a high half of 5: the loop runs (and fails on its
    // undefined operand); times 1 the high half is 0 and it does not.
    let err = effects(&m, [0, 0, 0], [1, 1, 1], &[])
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("`%nowhere` is used before it is defined"),
        "{err}"
    );
    let none = src.replace("%b = arith.constant 6", "%b = arith.constant 1");
    let m = parse("h.mlir", &none).unwrap();
    assert!(effects(&m, [0, 0, 0], [1, 1, 1], &[]).is_ok());
}

/// Tensors moved through shared memory are shared-memory moves: a layout
/// conversion both ways (none into a WGMMA operand layout, which stays in
/// registers, and none for an address tensor), a `local_load` and a
/// `local_store` one way.
#[test]
fn layout_conversions_and_shared_loads_move_bytes() {
    let src = "#b = #ttg.blocked<{sizePerThread = [1, 8], threadsPerWarp = [4, 8], warpsPerCTA = [4, 1], order = [1, 0]}>\n\
tt.func public @k(%m: !ttg.memdesc<64x64xf16, #s, #smem, mutable>) {\n\
  %t = ttg.local_load %m : !ttg.memdesc<64x64xf16, #s, #smem, mutable> -> tensor<64x64xf16, #mma>\n\
  %u = ttg.convert_layout %t : tensor<64x64xf16, #mma> -> tensor<64x64xf16, #b>\n\
  %d = ttg.convert_layout %t : tensor<64x64xf16, #mma> -> tensor<64x64xf16, #ttg.dot_op<{opIdx = 0, parent = #mma, kWidth = 2}>>\n\
  %r = tt.make_range {end = 64 : i32, start = 0 : i32} : tensor<64xi32, #l>\n\
  %q = ttg.convert_layout %r : tensor<64xi32, #l> -> tensor<64xi32, #l2>\n\
  ttg.local_store %u, %m : tensor<64x64xf16, #b> -> !ttg.memdesc<64x64xf16, #s, #smem, mutable>\n\
  tt.return\n\
}\n";
    let m = parse("s.mlir", src).unwrap();
    let mem = Value::Mem(crate::ttgir::value::MemRef { alloc: 1, index: 0 });
    let e = effects(&m, [0, 0, 0], [1, 1, 1], &[mem]).unwrap();
    let moves: Vec<(&str, u64)> = e
        .iter()
        .filter_map(|(o, e)| match e {
            Effect::SharedMove { bytes } => Some((o.op, *bytes)),
            _ => None,
        })
        .collect();
    assert_eq!(
        moves,
        [
            ("ttg.local_load", 8192),
            ("ttg.convert_layout", 16384),
            ("ttg.local_store", 8192)
        ]
    );
}

/// A grouped kernel's shape: sizes and matrix addresses loaded from memory
/// whose contents the launch gives steer the loop and land in the buffers
/// they point into; each scalar load is waited for at once. Without the
/// contents, a branch on one names the tensor to give them for.
#[test]
fn loaded_sizes_and_addresses_come_from_the_launch() {
    use crate::ttgir::global::{Global, BUFFER_ID};
    use crate::ttgir::launch::Launch;
    let src = "tt.func public @k(%ptrs: !tt.ptr<i64>, %sizes: !tt.ptr<i32>) {\n\
  %c0 = arith.constant 0 : i32\n\
  %c1 = arith.constant 1 : i32\n\
  %s1 = tt.addptr %sizes, %c1 : !tt.ptr<i32>, i32\n\
  %n = tt.load %s1 : !tt.ptr<i32>\n\
  scf.for %g = %c0 to %n step %c1  : i32 {\n\
    %pa = tt.addptr %ptrs, %g : !tt.ptr<i64>, i32\n\
    %a = tt.load %pa : !tt.ptr<i64>\n\
    %p = tt.int_to_ptr %a : i64 -> !tt.ptr<f16>\n\
    %q = tt.addptr %p, %g : !tt.ptr<f16>, i32\n\
    tt.store %q, %c0 : !tt.ptr<f16>\n\
  }\n\
  tt.return\n\
}\n";
    let m = parse("g.mlir", src).unwrap();
    let f = m.func(None).unwrap();
    let text = "grid = [1, 1, 1]\n[tensors.ptrs]\nbase = 0x1000\nelem = 8\nvalues = [0x10000, 0x20000]\n\
        [tensors.sizes]\nbase = 0x2000\nelem = 4\nvalues = [9, 2]\n\
        [buffers.a]\nbase = 0x10000\nelem = 2\ndims = [64]\n[buffers.b]\nbase = 0x20000\nelem = 2\ndims = [64]\n";
    let l = Launch::parse("g.toml", text).unwrap();
    let args = l.bind("g.toml", f).unwrap();
    let global = std::sync::Arc::new(Global::new(&l, f, &args));
    let mut out = Vec::new();
    Interp::new(&m, [0, 0, 0], [1, 1, 1], 1 << 20)
        .with_global(global.clone())
        .run(f, &args, &mut out)
        .unwrap();
    // Three loads (the count, two addresses), each waited for at once.
    let loads: Vec<u64> = out
        .iter()
        .filter_map(|(_, e)| match e {
            Effect::PtrLoad { regs, .. } => *regs,
            _ => None,
        })
        .collect();
    let uses: Vec<u64> = out
        .iter()
        .filter_map(|(_, e)| match e {
            Effect::Use { load } => Some(*load),
            _ => None,
        })
        .collect();
    assert_eq!((loads.clone(), uses), (vec![0, 1, 2], vec![0, 1, 2]));
    // The stores land in buffer a at element 0 and buffer b at element 1
    // (each as the 16-byte run that holds it).
    let stores: Vec<(Option<u16>, i64)> = out
        .iter()
        .filter_map(|(_, e)| match e {
            Effect::PtrStore { tile } => Some((tile.lin.ptr, tile.lin.base)),
            _ => None,
        })
        .collect();
    assert_eq!(stores, vec![(Some(BUFFER_ID), 0), (Some(BUFFER_ID + 1), 0)]);
    // Without the sizes' contents, the loop bound comes from memory.
    let l = Launch::parse("g.toml", &text.replace("values = [9, 2]", "dims = [2]")).unwrap();
    let global = std::sync::Arc::new(Global::new(&l, f, &args));
    let err = Interp::new(&m, [0, 0, 0], [1, 1, 1], 1 << 20)
        .with_global(global)
        .run(f, &args, &mut Vec::new())
        .unwrap_err()
        .to_string();
    assert!(
        err.contains(
            "`%n` comes from memory: a load from `sizes`, whose contents the launch does not give"
        ),
        "{err}"
    );
}

/// Atomics are a load and a store of their box; without the launch's
/// tensors (no address to hold), a compare-and-swap spin lock is one too,
/// taken at its first try; a `ttg.barrier` is a meeting of the warps.
#[test]
fn atomics_load_and_store_and_a_spin_lock_is_taken_at_once() {
    let src = "tt.func public @k(%lock: !tt.ptr<i32>, %p: !tt.ptr<f32>) {\n\
  %c0 = arith.constant 0 : i32\n\
  %c1 = arith.constant 1 : i32\n\
  %r = tt.make_range {end = 128 : i32, start = 0 : i32} : tensor<128xi32, #l>\n\
  %ps = tt.splat %p : !tt.ptr<f32> -> tensor<128x!tt.ptr<f32>, #l>\n\
  %pt = tt.addptr %ps, %r : tensor<128x!tt.ptr<f32>, #l>, tensor<128xi32, #l>\n\
  scf.while : () -> () {\n\
    %o = tt.atomic_cas acq_rel, gpu, %lock, %c0, %c1 : (!tt.ptr<i32>, i32, i32) -> i32\n\
    %t = arith.cmpi eq, %o, %c1 : i32\n\
    scf.condition(%t)\n\
  } do {\n\
    scf.yield\n\
  }\n\
  %x = tt.atomic_rmw fadd, acq_rel, gpu, %pt, %pt : (tensor<128x!tt.ptr<f32>, #l>, tensor<128x!tt.ptr<f32>, #l>) -> tensor<128xf32, #l>\n\
  ttg.barrier all\n\
  %y = tt.atomic_rmw exch, acq_rel, gpu, %lock, %c0 : (!tt.ptr<i32>, i32) -> i32\n\
  tt.return\n\
}\n";
    let m = parse("a.mlir", src).unwrap();
    let args = [Value::Ptr { arg: 0, off: 0 }, Value::Ptr { arg: 1, off: 0 }];
    let e = effects(&m, [0, 0, 0], [1, 1, 1], &args).unwrap();
    // (The address arithmetic's work aside.)
    let kinds: Vec<&str> = e
        .iter()
        .filter_map(|(_, e)| match e {
            Effect::PtrLoad { .. } => Some("load"),
            Effect::PtrStore { .. } => Some("store"),
            Effect::Use { .. } => Some("use"),
            Effect::Barrier => Some("barrier"),
            Effect::Compute { .. } => None,
            _ => Some("other"),
        })
        .collect();
    assert_eq!(
        kinds,
        ["load", "store", "use", "load", "store", "barrier", "load", "store"]
    );
    let boxes: Vec<[u32; 4]> = e
        .iter()
        .filter_map(|(_, e)| match e {
            Effect::PtrStore { tile } => Some(tile.lin.shape),
            _ => None,
        })
        .collect();
    assert_eq!(boxes[1], [128, 1, 1, 1], "the fadd covers the 128 floats");
}

/// Triton 3.6's spellings: programmatic dependent launch as inline
/// `griddepcontrol` and a tensor `tt.bitcast` cost nothing, and a CTA's
/// slot of global scratch (`addptr` on it) runs; any other inline assembly
/// is not supported.
#[test]
fn triton_3_6_spellings_run() {
    let src = "tt.func public @k(%p: !tt.ptr<f16>) {\n\
  %c0 = arith.constant 0 : i32\n\
  %w = tt.elementwise_inline_asm \"griddepcontrol.wait; // dummy $0\" {constraints = \"=r\", packed_element = 1 : i32, pure = false} -> i32\n\
  %r = tt.make_range {end = 128 : i32, start = 0 : i32} : tensor<128xi32, #l>\n\
  %f = tt.bitcast %r : tensor<128xi32, #l> -> tensor<128xf32, #l>\n\
  %s = ttg.global_scratch_alloc {alignment = 128 : i32, nbytes = 256 : i32} : !tt.ptr<i8>\n\
  %slot = tt.addptr %s, %c0 : !tt.ptr<i8>, i32\n\
  tt.return\n\
}\n";
    let m = parse("s.mlir", src).unwrap();
    let e = effects(&m, [0, 0, 0], [1, 1, 1], &[Value::Opaque]).unwrap();
    assert!(e.is_empty(), "{e:?}");
    let other = src.replace("griddepcontrol.wait", "nanosleep.u32 100");
    let m = parse("s.mlir", &other).unwrap();
    let err = effects(&m, [0, 0, 0], [1, 1, 1], &[Value::Opaque]).unwrap_err();
    assert!(
        err.to_string()
            .contains("op 'tt.elementwise_inline_asm' is not supported"),
        "{err}"
    );
}

/// The synchronisation and memory effects of CTA 0 of `m`'s function
/// under launch file `text` (its tensors' memory known), described: a
/// lock's `true|false ADDR`, a flag's `add ADDR N` and `wait ADDR N`, and
/// `load` and `store`.
fn synchronisation(m: &Module<'_>, text: &str) -> Result<Vec<String>, TtgirError> {
    use crate::ttgir::global::Global;
    use crate::ttgir::launch::Launch;
    let f = m.func(None).unwrap();
    let l = Launch::parse("launch.toml", text).unwrap();
    let args = l.bind("launch.toml", f).unwrap();
    let global = std::sync::Arc::new(Global::new(&l, f, &args));
    let mut out = Vec::new();
    Interp::new(m, [0, 0, 0], [1, 1, 1], 1 << 20)
        .with_global(global)
        .run(f, &args, &mut out)?;
    Ok(out
        .iter()
        .filter_map(|(_, e)| match e {
            Effect::Lock { addr, acquire } => Some(format!("{acquire} {addr:#x}")),
            Effect::FlagAdd { addr, amount } => Some(format!("add {addr:#x} {amount}")),
            Effect::FlagWait { addr, count } => Some(format!("wait {addr:#x} {count}")),
            Effect::PtrLoad { .. } => Some("load".into()),
            Effect::PtrStore { .. } => Some("store".into()),
            _ => None,
        })
        .collect())
}

/// With the launch's tensors known, a compare-and-swap of 0 to 1 spun on
/// in a loop takes the lock at its word's address (the loop ends at once;
/// the simulator holds the CTA until the lock is free) and the exchange of
/// 0 on it releases it; an exchange on a word the run does not hold, a
/// CAS tried once (a claim) and a CAS that does not swap in a non-zero
/// stay a load and a store.
#[test]
fn a_spin_lock_is_taken_and_released_at_its_address() {
    let src = "tt.func public @k(%lock: !tt.ptr<i32>, %count: !tt.ptr<i32>) {\n\
  %c0 = arith.constant 0 : i32\n\
  %c1 = arith.constant 1 : i32\n\
  %c3 = arith.constant 3 : i32\n\
  %l3 = tt.addptr %lock, %c3 : !tt.ptr<i32>, i32\n\
  %true = arith.constant true\n\
  scf.while : () -> () {\n\
    %o = tt.atomic_cas acq_rel, gpu, %l3, %c0, %c1 : (!tt.ptr<i32>, i32, i32) -> i32\n\
    %t = arith.cmpi eq, %o, %c1 : i32\n\
    scf.condition(%t)\n\
  } do {\n\
    scf.yield\n\
  }\n\
  %n = tt.atomic_rmw exch, acq_rel, gpu, %count, %c1, %true : (!tt.ptr<i32>, i32, i1) -> i32\n\
  %claim = tt.atomic_cas acq_rel, gpu, %count, %c0, %c1 : (!tt.ptr<i32>, i32, i32) -> i32\n\
  %z = tt.atomic_cas acq_rel, gpu, %count, %c1, %c0 : (!tt.ptr<i32>, i32, i32) -> i32\n\
  %y = tt.atomic_rmw exch, acq_rel, gpu, %l3, %c0, %true : (!tt.ptr<i32>, i32, i1) -> i32\n\
  tt.return\n\
}\n";
    let m = parse("l.mlir", src).unwrap();
    let text = "grid = [1, 1, 1]\n[tensors.lock]\nbase = 0x4000\nelem = 4\ndims = [8]\n\
        [tensors.count]\nbase = 0x5000\nelem = 4\ndims = [8]\n";
    assert_eq!(
        synchronisation(&m, text).unwrap(),
        [
            "true 0x400c",
            // The exchange of 1 on a word the run holds no lock on sets a
            // flag there.
            "add 0x5000 1",
            "load",
            "store",
            "load",
            "store",
            "load",
            "store",
            "false 0x400c"
        ]
    );
    assert_eq!(crate::ttgir::lower::lock_index(0x400c), 0x400c / 4 % 1024);
}

/// A flag: an exchange of a value not 0, or an add, on a word the run
/// holds no lock on adds to the word's counter (then moves as an atomic
/// does); a compare-and-swap of `c` with `c` (a read that changes
/// nothing) spun on waits for the counter to reach `c` and gives `c`, so
/// the loop ends at once; tried once, it stays a plain atomic.
#[test]
fn a_flag_is_set_and_waited_for_at_its_address() {
    let src = "tt.func public @k(%flags: !tt.ptr<i32>) {\n\
  %c1 = arith.constant 1 : i32\n\
  %c2 = arith.constant 2 : i32\n\
  %f2 = tt.addptr %flags, %c2 : !tt.ptr<i32>, i32\n\
  %true = arith.constant true\n\
  %a = tt.atomic_rmw exch, acq_rel, gpu, %f2, %c1, %true : (!tt.ptr<i32>, i32, i1) -> i32\n\
  %b = tt.atomic_rmw add, acq_rel, gpu, %f2, %c2, %true : (!tt.ptr<i32>, i32, i1) -> i32\n\
  scf.while : () -> () {\n\
    %o = tt.atomic_cas acq_rel, gpu, %f2, %c1, %c1 : (!tt.ptr<i32>, i32, i32) -> i32\n\
    %t = arith.cmpi ne, %o, %c1 : i32\n\
    scf.condition(%t)\n\
  } do {\n\
    scf.yield\n\
  }\n\
  %once = tt.atomic_cas acq_rel, gpu, %f2, %c2, %c2 : (!tt.ptr<i32>, i32, i32) -> i32\n\
  tt.return\n\
}\n";
    let m = parse("f.mlir", src).unwrap();
    let text = "grid = [1, 1, 1]\n[tensors.flags]\nbase = 0x4000\nelem = 4\ndims = [8]\n";
    assert_eq!(
        synchronisation(&m, text).unwrap(),
        [
            "add 0x4008 1",
            "load",
            "store",
            "add 0x4008 2",
            "load",
            "store",
            "wait 0x4008 1",
            "load",
            "store"
        ]
    );
    assert_eq!(crate::ttgir::lower::counter_index(0x4008), 2);
}

/// A volatile load of a flag spun on (`while tl.load(flag, volatile=True)
/// != c`) waits for the flag's counter to let the loop end, by the
/// comparison's predicate, and the loop ends at once; a comparison simfa
/// cannot wait on is an error naming it.
#[test]
fn a_volatile_spin_waits_on_the_flag() {
    let spin = |cmp: &str| {
        format!(
            "tt.func public @k(%flags: !tt.ptr<i32>) {{\n\
  %c3 = arith.constant 3 : i32\n\
  scf.while : () -> () {{\n\
    %v = tt.load %flags {{isVolatile = true}} : !tt.ptr<i32>\n\
    %t = arith.cmpi {cmp} : i32\n\
    scf.condition(%t)\n\
  }} do {{\n\
    scf.yield\n\
  }}\n\
  tt.return\n\
}}\n"
        )
    };
    let text = "grid = [1, 1, 1]\n[tensors.flags]\nbase = 0x4000\nelem = 4\ndims = [8]\n";
    for (cmp, count) in [
        ("ne, %v, %c3", 3),
        ("slt, %v, %c3", 3),
        ("sle, %v, %c3", 4),
        ("sgt, %c3, %v", 3),
    ] {
        let src = spin(cmp);
        let m = parse("v.mlir", &src).unwrap();
        let want = format!("wait 0x4000 {count}");
        assert_eq!(synchronisation(&m, text).unwrap(), [want], "{cmp}");
    }
    let src = spin("sge, %v, %c3");
    let m = parse("v.mlir", &src).unwrap();
    let err = synchronisation(&m, text).unwrap_err().to_string();
    assert!(err.contains("`cmpi sge, 3`"), "{err}");
}

/// As ptxas schedules a block, a load into registers is issued before the
/// waits for earlier loads and the work after them: two loads each used
/// at once are both in flight before the first wait. Loads are not issued
/// ahead across a loop iteration's end.
#[test]
fn a_block_s_loads_are_issued_before_its_waits() {
    let body = |hoisted: &str| {
        format!(
            "#blocked = #ttg.blocked<{{sizePerThread = [4], threadsPerWarp = [32], warpsPerCTA = [4], order = [0]}}>\n\
tt.func public @k(%x: !tt.ptr<f32>, %y: !tt.ptr<f32>) {{\n\
  %c0 = arith.constant 0 : i32\n\
  %c1 = arith.constant 1 : i32\n\
  %c2 = arith.constant 2 : i32\n\
  %r = tt.make_range {{end = 512 : i32, start = 0 : i32}} : tensor<512xi32, #blocked>\n\
  %p = tt.splat %x : !tt.ptr<f32> -> tensor<512x!tt.ptr<f32>, #blocked>\n\
  %q = tt.addptr %p, %r : tensor<512x!tt.ptr<f32>, #blocked>, tensor<512xi32, #blocked>\n\
  %ps = tt.splat %y : !tt.ptr<f32> -> tensor<512x!tt.ptr<f32>, #blocked>\n\
  %qs = tt.addptr %ps, %r : tensor<512x!tt.ptr<f32>, #blocked>, tensor<512xi32, #blocked>\n\
  {hoisted}\
  tt.return\n\
}}\n"
        )
    };
    let order = |src: &str| -> Vec<&'static str> {
        let m = parse("h.mlir", src).unwrap();
        let args = [Value::Ptr { arg: 0, off: 0 }, Value::Ptr { arg: 1, off: 0 }];
        effects(&m, [0, 0, 0], [1, 1, 1], &args)
            .unwrap()
            .iter()
            .filter_map(|(_, e)| match e {
                Effect::PtrLoad { .. } => Some("load"),
                Effect::Use { .. } => Some("use"),
                Effect::PtrStore { .. } => Some("store"),
                _ => None,
            })
            .collect()
    };
    let block = "%a = tt.load %q : tensor<512x!tt.ptr<f32>, #blocked>\n\
  %a2 = arith.addf %a, %a : tensor<512xf32, #blocked>\n\
  %b = tt.load %qs : tensor<512x!tt.ptr<f32>, #blocked>\n\
  %s = arith.addf %a2, %b : tensor<512xf32, #blocked>\n\
  tt.store %q, %s : tensor<512x!tt.ptr<f32>, #blocked>\n";
    assert_eq!(order(&body(block)), ["load", "load", "use", "use", "store"]);
    let looped = "scf.for %i = %c0 to %c2 step %c1 : i32 {\n\
    %a = tt.load %q : tensor<512x!tt.ptr<f32>, #blocked>\n\
    %a2 = arith.addf %a, %a : tensor<512xf32, #blocked>\n\
  }\n";
    assert_eq!(order(&body(looped)), ["load", "use", "load", "use"]);
}
