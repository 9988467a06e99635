//! `simfa gemm --tune`: the fastest kernel of a family ([`Space`]) for one
//! GEMM shape.
//!
//! Each choice of the space that it tries for the shape
//! ([`Space::tries`]), applied to the user's [`GemmSpec`] of the
//! warp-specialised family, is a candidate. Candidates that the generator
//! refuses (registers, shared memory, a cluster that does not divide the
//! tiles) or that do not fit an SM are listed as invalid. The others are
//! ordered by their analytic lower bound
//! ([`simfa_core::analytic::Estimate::lower_bound_cycles`]), ties in space
//! order, and simulated in batches of [`BATCH`]:
//!
//! - a candidate whose bound is at least the best cycles found so far is
//!   cut without a run (its simulation could only be slower);
//! - the others run on the thread pool, each stopped as soon as its
//!   simulated cycle passes that best ([`crate::run::simulate_within`]);
//! - the best is updated after the batch: fewest cycles, ties to the
//!   earlier candidate in bound order.
//!
//! The best only changes between batches and a batch's limit is fixed
//! before it starts, so every verdict and the best are the same whatever
//! the number of threads.

use rayon::prelude::*;
use simfa_core::analytic::estimate;
use simfa_core::{GpuConfig, Kernel};

use super::gemm_space::{Choice, Space};
use super::gemm_spec::{GemmKernel, GemmSpec};
use super::{gemm, gemm_source, GemmParams, GemmSource};
use crate::run::{simulate_within, RunOutcome};

/// Candidates simulated between two updates of the best.
pub const BATCH: usize = 4;

/// Instructions the analytic walk of one candidate may take; a larger
/// kernel gets no bound and is always simulated.
pub const BOUND_STEPS: u64 = 1 << 27;

/// What became of a candidate.
#[derive(Clone, Debug)]
pub enum Verdict {
    /// Simulated to the end.
    Simulated(Box<RunOutcome>),
    /// Not run: its analytic bound is at least the best cycles then.
    Bound {
        /// The best cycles it was compared with.
        best: u64,
    },
    /// Stopped once its simulated cycle passed the best then.
    Passed {
        /// The best cycles it passed.
        best: u64,
    },
    /// The generator refused it, or it does not fit an SM.
    Invalid(String),
    /// Its simulation failed.
    Failed(String),
}

impl Verdict {
    /// The verdict's place in [`Tuned::counts`]: simulated, cut by the
    /// bound, passed the best, invalid, failed.
    pub fn index(&self) -> usize {
        match self {
            Verdict::Simulated(_) => 0,
            Verdict::Bound { .. } => 1,
            Verdict::Passed { .. } => 2,
            Verdict::Invalid(_) => 3,
            Verdict::Failed(_) => 4,
        }
    }
}

/// One candidate of a tuning run.
#[derive(Clone, Debug)]
pub struct Candidate {
    /// The choice of the space it was made from.
    pub choice: Choice,
    /// Its generator parameters.
    pub params: GemmParams,
    /// Its analytic lower bound in cycles (`None`: invalid or no bound).
    pub bound: Option<u64>,
    /// What became of it.
    pub verdict: Verdict,
}

impl Candidate {
    /// Cycles of a candidate simulated to the end.
    pub fn cycles(&self) -> Option<u64> {
        match &self.verdict {
            Verdict::Simulated(o) => Some(o.summary.cycles),
            _ => None,
        }
    }
}

/// The result of a tuning run.
#[derive(Clone, Debug)]
pub struct Tuned {
    /// Every candidate, in space order.
    pub candidates: Vec<Candidate>,
}

impl Tuned {
    /// The fastest candidate (ties to the earlier in space order; `None`
    /// when none ran to the end).
    pub fn best(&self) -> Option<usize> {
        self.ranking().first().copied()
    }

    /// Candidates simulated to the end, fastest first (ties in space
    /// order).
    pub fn ranking(&self) -> Vec<usize> {
        let mut r: Vec<usize> = (0..self.candidates.len())
            .filter(|&i| self.candidates[i].cycles().is_some())
            .collect();
        r.sort_by_key(|&i| (self.candidates[i].cycles(), i));
        r
    }

    /// How many candidates got each verdict: simulated, cut by the bound,
    /// passed the best while running, invalid, failed.
    pub fn counts(&self) -> [usize; 5] {
        let mut c = [0; 5];
        for cand in &self.candidates {
            c[cand.verdict.index()] += 1;
        }
        c
    }
}

