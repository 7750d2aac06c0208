#!/bin/sh
# SPDX-License-Identifier: MIT
# bench_plan.sh: the cost model's predicted step time (lib/plan/cost.c)
# against ptrain-run's measured step time, for plans at 4 and 8 ranks,
# and the Spearman rank correlation between the two (the planner must
# order plans as the machine does, >= 0.8).
#
# Run from the build directory after `make && make tests/plan/cost_eval`:
#   sh ../../bench/bench_plan.sh            (MODEL=L,H,C,T,V  BATCH=N  STEPS=N  ROUNDS=N)
# It takes no arguments but -h/--help; the settings come from the environment.
# Not part of make check: it times things.
#
# Calibration, in the same run:
#   GEMM rate   1-rank ptrain-runs of the same model at two microbatch
#               sizes, the whole batch (n1 = BATCH*T rows per GEMM) and one
#               sequence (n2 = T rows; PTRAIN_MICROBATCHES=BATCH):
#               the mean gflops_per_rank of their steps after the first
#               (model FLOPs / time, so the rate includes the non-GEMM
#               work), the best of ROUNDS runs of each (the two sizes in
#               turn, so that both see the same load), one core's;
#               Hockney's rate(n) = r_inf n / (n + n_half) through both
#               (1/rate is linear in 1/n), pt_hw.gemm_gflops = r_inf and
#               pt_hw.gemm_n_half = n_half (no size effect measured: n_half
#               0 and the whole batch's rate);
#   sharing     np ranks on fewer cores: pt_hw.ranks_per_core = np / cores
#               (each rank gets a share of a core, a waiting pipeline rank
#               gives its core to the others: see cost.h);
#   links       ptrain-topo --probe-quick under mpirun -np NP: the alpha
#               (latency) and 1/beta (bandwidth per rank) of one ring step,
#               fitted through its allreduce at two sizes (the node model's
#               net.ring_step_latency_us and net.ring_gbps, which
#               ptrain-plan's pt_topo_plan_hw uses too), so both include the
#               ranks' contention; the ping-pong's when there is no fit;
#               and each collective kind's alpha and bus bandwidth
#               (net.collectives: allreduce, reduce-scatter, allgather,
#               broadcast, reduce, p2p), the best of the rounds per kind;
#               and the busy delay (pt_hw.busy_delay_s): its pair allreduce
#               while half the ranks compute less the same with every rank
#               communicating, for each pipeline send on shared cores, as ptrain-plan --json reports it (hw), with
#               the ranks per core.
# Measured: the mean step_ms of rank 0 over steps 2..STEPS (default 16;
# a run's start-up costs more than its steps, so more steps are cheap
# and average the scheduler's noise out; the first
# warms caches; one step's time alone is not the rate: ranks drift
# between the collectives, the sum of consecutive steps is), the least
# of ROUNDS (default 3) runs, one per round over every plan (so that a
# plan's runs sample the load at moments apart): other jobs on the
# machine only ever add time, so the least loaded run is the plan's.
# Auto: ptrain-plan's choice from the same calibration (the probe's node
# model with the fitted GEMM rate), timed in the same rounds (once, when
# it is one of the table's plans).
# On a shared, oversubscribed 2-core machine the timings are noisy: read
# the ratios as rough, the rank order as the claim.
set -u
usage() {
    cat <<EOF
usage: [MODEL=L,H,C,T,V] [BATCH=N] [STEPS=N] [ROUNDS=N] sh bench/bench_plan.sh
  (from the build directory after 'make && make tests/plan/cost_eval', or with top_builddir=DIR)
The cost model's predicted step time against ptrain-run's measured one for plans at 4 and 8 ranks,
and the Spearman rank correlation between the two.

Settings, from the environment (the script takes no arguments but --help):
  MODEL=L,H,C,T,V   layers, heads, width, sequence length, vocabulary, integers >= 1 (default 4,4,128,64,2048)
  BATCH=N           global batch in sequences, an integer >= 1 (default 16)
  STEPS=N           steps per run, the mean of steps 2..N measured, an integer >= 2 (default 16)
  ROUNDS=N          runs of each plan, the least time kept, an integer >= 1 (default 3)
  MPIRUN=CMD        the MPI launcher (default mpirun)
  -h, --help        print this help and exit
EOF
}
case ${1-} in -h | --help) usage; exit 0 ;; esac
[ $# -eq 0 ] || { echo "bench_plan: unexpected argument '$1' (it takes none but --help: set MODEL=L,H,C,T,V BATCH=N STEPS=N ROUNDS=N in the environment)" >&2; exit 2; }
here=$(cd "$(dirname "$0")/.." && pwd)
MODEL=${MODEL:-4,4,128,64,2048}
BATCH=${BATCH:-16}
STEPS=${STEPS:-16}
ROUNDS=${ROUNDS:-3}
# NAME VALUE MIN: a decimal integer >= MIN (no sign, no leading zero), or one line and status 2
intmin() {
    case $2 in '' | *[!0-9]* | 0?*) ;; *) [ "$2" -ge "$3" ] && return 0 ;; esac
    echo "bench_plan: $1 '$2' is not an integer >= $3" >&2
    exit 2
}
intmin BATCH "$BATCH" 1
intmin STEPS "$STEPS" 2
intmin ROUNDS "$ROUNDS" 1
model_ok=
case $MODEL in
*[!0-9,]* | *,,* | ,* | *, | *,*,*,*,*,* | 0* | *,0*) ;;
*,*,*,*,*) model_ok=1 ;;
esac
[ -n "$model_ok" ] ||
    { echo "bench_plan: MODEL '$MODEL' is not L,H,C,T,V (five integers >= 1, e.g. 4,4,128,64,2048)" >&2; exit 2; }
