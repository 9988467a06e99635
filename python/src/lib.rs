//! Python bindings of simfa: `simfa.fa3(...)`, `simfa.gemm(...)`,
//! `simfa.run(kernel_bytes, ...)`, `simfa.sweep(plan)`,
//! `simfa.ttgir_run(ttgir, launch)` and `simfa.triton.simulate(kernel,
//! grid, *args)` (a Triton kernel compiled on the CPU and simulated), so
//! studies can live in notebooks.
//!
//! Every call builds its configuration and kernel the way the CLI does
//! (the same presets, TOML keys, generators and kernel encodings) and
//! returns the report `simfa ... --json` prints, as a `dict`; `sweep`
//! returns the rows `simfa sweep` writes, in plan order. Simulation runs
//! with the GIL released. Errors (an unknown preset or key, a kernel that
//! does not decode, a deadlock) raise `simfa.SimfaError` with the message
//! the CLI prints.

// pyo3 0.22's #[pyfunction] expansion converts each PyResult into itself,
// which clippy flags on every exported function.
#![allow(clippy::useless_conversion)]

use std::path::Path;

use pyo3::create_exception;
use pyo3::exceptions::PyException;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyString};
use simfa_core::GpuConfig;
use simfa_std::config::{config_from_table, config_from_toml};
use simfa_std::gen::gemm_space::Space;
use simfa_std::load::decode_kernel;
use simfa_std::sweep::workload::Workload;
use simfa_std::sweep::{report_of, run_plan, Plan};

create_exception!(
    simfa,
    SimfaError,
    PyException,
    "A simfa input was rejected or a simulation failed; the message says which and why."
);

fn fail(msg: impl std::fmt::Display) -> PyErr {
    SimfaError::new_err(msg.to_string())
}

/// A Python value (dicts, lists, numbers, strings, booleans) as JSON.
fn to_json(v: &Bound<'_, PyAny>) -> PyResult<serde_json::Value> {
    let json = v.py().import_bound("json")?;
    let text: String = json.call_method1("dumps", (v,))?.extract()?;
    serde_json::from_str(&text).map_err(fail)
}

/// A JSON value as Python objects.
fn to_py(py: Python<'_>, v: &serde_json::Value) -> PyResult<PyObject> {
    let json = py.import_bound("json")?;
    Ok(json.call_method1("loads", (v.to_string(),))?.unbind())
}

/// A Python dict as a TOML table (`None` values are refused: TOML has no
/// null).
fn to_table(what: &str, d: &Bound<'_, PyDict>) -> PyResult<toml::Table> {
    let v = to_json(d.as_any())?;
    match toml::Value::try_from(v) {
        Ok(toml::Value::Table(t)) => Ok(t),
        Ok(_) => Err(fail(format!("{what}: not a table"))),
        Err(e) => Err(fail(format!("{what}: {e}"))),
    }
}

/// The configuration of a call: preset `gpu`, then `config` on top of it
/// (a dict of TOML keys, nested as in a configuration file, or the text
/// of a configuration file, which names its own preset).
fn config_of(gpu: &str, config: Option<&Bound<'_, PyAny>>) -> PyResult<GpuConfig> {
    match config {
        None => simfa_std::config::preset(gpu).map_err(fail),
        Some(c) if c.is_instance_of::<PyString>() => {
            config_from_toml(&c.extract::<String>()?, "config").map_err(fail)
        }
        Some(c) => {
            let d = c
                .downcast::<PyDict>()
                .map_err(|_| fail("config: expected a dict of configuration keys or TOML text"))?;
            let mut t = to_table("config", d)?;
            t.entry("preset")
                .or_insert_with(|| toml::Value::String(gpu.to_string()));
            config_from_table(t, "config").map_err(fail)
        }
    }
}

