//! The tag store of one L2 slice: set-associative, true LRU, over arena
//! storage.
//!
//! The caller passes slice-local line numbers; a line lives in set
//! `line % sets` and is identified there by its full line number, so any
//! numbering is correct (a poor one only costs conflict misses). Each way
//! holds the line, a valid and a dirty bit, a small `kind` (for example
//! "home copy" and "remote copy") and an LRU stamp from a per-set clock.
//! Tags and metadata are kept in separate arrays so a lookup scans only the
//! tags of one set. The number of valid lines of each kind is kept current,
//! so occupancy questions cost O(1).
//!
//! Replacement is exact LRU: an insertion into a set without a free way
//! evicts the way touched least recently. Free ways are filled lowest first.

use crate::arena::{Arena, Layout};
use crate::error::{BuildError, Capacity, ConfigError};

/// Number of distinct line kinds counted by [`TagArray::occupancy`]. Kinds
/// at or above it are stored as `KINDS - 1`.
pub const KINDS: usize = 4;

/// Metadata of one way.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
struct Meta {
    stamp: u32,
    valid: bool,
    dirty: bool,
    kind: u8,
}

/// One way of a set: its tag and metadata.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
struct Way {
    tag: u64,
    meta: Meta,
}

/// A line that left the array (evicted or invalidated) and its state.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Evicted {
    /// The line number.
    pub line: u64,
    /// It was written since it was filled: a write-back is due.
    pub dirty: bool,
    /// Its kind.
    pub kind: u8,
}

/// The outcome of [`TagArray::access`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Access {
    /// The line was resident.
    pub hit: bool,
    /// The line a miss displaced.
    pub evicted: Option<Evicted>,
}

/// The state of a resident line.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct LineState {
    /// The way it occupies in its set.
    pub way: usize,
    /// Dirty bit.
    pub dirty: bool,
    /// Kind.
    pub kind: u8,
}

/// A set-associative tag array with true LRU replacement.
#[derive(Debug)]
pub struct TagArray<'a> {
    /// Tag and metadata of every way, set by set, together so that a hit
    /// reads and updates one cache line of the host.
    slots: &'a mut [Way],
    /// One byte per way, [`fingerprint`] of its tag: a lookup compares
    /// eight ways per word here and reads `slots` only on a byte match.
    fps: &'a mut [u8],
    clocks: &'a mut [u32],
    sets: usize,
    ways: usize,
    /// `sets - 1` when `sets` is a power of two.
    set_mask: Option<usize>,
    occ: [u32; KINDS],
}

/// The byte a lookup compares first: the top bits of a tag, which the set
/// index (the low bits) does not use up.
#[inline]
fn fingerprint(tag: u64) -> u8 {
    (tag >> 56) as u8
}

/// Bit 7 of each byte of the result is set where `word` holds `byte`, and
/// possibly above such a byte (a borrow); never in a word without it.
#[inline]
fn byte_matches(word: u64, byte: u8) -> u64 {
    const ONES: u64 = 0x0101_0101_0101_0101;
    let x = word ^ (ONES * byte as u64);
    x.wrapping_sub(ONES) & !x & (ONES << 7)
}

#[inline]
fn kind_index(kind: u8) -> u8 {
    if (kind as usize) < KINDS {
        kind
    } else {
        KINDS as u8 - 1
    }
}

impl<'a> TagArray<'a> {
    fn geometry(sets: usize, ways: usize) -> Result<usize, BuildError> {
        let bad = |field, problem| Err(BuildError::Config(ConfigError { field, problem }));
        if sets == 0 {
            return bad("sets", "a tag array needs at least one set");
        }
        if ways == 0 {
            return bad("ways", "a tag array needs at least one way");
        }
        let lines = sets.checked_mul(ways).ok_or(BuildError::TooLarge)?;
        if lines > u32::MAX as usize {
            return Err(BuildError::TooLarge);
        }
        Ok(lines)
    }

    /// Accounts in `l` for the storage of a `sets` x `ways` array, exactly as
    /// [`TagArray::new_in`] carves it.
    pub fn layout(sets: usize, ways: usize, l: &mut Layout) -> Result<(), BuildError> {
        let lines = Self::geometry(sets, ways)?;
        l.add::<Way>(lines)?;
        l.add::<u8>(lines)?;
        l.add::<u32>(sets)
    }

