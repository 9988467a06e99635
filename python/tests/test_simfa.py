"""pytest suite of the simfa Python bindings (run by scripts/python/test.sh)."""

import json
import os
import pathlib
import subprocess
import tempfile

import pytest

import simfa

ROOT = pathlib.Path(__file__).resolve().parents[2]


def cli_binary():
    """The CLI the reports are checked against: $SIMFA_BIN, else
    target/debug/simfa. Without it the test skips, unless
    $SIMFA_REQUIRE_CLI is set (scripts/python/test.sh sets both), when a
    missing binary is a failure rather than a silent skip."""
    path = pathlib.Path(os.environ.get("SIMFA_BIN", ROOT / "target" / "debug" / "simfa"))
    if not path.exists():
        if os.environ.get("SIMFA_REQUIRE_CLI"):
            pytest.fail(f"no CLI binary at {path}")
        pytest.skip("no CLI binary built")
    return path


def small_fa3(**kw):
    shape = dict(batch=1, heads=2, kv_heads=2, seqlen=256, hdim=64)
    shape.update(kw)
    return simfa.fa3(**shape)


def test_presets_and_version():
    assert "h800" in simfa.presets() and "h100" in simfa.presets()
    assert simfa.__version__


def test_gemm_report_is_a_dict_with_the_cli_fields():
    r = simfa.gemm(256, 256, 256)
    assert isinstance(r, dict)
    assert r["gpu"] == "h800" and r["memory_model"] == "transaction"
    assert r["cycles"] > 0 and r["flops"] == 2 * 256 * 256 * 256
    # A GEMM counts its product, not the WGMMAs of clipped tile rows.
    edge = simfa.gemm(16, 512, 512, gpu="h100")
    assert edge["flops"] == 2 * 16 * 512 * 512
    assert edge["flops_source"] == "workload"
    assert edge["wgmma_flops"] == 8 * edge["flops"]
    assert "analytic" in r


def test_gemm_tune_returns_the_best_report_and_every_candidate():
    space = 'tiles = ["128x256", "64x64"]\ncluster = ["1x1"]\nsplit_k = [1, 4]\n'
    r = simfa.gemm(128, 1024, 2048, gpu="h100", tune=True, space=space, jobs=2)
    cands = r["tune"]
    # 2 tiles x persistent or not x 2 splits, and each tile persistent
    # with stream-K (4 and 32 tiles leave most of the 132 SMs idle).
    assert len(cands) == 10
    assert sum(c["config"]["stream_k"] for c in cands) == 2
    done = [c for c in cands if "cycles" in c]
    assert r["cycles"] == min(c["cycles"] for c in done)
    assert all(("cycles" in c) != ("cut" in c) for c in cands)
    # The CLI picks the same kernel with the same space.
    simfa_bin = cli_binary()
    with tempfile.TemporaryDirectory() as d:
        path = pathlib.Path(d) / "space.toml"
        path.write_text(space)
        out = subprocess.run(
            [str(simfa_bin), "gemm", "--gpu", "h100", "--m", "128", "--n", "1024",
             "--k", "2048", "--tune", "--space", str(path), "-j", "1", "--json"],
            check=True, capture_output=True, text=True).stdout
    cli = json.loads(out)
    assert cli["digest"] == r["digest"] and cli["tune"] == cands
    with pytest.raises(simfa.SimfaError, match="space:1: tiles"):
        simfa.gemm(128, 128, 128, tune=True, space='tiles = ["3x3"]\n')
    with pytest.raises(simfa.SimfaError, match="tune=True"):
        simfa.gemm(128, 128, 128, space='tiles = ["64x64"]\n')


def test_gemm_stream_k_matches_the_cli():
    r = simfa.gemm(128, 1024, 4096, gpu="h100", stream_k=True)
    # 4 tiles x 64 iterations, at least 8 per stream-K unit.
    assert r["ctas"] == 32
    out = subprocess.run(
        [str(cli_binary()), "gemm", "--gpu", "h100", "--m", "128", "--n", "1024",
         "--k", "4096", "--stream-k", "--json"],
        check=True, capture_output=True, text=True).stdout
    assert json.loads(out)["digest"] == r["digest"]
    with pytest.raises(simfa.SimfaError, match="stream_k"):
        simfa.gemm(128, 1024, 4096, gpu="h100", stream_k=True, persistent=False)