B=${top_builddir:-.}
run="$B/ptrain-run"
eval_="$B/tests/plan/cost_eval"
topo="$B/ptrain-topo"
for x in "$run" "$eval_" "$topo"; do
    [ -x "$x" ] || { echo "bench_plan: $x not built (make && make tests/plan/cost_eval)" >&2; exit 2; }
done
command -v jq >/dev/null 2>&1 || { echo "bench_plan: jq not installed (scripts/deps.sh)" >&2; exit 2; }
MPIRUN=${MPIRUN:-mpirun}
cores=$(OMP_NUM_THREADS= nproc) # before OMP_NUM_THREADS=1, which nproc obeys
export OMPI_MCA_btl=${OMPI_MCA_btl:-self,tcp} OMPI_MCA_btl_tcp_if_include=${OMPI_MCA_btl_tcp_if_include:-lo}
export OMPI_MCA_oob_tcp_if_include=${OMPI_MCA_oob_tcp_if_include:-lo} OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
for v in PTRAIN_MODE PTRAIN_DP PTRAIN_PP PTRAIN_TP PTRAIN_TP_DEPTH PTRAIN_SP PTRAIN_ZERO PTRAIN_MICROBATCHES \
    PTRAIN_SCHEDULE PTRAIN_VIRTUAL_STAGES PTRAIN_PP_SPLIT PTRAIN_RECOMPUTE PTRAIN_CKPT_ACT PTRAIN_RANK_ORDER PTRAIN_PLAN; do
    unset "$v"
done
wd=$(mktemp -d)
trap 'rm -rf "$wd"' EXIT
IFS=, read -r L H C T V <<EOF
$MODEL
EOF
mflags="--model tiny --layers $L --heads $H --embd $C --seq-len $T --vocab $V"

# measure NP VAR=VALUE...: mean step ms of steps 2..STEPS, or "fail"
measure() {
    np=$1
    shift
    (
        for kv in "$@"; do export "$kv"; done
        "$MPIRUN" --allow-run-as-root --oversubscribe --bind-to none -np "$np" "$run" $mflags --data synthetic:3 \
            --steps "$STEPS" --batch "$BATCH" --val-batches 1 --val-every 0 --threads 1 --quiet \
            --metrics "$wd/m.jsonl" >"$wd/out" 2>&1 </dev/null
    ) || { echo fail; return; }
    jq -s '[.[] | select(.type == "train" and .step > 1) | .step_ms] | add / length' "$wd/m.jsonl"
}

