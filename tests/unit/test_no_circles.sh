#!/bin/sh
# SPDX-License-Identifier: MIT
# No include circle (docs/ARCHITECTURE.md, "Rules"; issue 35): no two
# source files of lib/, bin/, spank/ and topo/ call into each other.  A
# helper both sides need lives in its own file below them (tp_common.c,
# bucket.c, cuda/context.c, blas_report.c above blas.c and gemm_bf16.c),
# or one side returns data (or takes a callback) instead of calling back.
# Read from the build's object files with nm: an undefined symbol of one
# file's object that another file's object defines is a call (or a use)
# from the first file into the second; a pair with both directions fails,
# named with the symbols each side uses.  The objects of tests/ and bench/
# are not looked at (a test may call anything).  The objects are found
# under top_builddir (a VPATH build, make distcheck) and named by their
# source under top_srcdir; an object whose source is gone (a stale one) is
# skipped.  The check first runs on listings that break the rule, so a
# check that can no longer fail fails itself.
. "${top_srcdir:-$(cd "$(dirname "$0")/../.." && pwd)}/tests/lib.sh"
NM=${NM:-nm} # a command, maybe with options ("nm -B", as libtool sets it)
command -v "${NM%% *}" >/dev/null 2>&1 || skip_all "nm not found (${NM%% *}; binutils)"

# objects: "OBJECT SOURCE" for each object file of lib/, bin/, spank/,
# topo/ in the build (libtool's .libs/ copies included), SOURCE the file
# under top_srcdir it was compiled from: automake names an object
# TARGET-BASE.o when its target has flags of its own, else BASE.o.
objects() {
    (cd "$top_builddir" && find lib bin spank topo -name '*.o' 2>/dev/null) | sort | while IFS= read -r o; do
        d=$(dirname "$o")
        d=${d%/.libs}
        b=$(basename "$o" .o)
        for n in "$b" "${b#*-}"; do
            for e in c cu; do
                if [ -f "$top_srcdir/$d/$n.$e" ]; then
                    printf '%s %s\n' "$o" "$d/$n.$e"
                    continue 3
                fi
            done
        done
    done
}
# symbols SOURCE < nm output: "D SYMBOL SOURCE" for a global symbol the
# object defines, "U SYMBOL SOURCE" for one it uses undefined.
symbols() {
    awk -v s="$1" 'NF == 3 && $2 ~ /^[BDGRSTVW]$/ { print "D", $3, s } NF == 2 && $1 == "U" { print "U", $2, s }'
}
# calls < symbols: "A -> B: SYM, ..." for each source A using a symbol
# that another source B defines (each pair once, its symbols in order).
calls() {
    awk '$1 == "D" { if (!(($2, $3) in isdef)) { isdef[$2, $3] = 1; defs[$2] = defs[$2] " " $3 } next }
         $1 == "U" { n++; use[n] = $2; who[n] = $3 }
         END {
             for (i = 1; i <= n; i++) {
                 k = split(defs[use[i]], ds, " ")
                 for (j = 1; j <= k; j++) {
                     if (ds[j] == who[i] || ((who[i], ds[j], use[i]) in seen)) continue
                     seen[who[i], ds[j], use[i]] = 1
                     e = who[i] " -> " ds[j]
                     if (!(e in syms)) { m++; order[m] = e; syms[e] = use[i] } else syms[e] = syms[e] ", " use[i]
                 }
             }
             for (i = 1; i <= m; i++) print order[i] ": " syms[order[i]]
         }'
}
# circles < calls: "A <-> B (A uses ...; B uses ...)" for each pair of
# sources that call into each other, A before B.
circles() {
    awk -F': ' '{ split($1, ab, " -> "); use[ab[1], ab[2]] = $2; a[NR] = ab[1]; b[NR] = ab[2] }
         END {
             for (i = 1; i <= NR; i++)
                 if (a[i] < b[i] && ((b[i], a[i]) in use))
                     print a[i] " <-> " b[i] " (" a[i] " uses " use[a[i], b[i]] "; " b[i] " uses " use[b[i], a[i]] ")"
         }' | sort
}

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# negative controls: nm's listings of three made-up objects, two of which
# call into each other
cat >"$tmp/a.nm" <<'EOF'
0000000000000000 T pt_a_run
0000000000000040 T pt_a_helper
                 U pt_b_step
                 U memcpy
EOF
cat >"$tmp/b.nm" <<'EOF'
0000000000000000 T pt_b_step
0000000000000000 b b_static
                 U pt_a_helper
EOF
cat >"$tmp/c.nm" <<'EOF'
0000000000000000 T pt_c_main
0000000000000000 D pt_c_table
                 U pt_a_run
                 w __gmon_start__
EOF
{ symbols lib/x/a.c <"$tmp/a.nm"; symbols lib/x/b.c <"$tmp/b.nm"; symbols lib/x/c.c <"$tmp/c.nm"; } >"$tmp/bad.sym"
out=$(calls <"$tmp/bad.sym" | circles)
check "a made-up pair that calls into each other is found, named with the symbols each side uses ($out)" \
    [ "$out" = "lib/x/a.c <-> lib/x/b.c (lib/x/a.c uses pt_b_step; lib/x/b.c uses pt_a_helper)" ]
n=$(calls <"$tmp/bad.sym" | wc -l)
check "... and the one-way call from c.c is a call, not a circle ($n calls)" [ "$n" -eq 3 ]

objects >"$tmp/objects"
n=$(wc -l <"$tmp/objects")
check "the build's objects of lib/, bin/, spank/ and topo/ were found ($n in $top_builddir)" [ "$n" -gt 50 ]
while read -r o s; do
    $NM "$top_builddir/$o" 2>/dev/null | symbols "$s"
done <"$tmp/objects" >"$tmp/all.sym"
calls <"$tmp/all.sym" >"$tmp/calls"
# the same on this build's real objects: a call known to go one way is
# read, and a call back added to the callee's listing makes a circle
n=$(grep -c '^lib/parallel/tp1d\.c -> lib/parallel/tp_common\.c: ' "$tmp/calls")
check "nm's listings of the build are read: lib/parallel/tp1d.c calls into tp_common.c ($n)" [ "$n" -eq 1 ]
grep ' lib/parallel/tp_common\.c$' "$tmp/all.sym" >"$tmp/back.sym"
echo "U pt_layout_1d lib/parallel/tp_common.c" >>"$tmp/back.sym"
grep ' lib/parallel/tp1d\.c$' "$tmp/all.sym" >>"$tmp/back.sym"
out=$(calls <"$tmp/back.sym" | circles | cut -d' ' -f1-3)
check "... and tp_common.c's listing with a use of tp1d.c's pt_layout_1d added makes them a circle ($out)" \
    [ "$out" = "lib/parallel/tp1d.c <-> lib/parallel/tp_common.c" ]

out=$(circles <"$tmp/calls")
check "no two source files of lib/, bin/, spank/, topo/ call into each other" [ -z "$out" ]
[ -n "$out" ] && echo "$out" | sed 's/^/# /'
done_testing