    /// Carves an empty `sets` x `ways` array out of `arena`; `what` names
    /// the table in the error when the arena is exhausted. Zero sets or ways
    /// is a [`BuildError::Config`] error.
    pub fn new_in(
        arena: &mut Arena<'a>,
        sets: usize,
        ways: usize,
        what: Capacity,
    ) -> Result<Self, BuildError> {
        let lines = Self::geometry(sets, ways)?;
        let slots = arena.alloc(lines, Way::default(), what)?;
        let fps = arena.alloc(lines, fingerprint(0), what)?;
        let clocks = arena.alloc(sets, 0u32, what)?;
        Ok(TagArray {
            slots,
            fps,
            clocks,
            sets,
            ways,
            set_mask: sets.is_power_of_two().then(|| sets - 1),
            occ: [0; KINDS],
        })
    }

    /// Number of sets.
    #[inline]
    pub const fn sets(&self) -> usize {
        self.sets
    }

    /// Ways per set.
    #[inline]
    pub const fn ways(&self) -> usize {
        self.ways
    }

    /// Lines the array holds when full.
    #[inline]
    pub const fn capacity(&self) -> usize {
        self.sets * self.ways
    }

    /// The set of `line`: `line % sets`.
    #[inline]
    pub fn set_of(&self, line: u64) -> usize {
        match self.set_mask {
            Some(m) => line as usize & m,
            None => (line % self.sets as u64) as usize,
        }
    }

    /// Index of the first way of `line`'s set.
    #[inline]
    fn base_of(&self, line: u64) -> usize {
        self.set_of(line) * self.ways
    }

    /// Slot index (`set * ways + way`) holding `line`.
    #[inline]
    fn find(&self, line: u64) -> Option<usize> {
        self.find_in(self.base_of(line), line)
    }

    /// Slot index holding `line` in the set starting at slot `base`. Reads
    /// the metadata of tag matches only.
    #[inline]
    fn find_in(&self, base: usize, line: u64) -> Option<usize> {
        let fps = &self.fps[base..base + self.ways];
        let fp = fingerprint(line);
        let mut chunks = fps.chunks_exact(8);
        let mut at = base;
        for chunk in &mut chunks {
            let mut word = [0u8; 8];
            word.copy_from_slice(chunk);
            let mut m = byte_matches(u64::from_le_bytes(word), fp);
            while m != 0 {
                let i = at + (m.trailing_zeros() / 8) as usize;
                if self.slots[i].tag == line && self.slots[i].meta.valid {
                    return Some(i);
                }
                m &= m - 1;
            }
            at += 8;
        }
        (at..base + self.ways).find(|&i| self.slots[i].tag == line && self.slots[i].meta.valid)
    }

    /// The way holding `line`, without updating LRU.
    #[inline]
    pub fn lookup(&self, line: u64) -> Option<usize> {
        self.find(line).map(|i| i % self.ways)
    }

    /// The state of `line` when resident, without updating LRU.
    #[inline]
    pub fn state(&self, line: u64) -> Option<LineState> {
        self.find(line).map(|i| {
            let m = self.slots[i].meta;
            LineState {
                way: i % self.ways,
                dirty: m.dirty,
                kind: m.kind,
            }
        })
    }

    /// The next LRU stamp of `set`. Once every 2^32 touches of a set its
    /// stamps are renumbered in order (deterministically).
    #[inline]
    fn bump(&mut self, set: usize) -> u32 {
        if self.clocks[set] == u32::MAX {
            self.renumber(set);
        }
        self.clocks[set] += 1;
        self.clocks[set]
    }

