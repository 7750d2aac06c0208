#!/bin/sh
# SPDX-License-Identifier: MIT
# The compute rule (docs/ARCHITECTURE.md, "Rules"): compute only through the ops table
# (lib/backend), communication only through pt_comm (lib/comm).  Greps lib/
# and bin/ for what a CUDA backend could not replace:
#   1. BLAS calls or <cblas.h> outside lib/backend;
#   2. OpenMP (#pragma omp, <omp.h>) outside lib/backend: a threaded loop
#      is a loop over tensor data;
#   3. in the layers above the backend (lib/parallel, lib/model, lib/train, lib/pipeline,
#      lib/optim) and bin/: compound assignment to an array element
#      (x[i] += ..., the shape of an accumulate/scale loop) and
#      memset/memcpy/memmove of float/double/int32 buffers (a backend's
#      zero/copy/copy2d on device memory).
# lib/comm (a collective moves data by definition) and lib/data (host token
# files) are outside the rule.  Each check first runs on a file that breaks
# it, so a check that can no longer fail fails itself.
. "${top_srcdir:-$(cd "$(dirname "$0")/../.." && pwd)}/tests/lib.sh"
cd "$top_srcdir" || exit 1

# code lines only: drop whole-line comments and trailing /* ... */ comments
code() { grep -HnE "$1" $2 2>/dev/null | grep -vE '^[^:]+:[0-9]+:\s*(/\*|\*|//)' | sed 's|/\*.*\*/||' | grep -E "$1"; }
files_outside_backend() { find lib bin -name '*.[ch]' -o -name '*.inc' | grep -v '^lib/backend/' | sort; }
files_above_backend() { find lib/parallel lib/model lib/train lib/optim lib/pipeline bin -name '*.[ch]' | sort; }

BLAS='cblas_|<cblas\.h>'
OMP='#\s*pragma\s+omp|<omp\.h>'
ELEM='\]\s*(\+|-|\*|/)='
MEM='mem(set|cpy|move)\s*\(.*sizeof\s*\(\s*(float|double|int32_t)\s*\)'

# negative controls: each pattern finds its violation in a scratch file
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cat >"$tmp/bad.c" <<'EOC'
#include <cblas.h>
static void f(float *y, const float *x, int n) {
#pragma omp parallel for
    for (int i = 0; i < n; i++) y[i] += x[i]; /* y[i] += in a comment is not code */
    memset(y, 0, sizeof(float) * n);
    cblas_sgemm(0);
}
EOC
for p in "$BLAS" "$OMP" "$ELEM" "$MEM"; do
    n=$(code "$p" "$tmp/bad.c" | wc -l)
    check "the pattern '$p' finds its violation in a scratch file ($n line(s))" [ "$n" -ge 1 ]
done
n=$(printf '/* x[i] += 1 */\n * y[j] *= 2\n' >"$tmp/ok.c"; code "$ELEM" "$tmp/ok.c" | wc -l)
check "comments do not count ($n lines)" [ "$n" -eq 0 ]

out=$(code "$BLAS" "$(files_outside_backend)")
check "no BLAS call or <cblas.h> in lib/ or bin/ outside lib/backend" [ -z "$out" ]
[ -n "$out" ] && echo "$out" | sed 's/^/# /'
out=$(code "$OMP" "$(files_outside_backend)")
check "no OpenMP (#pragma omp, <omp.h>) in lib/ or bin/ outside lib/backend" [ -z "$out" ]
[ -n "$out" ] && echo "$out" | sed 's/^/# /'
out=$(code "$ELEM" "$(files_above_backend)")
check "no element-wise accumulate/scale (x[i] op= ...) in lib/parallel, lib/model, lib/train, lib/optim, lib/pipeline, bin/" [ -z "$out" ]
[ -n "$out" ] && echo "$out" | sed 's/^/# /'
out=$(code "$MEM" "$(files_above_backend)")
check "no memset/memcpy/memmove of tensor buffers above lib/backend (ops->zero/copy/copy2d)" [ -z "$out" ]
[ -n "$out" ] && echo "$out" | sed 's/^/# /'
done_testing
