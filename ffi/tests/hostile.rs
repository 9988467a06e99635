//! A hostile (or careless) host: null pointers, buffers too small, garbage
//! kernels, configurations, handles and snapshots, misaligned memory.
//! Every call must answer with its typed code, never crash.

use std::ptr::{null, null_mut};

use simfa_core::builder::Builder;
use simfa_core::{encode, Expr, GpuConfig, Instr, Kernel};
use simfa_ffi::*;

/// An aligned buffer of `n` bytes (plus slack for misalignment tests).
struct Mem(Vec<u128>);

impl Mem {
    fn new(n: usize) -> Self {
        Mem(vec![0; n.div_ceil(16) + 1])
    }
    fn ptr(&mut self) -> *mut u8 {
        self.0.as_mut_ptr().cast()
    }
    fn len(&self) -> usize {
        self.0.len() * 16
    }
}

fn sample_config(i: u32) -> SimfaConfig {
    let mut c = std::mem::MaybeUninit::uninit();
    assert_eq!(
        unsafe { simfa_config_sample(i, c.as_mut_ptr()) },
        SimfaStatus::Ok
    );
    unsafe { c.assume_init() }
}

fn sample_kernel(i: u32) -> Vec<u8> {
    let mut n = 0;
    let st = unsafe { simfa_sample_kernel(i, null_mut(), 0, &mut n) };
    assert_eq!(st, SimfaStatus::BufferTooSmall);
    let mut b = vec![0u8; n];
    assert_eq!(
        unsafe { simfa_sample_kernel(i, b.as_mut_ptr(), n, &mut n) },
        SimfaStatus::Ok
    );
    assert_eq!(n, b.len());
    b
}

/// A handle for (cfg, kernel) in fresh memory.
fn init(cfg: &SimfaConfig, k: &[u8]) -> (Mem, *mut SimfaSim) {
    let mut need = 0;
    assert_eq!(
        unsafe { simfa_arena_size(cfg, k.as_ptr(), k.len(), &mut need) },
        SimfaStatus::Ok
    );
    let mut m = Mem::new(need);
    let mut h = null_mut();
    assert_eq!(
        unsafe { simfa_init(m.ptr(), need, cfg, k.as_ptr(), k.len(), &mut h) },
        SimfaStatus::Ok
    );
    (m, h)
}

fn run(h: *mut SimfaSim) -> SimfaStatus {
    let mut state = SimfaRunState::Running;
    loop {
        let st = unsafe { simfa_step(h, &mut state) };
        if st != SimfaStatus::Ok || state != SimfaRunState::Running {
            return st;
        }
    }
}

fn summary(h: *mut SimfaSim) -> SimfaSummary {
    let mut s = SimfaSummary::default();
    assert_eq!(unsafe { simfa_summary(h, &mut s) }, SimfaStatus::Ok);
    s
}

fn message(h: *mut SimfaSim) -> String {
    let mut buf = [0u8; 256];
    let mut need = 0;
    assert_eq!(
        unsafe { simfa_last_error_message(h, buf.as_mut_ptr(), buf.len(), &mut need) },
        SimfaStatus::Ok
    );
    String::from_utf8(buf[..need - 1].to_vec()).unwrap()
}

