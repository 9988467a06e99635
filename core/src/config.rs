//! GPU configurations and the named presets.
//!
//! A [`GpuConfig`] holds every parameter of a simulated GPU, all integers or
//! exact [`Ratio`]s. Presets come from the published figures in
//! `reference/calibration.md` §3: `h800` (H800 SXM5), `h100` (H100 SXM5),
//! `h20`, `h200` and `h800-pcie`. The std shim reads TOML files that name a
//! preset and override any field.

use heapless::String;
use serde::{Deserialize, Serialize};

use crate::error::ConfigError;
use crate::mem::config::{L2Config, ProxyConfig, TmaLineConfig, TxnConfig};
use crate::mem::dram::DramConfig;
use crate::mem::hash::SliceHash;
use crate::time::Ratio;

/// Which memory model serves the TMA engines. All three read the same
/// [`GpuConfig::l2`], [`GpuConfig::dram`] and [`GpuConfig::tma`] (the
/// fixed port reads [`GpuConfig::port`] instead).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum MemoryModel {
    /// The transaction-level hierarchy (`crate::mem::txn`): whole TMA
    /// operations timed in closed form against reservation calendars of
    /// the slices and HBM channels, L2 residency per chunk of lines. Fast
    /// enough for sweeps; checked against [`MemoryModel::Line`].
    #[default]
    Transaction,
    /// The line-level hierarchy, the reference: every 128-byte line
    /// through coalescers, the partitioned L2 with MSHRs and FR-FCFS HBM
    /// controllers with JEDEC command timing. Configuration files may
    /// still call it `"hierarchy"`.
    #[serde(alias = "hierarchy")]
    Line,
    /// The fixed-latency, fixed-bandwidth port ([`GpuConfig::port`]).
    Fixed,
    /// The host's memory: every TMA operation becomes one request in a
    /// queue the embedding host drains and completes
    /// ([`crate::external`]). Not in [`MemoryModel::ALL`], which lists
    /// the models simfa runs on its own.
    External,
}

impl MemoryModel {
    /// Every model simfa runs on its own, in declaration order
    /// ([`MemoryModel::External`] needs a host and is left out).
    pub const ALL: [MemoryModel; 3] = [
        MemoryModel::Transaction,
        MemoryModel::Line,
        MemoryModel::Fixed,
    ];

    /// The name configuration files, `--memory` and reports use:
    /// `"transaction"`, `"line"`, `"fixed"` or `"external"`.
    pub const fn name(self) -> &'static str {
        match self {
            MemoryModel::Transaction => "transaction",
            MemoryModel::Line => "line",
            MemoryModel::Fixed => "fixed",
            MemoryModel::External => "external",
        }
    }

    /// The model called `name` (`"hierarchy"` is [`MemoryModel::Line`]).
    pub fn from_name(name: &str) -> Option<Self> {
        match name {
            "hierarchy" => Some(MemoryModel::Line),
            "external" => Some(MemoryModel::External),
            _ => MemoryModel::ALL.into_iter().find(|m| m.name() == name),
        }
    }

    /// True for the two models of the L2/HBM hierarchy.
    pub const fn is_hierarchy(self) -> bool {
        matches!(self, MemoryModel::Transaction | MemoryModel::Line)
    }
}

impl core::fmt::Display for MemoryModel {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(self.name())
    }
}

/// Which ready WarpGroup an SM's scheduler issues from.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SchedulerPolicy {
    /// Greedy-then-oldest: keep issuing from the last WarpGroup until it
    /// stalls, then pick the oldest ready one (by residency order).
    #[default]
    Gto,
    /// Loose round-robin: the next ready WarpGroup after the last one issued.
    Lrr,
}

/// The fixed-latency, fixed-bandwidth memory port (the stand-in for the
/// memory hierarchy). Each SM's transfers are serialised at
/// `bytes_per_cycle` and land `latency` cycles after their last byte leaves.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FixedPortConfig {
    /// Cycles from a transfer's serialisation to its completion.
    pub latency: u32,
    /// Per-SM bandwidth in bytes per SM cycle.
    pub bytes_per_cycle: Ratio,
}

