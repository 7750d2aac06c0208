#!/bin/sh
# SPDX-License-Identifier: MIT
# The project's license is MIT (LICENSE): every source, build, script and
# man page file carries "SPDX-License-Identifier: MIT" in its first 20
# lines, in its own comment syntax, so a file copied out of the tree still
# says under what terms.  Test data (topology fixtures, golden plans, fuzz
# corpora), vendored and generated files (third_party, build-aux, m4) and
# debian/ (DEP-5 copyright) are outside the rule.
. "$top_srcdir/tests/lib.sh"
tag="SPDX-License-Identifier: MIT"
check "LICENSE is the MIT License" grep -q '^MIT License' "$top_srcdir/LICENSE"
list=$(cd "$top_srcdir" && find . \( -path ./third_party -o -path ./debian \
        -o -path ./tests/fuzz/corpus -o -name '_build*' -o -name '.git' -o -name 'autom4te.cache' -o -path ./build-aux \
        -o -path ./m4 \) -prune -o -type f \
        \( -name '*.c' -o -name '*.h' -o -name '*.cu' -o -name '*.inc' -o -name '*.sh' -o -name '*.py' -o -name '*.am' \
        -o -name '*.map' -o -name '*.js' -o -name '*.supp' -o -name '*.sbatch' -o -name 'configure.ac' -o -path './bin/*.in' \
        -o -path './man/*.[178]' -o -path './share/bash-completion/ptrain' -o -path './.ci/run' \) -print | sort)
n=$(printf '%s\n' "$list" | grep -c .)
missing=
for f in $list; do
    head -n 20 "$top_srcdir/$f" | grep -qF "$tag" || missing="$missing ${f#./}"
done
nm=$(printf '%s\n' $missing | grep -c .)
check "every one of $n source, build, script and man page files names its license in its first 20 lines ($nm without:$(printf '%s\n' $missing | head -n 5 | tr '\n' ' '))" \
    [ "$n" -gt 100 -a -z "$missing" ]
# the line never goes above a script's #! (the kernel and env need it first)
late=
for f in $list; do
    sed -n 2p "$top_srcdir/$f" | grep -q '^#!' && late="$late ${f#./}"
done
check "no #! line below the first line (scripts still run:$late)" [ -z "$late" ]
done_testing
