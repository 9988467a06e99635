//! A streaming reader for SCALE-Sim's trace CSVs.
//!
//! SCALE-Sim v3 writes every trace as a matrix with no header: one row per
//! line, the first field the row's cycle, then one field per lane holding
//! an address, with `-1` for an idle lane. The SRAM traces print integers
//! (`np.savetxt(fmt='%i')`), the DRAM traces floats (`fmt='%s'`:
//! `-108.0,10000000.0,...`), and the cold-start prefetch sits at negative
//! cycles. This reader accepts both spellings of an integer (a float must
//! be whole and at most 2^53 in magnitude), an empty field as an idle lane,
//! spaces around fields and `\r\n` endings. Everything else is a
//! [`ScaleSimError::At`] naming the file, line and column: a byte no
//! number has, a fraction, a negative address other than `-1`, a row of
//! another width than the first, a line over [`MAX_LINE`] bytes, or a last
//! line with no newline (a truncated file: SCALE-Sim ends every row with
//! one).
//!
//! The fields are split by hand rather than with a CSV crate: the files
//! have no quoting, and splitting here gives each error its exact column.
//! Memory is one reused line buffer and one reused address list, whatever
//! the file's size.
//!
//! ```
//! use simfa_std::scalesim::trace::TraceReader;
//!
//! let csv = "-2.0,7.0,-1.0\n5,8,\n";
//! let mut r = TraceReader::new("t.csv", csv.as_bytes());
//! let mut addrs = Vec::new();
//! assert_eq!(r.next_row(&mut addrs).unwrap(), Some(-2));
//! assert_eq!(addrs, [7]);
//! assert_eq!(r.next_row(&mut addrs).unwrap(), Some(5));
//! assert_eq!(addrs, [8]);
//! assert_eq!(r.lanes(), Some(2));
//! assert_eq!(r.next_row(&mut addrs).unwrap(), None);
//! ```

use std::io::{BufRead, Read};

use super::error::{Fault, ScaleSimError};

/// The longest line accepted, in bytes (a row of a 4096-lane array needs
/// about 40 KiB).
pub const MAX_LINE: usize = 1 << 20;

/// Largest integer magnitude a float field may spell exactly.
const MAX_EXACT: f64 = 9_007_199_254_740_992.0;

/// Reads one trace file row by row.
pub struct TraceReader<R> {
    file: String,
    input: R,
    line: u64,
    buf: Vec<u8>,
    fields: Option<usize>,
}

impl<R: BufRead> TraceReader<R> {
    /// A reader of `input`, named `file` in its errors.
    pub fn new(file: impl Into<String>, input: R) -> Self {
        TraceReader {
            file: file.into(),
            input,
            line: 0,
            buf: Vec::new(),
            fields: None,
        }
    }

    /// The file's name, as its errors give it.
    pub fn file(&self) -> &str {
        &self.file
    }

    /// The line of the row [`Self::next_row`] returned last (1-based; 0
    /// before the first).
    pub fn line(&self) -> u64 {
        self.line
    }

    /// Address lanes per row (fields after the cycle), once a row was read.
    pub fn lanes(&self) -> Option<usize> {
        self.fields.map(|f| f - 1)
    }

    /// The 1-based byte column where field `n` (0-based: the cycle is
    /// field 0) of the last row read starts; past the last field, the
    /// column after the line's end.
    pub fn field_column(&self, n: usize) -> u64 {
        let line = self.buf.strip_suffix(b"\n").unwrap_or(&self.buf);
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        if n == 0 {
            return 1;
        }
        line.iter()
            .enumerate()
            .filter(|(_, &b)| b == b',')
            .nth(n - 1)
            .map_or(line.len(), |(i, _)| i + 1) as u64
            + 1
    }

    fn err(&self, column: usize, fault: Fault) -> ScaleSimError {
        ScaleSimError::at(&self.file, self.line, column as u64 + 1, fault)
    }

