//! `simfa gemm` and `simfa gen gemm`: the generator's GEMM from a problem
//! shape and kernel parameters (tile, ring, consumers, persistence,
//! raster, epilogue, WGMMA width, clusters, frontend bubbles).

use std::path::PathBuf;

use clap::Args;
use simfa_core::GpuConfig;
use simfa_std::calibration::gemm_bubbles::read_bubbles;
use simfa_std::gen::{Calibration, Epilogue, GemmParams};

use crate::Failure;

/// The GEMM problem shape and kernel parameters.
#[derive(Debug, Args)]
pub struct Shape {
    /// Rows of A and C (any; TMA clips the last row block).
    #[arg(long, default_value_t = 4096)]
    pub m: u32,
    /// Columns of B and C (a multiple of 8: whole 16-byte rows for TMA;
    /// the last column block is clipped).
    #[arg(long, default_value_t = 4096)]
    pub n: u32,
    /// The reduction dimension (a multiple of 8; the last K block is
    /// clipped).
    #[arg(long, default_value_t = 4096)]
    pub k: u32,
    /// Tile rows (a multiple of 64 up to 256).
    #[arg(long, default_value_t = 128)]
    pub block_m: u32,
    /// Tile columns, the WGMMA N (a multiple of 8 up to 256).
    #[arg(long, default_value_t = 128)]
    pub block_n: u32,
    /// Tile depth per main-loop iteration (a multiple of 16 up to 256).
    #[arg(long, default_value_t = 64)]
    pub block_k: u32,
    /// Ring stages: 1 is the paper's non-pipelined loop; 2 or more add a
    /// producer WarpGroup.
    #[arg(long, default_value_t = 1)]
    pub stages: u32,
    /// Consumer WarpGroups of a pipelined kernel (1 to 3).
    #[arg(long, default_value_t = 1)]
    pub consumers: u32,
    /// One CTA per SM looping over the tiles.
    #[arg(long)]
    pub persistent: bool,
    /// Grouped rasterisation: row blocks swept together (1: row-major).
    #[arg(long, default_value_t = 1)]
    pub group_m: u32,
    /// Write C through shared memory with a TMA store (as CUTLASS and
    /// cuBLAS do). Without it the epilogue stores C straight from the
    /// accumulator registers with st.global, 16 bytes per sector request
    /// (as fast.cu's kernels do), and sets no shared memory aside for C.
    #[arg(long)]
    pub tma_store: bool,
    /// N of each WGMMA (a multiple of 8 dividing --block-n; default
    /// --block-n): a tile takes block_n / wgmma_n WGMMAs side by side.
    #[arg(long)]
    pub wgmma_n: Option<u32>,
    /// Thread block clusters of MxN CTAs (along M and N, at most 16; needs
    /// --stages 2 or more): the CTAs sharing a tile column multicast its B
    /// tile and those sharing a row its A tile, each loading a slice for
    /// all, and each consumer releases its stage in every CTA of the
    /// cluster. A persistent kernel clusters along one side.
    #[arg(long, value_name = "MxN", default_value = "1x1", value_parser = parse_cluster)]
    pub cluster: (u32, u32),
    /// Add the paper's H800 frontend bubbles (4314-cycle prologue/epilogue,
    /// 330 cycles per BK=64 iteration; section V-B3).
    #[arg(long, conflicts_with = "bubbles")]
    pub calibrated: bool,
    /// Add the frontend bubbles of a `[gemm_bubbles]` TOML file written by
    /// `simfa calibrate gemm-bubbles -o`.
    #[arg(long, value_name = "FILE.toml")]
    pub bubbles: Option<PathBuf>,
}

/// Parses `--cluster MxN`.
fn parse_cluster(s: &str) -> Result<(u32, u32), String> {
    let bad = || format!("'{s}' is not MxN with M and N from 1 to 16 (e.g. 2x1)");
    let (m, n) = s.split_once(['x', 'X']).ok_or_else(bad)?;
    let side = |v: &str| {
        v.trim()
            .parse::<u32>()
            .ok()
            .filter(|v| (1..=16).contains(v))
    };
    match (side(m), side(n)) {
        (Some(m), Some(n)) => Ok((m, n)),
        _ => Err(bad()),
    }
}

impl Shape {
    /// [`Shape::params`] with the bubbles of `--bubbles` applied.
    pub fn resolve(&self, cfg: &GpuConfig) -> Result<GemmParams, Failure> {
        let p = self.params(cfg);
        match &self.bubbles {
            Some(path) => Ok(read_bubbles(path).map_err(Failure::input)?.apply(p)),
            None => Ok(p),
        }
    }

    /// The generator parameters; persistent kernels get one CTA per SM of
    /// `cfg`.
    pub fn params(&self, cfg: &GpuConfig) -> GemmParams {
        let p = GemmParams {
            block_m: self.block_m,
            block_n: self.block_n,
            block_k: self.block_k,
            stages: self.stages,
            consumers: self.consumers,
            persistent: self.persistent,
            ctas: cfg.sms as u32,
            group_m: self.group_m,
            epilogue: if self.tma_store {
                Epilogue::Tma
            } else {
                Epilogue::Registers
            },
            wgmma_n: self.wgmma_n.unwrap_or(0),
            cluster_m: self.cluster.0,
            cluster_n: self.cluster.1,
            ..GemmParams::new(self.m, self.n, self.k)
        };
        if self.calibrated {
            p.calibrated(Calibration::H800)
        } else {
            p
        }
    }
}
