//! The simulator handle: construction inside caller memory, stepping,
//! summaries, snapshots and error messages.
//!
//! # Memory layout
//!
//! `simfa_init` carves the caller's buffer (aligned to [`SIMFA_MEM_ALIGN`])
//! into three parts, each starting on a `SIMFA_MEM_ALIGN` boundary:
//!
//! | part        | size                                                  |
//! |-------------|-------------------------------------------------------|
//! | the handle  | `size_of::<SimfaSim>()`, rounded up                   |
//! | the kernel  | `size_of::<Kernel>()` (about 47 KB), rounded up       |
//! | the arena   | `Simulator::arena_size(cfg, kernel)`                  |
//!
//! The simulator in the handle borrows the kernel and the arena: the
//! caller must keep the buffer in place and unused until it stops using
//! the handle (there is nothing to free; drop the buffer afterwards).

use core::fmt::Write as _;
use core::mem::{align_of, size_of};

use simfa_core::{encode, GpuConfig, Kernel, NoStream, Simulator, Status};

use crate::{guard, ptr, SimfaConfig, SimfaStatus};

/// Alignment `simfa_init` requires of its memory, in bytes.
pub const SIMFA_MEM_ALIGN: usize = 16;

/// What `simfa_next_event_cycle` reports when nothing is pending.
pub const SIMFA_NO_EVENT: u64 = u64::MAX;

const MAGIC: u64 = u64::from_le_bytes(*b"SIMFASIM");

const _: () = assert!(align_of::<SimfaSim>() <= SIMFA_MEM_ALIGN);
const _: () = assert!(align_of::<Kernel>() <= SIMFA_MEM_ALIGN);

/// Bytes of a failure message a handle keeps.
const MESSAGE: usize = 200;

/// A simulator living in caller memory; C sees only `SimfaSim *`.
pub struct SimfaSim {
    magic: u64,
    cfg: GpuConfig,
    kernel: &'static Kernel,
    arena: *mut u8,
    arena_len: usize,
    /// `None` only inside `simfa_restore`.
    sim: Option<Simulator<'static, NoStream>>,
    /// The error that stopped the run, returned again by every later step.
    failed: Option<SimfaStatus>,
    message: heapless::String<MESSAGE>,
}

/// Where a run stands.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SimfaRunState {
    /// More work remains.
    Running = 0,
    /// Every CTA has retired; the summary is final.
    Finished = 1,
    /// A step failed (deadlock, watchdog, ...); every later step returns
    /// the same code, and `simfa_last_error_message` says why.
    Failed = 2,
}

/// The outcome of a run so far (final once finished).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SimfaSummary {
    /// Kernel duration in cycles (end of the last instruction or transfer).
    pub cycles: u64,
    /// Digest of the canonical event stream: equal runs, equal digests.
    pub digest: u64,
    /// The simulator's current cycle.
    pub now: u64,
    /// Instructions issued.
    pub instructions: u64,
    /// WGMMAs issued.
    pub wgmmas: u64,
    /// TMA operations issued.
    pub tma_ops: u64,
    /// Bytes loaded by TMA.
    pub bytes_loaded: u64,
    /// Bytes stored by TMA.
    pub bytes_stored: u64,
    /// WarpGroup cycles spent waiting.
    pub stall_cycles: u64,
    /// CTAs retired.
    pub ctas_retired: u64,
    /// CTAs in the grid.
    pub ctas_total: u64,
}

const fn round_up(n: usize) -> usize {
    n.div_ceil(SIMFA_MEM_ALIGN) * SIMFA_MEM_ALIGN
}

const HEAD: usize = round_up(size_of::<SimfaSim>());
const KERNEL: usize = round_up(size_of::<Kernel>());

/// Total bytes of caller memory for the pair.
fn mem_size(cfg: &GpuConfig, k: &Kernel) -> Result<usize, SimfaStatus> {
    let arena = Simulator::<NoStream>::arena_size(cfg, k)?;
    arena
        .checked_add(HEAD + KERNEL)
        .ok_or(SimfaStatus::BadKernel)
}

/// Reads a `SimfaConfig` argument.
///
/// # Safety
///
/// As [`ptr::input`].
unsafe fn config(cfg: *const SimfaConfig) -> Result<GpuConfig, SimfaStatus> {
    // SAFETY: forwarded; every bit pattern of a SimfaConfig is valid.
    unsafe { ptr::input(cfg) }?.decode()
}

