//! The SM's L1 data cache, which thread loads marked for it go through
//! ([`crate::Instr::LdGlobal`] with `l1`: `ld.global` into registers,
//! `cp.async.ca`). TMA copies and L2-only loads bypass it, as on the
//! hardware, whose pointer chase (`calibration.md` §1) shows plain loads
//! hitting at 32 cycles up to a 215 kB working set while TMA copies never
//! do.
//!
//! # Geometry
//!
//! The SM's L1 and shared memory are one array of
//! [`crate::L1Config::unified_bytes`]. The driver gives shared memory the
//! smallest carveout of [`CARVEOUTS_KIB`] that holds the kernel's resident
//! CTAs; the L1 gets the rest ([`l1_bytes`]). Lines are 128 bytes of four
//! 32-byte sectors, in [`crate::L1Config::sets`] sets whose ways are the
//! lines the capacity holds over the sets; a set replaces its least
//! recently used line.
//!
//! # Timing
//!
//! At issue, a load's box is walked sector by sector:
//!
//! - **Hit**: every sector of the box is valid. The load completes
//!   [`crate::L1Config::hit_cycles`] after its requests leave the
//!   load/store unit, without reaching the L2, and its lines become the
//!   most recently used.
//! - **Miss**: the whole box goes to the memory as an L2-only load does.
//!   Its sectors that are neither valid nor pending are allocated, pending,
//!   and become valid when the load lands (the SM remembers each in-flight
//!   fill: at most its transfer slots). A load that needs a pending sector
//!   is a miss too: it goes to the L2, where the fill in flight is merged
//!   or hit, as a second request to an L1 miss waits on the first.
//!
//! Nothing is written through the L1: stores go to the L2 and leave the
//! L1's copy as it was (the kernels simfa runs do not load what they
//! stored in the same launch through the L1).

use serde::{Deserialize, Serialize};

use super::Simulator;
use crate::config::L1Config;
use crate::mem::lines::for_each_line;
use crate::source::StreamSource;
use crate::tensor_map::TensorMap;

/// Shared-memory capacities an sm_90 SM can be configured with, KiB (the
/// CUDA C++ Programming Guide's table for compute capability 9.0).
pub const CARVEOUTS_KIB: [u32; 10] = [0, 8, 16, 32, 64, 100, 132, 164, 196, 228];

/// Bytes per L1 line.
pub const LINE_BYTES: u64 = 128;
/// Bytes per sector.
pub const SECTOR_BYTES: u64 = 32;

/// Bytes of L1 an SM keeps beside `smem` bytes of shared memory: the
/// unified array less the smallest carveout that holds them (the largest
/// when none does).
pub fn l1_bytes(cfg: &L1Config, smem: u64) -> u32 {
    let carve = CARVEOUTS_KIB
        .iter()
        .map(|k| k * 1024)
        .find(|&c| c as u64 >= smem)
        .unwrap_or(CARVEOUTS_KIB[CARVEOUTS_KIB.len() - 1] * 1024);
    cfg.unified_bytes.saturating_sub(carve)
}

/// Ways per set of an L1 of `bytes` (0 when there are no sets).
pub fn ways(cfg: &L1Config, bytes: u32) -> usize {
    (bytes as u64 / LINE_BYTES)
        .checked_div(cfg.sets as u64)
        .unwrap_or(0) as usize
}

/// One line of an SM's L1.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct L1Line {
    /// Line number plus one; 0 for an empty way.
    pub tag: u64,
    /// The SM's access count at the line's last use (LRU order).
    pub used: u32,
    /// Sectors holding data.
    pub valid: u8,
    /// Sectors a load in flight will fill.
    pub pending: u8,
}

impl L1Line {
    /// An empty way.
    pub const EMPTY: L1Line = L1Line {
        tag: 0,
        used: 0,
        valid: 0,
        pending: 0,
    };
}

/// A load in flight that fills L1 sectors when it lands.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct L1Fill {
    /// The transfer's operation number plus one; 0 for a free entry.
    pub op: u64,
    /// Its tensor map.
    pub map: u8,
    /// Its box origin.
    pub coords: [i64; 5],
}

impl L1Fill {
    /// A free entry.
    pub const EMPTY: L1Fill = L1Fill {
        op: 0,
        map: 0,
        coords: [0; 5],
    };
}

