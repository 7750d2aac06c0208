#!/bin/sh
# Peak memory per rank: 2D/2.5D/3D below 1D at 4 and 8 ranks; sequence
# parallelism fits longer sequences in the same memory.  See test_memory.c.
. "$top_srcdir/tests/lib.sh"
bin="$top_builddir/tests/mpi/test_memory"
[ -x "$bin" ] || skip_all "test_memory not built"
command -v "${MPIRUN:-mpirun}" >/dev/null 2>&1 || skip_all "mpirun not found"
out=$(mktemp)
trap 'rm -f "$out"' EXIT
n=0
fail=0
for cfg in "4 LAYOUTS" "8 LAYOUTS" "4 SP"; do
    set -- $cfg
    echo "# mpirun -np $1 test_memory $2"
    rc=0
    ptrain_mpirun -np "$1" "$bin" "$2" >"$out" 2>&1 || rc=$?
    while IFS= read -r line; do
        case "$line" in
        "ok - "*) n=$((n+1)); echo "ok $n - [np=$1] ${line#ok - }" ;;
        "not ok - "*) n=$((n+1)); fail=$((fail+1)); echo "not ok $n - [np=$1] ${line#not ok - }" ;;
        "#"*) echo "$line" ;;
        *) echo "# $line" ;;
        esac
    done <"$out"
    if [ "$rc" -ne 0 ]; then n=$((n+1)); fail=$((fail+1)); echo "not ok $n - [np=$1 $2] exited with status $rc"; fi
done
echo "1..$n"
[ "$fail" -eq 0 ]
