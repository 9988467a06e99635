#!/usr/bin/env bash
# The whole test suite. Installs what it needs on a machine that has only
# the Rust toolchain; .ci/run calls this same script.
set -euo pipefail
cd "$(dirname "$0")/.."

step() { printf '\n==> %s\n' "$*"; }

step "toolchain components and bare-metal targets"
rustup component add rustfmt clippy >/dev/null 2>&1 || true
rustup target add thumbv7em-none-eabihf riscv32imac-unknown-none-elf

step "format"
cargo fmt --all -- --check

step "clippy"
cargo clippy --workspace --all-targets -- -D warnings

step "docs (every public item documented, no broken links)"
RUSTDOCFLAGS="-D warnings" cargo doc --workspace --no-deps

step "tests"
# Includes simfa-ffi's C harness (needs `cc`; it says SKIPPED without one)
# and the check that include/simfa.h is what cbindgen generates now.
cargo test --workspace

step "real Triton TTGIR (pip install triton; skipped without it)"
cargo build -p simfa-cli
bash scripts/triton/test_ttgir.sh "${CARGO_TARGET_DIR:-target}/debug/simfa"

step "SCALE-Sim read-after-transfer check (pip install scalesim; skipped without it)"
bash scripts/scalesim/test_scalesim.sh "${CARGO_TARGET_DIR:-target}/debug/simfa"

step "Verilator co-simulation (examples/cosim-verilator; installs verilator)"
if ! command -v verilator >/dev/null 2>&1; then
    if [ "$(id -u)" = 0 ]; then
        apt-get install -y verilator >/dev/null 2>&1 ||
            { apt-get update >/dev/null 2>&1 && apt-get install -y verilator >/dev/null 2>&1; } || true
    elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
        sudo -n apt-get install -y verilator >/dev/null 2>&1 ||
            { sudo -n apt-get update >/dev/null 2>&1 && sudo -n apt-get install -y verilator >/dev/null 2>&1; } || true
    fi
fi
bash examples/cosim-verilator/run.sh

step "sweep shards under a real single-node Slurm (installs slurm-wlm and munge)"
bash scripts/sweep/test_slurm.sh "${CARGO_TARGET_DIR:-target}/debug/simfa"

step "Python bindings (python/: maturin build, pytest; skipped without pip)"
bash scripts/python/test.sh

step "no_std core for bare-metal targets"
cargo build -p simfa-core --target thumbv7em-none-eabihf
cargo build -p simfa-core --target riscv32imac-unknown-none-elf
# The C ABI without std, as firmware links it (the rlib: a staticlib needs
# the firmware's #[panic_handler], which a library must not define).
cargo rustc -p simfa-ffi --lib --target thumbv7em-none-eabihf --no-default-features --crate-type rlib
# ... and as the staticlib a C firmware links (feature panic-halt: a halting panic handler).
cargo rustc -p simfa-ffi --lib --target thumbv7em-none-eabihf --no-default-features --features panic-halt --crate-type staticlib

step "bit-exact across machines"
# The sample kernels' digests on this machine, on aarch64 (qemu-aarch64) and
# on a Cortex-M3 (qemu-system-arm); installs the emulators when missing.
bash scripts/crossdigest.sh

step "fuzz targets"
if rustup toolchain list | grep -q nightly && ! command -v cargo-fuzz >/dev/null 2>&1; then
    # A nightly toolchain is there: install cargo-fuzz so the targets run.
    cargo install cargo-fuzz --locked || echo "cargo install cargo-fuzz failed; compiling the targets only"
fi
if rustup toolchain list | grep -q nightly && command -v cargo-fuzz >/dev/null 2>&1; then
    secs="${SIMFA_FUZZ_SECONDS:-30}"
    for t in $(cargo +nightly fuzz list); do
        cargo +nightly fuzz run "$t" "fuzz/corpus/$t" -- -max_total_time="$secs"
    done
else
    # No nightly here: make sure the targets still compile.
    cargo check --manifest-path fuzz/Cargo.toml --bins
fi

step "all checks passed"
