//! Running a kernel with a heap-allocated arena.
//!
//! [`simulate`] asks [`Simulator::arena_size`] for the exact arena, takes
//! it from the thread's kept arena (allocated once, grown when a run needs
//! more), builds the simulator and runs it to the end. On a deadlock the error
//! carries a human description of every waiting WarpGroup, with role,
//! mbarrier and stage names taken from the kernel.

use std::fmt;
use std::path::{Path, PathBuf};

use simfa_core::config::MemoryModel;
use simfa_core::digest::Digest;
use simfa_core::isa::EvalCtx;
use simfa_core::{
    BuildError, Cycle, Event, GpuConfig, Instr, Kernel, NoStream, Observer, Op, SimError,
    Simulator, SnapshotError, Status, StreamSource, Summary, WaitReason, Waiter,
};

/// Simulation steps between two calls of the progress hook (2^10). A step
/// is one simulated cycle in which something happens, on every SM, so it
/// can be long: a 4096^3 GEMM on 132 SMs takes only about 12 000 steps.
pub const PROGRESS_INTERVAL: u64 = 1 << 10;

/// Stack of a worker thread that simulates (a calibration's points, a
/// tune's candidates): a main thread's 8 MiB, where rayon's default is 2.
pub const RUN_STACK_BYTES: usize = 8 << 20;

/// The result of a finished run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RunOutcome {
    /// Cycles, digest and counters from the core.
    pub summary: Summary,
    /// Bytes of arena the run used.
    pub arena_bytes: usize,
    /// CTAs in the grid.
    pub ctas: u64,
    /// Floating-point operations of the WGMMAs issued: `2 * 64 * N * 16`
    /// per m64nNk16 WGMMA.
    pub flops: u64,
    /// Cycle of the first TMA or bulk transfer issued (`None` if none).
    pub first_transfer: Option<u64>,
    /// Cycle the last CTA retired.
    pub last_retire: u64,
}

impl RunOutcome {
    /// The cold interval: first transfer to last CTA retirement, in cycles
    /// (0 without transfers).
    pub fn cold_interval(&self) -> u64 {
        self.first_transfer
            .map_or(0, |f| self.last_retire.saturating_sub(f))
    }

    /// The compute field: first to last tensor-core activity, in cycles
    /// (0 without WGMMAs).
    pub fn compute_field(&self) -> u64 {
        let st = &self.summary.stats;
        if st.wgmmas == 0 {
            0
        } else {
            st.last_wgmma.saturating_sub(st.first_wgmma)
        }
    }
}

/// Why a run failed.
#[derive(Debug)]
pub enum RunError {
    /// The simulator could not be built (bad configuration, invalid kernel,
    /// a CTA that does not fit an SM).
    Build(BuildError),
    /// The arena could not be allocated.
    Alloc {
        /// Bytes asked for.
        bytes: usize,
    },
    /// The simulation failed.
    Sim {
        /// The core's error.
        error: SimError,
        /// On a deadlock, one line per waiting WarpGroup, e.g.
        /// `CTA 3 (sm 3) role consumer wg 1: waits on mbarrier full[1] phase parity 0`;
        /// empty otherwise.
        waiters: Vec<String>,
    },
    /// A snapshot file could not be restored (bad magic or version, another
    /// configuration or kernel, truncated or corrupt bytes).
    Snapshot {
        /// The snapshot file.
        path: String,
        /// The core's error.
        error: SnapshotError,
    },
    /// The configuration's memory is the embedding host's
    /// (`memory = "external"`): only a host driving the C ABI can answer
    /// its requests, so a run here would wait forever.
    ExternalMemory,
    /// A snapshot file could not be read or written.
    Io {
        /// The snapshot file.
        path: String,
        /// The I/O error.
        source: std::io::Error,
    },
}

impl fmt::Display for RunError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RunError::Build(e) => write!(f, "{e}"),
            RunError::Alloc { bytes } => {
                write!(f, "cannot allocate the {bytes}-byte simulation arena")
            }
            RunError::Sim { error, waiters } => {
                write!(f, "{error}")?;
                for w in waiters {
                    write!(f, "\n  {w}")?;
                }
                Ok(())
            }
            RunError::Snapshot { path, error } => write!(f, "snapshot {path}: {error}"),
            RunError::Io { path, source } => write!(f, "snapshot {path}: {source}"),
            RunError::ExternalMemory => write!(
                f,
                "memory = \"external\" is served by an embedding host through the C ABI \
                 (simfa-ffi); simfa's own commands run transaction, line or fixed"
            ),
        }
    }
}

