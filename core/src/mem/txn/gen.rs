//! The lines of one TMA operation, in the order the engine emits them,
//! cut into chunks.
//!
//! Line generation is the line-level engine's: a tensor box walks its
//! clipped rows ([`LineGen`]), repeated lines are removed when `dedup` is
//! on (adjacent repeats of sorted boxes by comparison, others through the
//! [`DedupSet`], whose overflow lets the rest through), a bulk range is its
//! consecutive lines. `Chunker` then groups consecutive lines into
//! [`Pattern`]s of at most `chunk_lines` lines.

use crate::mem::lines::{DedupSet, LineGen};
use crate::mem::txn::l2::Pattern;
use crate::tensor_map::TensorMap;
use crate::transfer::Shape;

/// Lines of one operation (line numbers, not addresses).
#[derive(Clone, Copy, Debug)]
pub(super) enum Lines {
    /// A tensor box; `sorted` when its rows are ascending and disjoint.
    Tensor {
        g: LineGen,
        sorted: bool,
        last: Option<u64>,
    },
    /// A bulk range.
    Bulk { next: u64, left: u64 },
}

impl Lines {
    /// The lines of `shape` moving `bytes` (bulk) with lines of `2^shift`
    /// bytes.
    pub(super) fn new(shape: &Shape<'_>, bytes: u64, shift: u32) -> Lines {
        match *shape {
            Shape::Tensor { map, coords } => tensor(map, &coords, shift),
            Shape::Linear { addr } => {
                if bytes == 0 {
                    return Lines::Bulk { next: 0, left: 0 };
                }
                let first = addr >> shift;
                let last = addr.saturating_add(bytes - 1) >> shift;
                Lines::Bulk {
                    next: first,
                    left: last - first + 1,
                }
            }
        }
    }

    /// The next group of lines in emission order: `(first, lines,
    /// stride, rows)` as [`LineGen::next_group`] gives them (at most
    /// `max_rows` rows); with `dedup`, repeats are removed.
    #[inline]
    pub(super) fn next_group(
        &mut self,
        shift: u32,
        max_rows: u64,
        dedup: Option<&mut DedupSet<'_>>,
    ) -> Option<(u64, u64, u64, u64)> {
        match self {
            Lines::Bulk { next, left } => {
                if *left == 0 {
                    return None;
                }
                let run = (*next, *left, 0, 1);
                *next = next.wrapping_add(*left);
                *left = 0;
                Some(run)
            }
            Lines::Tensor { g, sorted, last } => {
                let Some(set) = dedup else {
                    return g.next_group(max_rows, None);
                };
                if *sorted {
                    // Rows ascend: a repeat can only be a row's first
                    // lines, at or below the previous row's last.
                    let (a, n, st, rows) = g.next_group(max_rows, *last)?;
                    *last = Some(a + (rows - 1) * st + n - 1);
                    return Some((a, n, st, rows));
                }
                // Rows in any order: line by line through the set.
                loop {
                    let line = g.next()? >> shift;
                    match set.insert(line) {
                        Ok(false) => continue,
                        Ok(true) | Err(_) => return Some((line, 1, 0, 1)),
                    }
                }
            }
        }
    }
}

fn tensor(map: &TensorMap, coords: &[i64; 5], shift: u32) -> Lines {
    match LineGen::new(map, coords, 1u64 << shift) {
        Ok(g) => Lines::Tensor {
            sorted: !g.needs_dedup(),
            g,
            last: None,
        },
        // A map that cannot be walked (validated kernels never get here)
        // moves nothing.
        Err(_) => Lines::Bulk { next: 0, left: 0 },
    }
}

/// Where [`Patterns`] is in an operation's groups of lines.
#[derive(Clone, Copy, Debug)]
enum Phase {
    /// Between groups: fetch the next.
    Fetch,
    /// Feeding a run of consecutive lines to the chunker.
    Run { a: u64, left: u64 },
    /// Regular rows of at most a chunk each: whole rows per chunk.
    Rows { g: Group, r: u64 },
    /// Rows longer than a chunk (or too far apart): cut row by row.
    Cut { g: Group, r: u64, j: u64 },
    /// The groups are done: the chunker's last chunk is left.
    End,
    /// Nothing is left.
    Done,
}

/// A group of lines as [`Lines::next_group`] gives it.
#[derive(Clone, Copy, Debug)]
struct Group {
    first: u64,
    len: u64,
    stride: u64,
    rows: u64,
}

/// The chunks of one operation, one at a time: its lines cut into
/// [`Pattern`]s of at most `chunk` lines, in emission order. Runs of
/// consecutive lines are merged with their neighbours by the [`Chunker`];
/// regular rows of a box become chunks of whole rows (or rows cut into
/// chunks). Resumable, so that operations handed over together can be
/// timed chunk by chunk in turn.
#[derive(Clone, Copy, Debug)]
pub(super) struct Patterns {
    lines: Lines,
    c: Chunker,
    phase: Phase,
    chunk: u8,
    /// Lines generated so far.
    pub(super) n: u64,
}

