//! TMA address generation: the global-memory cache lines a tensor box or a
//! bulk copy touches.
//!
//! A box of a [`TensorMap`] at origin `coords` covers the elements
//! `(c0 + i0, c1 + i1, ...)` with `i_d` in `0..boxdim[d]`. Elements outside
//! the tensor (a coordinate below 0 or at or past `dims[d]`) are clipped and
//! generate no traffic. The element `(x0, x1, ...)` lives at
//! `base + x0 * elem_bytes + Σ_{d>=1} x_d * strides[d]`.
//!
//! The clipped box is walked row by row, a row being the contiguous run of
//! elements along dimension 0, in odometer order (dimension 1 fastest).
//! Within a row the lines are distinct and ascending. Across rows a line can
//! repeat (small strides, rows sharing a line); [`LineGen::next_unique`]
//! removes repeats so that each line is requested once per box:
//!
//! - when the rows are provably laid out in ascending, disjoint order (each
//!   stride at least the span of the sub-box below it: the usual case) the
//!   only possible repeat is a row's first line equal to the previous row's
//!   last line, and a comparison removes it;
//! - otherwise every line goes through a caller-provided [`DedupSet`].
//!
//! Iterating a [`LineGen`] as an [`Iterator`] yields every row's lines even
//! when repeated: the "dedup disabled" ablation.
//!
//! All address arithmetic is checked when a generator is built: a box whose
//! highest address does not fit in 64 bits is an [`LineError::Overflow`],
//! after which the walk itself cannot overflow.

use core::fmt;

use crate::arena::{Arena, Layout};
use crate::error::{BuildError, Capacity};
use crate::mem::table::{fib_hash, slots_for, Full};
use crate::tensor_map::TensorMap;

/// Why lines could not be generated.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum LineError {
    /// The line size is zero or not a power of two.
    BadLineSize,
    /// The tensor map's rank is outside 1..=5 or its element size is zero.
    BadMap,
    /// An address of the box or range does not fit in 64 bits, or its row
    /// count does not.
    Overflow,
    /// The caller's [`DedupSet`] is full.
    DedupFull,
}

impl fmt::Display for LineError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            LineError::BadLineSize => "line size must be a non-zero power of two",
            LineError::BadMap => "tensor map rank must be 1..=5 and its element size non-zero",
            LineError::Overflow => "box addresses overflow 64 bits",
            LineError::DedupFull => "line dedup set full",
        })
    }
}

impl core::error::Error for LineError {}

/// The empty-slot marker of a [`DedupSet`]; the key `u64::MAX` itself is
/// kept in a flag.
const EMPTY: u64 = u64::MAX;

/// A fixed-capacity set of `u64` keys (line numbers) over arena storage, for
/// removing repeated lines within one box.
///
/// Open addressing with linear probing, load factor at most 1/2, a fixed
/// Fibonacci multiply-shift hash. It also records which slots it filled, so
/// [`DedupSet::clear`] costs O(entries), not O(capacity).
#[derive(Debug)]
pub struct DedupSet<'a> {
    slots: &'a mut [u64],
    used: &'a mut [u32],
    /// Keys in `slots` (all but `u64::MAX`).
    len: usize,
    /// `u64::MAX` is in the set.
    has_max: bool,
    cap: usize,
    mask: usize,
    bits: u32,
}

impl<'a> DedupSet<'a> {
    fn slots(capacity: usize) -> Result<usize, BuildError> {
        let n = slots_for(capacity).ok_or(BuildError::TooLarge)?;
        if n - 1 > u32::MAX as usize {
            return Err(BuildError::TooLarge);
        }
        Ok(n)
    }

    /// Accounts in `l` for the storage of a set of `capacity` keys, exactly
    /// as [`DedupSet::new_in`] carves it.
    pub fn layout(capacity: usize, l: &mut Layout) -> Result<(), BuildError> {
        l.add::<u64>(Self::slots(capacity)?)?;
        l.add::<u32>(capacity)
    }

    /// Carves an empty set of `capacity` keys out of `arena`; `what` names
    /// the table in the error when the arena is exhausted.
    pub fn new_in(
        arena: &mut Arena<'a>,
        capacity: usize,
        what: Capacity,
    ) -> Result<Self, BuildError> {
        let n = Self::slots(capacity)?;
        let slots = arena.alloc(n, EMPTY, what)?;
        let used = arena.alloc(capacity, 0u32, what)?;
        Ok(DedupSet {
            slots,
            used,
            len: 0,
            has_max: false,
            cap: capacity,
            mask: n - 1,
            bits: n.trailing_zeros(),
        })
    }

