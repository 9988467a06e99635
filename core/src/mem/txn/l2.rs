//! L2 residency of the transaction model: runs of lines ("chunks") instead
//! of single lines.
//!
//! A chunk is up to `chunk_lines` lines of one TMA operation, in the order
//! the engine generates them, that form a regular pattern: `rows` rows of
//! `row` consecutive lines, `stride` lines apart (see [`Pattern`]). The
//! same box or bulk range always cuts into the same chunks, so operations
//! that read the same data find the same chunks; a chunk is resident or
//! not as a whole.
//!
//! The geometry is the line-level L2's: per slice `sets` sets of `ways`
//! lines. A chunk weighs its line count: a set holds entries whose
//! weights add up to at most `ways`, and evicts least recently used
//! entries until a new one fits. A one-line chunk lives in the set `key %
//! sets` of its slice, with the key the line-level model gives that line,
//! so single-line traffic (the pointer chase) sees exactly the line-level
//! model's placement, capacity and LRU order. A heavier chunk may live in
//! two sets of its slice (from two parts of its key) and goes to the
//! emptier: heavy entries then fill a slice's sets about as evenly as
//! their lines would one by one, and a nearly full L2 keeps what the
//! line-level model keeps (the transaction model picks the slice; see
//! [`super`]).
//!
//! An entry also keeps when its data is usable (`ready`: a fill still in
//! flight makes a read wait for it, as an MSHR merge does) and how long its
//! fill took from the miss that caused it (`lat`, so `ready - lat` is when
//! that miss reached the slice: a read arriving before that cannot use the
//! fill, having come first, whatever the order the two were handed over
//! in), a dirty bit
//! (write-allocated by a store, written back when evicted) and its kind
//! (home copy, or a shadow copy of the remote-copy proxy).

use serde::{Deserialize, Serialize};

use crate::arena::{Arena, Layout};
use crate::error::{BuildError, Capacity};

/// Kind of a home copy.
pub const HOME: u8 = 0;
/// Kind of a shadow copy made by the remote-copy proxy.
pub const SHADOW: u8 = 1;

/// The lines of a chunk: of the `count` lines in rows of `row`
/// consecutive lines starting `stride` lines apart (line `i` is `first +
/// (i / row) * stride + i % row`), those whose home slice lies in
/// partition `part`: `weight` of them. An operation's run of lines is one
/// pattern per partition, so a chunk's lines share their partition, and so
/// their near or far distance from any SM, as single lines do in the
/// line-level model.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Pattern {
    /// First line number of the run (not necessarily in `part`).
    pub first: u64,
    /// Lines from one row's start to the next (0 with a single row).
    pub stride: u64,
    /// Consecutive lines per row.
    pub row: u8,
    /// Lines of the run in all.
    pub count: u8,
    /// The L2 partition of the lines this chunk holds (0 or 1).
    pub part: u8,
    /// Lines of the run in `part`.
    pub weight: u8,
}

impl Pattern {
    /// Line number of line `i` of the run.
    #[inline]
    pub const fn line(&self, i: u8) -> u64 {
        let row = if self.row == 0 { 1 } else { self.row };
        self.first
            .wrapping_add((i / row) as u64 * self.stride)
            .wrapping_add((i % row) as u64)
    }

    /// The key that picks the chunk's set and identifies it in the
    /// fingerprints: the line-level model's key of the line for a single
    /// line, a mix of the whole pattern otherwise.
    #[inline]
    pub const fn key(&self) -> u64 {
        if self.count <= 1 {
            return crate::mem::system::line_key(self.first);
        }
        crate::rand::mix64(
            crate::mem::system::line_key(self.first) ^ crate::rand::mix64(self.shape()),
        )
    }

    /// The packed shape compared on lookup with `first`.
    #[inline]
    const fn shape(&self) -> u64 {
        self.stride << 17
            | ((self.part & 1) as u64) << 16
            | (self.row as u64) << 8
            | self.count as u64
    }
}

/// One resident chunk.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Entry {
    /// Its first line.
    pub first: u64,
    /// Its packed shape (`stride << 17 | part << 16 | row << 8 | count`).
    shape: u64,
    /// First cycle its data can be read.
    pub ready: u64,
    stamp: u32,
    /// Cycles from the miss that filled it to `ready` (saturated).
    pub lat: u16,
    /// Lines it holds (its weight in the set).
    pub weight: u8,
    /// Its kind ([`HOME`] or [`SHADOW`]) in bits 0..7, bit 7 set when it
    /// was written since it was filled. (Whether a way holds an entry at
    /// all is its fingerprint's business: 0 is an empty way.)
    flags: u8,
}

