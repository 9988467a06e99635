#!/usr/bin/env bash
# Compiles the project's small Triton kernels (scripts/triton/compile_ttgir.py
# and compile_gluon.py) to TTGIR for sm_90 with a real Triton, no GPU
# needed; instruments two of them with simfa (every kind of site the
# kernels have is found and instrumenting twice changes nothing) and
# simulates all of them with `simfa ttgir run`, checked clean.
# Needs `pip install triton`; says SKIPPED and succeeds when that fails
# (no network, no wheel for this platform).
#
# Usage: scripts/triton/test_ttgir.sh PATH_TO_SIMFA
set -euo pipefail
cd "$(dirname "$0")/../.."
simfa="${1:?usage: $0 PATH_TO_SIMFA}"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

if ! python3 -m venv "$work/venv" >/dev/null 2>&1 ||
    ! "$work/venv/bin/pip" install --quiet triton >"$work/pip.log" 2>&1; then
    echo "Triton TTGIR check SKIPPED: pip install triton failed ($(tail -1 "$work/pip.log" 2>/dev/null))"
    exit 0
fi
echo "Triton $("$work/venv/bin/python" -c 'import triton; print(triton.__version__)')"
TRITON_DEFAULT_FP_FUSION=1 "$work/venv/bin/python" scripts/triton/compile_ttgir.py "$work/ttgir"

# kernel: the site kinds it must have
declare -A want=(
    [gemm]="MB_EXPECT TMA_LOAD MB_WAIT WGMMA WGMMA_WAIT TMA_STORE"
    [attention]="MB_EXPECT TMA_LOAD MB_WAIT WGMMA WGMMA_WAIT TMA_STORE"
)
for k in gemm attention; do
    f="$work/ttgir/$k.ttgir"
    [ -s "$f" ] || { echo "FAIL: $k did not compile to TTGIR"; exit 1; }
    "$simfa" ttgir sites "$f" --json >"$work/$k.sites.json"
    for kind in ${want[$k]}; do
        python3 - "$work/$k.sites.json" "$kind" <<'PY'
import json, sys
sites = json.load(open(sys.argv[1]))
kind = sys.argv[2]
n = sum(1 for s in sites if s["kind"] == kind)
if n == 0:
    sys.exit(f"FAIL: no {kind} site in {sys.argv[1]}")
PY
    done
    "$simfa" ttgir instrument "$f" -o "$work/$k.once.ttgir"
    "$simfa" ttgir instrument "$work/$k.once.ttgir" -o "$work/$k.twice.ttgir"
    cmp -s "$work/$k.once.ttgir" "$work/$k.twice.ttgir" ||
        { echo "FAIL: instrumenting $k twice changed it"; exit 1; }
    echo "$k: $(python3 -c 'import json,sys; print(len(json.load(open(sys.argv[1]))))' "$work/$k.sites.json") sites instrumented, idempotent"
done

# The same compiler's kernels simulated from their TTGIR (`simfa ttgir
# run`, with the launch files of tests/fixtures/ttgir-compiled/), checked
# by the read-after-transfer checker: the TMA kernels, the Gluon GEMM, and
# the kernels that load through pointers (cp.async pipelines, loads into
# registers, register stores).
TRITON_DEFAULT_FP_FUSION=1 "$work/venv/bin/python" scripts/triton/compile_gluon.py "$work/ttgir"
launches=tests/fixtures/ttgir-compiled
for k in gemm:tma_gemm deep_tma_gemm:deep_tma_gemm persistent_gemm:persistent_gemm device_desc_gemm:device_desc_gemm \
    gluon_ws_gemm:gluon_ws_gemm attention:attention ptr_gemm:ptr_gemm \
    persistent_ptr_gemm:persistent_ptr_gemm causal_attention:causal_attention \
    vector_add:vector_add \
    row_softmax:row_softmax layer_norm:layer_norm; do
    f="$work/ttgir/${k%%:*}.ttgir"
    [ -s "$f" ] || { echo "FAIL: ${k%%:*} did not compile to TTGIR"; exit 1; }
    out=$("$simfa" ttgir run "$f" --launch "$launches/${k#*:}.launch.toml" --gpu h100 --check) ||
        { echo "FAIL: simfa ttgir run ${k%%:*}"; exit 1; }
    grep -q "consistency: clean" <<<"$out" || { echo "FAIL: ${k%%:*} does not check clean"; exit 1; }
    echo "${k%%:*}: $(grep -E '^cycles' <<<"$out" | tr -s ' ')"
done
