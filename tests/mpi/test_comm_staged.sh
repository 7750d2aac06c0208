#!/bin/sh
# lib/comm's staged device path on the CPU (host buffers moved by memcpy)
# against the host path, 1 to 4 ranks.  See test_comm_staged.c.
. "$top_srcdir/tests/lib.sh"
need_mpi_prog test_comm_staged
for np in 1 2 3 4; do
    mpi_tap "np=$np" "$np" "$bin"
done
done_testing
