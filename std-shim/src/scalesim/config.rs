//! SCALE-Sim's configuration (`scale.cfg`) and topology (`topo.csv`).
//!
//! `scale.cfg` is read by SCALE-Sim with Python's `configparser`: sections
//! in brackets, `key = value` or `key: value`, keys compared without case,
//! `#` and `;` starting a comment line. This reader follows those rules for
//! the keys the checker uses ([`ScaleConfig`]) and ignores the others; a
//! line that is none of the three, or a bad value for a key it uses, is a
//! [`ScaleSimError::At`]. (Parsed by hand: the subset is a dozen lines, and
//! the errors name their column.)
//!
//! The topology is SCALE-Sim's convolution CSV (`Layer name, IFMAP Height,
//! IFMAP Width, Filter Height, Filter Width, Channels, Num Filter,
//! Strides,`) or its GEMM CSV (`Layer, M, N, K,`, told apart by the
//! header's second field). A depth-wise layer (name containing `DP`)
//! expands into one layer per channel, as SCALE-Sim runs it.

use std::path::Path;

use serde::Serialize;

use super::error::{Fault, ScaleSimError};

/// A SCALE-Sim dataflow.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Dataflow {
    /// Output stationary.
    Os,
    /// Weight stationary.
    Ws,
    /// Input stationary.
    Is,
}

impl Dataflow {
    /// `os`, `ws` or `is`, as `scale.cfg` spells it.
    pub const fn name(self) -> &'static str {
        match self {
            Dataflow::Os => "os",
            Dataflow::Ws => "ws",
            Dataflow::Is => "is",
        }
    }
}

/// The parts of `scale.cfg` the checker uses; `None` where the file does
/// not say.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct ScaleConfig {
    /// `[general] run_name`: the name of the run's directory.
    pub run_name: Option<String>,
    /// `ArrayHeight` x `ArrayWidth`.
    pub array: Option<(u64, u64)>,
    /// `IfmapSramSzkB`: the IFMAP scratchpad in KiB (one-byte words, so
    /// KiB words).
    pub ifmap_kb: Option<u64>,
    /// `FilterSramSzkB`.
    pub filter_kb: Option<u64>,
    /// `OfmapSramSzkB`.
    pub ofmap_kb: Option<u64>,
    /// `Dataflow`.
    pub dataflow: Option<Dataflow>,
    /// `[architecture_presets] Bandwidth` (words per cycle; SCALE-Sim
    /// gives the first to the OFMAP write port).
    pub bandwidth: Vec<u64>,
    /// `[run_presets] InterfaceBandwidth = USER` (else `CALC`).
    pub user_bandwidth: Option<bool>,
    /// `[layout] IfmapSRAMBankBandwidth`: in USER mode, the words per
    /// cycle the IFMAP buffer fetches from DRAM, so the lanes of a row of
    /// `IFMAP_DRAM_TRACE.csv`.
    pub ifmap_fetch_words: Option<u64>,
    /// `[layout] FilterSRAMBankBandwidth`: the same for the filter buffer.
    pub filter_fetch_words: Option<u64>,
}

/// A [`Fault::BadValue`] for `key = v` at `line`, `col` of `file`.
fn bad_value(
    file: &str,
    (line, col): (u64, u64),
    key: &str,
    v: &str,
    expected: &'static str,
) -> ScaleSimError {
    let fault = Fault::BadValue {
        key: key.to_string(),
        value: v.to_string(),
        expected,
    };
    ScaleSimError::at(file, line, col, fault)
}

fn parse_u64(file: &str, line: u64, col: u64, key: &str, v: &str) -> Result<u64, ScaleSimError> {
    v.parse()
        .map_err(|_| bad_value(file, (line, col), key, v, "expected a non-negative integer"))
}

/// The value of `options` whose name is `v`, else a [`Fault::BadValue`].
fn choice<T: Copy>(
    file: &str,
    at: (u64, u64),
    key: &str,
    v: &str,
    options: &[(&str, T)],
    expected: &'static str,
) -> Result<T, ScaleSimError> {
    options
        .iter()
        .find(|(name, _)| *name == v)
        .map(|&(_, x)| x)
        .ok_or_else(|| bad_value(file, at, key, v, expected))
}

