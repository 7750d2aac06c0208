#!/bin/sh
# SPDX-License-Identifier: MIT
# The strategy rule (lib/train/train.h, "Strategy"): the training step calls
# its strategy only through the pt_train_strategy table, so lib/train/train.c
#   1. never branches on the ZeRO stage: no `t->zero` (or any `->zero`
#      field), no `zero ==`, `zero >` ..., no comparison of a stage with a
#      number, no switch on a stage;
#   2. calls no strategy's own functions (pt_zero_*, zero_*, allreduce_*);
#   3. includes from lib/train only train.h and strategy.h, and the
#      strategies (allreduce.c, zero.c) and their shared helpers (bucket.c)
#      only strategy.h: no include circle between the step and a strategy.
# Each check first runs on a file that breaks it (the lines train.c had
# before the table), so a check that can no longer fail fails itself.
. "${top_srcdir:-$(cd "$(dirname "$0")/../.." && pwd)}/tests/lib.sh"
cd "$top_srcdir" || exit 1

# code lines only: drop whole-line comments and trailing /* ... */ comments
code() {
    grep -HnE -e "$1" $2 2>/dev/null | grep -vE '^[^:]+:[0-9]+:\s*(/\*|\*|//)' | sed 's|/\*.*\*/||' | grep -E -e "$1"
}
# a file that exists and had no offending line
clean() { [ -f "$1" ] && [ -z "$2" ]; }

CMP='(==|!=|<=|>=|<|>)'
BRANCH="->zero([^_a-zA-Z0-9(]|\$)|\\bzero\\s*$CMP"                       # t->zero, zero ==, zero >
BRANCH="$BRANCH|\\b(zero|stage|zero_stage)\\s*$CMP\\s*[0-9]|switch\\s*\\(.*(zero|stage)" # stage > 1, switch
CALL='(^|[^>_a-zA-Z0-9])(pt_zero_|zero_|allreduce_)[a-zA-Z0-9_]*\s*\('
STEP_INC='#\s*include\s*"train/'
STEP_OK='#\s*include\s*"train/(train|strategy)\.h"'
IMPL_OK='#\s*include\s*"train/strategy\.h"'

# negative controls
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cat >"$tmp/bad.c" <<'EOC'
#include "train/train.h"
#include "train/zero.h"
void pt_train_zero_grad(pt_train *t)
{
    if (t->grads_memory) t->ops->zero(t->grads_memory, t->grads_n, PT_F32);
    if (t->zero) pt_zero_zero_inflight(t);
    if (plan->zero == 3) return;
    if (z->stage > 1) return;
    switch (t->strategy->zero_stage) { default: break; }
}
EOC
n=$(code "$BRANCH" "$tmp/bad.c" | wc -l)
check "the branch pattern finds all 4 stage branches of a scratch file ($n)" [ "$n" -eq 4 ]
n=$(code "$CALL" "$tmp/bad.c" | wc -l)
check "the call pattern finds the ZeRO call of a scratch file ($n)" [ "$n" -eq 1 ]
n=$(code "$STEP_INC" "$tmp/bad.c" | grep -cvE "$STEP_OK")
check "the include check finds train/zero.h in a scratch file ($n)" [ "$n" -eq 1 ]
cat >"$tmp/ok.c" <<'EOC'
/* if (t->zero) in a comment is not code */
void pt_train_zero_grad(pt_train *t) { if (t->strategy) t->strategy->zero_grad(t); }
static void f(pt_train *t) { t->ops->zero(t->grads_memory, 1, PT_F32); pt_train_zero_grad(t); }
const pt_train_strategy *pt_train_strategy_zero(int stage) { return s->zero_stage == stage ? s : NULL; }
EOC
n=$(code "$BRANCH|$CALL" "$tmp/ok.c" | wc -l)
check "comments, ops->zero, hook calls and the table lookup do not count ($n lines)" [ "$n" -eq 0 ]

f=lib/train/train.c
out=$(code "$BRANCH" "$f")
check "no branch on the ZeRO stage in $f" clean "$f" "$out"
[ -n "$out" ] && echo "$out" | sed 's/^/# /'
out=$(code "$CALL" "$f")
check "no call of a strategy's own function in $f (only t->strategy->hook)" [ -z "$out" ]
[ -n "$out" ] && echo "$out" | sed 's/^/# /'
out=$(code "$STEP_INC" "$f" | grep -vE "$STEP_OK")
check "$f includes from lib/train only train.h and strategy.h" [ -z "$out" ]
[ -n "$out" ] && echo "$out" | sed 's/^/# /'
for f in lib/train/allreduce.c lib/train/zero.c lib/train/bucket.c; do
    out=$(code "$STEP_INC" "$f" | grep -vE "$IMPL_OK")
    check "$f includes from lib/train only strategy.h" clean "$f" "$out"
    [ -n "$out" ] && echo "$out" | sed 's/^/# /'
done
done_testing