/// The L1s of every SM, carved from the arena.
#[derive(Debug)]
pub(crate) struct L1Tables<'a> {
    /// `sets * ways` lines per SM, set-major.
    pub lines: &'a mut [L1Line],
    /// `fills_per_sm` in-flight fills per SM.
    pub fills: &'a mut [L1Fill],
    /// Accesses per SM (the LRU clock).
    pub clock: &'a mut [u32],
    /// Sets per SM.
    pub sets: usize,
    /// Ways per set.
    pub ways: usize,
    /// Fill entries per SM (its transfer slots).
    pub fills_per_sm: usize,
}

/// What a box finds in an SM's L1.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Lookup {
    /// Every sector is valid.
    Hit,
    /// Some sector is not; the missing ones are now pending.
    Miss,
}

impl L1Tables<'_> {
    fn set_of(&mut self, sm: usize, line: u64) -> &mut [L1Line] {
        let set = (line % self.sets as u64) as usize;
        let at = (sm * self.sets + set) * self.ways;
        &mut self.lines[at..at + self.ways]
    }

    /// Walks `map`'s box at `coords` in SM `sm`'s L1 once: every line it
    /// touches becomes the most recently used, and a sector that holds no
    /// data makes it a miss and is allocated, pending (a hit has all its
    /// lines, so it allocates nothing).
    pub fn lookup(&mut self, sm: usize, map: &TensorMap, coords: &[i64; 5]) -> Lookup {
        self.clock[sm] = self.clock[sm].wrapping_add(1);
        let now = self.clock[sm];
        let mut hit = true;
        let walked = for_each_line(map, coords, SECTOR_BYTES, None, |addr| {
            let (line, bit) = (addr / LINE_BYTES, 1u8 << ((addr / SECTOR_BYTES) % 4));
            let set = self.set_of(sm, line);
            let way = match set.iter().position(|l| l.tag == line + 1) {
                Some(w) => w,
                None => {
                    // The empty way, or else the least recently used
                    // (ages counted back from now, so the clock may wrap).
                    let w = (0..set.len())
                        .max_by_key(|&w| {
                            let l = &set[w];
                            (l.tag == 0, now.wrapping_sub(l.used), usize::MAX - w)
                        })
                        .unwrap_or(0);
                    set[w] = L1Line {
                        tag: line + 1,
                        ..L1Line::EMPTY
                    };
                    w
                }
            };
            let l = &mut set[way];
            l.used = now;
            if l.valid & bit == 0 {
                hit = false;
                l.pending |= bit;
            }
        });
        // A box the walker refuses goes to the memory (which refuses it
        // with its own error).
        if hit && walked.is_ok() {
            Lookup::Hit
        } else {
            Lookup::Miss
        }
    }

    /// Remembers that transfer `op` of SM `sm` fills the box; false when
    /// every entry is taken (its sectors then stay pending until another
    /// load fills them).
    pub fn expect(&mut self, sm: usize, op: u32, map: u8, coords: [i64; 5]) -> bool {
        let at = sm * self.fills_per_sm;
        match self.fills[at..at + self.fills_per_sm]
            .iter_mut()
            .find(|f| f.op == 0)
        {
            Some(f) => {
                *f = L1Fill {
                    op: op as u64 + 1,
                    map,
                    coords,
                };
                true
            }
            None => false,
        }
    }

    /// Transfer `op` of SM `sm` landed: the pending sectors of its box
    /// that are still allocated become valid. Returns the fill's map and
    /// box, `None` when `op` fills nothing.
    pub fn take(&mut self, sm: usize, op: u32) -> Option<(u8, [i64; 5])> {
        let at = sm * self.fills_per_sm;
        let f = self.fills[at..at + self.fills_per_sm]
            .iter_mut()
            .find(|f| f.op == op as u64 + 1)?;
        let out = (f.map, f.coords);
        *f = L1Fill::EMPTY;
        Some(out)
    }

    /// Makes the pending sectors of `map`'s box at `coords` valid.
    pub fn fill(&mut self, sm: usize, map: &TensorMap, coords: &[i64; 5]) {
        let _ = for_each_line(map, coords, SECTOR_BYTES, None, |addr| {
            let (line, bit) = (addr / LINE_BYTES, 1u8 << ((addr / SECTOR_BYTES) % 4));
            let set = self.set_of(sm, line);
            if let Some(l) = set.iter_mut().find(|l| l.tag == line + 1) {
                if l.pending & bit != 0 {
                    l.pending &= !bit;
                    l.valid |= bit;
                }
            }
        });
    }
}