/// The SM's L1 data cache, which thread loads marked for it
/// ([`crate::Instr::LdGlobal`] with `l1`: `ld.global` into registers,
/// `cp.async.ca`) go through. TMA copies bypass it, as on the hardware.
/// Lines are 128 bytes of four 32-byte sectors; the SM's L1 and shared
/// memory are one array, and the L1 gets what the kernel's shared-memory
/// carveout leaves (see the core's `sim::l1`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct L1Config {
    /// Bytes of the SM's unified L1 and shared memory (256 KiB on sm_90);
    /// 0: no L1 (every load goes to the L2).
    pub unified_bytes: u32,
    /// Sets of the cache; its ways are the lines its capacity holds over
    /// the sets (least recently used replacement within a set).
    pub sets: u16,
    /// Cycles from a hit's requests leaving the load/store unit to its
    /// data: the pointer chase's 32-cycle L1 plateau (`calibration.md`
    /// §1) less the cycles of the chase's own instructions, fitted by
    /// `simfa calibrate pchase --loads regular`.
    pub hit_cycles: u32,
}

/// The SM's shared SIMT units, which `compute` instructions of all resident
/// WarpGroups share (see the core's `sim::units` for the mechanism).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UnitThroughput {
    /// MUFU (exp, rcp) operations per cycle per SM.
    pub mufu: u32,
    /// FP32 operations per cycle per SM.
    pub fp32: u32,
    /// 16-bit operations (packed, per result) and conversions per cycle per SM.
    pub fp16: u32,
    /// Integer operations per cycle per SM.
    pub int: u32,
    /// Warp instructions the SM issues per cycle: one per sub-partition.
    pub issue: u32,
    /// Share of the sub-partitions' SIMT issue bandwidth that a tensor pipe
    /// streaming its FP32 accumulators through the register file takes
    /// (one warp-register read and written per cycle at the N/2 law). The
    /// tensor/SIMT interaction's one parameter, fitted by `simfa calibrate
    /// sm` on the H100 FA3 ablation; a slower tensor pipe (H20) moves its
    /// accumulators proportionally less often and takes proportionally less.
    pub rf_share: Ratio,
}

impl UnitThroughput {
    /// Operations per cycle per SM of one class.
    pub const fn rate(&self, c: crate::isa::UnitClass) -> u32 {
        match c {
            crate::isa::UnitClass::Fp32 => self.fp32,
            crate::isa::UnitClass::Mufu => self.mufu,
            crate::isa::UnitClass::Fp16 => self.fp16,
            crate::isa::UnitClass::Int => self.int,
        }
    }
}

/// A deliberate inconsistency injected into the timing model, so tests can
/// prove that the read-after-transfer checker (the std shim's
/// `ConsistencyChecker`) fails when it should. **Test-only**: every preset
/// and every configuration file has [`Fault::None`]; the field is neither
/// written to nor read from TOML files.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Fault {
    /// The model as calibrated.
    #[default]
    None,
    /// TMA completions are signalled early. With the fixed port and the
    /// transaction-level model, a transfer's completion (its mbarrier
    /// bytes, its `TmaDone`) comes `cycles` cycles before it lands (but
    /// never in its issue cycle). With the line-level model, an
    /// operation's completion comes `cycles` cycles after its last line
    /// request leaves the engine, or when its last line returns if that is
    /// sooner.
    EarlyTma {
        /// How far ahead of the data the completion is signalled.
        cycles: u32,
    },
    /// An L2 read that finds its line's (or, transaction-level, its
    /// chunk's) fill still in flight (it would merge
    /// into that fill's MSHR) is answered as a hit, after the hit latency,
    /// instead of waiting for the fill.
    EarlyHit,
    /// `stage.acquire` succeeds without waiting for the consumers to release
    /// the stage's previous round.
    EarlyStage,
}