/// Writes into `out` the bytes of memory (aligned to `SIMFA_MEM_ALIGN`)
/// that `simfa_init` needs for this configuration and kernel (`kernel_len`
/// bytes of the binary kernel encoding). Checks both as `simfa_init` does.
///
/// # Safety
///
/// `cfg` must point at a readable `SimfaConfig`; `kernel` at `kernel_len`
/// readable bytes; `out` at a writable, aligned `size_t`.
#[no_mangle]
pub unsafe extern "C" fn simfa_arena_size(
    cfg: *const SimfaConfig,
    kernel: *const u8,
    kernel_len: usize,
    out: *mut usize,
) -> SimfaStatus {
    guard(|| {
        // SAFETY: the caller's contract above, for each pointer.
        let out = unsafe { ptr::out(out) }?;
        // SAFETY: as above.
        let cfg = unsafe { config(cfg) }?;
        // SAFETY: as above.
        let k = encode::decode(unsafe { ptr::bytes(kernel, kernel_len) }?)?;
        out.write(mem_size(&cfg, &k)?);
        Ok(())
    })
}

/// Builds a simulator for the configuration and kernel inside `mem`
/// (`mem_len` bytes, at least what `simfa_arena_size` reported, aligned to
/// `SIMFA_MEM_ALIGN`) and writes its handle into `*out`. The kernel bytes
/// are decoded into `mem` and need not outlive the call.
///
/// # Safety
///
/// `mem` must point at `mem_len` writable bytes that the caller neither
/// reads, writes, moves nor frees while it uses the handle; `cfg` at a
/// readable `SimfaConfig`; `kernel` at `kernel_len` readable bytes; `out`
/// at a writable `SimfaSim *`.
#[no_mangle]
pub unsafe extern "C" fn simfa_init(
    mem: *mut u8,
    mem_len: usize,
    cfg: *const SimfaConfig,
    kernel: *const u8,
    kernel_len: usize,
    out: *mut *mut SimfaSim,
) -> SimfaStatus {
    guard(|| {
        // SAFETY: the caller's contract above, for each pointer.
        let out = unsafe { ptr::out(out) }?;
        if mem.is_null() {
            return Err(SimfaStatus::NullPointer);
        }
        if (mem as usize) % SIMFA_MEM_ALIGN != 0 {
            return Err(SimfaStatus::BadAlignment);
        }
        if mem_len > isize::MAX as usize {
            return Err(SimfaStatus::BadArgument);
        }
        // SAFETY: as above.
        let cfg = unsafe { config(cfg) }?;
        // SAFETY: as above.
        let k = encode::decode(unsafe { ptr::bytes(kernel, kernel_len) }?)?;
        if mem_len < mem_size(&cfg, &k)? {
            return Err(SimfaStatus::BufferTooSmall);
        }
        let head = mem.cast::<SimfaSim>();
        // SAFETY: `mem` is aligned to SIMFA_MEM_ALIGN, HEAD is a multiple of
        // it and at least `align_of::<Kernel>()`; `mem_len` covers HEAD +
        // KERNEL + the arena (checked), so the kernel slot is in bounds,
        // aligned and writable.
        let kslot = unsafe { mem.add(HEAD) }.cast::<Kernel>();
        // SAFETY: as just said; `write` does not read the old contents.
        unsafe { kslot.write(k) };
        // SAFETY: initialised just above; from now on only shared
        // references to it exist, for as long as the caller keeps `mem`.
        let kernel: &'static Kernel = unsafe { &*kslot };
        // SAFETY: in bounds (checked above).
        let arena = unsafe { mem.add(HEAD + KERNEL) };
        let arena_len = mem_len - HEAD - KERNEL;
        // SAFETY: the arena part of `mem`, disjoint from the handle and the
        // kernel, writable and unaliased by the caller's contract.
        let slice = unsafe { core::slice::from_raw_parts_mut(arena, arena_len) };
        let sim = Simulator::new(&cfg, kernel, slice)?;
        let s = SimfaSim {
            magic: MAGIC,
            cfg,
            kernel,
            arena,
            arena_len,
            sim: Some(sim),
            failed: None,
            message: heapless::String::new(),
        };
        // SAFETY: `head` is aligned (SIMFA_MEM_ALIGN >= align_of) and the
        // first HEAD bytes of `mem` are writable and unused.
        unsafe { head.write(s) };
        out.write(head);
        Ok(())
    })
}

