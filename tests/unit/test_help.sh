#!/bin/sh
# SPDX-License-Identifier: MIT
# --help of the C tools lists every long option of their getopt tables
# (read from the sources, so a new option missing from --help fails), and
# ptrain-run's is grouped by topic with each pipeline/ZeRO option under
# "Plan and parallelism".  Every tool (and ptrain-plot) answers --help and
# -h with a usage on stdout and refuses an unknown option in one line.
. "$top_srcdir/tests/lib.sh"
workdir
nolsan="ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
# long names of the `struct option` table(s) in a C file: {"name", or { "name",
table() {
    sed -n '/struct option [a-z_]*\[\] *= *{/,/{ *0, *0, *0, *0 *}/p' "$1" |
        grep -o '{ *"[a-z0-9-]*"' | sed 's/{ *"//; s/"$//' | sort -u
}
for tool in ptrain-run ptrain-data ptrain-topo ptrain-ckpt ptrain-plan; do
    src=$top_srcdir/bin/$tool.c
    case $tool in ptrain-run | ptrain-data | ptrain-ckpt | ptrain-plan) src=$top_srcdir/bin/${tool#ptrain-}/options.c ;; esac
    table "$src" >"$wd/$tool.opts"
    n=$(wc -l <"$wd/$tool.opts")
    check "$tool: the getopt table was found ($n long options)" [ "$n" -ge 3 ]
    rc=0
    env "$nolsan" "$top_builddir/$tool" --help >"$wd/$tool.help" 2>"$wd/$tool.err" </dev/null || rc=$?
    check "$tool --help exits 0 (status $rc)" [ "$rc" -eq 0 ]
    missing=
    while read -r o; do
        grep -q -- "--$o\([^a-z0-9-]\|\$\)" "$wd/$tool.help" || missing="$missing --$o"
    done <"$wd/$tool.opts"
    check "$tool --help names every long option${missing:+ (missing:$missing)}" [ -z "$missing" ]
done
# every tool, ptrain-plot included: --help and -h print a usage line on
# stdout with status 0 and nothing on stderr; an unknown option is refused
# with status 2 and one line on stderr naming it
for tool in ptrain-run ptrain-data ptrain-topo ptrain-ckpt ptrain-plan ptrain-plot; do
    for h in --help -h; do
        rc=0
        env "$nolsan" "$top_builddir/$tool" $h >"$wd/out" 2>"$wd/err" </dev/null || rc=$?
        check "$tool $h exits 0 (status $rc)" [ "$rc" -eq 0 ]
        check "$tool $h prints a usage line" grep -q '^usage: ' "$wd/out"
        check "$tool $h prints nothing on stderr" [ ! -s "$wd/err" ]
    done
    rc=0
    env "$nolsan" "$top_builddir/$tool" --no-such-option >"$wd/out" 2>"$wd/err" </dev/null || rc=$?
    check "$tool --no-such-option exits 2 (status $rc)" [ "$rc" -eq 2 ]
    check "$tool --no-such-option: one line on stderr ($(wc -l <"$wd/err") lines)" [ "$(wc -l <"$wd/err")" -eq 1 ]
    check "$tool --no-such-option: the line names it" grep -q -- "--no-such-option" "$wd/err"
done
# negative control: the check would see an option that is not there
grep -q -- "--no-such-option" "$wd/ptrain-run.help" && not_ok "control: an absent option is not found" ||
    ok "control: an absent option is not found"
help=$wd/ptrain-run.help
for h in "Model:" "Data:" "Plan and parallelism" "Optimizer" "Logging and metrics:" "Robustness:"; do
    check "ptrain-run --help has the group '$h'" grep -q "^$h" "$help"
done
# the section a given option is in: the last heading line (no indent) above it
section() { awk -v o="--$1" '/^[A-Z]/ { s = $0 } index($0, o) && $1 ~ /^--/ { print s; exit }' "$help"; }
for o in pp microbatches schedule virtual-stages pp-split zero recompute precision dp tp sp; do
    check "--$o is listed under Plan and parallelism ($(section $o))" \
        sh -c "case '$(section $o)' in 'Plan and parallelism'*) exit 0;; esac; exit 1"
done
# one spelling of the setting: --microbatches (as the plugin's option and
# PTRAIN_MICROBATCHES); --micro-batches, the spelling of earlier versions,
# is the same flag and its messages name --microbatches
for o in microbatches micro-batches; do
    rc=0
    env "$nolsan" "$top_builddir/ptrain-run" --$o 0 >"$wd/out" 2>"$wd/err" </dev/null || rc=$?
    check "ptrain-run --$o 0 is refused naming --microbatches (status $rc: $(cat "$wd/err"))" \
        sh -c "[ $rc -eq 2 ] && grep -q -- \"--microbatches: '0'\" '$wd/err'"
done
for o in lr weight-decay grad-clip adam-eps warmup; do
    check "--$o is listed under Optimizer" sh -c "case '$(section $o)' in Optimizer*) exit 0;; esac; exit 1"
done
check "--metrics is listed under Logging and metrics" sh -c "case '$(section metrics)' in Logging*) exit 0;; esac; exit 1"
check "--watchdog is listed under Robustness" sh -c "case '$(section watchdog)' in Robustness*) exit 0;; esac; exit 1"
done_testing