const DIRTY: u8 = 0x80;

// Four entries to a 128-byte host cache line pair.
const _: () = assert!(core::mem::size_of::<Entry>() == 32);

impl Entry {
    /// [`HOME`] or [`SHADOW`].
    pub const fn kind(&self) -> u8 {
        self.flags & !DIRTY
    }

    /// Written since it was filled.
    pub const fn dirty(&self) -> bool {
        self.flags & DIRTY != 0
    }

    /// Its pattern.
    pub const fn pattern(&self) -> Pattern {
        Pattern {
            first: self.first,
            stride: self.shape >> 17,
            row: (self.shape >> 8) as u8,
            count: self.shape as u8,
            part: (self.shape >> 16) as u8 & 1,
            weight: self.weight,
        }
    }
}

/// Per-set bookkeeping.
#[derive(Clone, Copy, Debug, Default, Serialize, Deserialize)]
struct SetMeta {
    /// Weight of the valid entries.
    used: u16,
    /// LRU clock.
    clock: u32,
}

/// The chunk table of every slice; see the [module documentation](self).
#[derive(Debug)]
pub struct ChunkTable<'a> {
    entries: &'a mut [Entry],
    /// Fingerprint byte per entry, 0 for an empty way.
    fps: &'a mut [u8],
    meta: &'a mut [SetMeta],
    /// Per set, one past its highest occupied way (every way from there
    /// on is empty): lookups scan only that far. Derived from `fps`, so
    /// not saved.
    top: &'a mut [u8],
    /// Lines held per slice.
    occ: &'a mut [u32],
    sets: usize,
    ways: usize,
}

#[inline]
fn fingerprint(key: u64) -> u8 {
    ((key >> 56) as u8).max(1)
}

const LOW7: u64 = 0x7F7F_7F7F_7F7F_7F7F;
const HIGH: u64 = 0x8080_8080_8080_8080;

/// Bit 7 of byte `i` set exactly where byte `i` of `x` is not zero.
#[inline]
const fn nonzero_bytes(x: u64) -> u64 {
    ((x & LOW7).wrapping_add(LOW7) | x) & HIGH
}

/// Eight fingerprints from `at` (fewer at the end of the table: the
/// missing bytes read as empty).
#[inline]
fn fp_word(fps: &[u8], at: usize) -> u64 {
    match fps.get(at..at + 8) {
        Some(b) => {
            let mut w = [0u8; 8];
            w.copy_from_slice(b);
            u64::from_le_bytes(w)
        }
        None => {
            let mut w = [0u8; 8];
            let rest = &fps[at.min(fps.len())..];
            w[..rest.len()].copy_from_slice(rest);
            u64::from_le_bytes(w)
        }
    }
}

/// Compresses bit 7 of each byte into 8 consecutive bits.
#[inline]
const fn pack(m: u64) -> u64 {
    ((m >> 7) & 0x0101_0101_0101_0101).wrapping_mul(0x0102_0408_1020_4080) >> 56
}

/// Bit `w` set for every way `w < ways` of the set at `base` whose
/// fingerprint satisfies `f` applied word by word (`f` maps a word of
/// eight fingerprints to bit 7 of each selected byte).
#[inline]
fn ways_where(fps: &[u8], base: usize, ways: usize, f: impl Fn(u64) -> u64) -> u64 {
    let mut out = 0u64;
    let mut w = 0;
    while w < ways {
        let mut m = pack(f(fp_word(fps, base + w)));
        if ways - w < 8 {
            m &= (1u64 << (ways - w)) - 1;
        }
        out |= m << w;
        w += 8;
    }
    out
}

impl<'a> ChunkTable<'a> {
    /// Entries of a table of `slices x sets x ways`.
    pub fn entries_for(slices: usize, sets: usize, ways: usize) -> Result<usize, BuildError> {
        slices
            .checked_mul(sets)
            .and_then(|x| x.checked_mul(ways))
            .ok_or(BuildError::TooLarge)
    }

