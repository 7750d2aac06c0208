#!/bin/sh
# SPDX-License-Identifier: MIT
# Peak memory per rank: 2D/2.5D/3D below 1D at 4 and 8 ranks; sequence
# parallelism fits longer sequences in the same memory; the peak equals the
# cost model's and grows linearly in T (flash attention, fused classifier),
# also for sequence x tensor parallelism (4 ranks: 1d tp=2 x sp=2).
# See test_memory.c.
. "$top_srcdir/tests/lib.sh"
need_mpi_prog test_memory
for cfg in "4 LAYOUTS" "8 LAYOUTS" "4 SP" "2 LINEAR" "2 LINEAR bf16" "4 LINEAR" "4 LINEAR bf16"; do
    set -- $cfg
    mpi_tap "np=$1 $2 ${3:-}" "$1" "$bin" "$2" ${3:-}
done
done_testing