/// `base` (its shape and epilogue bubbles) with `c`'s parameters, in the
/// warp-specialised family.
pub fn spec_of(base: &GemmSpec, c: &Choice) -> GemmSpec {
    let opt = |v: u32| (v != 0).then_some(v);
    GemmSpec {
        kernel: Some(GemmKernel::Ws),
        block_m: Some(c.tile.0),
        block_n: Some(c.tile.1),
        block_k: Some(c.block_k),
        stages: opt(c.stages),
        consumers: opt(c.consumers),
        persistent: Some(c.persistent),
        group_m: Some(c.group_m),
        cluster_m: Some(c.cluster.0),
        cluster_n: Some(c.cluster.1),
        split_k: Some(c.split_k),
        stream_k: Some(c.stream_k),
        tma_store: Some(c.tma_store),
        wgmma_n: None,
        tune: None,
        ..*base
    }
}

/// The kernel of a candidate and its bound, or why it is invalid.
fn build(cfg: &GpuConfig, p: &GemmParams) -> Result<(Kernel, Option<u64>), String> {
    let k = gemm(p).map_err(|e| e.to_string())?;
    k.check_fits(cfg).map_err(|e| e.to_string())?;
    if p.stream_k {
        return Ok((k, stream_k_bound(cfg, p)));
    }
    let e = estimate(cfg, &k, BOUND_STEPS);
    let bound = e
        .lower_bound_cycles(cfg)
        .map(|b| b.max(e.port_bound_cycles(cfg)));
    Ok((k, bound))
}

/// A lower bound on a stream-K kernel's cycles, whose streamed roles the
/// analytic walk cannot see: the persistent kernel of the same tiles does
/// the same WGMMAs and reads the same tensors, so its estimate gives the
/// tensor cycles per K iteration and the compulsory HBM time; the CTA with
/// the most iterations runs at least that many on its SM's tensor pipe.
fn stream_k_bound(cfg: &GpuConfig, p: &GemmParams) -> Option<u64> {
    let dp = GemmParams {
        stream_k: false,
        ..*p
    };
    let e = estimate(cfg, &gemm(&dp).ok()?, BOUND_STEPS);
    if !e.complete {
        return None;
    }
    let iters = p.tiles() * p.k_iters() as u64;
    let per_iter = e.tensor_cycles / iters.max(1);
    let busiest = (0..p.grid_ctas() as u32)
        .map(|c| {
            super::gemm::stream_k::segments(p, c)
                .iter()
                .map(|s| s.k_len as u64)
                .sum::<u64>()
        })
        .max()?;
    let even = e.tensor_cycles.div_ceil(cfg.sms.max(1) as u64);
    Some(even.max(per_iter * busiest).max(e.memory_bound_cycles(cfg)))
}