    /// Accounts in `l` for a table of `slices x sets x ways`.
    pub fn layout(
        slices: usize,
        sets: usize,
        ways: usize,
        l: &mut Layout,
    ) -> Result<(), BuildError> {
        let n = Self::entries_for(slices, sets, ways)?;
        l.add::<Entry>(n)?;
        l.add::<u8>(n)?;
        l.add::<SetMeta>(slices * sets)?;
        l.add::<u8>(slices * sets)?;
        l.add::<u32>(slices)
    }

    /// Carves an empty table out of `a`.
    pub fn new_in(
        a: &mut Arena<'a>,
        slices: usize,
        sets: usize,
        ways: usize,
    ) -> Result<Self, BuildError> {
        let n = Self::entries_for(slices, sets, ways)?;
        let what = Capacity::MemoryPort;
        Ok(ChunkTable {
            entries: a.alloc(n, Entry::default(), what)?,
            fps: a.alloc(n, 0u8, what)?,
            meta: a.alloc(slices * sets, SetMeta::default(), what)?,
            top: a.alloc(slices * sets, 0u8, what)?,
            occ: a.alloc(slices, 0u32, what)?,
            sets: sets.max(1),
            ways: ways.max(1),
        })
    }

    /// Lines one slice can hold.
    pub fn slice_capacity(&self) -> usize {
        self.sets * self.ways
    }

    /// Lines slice `slice` holds (home and shadow copies).
    pub fn occupancy(&self, slice: usize) -> u32 {
        self.occ[slice]
    }

    /// The set index of `p` within its slice.
    #[inline]
    fn set_of(&self, slice: usize, key: u64) -> usize {
        slice * self.sets + (key % self.sets as u64) as usize
    }

    /// The sets of slice `slice` a chunk of key `key` may live in: the one
    /// its key picks and, for a chunk of more than one line, a second one
    /// (from other bits of the key; possibly the same). A heavy chunk goes
    /// to the emptier of the two, so that chunks of many lines spread over
    /// a slice's sets about as evenly as their lines would one by one (with
    /// one set each, sets of a few heavy entries overflow while others
    /// stand half empty, and a nearly full L2 evicts what the line-level
    /// model keeps). A one-line chunk has just the line-level model's set.
    #[inline]
    fn sets_of(&self, slice: usize, key: u64, count: u8) -> [usize; 2] {
        let a = self.set_of(slice, key);
        if count <= 1 {
            return [a, a];
        }
        [a, self.set_of(slice, key >> 32)]
    }

    /// The entry index holding `p` in slice `slice`, if resident.
    #[inline]
    pub fn find(&self, slice: usize, p: &Pattern) -> Option<usize> {
        self.find_keyed(slice, p, p.key())
    }

    /// [`ChunkTable::find`] for a caller that has `p`'s key (`p.key()`)
    /// at hand.
    #[inline]
    pub fn find_keyed(&self, slice: usize, p: &Pattern, key: u64) -> Option<usize> {
        debug_assert_eq!(key, p.key());
        let [a, b] = self.sets_of(slice, key, p.count);
        let found = self.find_in(a, key, p);
        if found.is_some() || a == b {
            return found;
        }
        self.find_in(b, key, p)
    }

    /// The entry index holding `p` (of key `key`) in set `set`, if any.
    #[inline]
    fn find_in(&self, set: usize, key: u64, p: &Pattern) -> Option<usize> {
        let base = set * self.ways;
        let top = self.top[set] as usize;
        let fp = fingerprint(key) as u64 * 0x0101_0101_0101_0101;
        let shape = p.shape();
        let mut w = 0;
        while w < top {
            let mut m = pack(!nonzero_bytes(fp_word(self.fps, base + w) ^ fp) & HIGH);
            if top - w < 8 {
                m &= (1u64 << (top - w)) - 1;
            }
            while m != 0 {
                let i = base + w + m.trailing_zeros() as usize;
                m &= m - 1;
                let e = &self.entries[i];
                if e.first == p.first && e.shape == shape {
                    return Some(i);
                }
            }
            w += 8;
        }
        None
    }

    /// Entries in the table.
    pub fn entry_count(&self) -> usize {
        self.entries.len()
    }

    /// Entry `i`.
    pub fn entry(&self, i: usize) -> &Entry {
        &self.entries[i]
    }

    /// Marks entry `i` most recently used.
    #[inline]
    pub fn touch(&mut self, i: usize) {
        let set = i / self.ways;
        let s = self.bump(set);
        self.entries[i].stamp = s;
    }

