#!/usr/bin/env bash
# Builds the Python bindings (python/, pyo3) with maturin into a virtual
# environment and runs their pytest suite against the CLI built in
# target/debug (built here; its absence fails the run). Says SKIPPED and
# succeeds when Python or the package registry is not available (no venv
# module, no network).
#
# Usage: scripts/python/test.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

if ! python3 -m venv "$work/venv" >/dev/null 2>&1 ||
    ! "$work/venv/bin/pip" install --quiet 'maturin>=1.5,<2' pytest >"$work/pip.log" 2>&1; then
    echo "Python bindings SKIPPED: venv or pip install maturin pytest failed ($(tail -1 "$work/pip.log" 2>/dev/null))"
    exit 0
fi
# The extension's own workspace; its build shares the root target dir.
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$PWD/target}"
cargo fmt --manifest-path python/Cargo.toml -- --check
cargo clippy --manifest-path python/Cargo.toml -- -D warnings
VIRTUAL_ENV="$work/venv" PATH="$work/venv/bin:$PATH" \
    maturin develop --release --manifest-path python/Cargo.toml --quiet
# The tests compare with the CLI: build it, and make its absence a failure.
cargo build -q -p simfa-cli
SIMFA_BIN="$CARGO_TARGET_DIR/debug/simfa" SIMFA_REQUIRE_CLI=1 \
    "$work/venv/bin/python" -m pytest -q python/tests
