//! The workloads a sweep point runs: a generated GEMM or FA3 with the
//! shape flags of `simfa gemm` / `simfa fa3`, or a kernel file.
//!
//! In a plan a workload is a table tagged by `kind`:
//!
//! ```toml
//! { kind = "gemm", m = 1024, n = 1024, k = 1024, stages = 3, persistent = true }
//! { kind = "fa3", batch = 1, heads = 32, kv_heads = 8, seqlen = 4096, hdim = 128, causal = true }
//! { kind = "kernel", file = "kernels/ring.sasm" }
//! ```
//!
//! GEMM fields: `m n k` (required), `kernel` (`"ws"`, the default, or
//! `"paper"`), `block_m block_n block_k stages consumers group_m persistent
//! tma_store wgmma_n cluster_m cluster_n split_k stream_k` (the family's defaults
//! otherwise, as in `simfa gemm`: [`GemmSpec`]; a persistent kernel gets
//! one CTA per SM; C is stored from registers unless `tma_store = true`);
//! `tune = true` runs the fastest kernel of `simfa gemm --tune`'s default
//! family for the shape instead (tuned on one thread per point). FA3 fields: `batch heads
//! kv_heads seqlen seqlen_kv hdim causal variant`, defaults Llama 3 8B
//! (32 heads, 8 KV heads, head dim 128), 4096 tokens, `"full"`; as in
//! `simfa fa3`, a head count that 8 does not divide without `kv_heads`
//! gets as many KV heads as heads.

use std::path::{Path, PathBuf};

use serde::Deserialize;
use simfa_core::{GpuConfig, Kernel};

use crate::gen::fa3::{fa3, Fa3Params, Variant};
use crate::gen::gemm_space::Space;
use crate::gen::gemm_tune::tune;
use crate::gen::{gemm, gemm_source, GemmSource, GemmSpec};

/// A point's workload.
#[derive(Clone, Debug, PartialEq)]
pub enum Workload {
    /// A generated GEMM (persistent CTAs are set from the point's SMs).
    Gemm(GemmSpec),
    /// The generated FA3 forward kernel.
    Fa3(Fa3Params),
    /// A kernel file (either encoding).
    Kernel(PathBuf),
}

#[derive(Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase", deny_unknown_fields)]
enum Spec {
    Gemm(GemmSpec),
    Fa3 {
        batch: Option<u32>,
        heads: Option<u32>,
        kv_heads: Option<u32>,
        seqlen: Option<u32>,
        seqlen_kv: Option<u32>,
        hdim: Option<u32>,
        causal: Option<bool>,
        variant: Option<String>,
    },
    Kernel {
        file: String,
    },
}

impl Workload {
    /// The workload a plan's table describes; relative kernel files are
    /// taken from `dir`. The error says what is wrong with the table.
    pub fn from_value(v: &toml::Value, dir: &Path) -> Result<Workload, String> {
        let spec: Spec = v
            .clone()
            .try_into()
            .map_err(|e: toml::de::Error| e.message().trim().replace('\n', "; "))?;
        Ok(match spec {
            Spec::Gemm(spec) => Workload::Gemm(spec),
            Spec::Fa3 {
                batch,
                heads,
                kv_heads,
                seqlen,
                seqlen_kv,
                hdim,
                causal,
                variant,
            } => {
                let d = Fa3Params::default();
                let variant = match variant {
                    None => d.variant,
                    Some(name) => Variant::from_name(&name).ok_or_else(|| {
                        format!("variant `{name}`: expected full, no-overlap or no-ws")
                    })?,
                };
                let seqlen_q = seqlen.unwrap_or(d.seqlen_q);
                let heads = heads.unwrap_or(d.heads);
                Workload::Fa3(Fa3Params {
                    batch: batch.unwrap_or(d.batch),
                    heads,
                    kv_heads: kv_heads.unwrap_or(Fa3Params::kv_heads_for(heads, d.kv_heads)),
                    seqlen_q,
                    seqlen_kv: seqlen_kv.unwrap_or(seqlen_q),
                    hdim: hdim.unwrap_or(d.hdim),
                    causal: causal.unwrap_or(d.causal),
                    variant,
                })
            }
            Spec::Kernel { file } => Workload::Kernel(dir.join(file)),
        })
    }

