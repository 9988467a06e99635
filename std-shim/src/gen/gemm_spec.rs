//! The GEMM a user asks for: a problem shape, a kernel family and any
//! parameters set by hand, resolved to the generator's [`GemmParams`].
//! `simfa gemm`, sweep plans and Python all resolve through
//! [`GemmSpec::params`], so a default is the same everywhere.
//!
//! Two kernel families:
//!
//! - [`GemmKernel::Ws`] (the default): the warp-specialised persistent
//!   Hopper GEMM that CUTLASS, cuBLAS and Triton's persistent tutorials run.
//!   A producer WarpGroup fills a ring of up to 4 stages (as many as fit in
//!   shared memory) and two consumer WarpGroups (one when the tile has 64
//!   rows) each compute half of a 128 x 256 x 64 tile; one CTA per SM walks
//!   the tiles in groups of 8 row blocks, the last group partial.
//! - [`GemmKernel::Paper`]: the single-WarpGroup 128 x 128 x 64 kernel of
//!   the paper's section V-B1, one CTA per tile in row-major order (the
//!   frontend bubbles of `--calibrated` were fitted on it).
//!
//! Either way C is stored from registers unless `tma_store` is set.

use serde::Deserialize;

use super::gemm_params::{Epilogue, GemmParams, MAX_SMEM_PER_CTA};

/// Most ring stages the warp-specialised family takes by default.
pub const WS_STAGES: u32 = 4;
/// Row blocks per group of the warp-specialised family's raster.
pub const WS_GROUP_M: u32 = 8;

/// A family of GEMM kernels: where the parameters not set by hand come
/// from.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum GemmKernel {
    /// The warp-specialised persistent kernel (see the module docs).
    #[default]
    Ws,
    /// The paper's V-B1 kernel.
    Paper,
}

impl GemmKernel {
    /// The family named `name` (`ws` or `paper`).
    pub fn from_name(name: &str) -> Option<GemmKernel> {
        match name {
            "ws" => Some(GemmKernel::Ws),
            "paper" => Some(GemmKernel::Paper),
            _ => None,
        }
    }

    /// The family's name.
    pub fn name(self) -> &'static str {
        match self {
            GemmKernel::Ws => "ws",
            GemmKernel::Paper => "paper",
        }
    }
}

/// A GEMM as a user asks for it: the shape, the family and the parameters
/// set by hand (`None`: the family's default).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GemmSpec {
    /// Rows of A and C.
    pub m: u32,
    /// Columns of B and C.
    pub n: u32,
    /// The reduction dimension.
    pub k: u32,
    /// The kernel family (default [`GemmKernel::Ws`]).
    pub kernel: Option<GemmKernel>,
    /// Tile rows.
    pub block_m: Option<u32>,
    /// Tile columns.
    pub block_n: Option<u32>,
    /// Tile depth per main-loop iteration.
    pub block_k: Option<u32>,
    /// Ring stages.
    pub stages: Option<u32>,
    /// Consumer WarpGroups.
    pub consumers: Option<u32>,
    /// Row blocks per group of the raster.
    pub group_m: Option<u32>,
    /// One CTA per SM looping over the tiles.
    pub persistent: Option<bool>,
    /// C through shared memory and a TMA store (default: from registers).
    pub tma_store: Option<bool>,
    /// N of each WGMMA.
    pub wgmma_n: Option<u32>,
    /// CTAs per cluster along M.
    pub cluster_m: Option<u32>,
    /// CTAs per cluster along N.
    pub cluster_n: Option<u32>,
    /// K slices (split-K; default 1). More than 1 makes the kernel
    /// non-persistent unless `persistent` is set by hand.
    pub split_k: Option<u32>,
    /// Stream-K (default false): the persistent CTAs share out the tiles'
    /// K iterations ([`GemmParams::stream_k`]).
    pub stream_k: Option<bool>,
    /// Ask for the fastest kernel of the default tuning family for the
    /// shape instead ([`super::gemm_tune::tune`]; the other fields but the
    /// epilogue are then the family's). [`GemmSpec::params`] ignores it.
    pub tune: Option<bool>,
}

impl GemmSpec {
    /// An `m x n x k` GEMM of the default family, nothing set by hand.
    pub fn new(m: u32, n: u32, k: u32) -> GemmSpec {
        GemmSpec {
            m,
            n,
            k,
            ..GemmSpec::default()
        }
    }

