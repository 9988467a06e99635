//! Human and JSON reports.
//!
//! A [`Report`] gathers what a finished run tells about a kernel on a GPU:
//! cycles and time, the digest, instruction and WGMMA counts, achieved
//! TFLOPS, engine activity and traffic. Times and rates are floats; they are
//! computed here, for reports only, never fed back into the simulation.

use serde::Serialize;
use simfa_core::analytic::{estimate, Estimate};
use simfa_core::{GpuConfig, Kernel};

use crate::run::RunOutcome;

/// Busy cycles of the engines, summed over SMs.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Engines {
    /// Cycles the tensor pipes were busy.
    pub tensor_busy_cycles: u64,
    /// Cycles with at least one TMA operation in flight.
    pub tma_busy_cycles: u64,
    /// Cycles the memory ports spent moving bytes.
    pub port_busy_cycles: u64,
    /// `tensor_busy_cycles / (cycles * sms)`: the fraction of the GPU's
    /// tensor-pipe time that was used.
    pub tensor_utilization: f64,
}

/// The analytical estimate beside the simulation ([`simfa_core::analytic`]):
/// work, traffic, the roofline time of each level at the configured clock
/// and how far the simulated time is from the bound.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Analytic {
    /// False when the counts are partial (stream roles, a walk past its
    /// budget); then no bound is claimed (`bound_cycles` is null).
    pub complete: bool,
    /// True when the kernel has stream roles (an imported trace, TTGIR,
    /// stream-K): their instructions come from the host, so the walk
    /// counts nothing of them and the text report says so.
    pub streamed: bool,
    /// FLOPs of every WGMMA the grid issues.
    pub flops: u64,
    /// Tensor-pipe cycles of those WGMMAs, summed over SMs.
    pub tensor_cycles: u64,
    /// Bytes the TMA and bulk copies move between shared memory and L2.
    pub l2_bytes: u64,
    /// Compulsory HBM bytes (each tensor's footprint, or the bytes moved
    /// through its map if fewer), reads plus writes.
    pub hbm_bytes: u64,
    /// Compulsory HBM reads.
    pub hbm_read_bytes: u64,
    /// Compulsory HBM writes.
    pub hbm_write_bytes: u64,
    /// CTAs one SM holds at once.
    pub resident_ctas_per_sm: u32,
    /// `ctas / (resident_ctas_per_sm * sms)`.
    pub waves: f64,
    /// Waves rounded up.
    pub full_waves: u64,
    /// Dense tensor peak of the GPU at the configured clock, TFLOP/s.
    pub peak_tflops: f64,
    /// L2 slice bandwidth at the configured clock, GB/s.
    pub l2_gbps: f64,
    /// Bandwidth behind the L2 (HBM peak, or the fixed ports), GB/s.
    pub memory_gbps: f64,
    /// `"hbm"` or, with the fixed port, `"port"`.
    pub memory_level: String,
    /// Tensor-pipe time: the busiest SM's least tensor-pipe work
    /// ([`Estimate::tensor_bound_cycles`]), microseconds.
    pub tensor_us: f64,
    /// L2 time: every L2 byte at the slice bandwidth, microseconds (not a
    /// bound: coalescing can serve fewer bytes).
    pub l2_us: f64,
    /// Memory time: the compulsory HBM reads (the port's bytes) at peak;
    /// HBM writes are not counted (the L2 writes back).
    pub memory_us: f64,
    /// Lower bound on the kernel's cycles: the larger of the tensor and
    /// memory times, in cycles (null when incomplete).
    pub bound_cycles: Option<u64>,
    /// The level that sets the bound: `"tensor"` or `memory_level`.
    pub bound_level: String,
    /// Simulated cycles over `bound_cycles` (1 is at the bound; null
    /// without a bound).
    pub simulated_over_bound: Option<f64>,
}

