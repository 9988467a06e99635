//! Thread block clusters: a cluster's CTAs start together on distinct SMs
//! and retire together; a multicast load is read from memory once and lands
//! in every CTA it names; a cluster release frees the stage in every CTA.

use simfa_core::config::MemoryModel;
use simfa_core::{Event, GpuConfig, Kernel, Ratio};
use simfa_std::asm::{parse, print};
use simfa_tests::{run_checked, run_observed, Recorder};

fn kernel(text: &str) -> Kernel {
    parse(text, "t.sasm").unwrap_or_else(|e| panic!("{e}"))
}

/// The fixed port: 2 bytes per cycle per SM, 100 cycles of latency.
fn fixed() -> GpuConfig {
    let mut cfg = GpuConfig::h100();
    cfg.memory = MemoryModel::Fixed;
    cfg.port.bytes_per_cycle = Ratio::new(2, 1);
    cfg.port.latency = 100;
    cfg
}

/// Two CTAs of one cluster each load one 256-byte half of a tile, CTA
/// `cx` after a `cx * DELAY`-cycle bubble, multicast to both, and wait for
/// the whole 512-byte tile.
fn halves(delay: u32) -> Kernel {
    kernel(&format!(
        "kernel halves
grid 2
cluster 2
smem 1024
tensormap X base=0x1000 elem=2 dims=[4096] box=[128]
mbarrier full[1] count=1
role main count=1 regs=64 {{
    loop cx {{
        bubble {delay}
    }}
    mbar.expect_tx full[0], 512
    tma.load X, full[0], [cx*128], multicast=x
    mbar.arrive full[0]
    mbar.wait full[0], 0
    exit
}}
"
    ))
}

/// Per CTA: the cycle its TMA load landed (`TmaDone`) and the cycle its
/// mbarrier's phase completed.
fn landings(cfg: &GpuConfig, k: &Kernel) -> [(u64, u64); 2] {
    let mut rec = Recorder::default();
    run_observed(cfg, k, &mut rec).unwrap();
    let mut out = [(0, 0); 2];
    for (c, e) in &rec.events {
        match *e {
            Event::TmaDone { who, .. } => out[who.cta as usize].0 = *c,
            Event::PhaseComplete { cta, .. } => out[cta as usize].1 = *c,
            _ => {}
        }
    }
    out
}

/// Each half moves over its own SM's port (256 bytes in 128 cycles, then
/// 100 cycles of latency): CTA 1's, issued a cycle later (its one-cycle
/// bubble), lands a cycle after CTA 0's, and both CTAs' phases complete
/// when it lands, though each CTA loaded only half of the bytes it
/// expected. Delaying CTA 1 by 300 more cycles delays its half, and with
/// it both CTAs' phases, by exactly 300 cycles: CTA 0 waits for its
/// peer's half.
#[test]
fn a_multicast_half_completes_the_phase_of_every_cta() {
    let cfg = fixed();
    let [(l0, p0), (l1, p1)] = landings(&cfg, &halves(1));
    assert_eq!(l1, l0 + 1);
    assert_eq!((p0, p1), (l1, l1));
    let [(m0, q0), (m1, q1)] = landings(&cfg, &halves(301));
    assert_eq!(m0, l0, "CTA 0's own half is not delayed");
    assert_eq!(m1, l1 + 300);
    assert_eq!((q0, q1), (m1, m1));
}

/// `cluster_ring.sasm`: four CTAs in clusters of two, each loading its
/// half of every 512-byte tile for both. The lines each tile needs are
/// requested once per cluster: 2 clusters x 4 tiles x 4 lines = 32 line
/// requests, where loading every tile into each CTA takes 64. Each
/// CTA's barrier completes its 4 phases; the checker follows the
/// multicast landings and the cluster releases and finds nothing.
#[test]
fn a_multicast_load_is_read_once_for_its_cluster() {
    let text = std::fs::read_to_string("../examples/cluster_ring.sasm").unwrap();
    let cfg = GpuConfig::h100();
    let mut rec = Recorder::default();
    let s = run_observed(&cfg, &kernel(&text), &mut rec).unwrap();
    assert_eq!(s.stats.tma_lines, 32);
    assert_eq!(s.stats.bytes_loaded, 4 * 4 * 256);
    let mut phases = [0u32; 4];
    for (_, e) in &rec.events {
        if let Event::PhaseComplete { cta, .. } = *e {
            phases[cta as usize] += 1;
        }
    }
    assert_eq!(phases, [4; 4]);
    // The same tiles, each CTA loading both halves for itself alone.
    let alone = text
        .replace("cluster 2 1 1\n", "")
        .replace(", multicast=x", "")
        .replace(", cluster=x", "")
        .replace("consumers=2", "consumers=1")
        .replace(
            "tma.load X, full[l0 % 2], [l0*256 + cy*1024 + cx*128]",
            "tma.load X, full[l0 % 2], [l0*256 + cy*1024]\n        \
             tma.load X, full[l0 % 2], [l0*256 + cy*1024 + 128]",
        );
    let s = run_observed(&cfg, &kernel(&alone), &mut ()).unwrap();
    assert_eq!(s.stats.tma_lines, 64);
}

