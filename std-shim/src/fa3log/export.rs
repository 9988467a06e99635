//! Writing the FA3 event log of a simulated run.

use std::collections::HashMap;
use std::io::Write;

use simfa_core::observer::Who;
use simfa_core::{Cycle, Event, Kernel, Observer, Op, Work};

use super::{shape_line, Kind};
use crate::gen::fa3::NonMma;
use crate::gen::Fa3Params;

/// What a WarpGroup did last, as far as the log cares.
#[derive(Clone, Copy, Default)]
struct WgState {
    /// The last stage wait: K (true) or V (false).
    last_wait_k: bool,
    /// Inside a WGMMA group (no commit since its first WGMMA).
    in_group: bool,
    /// A `WAIT_WG_*` line waiting for the next op to say whether a masked
    /// softmax follows: its cycle and kind.
    held: Option<(u64, Kind, Who)>,
}

/// Writes the event log of a run of the FA3 generator's kernel; see the
/// [module documentation](super).
pub struct Fa3LogWriter<'k, W: Write> {
    out: W,
    k: &'k Kernel,
    masked: Work,
    unmasked: Work,
    wgs: HashMap<(u32, u8), WgState>,
    lines: u64,
    error: Option<std::io::Error>,
}

impl<'k, W: Write> Fa3LogWriter<'k, W> {
    /// Starts the log of a run of `k`, built by the generator from `p`.
    pub fn new(mut out: W, k: &'k Kernel, p: &Fa3Params) -> std::io::Result<Self> {
        writeln!(out, "# simfa fa3-log 1: {}", k.name)?;
        writeln!(out, "{}", shape_line(p))?;
        let t = crate::gen::fa3::Tiling::for_shape(p.hdim, p.causal)
            .map_err(|e| std::io::Error::other(e.to_string()))?;
        let nm = NonMma::new(crate::gen::fa3::ROWS_PER_WG, t.block_n, p.hdim);
        Ok(Fa3LogWriter {
            out,
            k,
            masked: nm.block(true),
            unmasked: nm.block(false),
            wgs: HashMap::new(),
            lines: 0,
            error: None,
        })
    }

    /// Flushes what is held and the writer; returns the lines written.
    pub fn finish(mut self) -> std::io::Result<u64> {
        let mut held: Vec<_> = self.wgs.values().filter_map(|s| s.held).collect();
        held.sort_by_key(|h| (h.0, h.2.cta, h.2.wg));
        for (c, kind, who) in held {
            self.line(c, who, kind, "");
        }
        if let Some(e) = self.error.take() {
            return Err(e);
        }
        self.out.flush()?;
        Ok(self.lines)
    }

    fn line(&mut self, c: u64, who: Who, kind: Kind, payload: &str) {
        if self.error.is_some() {
            return;
        }
        let r = writeln!(
            self.out,
            "{c} {} {} {} {}{payload}",
            who.sm,
            who.cta,
            4 * who.wg as u32,
            kind.name()
        );
        if let Err(e) = r {
            self.error = Some(e);
        }
        self.lines += 1;
    }

    /// The name of mbarrier array element `bar`'s declaration.
    fn bar_decl(&self, bar: u16) -> &str {
        let mut left = bar;
        for d in &self.k.mbarriers {
            if left < d.len {
                return d.name.as_str();
            }
            left -= d.len;
        }
        ""
    }

    fn issue(&mut self, c: u64, who: Who, op: &Op) {
        let key = (who.cta, who.wg);
        let mut st = self.wgs.get(&key).copied().unwrap_or_default();
        // A held wait is decided by the first op after its stage releases.
        let releasing = matches!(op, Op::StageRelease { .. });
        if let Some((hc, kind, hw)) = st.held.take_if(|_| !releasing) {
            let masked = matches!(op, Op::Compute { work }
                if *work == self.masked && self.masked != self.unmasked);
            self.line(hc, hw, kind, if masked { " masked=1" } else { "" });
        }
        match *op {
            Op::TmaLoad { map, coords, .. } => {
                let kind = match self.k.maps[map as usize].name.as_str() {
                    "Q" => Some(Kind::TmaQ),
                    "K" => Some(Kind::TmaK),
                    "V" => Some(Kind::TmaV),
                    _ => None,
                };
                if let Some(kind) = kind {
                    let p = format!(" row={} head={} batch={}", coords[2], coords[1], coords[3]);
                    self.line(c, who, kind, &p);
                }
            }
            Op::MbarWait { bar, .. } => match self.bar_decl(bar) {
                "k_full" => {
                    st.last_wait_k = true;
                    self.line(c, who, Kind::WaitK, "");
                }
                "v_full" => {
                    st.last_wait_k = false;
                    self.line(c, who, Kind::WaitV, "");
                }
                _ => {}
            },
            Op::Wgmma { .. } if !st.in_group => {
                st.in_group = true;
                let kind = if st.last_wait_k {
                    Kind::GemmQk
                } else {
                    Kind::GemmPv
                };
                self.line(c, who, kind, "");
            }
            Op::WgmmaCommit => st.in_group = false,
            Op::WgmmaWait { n } => {
                let kind = if n >= 1 { Kind::WaitWg1 } else { Kind::WaitWg0 };
                st.held = Some((c, kind, who));
            }
            _ => {}
        }
        self.wgs.insert(key, st);
    }
}

impl<W: Write> Observer for Fa3LogWriter<'_, W> {
    fn on_event(&mut self, cycle: Cycle, event: &Event) {
        if let Event::Issue { who, op } = event {
            self.issue(cycle.get(), *who, op);
        }
    }
}
