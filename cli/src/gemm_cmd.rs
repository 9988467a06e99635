//! `simfa gemm` and `simfa gen gemm`: the generator's GEMM from a problem
//! shape and kernel parameters (tile, ring, consumers, persistence,
//! raster, epilogue, WGMMA width, clusters, frontend bubbles).

use std::path::PathBuf;

use clap::Args;
use simfa_core::GpuConfig;
use simfa_std::calibration::gemm_bubbles::read_bubbles;
use simfa_std::gen::gemm_space::Space;
use simfa_std::gen::gemm_tune;
use simfa_std::gen::{Calibration, GemmKernel, GemmParams, GemmSpec};

use crate::progress::Progress;

use crate::Failure;

/// The GEMM problem shape and kernel parameters. A parameter not given
/// takes the kernel family's default (`--kernel`).
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
    /// The kernel family the parameters not given come from. ws: the
    /// warp-specialised persistent Hopper GEMM (producer and 2 consumer
    /// WarpGroups, 128x256x64 tiles, a ring of up to 4 stages, one CTA per
    /// SM, tiles grouped by 8 row blocks). paper: the Sim-FA paper's V-B1
    /// kernel (one WarpGroup, 128x128x64 tiles, no ring, one CTA per tile,
    /// row-major).
    #[arg(long, value_name = "KIND", default_value = "ws", value_parser = parse_kernel)]
    pub kernel: GemmKernel,
    /// Tile rows (a multiple of 64 up to 256; default 128).
    #[arg(long)]
    pub block_m: Option<u32>,
    /// Tile columns, the WGMMA N (a multiple of 8 up to 256; default 256
    /// for ws, 128 for ws with --block-m 256 and for paper).
    #[arg(long)]
    pub block_n: Option<u32>,
    /// Tile depth per main-loop iteration (a multiple of 16 up to 256;
    /// default 64).
    #[arg(long)]
    pub block_k: Option<u32>,
    /// Ring stages: 1 is the paper's non-pipelined loop; 2 or more add a
    /// producer WarpGroup (default: ws as many as fit up to 4, paper 1).
    #[arg(long)]
    pub stages: Option<u32>,
    /// Consumer WarpGroups of a pipelined kernel (1 to 3; default: ws 2,
    /// or 1 for 64-row tiles; paper 1).
    #[arg(long)]
    pub consumers: Option<u32>,
    /// One CTA per SM looping over the tiles (default: ws true, paper
    /// false); `--persistent` alone is true.
    #[arg(long, value_name = "BOOL", num_args = 0..=1, default_missing_value = "true")]
    pub persistent: Option<bool>,
    /// Grouped rasterisation: row blocks swept together, the last group
    /// taking those left (1: row-major; default: ws 8, paper 1).
    #[arg(long)]
    pub group_m: Option<u32>,
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
    #[arg(long, value_name = "MxN", value_parser = parse_cluster)]
    pub cluster: Option<(u32, u32)>,
    /// Split-K: K slices per tile (1 to 16, dividing K / block_k). The
    /// slices of a tile run as a cluster; all but the first write FP32
    /// partial sums to a workspace, which the first loads and adds before
    /// it stores C. Split-K runs one CTA per tile and slice, so it makes
    /// the ws kernel non-persistent.
    #[arg(long)]
    pub split_k: Option<u32>,
    /// Stream-K: the persistent CTAs (one per SM) share out all the tiles'
    /// K iterations evenly instead of the tiles; a CTA that ends inside a
    /// tile writes FP32 partial sums to a workspace, and the CTA that
    /// computed the tile's first iterations waits on its lock, adds them
    /// and stores C (docs/workloads.md). Needs the ring of the ws kernel
    /// and no cluster or split-K.
    #[arg(long, value_name = "BOOL", num_args = 0..=1, default_missing_value = "true")]
    pub stream_k: Option<bool>,
    /// Add the paper's H800 frontend bubbles (4314-cycle prologue/epilogue,
    /// 330 cycles per BK=64 iteration; section V-B3).
    #[arg(long, conflicts_with = "bubbles")]
    pub calibrated: bool,
    /// Add the frontend bubbles of a `[gemm_bubbles]` TOML file written by
    /// `simfa calibrate gemm-bubbles -o`.
    #[arg(long, value_name = "FILE.toml")]
    pub bubbles: Option<PathBuf>,
}