/// Simulates workload `kind` with the shape fields `shape` on `cfg`.
fn run_workload(
    py: Python<'_>,
    kind: &str,
    shape: Option<&Bound<'_, PyDict>>,
    cfg: GpuConfig,
) -> PyResult<PyObject> {
    let mut t = match shape {
        Some(d) => to_table(kind, d)?,
        None => toml::Table::new(),
    };
    t.insert("kind".into(), toml::Value::String(kind.into()));
    let w = Workload::from_value(&toml::Value::Table(t), Path::new(".")).map_err(fail)?;
    let report = py.allow_threads(|| {
        let (k, source, flops) = w.kernel(&cfg)?;
        report_of(&cfg, &k, source, flops)
    });
    to_py(py, &report.map_err(fail)?)
}

/// Simulates the generated FA3 forward kernel and returns its report.
///
/// Shape keywords as a sweep plan's `fa3` workload: `batch`, `heads`,
/// `kv_heads`, `seqlen`, `seqlen_kv`, `hdim`, `causal`, `variant`
/// (defaults: Llama 3 8B, 4096 tokens). `gpu` names a preset; `config`
/// adds configuration keys (a dict) or replaces it (TOML text).
#[pyfunction]
#[pyo3(signature = (gpu = "h800", config = None, **shape))]
fn fa3(
    py: Python<'_>,
    gpu: &str,
    config: Option<&Bound<'_, PyAny>>,
    shape: Option<&Bound<'_, PyDict>>,
) -> PyResult<PyObject> {
    run_workload(py, "fa3", shape, config_of(gpu, config)?)
}

/// Simulates the generated GEMM of `m x n x k` and returns its report.
///
/// Further keywords as a sweep plan's `gemm` workload: `kernel` (`"ws"`,
/// the default, or `"paper"`), `block_m`, `block_n`, `block_k`, `stages`,
/// `consumers`, `group_m`, `persistent`, `tma_store`, `wgmma_n`,
/// `cluster_m`, `cluster_n`, `split_k`, `stream_k`. With `tune=True`, the report of
/// the fastest kernel of a family for the shape, as `simfa gemm --tune
/// --json` prints it (with its `tune` array); `space` is the family (a
/// path to a space file or its TOML text) and `jobs` the threads (0: one
/// per core).
#[pyfunction]
#[pyo3(signature = (m, n, k, gpu = "h800", config = None, tune = false, space = None, jobs = 0, **params))]
#[allow(clippy::too_many_arguments)]
fn gemm(
    py: Python<'_>,
    m: u32,
    n: u32,
    k: u32,
    gpu: &str,
    config: Option<&Bound<'_, PyAny>>,
    tune: bool,
    space: Option<&str>,
    jobs: usize,
    params: Option<&Bound<'_, PyDict>>,
) -> PyResult<PyObject> {
    let d = match params {
        Some(p) => p.copy()?,
        None => PyDict::new_bound(py),
    };
    d.set_item("m", m)?;
    d.set_item("n", n)?;
    d.set_item("k", k)?;
    let cfg = config_of(gpu, config)?;
    if !tune {
        if space.is_some() {
            return Err(fail("space: only with tune=True"));
        }
        return run_workload(py, "gemm", Some(&d), cfg);
    }
    let mut t = to_table("gemm", &d)?;
    t.insert("kind".into(), toml::Value::String("gemm".into()));
    let Workload::Gemm(spec) =
        Workload::from_value(&toml::Value::Table(t), Path::new(".")).map_err(fail)?
    else {
        return Err(fail("gemm: not a GEMM"));
    };
    let space = match space {
        None => Space::default(),
        Some(s) if !s.contains('\n') && Path::new(s).is_file() => {
            Space::load(Path::new(s)).map_err(fail)?
        }
        Some(s) => Space::parse(s, "space").map_err(fail)?,
    };
    let report = py.allow_threads(|| {
        simfa_std::gen::gemm_tune::tune(&cfg, &spec, &space, |p| p, jobs, |_, _| {})
            .report_json(&cfg)
    });
    to_py(py, &report.map_err(fail)?)
}

