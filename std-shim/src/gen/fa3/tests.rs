use std::collections::HashMap;

use simfa_core::config::MemoryModel;
use simfa_core::{Cycle, Event, GpuConfig, Observer, Op};

use super::*;

fn fixed() -> GpuConfig {
    let mut cfg = GpuConfig::h800();
    cfg.memory = MemoryModel::Fixed;
    cfg
}

fn params(heads: u32, sq: u32, skv: u32, hdim: u32, causal: bool) -> Fa3Params {
    Fa3Params {
        batch: 1,
        heads,
        kv_heads: 1,
        seqlen_q: sq,
        seqlen_kv: skv,
        hdim,
        causal,
        variant: Variant::Full,
    }
}

/// Issue counts per (CTA, role), WGMMA spans, `compute` spans (issue to
/// wake-up) and the work of the computes per role.
#[derive(Default)]
struct Count {
    issues: HashMap<(u32, u8), u64>,
    wgmma: HashMap<u8, Vec<(u64, u64)>>,
    computes: HashMap<u8, Vec<(u64, u64)>>,
    work: HashMap<u8, Work>,
    open: HashMap<(u16, u32, u8), u64>,
}

impl Observer for Count {
    fn on_event(&mut self, cycle: Cycle, e: &Event) {
        match *e {
            Event::Issue { who, op } => {
                *self.issues.entry((who.cta, who.role)).or_default() += 1;
                if let Op::Compute { work } = op {
                    self.open.insert((who.sm, who.cta, who.wg), cycle.get());
                    let w = self.work.entry(who.role).or_default();
                    *w = w.plus(work);
                }
            }
            Event::Wake { who } => {
                if let Some(s) = self.open.remove(&(who.sm, who.cta, who.wg)) {
                    self.computes
                        .entry(who.role)
                        .or_default()
                        .push((s, cycle.get()));
                }
            }
            Event::WgmmaStart { who, start, end } => {
                self.wgmma.entry(who.role).or_default().push((start, end));
            }
            _ => {}
        }
    }
}

#[test]
fn softmax_of_64x176_takes_988_cycles_alone() {
    let cfg = GpuConfig::h800();
    let nm = NonMma::new(64, 176, 128);
    // The paper's budget: row max 88 + exp 704 + row sum 88 + convert 44
    // + rescale 64, from the tile shape and the unit throughputs.
    assert_eq!(solo_cycles(&cfg, &nm.per_block()), 988);
    assert_eq!(
        nm.per_block(),
        Work {
            fp32: 2 * 11264 + 8192,
            mufu: 11264,
            fp16: 11264,
            int: 0
        }
    );
    // Derived, not fixed: halving the MUFU rate doubles the exponentials.
    let mut slow = cfg.clone();
    slow.units.mufu = 8;
    assert_eq!(solo_cycles(&slow, &nm.per_block()), 988 + 704);
    // The simulated WarpGroup, alone on its SM, spends exactly that long.
    let mut b = Kb::new(Kernel::default(), "softmax").unwrap();
    b.begin_role("consumer", 1, 240).unwrap();
    for w in [nm.softmax, nm.rescale] {
        b.op(Instr::Compute { work: w }).unwrap();
    }
    b.op(Instr::Exit).unwrap();
    b.end_role().unwrap();
    let k = b.finish().unwrap();
    let out = crate::run::simulate(&fixed(), &k, &mut ()).unwrap();
    assert_eq!(out.summary.stats.compute_cycles, 988);
    assert_eq!(out.summary.cycles, 989);
}