/// Parses `scale.cfg` text; `file` names it in errors.
pub fn parse_config(file: &str, text: &str) -> Result<ScaleConfig, ScaleSimError> {
    let mut cfg = ScaleConfig::default();
    let mut rows = None;
    let mut cols = None;
    let mut section = String::new();
    for (i, raw) in text.lines().enumerate() {
        let line = i as u64 + 1;
        let t = raw.trim();
        if t.is_empty() || t.starts_with('#') || t.starts_with(';') {
            continue;
        }
        if let Some(rest) = t.strip_prefix('[') {
            let Some(name) = rest.strip_suffix(']') else {
                return Err(ScaleSimError::at(file, line, 1, Fault::Syntax));
            };
            section = name.trim().to_ascii_lowercase();
            continue;
        }
        let Some(split) = t.find(['=', ':']) else {
            let col = raw.len() - raw.trim_start().len() + 1;
            return Err(ScaleSimError::at(file, line, col as u64, Fault::Syntax));
        };
        let key = t[..split].trim().to_ascii_lowercase();
        let after = &t[split + 1..];
        let value = after.trim();
        // Column (in bytes, from 1) of the value, for its errors: after the
        // line's indent, the key and separator, and the value's own indent.
        let indent = raw.len() - raw.trim_start().len();
        let vcol = (indent + split + 1 + (after.len() - after.trim_start().len()) + 1) as u64;
        let num = |v: &str| parse_u64(file, line, vcol, &key, v);
        match (section.as_str(), key.as_str()) {
            ("general", "run_name") => cfg.run_name = Some(value.to_string()),
            ("architecture_presets", "arrayheight") => rows = Some(num(value)?),
            ("architecture_presets", "arraywidth") => cols = Some(num(value)?),
            ("architecture_presets", "ifmapsramszkb") => cfg.ifmap_kb = Some(num(value)?),
            ("architecture_presets", "filtersramszkb") => cfg.filter_kb = Some(num(value)?),
            ("architecture_presets", "ofmapsramszkb") => cfg.ofmap_kb = Some(num(value)?),
            ("architecture_presets", "dataflow") => {
                cfg.dataflow = Some(choice(
                    file,
                    (line, vcol),
                    &key,
                    value,
                    &[
                        ("os", Dataflow::Os),
                        ("ws", Dataflow::Ws),
                        ("is", Dataflow::Is),
                    ],
                    "expected os, ws or is",
                )?)
            }
            ("architecture_presets", "bandwidth") => {
                cfg.bandwidth = value
                    .split(',')
                    .map(|b| num(b.trim()))
                    .collect::<Result<_, _>>()?
            }
            ("run_presets", "interfacebandwidth") => {
                cfg.user_bandwidth = Some(choice(
                    file,
                    (line, vcol),
                    &key,
                    value,
                    &[("USER", true), ("CALC", false)],
                    "expected USER or CALC",
                )?)
            }
            ("layout", "ifmapsrambankbandwidth") => cfg.ifmap_fetch_words = Some(num(value)?),
            ("layout", "filtersrambankbandwidth") => cfg.filter_fetch_words = Some(num(value)?),
            _ => {}
        }
    }
    if let (Some(r), Some(c)) = (rows, cols) {
        cfg.array = Some((r, c));
    }
    Ok(cfg)
}

/// Reads and parses a `scale.cfg` file.
pub fn load_config(path: &Path) -> Result<ScaleConfig, ScaleSimError> {
    let bytes = std::fs::read(path).map_err(|e| ScaleSimError::io(path, e))?;
    let file = path.display().to_string();
    let text = utf8(&file, &bytes)?;
    parse_config(&file, text)
}

/// `bytes` as UTF-8, or an error at the first bad byte.
fn utf8<'a>(file: &str, bytes: &'a [u8]) -> Result<&'a str, ScaleSimError> {
    std::str::from_utf8(bytes).map_err(|e| {
        let at = e.valid_up_to();
        let line = bytes[..at].iter().filter(|&&b| b == b'\n').count() as u64 + 1;
        let col = at
            - bytes[..at]
                .iter()
                .rposition(|&b| b == b'\n')
                .map_or(0, |p| p + 1)
            + 1;
        ScaleSimError::at(file, line, col as u64, Fault::UnexpectedByte(bytes[at]))
    })
}

/// One layer of a topology.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Layer {
    /// Its name.
    pub name: String,
    /// Distinct input words (IFMAP height x width x channels).
    pub ifmap_words: u64,
    /// Distinct filter words (filter height x width x channels x filters).
    pub filter_words: u64,
}

