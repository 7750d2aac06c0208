#!/bin/sh
# Checkpoint safety (lib/ckpt; ptrain-run --save-dir, --keep):
#  - nothing is deleted or written through a symbolic link: a step-* link to
#    an archived checkpoint outside the save directory survives --keep with
#    its target's files untouched (a warning names it); a save over a step-*
#    link is refused in one line, the target untouched; temporaries of
#    killed saves are removed when the directory is locked, a link among
#    them is not followed;
#  - two jobs on one --save-dir: the second is refused at start-up in one
#    line naming the holder (the lock file's line: job, host, pid) and
#    trains no step; once the first has ended its lock is taken over;
#  - an unusable --save-dir (a regular file, a name too long, a directory
#    this user cannot write) is refused at start-up in one line, before any
#    step.
. "$top_srcdir/tests/lib.sh"
need_run
need_mpirun
need_jq
workdir
fresh_seed
diag "data seed $seed, init seed $init"
common="--model test --vocab 512 --data synthetic:$seed --seed $init --batch 4 --val-every 0 --val-batches 1 --quiet"
# one error line matching $2 in file $1, and no step trained (no "done:")
one_error() { [ "$(grep -c 'ptrain-run: error' "$1")" -eq 1 ] && grep 'ptrain-run: error' "$1" | grep -q -- "$2" && ! grep -q '^done:' "$1"; }
# an archived checkpoint of random bytes outside every save directory
mkdir -p "$wd/archive"
head -c 6000 /dev/urandom >"$wd/archive/rank-00000.bin"
head -c 700 /dev/urandom | od -An -tx1 >"$wd/archive/manifest.json"
cp -r "$wd/archive" "$wd/archive.orig"

# ---- --keep and a step-* symbolic link --------------------------------------------
sd="$wd/keep"
mkdir -p "$sd"
ln -s "$wd/archive" "$sd/step-00000001"
rc=0
ptrain_mpirun -np 2 "$run" $common --dp 2 --steps 4 --save-dir "$sd" --save-every 2 --keep 1 >"$wd/keep.out" 2>&1 || rc=$?
check "--keep 1 with a step-* link in the save directory: the run ends well (status $rc)" [ "$rc" -eq 0 ]
check "... the link's target outside the save directory is untouched" diff -r "$wd/archive" "$wd/archive.orig"
check "... the link is left in place" [ -L "$sd/step-00000001" ]
check "... the real checkpoints are pruned to the newest (step 4)" sh -c "[ -d '$sd/step-00000004' ] && [ ! -e '$sd/step-00000002' ]"
check "... one warning says --keep leaves the link alone" grep -q "warning: $sd/step-00000001 is a symbolic link.*--keep leaves it" "$wd/keep.out"

# ---- a save over a step-* symbolic link -------------------------------------------
sd="$wd/over"
mkdir -p "$sd"
ln -s "$wd/archive" "$sd/step-00000002"
rc=0
ptrain_mpirun -np 2 "$run" $common --dp 2 --steps 2 --save-dir "$sd" >"$wd/over.out" 2>&1 || rc=$?
check "a save over a step-* link is refused (status $rc)" [ "$rc" -ne 0 ]
check "... in one line naming it" \
    sh -c "[ \$(grep -c 'ptrain-run: error' '$wd/over.out') -eq 1 ] && grep 'ptrain-run: error' '$wd/over.out' | grep -q '$sd/step-00000002 is a symbolic link'"
diag "$(grep 'ptrain-run: error' "$wd/over.out")"
check "... the link's target is untouched" diff -r "$wd/archive" "$wd/archive.orig"
check "... and the save left no temporary directory" sh -c "[ -z \"\$(ls -a '$sd' | grep '^\.step-')\" ]"

# ---- temporaries of killed saves ---------------------------------------------------
sd="$wd/stale"
mkdir -p "$sd/.step-00000009.tmp.0123456789ab" "$sd/.step-00000008.tmp"
head -c 100 /dev/urandom >"$sd/.step-00000009.tmp.0123456789ab/rank-00000.bin"
ln -s "$wd/archive" "$sd/.step-00000007.tmp.aaaaaaaaaaaa"
rc=0
ptrain_mpirun -np 1 "$run" $common --steps 1 --save-dir "$sd" >"$wd/stale.out" 2>&1 || rc=$?
check "temporaries of killed saves are removed at start-up (status $rc)" \
    sh -c "[ $rc -eq 0 ] && [ ! -e '$sd/.step-00000009.tmp.0123456789ab' ] && [ ! -e '$sd/.step-00000008.tmp' ]"