#[test]
fn null_pointers_are_typed_errors() {
    use SimfaStatus::NullPointer as N;
    let cfg = sample_config(0);
    let k = sample_kernel(0);
    let mut n = 0usize;
    let mut h = null_mut();
    unsafe {
        assert_eq!(simfa_config_preset(null(), 4, &mut *Box::new(cfg)), N);
        assert_eq!(simfa_config_preset(b"h800".as_ptr(), 4, null_mut()), N);
        assert_eq!(simfa_config_sample(0, null_mut()), N);
        assert_eq!(simfa_config_from_postcard(null(), 3, null_mut()), N);
        assert_eq!(simfa_config_set_memory(null_mut(), 2), N);
        assert_eq!(simfa_sample_kernel(0, null_mut(), 10, &mut n), N);
        assert_eq!(simfa_sample_kernel(0, null_mut(), 0, null_mut()), N);
        assert_eq!(simfa_arena_size(null(), k.as_ptr(), k.len(), &mut n), N);
        assert_eq!(simfa_arena_size(&cfg, null(), k.len(), &mut n), N);
        assert_eq!(simfa_arena_size(&cfg, k.as_ptr(), k.len(), null_mut()), N);
        assert_eq!(
            simfa_init(null_mut(), 1 << 20, &cfg, k.as_ptr(), k.len(), &mut h),
            N
        );
        let mut m = Mem::new(1 << 20);
        assert_eq!(
            simfa_init(m.ptr(), m.len(), null(), k.as_ptr(), k.len(), &mut h),
            N
        );
        assert_eq!(
            simfa_init(m.ptr(), m.len(), &cfg, null(), k.len(), &mut h),
            N
        );
        assert_eq!(
            simfa_init(m.ptr(), m.len(), &cfg, k.as_ptr(), k.len(), null_mut()),
            N
        );
        let mut state = SimfaRunState::Running;
        let mut c = 0u64;
        assert_eq!(simfa_step(null_mut(), &mut state), N);
        assert_eq!(simfa_run_until(null_mut(), 10, &mut state), N);
        assert_eq!(simfa_next_event_cycle(null_mut(), &mut c), N);
        assert_eq!(simfa_status(null_mut(), &mut state), N);
        assert_eq!(simfa_summary(null_mut(), &mut SimfaSummary::default()), N);
        assert_eq!(simfa_snapshot_size(null_mut(), &mut n), N);
        assert_eq!(simfa_save(null_mut(), null_mut(), 0, &mut n), N);
        assert_eq!(simfa_restore(null_mut(), null(), 0), N);
        assert_eq!(
            simfa_last_error_message(null_mut(), null_mut(), 0, &mut n),
            N
        );

        // And with a real handle, each output pointer.
        let (_m, h) = init(&cfg, &k);
        assert_eq!(simfa_next_event_cycle(h, null_mut()), N);
        assert_eq!(simfa_status(h, null_mut()), N);
        assert_eq!(simfa_summary(h, null_mut()), N);
        assert_eq!(simfa_snapshot_size(h, null_mut()), N);
        assert_eq!(simfa_save(h, null_mut(), 0, null_mut()), N);
        assert_eq!(simfa_save(h, null_mut(), 64, &mut n), N);
        assert_eq!(simfa_restore(h, null(), 64), N);
        // Optional outputs may be null.
        assert_eq!(simfa_step(h, null_mut()), SimfaStatus::Ok);
        assert_eq!(simfa_run_until(h, 100, null_mut()), SimfaStatus::Ok);
    }
}

#[test]
fn misaligned_memory_and_outputs() {
    let cfg = sample_config(0);
    let k = sample_kernel(0);
    let mut need = 0;
    unsafe { simfa_arena_size(&cfg, k.as_ptr(), k.len(), &mut need) };
    let mut m = Mem::new(need + 64);
    let mut h = null_mut();
    for off in [1, 4, 8] {
        let st = unsafe { simfa_init(m.ptr().add(off), need, &cfg, k.as_ptr(), k.len(), &mut h) };
        assert_eq!(st, SimfaStatus::BadAlignment, "offset {off}");
    }
    let mut words = [0u64; 3];
    let odd = unsafe { words.as_mut_ptr().cast::<u8>().add(1) }.cast::<usize>();
    let st = unsafe { simfa_arena_size(&cfg, k.as_ptr(), k.len(), odd) };
    assert_eq!(st, SimfaStatus::BadAlignment);
    let (_m, h) = init(&cfg, &k);
    assert_eq!(
        unsafe { simfa_snapshot_size(h, odd) },
        SimfaStatus::BadAlignment
    );
    // A misaligned handle.
    let bad = unsafe { h.cast::<u8>().add(1) }.cast::<SimfaSim>();
    assert_eq!(
        unsafe { simfa_step(bad, null_mut()) },
        SimfaStatus::BadAlignment
    );
}

