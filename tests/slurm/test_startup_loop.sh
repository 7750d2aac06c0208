#!/bin/bash
# SPDX-License-Identifier: MIT
# Many MPI start-ups under a real (local) Slurm, with load beside them:
# the first step of fresh clusters (where the README's test command once
# died: rank 0 SIGSEGV inside MPI_Init) and steps on a warm one.  Each
# start is a ptrain step (the plugin active) of 2 nodes x 2 tasks running
# ptrain-run for one step; a start that does not print "done:" is a
# failure, whatever killed it.  The crash count is printed (0 expected);
# test_fence.sh holds the cause deterministically, this is the release
# pass's measure of the whole start-up.
#   PTRAIN_STARTUP_FRESH=N  fresh clusters (default 6)
#   PTRAIN_STARTUP_WARM=N   steps on one warm cluster (default 12)
#   PTRAIN_STARTUP_LOAD=N   busy processes beside them (default 2)
. "$top_srcdir/tests/lib.sh"
. "$top_srcdir/tests/slurm/slurm_lib.sh"
RUN="$top_builddir/ptrain-run"
[ -x "$RUN" ] || skip_all "ptrain-run not built yet ($RUN missing)"
slurm_need
slurm_mpi
for v in $(env | sed -n 's/^\(SLURM_[A-Za-z0-9_]*\)=.*/\1/p'); do unset "$v"; done
unset PTRAIN_MODE PTRAIN_TP PTRAIN_VERBOSE PTRAIN_MODEL PTRAIN_BATCH PTRAIN_EXPLAIN
FRESH=${PTRAIN_STARTUP_FRESH:-6}
WARM=${PTRAIN_STARTUP_WARM:-12}
LOAD=${PTRAIN_STARTUP_LOAD:-2}
PLUG="--ptrain-mode=1d --ptrain-tp=2 --ptrain-pp=1 --ptrain-sp=1 --ptrain-zero=0 --ptrain-model=test --ptrain-batch=4"
ARGS="--model test --batch 4 --data synthetic --steps 1 --val-every 0 --val-batches 1"

W=$(mktemp -d /tmp/ptrain-startup.XXXXXX) || skip_all "mktemp failed"
clusters=()
burners=()
cleanup() {
    local c p
    for p in "${burners[@]+"${burners[@]}"}"; do kill "$p" 2>/dev/null; done
    for c in "${clusters[@]+"${clusters[@]}"}"; do "$top_srcdir/scripts/local-slurm.sh" down "$c" >/dev/null 2>&1; done
    rm -rf "$W"
}
trap cleanup EXIT
trap 'exit 1' INT TERM

cluster_up() { # DIR: start a 2-node cluster with this tree's plugin
    PTRAIN_SPANK_PLUGIN="$PTRAIN_SPANK_SO" "$top_srcdir/scripts/local-slurm.sh" up "$1" 2 4 >"$1.up.log" 2>&1
}

starts=0 crashes=0
# one_start DIR TAG: one step on the cluster under DIR
one_start() {
    local rc=0
    (. "$1/env.sh"; cd "$W" && timeout 120 srun --mpi=pmix $PLUG -N2 --ntasks-per-node=2 "$RUN" $ARGS \
        >"$W/s.out" 2>"$W/s.err") || rc=$?
    starts=$((starts + 1))
    if ! grep -q '^done:' "$W/s.out"; then
        crashes=$((crashes + 1))
        diag "$2: start $starts failed (status $rc): $(grep -v '^ *$' "$W/s.err" | head -n 6 | tr '\n' ' ' | cut -c1-400)"
    fi
}

for i in $(seq "$LOAD"); do
    (while :; do :; done) &
    burners+=($!)
done
for i in $(seq "$FRESH"); do
    c="$W/fresh$i"
    clusters+=("$c")
    if ! cluster_up "$c"; then
        echo "Bail out! local Slurm did not start: $(tail -n 3 "$c.up.log" | tr '\n' ' ')"
        exit 1
    fi
    one_start "$c" "fresh cluster $i"
    "$top_srcdir/scripts/local-slurm.sh" down "$c" >/dev/null 2>&1
done
fresh_crashes=$crashes
c="$W/warm"
clusters+=("$c")
cluster_up "$c" || { echo "Bail out! local Slurm did not start: $(tail -n 3 "$c.up.log" | tr '\n' ' ')"; exit 1; }
for i in $(seq "$WARM"); do one_start "$c" "warm cluster"; done
diag "start-ups: $starts ($FRESH first steps of fresh clusters, $WARM on a warm one, $LOAD busy processes beside); failed: $crashes ($fresh_crashes on fresh clusters)"
check "$starts MPI start-ups under srun, $LOAD busy processes beside: $crashes failed" [ "$crashes" -eq 0 ]
done_testing
