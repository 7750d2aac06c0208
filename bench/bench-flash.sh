#!/bin/sh
# SPDX-License-Identifier: MIT
# bench-flash: peak memory and tokens/s of one-rank training steps of GPT-2
# 124M (L12 H12 C768 T1024, V 50257) at B=1 and B=4, with this build's flash
# attention and fused classifier ("after") and, given --base, a build of an
# earlier tree with the materialised [B, NH, T, T] attention and [N, V]
# logits ("before").
#
#   bench/bench-flash.sh [--base BUILDDIR] [--steps N] [--threads T] [--batches "1 4"] [--help]
#
# Run from a build directory (or set PTRAIN_BUILD to one).  Each run is
# ptrain-run --model gpt2-124M --data synthetic on one rank; the table shows
# the arena peak (ptrain-run's peak_mib: parameters, gradients, AdamW state,
# activations and every scratch buffer) and the best step's tokens/s (step 1
# is warm-up and left out when there are more), and the after/before ratios.
# A bench, not a test: it asserts nothing.  Timings on a shared machine
# vary; the peaks do not.
set -u
steps=3 threads=$(nproc 2>/dev/null || echo 1) base= batches="1 4"
usage() {
    cat <<EOF
usage: bench/bench-flash.sh [options]    (from a build directory, or with PTRAIN_BUILD=DIR)
GPT-2 124M training steps at each batch size on one rank: peak memory and tokens/s of this build,
beside a --base build of an earlier tree (materialised attention and logits).

Options:
  --base DIR          a build directory of the earlier tree (default: none, this build alone)
  --steps N           steps per run, an integer >= 1 (default 3)
  --threads T         threads per run, an integer >= 1 (default $threads, the cores online)
  --batches "B ..."   batch sizes, integers >= 1 (default "1 4")
  -h, --help          print this help and exit
EOF
}
die() { echo "bench-flash: $*" >&2; exit 2; }
posint() { case $2 in '' | *[!0-9]* | 0) die "$1 '$2' is not an integer >= 1" ;; esac; }
while [ $# -gt 0 ]; do
    case $1 in
    -h | --help) usage; exit 0 ;;
    --base | --steps | --threads | --batches) [ $# -ge 2 ] || die "option $1 needs a value (see --help)" ;;
    *) die "unknown option '$1' (valid: --base DIR, --steps N, --threads T, --batches \"B ...\", --help)" ;;
    esac
    case $1 in
    --base) base=$2 ;;
    --steps) posint "$1" "$2"; steps=$2 ;;
    --threads) posint "$1" "$2"; threads=$2 ;;
    --batches) [ -n "$2" ] || die "--batches '' names no batch size"; batches=$2 ;;
    esac
    shift 2
done
for v in $batches; do posint --batches "$v"; done
b=${PTRAIN_BUILD:-.}
[ -x "$b/ptrain-run" ] || { echo "bench-flash: no ptrain-run under '$b': run from the build directory or set PTRAIN_BUILD" >&2; exit 2; }
[ -z "$base" ] || [ -x "$base/ptrain-run" ] || { echo "bench-flash: no ptrain-run under --base '$base'" >&2; exit 2; }
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
trap 'exit 130' INT TERM # the EXIT trap cleans up; an interrupt stops the script

# run BUILD B -> "peak_mib best_tok_s" (or "- -" when the run fails)
run() {
    rm -f "$tmp/m.jsonl"
    if ! OMP_NUM_THREADS=$threads "$1/ptrain-run" --model gpt2-124M --batch "$2" --data synthetic --steps "$steps" \
        --threads "$threads" --val-every 0 --val-batches 1 --quiet --metrics "$tmp/m.jsonl" >"$tmp/out" 2>&1; then
        sed 's/^/# /' "$tmp/out" | tail -n 3 >&2
        echo "- -"
        return
    fi
    grep '"type":"train"' "$tmp/m.jsonl" | awk -v skip=$((steps > 1)) '
        { s = $0; sub(/.*"peak_mib":/, "", s); sub(/,.*/, "", s); peak = s
          t = $0; sub(/.*"tok_s":/, "", t); sub(/,.*/, "", t)
          if (NR > skip && t + 0 > best) best = t + 0 }
        END { printf "%s %.1f\n", peak, best }'
}

echo "GPT-2 124M (L12 H12 C768 T1024 V50257), 1 rank, $threads threads, $steps steps (best step's tok/s)"
printf '%-3s %-8s %12s %10s\n' B build "peak MiB" "tok/s"
for B in $batches; do
    set -- $(run "$b" "$B")
    ap=$1 at=$2
    if [ -n "$base" ]; then
        set -- $(run "$base" "$B")
        bp=$1 bt=$2
        printf '%-3s %-8s %12s %10s\n' "$B" before "$bp" "$bt"
    fi
    printf '%-3s %-8s %12s %10s\n' "$B" after "$ap" "$at"
    if [ -n "$base" ] && [ "$bp" != - ] && [ "$ap" != - ]; then
        awk -v B="$B" -v bp="$bp" -v ap="$ap" -v bt="$bt" -v at="$at" \
            'BEGIN { printf "%-3s %-8s %11.2fx %9.2fx\n", B, "ratio", ap / bp, (bt > 0 ? at / bt : 0) }'
    fi
done
