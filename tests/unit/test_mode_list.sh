#!/bin/sh
# SPDX-License-Identifier: MIT
# One place lists the tensor-parallel modes (docs/ARCHITECTURE.md, "Rules";
# issue 35): lib/contract/plan.h's PT_MODE_ROWS, from which the enum, the
# mode table (plan_modes.c) and every message's list (PT_MODE_NAMES,
# PT_LAYOUT_MODE_NAMES, PT_PLAN_MODE_NAMES) are made.  No string literal
# in lib/, bin/, spank/ or topo/ spells two mode names joined by ", ", ","
# "|" or "/", so a new layout reaches every message, option table and help
# text by one row.  The check first runs on a file that breaks it, so a
# check that can no longer fail fails itself.
. "${top_srcdir:-$(cd "$(dirname "$0")/../.." && pwd)}/tests/lib.sh"
cd "$top_srcdir" || exit 1

M='(off|auto|1d|2d|2\.5d|3d)'
LIST="(^|[^A-Za-z0-9_.])$M[[:space:]]*[,|/][[:space:]]*$M([^A-Za-z0-9_]|\$)"
# string literals of the code lines of a file (whole-line comments and
# trailing /* ... */ dropped), each as FILE:LINE:"literal"
literals() {
    grep -HnE '"' "$@" 2>/dev/null | grep -vE '^[^:]+:[0-9]+:[[:space:]]*(/\*|\*|//)' |
        while IFS= read -r l; do
            loc=${l%%:*}; rest=${l#*:}; line=${rest%%:*}; code=${rest#*:}
            printf '%s\n' "$code" | sed 's|/\*.*\*/||' | grep -oE '"([^"\\]|\\.)*"' | sed "s|^|$loc:$line:|"
        done
}
lists() { literals "$@" | grep -E "$LIST"; }
files() { find lib bin spank topo -name '*.[ch]' -o -name '*.inc' -o -name '*.cu' -o -name '*.cuh' |
    grep -v '^lib/contract/plan\.h$' | sort; }

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cat >"$tmp/bad.c" <<'EOC'
static const char *a = "invalid mode (valid: off, 1d, 2d, 2.5d, 3d)";
static const char *b = "  --mode auto|1d|2d|2.5d|3d|off\n";
static const char *c = "off,auto,1d";
/* "1d, 2d" in a comment is no literal */
static const char *d = "a 2d grid, 3d too"; const char *e = "tp=4, 1d";
EOC
n=$(lists "$tmp/bad.c" | wc -l)
check "the pattern finds each of 3 literal mode lists in a scratch file and nothing else ($n)" [ "$n" -eq 3 ]

out=$(lists $(files))
check "no literal list of modes outside lib/contract/plan.h's PT_MODE_ROWS" [ -z "$out" ]
[ -n "$out" ] && printf "%s\n" "$out" | sed 's/^/# /'
n=$(grep -c 'PT_MODE_ROWS\|PT_LAYOUT_MODE_ROWS' lib/contract/plan.h)
check "lib/contract/plan.h holds the list ($n lines name it)" [ "$n" -ge 2 ]
n=$(files | wc -l)
check "the check looked at the tree's sources ($n files)" [ "$n" -gt 100 ]
done_testing
