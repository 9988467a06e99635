//! DRAM request traces that other DRAM simulators can replay.
//!
//! [`DramTrace`] is an [`Observer`] that writes every request the HBM
//! controllers accept, in order of the SM cycle they were accepted at
//! (ties in the order the simulator reported them), as text lines:
//!
//! - [`TraceFormat::LoadStore`] — `LD 0x1a2b3c80` / `ST 0x...`, the line
//!   format of Ramulator 2's `LoadStoreTrace` frontend;
//! - [`TraceFormat::Timed`] — `1234 LD 0x1a2b3c80`: the same with the SM
//!   cycle at which the request entered its controller's queue first.
//!
//! The line-level model reports requests as they happen; the
//! transaction-level model reports them when the operation that causes
//! them is issued, with the (later) cycle they happen at. The trace holds
//! such requests back until the simulation has passed their cycle (every
//! event of the run tells it where the run is: no later report can be for
//! an earlier cycle), so either way the file is in cycle order and holds
//! at most the requests in flight.
//!
//! The trace is written to a temporary file beside the target and renamed
//! into place by [`DramTrace::finish`], so a failed run never leaves a
//! half-written trace.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use simfa_core::{Cycle, Event, Observer};

/// The line format of a DRAM trace.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum TraceFormat {
    /// `LD|ST 0xADDR` (Ramulator 2 `LoadStoreTrace`).
    #[default]
    LoadStore,
    /// `CYCLE LD|ST 0xADDR`.
    Timed,
}

impl TraceFormat {
    /// Parses `loadstore` or `timed`.
    pub fn from_name(name: &str) -> Option<Self> {
        match name {
            "loadstore" => Some(TraceFormat::LoadStore),
            "timed" => Some(TraceFormat::Timed),
            _ => None,
        }
    }
}

/// Writes the DRAM requests of a run to a file.
pub struct DramTrace {
    path: PathBuf,
    format: TraceFormat,
    out: Option<BufWriter<tempfile::NamedTempFile>>,
    error: Option<std::io::Error>,
    requests: u64,
    /// Requests not yet written: (cycle, report order, write, address).
    held: BinaryHeap<Reverse<(u64, u64, bool, u64)>>,
    reported: u64,
}

impl DramTrace {
    /// Starts a trace that [`DramTrace::finish`] will place at `path`.
    pub fn create(path: &Path, format: TraceFormat) -> std::io::Result<Self> {
        let dir = match path.parent() {
            Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
            _ => PathBuf::from("."),
        };
        let tmp = tempfile::NamedTempFile::new_in(dir)?;
        Ok(DramTrace {
            path: path.to_path_buf(),
            format,
            out: Some(BufWriter::with_capacity(1 << 16, tmp)),
            error: None,
            requests: 0,
            held: BinaryHeap::new(),
            reported: 0,
        })
    }

    /// Requests written so far.
    pub fn requests(&self) -> u64 {
        self.requests
    }

    /// Flushes the trace and moves it into place; on any write error the
    /// temporary file is removed and the error returned.
    pub fn finish(mut self) -> std::io::Result<u64> {
        self.write_until(u64::MAX);
        if let Some(e) = self.error.take() {
            return Err(e);
        }
        let Some(out) = self.out.take() else {
            return Ok(self.requests);
        };
        let tmp = out.into_inner().map_err(|e| e.into_error())?;
        tmp.as_file().sync_all()?;
        tmp.persist(&self.path).map_err(|e| e.error)?;
        Ok(self.requests)
    }
}

impl DramTrace {
    /// Writes the held requests of cycles before `cycle`, in order.
    fn write_until(&mut self, cycle: u64) {
        while let Some(&Reverse((c, _, write, addr))) = self.held.peek() {
            if c >= cycle {
                break;
            }
            self.held.pop();
            if self.error.is_some() {
                continue;
            }
            let Some(out) = self.out.as_mut() else {
                continue;
            };
            let op = if write { "ST" } else { "LD" };
            let r = match self.format {
                TraceFormat::LoadStore => writeln!(out, "{op} {addr:#x}"),
                TraceFormat::Timed => writeln!(out, "{c} {op} {addr:#x}"),
            };
            match r {
                Ok(()) => self.requests += 1,
                Err(e) => self.error = Some(e),
            }
        }
    }
}

impl Observer for DramTrace {
    fn on_event(&mut self, cycle: Cycle, event: &Event) {
        let Event::DramRequest { write, addr } = *event else {
            // The run has reached `cycle`: no request before it is to come.
            if self.held.peek().is_some_and(|r| r.0 .0 < cycle.get()) {
                self.write_until(cycle.get());
            }
            return;
        };
        self.held
            .push(Reverse((cycle.get(), self.reported, write, addr)));
        self.reported += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gen::{gemm, GemmParams};

    #[test]
    fn gemm_trace_lists_every_dram_request() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.trace");
        let k = gemm(&GemmParams::new(256, 256, 256)).unwrap();
        let cfg = simfa_core::GpuConfig::h800();
        let mut tr = DramTrace::create(&path, TraceFormat::Timed).unwrap();
        let out = crate::run::simulate(&cfg, &k, &mut tr).unwrap();
        let n = tr.finish().unwrap();
        let mem = out.summary.memory.unwrap();
        assert_eq!(n, mem.dram_reads + mem.dram_writes);
        let text = std::fs::read_to_string(&path).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len() as u64, n);
        // A, B and C are 128 KiB each: every line of A and B is read once.
        assert_eq!(mem.dram_reads, 2 * 256 * 256 * 2 / 128);
        let mut last = 0u64;
        for l in &lines {
            let f: Vec<&str> = l.split(' ').collect();
            assert_eq!(f.len(), 3, "{l}");
            let c: u64 = f[0].parse().unwrap();
            assert!(c >= last, "cycles ascend: {l}");
            last = c;
            assert!(f[1] == "LD" || f[1] == "ST");
            let a = u64::from_str_radix(f[2].trim_start_matches("0x"), 16).unwrap();
            assert_eq!(a % 128, 0);
        }
    }

    #[test]
    fn failed_run_leaves_no_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.trace");
        let tr = DramTrace::create(&path, TraceFormat::LoadStore).unwrap();
        drop(tr);
        assert!(!path.exists());
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }
}