impl Fault {
    /// True for [`Fault::None`].
    pub const fn is_none(&self) -> bool {
        matches!(self, Fault::None)
    }
}

/// Every parameter of a simulated GPU.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GpuConfig {
    /// Display name, e.g. `"h800"`.
    pub name: String<24>,
    /// Number of SMs.
    pub sms: u16,
    /// SM clock in MHz: the most the board runs at (reports convert cycles
    /// to time with it, or with the lower clock the power limit sustains).
    pub clock_mhz: u32,
    /// SM clock in MHz that the board's power limit sustains with the
    /// tensor pipe doing its peak math every cycle; a run at a fraction `u`
    /// of that sustains `tensor_sustained_mhz * u^(-1/3)`, at most
    /// `clock_mhz` (see [`crate::power`]). 0: the limit never binds.
    pub tensor_sustained_mhz: u32,
    /// Shared memory per SM, bytes.
    pub smem_per_sm: u32,
    /// Largest shared memory one CTA may use, bytes.
    pub smem_per_cta: u32,
    /// 32-bit registers per SM.
    pub regs_per_sm: u32,
    /// Largest register count per thread.
    pub regs_per_thread: u16,
    /// Resident warps per SM (a WarpGroup is 4 warps).
    pub warps_per_sm: u16,
    /// Resident CTAs per SM.
    pub ctas_per_sm: u16,
    /// Scheduler policy of every SM.
    pub scheduler: SchedulerPolicy,
    /// WGMMA m64nNk16 math law: ceil(N * wgmma_cycles_per_n) cycles of the
    /// tensor pipe. 1/2 on H100/H800 (the paper's N/2 law); 79/40 on the
    /// H20, whose per-SM dense FP16 peak is 3.95 times lower (148 TFLOP/s
    /// on 78 SMs against 989 on 132). See [`GpuConfig::wgmma_cycles`].
    pub wgmma_cycles_per_n: Ratio,
    /// Shared-memory bytes per cycle the tensor pipe can read for WGMMA
    /// operands: A (2048 bytes of m64k16, in SS mode) and B (32 bytes per
    /// N column). Bounds small-N WGMMAs: m64n8k16 SS reads 2304 bytes.
    pub wgmma_smem_bytes_per_cycle: u32,
    /// Fewest cycles any WGMMA occupies the tensor pipe (its pipeline
    /// latency; RS-mode m64n8k16 and m64n16k16 take 13 on the H800).
    pub wgmma_min_cycles: u32,
    /// Entries of each SM's tensor-core instruction buffer (WGMMAs issued
    /// and not yet complete).
    pub wgmma_buffer: u16,
    /// Committed, unfinished WGMMA groups one WarpGroup may have.
    pub max_wgmma_groups: u16,
    /// TMA setup cycles common to every TMA operation.
    pub tma_setup_common: u32,
    /// Extra TMA setup cycles for tensor-map (descriptor) requests.
    pub tma_setup_tensor: u32,
    /// TMA operations in flight per SM.
    pub tma_slots: u16,
    /// Cycles from a CTA's admission to its first issue.
    pub cta_launch_cycles: u32,
    /// Nanoseconds between one kernel's end and the next one's start when
    /// a host launches kernels back to back: what timing repeated launches
    /// with events (as GEMM and attention benchmarks do) adds to each
    /// kernel's own time. Off the timing path: reports give the kernel's
    /// time and, with this gap, its back-to-back period (`simfa
    /// validate` compares host-timed figures with the latter).
    pub launch_gap_ns: u32,
    /// Cycles the SM's store path takes per sector write request of
    /// register stores ([`crate::Instr::StGlobal`]), shared by the SM's
    /// WarpGroups: an L1 write-through request that carries part of a
    /// 32-byte sector. Fitted by `simfa calibrate store` on fast.cu's
    /// measured epilogue (data/register_stores.csv).
    pub store_request_cycles: Ratio,
    /// Cycles the SM's load/store unit takes per sector read request of
    /// loads by threads into shared memory or registers
    /// ([`crate::Instr::LdGlobal`]: `cp.async`, `ld.global`) and per 32
    /// bytes of shared-memory moves ([`crate::Instr::SmemMove`]), shared
    /// with register stores: the L1 returns 128 bytes (four sectors) per cycle
    /// (H100: 32.3 TB/s of shared-memory bandwidth over 144 SMs at
    /// 1755 MHz), so 1/4. Not fitted.
    pub load_request_cycles: Ratio,
    /// The SM's L1 data cache.
    pub l1: L1Config,
    /// Which memory model serves the TMA engines.
    pub memory: MemoryModel,
    /// The fixed memory port (with `memory = "fixed"`).
    pub port: FixedPortConfig,
    /// The L2 (with `memory = "transaction"` or `"line"`).
    pub l2: L2Config,
    /// The HBM (with `memory = "transaction"` or `"line"`).
    pub dram: DramConfig,
    /// Line-request generation of the TMA engines (with `memory =
    /// "transaction"` or `"line"`).
    pub tma: TmaLineConfig,
    /// What only the transaction-level model needs.
    pub transaction: TxnConfig,
    /// Non-tensor unit throughputs.
    pub units: UnitThroughput,
    /// Every run stops with an error after this many cycles.
    pub watchdog_cycles: u64,
    /// Seed of the core's random generator.
    pub seed: u64,
    /// Test-only fault injection ([`Fault::None`] in every preset). Skipped
    /// when serialising and defaulted when absent, so configuration files
    /// and serialised presets do not mention it, and a file that sets it
    /// gets the unknown-key error.
    #[serde(default, skip_serializing)]
    pub fault: Fault,
}