#[test]
fn buffers_too_small() {
    let cfg = sample_config(3);
    let k = sample_kernel(3);
    let mut need = 0;
    unsafe { simfa_arena_size(&cfg, k.as_ptr(), k.len(), &mut need) };
    let mut m = Mem::new(need);
    let mut h = null_mut();
    for short in [0, 1, 1000, need / 2, need - 1] {
        let st = unsafe { simfa_init(m.ptr(), short, &cfg, k.as_ptr(), k.len(), &mut h) };
        assert_eq!(st, SimfaStatus::BufferTooSmall, "{short} bytes");
    }
    let mut kb = vec![0u8; k.len() - 1];
    let mut n = 0;
    let st = unsafe { simfa_sample_kernel(3, kb.as_mut_ptr(), kb.len(), &mut n) };
    assert_eq!((st, n), (SimfaStatus::BufferTooSmall, k.len()));

    let (_m, h) = init(&cfg, &k);
    let mut cap = 0;
    unsafe { simfa_snapshot_size(h, &mut cap) };
    let mut snap = vec![0u8; cap];
    for short in [0, 10, 36, cap / 2] {
        let st = unsafe { simfa_save(h, snap.as_mut_ptr(), short, &mut n) };
        assert_eq!((st, n), (SimfaStatus::BufferTooSmall, cap), "{short} bytes");
    }
    let mut tiny = [0xaau8; 4];
    let st = unsafe { simfa_last_error_message(h, tiny.as_mut_ptr(), tiny.len(), &mut n) };
    assert_eq!(st, SimfaStatus::BufferTooSmall);
    assert_eq!(tiny[3], 0, "cut and still terminated");
    assert!(n > 4);
    let st = unsafe { simfa_last_error_message(h, null_mut(), 0, &mut n) };
    assert_eq!(st, SimfaStatus::BufferTooSmall);
}

#[test]
fn bad_kernels_configs_and_arguments() {
    let cfg = sample_config(0);
    let k = sample_kernel(0);
    let mut n = 0;
    let kernels: [&[u8]; 5] = [
        b"",
        b"SIMFAKRN",
        b"not a kernel at all",
        &k[..k.len() / 2],
        &[k.as_slice(), b"x"].concat(),
    ];
    for bad in kernels {
        let st = unsafe { simfa_arena_size(&cfg, bad.as_ptr(), bad.len(), &mut n) };
        assert_eq!(
            st,
            SimfaStatus::BadKernel,
            "{:?}",
            &bad[..bad.len().min(12)]
        );
        let mut m = Mem::new(1 << 16);
        let mut h = null_mut();
        let st = unsafe { simfa_init(m.ptr(), m.len(), &cfg, bad.as_ptr(), bad.len(), &mut h) };
        assert_eq!(st, SimfaStatus::BadKernel);
    }
    // Every single-byte corruption of the body: typed, never a crash.
    for i in encode::HEADER_LEN..k.len() {
        let mut bad = k.clone();
        bad[i] ^= 0x5a;
        let st = unsafe { simfa_arena_size(&cfg, bad.as_ptr(), bad.len(), &mut n) };
        assert!(
            matches!(st, SimfaStatus::Ok | SimfaStatus::BadKernel),
            "byte {i}: {st:?}"
        );
    }
    // A configuration never filled, or overwritten with garbage.
    let zeroed: SimfaConfig = unsafe { std::mem::zeroed() };
    let st = unsafe { simfa_arena_size(&zeroed, k.as_ptr(), k.len(), &mut n) };
    assert_eq!(st, SimfaStatus::BadConfig);
    let mut junk = cfg;
    unsafe {
        std::ptr::write_bytes(
            (&mut junk as *mut SimfaConfig).cast::<u8>().add(8),
            0xff,
            64,
        )
    };
    let st = unsafe { simfa_arena_size(&junk, k.as_ptr(), k.len(), &mut n) };
    assert_eq!(st, SimfaStatus::BadConfig);
    let mut c = cfg;
    unsafe {
        assert_eq!(
            simfa_config_preset(b"h999".as_ptr(), 4, &mut c),
            SimfaStatus::BadArgument
        );
        assert_eq!(
            simfa_config_preset(b"\xff\xfe".as_ptr(), 2, &mut c),
            SimfaStatus::BadArgument
        );
        assert_eq!(
            simfa_config_preset(b"h800".as_ptr(), 4, &mut c),
            SimfaStatus::Ok
        );
        assert_eq!(simfa_config_sample(6, &mut c), SimfaStatus::BadArgument);
        assert_eq!(
            simfa_config_set_memory(&mut c, 99),
            SimfaStatus::BadArgument
        );
        assert_eq!(
            simfa_config_set_memory(&mut c, SimfaMemory::Fixed as u32),
            SimfaStatus::Ok
        );
        assert_eq!(
            simfa_config_from_postcard(b"\x01\x02".as_ptr(), 2, &mut c),
            SimfaStatus::BadConfig
        );
        assert_eq!(
            simfa_sample_kernel(6, null_mut(), 0, &mut n),
            SimfaStatus::BadArgument
        );
    }
    // A handle simfa_init never made.
    let mut fake = Mem::new(1 << 16);
    let h = fake.ptr().cast::<SimfaSim>();
    assert_eq!(
        unsafe { simfa_step(h, null_mut()) },
        SimfaStatus::BadArgument
    );
    let name = unsafe { std::ffi::CStr::from_ptr(simfa_status_name(12345)) };
    assert_eq!(name.to_str().unwrap(), "unknown status");
    let name = unsafe { std::ffi::CStr::from_ptr(simfa_status_name(SimfaStatus::Deadlock as i32)) };
    assert_eq!(name.to_str().unwrap(), "deadlock");
}