impl std::error::Error for RunError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            RunError::Build(e) => Some(e),
            RunError::Alloc { .. } | RunError::ExternalMemory => None,
            RunError::Sim { error, .. } => Some(error),
            RunError::Snapshot { error, .. } => Some(error),
            RunError::Io { source, .. } => Some(source),
        }
    }
}

impl From<BuildError> for RunError {
    fn from(e: BuildError) -> Self {
        RunError::Build(e)
    }
}

/// Sums the FLOPs of every issued WGMMA and notes the measurement
/// windows' ends, then forwards the event.
struct FlopCounter<'o, O: Observer> {
    inner: &'o mut O,
    tally: Tally,
}

/// The host-side measurements of a run that are not simulator state (they
/// are taken from the event stream); a snapshot file carries them after
/// the core's snapshot so a resumed run reports the same numbers.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Tally {
    /// FLOPs of the WGMMAs issued so far.
    pub flops: u64,
    /// Cycle of the first transfer issued, if any.
    pub first_transfer: Option<u64>,
    /// Cycle the last CTA retired so far.
    pub last_retire: u64,
}

/// Bytes of the [`Tally`] trailer of a snapshot file: four little-endian
/// `u64`s (FLOPs, first transfer + 1 or 0, last retirement, checksum).
const TRAILER: usize = 32;

impl Tally {
    fn words(&self) -> [u64; 3] {
        [
            self.flops,
            self.first_transfer.map_or(0, |c| c.saturating_add(1)),
            self.last_retire,
        ]
    }

    fn checksum(words: &[u64; 3]) -> u64 {
        let mut d = Digest::new();
        d.fold_all(words);
        d.value()
    }
}

/// Writes a snapshot of `sim` and the run's `tally` to `path` atomically
/// (through a temporary file and a rename); returns the bytes written.
pub fn save_snapshot<S: StreamSource>(
    path: &Path,
    sim: &Simulator<'_, S>,
    tally: &Tally,
) -> Result<usize, RunError> {
    let name = || path.display().to_string();
    let mut buf = vec![0u8; sim.snapshot_size() + TRAILER];
    let n = sim.save(&mut buf).map_err(|error| RunError::Snapshot {
        path: name(),
        error,
    })?;
    buf.truncate(n);
    let words = tally.words();
    for w in words.iter().chain([Tally::checksum(&words)].iter()) {
        buf.extend_from_slice(&w.to_le_bytes());
    }
    crate::load::write_atomic(path, &buf).map_err(|source| RunError::Io {
        path: name(),
        source,
    })?;
    Ok(buf.len())
}

/// Reads a snapshot file written by [`save_snapshot`]: the core snapshot
/// (checked when restored) and the tally (checked here).
pub fn read_snapshot(path: &Path) -> Result<(Vec<u8>, Tally), RunError> {
    let name = || path.display().to_string();
    let mut bytes = std::fs::read(path).map_err(|source| RunError::Io {
        path: name(),
        source,
    })?;
    let corrupt = |error| RunError::Snapshot {
        path: name(),
        error,
    };
    if bytes.len() < TRAILER {
        return Err(corrupt(SnapshotError::Truncated));
    }
    let tail = bytes.split_off(bytes.len() - TRAILER);
    let w: Vec<u64> = tail
        .chunks_exact(8)
        .map(|c| u64::from_le_bytes(c.try_into().expect("8 bytes")))
        .collect();
    let words = [w[0], w[1], w[2]];
    if Tally::checksum(&words) != w[3] {
        return Err(corrupt(SnapshotError::Checksum));
    }
    let tally = Tally {
        flops: words[0],
        first_transfer: words[1].checked_sub(1),
        last_retire: words[2],
    };
    Ok((bytes, tally))
}

/// Restores a simulator whose stream roles pull from `source` from a file
/// written by [`save_snapshot`] into `arena`; errors name the file.
pub fn resume<'a, S: StreamSource>(
    cfg: &GpuConfig,
    k: &'a Kernel,
    arena: &'a mut [u8],
    source: S,
    path: &Path,
) -> Result<(Simulator<'a, S>, Tally), RunError> {
    let (bytes, tally) = read_snapshot(path)?;
    let sim = Simulator::restore_with_source(cfg, k, arena, source, &bytes).map_err(|error| {
        RunError::Snapshot {
            path: path.display().to_string(),
            error,
        }
    })?;
    Ok((sim, tally))
}

