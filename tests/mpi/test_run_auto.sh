#!/bin/sh
# SPDX-License-Identifier: MIT
# ptrain-run --mode auto under plain mpirun (no plugin plan): it plans
# through pt_plan_resolve from the job's nodes, the node model (--topology)
# and the model/batch, so it must choose exactly the plan ptrain-plan
# chooses for the same machine, model and batch (both print the plan
# summary: compared as text).  Pins (--tp, --pp, --zero, --rank-order)
# constrain the search; a request no plan satisfies is one line with exit status 2; the
# auto plan trains to the same first loss as a hand-written layout.
. "$top_srcdir/tests/lib.sh"
need_run
plan="$top_builddir/ptrain-plan"
[ -x "$plan" ] || skip_all "ptrain-plan not built"
need_mpirun
workdir
out="$wd/out"
fx="$top_srcdir/tests/topo"
fresh_seed
diag "data seed $seed"

# same NP TOPO MODEL BATCH [PIN FLAGS...]: ptrain-run's auto plan (rank 0's
# dry-run line) against ptrain-plan's PTRAIN_PLAN for 1 node x NP tasks.
# Pins are given to both in the same --flag N form.
same() {
    np=$1; topo=$2; model=$3; batch=$4; shift 4
    rc=0
    ptrain_mpirun -np "$np" "$run" --mode auto --topology "$fx/$topo" --model "$model" --batch "$batch" \
        --dry-run "$@" >"$out" 2>&1 || rc=$?
    got=$(sed -n 's/^rank 0\/[0-9]* .* plan=//p' "$out")
    want=$("$plan" --topology "$fx/$topo" --nodes 1 --tasks-per-node "$np" --model "$model" --batch "$batch" \
        --env "$@" 2>&1 | sed -n 's/^PTRAIN_PLAN=//p')
    if [ "$rc" -eq 0 ] && [ -n "$got" ] && [ "$got" = "$want" ]; then
        ok "auto on $np ranks, $topo, $model, batch $batch${*:+ ($*)}: $got"
    else
        not_ok "auto on $np ranks, $topo, $model, batch $batch${*:+ ($*)}: ptrain-run '$got' (status $rc), ptrain-plan '$want'"
        sed 's/^/# /' "$out" | tail -5
    fi
}
same 4 cpu2s.xml tiny 8
same 4 cpu2s.xml test 8 --pp 2
same 2 cpu2s.xml tiny 8 --zero 1
same 8 dgx8-nvswitch.xml gpt2-124M 64
same 4 cpu2s.xml test 16 --pp 2 --schedule gpipe
same 6 build-machine.xml test 12 --tp 2

# every rank computes the same plan: the last dry run (6 ranks) lists one
# plan for all six
check "every rank of an auto run holds the same plan" \
    test "$(grep -c '^rank [0-9]*/6 ' "$out")" -eq 6 -a \
    "$(sed -n 's/^rank [0-9]*\/6 .* plan=//p' "$out" | sort -u | wc -l)" -eq 1

# nodes by SLURM_NODEID when every rank has one (fake Slurm nodes share a
# host): 4 ranks as 2 nodes x 2 tasks plan as ptrain-plan's 2 x 2
rc=0
ptrain_mpirun -np 4 sh -c 'SLURM_NODEID=$((OMPI_COMM_WORLD_RANK / 2)) exec "$0" "$@"' "$run" --mode auto \
    --topology "$fx/cpu2s.xml" --model tiny --batch 8 --dry-run --explain >"$out" 2>&1 || rc=$?
got=$(sed -n 's/^rank 0\/[0-9]* .* plan=//p' "$out")
want=$("$plan" --topology "$fx/cpu2s.xml" --nodes 2 --tasks-per-node 2 --model tiny --batch 8 --env 2>&1 |
    sed -n 's/^PTRAIN_PLAN=//p')
check "SLURM_NODEID 0,0,1,1: auto plans for 2 nodes x 2 tasks, as ptrain-plan ($got)" \
    sh -c "[ $rc -eq 0 ] && grep -q '^machine: 2 nodes x 2 tasks' '$out' && [ -n '$got' ] && [ '$got' = '$want' ]"