    /// The next row: its cycle, with its non-idle addresses in `addrs`
    /// (cleared first, in lane order); `None` at the end of the file.
    pub fn next_row(&mut self, addrs: &mut Vec<u64>) -> Result<Option<i64>, ScaleSimError> {
        addrs.clear();
        self.buf.clear();
        let n = (&mut self.input)
            .take(MAX_LINE as u64 + 1)
            .read_until(b'\n', &mut self.buf)
            .map_err(|e| ScaleSimError::Io {
                file: self.file.clone(),
                source: e,
            })?;
        if n == 0 {
            return Ok(None);
        }
        self.line += 1;
        if self.buf.last() != Some(&b'\n') {
            return Err(if self.buf.len() > MAX_LINE {
                self.err(MAX_LINE, Fault::LineTooLong(MAX_LINE))
            } else {
                self.err(self.buf.len(), Fault::Truncated)
            });
        }
        let mut end = self.buf.len() - 1;
        if end > 0 && self.buf[end - 1] == b'\r' {
            end -= 1;
        }
        let buf = std::mem::take(&mut self.buf);
        let row = self.parse(&buf[..end], addrs);
        self.buf = buf;
        row.map(Some)
    }

    fn parse(&mut self, line: &[u8], addrs: &mut Vec<u64>) -> Result<i64, ScaleSimError> {
        let mut cycle = 0;
        let mut fields = 0;
        let mut start = 0;
        for field in line.split(|&b| b == b',') {
            let col = start;
            start += field.len() + 1;
            if fields == 0 {
                cycle = match self.number(field, col)? {
                    Some(c) => c,
                    None => return Err(self.err(col, Fault::Empty("cycle"))),
                };
            } else {
                match self.number(field, col)? {
                    None | Some(-1) => {}
                    Some(a) if a < 0 => return Err(self.err(col, Fault::NegativeAddress(a))),
                    Some(a) => addrs.push(a as u64),
                }
            }
            fields += 1;
        }
        match self.fields {
            None => self.fields = Some(fields),
            Some(expected) if expected != fields => {
                let col = if fields > expected {
                    // Where the first extra field starts.
                    line.iter()
                        .enumerate()
                        .filter(|(_, &b)| b == b',')
                        .nth(expected - 1)
                        .map_or(line.len(), |(i, _)| i + 1)
                } else {
                    line.len()
                };
                return Err(self.err(
                    col,
                    Fault::FieldCount {
                        found: fields,
                        expected,
                    },
                ));
            }
            Some(_) => {}
        }
        Ok(cycle)
    }

    /// Field `field` at column `col` as an integer ([`number`]).
    fn number(&self, field: &[u8], col: usize) -> Result<Option<i64>, ScaleSimError> {
        number(field).map_err(|(at, fault)| self.err(col + at, fault))
    }
}

