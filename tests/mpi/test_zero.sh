#!/bin/sh
# SPDX-License-Identifier: MIT
# ZeRO stages 1-3 reproduce the single-process run and ZeRO-0 (loss,
# own gradient slices, norm, parameters after 3 AdamW steps), move the
# formula's bytes (1/2: the allreduce's, 3: 1.5x; bf16 gathers half) and
# need the paper's memory per stage, in fp32 and bf16.  See test_zero.c.
. "$top_srcdir/tests/lib.sh"
need_mpi_prog test_zero
stages=${PTRAIN_ZERO_STAGES:-"1 2 3"}
# stage dp tp (np = dp*tp): dp=2, dp=4, zero x 1d tp=2 dp=2; the sanitizer
# pass (PTRAIN_TEST_SUBSET=1, scripts/test.sh) runs the composed one only
grids='"2 1" "4 1" "2 2"'
[ "${PTRAIN_TEST_SUBSET:-0}" = 1 ] && grids='"2 2"'
for st in $stages; do
    eval "set -- $grids"
    for cfg in "$@"; do
        set -- $cfg
        mpi_tap "zero$st dp=$1 tp=$2" $(($1 * $2)) "$bin" equiv "$st" "$1" "$2" 3
    done
done
# bf16 (fp32 masters in own slices, bf16 work copies gathered): every stage
# on the composed grid
for st in $stages; do
    mpi_tap "zero$st dp=2 tp=2 bf16" 4 "$bin" equiv "$st" 2 2 3 bf16
done
# the Llama family (GQA, untied head, q/k/v biases: ref_slice.h's
# test_model_family) on the composed grid, every stage, and stage 3 in bf16
export PTRAIN_TEST_LLAMA=1
for st in $stages; do
    mpi_tap "zero$st dp=2 tp=2 llama" 4 "$bin" equiv "$st" 2 2 3
done
[ "${PTRAIN_TEST_SUBSET:-0}" = 1 ] || mpi_tap "zero3 dp=2 tp=2 bf16 llama" 4 "$bin" equiv 3 2 2 3 bf16
unset PTRAIN_TEST_LLAMA
for dp in 2 4; do
    mpi_tap "memory dp=$dp" "$dp" "$bin" memory "$dp"
done
mpi_tap "memory dp=2 bf16" 2 "$bin" memory 2 bf16
done_testing