    /// Number of keys.
    #[inline]
    pub const fn len(&self) -> usize {
        self.len + self.has_max as usize
    }

    /// True when the set holds no key.
    #[inline]
    pub const fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Most keys the set holds.
    #[inline]
    pub const fn capacity(&self) -> usize {
        self.cap
    }

    /// Adds `key`: `Ok(true)` when it is new, `Ok(false)` when it was
    /// already present, `Err` (handing the key back) when it is new and the
    /// set is full.
    #[inline]
    pub fn insert(&mut self, key: u64) -> Result<bool, Full<u64>> {
        if key == EMPTY {
            if self.has_max {
                return Ok(false);
            }
            if self.len() >= self.cap {
                return Err(Full(key));
            }
            self.has_max = true;
            return Ok(true);
        }
        let mut i = fib_hash(key, self.bits);
        loop {
            let s = self.slots[i];
            if s == key {
                return Ok(false);
            }
            if s == EMPTY {
                if self.len() >= self.cap {
                    return Err(Full(key));
                }
                self.slots[i] = key;
                self.used[self.len] = i as u32;
                self.len += 1;
                return Ok(true);
            }
            i = (i + 1) & self.mask;
        }
    }

    /// True when `key` is in the set.
    #[inline]
    pub fn contains(&self, key: u64) -> bool {
        if key == EMPTY {
            return self.has_max;
        }
        let mut i = fib_hash(key, self.bits);
        loop {
            match self.slots[i] {
                s if s == key => return true,
                EMPTY => return false,
                _ => i = (i + 1) & self.mask,
            }
        }
    }

    /// Removes every key, in O(keys).
    #[inline]
    pub fn clear(&mut self) {
        for &i in &self.used[..self.len] {
            self.slots[i as usize] = EMPTY;
        }
        self.len = 0;
        self.has_max = false;
    }
}

/// The clipped extent of one dimension: `(first, count)` of the in-bounds
/// coordinates of the box, `None` when none is in bounds.
#[inline]
fn clip(coord: i64, boxdim: u32, dim: u64) -> Option<(u64, u64)> {
    let lo = coord.max(0);
    let hi = coord
        .saturating_add(boxdim as i64)
        .min(dim.min(i64::MAX as u64) as i64);
    (hi > lo).then(|| (lo as u64, (hi - lo) as u64))
}

/// Line numbers `(first, count)` of the bytes `addr..=last`.
#[inline]
const fn line_span(addr: u64, last: u64, shift: u32) -> (u64, u64) {
    let first = addr >> shift;
    // `count <= last - addr + 1`, which fits because `last - addr < u64::MAX`
    // whenever the caller's `bytes` fitted in a u64.
    (first, (last >> shift) - first + 1)
}

fn line_shift(line_bytes: u64) -> Result<u32, LineError> {
    if line_bytes.is_power_of_two() {
        Ok(line_bytes.trailing_zeros())
    } else {
        Err(LineError::BadLineSize)
    }
}

/// The cache lines of one tensor box, generated row by row. Holds no
/// borrowed buffers: a plain state machine of a few words.
///
/// As an [`Iterator`] it yields the line-aligned address of every line of
/// every row, repeats across rows included. [`LineGen::next_unique`] yields
/// each line once.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct LineGen {
    shift: u32,
    rank: u8,
    /// Rows are ascending and disjoint: repeats are only adjacent.
    sorted: bool,
    /// A line was emitted by `next_unique` (then `last` is valid).
    has_last: bool,
    row_bytes: u64,
    total_rows: u64,
    /// Rows not yet started.
    rows_left: u64,
    /// Start address of the current row.
    row_addr: u64,
    /// Next line number of the current row, and lines left in it.
    cur: u64,
    row_left: u64,
    /// Last line number `next_unique` emitted (sorted case).
    last: u64,
    stride: [u64; 5],
    ext: [u64; 5],
    idx: [u64; 5],
}

