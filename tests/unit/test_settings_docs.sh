#!/bin/sh
# SPDX-License-Identifier: MIT
# The plan settings' table (lib/contract/settings.h) against what users
# read and type: for every row (tests/unit/test_settings --dump: KEY VAR
# OFFERED ARG), its variable in ptrain-env(7); where the plugin offers it
# (spank/options.c registers one option per such row), --ptrain-KEY in
# ptrain_spank(8); where ptrain-run and ptrain-plan offer it, --KEY in
# their --help and man pages.  And the other way: the options
# spank/options.c writes by hand are the plugin's own (energy, explain,
# verbose), never a plan setting.  tests/slurm/test_spank.sh checks srun
# --help lists every row's option.  A setting added in one place only
# fails here.
. "$top_srcdir/tests/lib.sh"
dump="$top_builddir/tests/unit/test_settings"
[ -x "$dump" ] || skip_all "tests/unit/test_settings not built"
need_run
plan="$top_builddir/ptrain-plan"
[ -x "$plan" ] || skip_all "ptrain-plan not built"
workdir
rows=$("$dump" --dump)
check "the table dumps its rows ($(echo "$rows" | wc -l))" [ "$(echo "$rows" | wc -l)" -ge 16 ]
# man text with \- as - and fonts dropped
man() { sed 's/\\-/-/g; s/\\f[BIRP]//g; s/\\(em/-/g' "$top_srcdir/man/$1"; }
man ptrain-env.7 >"$wd/env7"; man ptrain_spank.8 >"$wd/spank8"; man ptrain-run.1 >"$wd/run1"; man ptrain-plan.1 >"$wd/plan1"
"$run" --help >"$wd/run.help" 2>&1
"$plan" --help >"$wd/plan.help" 2>&1
sed -n 's/^[[:space:]]*{"ptrain-\([a-z0-9-]*\)".*/\1/p' "$top_srcdir/spank/options.c" | sort >"$wd/own.opts"
check "the plugin's own options are found in spank/options.c ($(tr '\n' ' ' <"$wd/own.opts"))" [ "$(wc -l <"$wd/own.opts")" -ge 3 ]
# the plugin's options: one per row offered to it, then its own
{ echo "$rows" | awk 'int($3) % 2 == 1 { print $1 }'; cat "$wd/own.opts"; } >"$wd/plugin.opts"

# missing ROWS: what the documents and front ends lack for those rows ("" when nothing)
missing() {
    echo "$1" | {
        m=
        while read -r key var offered; do
            grep -q -- "\\b$var\\b" "$wd/env7" || m="$m ptrain-env.7:$var"
            if [ $((offered & 1)) -ne 0 ]; then
                grep -qx -- "$key" "$wd/plugin.opts" || m="$m spank/options.c:ptrain-$key"
                grep -q -- "--ptrain-$key\\b" "$wd/spank8" || m="$m ptrain_spank.8:--ptrain-$key"
            fi
            if [ $((offered & 2)) -ne 0 ]; then
                grep -q -- "--$key\\b" "$wd/run.help" || m="$m ptrain-run--help:--$key"
                grep -q -- "--$key\\b" "$wd/run1" || m="$m ptrain-run.1:--$key"
            fi
            if [ $((offered & 4)) -ne 0 ]; then
                grep -q -- "--$key\\b" "$wd/plan.help" || m="$m ptrain-plan--help:--$key"
                grep -q -- "--$key\\b" "$wd/plan1" || m="$m ptrain-plan.1:--$key"
            fi
        done
        echo $m
    }
}
m=$(missing "no-such PTRAIN_NO_SUCH 7")
check "a row nothing documents is caught in all 7 places ($m)" [ "$(echo $m | wc -w)" -eq 7 ]
m=$(missing "$rows")
check "every row is documented and offered where the table says (${m:-nothing missing})" [ -z "$m" ]
bad=
for o in $(cat "$wd/own.opts"); do
    echo "$rows" | awk -v k="$o" '$1 == k { f = 1 } END { exit !f }' && bad="$bad --ptrain-$o"
done
check "the options spank/options.c writes by hand are none of the settings (${bad:-none is})" [ -z "$bad" ]
done_testing
