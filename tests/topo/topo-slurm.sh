#!/bin/sh
# SPDX-License-Identifier: MIT
# ptrain-topo --probe-quick across two fake nodes of a throw-away local
# Slurm (scripts/local-slurm.sh): the probe sees 2 nodes, measures an
# inter-node pair, and its allreduce numbers are consistent.  No speed is
# asserted.
. "$top_srcdir/tests/lib.sh"
T="$top_builddir/ptrain-topo"
LS="$top_srcdir/scripts/local-slurm.sh"
[ -x "$T" ] || skip_all "ptrain-topo not built"
[ -f "$LS" ] || skip_all "scripts/local-slurm.sh not present"
command -v srun >/dev/null 2>&1 || skip_all "srun not installed"
tmp=$(mktemp -d /tmp/ptrain-topo-slurm.XXXXXX) || exit 1
cleanup() { bash "$LS" down "$tmp/slurm" >/dev/null 2>&1; rm -rf "$tmp"; }
trap cleanup EXIT INT TERM
unset PTRAIN_TOPOLOGY

PTRAIN_SPANK_PLUGIN=none bash "$LS" up "$tmp/slurm" 2 2 > "$tmp/up.log" 2>&1
rc=$?
[ $rc -eq 3 ] && { cat "$tmp/up.log" | sed 's/^/# /'; skip_all "Slurm or munge packages missing"; }
if [ $rc -ne 0 ]; then
    sed 's/^/# /' "$tmp/up.log"
    not_ok "local Slurm starts"
    done_testing; exit 1
fi
ok "local Slurm with 2 fake nodes starts"
. "$tmp/slurm/env.sh"

# MPI ranks under ASan: no leak detection (see ptrain_mpirun in tests/lib.sh)
ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" timeout 120 srun --mpi=pmix -N2 --ntasks-per-node=1 "$T" --probe-quick --save "$tmp/probe.json" > "$tmp/out" 2> "$tmp/err"
rc=$?
check "srun -N2 ptrain-topo --probe-quick exits 0" [ $rc -eq 0 ]
[ $rc -ne 0 ] && sed 's/^/# /' "$tmp/err"
check "one report for the job" [ "$(grep -c '^Node ' "$tmp/out")" -eq 1 ]
check "report shows the inter-node pair" grep -q 'across nodes  : latency' "$tmp/out"

if [ -s "$tmp/probe.json" ]; then
python3 - "$tmp/probe.json" <<'PY'
import json, sys
n = json.load(open(sys.argv[1]))["net"]
t = [4]
def ok(c, m):
    t[0] += 1
    print(("ok" if c else "not ok"), "%d - %s" % (t[0], m))
ok(n["ranks"] == 2 and n["nodes"] == 2, "2 ranks on 2 nodes (SLURM_NODEID tells the fake nodes apart)")
ok(sorted(n["node_names"].split(",")) == ["n1", "n2"], "node names n1,n2 (%s)" % n["node_names"])
ok(n["inter_latency_us"] > 0 and n["inter_gbps"] > 0, "inter-node latency and bandwidth are positive")
ok(n["intra_gbps"] == 0, "no intra-node pair with one task per node")
ok(abs(n["allreduce_busbw_gbps"] - n["allreduce_algbw_gbps"]) <= 1e-9 * n["allreduce_algbw_gbps"], "busbw = algbw * 2(p-1)/p = algbw for p = 2")
# per link class: one rank per node has no node class; the network class
# is the all-ranks fit (the same ranks), every kind timed
cc = n.get("collectives_by_class", {})
co = n.get("collectives", {})
kinds = ["allreduce", "reduce_scatter", "allgather", "broadcast", "reduce", "p2p"]
w = cc.get("network", {})
ok(set(cc) == {"network"} and w.get("ranks") == 2 and w.get("bytes") == co.get("bytes")
   and all(w[k] == co[k] and min(w[k]["time_us"]) > 0 for k in kinds),
   "per link class: the network's fit at 2 ranks (the all-ranks fit), no node class (%s)" % sorted(cc))
PY
else
    for i in 5 6 7 8 9 10; do echo "not ok $i - no probe.json"; done
fi
tap_n=$((tap_n + 6))
done_testing