impl LineGen {
    /// The lines of `map`'s box at `coords` with lines of `line_bytes`
    /// bytes (a power of two). A fully clipped box is valid and has no
    /// line. Only the first `map.rank` coordinates are read.
    pub fn new(map: &TensorMap, coords: &[i64; 5], line_bytes: u64) -> Result<Self, LineError> {
        let shift = line_shift(line_bytes)?;
        let rank = map.rank as usize;
        if !(1..=5).contains(&rank) || map.elem_bytes == 0 {
            return Err(LineError::BadMap);
        }
        let elem = map.elem_bytes as u64;
        let mut g = LineGen {
            shift,
            rank: map.rank,
            sorted: true,
            has_last: false,
            row_bytes: 0,
            total_rows: 0,
            rows_left: 0,
            row_addr: 0,
            cur: 0,
            row_left: 0,
            last: 0,
            stride: [0; 5],
            ext: [1; 5],
            idx: [0; 5],
        };
        let mut lo = [0u64; 5];
        for d in 0..rank {
            match clip(coords[d], map.boxdim[d], map.dims[d]) {
                Some((l, e)) => {
                    lo[d] = l;
                    g.ext[d] = e;
                }
                None => return Ok(g), // fully clipped: no rows
            }
        }
        let of = LineError::Overflow;
        g.row_bytes = g.ext[0].checked_mul(elem).ok_or(of)?;
        let mut start = lo[0]
            .checked_mul(elem)
            .and_then(|o| map.base.checked_add(o))
            .ok_or(of)?;
        // Highest byte of the box: every row's last byte is at most this.
        let mut top = start.checked_add(g.row_bytes - 1).ok_or(of)?;
        let mut rows = 1u64;
        let mut span = g.row_bytes;
        for (d, &l) in lo.iter().enumerate().take(rank).skip(1) {
            let s = map.strides[d];
            g.stride[d] = s;
            start = l
                .checked_mul(s)
                .and_then(|o| start.checked_add(o))
                .ok_or(of)?;
            let reach = (g.ext[d] - 1).checked_mul(s).ok_or(of)?;
            top = l
                .checked_mul(s)
                .and_then(|o| top.checked_add(o))
                .and_then(|t| t.checked_add(reach))
                .ok_or(of)?;
            rows = rows.checked_mul(g.ext[d]).ok_or(of)?;
            if g.ext[d] > 1 {
                g.sorted &= s >= span;
                span = span.saturating_add(reach);
            }
        }
        debug_assert!(top - start >= g.row_bytes - 1);
        g.total_rows = rows;
        g.rows_left = rows - 1;
        g.row_addr = start;
        g.start_row();
        Ok(g)
    }

    /// Loads the line range of the row starting at `row_addr`.
    #[inline]
    fn start_row(&mut self) {
        // No overflow: the row lies below the checked top of the box.
        let last = self.row_addr + (self.row_bytes - 1);
        (self.cur, self.row_left) = line_span(self.row_addr, last, self.shift);
    }

    /// Moves to the next row in odometer order (dimension 1 fastest).
    #[inline]
    fn next_row(&mut self) {
        for d in 1..self.rank as usize {
            if self.idx[d] + 1 < self.ext[d] {
                self.idx[d] += 1;
                self.row_addr = self.row_addr.wrapping_add(self.stride[d]);
                break;
            }
            self.row_addr = self
                .row_addr
                .wrapping_sub(self.idx[d].wrapping_mul(self.stride[d]));
            self.idx[d] = 0;
        }
        self.rows_left -= 1;
        self.start_row();
    }

    /// Calls `f(first, count)` with the line numbers of the rest of the
    /// current row and of every later row, and exhausts the generator.
    #[inline]
    fn for_each_run(&mut self, mut f: impl FnMut(u64, u64)) {
        loop {
            if self.row_left > 0 {
                f(self.cur, self.row_left);
                self.cur = self.cur.wrapping_add(self.row_left);
                self.row_left = 0;
            }
            if self.rows_left == 0 {
                return;
            }
            self.next_row();
        }
    }

    /// The next line number (not address), repeats across rows included.
    #[inline]
    fn next_index(&mut self) -> Option<u64> {
        if self.row_left == 0 {
            if self.rows_left == 0 {
                return None;
            }
            self.next_row();
        }
        self.row_left -= 1;
        let l = self.cur;
        self.cur = self.cur.wrapping_add(1);
        Some(l)
    }

