#!/bin/bash
# SPDX-License-Identifier: MIT
# The start-up agreement under a real (local) Slurm: 2 fake nodes x 2 tasks,
# the plugin injects 1d dp=2 tp=2 (pinned: --ptrain-tp=2, pp, sp and ZeRO
# fixed, so the planner's choice cannot move it).  On node 1 the
# tasks see a different plan (the PTRAIN_* variables a differently
# configured node would inject), or a bad value: every rank must exit with
# status 2 and rank 0 print one line naming the ranks and fields, never
# hang (tests/mpi/test_startup.sh's first two cases under srun).
. "$top_srcdir/tests/lib.sh"
. "$top_srcdir/tests/slurm/slurm_lib.sh"
RUN="$top_builddir/ptrain-run"
[ -x "$RUN" ] || skip_all "ptrain-run not built yet ($RUN missing)"
slurm_need
slurm_mpi
slurm_up 2 4
D=$SLURM_TEST_DIR
ARGS="--data synthetic --steps 2 --val-every 0"
PLUG="--ptrain-mode=1d --ptrain-tp=2 --ptrain-pp=1 --ptrain-sp=1 --ptrain-zero=0 --ptrain-model=test --ptrain-batch=4"

# on_node1 'VAR=VALUE ...' DESC PATTERN
on_node1() {
    setenv=$1; desc=$2; pat=$3
    rc=0
    timeout 120 srun --mpi=pmix $PLUG -N2 --ntasks-per-node=2 \
        sh -c "[ \"\$SLURM_NODEID\" = 1 ] && export $setenv; exec '$RUN' $ARGS" \
        >"$D/a.out" 2>"$D/a.err" || rc=$?
    n=$(grep -c 'ptrain-run: error' "$D/a.err")
    if [ "$rc" -eq 124 ]; then
        not_ok "$desc: the step hung"
    elif [ "$rc" -ne 0 ] && [ "$n" -eq 1 ] && grep -q -- "$pat" "$D/a.err" && ! grep -q '^step' "$D/a.out"; then
        ok "$desc: srun exits $rc; $(grep -m1 'ptrain-run: error' "$D/a.err" | cut -c1-200)"
    else
        not_ok "$desc: expected one error line matching '$pat' (status $rc, $n lines)"
        diag "stdout: $(tail -n 3 "$D/a.out" | tr '\n' ' ')"
        diag "stderr: $(tail -n 5 "$D/a.err" | tr '\n' ' ')"
    fi
}
on_node1 "PTRAIN_TP=1 PTRAIN_DP=4" "node 1 holds plan tp=1 dp=4" \
    "ranks disagree at start-up: plan dp: ranks 2, 3 have (first) 4, rank 0 has 2; plan tp: ranks 2, 3 have (first) 1, rank 0 has 2"
on_node1 "PTRAIN_TP=abc" "node 1 has PTRAIN_TP=abc" \
    "rank 2: invalid PTRAIN_TP='abc'.*start-up failed on ranks 2, 3 of 4"
rc=0
timeout 120 srun --mpi=pmix $PLUG -N2 --ntasks-per-node=2 "$RUN" $ARGS >"$D/ok.out" 2>"$D/ok.err" || rc=$?
check "the same plan on both nodes trains (status $rc)" grep -q '^done:' "$D/ok.out"
done_testing
