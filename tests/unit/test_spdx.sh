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
# the project's files (tests/lib.sh: git ls-files, or the tarball's), never
# what the demo, a build or a user left in the work tree
list=$(project_files | grep -vE '^\./(third_party|debian|tests/fuzz/corpus|build-aux|m4)/|^\./_build|/autom4te\.cache/' |
    grep -E '\.(c|h|cu|inc|sh|py|am|map|js|supp|sbatch)$|^\./configure\.ac$|^\./bin/.*\.in$|^\./man/.*\.[178]$|^\./share/bash-completion/ptrain$|^\./\.ci/run$')
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