impl Analytic {
    /// The estimate of `k` on `cfg`, against a simulation of `cycles`.
    /// The walk visits at most `max_steps` instructions.
    pub fn new(cfg: &GpuConfig, k: &Kernel, cycles: u64, max_steps: u64) -> Analytic {
        Analytic {
            streamed: k.roles.iter().any(|r| r.stream),
            ..Analytic::from_estimate(cfg, &estimate(cfg, k, max_steps), cycles)
        }
    }

    /// Reports `e` for `cfg` against a simulation of `cycles`.
    pub fn from_estimate(cfg: &GpuConfig, e: &Estimate, cycles: u64) -> Analytic {
        let mhz = cfg.clock_mhz.max(1) as f64;
        let us = |c: u64| c as f64 / mhz;
        let (pf, pc) = Estimate::peak_flops_per_sm_cycle(cfg);
        // FLOP/cycle/SM * SMs * MHz * 1e6 / 1e12
        let peak_tflops = pf as f64 / pc.max(1) as f64 * cfg.sms as f64 * mhz / 1e6;
        let (ln, ld) = cfg.l2.peak_bytes_per_cycle();
        let l2_bpc = ln as f64 / ld as f64;
        let fixed = cfg.memory == simfa_core::config::MemoryModel::Fixed;
        let mem_bpc = if fixed {
            let r = cfg.port.bytes_per_cycle;
            r.num as f64 / r.den.max(1) as f64 * cfg.sms as f64
        } else {
            let (n, d) = cfg.dram.peak_bytes_per_cycle();
            n as f64 / d as f64
        };
        let memory_level = if fixed { "port" } else { "hbm" };
        let tensor = e.tensor_bound_cycles();
        let memory = e.memory_bound_cycles(cfg);
        let bound = e.lower_bound_cycles(cfg);
        let (wn, wd) = e.waves();
        Analytic {
            complete: e.complete,
            streamed: false,
            flops: e.flops,
            tensor_cycles: e.tensor_cycles,
            l2_bytes: e.l2_load_bytes + e.l2_store_bytes,
            hbm_bytes: e.hbm_read_bytes + e.hbm_write_bytes,
            hbm_read_bytes: e.hbm_read_bytes,
            hbm_write_bytes: e.hbm_write_bytes,
            resident_ctas_per_sm: e.resident_per_sm,
            waves: wn as f64 / wd as f64,
            full_waves: e.full_waves(),
            peak_tflops,
            l2_gbps: l2_bpc * mhz / 1e3,
            memory_gbps: mem_bpc * mhz / 1e3,
            memory_level: memory_level.to_string(),
            tensor_us: us(tensor),
            l2_us: us(e.l2_bound_cycles(cfg)),
            memory_us: us(memory),
            bound_cycles: bound,
            bound_level: if tensor >= memory {
                "tensor"
            } else {
                memory_level
            }
            .to_string(),
            simulated_over_bound: bound.filter(|&b| b > 0).map(|b| cycles as f64 / b as f64),
        }
    }
}

/// Instructions the analytical walk may visit for a run that issued
/// `instructions`: four per issued instruction (loop markers are not
/// issued) and a fixed allowance.
pub fn walk_budget(instructions: u64) -> u64 {
    instructions.saturating_mul(4).saturating_add(1 << 24)
}

