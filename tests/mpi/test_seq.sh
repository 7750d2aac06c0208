#!/bin/sh
# Ring self-attention (sequence parallelism) reproduces the single-process
# attention op and sends exactly seq.h's volume, for sp = 1, 2, 3, 4.
# See test_seq.c.
. "$top_srcdir/tests/lib.sh"
bin="$top_builddir/tests/mpi/test_seq"
[ -x "$bin" ] || skip_all "test_seq not built"
command -v "${MPIRUN:-mpirun}" >/dev/null 2>&1 || skip_all "mpirun not found"
out=$(mktemp)
trap 'rm -f "$out"' EXIT
n=0
fail=0
for np in 1 2 3 4; do
    echo "# mpirun -np $np test_seq"
    rc=0
    ptrain_mpirun -np "$np" "$bin" >"$out" 2>&1 || rc=$?
    while IFS= read -r line; do
        case "$line" in
        "ok - "*) n=$((n+1)); echo "ok $n - [np=$np] ${line#ok - }" ;;
        "not ok - "*) n=$((n+1)); fail=$((fail+1)); echo "not ok $n - [np=$np] ${line#not ok - }" ;;
        "#"*) echo "$line" ;;
        *) echo "# $line" ;;
        esac
    done <"$out"
    if [ "$rc" -ne 0 ]; then n=$((n+1)); fail=$((fail+1)); echo "not ok $n - [np=$np] exited with status $rc"; fi
done
echo "1..$n"
[ "$fail" -eq 0 ]
