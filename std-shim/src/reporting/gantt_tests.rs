//! Tests of [`super`].

use super::*;
use crate::gen::{gemm, GemmParams};
use crate::reporting::gantt_svg::write_svg;
use crate::reporting::svg::tests::assert_balanced;
use simfa_core::config::MemoryModel;
use simfa_core::GpuConfig;

/// `examples/ring.sasm` with a bubble and a store of the consumer.
const RING: &str = "kernel ring
grid 4
smem 4096
tensormap X base=0x1000 elem=2 dims=[1048576] box=[256]
mbarrier full[2] count=1
stage empty[2] consumers=1
role producer count=1 regs=24 {
loop 4 {
    stage.acquire empty[l0 % 2]
    mbar.expect_tx full[l0 % 2], 512
    tma.load X, full[l0 % 2], [l0*256 + cta*1024]
    mbar.arrive full[l0 % 2]
}
exit
}
role consumer count=1 regs=240 {
loop 4 {
    mbar.wait full[l0 % 2], l0 / 2 % 2
    wgmma 64
    wgmma 64
    wgmma.commit
    wgmma.wait 0
    bubble 40
    stage.release empty[l0 % 2]
}
tma.store X, [cta*1024 + 524288]
store.wait 0
exit
}
";

fn config(fixed: bool) -> GpuConfig {
    let mut cfg = GpuConfig::h800();
    if fixed {
        cfg.memory = MemoryModel::Fixed;
    }
    cfg
}

fn record(cfg: &GpuConfig, k: &Kernel, sm: u16) -> GanttRecorder {
    let mut rec = GanttRecorder::for_kernel(sm, k);
    crate::run::simulate(cfg, k, &mut rec).unwrap();
    rec
}

/// Checks the shape of a trace and returns its `X` events.
fn check_trace(v: &Value, sm: u16) -> Vec<Value> {
    let events = v.as_array().expect("a JSON array");
    let mut named = std::collections::BTreeSet::new();
    let mut xs = Vec::new();
    for e in events {
        assert_eq!(e["pid"].as_u64(), Some(sm as u64), "{e}");
        match e["ph"].as_str().unwrap() {
            "M" => {
                if e["name"] == "thread_name" {
                    named.insert(e["tid"].as_u64().unwrap());
                    assert!(e["args"]["name"].is_string());
                }
            }
            "X" => xs.push(e.clone()),
            other => panic!("unexpected phase {other}"),
        }
    }
    // Per tid, (start, end) in cycles and in picoseconds of the trace.
    let mut by_tid: BTreeMap<u64, Vec<[u64; 4]>> = BTreeMap::new();
    for e in &xs {
        let tid = e["tid"].as_u64().expect("tid");
        assert!(named.contains(&tid), "tid {tid} has a name");
        assert!(e["name"].is_string() && e["cat"].is_string());
        let (ts, dur) = (e["ts"].as_f64().unwrap(), e["dur"].as_f64().unwrap());
        assert!(ts >= 0.0 && dur >= 0.0, "{e}");
        let (s, t) = (
            e["args"]["start_cycle"].as_u64().unwrap(),
            e["args"]["end_cycle"].as_u64().unwrap(),
        );
        assert!(s < t && e["args"]["cycles"].as_u64() == Some(t - s));
        let (a, b) = ((ts * 1e6).round() as u64, ((ts + dur) * 1e6).round() as u64);
        by_tid.entry(tid).or_default().push([s, t, a, b]);
    }
    for (tid, mut spans) in by_tid {
        spans.sort();
        for w in spans.windows(2) {
            assert!(
                w[0][1] <= w[1][0] && w[0][3] <= w[1][2],
                "tid {tid}: {:?} overlaps {:?}",
                w[0],
                w[1]
            );
        }
    }
    xs
}

fn count(xs: &[Value], cat: &str) -> usize {
    xs.iter().filter(|e| e["cat"] == cat).count()
}

