//! `simfa fa3` and `simfa gen fa3`: the FlashAttention-3 forward kernel
//! from an attention shape or a Llama 3 model preset.

use clap::Args;
use simfa_std::gen::fa3::{Fa3Params, Variant};

/// A Llama 3 attention preset: query heads, KV heads, head dim.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Model {
    /// Query heads.
    pub heads: u32,
    /// Key/value heads.
    pub kv_heads: u32,
    /// Head dimension.
    pub hdim: u32,
}

/// The model presets `--model` accepts.
pub const MODELS: [(&str, Model); 3] = [
    (
        "llama3-8b",
        Model {
            heads: 32,
            kv_heads: 8,
            hdim: 128,
        },
    ),
    (
        "llama3-70b",
        Model {
            heads: 64,
            kv_heads: 8,
            hdim: 128,
        },
    ),
    (
        "llama3-405b",
        Model {
            heads: 128,
            kv_heads: 8,
            hdim: 128,
        },
    ),
];

/// The attention shape: a model preset, then explicit overrides.
#[derive(Debug, Args)]
pub struct Fa3Shape {
    /// Model preset for heads, KV heads and head dim.
    #[arg(long, default_value = "llama3-8b", value_parser = ["llama3-8b", "llama3-70b", "llama3-405b"])]
    model: String,
    /// Batch size.
    #[arg(long, default_value_t = 1)]
    batch: u32,
    /// Query heads (default: the model's).
    #[arg(long)]
    heads: Option<u32>,
    /// Key/value heads for GQA (default: the model's).
    #[arg(long)]
    kv_heads: Option<u32>,
    /// Query sequence length in tokens.
    #[arg(long, default_value_t = 4096)]
    seqlen: u32,
    /// Key/value sequence length (default: --seqlen).
    #[arg(long)]
    seqlen_kv: Option<u32>,
    /// Head dimension: 64, 96, 128, 192 or 256 (default: the model's).
    #[arg(long)]
    hdim: Option<u32>,
    /// Causal masking.
    #[arg(long)]
    causal: bool,
    /// Pipeline variant: the full kernel, or an ablation.
    #[arg(long, default_value = "full", value_parser = ["full", "no-overlap", "no-ws"])]
    variant: String,
}

impl Fa3Shape {
    /// The generator parameters.
    pub fn params(&self) -> Fa3Params {
        let model = MODELS
            .iter()
            .find(|(n, _)| *n == self.model)
            .map_or(MODELS[0].1, |m| m.1);
        let heads = self.heads.unwrap_or(model.heads);
        // A custom head count without --kv-heads keeps the model's GQA
        // group only if it divides; otherwise plain multi-head attention.
        let kv_heads = self
            .kv_heads
            .unwrap_or(Fa3Params::kv_heads_for(heads, model.kv_heads));
        Fa3Params {
            batch: self.batch,
            heads,
            kv_heads,
            seqlen_q: self.seqlen,
            seqlen_kv: self.seqlen_kv.unwrap_or(self.seqlen),
            hdim: self.hdim.unwrap_or(model.hdim),
            causal: self.causal,
            variant: Variant::from_name(&self.variant).unwrap_or_default(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct T {
        #[command(flatten)]
        s: Fa3Shape,
    }

    fn parse(args: &[&str]) -> Fa3Params {
        let mut v = vec!["t"];
        v.extend_from_slice(args);
        T::try_parse_from(v).unwrap().s.params()
    }

    #[test]
    fn defaults_are_llama3_8b_4096() {
        let p = parse(&[]);
        assert_eq!(
            (
                p.batch,
                p.heads,
                p.kv_heads,
                p.seqlen_q,
                p.seqlen_kv,
                p.hdim
            ),
            (1, 32, 8, 4096, 4096, 128)
        );
        assert!(!p.causal);
        assert_eq!(p.variant, Variant::Full);
    }

    #[test]
    fn models_and_overrides() {
        assert_eq!(parse(&["--model", "llama3-70b"]).heads, 64);
        assert_eq!(parse(&["--model", "llama3-405b"]).heads, 128);
        let p = parse(&[
            "--heads",
            "12",
            "--hdim",
            "64",
            "--seqlen",
            "100",
            "--seqlen-kv",
            "300",
            "--causal",
            "--variant",
            "no-ws",
        ]);
        assert_eq!((p.heads, p.kv_heads, p.hdim), (12, 12, 64));
        assert_eq!((p.seqlen_q, p.seqlen_kv), (100, 300));
        assert!(p.causal);
        assert_eq!(p.variant, Variant::NoWs);
        assert_eq!(parse(&["--heads", "16"]).kv_heads, 8);
        assert_eq!(parse(&["--heads", "16", "--kv-heads", "2"]).kv_heads, 2);
        let mut v = vec!["t", "--model", "gpt"];
        assert!(T::try_parse_from(v.drain(..)).is_err());
    }
}