# mixed nodes under plain mpirun (ptrain-run plans auto exactly
# as the plugin, whose node_models name each node's model, and ptrain-plan
# do): --topology FILE:COUNT once per kind, in node order; the nodes of
# SLURM_NODEID 0 and 1 are a cpu2s node and a build-machine node, so the
# plan is priced at the build machine's slower rates and --explain names
# the limiting node.  (Before, a second --topology replaced the first and
# FILE:COUNT was taken for a file name.)
rc=0
ptrain_mpirun -np 4 sh -c 'SLURM_NODEID=$((OMPI_COMM_WORLD_RANK / 2)) exec "$0" "$@"' "$run" --mode auto \
    --topology "$fx/cpu2s.xml:1" --topology "$fx/build-machine.xml:1" --model tiny --batch 8 --dry-run --explain \
    >"$out" 2>&1 || rc=$?
got=$(sed -n 's/^rank 0\/[0-9]* .* plan=//p' "$out")
want=$("$plan" --topology "$fx/cpu2s.xml:1" --topology "$fx/build-machine.xml:1" --tasks-per-node 2 --model tiny \
    --batch 8 --env 2>&1 | sed -n 's/^PTRAIN_PLAN=//p')
check "mixed nodes cpu2s:1 + build-machine:1: auto plans as ptrain-plan ($got)" \
    sh -c "[ $rc -eq 0 ] && [ -n '$got' ] && [ '$got' = '$want' ]"
check "mixed nodes: --explain names the build machine as the limiting node" \
    sh -c "grep '^limiting node: ' '$out' | grep -q 'build-machine.xml for compute'"
