#!/bin/sh
# SPDX-License-Identifier: MIT
# --version on every installed tool (the programs and scripts of
# bin_PROGRAMS/bin_SCRIPTS, as `make print-tools` lists them): one line
# "NAME (ptrain) VERSION" with configure's PACKAGE_VERSION, status 0,
# nothing on stderr; ptrain-data also after a subcommand.
. "$top_srcdir/tests/lib.sh"
# a clean make: under `make check` the parent's MAKEFLAGS would add
# "Entering directory" lines to the output
mk() { env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL make -s --no-print-directory -C "$top_builddir" "$1"; }
tools=$(mk print-tools) || { echo "Bail out! make print-tools failed"; exit 1; }
version=$(mk print-version)
diag "tools: $tools; version $version"
check "the version is known ($version)" [ -n "$version" ]
for t in ptrain-run ptrain-data ptrain-topo ptrain-plot ptrain-ckpt ptrain-plan; do
    case " $tools " in *" $t "*) ok "$t is among the installed tools" ;; *) not_ok "$t is among the installed tools" ;; esac
done
workdir
# ptrain-run starts MPI as a singleton: no leak checks on MPI's own allocations
nolsan="ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
for t in $tools; do
    name=${t%$EXEEXT}
    rc=0
    env "$nolsan" "$top_builddir/$t" --version >"$wd/out" 2>"$wd/err" </dev/null || rc=$?
    check "$name --version exits 0 (status $rc)" [ "$rc" -eq 0 ]
    check "$name --version prints '$name (ptrain) $version' ($(head -c 80 "$wd/out"))" \
        sh -c "[ \"\$(cat '$wd/out')\" = '$name (ptrain) $version' ]"
    check "$name --version writes nothing on stderr" [ ! -s "$wd/err" ]
done
rc=0
"$top_builddir/ptrain-data" info --version >"$wd/out" 2>&1 || rc=$?
check "ptrain-data info --version prints the version too" \
    sh -c "[ $rc -eq 0 ] && [ \"\$(cat '$wd/out')\" = 'ptrain-data (ptrain) $version' ]"
rc=0
"$top_builddir/ptrain-ckpt" verify --version >"$wd/out" 2>&1 || rc=$?
check "ptrain-ckpt verify --version prints the version too" \
    sh -c "[ $rc -eq 0 ] && [ \"\$(cat '$wd/out')\" = 'ptrain-ckpt (ptrain) $version' ]"
done_testing
