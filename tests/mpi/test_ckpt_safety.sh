#!/bin/sh
# SPDX-License-Identifier: MIT
# Checkpoint safety (lib/ckpt; ptrain-run --save-dir, --keep, --resume; ptrain-ckpt):
#  - nothing is deleted or written through a symbolic link: a step-* link to
#    an archived checkpoint outside the save directory survives --keep with
#    its target's files untouched (a warning names it); a save over a step-*
#    link is refused in one line, the target untouched; temporaries of
#    killed saves are removed when the directory is locked, a link among
#    them is not followed;
#  - hostile manifests (an offset near INT64_MAX, two same-size tensors'
#    offsets swapped, a shape near 2^62, a truncated manifest), with the
#    manifest's checksum member removed (as an older ptrain wrote them) so
#    that the consistency checks are what refuses them, and with it kept
#    (then the checksum refuses them): --resume under the saved plan and
#    resharded, convert, info and verify refuse each in one line, and
#    nothing crashes (the sanitizer build checks every read);
#  - a sound manifest without a checksum is accepted with one warning;
#  - two jobs on one --save-dir: the second is refused at start-up in one
#    line naming the holder (the lock file's line: job, host, pid) and
#    trains no step; once the first has ended its lock is taken over;
#  - an unusable --save-dir (a regular file, a name too long, a directory
#    this user cannot write) is refused at start-up in one line, before any
#    step;
#  - ptrain-convert reads an llm.c file's header before its body (a huge
#    file with a header that does not match its size is refused without
#    reading it: checked under a 3 GB address-space limit, not under ASan),
#    and a safetensors SRC's header before its tensors: without a model
#    shape it asks for one in one line; a 6 GiB file whose well-formed
#    header claims a tensor the model does not have is refused under the
#    same limit, nothing allocated from its sizes.
. "$top_srcdir/tests/lib.sh"
need_run
need_mpirun
need_jq
ck="$top_builddir/ptrain-ckpt"
[ -x "$ck" ] || skip_all "ptrain-ckpt not built"
workdir
fresh_seed
diag "data seed $seed, init seed $init"
nolsan="ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
ckpt() { env "$nolsan" "$ck" "$@"; }
common="--model test --vocab 512 --data synthetic:$seed --seed $init --batch 4 --val-every 0 --val-batches 1 --quiet"
# tool_error FILE STATUS WANT PATTERN: a tool's status is WANT and FILE its one line, matching PATTERN
tool_error() { [ "$2" -eq "$3" ] && [ "$(grep -c . "$1")" -eq 1 ] && grep -q -- "$4" "$1"; }
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