    /// Replaces the stamps of `set`'s valid ways by their ranks 1..=n in LRU
    /// order and sets its clock to n. O(ways^2), once per 2^32 touches.
    ///
    /// Stamps of valid ways are distinct and at least 1, so the k-th smallest
    /// old stamp is at least k: ways already renumbered (stamps below k)
    /// never exceed the last old minimum taken, which tells them apart.
    #[cold]
    fn renumber(&mut self, set: usize) {
        let base = set * self.ways;
        let set_ways = &mut self.slots[base..base + self.ways];
        let mut floor = 0u32;
        let mut rank = 0u32;
        loop {
            let mut best: Option<usize> = None;
            for (w, way) in set_ways.iter().enumerate() {
                let m = way.meta;
                if m.valid
                    && m.stamp > floor
                    && best.map_or(true, |b| m.stamp < set_ways[b].meta.stamp)
                {
                    best = Some(w);
                }
            }
            let Some(b) = best else { break };
            floor = set_ways[b].meta.stamp;
            rank += 1;
            set_ways[b].meta.stamp = rank;
        }
        self.clocks[set] = rank;
    }

    /// Marks `line` most recently used. False on a miss.
    #[inline]
    pub fn touch(&mut self, line: u64) -> bool {
        let set = self.set_of(line);
        match self.find_in(set * self.ways, line) {
            Some(i) => {
                self.slots[i].meta.stamp = self.bump(set);
                true
            }
            None => false,
        }
    }

    /// The line [`TagArray::insert`] of `line` would evict now: `None` when
    /// `line` is resident or its set has a free way.
    pub fn victim(&self, line: u64) -> Option<Evicted> {
        let i = self.scan(self.base_of(line), line).err()?;
        let m = self.slots[i].meta;
        m.valid.then_some(Evicted {
            line: self.slots[i].tag,
            dirty: m.dirty,
            kind: m.kind,
        })
    }

    /// One pass over the set starting at `base`: `Ok(slot)` holding `line`,
    /// or `Err(slot)` an insertion of it would fill: the lowest free way, or
    /// else the least recently used one.
    #[inline]
    fn scan(&self, base: usize, line: u64) -> Result<usize, usize> {
        if let Some(i) = self.find_in(base, line) {
            return Ok(i);
        }
        let mut victim = 0;
        let mut oldest = u32::MAX;
        let mut free = false;
        for (w, way) in self.slots[base..base + self.ways].iter().enumerate() {
            let m = way.meta;
            if m.valid {
                if !free && m.stamp <= oldest {
                    oldest = m.stamp;
                    victim = w;
                }
            } else if !free {
                free = true;
                victim = w;
            }
        }
        Err(base + victim)
    }

    /// Fills slot `i` of `set` with `line`, returning what it held.
    #[inline]
    fn fill(&mut self, set: usize, i: usize, line: u64, dirty: bool, kind: u8) -> Option<Evicted> {
        let old = self.slots[i].meta;
        let evicted = if old.valid {
            self.occ[old.kind as usize] -= 1;
            Some(Evicted {
                line: self.slots[i].tag,
                dirty: old.dirty,
                kind: old.kind,
            })
        } else {
            None
        };
        let stamp = self.bump(set);
        self.slots[i].tag = line;
        self.fps[i] = fingerprint(line);
        self.slots[i].meta = Meta {
            stamp,
            valid: true,
            dirty,
            kind,
        };
        self.occ[kind as usize] += 1;
        evicted
    }

    /// Makes `line` resident and most recently used with the given dirty bit
    /// and kind, evicting the set's LRU line when no way is free. When `line`
    /// is already resident it is touched, its dirty bit becomes
    /// `old | dirty` and its kind `kind`; nothing is evicted.
    #[inline]
    pub fn insert(&mut self, line: u64, dirty: bool, kind: u8) -> Option<Evicted> {
        let kind = kind_index(kind);
        let set = self.set_of(line);
        match self.scan(set * self.ways, line) {
            Ok(i) => {
                let stamp = self.bump(set);
                let m = &mut self.slots[i].meta;
                self.occ[m.kind as usize] -= 1;
                self.occ[kind as usize] += 1;
                m.stamp = stamp;
                m.dirty |= dirty;
                m.kind = kind;
                None
            }
            Err(i) => self.fill(set, i, line, dirty, kind),
        }
    }

    /// A write-allocate access in one pass over the set: on a hit `line`
    /// becomes most recently used and dirty if `write` (its kind is kept);
    /// on a miss it is inserted with dirty bit `write` and kind `kind`,
    /// evicting as [`TagArray::insert`] does.
    #[inline]
    pub fn access(&mut self, line: u64, write: bool, kind: u8) -> Access {
        let set = self.set_of(line);
        match self.scan(set * self.ways, line) {
            Ok(i) => {
                let stamp = self.bump(set);
                let m = &mut self.slots[i].meta;
                m.stamp = stamp;
                m.dirty |= write;
                Access {
                    hit: true,
                    evicted: None,
                }
            }
            Err(i) => Access {
                hit: false,
                evicted: self.fill(set, i, line, write, kind_index(kind)),
            },
        }
    }