/// The handle behind `h`.
///
/// # Safety
///
/// A non-null, aligned `h` must point at readable memory of at least
/// `size_of::<SimfaSim>()` bytes that nothing else accesses during the
/// call: a handle `simfa_init` returned, or memory whose first 8 bytes are
/// not the handle magic.
pub(crate) unsafe fn handle<'a>(h: *mut SimfaSim) -> Result<&'a mut SimfaSim, SimfaStatus> {
    if h.is_null() {
        return Err(SimfaStatus::NullPointer);
    }
    if !h.is_aligned() {
        return Err(SimfaStatus::BadAlignment);
    }
    // SAFETY: non-null, aligned, readable by the contract; a `u64` has no
    // invalid bit patterns.
    let magic = unsafe { core::ptr::addr_of!((*h).magic).read() };
    if magic != MAGIC {
        return Err(SimfaStatus::BadArgument);
    }
    // SAFETY: the magic says `simfa_init` wrote a `SimfaSim` here; nothing
    // else accesses it during the call by the contract. Its simulator
    // borrows only the kernel and arena parts of the memory, not this one.
    Ok(unsafe { &mut *h })
}

impl SimfaSim {
    /// The simulator; absent only if rebuilding it after a failed restore
    /// failed too, which `simfa_init` having built it rules out.
    pub(crate) fn sim(&mut self) -> Result<&mut Simulator<'static, NoStream>, SimfaStatus> {
        self.sim.as_mut().ok_or(SimfaStatus::SimFailed)
    }

    /// True with the external memory model.
    pub(crate) fn is_external(&self) -> bool {
        self.cfg.memory == simfa_core::config::MemoryModel::External
    }

    /// Records why a call failed and returns its code.
    pub(crate) fn note(
        &mut self,
        status: SimfaStatus,
        why: impl core::fmt::Display,
    ) -> SimfaStatus {
        self.message.clear();
        let _ = write!(Truncating(&mut self.message), "{why}");
        status
    }

    fn fail(&mut self, e: simfa_core::SimError) -> SimfaStatus {
        let st = self.note(e.into(), e);
        self.failed = Some(st);
        st
    }

    fn state(&self) -> SimfaRunState {
        match (&self.failed, &self.sim) {
            (Some(_), _) => SimfaRunState::Failed,
            (None, Some(s)) if s.status() == Status::Finished => SimfaRunState::Finished,
            _ => SimfaRunState::Running,
        }
    }

    /// Runs `f` on the simulator unless the run already failed.
    fn advance(
        &mut self,
        f: impl FnOnce(&mut Simulator<'static, NoStream>) -> Result<Status, simfa_core::SimError>,
    ) -> Result<SimfaRunState, SimfaStatus> {
        if let Some(st) = self.failed {
            return Err(st);
        }
        match f(self.sim()?) {
            Ok(_) => Ok(self.state()),
            Err(e) => Err(self.fail(e)),
        }
    }

    /// Replaces the simulator by one restored from `bytes`, or by a fresh
    /// one when that fails.
    fn restore(&mut self, bytes: &[u8]) -> Result<(), SimfaStatus> {
        // End the old simulator's borrow of the arena before making a new one.
        self.sim = None;
        // SAFETY: the arena part of the caller's memory, which nothing else
        // borrows now that the old simulator is gone.
        let arena = unsafe { core::slice::from_raw_parts_mut(self.arena, self.arena_len) };
        match Simulator::restore(&self.cfg, self.kernel, arena, bytes) {
            Ok(s) => {
                self.sim = Some(s);
                self.failed = None;
                Ok(())
            }
            Err(e) => {
                // SAFETY: as above; the failed restore's borrow has ended.
                let arena = unsafe { core::slice::from_raw_parts_mut(self.arena, self.arena_len) };
                // `simfa_init` built this very simulator in this arena.
                let fresh = Simulator::new(&self.cfg, self.kernel, arena)?;
                self.sim = Some(fresh);
                self.failed = None;
                Err(self.note(e.into(), e))
            }
        }
    }
}

/// A `fmt::Write` that keeps what fits and drops the rest.
struct Truncating<'a>(&'a mut heapless::String<MESSAGE>);

impl core::fmt::Write for Truncating<'_> {
    fn write_str(&mut self, s: &str) -> core::fmt::Result {
        for c in s.chars() {
            if self.0.push(c).is_err() {
                break;
            }
        }
        Ok(())
    }
}

