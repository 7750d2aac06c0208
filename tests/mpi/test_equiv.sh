#!/bin/sh
# SPDX-License-Identifier: MIT
# Every layout (data parallel; 1D, 2D, 2.5D, 3D tensor parallel; sequence
# parallel, alone and with each tensor layout (ring attention on the rank's
# heads); composed with dp) reproduces the single-process run (loss, every
# gradient, every parameter after AdamW steps) and moves exactly the
# analytic communication volume.  See test_equiv.c.  8- and 16-rank runs
# (2.5d and 3d with sp=2) are oversubscribed on small machines and kept tiny.
. "$top_srcdir/tests/lib.sh"
need_mpi_prog test_equiv
# mode dp tp depth sp order[/tp order] [precision [model]] (np = dp*tp*sp; the tp
# order lays the tp grid's axes out in the T block: 2d 021 puts the columns
# on consecutive ranks, 3d 120 the depth-like axis 0).  The bf16 runs
# compare with the single-process bf16 run (bf16 tolerances, test_equiv.c).
# The sanitizer pass (PTRAIN_TEST_SUBSET=1, scripts/test.sh) runs one
# configuration per layout, one of sp x tp and one in bf16.
configs='"1d 1 1 1 1 DPT" "1d 2 1 1 1 DPT" "1d 1 2 1 1 DPT" "1d 4 1 1 1 DPT" "1d 1 4 1 1 DPT"'
configs="$configs"' "1d 2 2 1 1 DPT" "1d 2 2 1 1 TPD"'
configs="$configs"' "2d 1 4 1 1 DPT" "2d 2 4 1 1 DPT" "2d 2 4 1 1 TPD" "2.5d 1 8 2 1 DPT" "3d 1 8 1 1 DPT"'
configs="$configs"' "2d 1 4 1 1 DPT/021" "3d 1 8 1 1 DPT/120"'
configs="$configs"' "1d 1 1 1 2 DPT" "1d 1 1 1 4 DPT" "1d 2 1 1 2 DPT"'
configs="$configs"' "1d 1 2 1 2 DPT" "1d 2 2 1 2 DPT" "2d 1 4 1 2 DPT" "2.5d 1 8 2 2 DPT" "3d 1 8 1 2 DPT"'
configs="$configs"' "1d 2 2 1 1 TPD bf16" "2d 2 4 1 1 DPT bf16" "2.5d 1 8 2 1 DPT bf16" "3d 1 8 1 1 DPT bf16"'
configs="$configs"' "1d 2 1 1 2 DPT bf16" "1d 1 2 1 2 DPT bf16" "2d 1 4 1 2 DPT bf16"'
# the Llama family (GQA, q/k/v biases, untied head; tied MHA): dp x tp, sp x tp, bf16
llama=llama:2,4,2,32,48,8,97,untied,qkv-bias
configs="$configs"' "1d 2 2 1 1 DPT fp32 '$llama'" "1d 1 2 1 2 DPT fp32 '$llama'" "1d 2 1 1 2 DPT bf16 '$llama'"'
configs="$configs"' "1d 1 4 1 1 TPD fp32 llama:2,4,4,32,48,8,97" "1d 2 2 1 1 TPD bf16 llama:2,4,2,32,48,8,97"'
[ "${PTRAIN_TEST_SUBSET:-0}" = 1 ] &&
    configs='"1d 2 2 1 1 TPD" "2d 1 4 1 1 DPT" "2.5d 1 8 2 1 DPT" "3d 1 8 1 1 DPT" "1d 2 1 1 2 DPT" "1d 1 2 1 2 DPT" "2d 1 4 1 1 DPT bf16"'"
        \"1d 1 2 1 2 DPT fp32 $llama\""
eval "set -- $configs"
for cfg in "$@"; do
    set -- $cfg
    prec=${7:-fp32}
    mpi_tap "$1 dp=$2 tp=$3 depth=$4 sp=$5 $6 $prec${8:+ $8}" $(($2 * $3 * $5)) "$bin" "$1" "$2" "$3" "$4" "$5" "$6" 3 \
        "$prec" ${8:+"$8"}
done
done_testing