#[test]
fn config_from_postcard_round_trips_and_watchdog_is_typed() {
    let mut k = Kernel::default();
    let mut cfg = simfa_core::samples::build(0, &mut k).unwrap();
    cfg.watchdog_cycles = 50;
    let mut buf = [0u8; 2048];
    let bytes = postcard::to_slice(&cfg, &mut buf).unwrap();
    let mut c = sample_config(0);
    let st = unsafe { simfa_config_from_postcard(bytes.as_ptr(), bytes.len(), &mut c) };
    assert_eq!(st, SimfaStatus::Ok);
    let (_m, h) = init(&c, &sample_kernel(0));
    assert_eq!(run(h), SimfaStatus::Watchdog);
    // Sticky: every later step says the same.
    assert_eq!(unsafe { simfa_step(h, null_mut()) }, SimfaStatus::Watchdog);
    let mut state = SimfaRunState::Running;
    unsafe { simfa_status(h, &mut state) };
    assert_eq!(state, SimfaRunState::Failed);
    assert!(message(h).contains("watchdog"), "{}", message(h));
    let mut next = 0;
    unsafe { simfa_next_event_cycle(h, &mut next) };
    assert_eq!(next, SIMFA_NO_EVENT);
    let _ = GpuConfig::h800();
}

fn deadlocking_kernel() -> Vec<u8> {
    let mut b = Builder::new(Kernel::default(), "deadlock").unwrap();
    b.grid([2, 1, 1]);
    let full = b.mbarriers("full", 1, 1).unwrap();
    let zero = b.konst(0).unwrap();
    b.begin_role("consumer", 1, 240).unwrap();
    let bar = b.at(full, Expr::constant(0)).unwrap();
    b.op(Instr::MbarWait { bar, parity: zero }).unwrap();
    b.op(Instr::Exit).unwrap();
    b.end_role().unwrap();
    let k = b.finish().unwrap();
    let mut buf = vec![0u8; 1 << 17];
    let n = encode::encode(&k, &mut buf).unwrap().len();
    buf.truncate(n);
    buf
}

#[test]
fn deadlock_is_typed_and_explained() {
    let mut c = sample_config(0);
    unsafe { simfa_config_preset(b"h800".as_ptr(), 4, &mut c) };
    let (_m, h) = init(&c, &deadlocking_kernel());
    assert_eq!(run(h), SimfaStatus::Deadlock);
    assert!(message(h).contains("deadlock"), "{}", message(h));
}