/// Writes an optional output.
///
/// # Safety
///
/// As [`ptr::put`] when non-null.
unsafe fn put_opt<T>(p: *mut T, v: T) -> Result<(), SimfaStatus> {
    if p.is_null() {
        return Ok(());
    }
    // SAFETY: forwarded contract.
    unsafe { ptr::put(p, v) }
}

/// Simulates the next cycle in which something happens (idle cycles are
/// skipped) and writes where the run stands into `*state` (may be null).
/// With external memory, when only the host's completions can move the
/// run on, it returns `Running` without advancing (see
/// `simfa_ext_outstanding`).
/// A failure (deadlock, watchdog, ...) is returned by this call and every
/// later one.
///
/// # Safety
///
/// `h` must be a handle from `simfa_init` (or null); `state` null or a
/// writable `SimfaRunState`.
#[no_mangle]
pub unsafe extern "C" fn simfa_step(h: *mut SimfaSim, state: *mut SimfaRunState) -> SimfaStatus {
    guard(|| {
        // SAFETY: the caller's contract above.
        let s = unsafe { handle(h) }?;
        let st = s.advance(|sim| sim.step(&mut ()))?;
        // SAFETY: the caller's contract above.
        unsafe { put_opt(state, st) }
    })
}

/// Steps until the next activity would lie after `cycle` or the run ends;
/// writes where the run stands into `*state` (may be null).
///
/// # Safety
///
/// As `simfa_step`.
#[no_mangle]
pub unsafe extern "C" fn simfa_run_until(
    h: *mut SimfaSim,
    cycle: u64,
    state: *mut SimfaRunState,
) -> SimfaStatus {
    guard(|| {
        // SAFETY: the caller's contract above.
        let s = unsafe { handle(h) }?;
        let st = s.advance(|sim| sim.run_until(simfa_core::Cycle(cycle), &mut ()))?;
        // SAFETY: the caller's contract above.
        unsafe { put_opt(state, st) }
    })
}

/// Writes the cycle of the next activity into `*out`: the current cycle
/// if some SM can issue, else the next queued event; `SIMFA_NO_EVENT` when
/// the run is finished, failed, or nothing is pending.
///
/// # Safety
///
/// `h` must be a handle from `simfa_init` (or null); `out` a writable,
/// aligned `uint64_t`.
#[no_mangle]
pub unsafe extern "C" fn simfa_next_event_cycle(h: *mut SimfaSim, out: *mut u64) -> SimfaStatus {
    guard(|| {
        // SAFETY: the caller's contract above.
        let s = unsafe { handle(h) }?;
        let c = match s.failed {
            Some(_) => None,
            None => s.sim()?.next_event_cycle(),
        };
        // SAFETY: the caller's contract above.
        unsafe { ptr::put(out, c.map_or(SIMFA_NO_EVENT, |c| c.0)) }
    })
}

/// Writes where the run stands into `*out`.
///
/// # Safety
///
/// `h` must be a handle from `simfa_init` (or null); `out` a writable
/// `SimfaRunState`.
#[no_mangle]
pub unsafe extern "C" fn simfa_status(h: *mut SimfaSim, out: *mut SimfaRunState) -> SimfaStatus {
    guard(|| {
        // SAFETY: the caller's contract above.
        let s = unsafe { handle(h) }?;
        // SAFETY: the caller's contract above.
        unsafe { ptr::put(out, s.state()) }
    })
}

/// Writes the outcome so far into `*out` (final once finished).
///
/// # Safety
///
/// `h` must be a handle from `simfa_init` (or null); `out` a writable,
/// aligned `SimfaSummary`.
#[no_mangle]
pub unsafe extern "C" fn simfa_summary(h: *mut SimfaSim, out: *mut SimfaSummary) -> SimfaStatus {
    guard(|| {
        // SAFETY: the caller's contract above.
        let s = unsafe { handle(h) }?;
        let sim = s.sim()?;
        let sum = sim.summary();
        let (retired, total) = sim.progress();
        let v = SimfaSummary {
            cycles: sum.cycles,
            digest: sum.digest,
            now: sim.now().0,
            instructions: sum.stats.instructions,
            wgmmas: sum.stats.wgmmas,
            tma_ops: sum.stats.tma_ops,
            bytes_loaded: sum.stats.bytes_loaded,
            bytes_stored: sum.stats.bytes_stored,
            stall_cycles: sum.stats.stall_cycles,
            ctas_retired: retired as u64,
            ctas_total: total as u64,
        };
        // SAFETY: the caller's contract above.
        unsafe { ptr::put(out, v) }
    })
}

