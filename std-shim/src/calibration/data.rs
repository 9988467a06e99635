//! The published measurements simfa is calibrated and validated against,
//! shipped in the project's `data/` directory (each file names its source
//! in its comment lines) and embedded in the binary, so that no command
//! depends on files outside the project at run time.
//!
//! Every file is a small CSV table: `#` comment lines and blank lines are
//! skipped, the first other line is the header, and every row has as many
//! comma-separated fields as the header. [`Table`] reads such a file with
//! errors that name the file, the line and the column; the typed readers
//! below turn the tables into rows.

use crate::calibration::error::CalibError;

/// One embedded data file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DataFile {
    /// The file's path in the project, e.g. `data/fa3_h20.csv`.
    pub path: &'static str,
    /// Its contents.
    pub text: &'static str,
}

macro_rules! data_file {
    ($name:literal) => {
        DataFile {
            path: concat!("data/", $name),
            text: include_str!(concat!("../../../data/", $name)),
        }
    };
}

/// The H800 PCIe pointer-chase latency curve (calibration.md §1).
pub const POINTER_CHASE: DataFile = data_file!("h800pcie_pointer_chase.csv");
/// The H800 PCIe TMA load throughput table (calibration.md §2).
pub const TMA_THROUGHPUT: DataFile = data_file!("tma_throughput_h800pcie.csv");
/// Luo et al.'s WGMMA latency and throughput table (calibration.md §7).
pub const WGMMA: DataFile = data_file!("wgmma_h800pcie.csv");
/// FlashAttention-3 on the H20 (calibration.md §5).
pub const FA3_H20: DataFile = data_file!("fa3_h20.csv");
/// The FlashAttention-3 ablation on the H100 (calibration.md §5).
pub const FA3_H100_ABLATION: DataFile = data_file!("fa3_h100_ablation.csv");
/// Dense GEMM throughputs of the H100 and H20 (calibration.md §7).
pub const GEMM_DENSE: DataFile = data_file!("gemm_dense.csv");
/// Clocks observed under sustained tensor load (calibration.md §7).
pub const CLOCKS: DataFile = data_file!("clocks.csv");
/// L2-hit bandwidth with every SM loading (calibration.md §9).
pub const L2_BANDWIDTH: DataFile = data_file!("l2_bandwidth.csv");
/// The fast.cu GEMM kernel ladder on the H100 (calibration.md §8).
pub const GEMM_VARIANTS: DataFile = data_file!("gemm_variants.csv");

/// The period of back-to-back launches (the presets' `launch_gap_ns`).
pub const LAUNCH_GAP: DataFile = data_file!("launch_gap.csv");
/// A GEMM epilogue's register stores, timed on the GPU (the presets'
/// `store_request_cycles`).
pub const REGISTER_STORES: DataFile = data_file!("register_stores.csv");

/// Vendor-library GEMMs of LLM layers on the H100, M from 1 to 4096
/// (microsoft/vidur's profiles).
pub const GEMM_SHAPES: DataFile = data_file!("gemm_shapes.csv");

/// Every shipped file.
pub const ALL: [DataFile; 12] = [
    POINTER_CHASE,
    TMA_THROUGHPUT,
    WGMMA,
    FA3_H20,
    FA3_H100_ABLATION,
    GEMM_DENSE,
    CLOCKS,
    L2_BANDWIDTH,
    GEMM_VARIANTS,
    LAUNCH_GAP,
    REGISTER_STORES,
    GEMM_SHAPES,
];

/// A parsed table: its header and its data rows with their line numbers.
#[derive(Clone, Debug, PartialEq)]
pub struct Table {
    origin: String,
    columns: Vec<String>,
    rows: Vec<(usize, Vec<String>)>,
}

/// One data row of a [`Table`].
#[derive(Clone, Copy, Debug)]
pub struct Row<'t> {
    table: &'t Table,
    /// 1-based line in the file.
    pub line: usize,
    fields: &'t [String],
}

impl Table {
    /// Parses `text`; `origin` names the file in errors. The header must
    /// name every column of `required` (in any order).
    pub fn parse(text: &str, origin: &str, required: &[&str]) -> Result<Table, CalibError> {
        let err = |line: usize, problem: String| CalibError::Parse {
            origin: origin.to_string(),
            line,
            problem,
        };
        let mut columns: Option<Vec<String>> = None;
        let mut rows = Vec::new();
        for (i, raw) in text.lines().enumerate() {
            let line = i + 1;
            let l = raw.trim();
            if l.is_empty() || l.starts_with('#') {
                continue;
            }
            let fields: Vec<String> = l.split(',').map(|f| f.trim().to_string()).collect();
            let Some(cols) = &columns else {
                for want in required {
                    if !fields.iter().any(|f| f == want) {
                        return Err(err(
                            line,
                            format!("the header lacks the column `{want}` (found `{l}`)"),
                        ));
                    }
                }
                columns = Some(fields);
                continue;
            };
            if fields.len() != cols.len() {
                return Err(err(
                    line,
                    format!("expected {} fields, found {}", cols.len(), fields.len()),
                ));
            }
            rows.push((line, fields));
        }
        let Some(columns) = columns else {
            return Err(err(text.lines().count().max(1), "no header line".into()));
        };
        if rows.is_empty() {
            return Err(CalibError::Empty {
                origin: origin.to_string(),
            });
        }
        Ok(Table {
            origin: origin.to_string(),
            columns,
            rows,
        })
    }

