#!/bin/sh
# The pipeline executor's per-instruction hook around every forward and
# backward (GPipe, 1F1B, interleaved; see test_pipeline_hook.c).
. "$top_srcdir/tests/lib.sh"
need_mpi_prog test_pipeline_hook
for cfg in "1f1b 1 3 1" "gpipe 2 4 1" "1f1b 2 4 1" "interleaved 2 4 2"; do
    set -- $cfg
    mpi_tap "$1 pp=$2 m=$3 v=$4" "$2" "$bin" "$@"
done
mpi_tap "error" 1 "$bin" error
done_testing