#[test]
fn restore_of_garbage_or_another_pair_is_typed_and_leaves_a_fresh_run() {
    let cfg = sample_config(0);
    let k = sample_kernel(0);
    let (_m, h) = init(&cfg, &k);
    run(h);
    let want = summary(h);
    let (_m2, other) = init(&sample_config(3), &sample_kernel(3));
    let mut cap = 0;
    unsafe { simfa_snapshot_size(other, &mut cap) };
    let mut snap = vec![0u8; cap];
    let mut n = 0;
    assert_eq!(
        unsafe { simfa_save(other, snap.as_mut_ptr(), cap, &mut n) },
        SimfaStatus::Ok
    );
    let st = unsafe { simfa_restore(h, snap.as_ptr(), n) };
    assert_eq!(st, SimfaStatus::SnapshotMismatch);
    assert_eq!(summary(h).now, 0, "a fresh simulator");
    for garbage in [&b"SIMFASNP garbage"[..], &[0u8; 100][..], &snap[..20]] {
        let st = unsafe { simfa_restore(h, garbage.as_ptr(), garbage.len()) };
        assert_eq!(st, SimfaStatus::BadSnapshot);
    }
    // A snapshot of this pair with a flipped byte.
    unsafe { simfa_snapshot_size(h, &mut cap) };
    let mut own = vec![0u8; cap];
    unsafe { simfa_run_until(h, 500, null_mut()) };
    unsafe { simfa_save(h, own.as_mut_ptr(), cap, &mut n) };
    own[n - 1] ^= 1;
    assert_eq!(
        unsafe { simfa_restore(h, own.as_ptr(), n) },
        SimfaStatus::BadSnapshot
    );
    assert!(!message(h).is_empty());
    // The fresh simulator left behind runs to the same end as before.
    assert_eq!(run(h), SimfaStatus::Ok);
    let got = summary(h);
    assert_eq!((got.cycles, got.digest), (want.cycles, want.digest));
}

#[test]
fn hostile_external_port_calls_are_typed() {
    let k = sample_kernel(0);
    let cfg = sample_config(0);
    let (_m, fixed) = init(&cfg, &k);
    let mut r = SimfaExtRequest::default();
    let mut got = false;
    unsafe {
        assert_eq!(
            simfa_ext_pop_request(fixed, &mut r, &mut got),
            SimfaStatus::NotExternal
        );
        assert_eq!(simfa_ext_complete(fixed, 0, 10), SimfaStatus::NotExternal);
        assert_eq!(
            simfa_ext_pop_request(fixed, null_mut(), &mut got),
            SimfaStatus::NullPointer
        );
        assert_eq!(
            simfa_ext_pop_request(fixed, &mut r, null_mut()),
            SimfaStatus::NullPointer
        );
        assert_eq!(
            simfa_ext_complete(null_mut(), 0, 10),
            SimfaStatus::NullPointer
        );
        assert_eq!(
            simfa_ext_outstanding(null_mut(), &mut 0),
            SimfaStatus::NullPointer
        );
    }
    let mut ext = cfg;
    assert_eq!(
        unsafe { simfa_config_set_memory(&mut ext, SimfaMemory::External as u32) },
        SimfaStatus::Ok
    );
    let (_m2, h) = init(&ext, &k);
    unsafe {
        assert_eq!(simfa_ext_complete(h, 0, 10), SimfaStatus::UnknownRequest);
        let mut state = SimfaRunState::Running;
        while !got {
            assert_eq!(simfa_step(h, &mut state), SimfaStatus::Ok);
            assert_eq!(simfa_ext_pop_request(h, &mut r, &mut got), SimfaStatus::Ok);
        }
        let mut s = SimfaSummary::default();
        simfa_summary(h, &mut s);
        let earliest = s.now.max(r.cycle);
        assert_eq!(
            simfa_ext_complete(h, r.id, earliest - 1),
            SimfaStatus::CompletionInPast
        );
        assert!(message(h).contains("past"), "{}", message(h));
        assert_eq!(
            simfa_ext_complete(h, r.id + 77, earliest),
            SimfaStatus::UnknownRequest
        );
        assert_eq!(simfa_ext_complete(h, r.id, earliest + 5), SimfaStatus::Ok);
        assert_eq!(
            simfa_ext_complete(h, r.id, earliest + 5),
            SimfaStatus::UnknownRequest
        );
        let mut n = 0;
        assert_eq!(simfa_ext_outstanding(h, &mut n), SimfaStatus::Ok);
    }
}