/// A consumer that releases its stage only in its own CTA lets the peer's
/// producer multicast into that stage while this CTA's consumer still
/// reads it: CTA 1's consumer is slow (a 2000-cycle bubble before each
/// release), and the checker flags the overwrite. Releasing along the
/// cluster (the ring as written) keeps the producers waiting and is clean.
#[test]
fn a_multicast_waits_for_the_release_of_every_destination() {
    let text = std::fs::read_to_string("../examples/cluster_ring.sasm")
        .unwrap()
        .replace(
            "        stage.release empty[l0 % 2], cluster=x",
            "        loop cx {\n            bubble 2000\n        }\n        \
             stage.release empty[l0 % 2], cluster=x",
        );
    let cfg = GpuConfig::h100();
    let (r, check) = run_checked(&cfg, &kernel(&text), &mut ());
    let slow = r.unwrap();
    assert!(check.is_clean(), "{}", check.summary());
    let local = text
        .replace(", cluster=x", "")
        .replace("consumers=2", "consumers=1");
    let (r, check) = run_checked(&cfg, &kernel(&local), &mut ());
    r.unwrap();
    assert!(!check.is_clean());
    assert!(check.summary().contains("overwrite"), "{}", check.summary());
    assert!(slow.cycles > 4 * 2000);
}

/// Two SMs, one CTA per SM (each takes most of the shared memory): the
/// first cluster starts on both SMs at once. CTA 0 finishes long before
/// CTA 1 but keeps its SM until its peer finishes: both retire in the same
/// cycle, and the second cluster starts on both SMs in that cycle (its
/// rank 0 on the SM of the CTA that finished last).
#[test]
fn a_cluster_starts_on_distinct_sms_and_leaves_together() {
    let k = kernel(
        "kernel pair
grid 4
cluster 2
smem 200000
role main count=1 regs=64 {
    bubble 10
    loop cx {
        bubble 5000
    }
    exit
}
",
    );
    let mut cfg = GpuConfig::h100();
    cfg.sms = 2;
    let mut rec = Recorder::default();
    run_observed(&cfg, &k, &mut rec).unwrap();
    let at = |want: fn(&Event) -> Option<(u16, u32)>| -> Vec<(u64, u16, u32)> {
        rec.events
            .iter()
            .filter_map(|(c, e)| want(e).map(|(sm, cta)| (*c, sm, cta)))
            .collect()
    };
    let launches = at(|e| match *e {
        Event::CtaLaunch { sm, cta } => Some((sm, cta)),
        _ => None,
    });
    let retires = at(|e| match *e {
        Event::CtaRetire { sm, cta } => Some((sm, cta)),
        _ => None,
    });
    let t0 = launches[0].0;
    assert_eq!(&launches[..2], &[(t0, 0, 0), (t0, 1, 1)]);
    let r = retires[0].0;
    assert!(r > t0 + 5000);
    assert_eq!(&retires[..2], &[(r, 0, 0), (r, 1, 1)]);
    assert_eq!(&launches[2..], &[(r, 1, 2), (r, 0, 3)]);
}

/// Clusters and cluster masks survive the text and binary forms.
#[test]
fn clusters_round_trip_through_text_and_binary() {
    let text = std::fs::read_to_string("../examples/cluster_ring.sasm").unwrap();
    let k = kernel(&text);
    assert_eq!(k.cluster.dims, [2, 1, 1]);
    let printed = print(&k);
    assert!(printed.contains("cluster 2 1 1\n"), "{printed}");
    assert!(printed.contains("], multicast=x\n"), "{printed}");
    assert!(
        printed.contains("stage.release empty[l0 % 2], cluster=x\n"),
        "{printed}"
    );
    assert_eq!(kernel(&printed), k);
    let mut buf = vec![0u8; 1 << 16];
    let bytes = simfa_core::encode::encode(&k, &mut buf).unwrap().to_vec();
    assert_eq!(simfa_core::encode::decode(&bytes).unwrap(), k);
    // An unclustered kernel prints no cluster statement and no masks.
    let ring = std::fs::read_to_string("../examples/ring.sasm").unwrap();
    assert!(!print(&kernel(&ring)).contains("cluster"));
}
