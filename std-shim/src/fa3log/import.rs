//! Translating an FA3 event log into a kernel (paper section VI-B).
//!
//! The `shape` line gives the attention shape; the kernel's declarations
//! (grid, tensor maps Q, K, V, O, the `*_full` mbarriers and `*_empty`
//! stages, one producer and two consumer roles) are the FA3 generator's for
//! that shape and GPU, built through the one kernel builder, with every
//! role a stream role. Each WarpGroup's events become instructions by
//! these rules (the ring position of a K or V stage is how many K or V
//! events the WarpGroup has seen: stage `g mod 2`, parity `(g div 2) mod 2`):
//!
//! - `TMA_Q_ISSUE`, `TMA_K_ISSUE`, `TMA_V_ISSUE` (producer): ACQUIRE_STAGE
//!   of the ring's empty stage, expect-tx of the box's bytes on its full
//!   mbarrier, the TMA load at `[0, head, row, batch]`, arrive. After Q the
//!   producer waits until the previous tile's output store has freed V's
//!   shared memory (the `o_free` barrier, parity `(tile + 1) mod 2`).
//! - `WAIT_K_START`, `WAIT_V_START` (consumer): the mbarrier wait of the
//!   next K or V stage; a tile's first K wait is preceded by Q's.
//! - `GEMM_QK_ISSUE`: `hdim / 16` WGMMAs of N = block_n in one group
//!   (`ceil(M/instrM) x ceil(N/instrN) x ceil(K/instrK)` with M = 64 rows
//!   per consumer); `GEMM_PV_ISSUE`: `block_n / 16` WGMMAs of N = hdim.
//!   Ping-pong between the two consumers: a QK after a tile's first is
//!   preceded by BAR_WAIT on this consumer's barrier, and the PV issued
//!   with it is followed by BAR_ARRIVE on the other's (the last consumer's
//!   stream starts with an arrive that gives the first its turn). Before a tile's last
//!   PV (one issued with no QK in flight) the Q stage is released.
//! - `WAIT_WG_1`: WGMMA_WAIT 1; the QK finished: RELEASE_STAGE of its K,
//!   then the softmax bubble of a block (masked with `masked=1`).
//! - `WAIT_WG_0`: WGMMA_WAIT 0; what finished is released: after a tile's
//!   first QK its K and the first block's softmax; after a steady block's
//!   PV its V and the output rescale; after the tile's last PV its V, then
//!   the epilogue: normalisation, the consumers' named barrier, and (first
//!   consumer) the TMA store of O at the tile's Q coordinates, its drain
//!   and the arrive on `o_free`.
//!
//! Non-MMA work is the generator's `compute` for the tile shape (paper
//! section VI-B's per-block estimate, on the SM's shared units). A log of
//! the generator's FA3 kernel (warp-specialised, with intra-WarpGroup
//! overlap) translates back to that kernel's instruction streams exactly.

use std::collections::VecDeque;
use std::io::BufRead;
use std::path::Path;

use simfa_core::{GpuConfig, Kernel, Op, WgmmaMode, Work};

use super::Kind;
use crate::gen::fa3::{NonMma, Plan, ROWS_PER_WG};
use crate::gen::{fa3, Fa3Params};
use crate::proton::error::ImportError;
use crate::proton::events::{Operands, Record, RunSorter};
use crate::proton::import::{streamed, ImportSummary};
use crate::proton::ops_file::OpsWriter;

/// Line `line` (from 1) of log `path` is malformed.
fn line_err(path: &str, line: u64, problem: impl Into<String>) -> ImportError {
    ImportError::Line {
        path: path.into(),
        line,
        problem: problem.into(),
    }
}