/// Snapshots a run takes or starts from.
#[derive(Clone, Debug, Default)]
pub struct Snapshots {
    /// Start from this snapshot file instead of cycle 0.
    pub resume: Option<PathBuf>,
    /// Save a snapshot to the file once the run has simulated every cycle
    /// up to and including the given one (at the end if it finishes first),
    /// then go on.
    pub save_at: Option<(u64, PathBuf)>,
}

impl<O: Observer> Observer for FlopCounter<'_, O> {
    fn on_event(&mut self, cycle: Cycle, event: &Event) {
        if let Event::Issue {
            op: Op::Wgmma { n, .. },
            ..
        } = event
        {
            self.tally.flops = self.tally.flops.saturating_add(2 * 64 * 16 * *n as u64);
        }
        match event {
            Event::TmaIssue { .. } if self.tally.first_transfer.is_none() => {
                self.tally.first_transfer = Some(cycle.get());
            }
            Event::CtaRetire { .. } => self.tally.last_retire = cycle.get(),
            _ => {}
        }
        self.inner.on_event(cycle, event);
    }

    fn wants_detail(&self) -> bool {
        self.inner.wants_detail()
    }
}

thread_local! {
    /// This thread's arena, kept between runs: a sweep's or a benchmark's
    /// runs reuse it instead of mapping and clearing a fresh one each (the
    /// simulator initialises every part of an arena it reads, whatever the
    /// arena held before).
    static ARENA: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// The thread's kept arena, borrowed for one run and put back when dropped.
struct KeptArena(Vec<u8>);

impl KeptArena {
    /// The kept arena, replaced by a new one when it is smaller than
    /// `bytes`.
    fn take(bytes: usize) -> Result<KeptArena, RunError> {
        let mut a = ARENA.with(|a| a.take());
        if a.len() < bytes {
            a = Vec::new();
            a.try_reserve_exact(bytes)
                .map_err(|_| RunError::Alloc { bytes })?;
            a.resize(bytes, 0u8);
        }
        Ok(KeptArena(a))
    }
}

impl Drop for KeptArena {
    fn drop(&mut self) {
        let a = std::mem::take(&mut self.0);
        ARENA.with(|k| *k.borrow_mut() = a);
    }
}

/// Builds and runs `k` on `cfg`, sending every event to `obs`.
pub fn simulate(
    cfg: &GpuConfig,
    k: &Kernel,
    obs: &mut impl Observer,
) -> Result<RunOutcome, RunError> {
    simulate_with_progress(cfg, k, obs, |_, _, _| {})
}

/// Like [`simulate`], calling `progress(cycle, retired_ctas, total_ctas)`
/// every [`PROGRESS_INTERVAL`] simulation steps (for a progress display).
pub fn simulate_with_progress(
    cfg: &GpuConfig,
    k: &Kernel,
    obs: &mut impl Observer,
    progress: impl FnMut(u64, u32, u32),
) -> Result<RunOutcome, RunError> {
    simulate_with_snapshots(cfg, k, obs, progress, &Snapshots::default())
}

/// Like [`simulate_with_progress`], resuming from and/or saving a snapshot
/// file as `snaps` says. A resumed run's summary and FLOP/window
/// measurements equal the uninterrupted run's; `obs` sees only the events
/// after the resume point.
pub fn simulate_with_snapshots(
    cfg: &GpuConfig,
    k: &Kernel,
    obs: &mut impl Observer,
    progress: impl FnMut(u64, u32, u32),
    snaps: &Snapshots,
) -> Result<RunOutcome, RunError> {
    simulate_from(cfg, k, NoStream, obs, progress, snaps)
}

/// Like [`simulate_with_snapshots`] for a kernel whose stream roles pull
/// their instructions from `source` (an imported trace).
pub fn simulate_from<S: StreamSource>(
    cfg: &GpuConfig,
    k: &Kernel,
    source: S,
    obs: &mut impl Observer,
    progress: impl FnMut(u64, u32, u32),
    snaps: &Snapshots,
) -> Result<RunOutcome, RunError> {
    run_to(cfg, k, source, obs, progress, snaps, u64::MAX)
        .map(|o| o.expect("a run without a cycle limit ends finished"))
}

/// Like [`simulate_from`] without outputs, but stops as soon as the simulated cycle passes
/// `limit`: `None` then, the finished run's outcome otherwise (a run that
/// ends at cycle `limit` or before).
pub fn simulate_within<S: StreamSource>(
    cfg: &GpuConfig,
    k: &Kernel,
    source: S,
    limit: u64,
) -> Result<Option<RunOutcome>, RunError> {
    run_to(
        cfg,
        k,
        source,
        &mut (),
        |_, _, _| {},
        &Snapshots::default(),
        limit,
    )
}

/// The run of [`simulate_from`], given up (`None`) once the simulated
/// cycle passes `limit`.
fn run_to<S: StreamSource>(
    cfg: &GpuConfig,
    k: &Kernel,
    source: S,
    obs: &mut impl Observer,
    mut progress: impl FnMut(u64, u32, u32),
    snaps: &Snapshots,
    limit: u64,
) -> Result<Option<RunOutcome>, RunError> {
    if cfg.memory == MemoryModel::External {
        return Err(RunError::ExternalMemory);
    }
    let arena_bytes = Simulator::<NoStream>::arena_size(cfg, k)?;
    let mut kept = KeptArena::take(arena_bytes)?;
    let arena = &mut kept.0[..arena_bytes];
    if let Some(line) = beyond_watchdog(cfg, k) {
        return Err(RunError::Sim {
            error: SimError::Watchdog {
                limit: cfg.watchdog_cycles,
            },
            waiters: vec![line],
        });
    }
    let (mut sim, tally) = match &snaps.resume {
        Some(path) => resume(cfg, k, arena, source, path)?,
        None => (
            Simulator::with_source(cfg, k, arena, source)?,
            Tally::default(),
        ),
    };
    let mut counter = FlopCounter { inner: obs, tally };
    let mut save_at = snaps.save_at.as_ref();
    let mut steps: u64 = 0;
    loop {
        // Save once nothing at or before the cycle is left to simulate
        // (the point `Simulator::run_until` stops at).
        if let Some((at, path)) = save_at {
            if sim.next_event_cycle().map_or(true, |c| c.get() > *at) {
                save_snapshot(path, &sim, &counter.tally)?;
                save_at = None;
            }
        }
        match sim.step(&mut counter) {
            Ok(Status::Finished) => break,
            Ok(Status::Running) => {
                if sim.now().get() > limit {
                    return Ok(None);
                }
                steps += 1;
                if steps % PROGRESS_INTERVAL == 0 {
                    let (retired, total) = sim.progress();
                    progress(sim.now().get(), retired, total);
                }
            }
            Err(error) => {
                let waiters = if matches!(error, SimError::Deadlock { .. }) {
                    sim.waiters().map(|w| describe_waiter(k, &w)).collect()
                } else {
                    Vec::new()
                };
                return Err(RunError::Sim { error, waiters });
            }
        }
    }
    if let Some((_, path)) = save_at {
        save_snapshot(path, &sim, &counter.tally)?;
    }
    let summary = sim.summary();
    if summary.cycles > limit {
        return Ok(None);
    }
    Ok(Some(RunOutcome {
        summary,
        arena_bytes,
        ctas: k.ctas(),
        flops: counter.tally.flops,
        first_transfer: counter.tally.first_transfer,
        last_retire: counter.tally.last_retire,
    }))
}

/// A lower bound on the instructions one WarpGroup of the program
/// `k.code[start..end]` issues: every instruction but loop markers and
/// `exit`, loops with constant counts multiplied out, loops with variable
/// counts taken as empty. Counting stops at the first `exit` that may be
/// reached. Returns the bound and whether counting stopped at an `exit`.
/// `k` must be valid (balanced loops).
fn min_issues(k: &Kernel, start: usize, end: usize) -> (u64, bool) {
    let mut total: u64 = 0;
    let mut pc = start;
    while pc < end {
        match k.code[pc] {
            Instr::Exit => return (total, true),
            Instr::LoopBegin { count, end: e } => {
                let e = (e as usize).min(end);
                let (body, stops) = min_issues(k, pc + 1, e);
                let expr = &k.exprs[count as usize];
                // The simulator clamps counts to 0..=u32::MAX.
                let n = if expr.is_constant() {
                    expr.eval(&EvalCtx::default()).clamp(0, u32::MAX as i64) as u64
                } else {
                    0
                };
                if stops {
                    return (total.saturating_add(if n > 0 { body } else { 0 }), true);
                }
                total = total.saturating_add(body.saturating_mul(n));
                pc = e + 1;
                continue;
            }
            Instr::LoopEnd { .. } => {}
            _ => total = total.saturating_add(1),
        }
        pc += 1;
    }
    (total, false)
}

/// When some WarpGroup must issue more instructions than the watchdog
/// allows cycles (an SM issues at most one instruction per cycle, a
/// WarpGroup in order), the run can only end in the watchdog (or in an
/// earlier deadlock): say so at once instead of simulating billions of
/// cycles first. Returns the line that explains it.
fn beyond_watchdog(cfg: &GpuConfig, k: &Kernel) -> Option<String> {
    k.roles.iter().filter(|r| !r.stream).find_map(|r| {
        let start = r.start as usize;
        let (n, _) = min_issues(k, start, start + r.len as usize);
        (n > cfg.watchdog_cycles.saturating_add(1)).then(|| {
            format!(
                "role {} issues at least {n} instructions, at most one per cycle, \
                 so it cannot finish within the limit",
                r.name
            )
        })
    })
}

/// `name[i]` for CTA-wide index `index` of the declaration arrays given as
/// (name, len) pairs, or `None` when out of range.
fn element_name<'a>(decls: impl Iterator<Item = (&'a str, u16)>, index: u16) -> Option<String> {
    let mut left = index as usize;
    for (name, len) in decls {
        if left < len as usize {
            return Some(format!("{name}[{left}]"));
        }
        left -= len as usize;
    }
    None
}