    /// Parses an embedded file.
    pub fn of(file: DataFile, required: &[&str]) -> Result<Table, CalibError> {
        Table::parse(file.text, file.path, required)
    }

    /// Whether the header names column `col` (for optional columns).
    pub fn has(&self, col: &str) -> bool {
        self.columns.iter().any(|c| c == col)
    }

    /// The data rows, in file order.
    pub fn rows(&self) -> impl Iterator<Item = Row<'_>> {
        self.rows.iter().map(move |(line, fields)| Row {
            table: self,
            line: *line,
            fields,
        })
    }
}

impl<'t> Row<'t> {
    fn error(&self, problem: String) -> CalibError {
        CalibError::Parse {
            origin: self.table.origin.clone(),
            line: self.line,
            problem,
        }
    }

    /// The field of column `col` (which [`Table::parse`] required).
    pub fn text(&self, col: &str) -> &'t str {
        let i = self
            .table
            .columns
            .iter()
            .position(|c| c == col)
            .unwrap_or(usize::MAX);
        self.fields.get(i).map_or("", String::as_str)
    }

    /// The field of `col` as a positive finite number.
    pub fn positive(&self, col: &str) -> Result<f64, CalibError> {
        let f = self.text(col);
        f.parse::<f64>()
            .ok()
            .filter(|x| x.is_finite() && *x > 0.0)
            .ok_or_else(|| self.error(format!("`{f}` in column {col} is not a positive number")))
    }

    /// The field of `col` as a positive integer of at most `max`.
    pub fn count(&self, col: &str, max: u64) -> Result<u64, CalibError> {
        self.int(col, 1, max)
    }

    /// The field of `col` as an integer in `min..=max`.
    pub fn int(&self, col: &str, min: u64, max: u64) -> Result<u64, CalibError> {
        let f = self.text(col);
        f.parse::<u64>()
            .ok()
            .filter(|x| (min..=max).contains(x))
            .ok_or_else(|| {
                self.error(format!(
                    "`{f}` in column {col} is not an integer in {min}..={max}"
                ))
            })
    }

    /// The field of `col` as `yes` or `no`.
    pub fn yes_no(&self, col: &str) -> Result<bool, CalibError> {
        match self.text(col) {
            "yes" => Ok(true),
            "no" => Ok(false),
            f => Err(self.error(format!("`{f}` in column {col} is not yes or no"))),
        }
    }

    /// The field of `col`, which must be one of `allowed`.
    pub fn one_of(&self, col: &str, allowed: &[&str]) -> Result<&'t str, CalibError> {
        let f = self.text(col);
        if allowed.contains(&f) {
            Ok(f)
        } else {
            Err(self.error(format!(
                "`{f}` in column {col} is not one of {}",
                allowed.join(", ")
            )))
        }
    }
}

/// One row of the WGMMA table: latency in cycles and throughput in
/// TFLOP/s, SS and RS, for one N.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct WgmmaPoint {
    /// N of m64nNk16.
    pub n: u16,
    /// Latency, SS then RS.
    pub latency: [f64; 2],
    /// TFLOP/s of the whole GPU, SS then RS.
    pub tflops: [f64; 2],
}

/// Reads [`WGMMA`].
pub fn wgmma_points() -> Result<Vec<WgmmaPoint>, CalibError> {
    let t = Table::of(
        WGMMA,
        &["n", "latency_ss", "latency_rs", "tflops_ss", "tflops_rs"],
    )?;
    t.rows()
        .map(|r| {
            Ok(WgmmaPoint {
                n: r.count("n", 256)? as u16,
                latency: [r.positive("latency_ss")?, r.positive("latency_rs")?],
                tflops: [r.positive("tflops_ss")?, r.positive("tflops_rs")?],
            })
        })
        .collect()
}

/// One measured FlashAttention-3 run.
#[derive(Clone, Debug, PartialEq)]
pub struct Fa3Point {
    /// `full`, `no-overlap` or `no-ws`.
    pub variant: String,
    /// Head dimension.
    pub hdim: u32,
    /// Causal masking.
    pub causal: bool,
    /// Batch.
    pub batch: u32,
    /// Tokens (query and key/value).
    pub seqlen: u32,
    /// Heads (query and key/value).
    pub heads: u32,
    /// Kernel time in milliseconds.
    pub time_ms: f64,
    /// TFLOP/s as the source counts them.
    pub tflops: f64,
}