    /// Removes `line` and returns its state, or `None` when it was not
    /// resident.
    #[inline]
    pub fn invalidate(&mut self, line: u64) -> Option<Evicted> {
        let i = self.find(line)?;
        let m = &mut self.slots[i].meta;
        m.valid = false;
        self.occ[m.kind as usize] -= 1;
        Some(Evicted {
            line,
            dirty: m.dirty,
            kind: m.kind,
        })
    }

    /// Sets the dirty bit of `line` (no LRU update). False on a miss.
    #[inline]
    pub fn mark_dirty(&mut self, line: u64) -> bool {
        match self.find(line) {
            Some(i) => {
                self.slots[i].meta.dirty = true;
                true
            }
            None => false,
        }
    }

    /// Clears the dirty bit of `line` (after a write-back; no LRU update).
    /// False on a miss.
    #[inline]
    pub fn clean(&mut self, line: u64) -> bool {
        match self.find(line) {
            Some(i) => {
                self.slots[i].meta.dirty = false;
                true
            }
            None => false,
        }
    }

    /// Changes the kind of `line` (no LRU update). False on a miss.
    #[inline]
    pub fn set_kind(&mut self, line: u64, kind: u8) -> bool {
        let kind = kind_index(kind);
        match self.find(line) {
            Some(i) => {
                let m = &mut self.slots[i].meta;
                self.occ[m.kind as usize] -= 1;
                self.occ[kind as usize] += 1;
                m.kind = kind;
                true
            }
            None => false,
        }
    }

    /// Valid lines of each kind.
    #[inline]
    pub const fn occupancy(&self) -> [u32; KINDS] {
        self.occ
    }

    /// Valid lines of `kind` (kinds at or above [`KINDS`] count as `KINDS - 1`).
    #[inline]
    pub fn occupancy_of(&self, kind: u8) -> u32 {
        self.occ[kind_index(kind) as usize]
    }

    /// Valid lines of all kinds.
    #[inline]
    pub fn valid_lines(&self) -> u32 {
        self.occ.iter().sum()
    }

    /// Invalidates every line. O(sets x ways): not for hot paths.
    pub fn clear(&mut self) {
        for way in self.slots.iter_mut() {
            way.meta = Meta::default();
        }
        self.clocks.fill(0);
        self.occ = [0; KINDS];
    }
}

impl TagArray<'_> {
    /// Writes the mutable state into a snapshot.
    pub(crate) fn save_state(
        &self,
        w: &mut crate::codec::Writer<'_>,
    ) -> Result<(), crate::codec::SnapshotError> {
        w.val(&self.occ)?;
        w.slice(self.slots)?;
        w.slice(self.clocks)
    }

    /// Overwrites the mutable state from a snapshot.
    pub(crate) fn load_state(
        &mut self,
        r: &mut crate::codec::Reader<'_>,
    ) -> Result<(), crate::codec::SnapshotError> {
        let occ: [u32; KINDS] = r.val()?;
        r.slice(self.slots)?;
        // The per-kind counts must be what the slots hold: a damaged kind
        // would index past the counters, a damaged count would underflow.
        let mut counted = [0u32; KINDS];
        for way in self.slots.iter().filter(|w| w.meta.valid) {
            let k = way.meta.kind as usize;
            if k >= KINDS {
                return Err(crate::codec::SnapshotError::Corrupt {
                    what: "tag array line kind",
                });
            }
            counted[k] += 1;
        }
        if counted != occ {
            return Err(crate::codec::SnapshotError::Corrupt {
                what: "tag array occupancy",
            });
        }
        self.occ = occ;
        for (f, way) in self.fps.iter_mut().zip(self.slots.iter()) {
            *f = fingerprint(way.tag);
        }
        r.slice(self.clocks)
    }
}

#[cfg(test)]
#[path = "tags_tests.rs"]
mod tests;