check "... a link named like one is not followed" sh -c "[ -L '$sd/.step-00000007.tmp.aaaaaaaaaaaa' ] && diff -r '$wd/archive' '$wd/archive.orig'"

# ---- two jobs, one save directory -------------------------------------------------
sd="$wd/shared"
bg_mpirun() { ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" exec "${MPIRUN:-mpirun}" --allow-run-as-root \
    --oversubscribe --bind-to none "$@"; }
(bg_mpirun -np 2 "$run" $common --dp 2 --steps 1000000 --save-dir "$sd" --save-every 1000000) >"$wd/a.out" 2>&1 &
pid=$!
i=0
while [ $i -lt 1200 ] && ! grep -q '^job ' "$sd/.ptrain-lock" 2>/dev/null; do sleep 0.1; i=$((i + 1)); done
holder=$(cat "$sd/.ptrain-lock" 2>/dev/null)
check "the first job's rank 0 holds the lock: its line names job, host and pid ($holder)" \
    sh -c "printf '%s' '$holder' | grep -q '^job - host $(hostname) pid [0-9][0-9]*\$'"
rc=0
ptrain_mpirun -np 2 "$run" $common --dp 2 --steps 2 --save-dir "$sd" >"$wd/b.out" 2>&1 || rc=$?
check "a second job on the same --save-dir is refused at start-up (status $rc)" [ "$rc" -eq 2 ]
check "... in one line naming the holder and the lock file" one_error "$wd/b.out" "in use by another job ($holder; lock file $sd/.ptrain-lock)"
diag "$(grep 'ptrain-run: error' "$wd/b.out")"
check "... and it wrote nothing there" sh -c "[ -z \"\$(ls '$sd')\" ]"
kill -USR1 "$pid"
rc=0
wait "$pid" || rc=$?
check "the first job, stopped by SIGUSR1, saves and ends (status $rc)" sh -c "[ $rc -eq 0 ] && [ -f '$sd/latest' ]"
rc=0
ptrain_mpirun -np 2 "$run" $common --dp 2 --steps 2 --save-dir "$sd" >"$wd/c.out" 2>&1 || rc=$?
check "a job after it takes the lock over (status $rc)" sh -c "[ $rc -eq 0 ] && grep -q '^done:' '$wd/c.out'"
check "... and its own line replaced the holder's" sh -c "grep -q '^job - host $(hostname) pid' '$sd/.ptrain-lock' && [ \"\$(cat '$sd/.ptrain-lock')\" != '$holder' ]"

# ---- an unusable --save-dir, refused at start-up ----------------------------------
unusable() { # DESCRIPTION DIR PATTERN
    rc=0
    ptrain_mpirun -np 2 "$run" $common --dp 2 --steps 2 --save-dir "$2" >"$wd/u.out" 2>&1 || rc=$?
    check "--save-dir $1: refused at start-up (status $rc)" [ "$rc" -eq 2 ]
    check "... in one line, before any step" one_error "$wd/u.out" "$3"
    diag "$(grep 'ptrain-run: error' "$wd/u.out" | cut -c 1-200)"
}
head -c 100 /dev/urandom >"$wd/afile"
unusable "a regular file" "$wd/afile" "$wd/afile is a regular file, not a directory"
long=$(printf 'n%.0s' $(seq 300))
unusable "a name too long" "$wd/$long" "cannot be created: File name too long"
if [ "$(id -u)" -ne 0 ]; then
    mkdir -p "$wd/ro"
    chmod 555 "$wd/ro"
    ro="$wd/ro"
else
    ro=/sys/kernel # root writes everywhere but into sysfs
fi
if [ -d "$ro" ] && ! touch "$ro/.ptrain-test" 2>/dev/null; then
    unusable "a directory this user cannot write ($ro)" "$ro" "$ro is not writable"
else
    ok "--save-dir not writable # SKIP no unwritable directory here ($ro)"
    rm -f "$ro/.ptrain-test"
fi
[ -d "$wd/ro" ] && chmod 755 "$wd/ro"

done_testing
