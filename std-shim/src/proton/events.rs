//! Reading a Proton chrome trace as per-WarpGroup event sequences, in
//! bounded memory.
//!
//! The trace is parsed as a stream: each element of `traceEvents` is
//! decoded, reduced to a fixed-size [`Record`] (CTA, warp, timestamp, an
//! interned scope name and the operands its `args` carry), and dropped.
//! Records are sorted by `(CTA, WarpGroup, warp, timestamp, file order)`
//! in runs of [`RUN_RECORDS`] spilled to temporary files and merged, so
//! memory holds one run, the distinct names, and one WarpGroup's scope
//! sequence; a trace of any size imports. Only complete events
//! (`"ph": "X"`) whose `pid` names a CTA (`"... CTA<n>"`) and whose `tid`
//! names a warp (`"warp <n> ..."`) count; others are tallied as ignored.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::fmt;
use std::fs::File;
use std::io::{BufReader, BufWriter, Read, Write};
use std::path::Path;

use serde::de::{DeserializeSeed, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::Value;
use simfa_core::Op;

use super::error::ImportError;

/// Records sorted in memory before a run is spilled (about 24 MB).
pub const RUN_RECORDS: usize = 1 << 18;

/// Operands an event's `args` carry (see [`super::export`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Operands {
    /// The exact instruction.
    pub op: Option<Op>,
    /// CTA-wide mbarrier index.
    pub bar: Option<u16>,
    /// Phase parity.
    pub parity: Option<u8>,
    /// Box origin (the first `rank` entries).
    pub coords: Option<[i64; 5]>,
}

/// One event of the trace, reduced.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Record {
    /// Linear CTA index.
    pub cta: u32,
    /// Warp within the CTA.
    pub warp: u32,
    /// Start, cycles.
    pub ts: u64,
    /// Position in the file.
    pub seq: u64,
    /// Interned event name.
    pub name: u32,
    /// Operands from `args`.
    pub args: Operands,
}

impl Record {
    /// The WarpGroup: warp / 4.
    pub fn wg(&self) -> u32 {
        self.warp / 4
    }

    fn key(&self) -> (u32, u32, u32, u64, u64) {
        (self.cta, self.wg(), self.warp, self.ts, self.seq)
    }
}

/// What reading the trace found besides the records.
#[derive(Debug, Default)]
pub struct TraceInfo {
    /// Distinct event names; [`Record::name`] indexes this.
    pub names: Vec<String>,
    /// `otherData` of the trace, if any.
    pub other: Option<Value>,
    /// Events kept.
    pub events: u64,
    /// Events ignored (not complete events, or no CTA / warp).
    pub ignored: u64,
}

#[derive(Deserialize)]
struct RawEvent {
    #[serde(default)]
    name: String,
    #[serde(default)]
    ph: String,
    #[serde(default)]
    pid: Value,
    #[serde(default)]
    tid: Value,
    #[serde(default)]
    ts: f64,
    #[serde(default)]
    args: Option<Value>,
}

/// The number after the last `tag` in `v`, e.g. `CTA12` -> 12.
fn number_after(v: &Value, tag: &str) -> Option<u32> {
    let s = v.as_str()?;
    let rest = &s[s.rfind(tag)? + tag.len()..];
    let digits: &str = rest.trim_start();
    let end = digits
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(digits.len());
    digits[..end].parse().ok()
}

fn operands(args: &Value, index: u64) -> Result<Operands, String> {
    let field = |k: &str| args.get(k).filter(|v| !v.is_null());
    let bad = |k: &str, e: &dyn fmt::Display| format!("event {index}: args.{k}: {e}");
    let mut o = Operands::default();
    if let Some(v) = field("op") {
        o.op = Some(serde_json::from_value(v.clone()).map_err(|e| bad("op", &e))?);
    }
    if let Some(v) = field("bar") {
        o.bar = Some(serde_json::from_value(v.clone()).map_err(|e| bad("bar", &e))?);
    }
    if let Some(v) = field("parity") {
        let p: u8 = serde_json::from_value(v.clone()).map_err(|e| bad("parity", &e))?;
        o.parity = Some(p % 2);
    }
    if let Some(v) = field("coords") {
        let c: Vec<i64> = serde_json::from_value(v.clone()).map_err(|e| bad("coords", &e))?;
        if c.len() > 5 {
            return Err(bad("coords", &"more than 5 coordinates"));
        }
        let mut a = [0i64; 5];
        a[..c.len()].copy_from_slice(&c);
        o.coords = Some(a);
    }
    Ok(o)
}

/// Sorts records of any number in runs of [`RUN_RECORDS`], spilling each
/// full run to a temporary file.
#[derive(Default)]
pub struct RunSorter {
    run: Vec<Record>,
    spills: Vec<tempfile::NamedTempFile>,
}

