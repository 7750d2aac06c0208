#!/bin/sh
# Ring self-attention (sequence parallelism) reproduces the single-process
# attention op and sends exactly seq.h's volume, for sp = 1, 2, 3, 4.
# See test_seq.c.
. "$top_srcdir/tests/lib.sh"
bin="$top_builddir/tests/mpi/test_seq"
[ -x "$bin" ] || skip_all "test_seq not built"
command -v "${MPIRUN:-mpirun}" >/dev/null 2>&1 || skip_all "mpirun not found"
for np in 1 2 3 4; do
    mpi_tap "np=$np" "$np" "$bin"
done
done_testing
