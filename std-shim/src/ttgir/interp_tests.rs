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
) -> Result<Vec<(usize, Effect<'m>)>, TtgirError> {
    let f = m.func(None).expect("one public function");
    let mut out = Vec::new();
    Interp::new(m, cta, grid, 1 << 20).run(f, args, &mut out)?;
    Ok(out)
}

fn int(v: i64) -> Value {
    Value::Int { v, bits: 32 }
}

fn compiled(name: &str) -> String {
    let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/fixtures/ttgir-compiled")
        .join(name);
    std::fs::read_to_string(p).expect("fixture exists")
}

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
        args[d] = Value::Desc(i as u16);
        for j in 1..5 {
            args[d + j] = int(1024);
        }
    }
    let e = effects(&m, [1, 2, 0], [8, 8, 1], &args).unwrap();
    let loads: Vec<(u16, Vec<i64>)> = e
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
    let waits: Vec<(i64, u32)> = e
        .iter()
        .filter_map(|(_, e)| match e {
            Effect::Wait { bar, phase } => Some((bar.index, *phase)),
            _ => None,
        })
        .collect();
    assert_eq!(waits.len(), 16);
    for (i, w) in waits.iter().enumerate() {
        assert_eq!(*w, ((i % 3) as i64, ((i / 3) % 2) as u32), "wait {i}");
    }
    let dots = e
        .iter()
        .filter(|(_, e)| matches!(e, Effect::Wgmma(_)))
        .count();
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
    let expects = e
        .iter()
        .filter(|(_, e)| matches!(e, Effect::Expect { bytes: 32768, .. }))
        .count();
    assert_eq!(expects, 16);
}