impl Patterns {
    /// The chunks of `lines`, at most `chunk` (at least 1) lines each.
    pub(super) fn new(lines: Lines, chunk: u8) -> Self {
        Patterns {
            lines,
            c: Chunker::default(),
            phase: Phase::Fetch,
            chunk: chunk.max(1),
            n: 0,
        }
    }

    /// Whether the operation's lines go through a [`DedupSet`] (a box
    /// whose rows may repeat lines out of order, with `dedup` on): the
    /// set then belongs to it until its last chunk.
    pub(super) fn uses_set(&self) -> bool {
        matches!(self.lines, Lines::Tensor { sorted: false, .. })
    }

    /// The next chunk, or `None` when the operation has no more.
    #[inline]
    pub(super) fn next(
        &mut self,
        shift: u32,
        mut dedup: Option<&mut DedupSet<'_>>,
    ) -> Option<Pattern> {
        let k = self.chunk as u64;
        loop {
            match self.phase {
                Phase::Fetch => {
                    let Some((first, len, stride, rows)) =
                        self.lines.next_group(shift, 1 << 20, dedup.as_deref_mut())
                    else {
                        self.phase = Phase::End;
                        continue;
                    };
                    self.n += len * rows;
                    if rows == 1 {
                        self.phase = Phase::Run {
                            a: first,
                            left: len,
                        };
                        continue;
                    }
                    let g = Group {
                        first,
                        len,
                        stride,
                        rows,
                    };
                    self.phase = if len <= k && stride <= MAX_STRIDE {
                        Phase::Rows { g, r: 0 }
                    } else {
                        Phase::Cut { g, r: 0, j: 0 }
                    };
                    // Rows never share a chunk with the runs before them.
                    if let Some(p) = self.take() {
                        return Some(p);
                    }
                }
                Phase::Run { a, left } => {
                    if left == 0 {
                        self.phase = Phase::Fetch;
                        continue;
                    }
                    let took = self.c.push_run(a, left, self.chunk);
                    if took == 0 {
                        // The chunk is full or the run breaks its pattern:
                        // out with it, and the run starts the next (an
                        // empty chunk takes at least one line, so there is
                        // one to take).
                        return self.take();
                    }
                    self.phase = Phase::Run {
                        a: a + took,
                        left: left - took,
                    };
                }
                Phase::Rows { g, r } => {
                    if r >= g.rows {
                        self.phase = Phase::Fetch;
                        continue;
                    }
                    let n = (k / g.len).min(g.rows - r);
                    self.phase = Phase::Rows { g, r: r + n };
                    return Some(Pattern {
                        first: g.first + r * g.stride,
                        stride: if n > 1 { g.stride } else { 0 },
                        row: g.len as u8,
                        count: (g.len * n) as u8,
                        part: 0,
                        weight: (g.len * n) as u8,
                    });
                }
                Phase::Cut { g, r, j } => {
                    if r >= g.rows {
                        self.phase = Phase::Fetch;
                        continue;
                    }
                    if j >= g.len {
                        self.phase = Phase::Cut { g, r: r + 1, j: 0 };
                        continue;
                    }
                    let w = k.min(g.len - j);
                    self.phase = Phase::Cut { g, r, j: j + w };
                    return Some(Pattern {
                        first: g.first + r * g.stride + j,
                        stride: 0,
                        row: w as u8,
                        count: w as u8,
                        part: 0,
                        weight: w as u8,
                    });
                }
                Phase::End => {
                    self.phase = Phase::Done;
                    return self.take();
                }
                Phase::Done => return None,
            }
        }
    }

    /// The chunker's chunk, if it has one, which is then emptied.
    fn take(&mut self) -> Option<Pattern> {
        if self.c.is_empty() {
            return None;
        }
        let p = self.c.pat;
        self.c.clear();
        Some(p)
    }
}

/// Largest stride a pattern can record (it is packed into 47 bits).
pub(super) const MAX_STRIDE: u64 = (1 << 47) - 1;

/// Builds a [`Pattern`] run by run.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct Chunker {
    pub(super) pat: Pattern,
    /// Rows started.
    rows: u32,
    /// Start and length of the current row.
    row_start: u64,
    row_len: u8,
    last: u64,
}

impl Chunker {
    /// True when no line has been added.
    pub(super) fn is_empty(&self) -> bool {
        self.pat.count == 0
    }

    /// Empties the chunk.
    pub(super) fn clear(&mut self) {
        self.pat.count = 0;
    }

