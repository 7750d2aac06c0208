#!/bin/sh
# SPDX-License-Identifier: MIT
# The Llama family equals Hugging Face's LlamaForCausalLM: ptrain trains a
# random model single-process in fp32 (tests/mpi/llama_dump.c) and an
# independent float64 PyTorch implementation of HF's semantics
# (tests/mpi/llama_torch.py) trains the same weights on the same tokens with
# the same AdamW; every validation loss agrees to 2e-5 relative.  Shapes:
# grouped-query attention with an untied head and q/k/v biases (Qwen2) at
# RoPE theta 5e5, Llama 3.1's RoPE scaling with a short original context (so
# all three frequency bands occur), multi-head attention (KV = H), and the
# llama-test preset.  Skipped where no python3 has torch (scripts/deps.sh
# installs Debian's python3-torch).
. "$top_srcdir/tests/lib.sh"
need_mpi_prog llama_dump
py=
for c in python3 /usr/bin/python3; do
    if command -v "$c" >/dev/null 2>&1 && "$c" -c 'import torch' >/dev/null 2>&1; then py=$c; break; fi
done
[ -n "$py" ] || skip_all "no python3 with torch (Debian: python3-torch)"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
seed=${PTRAIN_TEST_SEED:-$(od -An -N4 -tu4 /dev/urandom | tr -d " ")}
echo "# seed $seed (PTRAIN_TEST_SEED repeats this run)"
n=0
# model B T steps [rope scaling]
for c in "llama:2,4,2,32,48,16,97,untied,qkv-bias,theta=500000 2 16 6" \
         "llama:2,4,1,32,40,16,61 2 16 6 8,1,4,16" \
         "llama:1,4,4,32,64,8,50 3 8 6" \
         "llama-test 2 32 4"; do
    set -- $c
    n=$((n + 1))
    out="$work/dump$n"
    echo "# $bin $1 $2 $3 $4 1e-3 $seed $out ${5:-}"
    if ! OMP_NUM_THREADS=1 ptrain_mpirun -np 1 "$bin" "$1" "$2" "$3" "$4" 1e-3 "$seed" "$out" ${5:+"$5"} >"$work/log" 2>&1; then
        sed 's/^/# /' "$work/log"
        not_ok "[$1] ptrain ran the steps"
        continue
    fi
    "$py" "$top_srcdir/tests/mpi/llama_torch.py" "$out" 2e-5 >"$work/tap" 2>&1
    while IFS= read -r line; do
        case "$line" in
        "ok - "*) ok "[$1${5:+ rope $5}] ${line#ok - }" ;;
        "not ok - "*) not_ok "[$1${5:+ rope $5}] ${line#not ok - }" ;;
        *) echo "# $line" ;;
        esac
    done <"$work/tap"
done
done_testing