fn sort_io(source: std::io::Error) -> ImportError {
    ImportError::Io {
        path: "a temporary sort file".into(),
        source,
    }
}

impl RunSorter {
    /// Adds a record.
    pub fn push(&mut self, r: Record) -> Result<(), ImportError> {
        self.run.push(r);
        if self.run.len() >= RUN_RECORDS {
            self.spill()?;
        }
        Ok(())
    }

    fn spill(&mut self) -> Result<(), ImportError> {
        self.run.sort_unstable_by_key(Record::key);
        let mut f = tempfile::NamedTempFile::new().map_err(sort_io)?;
        {
            let mut w = BufWriter::new(f.as_file_mut());
            for r in self.run.drain(..) {
                write_record(&mut w, &r).map_err(sort_io)?;
            }
            w.flush().map_err(sort_io)?;
        }
        self.spills.push(f);
        Ok(())
    }

    /// Every record pushed, in order.
    pub fn finish(self) -> Result<Sorted, ImportError> {
        Sorted::new(self.run, self.spills).map_err(sort_io)
    }
}

/// Gathers records as the parser hands over events.
struct Sink<'a> {
    info: &'a mut TraceInfo,
    interned: HashMap<String, u32>,
    sorter: RunSorter,
    seq: u64,
    path: &'a str,
}

impl Sink<'_> {
    fn take(&mut self, e: RawEvent) -> Result<(), String> {
        let index = self.seq;
        self.seq += 1;
        let (Some(cta), Some(warp)) = (number_after(&e.pid, "CTA"), number_after(&e.tid, "warp"))
        else {
            self.info.ignored += 1;
            return Ok(());
        };
        if e.ph != "X" || !e.ts.is_finite() || e.ts < 0.0 {
            self.info.ignored += 1;
            return Ok(());
        }
        let args = match &e.args {
            Some(a) => operands(a, index)?,
            None => Operands::default(),
        };
        let n = self.interned.len() as u32;
        let name = *self.interned.entry(e.name.clone()).or_insert_with(|| {
            self.info.names.push(e.name);
            n
        });
        self.info.events += 1;
        self.sorter
            .push(Record {
                cta,
                warp,
                ts: (e.ts * 1000.0).round() as u64,
                seq: index,
                name,
                args,
            })
            .map_err(|e| e.to_string())
    }
}

fn write_record(w: &mut impl Write, r: &Record) -> std::io::Result<()> {
    let bytes = postcard::to_stdvec(r).map_err(std::io::Error::other)?;
    w.write_all(&(bytes.len() as u16).to_le_bytes())?;
    w.write_all(&bytes)
}

fn read_record(r: &mut impl Read) -> std::io::Result<Option<Record>> {
    let mut len = [0u8; 2];
    match r.read(&mut len[..1])? {
        0 => return Ok(None),
        _ => r.read_exact(&mut len[1..])?,
    }
    let mut buf = vec![0u8; u16::from_le_bytes(len) as usize];
    r.read_exact(&mut buf)?;
    postcard::from_bytes(&buf)
        .map(Some)
        .map_err(std::io::Error::other)
}

struct Top<'s, 'a>(&'s mut Sink<'a>);
struct Events<'s, 'a>(&'s mut Sink<'a>);

impl<'de> Visitor<'de> for Top<'_, '_> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a chrome trace object with a traceEvents array")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let mut seen = false;
        while let Some(key) = map.next_key::<String>()? {
            match key.as_str() {
                "traceEvents" => {
                    map.next_value_seed(Events(&mut *self.0))?;
                    seen = true;
                }
                "otherData" => self.0.info.other = Some(map.next_value()?),
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        if !seen {
            return Err(serde::de::Error::custom("no traceEvents array"));
        }
        Ok(())
    }
}

impl<'de> DeserializeSeed<'de> for Events<'_, '_> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_seq(self)
    }
}

impl<'de> Visitor<'de> for Events<'_, '_> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an array of trace events")
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        while let Some(e) = seq.next_element::<RawEvent>()? {
            self.0.take(e).map_err(serde::de::Error::custom)?;
        }
        Ok(())
    }
}

/// A record's sort key and the source it came from.
type Head = Reverse<((u32, u32, u32, u64, u64), usize)>;

/// The sorted records of a trace: one in-memory run, or a merge of the
/// spilled runs.
pub struct Sorted {
    mem: std::vec::IntoIter<Record>,
    readers: Vec<BufReader<File>>,
    heap: BinaryHeap<Head>,
    heads: Vec<Option<Record>>,
    _files: Vec<tempfile::NamedTempFile>,
}

