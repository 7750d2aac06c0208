#!/bin/sh
# SPDX-License-Identifier: MIT
# Regenerate the golden plans tests/plan/*.plan from tests/plan/cases.list
# with the ptrain-plan of a build tree (mpibind's test-suite pattern: a
# topology fixture x job geometry x model -> the expected plan).  Review
# the diff by hand before committing: every change of the cost model or
# the search shows up here.
#   tests/plan/regen.sh [BUILDDIR]      (default: the source tree itself)
#   make regen-plans                    (from a build tree)
# cases.list: one case a line, "NAME | ARGS | WHY", where WHY says which
# layout wins and why (the golden file's comment); '#' lines are comments.
set -eu
src=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-$src}
plan=$build/ptrain-plan
[ -x "$plan" ] || { echo "regen.sh: no $plan (build first)" >&2; exit 2; }
cd "$src"
rm -f tests/plan/*.plan
grep -v '^[[:space:]]*\(#\|$\)' tests/plan/cases.list | while IFS='|' read -r name args why; do
    name=$(echo "$name" | sed 's/^ *//; s/ *$//')
    args=$(echo "$args" | sed 's/^ *//; s/ *$//')
    why=$(echo "$why" | sed 's/^ *//; s/ *$//')
    out=tests/plan/$name.plan
    rc=0
    # shellcheck disable=SC2086
    ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" "$plan" $args >"$out.tmp" 2>&1 || rc=$?
    {
        echo "# ptrain-plan $args"
        echo "# exit: $rc"
        echo "# $why"
        cat "$out.tmp"
    } >"$out"
    rm -f "$out.tmp"
    echo "$out: exit $rc, $(grep -m1 '^\* ' "$out" | awk '{print $2, $3, $4, $5}')"
done