    /// The next group of rows whose lines form one regular pattern:
    /// `(first, lines, stride, rows)`, `rows` rows of `lines` consecutive
    /// line numbers each, the `k`-th starting at `first + k * stride`
    /// (`stride` is 0 for a single row). Lines at or below `after` are
    /// left out (the caller's deduplication of sorted boxes); a row that
    /// loses lines that way is a group of its own. Rows are grouped along
    /// the first dimension above 0 they advance in, at most `max_rows` at a time, when that dimension's
    /// stride is a whole number of lines at least a row's span (so every
    /// row has the same lines and no two share one; dimensions of one index
    /// are skipped, as the walk skips them); otherwise each row is
    /// its own group. Takes a row at a time when the previous call left one
    /// half-read (only the iterator does).
    #[inline]
    pub fn next_group(
        &mut self,
        max_rows: u64,
        after: Option<u64>,
    ) -> Option<(u64, u64, u64, u64)> {
        loop {
            if self.row_left == 0 {
                if self.rows_left == 0 {
                    return None;
                }
                self.next_row();
            }
            let (mut first, mut n) = (self.cur, self.row_left);
            self.cur = self.cur.wrapping_add(self.row_left);
            self.row_left = 0;
            if let Some(a) = after {
                if first <= a {
                    let skip = (a - first + 1).min(n);
                    first += skip;
                    n -= skip;
                    if n == 0 {
                        continue;
                    }
                    return Some((first, n, 0, 1));
                }
            }
            // The dimension rows advance along first: the lowest above 0
            // with more than one index.
            let d = (1..self.rank as usize)
                .find(|&d| self.ext[d] > 1)
                .unwrap_or(0);
            let s = self.stride[d];
            let whole = d > 0 && s & ((1u64 << self.shift) - 1) == 0;
            let sl = s >> self.shift;
            if !whole || max_rows <= 1 || sl < n || self.idx[d] + 1 >= self.ext[d] {
                return Some((first, n, 0, 1));
            }
            let extra = (self.ext[d] - 1 - self.idx[d]).min(max_rows - 1);
            self.idx[d] += extra;
            self.row_addr = self.row_addr.wrapping_add(extra.wrapping_mul(s));
            self.rows_left -= extra;
            self.start_row();
            self.cur = self.cur.wrapping_add(self.row_left);
            self.row_left = 0;
            return Some((first, n, sl, extra + 1));
        }
    }

    /// The next line address not yet emitted by this generator. When
    /// [`LineGen::needs_dedup`] is true every line goes through `dedup`,
    /// which must be empty before the first call (or hold only lines to be
    /// suppressed); otherwise `dedup` is not touched.
    #[inline]
    pub fn next_unique(&mut self, dedup: &mut DedupSet<'_>) -> Result<Option<u64>, LineError> {
        while let Some(l) = self.next_index() {
            if self.sorted {
                // Lines are nondecreasing: a repeat equals the last one.
                if self.has_last && l <= self.last {
                    continue;
                }
                self.has_last = true;
                self.last = l;
                return Ok(Some(l << self.shift));
            }
            match dedup.insert(l) {
                Ok(true) => return Ok(Some(l << self.shift)),
                Ok(false) => {}
                Err(_) => return Err(LineError::DedupFull),
            }
        }
        Ok(None)
    }

    /// [`LineGen::next_unique`] with `Some(set)`; every row's lines,
    /// repeats included, with `None` (the "dedup disabled" ablation).
    #[inline]
    pub fn next_line(
        &mut self,
        dedup: Option<&mut DedupSet<'_>>,
    ) -> Result<Option<u64>, LineError> {
        match dedup {
            Some(set) => self.next_unique(set),
            None => Ok(self.next()),
        }
    }

    /// True when repeats can be non-adjacent, so that
    /// [`LineGen::next_unique`] needs its [`DedupSet`].
    #[inline]
    pub const fn needs_dedup(&self) -> bool {
        !self.sorted
    }

    /// Rows of the clipped box (0 when fully clipped).
    #[inline]
    pub const fn total_rows(&self) -> u64 {
        self.total_rows
    }

    /// Rows not yet started.
    #[inline]
    pub const fn rows_left(&self) -> u64 {
        self.rows_left
    }

