#!/bin/sh
# SPDX-License-Identifier: MIT
# Golden plans (mpibind's pattern): for each tests/plan/*.plan, run the
# ptrain-plan command on its first line from the source tree and compare
# the exit status and the output with the file (its '#' lines are the
# command, the status and why the case is there).  Every topology fixture
# in tests/topo/ must have golden plans at two node counts or more.
# Regenerate with tests/plan/regen.sh (review the diff by hand).
. "$top_srcdir/tests/lib.sh"
wd=$(mktemp -d)
trap 'rm -rf "$wd"' EXIT
plan=$top_builddir/ptrain-plan
n=0
for f in "$top_srcdir"/tests/plan/*.plan; do
    [ -e "$f" ] || continue
    name=$(basename "$f" .plan)
    args=$(sed -n '1s/^# ptrain-plan //p' "$f")
    want_rc=$(sed -n '2s/^# exit: //p' "$f")
    grep -v '^#' "$f" >"$wd/want"
    rc=0
    # shellcheck disable=SC2086
    (cd "$top_srcdir" && ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" "$plan" $args) \
        >"$wd/got" 2>&1 </dev/null || rc=$?
    if [ "$rc" = "$want_rc" ] && cmp -s "$wd/want" "$wd/got"; then
        ok "$name: $(grep -m1 '^\* \|ptrain-plan:' "$wd/got" | cut -c1-72)"
    else
        not_ok "$name: exit $rc (want $want_rc) or output differs from the golden file"
        diff "$wd/want" "$wd/got" | head -20 | sed 's/^/# /'
    fi
    n=$((n + 1))
done
check "golden plans found ($n)" [ "$n" -ge 10 ]
# every fixture at two node counts or more
for x in "$top_srcdir"/tests/topo/*.xml; do
    fx=$(basename "$x" .xml)
    k=$(ls "$top_srcdir"/tests/plan/ 2>/dev/null | grep "^$fx-[0-9]*x" | sed "s/^$fx-\([0-9]*\)x.*/\1/" | sort -u | wc -l)
    check "fixture $fx has golden plans at $k node counts (>= 2)" [ "$k" -ge 2 ]
done
# the bad-input cases give one line on stderr and exit 2
for f in "$top_srcdir"/tests/plan/bad-*.plan; do
    [ -e "$f" ] || continue
    lines=$(grep -vc '^#' "$f")
    check "$(basename "$f" .plan): exit 2 with one line" \
        sh -c "[ \"\$(sed -n '2s/^# exit: //p' '$f')\" = 2 ] && [ $lines -eq 1 ]"
done
done_testing