    /// A new fill of entry `i`, usable from `ready`, `lat` after its miss:
    /// kept when it is usable sooner.
    pub fn refill(&mut self, i: usize, ready: u64, lat: u16) {
        let e = &mut self.entries[i];
        if ready < e.ready {
            e.ready = ready;
            e.lat = lat;
        }
    }

    /// Sets entry `i`'s dirty bit.
    pub fn mark_dirty(&mut self, i: usize) {
        self.entries[i].flags |= DIRTY;
    }

    fn bump(&mut self, set: usize) -> u32 {
        if self.meta[set].clock == u32::MAX {
            self.renumber(set);
        }
        self.meta[set].clock += 1;
        self.meta[set].clock
    }

    /// Replaces the stamps of `set` by their LRU ranks (once per 2^32
    /// touches of a set).
    #[cold]
    fn renumber(&mut self, set: usize) {
        let base = set * self.ways;
        let fps = &self.fps[base..base + self.ways];
        let ways = &mut self.entries[base..base + self.ways];
        let mut floor = 0u32;
        let mut rank = 0u32;
        loop {
            let mut best: Option<usize> = None;
            for (w, e) in ways.iter().enumerate() {
                if fps[w] != 0 && e.stamp > floor && best.map_or(true, |b| e.stamp < ways[b].stamp)
                {
                    best = Some(w);
                }
            }
            let Some(b) = best else { break };
            floor = ways[b].stamp;
            rank += 1;
            ways[b].stamp = rank;
        }
        self.meta[set].clock = rank;
    }

    /// Makes `p` resident in slice `slice` as most recently used, evicting
    /// least recently used entries of its set (each handed to `evicted`)
    /// until it fits, and returns its entry index (`None` only for a
    /// damaged table). The caller has checked it is not resident.
    #[allow(clippy::too_many_arguments)]
    pub fn insert(
        &mut self,
        slice: usize,
        p: &Pattern,
        kind: u8,
        dirty: bool,
        ready: u64,
        lat: u16,
        mut evicted: impl FnMut(Entry),
    ) -> Option<usize> {
        let key = p.key();
        let [a, b] = self.sets_of(slice, key, p.count);
        let set = if self.meta[b].used < self.meta[a].used {
            b
        } else {
            a
        };
        let base = set * self.ways;
        let weight = (p.weight.max(1) as usize).min(self.ways) as u16;
        loop {
            // Ways from `top` on are empty.
            let valid = ways_where(self.fps, base, self.top[set] as usize, nonzero_bytes);
            let all = if self.ways >= 64 {
                u64::MAX
            } else {
                (1u64 << self.ways) - 1
            };
            let free = !valid & all;
            if free != 0 && self.meta[set].used + weight <= self.ways as u16 {
                let w = free.trailing_zeros() as usize;
                let stamp = self.bump(set);
                self.entries[base + w] = Entry {
                    first: p.first,
                    shape: p.shape(),
                    ready,
                    stamp,
                    lat,
                    weight: weight as u8,
                    flags: kind & !DIRTY | if dirty { DIRTY } else { 0 },
                };
                self.fps[base + w] = fingerprint(key);
                self.top[set] = (64 - (valid | 1 << w).leading_zeros()) as u8;
                self.meta[set].used += weight;
                self.occ[slice] += weight as u32;
                return Some(base + w);
            }
            // Evict the least recently used entry.
            let mut victim = None;
            let mut oldest = u32::MAX;
            let mut m = valid;
            while m != 0 {
                let i = base + m.trailing_zeros() as usize;
                m &= m - 1;
                let e = &self.entries[i];
                if e.stamp <= oldest {
                    oldest = e.stamp;
                    victim = Some(i);
                }
            }
            let Some(v) = victim else {
                // Nothing to evict yet no room: only a damaged snapshot
                // gets here. Give up rather than loop.
                return None;
            };
            let e = self.entries[v];
            self.fps[v] = 0;
            self.meta[set].used = self.meta[set].used.saturating_sub(e.weight as u16);
            self.occ[slice] = self.occ[slice].saturating_sub(e.weight as u32);
            evicted(e);
        }
    }

    /// Writes the mutable state into a snapshot.
    pub(crate) fn save_state(
        &self,
        w: &mut crate::codec::Writer<'_>,
    ) -> Result<(), crate::codec::SnapshotError> {
        w.slice(self.entries)?;
        w.slice(self.fps)?;
        w.slice(self.meta)?;
        w.slice(self.occ)
    }

