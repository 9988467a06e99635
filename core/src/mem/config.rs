//! Parameters of the L2 side of the memory hierarchy and of the TMA
//! engines' request generation.

use serde::{Deserialize, Serialize};

use crate::error::ConfigError;
use crate::mem::hash::SliceHash;

/// The remote-copy proxy of the partitioned L2 (paper §IV-C).
///
/// When a request from an SM resolves to a slice in the far partition and
/// hits there, a shadow copy of the line is inserted into the near
/// partition's mirror slice: always while that slice is less than
/// `threshold_permille` full, and with probability `max_prob_permille`/1000
/// above it. Draws come from the core's seeded generator.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProxyConfig {
    /// Model the proxy at all.
    pub enabled: bool,
    /// Insertion probability above the threshold, in thousandths.
    pub max_prob_permille: u16,
    /// Occupancy of the near slice (valid lines per capacity, thousandths)
    /// below which every far hit is copied.
    pub threshold_permille: u16,
}

/// The L2: coalescers, crossbar, hashed slices in two partitions.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct L2Config {
    /// Line size in bytes (a power of two).
    pub line_bytes: u32,
    /// Slices in all; the first half form partition 0, the rest partition 1.
    pub slices: u16,
    /// Sets per slice.
    pub sets: u32,
    /// Ways per set.
    pub ways: u16,
    /// Slice selection.
    pub hash: SliceHash,
    /// Cycles from a request reaching a slice to its data leaving it on a hit.
    pub hit_latency: u32,
    /// One-way crossbar cycles between an SM and a slice of its partition.
    pub xbar_latency: u32,
    /// Extra one-way cycles to reach a slice of the far partition.
    pub far_latency: u32,
    /// Cycles between two requests a slice accepts (its bandwidth is one
    /// line per `slice_interval` cycles).
    pub slice_interval: u32,
    /// Cycles from DRAM data returning to the slice to the fill being usable.
    pub fill_latency: u32,
    /// MSHRs per slice (misses in flight to DRAM); when full, further misses
    /// of that slice wait in order.
    pub mshrs: u16,
    /// Merge identical in-flight reads of an SM pair in a request coalescer.
    pub coalescer: bool,
    /// Fold higher line-address bits into the lower ones before the DRAM
    /// address mapping (`line ^ (line >> 7) ^ (line >> 14)`, a bijection),
    /// the way GPUs hash memory partitions, so that strided streams spread
    /// over every pseudo-channel and bank.
    pub dram_hash: bool,
    /// The remote-copy proxy.
    pub proxy: ProxyConfig,
}

impl L2Config {
    /// Capacity in bytes.
    pub const fn bytes(&self) -> u64 {
        self.line_bytes as u64 * self.slices as u64 * self.sets as u64 * self.ways as u64
    }

    /// Peak bandwidth of all slices in bytes per cycle, as `(num, den)`:
    /// one line per slice every `slice_interval` cycles (`den` at least
    /// 1).
    pub const fn peak_bytes_per_cycle(&self) -> (u64, u64) {
        let num = self.slices as u64 * self.line_bytes as u64;
        let den = if self.slice_interval == 0 {
            1
        } else {
            self.slice_interval as u64
        };
        (num, den)
    }

    /// The address the DRAM controllers decode for line address `addr`:
    /// with [`L2Config::dram_hash`], the line number folded as
    /// `line ^ (line >> 7) ^ (line >> 14)` (a bijection).
    #[inline]
    pub const fn dram_address(&self, addr: u64) -> u64 {
        if !self.dram_hash {
            return addr;
        }
        let lb = self.line_bytes as u64;
        let line = addr / lb;
        (line ^ (line >> 7) ^ (line >> 14)).wrapping_mul(lb)
    }

    /// Checks every field's range.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let bad = |field, problem| Err(ConfigError { field, problem });
        if !self.line_bytes.is_power_of_two() || !(16..=4096).contains(&self.line_bytes) {
            return bad("l2.line_bytes", "must be a power of two in 16..=4096");
        }
        if self.slices < 2
            || self.slices % 2 != 0
            || self.slices as usize > crate::mem::system::MAX_SLICES
        {
            return bad("l2.slices", "must be even, in 2..=256 (two partitions)");
        }
        if self.sets == 0 || self.sets > 1 << 20 {
            return bad("l2.sets", "must be in 1..=2^20");
        }
        if self.ways == 0 || self.ways > 64 {
            return bad("l2.ways", "must be in 1..=64");
        }
        if self.slice_interval == 0 {
            return bad("l2.slice_interval", "must be at least 1");
        }
        if self.mshrs == 0 {
            return bad("l2.mshrs", "must be at least 1");
        }
        if self.proxy.max_prob_permille > 1000 || self.proxy.threshold_permille > 1000 {
            return bad(
                "l2.proxy",
                "probability and threshold are thousandths (0..=1000)",
            );
        }
        Ok(())
    }
}

/// How the TMA engine of each SM turns operations into line requests.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TmaLineConfig {
    /// Line requests the engine emits per cycle.
    pub lines_per_cycle: u16,
    /// Line requests of one SM in flight at once (its request-tracking
    /// resources); the engine pauses when they are all busy.
    pub max_lines: u16,
    /// Remove repeated lines of a box (the paper's deduplication).
    pub dedup: bool,
    /// Capacity of each SM's deduplication set, in lines. A box with more
    /// distinct lines than this (only when rows share lines out of order)
    /// keeps its remaining repeats.
    pub dedup_lines: u32,
}

