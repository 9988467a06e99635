//! Parameters of the L2 side of the memory hierarchy and of the TMA
//! engines' request generation.

use serde::{Deserialize, Serialize};

use crate::error::ConfigError;
use crate::mem::hash::SliceHash;
use crate::time::Ratio;

/// Most L2 slices supported.
pub const MAX_SLICES: usize = 256;

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
    /// Bytes per cycle a slice's data path moves for requests from SMs of
    /// its own partition: a line holds the slice's port for
    /// `line_bytes / slice_bytes_per_cycle` cycles, spread exactly over
    /// whole cycles (64 bytes per cycle holds it for 2; 56 alternates 2
    /// and 3, 7 lines in 16 cycles). `simfa calibrate l2-bw` fits it on
    /// `data/l2_bandwidth.csv`.
    pub slice_bytes_per_cycle: Ratio,
    /// Bytes per cycle a slice's crossing between the partitions moves
    /// (at most `slice_bytes_per_cycle`): a line of the slice read or
    /// written by an SM of the other partition holds the slice's port as a
    /// near one does, then its crossing for its share of cycles at this
    /// width. The crossing is narrower than a slice's own data path, which
    /// is why a working set larger than one partition streams at about half
    /// the bandwidth of one replicated in both (`reference/l2_bandwidth.md`
    /// §3.2); near readers of the slice do not wait for it. A read answered
    /// by a shadow copy in the near partition does not cross.
    pub far_bytes_per_cycle: Ratio,
    /// Cycles from DRAM data returning to the slice to the fill being usable.
    pub fill_latency: u32,
    /// MSHRs per slice (misses in flight to DRAM); when full, further misses
    /// of that slice wait in order.
    pub mshrs: u16,
    /// Merge identical in-flight reads of a group of SMs in a request
    /// coalescer: a read of a line some SM of the group has in flight
    /// books no slice port and no lookup and returns with that read.
    pub coalescer: bool,
    /// SMs whose reads one coalescer merges: SMs `s` with the same
    /// `s / coalescer_sms` (consecutive SM ids, as the simulator places a
    /// cluster's CTAs) form a group. 2 is an SM pair (a TPC); a GPC's
    /// share of the SMs is the scope of the L2 request coalescer (LRC),
    /// whose entries each serve one GPC (docs/memory.md).
    pub coalescer_sms: u16,
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
    /// `slices * slice_bytes_per_cycle` (`den` at least 1).
    pub const fn peak_bytes_per_cycle(&self) -> (u64, u64) {
        let r = self.slice_bytes_per_cycle;
        let num = self.slices as u64 * r.num as u64;
        let den = if r.den == 0 { 1 } else { r.den as u64 };
        (num, den)
    }

    /// Cycles the `k`-th line a slice serves (counting from 0) holds its
    /// port, the line's share of whole cycles at `slice_bytes_per_cycle`,
    /// or (`far`) its crossing between the partitions, at
    /// `far_bytes_per_cycle`.
    /// Over any `den` consecutive lines of one rate the lengths add up to
    /// exactly `line_bytes * den / num` cycles per line (the lengths
    /// `floor((k + 1) c) - floor(k c)`, `c` the cycles per line); at
    /// least 1 in a validated configuration.
    #[inline]
    pub const fn port_cycles(&self, k: u64, far: bool) -> u32 {
        let r = if far {
            self.far_bytes_per_cycle
        } else {
            self.slice_bytes_per_cycle
        };
        let num = self.line_bytes as u64 * r.den as u64;
        let den = if r.num == 0 { 1 } else { r.num as u64 };
        let k = k % den;
        ((k + 1) * num / den - k * num / den) as u32
    }

    /// Whether a slice's crossing between the partitions can ever hold a
    /// line longer than the slice's port does: only when it is narrower
    /// (`far_bytes_per_cycle < slice_bytes_per_cycle`). At equal widths the
    /// `k`-th line holds both for the same cycles from the same start, so
    /// the models skip the crossing's booking (and its tables) altogether.
    pub const fn crossing_binds(&self) -> bool {
        let (f, s) = (self.far_bytes_per_cycle, self.slice_bytes_per_cycle);
        (f.num as u64) * (s.den as u64) < (s.num as u64) * (f.den as u64)
    }

    /// The cycles every line holds a slice's port when the width divides
    /// the line exactly (`far` selects the cross-partition width), so that
    /// [`L2Config::port_cycles`] need not be asked line by line; 0 when
    /// the width spreads lines over fractional cycles.
    pub const fn whole_port_cycles(&self, far: bool) -> u32 {
        let r = if far {
            self.far_bytes_per_cycle
        } else {
            self.slice_bytes_per_cycle
        };
        let bytes = self.line_bytes as u64 * r.den as u64;
        if r.num > 0 && bytes % r.num as u64 == 0 {
            (bytes / r.num as u64) as u32
        } else {
            0
        }
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

    /// The request coalescer group of SM `sm` ([`L2Config::coalescer_sms`]).
    pub const fn coalescer_group(&self, sm: usize) -> usize {
        sm / if self.coalescer_sms == 0 {
            1
        } else {
            self.coalescer_sms as usize
        }
    }

    /// Coalescer groups among `sms` SMs.
    pub const fn coalescer_groups(&self, sms: usize) -> usize {
        self.coalescer_group(sms.saturating_sub(1)) + 1
    }

    /// Checks every field's range.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let bad = |field, problem| Err(ConfigError { field, problem });
        if !self.line_bytes.is_power_of_two() || !(16..=4096).contains(&self.line_bytes) {
            return bad("l2.line_bytes", "must be a power of two in 16..=4096");
        }
        if self.slices < 2 || self.slices % 2 != 0 || self.slices as usize > MAX_SLICES {
            return bad("l2.slices", "must be even, in 2..=256 (two partitions)");
        }
        if self.sets == 0 || self.sets > 1 << 20 {
            return bad("l2.sets", "must be in 1..=2^20");
        }
        if self.ways == 0 || self.ways > 64 {
            return bad("l2.ways", "must be in 1..=64");
        }
        // A width of at least 2 bytes and at most a line per cycle, as a
        // ratio of terms below 2^16 (the port lengths' arithmetic).
        let width_ok = |r: Ratio| {
            r.num > 0
                && r.den > 0
                && r.num < 1 << 16
                && r.den < 1 << 16
                && r.num as u64 <= self.line_bytes as u64 * r.den as u64
                && r.num as u64 >= 2 * r.den as u64
        };
        if !width_ok(self.slice_bytes_per_cycle) {
            return bad(
                "l2.slice_bytes_per_cycle",
                "must be 2..=line_bytes bytes per cycle, terms below 65536",
            );
        }
        let (s, f) = (self.slice_bytes_per_cycle, self.far_bytes_per_cycle);
        if !width_ok(f) || f.num as u64 * s.den as u64 > s.num as u64 * f.den as u64 {
            return bad(
                "l2.far_bytes_per_cycle",
                "must be 2 bytes per cycle up to slice_bytes_per_cycle, terms below 65536",
            );
        }
        if self.mshrs == 0 {
            return bad("l2.mshrs", "must be at least 1");
        }
        if !(1..=1024).contains(&self.coalescer_sms) {
            return bad("l2.coalescer_sms", "must be in 1..=1024");
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
    /// Line requests the engine emits in one of its slots.
    pub lines_per_cycle: u16,
    /// Cycles between the engine's emission slots: an SM's port to the
    /// crossbar takes `lines_per_cycle` lines every `line_interval` cycles
    /// (each request returns one line, so this bounds what one SM can
    /// read: 64 bytes per cycle on Hopper with 1 line every 2 cycles).
    pub line_interval: u16,
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
        if self.line_interval == 0 || self.line_interval > 64 {
            return bad("tma.line_interval", "must be in 1..=64");
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
    /// Entries of each coalescer group's table (in-flight chunks it
    /// remembers, [`L2Config::coalescer_sms`]), a power of two.
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
    /// The presets' values: chunks of up to 32 lines, 256 coalescer
    /// entries (as many as one SM's lines in flight; with 64, a pipelined
    /// GEMM's stages in flight evicted each other and 19% more reads
    /// reached the slices than under the line model, which remembers every
    /// line in flight; 512 entries merge 1% more than 256 on that GEMM),
    /// the arrival-order controller for memory-bound kernels and grids of
    /// less than a wave.
    pub const DEFAULT: TxnConfig = TxnConfig {
        chunk_lines: 32,
        coalescer_entries: 256,
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

#[cfg(test)]
mod tests {
    use super::*;

    fn l2(num: u32, den: u32) -> L2Config {
        let mut c = crate::GpuConfig::h800().l2;
        c.slice_bytes_per_cycle = Ratio::new(num, den);
        c.far_bytes_per_cycle = Ratio::new(num, den);
        c
    }

    /// 56 bytes per cycle: 7 lines in 16 cycles, as 2s and 3s; a whole
    /// number of cycles per line gives that number every time.
    #[test]
    fn port_lengths_spread_a_fractional_width_over_whole_cycles() {
        let c = l2(56, 1);
        let lens: Vec<u32> = (0..7).map(|k| c.port_cycles(k, false)).collect();
        assert_eq!(lens.iter().sum::<u32>(), 16);
        assert!(lens.iter().all(|&n| n == 2 || n == 3), "{lens:?}");
        // Periodic: the next 7 lines take the same.
        let next: Vec<u32> = (7..14).map(|k| c.port_cycles(k, false)).collect();
        assert_eq!(lens, next);
        assert!((0..100).all(|k| l2(64, 1).port_cycles(k, false) == 2));
        assert_eq!(l2(64, 1).whole_port_cycles(false), 2);
        assert_eq!(l2(56, 1).whole_port_cycles(false), 0);
        assert!((0..100).all(|k| l2(128, 1).port_cycles(k, false) == 1));
        // A huge count repeats the period, without overflow.
        let far_on = 56 * (u64::MAX / 56 - 1);
        let late: Vec<u32> = (0..7).map(|k| c.port_cycles(far_on + k, false)).collect();
        assert_eq!(lens, late);
    }

    #[test]
    fn widths_are_validated() {
        assert!(l2(64, 1).validate().is_ok());
        assert!(l2(129, 1).validate().is_err(), "more than a line per cycle");
        assert!(l2(1, 1).validate().is_err(), "under 2 bytes per cycle");
        assert!(l2(64, 0).validate().is_err());
        let mut c = l2(64, 1);
        c.far_bytes_per_cycle = Ratio::new(65, 1);
        assert_eq!(c.validate().unwrap_err().field, "l2.far_bytes_per_cycle");
        c.far_bytes_per_cycle = Ratio::new(24, 1);
        assert!(c.validate().is_ok());
    }

    #[test]
    fn coalescer_groups_are_consecutive_sms() {
        let mut c = l2(56, 1);
        assert_eq!((c.coalescer_group(0), c.coalescer_group(1)), (0, 0));
        assert_eq!(c.coalescer_group(2), 1);
        assert_eq!(c.coalescer_groups(132), 66);
        c.coalescer_sms = 17;
        assert_eq!(c.coalescer_groups(132), 8, "a GPC's share of 132 SMs");
        assert_eq!((c.coalescer_group(16), c.coalescer_group(17)), (0, 1));
        c.coalescer_sms = 0;
        assert_eq!(c.validate().unwrap_err().field, "l2.coalescer_sms");
    }

    #[test]
    fn the_crossing_binds_only_when_narrower_than_the_port() {
        let mut c = l2(56, 1);
        c.far_bytes_per_cycle = Ratio::new(56, 1);
        assert!(!c.crossing_binds());
        c.far_bytes_per_cycle = Ratio::new(112, 2);
        assert!(!c.crossing_binds(), "the same width as a fraction");
        c.far_bytes_per_cycle = Ratio::new(111, 2);
        assert!(c.crossing_binds());
        c.far_bytes_per_cycle = Ratio::new(16, 1);
        assert!(c.crossing_binds());
    }
}