#[test]
fn tilings_follow_the_real_kernel() {
    let t = Tiling::for_shape(128, false).unwrap();
    assert_eq!(
        (t.block_m, t.block_n, t.consumers, t.cluster),
        (128, 176, 2, 2)
    );
    assert_eq!((t.producer_regs, t.consumer_regs), (24, 240));
    let t = Tiling::for_shape(128, true).unwrap();
    assert_eq!((t.block_m, t.block_n), (128, 128));
    let t = Tiling::for_shape(64, false).unwrap();
    assert_eq!((t.block_m, t.block_n, t.consumers), (192, 128, 3));
    assert_eq!((t.producer_regs, t.consumer_regs), (32, 160));
    let t = Tiling::for_shape(256, false).unwrap();
    assert_eq!((t.block_m, t.block_n, t.cluster), (128, 80, 2));
    let t = Tiling::for_shape(96, false).unwrap();
    assert_eq!(
        (t.block_m, t.block_n, t.consumers, t.pv_mode),
        (192, 144, 3, WgmmaMode::Ss)
    );
    let t = Tiling::for_shape(192, false).unwrap();
    assert_eq!(
        (t.block_m, t.block_n, t.cluster, t.pv_mode),
        (128, 112, 2, WgmmaMode::Rs)
    );
    assert_eq!(Tiling::for_shape(192, true).unwrap().cluster, 1);
    assert!(Tiling::for_shape(80, false).is_err());
}

/// Closed-form instruction counts of the full variant, per tile.
fn closed_form(hdim: u64, bn: u64, n: u64, consumer: u64) -> (u64, u64) {
    let (s, pv) = (hdim / 16 + 1, bn / 16 + 1);
    let producer = 4 + 4 + 1 + 8 * (n - 1) + 4;
    // Block 0 and the last P V are outside the ping-pong, as in FA3.
    let mut c = 1 + (4 + s) + (n - 1) * (10 + s + pv) + 1 + (3 + pv) + 2;
    if consumer == 0 {
        c += 3;
    }
    (producer, c)
}

#[test]
fn instruction_counts_match_the_shape() {
    // 3 heads x 5 query blocks = 15 tiles on the persistent grid of the
    // H800 (132 SMs): one tile per CTA. hdim 128, 1000 KV rows = 6 blocks
    // of 176 (the last one clipped).
    let cfg = fixed();
    for (hdim, skv) in [
        (128u32, 1000u32),
        (64, 700),
        (96, 500),
        (192, 400),
        (256, 333),
    ] {
        let p = params(3, 600, skv, hdim, false);
        let (k, plan) = fa3(&p, &cfg).unwrap();
        let t = plan.tiling;
        let mut c = Count::default();
        crate::run::simulate(&cfg, &k, &mut c).unwrap();
        let n = skv.div_ceil(t.block_n) as u64;
        let tiles_of = |cta: u32| -> u64 {
            let g = plan.ctas as u64;
            (plan.tiles - cta as u64).div_ceil(g)
        };
        for cta in 0..plan.ctas {
            let tiles = tiles_of(cta);
            let (prod, _) = closed_form(hdim as u64, t.block_n as u64, n, 0);
            assert_eq!(c.issues[&(cta, 0)], tiles * prod + 1, "producer cta {cta}");
            for w in 0..t.consumers {
                let (_, cons) = closed_form(hdim as u64, t.block_n as u64, n, w as u64);
                let extra = 1 + (w + 1 == t.consumers) as u64; // exit, ping-pong opener
                assert_eq!(
                    c.issues[&(cta, 1 + w as u8)],
                    tiles * cons + extra,
                    "hdim {hdim} consumer {w} cta {cta}"
                );
            }
        }
        // Every WGMMA of the shape ran: S and P V for each block.
        let per_block = (hdim / 16 + t.block_n / 16) as u64;
        let wgmmas: usize = c.wgmma.values().map(Vec::len).sum();
        assert_eq!(
            wgmmas as u64,
            plan.tiles * t.consumers as u64 * n * per_block
        );
    }
}

#[test]
fn persistent_ctas_share_the_tiles() {
    // 40 heads x 8 query blocks = 320 tiles on 132 SMs.
    let p = params(40, 1024, 512, 128, false);
    let (k, plan) = fa3(&p, &fixed()).unwrap();
    assert_eq!(plan.tiles, 320);
    assert_eq!(plan.ctas, 132);
    assert_eq!(k.grid, [132, 1, 1]);
    let mut c = Count::default();
    let out = crate::run::simulate(&fixed(), &k, &mut c).unwrap();
    let wg = out.summary.stats.wgmmas;
    assert_eq!(wg, 320 * 2 * 3 * (8 + 11));
}

