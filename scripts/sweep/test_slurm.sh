#!/usr/bin/env bash
# A sharded simfa sweep under a real single-node Slurm, checked byte for
# byte against the unsharded run.
#
#   bash scripts/sweep/test_slurm.sh [path/to/simfa]
#
# Installs Debian's slurm-wlm and munge when missing (needs root or
# password-less sudo), starts munged, slurmctld and slurmd on localhost
# only (non-default ports, every file in a temporary directory, nothing in
# /etc touched), submits examples/sweep/sweep.sbatch as a 3-task array,
# waits for it (at most SIMFA_SLURM_WAIT seconds, default 180), merges
# the shards and compares the merged files with an unsharded run's. The
# daemons it started are stopped and the directory removed on every exit.
# Prints SKIPPED (exit 0) with the reason when Slurm cannot be installed
# or started here.
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
SIMFA="$(realpath "${1:-${CARGO_TARGET_DIR:-target}/debug/simfa}")"
WAIT="${SIMFA_SLURM_WAIT:-180}"

skip() {
    echo "SKIPPED: Slurm sweep test: $*"
    exit 0
}

[ -x "$SIMFA" ] || { echo "error: no simfa binary at $SIMFA" >&2; exit 1; }

as_root() {
    if [ "$(id -u)" = 0 ]; then
        "$@"
    elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
        sudo -n "$@"
    else
        return 1
    fi
}

if ! command -v slurmctld >/dev/null 2>&1 || ! command -v munged >/dev/null 2>&1 ||
    ! command -v sbatch >/dev/null 2>&1; then
    [ "$(id -u)" = 0 ] || sudo -n true 2>/dev/null || skip "not root and no password-less sudo to install slurm-wlm"
    install() {
        as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
            slurm-wlm munge >/dev/null 2>&1
    }
    install || { as_root apt-get update >/dev/null 2>&1 && install; } ||
        skip "apt-get could not install slurm-wlm and munge"
fi
# Only root can run slurmd as the job's user here.
[ "$(id -u)" = 0 ] || skip "the daemons need root (slurmd runs jobs as their user)"

TMP="$(mktemp -d /tmp/simfa-slurm.XXXXXX)"
chmod 700 "$TMP"
cleanup() {
    set +e
    if [ -n "${JOB:-}" ]; then SLURM_CONF="$TMP/slurm.conf" scancel "$JOB" >/dev/null 2>&1; fi
    for p in slurmd slurmctld munged; do
        if [ -s "$TMP/$p.pid" ]; then
            pid="$(cat "$TMP/$p.pid")"
            kill "$pid" 2>/dev/null
            for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
            kill -9 "$pid" 2>/dev/null
        fi
    done
    rm -rf "$TMP"
}
trap cleanup EXIT

logs() {
    for f in "$TMP"/*.log "$TMP"/work/*.log; do
        [ -f "$f" ] && { echo "--- $f"; tail -n 30 "$f"; }
    done
}

# munge: a key of our own, a socket in the temporary directory.
dd if=/dev/urandom of="$TMP/munge.key" bs=1024 count=1 status=none
chmod 400 "$TMP/munge.key"
munged --force --key-file="$TMP/munge.key" --socket="$TMP/munge.sock" \
    --pid-file="$TMP/munged.pid" --log-file="$TMP/munged.log" \
    --seed-file="$TMP/munge.seed" || { logs; skip "munged did not start"; }

HOST="$(hostname -s)"
CPUS="$(nproc)"
mkdir -p "$TMP/state" "$TMP/spool" "$TMP/work"
cat >"$TMP/slurm.conf" <<EOF
ClusterName=simfa-test
SlurmctldHost=$HOST(127.0.0.1)
SlurmctldPort=16817
SlurmdPort=16818
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$TMP/munge.sock
CredType=cred/munge
StateSaveLocation=$TMP/state
SlurmdSpoolDir=$TMP/spool
SlurmctldPidFile=$TMP/slurmctld.pid
SlurmdPidFile=$TMP/slurmd.pid
SlurmctldLogFile=$TMP/slurmctld.log
SlurmdLogFile=$TMP/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SchedulerType=sched/builtin
MpiDefault=none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SwitchType=switch/none
ReturnToService=2
NodeName=$HOST NodeAddr=127.0.0.1 CPUs=$CPUS State=UNKNOWN
PartitionName=simfa Nodes=$HOST Default=YES MaxTime=INFINITE State=UP
EOF
export SLURM_CONF="$TMP/slurm.conf"
slurmctld -i -f "$SLURM_CONF" || { logs; skip "slurmctld did not start"; }
slurmd -f "$SLURM_CONF" || { logs; skip "slurmd did not start"; }

# Wait for the node to come up.
up=
for _ in $(seq 60); do
    if sinfo -h -o '%T' 2>/dev/null | grep -qE '^(idle|mixed|allocated)'; then up=1; break; fi
    sleep 1
done
[ -n "$up" ] || { sinfo 2>&1 || true; logs; skip "the Slurm node did not come up"; }

# The plan: 6 small points.
cat >"$TMP/work/plan.toml" <<'EOF'
gpu = "h800"
[[axis]]
key = "sms"
values = [4, 8, 16]
[[axis]]
key = "workload"
values = [
  { kind = "gemm", m = 256, n = 256, k = 128 },
  { kind = "fa3", heads = 2, kv_heads = 1, seqlen = 256, hdim = 64 },
]
[output]
plot = { metric = "cycles", x = "sms" }
EOF
cd "$TMP/work"
"$SIMFA" sweep plan.toml -o whole 2>/dev/null

JOB="$(sbatch --parsable --array=0-2 --cpus-per-task=1 --chdir="$TMP/work" \
    --output="$TMP/work/task-%a.log" --export="ALL,SIMFA=$SIMFA" \
    "$ROOT/examples/sweep/sweep.sbatch" plan.toml sharded)"
JOB="${JOB%%;*}"
echo "submitted array job $JOB (3 tasks)"
done_=
for _ in $(seq "$WAIT"); do
    if [ -z "$(squeue -h -j "$JOB" 2>/dev/null)" ]; then done_=1; break; fi
    sleep 1
done
if [ -z "$done_" ]; then
    squeue 2>&1 || true
    logs
    echo "FAILED: the array job did not finish within ${WAIT}s" >&2
    exit 1
fi
for i in 0 1 2; do
    if [ ! -s "sharded/shard-$i-of-3/points.jsonl" ]; then
        logs
        echo "FAILED: array task $i wrote no points" >&2
        exit 1
    fi
done
"$SIMFA" sweep merge merged sharded/shard-0-of-3 sharded/shard-1-of-3 sharded/shard-2-of-3 2>/dev/null
for f in points.jsonl points.csv plot.svg sweep.json; do
    cmp "whole/$f" "merged/$f" || { echo "FAILED: merged $f differs from the unsharded run" >&2; exit 1; }
done
echo "PASSED: Slurm array of 3 shards, merged = unsharded byte for byte ($(wc -l <whole/points.jsonl) points)"
