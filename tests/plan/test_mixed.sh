#!/bin/sh
# SPDX-License-Identifier: MIT
# Mixed nodes in ptrain-plan: a cluster of two node models
# (--topology FILE:COUNT, twice) plans at the slowest node's rates, sizes
# pipeline stages that sit on nodes of different speeds by D'Hondt's
# method, names the node that limits the step, and refuses when asked to
# (--mixed-nodes refuse).  The human-readable output is a golden file
# (mixed-dgx8x1-h100x8-gpt2.plan); this checks the JSON and the refusals.
. "$top_srcdir/tests/lib.sh"
plan="$top_builddir/ptrain-plan"
[ -x "$plan" ] || skip_all "ptrain-plan not built"
need_jq
workdir
fx="$top_srcdir/tests/topo"
a="$fx/dgx8-nvswitch.xml" b="$fx/h100-vm.xml"

"$plan" --topology "$a:1" --topology "$b:8" --model gpt2-124M --batch 64 --json >"$wd/j" 2>"$wd/e"
check "two kinds: planned (exit 0)" [ $? -eq 0 ]
check "JSON: 9 nodes, the kinds with their node counts (1 and 8) and tasks 8 + 8 x 1" \
    jq -e '.nodes == 9 and (.kinds | length) == 2 and .kinds[0].nodes == 1 and .kinds[1].nodes == 8
        and .tasks_per_node == [8,1,1,1,1,1,1,1,1]' "$wd/j"
# the synchronous groups' rates: the least GEMM rate (the A100's), the
# least network per rank (the VMs' 1.25 GB/s), figure by figure
check "JSON: hw is the slowest of each figure (A100's GEMM, the VMs' network)" \
    jq -e '.hw.gemm_gflops == ([.kinds[].hw.gemm_gflops] | min) and .hw.gbps.network == ([.kinds[].hw.gbps.network] | min)
        and .hw.gemm_gflops < .kinds[1].hw.gemm_gflops' "$wd/j"
check "JSON: the limit names the node for compute and for the network" \
    jq -e '(.limit | test("dgx8-nvswitch.xml for compute")) and (.limit | test("h100-vm.xml for the network"))' "$wd/j"
# a pipeline whose stages sit on both kinds (PDT: stage 0 on the A100
# node, stage 1 on the VMs) is split by D'Hondt: the H100 stage gets more
# (at 512 sequences, where compute outweighs the gradient sum that the
# larger stage adds over the VMs' slow network)
"$plan" --topology "$a:1" --topology "$b:8" --model gpt2-124M --batch 512 --pp 2 --rank-order PDT --json \
    >"$wd/j2" 2>"$wd/e2"
split=$(jq -r '.best.pp_split' "$wd/j2")
check "pp=2 PDT over an A100 and H100 stage: D'Hondt's split gives the H100 stage more layers ($split)" \
    sh -c "jq -e '(.best.pp_split | split(\",\") | map(tonumber)) as \$s | \$s[1] > \$s[0] and (.limit | test(\"D.Hondt\"))' '$wd/j2' >/dev/null"
# one kind is the identical-node cluster of before (no kinds, no limit)
"$plan" --topology "$a:2" --model gpt2-124M --batch 64 --json >"$wd/j1" 2>/dev/null
"$plan" --topology "$a" --nodes 2 --model gpt2-124M --batch 64 --json >"$wd/j0" 2>/dev/null
check "one --topology FILE:2 plans as --topology FILE --nodes 2" \
    sh -c "[ -s '$wd/j1' ] && [ \"\$(jq -c 'del(.topology)' '$wd/j1')\" = \"\$(jq -c 'del(.topology)' '$wd/j0')\" ] &&
        ! jq -e 'has(\"kinds\")' '$wd/j1' >/dev/null"

# refusals: one line, status 2
refused() {
    desc=$1 want=$2
    shift 2
    rc=0
    "$plan" "$@" >"$wd/o" 2>"$wd/e" || rc=$?
    check "$desc: exit 2, one line ($(head -c 160 "$wd/e"))" \
        sh -c "[ $rc -eq 2 ] && [ \$(wc -l <'$wd/e') -eq 1 ] && grep -q -- '$want' '$wd/e'"
}
refused "--mixed-nodes refuse" "mixed_nodes=refuse" --topology "$a:1" --topology "$b:8" --mixed-nodes refuse
refused "two --topology without counts" "each needs its node count" --topology "$a" --topology "$b"
refused "--nodes against the counts" "add up to 9 nodes" --topology "$a:1" --topology "$b:8" --nodes 4
refused "a count of 0" "FILE:COUNT" --topology "$a:0"
done_testing