/// Parses `--kernel KIND`.
fn parse_kernel(s: &str) -> Result<GemmKernel, String> {
    GemmKernel::from_name(s).ok_or_else(|| format!("'{s}' is not a kernel family: ws or paper"))
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

/// `simfa gemm --tune`: search a family of kernels for the shape.
#[derive(Debug, Args)]
pub struct TuneArgs {
    /// Simulate a family of kernels for the shape (tiles, stages,
    /// consumers, persistence, clusters, split-K; kernel flags given by
    /// hand fix theirs, --tma-store the epilogue) and report the fastest:
    /// its report,
    /// then its flags and the next fastest. Candidates run in order of
    /// their analytic bound, on every core, and stop once they pass the
    /// best found so far; the result does not depend on --jobs.
    #[arg(long)]
    pub tune: bool,
    /// The family --tune searches, as a TOML file of lists (tiles,
    /// block_k, stages, consumers, persistent, group_m, cluster, split_k,
    /// tma_store) that replace the default family's, and small_tile_waves
    /// (docs/workloads.md).
    #[arg(long, value_name = "FILE.toml", requires = "tune")]
    pub space: Option<PathBuf>,
    /// Threads for --tune (0: one per core).
    #[arg(short = 'j', long, default_value_t = 0, requires = "tune")]
    pub jobs: usize,
}

impl Shape {
    /// [`Shape::params`] with the bubbles of `--bubbles` applied.
    pub fn resolve(&self, cfg: &GpuConfig) -> Result<GemmParams, Failure> {
        Ok(self.bubbles()?(self.params(cfg)))
    }

    /// What adds the bubbles of `--calibrated` or `--bubbles` to a kernel's
    /// parameters (nothing without them).
    pub fn bubbles(&self) -> Result<impl Fn(GemmParams) -> GemmParams + Sync, Failure> {
        let c = match (&self.bubbles, self.calibrated) {
            (Some(path), _) => Some(read_bubbles(path).map_err(Failure::input)?),
            (None, true) => Some(Calibration::H800),
            (None, false) => None,
        };
        Ok(move |p: GemmParams| match c {
            Some(c) => c.apply(p),
            None => p,
        })
    }

    /// What the flags ask for.
    pub fn spec(&self) -> GemmSpec {
        GemmSpec {
            m: self.m,
            n: self.n,
            k: self.k,
            kernel: Some(self.kernel),
            block_m: self.block_m,
            block_n: self.block_n,
            block_k: self.block_k,
            stages: self.stages,
            consumers: self.consumers,
            group_m: self.group_m,
            persistent: self.persistent,
            tma_store: Some(self.tma_store),
            wgmma_n: self.wgmma_n,
            cluster_m: self.cluster.map(|c| c.0),
            cluster_n: self.cluster.map(|c| c.1),
            split_k: self.split_k,
            stream_k: self.stream_k,
            tune: None,
        }
    }

    /// The generator parameters without bubbles; persistent kernels get
    /// one CTA per SM of `cfg`.
    pub fn params(&self, cfg: &GpuConfig) -> GemmParams {
        self.spec().params(cfg.sms as u32)
    }
}

/// `simfa gemm --tune`: tunes the shape over the family and prints the
/// best candidate's report and the tuning section (or, with `--json`, the
/// report with a `tune` array of every candidate).
pub fn run_tune(
    cfg: &GpuConfig,
    shape: &Shape,
    tune: &TuneArgs,
    out: &crate::Outputs,
) -> Result<(), Failure> {
    if out.save_at.is_some() || out.resume.is_some() {
        return Err(Failure::Input(
            "--save-at and --resume snapshot one run: run `simfa gemm` with the flags --tune reports as best".into(),
        ));
    }
    let mut space = match &tune.space {
        Some(path) => Space::load(path).map_err(Failure::input)?,
        None => Space::default(),
    };
    narrow(&mut space, shape);
    let bubbles = shape.bubbles()?;
    let mut bar = Progress::tuning(!out.json);
    let tuned = gemm_tune::tune(cfg, &shape.spec(), &space, bubbles, tune.jobs, |d, t| {
        bar.show(d as u64, t as u64, "")
    });
    bar.finish();
    // One-run outputs (timelines, traces, the checker) record a run of
    // the best; the search's runs are not kept.
    let again = out.gantt.is_some()
        || out.svg.is_some()
        || out.proton.is_some()
        || out.check
        || out.trace.dram_trace.is_some();
    if again {
        let (k, source, _) = tuned.best_run().map_err(Failure::Sim)?;
        let appendix = crate::Appendix {
            text: tuned.to_text(cfg, TOP),
            key: "tune",
            json: tuned.to_json(),
        };
        let flops = shape.spec().params(cfg.sms as u32).flops();
        return crate::run_and_report(
            cfg,
            &k,
            source,
            out,
            &mut (),
            Some(&|_| flops),
            Some(appendix),
        );
    }
    let text = if out.json {
        let j = tuned.report_json(cfg).map_err(Failure::Sim)?;
        serde_json::to_string_pretty(&j).map_err(Failure::input)? + "\n"
    } else {
        let (_, report) = tuned.best_report(cfg).map_err(Failure::Sim)?;
        report.to_text() + &tuned.to_text(cfg, TOP)
    };
    crate::out(&text)
}

/// The family narrowed to the kernel parameters given by hand: each fixes
/// its list (a tile side keeps the tiles with that side, or is the only
/// tile with the other side's default), `--tma-store` the epilogue.
fn narrow(space: &mut Space, shape: &Shape) {
    if shape.block_m.is_some() || shape.block_n.is_some() {
        let fits = |&(m, n): &(u32, u32)| {
            shape.block_m.map_or(true, |b| b == m) && shape.block_n.map_or(true, |b| b == n)
        };
        space.tiles.retain(fits);
        if space.tiles.is_empty() {
            space.tiles = vec![(shape.block_m.unwrap_or(128), shape.block_n.unwrap_or(256))];
        }
        // Tiles given by hand are tried whatever the grid.
        space.small_tile_waves = 0;
    }
    let one = |v: Option<u32>, list: &mut Vec<u32>| {
        if let Some(v) = v {
            *list = vec![v];
        }
    };
    one(shape.block_k, &mut space.block_k);
    one(shape.stages, &mut space.stages);
    one(shape.consumers, &mut space.consumers);
    one(shape.group_m, &mut space.group_m);
    one(shape.split_k, &mut space.split_k);
    if let Some(s) = shape.stream_k {
        space.stream_k = vec![s];
    }
    if let Some(p) = shape.persistent {
        space.persistent = vec![p];
    }
    if let Some(c) = shape.cluster {
        space.cluster = vec![c];
    }
    if shape.tma_store {
        space.tma_store = vec![true];
    }
}

/// Candidates the text report of `--tune` lists.
const TOP: usize = 5;
