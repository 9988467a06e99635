//! `simfa bench`: simulation speed and memory on the reference
//! workloads. Wall-clock time is measured here for the report only; it
//! never reaches the simulation.

use std::time::Instant;

use clap::Args;
use simfa_core::config::MemoryModel;
use simfa_core::GpuConfig;
use simfa_std::gen::fa3::{fa3, Fa3Params};
use simfa_std::gen::sweep_row;
use simfa_std::run::simulate;

use crate::Failure;

/// Options of `simfa bench`.
#[derive(Debug, Args)]
pub struct BenchArgs {
    /// Tokens of the FA3 case (Llama 3 70B attention, batch 1, H800).
    #[arg(long, default_value_t = 4096)]
    seqlen: u32,
    /// Skip the GEMM sweep.
    #[arg(long)]
    skip_gemm: bool,
    /// Print one JSON object instead of a table.
    #[arg(long)]
    json: bool,
    /// Print the table as a Markdown table.
    #[arg(long, conflicts_with = "json")]
    markdown: bool,
    /// Memory model: transaction (default), line or fixed.
    #[arg(long, value_name = "MODEL", value_parser = crate::parse_memory)]
    memory: Option<simfa_core::config::MemoryModel>,
    #[command(flatten)]
    arrival: crate::ArrivalArg,
    /// Runs of each workload; the table shows the median wall time.
    #[arg(long, value_name = "N", default_value_t = 1,
          value_parser = clap::value_parser!(u32).range(1..=100))]
    runs: u32,
}

/// One measured run.
#[derive(Debug, serde::Serialize)]
struct Row {
    workload: String,
    cycles: u64,
    wall_s: f64,
    cycles_per_s: f64,
    arena_bytes: usize,
}

/// Peak resident set size of this process in bytes (Linux `VmHWM`), if
/// the platform tells.
pub fn peak_rss_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

/// Runs `once` (returning cycles, wall seconds and arena bytes) `runs`
/// times; the row holds the median wall time.
fn measure(
    name: String,
    runs: u32,
    mut once: impl FnMut() -> Result<(u64, f64, usize), Failure>,
) -> Result<Row, Failure> {
    let mut walls = Vec::new();
    let (mut cycles, mut arena) = (0, 0);
    for _ in 0..runs.max(1) {
        let (c, wall, a) = once()?;
        (cycles, arena) = (c, a);
        walls.push(wall);
    }
    Ok(row(name, cycles, median(&mut walls), arena))
}

/// A row from a median wall time.
fn row(workload: String, cycles: u64, wall_s: f64, arena_bytes: usize) -> Row {
    Row {
        workload,
        cycles,
        wall_s,
        cycles_per_s: if wall_s > 0.0 {
            cycles as f64 / wall_s
        } else {
            0.0
        },
        arena_bytes,
    }
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    if v.is_empty() {
        0.0
    } else {
        v[v.len() / 2]
    }
}

impl BenchArgs {
    /// Runs the benchmark and prints its table.
    pub fn run(&self) -> Result<(), Failure> {
        let mut cfg = crate::with_memory(GpuConfig::h800(), self.memory);
        self.arrival.apply(&mut cfg);
        let mut rows = Vec::new();
        let p = Fa3Params {
            heads: 64,
            kv_heads: 8,
            seqlen_q: self.seqlen,
            seqlen_kv: self.seqlen,
            ..Fa3Params::default()
        };
        let (k, _) = fa3(&p, &cfg).map_err(Failure::input)?;
        eprintln!(
            "bench: fa3 llama3-70b {} tokens on h800, {} memory, {} run(s) ...",
            self.seqlen, cfg.memory, self.runs
        );
        rows.push(measure(
            format!("fa3 llama3-70b s={}", self.seqlen),
            self.runs,
            || {
                let t = Instant::now();
                let out = simulate(&cfg, &k, &mut ()).map_err(|e| Failure::Sim(e.to_string()))?;
                Ok((
                    out.summary.cycles,
                    t.elapsed().as_secs_f64(),
                    out.arena_bytes,
                ))
            },
        )?);
        if !self.skip_gemm {
            for g in simfa_std::gen::sweep_shapes() {
                eprintln!("bench: gemm {}x{}x{} ...", g.m, g.n, g.k);
                let name = format!("gemm {}x{}x{}", g.m, g.n, g.k);
                rows.push(measure(name, self.runs, || {
                    let r = sweep_row(&cfg, &g).map_err(|e| Failure::Sim(e.to_string()))?;
                    Ok((r.cycles, r.wall_s, r.arena_bytes))
                })?);
            }
        }
        let peak = peak_rss_bytes();
        let mut gemm_rates: Vec<f64> = rows[1..].iter().map(|r| r.cycles_per_s).collect();
        let gemm_median = median(&mut gemm_rates);
        if self.json {
            let v = serde_json::json!({
                "memory_model": cfg.memory.name(),
                "arrival_controller": cfg.transaction.arrival_controller.name(),
                "runs_per_workload": self.runs,
                "runs": rows,
                "fa3_cycles_per_s": rows[0].cycles_per_s,
                "gemm_median_cycles_per_s": gemm_median,
                "peak_rss_bytes": peak,
            });
            let text = serde_json::to_string_pretty(&v).map_err(Failure::input)?;
            return crate::out(&format!("{text}\n"));
        }
        let model = format!(
            "{}{}",
            cfg.memory,
            match cfg.memory {
                MemoryModel::Transaction => format!(
                    " (arrival-order controller: {})",
                    cfg.transaction.arrival_controller.name()
                ),
                _ => String::new(),
            }
        );
        if self.markdown {
            let median = (rows.len() > 1).then_some(gemm_median);
            return crate::out(&markdown(&model, self.runs, &rows, median, peak));
        }
        let mut s = format!(
            "memory model: {model}; median of {} run(s) each\n{:<28} {:>10} {:>9} {:>12} {:>10}\n",
            self.runs, "workload", "cycles", "wall s", "cycles/s", "arena MB"
        );
        for r in &rows {
            s.push_str(&format!(
                "{:<28} {:>10} {:>9.2} {:>12.0} {:>10.1}\n",
                r.workload,
                r.cycles,
                r.wall_s,
                r.cycles_per_s,
                r.arena_bytes as f64 / (1 << 20) as f64
            ));
        }
        if rows.len() > 1 {
            s.push_str(&format!("gemm sweep median: {gemm_median:.0} cycles/s\n"));
        }
        match peak {
            Some(b) => s.push_str(&format!(
                "peak resident memory: {:.1} MB\n",
                b as f64 / (1 << 20) as f64
            )),
            None => s.push_str("peak resident memory: not available on this platform\n"),
        }
        crate::out(&s)
    }
}