    /// Overwrites the mutable state from a snapshot, checking that every
    /// set's weight is what its entries add up to.
    pub(crate) fn load_state(
        &mut self,
        r: &mut crate::codec::Reader<'_>,
    ) -> Result<(), crate::codec::SnapshotError> {
        r.slice(self.entries)?;
        r.slice(self.fps)?;
        r.slice(self.meta)?;
        r.slice(self.occ)?;
        let corrupt = crate::codec::SnapshotError::Corrupt { what: "L2 chunks" };
        let mut occ_ok = true;
        for (set, m) in self.meta.iter().enumerate() {
            let base = set * self.ways;
            let mut used = 0u32;
            let mut top = 0u8;
            for w in 0..self.ways {
                let e = &self.entries[base + w];
                let valid = self.fps[base + w] != 0;
                if valid && e.weight == 0 {
                    return Err(corrupt);
                }
                if valid {
                    used += e.weight as u32;
                    top = w as u8 + 1;
                }
            }
            self.top[set] = top;
            if used != m.used as u32 || used > self.ways as u32 {
                return Err(corrupt);
            }
        }
        for (s, &o) in self.occ.iter().enumerate() {
            let sum: u32 = self.meta[s * self.sets..(s + 1) * self.sets]
                .iter()
                .map(|m| m.used as u32)
                .sum();
            occ_ok &= sum == o;
        }
        if occ_ok {
            Ok(())
        } else {
            Err(corrupt)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mem::tags::TagArray;
    use proptest::prelude::*;

    fn table(slices: usize, sets: usize, ways: usize) -> Vec<u8> {
        let mut l = Layout::new();
        ChunkTable::layout(slices, sets, ways, &mut l).unwrap();
        vec![0u8; l.bytes()]
    }

    fn single(line: u64) -> Pattern {
        Pattern {
            first: line,
            stride: 0,
            row: 1,
            count: 1,
            part: 0,
            weight: 1,
        }
    }

    #[test]
    fn patterns_name_their_lines() {
        let p = Pattern {
            first: 100,
            stride: 16,
            row: 2,
            count: 5,
            part: 0,
            weight: 3,
        };
        let lines: Vec<u64> = (0..5).map(|i| p.line(i)).collect();
        assert_eq!(lines, [100, 101, 116, 117, 132]);
        assert_ne!(p.key(), Pattern { count: 4, ..p }.key());
        assert_ne!(p.key(), Pattern { part: 1, ..p }.key());
    }

    #[test]
    fn chunks_weigh_their_lines() {
        let mut buf = table(1, 1, 8);
        let mut a = Arena::new(&mut buf);
        let mut t = ChunkTable::new_in(&mut a, 1, 1, 8).unwrap();
        let big = |f| Pattern {
            first: f,
            stride: 0,
            row: 4,
            count: 4,
            part: 0,
            weight: 4,
        };
        let mut out = Vec::new();
        t.insert(0, &big(0), HOME, true, 5, 0, |e| out.push(e));
        t.insert(0, &big(100), HOME, false, 5, 0, |e| out.push(e));
        assert!(out.is_empty());
        assert_eq!(t.occupancy(0), 8);
        t.touch(t.find(0, &big(0)).unwrap());
        // A third chunk of 4 evicts the least recently used one (100).
        t.insert(0, &big(200), HOME, false, 9, 0, |e| out.push(e));
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].pattern(), big(100));
        assert!(t.find(0, &big(100)).is_none());
        let i = t.find(0, &big(0)).unwrap();
        assert!(t.entry(i).dirty());
        // A single line needs one more way's weight: evicts the LRU (0).
        t.insert(0, &single(7), HOME, false, 1, 0, |e| out.push(e));
        assert_eq!(out.len(), 2);
        assert_eq!(out[1].pattern(), big(0));
    }