fn fa3_points(file: DataFile, variants: bool) -> Result<Vec<Fa3Point>, CalibError> {
    let mut cols = vec!["batch", "seqlen", "heads", "hdim", "time_ms", "tflops"];
    cols.push(if variants { "variant" } else { "causal" });
    let t = Table::of(file, &cols)?;
    t.rows()
        .map(|r| {
            Ok(Fa3Point {
                variant: if variants {
                    r.one_of("variant", &["full", "no-overlap", "no-ws"])?
                        .to_string()
                } else {
                    "full".into()
                },
                causal: !variants && r.yes_no("causal")?,
                hdim: r.count("hdim", 256)? as u32,
                batch: r.count("batch", 4096)? as u32,
                seqlen: r.count("seqlen", 1 << 20)? as u32,
                heads: r.count("heads", 1024)? as u32,
                time_ms: r.positive("time_ms")?,
                tflops: r.positive("tflops")?,
            })
        })
        .collect()
}

/// Reads [`FA3_H20`].
pub fn fa3_h20_points() -> Result<Vec<Fa3Point>, CalibError> {
    fa3_points(FA3_H20, false)
}

/// Reads [`FA3_H100_ABLATION`].
pub fn fa3_h100_ablation_points() -> Result<Vec<Fa3Point>, CalibError> {
    fa3_points(FA3_H100_ABLATION, true)
}

/// One measured dense GEMM.
#[derive(Clone, Debug, PartialEq)]
pub struct GemmPoint {
    /// The simfa preset of the GPU.
    pub gpu: String,
    /// The kernel measured (e.g. `cublas-bf16`).
    pub kernel: String,
    /// M, N, K.
    pub shape: [u32; 3],
    /// Measured TFLOP/s.
    pub tflops: f64,
    /// Where the figure comes from.
    pub source: String,
}

/// One kernel of the fast.cu ladder ([`GEMM_VARIANTS`]) at one size.
#[derive(Clone, Debug, PartialEq)]
pub struct GemmVariant {
    /// `cublas` or `fastcu-<k>`.
    pub kernel: String,
    /// M = N = K.
    pub n: u32,
    /// Tile rows, columns and depth (0 for cuBLAS, whose tiles are its own).
    pub tile: [u32; 3],
    /// Ring stages (1: one WarpGroup loads and computes).
    pub stages: u32,
    /// Consumer WarpGroups.
    pub consumers: u32,
    /// CTAs of a persistent kernel; 0 when not persistent.
    pub persistent_ctas: u32,
    /// CTAs per cluster along M (the B tile multicast to them); 1 for none.
    pub cluster_m: u32,
    /// N of each WGMMA (0 for the library's own).
    pub wgmma_n: u32,
    /// Measured TFLOP/s.
    pub tflops: f64,
}

impl GemmVariant {
    /// `fastcu-5 N=6144`.
    pub fn label(&self) -> String {
        format!("{} N={}", self.kernel, self.n)
    }
}

/// Reads [`GEMM_VARIANTS`].
pub fn gemm_variant_points() -> Result<Vec<GemmVariant>, CalibError> {
    let cols = [
        "kernel",
        "n",
        "tile_m",
        "tile_n",
        "tile_k",
        "stages",
        "consumers",
        "persistent_ctas",
        "cluster_m",
        "wgmma_n",
        "tflops",
    ];
    let t = Table::of(GEMM_VARIANTS, &cols)?;
    t.rows()
        .map(|r| {
            // 0 stands for "the library's own" (cuBLAS rows).
            let num = |col: &str, max: u64| r.int(col, 0, max).map(|v| v as u32);
            Ok(GemmVariant {
                kernel: r.text("kernel").to_string(),
                n: r.count("n", 1 << 20)? as u32,
                tile: [
                    num("tile_m", 256)?,
                    num("tile_n", 256)?,
                    num("tile_k", 256)?,
                ],
                stages: num("stages", 64)?,
                consumers: num("consumers", 4)?,
                persistent_ctas: num("persistent_ctas", 1 << 16)?,
                cluster_m: num("cluster_m", 16)?,
                wgmma_n: num("wgmma_n", 256)?,
                tflops: r.positive("tflops")?,
            })
        })
        .collect()
}

/// A clock observed under sustained tensor load.
#[derive(Clone, Debug, PartialEq)]
pub struct ClockPoint {
    /// The simfa preset of the GPU.
    pub gpu: String,
    /// TFLOP/s at that clock.
    pub tflops: f64,
    /// The sustained SM clock, MHz.
    pub clock_mhz: f64,
    /// Where the figure comes from.
    pub source: String,
}