def test_gemm_kernel_family_by_name():
    ws = simfa.gemm(512, 512, 512)
    paper = simfa.gemm(512, 512, 512, kernel="paper")
    assert ws["ctas"] == 8 and paper["ctas"] == 16  # 128x256 tiles, persistent
    with pytest.raises(simfa.SimfaError, match="cutlass"):
        simfa.gemm(512, 512, 512, kernel="cutlass")


def test_runs_are_deterministic_and_respond_to_the_config():
    a = simfa.gemm(512, 256, 256, stages=3)
    b = simfa.gemm(512, 256, 256, stages=3)
    assert a["digest"] == b["digest"] and a["cycles"] == b["cycles"]
    fixed = simfa.gemm(512, 256, 256, stages=3, config={"memory": "fixed"})
    assert fixed["memory_model"] == "fixed"
    assert fixed["digest"] != a["digest"]
    h100 = simfa.gemm(512, 256, 256, stages=3, gpu="h100")
    assert h100["gpu"] == "h100"


def test_fa3_matches_the_cli():
    r = small_fa3(causal=True)
    assert r["kernel"].startswith("fa3_")
    simfa_bin = cli_binary()
    out = subprocess.run(
        [str(simfa_bin), "fa3", "--batch", "1", "--heads", "2", "--kv-heads", "2",
         "--seqlen", "256", "--hdim", "64", "--causal", "--json"],
        check=True, capture_output=True, text=True).stdout
    cli = json.loads(out)
    assert (cli["cycles"], cli["digest"]) == (r["cycles"], r["digest"])


def test_run_takes_kernel_bytes_and_agrees_with_the_cli(tmp_path):
    simfa_bin = cli_binary()
    k = tmp_path / "g.sfk"
    subprocess.run([str(simfa_bin), "gen", "gemm", "--m", "256", "--n", "256", "--k", "256",
                    "-o", str(k)], check=True, capture_output=True)
    r = simfa.run(k.read_bytes())
    out = subprocess.run([str(simfa_bin), "run", str(k), "--json"],
                         check=True, capture_output=True, text=True).stdout
    cli = json.loads(out)
    assert (cli["cycles"], cli["digest"]) == (r["cycles"], r["digest"])
    line = simfa.run(k.read_bytes(), config='preset = "h800"\nmemory = "line"\n')
    assert line["memory_model"] == "line"
    with pytest.raises(simfa.SimfaError):
        simfa.run(b"not a kernel")


def test_errors_raise_simfa_error_with_the_reason():
    with pytest.raises(simfa.SimfaError, match="h9000"):
        simfa.gemm(128, 128, 128, gpu="h9000")
    with pytest.raises(simfa.SimfaError, match="smz"):
        simfa.gemm(128, 128, 128, config={"smz": 3})
    with pytest.raises(simfa.SimfaError, match="colour"):
        simfa.fa3(colour=3)
    with pytest.raises(simfa.SimfaError):
        simfa.gemm(128, 128, 128, config=42)


PLAN = """
gpu = "h800"
[[axis]]
key = "sms"
values = [66, 132]
[[axis]]
key = "workload"
values = [{ kind = "gemm", m = 256, n = 256, k = 256 }, { kind = "gemm", m = 512, n = 256, k = 256 }]
"""


def test_sweep_returns_rows_in_plan_order_whatever_jobs():
    rows = simfa.sweep(PLAN, jobs=1)
    assert [r["index"] for r in rows] == list(range(4))
    assert all(r["status"] == "ok" for r in rows)
    assert rows == simfa.sweep(PLAN, jobs=2)
    assert {r["params"]["sms"] for r in rows} == {66, 132}


def test_sweep_plan_errors_name_the_key():
    with pytest.raises(simfa.SimfaError, match="nonsense"):
        simfa.sweep(PLAN.replace('key = "sms"', 'key = "nonsense"'))


COMPILED = ROOT / "tests" / "fixtures" / "ttgir-compiled"