impl TmaLineConfig {
    /// Checks every field's range.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let bad = |field, problem| Err(ConfigError { field, problem });
        if self.lines_per_cycle == 0 {
            return bad("tma.lines_per_cycle", "must be at least 1");
        }
        if self.max_lines == 0 {
            return bad("tma.max_lines", "must be at least 1");
        }
        if self.dedup_lines == 0 || self.dedup_lines > 1 << 20 {
            return bad("tma.dedup_lines", "must be in 1..=2^20");
        }
        Ok(())
    }
}

/// Parameters of the transaction-level memory model (`memory =
/// "transaction"`) that the line-level model does not have.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TxnConfig {
    /// Most lines of one chunk, the unit of L2 residency (at most the
    /// L2's `ways`; larger values are clamped to it). 1 tracks single
    /// lines, as the line-level model does, at the cost of speed.
    pub chunk_lines: u16,
    /// Entries of each SM pair's request coalescer (in-flight chunks it
    /// remembers), a power of two.
    pub coalescer_entries: u16,
    /// Whether to also serve the DRAM reads, in the order they reach the
    /// DRAM, with the line-level FR-FCFS controller, and land each load
    /// when that returns its reads (see [`crate::mem::txn::arrival`]): the
    /// line-level model's DRAM timing at roughly half the speed. By
    /// default ([`ArrivalController::Auto`]) only for memory-bound
    /// kernels.
    #[serde(default)]
    pub arrival_controller: ArrivalController,
}

/// When the transaction model lands loads by the arrival-order controller
/// (`transaction.arrival_controller`): `"auto"` (the default), `"on"`
/// (or `true`) or `"off"` (or `false`).
///
/// `Auto` decides once per run, before it starts, from the kernel's
/// analytical estimate ([`crate::analytic::memory_bound`]): on when
/// moving the grid's bytes through the L2 or its compulsory bytes through
/// the HBM at their peak rates takes at least as long as its WGMMAs on
/// the tensor pipes, and for grids of fewer CTAs than SMs; off otherwise.
/// The HBM service model books requests in hand-over order and without
/// FR-FCFS's wait of a row switch behind younger row hits, which makes it
/// optimistic when the DRAM queues are what a kernel waits on, and when
/// less than a wave makes each CTA's time the chain of its own loads'
/// latencies; a tensor-bound kernel of a wave or more hides that, and
/// runs at the service model's speed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum ArrivalController {
    /// On for memory-bound kernels and grids of less than a wave, off
    /// for tensor-bound ones.
    #[default]
    Auto,
    /// Always.
    On,
    /// Never: landings from the HBM service model alone.
    Off,
}

impl ArrivalController {
    /// Every policy, in declaration order.
    pub const ALL: [ArrivalController; 3] = [
        ArrivalController::Auto,
        ArrivalController::On,
        ArrivalController::Off,
    ];

    /// The name configuration files and reports use: `"auto"`, `"on"` or
    /// `"off"`.
    pub const fn name(self) -> &'static str {
        match self {
            ArrivalController::Auto => "auto",
            ArrivalController::On => "on",
            ArrivalController::Off => "off",
        }
    }

    /// The policy named `name` (as [`ArrivalController::name`] gives it).
    pub fn from_name(name: &str) -> Option<ArrivalController> {
        ArrivalController::ALL
            .into_iter()
            .find(|p| p.name() == name)
    }
}

/// Human-readable formats (TOML, JSON) write the name; binary ones (the
/// snapshot fingerprint) the variant's index.
impl Serialize for ArrivalController {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        if s.is_human_readable() {
            s.serialize_str(self.name())
        } else {
            s.serialize_u8(*self as u8)
        }
    }
}

/// Human-readable formats accept a name or a boolean (`true` is `"on"`,
/// `false` is `"off"`, as before `"auto"` existed); binary ones the
/// variant's index.
impl<'de> Deserialize<'de> for ArrivalController {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl serde::de::Visitor<'_> for V {
            type Value = ArrivalController;
            fn expecting(&self, f: &mut core::fmt::Formatter) -> core::fmt::Result {
                f.write_str("\"auto\", \"on\", \"off\", true or false")
            }
            fn visit_bool<E: serde::de::Error>(self, v: bool) -> Result<Self::Value, E> {
                Ok(if v {
                    ArrivalController::On
                } else {
                    ArrivalController::Off
                })
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Self::Value, E> {
                ArrivalController::from_name(v)
                    .ok_or_else(|| E::invalid_value(serde::de::Unexpected::Str(v), &self))
            }
            fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<Self::Value, E> {
                ArrivalController::ALL
                    .get(v as usize)
                    .copied()
                    .ok_or_else(|| E::invalid_value(serde::de::Unexpected::Unsigned(v), &self))
            }
        }
        if d.is_human_readable() {
            d.deserialize_any(V)
        } else {
            d.deserialize_u8(V)
        }
    }
}

impl TxnConfig {
    /// The presets' values: chunks of up to 32 lines, 64 coalescer
    /// entries, the arrival-order controller for memory-bound kernels and
    /// grids of less than a wave.
    pub const DEFAULT: TxnConfig = TxnConfig {
        chunk_lines: 32,
        coalescer_entries: 64,
        arrival_controller: ArrivalController::Auto,
    };

    /// Checks every field's range.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let bad = |field, problem| Err(ConfigError { field, problem });
        if !(1..=64).contains(&self.chunk_lines) {
            return bad("transaction.chunk_lines", "must be in 1..=64");
        }
        if !self.coalescer_entries.is_power_of_two() || self.coalescer_entries > 4096 {
            return bad(
                "transaction.coalescer_entries",
                "must be a power of two in 1..=4096",
            );
        }
        Ok(())
    }
}