    /// Adds as many of the `n` consecutive lines from `a` as the chunk
    /// (of at most `max` lines) can take and returns how many it took: 0
    /// when they cannot continue its pattern.
    #[inline]
    pub(super) fn push_run(&mut self, a: u64, n: u64, max: u8) -> u64 {
        let p = &mut self.pat;
        if p.count == 0 {
            let take = n.min(max as u64).min(u8::MAX as u64) as u8;
            if take == 0 {
                return 0;
            }
            *self = Chunker {
                pat: Pattern {
                    first: a,
                    stride: 0,
                    row: take,
                    count: take,
                    part: 0,
                    weight: take,
                },
                rows: 1,
                row_start: a,
                row_len: take,
                last: a + take as u64 - 1,
            };
            return take as u64;
        }
        let room = (max.saturating_sub(p.count)) as u64;
        if room == 0 || n == 0 || a <= self.last {
            return 0;
        }
        let take = if a == self.last + 1 && (self.rows == 1 || self.row_len < p.row) {
            if self.rows == 1 {
                let t = n.min(room).min((u8::MAX - p.row) as u64) as u8;
                p.row += t;
                t
            } else {
                n.min(room).min((p.row - self.row_len) as u64) as u8
            }
        } else if self.row_len == p.row {
            if self.rows == 1 {
                let stride = a - p.first;
                if stride > MAX_STRIDE {
                    return 0;
                }
                p.stride = stride;
            } else if a != self.row_start.wrapping_add(p.stride) {
                return 0;
            }
            self.rows += 1;
            self.row_start = a;
            self.row_len = 0;
            n.min(room).min(p.row as u64) as u8
        } else {
            return 0;
        };
        self.row_len += take;
        p.count += take;
        p.weight += take;
        self.last = a + take as u64 - 1;
        take as u64
    }
}

/// Calls `f(i, line)` for each line of `p`, in order (`i` from 0), row by
/// row without divisions: the one walk of a pattern's lines, on the
/// per-line path of every chunk.
#[inline(always)]
pub(super) fn for_each_line(p: &Pattern, mut f: impl FnMut(u32, u64)) {
    let row = p.row.max(1) as u64;
    let (mut start, mut j) = (p.first, 0u64);
    for i in 0..p.count as u32 {
        f(i, start.wrapping_add(j));
        j += 1;
        if j == row {
            j = 0;
            start = start.wrapping_add(p.stride);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Cuts `lines` into chunks of at most `max` lines, feeding the
    /// chunker runs of consecutive lines.
    fn chunks(lines: &[u64], max: u8) -> Vec<Pattern> {
        let mut runs: Vec<(u64, u64)> = Vec::new();
        for &l in lines {
            match runs.last_mut() {
                Some((a, n)) if *a + *n == l => *n += 1,
                _ => runs.push((l, 1)),
            }
        }
        let mut out = Vec::new();
        let mut c = Chunker::default();
        for (mut a, mut n) in runs {
            while n > 0 {
                let t = c.push_run(a, n, max);
                if t == 0 {
                    out.push(c.pat);
                    c.clear();
                    continue;
                }
                a += t;
                n -= t;
            }
        }
        if !c.is_empty() {
            out.push(c.pat);
        }
        out
    }

    #[test]
    fn rows_of_a_box_make_strided_chunks() {
        // Rows of 2 lines, 16 lines apart: chunks of 4 rows.
        let lines: Vec<u64> = (0..6).flat_map(|r| [100 + 16 * r, 101 + 16 * r]).collect();
        let c = chunks(&lines, 8);
        assert_eq!(c.len(), 2);
        assert_eq!(
            c[0],
            Pattern {
                first: 100,
                stride: 16,
                row: 2,
                count: 8,
                part: 0,
                weight: 8,
            }
        );
        assert_eq!(c[1].first, 164);
        assert_eq!(c[1].count, 4);
    }

    proptest! {
        /// Whatever the lines, the chunks list them back in order.
        #[test]
        fn chunks_reproduce_their_lines(
            lines in proptest::collection::vec(0u64..64, 0..80),
            max in 1u8..12,
        ) {
            let mut sorted = lines.clone();
            sorted.sort_unstable();
            sorted.dedup();
            for input in [lines, sorted] {
                let mut back = Vec::new();
                for p in chunks(&input, max) {
                    prop_assert!(p.count >= 1 && p.count <= max);
                    let mut lines = Vec::new();
                    for_each_line(&p, |_, l| lines.push(l));
                    let by_index: Vec<u64> = (0..p.count).map(|i| p.line(i)).collect();
                    prop_assert_eq!(&lines, &by_index);
                    back.extend(lines);
                }
                prop_assert_eq!(back, input);
            }
        }
    }
}