    /// Bytes of one row of the clipped box.
    #[inline]
    pub const fn row_bytes(&self) -> u64 {
        self.row_bytes
    }

    /// In-bounds bytes of the box (saturating): equals
    /// [`TensorMap::box_bytes`].
    #[inline]
    pub const fn bytes(&self) -> u64 {
        self.total_rows.saturating_mul(self.row_bytes)
    }
}

impl Iterator for LineGen {
    type Item = u64;

    /// The next line address, repeats across rows included.
    #[inline]
    fn next(&mut self) -> Option<u64> {
        self.next_index().map(|l| l << self.shift)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let lo = usize::try_from(self.row_left).unwrap_or(usize::MAX);
        (lo, None)
    }
}

/// Calls `f` with the address of each line of `map`'s box at `coords` and
/// returns how many there were. With `Some(dedup)` each line comes once
/// (the set is scratch space and is cleared first when it is needed); with
/// `None` every row's lines come, repeats included.
pub fn for_each_line(
    map: &TensorMap,
    coords: &[i64; 5],
    line_bytes: u64,
    dedup: Option<&mut DedupSet<'_>>,
    mut f: impl FnMut(u64),
) -> Result<u64, LineError> {
    let mut g = LineGen::new(map, coords, line_bytes)?;
    let shift = g.shift;
    let mut n = 0u64;
    match dedup {
        Some(set) if g.needs_dedup() => {
            set.clear();
            while let Some(a) = g.next_unique(set)? {
                f(a);
                n += 1;
            }
        }
        Some(_) => {
            // Sorted rows: a row can only repeat a prefix of lines up to the
            // last one emitted.
            let mut last = 0u64; // highest line number emitted
            let mut started = false;
            g.for_each_run(|first, count| {
                let skip = if started && first <= last {
                    (last - first).saturating_add(1).min(count)
                } else {
                    0
                };
                for i in skip..count {
                    f((first + i) << shift);
                }
                if count > skip {
                    n += count - skip;
                    last = first + (count - 1);
                    started = true;
                }
            });
        }
        None => g.for_each_run(|first, count| {
            for i in 0..count {
                f((first + i) << shift);
            }
            n += count;
        }),
    }
    Ok(n)
}

/// The number of lines [`for_each_line`] would produce.
pub fn count_lines(
    map: &TensorMap,
    coords: &[i64; 5],
    line_bytes: u64,
    dedup: Option<&mut DedupSet<'_>>,
) -> Result<u64, LineError> {
    for_each_line(map, coords, line_bytes, dedup, |_| {})
}

/// Calls `f` with the address of each line of the bulk range
/// `addr..addr + bytes` and returns how many there were (0 for an empty
/// range).
#[inline]
pub fn for_each_bulk_line(
    addr: u64,
    bytes: u64,
    line_bytes: u64,
    mut f: impl FnMut(u64),
) -> Result<u64, LineError> {
    let shift = line_shift(line_bytes)?;
    if bytes == 0 {
        return Ok(0);
    }
    let last = addr.checked_add(bytes - 1).ok_or(LineError::Overflow)?;
    let (first, count) = line_span(addr, last, shift);
    for i in 0..count {
        f((first + i) << shift);
    }
    Ok(count)
}

/// An upper bound on the distinct lines of any box of `map` (in bounds or
/// clipped): rows of a full box times the most lines a row can straddle.
/// Sizes a [`DedupSet`]. `None` on a malformed map or overflow.
pub fn max_box_lines(map: &TensorMap, line_bytes: u64) -> Option<u64> {
    let shift = line_shift(line_bytes).ok()?;
    let rank = map.rank as usize;
    if !(1..=5).contains(&rank) || map.elem_bytes == 0 || map.boxdim[..rank].contains(&0) {
        return None;
    }
    let row = (map.boxdim[0] as u64).checked_mul(map.elem_bytes as u64)?;
    // A row of `row` bytes at any alignment straddles at most
    // ceil((row - 1) / line) + 1 lines.
    let per_row = ((row - 1) >> shift) + ((row - 1) & (line_bytes - 1) != 0) as u64 + 1;
    map.boxdim[1..rank]
        .iter()
        .try_fold(per_row, |acc, &b| acc.checked_mul(b as u64))
}

#[cfg(test)]
#[path = "lines_tests.rs"]
mod tests;