impl<S: StreamSource> Simulator<'_, S> {
    /// Looks `map`'s box at `coords` up in the L1 of WarpGroup `ti`'s SM
    /// for a load that will be transfer `op`: `Some(Hit)` or `Some(Miss)`
    /// (its fill then remembered), `None` when the kernel has no L1.
    pub(super) fn l1_lookup(
        &mut self,
        ti: usize,
        map: u8,
        coords: [i64; 5],
        op: u32,
    ) -> Option<Lookup> {
        let sm = self.threads[ti].sm as usize;
        let m = &self.kernel.maps[map as usize];
        let l1 = self.l1.as_mut()?;
        let r = l1.lookup(sm, m, &coords);
        self.stats.l1_loads += 1;
        match r {
            Lookup::Hit => self.stats.l1_hits += 1,
            Lookup::Miss => {
                l1.expect(sm, op, map, coords);
            }
        }
        Some(r)
    }

    /// Transfer `op` of WarpGroup `ti` landed: the L1 sectors it fills
    /// become valid.
    pub(super) fn l1_landed(&mut self, ti: usize, op: u32) {
        let sm = self.threads[ti].sm as usize;
        let kernel = self.kernel;
        if let Some(l1) = self.l1.as_mut() {
            if let Some((map, coords)) = l1.take(sm, op) {
                l1.fill(sm, &kernel.maps[map as usize], &coords);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::L1_SM90;

    #[test]
    fn the_carveout_is_the_smallest_that_holds_the_shared_memory() {
        assert_eq!(l1_bytes(&L1_SM90, 0), 256 * 1024);
        assert_eq!(l1_bytes(&L1_SM90, 1), 248 * 1024);
        assert_eq!(l1_bytes(&L1_SM90, 100 * 1024), 156 * 1024);
        assert_eq!(l1_bytes(&L1_SM90, 100 * 1024 + 1), 124 * 1024);
        assert_eq!(l1_bytes(&L1_SM90, 228 * 1024), 28 * 1024);
        assert_eq!(ways(&L1_SM90, 28 * 1024), 3);
        assert_eq!(ways(&L1_SM90, 256 * 1024), 32);
    }

    fn map1d(elems: u64, boxdim: u32) -> TensorMap {
        TensorMap {
            name: heapless::String::new(),
            base: 0x1000,
            elem_bytes: 4,
            rank: 1,
            dims: [elems, 1, 1, 1, 1],
            strides: [4, 0, 0, 0, 0],
            boxdim: [boxdim, 1, 1, 1, 1],
        }
    }

    fn run_lookups(ways: usize, sets: usize, boxes: &[(i64, Option<bool>)]) -> Vec<Lookup> {
        let mut lines = vec![L1Line::EMPTY; sets * ways];
        let mut fills = vec![L1Fill::EMPTY; 4];
        let mut clock = [0u32];
        let mut t = L1Tables {
            lines: &mut lines,
            fills: &mut fills,
            clock: &mut clock,
            sets,
            ways,
            fills_per_sm: 4,
        };
        let m = map1d(1 << 20, 4);
        let mut out = Vec::new();
        for (i, &(at, land)) in boxes.iter().enumerate() {
            let c = [at, 0, 0, 0, 0];
            let r = t.lookup(0, &m, &c);
            if r == Lookup::Miss {
                assert!(t.expect(0, i as u32, 0, c));
                if land == Some(true) {
                    let (_, cc) = t.take(0, i as u32).unwrap();
                    t.fill(0, &m, &cc);
                }
            }
            out.push(r);
        }
        out
    }

    #[test]
    fn a_sector_hits_once_its_fill_has_landed_and_not_before() {
        use Lookup::*;
        // Elements 0..4 and 4..8 share the first 32-byte sector; 8..12 too;
        // element 8 is in it, element 16 (byte 64) is the third sector.
        let r = run_lookups(
            2,
            1,
            &[
                (0, Some(false)),
                (4, None),
                (0, None),
                (16, Some(true)),
                (16, None),
            ],
        );
        assert_eq!(r, [Miss, Miss, Miss, Miss, Hit]);
    }

    #[test]
    fn a_set_replaces_its_least_recently_used_line() {
        use Lookup::*;
        // One set of two ways; lines are 32 elements apart.
        let l = |n: i64| n * 32;
        let r = run_lookups(
            2,
            1,
            &[
                (l(0), Some(true)),
                (l(1), Some(true)),
                (l(0), None),       // hit: line 1 is now the older
                (l(2), Some(true)), // evicts line 1
                (l(0), None),
                (l(1), Some(true)),
            ],
        );
        assert_eq!(r, [Miss, Miss, Hit, Miss, Hit, Miss]);
    }
}