    /// Builds the kernel for `cfg` and the source of its stream roles
    /// (stream-K's; none for the others), with the workload's own FLOP
    /// count where it has one (FA3's useful FLOPs, a GEMM's `2 M N K`).
    pub fn kernel(&self, cfg: &GpuConfig) -> Result<(Kernel, GemmSource, Option<u64>), String> {
        match self {
            Workload::Gemm(spec) if spec.tune == Some(true) => {
                // One thread: the sweep runs its points in parallel.
                let t = tune(cfg, spec, &Space::default(), |p| p, 1, |_, _| {});
                let flops = spec.params(cfg.sms as u32).flops();
                t.best_run().map(|(k, s, _)| (k, s, Some(flops)))
            }
            Workload::Gemm(spec) => {
                let p = spec.params(cfg.sms as u32);
                gemm(&p)
                    .map(|k| (k, gemm_source(&p), Some(p.flops())))
                    .map_err(|e| e.to_string())
            }
            Workload::Fa3(p) => fa3(p, cfg)
                .map(|(k, _)| (k, GemmSource::NONE, Some(p.flops())))
                .map_err(|e| e.to_string()),
            Workload::Kernel(path) => crate::load::load_kernel(path)
                .map(|k| (k, GemmSource::NONE, None))
                .map_err(|e| e.to_string()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fa3_of(table: &str) -> Fa3Params {
        let v: toml::Value = toml::from_str(&format!("w = {table}")).unwrap();
        match Workload::from_value(&v["w"], Path::new(".")).unwrap() {
            Workload::Fa3(p) => p,
            w => panic!("not an FA3: {w:?}"),
        }
    }

    fn gemm_of(table: &str) -> Result<Workload, String> {
        let v: toml::Value = toml::from_str(&format!("w = {table}")).unwrap();
        Workload::from_value(&v["w"], Path::new("."))
    }

    /// `tune = true` builds the best kernel of the default family for the
    /// shape; a kernel family is named or refused by name.
    #[test]
    fn gemm_workloads_tune_and_name_their_family() {
        let cfg = GpuConfig::h100();
        let w = gemm_of(r#"{ kind = "gemm", m = 128, n = 256, k = 512, tune = true }"#).unwrap();
        let (k, _, _) = w.kernel(&cfg).unwrap();
        let spec = GemmSpec::new(128, 256, 512);
        let t = tune(&cfg, &spec, &Space::default(), |p| p, 1, |_, _| {});
        assert_eq!(k, t.best_run().unwrap().0);
        let paper = gemm_of(r#"{ kind = "gemm", m = 512, n = 512, k = 512, kernel = "paper" }"#)
            .unwrap()
            .kernel(&cfg)
            .unwrap()
            .0;
        assert_eq!(paper.ctas(), 16, "one CTA per 128 x 128 tile");
        let e =
            gemm_of(r#"{ kind = "gemm", m = 1, n = 8, k = 8, kernel = "cutlass" }"#).unwrap_err();
        assert!(e.contains("cutlass"), "{e}");
    }

    /// KV heads default as in `simfa fa3`: the model's 8 when they divide
    /// the heads, else one per head; a given count is kept.
    #[test]
    fn fa3_kv_heads_default_like_the_fa3_command() {
        assert_eq!(fa3_of(r#"{ kind = "fa3" }"#).kv_heads, 8);
        assert_eq!(fa3_of(r#"{ kind = "fa3", heads = 64 }"#).kv_heads, 8);
        assert_eq!(fa3_of(r#"{ kind = "fa3", heads = 12 }"#).kv_heads, 12);
        assert_eq!(fa3_of(r#"{ kind = "fa3", heads = 4 }"#).kv_heads, 4);
        let p = fa3_of(r#"{ kind = "fa3", heads = 12, kv_heads = 4 }"#);
        assert_eq!((p.heads, p.kv_heads), (12, 4));
    }
}
