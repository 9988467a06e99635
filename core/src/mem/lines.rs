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
use crate::kernel::TensorMap;
use crate::mem::table::{fib_hash, slots_for, Full};

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
mod tests {
    use super::*;
    use ::std::collections::BTreeSet;
    use proptest::prelude::*;

    fn map(rank: u8, elem: u8, dims: [u64; 5], strides: [u64; 5], boxdim: [u32; 5]) -> TensorMap {
        TensorMap {
            name: "t".try_into().unwrap(),
            base: 0,
            elem_bytes: elem,
            rank,
            dims,
            strides,
            boxdim,
        }
    }

    fn set_storage(capacity: usize) -> Vec<u8> {
        let mut l = Layout::new();
        DedupSet::layout(capacity, &mut l).unwrap();
        vec![0u8; l.bytes()]
    }

    /// Brute force: every in-bounds element, every byte of it. Returns the
    /// set of line addresses, the sum over rows of each row's distinct lines
    /// and the in-bounds bytes.
    fn reference(m: &TensorMap, c: &[i64; 5], line: u64) -> (BTreeSet<u64>, u64, u64) {
        let r = m.rank as usize;
        let mut set = BTreeSet::new();
        let mut per_row = 0u64;
        let mut bytes = 0u64;
        let total: u64 = m.boxdim[1..r].iter().map(|&b| b as u64).product();
        for row in 0..total {
            let mut x = [0i64; 5];
            let mut rest = row;
            let mut inside = true;
            for d in 1..r {
                x[d] = c[d] + (rest % m.boxdim[d] as u64) as i64;
                rest /= m.boxdim[d] as u64;
                inside &= x[d] >= 0 && (x[d] as u64) < m.dims[d];
            }
            if !inside {
                continue;
            }
            let mut row_lines = BTreeSet::new();
            for i0 in 0..m.boxdim[0] as i64 {
                let x0 = c[0] + i0;
                if x0 < 0 || x0 as u64 >= m.dims[0] {
                    continue;
                }
                let e = m.elem_bytes as u64;
                let a = m.base
                    + x0 as u64 * e
                    + (1..r).map(|d| x[d] as u64 * m.strides[d]).sum::<u64>();
                for b in a..a + e {
                    row_lines.insert(b / line * line);
                }
                bytes += e;
            }
            per_row += row_lines.len() as u64;
            set.extend(row_lines);
        }
        (set, per_row, bytes)
    }

    fn small_map() -> impl Strategy<Value = TensorMap> {
        (1u8..=5, prop_oneof![Just(1u8), Just(2), Just(4), Just(8)]).prop_flat_map(
            |(rank, elem)| {
                let stride = prop_oneof![
                    3 => (1u64..=24).prop_map(|k| 16 * k),
                    1 => 0u64..300,
                    1 => Just(0u64),
                ];
                (
                    proptest::array::uniform5(1u64..=7),
                    proptest::array::uniform5(stride),
                    proptest::array::uniform5(1u32..=5),
                    (0u64..64).prop_map(|b| b * 16),
                    0u64..40,
                    any::<bool>(),
                )
                    .prop_map(
                        move |(dims, mut strides, boxdim, base, odd, realistic)| {
                            if realistic {
                                // A dense row-major tensor, strides = sizes below.
                                let mut s = dims[0] * elem as u64;
                                for d in 1..5 {
                                    strides[d] = s.div_ceil(16) * 16;
                                    s = strides[d] * dims[d];
                                }
                            }
                            let mut m = map(rank, elem, dims, strides, boxdim);
                            m.base = base + odd * (!realistic) as u64;
                            m
                        },
                    )
            },
        )
    }

    fn coords() -> impl Strategy<Value = [i64; 5]> {
        proptest::array::uniform5(-6i64..=9)
    }