/// Tunes `base` over `space` on `cfg` with `jobs` threads (0: one per
/// core); `bubbles` adds frontend bubbles to every candidate. `progress`
/// is called with (candidates decided, candidates) after each batch.
///
/// # Panics
///
/// If the thread pool cannot be built.
pub fn tune(
    cfg: &GpuConfig,
    base: &GemmSpec,
    space: &Space,
    bubbles: impl Fn(GemmParams) -> GemmParams + Sync,
    jobs: usize,
    mut progress: impl FnMut(usize, usize),
) -> Tuned {
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(jobs)
        .stack_size(crate::run::RUN_STACK_BYTES)
        .build()
        .expect("a thread pool");
    let choices: Vec<Choice> = space
        .choices()
        .into_iter()
        .filter(|c| space.tries(c, base.m, base.n, cfg.sms as u32))
        .collect();
    let sms = cfg.sms as u32;
    type Built = (Choice, GemmParams, Result<(Kernel, Option<u64>), String>);
    let built: Vec<Built> = pool.install(|| {
        choices
            .par_iter()
            .map(|c| {
                let p = bubbles(spec_of(base, c).params(sms));
                (*c, p, build(cfg, &p))
            })
            .collect()
    });
    let mut candidates: Vec<Candidate> = built
        .iter()
        .map(|(choice, params, b)| Candidate {
            choice: *choice,
            params: *params,
            bound: b.as_ref().ok().and_then(|(_, bound)| *bound),
            // Every valid candidate gets its verdict in its batch.
            verdict: match b {
                Err(e) => Verdict::Invalid(e.clone()),
                Ok(_) => Verdict::Failed("not run".into()),
            },
        })
        .collect();
    // Valid candidates with their kernels and bounds, by bound (no bound:
    // last), then space order.
    let mut order: Vec<(usize, &Kernel, Option<u64>)> = built
        .iter()
        .enumerate()
        .filter_map(|(i, b)| b.2.as_ref().ok().map(|(k, bound)| (i, k, *bound)))
        .collect();
    order.sort_by_key(|&(i, _, bound)| (bound.unwrap_or(u64::MAX), i));
    let total = order.len();
    let mut best: Option<(u64, usize)> = None;
    let mut decided = 0;
    for batch in order.chunks(BATCH) {
        let limit = best.map_or(u64::MAX, |(c, _)| c);
        let runs: Vec<(usize, Verdict)> = pool.install(|| {
            batch
                .par_iter()
                .map(|&(i, k, bound)| {
                    let verdict = match bound {
                        Some(b) if b >= limit => Verdict::Bound { best: limit },
                        _ => match simulate_within(cfg, k, gemm_source(&built[i].1), limit) {
                            Ok(Some(o)) => Verdict::Simulated(Box::new(o)),
                            Ok(None) => Verdict::Passed { best: limit },
                            Err(e) => Verdict::Failed(e.to_string()),
                        },
                    };
                    (i, verdict)
                })
                .collect()
        });
        for (i, v) in runs {
            candidates[i].verdict = v;
        }
        // Fewest cycles, ties to the earlier in space order (as `best`).
        for &(i, _, _) in batch {
            if let Some(c) = candidates[i].cycles() {
                if best.is_none() || best.is_some_and(|(b, bi)| (c, i) < (b, bi)) {
                    best = Some((c, i));
                }
            }
        }
        decided += batch.len();
        progress(decided, total);
    }
    Tuned { candidates }
}

/// The `simfa gemm` flags of a candidate's parameters.
pub fn flags(p: &GemmParams) -> String {
    let mut s = format!(
        "--block-m {} --block-n {} --block-k {} --stages {} --consumers {} --persistent {} --group-m {} --cluster {}x{} --split-k {}",
        p.block_m,
        p.block_n,
        p.block_k,
        p.stages,
        p.consumers,
        p.persistent,
        p.group_m,
        p.cluster_m,
        p.cluster_n,
        p.split_k
    );
    if p.stream_k {
        s.push_str(" --stream-k");
    }
    if p.epilogue == super::Epilogue::Tma {
        s.push_str(" --tma-store");
    }
    s
}

/// A candidate's parameters as JSON.
fn config_json(p: &GemmParams) -> serde_json::Value {
    serde_json::json!({
        "block_m": p.block_m,
        "block_n": p.block_n,
        "block_k": p.block_k,
        "stages": p.stages,
        "consumers": p.consumers,
        "persistent": p.persistent,
        "group_m": p.group_m,
        "cluster_m": p.cluster_m,
        "cluster_n": p.cluster_n,
        "split_k": p.split_k,
        "stream_k": p.stream_k,
        "tma_store": p.epilogue == super::Epilogue::Tma,
    })
}

impl Tuned {
    /// The best candidate's kernel, the source it runs with and its run,
    /// or why there is none.
    pub fn best_run(&self) -> Result<(Kernel, GemmSource, &RunOutcome), String> {
        let (k, o, p) = self.best_candidate()?;
        Ok((k, gemm_source(p), o))
    }

    /// The best candidate's kernel, run and parameters, or why there is
    /// none.
    fn best_candidate(&self) -> Result<(Kernel, &RunOutcome, &GemmParams), String> {
        let best = self.best().ok_or_else(|| {
            let [_, _, _, invalid, failed] = self.counts();
            let why = self
                .candidates
                .iter()
                .find_map(|c| match &c.verdict {
                    Verdict::Failed(e) | Verdict::Invalid(e) => Some(e.clone()),
                    _ => None,
                })
                .unwrap_or_else(|| "the space is empty".into());
            format!(
                "no candidate ran to the end ({invalid} invalid, {failed} failed; first: {why})"
            )
        })?;
        let c = &self.candidates[best];
        let k = gemm(&c.params).map_err(|e| e.to_string())?;
        let Verdict::Simulated(o) = &c.verdict else {
            return Err("the best candidate has no run".into());
        };
        Ok((k, o, &c.params))
    }