/// Parses `key=value` fields into `p`.
fn parse_shape(path: &str, line: u64, rest: &str) -> Result<Fa3Params, ImportError> {
    let mut p = Fa3Params::default();
    for f in rest.split_whitespace() {
        let (k, v) = f
            .split_once('=')
            .ok_or_else(|| line_err(path, line, format!("`{f}` is not key=value")))?;
        let n: u32 = v
            .parse()
            .map_err(|_| line_err(path, line, format!("{k}: `{v}` is not a number")))?;
        match k {
            "batch" => p.batch = n,
            "heads" => p.heads = n,
            "kv_heads" => p.kv_heads = n,
            "seqlen_q" => p.seqlen_q = n,
            "seqlen_kv" => p.seqlen_kv = n,
            "hdim" => p.hdim = n,
            "causal" if n <= 1 => p.causal = n == 1,
            _ => {
                return Err(line_err(
                    path,
                    line,
                    format!("unknown or bad shape field `{f}`"),
                ))
            }
        }
    }
    Ok(p)
}

/// One event line: `cycle sm cta warp EVENT [key=value ...]`.
fn parse_event(path: &str, line: u64, text: &str) -> Result<Record, ImportError> {
    let mut it = text.split_whitespace();
    let mut num = |what: &str| -> Result<u64, ImportError> {
        let t = it
            .next()
            .ok_or_else(|| line_err(path, line, format!("missing {what}")))?;
        t.parse()
            .map_err(|_| line_err(path, line, format!("{what}: `{t}` is not a number")))
    };
    let cycle = num("cycle")?;
    let _sm = num("sm")?;
    let cta = u32::try_from(num("cta")?).map_err(|_| line_err(path, line, "cta too large"))?;
    let warp = u32::try_from(num("warp")?).map_err(|_| line_err(path, line, "warp too large"))?;
    let ev = it
        .next()
        .ok_or_else(|| line_err(path, line, "missing event name"))?;
    let kind =
        Kind::from_name(ev).ok_or_else(|| line_err(path, line, format!("unknown event `{ev}`")))?;
    let mut args = Operands::default();
    let mut coords = [0i64; 5];
    for f in it {
        let (k, v) = f
            .split_once('=')
            .ok_or_else(|| line_err(path, line, format!("`{f}` is not key=value")))?;
        let n: i64 = v
            .parse()
            .map_err(|_| line_err(path, line, format!("{k}: `{v}` is not a number")))?;
        match (kind, k) {
            (Kind::TmaQ | Kind::TmaK | Kind::TmaV, "row") => coords[2] = n,
            (Kind::TmaQ | Kind::TmaK | Kind::TmaV, "head") => coords[1] = n,
            (Kind::TmaQ | Kind::TmaK | Kind::TmaV, "batch") => coords[3] = n,
            (Kind::WaitWg1 | Kind::WaitWg0, "masked") => args.parity = Some((n != 0) as u8),
            _ => {
                return Err(line_err(
                    path,
                    line,
                    format!("{} takes no field `{k}`", kind.name()),
                ))
            }
        }
    }
    if matches!(kind, Kind::TmaQ | Kind::TmaK | Kind::TmaV) {
        args.coords = Some(coords);
    }
    Ok(Record {
        cta,
        warp,
        ts: cycle,
        seq: line,
        name: kind as u32,
        args,
    })
}

/// A committed WGMMA group not yet waited for.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Group {
    Qk { stage: u16 },
    Pv { stage: u16 },
}

/// Declaration indices and shape facts the rules need.
struct Layout {
    maps: [u8; 4],
    full: [u16; 3],
    empty: [u16; 3],
    o_free: u16,
    stages: u64,
    block_n: u16,
    hdim: u16,
    pv_mode: WgmmaMode,
    consumers: u32,
    bytes: [u32; 3],
    nm: NonMma,
    causal: bool,
}