/// The name of CTA-wide mbarrier `bar`, e.g. `full[1]`, or its number.
pub fn mbarrier_name(k: &Kernel, bar: u16) -> String {
    element_name(k.mbarriers.iter().map(|d| (d.name.as_str(), d.len)), bar)
        .unwrap_or_else(|| bar.to_string())
}

/// The name of CTA-wide stage `stage`, e.g. `ring[2]`, or its number.
pub fn stage_name(k: &Kernel, stage: u16) -> String {
    element_name(k.stages.iter().map(|d| (d.name.as_str(), d.len)), stage)
        .unwrap_or_else(|| stage.to_string())
}

/// What a waiter waits on, with names from the kernel.
pub fn describe_reason(k: &Kernel, reason: &WaitReason) -> String {
    match *reason {
        WaitReason::Mbarrier { bar, parity } => {
            format!("mbarrier {} phase parity {parity}", mbarrier_name(k, bar))
        }
        WaitReason::Stage { stage } => format!("stage {} to be released", stage_name(k, stage)),
        other => other.to_string(),
    }
}

/// One line describing a waiting WarpGroup, e.g.
/// `CTA 3 (sm 3) role consumer wg 1: waits on mbarrier full[1] phase parity 0`.
pub fn describe_waiter(k: &Kernel, w: &Waiter) -> String {
    let role = k
        .roles
        .get(w.role as usize)
        .map_or_else(|| w.role.to_string(), |r| r.name.to_string());
    format!(
        "CTA {} (sm {}) role {} wg {}: waits on {}",
        w.cta,
        w.sm,
        role,
        w.wg_in_role,
        describe_reason(k, &w.reason)
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use simfa_core::{Expr, Instr, MbarDecl, Ref, Role};

    fn name(s: &str) -> simfa_core::kernel::Name {
        s.try_into().unwrap()
    }

    fn deadlock_kernel() -> Kernel {
        let mut k = Kernel {
            name: name("dl"),
            grid: [2, 1, 1],
            ..Kernel::default()
        };
        k.mbarriers
            .push(MbarDecl {
                name: name("a"),
                len: 1,
                count: 1,
            })
            .unwrap();
        k.mbarriers
            .push(MbarDecl {
                name: name("full"),
                len: 2,
                count: 1,
            })
            .unwrap();
        k.exprs.push(Expr::constant(1)).unwrap();
        k.exprs.push(Expr::constant(0)).unwrap();
        k.code
            .push(Instr::MbarWait {
                bar: Ref { decl: 1, idx: 0 },
                parity: 1,
            })
            .unwrap();
        k.code
            .push(Instr::Wgmma {
                n: 64,
                mode: simfa_core::WgmmaMode::Ss,
            })
            .unwrap();
        k.roles
            .push(Role {
                name: name("consumer"),
                count: 2,
                regs: 32,
                start: 0,
                len: 1,
                stream: false,
            })
            .unwrap();
        k.roles
            .push(Role {
                name: name("other"),
                count: 1,
                regs: 32,
                start: 1,
                len: 1,
                stream: false,
            })
            .unwrap();
        k
    }

    #[test]
    fn deadlock_lists_every_waiter() {
        let k = deadlock_kernel();
        let e = simulate(&GpuConfig::h800(), &k, &mut ()).unwrap_err();
        let RunError::Sim { error, waiters } = &e else {
            panic!("{e}")
        };
        assert!(
            matches!(error, SimError::Deadlock { waiting: 4, .. }),
            "{error}"
        );
        assert_eq!(waiters.len(), 4, "{waiters:?}");
        assert_eq!(
            waiters[0],
            "CTA 0 (sm 0) role consumer wg 0: waits on mbarrier full[1] phase parity 0"
        );
        assert!(
            waiters
                .iter()
                .any(|w| w.starts_with("CTA 1 (sm 1) role consumer wg 1:")),
            "{waiters:?}"
        );
        let text = e.to_string();
        assert_eq!(text.lines().count(), 5, "{text}");
    }

    #[test]
    fn progress_and_flops() {
        let mut k = Kernel {
            grid: [4, 1, 1],
            ..Kernel::default()
        };
        for _ in 0..3 {
            k.code
                .push(Instr::Wgmma {
                    n: 128,
                    mode: simfa_core::WgmmaMode::Ss,
                })
                .unwrap();
        }
        k.code.push(Instr::WgmmaCommit).unwrap();
        k.code.push(Instr::WgmmaWait { n: 0 }).unwrap();
        k.roles
            .push(Role {
                name: name("main"),
                count: 1,
                regs: 32,
                start: 0,
                len: 5,
                stream: false,
            })
            .unwrap();
        let mut calls = 0;
        let out =
            simulate_with_progress(&GpuConfig::h800(), &k, &mut (), |_, _, _| calls += 1).unwrap();
        assert_eq!(out.ctas, 4);
        assert_eq!(out.flops, 4 * 3 * 2 * 64 * 128 * 16);
        assert_eq!(out.summary.stats.wgmmas, 12);
        assert!(out.arena_bytes > 0);
        assert_eq!(calls, 0, "short runs make no progress calls");
    }

    /// `loop a { loop b { bubble 1 } }` in one role, then `exit`.
    fn nested_loops(a: i64, b: i64) -> Kernel {
        let mut k = Kernel {
            name: name("loops"),
            grid: [1, 1, 1],
            ..Kernel::default()
        };
        k.exprs.push(Expr::constant(a)).unwrap();
        k.exprs.push(Expr::constant(b)).unwrap();
        for i in [
            Instr::LoopBegin { count: 0, end: 4 },
            Instr::LoopBegin { count: 1, end: 3 },
            Instr::Bubble { cycles: 1 },
            Instr::LoopEnd { begin: 1 },
            Instr::LoopEnd { begin: 0 },
            Instr::Exit,
        ] {
            k.code.push(i).unwrap();
        }
        k.roles
            .push(Role {
                name: name("spin"),
                count: 1,
                regs: 32,
                start: 0,
                len: 6,
                stream: false,
            })
            .unwrap();
        k.validate().unwrap();
        k
    }

    #[test]
    fn issue_bound_multiplies_constant_loops() {
        let k = nested_loops(3, 5);
        assert_eq!(min_issues(&k, 0, 6), (15, true));
        assert_eq!(min_issues(&nested_loops(-2, 5), 0, 6), (0, true));
        // The bound is a lower bound: this run issues exactly 15 bubbles.
        let out = simulate(&GpuConfig::h800(), &k, &mut ()).unwrap();
        assert!(out.summary.cycles >= 15, "{}", out.summary.cycles);
    }

    #[test]
    fn absurd_loops_stop_at_once_with_the_watchdog() {
        let k = nested_loops(4_000_000_000, 4_000_000_000);
        let e = simulate(&GpuConfig::h800(), &k, &mut ()).unwrap_err();
        assert!(
            matches!(
                e,
                RunError::Sim {
                    error: SimError::Watchdog { .. },
                    ..
                }
            ),
            "{e}"
        );
        assert!(e.to_string().contains("role spin issues at least"), "{e}");
        // Within the limit the run goes ahead.
        let mut cfg = GpuConfig::h800();
        cfg.watchdog_cycles = 1000;
        assert!(simulate(&cfg, &nested_loops(10, 10), &mut ()).is_ok());
        assert!(beyond_watchdog(&cfg, &nested_loops(40, 40)).is_some());
    }

    #[test]
    fn build_errors() {
        let k = Kernel::default();
        assert!(matches!(
            simulate(&GpuConfig::h800(), &k, &mut ()),
            Err(RunError::Build(_))
        ));
    }
}
