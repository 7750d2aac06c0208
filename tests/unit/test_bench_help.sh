#!/bin/sh
# SPDX-License-Identifier: MIT
# Every bench program (bench/bench-*, built by `make`) and bench script
# answers --help and -h with its usage on stdout, status 0 and nothing on
# stderr, without running the benchmark (and without mpirun: the programs
# parse before MPI_Init); the usage names every option of the program's
# table (read from the source, so an option left out of the table fails).
# A bad command is refused with status 2, nothing on stdout and ONE line on
# stderr naming what was wrong: a non-numeric value, a missing value, an
# unknown option.
. "$top_srcdir/tests/lib.sh"
workdir
nolsan="ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
extra_env= # more NAME=VALUE words for the runs
# a guard against a bench that runs instead of answering (the old
# bench-step --help ran the whole benchmark); not a timing assertion
guard=
command -v timeout >/dev/null 2>&1 && guard="timeout 120"

# try NAME ARGS...: run the program or script NAME with ARGS (from $wd, so a
# script finds no build tree of its own) into $wd/out, $wd/err and $rc
try() {
    _n=$1
    shift
    rc=0
    case $_n in
    *.sh) # pointed at an empty build tree: a script that ran would stop at once
        (cd "$wd" && env "$nolsan" top_builddir="$wd" PTRAIN_BUILD="$wd" $extra_env $guard \
            sh "$top_srcdir/bench/$_n" "$@") >"$wd/out" 2>"$wd/err" </dev/null || rc=$? ;;
    *) (cd "$wd" && env "$nolsan" $extra_env $guard "$top_builddir/bench/$_n" "$@") >"$wd/out" 2>"$wd/err" </dev/null || rc=$? ;;
    esac
}
lines() { wc -l <"$1" | tr -d ' '; }
# answers NAME ARGS...: --help or -h: status 0, a usage line first, nothing on stderr
answers() {
    _n=$1
    try "$@"
    shift
    check "$_n $*: exits 0 (status $rc)" [ "$rc" -eq 0 ]
    check "$_n $*: the first line is its usage ($(head -n 1 "$wd/out" | cut -c 1-60))" \
        sh -c "head -n 1 '$wd/out' | grep -q '^usage: '"
    check "$_n $*: nothing on stderr ($(head -c 200 "$wd/err" | tr '\n' ' '))" [ ! -s "$wd/err" ]
}
# refuses NAME WORD ARGS...: status 2, stdout empty, one line on stderr containing WORD
refuses() {
    _n=$1 _w=$2
    shift 2
    try "$_n" "$@"
    _e=$(head -n 1 "$wd/err")
    _d="$_n${extra_env:+ ($extra_env)} $*"
    check "$_d: exits 2 (status $rc)" [ "$rc" -eq 2 ]
    check "$_d: one line on stderr ($(lines "$wd/err") lines: $_e)" [ "$(lines "$wd/err")" -eq 1 ]
    check "$_d: the line names '$_w'" grep -qF -- "$_w" "$wd/err"
    check "$_d: nothing on stdout" [ ! -s "$wd/out" ]
}

# program:source:numeric option
for entry in bench-step:bench_step.c:batch bench-layouts:bench_layouts.c:batch \
    bench-gemm-bf16:bench_gemm_bf16.c:rows bench-flash-ops:bench_flash.c:batch \
    bench-pipeline:bench_pipeline.c:micro bench-coll:bench_coll.c:iters; do
    IFS=: read -r prog src num <<EOF
$entry
EOF
    [ -x "$top_builddir/bench/$prog" ] || { echo "Bail out! bench/$prog not built (make)"; exit 1; }
    answers "$prog" --help
    cp "$wd/out" "$wd/$prog.help"
    answers "$prog" -h
    sed -n 's/.*{"\([a-z0-9-]*\)", BENCH_[A-Z]*,.*/\1/p' "$top_srcdir/bench/$src" >"$wd/$prog.opts"
    check "$prog: the option table was found ($(lines "$wd/$prog.opts") options)" [ "$(lines "$wd/$prog.opts")" -ge 3 ]
    check "$prog: the numeric option --$num is in the table" grep -qx "$num" "$wd/$prog.opts"
    missing=
    while read -r o; do
        grep -q -- "^  --$o\( \|\$\)" "$wd/$prog.help" || missing="$missing --$o"
    done <"$wd/$prog.opts"
    check "$prog --help lists every option${missing:+ (missing:$missing)}" [ -z "$missing" ]
    refuses "$prog" abc --"$num" abc
    refuses "$prog" "--$num" --"$num"
    refuses "$prog" --no-such-option --no-such-option 1
    refuses "$prog" stray stray
done
# a range, a list and a choice as the programs check them
refuses bench-step 0 --batch 0
refuses bench-layouts -1 --warmup -1
refuses bench-pipeline 1,x --ms 1,x
refuses bench-gemm-bf16 fast --clock fast
refuses bench-gemm-bf16 nan --min-time nan
refuses bench-coll --keep-memory --keep-memory=1
# control: the option check would see an option that is not there
grep -q -- "--no-such-option" "$wd/bench-step.help" && not_ok "control: an absent option is not found" ||
    ok "control: an absent option is not found"

# the scripts: script:numeric option ("" for bench_plan.sh, whose settings are environment variables)
for entry in bench-flash.sh:steps bench-torch.sh:steps bench-blas-threads.sh:steps bench_plan.sh:; do
    prog=${entry%%:*} num=${entry#*:}
    answers "$prog" --help
    cp "$wd/out" "$wd/$prog.help"
    answers "$prog" -h
    # every option of the script's case statement is in its usage
    missing=
    for o in $(sed -n 's/^ *\(--[a-z-]*\)) .*/\1/p' "$top_srcdir/bench/$prog" | sort -u); do
        grep -q -- "^  $o " "$wd/$prog.help" || missing="$missing $o"
    done
    check "$prog --help lists every option${missing:+ (missing:$missing)}" [ -z "$missing" ]
    refuses "$prog" --no-such-option --no-such-option 1
    if [ -n "$num" ]; then
        refuses "$prog" abc --"$num" abc
        refuses "$prog" "--$num" --"$num"
    fi
done
extra_env=BATCH=abc
refuses bench_plan.sh abc
extra_env=MODEL=4,4,128
refuses bench_plan.sh 4,4,128
extra_env=
done_testing
