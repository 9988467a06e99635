#!/usr/bin/env bash
# Builds and runs the co-simulation: simfa (through its C ABI) with its
# memory served by mem.v under Verilator, and by the same memory written
# in C (model.c); both must print the same cycles, digests and request
# counts. Usage: run.sh [OUT_DIR]. Needs verilator, a C/C++ compiler and
# cargo; says SKIPPED and succeeds when verilator is missing.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
out="${1:-$(mktemp -d)}"
mkdir -p "$out"
if ! command -v verilator >/dev/null 2>&1; then
    echo "Verilator co-simulation SKIPPED: verilator is not installed"
    exit 0
fi
cargo build --release -p simfa-ffi --manifest-path "$root/Cargo.toml"
lib="${CARGO_TARGET_DIR:-$root/target}/release/libsimfa_ffi.a"
libs="-lpthread -ldl -lm"
cc -std=c11 -O1 -Wall -Wextra -Werror -I "$root/include" "$here/model.c" "$lib" $libs -o "$out/model"
verilator --cc "$here/mem.v" --exe "$here/tb.cpp" --build -j 2 -Wall -Wno-DECLFILENAME \
    -Mdir "$out/obj" -CFLAGS "-I$root/include -I$here" -LDFLAGS "$lib $libs" >"$out/verilator.log" 2>&1 ||
    { cat "$out/verilator.log"; exit 1; }
"$out/model" >"$out/model.txt"
"$out/obj/Vmem" >"$out/rtl.txt"
cat "$out/rtl.txt"
if ! diff -u "$out/model.txt" "$out/rtl.txt"; then
    echo "FAIL: the RTL memory and its C model disagree"
    exit 1
fi
echo "Verilator co-simulation: RTL and C model agree"
