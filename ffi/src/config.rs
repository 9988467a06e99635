//! The opaque configuration value and the calls that fill it.
//!
//! A [`SimfaConfig`] holds the postcard encoding of a
//! [`GpuConfig`] (the same encoding the snapshot fingerprint digests),
//! not the Rust struct: every use decodes and validates it, so a
//! `SimfaConfig` the caller never filled, or damaged, is a
//! [`SimfaStatus::BadConfig`], never undefined behaviour. The test-only
//! [`GpuConfig::fault`] field is not serialised and is always
//! `Fault::None` here.

use simfa_core::config::MemoryModel;
use simfa_core::{samples, GpuConfig, Kernel};

use crate::{guard, ptr, SimfaStatus};

/// Bytes of postcard a [`SimfaConfig`] can hold (every preset needs far
/// fewer).
pub const SIMFA_CONFIG_CAPACITY: usize = 1016;

/// A GPU configuration, as an opaque value of fixed size the caller may
/// keep anywhere (stack, static, struct field) and copy freely. Fill it
/// with `simfa_config_preset`, `simfa_config_sample` or
/// `simfa_config_from_postcard`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct SimfaConfig {
    /// Private: bytes used of `bytes`.
    len: u32,
    /// Private: a tag the `simfa_config_*` calls set.
    tag: u32,
    /// Private: the postcard encoding of the configuration.
    bytes: [u8; SIMFA_CONFIG_CAPACITY],
}

const TAG: u32 = u32::from_le_bytes(*b"SFAC");

/// The memory model behind the TMA engines (the core's `MemoryModel`).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SimfaMemory {
    /// The transaction-level L2/HBM hierarchy (the presets' model).
    Transaction = 0,
    /// The line-level L2/HBM hierarchy (the reference).
    Line = 1,
    /// The fixed-latency, fixed-bandwidth port.
    Fixed = 2,
    /// The host's memory: requests through `simfa_ext_pop_request`, answers
    /// through `simfa_ext_complete` (one request per TMA operation).
    External = 3,
}

impl SimfaConfig {
    /// Encodes `cfg`.
    pub(crate) fn encode(cfg: &GpuConfig) -> Result<SimfaConfig, SimfaStatus> {
        let mut c = SimfaConfig {
            len: 0,
            tag: TAG,
            bytes: [0; SIMFA_CONFIG_CAPACITY],
        };
        let n = postcard::to_slice(cfg, &mut c.bytes)
            .map_err(|_| SimfaStatus::BadConfig)?
            .len();
        c.len = n as u32;
        Ok(c)
    }

    /// Decodes and validates the configuration.
    pub(crate) fn decode(&self) -> Result<GpuConfig, SimfaStatus> {
        decode(self.tag, self.len, &self.bytes)
    }
}

fn decode(tag: u32, len: u32, bytes: &[u8]) -> Result<GpuConfig, SimfaStatus> {
    if tag != TAG {
        return Err(SimfaStatus::BadConfig);
    }
    let body = bytes.get(..len as usize).ok_or(SimfaStatus::BadConfig)?;
    from_postcard(body)
}

/// Decodes postcard bytes of a `GpuConfig` serialised by `postcard`
/// (which leaves out the skipped `fault` field) and validates it.
pub(crate) fn from_postcard(body: &[u8]) -> Result<GpuConfig, SimfaStatus> {
    // `fault` is skipped when serialising but read when deserialising (as
    // its default when a self-describing format omits it); postcard is not
    // self-describing, so supply its encoding: variant 0, `Fault::None`.
    let mut padded = [0u8; SIMFA_CONFIG_CAPACITY + 1];
    let dst = padded
        .get_mut(..body.len() + 1)
        .ok_or(SimfaStatus::BadConfig)?;
    dst[..body.len()].copy_from_slice(body);
    let (cfg, rest): (GpuConfig, &[u8]) =
        postcard::take_from_bytes(dst).map_err(|_| SimfaStatus::BadConfig)?;
    if !rest.is_empty() {
        return Err(SimfaStatus::BadConfig);
    }
    cfg.validate().map_err(|_| SimfaStatus::BadConfig)?;
    Ok(cfg)
}

/// Fills `out` with the preset called `name` (`name_len` bytes of UTF-8,
/// no terminator needed): `"h800"`, `"h100"`, `"h20"`, `"h200"` or
/// `"h800-pcie"`. An unknown name is `BadArgument`.
///
/// # Safety
///
/// `name` must point at `name_len` readable bytes; `out` at a writable
/// `SimfaConfig`.
#[no_mangle]
pub unsafe extern "C" fn simfa_config_preset(
    name: *const u8,
    name_len: usize,
    out: *mut SimfaConfig,
) -> SimfaStatus {
    guard(|| {
        // SAFETY: the caller's contract above.
        let name = unsafe { ptr::bytes(name, name_len) }?;
        let name = core::str::from_utf8(name).map_err(|_| SimfaStatus::BadArgument)?;
        let cfg = GpuConfig::preset(name).ok_or(SimfaStatus::BadArgument)?;
        // SAFETY: the caller's contract above.
        unsafe { ptr::put(out, SimfaConfig::encode(&cfg)?) }
    })
}