    fn line_size() -> impl Strategy<Value = u64> {
        prop_oneof![Just(1u64), Just(4), Just(16), Just(32), Just(64), Just(128)]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]
        #[test]
        fn matches_brute_force(m in small_map(), c in coords(), line in line_size()) {
            let (want, per_row, bytes) = reference(&m, &c, line);

            // Dedup disabled: every row's lines.
            let mut all = Vec::new();
            let n = for_each_line(&m, &c, line, None, |a| all.push(a)).unwrap();
            prop_assert_eq!(n as usize, all.len());
            prop_assert_eq!(n, per_row);
            prop_assert!(all.len() >= want.len());
            prop_assert_eq!(all.iter().copied().collect::<BTreeSet<_>>(), want.clone());
            prop_assert!(all.iter().all(|a| a % line == 0));

            // Dedup: each line once, in first-occurrence order of the above.
            let bound = max_box_lines(&m, line).unwrap() as usize;
            prop_assert!(want.len() <= bound);
            let mut buf = set_storage(bound);
            let mut a = Arena::new(&mut buf);
            let mut set = DedupSet::new_in(&mut a, bound, Capacity::MemoryPort).unwrap();
            set.insert(12345).unwrap(); // stale content of an earlier box
            let mut uniq = Vec::new();
            let n = for_each_line(&m, &c, line, Some(&mut set), |a| uniq.push(a)).unwrap();
            prop_assert_eq!(n as usize, uniq.len());
            prop_assert_eq!(uniq.len(), want.len());
            let mut seen = BTreeSet::new();
            let first: Vec<u64> = all.iter().copied().filter(|a| seen.insert(*a)).collect();
            prop_assert_eq!(&uniq, &first);
            prop_assert_eq!(count_lines(&m, &c, line, Some(&mut set)).unwrap(), n);
            prop_assert_eq!(count_lines(&m, &c, line, None).unwrap(), per_row);

            // Bytes agree with the brute force and with the tensor map.
            let g = LineGen::new(&m, &c, line).unwrap();
            prop_assert_eq!(g.bytes(), bytes);
            prop_assert_eq!(m.box_bytes(&c), bytes);
            // The generator itself, driven line by line.
            let mut g2 = g;
            set.clear();
            let mut by_hand = Vec::new();
            while let Some(a) = g2.next_line(Some(&mut set)).unwrap() {
                by_hand.push(a);
            }
            prop_assert_eq!(&by_hand, &uniq);
            // The set path gives the same answer when forced on any box.
            let mut g3 = g;
            g3.sorted = false;
            set.clear();
            let mut hashed = Vec::new();
            while let Some(a) = g3.next_unique(&mut set).unwrap() {
                hashed.push(a);
            }
            prop_assert_eq!(hashed, uniq);
            prop_assert_eq!(g2.next_line(None).unwrap(), None);
            prop_assert_eq!(g.collect::<Vec<_>>(), all);
        }

