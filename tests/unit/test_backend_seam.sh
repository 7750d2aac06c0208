#!/bin/sh
# SPDX-License-Identifier: MIT
# The backend seam (docs/ARCHITECTURE.md, "Rules"; issue 35): code outside
# lib/backend reaches a device only through the backend's table
# (lib/backend/ops.h: pt_backend and its pt_backend_dev), so no file in
# lib/, bin/, spank/ or topo/ outside lib/backend includes a CUDA header:
# the CUDA runtime, cuBLAS(Lt), cuDNN, NVML's own header, or the backend's
# private backend/cuda/*.h.  The one exception is NCCL's header in lib/comm's
# NCCL transport (comm_nccl.c), which is lib/comm's own library.
# (lib/energy/nvml.h is ptrain's dlopen wrapper, not NVML's header.)
# The check first runs on files that break it, so a check that can no
# longer fail fails itself.
. "${top_srcdir:-$(cd "$(dirname "$0")/../.." && pwd)}/tests/lib.sh"
cd "$top_srcdir" || exit 1

HDR='^\s*#\s*include\s*(<(cuda|cuda_runtime|cuda_runtime_api|cuda_bf16|cuda_fp16|cuda_fp8|cublas|cublasLt|cublas_v2|cudnn|nccl|nvml)[A-Za-z0-9_]*\.h>|"backend/cuda/[^"]*")'
files() { find lib bin spank topo -name '*.[ch]' -o -name '*.inc' -o -name '*.cu' -o -name '*.cuh' | grep -v '^lib/backend/' | sort; }
# the allowed line: lib/comm's NCCL transport includes nccl.h
allowed() { grep -vE '^lib/comm/comm_nccl\.c:[0-9]+:\s*#\s*include\s*<nccl\.h>'; }

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cat >"$tmp/bad.c" <<'EOC'
#include <cuda_runtime_api.h>
#include <cublasLt.h>
# include <cudnn.h>
#include "backend/cuda/cuda.h"
#include "backend/cuda/cuda_priv.h"
#include <nvml.h>
EOC
n=$(grep -cE "$HDR" "$tmp/bad.c")
check "the pattern finds each of 6 CUDA includes in a scratch file ($n)" [ "$n" -eq 6 ]
printf '#include "energy/nvml.h"\n#include "backend/ops.h"\n/* #include <cuda.h> in a comment */\n' >"$tmp/ok.c"
n=$(grep -cE "$HDR" "$tmp/ok.c")
check "ptrain's own energy/nvml.h, backend/ops.h and a comment do not count ($n)" [ "$n" -eq 0 ]
n=$(printf 'lib/comm/comm_nccl.c:14:#include <nccl.h>\nlib/comm/comm_dev.c:9:#include <nccl.h>\n' | allowed | wc -l)
check "the exception is nccl.h in lib/comm/comm_nccl.c only ($n other line left)" [ "$n" -eq 1 ]

out=$(grep -HnE "$HDR" $(files) 2>/dev/null | allowed)
check "no CUDA header in lib/, bin/, spank/, topo/ outside lib/backend (but nccl.h in lib/comm/comm_nccl.c)" [ -z "$out" ]
[ -n "$out" ] && echo "$out" | sed 's/^/# /'
n=$(files | wc -l)
check "the check looked at the tree's sources ($n files)" [ "$n" -gt 100 ]
done_testing