/// Names of the built-in presets.
pub const PRESETS: [&str; 5] = ["h800", "h100", "h20", "h200", "h800-pcie"];

fn name(s: &str) -> String<24> {
    let mut n = String::new();
    // Preset names are short literals; truncation cannot happen.
    let _ = n.push_str(s);
    n
}

/// The 50 MiB, two-partition L2 of the H100/H800 family: 80 slices of 80
/// sets x 64 ways x 128 B. The latencies, the associativity and the proxy
/// knobs were fitted once with `simfa calibrate pchase` against the H800
/// PCIe pointer chase (docs/accuracy.md); nothing is fitted per
/// workload.
const L2_50MB: L2Config = L2Config {
    line_bytes: 128,
    slices: 80,
    sets: 80,
    ways: 64,
    hash: SliceHash::Xor,
    hit_latency: 147,
    xbar_latency: 90,
    far_latency: 110,
    slice_bytes_per_cycle: Ratio::new(128, 1),
    far_bytes_per_cycle: Ratio::new(128, 1),
    fill_latency: 240,
    mshrs: 256,
    coalescer: true,
    coalescer_sms: 2,
    dram_hash: true,
    proxy: ProxyConfig {
        enabled: true,
        max_prob_permille: 200,
        threshold_permille: 850,
    },
};

/// The tensor/SIMT interaction of every Hopper SM (the register file is
/// the same silicon on all of them): the value `simfa calibrate sm` fitted
/// on the H100 FA3 kernel (28/32, `data/fa3_h100_ablation.csv`;
/// docs/accuracy.md).
const RF_SHARE: Ratio = Ratio::new(7, 8);

/// TMA engines emit one line request per cycle with up to 256 in flight.
const TMA_LINES: TmaLineConfig = TmaLineConfig {
    lines_per_cycle: 1,
    line_interval: 1,
    max_lines: 256,
    dedup: true,
    dedup_lines: 4096,
};

/// The sm_90 L1: 256 KiB shared with shared memory, 64 sets, hits after
/// `simfa calibrate pchase --loads regular`.
pub const L1_SM90: L1Config = L1Config {
    unified_bytes: 256 * 1024,
    sets: 64,
    hit_cycles: 29,
};