/// Megabytes (2^20 bytes) as the tables print them.
fn mb(bytes: f64) -> f64 {
    bytes / (1 << 20) as f64
}

/// The benchmark's table as Markdown: a sentence naming the memory
/// `model` and the `runs` per workload, one row per workload, the GEMM
/// sweep's median rate when the sweep ran, and the peak resident memory.
fn markdown(
    model: &str,
    runs: u32,
    rows: &[Row],
    gemm_median: Option<f64>,
    peak: Option<u64>,
) -> String {
    let mut s = format!("Memory model: {model}; median of {runs} run(s) each.\n\n");
    s.push_str("| workload | cycles | wall s | cycles/s | arena MB |\n");
    s.push_str("|---|---:|---:|---:|---:|\n");
    for r in rows {
        s.push_str(&format!(
            "| {} | {} | {:.2} | {:.0} | {:.1} |\n",
            r.workload,
            r.cycles,
            r.wall_s,
            r.cycles_per_s,
            mb(r.arena_bytes as f64)
        ));
    }
    if let Some(m) = gemm_median {
        s.push_str(&format!("| gemm sweep median | | | {m:.0} | |\n"));
    }
    match peak {
        Some(b) => s.push_str(&format!(
            "\nPeak resident memory: {:.1} MB.\n",
            mb(b as f64)
        )),
        None => s.push_str("\nPeak resident memory: not available on this platform.\n"),
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn peak_rss_is_read() {
        let b = peak_rss_bytes().expect("Linux reports VmHWM");
        assert!(b > 1 << 20, "{b}");
    }

    #[test]
    fn the_markdown_table_has_a_header_and_a_row_per_workload() {
        let rows = [
            row("fa3 llama3-70b s=4096".into(), 2_000_000, 2.0, 3 << 20),
            row("gemm 128x128x512".into(), 30_000, 0.01, 1 << 20),
        ];
        let m = markdown(
            "transaction (arrival-order controller: auto)",
            3,
            &rows,
            Some(3_000_000.0),
            Some(50 << 20),
        );
        let lines: Vec<&str> = m.lines().collect();
        assert_eq!(
            lines[0],
            "Memory model: transaction (arrival-order controller: auto); median of 3 run(s) each."
        );
        assert_eq!(
            lines[2],
            "| workload | cycles | wall s | cycles/s | arena MB |"
        );
        assert_eq!(lines[3], "|---|---:|---:|---:|---:|");
        assert_eq!(
            lines[4],
            "| fa3 llama3-70b s=4096 | 2000000 | 2.00 | 1000000 | 3.0 |"
        );
        assert_eq!(lines[6], "| gemm sweep median | | | 3000000 | |");
        assert_eq!(lines[8], "Peak resident memory: 50.0 MB.");
        assert_eq!(lines.len(), 9, "{m}");
    }

    #[test]
    fn median_of_rates() {
        assert_eq!(median(&mut [3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&mut []), 0.0);
    }
}