# ---- hostile manifests ----------------------------------------------------------------
rc=0
ptrain_mpirun -np 2 "$run" $common --dp 2 --steps 2 --save-dir "$wd/h" >"$wd/h.out" 2>&1 || rc=$?
src="$wd/h/step-00000002"
check "a dp=2 checkpoint to corrupt (status $rc)" [ "$rc" -eq 0 -a -f "$src/manifest.json" ]
out=$(ckpt verify "$src" 2>&1); rc=$?
check "control: it verifies ($out)" [ "$rc" -eq 0 ]
check "its manifest ends with its checksum member" sh -c "jq -e '.manifest_fnv1a64 | test(\"^[0-9a-f]{16}\$\")' '$src/manifest.json' >/dev/null"
# mkcase TAG SUM JQ: a copy of the checkpoint whose manifest is edited by
# jq (numbers too large for jq's doubles are placed as strings "@N" and
# unquoted by sed); SUM=keep leaves the checksum member as it was, SUM=drop removes it
mkcase() {
    d="$wd/hc/$1"
    mkdir -p "$d"
    cp -r "$src" "$d/"
    filt=$3
    [ "$2" = drop ] && filt="$filt | del(.manifest_fnv1a64)"
    jq "$filt" "$src/manifest.json" | sed 's/"@\([0-9-]*\)"/\1/g' >"$d/step-00000002/manifest.json"
    c="$d/step-00000002"
}
# refused TAG PATTERN: --resume (same plan, 2 ranks; resharded, 1 rank), convert, info and verify refuse $c
refused() {
    for np in 2 1; do
        rc=0
        ptrain_mpirun -np $np "$run" $common --dp $np --steps 4 --resume "$c" >"$c.$np.out" 2>&1 || rc=$?
        check "[$1] --resume under $np rank(s) refuses it in one line (status $rc)" \
            sh -c "[ $rc -ne 0 ] && [ $rc -lt 128 ] && ! grep -q 'AddressSanitizer\|runtime error\|signal' '$c.$np.out'"
        check "[$1] ... naming the problem" one_error "$c.$np.out" "$2"
        [ $np = 2 ] && diag "$(grep 'ptrain-run: error' "$c.$np.out")"
    done
    ckpt convert "$c" "$wd/hc/$1.bin" >"$c.conv" 2>&1; rc=$?
    check "[$1] convert refuses it: exit 2, one line ($(cat "$c.conv"))" tool_error "$c.conv" $rc 2 "$2"
    ckpt info "$c" >"$c.info" 2>&1; rc=$?
    check "[$1] info refuses it: exit 2, one line" tool_error "$c.info" $rc 2 "$2"
    ckpt verify "$c" >"$c.verify" 2>&1; rc=$?
    check "[$1] verify reports it: exit 1" sh -c "[ $rc -eq 1 ] && grep -q -- '$2' '$c.verify' && ! grep -q 'runtime error' '$c.verify'"
}
big=9223372036854775800
mkcase offset-max drop ".files[1].tensors[1].offset = \"@$big\""
refused offset-max "offset $big"
mkcase offset-max-sum keep ".files[1].tensors[1].offset = \"@$big\""
refused offset-max-sum "manifest_fnv1a64 says"
# ln_1.weight and ln_1.bias of layer 0 (C floats each, trained apart): offsets swapped
mkcase swapped drop '.files[0].tensors[2].offset as $a | .files[0].tensors[3].offset as $b | .files[0].tensors[2].offset = $b | .files[0].tensors[3].offset = $a'
check "control: the swapped offsets differ" sh -c "[ \"\$(jq '.files[0].tensors[2].offset' '$c/manifest.json')\" != \"\$(jq '.files[0].tensors[2].offset' '$src/manifest.json')\" ]"
refused swapped "offset"
mkcase swapped-sum keep '.files[0].tensors[2].offset as $a | .files[0].tensors[3].offset as $b | .files[0].tensors[2].offset = $b | .files[0].tensors[3].offset = $a'
refused swapped-sum "manifest_fnv1a64 says"
mkcase rows-huge drop '.tensors[1].rows = "@4611686018427387904"'
refused rows-huge "manifest tensor 1"
mkcase truncated keep '.'
head -c 1500 "$src/manifest.json" >"$c/manifest.json"
refused truncated "not valid JSON"

# an older ptrain's manifest: no checksum member, otherwise sound
mkcase old drop '.'
rc=0
ptrain_mpirun -np 2 "$run" $common --dp 2 --steps 3 --resume "$c" >"$c.out" 2>&1 || rc=$?
check "a sound manifest without a checksum is resumed (status $rc)" sh -c "[ $rc -eq 0 ] && grep -q '^resume: $c (step 2' '$c.out'"
check "... with one warning" sh -c "[ \$(grep -c 'warning: checkpoint .*has no checksum' '$c.out') -eq 1 ]"
ckpt verify "$c" >"$c.verify" 2>/dev/null; rc=$?
check "... verify accepts it and says so ($(cat "$c.verify"))" sh -c "[ $rc -eq 0 ] && grep -q 'no checksum of its own' '$c.verify'"

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

# ---- ptrain-ckpt convert: header first -------------------------------------------------
ckpt convert "$src" "$wd/m.bin" >/dev/null 2>&1
ckpt convert "$src" "$wd/m.safetensors" >/dev/null 2>&1
check "control: the checkpoint converts to .bin and safetensors" [ -s "$wd/m.bin" -a -s "$wd/m.safetensors" ]
ckpt convert "$wd/m.safetensors" "$wd/x.bin" >"$wd/st.out" 2>&1; rc=$?
check "convert of a safetensors SRC without config.json beside it: exit 2, one line asking for --model ($(cat "$wd/st.out"))" \
    tool_error "$wd/st.out" $rc 2 "no config.json beside it to give the model's shape: give --model"
