//! Read-after-transfer checking of SCALE-Sim v3 runs.
//!
//! SCALE-Sim (`pip install scalesim==3.0.0`) simulates a systolic array
//! whose IFMAP and FILTER operands are read from double-buffered SRAM
//! scratchpads that prefetch from DRAM. Its traces can say a read was
//! served from the scratchpad when no transfer ever brought the word there
//! (a *false hit*; `shared/reference/read-trace-consistency-note.txt`).
//! This module checks a run's own output files against the three
//! conditions simfa holds itself to, [`crate::check::rules`], the same
//! definitions its `--check` uses.
//!
//! # What the files are
//!
//! A run directory (`<-p dir>/<run_name>/`) holds `COMPUTE_REPORT.csv` and
//! one `layerN/` directory per layer with six traces (format:
//! [`trace`]). Read from SCALE-Sim 3.0.0's source
//! (`memory/double_buffered_scratchpad_mem.py`, `memory/read_buffer.py`,
//! `memory/read_port.py`) and checked on its output:
//!
//! - **Transfers** are the words of `IFMAP_DRAM_TRACE.csv` and
//!   `FILTER_DRAM_TRACE.csv`: the read buffer's prefetch trace, every DRAM
//!   read that fills that scratchpad (the cold fill of the active half,
//!   then each refill). Each row is one fetch line of as many words as the
//!   buffer fetches per cycle (in USER bandwidth mode `scale.cfg`'s
//!   `[layout] IfmapSRAMBankBandwidth` / `FilterSRAMBankBandwidth`; the
//!   row width is checked against it), issued one line per cycle.
//!   *Completed* means the row's cycle: `read_buffer` writes the cycles the
//!   read port *returns* (`read_port.service_reads`: issue cycle plus the
//!   DRAM latency, or Ramulator's latency), so the bandwidth model (one
//!   line per cycle) and the latency are both already in it. That is the
//!   note's t_complete. Per address the earliest completion counts.
//! - **Reads** are the words of `IFMAP_SRAM_TRACE.csv` and
//!   `FILTER_SRAM_TRACE.csv`: row i is the array's demand of cycle i, and
//!   its cycle is when the scratchpad *served* it (`service_reads`' return,
//!   the note's t_return). The request cycle (the note's t_arrival, the
//!   lookup) is not written; it is rebuilt exactly as SCALE-Sim computes
//!   it: row 0 at cycle 0, each next row one cycle later plus the largest
//!   stall of the row's IFMAP read, FILTER read and OFMAP write (the
//!   served cycle minus request minus hit latency for reads, the write's
//!   cycle minus request for OFMAP), which needs `OFMAP_SRAM_TRACE.csv`
//!   too.
//! - **Hit latency** L_hit is the read buffers' `hit_latency`: 1 cycle in
//!   SCALE-Sim v3, not settable from `scale.cfg`
//!   ([`CheckOptions::hit_latency`] overrides it). Every SRAM read is a
//!   scratchpad access, so every read is held to it.
//! - `OFMAP_*` traces are writes: they are not checked, only timed.
//!
//! A read then breaks condition 1 (no transfer: the false hit), 2 (returned
//! before its transfer completed) or 3 (returned sooner than L_hit after
//! the later of its request and its data's arrival).
//!
//! # The two measurement windows
//!
//! - The **compute field**: from the first demand row's request (cycle 0)
//!   to the last OFMAP SRAM write; its length is SCALE-Sim's "Total Cycles".
//! - The **cold interval**: from the first IFMAP or FILTER DRAM transfer
//!   (the cold fill, at negative cycles) to the last OFMAP DRAM write; its
//!   length is SCALE-Sim's "Total Cycles (incl. prefetch)". When
//!   `COMPUTE_REPORT.csv` is there, the report shows its two figures beside
//!   the measured windows.
//!
//! The two can rank dataflows differently; [`compare`] says where.

pub mod check;
pub mod compare;
pub mod config;
pub mod error;
pub mod report;
pub mod trace;

use std::path::{Path, PathBuf};

use serde::Serialize;