impl Layout {
    fn new(k: &Kernel, p: &Fa3Params, plan: &Plan) -> Layout {
        let map = |n: &str| {
            k.maps
                .iter()
                .position(|m| m.name.as_str() == n)
                .unwrap_or(0) as u8
        };
        let bar = |n: &str| {
            let d = k
                .mbarriers
                .iter()
                .position(|d| d.name.as_str() == n)
                .unwrap_or(0);
            k.mbar_base(d as u8)
        };
        let stage = |n: &str| {
            let d = k
                .stages
                .iter()
                .position(|d| d.name.as_str() == n)
                .unwrap_or(0);
            k.stage_base(d as u8)
        };
        let maps = [map("Q"), map("K"), map("V"), map("O")];
        let t = plan.tiling;
        Layout {
            maps,
            full: [bar("q_full"), bar("k_full"), bar("v_full")],
            empty: [stage("q_empty"), stage("k_empty"), stage("v_empty")],
            o_free: bar("o_free"),
            stages: t.stages as u64,
            block_n: t.block_n as u16,
            hdim: p.hdim as u16,
            pv_mode: t.pv_mode,
            consumers: t.consumers,
            bytes: [0, 1, 2].map(|i| k.maps[maps[i] as usize].full_box_bytes() as u32),
            nm: NonMma::new(ROWS_PER_WG, t.block_n, p.hdim),
            causal: p.causal,
        }
    }
}

/// Translation state of one WarpGroup.
#[derive(Default)]
struct Wg {
    /// K and V events seen (ring positions), and tiles begun.
    k: u64,
    v: u64,
    tile: u64,
    /// Consumer: between tiles (the next K wait starts one).
    idle: bool,
    /// Consumer: the current tile's first QK is still the only one.
    first: bool,
    /// Consumer: a QK was issued in the current block.
    qk: bool,
    pending: VecDeque<Group>,
}

fn compute(out: &mut Vec<Op>, work: Work) {
    if !work.is_empty() {
        out.push(Op::Compute { work });
    }
}

impl Layout {
    fn producer(&self, st: &mut Wg, kind: Kind, coords: [i64; 5], out: &mut Vec<Op>) {
        let (i, pos) = match kind {
            Kind::TmaQ => (0, 0),
            Kind::TmaK => (1, st.k),
            _ => (2, st.v),
        };
        let slot = if i == 0 {
            0
        } else {
            (pos % self.stages) as u16
        };
        let bar = self.full[i] + slot;
        out.push(Op::StageAcquire {
            stage: self.empty[i] + slot,
        });
        out.push(Op::MbarExpectTx {
            bar,
            bytes: self.bytes[i],
        });
        out.push(Op::TmaLoad {
            map: self.maps[i],
            bar,
            coords,
            multicast: 0,
        });
        out.push(Op::MbarArrive { bar, count: 1 });
        match kind {
            Kind::TmaQ => {
                out.push(Op::MbarWait {
                    bar: self.o_free,
                    parity: ((st.tile + 1) % 2) as u8,
                });
                st.tile += 1;
            }
            Kind::TmaK => st.k += 1,
            _ => st.v += 1,
        }
    }

    fn ring(&self, pos: u64) -> (u16, u8) {
        ((pos % self.stages) as u16, ((pos / self.stages) % 2) as u8)
    }

    fn gemm(&self, out: &mut Vec<Op>, n: u16, count: u16, mode: WgmmaMode) {
        out.extend((0..count).map(|_| Op::Wgmma { n, mode }));
        out.push(Op::WgmmaCommit);
    }

    fn release(&self, g: Group, out: &mut Vec<Op>) {
        let stage = match g {
            Group::Qk { stage } => self.empty[1] + stage,
            Group::Pv { stage } => self.empty[2] + stage,
        };
        out.push(Op::StageRelease { stage, cluster: 0 });
    }