        #[test]
        fn bulk_lines(addr in 0u64..10_000, bytes in 0u64..2_000, line in line_size()) {
            let mut got = Vec::new();
            let n = for_each_bulk_line(addr, bytes, line, |a| got.push(a)).unwrap();
            let want: Vec<u64> = (addr..addr + bytes)
                .map(|b| b / line * line)
                .collect::<BTreeSet<_>>()
                .into_iter()
                .collect();
            prop_assert_eq!(n as usize, got.len());
            prop_assert_eq!(got, want);
        }
    }

    #[test]
    fn fully_clipped_box_has_no_lines() {
        let m = map(2, 2, [64, 64, 1, 1, 1], [0, 128, 0, 0, 0], [64, 8, 1, 1, 1]);
        for c in [
            [-64, 0, 0, 0, 0],
            [64, 0, 0, 0, 0],
            [0, -8, 0, 0, 0],
            [0, 64, 0, 0, 0],
            [0, 0, 3, 0, 0],
        ] {
            // (the third coordinate is ignored at rank 2: 8 rows of 128 bytes)
            let mut calls = 0;
            let n = for_each_line(&m, &c, 128, None, |_| calls += 1).unwrap();
            let want = if c[2] == 3 { 8 } else { 0 };
            assert_eq!((n, calls), (want, want), "{c:?}");
        }
        let mut huge = m.clone();
        huge.base = u64::MAX - 15; // no traffic, so no overflow either
        let g = LineGen::new(&huge, &[0, 64, 0, 0, 0], 128).unwrap();
        assert_eq!((g.total_rows(), g.bytes()), (0, 0));
        assert_eq!(g.count(), 0);
        assert_eq!(huge.box_bytes(&[0, 64, 0, 0, 0]), 0);
    }

    #[test]
    fn partial_clip_and_typical_tile() {
        // A 64x128 fp16 tile of a 1000x1000 row-major matrix: 128 rows of
        // 128 bytes, each one line when aligned.
        let m = map(
            2,
            2,
            [1000, 1000, 1, 1, 1],
            [0, 2000 * 16 / 16, 0, 0, 0],
            [64, 128, 1, 1, 1],
        );
        let g = LineGen::new(&m, &[0, 0, 0, 0, 0], 128).unwrap();
        assert!(!g.needs_dedup());
        assert_eq!(g.total_rows(), 128);
        // Rows at 2000-byte stride are not 128-aligned: most straddle 2 lines.
        let n = count_lines(&m, &[0, 0, 0, 0, 0], 128, None).unwrap();
        assert!(n > 128 && n <= 256, "{n}");
        // Clipped at the right edge: x in 960..1000 (40 elements = 80 bytes).
        let g = LineGen::new(&m, &[960, 990, 0, 0, 0], 128).unwrap();
        assert_eq!((g.total_rows(), g.row_bytes()), (10, 80));
        assert_eq!(g.bytes(), m.box_bytes(&[960, 990, 0, 0, 0]));
    }

    #[test]
    fn overlapping_rows_need_the_set() {
        // Stride 16 with 64-byte rows: rows overlap, lines repeat.
        let m = map(2, 4, [16, 16, 1, 1, 1], [0, 16, 0, 0, 0], [16, 16, 1, 1, 1]);
        let g = LineGen::new(&m, &[0; 5], 32).unwrap();
        assert!(g.needs_dedup());
        // Row y covers bytes 16y..16y+64: 2 lines for even y, 3 for odd y;
        // the box covers bytes 0..304, lines 0..=9.
        assert_eq!(count_lines(&m, &[0; 5], 32, None), Ok(8 * 2 + 8 * 3));
        let mut buf = set_storage(10);
        let mut a = Arena::new(&mut buf);
        let mut set = DedupSet::new_in(&mut a, 10, Capacity::MemoryPort).unwrap();
        let mut got = Vec::new();
        assert_eq!(
            for_each_line(&m, &[0; 5], 32, Some(&mut set), |a| got.push(a)),
            Ok(10)
        );
        got.sort_unstable();
        assert_eq!(got, (0..10).map(|l| l * 32).collect::<Vec<u64>>());
    }

    #[test]
    fn dedup_full_is_an_error() {
        // Zero stride: every row is the same 4 lines, and rank 3 with a
        // growing stride makes 16 distinct lines in an unsorted walk.
        let m = map(3, 4, [32, 4, 4, 1, 1], [0, 0, 128, 0, 0], [32, 4, 4, 1, 1]);
        let g = LineGen::new(&m, &[0; 5], 32).unwrap();
        assert!(g.needs_dedup());
        let mut buf = set_storage(15);
        let mut a = Arena::new(&mut buf);
        let mut set = DedupSet::new_in(&mut a, 15, Capacity::MemoryPort).unwrap();
        let mut n = 0;
        let e = for_each_line(&m, &[0; 5], 32, Some(&mut set), |_| n += 1);
        assert_eq!(e, Err(LineError::DedupFull));
        assert_eq!(n, 15);
        // One more slot is enough, and the set can be reused.
        let mut buf = set_storage(16);
        let mut a = Arena::new(&mut buf);
        let mut set = DedupSet::new_in(&mut a, 16, Capacity::MemoryPort).unwrap();
        for _ in 0..3 {
            assert_eq!(count_lines(&m, &[0; 5], 32, Some(&mut set)), Ok(16));
        }
        assert_eq!(count_lines(&m, &[0; 5], 32, None), Ok(64));
        // Zero capacity with a box that needs the set.
        let mut buf = set_storage(0);
        let mut a = Arena::new(&mut buf);
        let mut set = DedupSet::new_in(&mut a, 0, Capacity::MemoryPort).unwrap();
        assert_eq!(
            count_lines(&m, &[0; 5], 32, Some(&mut set)),
            Err(LineError::DedupFull)
        );
    }

    #[test]
    fn dedup_set_basics() {
        let mut buf = set_storage(3);
        let mut a = Arena::new(&mut buf);
        let mut s = DedupSet::new_in(&mut a, 3, Capacity::MemoryPort).unwrap();
        assert!(s.is_empty());
        assert_eq!(s.capacity(), 3);
        assert_eq!(s.insert(5), Ok(true));
        assert_eq!(s.insert(5), Ok(false));
        assert_eq!(s.insert(u64::MAX), Ok(true));
        assert_eq!(s.insert(u64::MAX), Ok(false));
        assert!(s.contains(u64::MAX) && s.contains(5) && !s.contains(6));
        assert_eq!(s.insert(0), Ok(true));
        assert_eq!(s.len(), 3);
        assert_eq!(s.insert(6), Err(Full(6)));
        assert_eq!(s.insert(0), Ok(false));
        s.clear();
        assert!(s.is_empty() && !s.contains(5) && !s.contains(u64::MAX) && !s.contains(0));
        assert_eq!(s.insert(6), Ok(true));
        let mut l = Layout::new();
        assert_eq!(
            DedupSet::layout(usize::MAX, &mut l),
            Err(BuildError::TooLarge)
        );
    }

    #[test]
    fn hostile_maps_are_errors_not_panics() {
        let ok = map(2, 2, [64, 64, 1, 1, 1], [0, 128, 0, 0, 0], [64, 8, 1, 1, 1]);
        let c = [0i64; 5];
        for lb in [0u64, 3, 96] {
            assert_eq!(
                LineGen::new(&ok, &c, lb).err(),
                Some(LineError::BadLineSize)
            );
            assert_eq!(
                for_each_bulk_line(0, 1, lb, |_| {}),
                Err(LineError::BadLineSize)
            );
        }
        for (rank, elem) in [(0u8, 2u8), (6, 2), (255, 2), (2, 0)] {
            let mut m = ok.clone();
            m.rank = rank;
            m.elem_bytes = elem;
            assert_eq!(LineGen::new(&m, &c, 128).err(), Some(LineError::BadMap));
            assert_eq!(max_box_lines(&m, 128), None);
        }
        let mut m = ok.clone();
        m.base = u64::MAX - 100;
        assert_eq!(LineGen::new(&m, &c, 128).err(), Some(LineError::Overflow));
        let mut m = ok.clone();
        m.strides[1] = u64::MAX / 4;
        m.dims[1] = u64::MAX;
        assert_eq!(LineGen::new(&m, &c, 128).err(), Some(LineError::Overflow));
        assert_eq!(
            LineGen::new(&m, &[0, i64::MAX - 2, 0, 0, 0], 128).err(),
            Some(LineError::Overflow)
        );
        // Extreme coordinates and dimensions saturate instead of wrapping.
        let mut m = ok.clone();
        m.dims = [u64::MAX; 5];
        m.boxdim = [u32::MAX; 5];
        m.strides = [0, 16, 0, 0, 0];
        let g = LineGen::new(&m, &[0; 5], 128).unwrap();
        assert_eq!(
            (g.total_rows(), g.row_bytes()),
            (u32::MAX as u64, 2 * u32::MAX as u64)
        );
        assert!(g.needs_dedup());
        assert_eq!(
            LineGen::new(&m, &[i64::MAX, 0, 0, 0, 0], 128)
                .unwrap()
                .total_rows(),
            0
        );
        assert_eq!(
            LineGen::new(&m, &[i64::MAX - 9, 0, 0, 0, 0], 128).err(),
            Some(LineError::Overflow)
        );
        m.strides[1] = 1 << 40;
        assert_eq!(
            LineGen::new(&m, &[0; 5], 128).err(),
            Some(LineError::Overflow)
        );
        assert_eq!(
            LineGen::new(&m, &[i64::MIN, i64::MIN, 0, 0, 0], 128)
                .unwrap()
                .total_rows(),
            0
        );
        m.rank = 5;
        m.strides = [0, 16, 16, 16, 16];
        assert_eq!(
            LineGen::new(&m, &[0; 5], 128).err(),
            Some(LineError::Overflow)
        );
        // Bulk ranges.
        assert_eq!(for_each_bulk_line(u64::MAX, 1, 128, |_| {}), Ok(1));
        assert_eq!(
            for_each_bulk_line(u64::MAX, 2, 128, |_| {}),
            Err(LineError::Overflow)
        );
        assert_eq!(for_each_bulk_line(u64::MAX, 0, 128, |_| {}), Ok(0));
        let mut got = Vec::new();
        assert_eq!(
            for_each_bulk_line(u64::MAX - 1, 2, 1, |a| got.push(a)),
            Ok(2)
        );
        assert_eq!(got, vec![u64::MAX - 1, u64::MAX]);
        // Line size 1 reaching the last address of the space.
        let mut m = map(1, 1, [16, 1, 1, 1, 1], [0; 5], [16, 1, 1, 1, 1]);
        m.base = u64::MAX - 15;
        let mut buf = set_storage(16);
        let mut a = Arena::new(&mut buf);
        let mut set = DedupSet::new_in(&mut a, 16, Capacity::MemoryPort).unwrap();
        let mut last = 0;
        assert_eq!(
            for_each_line(&m, &c, 1, Some(&mut set), |a| last = a),
            Ok(16)
        );
        assert_eq!(last, u64::MAX);
        assert_eq!(max_box_lines(&ok, 128), Some(2 * 8));
    }
}
