//! Round trips of the whole trace path: simulate, export, import, simulate
//! the imported kernel.

use std::path::Path;

use serde_json::Value;
use simfa_core::{GpuConfig, Kernel};

use super::export::ProtonWriter;
use super::import::{import_proton, ImportOptions, ImportSummary};
use super::layout::Layout;
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
    let opts = ImportOptions {
        header,
        ..ImportOptions::default()
    };
    import_with(cfg, trace, &opts)
}

fn import_with(cfg: &GpuConfig, trace: &Path, opts: &ImportOptions) -> (RunOutcome, ImportSummary) {
    let ops = trace.with_extension("ops");
    let (k, sum) = import_proton(trace, opts, &ops).unwrap();
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
    // Clusters of 2 x 2 CTAs multicasting A and B: the header carries the
    // cluster, each load's `args.op` its multicast.
    let mut c = GemmParams::new(512, 512, 256);
    c.stages = 3;
    c.cluster_m = 2;
    c.cluster_n = 2;
    let clustered = gemm(&c).unwrap();
    vec![pipelined, plain, fa, clustered]
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
        ("no tensor map `Q`", {
            // A load of a tensor the header lacks, without an exact op.
            let mut v: Value = serde_json::from_str(&text).unwrap();
            for e in v["traceEvents"].as_array_mut().unwrap() {
                let name = e["name"].as_str().unwrap().replace("desc=%A", "desc=%Q");
                if name.contains("desc=%Q") {
                    e["args"].as_object_mut().unwrap().remove("op");
                }
                e["name"] = Value::from(name);
            }
            v.to_string()
        }),
        ("outside the header", text.replacen("CTA0\"", "CTA999\"", 1)),
        ("no traceEvents", "{\"x\": 1}".to_string()),
    ];
    for (want, body) in cases {
        std::fs::write(&trace, body).unwrap();
        let e = import_proton(&trace, &ImportOptions::default(), &ops)
            .expect_err(want)
            .to_string();
        assert!(e.contains(want) && e.contains("e.json"), "{want}: {e}");
    }
}

#[test]
fn a_layout_recovers_real_addresses_and_the_header() {
    // A trace as a GPU would record it: scopes only (no operands, no
    // header); the layout file gives the tensors, barriers and grid, and
    // the GEMM's affine tile rule places every box where the generator
    // put it: the same cycles.
    let cfg = small_gpu();
    let dir = tempfile::tempdir().unwrap();
    let k = &kernels(&cfg)[1];
    let trace = dir.path().join("real.json");
    let want = export(&cfg, k, &trace);
    let paper = |n: &str| !n.starts_with("SIMFA|") || n.split('|').count() > 2;
    let mut v: Value = serde_json::from_str(&std::fs::read_to_string(&trace).unwrap()).unwrap();
    v.as_object_mut().unwrap().remove("otherData");
    for e in v["traceEvents"].as_array_mut().unwrap() {
        let name = e["name"].as_str().unwrap().to_string();
        if paper(&name) {
            e.as_object_mut().unwrap().remove("args");
        }
    }
    std::fs::write(&trace, v.to_string()).unwrap();
    let m = |i: usize| &k.maps[i];
    let tensor = |i: usize, coords: &str| {
        let t = m(i);
        format!(
            "[tensors.{}]\nbase = {}\nelem = 2\ndims = [{}, {}]\nstrides = [{}]\ncoords = {coords}\n",
            t.name, t.base, t.dims[0], t.dims[1], t.strides[1]
        )
    };
    let text = format!(
        "kernel = \"{}\"\ngrid = [{}, {}, 1]\nregs = {}\nsmem = {}\n{}{}{}[barriers.full]\nlen = 1\n",
        k.name,
        k.grid[0],
        k.grid[1],
        k.roles[0].regs,
        k.smem_bytes,
        tensor(0, "[\"k\", \"pid_m\"]"),
        tensor(1, "[\"pid_n\", \"k\"]"),
        tensor(2, "[\"pid_n\", \"pid_m\"]"),
    );
    let layout = Layout::parse(&text, "layout.toml").unwrap();
    let opts = ImportOptions {
        layout: Some(layout),
        ..ImportOptions::default()
    };
    let (got, sum) = import_with(&cfg, &trace, &opts);
    assert_eq!(got.summary.cycles, want.summary.cycles);
    assert!(sum.translated > 0 && sum.exact > 0, "{sum:?}");
}