    /// The generator's parameters: each one set by hand, else the
    /// family's default; a persistent kernel gets `sms` CTAs. Not yet
    /// validated ([`GemmParams::validate`] names what is wrong).
    pub fn params(&self, sms: u32) -> GemmParams {
        let paper = GemmParams::new(self.m, self.n, self.k);
        let p = GemmParams {
            block_m: self.block_m.unwrap_or(paper.block_m),
            block_n: self.block_n.unwrap_or(paper.block_n),
            block_k: self.block_k.unwrap_or(paper.block_k),
            ctas: sms,
            epilogue: if self.tma_store.unwrap_or(false) {
                Epilogue::Tma
            } else {
                Epilogue::Registers
            },
            wgmma_n: self.wgmma_n.unwrap_or(paper.wgmma_n),
            cluster_m: self.cluster_m.unwrap_or(1),
            cluster_n: self.cluster_n.unwrap_or(1),
            ..paper
        };
        let p = match self.kernel.unwrap_or_default() {
            GemmKernel::Paper => p,
            GemmKernel::Ws => {
                // 128 x 256 tiles; 256 x 128 when the rows are set to 256
                // (a consumer's 128 x 256 accumulator would not fit its
                // registers).
                let p = GemmParams {
                    block_n: self
                        .block_n
                        .unwrap_or(if p.block_m > 128 { 128 } else { 256 }),
                    consumers: if p.block_m % 128 == 0 { 2 } else { 1 },
                    persistent: true,
                    group_m: WS_GROUP_M,
                    ..p
                };
                // As many stages as fit, up to WS_STAGES (at least 2).
                let fits =
                    |s: u32| GemmParams { stages: s, ..p }.smem_bytes() <= MAX_SMEM_PER_CTA as u64;
                let stages = (2..=WS_STAGES).rev().find(|&s| fits(s)).unwrap_or(2);
                GemmParams { stages, ..p }
            }
        };
        let split_k = self.split_k.unwrap_or(1);
        GemmParams {
            stages: self.stages.unwrap_or(p.stages),
            consumers: self.consumers.unwrap_or(p.consumers),
            group_m: self.group_m.unwrap_or(p.group_m),
            persistent: self.persistent.unwrap_or(p.persistent && split_k == 1),
            split_k,
            stream_k: self.stream_k.unwrap_or(false),
            ..p
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_is_the_warp_specialised_persistent_kernel() {
        let p = GemmSpec::new(4096, 4096, 4096).params(132);
        assert_eq!(
            (p.block_m, p.block_n, p.block_k, p.stages, p.consumers),
            (128, 256, 64, 4, 2)
        );
        assert!(p.persistent);
        assert_eq!(
            (p.group_m, p.ctas, p.epilogue),
            (8, 132, Epilogue::Registers)
        );
        p.validate().unwrap();
        // A TMA store's staging buffer leaves room for 3 stages.
        let t = GemmSpec {
            tma_store: Some(true),
            ..GemmSpec::new(4096, 4096, 4096)
        }
        .params(132);
        assert_eq!(t.stages, 3);
        t.validate().unwrap();
        // A 64-row tile has one consumer; set by hand wins.
        let s = GemmSpec {
            block_m: Some(64),
            stages: Some(2),
            ..GemmSpec::new(4096, 4096, 4096)
        }
        .params(132);
        assert_eq!((s.consumers, s.stages), (1, 2));
        // 256 rows take 128 columns by default, and fit.
        let tall = GemmSpec {
            block_m: Some(256),
            ..GemmSpec::new(4096, 4096, 4096)
        }
        .params(132);
        assert_eq!((tall.block_n, tall.consumers), (128, 2));
        tall.validate().unwrap();
    }

    #[test]
    fn the_paper_kernel_stays_by_name() {
        let spec = GemmSpec {
            kernel: Some(GemmKernel::Paper),
            ..GemmSpec::new(4096, 4096, 4096)
        };
        let want = GemmParams {
            epilogue: Epilogue::Registers,
            ..GemmParams::new(4096, 4096, 4096)
        };
        assert_eq!(spec.params(132), GemmParams { ctas: 132, ..want });
        assert_eq!(GemmKernel::from_name("paper"), Some(GemmKernel::Paper));
        assert_eq!(GemmKernel::from_name("cutlass"), None);
    }
}
