#!/bin/sh
# lib/comm on device buffers, 1 and 2 ranks (test_comm_gpu.c): NCCL when
# the ranks have GPUs of their own, staging through host memory when they
# share one (a one-GPU machine), against MPI on host buffers.  Skips, with
# the reason, without the CUDA backend or a GPU.
. "$top_srcdir/tests/lib.sh"
bin="$top_builddir/tests/gpu/test_comm_gpu"
[ -x "$bin" ] || skip_all "test_comm_gpu not built (ptrain was built without the CUDA backend)"
need_mpirun
why=$("$bin" --probe 2>&1) || skip_all "$why"
for np in 1 2; do
    mpi_tap "np=$np" "$np" "$bin"
done
done_testing
