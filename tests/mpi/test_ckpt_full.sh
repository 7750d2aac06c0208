#!/bin/bash
# SPDX-License-Identifier: MIT
# A save that fails (a full filesystem) stops the run with one line and
# leaves the earlier checkpoint loadable (an unwritable directory is refused
# at start-up): the save dir is a small tmpfs that holds one checkpoint of
# the test model but not two (needs root to mount it: skipped otherwise).
. "$top_srcdir/tests/lib.sh"
run="$top_builddir/ptrain-run"
[ -x "$run" ] || skip_all "ptrain-run not built yet ($run missing)"
command -v mpirun >/dev/null || skip_all "mpirun not installed"
wd=$(mktemp -d /tmp/ptrain-full.XXXXXX) || skip_all "mktemp failed"
mkdir -p "$wd/fs"
mount -t tmpfs -o size=5m tmpfs "$wd/fs" 2>/dev/null || { rmdir "$wd/fs" "$wd"; skip_all "cannot mount a tmpfs (not root?)"; }
trap 'umount "$wd/fs" 2>/dev/null; rm -rf "$wd"' EXIT
common="--model test --vocab 512 --data synthetic:3 --seed 9 --batch 4 --val-every 0 --val-batches 1 --dp 2"

# one checkpoint of this model and plan is 2 x 1.6 MB (parameters + AdamW
# moments of 0.13M parameters per rank); the second one does not fit in 5 MB
rc=0
ptrain_mpirun -np 2 "$run" $common --steps 6 --save-every 2 --keep 2 --save-dir "$wd/fs/ck" \
    >"$wd/a.out" 2>"$wd/a.err" || rc=$?
err=$(grep -c 'error:' "$wd/a.err")
check "disk full: the run stops with status 1 ($rc)" [ "$rc" -eq 1 ]
check "... and one error line naming the file and the cause ($(grep -m1 'error:' "$wd/a.err"))" \
    sh -c "[ $err -eq 1 ] && grep 'error:' '$wd/a.err' | grep -q 'No space left on device'"
check "... 'latest' still names step 2 ($(cat "$wd/fs/ck/latest" 2>/dev/null))" \
    [ "$(cat "$wd/fs/ck/latest" 2>/dev/null)" = step-00000002 ]
check "... the failed save left no files behind ($(ls -A "$wd/fs/ck" | tr '\n' ' '))" \
    [ "$(ls -A "$wd/fs/ck" | tr '\n' ' ')" = ".ptrain-lock latest step-00000002 " ]
rc=0
ptrain_mpirun -np 2 "$run" $common --steps 6 --resume "$wd/fs/ck/step-00000002" \
    >"$wd/b.out" 2>"$wd/b.err" || rc=$?
check "... and step 2 resumes (status $rc)" \
    sh -c "[ $rc -eq 0 ] && grep -q '^resume: $wd/fs/ck/step-00000002 (step 2,' '$wd/b.out' && grep -q '^step *3/6' '$wd/b.out'"
# the straight run: the same losses after the resume (the failed save changed nothing)
ptrain_mpirun -np 2 "$run" $common --steps 6 >"$wd/c.out" 2>&1
a=$(sed -n 's/^step *\([3-6]\)\/6 | loss \([0-9.]*\) .*/\1 \2/p' "$wd/b.out" | tr '\n' ' ')
b=$(sed -n 's/^step *\([3-6]\)\/6 | loss \([0-9.]*\) .*/\1 \2/p' "$wd/c.out" | tr '\n' ' ')
check "steps 3..6 after the resume equal the straight run ($a)" sh -c '[ -n "$1" ] && [ "$1" = "$2" ]' _ "$a" "$b"

# an unwritable save directory: refused at start-up (status 2), nothing lost
# (tests/mpi/test_ckpt_safety.sh covers it for root too)
mkdir -p "$wd/ro" && chmod 555 "$wd/ro"
if [ "$(id -u)" -ne 0 ]; then
    rc=0
    ptrain_mpirun -np 2 "$run" $common --steps 2 --save-every 1 --save-dir "$wd/ro/ck" >"$wd/d.out" 2>"$wd/d.err" || rc=$?
    check "unwritable save dir: status 2 and one line ($(grep -m1 error: "$wd/d.err"))" \
        sh -c "[ $rc -eq 2 ] && [ \$(grep -c error: '$wd/d.err') -eq 1 ]"
fi
done_testing