bin=$top_builddir/.libs/ptrain-ckpt; [ -f "$bin" ] || bin=$ck
if grep -qa __asan_init "$bin"; then
    ok "convert of a huge file under an address-space limit # SKIP ASan build (it reserves terabytes of address space)"
else
    # a real header, then 6 GiB of sparse bytes: the header says how big the file must be
    head -c 1024 "$wd/m.bin" >"$wd/huge.bin"
    truncate -s 6G "$wd/huge.bin"
    (ulimit -v 3000000 && exec env "$nolsan" "$ck" convert "$wd/huge.bin" "$wd/x.safetensors") >"$wd/huge.out" 2>&1; rc=$?
    check "convert of a 6 GiB file whose header does not match its size, under a 3 GB limit: exit 2, one line ($(cat "$wd/huge.out"))" \
        tool_error "$wd/huge.out" $rc 2 "its header .* needs"
    rm -f "$wd/huge.bin"
    # a safetensors header claiming one 6 GiB tensor, then sparse bytes
    python3 -c "import json, struct, sys
h = json.dumps({'wte.weight': {'dtype': 'F32', 'shape': [1572864, 1024], 'data_offsets': [0, 6442450944]}}).encode()
open(sys.argv[1], 'wb').write(struct.pack('<Q', len(h)) + h)" "$wd/huge.safetensors" &&
        truncate -s $((8 + $(od -An -tu8 -N8 "$wd/huge.safetensors" | tr -d ' ') + 6442450944)) "$wd/huge.safetensors"
    (ulimit -v 3000000 && exec env "$nolsan" "$ck" convert --model test "$wd/huge.safetensors" "$wd/x.bin") >"$wd/hst.out" 2>&1; rc=$?
    check "convert of a 6 GiB safetensors file claiming a wte the model does not have, under a 3 GB limit: exit 2, one line ($(cat "$wd/hst.out"))" \
        tool_error "$wd/hst.out" $rc 2 "tensor 'wte.weight' has shape \\[1572864, 1024\\]"
    rm -f "$wd/huge.safetensors"
fi

# a checkpoint of a step from 10^8 on is named with 9 digits (step-%08ld;
# --steps allows 10^8): --resume auto finds it through latest and, without
# latest, among the step directories, and ptrain-ckpt follows latest to it
# (both used to take only 8 digits, and a run of 10^8 steps started over).  The directory of a 2-step run renamed
# to step-100000000 stands in for it (the loader reads the step from the
# manifest, so it resumes at step 2).
sd=$wd/nine
rc=0
ptrain_mpirun -np 1 "$run" $common --steps 2 --save-dir "$sd" >"$wd/nine.out" 2>&1 || rc=$?
mv "$sd/step-00000002" "$sd/step-100000000" 2>/dev/null && printf 'step-100000000\n' >"$sd/latest"
"$ck" info "$sd" >"$wd/nine.info" 2>&1
check "ptrain-ckpt info follows latest to step-100000000 ($(head -1 "$wd/nine.info"))" grep -q "^checkpoint: $sd/step-100000000\$" "$wd/nine.info"
for how in latest listing; do
    [ $how = listing ] && rm -f "$sd/latest" "$sd"/step-0*
    rc2=0
    ptrain_mpirun -np 1 "$run" $common --steps 4 --save-dir "$sd" --resume auto >"$wd/nine.$how.out" 2>&1 || rc2=$?
    check "a checkpoint named step-100000000 is found by --resume auto through its $how (status $rc, $rc2: $(grep -m1 '^resume:' "$wd/nine.$how.out"))" \
        grep -q "^resume: $sd/step-100000000 (step 2" "$wd/nine.$how.out"
done
done_testing
