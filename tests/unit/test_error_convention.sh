#!/bin/sh
# SPDX-License-Identifier: MIT
# ONE error convention (lib/core/core.h): a function that can fail returns a
# negative PT_E* code through pt_fail() and the caller reads the line with
# pt_errmsg().  The other one, pt_error buffers passed as parameters and
# filled by pt_errprintf/pt_verrprintf (with pt_error_last() bridging the
# two), was removed from every layer (issue 27); this test keeps it out of
# lib/, topo/, spank/, bin/, bench/ and tests/ (this file excepted).
. "$top_srcdir/tests/lib.sh"
cd "$top_srcdir" || exit 1
old='pt_errprintf|pt_verrprintf|pt_error_last|pt_error \*|pt_error[[:space:]]+[A-Za-z_][A-Za-z_0-9]*[[:space:]]*[;,=)]|\bpt_error\b[^_]'
dirs=
for d in lib topo spank bin bench tests; do [ -d "$d" ] && dirs="$dirs $d"; done
hits=$(grep -rnE --include='*.c' --include='*.h' --include='*.cu' --include='*.inc' --include='*.cc' \
    "$old" $dirs 2>/dev/null | grep -v '^tests/unit/test_error_convention\.sh:')
n=$(printf '%s\n' "$hits" | grep -c .)
check "no source file in$dirs uses the old pt_error/pt_errprintf convention ($n uses: $(printf '%s\n' "$hits" | head -n 3 | cut -c1-120 | tr '\n' ' '))" \
    [ -z "$hits" ]
# the convention's own API is where core.h says it is
check "core.h declares pt_fail, pt_errmsg and the save/restore pair" \
    [ "$(grep -cE '^(int pt_fail\(int code|const char \*pt_errmsg\(void\)|void pt_error_save\(|void pt_error_restore\()' \
        lib/core/core.h)" -eq 4 ]
check "core.h states the convention (per-thread last error, as errno/dlerror)" \
    grep -qi 'dlerror' lib/core/core.h
done_testing
