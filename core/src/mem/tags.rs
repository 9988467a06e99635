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
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Meta {
    stamp: u32,
    valid: bool,
    dirty: bool,
    kind: u8,
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
    tags: &'a mut [u64],
    meta: &'a mut [Meta],
    clocks: &'a mut [u32],
    sets: usize,
    ways: usize,
    /// `sets - 1` when `sets` is a power of two.
    set_mask: Option<usize>,
    occ: [u32; KINDS],
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
        l.add::<u64>(lines)?;
        l.add::<Meta>(lines)?;
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
        let tags = arena.alloc(lines, 0u64, what)?;
        let meta = arena.alloc(lines, Meta::default(), what)?;
        let clocks = arena.alloc(sets, 0u32, what)?;
        Ok(TagArray {
            tags,
            meta,
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
        let base = self.base_of(line);
        let tags = &self.tags[base..base + self.ways];
        let meta = &self.meta[base..base + self.ways];
        tags.iter()
            .zip(meta)
            .position(|(&t, m)| t == line && m.valid)
            .map(|w| base + w)
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
            let m = self.meta[i];
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
        let meta = &mut self.meta[base..base + self.ways];
        let mut floor = 0u32;
        let mut rank = 0u32;
        loop {
            let mut best: Option<usize> = None;
            for (w, m) in meta.iter().enumerate() {
                if m.valid && m.stamp > floor && best.map_or(true, |b| m.stamp < meta[b].stamp) {
                    best = Some(w);
                }
            }
            let Some(b) = best else { break };
            floor = meta[b].stamp;
            rank += 1;
            meta[b].stamp = rank;
        }
        self.clocks[set] = rank;
    }

    /// Marks `line` most recently used. False on a miss.
    #[inline]
    pub fn touch(&mut self, line: u64) -> bool {
        match self.find(line) {
            Some(i) => {
                let set = i / self.ways;
                self.meta[i].stamp = self.bump(set);
                true
            }
            None => false,
        }
    }

    /// The line [`TagArray::insert`] of `line` would evict now: `None` when
    /// `line` is resident or its set has a free way.
    pub fn victim(&self, line: u64) -> Option<Evicted> {
        if self.find(line).is_some() {
            return None;
        }
        let i = self.victim_slot(self.base_of(line));
        let m = self.meta[i];
        m.valid.then_some(Evicted {
            line: self.tags[i],
            dirty: m.dirty,
            kind: m.kind,
        })
    }

    /// The slot an insertion into the set starting at `base` fills: the
    /// lowest free way, or else the least recently used one.
    #[inline]
    fn victim_slot(&self, base: usize) -> usize {
        let meta = &self.meta[base..base + self.ways];
        let mut victim = 0;
        let mut oldest = u32::MAX;
        for (w, m) in meta.iter().enumerate() {
            if !m.valid {
                return base + w;
            }
            if m.stamp <= oldest {
                oldest = m.stamp;
                victim = w;
            }
        }
        base + victim
    }

    /// Makes `line` resident and most recently used with the given dirty bit
    /// and kind, evicting the set's LRU line when no way is free. When `line`
    /// is already resident it is touched, its dirty bit becomes
    /// `old | dirty` and its kind `kind`; nothing is evicted.
    #[inline]
    pub fn insert(&mut self, line: u64, dirty: bool, kind: u8) -> Option<Evicted> {
        let kind = kind_index(kind);
        let set = self.set_of(line);
        if let Some(i) = self.find(line) {
            let stamp = self.bump(set);
            let m = &mut self.meta[i];
            self.occ[m.kind as usize] -= 1;
            self.occ[kind as usize] += 1;
            m.stamp = stamp;
            m.dirty |= dirty;
            m.kind = kind;
            return None;
        }
        let i = self.victim_slot(set * self.ways);
        let old = self.meta[i];
        let evicted = if old.valid {
            self.occ[old.kind as usize] -= 1;
            Some(Evicted {
                line: self.tags[i],
                dirty: old.dirty,
                kind: old.kind,
            })
        } else {
            None
        };
        let stamp = self.bump(set);
        self.tags[i] = line;
        self.meta[i] = Meta {
            stamp,
            valid: true,
            dirty,
            kind,
        };
        self.occ[kind as usize] += 1;
        evicted
    }

    /// Removes `line` and returns its state, or `None` when it was not
    /// resident.
    #[inline]
    pub fn invalidate(&mut self, line: u64) -> Option<Evicted> {
        let i = self.find(line)?;
        let m = &mut self.meta[i];
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
                self.meta[i].dirty = true;
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
                self.meta[i].dirty = false;
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
                let m = &mut self.meta[i];
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
        self.meta.fill(Meta::default());
        self.clocks.fill(0);
        self.occ = [0; KINDS];
    }
}