    /// Heavy chunks pick the emptier of their two sets: a slice filled to
    /// three quarters with chunks of four lines (a strided tile's rows)
    /// evicts next to nothing, as a line-level L2 filled with their lines
    /// would not; with one set per chunk a tenth of them went.
    #[test]
    fn heavy_chunks_fill_the_sets_evenly() {
        let (sets, ways) = (64, 16);
        let mut buf = table(1, sets, ways);
        let mut a = Arena::new(&mut buf);
        let mut t = ChunkTable::new_in(&mut a, 1, sets, ways).unwrap();
        let chunk = |i: u64| Pattern {
            first: i * 4096,
            stride: 128,
            row: 1,
            count: 4,
            part: 0,
            weight: 4,
        };
        let n = (sets * ways * 3 / 4 / 4) as u64;
        let mut evicted = 0;
        for i in 0..n {
            t.insert(0, &chunk(i), HOME, false, 1, 0, |_| evicted += 1);
        }
        assert!(evicted <= n / 100, "{evicted} of {n} evicted");
        let found = (0..n).filter(|&i| t.find(0, &chunk(i)).is_some()).count();
        assert_eq!(found as u64, n - evicted);
        assert_eq!(t.occupancy(0) as u64, 4 * (n - evicted));
    }

    proptest! {
        /// Lookups scan a set only up to its highest occupied way: every
        /// resident chunk is still found, whatever mix of weights came and
        /// went, and a snapshot's reload derives the same bounds.
        #[test]
        fn every_resident_chunk_is_found(
            ops in proptest::collection::vec((0u64..64, 1u8..=8), 1..300),
        ) {
            let (sets, ways) = (2usize, 16usize);
            let mut buf = table(1, sets, ways);
            let mut a = Arena::new(&mut buf);
            let mut t = ChunkTable::new_in(&mut a, 1, sets, ways).unwrap();
            let pat = |f: u64, n: u8| Pattern {
                first: f * 8,
                stride: 0,
                row: n,
                count: n,
                part: 0,
                weight: n,
            };
            for (f, n) in ops {
                let p = pat(f, n);
                match t.find(0, &p) {
                    Some(i) => t.touch(i),
                    None => {
                        t.insert(0, &p, HOME, false, 0, 0, |_| {});
                    }
                }
                for w in 0..sets * ways {
                    if t.fps[w] != 0 {
                        let q = t.entries[w].pattern();
                        prop_assert_eq!(t.find(0, &q), Some(w));
                        prop_assert!(w % ways < t.top[w / ways] as usize);
                    }
                }
            }
            let tops: Vec<u8> = t.top.to_vec();
            let snap = crate::codec::saved(|w| t.save_state(w));
            t.top.fill(0);
            let mut rd = crate::codec::Reader::new(&snap);
            t.load_state(&mut rd).unwrap();
            prop_assert!(t.top.iter().zip(&tops).all(|(a, b)| a <= b));
            for w in 0..sets * ways {
                if t.fps[w] != 0 {
                    let q = t.entries[w].pattern();
                    prop_assert_eq!(t.find(0, &q), Some(w));
                }
            }
        }

        /// One-line chunks behave exactly like the line-level tag array:
        /// same hits, same victims, under random inserts and touches.
        #[test]
        fn single_lines_match_the_tag_array(
            ops in proptest::collection::vec((0u64..200, any::<bool>()), 1..400),
        ) {
            let (sets, ways) = (4usize, 4usize);
            let mut buf = table(1, sets, ways);
            let mut a = Arena::new(&mut buf);
            let mut t = ChunkTable::new_in(&mut a, 1, sets, ways).unwrap();
            let mut tl = Layout::new();
            TagArray::layout(sets, ways, &mut tl).unwrap();
            let mut tbuf = vec![0u8; tl.bytes()];
            let mut ta = Arena::new(&mut tbuf);
            let mut tags = TagArray::new_in(&mut ta, sets, ways, Capacity::MemoryPort).unwrap();
            for (line, dirty) in ops {
                let key = crate::mem::system::line_key(line);
                let p = single(line);
                match t.find(0, &p) {
                    Some(i) => {
                        prop_assert!(tags.touch(key));
                        t.touch(i);
                    }
                    None => {
                        prop_assert!(!tags.touch(key));
                        let mut ev = None;
                        t.insert(0, &p, HOME, dirty, 0, 0, |e| ev = Some(e));
                        let want = tags.insert(key, dirty, HOME);
                        prop_assert_eq!(ev.map(|e| (crate::mem::system::line_key(e.first), e.dirty())),
                            want.map(|e| (e.line, e.dirty)));
                    }
                }
                prop_assert_eq!(t.occupancy(0), tags.valid_lines());
            }
        }
    }
}