/// Writes into `*out` an upper bound of the bytes `simfa_save` writes at
/// any cycle of this run.
///
/// # Safety
///
/// `h` must be a handle from `simfa_init` (or null); `out` a writable,
/// aligned `size_t`.
#[no_mangle]
pub unsafe extern "C" fn simfa_snapshot_size(h: *mut SimfaSim, out: *mut usize) -> SimfaStatus {
    guard(|| {
        // SAFETY: the caller's contract above.
        let s = unsafe { handle(h) }?;
        let n = s.sim()?.snapshot_size();
        // SAFETY: the caller's contract above.
        unsafe { ptr::put(out, n) }
    })
}

/// Writes a snapshot of the whole simulation state into `buf` (`len`
/// bytes) and its length into `*written`. With a buffer too small it
/// returns `BufferTooSmall` and `*written` holds `simfa_snapshot_size`.
///
/// # Safety
///
/// `h` must be a handle from `simfa_init` (or null); `buf` `len` writable
/// bytes (or null with `len` 0); `written` a writable, aligned `size_t`.
#[no_mangle]
pub unsafe extern "C" fn simfa_save(
    h: *mut SimfaSim,
    buf: *mut u8,
    len: usize,
    written: *mut usize,
) -> SimfaStatus {
    guard(|| {
        // SAFETY: the caller's contract above, for each pointer.
        let s = unsafe { handle(h) }?;
        // SAFETY: as above.
        let written = unsafe { ptr::out(written) }?;
        // SAFETY: as above.
        let buf = unsafe { ptr::bytes_mut(buf, len) }?;
        let need = s.sim()?.snapshot_size();
        written.write(need);
        if buf.len() < need {
            return Err(s.note(SimfaStatus::BufferTooSmall, "snapshot buffer too small"));
        }
        match s.sim()?.save(buf) {
            Ok(n) => {
                written.write(n);
                Ok(())
            }
            Err(e) => Err(s.note(e.into(), e)),
        }
    })
}

/// Replaces the simulation state by the snapshot in `bytes` (`len`
/// bytes), which `simfa_save` wrote for the same configuration and kernel.
/// Restoring clears a failed state. When it fails (another pair's
/// snapshot, wrong magic or version, truncated or damaged bytes) the
/// handle holds a fresh simulator at cycle 0, as `simfa_init` made it.
///
/// # Safety
///
/// `h` must be a handle from `simfa_init` (or null); `bytes` `len`
/// readable bytes that do not overlap the handle's memory.
#[no_mangle]
pub unsafe extern "C" fn simfa_restore(
    h: *mut SimfaSim,
    bytes: *const u8,
    len: usize,
) -> SimfaStatus {
    guard(|| {
        // SAFETY: the caller's contract above, for each pointer.
        let s = unsafe { handle(h) }?;
        // SAFETY: as above.
        let b = unsafe { ptr::bytes(bytes, len) }?;
        s.restore(b)
    })
}

/// Copies the message of the handle's last failure (empty when none) into
/// `buf` as a NUL-terminated string and writes its length plus one (the
/// bytes needed) into `*needed` (may be null). A buffer too small gets the
/// message cut to fit, still terminated, and `BufferTooSmall`.
///
/// # Safety
///
/// `h` must be a handle from `simfa_init` (or null); `buf` `len` writable
/// bytes (or null with `len` 0); `needed` null or a writable, aligned
/// `size_t`.
#[no_mangle]
pub unsafe extern "C" fn simfa_last_error_message(
    h: *mut SimfaSim,
    buf: *mut u8,
    len: usize,
    needed: *mut usize,
) -> SimfaStatus {
    guard(|| {
        // SAFETY: the caller's contract above, for each pointer.
        let s = unsafe { handle(h) }?;
        // SAFETY: as above.
        let buf = unsafe { ptr::bytes_mut(buf, len) }?;
        let msg = s.message.as_bytes();
        // SAFETY: as above.
        unsafe { put_opt(needed, msg.len() + 1) }?;
        if buf.is_empty() {
            return Err(SimfaStatus::BufferTooSmall);
        }
        let n = msg.len().min(buf.len() - 1);
        buf[..n].copy_from_slice(&msg[..n]);
        buf[n] = 0;
        if n < msg.len() {
            return Err(SimfaStatus::BufferTooSmall);
        }
        Ok(())
    })
}
