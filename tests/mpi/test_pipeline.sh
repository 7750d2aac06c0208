#!/bin/sh
# SPDX-License-Identifier: MIT
# Pipeline parallelism (GPipe, 1F1B, interleaved 1F1B; even and uneven
# splits; composed with dp, 1D/2D tp, recompute and ZeRO 1-3) reproduces the single-process
# run (loss, every gradient, every parameter after 3 AdamW steps) and moves
# 2 (S-1) m boundary tensors per step; 1F1B's activation peak is bounded
# by pp microbatches while GPipe's grows with m.  See test_pipeline.c.
# At most 8 ranks, oversubscribed on small machines; the model is tiny.
. "$top_srcdir/tests/lib.sh"
need_mpi_prog test_pipeline
# schedule pp m v dp tp mode split (np = dp*pp*tp).  The sanitizer pass
# (scripts/test.sh sets PTRAIN_TEST_SUBSET=1) runs one configuration of each
# kind: every code path, a fraction of the 8-rank runs.
configs='"1f1b 1 4 1 1 1 1d -" \
           "gpipe 2 4 1 1 1 1d -" "1f1b 2 4 1 1 1 1d -" "interleaved 2 4 2 1 1 1d -" \
           "gpipe 4 4 1 1 1 1d -" "1f1b 4 6 1 1 1 1d -" "interleaved 4 4 2 1 1 1d -" \
           "1f1b 2 3 1 1 1 1d 3,1" "1f1b 4 4 1 1 1 1d 2,1,1,3" "interleaved 2 4 2 1 1 1d 1,3,2,1" \
           "1f1b 2 4 1 2 1 1d -" "gpipe 2 2 1 2 1 1d -" "1f1b 2 4 1 1 2 1d -" "1f1b 2 2 1 1 4 2d -" \
           "interleaved 2 2 2 2 2 1d -"'
extras='"interleaved 2 4 2 1 1 1d - block 0" "1f1b 2 4 1 1 2 1d - attention 0" \
        "1f1b 2 4 1 2 1 1d - none 1" "gpipe 2 4 1 2 1 1d - none 2" "1f1b 2 4 1 2 1 1d - none 3" \
        "interleaved 2 4 2 2 1 1d - block 3"'
if [ "${PTRAIN_TEST_SUBSET:-0}" = 1 ]; then
    configs='"1f1b 1 4 1 1 1 1d -" "interleaved 4 4 2 1 1 1d -" "1f1b 4 4 1 1 1 1d 2,1,1,3" "gpipe 2 2 1 2 1 1d -" "1f1b 2 2 1 1 4 2d -"'
    extras='"1f1b 2 4 1 1 2 1d - attention 0" "interleaved 2 4 2 2 1 1d - block 3" "gpipe 2 4 1 2 1 1d - none 2"'
fi
eval "set -- $configs"
for cfg in "$@"; do
    set -- $cfg
    mpi_tap "$1 pp=$2 m=$3 v=$4 dp=$5 tp=$6 $7 split=$8" $(($2 * $5 * $6)) "$bin" "$@" 3
done
# activation recompute and ZeRO inside a pipeline (slots keep block outputs /
# all but att; ZeRO's strategy syncs and updates once after the last microbatch)
eval "set -- $extras"
for cfg in "$@"; do
    set -- $cfg
    mpi_tap "$1 pp=$2 m=$3 v=$4 dp=$5 tp=$6 $7 recompute=$9 zero=${10}" $(($2 * $5 * $6)) "$bin" "$1" "$2" "$3" "$4" "$5" "$6" "$7" "$8" 3 "$9" "${10}"
done
# bf16 (boundaries sent as bf16, test_equiv's bf16 bounds): schedules, 2d tp,
# dp with ZeRO and recompute
bf16='"interleaved 2 4 2 1 1 1d - 3 none 0 bf16" "1f1b 2 2 1 1 4 2d - 3 none 0 bf16" \
      "interleaved 2 4 2 2 1 1d - 3 block 3 bf16" "1f1b 2 4 1 1 2 1d - 3 attention 0 bf16"'
[ "${PTRAIN_TEST_SUBSET:-0}" = 1 ] && bf16='"1f1b 2 2 1 1 4 2d - 3 none 0 bf16"'
eval "set -- $bf16"
for cfg in "$@"; do
    set -- $cfg
    mpi_tap "$1 pp=$2 m=$3 v=$4 dp=$5 tp=$6 $7 recompute=${10} zero=${11} ${12}" $(($2 * $5 * $6)) "$bin" "$@"
done
# the Llama family (ref_slice.h's test_model_family: GQA, untied head, so
# the first and last stages hold wte and lm_head apart): schedules with dp,
# 1d tp, recompute, ZeRO-3 and bf16
llama='"interleaved 2 4 2 1 1 1d - 3 block 0 fp32" "1f1b 2 4 1 2 1 1d - 3 none 3 fp32" \
       "1f1b 2 4 1 1 2 1d - 3 attention 0 bf16" "gpipe 4 4 1 1 1 1d - 3 none 0 fp32"'
[ "${PTRAIN_TEST_SUBSET:-0}" = 1 ] && llama='"1f1b 2 4 1 2 1 1d - 3 none 3 fp32"'
export PTRAIN_TEST_LLAMA=1
eval "set -- $llama"
for cfg in "$@"; do
    set -- $cfg
    mpi_tap "llama $1 pp=$2 m=$3 v=$4 dp=$5 tp=$6 $7 recompute=${10} zero=${11} ${12}" $(($2 * $5 * $6)) "$bin" "$@"
done
unset PTRAIN_TEST_LLAMA
mpi_tap "memory pp=2" 2 "$bin" memory
done_testing