/// The report of one run.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Report {
    /// GPU configuration name.
    pub gpu: String,
    /// Kernel name.
    pub kernel: String,
    /// Kernel duration in cycles.
    pub cycles: u64,
    /// Kernel duration in microseconds (`cycles / clock_mhz`).
    pub time_us: f64,
    /// The SM clock the time is at, MHz: the configuration's clock, or the
    /// lower one its power limit sustains for this run's tensor activity
    /// (`simfa_core::power`).
    pub clock_mhz: u32,
    /// True when the power limit set `clock_mhz` below the configured clock.
    pub power_limited: bool,
    /// Digest of the event stream: 16 lowercase hex digits.
    pub digest: String,
    /// CTAs in the grid.
    pub ctas: u64,
    /// Instructions issued (loop control not counted).
    pub instructions: u64,
    /// WGMMAs executed.
    pub wgmmas: u64,
    /// FLOPs of the work: the WGMMAs' (`wgmma_flops`), or the workload's
    /// own count (see `flops_source`).
    pub flops: u64,
    /// FLOPs of the WGMMAs issued (`2 * 64 * N * 16` each): the tensor
    /// pipe's math, which sets the power-limited clock.
    pub wgmma_flops: u64,
    /// Achieved tensor throughput in TFLOPS (`flops / time`).
    pub tflops: f64,
    /// The configuration's gap between kernels launched back to back,
    /// microseconds (`launch_gap_ns`).
    pub launch_gap_us: f64,
    /// Throughput as timing back-to-back launches sees it: `flops /
    /// (time + launch gap)`.
    pub back_to_back_tflops: f64,
    /// Engine activity.
    pub engines: Engines,
    /// Cycles WarpGroups spent stalled, summed over WarpGroups.
    pub stall_cycles: u64,
    /// Cycles WarpGroups spent in bubbles, summed over WarpGroups.
    pub bubble_cycles: u64,
    /// Cycles WarpGroups spent in `compute` instructions on the SM's shared
    /// units, summed over WarpGroups.
    pub compute_cycles: u64,
    /// Bytes loaded through TMA and bulk copies.
    pub bytes_loaded: u64,
    /// Bytes stored through TMA and bulk copies.
    pub bytes_stored: u64,
    /// Bytes of simulator arena the run used.
    pub arena_bytes: usize,
    /// Memory model: `"transaction"`, `"line"` or `"fixed"`.
    pub memory_model: String,
    /// Whether the transaction model landed operations by the
    /// arrival-order controller (`transaction.arrival_controller`).
    pub arrival_controller: bool,
    /// TMA line requests (0 with the fixed port).
    pub tma_lines: u64,
    /// L2 requests after coalescing.
    pub l2_requests: u64,
    /// L2 hits, home and shadow copies.
    pub l2_hits: u64,
    /// L2 misses.
    pub l2_misses: u64,
    /// `l2_hits / l2_requests` (0 when there were none).
    pub l2_hit_rate: f64,
    /// Reads merged in the per-SM-pair coalescers.
    pub coalesced: u64,
    /// Thread loads that went through an SM's L1 (`ld.global.ca`).
    pub l1_loads: u64,
    /// Of those, the loads the L1 served.
    pub l1_hits: u64,
    /// Bytes read from DRAM.
    pub dram_read_bytes: u64,
    /// Bytes written to DRAM.
    pub dram_write_bytes: u64,
    /// DRAM line accesses (reads and write-backs) that found their row
    /// open.
    pub dram_row_hits: u64,
    /// `dram_row_hits` over all DRAM line accesses (0 when there were
    /// none): how well the traffic's order suits the banks.
    pub dram_row_hit_rate: f64,
    /// `tensor_busy_cycles / (cycles * sms)` (also under `engines`).
    pub tensor_utilization: f64,
    /// Bytes the TMA engines requested from the L2 (`tma_lines` times the
    /// line size; the bytes moved with the fixed port).
    pub tma_bytes_requested: u64,
    /// The cold interval: first transfer to last CTA retirement, in cycles.
    pub cold_interval_cycles: u64,
    /// The compute field: first to last tensor-core activity, in cycles.
    pub compute_field_cycles: u64,
    /// Where `flops` comes from: `"wgmma"` (every issued WGMMA) or
    /// `"workload"` (the workload's own count, e.g. FA3's
    /// `4 * sq * skv * d * heads * batch`, halved when causal).
    pub flops_source: String,
    /// The analytical estimate and the simulated time's distance from it.
    pub analytic: Analytic,
}

/// TFLOP/s of `flops` done in `time_us` microseconds followed by a
/// launch gap of `gap_us` microseconds (0 when no time passes).
pub fn back_to_back(flops: u64, time_us: f64, gap_us: f64) -> f64 {
    let t = time_us + gap_us;
    if time_us > 0.0 && t > 0.0 {
        flops as f64 / (t * 1e6)
    } else {
        0.0
    }
}

