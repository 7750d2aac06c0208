#!/bin/sh
# SPDX-License-Identifier: MIT
# Ring self-attention (sequence parallelism) reproduces the single-process
# attention op and sends exactly seq.h's volume, for sp = 1, 2, 3, 4.
# See test_seq.c.
. "$top_srcdir/tests/lib.sh"
need_mpi_prog test_seq
for np in 1 2 3 4; do
    mpi_tap "np=$np" "$np" "$bin"
done
done_testing