#[test]
fn causal_visits_the_triangle() {
    // hdim 128 causal: 128 x 128 tiles, 1024 rows = 8 query blocks; block
    // m visits m + 1 KV blocks: 36 per head.
    let p = params(2, 1024, 1024, 128, true);
    let cfg = fixed();
    let (k, plan) = fa3(&p, &cfg).unwrap();
    assert_eq!(plan.blocks_per_head(&p), 36);
    assert_eq!(k.grid, [8, 2, 1]);
    let mut c = Count::default();
    crate::run::simulate(&cfg, &k, &mut c).unwrap();
    let s_gemms: usize = c.wgmma.values().map(|v| v.len()).sum::<usize>();
    // S: 8 WGMMAs per block, P V: 8 per block, two consumers.
    assert_eq!(s_gemms as u64, 2 * 36 * 2 * (8 + 8));
    // hdim 64 causal, 192 x 128 tiles over 1000 rows: end-aligned blocks
    // ending at 1000, 808, 616, 424, 232, 40 visit ceil(end/128) blocks.
    let p = params(1, 1000, 1000, 64, true);
    let (k, plan) = fa3(&p, &cfg).unwrap();
    let want: u64 = [1000u32, 808, 616, 424, 232, 40]
        .iter()
        .map(|e| e.div_ceil(128) as u64)
        .sum();
    assert_eq!(plan.blocks_per_head(&p), want);
    let out = crate::run::simulate(&cfg, &k, &mut ()).unwrap();
    assert_eq!(out.summary.stats.wgmmas, want * 3 * (4 + 8));
    // The work per consumer and tile of n blocks, the last min(n, 2)
    // (diagonal) ones masked: n softmaxes, the masks, n - 1 rescales (none
    // after the first block) and the epilogue.
    let nm = NonMma::new(64, 128, 64);
    let mut want = Work::default();
    for e in [1000u32, 808, 616, 424, 232, 40] {
        let n = e.div_ceil(128);
        let mut w = nm.epilogue;
        for b in 0..n {
            w = w.plus(nm.block(b < n.min(2)));
            if b > 0 {
                w = w.plus(nm.rescale);
            }
        }
        want = want.plus(w);
    }
    let mut c = Count::default();
    crate::run::simulate(&cfg, &k, &mut c).unwrap();
    for role in 1..=3u8 {
        assert_eq!(c.work[&role], want, "consumer {role}");
    }
    assert_eq!(out.summary.stats.bubble_cycles, 0);
}

fn merged(v: &[(u64, u64)]) -> Vec<(u64, u64)> {
    let mut out: Vec<(u64, u64)> = Vec::new();
    for &(s, e) in v {
        match out.last_mut() {
            Some(l) if s <= l.1 => l.1 = l.1.max(e),
            _ => out.push((s, e)),
        }
    }
    out
}

fn overlap(a: &[(u64, u64)], b: &[(u64, u64)]) -> u64 {
    let mut total = 0;
    for &(s, e) in a {
        for &(t, f) in b {
            total += e.min(f).saturating_sub(s.max(t));
        }
    }
    total
}

#[test]
fn ping_pong_is_real() {
    // One tile, one CTA: 128 query rows against 2048 KV rows.
    let p = params(1, 128, 2048, 128, false);
    let cfg = GpuConfig::h800();
    let (k, plan) = fa3(&p, &cfg).unwrap();
    assert_eq!(plan.ctas, 1);
    let mut c = Count::default();
    crate::run::simulate(&cfg, &k, &mut c).unwrap();
    let (a, b) = (merged(&c.wgmma[&1]), merged(&c.wgmma[&2]));
    assert!(a.len() > 5 && b.len() > 5);
    // The consumers' WGMMA groups never interleave.
    for &(s, e) in &a {
        for &(t, f) in &b {
            assert!(e <= t || f <= s, "groups ({s},{e}) and ({t},{f}) overlap");
        }
    }
    // Each consumer's softmax runs under the other's GEMMs (and, with
    // intra-WarpGroup overlap, under its own P V).
    let soft: u64 = c.computes[&1].iter().map(|(s, e)| e - s).sum();
    let ab = overlap(&c.computes[&1], &b);
    let ba = overlap(&c.computes[&2], &a);
    assert!(
        ab > soft / 5,
        "softmax of 0 under GEMMs of 1: {ab} of {soft}"
    );
    assert!(
        ba > soft / 5,
        "softmax of 1 under GEMMs of 0: {ba} of {soft}"
    );
    let all: Vec<(u64, u64)> = {
        let mut v = [a.clone(), b.clone()].concat();
        v.sort();
        merged(&v)
    };
    // Most of it runs under GEMMs (slowed there by the tensor pipe's
    // register-file share; it speeds up when the pipe drains).
    let covered = overlap(&c.computes[&1], &all);
    assert!(
        covered * 2 > soft,
        "{covered} of {soft} softmax cycles under GEMMs"
    );
}