pub use check::{check_layer, CheckOptions, LayerCheck, Operand, OperandReport, Window};
pub use config::{Dataflow, Layer, ScaleConfig};
pub use error::{Fault, ScaleSimError};

/// What to check.
#[derive(Clone, Debug, Default)]
pub struct RunSpec {
    /// The run directory (holding `layerN/`), or one layer directory.
    pub dir: PathBuf,
    /// `scale.cfg`; default: `DIR/scale.cfg` if it exists.
    pub cfg: Option<PathBuf>,
    /// The topology CSV; default: `DIR/topology.csv` if it exists.
    pub topology: Option<PathBuf>,
    /// Overrides the hit latency (default 1, SCALE-Sim v3's).
    pub hit_latency: Option<u64>,
}

/// One layer's verdict.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct LayerReport {
    /// Its index (`layerN`).
    pub index: usize,
    /// Its name from the topology, else `layerN`.
    pub name: String,
    /// Its size from the topology, if given.
    pub layer: Option<Layer>,
    /// The check.
    #[serde(flatten)]
    pub check: LayerCheck,
    /// SCALE-Sim's own "Total Cycles (incl. prefetch)" and "Total Cycles"
    /// from `COMPUTE_REPORT.csv`, if there.
    pub reported: Option<(i64, i64)>,
}

/// A whole run's verdict.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct RunReport {
    /// The run directory.
    pub dir: String,
    /// The configuration, if one was found.
    pub config: Option<ScaleConfig>,
    /// The hit latency reads were held to.
    pub hit_latency: u64,
    /// Every layer, in index order.
    pub layers: Vec<LayerReport>,
}

impl RunReport {
    /// Violating reads in all layers.
    pub fn total(&self) -> u64 {
        self.layers.iter().map(|l| l.check.total()).sum()
    }

    /// True when no read broke a condition.
    pub fn is_clean(&self) -> bool {
        self.total() == 0
    }

    /// The configured dataflow, if known.
    pub fn dataflow(&self) -> Option<Dataflow> {
        self.config.as_ref().and_then(|c| c.dataflow)
    }
}

/// The layer directories of `dir`, by index: `dir` itself when it holds
/// traces, else its `layerN` subdirectories.
fn layer_dirs(dir: &Path) -> Result<Vec<(usize, PathBuf)>, ScaleSimError> {
    if dir.join("IFMAP_SRAM_TRACE.csv").is_file() {
        return Ok(vec![(0, dir.to_path_buf())]);
    }
    let entries = std::fs::read_dir(dir).map_err(|e| ScaleSimError::io(dir, e))?;
    let mut out = Vec::new();
    for e in entries {
        let e = e.map_err(|e| ScaleSimError::io(dir, e))?;
        let name = e.file_name();
        let Some(n) = name
            .to_str()
            .and_then(|s| s.strip_prefix("layer"))
            .and_then(|s| s.parse::<usize>().ok())
        else {
            continue;
        };
        if e.path().is_dir() {
            out.push((n, e.path()));
        }
    }
    out.sort();
    if out.is_empty() {
        return Err(ScaleSimError::NotARun {
            dir: dir.display().to_string(),
            what: "no layerN directory and no IFMAP_SRAM_TRACE.csv (not a SCALE-Sim run \
                   directory, or run without saving traces)"
                .to_string(),
        });
    }
    Ok(out)
}

/// A layer id of `COMPUTE_REPORT.csv` with its "Total Cycles (incl.
/// prefetch)" and "Total Cycles".
type Reported = (usize, (i64, i64));

/// SCALE-Sim's `COMPUTE_REPORT.csv` (its first three fields per row).
fn load_compute_report(path: &Path) -> Result<Vec<Reported>, ScaleSimError> {
    let bytes = std::fs::read(path).map_err(|e| ScaleSimError::io(path, e))?;
    let file = path.display().to_string();
    let mut out = Vec::new();
    for (i, row) in bytes.split(|&b| b == b'\n').enumerate().skip(1) {
        let line = i as u64 + 1;
        if row.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        let mut nums = [0i64; 3];
        let mut col = 0;
        let mut fields = row.split(|&b| b == b',');
        for n in nums.iter_mut() {
            let f = fields.next().unwrap_or_default();
            let bad =
                |at: usize, fault| ScaleSimError::at(&file, line, (col + at + 1) as u64, fault);
            *n = match trace::number(f) {
                Ok(Some(v)) => v,
                Ok(None) => return Err(bad(0, Fault::Empty("COMPUTE_REPORT"))),
                Err((at, fault)) => return Err(bad(at, fault)),
            };
            col += f.len() + 1;
        }
        let Ok(layer) = usize::try_from(nums[0]) else {
            let text = nums[0].to_string();
            return Err(ScaleSimError::at(&file, line, 1, Fault::OutOfRange(text)));
        };
        out.push((layer, (nums[1], nums[2])));
    }
    Ok(out)
}