    /// The best candidate's kernel and report, or why there is none.
    pub fn best_report(
        &self,
        cfg: &GpuConfig,
    ) -> Result<(Kernel, crate::reporting::report::Report), String> {
        let (k, o, p) = self.best_candidate()?;
        let r = crate::reporting::report::Report::new(cfg, &k, o).with_workload_flops(p.flops());
        Ok((k, r))
    }

    /// The best candidate's report as JSON with the `tune` array of
    /// [`Tuned::to_json`]: what `simfa gemm --tune --json` prints and
    /// Python's `simfa.gemm(..., tune=True)` returns.
    pub fn report_json(&self, cfg: &GpuConfig) -> Result<serde_json::Value, String> {
        let (_, r) = self.best_report(cfg)?;
        let mut j = r.to_json();
        j["tune"] = self.to_json();
        Ok(j)
    }

    /// Every candidate as JSON, in space order: its configuration, bound,
    /// and cycles or why it was cut.
    pub fn to_json(&self) -> serde_json::Value {
        let rows: Vec<serde_json::Value> = self
            .candidates
            .iter()
            .map(|c| {
                let mut j = serde_json::json!({
                    "config": config_json(&c.params),
                    "bound_cycles": c.bound,
                });
                match &c.verdict {
                    Verdict::Simulated(o) => j["cycles"] = o.summary.cycles.into(),
                    Verdict::Bound { best } => {
                        j["cut"] = "bound".into();
                        j["why"] = format!("its bound is at least the best {best} cycles").into();
                    }
                    Verdict::Passed { best } => {
                        j["cut"] = "passed".into();
                        j["why"] = format!("its run passed the best {best} cycles").into();
                    }
                    Verdict::Invalid(e) => {
                        j["cut"] = "invalid".into();
                        j["why"] = e.clone().into();
                    }
                    Verdict::Failed(e) => {
                        j["cut"] = "failed".into();
                        j["why"] = e.clone().into();
                    }
                }
                j
            })
            .collect();
        serde_json::Value::Array(rows)
    }

