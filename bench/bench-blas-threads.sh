#!/bin/sh
# SPDX-License-Identifier: MIT
# bench-blas-threads: the cpu backend's training step under OpenBLAS's
# OpenMP and pthreads builds, at several thread counts.
#
#   bench/bench-blas-threads.sh [--model M] [--batch B] [--steps N] [--repeat R]
#                               [--threads "1 2 4"] [--libdir DIR] [--help]
#
# Run from a build directory (or set PTRAIN_BUILD to one).  For each
# OpenBLAS build installed as Debian and Ubuntu install them
# (/usr/lib/<triplet>/openblas-openmp and openblas-pthread, chosen through
# LD_LIBRARY_PATH; the system's libopenblas.so.0 alternative is left
# alone) and each thread count, it runs bench-step --threads T R times and
# prints the "blas:" line's threading part and the best step's tokens/s
# (best of the runs: other work on the machine only ever slows a run down)
# beside the mean.  Thread counts above the cores show oversubscription.
# --libdir DIR goes first in LD_LIBRARY_PATH: another build's
# libptrain.so, to time it against this one with the same bench-step.
# A bench, not a test: it asserts nothing.
set -u
model=tiny batch=8 steps=5 repeat=1 threads="1 2 4" libdir=
usage() {
    cat <<EOF
usage: bench/bench-blas-threads.sh [options]    (from a build directory, or with PTRAIN_BUILD=DIR)
bench-step's tokens/s under OpenBLAS's OpenMP and pthreads builds at each thread count.

Options:
  --model M      bench-step's model preset (default $model)
  --batch B      sequences per step, an integer >= 1 (default $batch)
  --steps N      timed steps per run, an integer >= 1 (default $steps)
  --repeat R     runs of each, the best kept, an integer >= 1 (default $repeat)
  --threads L    thread counts, integers >= 1 separated by spaces (default "$threads")
  --libdir DIR   a directory with another libptrain.so.0 to run instead of this build's
  -h, --help     print this help and exit
EOF
}
die() { echo "bench-blas-threads: $*" >&2; exit 2; }
while [ $# -gt 0 ]; do
    case $1 in
    -h | --help) usage; exit 0 ;;
    --batch | --steps | --repeat)
        [ $# -ge 2 ] || die "option $1 needs a value (an integer >= 1)"
        case $2 in '' | *[!0-9]* | 0) die "$1 '$2' is not an integer >= 1" ;; esac ;;
    --threads)
        [ $# -ge 2 ] || die "option $1 needs a value (integers >= 1 separated by spaces)"
        for t in $2; do case $t in *[!0-9]* | 0) die "$1 '$2' is not a list of integers >= 1" ;; esac; done
        [ -n "$(echo $2)" ] || die "$1 '$2' is not a list of integers >= 1" ;;
    --model | --libdir)
        [ $# -ge 2 ] && [ -n "$2" ] || die "option $1 needs a value" ;;
    *) die "unknown option '$1' (valid: --model M, --batch B, --steps N, --repeat R, --threads L, --libdir DIR, --help)" ;;
    esac
    case $1 in
    --model) model=$2 ;;
    --batch) batch=$2 ;;
    --steps) steps=$2 ;;
    --repeat) repeat=$2 ;;
    --threads) threads=$2 ;;
    --libdir) libdir=$2 ;;
    esac
    shift 2
done
b=${PTRAIN_BUILD:-.}
[ -x "$b/bench/bench-step" ] ||
    die "no bench/bench-step under '$b': run from the build directory or set PTRAIN_BUILD"
[ -z "$libdir" ] || [ -r "$libdir/libptrain.so.0" ] || die "--libdir '$libdir' holds no libptrain.so.0"
# libtool's wrapper puts the build's .libs first in LD_LIBRARY_PATH: run the
# program it wraps, with that directory after --libdir
prog=$b/bench/bench-step
[ -x "$b/bench/.libs/bench-step" ] && prog=$b/bench/.libs/bench-step
triplet=$(gcc -print-multiarch 2>/dev/null)
[ -n "$triplet" ] || triplet=$(uname -m)-linux-gnu
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
trap 'exit 130' INT TERM

printf '%-8s %-8s %-62s %11s %11s\n' build threads "blas: threading" "best tok/s" "mean tok/s"
for build in openmp pthread; do
    dir=/usr/lib/$triplet/openblas-$build
    if [ ! -r "$dir/libopenblas.so.0" ]; then
        printf '%-8s (not installed: no %s/libopenblas.so.0)\n' "$build" "$dir"
        continue
    fi
    for t in $threads; do
        best= mean= how=
        for i in $(seq "$repeat"); do
            LD_LIBRARY_PATH=${libdir:+$libdir:}$b/.libs:$dir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} \
                "$prog" --model "$model" --batch "$batch" --steps "$steps" --threads "$t" >"$tmp/out" 2>&1 || {
                sed 's/^/  | /' "$tmp/out" | tail -n 5 >&2
                continue
            }
            how=$(sed -n 's/^# blas: [^(]*(\([^)]*\)).*/\1/p' "$tmp/out" | head -n 1)
            tok=$(sed -n 's/^result: tok_s=\([0-9.]*\).*/\1/p' "$tmp/out")
            mtok=$(sed -n 's/^result: .*mean_tok_s=\([0-9.]*\).*/\1/p' "$tmp/out")
            if [ -z "$best" ] || awk -v a="$tok" -v b="$best" 'BEGIN { exit !(a > b) }'; then best=$tok mean=$mtok; fi
        done
        printf '%-8s %-8s %-62s %11s %11s\n' "$build" "$t" "${how:-?}" "${best:-failed}" "${mean:-failed}"
    done
done
