#!/bin/sh
# SPDX-License-Identifier: MIT
# bench-torch: ptrain's training step beside PyTorch's, same model, same run.
#
#   bench/bench-torch.sh [--steps N] [--repeat R] [--ranks P] [--help]
#
# Run from a build directory (or set PTRAIN_BUILD to one).  On the bench
# preset (L=4 H=4 C=256 T=128 V=50257, B=8 sequences per rank, AdamW, fp32)
# it measures, each R times (best kept, since other work on the machine
# only ever slows a run down):
#   1 thread           bench-step --threads 1          torch_gpt.py --threads 1
#   all cores, 1 rank  bench-step --threads P          torch_gpt.py --threads P
#   1 rank per core    mpirun -np P ptrain-run (dp=P)  torch_gpt.py --ddp P (gloo)
# and prints ptrain's tokens/s (with the step's GFLOP/s as % of the same
# run's sgemm rate), PyTorch's, and the ratio.  PyTorch runs with
# OPENBLAS_CORETYPE set to the kernel set ptrain chose, so both use the same
# sgemm kernels.  Without PyTorch (Debian: apt-get install python3-torch)
# only ptrain's column is filled.  A bench, not a test: it asserts nothing.
set -u
steps=6 repeat=2 ranks=$(nproc 2>/dev/null || echo 1)
usage() {
    cat <<EOF
usage: bench/bench-torch.sh [options]    (from a build directory, or with PTRAIN_BUILD=DIR)
ptrain's training step beside PyTorch's (python3-torch) on the bench preset: tokens/s at 1 thread,
all cores in one rank, and one rank per core.

Options:
  --steps N      timed steps per run, an integer >= 1 (default 6)
  --repeat R     runs of each, the best kept, an integer >= 1 (default 2)
  --ranks P      threads and ranks of the multi-core rows, an integer >= 1 (default $ranks, the cores online)
  -h, --help     print this help and exit
EOF
}
die() { echo "bench-torch: $*" >&2; exit 2; }
while [ $# -gt 0 ]; do
    case $1 in
    -h | --help) usage; exit 0 ;;
    --steps | --repeat | --ranks)
        [ $# -ge 2 ] || die "option $1 needs a value (an integer >= 1)"
        case $2 in '' | *[!0-9]* | 0) die "$1 '$2' is not an integer >= 1" ;; esac ;;
    *) die "unknown option '$1' (valid: --steps N, --repeat R, --ranks P, --help)" ;;
    esac
    case $1 in
    --steps) steps=$2 ;;
    --repeat) repeat=$2 ;;
    --ranks) ranks=$2 ;;
    esac
    shift 2
done
b=${PTRAIN_BUILD:-.}
here=$(cd "$(dirname "$0")" && pwd)
[ -x "$b/bench/bench-step" ] && [ -x "$b/ptrain-run" ] ||
    { echo "bench-torch: no bench/bench-step and ptrain-run under '$b': run from the build directory or set PTRAIN_BUILD" >&2; exit 2; }
if [ "$(id -u)" = 0 ]; then export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1; fi
MPIRUN=${MPIRUN:-mpirun}

py=
for p in python3 /usr/bin/python3; do
    if command -v "$p" >/dev/null 2>&1 && "$p" -c 'import torch' >/dev/null 2>&1; then py=$p; break; fi
done

field() { sed -n "s/.*$1=\([0-9.]*\).*/\1/p" | tail -1; }
best() { sort -g | tail -1; }    # largest of the lines on stdin
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
trap 'exit 130' INT TERM # the EXIT trap cleans up; an interrupt stops the script

# ptrain, one rank: tok/s and % of sgemm from bench-step's result line
step_run() { # threads -> "tok_s pct"
    for i in $(seq "$repeat"); do
        OMP_NUM_THREADS=$1 "$b/bench/bench-step" --threads "$1" --steps "$steps" > "$tmp/step" 2>&1 ||
            { sed 's/^/# /' "$tmp/step" >&2; return 1; }
        echo "$(field tok_s < "$tmp/step") $(field pct_sgemm < "$tmp/step")"
    done | sort -g -k1 | tail -1
}
# ptrain, one rank per core under mpirun: the best step's tok/s (step 1 is warm-up)
ranks_run() {
    for i in $(seq "$repeat"); do
        OMP_NUM_THREADS=1 $MPIRUN -np "$ranks" --bind-to core "$b/ptrain-run" --model small --data synthetic \
            --batch $((8 * ranks)) --steps $((steps + 1)) --threads 1 --val-every 0 --val-batches 1 > "$tmp/run" 2>&1 ||
            { sed 's/^/# /' "$tmp/run" | tail -5 >&2; return 1; }
        grep '^step ' "$tmp/run" | tail -n +2 | sed 's/.*| \([0-9.]*\) tok\/s.*/\1/' | best
    done | best
}
torch_run() { # args -> tok/s
    [ -n "$py" ] || { echo "-"; return 0; }
    for i in $(seq "$repeat"); do
        OPENBLAS_CORETYPE=$core OMP_NUM_THREADS=$1 OPENBLAS_NUM_THREADS=$1 "$py" "$here/torch_gpt.py" \
            --threads "$1" --steps "$steps" $2 > "$tmp/torch" 2>&1 || { sed 's/^/# /' "$tmp/torch" | tail -5 >&2; echo 0; continue; }
        field tok_s < "$tmp/torch"
    done | best
}

OMP_NUM_THREADS=1 "$b/bench/bench-step" --threads 1 --steps 1 > "$tmp/hdr" 2>&1
core=$(sed -n 's/^# blas: .*kernels \([A-Za-z0-9_]*\) .*/\1/p' "$tmp/hdr")
echo "# bench-torch: bench preset L=4 H=4 C=256 T=128 V=50257, B=8 per rank, AdamW fp32; $steps timed steps, best of $repeat runs"
sed -n 's/^# blas: /# ptrain blas: /p' "$tmp/hdr"
if [ -n "$py" ]; then
    echo "# pytorch: $("$py" -c 'import torch; print(torch.__version__)') ($py), OPENBLAS_CORETYPE=${core:-unset} for its OpenBLAS"
else
    echo "# pytorch: not installed (apt-get install python3-torch): ptrain only"
fi
printf '%-26s %12s %10s %14s %8s\n' "config" "ptrain tok/s" "% sgemm" "PyTorch tok/s" "ratio"
row() { # name ptrain pct torch
    ratio=-
    case $4 in - | 0) ;; *) ratio=$(awk -v a="$2" -v b="$4" 'BEGIN { printf "%.2fx", a / b }') ;; esac
    printf '%-26s %12.0f %10s %14s %8s\n' "$1" "$2" "$3" "$4" "$ratio"
}
set -- $(step_run 1); p1=$1 s1=$2
row "1 rank, 1 thread" "$p1" "$s1%" "$(torch_run 1 '')"
set -- $(step_run "$ranks"); pn=$1 sn=$2
row "1 rank, $ranks threads" "$pn" "$sn%" "$(torch_run "$ranks" '')"
pr=$(ranks_run)
row "$ranks ranks x 1 thread" "${pr:-0}" "-" "$(torch_run 1 "--ddp $ranks")"
