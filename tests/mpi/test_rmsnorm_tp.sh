#!/bin/sh
# SPDX-License-Identifier: MIT
# lib/parallel's distributed RMSNorm over 1-4 ranks against the whole-row
# ops.  See test_rmsnorm_tp.c.
. "$top_srcdir/tests/lib.sh"
need_mpi_prog test_rmsnorm_tp
for np in 1 2 3 4; do
    mpi_tap "np=$np" "$np" "$bin"
done
done_testing
