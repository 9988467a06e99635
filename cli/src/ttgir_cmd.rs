//! `simfa ttgir instrument` and `simfa ttgir sites`: the TTGIR
//! instrumentation pass of paper section V-A2 on a file.

use std::path::{Path, PathBuf};

use clap::Subcommand;
use simfa_std::ttgir::{decode, instrument, sites, Site};

use crate::{out, Failure};

/// `simfa ttgir ...`.
#[derive(Debug, Subcommand)]
pub enum TtgirCmd {
    /// Wrap every TMA copy, WGMMA (and its wait) and mbarrier
    /// wait/arrive/expect of a TTGIR file in `proton.record start/end`
    /// markers carrying SIMFA scope strings; everything else is copied
    /// unchanged.
    Instrument {
        /// The TTGIR (MLIR text) file.
        input: PathBuf,
        /// Output file; stdout if absent.
        #[arg(short, long, value_name = "FILE")]
        output: Option<PathBuf>,
    },
    /// List the ops `instrument` wraps: site, line, op, kind, scope.
    Sites {
        /// The TTGIR (MLIR text) file.
        input: PathBuf,
        /// Print a JSON array instead of a table.
        #[arg(long)]
        json: bool,
    },
}

/// Reads `path` as text; errors name the file.
fn read(path: &Path) -> Result<(String, String), Failure> {
    let name = path.display().to_string();
    let bytes =
        std::fs::read(path).map_err(|e| Failure::Input(format!("cannot read {name}: {e}")))?;
    let text = decode(&name, &bytes).map_err(Failure::input)?.to_string();
    Ok((name, text))
}

impl TtgirCmd {
    pub fn run(self) -> Result<(), Failure> {
        match self {
            TtgirCmd::Instrument { input, output } => {
                let (name, text) = read(&input)?;
                let done = instrument(&name, &text).map_err(Failure::input)?;
                match output {
                    Some(path) => write_atomically(&path, &done.text),
                    None => out(&done.text),
                }
            }
            TtgirCmd::Sites { input, json } => {
                let (name, text) = read(&input)?;
                let found = sites(&name, &text).map_err(Failure::input)?;
                if json {
                    let v = serde_json::Value::Array(found.iter().map(site_json).collect());
                    let text = serde_json::to_string_pretty(&v).map_err(Failure::input)?;
                    out(&format!("{text}\n"))
                } else {
                    out(&sites_table(&found))
                }
            }
        }
    }
}

/// Writes `text` to a temporary file beside `path` and renames it into
/// place, so a failure never leaves a half-written `path`.
fn write_atomically(path: &Path, text: &str) -> Result<(), Failure> {
    let fail = |e: std::io::Error| Failure::Input(format!("cannot write {}: {e}", path.display()));
    let mut tmp_name = path.file_name().unwrap_or_default().to_os_string();
    tmp_name.push(format!(".simfa-tmp-{}", std::process::id()));
    let tmp = path.with_file_name(tmp_name);
    let result = std::fs::write(&tmp, text).and_then(|()| std::fs::rename(&tmp, path));
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result.map_err(fail)
}

fn site_json(s: &Site) -> serde_json::Value {
    serde_json::json!({
        "site": s.scope.site,
        "line": s.line,
        "column": s.column,
        "op": s.op,
        "kind": s.kind().name(),
        "scope": s.scope.to_string(),
    })
}

/// One row per site under a header.
fn sites_table(sites: &[Site]) -> String {
    let op_w = sites.iter().map(|s| s.op.len()).max().unwrap_or(0).max(2);
    let mut t = format!(
        "{:>4} {:>6}  {:<op_w$}  {:<10}  scope\n",
        "site", "line", "op", "kind"
    );
    for s in sites {
        t.push_str(&format!(
            "{:>4} {:>6}  {:<op_w$}  {:<10}  {}\n",
            s.scope.site,
            s.line,
            s.op,
            s.kind().name(),
            s.scope
        ));
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_has_a_row_per_site() {
        let src = "ttng.arrive_barrier %0, 1 : !a\n  ttng.wait_barrier %0, %p : !a\n";
        let s = sites("t", src).unwrap();
        let t = sites_table(&s);
        assert_eq!(t.lines().count(), 3);
        assert!(t.lines().nth(2).unwrap().contains("MB_WAIT"), "{t}");
        assert!(t.contains("SIMFA|MB_ARRIVE|bar=%0|count=1|site=0"), "{t}");
    }
}