    #[allow(clippy::too_many_arguments)]
    fn consumer(
        &self,
        c: u32,
        st: &mut Wg,
        kind: Kind,
        masked: bool,
        q: Option<[i64; 5]>,
        out: &mut Vec<Op>,
    ) -> Result<(), String> {
        let ping_pong = self.consumers >= 2;
        let bar_id = |i: u32| (1 + i % self.consumers) as u8;
        match kind {
            Kind::WaitK => {
                if st.idle {
                    out.push(Op::MbarWait {
                        bar: self.full[0],
                        parity: (st.tile % 2) as u8,
                    });
                    st.idle = false;
                    st.first = true;
                }
                let (s, parity) = self.ring(st.k);
                out.push(Op::MbarWait {
                    bar: self.full[1] + s,
                    parity,
                });
            }
            Kind::WaitV => {
                if !st.qk {
                    // The tile's last PV: Q is no longer needed.
                    out.push(Op::StageRelease {
                        stage: self.empty[0],
                        cluster: 0,
                    });
                }
                let (s, parity) = self.ring(st.v);
                out.push(Op::MbarWait {
                    bar: self.full[2] + s,
                    parity,
                });
            }
            Kind::GemmQk => {
                if !st.first && ping_pong {
                    out.push(Op::BarSync {
                        id: bar_id(c),
                        threads: 256,
                    });
                }
                self.gemm(out, self.block_n, self.hdim / 16, WgmmaMode::Ss);
                st.pending.push_back(Group::Qk {
                    stage: self.ring(st.k).0,
                });
                st.k += 1;
                st.qk = true;
            }
            Kind::GemmPv => {
                self.gemm(out, self.hdim, self.block_n / 16, self.pv_mode);
                st.pending.push_back(Group::Pv {
                    stage: self.ring(st.v).0,
                });
                st.v += 1;
                if st.qk && ping_pong {
                    out.push(Op::BarArrive {
                        id: bar_id(c + 1),
                        threads: 256,
                    });
                }
            }
            Kind::WaitWg1 => {
                out.push(Op::WgmmaWait { n: 1 });
                while st.pending.len() > 1 {
                    let g = st.pending.pop_front().expect("pending");
                    self.release(g, out);
                }
                compute(out, self.nm.block(masked));
            }
            Kind::WaitWg0 => {
                out.push(Op::WgmmaWait { n: 0 });
                let done: Vec<Group> = st.pending.drain(..).collect();
                for &g in &done {
                    self.release(g, out);
                }
                let qk_done = done.iter().any(|g| matches!(g, Group::Qk { .. }));
                if qk_done && st.first {
                    compute(out, self.nm.block(self.causal));
                    st.first = false;
                } else if st.qk {
                    compute(out, self.nm.rescale);
                } else {
                    // The tile's last PV: the epilogue.
                    compute(out, self.nm.epilogue);
                    out.push(Op::BarSync {
                        id: (1 + self.consumers) as u8,
                        threads: (self.consumers * 128) as u16,
                    });
                    if c == 0 {
                        let coords = q.ok_or("an epilogue before the producer loaded Q")?;
                        out.push(Op::TmaStore {
                            map: self.maps[3],
                            coords,
                        });
                        out.push(Op::StoreWait { n: 0 });
                        out.push(Op::MbarArrive {
                            bar: self.o_free,
                            count: 1,
                        });
                    }
                    st.idle = true;
                    st.tile += 1;
                }
                st.qk = false;
            }
            Kind::TmaQ | Kind::TmaK | Kind::TmaV => {
                return Err(format!("{} from a consumer WarpGroup", kind.name()))
            }
        }
        Ok(())
    }
}