#[test]
fn ablation_variants_are_slower() {
    let cfg = GpuConfig::h800();
    let mut cycles = Vec::new();
    for v in [Variant::Full, Variant::NoOverlap, Variant::NoWs] {
        let p = Fa3Params {
            variant: v,
            ..params(2, 512, 2048, 128, false)
        };
        let (k, _) = fa3(&p, &cfg).unwrap();
        let out = crate::run::simulate(&cfg, &k, &mut ()).unwrap();
        assert_eq!(out.summary.stats.wgmmas, 8 * 2 * 12 * 19, "{v:?}");
        cycles.push(out.summary.cycles);
    }
    // Without intra-WarpGroup overlap the kernel is slower. Without warp
    // specialisation it is within a few percent of the full kernel here
    // (on the GPU it is 16% slower: `simfa validate` reports that held-out
    // ratio as a miss of the model).
    assert!(cycles[0] < cycles[1], "{cycles:?}");
    let ws = cycles[2] as f64 / cycles[0] as f64;
    assert!((0.97..1.05).contains(&ws), "{cycles:?}");
}

#[test]
fn bad_parameters_are_named() {
    let cfg = GpuConfig::h800();
    let err = |p: Fa3Params| fa3(&p, &cfg).unwrap_err().to_string();
    assert!(err(params(4, 512, 512, 80, false)).contains("head dim"));
    assert!(err(Fa3Params {
        kv_heads: 3,
        ..params(4, 512, 512, 128, false)
    })
    .contains("kv heads"));
    assert!(err(params(0, 512, 512, 128, false)).contains("heads"));
    assert!(err(params(1, 512, 1024, 128, true)).contains("kv seqlen"));
    assert!(err(Fa3Params {
        variant: Variant::NoWs,
        ..params(1, 512, 512, 128, true)
    })
    .contains("no-ws"));
    assert!(err(params(1, 1 << 21, 512, 128, false)).contains("2^20"));
    assert_eq!(Variant::from_name("no-ws"), Some(Variant::NoWs));
    assert_eq!(Variant::from_name("x"), None);
    for v in [Variant::Full, Variant::NoOverlap, Variant::NoWs] {
        assert_eq!(Variant::from_name(v.name()), Some(v));
    }
}

#[test]
fn useful_flops() {
    let p = params(2, 1024, 2048, 128, false);
    assert_eq!(p.flops(), 4 * 1024 * 2048 * 128 * 2);
    let p = params(2, 1024, 1024, 128, true);
    assert_eq!(p.flops(), 2 * 1024 * 1024 * 128 * 2);
}

#[test]
fn memory_need_is_bounded_up_to_32k_tokens() {
    // The arena (the simulation's whole memory) is known before the run and
    // does not grow with the sequence: the persistent grid is one CTA per
    // SM whatever the length.
    let cfg = GpuConfig::h800();
    for seqlen in [4096, 8192, 16384, 32768] {
        for causal in [false, true] {
            let p = Fa3Params {
                heads: 64,
                kv_heads: 8,
                seqlen_q: seqlen,
                seqlen_kv: seqlen,
                causal,
                ..Fa3Params::default()
            };
            let (k, _) = fa3(&p, &cfg).unwrap();
            let bytes =
                simfa_core::Simulator::<simfa_core::NoStream>::arena_size(&cfg, &k).unwrap();
            assert!(bytes < 64 << 20, "{seqlen} causal={causal}: {bytes} bytes");
        }
    }
}