[ "$rc" -eq 0 ] || sed 's/^/# /' "$out" | tail -5
# the counts must add up to the job's nodes, and each kind needs one
for args in "cpu2s.xml:1 build-machine.xml:2|add up to 3 nodes, but the job runs on 2" \
    "cpu2s.xml:1 build-machine.xml|each needs its node count" "cpu2s.xml:0|COUNT nodes 1..1048576"; do
    want=${args#*|}
    set -- $(for f in ${args%|*}; do printf ' --topology %s' "$fx/$f"; done)
    rc=0
    ptrain_mpirun -np 4 sh -c 'SLURM_NODEID=$((OMPI_COMM_WORLD_RANK / 2)) exec "$0" "$@"' "$run" --mode auto "$@" \
        --model tiny --batch 8 --dry-run >"$out" 2>&1 || rc=$?
    check "mixed nodes: --topology ${args%|*} refused in one line saying '$want'" \
        sh -c "[ $rc -eq 2 ] && [ \$(grep -c 'ptrain-run: error' '$out') -eq 1 ] && grep 'ptrain-run: error' '$out' | grep -q -- '$want'"
done

# a pinned rank order is the search's placement (priced with it), not an
# order put over the search's choice afterwards: --explain's winner has it
rc=0
ptrain_mpirun -np 4 "$run" --mode auto --rank-order spread --topology "$fx/cpu2s.xml" --model test --batch 8 --pp 2 \
    --dry-run --explain >"$out" 2>&1 || rc=$?
got=$(sed -n 's/^rank 0\/[0-9]* .* plan=//p' "$out")
check "--mode auto --rank-order spread plans with TPD ($got)" \
    sh -c "[ $rc -eq 0 ] && echo '$got' | grep -q 'order=TPD' && grep '^[*] ' '$out' | grep -q ' TPD '"

# PTRAIN_MODE=auto without the plugin's PTRAIN_PLAN plans too
rc=0
PTRAIN_MODE=auto ptrain_mpirun -np 4 "$run" --topology "$fx/cpu2s.xml" --model tiny --batch 8 --dry-run \
    >"$out" 2>&1 || rc=$?
got=$(sed -n 's/^rank 0\/[0-9]* .* plan=//p' "$out")
want=$("$plan" --topology "$fx/cpu2s.xml" --nodes 1 --tasks-per-node 4 --model tiny --batch 8 --env |
    sed -n 's/^PTRAIN_PLAN=//p')
check "PTRAIN_MODE=auto (no PTRAIN_PLAN) plans as ptrain-plan ($got)" test "$rc" -eq 0 -a -n "$got" -a "$got" = "$want"

# --explain prints the search's table and its one line on why
rc=0
ptrain_mpirun -np 4 "$run" --mode auto --topology "$fx/cpu2s.xml" --model tiny --batch 8 --dry-run --explain \
    >"$out" 2>&1 || rc=$?
check "--explain prints the machine, the chosen plan and why" \
    sh -c "[ $rc -eq 0 ] && grep -q '^machine: 1 node x 4 tasks' '$out' && grep -q '^why: ' '$out' && grep -q '^plan: mode=' '$out'"

# bad auto requests: one line, exit status 2
bad() {
    desc=$1; want=$2; shift 2
    rc=0
    ptrain_mpirun -np 4 "$run" --model tiny --batch 8 --dry-run "$@" >"$out" 2>&1 || rc=$?
    lines=$(grep -c "ptrain-run: error" "$out")
    if [ "$rc" -ne 0 ] && [ "$lines" -eq 1 ] && grep "ptrain-run: error" "$out" | grep -q -- "$want"; then
        ok "$desc: refused in one line ($(grep -m1 'ptrain-run: error' "$out" | cut -c1-160))"
    else
        not_ok "$desc: expected one line with '$want' (status $rc, $lines error lines)"; sed 's/^/# /' "$out" | tail -5
    fi
}
bad "--mode auto --tp 3 on 4 ranks" "--mode auto: --tp=3 does not divide the 4 tasks of the step (valid tp here: 1, 2, 4)" \
    --mode auto --tp 3 --topology "$fx/cpu2s.xml"
bad "--mode auto --zero 1 --tp 4 (nothing to shard)" "zero=1 with dp=1 sp=1" \
    --mode auto --tp 4 --zero 1 --topology "$fx/cpu2s.xml"
bad "--mode auto --topology of a missing file" "--mode auto: cannot load the node model" \
    --mode auto --topology "$fx/no-such-model.json"
bad "--mode auto --dp 3 on 4 ranks" "not --dp 3" --mode auto --dp 3 --topology "$fx/cpu2s.xml"

# a plan the SPANK plugin made (PTRAIN_PLAN with its PTRAIN_MODEL and
# PTRAIN_BATCH) is for one model and batch: ptrain-run trains them, and
# the start-up agreement refuses other ones (exit 2, one line naming both)
plugin_env="PTRAIN_PLAN=mode=1d_dp=4 PTRAIN_MODE=1d PTRAIN_DP=4 PTRAIN_TP=1 PTRAIN_PP=1 PTRAIN_SP=1 PTRAIN_MODEL=test PTRAIN_BATCH=8"
rc=0
# shellcheck disable=SC2086
(export $plugin_env; ptrain_mpirun -np 4 "$run" --data synthetic --dry-run) >"$out" 2>&1 || rc=$?
check "a plugin plan for test/8, ptrain-run given neither: it runs (exit $rc)" [ "$rc" -eq 0 ]
for flags in "--batch 16" "--model tiny" "--model test --vocab 512"; do
    rc=0
    # shellcheck disable=SC2086
    (export $plugin_env; ptrain_mpirun -np 4 "$run" --data synthetic --dry-run $flags) >"$out" 2>&1 || rc=$?
    check "a plugin plan for test/8, ptrain-run $flags: refused at start-up, exit 2, one line ($(grep -m1 'ptrain-run: error' "$out" | cut -c1-120))" \
        sh -c "[ $rc -eq 2 ] && [ \$(grep -c 'ptrain-run: error' '$out') -eq 1 ] &&
            grep -q 'was made for model L=2 H=4 C=64 T=32 V=50257 (PTRAIN_MODEL=test) and global batch 8' '$out'"
done

# the auto plan trains: its first loss is the one of a 1d tp=4 run
first_loss() {
    rc=0
    ptrain_mpirun -np 4 "$run" --model test --data "synthetic:$seed" --steps 1 --batch 8 --val-every 0 "$@" \
        >"$out" 2>&1 || rc=$?
    loss=$(sed -n 's/^step *1\/1 | loss \([0-9.]*\).*/\1/p' "$out")
    [ "$rc" -eq 0 ] || { loss=""; sed 's/^/# /' "$out" | tail -5; }
}
first_loss --mode auto --topology "$fx/cpu2s.xml"; la=$loss
auto_plan=$(sed -n 's/^plan: \(.*\) (source: auto,.*/\1/p' "$out")
first_loss --mode 1d --tp 4; l1=$loss
check "the auto plan ($auto_plan) trains to the first loss of 1d tp=4 ($la, $l1)" \
    test -n "$la" -a -n "$auto_plan" -a "$la" = "$l1"
done_testing