def test_ttgir_run_matches_the_cli():
    ttgir = (COMPILED / "tma_gemm.ttgir").read_text()
    launch = (COMPILED / "tma_gemm.launch.toml").read_text()
    r = simfa.ttgir_run(ttgir, launch, gpu="h100")
    assert r["ctas"] == 64 and r["wgmmas"] == 64 * 16 * 8
    out = subprocess.run(
        [str(cli_binary()), "ttgir", "run", str(COMPILED / "tma_gemm.ttgir"),
         "--launch", str(COMPILED / "tma_gemm.launch.toml"), "--gpu", "h100", "--json"],
        check=True, capture_output=True, text=True)
    cli = json.loads(out.stdout)
    assert (r["cycles"], r["digest"]) == (cli["cycles"], cli["digest"])
    # The launch as a dict gives the same run.
    d = {"grid": [8, 8, 1], "tensors": {
        n: {"base": b, "elem": 2, "dims": [1024, 1024]}
        for n, b in (("a_desc", 0x10000000), ("b_desc", 0x10200000), ("c_desc", 0x10400000))}}
    assert simfa.ttgir_run(ttgir, d, gpu="h100")["digest"] == r["digest"]


def test_ttgir_run_errors_name_the_input():
    ttgir = (COMPILED / "tma_gemm.ttgir").read_text()
    with pytest.raises(simfa.SimfaError, match="has no \\[tensors.a_desc\\]"):
        simfa.ttgir_run(ttgir, {"grid": [1, 1, 1]})


def test_triton_simulate_compiles_on_the_cpu():
    triton = pytest.importorskip("triton")
    import triton.language as tl
    import simfa.triton as st

    @triton.jit
    def copy_gemm(a_desc, b_desc, c_desc, K: tl.constexpr, BM: tl.constexpr,
                  BN: tl.constexpr, BK: tl.constexpr):
        acc = tl.zeros((BM, BN), dtype=tl.float32)
        for k in tl.range(0, K, BK, num_stages=3):
            acc = tl.dot(a_desc.load([tl.program_id(0) * BM, k]),
                         b_desc.load([k, tl.program_id(1) * BN]), acc)
        c_desc.store([tl.program_id(0) * BM, tl.program_id(1) * BN], acc.to(tl.float16))

    a, b, c = st.Tensor((512, 512)), st.Tensor((512, 512)), st.Tensor((512, 512))
    r = st.simulate(copy_gemm, (4, 4), st.Descriptor(a, (128, 64)), st.Descriptor(b, (64, 128)),
                    st.Descriptor(c, (128, 128)), K=512, BM=128, BN=128, BK=64)
    assert r["ctas"] == 16 and r["wgmmas"] == 16 * 8 * 8