echo "# bench_plan: model L,H,C,T,V = $MODEL, global batch $BATCH, $STEPS steps, best of $ROUNDS runs, $cores cores (timings on a shared machine are not quiet)"
t0=$(date +%s)
# calib MB: append the 1-rank model GFLOP/s per core (mean of the steps
# after the first) at MB microbatches to $wd/rates$MB
calib() {
    t=$(measure 1 PTRAIN_DP=1 PTRAIN_MICROBATCHES="$1")
    [ "$t" = fail ] && { echo "bench_plan: the 1-rank calibration run failed: $(tail -n 2 "$wd/out")" >&2; exit 1; }
    jq -s '[.[] | select(.type == "train" and .step > 1) | .gflops_per_rank] | add / length' "$wd/m.jsonl" >>"$wd/rates$1"
}
# the two sizes in turn, ROUNDS times; the best run of each
: >"$wd/rates1"
: >"$wd/rates$BATCH"
for r in $(seq "$ROUNDS"); do
    calib 1 || exit 1
    calib "$BATCH" || exit 1
done
gA=$(sort -g "$wd/rates1" | tail -n 1) gB=$(sort -g "$wd/rates$BATCH" | tail -n 1)
nA=$((BATCH * T)) nB=$T
# Hockney through (nA, gA) and (nB, gB): 1/g = 1/r_inf + (n_half/r_inf)/n
set -- $(awk -v na="$nA" -v ga="$gA" -v nb="$nB" -v gb="$gB" 'BEGIN {
    b = (1 / gb - 1 / ga) / (1 / nb - 1 / na); a = 1 / ga - b / na
    if (b <= 0 || a <= 0) printf "%.4g 0\n", ga; else printf "%.4g %.4g\n", 1 / a, b / a }')
g1=$1 nhalf=$2
echo "# calibration: 1 rank $(printf "%.4g" "$gA") model GFLOP/s per core at $nA rows per GEMM (microbatch $BATCH)," \
    "$(printf "%.4g" "$gB") at $nB rows (microbatch 1): r_inf $g1 GFLOP/s, n_1/2 $nhalf rows"