/// Per-SM bandwidth in bytes per cycle from a GPU-wide figure.
const fn per_sm_bw(gb_per_s: u32, sms: u16, clock_mhz: u32) -> Ratio {
    // bytes/cycle/SM = GB/s * 1e9 / (sms * MHz * 1e6) = (GB/s * 1000) / (sms * MHz)
    Ratio::new(gb_per_s * 1000, sms as u32 * clock_mhz)
}

/// Cycles per sector write request of register stores: `simfa calibrate
/// store --fit` on data/register_stores.csv (fast.cu kernel 5's measured
/// epilogue).
pub const STORE_REQUEST_CYCLES: Ratio = Ratio::new(2279, 1024);

impl GpuConfig {
    /// Cycles of an atomic's round trip from an SM to an L2 slice of its
    /// partition and back: the crossbar both ways and the slice's hit
    /// latency (a lock's `atomicCAS`, [`crate::Instr::LockAcquire`]).
    pub fn atomic_round_trip(&self) -> u64 {
        2 * self.l2.xbar_latency as u64 + self.l2.hit_latency as u64
    }

    /// Cycles until a release's or an add's atomic, sent and not waited
    /// for, has crossed to the L2 (the crossbar's one-way latency, at least
    /// one): a lock's `atomicExch`, a counter's add.
    pub fn atomic_crossing(&self) -> u64 {
        (self.l2.xbar_latency as u64).max(1)
    }

    /// H800 SXM5: 132 SMs at 1830 MHz, HBM3 3.35 TB/s (the paper's Table II machine).
    pub fn h800() -> Self {
        GpuConfig {
            name: name("h800"),
            sms: 132,
            clock_mhz: 1830,
            // `simfa calibrate sm`: about 1600 MHz at 865 TFLOP/s under
            // sustained tensor load (data/clocks.csv).
            tensor_sustained_mhz: 1600,
            smem_per_sm: 228 * 1024,
            smem_per_cta: 227 * 1024,
            regs_per_sm: 65536,
            regs_per_thread: 255,
            warps_per_sm: 64,
            ctas_per_sm: 32,
            scheduler: SchedulerPolicy::Gto,
            wgmma_cycles_per_n: Ratio::new(1, 2),
            wgmma_smem_bytes_per_cycle: 128,
            wgmma_min_cycles: 13,
            wgmma_buffer: 16,
            max_wgmma_groups: 8,
            tma_setup_common: 40,
            tma_setup_tensor: 130,
            tma_slots: 32,
            cta_launch_cycles: 0,
            // The period of back-to-back launches of a nearly empty
            // kernel: 2.18-2.34 us with CUDA graphs and 2.43-2.52 us with
            // stream launches on an H200 (gpu-benches gpu-small-kernels),
            // about 2.1 us on an H100 (data/launch_gap.csv).
            launch_gap_ns: 2200,
            store_request_cycles: STORE_REQUEST_CYCLES,
            load_request_cycles: Ratio::new(1, 4),
            l1: L1_SM90,
            memory: MemoryModel::Transaction,
            port: FixedPortConfig {
                latency: 500,
                bytes_per_cycle: per_sm_bw(3350, 132, 1830),
            },
            l2: L2_50MB,
            dram: DramConfig::hbm3_h100(),
            tma: TMA_LINES,
            transaction: TxnConfig::DEFAULT,
            units: UnitThroughput {
                mufu: 16,
                fp32: 128,
                fp16: 256,
                int: 64,
                issue: 4,
                rf_share: RF_SHARE,
            },
            watchdog_cycles: 10_000_000_000,
            seed: 0x5EED,
            fault: Fault::None,
        }
    }

    /// H100 SXM5: same SM array and HBM3 as the H800 SXM5.
    pub fn h100() -> Self {
        GpuConfig {
            name: name("h100"),
            // `simfa calibrate sm` on the cuBLAS GEMMs of data/gemm_dense.csv.
            tensor_sustained_mhz: 1668,
            ..Self::h800()
        }
    }

