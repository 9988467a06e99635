#!/usr/bin/env bash
# Runs the real SCALE-Sim 3.0.0 (from PyPI, in a virtual environment) on a
# two-layer convolution topology and checks `simfa check scalesim`'s
# verdicts on its output:
#   - weight stationary with 1 KiB operand buffers (buffer-constrained):
#     false hits, exit 1, with the exact counts this SCALE-Sim gives;
#   - weight, output and input stationary with 64 KiB buffers (every
#     operand fits): the large-buffer controls, which must pass (exit 0);
#   - --compare on the three controls: the first layer's fastest dataflow
#     flips between the compute field and the cold interval;
#   - both windows equal SCALE-Sim's own COMPUTE_REPORT.csv totals.
# Says SKIPPED and succeeds when SCALE-Sim cannot be installed (no
# registry). Set SIMFA_SCALESIM_VENV to reuse a virtual environment.
#
# Usage: scripts/scalesim/test_scalesim.sh PATH_TO_SIMFA
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
simfa="$(realpath "${1:?usage: $0 PATH_TO_SIMFA}")"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

venv="${SIMFA_SCALESIM_VENV:-$work/venv}"
if [ ! -x "$venv/bin/python" ] || ! "$venv/bin/python" -c 'import scalesim' 2>/dev/null; then
    if ! python3 -m venv "$venv" >/dev/null 2>&1 ||
        ! "$venv/bin/pip" install --quiet 'scalesim==3.0.0' 'numpy<2.4' >"$work/pip.log" 2>&1; then
        echo "SCALE-Sim check SKIPPED: pip install scalesim failed ($(tail -1 "$work/pip.log" 2>/dev/null))"
        exit 0
    fi
fi
echo "SCALE-Sim $("$venv/bin/pip" show scalesim 2>/dev/null | sed -n 's/^Version: //p')"

cd "$work"
cat >topo.csv <<'CSV'
Layer name, IFMAP Height, IFMAP Width, Filter Height, Filter Width, Channels, Num Filter, Strides,
conv_a, 16, 16, 3, 3, 3, 16, 1,
conv_b, 8, 8, 3, 3, 16, 16, 1,
CSV
echo "Layer name," >layout.csv

# run NAME DATAFLOW KIB: one SCALE-Sim run, with its scale.cfg and topology
# copied into the run directory (where `simfa check scalesim` looks).
run() {
    bash "$here/scale_cfg.sh" "$1" "$2" "$3" "$3" >"$1.cfg"
    "$venv/bin/python" -m scalesim.scale -c "$1.cfg" -t topo.csv -l layout.csv -p out >"$1.log" 2>&1 ||
        { echo "FAIL: SCALE-Sim run $1"; tail -5 "$1.log"; exit 1; }
    cp "$1.cfg" "out/$1/scale.cfg"
    cp topo.csv "out/$1/topology.csv"
}

# verdict NAME WANT_EXIT: runs the check, keeps its JSON in NAME.json.
verdict() {
    local rc=0
    "$simfa" check scalesim "out/$1" --json >"$1.json" 2>"$1.err" || rc=$?
    [ "$rc" = "$2" ] || { echo "FAIL: $1: exit $rc, expected $2"; cat "$1.err"; exit 1; }
}

run ws_small ws 1
for df in ws os is; do run "${df}_large" "$df" 64; done

verdict ws_small 1
for df in ws os is; do verdict "${df}_large" 0; done

python3 - <<'PY'
import csv, json, sys

def load(name):
    return json.load(open(f"{name}.json"))

def fail(msg):
    sys.exit(f"FAIL: {msg}")

# The buffer-constrained WS run: false hits, with this SCALE-Sim's counts.
small = load("ws_small")
ifmap, filt = small["layers"][0]["operands"]
got = (ifmap["reads"], ifmap["addresses"], ifmap["transferred"], ifmap["violating_addresses"][0])
if got != (10584, 768, 437, 331):
    fail(f"ws_small conv_a IFMAP (reads, addresses, transferred, no-transfer addresses) = {got}")
if sum(filt["violating_reads"]) != 0:
    fail(f"ws_small conv_a FILTER should be clean: {filt['violating_reads']}")
print(f"ws_small (1 KiB): conv_a IFMAP {ifmap['violating_addresses'][0]} of "
      f"{ifmap['addresses']} addresses read with no transfer (false hits), "
      f"{ifmap['violating_addresses'][2]} hit too soon; exit 1")

# Every window equals SCALE-Sim's own totals.
for name in ["ws_small", "ws_large", "os_large", "is_large"]:
    for layer in load(name)["layers"]:
        incl, total = layer["reported"]
        if (layer["cold_interval"]["cycles"], layer["compute_field"]["cycles"]) != (incl, total):
            fail(f"{name} layer {layer['index']}: windows {layer['cold_interval']} "
                 f"{layer['compute_field']} differ from COMPUTE_REPORT.csv ({incl}, {total})")

# The large-buffer controls: clean, every address transferred.
for name in ["ws_large", "os_large", "is_large"]:
    for layer in load(name)["layers"]:
        for op in layer["operands"]:
            if op["transferred"] < op["addresses"]:
                fail(f"{name} layer {layer['index']}: only {op['transferred']} of "
                     f"{op['addresses']} addresses transferred")
    print(f"{name} (64 KiB): clean; exit 0")
PY

rc=0
"$simfa" check scalesim --compare out/os_large out/ws_large out/is_large --json >compare.json || rc=$?
[ "$rc" = 0 ] || { echo "FAIL: --compare of the controls: exit $rc"; exit 1; }
python3 - <<'PY'
import json, sys
c = json.load(open("compare.json"))
a = c["layers"][0]
if not (a["flips"] and a["fastest_compute_field"] == ["ws"] and a["fastest_cold_interval"] == ["os"]):
    sys.exit(f"FAIL: conv_a should flip from ws (compute field) to os (cold interval): {a}")
print(f"--compare: conv_a fastest ws by compute field, os by cold interval; "
      f"{c['flipped']} of {len(c['layers'])} layers flip")
PY
rc=0
"$simfa" check scalesim --compare out/ws_small out/os_large >/dev/null 2>&1 || rc=$?
[ "$rc" = 1 ] || { echo "FAIL: --compare with a failing run: exit $rc, expected 1"; exit 1; }
echo "SCALE-Sim check passed"
