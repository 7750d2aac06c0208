#!/bin/sh
# SPDX-License-Identifier: MIT
# lib/comm's transports on the CPU: the choice, the member-list cache of
# shared NCCL communicators (fake handles), the staged chunk loop against
# mpi_host over a fake device memory, 1 to 4 ranks.  See
# test_comm_transport.c.
. "$top_srcdir/tests/lib.sh"
need_mpi_prog test_comm_transport
for np in 1 2 3 4; do
    mpi_tap "np=$np" "$np" "$bin"
done
done_testing