# links at NP ranks (the ranks' contention included): ptrain-topo's ring
# step, alpha and 1/beta fitted through its allreduce times at two sizes,
# t = 2(p-1) alpha + 2(p-1)/p n beta (Thakur et al. 2005), alpha at least
# the ping-pong latency (without a fit: the ping-pong bandwidth, and alpha
# from the one allreduce time)
# (the best of ROUNDS probes: the highest bandwidth, the least latency,
# written back into the node model $wd/topo.json that ptrain-plan reads)
links() {
    bw= al= pi= pb=
    for r in $(seq "$ROUNDS"); do
        "$MPIRUN" --allow-run-as-root --oversubscribe --bind-to none -np "$1" "$topo" --probe-quick --json \
            >"$wd/topo1.json" 2>/dev/null </dev/null
        cp "$wd/topo1.json" "$wd/topo1.$r.json"
        set -- "$1" $(jq -r --argjson p "$1" '.net | (.ring_gbps // .intra_gbps // 1) as $bw | (.intra_latency_us // 20) as $l
            | (.ring_step_latency_us // ((((.allreduce_time_us // 0) - 2 * ($p - 1) / $p * (.allreduce_bytes // 0) / ($bw * 1e3)) / (2 * ($p - 1))))) as $a
            | "\($bw) \(if $a > $l then $a else $l end) \(.pair_allreduce_time_us // 0) \(.pair_busy_allreduce_time_us // 0)"' \
            "$wd/topo1.json" 2>/dev/null || echo "1 20 0 0")
        bw=$(awk -v a="$2" -v b="$bw" 'BEGIN { print (b == "" || a + 0 > b + 0) ? a : b }')
        al=$(awk -v a="$3" -v b="$al" 'BEGIN { print (b == "" || a + 0 < b + 0) ? a : b }')
        pi=$(awk -v a="$4" -v b="$pi" 'BEGIN { print (b == "" || a + 0 < b + 0) ? a : b }')
        pb=$(awk -v a="$5" -v b="$pb" 'BEGIN { print (b == "" || a + 0 < b + 0) ? a : b }')
    done
    jq --argjson bw "$bw" --argjson a "$al" --argjson pi "$pi" --argjson pb "$pb" \
        '.net.intra_gbps = $bw | .net.ring_gbps = $bw | .net.ring_step_latency_us = $a
         | if $pi > 0 and $pb > 0 then .net.pair_allreduce_time_us = $pi | .net.pair_busy_allreduce_time_us = $pb else . end' \
        "$wd/topo1.json" >"$wd/topo.json" 2>/dev/null || cp "$wd/topo1.json" "$wd/topo.json"
    # each collective kind: the highest bus bandwidth and the least alpha
    # of the rounds (a kind no round fitted keeps 0: the class's figures)
    jq -s --slurpfile t "$wd/topo.json" '[.[] | .net.collectives // empty] as $c | $t[0] |
        if ($c | length) > 0 then .net.collectives = ($c[0] | with_entries(if .key == "bytes" then . else
            .key as $k | .value.busbw_gbps = ([$c[][$k].busbw_gbps] | max) |
            .value.latency_us = ([$c[][$k] | select(.busbw_gbps > 0) | .latency_us] | min // .value.latency_us) end))
        else . end' "$wd"/topo1.*.json >"$wd/topo2.json" 2>/dev/null && mv "$wd/topo2.json" "$wd/topo.json"
    rm -f "$wd"/topo1.*.json
    echo "$bw $al"
}

plans4="PTRAIN_DP=4
PTRAIN_DP=2 PTRAIN_TP=2
PTRAIN_DP=1 PTRAIN_TP=4
PTRAIN_MODE=2d PTRAIN_DP=1 PTRAIN_TP=4
PTRAIN_DP=2 PTRAIN_SP=2
PTRAIN_DP=1 PTRAIN_SP=4
PTRAIN_DP=2 PTRAIN_PP=2 PTRAIN_MICROBATCHES=2
PTRAIN_DP=1 PTRAIN_PP=4 PTRAIN_MICROBATCHES=4
PTRAIN_DP=1 PTRAIN_PP=2 PTRAIN_TP=2 PTRAIN_MICROBATCHES=4 PTRAIN_SCHEDULE=gpipe
PTRAIN_DP=4 PTRAIN_ZERO=3
PTRAIN_DP=2 PTRAIN_PP=2 PTRAIN_MICROBATCHES=4 PTRAIN_SCHEDULE=interleaved PTRAIN_VIRTUAL_STAGES=2
PTRAIN_DP=2 PTRAIN_TP=2 PTRAIN_RECOMPUTE=block"
plans8="PTRAIN_DP=8
PTRAIN_DP=4 PTRAIN_TP=2
PTRAIN_DP=2 PTRAIN_TP=4
PTRAIN_MODE=2d PTRAIN_DP=2 PTRAIN_TP=4
PTRAIN_MODE=2.5d PTRAIN_DP=1 PTRAIN_TP=8 PTRAIN_TP_DEPTH=2
PTRAIN_MODE=3d PTRAIN_DP=1 PTRAIN_TP=8
PTRAIN_DP=4 PTRAIN_SP=2
PTRAIN_DP=4 PTRAIN_PP=2 PTRAIN_MICROBATCHES=2
PTRAIN_DP=2 PTRAIN_PP=4 PTRAIN_MICROBATCHES=4
PTRAIN_DP=8 PTRAIN_ZERO=2"

# norm VAR=VALUE...: a plan's settings in one order, without the
# defaults ptrain-plan prints (so that auto's plan matches the table's)
norm() { printf '%s\n' "$@" | grep -v '^$' | sort | tr '\n' ' ' | sed 's/ $//'; }

# spearman FILE (columns: predicted measured): rank correlation with
# average ranks for ties (Spearman 1904; Pearson of the ranks)
spearman() {
    awk '
    function rank(col, r,   i, j, k, n2, idx, tmp, lo) {
        for (i = 1; i <= n; i++) idx[i] = i
        for (i = 2; i <= n; i++) { tmp = idx[i]; for (j = i - 1; j >= 1 && v[idx[j], col] > v[tmp, col]; j--) idx[j + 1] = idx[j]; idx[j + 1] = tmp }
        for (i = 1; i <= n; i = k) {
            for (k = i + 1; k <= n && v[idx[k], col] == v[idx[i], col]; k++) ;
            for (j = i; j < k; j++) r[idx[j]] = (i + k - 1) / 2
        }
    }
    { n++; v[n, 1] = $1; v[n, 2] = $2 }
    END {
        if (n < 2) { print "nan"; exit }
        rank(1, ra); rank(2, rb)
        for (i = 1; i <= n; i++) { ma += ra[i] / n; mb += rb[i] / n }
        for (i = 1; i <= n; i++) { sab += (ra[i] - ma) * (rb[i] - mb); saa += (ra[i] - ma) ^ 2; sbb += (rb[i] - mb) ^ 2 }
        printf "%.3f\n", (saa > 0 && sbb > 0) ? sab / sqrt(saa * sbb) : 0
    }' "$1"
}

for np in 4 8; do
    eval "plans=\$plans$np"
    set -- $(links "$np")
    gbps=$(printf "%.4g" "$1") lat=$(printf "%.4g" "$2")
    # auto: what ptrain-plan chooses over its whole search space for this
    # machine (the node model measured above at NP ranks, the calibrated
    # GEMM rate as the model's per-core Hockney fit, so that ptrain-plan
    # shares it among the ranks as cost_eval does; the ring-step latency
    # is the probe's), timed in the same rounds as the table's plans
    jq --argjson g "$g1" --argjson h "$nhalf" \
        '.gemm_gflops = $g | .gemm_fit = (if $h > 0 then {r_inf_gflops: $g, n_half_rows: $h} else null end)' \
        "$wd/topo.json" >"$wd/topo-g.json"
    # ranks per core and the busy delay as ptrain-plan's pt_topo_plan_hw takes them
    set -- $("$B/ptrain-plan" --topology "$wd/topo-g.json" --nodes 1 --tasks-per-node "$np" --model "$MODEL" \
        --batch "$BATCH" --json 2>/dev/null | jq -r '.hw | "\(.ranks_per_core) \(.busy_delay_s * 1e6)"' || echo "0 0")
    oversub=$(printf "%.4g" "${1:-0}") busy=$(printf "%.4g" "${2:-0}")
    echo
    echo "## $np ranks on $cores cores: $oversub ranks per core (pt_hw.ranks_per_core), GEMM $g1 n / (n + $nhalf) GFLOP/s per core, links $gbps GB/s, $lat us per ring step, busy delay $busy us"
    echo "## collectives (busbw GB/s, alpha us per step): $(jq -r '.net.collectives // {} | to_entries
        | map(select(.key != "bytes") | "\(.key) \(.value.busbw_gbps * 1000 | round / 1000) \(.value.latency_us | round)")
        | join(", ")' "$wd/topo-g.json")"
    auto=$("$B/ptrain-plan" --topology "$wd/topo-g.json" --nodes 1 --tasks-per-node "$np" --model "$MODEL" \
        --batch "$BATCH" --env 2>"$wd/err" | grep -v '^PTRAIN_PLAN=' |
        grep -v '^PTRAIN_\(DP\|PP\|TP\|SP\|TP_DEPTH\|MICROBATCHES\|VIRTUAL_STAGES\)=1$' |
        grep -v '^PTRAIN_\(SCHEDULE=1f1b\|PP_SPLIT=even\|RECOMPUTE=none\|ZERO=0\|RANK_ORDER=DPT\|TP_ORDER=012\|MODE=1d\)$' | tr '\n' ' ')
    [ -n "$auto" ] || cp "$wd/err" "$wd/auto-err"
    printf '%s\n' "$plans" | grep -v '^$' >"$wd/list$np"
    extra=0 at=0
    if [ -n "$auto" ]; then
        # shellcheck disable=SC2086
        key=$(norm $auto) i=0
        while IFS= read -r plan; do
            i=$((i + 1))
            # shellcheck disable=SC2086
            [ "$(norm $plan)" = "$key" ] && at=$i
        done <"$wd/list$np"
        [ "$at" = 0 ] && { echo "$auto" >>"$wd/list$np"; extra=1; at=$((i + 1)); }
    fi
    # predictions, then ROUNDS rounds of every plan once: each plan's
    # least time samples the load at ROUNDS moments apart
    i=0
    while IFS= read -r plan; do
        i=$((i + 1))
        # shellcheck disable=SC2086
        # the node model's machine as ptrain-plan prices it: the GEMM fit,
        # ranks per core, busy delay, each collective kind's rates, each
        # communicator on its link
        env $plan "$eval_" "$MODEL" "$BATCH" --topology "$wd/topo-g.json" "$np" 2>"$wd/err$np.$i" |
            jq '.t_step * 1000' >"$wd/pred$np.$i"
        : >"$wd/m$np.$i"
    done <"$wd/list$np"
    for r in $(seq "$ROUNDS"); do
        i=0
        while IFS= read -r plan; do
            i=$((i + 1))
            [ -s "$wd/pred$np.$i" ] || continue
            # shellcheck disable=SC2086
            x=$(measure "$np" $plan)
            [ "$x" = fail ] && cp "$wd/out" "$wd/out$np.$i"
            echo "$x" >>"$wd/m$np.$i"
        done <"$wd/list$np"
    done
    printf "%-78s %12s %12s %8s\n" "plan" "predicted_ms" "measured_ms" "ratio"
    : >"$wd/pairs$np"
    i=0
    while IFS= read -r plan; do
        i=$((i + 1))
        [ "$extra" = 1 ] && [ "$i" = "$at" ] && break
        pred=$(cat "$wd/pred$np.$i")
        if [ -z "$pred" ]; then
            printf "%-78s %12s\n" "$plan" "refused: $(cat "$wd/err$np.$i")"
            continue
        fi
        if grep -q fail "$wd/m$np.$i"; then
            printf "%-78s %12.1f %12s\n" "$plan" "$pred" "failed: $(tail -n 1 "$wd/out$np.$i")"
            continue
        fi
        meas=$(sort -g "$wd/m$np.$i" | head -n 1)
        printf "%-78s %12.1f %12.1f %8.2f\n" "$plan" "$pred" "$meas" "$(awk -v a="$meas" -v b="$pred" 'BEGIN { print a / b }')"
        echo "$pred $meas" >>"$wd/pairs$np"
    done <"$wd/list$np"
    echo "Spearman rank correlation, predicted vs measured, $np ranks: $(spearman "$wd/pairs$np") ($(wc -l <"$wd/pairs$np") plans)"
    # the measurement's own reproducibility: round 1's order against round
    # 2's over the same plans (the ceiling a prediction can reach here)
    if [ "$ROUNDS" -ge 2 ]; then
        : >"$wd/rr$np"
        i=0
        while IFS= read -r plan; do
            i=$((i + 1))
            [ "$extra" = 1 ] && [ "$i" = "$at" ] && break
            [ -s "$wd/pred$np.$i" ] && ! grep -q fail "$wd/m$np.$i" && sed -n '1p;2p' "$wd/m$np.$i" | tr '\n' ' ' >>"$wd/rr$np" &&
                echo >>"$wd/rr$np"
        done <"$wd/list$np"
        echo "Spearman rank correlation, measured round 1 vs round 2, $np ranks: $(spearman "$wd/rr$np") (the measurement's own noise)"
    fi
    if [ -z "$auto" ]; then
        echo "auto: ptrain-plan failed: $(cat "$wd/auto-err")"
    elif grep -q fail "$wd/m$np.$at" || [ ! -s "$wd/m$np.$at" ]; then
        echo "auto (ptrain-plan's choice): $auto failed: $(tail -n 1 "$wd/out$np.$at" 2>/dev/null) $(cat "$wd/err$np.$at")"
    else
        ameas=$(sort -g "$wd/m$np.$at" | head -n 1)
        how="one of the table's plans"
        [ "$extra" = 1 ] && how="timed in the same rounds"
        fastest=$(sort -k2 -g "$wd/pairs$np" | head -n 1 | awk '{print $2}')
        printf "auto (ptrain-plan's choice): %s%.1f ms (%s); fastest measured plan above %s ms; auto / fastest = %s\n" \
            "$auto" "$ameas" "$how" "$fastest" "$(awk -v a="$ameas" -v b="$fastest" 'BEGIN { printf "%.2f", a / b }')"
    fi
done
cat "$wd/pairs4" "$wd/pairs8" >"$wd/all"
echo
echo "Spearman over both world sizes: $(spearman "$wd/all")"
echo "bench wall time: $(($(date +%s) - t0)) s"