/// One CSV field as an integer (SCALE-Sim writes some as `123.0`); `None`
/// when it is blank. An error comes with the byte offset in `field` it is
/// at.
pub(super) fn number(field: &[u8]) -> Result<Option<i64>, (usize, Fault)> {
    let lead = field
        .iter()
        .take_while(|b| matches!(b, b' ' | b'\t'))
        .count();
    let trail = field[lead..]
        .iter()
        .rev()
        .take_while(|b| matches!(b, b' ' | b'\t'))
        .count();
    let text = &field[lead..field.len() - trail];
    if text.is_empty() {
        return Ok(None);
    }
    if let Some(i) = text
        .iter()
        .position(|b| !matches!(b, b'0'..=b'9' | b'+' | b'-' | b'.' | b'e' | b'E'))
    {
        return Err((lead + i, Fault::UnexpectedByte(text[i])));
    }
    // Only ASCII is left.
    let s = std::str::from_utf8(text).expect("ASCII");
    if let Ok(v) = s.parse::<i64>() {
        return Ok(Some(v));
    }
    let owned = || s.to_string();
    let v: f64 = s.parse().map_err(|_| (lead, Fault::NotANumber(owned())))?;
    if v.abs() > MAX_EXACT {
        return Err((lead, Fault::OutOfRange(owned())));
    }
    if v.fract() != 0.0 {
        return Err((lead, Fault::NotAnInteger(owned())));
    }
    Ok(Some(v as i64))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read_all(text: &[u8]) -> Result<Vec<(i64, Vec<u64>)>, ScaleSimError> {
        let mut r = TraceReader::new("t.csv", text);
        let mut out = Vec::new();
        let mut a = Vec::new();
        while let Some(c) = r.next_row(&mut a)? {
            out.push((c, a.clone()));
        }
        Ok(out)
    }

    fn err(text: &[u8]) -> String {
        read_all(text).unwrap_err().to_string()
    }

    #[test]
    fn reads_both_spellings() {
        let rows = read_all(b"1,10000007,-1, 3\r\n-108.0,1e3,-1.0,\n").unwrap();
        assert_eq!(rows, [(1, vec![10000007, 3]), (-108, vec![1000])]);
    }

    #[test]
    fn errors_name_line_and_column() {
        assert_eq!(err(b"1,2\n3,x\n"), "t.csv:2:3: unexpected byte 0x78");
        assert_eq!(err(b"1,2.5\n"), "t.csv:1:3: \"2.5\" is not an integer");
        assert_eq!(
            err(b"1,2\n3,4,5\n"),
            "t.csv:2:5: row has 3 fields, the first row has 2"
        );
        assert_eq!(
            err(b"1,2,3\n3,4\n"),
            "t.csv:2:4: row has 2 fields, the first row has 3"
        );
        assert_eq!(
            err(b"1,2\n3,4"),
            "t.csv:2:4: truncated: the last line has no newline"
        );
        assert_eq!(err(b"1,-7\n"), "t.csv:1:3: negative address -7");
        assert_eq!(err(b",7\n"), "t.csv:1:1: empty cycle field");
        assert_eq!(err(b"1,1e300\n"), "t.csv:1:3: \"1e300\" is out of range");
        assert_eq!(err(b"1,--\n"), "t.csv:1:3: \"--\" is not a number");
        assert_eq!(err(b"1,\xff\n"), "t.csv:1:3: unexpected byte 0xff");
    }

    /// Rows made on the fly, never held whole.
    struct Rows {
        next: u64,
        end: u64,
        pending: Vec<u8>,
    }

    impl std::io::Read for Rows {
        fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
            if self.pending.is_empty() && self.next < self.end {
                self.pending = format!("{0},{0},-1,{1}\n", self.next, self.next * 3).into_bytes();
                self.next += 1;
            }
            let n = out.len().min(self.pending.len());
            out[..n].copy_from_slice(&self.pending[..n]);
            self.pending.drain(..n);
            Ok(n)
        }
    }

    #[test]
    fn streams_in_bounded_memory() {
        let rows = Rows {
            next: 0,
            end: 200_000,
            pending: Vec::new(),
        };
        let mut r = TraceReader::new("gen.csv", std::io::BufReader::new(rows));
        let mut a = Vec::new();
        let mut n = 0u64;
        let mut sum = 0u64;
        while let Some(c) = r.next_row(&mut a).unwrap() {
            assert_eq!(c as u64, n);
            sum += a.iter().sum::<u64>();
            n += 1;
        }
        assert_eq!(n, 200_000);
        assert_eq!(sum, 4 * (199_999 * 200_000 / 2));
        // One line's buffer and one row's addresses, whatever the length.
        assert!(r.buf.capacity() < 256, "{}", r.buf.capacity());
        assert!(a.capacity() < 16);
    }

    #[test]
    fn a_line_without_end_is_too_long() {
        let long = vec![b'1'; MAX_LINE + 10];
        assert!(err(&long).contains("longer than"));
    }
}