/// Fills `out` with the configuration of sample `index` (`0 ..
/// simfa_sample_count()`), the partner of `simfa_sample_kernel`.
///
/// # Safety
///
/// `out` must point at a writable `SimfaConfig`.
#[no_mangle]
pub unsafe extern "C" fn simfa_config_sample(index: u32, out: *mut SimfaConfig) -> SimfaStatus {
    guard(|| {
        // SAFETY: the caller's contract above. Checked before the sample is
        // built, so a null pointer costs nothing.
        let out = unsafe { ptr::out(out) }?;
        let cfg = sample_config(index as usize)?;
        out.write(SimfaConfig::encode(&cfg)?);
        Ok(())
    })
}

/// The configuration of sample `i`, without keeping its kernel.
fn sample_config(i: usize) -> Result<GpuConfig, SimfaStatus> {
    let mut k = Kernel::default();
    samples::build(i, &mut k).ok_or(SimfaStatus::BadArgument)
}

/// Fills `out` from `len` bytes of a postcard-serialised `GpuConfig` (what
/// `postcard::to_slice(&cfg, ..)` writes in Rust). Malformed bytes or an
/// invalid configuration are `BadConfig`; more than
/// `SIMFA_CONFIG_CAPACITY` bytes are `BufferTooSmall`.
///
/// # Safety
///
/// `bytes` must point at `len` readable bytes; `out` at a writable
/// `SimfaConfig`.
#[no_mangle]
pub unsafe extern "C" fn simfa_config_from_postcard(
    bytes: *const u8,
    len: usize,
    out: *mut SimfaConfig,
) -> SimfaStatus {
    guard(|| {
        // SAFETY: the caller's contract above.
        let b = unsafe { ptr::bytes(bytes, len) }?;
        if b.len() > SIMFA_CONFIG_CAPACITY {
            return Err(SimfaStatus::BufferTooSmall);
        }
        let cfg = from_postcard(b)?;
        // SAFETY: the caller's contract above.
        unsafe { ptr::put(out, SimfaConfig::encode(&cfg)?) }
    })
}

/// Switches `cfg` to memory model `memory` (an integer, so an out-of-range
/// value is `BadArgument` rather than undefined behaviour); the rest of
/// the configuration is kept.
///
/// # Safety
///
/// `cfg` must point at a `SimfaConfig` (filled or not) that is readable
/// and writable.
#[no_mangle]
pub unsafe extern "C" fn simfa_config_set_memory(
    cfg: *mut SimfaConfig,
    memory: u32,
) -> SimfaStatus {
    guard(|| {
        let model = match memory {
            0 => MemoryModel::Transaction,
            1 => MemoryModel::Line,
            2 => MemoryModel::Fixed,
            3 => MemoryModel::External,
            _ => return Err(SimfaStatus::BadArgument),
        };
        // SAFETY: the caller's contract above: a readable `SimfaConfig`
        // whose every bit pattern is a valid value (integers and bytes).
        let mut c = unsafe { ptr::input(cfg.cast_const()) }?.decode()?;
        c.memory = model;
        c.validate().map_err(|_| SimfaStatus::BadConfig)?;
        // SAFETY: the caller's contract above.
        unsafe { ptr::put(cfg, SimfaConfig::encode(&c)?) }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_preset_fits_and_round_trips() {
        for p in simfa_core::PRESETS {
            let cfg = GpuConfig::preset(p).unwrap();
            let c = SimfaConfig::encode(&cfg).unwrap();
            assert!(
                (c.len as usize) < SIMFA_CONFIG_CAPACITY / 2,
                "{p}: {}",
                c.len
            );
            assert_eq!(c.decode().unwrap(), cfg);
        }
    }

    #[test]
    fn garbage_is_bad_config() {
        let mut c = SimfaConfig::encode(&GpuConfig::h800()).unwrap();
        c.len = u32::MAX;
        assert_eq!(c.decode().unwrap_err(), SimfaStatus::BadConfig);
        let z = SimfaConfig {
            len: 10,
            tag: TAG,
            bytes: [0xff; SIMFA_CONFIG_CAPACITY],
        };
        assert_eq!(z.decode().unwrap_err(), SimfaStatus::BadConfig);
    }
}
