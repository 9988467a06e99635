//! The external memory port's calls (`simfa_core::external`): the host
//! drains the simulator's requests and completes them.
//!
//! A host loop, one cycle at a time or in larger strides:
//!
//! ```c
//! while (state == SIMFA_RUN_STATE_RUNNING) {
//!     simfa_run_until(h, host_cycle, &state);   /* or simfa_step */
//!     SimfaExtRequest r; bool got;
//!     while (simfa_ext_pop_request(h, &r, &got) == SIMFA_STATUS_OK && got)
//!         memory_model_accept(&r);             /* the host's memory */
//!     /* for every answer the memory has: */
//!     simfa_ext_complete(h, id, landing_cycle);
//!     host_cycle++;
//! }
//! ```

use simfa_core::external::ExtError;
use simfa_core::Cycle;

use crate::sim::handle;
use crate::{guard, ptr, SimfaConfig, SimfaStatus};

/// One TMA operation the simulator hands to the host
/// (`simfa_core::external::ExtRequest`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SimfaExtRequest {
    /// Operation id, to pass to `simfa_ext_complete`.
    pub id: u32,
    /// Issuing SM.
    pub sm: u16,
    /// 1 for a store (shared to global memory), 0 for a load.
    pub store: u8,
    /// The cycle the operation's requests leave the TMA engine.
    pub cycle: u64,
    /// Global address (a bulk copy's, or a tensor box's origin).
    pub addr: u64,
    /// Bytes that cross the port.
    pub bytes: u64,
}

/// The fixed port's parameters, for a host that models memory the same
/// way (see `simfa_config_port`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SimfaPortConfig {
    /// Number of SMs (the fixed port serialises each SM's transfers).
    pub sms: u32,
    /// Cycles from a transfer's last byte leaving to its landing.
    pub latency: u32,
    /// Per-SM bandwidth in bytes per cycle: `bytes_num / bytes_den`.
    pub bytes_num: u32,
    /// See `bytes_num`.
    pub bytes_den: u32,
}

impl From<ExtError> for SimfaStatus {
    fn from(e: ExtError) -> Self {
        match e {
            ExtError::NotExternal => SimfaStatus::NotExternal,
            ExtError::InPast { .. } => SimfaStatus::CompletionInPast,
            // Only a damaged snapshot fills the event queue.
            ExtError::QueueFull { .. } => SimfaStatus::BadSnapshot,
            _ => SimfaStatus::UnknownRequest,
        }
    }
}

/// Writes the configuration's SM count and fixed-port parameters into
/// `*out`: a host that answers each SM's requests in order, each taking
/// `ceil(bytes * bytes_den / bytes_num)` cycles after both its `cycle` and
/// the SM's previous transfer, then `latency`, reproduces the fixed port
/// (see docs/cosim.md).
///
/// # Safety
///
/// `cfg` must point at a readable `SimfaConfig`; `out` at a writable,
/// aligned `SimfaPortConfig`.
#[no_mangle]
pub unsafe extern "C" fn simfa_config_port(
    cfg: *const SimfaConfig,
    out: *mut SimfaPortConfig,
) -> SimfaStatus {
    guard(|| {
        // SAFETY: the caller's contract above.
        let out = unsafe { ptr::out(out) }?;
        // SAFETY: the caller's contract above.
        let c = unsafe { ptr::input(cfg) }?.decode()?;
        out.write(SimfaPortConfig {
            sms: c.sms as u32,
            latency: c.port.latency,
            bytes_num: c.port.bytes_per_cycle.num,
            bytes_den: c.port.bytes_per_cycle.den,
        });
        Ok(())
    })
}

/// Takes the oldest request the host has not seen yet: writes it into
/// `*out` and `true` into `*popped`, or `false` when none is waiting.
/// `NotExternal` unless the configuration's memory is external.
///
/// # Safety
///
/// `h` must be a handle from `simfa_init` (or null); `out` a writable,
/// aligned `SimfaExtRequest`; `popped` a writable `bool`.
#[no_mangle]
pub unsafe extern "C" fn simfa_ext_pop_request(
    h: *mut crate::SimfaSim,
    out: *mut SimfaExtRequest,
    popped: *mut bool,
) -> SimfaStatus {
    guard(|| {
        // SAFETY: the caller's contract above, for each pointer.
        let s = unsafe { handle(h) }?;
        // SAFETY: as above.
        let out = unsafe { ptr::out(out) }?;
        // SAFETY: as above.
        let popped = unsafe { ptr::out(popped) }?;
        if !s.is_external() {
            return Err(s.note(SimfaStatus::NotExternal, ExtError::NotExternal));
        }
        match s.sim()?.ext_pop() {
            Some(r) => {
                out.write(SimfaExtRequest {
                    id: r.id,
                    sm: r.sm,
                    store: r.store as u8,
                    cycle: r.cycle,
                    addr: r.addr,
                    bytes: r.bytes,
                });
                popped.write(true);
            }
            None => {
                popped.write(false);
            }
        }
        Ok(())
    })
}

/// Completes popped request `id`: its last byte lands at `cycle`, which
/// must be no earlier than the simulator's current cycle (the `now` of
/// `simfa_summary`) nor the request's own `cycle`. Requests may be
/// completed in any order. An id that is not popped and outstanding
/// (never issued, not popped yet, completed already) is `UnknownRequest`;
/// a cycle too early is `CompletionInPast`; either changes nothing.
///
/// # Safety
///
/// `h` must be a handle from `simfa_init` (or null).
#[no_mangle]
pub unsafe extern "C" fn simfa_ext_complete(
    h: *mut crate::SimfaSim,
    id: u32,
    cycle: u64,
) -> SimfaStatus {
    guard(|| {
        // SAFETY: the caller's contract above.
        let s = unsafe { handle(h) }?;
        match s.sim()?.ext_complete(id, Cycle(cycle)) {
            Ok(()) => Ok(()),
            Err(e) => Err(s.note(e.into(), e)),
        }
    })
}

/// Writes into `*out` the requests issued and not yet completed (popped
/// or not); 0 with the other memory models. While it is non-zero and
/// `simfa_next_event_cycle` reports `SIMFA_NO_EVENT`, only a completion
/// can move the run on: `simfa_step` returns without advancing.
///
/// # Safety
///
/// `h` must be a handle from `simfa_init` (or null); `out` a writable,
/// aligned `size_t`.
#[no_mangle]
pub unsafe extern "C" fn simfa_ext_outstanding(
    h: *mut crate::SimfaSim,
    out: *mut usize,
) -> SimfaStatus {
    guard(|| {
        // SAFETY: the caller's contract above.
        let s = unsafe { handle(h) }?;
        let n = s.sim()?.ext_outstanding();
        // SAFETY: the caller's contract above.
        unsafe { ptr::put(out, n) }
    })
}