impl Sorted {
    fn new(mut run: Vec<Record>, files: Vec<tempfile::NamedTempFile>) -> std::io::Result<Self> {
        run.sort_unstable_by_key(Record::key);
        let mut s = Sorted {
            mem: Vec::new().into_iter(),
            readers: Vec::new(),
            heap: BinaryHeap::new(),
            heads: Vec::new(),
            _files: Vec::new(),
        };
        if files.is_empty() {
            s.mem = run.into_iter();
            return Ok(s);
        }
        // The in-memory run merges as one more source.
        s.heads.push(None);
        s.readers.push(BufReader::new(tempfile::tempfile()?));
        let mut mem = run.into_iter();
        if let Some(r) = mem.next() {
            s.heap.push(Reverse((r.key(), 0)));
            s.heads[0] = Some(r);
        }
        s.mem = mem;
        for f in &files {
            let mut rd = BufReader::new(f.reopen()?);
            let i = s.readers.len();
            let head = read_record(&mut rd)?;
            if let Some(r) = head {
                s.heap.push(Reverse((r.key(), i)));
            }
            s.heads.push(head);
            s.readers.push(rd);
        }
        s._files = files;
        Ok(s)
    }

    /// The next record in order.
    pub fn next_record(&mut self) -> std::io::Result<Option<Record>> {
        if self.readers.is_empty() {
            return Ok(self.mem.next());
        }
        let Some(Reverse((_, i))) = self.heap.pop() else {
            return Ok(None);
        };
        let r = self.heads[i].take();
        let next = if i == 0 {
            self.mem.next()
        } else {
            read_record(&mut self.readers[i])?
        };
        if let Some(n) = next {
            self.heap.push(Reverse((n.key(), i)));
            self.heads[i] = Some(n);
        }
        Ok(r)
    }
}

/// Reads the chrome trace at `path` into sorted records.
pub fn read(path: &Path) -> Result<(TraceInfo, Sorted), ImportError> {
    let p = path.display().to_string();
    let io = |source| ImportError::Io {
        path: p.clone(),
        source,
    };
    let file = File::open(path).map_err(io)?;
    let mut info = TraceInfo::default();
    let mut sink = Sink {
        info: &mut info,
        interned: HashMap::new(),
        sorter: RunSorter::default(),
        seq: 0,
        path: &p,
    };
    let mut de = serde_json::Deserializer::from_reader(BufReader::new(file));
    let parsed = de.deserialize_map(Top(&mut sink)).and_then(|()| de.end());
    parsed.map_err(|e| ImportError::Json {
        path: sink.path.to_string(),
        line: e.line(),
        column: e.column(),
        msg: {
            // serde_json appends the position, which the error shows first.
            let m = e.to_string();
            match m.rfind(" at line ") {
                Some(i) => m[..i].to_string(),
                None => m,
            }
        },
    })?;
    let sorter = std::mem::take(&mut sink.sorter);
    drop(sink);
    Ok((info, sorter.finish()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(cta: u32, warp: u32, ts: u64, seq: u64) -> Record {
        Record {
            cta,
            warp,
            ts,
            seq,
            name: 0,
            args: Operands::default(),
        }
    }

    #[test]
    fn spilled_runs_merge_in_order() {
        let mut all = Vec::new();
        let mut files = Vec::new();
        let mut seq = 0;
        for run in 0..3u64 {
            let mut v: Vec<Record> = (0..50)
                .map(|i| {
                    seq += 1;
                    rec(
                        (i * 7 + run as u32) % 5,
                        i % 8,
                        (i as u64 * 31 + run) % 17,
                        seq,
                    )
                })
                .collect();
            all.extend(v.iter().copied());
            v.sort_unstable_by_key(Record::key);
            let mut f = tempfile::NamedTempFile::new().unwrap();
            for r in &v {
                write_record(f.as_file_mut(), r).unwrap();
            }
            files.push(f);
        }
        let mem: Vec<Record> = (0..20)
            .map(|i| {
                seq += 1;
                rec(i % 4, i % 3, i as u64, seq)
            })
            .collect();
        all.extend(mem.iter().copied());
        let mut s = Sorted::new(mem, files).unwrap();
        let mut got = Vec::new();
        while let Some(r) = s.next_record().unwrap() {
            got.push(r);
        }
        all.sort_unstable_by_key(Record::key);
        assert_eq!(got, all);
    }

    #[test]
    fn pid_and_tid_numbers() {
        let v = Value::from("attn_fwd Core120 CTA17");
        assert_eq!(number_after(&v, "CTA"), Some(17));
        assert_eq!(number_after(&v, "Core"), Some(120));
        assert_eq!(
            number_after(&Value::from("warp 4 (line 0)"), "warp"),
            Some(4)
        );
        assert_eq!(number_after(&Value::from("main"), "warp"), None);
        assert_eq!(number_after(&Value::from(3), "warp"), None);
    }
}
