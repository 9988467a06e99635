#!/usr/bin/env bash
# Bit-exact across machines: the fixed sample kernels of simfa_core::samples
# must give the same cycles and digests on this machine, on aarch64 (under
# qemu-aarch64) and on a Cortex-M3 (firmware/device under qemu-system-arm,
# no heap, semihosting output). Prints every machine's lines and fails unless
# all are identical.
#
# Installs what it needs when missing: the Debian packages qemu-user,
# gcc-aarch64-linux-gnu and qemu-system-arm (apt-get, with sudo when not
# root) and the rustup targets aarch64-unknown-linux-gnu and
# thumbv7m-none-eabi. A machine that cannot install them runs what it can,
# says clearly what it skipped, and fails (set SIMFA_CROSS_OPTIONAL=1 to
# make the skips non-fatal).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
target_dir="${CARGO_TARGET_DIR:-$root/target}"

say() { printf '%s\n' "$*" >&2; }

# --- what is needed --------------------------------------------------------
missing=()
command -v qemu-aarch64 >/dev/null 2>&1 || missing+=(qemu-user)
command -v aarch64-linux-gnu-gcc >/dev/null 2>&1 || missing+=(gcc-aarch64-linux-gnu libc6-dev-arm64-cross)
command -v qemu-system-arm >/dev/null 2>&1 || missing+=(qemu-system-arm)
if ((${#missing[@]})); then
    if [ "$(id -u)" = 0 ]; then
        sudo=()
    elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
        sudo=(sudo -n)
    else
        sudo=(none)
    fi
    if [ "${sudo[0]:-}" = none ] || ! command -v apt-get >/dev/null 2>&1; then
        say "crossdigest: cannot install ${missing[*]}: need apt-get and root (or password-less sudo)."
        say "crossdigest: install them by hand: apt-get install -y ${missing[*]}"
    else
        say "crossdigest: installing ${missing[*]}"
        "${sudo[@]}" apt-get update -qq >&2 || say "crossdigest: apt-get update failed"
        DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq --no-install-recommends \
            "${missing[@]}" >&2 || say "crossdigest: apt-get install failed"
    fi
fi
rustup target add aarch64-unknown-linux-gnu thumbv7m-none-eabi >/dev/null 2>&1 ||
    say "crossdigest: rustup could not add the aarch64/thumbv7m targets"

have_target() { rustup target list --installed 2>/dev/null | grep -qx "$1"; }

outputs=()
names=()
skipped=()

# --- this machine ------------------------------------------------------------
host_dir="$target_dir/crossdigest"
(cd firmware/host && CARGO_TARGET_DIR="$host_dir" cargo build --release -q)
names+=("$(uname -m) (this machine)")
outputs+=("$("$host_dir/release/simfa-crossdigest")")

# --- aarch64 under qemu-user -----------------------------------------------------
if command -v qemu-aarch64 >/dev/null && command -v aarch64-linux-gnu-gcc >/dev/null &&
    have_target aarch64-unknown-linux-gnu; then
    (cd firmware/host && CARGO_TARGET_DIR="$host_dir" \
        CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_LINKER=aarch64-linux-gnu-gcc \
        cargo build --release -q --target aarch64-unknown-linux-gnu)
    bin="$host_dir/aarch64-unknown-linux-gnu/release/simfa-crossdigest"
    file_kind=$(od -An -tx1 -j18 -N2 "$bin" | tr -d ' ')
    [ "$file_kind" = b700 ] || { say "crossdigest: $bin is not an aarch64 ELF"; exit 1; }
    names+=("aarch64 (qemu-aarch64)")
    outputs+=("$(qemu-aarch64 -L /usr/aarch64-linux-gnu "$bin")")
else
    skipped+=("aarch64: needs qemu-aarch64, aarch64-linux-gnu-gcc and the rustup target")
fi

# --- Cortex-M3 under qemu-system-arm ---------------------------------------------
if command -v qemu-system-arm >/dev/null && have_target thumbv7m-none-eabi; then
    fw_dir="$target_dir/firmware"
    (cd firmware/device && CARGO_TARGET_DIR="$fw_dir" cargo build --release -q)
    elf="$fw_dir/thumbv7m-none-eabi/release/simfa-firmware"
    # The firmware exits QEMU through semihosting; the timeout only guards
    # against a hang.
    out=$(timeout 120 qemu-system-arm -machine mps2-an385 -cpu cortex-m3 -nographic \
        -semihosting-config enable=on,target=native -kernel "$elf") || {
        say "crossdigest: the firmware failed:"
        say "$out"
        exit 1
    }
    names+=("Cortex-M3 (qemu-system-arm mps2-an385, no_std, no heap)")
    outputs+=("$out")
else
    skipped+=("Cortex-M3: needs qemu-system-arm and the rustup target thumbv7m-none-eabi")
fi

# --- compare -----------------------------------------------------------------------
status=0
for i in "${!outputs[@]}"; do
    printf '%s:\n%s\n\n' "${names[$i]}" "$(sed 's/^/    /' <<<"${outputs[$i]}")"
    if [ "${outputs[$i]}" != "${outputs[0]}" ]; then
        say "crossdigest: ${names[$i]} differs from ${names[0]}"
        status=1
    fi
done
for s in "${skipped[@]}"; do
    say "crossdigest: SKIPPED $s"
done
if ((status)); then
    say "crossdigest: FAILED: the digests differ between machines"
    exit 1
fi
if ((${#skipped[@]})) && [ "${SIMFA_CROSS_OPTIONAL:-0}" != 1 ]; then
    say "crossdigest: FAILED: not every machine could be checked (SIMFA_CROSS_OPTIONAL=1 accepts that)"
    exit 1
fi
echo "crossdigest: identical on ${#outputs[@]} machines"
