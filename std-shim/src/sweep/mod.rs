//! Design-space sweeps: many runs of one plan, on one machine or sharded
//! over a cluster's scheduler.
//!
//! - [`plan`]: the plan file, its axes and the points it expands into;
//! - [`workload`]: the GEMM, FA3 or kernel file a point runs;
//! - [`run`]: running points in parallel ([`run_plan`] is the library
//!   call: rows in plan order);
//! - [`output`]: the sweep directory's files (JSON Lines, CSV, SVG);
//! - [`merge`](mod@merge): shards and merging them.
//!
//! [`sweep`] puts them together the way `simfa sweep` does: it keeps the
//! rows already in the output directory whose index and key match the
//! plan (an interrupted sweep resumes), runs the rest of its share, and
//! rewrites the files in plan order. The files depend only on the plan,
//! never on the number of threads or on sharding.

pub mod merge;
pub mod output;
pub mod plan;
pub mod run;
pub mod workload;

use std::path::Path;

pub use merge::{merge, MergeError, Shard};
pub use output::Meta;
pub use plan::{Plan, PlanError};
pub use run::{report_of, run_plan, run_points, Row};

/// What a [`sweep`] did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Summary {
    /// Points of this run's share (all, or the shard's).
    pub points: usize,
    /// Of them, found done in the output directory and skipped.
    pub skipped: usize,
    /// Of them, simulated now.
    pub ran: usize,
    /// Of all the share's rows, failed ones.
    pub failed: usize,
}

/// Runs `plan` into the directory `out` (or its shard's subdirectory) on
/// `jobs` threads (0: one per core). `started(n)` is called with the
/// number of points to simulate, `done` with each row as it finishes.
pub fn sweep(
    plan: &Plan,
    out: &Path,
    shard: Option<Shard>,
    jobs: usize,
    started: impl FnOnce(usize),
    done: &(dyn Fn(&Row) + Sync),
) -> std::io::Result<Summary> {
    let dir = match shard {
        Some(s) => s.dir(out),
        None => out.to_path_buf(),
    };
    let share: Vec<usize> = (0..plan.points.len())
        .filter(|&i| shard.map_or(true, |s| s.has(i)))
        .collect();
    let mut kept: Vec<Row> = output::read_rows(&dir)?
        .into_iter()
        .filter(|r| share.binary_search(&r.index).is_ok() && plan.points[r.index].key == r.key)
        .collect();
    kept.sort_by_key(|r| r.index);
    kept.dedup_by_key(|r| r.index);
    let todo: Vec<usize> = share
        .iter()
        .copied()
        .filter(|i| kept.binary_search_by_key(i, |r| r.index).is_err())
        .collect();
    let meta = Meta::of(plan);
    // Rewrite first, so the file holds only this plan's rows before new
    // ones are appended.
    output::write_dir(&dir, &meta, &kept, false)?;
    started(todo.len());
    let appender = output::Appender::open(&dir)?;
    let rows = run_points(plan, &todo, jobs, &|r| {
        appender.push(r);
        done(r);
    });
    let skipped = kept.len();
    kept.extend(rows);
    let failed = kept.iter().filter(|r| !r.ok()).count();
    output::write_dir(&dir, &meta, &kept, shard.is_none())?;
    Ok(Summary {
        points: share.len(),
        skipped,
        ran: todo.len(),
        failed,
    })
}
