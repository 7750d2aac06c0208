#!/bin/bash
# SPDX-License-Identifier: MIT
# A rank that dies or stops mid-run under a real (local) Slurm (the
# watchdog): the other ranks must end within 30 s with one line naming it,
# never hang.  Without --kill-on-bad-exit, srun leaves the survivors of a
# SIGKILLed rank running, and with one task per node Open MPI's TCP
# transport only reports "peer process has unexpectedly disconnected" and
# waits in the collective for good (seen before the heartbeat): ptrain-run's
# heartbeat (PTRAIN_HEARTBEAT, default 15 s) is what ends them.  A stopped
# rank is noticed by nothing else at all; there srun -K ends the stopped
# task once rank 0 has left with status 3, and without -K rank 0's
# MPI_Abort makes Slurm kill the step.  The 30 s are a deadline for a
# hang, not a speed measurement.
. "$top_srcdir/tests/lib.sh"
. "$top_srcdir/tests/slurm/slurm_lib.sh"
RUN="$top_builddir/ptrain-run"
[ -x "$RUN" ] || skip_all "ptrain-run not built yet ($RUN missing)"
slurm_need
slurm_mpi
slurm_up 2 4
D=$SLURM_TEST_DIR
# these steps run without the plugin's plan: the job chooses the ring
# fence itself (ptrain_spank(8), MPI START-UP; tests/slurm/test_fence.sh)
export SLURM_PMIX_FENCE=ring
seed=$(( $(date +%s) % 100000 ))
diag "data seed $seed"
# (leak checks off for MPI processes, as ptrain_mpirun does)
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"

# pid of task RANK of the running step whose command line holds TAG
task_pid() {
    local p
    for p in $(pgrep -f -- "$2"); do
        tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qx "SLURM_PROCID=$1" && { echo "$p"; return; }
    done
}

# peer SIGNAL RANK DESC PATTERN [srun options]: 2 nodes x 1 task, a long
# run; once it steps, send SIGNAL to task RANK; the step must end within
# 30 s and stderr hold one line matching PATTERN.
n=0
peer() {
    sig=$1; victim_rank=$2; desc=$3; pat=$4; shift 4
    n=$((n + 1))
    tag="synthetic:$((seed * 10 + n))"
    : >"$D/p.out"
    : >"$D/p.err"
    timeout 300 srun --mpi=pmix -N2 --ntasks-per-node=1 "$@" "$RUN" --model test --data "$tag" \
        --steps 1000000 --batch 4 --val-every 0 >"$D/p.out" 2>"$D/p.err" &
    sp=$!
    i=0
    while [ $i -lt 240 ] && kill -0 $sp 2>/dev/null && ! grep -q '^step' "$D/p.out"; do sleep 0.5; i=$((i + 1)); done
    victim=$(task_pid "$victim_rank" "$tag")
    if [ -z "$victim" ]; then
        not_ok "$desc: task $victim_rank not found (the job did not start stepping?)"
        diag "stderr: $(tail -n 3 "$D/p.err" | tr '\n' ' ')"
        kill $sp 2>/dev/null; wait $sp 2>/dev/null; return
    fi
    start=$(date +%s)
    kill -s "$sig" "$victim"
    while [ $(( $(date +%s) - start )) -lt 30 ] && kill -0 $sp 2>/dev/null; do sleep 0.5; done
    took=$(( $(date +%s) - start ))
    if kill -0 $sp 2>/dev/null; then
        not_ok "$desc: the step still runs 30 s after task $victim_rank got SIG$sig"
        diag "stderr: $(grep -v '^ *$' "$D/p.err" | tail -n 4 | tr '\n' ' ')"
        kill -9 "$victim" 2>/dev/null; scancel --signal=KILL "$(squeue -h -o %i | head -n 1)" 2>/dev/null
    elif [ "$(grep -c -- "$pat" "$D/p.err")" -eq 1 ]; then
        ok "$desc: the step ended after ${took} s: $(grep -m1 -- "$pat" "$D/p.err" | cut -c1-170)"
    else
        not_ok "$desc: expected one line matching '$pat'"
        diag "stderr: $(grep -v '^ *$' "$D/p.err" | tail -n 6 | tr '\n' ' ')"
    fi
    kill -CONT "$victim" 2>/dev/null
    kill -9 "$victim" 2>/dev/null
    wait $sp 2>/dev/null
}

# (when the broken connection also stalls the heartbeat thread inside MPI,
# its MPI-free guard ends the rank instead, with its own line)
peer KILL 1 "rank 1 SIGKILLed (srun without --kill-on-bad-exit)" \
    "ptrain-run: error: rank 0: \(rank 1 (host n2) sent no heartbeat for [0-9]* s: it died or hangs\|the heartbeat has been stuck inside MPI\)"
peer KILL 0 "rank 0 SIGKILLed" \
    "ptrain-run: error: rank 1: rank 0 (host n1) sent no heartbeat for [0-9]* s: it died or hangs"
peer STOP 1 "rank 1 stopped (SIGSTOP), srun -K" \
    "ptrain-run: error: rank 0: rank 1 (host n2) sent no heartbeat for [0-9]* s: it died or hangs" -K
# without -K (Slurm's default): rank 0 aborts the whole job, so Slurm kills
# the stopped task too (the step once stayed RUNNING > 300 s)
peer STOP 1 "rank 1 stopped (SIGSTOP), srun without -K" \
    "ptrain-run: error: rank 0: rank 1 (host n2) sent no heartbeat for [0-9]* s: it died or hangs"
done_testing