    /// H20: 78 SMs, HBM3 4.0 TB/s, a tensor pipe 3.95 times slower per SM
    /// than the H800's (989 TF / 132 SMs vs 148 TF / 78 SMs at equal
    /// clocks). The paper's k_eff = 5.176 (3.95 x 1.31) cannot be a pipe
    /// slowdown: it caps dense FP16 at 112.9 TFLOP/s, and torch.matmul
    /// reaches 142.1 on an H20 (calibration.md §7); the extra 1.31 of FA3
    /// comes from its softmax sharing the SM with the tensor pipe
    /// ([`UnitThroughput::rf_share`]).
    pub fn h20() -> Self {
        GpuConfig {
            name: name("h20"),
            sms: 78,
            // `simfa calibrate sm` on the torch GEMMs of data/gemm_dense.csv.
            tensor_sustained_mhz: 1741,
            wgmma_cycles_per_n: Ratio::new(79, 40),
            port: FixedPortConfig {
                latency: 500,
                bytes_per_cycle: per_sm_bw(4000, 78, 1830),
            },
            dram: DramConfig::hbm3_h20(),
            ..Self::h800()
        }
    }

    /// H200: the H100's SM array with HBM3e at 4.8 TB/s.
    pub fn h200() -> Self {
        GpuConfig {
            name: name("h200"),
            // `simfa calibrate sm`: about 1465 MHz at 708.5 TFLOP/s on a
            // long BF16 GEMM at 700 W (data/clocks.csv).
            tensor_sustained_mhz: 1412,
            port: FixedPortConfig {
                latency: 500,
                bytes_per_cycle: per_sm_bw(4800, 132, 1830),
            },
            l2: L2Config {
                slices: 96,
                sets: 67,
                ..L2_50MB
            },
            dram: DramConfig::hbm3e_h200(),
            ..Self::h800()
        }
    }

    /// H800 PCIe: 114 SMs at 1755 MHz, HBM2e 2.0 TB/s.
    pub fn h800_pcie() -> Self {
        GpuConfig {
            name: name("h800-pcie"),
            sms: 114,
            clock_mhz: 1755,
            // `simfa calibrate sm` on Luo et al.'s WGMMA throughputs at the
            // 350 W cap (data/wgmma_h800pcie.csv).
            tensor_sustained_mhz: 1377,
            port: FixedPortConfig {
                latency: 500,
                bytes_per_cycle: per_sm_bw(2000, 114, 1755),
            },
            dram: DramConfig::hbm2e_h800_pcie(),
            ..Self::h800()
        }
    }

    /// Looks a preset up by name (see [`PRESETS`]).
    pub fn preset(name: &str) -> Option<Self> {
        match name {
            "h800" => Some(Self::h800()),
            "h100" => Some(Self::h100()),
            "h20" => Some(Self::h20()),
            "h200" => Some(Self::h200()),
            "h800-pcie" => Some(Self::h800_pcie()),
            _ => None,
        }
    }

    /// WarpGroup slots per SM.
    pub const fn wg_slots(&self) -> usize {
        (self.warps_per_sm / 4) as usize
    }

    /// Cycles one m64nNk16 WGMMA occupies the tensor pipeline: the most
    /// of its math (`ceil(N * wgmma_cycles_per_n)`), its shared-memory
    /// operand reads (A's 2048 bytes in SS mode and B's `32 * N`, at
    /// `wgmma_smem_bytes_per_cycle`) and the pipeline's `wgmma_min_cycles`.
    /// On the H800 this is Luo et al.'s latency table exactly: SS
    /// N = 8, 16, 32 take 18, 20, 24 cycles (operand-bound), RS 13, 13, 16,
    /// and N >= 64 takes N / 2 either way.
    pub const fn wgmma_cycles(&self, n: u16, mode: crate::isa::WgmmaMode) -> u64 {
        let math = self.wgmma_cycles_per_n.mul_ceil(n as u64);
        let a = match mode {
            crate::isa::WgmmaMode::Ss => 64 * 16 * 2,
            crate::isa::WgmmaMode::Rs => 0,
        };
        let bytes = a + 32 * n as u64;
        let bw = if self.wgmma_smem_bytes_per_cycle == 0 {
            1
        } else {
            self.wgmma_smem_bytes_per_cycle as u64
        };
        let smem = bytes.div_ceil(bw);
        let mut c = self.wgmma_min_cycles as u64;
        if math > c {
            c = math;
        }
        if smem > c {
            c = smem;
        }
        if c == 0 {
            1
        } else {
            c
        }
    }

