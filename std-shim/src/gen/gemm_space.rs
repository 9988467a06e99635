//! The family of GEMM kernels `simfa gemm --tune` searches: lists of
//! values per parameter, crossed ([`Space::choices`]). [`Space::default`]
//! is the family below; a `--space FILE.toml` replaces any of its lists:
//!
//! ```toml
//! tiles = ["128x256", "256x128", "128x128", "64x256", "128x64", "64x128", "64x64"]
//! block_k = [64]
//! stages = [0]          # 0: the family's default (as many as fit, up to 4)
//! consumers = [0]       # 0: the family's default (2, or 1 for 64-row tiles)
//! persistent = [true, false]
//! group_m = [8]
//! cluster = ["1x1", "2x1"]
//! split_k = [1, 2, 4, 8] # K slices (1: none); more than 1 only where the
//!                       # tiles leave SMs idle (Space::tries)
//! stream_k = [false, true] # stream-K only where the tiles leave a partial
//!                       # last wave among few (Space::tries)
//! tma_store = [false]
//! small_tile_waves = 2  # tiles with a side under 128 only where 128 x 128
//!                       # tiles fill fewer waves of the SMs (0: always)
//! ```
//!
//! A bad file is a [`FileError`] (`FILE:LINE: key: message`).

use serde::Deserialize;
use toml::Spanned;

use crate::toml_file::{toml_error, FileError};

/// Stream-K is tried where the tiles fill fewer waves of the SMs than
/// this ([`Space::tries`]).
pub const STREAM_K_WAVES: u64 = 4;

/// Most candidates a space may hold.
pub const MAX_CANDIDATES: usize = 4096;

/// Lists of values per GEMM parameter; every combination is a candidate.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Space {
    /// Tiles, `(block_m, block_n)`.
    pub tiles: Vec<(u32, u32)>,
    /// Tile depths.
    pub block_k: Vec<u32>,
    /// Ring stages (0: the family's default).
    pub stages: Vec<u32>,
    /// Consumer WarpGroups (0: the family's default).
    pub consumers: Vec<u32>,
    /// Persistent or one CTA per tile.
    pub persistent: Vec<bool>,
    /// Row blocks per raster group.
    pub group_m: Vec<u32>,
    /// Cluster shapes `(along M, along N)`.
    pub cluster: Vec<(u32, u32)>,
    /// K slices of split-K (1: none).
    pub split_k: Vec<u32>,
    /// Stream-K or not.
    pub stream_k: Vec<bool>,
    /// C through a TMA store or from registers.
    pub tma_store: Vec<bool>,
    /// Tiles with a side under 128 are tried only where 128 x 128 tiles
    /// fill fewer than this many waves of the SMs (0: always): elsewhere
    /// their lower arithmetic intensity cannot pay, as the libraries'
    /// heuristics know.
    pub small_tile_waves: u32,
}

/// One combination of a [`Space`]'s values.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Choice {
    /// `(block_m, block_n)`.
    pub tile: (u32, u32),
    /// Tile depth.
    pub block_k: u32,
    /// Ring stages (0: the family's default).
    pub stages: u32,
    /// Consumers (0: the family's default).
    pub consumers: u32,
    /// Persistent.
    pub persistent: bool,
    /// Raster group.
    pub group_m: u32,
    /// Cluster `(along M, along N)`.
    pub cluster: (u32, u32),
    /// K slices.
    pub split_k: u32,
    /// Stream-K.
    pub stream_k: bool,
    /// TMA store epilogue.
    pub tma_store: bool,
}