    /// The text section after the best's report: the counts, the best's
    /// flags and the fastest `top` candidates.
    pub fn to_text(&self, cfg: &GpuConfig, top: usize) -> String {
        let [sim, bound, passed, invalid, failed] = self.counts();
        let mut s = format!(
            "tune          {} candidates: {sim} simulated, {bound} cut by the bound, {passed} passed the best while running, {invalid} invalid, {failed} failed\n",
            self.candidates.len()
        );
        if let Some(b) = self.best() {
            s.push_str(&format!(
                "best          {}\n",
                flags(&self.candidates[b].params)
            ));
        }
        s.push_str("  cycles      TFLOPS  configuration\n");
        for &i in self.ranking().iter().take(top) {
            let c = &self.candidates[i];
            let (Verdict::Simulated(o), Ok(k)) = (&c.verdict, gemm(&c.params)) else {
                continue;
            };
            let r = crate::reporting::report::Report::new(cfg, &k, o)
                .with_workload_flops(c.params.flops());
            s.push_str(&format!(
                "  {:<10}  {:>6.1}  {}\n",
                r.cycles,
                r.tflops,
                flags(&c.params)
            ));
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::run::{simulate_from, Snapshots};

    /// A short-K small grid, where the family's candidates differ widely
    /// and the bound cuts some: tiles 64x64 to 128x256, split-K, with and
    /// without persistence.
    fn small() -> (GpuConfig, GemmSpec, Space) {
        let space = Space {
            tiles: vec![(128, 256), (128, 64), (64, 64)],
            persistent: vec![true, false],
            cluster: vec![(1, 1)],
            split_k: vec![1, 4],
            ..Space::default()
        };
        (GpuConfig::h100(), GemmSpec::new(128, 1024, 2048), space)
    }

    fn verdicts(t: &Tuned) -> Vec<(GemmParams, Option<u64>, usize)> {
        t.candidates
            .iter()
            .map(|c| (c.params, c.cycles(), c.verdict.index()))
            .collect()
    }

    #[test]
    fn the_same_verdicts_and_best_on_one_or_two_threads() {
        let (cfg, spec, space) = small();
        let one = tune(&cfg, &spec, &space, |p| p, 1, |_, _| {});
        let two = tune(&cfg, &spec, &space, |p| p, 2, |_, _| {});
        assert_eq!(one.best(), two.best());
        assert_eq!(verdicts(&one), verdicts(&two));
        assert_eq!(one.to_json(), two.to_json());
        let b = one.best().unwrap();
        assert_eq!(one.ranking()[0], b);
    }

    #[test]
    fn no_candidate_cut_beats_the_best_run_alone() {
        let (cfg, spec, space) = small();
        let t = tune(&cfg, &spec, &space, |p| p, 0, |_, _| {});
        let best = t.candidates[t.best().unwrap()].cycles().unwrap();
        let [sim, bound, passed, _, _] = t.counts();
        assert!(sim >= 1 && bound + passed >= 1, "{:?}", t.counts());
        for c in &t.candidates {
            if let Verdict::Bound { .. } | Verdict::Passed { .. } = c.verdict {
                let k = gemm(&c.params).unwrap();
                let src = gemm_source(&c.params);
                let alone =
                    simulate_from(&cfg, &k, src, &mut (), |_, _, _| {}, &Snapshots::default())
                        .unwrap();
                assert!(
                    alone.summary.cycles >= best,
                    "{} cut, yet {} < best {best}",
                    flags(&c.params),
                    alone.summary.cycles
                );
                if let Some(b) = c.bound {
                    assert!(alone.summary.cycles >= b, "the bound holds");
                }
            }
        }
        // Split-K or stream-K wins this grid of 4 tiles of 128 x 256.
        let p = t.candidates[t.best().unwrap()].params;
        assert!(p.split_k > 1 || p.stream_k, "{}", flags(&p));
    }

    #[test]
    fn a_stream_k_bound_holds() {
        let cfg = GpuConfig::h100();
        for (m, n, k) in [(128, 1024, 4096), (640, 1024, 2048), (2048, 2048, 512)] {
            let p = GemmSpec {
                stream_k: Some(true),
                ..GemmSpec::new(m, n, k)
            }
            .params(cfg.sms as u32);
            let (kernel, bound) = build(&cfg, &p).unwrap();
            let bound = bound.expect("a stream-K candidate has a bound");
            let run = simulate_from(
                &cfg,
                &kernel,
                gemm_source(&p),
                &mut (),
                |_, _, _| {},
                &Snapshots::default(),
            )
            .unwrap();
            let cycles = run.summary.cycles;
            assert!(bound <= cycles, "{m}x{n}x{k}: bound {bound} > {cycles}");
            assert!(bound > 0);
        }
    }

    #[test]
    fn the_report_names_the_best_and_lists_every_candidate() {
        let (cfg, spec, space) = small();
        let t = tune(&cfg, &spec, &space, |p| p, 0, |_, _| {});
        let (k, r) = t.best_report(&cfg).unwrap();
        let best = &t.candidates[t.best().unwrap()];
        assert_eq!(r.cycles, best.cycles().unwrap());
        assert_eq!(k, gemm(&best.params).unwrap());
        let j = t.to_json();
        assert_eq!(j.as_array().unwrap().len(), t.candidates.len());
        assert!(j
            .as_array()
            .unwrap()
            .iter()
            .all(|c| c.get("cycles").is_some() != c.get("cut").is_some()));
        let text = t.to_text(&cfg, 3);
        assert!(
            text.contains(&format!("best          {}", flags(&best.params))),
            "{text}"
        );
        // The small tiles are tried here (4 tiles of 128 x 128 leave SMs
        // idle) and not for a grid that fills the SMs twice over.
        let at = |tile, split_k| Choice {
            tile,
            split_k,
            ..space.choices()[0]
        };
        assert!(space.tries(&at((64, 64), 1), 128, 1024, 132));
        assert!(!space.tries(&at((64, 64), 1), 4096, 4096, 132));
        assert!(space.tries(&at((128, 256), 1), 4096, 4096, 132));
        // Split-K only where the tiles leave SMs idle.
        assert!(space.tries(&at((128, 256), 4), 128, 1024, 132));
        assert!(!space.tries(&at((128, 256), 4), 4096, 4096, 132));
        // Stream-K only in a persistent kernel whose few waves end partial:
        // 4 tiles, and 512 (3.9 waves) of 128 x 256 at 4096^2; not 2048
        // (15.5 waves) at 8192^2, nor 264 (2 whole waves).
        let sk = |persistent| Choice {
            stream_k: true,
            persistent,
            ..at((128, 256), 1)
        };
        assert!(space.tries(&sk(true), 128, 1024, 132));
        assert!(space.tries(&sk(true), 4096, 4096, 132));
        assert!(!space.tries(&sk(true), 8192, 8192, 132));
        assert!(!space.tries(&sk(true), 128 * 12, 256 * 22, 132));
        assert!(!space.tries(&sk(false), 128, 1024, 132));
    }
}