    /// Accumulator traffic of the tensor pipe relative to the N/2 law (1 on
    /// the H100, 40/79 on the H20's slower pipe), at most 1: what scales
    /// [`UnitThroughput::rf_share`].
    pub const fn tensor_rf_traffic(&self) -> Ratio {
        // (1/2) / cycles_per_n = den / (2 num)
        let r = self.wgmma_cycles_per_n;
        if 2 * r.num <= r.den {
            Ratio::new(1, 1)
        } else {
            Ratio::new(r.den, 2 * r.num)
        }
    }

    /// Checks every field's range.
    pub fn validate(&self) -> Result<(), ConfigError> {
        fn check(ok: bool, field: &'static str, problem: &'static str) -> Result<(), ConfigError> {
            if ok {
                Ok(())
            } else {
                Err(ConfigError { field, problem })
            }
        }
        check((1..=4096).contains(&self.sms), "sms", "must be in 1..=4096")?;
        check(self.clock_mhz > 0, "clock_mhz", "must be positive")?;
        check(
            self.launch_gap_ns <= 1_000_000_000,
            "launch_gap_ns",
            "must be at most 10^9 (one second)",
        )?;
        for (r, field) in [
            (self.store_request_cycles, "store_request_cycles"),
            (self.load_request_cycles, "load_request_cycles"),
        ] {
            check(
                r.den > 0 && r.num <= 1 << 20 && r.den <= 1 << 20,
                field,
                "denominator must be positive, numerator and denominator at most 1048576",
            )?;
        }
        let l1 = &self.l1;
        check(
            l1.unified_bytes <= 1 << 24 && l1.unified_bytes % 128 == 0,
            "l1.unified_bytes",
            "must be a multiple of 128 of at most 16 MiB",
        )?;
        check(
            l1.unified_bytes == 0
                || ((1..=4096).contains(&l1.sets) && l1.unified_bytes / 128 % l1.sets as u32 == 0),
            "l1.sets",
            "must be in 1..=4096 and divide the unified array's 128-byte lines",
        )?;
        check(
            l1.hit_cycles <= 1_000_000,
            "l1.hit_cycles",
            "must be at most 10^6",
        )?;
        check(
            self.warps_per_sm >= 4 && self.warps_per_sm % 4 == 0 && self.warps_per_sm <= 128,
            "warps_per_sm",
            "must be a multiple of 4 in 4..=128",
        )?;
        check(
            (1..=64).contains(&self.ctas_per_sm),
            "ctas_per_sm",
            "must be in 1..=64",
        )?;
        check(
            self.regs_per_thread > 0,
            "regs_per_thread",
            "must be positive",
        )?;
        check(self.regs_per_sm > 0, "regs_per_sm", "must be positive")?;
        check(
            self.wgmma_cycles_per_n.num > 0 && self.wgmma_cycles_per_n.den > 0,
            "wgmma_cycles_per_n",
            "numerator and denominator must be positive",
        )?;
        check(
            (1..=1024).contains(&self.wgmma_buffer),
            "wgmma_buffer",
            "must be in 1..=1024",
        )?;
        check(
            (1..=64).contains(&self.max_wgmma_groups),
            "max_wgmma_groups",
            "must be in 1..=64",
        )?;
        check(
            (1..=1024).contains(&self.tma_slots),
            "tma_slots",
            "must be in 1..=1024",
        )?;
        check(
            self.port.bytes_per_cycle.num > 0 && self.port.bytes_per_cycle.den > 0,
            "port.bytes_per_cycle",
            "numerator and denominator must be positive",
        )?;
        let u = &self.units;
        check(
            u.mufu > 0 && u.fp32 > 0 && u.fp16 > 0 && u.int > 0,
            "units",
            "throughputs must be positive",
        )?;
        check(
            (1..=1 << 20).contains(&u.mufu)
                && (1..=1 << 20).contains(&u.fp32)
                && (1..=1 << 20).contains(&u.fp16)
                && (1..=1 << 20).contains(&u.int),
            "units",
            "throughputs must be at most 1048576 operations per cycle",
        )?;
        check(
            (1..=64).contains(&u.issue),
            "units.issue",
            "must be in 1..=64 warp instructions per cycle",
        )?;
        check(
            u.rf_share.den > 0 && u.rf_share.num <= u.rf_share.den && u.rf_share.den <= 1 << 20,
            "units.rf_share",
            "must be a fraction in [0, 1] with a denominator of at most 2^20",
        )?;
        check(
            self.wgmma_smem_bytes_per_cycle > 0,
            "wgmma_smem_bytes_per_cycle",
            "must be positive",
        )?;
        check(
            self.watchdog_cycles > 0,
            "watchdog_cycles",
            "must be positive",
        )?;
        self.l2.validate()?;
        self.dram.validate()?;
        self.tma.validate()?;
        self.transaction.validate()?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn presets_validate_and_have_their_names() {
        for p in PRESETS {
            let c = GpuConfig::preset(p).unwrap();
            c.validate().unwrap();
            assert_eq!(c.name.as_str(), p);
        }
        assert!(GpuConfig::preset("a100").is_none());
    }

    #[test]
    fn wgmma_law() {
        use crate::isa::WgmmaMode::{Rs, Ss};
        let h = GpuConfig::h800();
        assert_eq!(h.wgmma_cycles(256, Ss), 128);
        assert_eq!(h.wgmma_cycles(176, Ss), 88);
        // Luo et al.'s latency table (calibration.md §7), SS then RS.
        for (n, ss, rs) in [
            (256, 128, 128),
            (128, 64, 64),
            (64, 32, 32),
            (32, 24, 16),
            (16, 20, 13),
            (8, 18, 13),
        ] {
            assert_eq!(h.wgmma_cycles(n, Ss), ss, "SS N={n}");
            assert_eq!(h.wgmma_cycles(n, Rs), rs, "RS N={n}");
        }
        assert_eq!(h.tensor_rf_traffic(), Ratio::new(1, 1));
        // H20: 3.95 times the H800's cycles per N.
        let h20 = GpuConfig::h20();
        assert_eq!(h20.wgmma_cycles(128, Ss), 253);
        assert_eq!(h20.tensor_rf_traffic(), Ratio::new(40, 158));
    }

    #[test]
    fn memory_hierarchy_fields_are_validated() {
        let mut c = GpuConfig::h800();
        c.l2.slices = 3;
        assert_eq!(c.validate().unwrap_err().field, "l2.slices");
        let mut c = GpuConfig::h800();
        c.l2.sets = 0;
        assert_eq!(c.validate().unwrap_err().field, "l2.sets");
        let mut c = GpuConfig::h800();
        c.tma.max_lines = 0;
        assert_eq!(c.validate().unwrap_err().field, "tma.max_lines");
        let mut c = GpuConfig::h800();
        c.l2.proxy.max_prob_permille = 1001;
        assert_eq!(c.validate().unwrap_err().field, "l2.proxy");
        let mut c = GpuConfig::h800();
        c.dram.channels = 0;
        assert!(c.validate().unwrap_err().field.starts_with("dram."));
    }

    #[test]
    fn invalid_fields_are_named() {
        let mut c = GpuConfig::h800();
        c.warps_per_sm = 6;
        assert_eq!(c.validate().unwrap_err().field, "warps_per_sm");
        let mut c = GpuConfig::h800();
        c.port.bytes_per_cycle.den = 0;
        assert_eq!(c.validate().unwrap_err().field, "port.bytes_per_cycle");
    }
}