/// Reads [`CLOCKS`].
pub fn clock_points() -> Result<Vec<ClockPoint>, CalibError> {
    let t = Table::of(CLOCKS, &["gpu", "tflops", "clock_mhz", "source"])?;
    t.rows()
        .map(|r| {
            Ok(ClockPoint {
                gpu: r.one_of("gpu", &simfa_core::PRESETS)?.to_string(),
                tflops: r.positive("tflops")?,
                clock_mhz: r.positive("clock_mhz")?,
                source: r.text("source").to_string(),
            })
        })
        .collect()
}

/// Reads [`GEMM_DENSE`].
pub fn gemm_points() -> Result<Vec<GemmPoint>, CalibError> {
    gemm_rows(GEMM_DENSE, "tflops", |_, tflops| tflops)
}

/// Reads [`GEMM_SHAPES`], each row's kernel time (`us`) as the TFLOP/s of
/// its `2 * M * N * K` FLOPs.
pub fn gemm_shape_points() -> Result<Vec<GemmPoint>, CalibError> {
    gemm_rows(GEMM_SHAPES, "us", |shape, us| {
        2.0 * shape.iter().map(|&d| d as f64).product::<f64>() / (us * 1e6)
    })
}

/// The rows of a GEMM table (`gpu, kernel, m, n, k, FIGURE, source`), its
/// positive `figure` column turned into TFLOP/s by `tflops(shape, value)`.
fn gemm_rows(
    file: DataFile,
    figure: &str,
    tflops: impl Fn([u32; 3], f64) -> f64,
) -> Result<Vec<GemmPoint>, CalibError> {
    let t = Table::of(file, &["gpu", "kernel", "m", "n", "k", figure, "source"])?;
    t.rows()
        .map(|r| {
            let dim = |c| r.count(c, 1 << 20).map(|v| v as u32);
            let shape = [dim("m")?, dim("n")?, dim("k")?];
            Ok(GemmPoint {
                gpu: r.one_of("gpu", &simfa_core::PRESETS)?.to_string(),
                kernel: r.text("kernel").to_string(),
                shape,
                tflops: tflops(shape, r.positive(figure)?),
                source: r.text("source").to_string(),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_shipped_file_reads() {
        assert_eq!(wgmma_points().unwrap().len(), 6);
        assert_eq!(fa3_h20_points().unwrap().len(), 4);
        let abl = fa3_h100_ablation_points().unwrap();
        assert_eq!(abl.len(), 3);
        assert_eq!(abl[1].variant, "no-overlap");
        let g = gemm_points().unwrap();
        assert_eq!(g.iter().filter(|p| p.gpu == "h100").count(), 5);
        assert_eq!(g.iter().filter(|p| p.gpu == "h20").count(), 5);
        assert_eq!(clock_points().unwrap().len(), 2);
        let v = gemm_variant_points().unwrap();
        assert_eq!(v.len(), 14);
        assert!(v.iter().any(|r| r.kernel == "fastcu-7" && r.cluster_m == 2));
        assert_eq!(v[0].tile, [0, 0, 0], "cuBLAS rows have no tile");
        let s = gemm_shape_points().unwrap();
        assert_eq!(s.len(), 48);
        assert!(s.iter().any(|p| p.shape[0] == 1) && s.iter().any(|p| p.shape[0] == 4096));
        // 1 x 4096 x 4096 in 16 us.
        let p = s.iter().find(|p| p.shape == [1, 4096, 4096]).unwrap();
        assert!((p.tflops - 2.0 * 4096.0 * 4096.0 / 16e6).abs() < 1e-9);
        for f in ALL {
            assert!(f.text.contains("Source"), "{} names no source", f.path);
        }
    }

    #[test]
    fn errors_name_the_file_line_and_column() {
        let e = Table::parse("# c\na,b\n1,2\n3\n", "t.csv", &["a"]).unwrap_err();
        assert_eq!(e.to_string(), "t.csv:4: expected 2 fields, found 1");
        let e = Table::parse("x\n1\n", "t.csv", &["a"]).unwrap_err();
        assert!(e.to_string().contains("lacks the column `a`"), "{e}");
        let t = Table::parse("a,b\n-1,yes\n", "t.csv", &["a", "b"]).unwrap();
        let r = t.rows().next().unwrap();
        let e = r.positive("a").unwrap_err().to_string();
        assert_eq!(e, "t.csv:2: `-1` in column a is not a positive number");
        assert!(r.yes_no("b").unwrap());
        assert!(Table::parse("# only\n", "t.csv", &[]).is_err());
        assert!(matches!(
            Table::parse("a\n", "t.csv", &[]),
            Err(CalibError::Empty { .. })
        ));
    }
}