/// A TTGIR kernel: expect, TMA load, wait, WGMMA and its wait.
const TTGIR: &str = "#mma = #ttg.nvidia_mma<{versionMajor = 3, warpsPerCTA = [4, 1], instrShape = [16, 64, 16]}>
module attributes {\"ttg.num-warps\" = 4 : i32} {
  tt.func @f(%d: !tt.tensordesc<tensor<64x64xf16, #s>>) {
    ttng.barrier_expect %1, 8192, %true : !ttg.memdesc<1xi64, #b>
    ttng.async_tma_copy_global_to_local %d[%c0, %c1] %0, %1, %t : !tt.tensordesc<tensor<64x64xf16, #s>>, !ttg.memdesc<1xi64, #b> -> !ttg.memdesc<64x64xf16, #s>
    ttng.wait_barrier %1, %p : !ttg.memdesc<1xi64, #b>
    %2 = ttng.warp_group_dot %0, %0, %c : !ttg.memdesc<64x64xf16, #s> * !ttg.memdesc<64x64xf16, #s> -> tensor<64x64xf32, #mma>
    %3 = ttng.warp_group_dot_wait %2 {pendings = 0 : i32} : tensor<64x64xf32, #mma>
    tt.return
  }
}
";

#[test]
fn a_recorded_trace_imports_with_its_ttgir_and_layout() {
    let sites = crate::ttgir::sites("k.ttgir", TTGIR).unwrap();
    assert_eq!(sites.len(), 5);
    let dir = tempfile::tempdir().unwrap();
    let write = |extra: Option<&str>| {
        let mut evs = Vec::new();
        for cta in 0..4 {
            for (i, s) in sites.iter().enumerate() {
                evs.push(serde_json::json!({
                    "name": s.scope.to_string(), "ph": "X", "ts": i as f64 * 0.1, "dur": 0.05,
                    "pid": format!("f Core{cta} CTA{cta}"), "tid": "warp 0 (line 0)",
                }));
            }
        }
        if let Some(n) = extra {
            evs.push(
                serde_json::json!({"name": n, "ph": "X", "ts": 9.0, "dur": 0.1,
                "pid": "f Core0 CTA0", "tid": "warp 0 (line 0)"}),
            );
        }
        let trace = dir.path().join("rec.json");
        std::fs::write(
            &trace,
            serde_json::json!({ "traceEvents": evs }).to_string(),
        )
        .unwrap();
        trace
    };
    let layout = Layout::parse(
        "grid = [4, 1, 1]\n[tensors.d]\nbase = 0x100000\nelem = 2\ndims = [64, 256]\n\
         strides = [128]\ncoords = [\"k\", \"pid_n\"]\n[barriers.\"1\"]\nlen = 1\n",
        "l.toml",
    )
    .unwrap();
    let opts = ImportOptions {
        layout: Some(layout),
        ttgir: Some(("k.ttgir".into(), TTGIR.into())),
        ..ImportOptions::default()
    };
    let trace = write(None);
    let ops = dir.path().join("rec.ops");
    let (k, sum) = import_proton(&trace, &opts, &ops).unwrap();
    assert_eq!((k.wgs_per_cta(), k.ctas()), (1, 4));
    assert_eq!(sum.translated, 20);
    // expect + arrive, load, wait, 4 WGMMAs + commit, wait: 10 per CTA.
    assert_eq!(sum.ops, 40);
    let src = OpsFile::open(&ops).unwrap();
    let cfg = small_gpu();
    let out = simulate_from(&cfg, &k, src, &mut (), |_, _, _| {}, &Snapshots::default()).unwrap();
    assert_eq!(out.summary.stats.wgmmas, 16);
    // A scope the TTGIR has no site for is refused.
    let odd = "SIMFA|WGMMA_WAIT|pendings=1|site=77";
    let trace = write(Some(odd));
    let e = import_proton(&trace, &opts, &ops).unwrap_err().to_string();
    assert!(e.contains("not one of the sites of k.ttgir"), "{e}");
}