/// Formats a digest as exactly 16 lowercase hex digits.
pub fn format_digest(digest: u64) -> String {
    format!("{digest:016x}")
}

impl Report {
    /// Builds the report of `outcome`, the run of `kernel` on `cfg`.
    pub fn new(cfg: &GpuConfig, kernel: &Kernel, outcome: &RunOutcome) -> Report {
        let s = &outcome.summary;
        let st = &s.stats;
        let cycles = s.cycles;
        let clock_mhz = simfa_core::power::sustained_clock_mhz(cfg, outcome.flops, cycles);
        let time_us = if clock_mhz == 0 {
            0.0
        } else {
            cycles as f64 / clock_mhz as f64
        };
        // flops / (time_us * 1e-6 s) / 1e12 = flops / (time_us * 1e6)
        let tflops = if time_us > 0.0 {
            outcome.flops as f64 / (time_us * 1e6)
        } else {
            0.0
        };
        let lanes = cycles as f64 * cfg.sms as f64;
        let tensor_utilization = if lanes > 0.0 {
            st.tensor_busy_cycles as f64 / lanes
        } else {
            0.0
        };
        Report {
            gpu: cfg.name.to_string(),
            kernel: kernel.name.to_string(),
            cycles,
            time_us,
            clock_mhz,
            power_limited: clock_mhz < cfg.clock_mhz,
            digest: format_digest(s.digest),
            ctas: outcome.ctas,
            instructions: st.instructions,
            wgmmas: st.wgmmas,
            flops: outcome.flops,
            wgmma_flops: outcome.flops,
            tflops,
            launch_gap_us: cfg.launch_gap_ns as f64 / 1e3,
            back_to_back_tflops: back_to_back(
                outcome.flops,
                time_us,
                cfg.launch_gap_ns as f64 / 1e3,
            ),
            engines: Engines {
                tensor_busy_cycles: st.tensor_busy_cycles,
                tma_busy_cycles: st.tma_busy_cycles,
                port_busy_cycles: st.port_busy_cycles,
                tensor_utilization,
            },
            stall_cycles: st.stall_cycles,
            bubble_cycles: st.bubble_cycles,
            compute_cycles: st.compute_cycles,
            bytes_loaded: st.bytes_loaded,
            memory_model: cfg.memory.name().to_string(),
            arrival_controller: simfa_core::lands_by_arrival(cfg, kernel),
            tma_lines: st.tma_lines,
            l2_requests: s.memory.map_or(0, |m| m.l2_requests),
            l2_hits: s.memory.map_or(0, |m| m.l2_hits + m.shadow_hits),
            l2_misses: s.memory.map_or(0, |m| m.l2_misses),
            l2_hit_rate: s.memory.map_or(0.0, |m| m.l2_hit_rate()),
            coalesced: s.memory.map_or(0, |m| m.coalesced),
            l1_loads: st.l1_loads,
            l1_hits: st.l1_hits,
            dram_read_bytes: s.memory.map_or(0, |m| m.dram_read_bytes),
            dram_write_bytes: s.memory.map_or(0, |m| m.dram_write_bytes),
            dram_row_hits: s.memory.map_or(0, |m| m.dram_row_hits),
            dram_row_hit_rate: s.memory.map_or(0.0, |m| m.dram_row_hit_rate()),
            bytes_stored: st.bytes_stored,
            arena_bytes: outcome.arena_bytes,
            tensor_utilization,
            tma_bytes_requested: if s.memory.is_some() {
                st.tma_lines * cfg.l2.line_bytes as u64
            } else {
                st.bytes_loaded + st.bytes_stored
            },
            cold_interval_cycles: outcome.cold_interval(),
            compute_field_cycles: outcome.compute_field(),
            flops_source: "wgmma".to_string(),
            analytic: Analytic::new(cfg, kernel, cycles, walk_budget(st.instructions)),
        }
    }