def test_triton_pointer_kernels_simulate_with_their_registers():
    triton = pytest.importorskip("triton")
    import triton.language as tl
    import simfa.triton as st

    @triton.jit
    def add(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        keep = offs < n
        tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=keep) + tl.load(y_ptr + offs, mask=keep),
                 mask=keep)

    n = 1 << 20
    x, y, out = st.Tensor((n,), "fp32"), st.Tensor((n,), "fp32"), st.Tensor((n,), "fp32")
    ttgir, launch = st.compile(add, (n // 1024,), x, y, out, n, BLOCK=1024)
    # Pointers and n are marked divisible by 16, as Triton's launcher marks them.
    assert "tt.divisibility = 16" in ttgir
    # ptxas's registers (the Linux wheel carries cuobjdump) and Triton's
    # shared memory (none for a kernel without a buffer).
    assert 0 < launch["regs"] < 128 and launch["smem"] == 0
    r = st.simulate(add, (n // 1024,), x, y, out, n, BLOCK=1024)
    assert r["bytes_loaded"] == 2 * 4 * n and r["bytes_stored"] == 4 * n


def test_triton_unit_strides_are_constants_as_the_launcher_makes_them():
    triton = pytest.importorskip("triton")
    import triton.language as tl
    import simfa.triton as st

    @triton.jit
    def copy(x_ptr, out_ptr, n, stride, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        keep = offs < n
        tl.store(out_ptr + offs, tl.load(x_ptr + offs * stride, mask=keep), mask=keep)

    n = 1 << 20
    x, out = st.Tensor((n,), "fp32"), st.Tensor((n,), "fp32")
    ttgir, launch = st.compile(copy, (n // 1024,), x, out, n, 1, BLOCK=1024)
    # Triton's launcher specialises an integer equal to 1: the compiled
    # kernel has no `stride` argument (so its loads are known contiguous).
    head = next(line for line in ttgir.splitlines() if "tt.func public" in line)
    assert "%stride" not in head and "stride" not in launch["args"]
    assert launch["args"] == {"n": n}
    r = st.simulate(copy, (n // 1024,), x, out, n, 1, BLOCK=1024)
    assert r["bytes_loaded"] == 4 * n


def test_triton_float_and_bool_arguments_are_typed_as_the_launcher_types_them():
    triton = pytest.importorskip("triton")
    import triton.language as tl
    import simfa.triton as st

    @triton.jit
    def scale(x_ptr, out_ptr, n, alpha, keep_sign, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + offs, mask=offs < n) * alpha
        if keep_sign:
            x = tl.abs(x)
        tl.store(out_ptr + offs, x, mask=offs < n)

    n = 1 << 16
    x, out = st.Tensor((n,), "fp32"), st.Tensor((n,), "fp32")
    ttgir, launch = st.compile(scale, (n // 1024,), x, out, n, 0.5, True, BLOCK=1024)
    head = next(line for line in ttgir.splitlines() if "tt.func public" in line)
    assert "%alpha: f32" in head and "%keep_sign: i1" in head
    # The float needs no value; the bool is 1, and the kernel branches on it.
    assert launch["args"] == {"n": n, "keep_sign": 1}
    r = st.simulate(scale, (n // 1024,), x, out, n, 0.5, True, BLOCK=1024)
    assert r["bytes_loaded"] == 4 * n and r["bytes_stored"] == 4 * n


def test_triton_tables_of_sizes_and_matrices_become_the_launch_s_memory():
    triton = pytest.importorskip("triton")
    import triton.language as tl
    import simfa.triton as st

    @triton.jit
    def scale_each(ptrs, sizes, groups, BLOCK: tl.constexpr):
        # Each group: a vector whose length and address come from tables.
        for g in range(groups):
            n = tl.load(sizes + g)
            x = tl.load(ptrs + g).to(tl.pointer_type(tl.float32))
            for start in range(0, n, BLOCK):
                offs = start + tl.arange(0, BLOCK)
                tl.store(x + offs, tl.load(x + offs) * 2.0)

    vecs = [st.Tensor((4096,), "fp32"), st.Tensor((2048,), "fp32")]
    ptrs = st.Tensor((2,), "int64", values=vecs)
    sizes = st.Tensor((2,), "int32", values=[4096, 2048])
    ttgir, launch = st.compile(scale_each, (1,), ptrs, sizes, 2, BLOCK=1024)
    assert sorted(launch["buffers"]) == ["buffer0", "buffer1"]
    assert launch["tensors"]["ptrs"]["values"] == [v.base for v in vecs]
    r = st.simulate(scale_each, (1,), ptrs, sizes, 2, BLOCK=1024)
    # Both vectors in and out, and the four table entries (16-byte runs).
    assert r["bytes_stored"] == 4 * 6144
    assert r["bytes_loaded"] == 4 * 6144 + 4 * 16
    with pytest.raises(TypeError, match="values: expected ints or Tensors"):
        st.Tensor((2,), "int64", values=[1.5])


def test_triton_gathers_read_the_rows_their_ids_name():
    triton = pytest.importorskip("triton")
    import triton.language as tl
    import simfa.triton as st

    @triton.jit
    def embed(ids_ptr, table_ptr, out_ptr, D: tl.constexpr, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        rows = tl.load(ids_ptr + offs)
        cols = tl.arange(0, D)
        x = tl.load(table_ptr + rows[:, None] * D + cols[None, :])
        tl.store(out_ptr + offs[:, None] * D + cols[None, :], x)

    table, out = st.Tensor((1000, 64)), st.Tensor((256, 64))
    spread = st.simulate(embed, (4,), st.Tensor((256,), "int32"), table, out, D=64, BLOCK=64)
    # One 128-byte row per id, and the ids themselves.
    assert spread["bytes_loaded"] == 256 * 128 + 256 * 4
    same = st.simulate(embed, (4,), st.Tensor((256,), "int32", values=[3] * 256), table, out,
                       D=64, BLOCK=64)
    assert same["bytes_loaded"] == spread["bytes_loaded"]
    # Every id names row 3: DRAM reads it once, beside the ids.
    assert same["dram_read_bytes"] == 128 + 256 * 4
    assert same["l1_hits"] > 0 and spread["l1_hits"] == 0
