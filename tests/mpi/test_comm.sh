#!/bin/sh
# SPDX-License-Identifier: MIT
# lib/comm's collectives against references from the same random inputs,
# whole and in chunks, with the counters to the byte.  See test_comm.c.
. "$top_srcdir/tests/lib.sh"
need_mpi_prog test_comm
for np in 1 2 3 4; do
    mpi_tap "np=$np" "$np" "$bin"
done
done_testing