#[test]
fn gemm_timeline_both_memory_models() {
    let k = gemm(&GemmParams::new(256, 256, 256)).unwrap();
    for fixed in [false, true] {
        let cfg = config(fixed);
        let rec = record(&cfg, &k, 0);
        let trace = rec.chrome_trace(cfg.clock_mhz as f64);
        let xs = check_trace(&trace, 0);
        assert!(count(&xs, "wgmma") > 0, "fixed={fixed}");
        assert!(count(&xs, "tma load") > 0, "fixed={fixed}");
        assert!(count(&xs, "tma store") > 0, "fixed={fixed}");
        assert!(count(&xs, "wait") > 0, "fixed={fixed}");
        assert_eq!(rec.dropped(), 0);
        let svg = crate::reporting::gantt_svg::svg(&rec, "gemm <256> & \"sm 0\"");
        assert!(svg.starts_with("<svg"));
        assert_balanced(&svg);
        assert_eq!(svg.matches(r#"<rect class="span""#).count(), xs.len());
        assert!(svg.contains("gemm &lt;256&gt; &amp; &quot;sm 0&quot;"));
        assert!(
            svg.contains("cta 0 / main wg0"),
            "role names from the kernel"
        );
        // Determinism: a second run gives the same bytes.
        let again = record(&cfg, &k, 0);
        assert_eq!(again.chrome_trace(1830.0).to_string(), trace.to_string());
        assert_eq!(
            crate::reporting::gantt_svg::svg(&again, "gemm <256> & \"sm 0\""),
            svg
        );
    }
}

#[test]
fn warp_specialised_ring_has_every_kind() {
    let k = crate::asm::parse(RING, "ring.sasm").unwrap();
    for fixed in [false, true] {
        let cfg = config(fixed);
        let rec = record(&cfg, &k, 1);
        let xs = check_trace(&rec.chrome_trace(1830.0), 1);
        for cat in ["tma load", "tma store", "wgmma", "wait", "bubble"] {
            assert!(count(&xs, cat) > 0, "{cat}, fixed={fixed}");
        }
        // Two WGMMAs per commit group merge into one bar, so at most 4.
        let w = xs.iter().filter(|e| e["cat"] == "wgmma");
        assert!(w.clone().count() <= 4 && w.clone().all(|e| e["args"]["wgmmas"] == 2));
        assert!(xs.iter().any(|e| e["name"] == "wait mbar 0"));
        let rows = rec.rows();
        let names: Vec<&str> = rows.iter().map(|r| r.name.as_str()).collect();
        assert!(names.contains(&"cta 1 / producer wg0"), "{names:?}");
        assert!(names.contains(&"cta 1 / producer wg0 tma"), "{names:?}");
        assert!(names.contains(&"cta 1 / consumer wg1 wgmma"), "{names:?}");
        assert!(rows.iter().all(|r| r.cta == 1));
        let bubbles: u64 = rows
            .iter()
            .flat_map(|r| &r.spans)
            .filter(|s| s.kind == SpanKind::Bubble)
            .map(|s| s.end - s.start)
            .sum();
        assert_eq!(bubbles, 4 * 40);
    }
}

#[test]
fn idle_sm_gives_an_empty_valid_trace() {
    let k = gemm(&GemmParams::new(256, 256, 256)).unwrap();
    let cfg = config(false);
    let rec = record(&cfg, &k, 131);
    let trace = rec.chrome_trace(1830.0);
    assert!(check_trace(&trace, 131).is_empty());
    assert!(rec.rows().is_empty());
    let svg = crate::reporting::gantt_svg::svg(&rec, "idle");
    assert!(svg.starts_with("<svg") && !svg.contains("class=\"span\""));
    assert_balanced(&svg);
    assert!(!svg.contains("NaN") && !svg.contains("inf"));
}

fn who(cta: u32, wg: u8) -> Who {
    Who {
        sm: 0,
        cta,
        wg,
        role: 0,
    }
}

#[test]
fn matches_transfers_and_closes_open_spans() {
    let mut rec = GanttRecorder::new(0).with_role_names(vec!["p".into()]);
    let w = who(0, 0);
    let issue = |op, bytes, store| Event::TmaIssue {
        who: w,
        bytes,
        store,
        done: None,
        op,
        bar: None,
    };
    let done = |op, bytes, store| Event::TmaDone {
        who: w,
        bytes,
        store,
        op,
        bar: None,
    };
    let stall = |who, reason| Event::Stall { who, reason };
    let events = [
        (10, issue(0, 64, false)),
        (11, issue(1, 32, false)),
        // The second load lands first: matched by operation id, not order.
        (20, done(1, 32, false)),
        (25, issue(2, 32, true)),
        (
            30,
            Event::Issue {
                who: w,
                op: Op::Bubble { cycles: 1 },
            },
        ),
        (30, stall(w, WaitReason::Stage { stage: 2 })),
        (40, Event::Wake { who: w }),
        (50, Event::Wake { who: w }), // after a sleep: no open wait
        (60, stall(w, WaitReason::TmaSlot)),
        (70, done(0, 64, false)),
        // Another SM is ignored.
        (80, stall(Who { sm: 1, ..w }, WaitReason::TmaSlot)),
    ];
    for (c, e) in events {
        rec.on_event(Cycle(c), &e);
    }
    let rows = rec.rows();
    assert_eq!(rows.len(), 3, "{rows:?}");
    assert_eq!(rows[0].name, "cta 0 / p wg0");
    let issue: Vec<(u64, u64, String)> = rows[0]
        .spans
        .iter()
        .map(|s| (s.start, s.end, s.kind.label()))
        .collect();
    assert_eq!(
        issue,
        [
            (30, 40, "wait stage 2".into()),
            (60, 80, "wait tma slot".into())
        ]
    );
    let lanes: Vec<Vec<(u64, u64)>> = rows[1..]
        .iter()
        .map(|r| r.spans.iter().map(|s| (s.start, s.end)).collect())
        .collect();
    // Load 10..70, load 11..20 and the open store 25..80 on two lanes.
    assert_eq!(lanes, [vec![(10, 70)], vec![(11, 20), (25, 80)]]);
    assert_eq!(rows[2].name, "cta 0 / p wg0 tma 2");
    assert_eq!(rows[2].spans[1].kind, SpanKind::TmaStore { bytes: 32 });
}

#[test]
fn merges_wgmmas_and_honours_the_budget() {
    let mut rec = GanttRecorder::new(0).with_max_spans(2);
    let w = who(3, 1);
    for (s, e) in [(0, 10), (10, 20), (25, 30), (40, 50), (50, 55)] {
        rec.on_event(
            Cycle(s),
            &Event::WgmmaStart {
                who: w,
                start: s,
                end: e,
            },
        );
    }
    rec.on_event(
        Cycle(5),
        &Event::Issue {
            who: w,
            op: Op::Bubble { cycles: 3 },
        },
    );
    let rows = rec.rows();
    let wg: Vec<(u64, u64, SpanKind)> = rows[1]
        .spans
        .iter()
        .map(|s| (s.start, s.end, s.kind))
        .collect();
    assert_eq!(
        wg,
        [
            (0, 20, SpanKind::Wgmma { count: 2 }),
            (25, 30, SpanKind::Wgmma { count: 1 }),
            (40, 55, SpanKind::Wgmma { count: 2 })
        ]
    );
    assert_eq!(rows[1].name, "cta 3 / role 0 wg1 wgmma");
    // Budget 2: (0, 20) and (25, 30) kept, the bubble dropped.
    assert_eq!(rec.dropped(), 1);
    assert!(rows[0].spans.is_empty());
}

#[test]
fn writes_files_atomically() {
    let dir = tempfile::tempdir().unwrap();
    let k = crate::asm::parse(RING, "ring.sasm").unwrap();
    let rec = record(&config(true), &k, 0);
    let (json, svg) = (dir.path().join("t.json"), dir.path().join("t.svg"));
    write_chrome_trace(&json, &rec, 1830.0).unwrap();
    write_svg(&svg, &rec, "ring").unwrap();
    let text = std::fs::read_to_string(&json).unwrap();
    assert_eq!(text, rec.chrome_trace(1830.0).to_string());
    let v: Value = serde_json::from_str(&text).unwrap();
    assert!(!check_trace(&v, 0).is_empty());
    assert_eq!(
        std::fs::read_to_string(&svg).unwrap(),
        crate::reporting::gantt_svg::svg(&rec, "ring")
    );
    assert!(write_svg(&dir.path().join("no/t.svg"), &rec, "x").is_err());
}