/// Checks a whole run.
pub fn check_run(spec: &RunSpec) -> Result<RunReport, ScaleSimError> {
    let dir = &spec.dir;
    let default = |given: &Option<PathBuf>, name: &str| {
        given
            .clone()
            .or_else(|| Some(dir.join(name)).filter(|p| p.is_file()))
    };
    let config = match default(&spec.cfg, "scale.cfg") {
        Some(p) => Some(config::load_config(&p)?),
        None => None,
    };
    let topo_path = default(&spec.topology, "topology.csv");
    let topology = match &topo_path {
        Some(p) => Some(config::load_topology(p)?),
        None => None,
    };
    let layers = layer_dirs(dir)?;
    if let (Some(t), Some(p)) = (&topology, &topo_path) {
        if t.len() != layers.len() {
            return Err(ScaleSimError::Inconsistent {
                file: p.display().to_string(),
                what: format!(
                    "{} layers, but {} has traces of {}",
                    t.len(),
                    dir.display(),
                    layers.len()
                ),
            });
        }
    }
    let report_path = dir.join("COMPUTE_REPORT.csv");
    let reported = if report_path.is_file() {
        load_compute_report(&report_path)?
    } else {
        Vec::new()
    };
    let mut opts = CheckOptions::default();
    if let Some(h) = spec.hit_latency {
        opts.hit_latency = h;
    }
    if let Some(c) = &config {
        if c.user_bandwidth == Some(true) {
            opts.fetch_lanes = [c.ifmap_fetch_words, c.filter_fetch_words];
        }
    }
    let mut out = Vec::with_capacity(layers.len());
    for (pos, (index, ldir)) in layers.into_iter().enumerate() {
        let check = check_layer(&ldir, &opts)?;
        let layer = topology.as_ref().and_then(|t| t.get(pos).cloned());
        out.push(LayerReport {
            index,
            name: layer
                .as_ref()
                .map_or_else(|| format!("layer{index}"), |l| l.name.clone()),
            layer,
            check,
            reported: reported.iter().find(|r| r.0 == index).map(|r| r.1),
        });
    }
    Ok(RunReport {
        dir: dir.display().to_string(),
        config,
        hit_latency: opts.hit_latency,
        layers: out,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report(text: &str) -> Result<Vec<Reported>, ScaleSimError> {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("COMPUTE_REPORT.csv");
        std::fs::write(&path, text).unwrap();
        load_compute_report(&path)
    }

    #[test]
    fn compute_reports_read_as_the_traces_do() {
        let head = "LayerID, Total Cycles (incl. prefetch), Total Cycles, Stall Cycles\n";
        let r = report(&format!("{head}0, 10584, 768.0, 1\n\n1, 437, 331, 0\n")).unwrap();
        assert_eq!(r, [(0, (10584, 768)), (1, (437, 331))]);
        // The trace reader's faults, at the field's own column.
        let e = |row: &str| report(&format!("{head}{row}\n")).unwrap_err().to_string();
        assert!(e("0, 12.5, 3").ends_with(":2:4: \"12.5\" is not an integer"));
        assert!(e("0, 1e300, 3").ends_with(":2:4: \"1e300\" is out of range"));
        assert!(e("0, 5x, 3").ends_with(":2:5: unexpected byte 0x78"));
        assert!(e("0, , 3").ends_with(":2:3: empty COMPUTE_REPORT field"));
        assert!(e("-1, 5, 3").ends_with(":2:1: \"-1\" is out of range"));
    }
}
