//! Round trips of the whole trace path: simulate, export, import, simulate
//! the imported kernel.

use std::path::Path;

use serde_json::Value;
use simfa_core::{GpuConfig, Kernel};

use super::export::ProtonWriter;
use super::import::{import_proton, ImportSummary};
use super::ops_file::OpsFile;
use crate::gen::{fa3, gemm, Fa3Params, GemmParams};
use crate::run::{simulate, simulate_from, RunOutcome, Snapshots};

fn small_gpu() -> GpuConfig {
    let mut c = GpuConfig::h800();
    c.sms = 4;
    c
}

/// Runs `k`, writing its trace to `trace`.
fn export(cfg: &GpuConfig, k: &Kernel, trace: &Path) -> RunOutcome {
    let f = std::io::BufWriter::new(std::fs::File::create(trace).unwrap());
    let mut w = ProtonWriter::new(f, k).unwrap();
    let out = simulate(cfg, k, &mut w).unwrap();
    assert!(w.finish(out.summary.cycles).unwrap() > 0);
    out
}

fn import_and_run(
    cfg: &GpuConfig,
    trace: &Path,
    header: Option<Kernel>,
) -> (RunOutcome, ImportSummary) {
    let ops = trace.with_extension("ops");
    let (k, sum) = import_proton(trace, header, &ops).unwrap();
    let src = OpsFile::open(&ops).unwrap();
    let out = simulate_from(cfg, &k, src, &mut (), |_, _, _| {}, &Snapshots::default()).unwrap();
    (out, sum)
}

/// Rewrites every event of `trace` with `f` (its name and args).
fn rewrite(trace: &Path, f: impl Fn(&str, &mut serde_json::Map<String, Value>)) {
    let mut v: Value = serde_json::from_str(&std::fs::read_to_string(trace).unwrap()).unwrap();
    for e in v["traceEvents"].as_array_mut().unwrap() {
        let name = e["name"].as_str().unwrap().to_string();
        f(&name, e["args"].as_object_mut().unwrap());
    }
    std::fs::write(trace, v.to_string()).unwrap();
}

fn kernels(cfg: &GpuConfig) -> Vec<Kernel> {
    let mut p = GemmParams::new(512, 512, 256);
    p.stages = 3;
    p.consumers = 2;
    let pipelined = gemm(&p).unwrap();
    let mut q = GemmParams::new(256, 384, 128);
    q.stages = 1;
    let plain = gemm(&q).unwrap();
    let f = Fa3Params {
        seqlen_q: 256,
        seqlen_kv: 256,
        heads: 4,
        kv_heads: 4,
        ..Fa3Params::default()
    };
    let (fa, _) = fa3(&f, cfg).unwrap();
    vec![pipelined, plain, fa]
}

#[test]
fn exported_runs_import_to_the_same_cycles_and_digest() {
    let cfg = small_gpu();
    let dir = tempfile::tempdir().unwrap();
    for (i, k) in kernels(&cfg).iter().enumerate() {
        let trace = dir.path().join(format!("t{i}.json"));
        let want = export(&cfg, k, &trace);
        let (got, sum) = import_and_run(&cfg, &trace, None);
        assert_eq!(got.summary.cycles, want.summary.cycles, "{}", k.name);
        assert_eq!(got.summary.digest, want.summary.digest, "{}", k.name);
        assert_eq!(sum.ignored, 0);
        assert!(sum.translated > 0, "WGMMA groups come from their scopes");
        assert_eq!(sum.mismatched_warps, 0);
    }
}

#[test]
fn scopes_alone_translate_the_paper_kinds() {
    // Without args.op the paper's scopes are translated by the table;
    // without args.bar and args.parity the ring rule recovers them.
    let cfg = small_gpu();
    let dir = tempfile::tempdir().unwrap();
    let k = &kernels(&cfg)[0];
    let trace = dir.path().join("g.json");
    let want = export(&cfg, k, &trace);
    let paper = |n: &str| !n.starts_with("SIMFA|") || n.split('|').count() > 2;
    rewrite(&trace, |name, args| {
        if paper(name) {
            args.remove("op");
        }
    });
    let (got, sum) = import_and_run(&cfg, &trace, None);
    assert_eq!(got.summary.cycles, want.summary.cycles);
    assert!(sum.translated > sum.exact, "{sum:?}");
    rewrite(&trace, |name, args| {
        if paper(name) {
            args.remove("bar");
            args.remove("parity");
        }
    });
    let (got, _) = import_and_run(&cfg, &trace, None);
    assert_eq!(got.summary.cycles, want.summary.cycles);
}

#[test]
fn other_warps_of_a_warpgroup_are_deduplicated() {
    let cfg = small_gpu();
    let dir = tempfile::tempdir().unwrap();
    let k = &kernels(&cfg)[1];
    let trace = dir.path().join("w.json");
    let want = export(&cfg, k, &trace);
    // Every event recorded by the four warps of its WarpGroup; one warp
    // drops its last event.
    let mut v: Value = serde_json::from_str(&std::fs::read_to_string(&trace).unwrap()).unwrap();
    let evs = v["traceEvents"].as_array().unwrap().clone();
    let mut all = Vec::new();
    for e in &evs {
        for lane in 0..4 {
            let mut e = e.clone();
            let tid = e["tid"].as_str().unwrap();
            let warp: u32 = tid[5..].split(' ').next().unwrap().parse().unwrap();
            e["tid"] = Value::from(format!("warp {} (line 0)", warp + lane));
            all.push(e);
        }
    }
    all.pop();
    let n = evs.len() as u64;
    v["traceEvents"] = Value::Array(all);
    std::fs::write(&trace, v.to_string()).unwrap();
    let (got, sum) = import_and_run(&cfg, &trace, None);
    assert_eq!(got.summary.cycles, want.summary.cycles);
    assert_eq!(sum.duplicates, 3 * n - 1);
    assert_eq!(sum.mismatched_warps, 1);
}

#[test]
fn import_errors_name_the_trace_and_event() {
    let cfg = small_gpu();
    let dir = tempfile::tempdir().unwrap();
    let k = &kernels(&cfg)[1];
    let trace = dir.path().join("e.json");
    export(&cfg, k, &trace);
    let ops = dir.path().join("e.ops");
    let text = std::fs::read_to_string(&trace).unwrap();
    let cases = [
        (
            "no otherData.simfa_kernel",
            text.replace("\"otherData\"", "\"other\""),
        ),
        ("EOF while parsing", text[..text.len() / 2].to_string()),
        (
            "no tensor map `Q`",
            text.replace("desc=%A", "desc=%Q")
                .replace("\"op\":", "\"was_op\":"),
        ),
        ("outside the header", text.replacen("CTA0\"", "CTA999\"", 1)),
        ("no traceEvents", "{\"x\": 1}".to_string()),
    ];
    for (want, body) in cases {
        std::fs::write(&trace, body).unwrap();
        let e = import_proton(&trace, None, &ops)
            .expect_err(want)
            .to_string();
        assert!(e.contains(want) && e.contains("e.json"), "{want}: {e}");
    }
}
