//! Round trips: an FA3 run's event log translates back into the same
//! instruction streams, so the imported kernel simulates to the same cycles
//! and digest.

use simfa_core::GpuConfig;

use super::{import_fa3_log, Fa3LogWriter};
use crate::gen::{fa3, Fa3Params};
use crate::proton::ops_file::OpsFile;
use crate::run::{simulate, simulate_from, Snapshots};

fn gpu() -> GpuConfig {
    let mut c = GpuConfig::h800();
    c.sms = 8;
    c
}

fn round_trip(p: &Fa3Params) {
    let cfg = gpu();
    let (k, _) = fa3(p, &cfg).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("fa3.log");
    let f = std::io::BufWriter::new(std::fs::File::create(&log).unwrap());
    let mut w = Fa3LogWriter::new(f, &k, p).unwrap();
    let want = simulate(&cfg, &k, &mut w).unwrap();
    assert!(w.finish().unwrap() > 0);
    let ops = dir.path().join("fa3.ops");
    let (imported, sum) = import_fa3_log(&log, &cfg, &ops).unwrap();
    assert_eq!(sum.streams, k.ctas() * k.wgs_per_cta() as u64, "{p:?}");
    let src = OpsFile::open(&ops).unwrap();
    let got = simulate_from(
        &cfg,
        &imported,
        src,
        &mut (),
        |_, _, _| {},
        &Snapshots::default(),
    )
    .unwrap();
    assert_eq!(got.summary.cycles, want.summary.cycles, "{p:?}");
    assert_eq!(got.summary.digest, want.summary.digest, "{p:?}");
}

fn shape(seq: u32, heads: u32, kv_heads: u32, hdim: u32, causal: bool) -> Fa3Params {
    Fa3Params {
        heads,
        kv_heads,
        seqlen_q: seq,
        seqlen_kv: seq,
        hdim,
        causal,
        ..Fa3Params::default()
    }
}

#[test]
fn persistent_kernels_round_trip() {
    round_trip(&shape(512, 8, 8, 128, false));
    round_trip(&shape(384, 4, 2, 64, false));
    round_trip(&shape(256, 4, 4, 256, false));
}

#[test]
fn causal_kernels_round_trip() {
    round_trip(&shape(512, 4, 4, 128, true));
    round_trip(&shape(300, 2, 1, 64, true));
}

#[test]
fn bad_logs_name_the_file_and_line() {
    let cfg = gpu();
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("bad.log");
    let ops = dir.path().join("bad.ops");
    let head = "shape batch=1 heads=2 kv_heads=2 seqlen_q=256 seqlen_kv=256 hdim=128 causal=0\n";
    let cases = [
        (
            "0 0 0 0 TMA_K_ISSUE row=0\n",
            Some(1),
            "an event before the shape line",
        ),
        ("shape heads=x\n", Some(1), "heads: `x` is not a number"),
        ("shape colour=3\n", Some(1), "unknown or bad shape field"),
        ("", None, "no `shape` line"),
        ("#\n0 0 0 0 FROB\n", Some(2), "unknown event `FROB`"),
        ("0 0 0\n", Some(1), "missing warp"),
        (
            "0 0 0 4 TMA_K_ISSUE row=0\n",
            Some(1),
            "TMA_K_ISSUE from a consumer",
        ),
        (
            "0 0 0 0 WAIT_WG_1\n",
            Some(1),
            "WAIT_WG_1 from the producer",
        ),
        (
            "0 0 0 0 GEMM_QK_ISSUE row=3\n",
            Some(1),
            "takes no field `row`",
        ),
        (
            "0 0 999 0 TMA_K_ISSUE row=0\n",
            Some(1),
            "outside the kernel",
        ),
    ];
    for (body, at, want) in cases {
        // The shape line comes first unless the case is about it.
        let headless = want.contains("shape") || body.starts_with("shape");
        let text = if headless {
            body.to_string()
        } else {
            format!("{head}{body}")
        };
        std::fs::write(&log, text).unwrap();
        let e = import_fa3_log(&log, &cfg, &ops)
            .expect_err(want)
            .to_string();
        assert!(e.contains(want), "{want}: {e}");
        let place = match at {
            Some(n) => format!("bad.log:{}: ", n + u64::from(!headless)),
            None => "bad.log: kernel header: ".into(),
        };
        assert!(e.contains(&place), "{want}: `{place}` not in {e}");
    }
}