/// Simulates a kernel given as bytes (either encoding `simfa run` reads)
/// and returns its report.
#[pyfunction]
#[pyo3(signature = (kernel, config = None, gpu = "h800"))]
fn run(
    py: Python<'_>,
    kernel: &[u8],
    config: Option<&Bound<'_, PyAny>>,
    gpu: &str,
) -> PyResult<PyObject> {
    let cfg = config_of(gpu, config)?;
    let k = decode_kernel(kernel, "kernel").map_err(fail)?;
    let report = py.allow_threads(|| report_of(&cfg, &k, simfa_core::NoStream, None));
    to_py(py, &report.map_err(fail)?)
}

/// Runs a sweep plan (a path to a plan file, or its TOML text) on `jobs`
/// threads (0: one per core) and returns its rows in plan order: dicts
/// with `index`, `key`, `params`, `status` and `report` or `error`.
#[pyfunction]
#[pyo3(signature = (plan, jobs = 0))]
fn sweep(py: Python<'_>, plan: &str, jobs: usize) -> PyResult<Py<PyList>> {
    let path = Path::new(plan);
    let plan = if !plan.contains('\n') && path.is_file() {
        Plan::load(path)
    } else {
        Plan::parse(plan, "plan", Path::new("."))
    }
    .map_err(fail)?;
    let rows = py.allow_threads(|| run_plan(&plan, jobs));
    let out = PyList::empty_bound(py);
    for r in &rows {
        out.append(to_py(py, &r.value())?)?;
    }
    Ok(out.unbind())
}

/// The names of the built-in GPU presets.
#[pyfunction]
fn presets() -> Vec<&'static str> {
    simfa_core::PRESETS.to_vec()
}

/// Simulates a Triton kernel from its TTGIR text for `launch` (a dict in
/// the form of `simfa ttgir run`'s launch file, or its TOML text) and
/// returns the report `simfa ttgir run --json` prints.
#[pyfunction]
#[pyo3(signature = (ttgir, launch, gpu = "h800", config = None))]
fn ttgir_run(
    py: Python<'_>,
    ttgir: &str,
    launch: &Bound<'_, PyAny>,
    gpu: &str,
    config: Option<&Bound<'_, PyAny>>,
) -> PyResult<PyObject> {
    let cfg = config_of(gpu, config)?;
    let launch = if launch.is_instance_of::<PyString>() {
        launch.extract::<String>()?
    } else {
        let d = launch
            .downcast::<PyDict>()
            .map_err(|_| fail("launch: expected a dict or TOML text"))?;
        toml::to_string(&to_table("launch", d)?).map_err(fail)?
    };
    let report = py.allow_threads(|| {
        simfa_std::ttgir::simulate::simulate_ttgir(&cfg, "kernel.ttgir", ttgir, "launch", &launch)
    });
    to_py(py, &report.map_err(fail)?)
}

/// The `simfa` Python module.
#[pymodule]
#[pyo3(name = "simfa")]
fn simfa_module(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(fa3, m)?)?;
    m.add_function(wrap_pyfunction!(gemm, m)?)?;
    m.add_function(wrap_pyfunction!(run, m)?)?;
    m.add_function(wrap_pyfunction!(sweep, m)?)?;
    m.add_function(wrap_pyfunction!(presets, m)?)?;
    m.add_function(wrap_pyfunction!(ttgir_run, m)?)?;
    // `simfa.triton`: compiling a Triton kernel on the CPU and simulating
    // it (Python, importing Triton only when called).
    let triton = PyModule::from_code_bound(
        m.py(),
        include_str!("triton.py"),
        "simfa/triton.py",
        "simfa.triton",
    )?;
    m.add_submodule(&triton)?;
    m.py()
        .import_bound("sys")?
        .getattr("modules")?
        .set_item("simfa.triton", &triton)?;
    m.add("SimfaError", m.py().get_type_bound::<SimfaError>())?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