impl Default for Space {
    fn default() -> Self {
        Space {
            tiles: vec![
                (128, 256),
                (256, 128),
                (128, 128),
                (64, 256),
                (128, 64),
                (64, 128),
                (64, 64),
            ],
            block_k: vec![64],
            stages: vec![0],
            consumers: vec![0],
            persistent: vec![true, false],
            group_m: vec![8],
            cluster: vec![(1, 1), (2, 1)],
            split_k: vec![1, 2, 4, 8],
            stream_k: vec![false, true],
            tma_store: vec![false],
            small_tile_waves: 2,
        }
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SpaceFile {
    tiles: Option<Spanned<Vec<String>>>,
    block_k: Option<Spanned<Vec<u32>>>,
    stages: Option<Spanned<Vec<u32>>>,
    consumers: Option<Spanned<Vec<u32>>>,
    persistent: Option<Spanned<Vec<bool>>>,
    group_m: Option<Spanned<Vec<u32>>>,
    cluster: Option<Spanned<Vec<String>>>,
    split_k: Option<Spanned<Vec<u32>>>,
    stream_k: Option<Spanned<Vec<bool>>>,
    tma_store: Option<Spanned<Vec<bool>>>,
    small_tile_waves: Option<u32>,
}

/// `"AxB"` as `(A, B)`, each side in `lo..=hi`.
fn pair(s: &str, lo: u32, hi: u32) -> Option<(u32, u32)> {
    let (a, b) = s.split_once(['x', 'X'])?;
    let side = |v: &str| {
        v.trim()
            .parse::<u32>()
            .ok()
            .filter(|v| (lo..=hi).contains(v))
    };
    Some((side(a)?, side(b)?))
}

impl Space {
    /// Reads the space file at `path`.
    pub fn load(path: &std::path::Path) -> Result<Space, FileError> {
        let (text, file) = crate::toml_file::read(path, "space")?;
        Space::parse(&text, &file)
    }

    /// Parses a space file's text; `file` names it in errors. Keys not in
    /// the file keep [`Space::default`]'s lists.
    pub fn parse(text: &str, file: &str) -> Result<Space, FileError> {
        let f: SpaceFile = toml::from_str(text).map_err(|e| toml_error(text, file, &e, "space"))?;
        let err = |at: usize, key: &str, message: String| FileError {
            file: file.to_string(),
            line: crate::config::line_col(text, at).0,
            key: key.to_string(),
            message,
        };
        let mut s = Space::default();
        // Each list: non-empty, every value in range.
        fn list<T: Clone, U>(
            v: &Option<Spanned<Vec<T>>>,
            key: &str,
            out: &mut Vec<U>,
            conv: impl Fn(&T) -> Option<U>,
            want: &str,
            err: &dyn Fn(usize, &str, String) -> FileError,
        ) -> Result<(), FileError> {
            let Some(v) = v else { return Ok(()) };
            let at = v.span().start;
            if v.get_ref().is_empty() {
                return Err(err(at, key, "an empty list leaves no candidate".into()));
            }
            *out = Vec::new();
            for (i, x) in v.get_ref().iter().enumerate() {
                match conv(x) {
                    Some(u) => out.push(u),
                    None => return Err(err(at, key, format!("value {}: expected {want}", i + 1))),
                }
            }
            Ok(())
        }
        let int = |lo: u32, hi: u32| move |v: &u32| (lo..=hi).contains(v).then_some(*v);
        list(
            &f.tiles,
            "tiles",
            &mut s.tiles,
            |t: &String| pair(t, 8, 256),
            "\"BMxBN\" with sides from 8 to 256 (e.g. \"128x256\")",
            &err,
        )?;
        list(
            &f.block_k,
            "block_k",
            &mut s.block_k,
            int(16, 256),
            "16..=256",
            &err,
        )?;
        list(
            &f.stages,
            "stages",
            &mut s.stages,
            int(0, 64),
            "0 (default) or 1..=64",
            &err,
        )?;
        list(
            &f.consumers,
            "consumers",
            &mut s.consumers,
            int(0, 3),
            "0 (default) or 1..=3",
            &err,
        )?;
        list(
            &f.persistent,
            "persistent",
            &mut s.persistent,
            |b: &bool| Some(*b),
            "true or false",
            &err,
        )?;
        list(
            &f.group_m,
            "group_m",
            &mut s.group_m,
            int(1, 1 << 16),
            "1..=65536",
            &err,
        )?;
        list(
            &f.cluster,
            "cluster",
            &mut s.cluster,
            |t: &String| pair(t, 1, 16),
            "\"MxN\" with sides from 1 to 16 (e.g. \"2x1\")",
            &err,
        )?;
        list(
            &f.split_k,
            "split_k",
            &mut s.split_k,
            int(1, 64),
            "1..=64",
            &err,
        )?;
        list(
            &f.stream_k,
            "stream_k",
            &mut s.stream_k,
            |b: &bool| Some(*b),
            "true or false",
            &err,
        )?;
        list(
            &f.tma_store,
            "tma_store",
            &mut s.tma_store,
            |b: &bool| Some(*b),
            "true or false",
            &err,
        )?;
        if let Some(w) = f.small_tile_waves {
            s.small_tile_waves = w;
        }
        let n = s.size();
        if n > MAX_CANDIDATES as u64 {
            return Err(err(
                0,
                "space",
                format!("{n} candidates (at most {MAX_CANDIDATES}): narrow a list"),
            ));
        }
        Ok(s)
    }

    /// Candidates: the product of the lists' lengths.
    pub fn size(&self) -> u64 {
        [
            self.tiles.len(),
            self.block_k.len(),
            self.stages.len(),
            self.consumers.len(),
            self.persistent.len(),
            self.group_m.len(),
            self.cluster.len(),
            self.split_k.len(),
            self.stream_k.len(),
            self.tma_store.len(),
        ]
        .iter()
        .map(|&l| l as u64)
        .product()
    }

    /// Whether choice `c` is tried for an `m x n` GEMM on `sms` SMs: a
    /// tile with a side under 128 only as [`Space::small_tile_waves`]
    /// says, split-K only where the tiles leave SMs idle, as the
    /// libraries' heuristics do (elsewhere its extra traffic cannot pay),
    /// and stream-K only in a persistent kernel without a cluster or
    /// split-K whose tiles fill fewer than [`STREAM_K_WAVES`] waves of the
    /// SMs, the last one partial (elsewhere the idle SMs of the last wave
    /// cost less than its fix-ups).
    pub fn tries(&self, c: &Choice, m: u32, n: u32, sms: u32) -> bool {
        let tiles = |(bm, bn): (u32, u32)| m.div_ceil(bm) as u64 * n.div_ceil(bn) as u64;
        let (bm, bn) = c.tile;
        let small = bm < 128 || bn < 128;
        let t = tiles(c.tile);
        let sms = sms as u64;
        (!small
            || self.small_tile_waves == 0
            || tiles((128, 128)) < self.small_tile_waves as u64 * sms)
            && (c.split_k == 1 || t < sms)
            && (!c.stream_k
                || (c.persistent
                    && c.split_k == 1
                    && c.cluster == (1, 1)
                    && t % sms != 0
                    && t < STREAM_K_WAVES * sms))
    }

    /// Every combination, the last list varying fastest.
    pub fn choices(&self) -> Vec<Choice> {
        let mut out = Vec::new();
        for &tile in &self.tiles {
            for &block_k in &self.block_k {
                for &stages in &self.stages {
                    for &consumers in &self.consumers {
                        for &persistent in &self.persistent {
                            for &group_m in &self.group_m {
                                for &cluster in &self.cluster {
                                    for &split_k in &self.split_k {
                                        for &stream_k in &self.stream_k {
                                            for &tma_store in &self.tma_store {
                                                out.push(Choice {
                                                    tile,
                                                    block_k,
                                                    stages,
                                                    consumers,
                                                    persistent,
                                                    group_m,
                                                    cluster,
                                                    split_k,
                                                    stream_k,
                                                    tma_store,
                                                });
                                            }
                                        }
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_replaces_the_lists_it_names() {
        let s = Space::parse("tiles = [\"128x128\"]\nsplit_k = [1]\n", "s.toml").unwrap();
        assert_eq!(s.tiles, [(128, 128)]);
        assert_eq!(s.split_k, [1]);
        assert_eq!(s.cluster, Space::default().cluster);
        // persistent, cluster and stream_k keep their two values each.
        assert_eq!(s.size(), 2 * 2 * 2);
        assert_eq!(s.choices().len(), 8);
    }

    #[test]
    fn hostile_files_name_file_line_and_key() {
        let cases = [
            (
                "tiles = [\"128x300\"]\n",
                "s.toml:1: tiles: value 1: expected",
            ),
            ("\ncluster = [\"2\"]\n", "s.toml:2: cluster: value 1"),
            ("stages = []\n", "s.toml:1: stages: an empty list"),
            (
                "consumers = [4]\n",
                "s.toml:1: consumers: value 1: expected 0 (default)",
            ),
            ("\n\nwarps = [4]\n", "s.toml:3: warps: unknown field"),
            ("split_k = [\"two\"]\n", "s.toml:1: split_k:"),
            ("stream_k = [1]\n", "s.toml:1: stream_k:"),
            ("stream_k = []\n", "s.toml:1: stream_k: an empty list"),
            ("group_m = [0]\n", "s.toml:1: group_m"),
            ("tiles = [", "s.toml:1: tiles:"),
            ("[x]\n", "s.toml:1: x: unknown field"),
        ];
        for (text, want) in cases {
            let e = Space::parse(text, "s.toml").unwrap_err().to_string();
            assert!(e.starts_with(want), "{text:?}: {e}");
        }
        let big = "tiles = [\"64x64\",\"64x128\",\"128x64\",\"128x128\"]\nblock_k = [16,32,64,128]\nstages = [1,2,3,4]\ngroup_m = [1,2,4,8,16]\nsplit_k = [1,2,3,4,5,6,7,8]\n";
        let e = Space::parse(big, "s.toml").unwrap_err().to_string();
        assert!(e.contains("at most 4096"), "{e}");
    }
}