/// Parses a topology CSV; `file` names it in errors.
pub fn parse_topology(file: &str, text: &str) -> Result<Vec<Layer>, ScaleSimError> {
    let mut lines = text.lines().enumerate();
    let gemm = match lines.next() {
        Some((_, h)) => h
            .split(',')
            .nth(1)
            .is_some_and(|f| f.trim().eq_ignore_ascii_case("m")),
        None => return Ok(Vec::new()),
    };
    let mut layers = Vec::new();
    for (i, raw) in lines {
        let line = i as u64 + 1;
        if raw.trim().is_empty() {
            continue;
        }
        let fields: Vec<&str> = raw.split(',').collect();
        let name = fields[0].trim().to_string();
        let need = if gemm { 4 } else { 8 };
        let mut v = Vec::with_capacity(need - 1);
        let mut col = fields[0].len() + 2;
        for f in fields.iter().skip(1).take(need - 1) {
            let t = f.trim();
            let c = (col + f.len() - f.trim_start().len()) as u64;
            let n = parse_u64(file, line, c, &name, t)?;
            v.push(n);
            col += f.len() + 1;
        }
        if v.len() < need - 1 {
            return Err(ScaleSimError::at(
                file,
                line,
                raw.len() as u64 + 1,
                Fault::FieldCount {
                    found: fields.len(),
                    expected: need + 1,
                },
            ));
        }
        let (ifmap, filter) = if gemm {
            // SCALE-Sim maps M, N, K to an M x K input and K x N weights.
            (v[0].saturating_mul(v[2]), v[2].saturating_mul(v[1]))
        } else {
            let ifmap = v[0].saturating_mul(v[1]).saturating_mul(v[4]);
            let filter = v[2].saturating_mul(v[3]).saturating_mul(v[4]);
            (ifmap, filter.saturating_mul(v[5]))
        };
        if !gemm && name.contains("DP") {
            // One layer per channel, each with one channel and one filter.
            let per_channel = (v[0].saturating_mul(v[1]), v[2].saturating_mul(v[3]));
            for c in 0..v[4].min(1 << 20) {
                layers.push(Layer {
                    name: format!("{name}Channel_{c}"),
                    ifmap_words: per_channel.0,
                    filter_words: per_channel.1,
                });
            }
        } else {
            layers.push(Layer {
                name,
                ifmap_words: ifmap,
                filter_words: filter,
            });
        }
    }
    Ok(layers)
}

/// Reads and parses a topology CSV.
pub fn load_topology(path: &Path) -> Result<Vec<Layer>, ScaleSimError> {
    let bytes = std::fs::read(path).map_err(|e| ScaleSimError::io(path, e))?;
    let file = path.display().to_string();
    parse_topology(&file, utf8(&file, &bytes)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_keys_it_uses() {
        let cfg = parse_config(
            "s.cfg",
            "[general]\nrun_name = x\n[architecture_presets]\nArrayHeight:    8\n\
             ArrayWidth: 8\nIfmapSramSzkB: 216\nDataflow : ws\nBandwidth : 4\n\
             [run_presets]\nInterfaceBandwidth: USER\n[layout]\nIfmapSRAMBankBandwidth: 4\n",
        )
        .unwrap();
        assert_eq!(cfg.run_name.as_deref(), Some("x"));
        assert_eq!(cfg.array, Some((8, 8)));
        assert_eq!(cfg.ifmap_kb, Some(216));
        assert_eq!(cfg.dataflow, Some(Dataflow::Ws));
        assert_eq!(cfg.bandwidth, [4]);
        assert_eq!(cfg.user_bandwidth, Some(true));
        assert_eq!(cfg.ifmap_fetch_words, Some(4));
    }

    #[test]
    fn bad_lines_name_their_place() {
        let e = parse_config("s.cfg", "[architecture_presets]\nDataflow = xs\n").unwrap_err();
        assert_eq!(
            e.to_string(),
            "s.cfg:2:12: dataflow = \"xs\": expected os, ws or is"
        );
        // A value that also occurs in its key, after an indent: the
        // value's own column, not the first match.
        let e = parse_config("s.cfg", "[architecture_presets]\n  Dataflow :  a\n").unwrap_err();
        assert_eq!(
            e.to_string(),
            "s.cfg:2:15: dataflow = \"a\": expected os, ws or is"
        );
        let e = parse_config("s.cfg", "[general]\n  garbage\n").unwrap_err();
        assert_eq!(
            e.to_string(),
            "s.cfg:2:3: expected `[section]` or `key = value`"
        );
    }

    #[test]
    fn topologies() {
        let t = "Layer name, IFMAP Height, IFMAP Width, Filter Height, Filter Width, Channels, \
                 Num Filter, Strides,\nconv_a, 16, 16, 3, 3, 3, 16, 1,\n";
        let l = parse_topology("t.csv", t).unwrap();
        assert_eq!(l[0].name, "conv_a");
        assert_eq!((l[0].ifmap_words, l[0].filter_words), (768, 432));
        let g = parse_topology("g.csv", "Layer, M, N, K,\ng0, 4, 5, 6,\n").unwrap();
        assert_eq!((g[0].ifmap_words, g[0].filter_words), (24, 30));
        let e = parse_topology("t.csv", "h,a\nconv, 1, x, 1, 1, 1, 1, 1,\n").unwrap_err();
        assert!(e.to_string().starts_with("t.csv:2:10: "), "{e}");
    }
}
