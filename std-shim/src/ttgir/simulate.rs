//! A TTGIR kernel simulated in one call, for the bindings: parse, launch,
//! lower, run, and the report `simfa ttgir run --json` prints.

use simfa_core::GpuConfig;

use super::launch::Launch;
use super::lower::Program;
use super::source::TtgirSource;
use super::tree::parse;

/// Simulates the kernel of TTGIR `text` (named `file` in errors) for the
/// launch file text `launch` (named `launch_file`) on `cfg`; returns the
/// report as JSON, or the message of what went wrong (a rejected input
/// names its file, line and CTA, as the CLI's do).
pub fn simulate_ttgir(
    cfg: &GpuConfig,
    file: &str,
    text: &str,
    launch_file: &str,
    launch: &str,
) -> Result<serde_json::Value, String> {
    let l = Launch::parse(launch_file, launch).map_err(|e| e.to_string())?;
    let module = parse(file, text).map_err(|e| e.to_string())?;
    let program = Program::new(&module, &l, launch_file).map_err(|e| e.to_string())?;
    let mut src = TtgirSource::new(&program);
    let out = crate::run::simulate_from(
        cfg,
        &program.kernel,
        &mut src,
        &mut (),
        |_, _, _| {},
        &Default::default(),
    );
    match (out, src.error()) {
        (Ok(o), _) => {
            let r = crate::reporting::report::Report::new(cfg, &program.kernel, &o);
            let flops = program.dot_flops(r.wgmma_flops);
            Ok(r.with_workload_flops(flops).to_json())
        }
        (Err(_), Some(why)) => Err(why.to_string()),
        (Err(e), None) => Err(format!("{file}: {e}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::ttgir::compiled_fixture as fixture;

    #[test]
    fn one_call_reports_or_names_the_failure() {
        let cfg = GpuConfig::h100();
        let (k, l) = (fixture("tma_gemm.ttgir"), fixture("tma_gemm.launch.toml"));
        let r = simulate_ttgir(&cfg, "g.ttgir", &k, "g.toml", &l).unwrap();
        assert_eq!(r["ctas"], 64);
        let bad = l.replace("grid = [8, 8, 1]", "grid = [8, 8]");
        let e = simulate_ttgir(&cfg, "g.ttgir", &k, "g.toml", &bad).unwrap_err();
        assert!(e.starts_with("g.toml: "), "{e}");
        let e = simulate_ttgir(&cfg, "g.ttgir", "tt.func @f() {\n", "g.toml", &l).unwrap_err();
        assert!(e.starts_with("g.ttgir:1:1: "), "{e}");
    }
}
