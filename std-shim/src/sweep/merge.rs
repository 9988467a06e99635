//! Sharding a sweep and merging the shards back.
//!
//! Shard `I` of `N` runs the points whose index is `I` modulo `N` and
//! writes them into `shard-I-of-N/` under the sweep directory. [`merge`]
//! reads any number of shard directories of one plan and writes exactly
//! the files an unsharded run writes, byte for byte: the rows are the
//! same lines, sorted the same way, and the tables come from them.

use std::path::{Path, PathBuf};

use super::output::{read_rows, write_dir, Meta};

/// One shard of a sweep: `index` of `count`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Shard {
    /// This shard, `0..count`.
    pub index: usize,
    /// Shards in all.
    pub count: usize,
}

impl Shard {
    /// Parses `I/N`.
    pub fn parse(s: &str) -> Result<Shard, String> {
        let bad = || format!("--shard {s}: expected I/N with 0 <= I < N, or `env`");
        let (i, n) = s.split_once('/').ok_or_else(bad)?;
        let (index, count) = (
            i.trim().parse().map_err(|_| bad())?,
            n.trim().parse().map_err(|_| bad())?,
        );
        if count == 0 || index >= count {
            return Err(bad());
        }
        Ok(Shard { index, count })
    }

    /// The shard a cluster scheduler gives through `var` (an environment
    /// lookup): Slurm arrays (`SLURM_ARRAY_TASK_ID` less
    /// `SLURM_ARRAY_TASK_MIN`, of `SLURM_ARRAY_TASK_COUNT`), or a
    /// Kubernetes indexed Job (`JOB_COMPLETION_INDEX`, of `SIMFA_SHARDS`,
    /// which the manifest sets to the Job's `completions`).
    pub fn from_env(var: impl Fn(&str) -> Option<String>) -> Result<Shard, String> {
        let num = |name: &str| -> Result<Option<usize>, String> {
            match var(name) {
                None => Ok(None),
                Some(v) => v
                    .trim()
                    .parse()
                    .map(Some)
                    .map_err(|_| format!("{name}={v} is not a number")),
            }
        };
        let (index, count) = if let Some(id) = num("SLURM_ARRAY_TASK_ID")? {
            let min = num("SLURM_ARRAY_TASK_MIN")?.unwrap_or(0);
            let count = num("SLURM_ARRAY_TASK_COUNT")?
                .ok_or("SLURM_ARRAY_TASK_ID is set but SLURM_ARRAY_TASK_COUNT is not")?;
            (
                id.checked_sub(min)
                    .ok_or("SLURM_ARRAY_TASK_ID below its MIN")?,
                count,
            )
        } else if let Some(id) = num("JOB_COMPLETION_INDEX")? {
            let count = num("SIMFA_SHARDS")?
                .ok_or("JOB_COMPLETION_INDEX is set but SIMFA_SHARDS (the completions) is not")?;
            (id, count)
        } else {
            return Err(
                "--shard env: neither SLURM_ARRAY_TASK_ID nor JOB_COMPLETION_INDEX is set".into(),
            );
        };
        if count == 0 || index >= count {
            return Err(format!(
                "--shard env: shard {index} of {count} is out of range"
            ));
        }
        Ok(Shard { index, count })
    }

    /// True when the point at `index` belongs to this shard.
    pub fn has(&self, index: usize) -> bool {
        index % self.count == self.index
    }

    /// The shard's directory under the sweep directory `out`.
    pub fn dir(&self, out: &Path) -> PathBuf {
        out.join(format!("shard-{}-of-{}", self.index, self.count))
    }
}

/// Why shards could not be merged.
#[derive(Debug, thiserror::Error)]
pub enum MergeError {
    /// A shard directory could not be read.
    #[error("{dir}: {source}")]
    Io {
        /// The directory.
        dir: String,
        /// The error.
        #[source]
        source: std::io::Error,
    },
    /// Shards of different plans.
    #[error("{dir}: a shard of another plan (key {found}, expected {expected})")]
    OtherPlan {
        /// The directory.
        dir: String,
        /// Its plan key.
        found: String,
        /// The first shard's plan key.
        expected: String,
    },
    /// Points no shard has.
    #[error("{missing} of {points} points are in no shard (the first is point {first})")]
    Missing {
        /// How many.
        missing: usize,
        /// Points in the plan.
        points: usize,
        /// The first missing index.
        first: usize,
    },
    /// No shard named.
    #[error("no shard directories given")]
    NoShards,
}

/// Merges the shard directories `shards` into the sweep directory `out`.
pub fn merge(out: &Path, shards: &[PathBuf]) -> Result<(), MergeError> {
    let io = |d: &Path| {
        let dir = d.display().to_string();
        move |source| MergeError::Io { dir, source }
    };
    let mut meta: Option<Meta> = None;
    let mut rows = Vec::new();
    for d in shards {
        let m = Meta::read(d).map_err(io(d))?;
        if let Some(first) = &meta {
            if first.key != m.key {
                return Err(MergeError::OtherPlan {
                    dir: d.display().to_string(),
                    found: m.key,
                    expected: first.key.clone(),
                });
            }
        }
        rows.extend(
            read_rows(d)
                .map_err(io(d))?
                .into_iter()
                .filter(|r| r.index < m.points),
        );
        meta.get_or_insert(m);
    }
    let meta = meta.ok_or(MergeError::NoShards)?;
    let mut have = vec![false; meta.points];
    for r in &rows {
        have[r.index] = true;
    }
    let missing: Vec<usize> = (0..meta.points).filter(|&i| !have[i]).collect();
    if let Some(&first) = missing.first() {
        return Err(MergeError::Missing {
            missing: missing.len(),
            points: meta.points,
            first,
        });
    }
    write_dir(out, &meta, &rows, true).map_err(io(out))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shards_from_flags_and_schedulers() {
        assert_eq!(Shard::parse("1/4"), Ok(Shard { index: 1, count: 4 }));
        assert!(Shard::parse("4/4").is_err() && Shard::parse("0/0").is_err());
        assert!(Shard::parse("x").is_err());
        let env = |pairs: &'static [(&'static str, &'static str)]| {
            move |k: &str| {
                pairs
                    .iter()
                    .find(|(n, _)| *n == k)
                    .map(|(_, v)| v.to_string())
            }
        };
        let slurm = env(&[
            ("SLURM_ARRAY_TASK_ID", "5"),
            ("SLURM_ARRAY_TASK_MIN", "3"),
            ("SLURM_ARRAY_TASK_COUNT", "4"),
        ]);
        assert_eq!(Shard::from_env(slurm), Ok(Shard { index: 2, count: 4 }));
        let k8s = env(&[("JOB_COMPLETION_INDEX", "0"), ("SIMFA_SHARDS", "2")]);
        assert_eq!(Shard::from_env(k8s), Ok(Shard { index: 0, count: 2 }));
        assert!(Shard::from_env(env(&[("JOB_COMPLETION_INDEX", "0")])).is_err());
        assert!(Shard::from_env(env(&[])).is_err());
        let s = Shard { index: 1, count: 3 };
        assert!(s.has(4) && !s.has(3));
        assert_eq!(s.dir(Path::new("out")), Path::new("out/shard-1-of-3"));
    }
}