/// Imports the FA3 event log at `log` for GPU `cfg`: writes the
/// WarpGroups' streams to the op file `ops` and returns the kernel and
/// what the import did.
pub fn import_fa3_log(
    log: &Path,
    cfg: &GpuConfig,
    ops: &Path,
) -> Result<(Kernel, ImportSummary), ImportError> {
    let path = log.display().to_string();
    let io = |source| ImportError::Io {
        path: path.clone(),
        source,
    };
    let reader = std::io::BufReader::new(std::fs::File::open(log).map_err(io)?);
    let mut shape: Option<Fa3Params> = None;
    let mut sorter = RunSorter::default();
    let mut sum = ImportSummary::default();
    for (i, line) in reader.lines().enumerate() {
        let n = i as u64 + 1;
        let line = line.map_err(io)?;
        let t = line.trim();
        if t.is_empty() || t.starts_with('#') {
            continue;
        }
        if let Some(rest) = t.strip_prefix("shape") {
            shape = Some(parse_shape(&path, n, rest)?);
            continue;
        }
        if shape.is_none() {
            return Err(line_err(&path, n, "an event before the shape line"));
        }
        sorter.push(parse_event(&path, n, t)?)?;
        sum.events += 1;
    }
    let p = shape.ok_or_else(|| ImportError::Header {
        path: path.clone(),
        problem: "no `shape` line".into(),
    })?;
    let bad_header = |e: &dyn std::fmt::Display| ImportError::Header {
        path: path.clone(),
        problem: e.to_string(),
    };
    let plan = Plan::new(&p, cfg.sms).map_err(|e| bad_header(&e))?;
    let (generated, _) = fa3(&p, cfg).map_err(|e| bad_header(&e))?;
    let k = streamed(generated).map_err(|e| bad_header(&e))?;
    let lay = Layout::new(&k, &p, &plan);
    let mut sorted = sorter.finish()?;
    let mut w = OpsWriter::create(ops)?;
    let wgs = k.wgs_per_cta() as u32;
    let mut cur: Option<(u32, u32)> = None;
    let mut lead = 0;
    let mut st = Wg::default();
    let mut qs: Vec<[i64; 5]> = Vec::new();
    let mut q_cta = u32::MAX;
    let mut out = Vec::new();
    let sort_err = |source| ImportError::Io {
        path: "a temporary sort file".into(),
        source,
    };
    while let Some(r) = sorted.next_record().map_err(sort_err)? {
        let kind = Kind::from_index(r.name);
        if cur != Some((r.cta, r.wg())) {
            if r.cta as u64 >= k.ctas() || r.wg() >= wgs {
                return Err(line_err(
                    &path,
                    r.seq,
                    format!(
                        "CTA {} warp {} is outside the kernel's {} CTAs of {wgs} WarpGroups",
                        r.cta,
                        r.warp,
                        k.ctas()
                    ),
                ));
            }
            let (role, wg) = k.role_of(r.wg() as usize);
            w.begin(r.cta, role, wg)?;
            sum.streams += 1;
            cur = Some((r.cta, r.wg()));
            lead = r.warp;
            st = Wg {
                idle: true,
                ..Wg::default()
            };
            if r.cta != q_cta {
                qs.clear();
                q_cta = r.cta;
            }
            if r.wg() == lay.consumers && lay.consumers >= 2 {
                // The last consumer opens the ping-pong for the first.
                let open = Op::BarArrive {
                    id: 1,
                    threads: 256,
                };
                w.push(&open)?;
                sum.ops += 1;
            }
        }
        if r.warp != lead {
            sum.duplicates += 1;
            continue;
        }
        out.clear();
        let coords = r.args.coords.unwrap_or_default();
        if r.wg() == 0 {
            if !matches!(kind, Kind::TmaQ | Kind::TmaK | Kind::TmaV) {
                return Err(line_err(
                    &path,
                    r.seq,
                    format!("{} from the producer WarpGroup", kind.name()),
                ));
            }
            if kind == Kind::TmaQ {
                qs.push(coords);
            }
            lay.producer(&mut st, kind, coords, &mut out);
        } else {
            let q = qs.get(st.tile as usize).copied();
            let masked = r.args.parity == Some(1);
            lay.consumer(r.wg() - 1, &mut st, kind, masked, q, &mut out)
                .map_err(|e| line_err(&path, r.seq, e))?;
        }
        sum.translated += 1;
        for op in &out {
            w.push(op)?;
        }
        sum.ops += out.len() as u64;
    }
    w.finish()?;
    Ok((k, sum))
}
