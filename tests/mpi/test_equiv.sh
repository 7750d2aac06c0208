#!/bin/sh
# Data parallel and 1D tensor parallel reproduce the single-process run
# (loss, every gradient, every parameter after AdamW steps) and move exactly
# the analytic communication volume.  See test_equiv.c.
. "$top_srcdir/tests/lib.sh"
bin="$top_builddir/tests/mpi/test_equiv"
[ -x "$bin" ] || skip_all "test_equiv not built"
command -v "${MPIRUN:-mpirun}" >/dev/null 2>&1 || skip_all "mpirun not found"
out=$(mktemp)
trap 'rm -f "$out"' EXIT
n=0
fail=0
# np dp tp order
for cfg in "1 1 1 DPT" "2 2 1 DPT" "2 1 2 DPT" "4 4 1 DPT" "4 1 4 DPT" "4 2 2 DPT" "4 2 2 TPD"; do
    set -- $cfg
    echo "# mpirun -np $1 test_equiv dp=$2 tp=$3 order=$4"
    if ! ptrain_mpirun -np "$1" "$bin" "$2" "$3" "$4" 3 >"$out" 2>&1; then
        rc=$?
    else
        rc=0
    fi
    while IFS= read -r line; do
        case "$line" in
        "ok - "*) n=$((n+1)); echo "ok $n - [dp=$2 tp=$3 $4] ${line#ok - }" ;;
        "not ok - "*) n=$((n+1)); fail=$((fail+1)); echo "not ok $n - [dp=$2 tp=$3 $4] ${line#not ok - }" ;;
        "#"*) echo "$line" ;;
        *) echo "# $line" ;;
        esac
    done <"$out"
    if [ "$rc" -ne 0 ]; then n=$((n+1)); echo "not ok $n - [dp=$2 tp=$3 $4] exited with status $rc"; fi
done
echo "1..$n"
[ "$fail" -eq 0 ]
