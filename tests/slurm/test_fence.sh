#!/bin/bash
# SPDX-License-Identifier: MIT
# MPI start-up under a real (local) Slurm with one slow rank, made
# deterministic (the README's test command failed once
# from a fresh clone when the first srun step's rank 0 died with SIGSEGV
# inside MPI_Init).
#
# The cause: with SLURM_PMIX_FENCE unset, Slurm's mpi/pmix plugin runs a
# data-less fence (Open MPI 4.1's MPI_Init barrier) on its tree algorithm,
# and with TreeWidth (default 50) above the step's node count its tree has
# no edges: each node completes the barrier with its own tasks.  The other
# node's ranks leave MPI_Init while a slow rank still waits in the modex
# fence, and their first message kills it in Open MPI's TCP transport (a
# call through the PML's not yet registered receive callback).  The
# plugin makes a ptrain step's fences take the ring algorithm
# (SLURM_PMIX_FENCE=ring), which needs every node.
#
# tests/slurm/fence_delay.so (LD_PRELOAD) holds rank 0's modex completion
# for HOLD seconds while the rank keeps polling its transports, as a rank
# of a loaded machine that is not scheduled; it logs when each rank's
# fences complete.  The barrier holds when no rank's barrier (fence 2)
# completes before rank 0's modex was released.
. "$top_srcdir/tests/lib.sh"
. "$top_srcdir/tests/slurm/slurm_lib.sh"
RUN="$top_builddir/ptrain-run"
SHIM="$top_builddir/tests/slurm/.libs/fence_delay.so"
[ -x "$RUN" ] || skip_all "ptrain-run not built yet ($RUN missing)"
[ -f "$SHIM" ] || skip_all "fence_delay.so not built ($SHIM missing: make check builds it)"
slurm_need
slurm_mpi
slurm_up 2 4
D=$SLURM_TEST_DIR
HOLD=3
ARGS="--model test --batch 4 --data synthetic --steps 2 --val-every 0"
PLUG="--ptrain-mode=1d --ptrain-tp=2 --ptrain-pp=1 --ptrain-sp=1 --ptrain-zero=0 --ptrain-model=test --ptrain-batch=4"

# held_start DESC [srun options]: 2 nodes x 2 tasks, rank 0's modex held;
# sets rc, released (when rank 0's modex completion reached Open MPI, ""
# if it never did) and early (the ranks whose barrier completed before
# that, "" when the barrier held).
held_start() {
    desc=$1; shift
    : >"$D/fence.log"
    rc=0
    timeout 120 srun --mpi=pmix -N2 --ntasks-per-node=2 "$@" \
        sh -c "LD_PRELOAD='$SHIM' PTRAIN_TEST_FENCE_DELAY=0:1:$HOLD PTRAIN_TEST_FENCE_LOG='$D/fence.log' exec '$RUN' $ARGS" \
        >"$D/f.out" 2>"$D/f.err" || rc=$?
    released=$(awk '$2 == 0 && $3 == "done" && $4 == 1 {print $1}' "$D/fence.log")
    # a rank 0 that died before its release is released never
    early=$(awk -v t="${released:-1e18}" '$3 == "done" && $4 == 2 && $1 < t {print $2}' "$D/fence.log" |
            sort -n | tr '\n' ' ')
    early=${early% }
}

# 1. A ptrain step (the plugin active): every fence waits for every node.
held_start "ptrain step" $PLUG
if [ -z "$released" ]; then
    not_ok "ptrain step: rank 0's modex was never released (status $rc)"
    diag "stderr: $(tail -n 5 "$D/f.err" | tr '\n' ' ')"
else
    check "ptrain step, rank 0 held ${HOLD} s in MPI_Init: no rank leaves the barrier before it (early: ${early:-none})" \
        [ -z "$early" ]
    check "ptrain step, rank 0 held ${HOLD} s in MPI_Init: the run completes (status $rc)" grep -q '^done:' "$D/f.out"
    [ $rc -eq 0 ] || diag "stderr: $(grep -v '^ *$' "$D/f.err" | tail -n 6 | tr '\n' ' ')"
fi

# 2. The job's own choice stands: SLURM_PMIX_FENCE=ring without the plugin.
export SLURM_PMIX_FENCE=ring
held_start "ring chosen by the job" --ptrain-mode=off
unset SLURM_PMIX_FENCE
check "SLURM_PMIX_FENCE=ring given by the job, plugin off: the barrier holds (early: ${early:-none})" \
    [ -n "$released" ] && [ -z "$early" ] && [ $rc -eq 0 ]

# 3. What the tasks see: ring for a ptrain step, the job's own value kept,
# nothing for a step without ptrain.
v=$(srun -N2 --ntasks-per-node=1 $PLUG sh -c 'echo "${SLURM_PMIX_FENCE:-unset}"' 2>/dev/null | sort -u | tr '\n' ' ')
check "a ptrain step's tasks see SLURM_PMIX_FENCE=ring ($v)" [ "$v" = "ring " ]
v=$(SLURM_PMIX_FENCE=mixed srun -N2 --ntasks-per-node=1 $PLUG sh -c 'echo "${SLURM_PMIX_FENCE:-unset}"' 2>/dev/null | sort -u | tr '\n' ' ')
check "SLURM_PMIX_FENCE=mixed set by the job is kept ($v)" [ "$v" = "mixed " ]
v=$(srun -N2 --ntasks-per-node=1 --ptrain-mode=off sh -c 'echo "${SLURM_PMIX_FENCE:-unset}"' 2>/dev/null | sort -u | tr '\n' ' ')
check "a step without ptrain is left alone ($v)" [ "$v" = "unset " ]

# 4. What Slurm does by itself here (no plugin, no setting): a record, not
# a check, as a later Slurm may fix its tree.
held_start "Slurm's default" --ptrain-mode=off
if [ -n "$early" ]; then
    diag "without SLURM_PMIX_FENCE, Slurm's barrier let ranks $early leave MPI_Init before rank 0 (status $rc$(grep -q 'Segmentation fault' "$D/f.err" && echo ', rank 0 SIGSEGV'))"
else
    diag "without SLURM_PMIX_FENCE, Slurm's barrier held here (status $rc)"
fi
done_testing