    /// Reports `flops` (and `tflops`) as the workload counts them rather
    /// than as the WGMMAs issued (FA3's TFLOP/s formula counts useful work
    /// only: masked and clipped blocks do not count).
    pub fn with_workload_flops(mut self, flops: u64) -> Report {
        self.flops = flops;
        self.tflops = if self.time_us > 0.0 {
            flops as f64 / (self.time_us * 1e6)
        } else {
            0.0
        };
        self.back_to_back_tflops = back_to_back(flops, self.time_us, self.launch_gap_us);
        self.flops_source = "workload".to_string();
        self
    }

    /// The report as a JSON object.
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::to_value(self).expect("a report always serialises")
    }

    /// A short human-readable report, one aligned `label value` per line.
    pub fn to_text(&self) -> String {
        let a = &self.analytic;
        let bound = match (a.bound_cycles, a.simulated_over_bound) {
            (Some(b), Some(r)) => format!(
                "bound {b} cycles ({}-bound), simulated {:.2}x the bound",
                a.bound_level, r
            ),
            (Some(b), None) => format!("bound {b} cycles ({}-bound)", a.bound_level),
            (None, _) => "no bound (partial counts)".to_string(),
        };
        let (analytic, roofline) = if a.streamed {
            let none = "none: the instructions of its streamed roles come from the host";
            (none.to_string(), "none".to_string())
        } else {
            (
                format!(
                    "{} FLOP, {} B L2, {} B {}, {:.2} waves ({} CTAs/SM)",
                    a.flops,
                    a.l2_bytes,
                    a.hbm_bytes,
                    a.memory_level,
                    a.waves,
                    a.resident_ctas_per_sm
                ),
                format!(
                    "tensor {:.3} us, l2 {:.3} us, {} {:.3} us; {bound}",
                    a.tensor_us, a.l2_us, a.memory_level, a.memory_us
                ),
            )
        };
        let mut rows: Vec<(&str, String)> = vec![
            ("kernel", format!("{} on {}", self.kernel, self.gpu)),
            (
                "memory",
                format!(
                    "{}{}",
                    self.memory_model,
                    if self.arrival_controller {
                        ", landings by the arrival-order controller"
                    } else {
                        ""
                    }
                ),
            ),
            (
                "cycles",
                format!(
                    "{} ({:.3} us at {} MHz{})",
                    self.cycles,
                    self.time_us,
                    self.clock_mhz,
                    if self.power_limited {
                        ", power-limited"
                    } else {
                        ""
                    }
                ),
            ),
            ("digest", self.digest.clone()),
            ("ctas", self.ctas.to_string()),
            (
                "instructions",
                format!("{} ({} wgmma)", self.instructions, self.wgmmas),
            ),
            (
                "throughput",
                format!(
                    "{:.1} TFLOPS ({:.1} launched back to back, {:.1} us apart)",
                    self.tflops, self.back_to_back_tflops, self.launch_gap_us
                ),
            ),
            (
                "windows",
                format!(
                    "cold interval {} cycles, compute field {} cycles",
                    self.cold_interval_cycles, self.compute_field_cycles
                ),
            ),
            (
                "tensor",
                format!(
                    "{:.1}% utilised ({} busy cycles)",
                    self.engines.tensor_utilization * 100.0,
                    self.engines.tensor_busy_cycles
                ),
            ),
            (
                "l2",
                format!(
                    "{} requests, {:.1}% hits, {} coalesced",
                    self.l2_requests,
                    self.l2_hit_rate * 100.0,
                    self.coalesced
                ),
            ),
            (
                "dram",
                format!(
                    "{} B read, {} B written, {:.1}% row hits",
                    self.dram_read_bytes,
                    self.dram_write_bytes,
                    self.dram_row_hit_rate * 100.0
                ),
            ),
            (
                "tma / port",
                format!(
                    "{} / {} busy cycles",
                    self.engines.tma_busy_cycles, self.engines.port_busy_cycles
                ),
            ),
            (
                "traffic",
                format!(
                    "{} B loaded, {} B stored",
                    self.bytes_loaded, self.bytes_stored
                ),
            ),
            (
                "stalls",
                format!(
                    "{} stall, {} bubble cycles",
                    self.stall_cycles, self.bubble_cycles
                ),
            ),
            ("analytic", analytic),
            ("roofline", roofline),
        ];
        if self.l1_loads > 0 {
            // After the tensor line: where the loads went first.
            let at = rows
                .iter()
                .position(|(l, _)| *l == "l2")
                .unwrap_or(rows.len());
            rows.insert(
                at,
                (
                    "l1",
                    format!(
                        "{} loads, {:.1}% hits",
                        self.l1_loads,
                        self.l1_hits as f64 * 100.0 / self.l1_loads as f64
                    ),
                ),
            );
        }
        let width = rows.iter().map(|(l, _)| l.len()).max().unwrap_or(0);
        let mut out = String::new();
        for (label, value) in rows {
            out.push_str(&format!("{label:<width$}  {value}\n"));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use simfa_core::Instr;

    #[test]
    fn digest_is_16_hex_digits() {
        assert_eq!(format_digest(0), "0000000000000000");
        assert_eq!(format_digest(0xABC), "0000000000000abc");
        assert_eq!(format_digest(u64::MAX), "ffffffffffffffff");
        for d in [1u64, 0x1234_5678_9abc_def0, 1 << 63] {
            let s = format_digest(d);
            assert_eq!(s.len(), 16);
            assert!(s
                .chars()
                .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase()));
            assert_eq!(u64::from_str_radix(&s, 16).unwrap(), d);
        }
    }

    #[test]
    fn report_of_a_small_run() {
        let mut b = simfa_core::builder::Builder::new(Kernel::default(), "tiny").unwrap();
        b.begin_role("main", 1, 32).unwrap();
        for i in [
            Instr::Wgmma {
                n: 128,
                mode: simfa_core::WgmmaMode::Ss,
            },
            Instr::WgmmaCommit,
            Instr::WgmmaWait { n: 0 },
        ] {
            b.op(i).unwrap();
        }
        b.end_role().unwrap();
        let k = b.finish().unwrap();
        let cfg = GpuConfig::h800();
        let out = crate::run::simulate(&cfg, &k, &mut ()).unwrap();
        let r = Report::new(&cfg, &k, &out);
        assert_eq!(r.cycles, 66);
        assert_eq!(r.gpu, "h800");
        assert_eq!(r.kernel, "tiny");
        assert_eq!(r.wgmmas, 1);
        assert_eq!(r.flops, 2 * 64 * 128 * 16);
        assert!((r.time_us - 66.0 / 1830.0).abs() < 1e-12);
        assert!((r.engines.tensor_utilization - 64.0 / (66.0 * 132.0)).abs() < 1e-12);
        let j = r.to_json();
        assert_eq!(j["cycles"].as_u64(), Some(66));
        assert_eq!(j["digest"].as_str().unwrap().len(), 16);
        assert_eq!(j["gpu"], "h800");
        assert!(j["engines"]["tensor_busy_cycles"].is_u64());
        assert!(j["time_us"].is_f64());
        // No transfers: no cold interval; one 64-cycle WGMMA.
        assert_eq!(j["cold_interval_cycles"].as_u64(), Some(0));
        assert_eq!(j["compute_field_cycles"].as_u64(), Some(64));
        assert_eq!(j["flops_source"], "wgmma");
        let w = r.clone().with_workload_flops(1_000_000);
        assert_eq!(w.flops, 1_000_000);
        assert!((w.tflops - 1e6 / (r.time_us * 1e6)).abs() < 1e-9);
        assert_eq!(w.to_json()["flops_source"], "workload");
        let t = r.to_text();
        assert!(t.contains("cycles") && t.contains(&r.digest), "{t}");
        assert!(t.contains("compute field 64 cycles"), "{t}");
    }
}
