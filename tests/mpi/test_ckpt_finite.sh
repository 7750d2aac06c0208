#!/bin/sh
# SPDX-License-Identifier: MIT
# No NaN in, no NaN out (lib/ckpt, lib/train, ptrain-run, ptrain-ckpt):
#  - every number of a manifest's run state is range-checked: adam_step -1,
#    2^63 - 1, missing, null, a string, beyond step; step negative or not an
#    integer; lr, seed, AdamW's beta2, the data position, the ZeRO stage out
#    of range -- each with the manifest's checksum recomputed (a checksum
#    vouches for nothing an editor can redo): --resume, info, convert and
#    verify refuse it in one line naming the member, its value and the
#    valid range (adam_step -1 used to zero AdamW's bias correction: a
#    third of the weights NaN, saved, verified ok, exit 0);
#  - a rank file holding a NaN weight, an infinite AdamW m or a negative
#    AdamW v (its checksums recomputed) is refused by --resume (same plan
#    and resharded), convert, and reported by verify, naming the tensor and
#    the element;
#  - finite weights that overflow (3e38): the run names the checkpoint it
#    loaded as the origin, before any step; nothing is saved;
#  - a run that diverges (--lr 10) saves no NaN or infinity: every
#    checkpoint it left is finite, `latest` names one, and the one error
#    line names the training step;
#  - safetensors and llm.c .bin files with NaN or infinite weights are
#    refused by convert naming the tensor and the element;
#  - a symbolic link as SAVE_DIR/latest is refused at start-up, before any
#    step, its target untouched;
#  - a run resumed at its last step says it ran no step, with its one
#    validation loss (no "train_loss nan -> nan"), and exits 0.
. "$top_srcdir/tests/lib.sh"
need_run
need_mpirun
ck="$top_builddir/ptrain-ckpt"
[ -x "$ck" ] || skip_all "ptrain-ckpt not built"
command -v python3 >/dev/null 2>&1 || skip_all "python3 not found"
workdir
fresh_seed
diag "data seed $seed, init seed $init"
E="python3 $top_srcdir/tests/mpi/ckpt_edit.py"
nolsan="ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
ckpt() { env "$nolsan" "$ck" "$@"; }
common="--model test --vocab 512 --data synthetic:$seed --seed $init --batch 4 --val-every 0 --val-batches 1 --quiet"
# tool_error FILE STATUS WANT PATTERN: a tool's status is WANT and FILE its one line, matching PATTERN (fixed string)
tool_error() { [ "$2" -eq "$3" ] && [ "$(grep -c . "$1")" -eq 1 ] && grep -qF -- "$4" "$1"; }
# one error line containing $2 in file $1, no step trained, no sanitizer report
one_error() {
    [ "$(grep -c 'ptrain-run: error' "$1")" -eq 1 ] && grep 'ptrain-run: error' "$1" | grep -qF -- "$2" &&
        ! grep -q '^done:\|^step \|AddressSanitizer\|runtime error' "$1"
}

rc=0
ptrain_mpirun -np 2 "$run" $common --dp 2 --steps 2 --save-dir "$wd/base" >"$wd/base.out" 2>&1 || rc=$?
src="$wd/base/step-00000002"
check "a dp=2 checkpoint to edit (status $rc)" [ "$rc" -eq 0 -a -f "$src/manifest.json" ]
mkcase() { # TAG: a copy of the checkpoint in $c
    c="$wd/c/$1/step-00000002"
    mkdir -p "$wd/c/$1"
    cp -r "$src" "$c"
}
mkcase control
$E set "$c" step 2
rc=0
ptrain_mpirun -np 2 "$run" $common --dp 2 --steps 3 --resume "$c" >"$c.out" 2>&1 || rc=$?
check "control: a manifest rewritten by the editor (checksum redone) resumes (status $rc)" \
    sh -c "[ $rc -eq 0 ] && grep -q '^resume: $c (step 2, AdamW step 2)' '$c.out' && ! grep -q 'no checksum' '$c.out'"

# resume_refused OUT PATTERN STATUS SAVEDIR: a failed run (STATUS in 1..127) whose one error line has PATTERN, no
# step, nothing saved in SAVEDIR
resume_refused() { [ "$3" -ne 0 ] && [ "$3" -lt 128 ] && one_error "$1" "$2" && [ ! -e "$4/latest" ]; }
# verify_reports FILE STATUS PATTERN: exit 1, PATTERN reported, no "ok"
verify_reports() { [ "$2" -eq 1 ] && grep -qF -- "$3" "$1" && ! grep -q '^ok' "$1"; }
# refused TAG PATTERN [resume|files]: convert, info (exit 2, one line) and verify (exit 1) refuse $c naming
# PATTERN; with "resume", --resume under the saved plan does too; with "files" (a rank file's problem, which
# info, reading the manifest alone, does not see), --resume, convert and verify
refused() {
    if [ "${3:-}" = resume ] || [ "${3:-}" = files ]; then
        rc=0
        ptrain_mpirun -np 2 "$run" $common --dp 2 --steps 4 --save-dir "$c.sd" --resume "$c" >"$c.run" 2>&1 || rc=$?
        check "[$1] --resume refuses it in one line, before any step, nothing saved (status $rc): $(grep 'ptrain-run: error' "$c.run" | cut -c 1-240)" \
            resume_refused "$c.run" "$2" $rc "$c.sd"
    fi
    ckpt convert "$c" "$c.bin" >"$c.conv" 2>&1; rc=$?
    check "[$1] convert refuses it: exit 2, one line ($(cut -c 1-200 "$c.conv"))" tool_error "$c.conv" $rc 2 "$2"
    if [ "${3:-}" != files ]; then
        ckpt info "$c" >"$c.info" 2>&1; rc=$?
        check "[$1] info refuses it: exit 2, one line" tool_error "$c.info" $rc 2 "$2"
    fi
    ckpt verify "$c" >"$c.verify" 2>&1; rc=$?
    check "[$1] verify reports it: exit 1, not ok" verify_reports "$c.verify" $rc "$2"
}

# ---- the manifest's run state -----------------------------------------------------
range() { # TAG KEY JSON PATTERN [resume]
    mkcase "$1"
    $E set "$c" "$2" "$3"
    refused "$1" "$4" "${5:-}"
}
range adam-neg adam_step -1 "manifest adam_step -1 is not valid (valid: an integer in [0, 2], at most the manifest's step" resume
range adam-max adam_step 9223372036854775807 "manifest adam_step 9223372036854775807 is not valid" resume
range adam-missing adam_step DEL "manifest adam_step (missing) is not valid"
range adam-null adam_step null "manifest adam_step null is not valid"
range adam-string adam_step '"2"' 'manifest adam_step "2" is not valid'
range adam-beyond adam_step 3 "manifest adam_step 3 is not valid (valid: an integer in [0, 2]"
range step-neg step -1 "manifest step -1 is not valid (valid: an integer in [0, 100000000]"
range step-real step 2.5 "manifest step 2.5 is not valid"
range lr lr_schedule.lr 1e30 "manifest lr_schedule.lr 1e30 is not valid (valid: a number in [0, 10]"
range seed rng.init_seed -3 "manifest rng.init_seed -3 is not valid (valid: an integer in [0, 2147483647]"
range beta2 optimizer.beta2 1.5 "manifest optimizer.beta2 1.5 is not valid (valid: a number in [0, 0.999999]"
range position data.position_step 7 "manifest data.position_step 7 is not valid (valid: the manifest's step, 2)"
range zero plan.zero 9 "manifest plan zero 9 is not valid (valid: a ZeRO stage, an integer in [0, 3])" resume

# ---- non-finite floats in a rank file (checksums redone) ------------------------------
bad() { # TAG FILE TENSOR WHICH ELEM VALUE PATTERN-AFTER-TENSOR-NAME
    mkcase "$1"
    name=$($E float "$c" "$2" "$3" "$4" "$5" "$6")
    refused "$1" "rank-0000$2.bin: $7 of tensor $name (in the saving rank's shard)" files
    # resharded: one rank reads both files
    rc=0
    ptrain_mpirun -np 1 "$run" $common --steps 4 --save-dir "$c.sd1" --resume "$c" >"$c.one" 2>&1 || rc=$?
    check "[$1] ... and resharded to one rank (status $rc)" resume_refused "$c.one" "$7 of tensor $name" $rc "$c.sd1"
}
bad nan-weight 1 4 0 5 nan "weight element 5"
bad inf-m 0 2 1 0 inf "AdamW m element 0"
bad neg-v 1 0 2 3 -1 "AdamW v element 3"
out=$(ckpt verify "$src" 2>&1); rc=$?
check "control: the unedited checkpoint verifies, its floats finite ($out)" \
    sh -c "[ $rc -eq 0 ] && printf '%s' '$out' | grep -q 'every weight and AdamW moment is finite'"

# ---- finite weights that overflow: the checkpoint is named, nothing saved -------------
mkcase huge
name=$($E float "$c" 0 0 0 all 3e38)
$E float "$c" 1 0 0 all 3e38 >/dev/null
rc=0
ptrain_mpirun -np 2 "$run" $common --dp 2 --steps 4 --save-dir "$c.sd" --resume "$c" >"$c.run" 2>&1 || rc=$?
check "weights of 3e38 in $name: the run fails (status $rc)" sh -c "[ $rc -eq 1 ]"
check "... in one line naming the checkpoint as the origin: $(grep 'ptrain-run: error' "$c.run" | cut -c 1-300)" \
    one_error "$c.run" "the first after resuming from checkpoint $c: "
check "... and it saved nothing" [ ! -e "$c.sd/latest" ]
rc=0
ptrain_mpirun -np 2 "$run" $common --dp 2 --steps 2 --save-dir "$c.sd2" --resume "$c" >"$c.last" 2>&1 || rc=$?
check "... resumed at its last step (nothing to train) it fails too, naming it (status $rc)" \
    resume_refused "$c.last" "the first after resuming from checkpoint $c: " $rc "$c.sd2"

# ---- a run that diverges: no NaN or infinity is saved ---------------------------------
dv="$wd/diverge"
rc=0
ptrain_mpirun -np 2 "$run" $common --dp 2 --steps 12 --lr 10 --min-lr 10 --warmup 0 --beta2 0 --grad-clip 0 \
    --save-dir "$dv" --save-every 1 >"$wd/dv.out" 2>&1 || rc=$?
diag "$(grep 'ptrain-run: error' "$wd/dv.out" | cut -c 1-300)"
check "--lr 10 --beta2 0 diverges: status 1 ($rc)" [ "$rc" -eq 1 ]
check "... one error line naming the training step, 'training diverged (lower --lr)'" \
    sh -c "[ \$(grep -c 'ptrain-run: error' '$wd/dv.out') -eq 1 ] &&
           grep 'ptrain-run: error' '$wd/dv.out' | grep -q '\(training step: step\|after training step\) [0-9]*[:,] .*training diverged (lower --lr)' &&
           ! grep -q 'the first after resuming' '$wd/dv.out'"
n=0 nonfin=""
for d in "$dv"/step-*; do
    [ -d "$d" ] || continue
    n=$((n + 1))
    r=$($E nonfinite "$d")
    [ "$r" = "0 0" ] || nonfin="$nonfin $(basename "$d"):$r"
done
check "... every one of its $n checkpoints holds finite weights and moments${nonfin:+ (not:$nonfin)}" \
    sh -c "[ $n -ge 1 ] && [ -z '$nonfin' ]"
out=$(ckpt verify "$dv" 2>&1); rc=$?
check "... and latest verifies ($out)" [ "$rc" -eq 0 ]

# ---- model files with NaN or infinite weights --------------------------------------------
ckpt convert "$src" "$wd/m.safetensors" >/dev/null 2>&1
ckpt convert "$src" "$wd/m.bin" >/dev/null 2>&1
check "control: the checkpoint converts to safetensors and llm.c .bin" [ -s "$wd/m.safetensors" -a -s "$wd/m.bin" ]
tm="2,4,64,32,512" # the test model: L,H,C,T,V
ckpt convert --model "$tm" "$wd/m.safetensors" "$wd/ok-ck" >"$wd/ok.out" 2>&1; rc=$?
check "control: the safetensors file converts back (status $rc)" [ "$rc" -eq 0 ]
for v in nan inf -inf; do
    cp "$wd/m.safetensors" "$wd/$v.safetensors"
    python3 "$top_srcdir/tests/mpi/ckpt_edit.py" st-set "$wd/$v.safetensors" h.1.attn.c_attn.weight 70 "$v"
    ckpt convert --model "$tm" "$wd/$v.safetensors" "$wd/$v-ck" >"$wd/$v.st" 2>&1; rc=$?
    check "safetensors with a $v weight: convert exit 2, one line naming tensor and element ($(cat "$wd/$v.st"))" \
        tool_error "$wd/$v.st" $rc 2 "tensor 'h.1.attn.c_attn.weight' element 70 [0, 70] is $v"
    check "... and writes no checkpoint" [ ! -e "$wd/$v-ck/latest" ]
done
cp "$wd/m.bin" "$wd/nan.bin"
# llm.c order: wte [Vp=512, 64], wpe [32, 64], ln1w [2, 64], ln1b, qkvw [2, 192, 64]: layer 1's element 9
$E bin-set "$wd/nan.bin" $((512 * 64 + 32 * 64 + 4 * 64 + 192 * 64 + 9)) nan
ckpt convert "$wd/nan.bin" "$wd/nan-bin-ck" >"$wd/nan.bin.out" 2>&1; rc=$?
check "llm.c file with a NaN weight: convert exit 2, one line naming tensor, element and layer ($(cat "$wd/nan.bin.out"))" \
    tool_error "$wd/nan.bin.out" $rc 2 "tensor qkvw element $((192 * 64 + 9)) (layer 1) is nan"

# ---- SAVE_DIR/latest a symbolic link: refused at start-up -------------------------------
sd="$wd/linked"
mkdir -p "$sd" "$wd/elsewhere"
printf 'step-00000009\n' >"$wd/elsewhere/ptr"
ln -s "$wd/elsewhere/ptr" "$sd/latest"
rc=0
ptrain_mpirun -np 2 "$run" $common --dp 2 --steps 2 --save-dir "$sd" >"$wd/linked.out" 2>&1 || rc=$?
check "a symbolic link as --save-dir's latest: refused at start-up (status $rc)" [ "$rc" -eq 2 ]
check "... in one line naming it, before any step: $(grep 'ptrain-run: error' "$wd/linked.out" | cut -c 1-200)" \
    one_error "$wd/linked.out" "$sd/latest is a symbolic link"
check "... its target untouched, nothing saved" \
    sh -c "[ \"\$(cat '$wd/elsewhere/ptr')\" = step-00000009 ] && [ -L '$sd/latest' ] && [ -z \"\$(ls '$sd' | grep step-)\" ]"

# ---- resumed at its last step: nothing to run, said so ---------------------------------------
rc=0
ptrain_mpirun -np 2 "$run" $common --dp 2 --steps 2 --save-dir "$wd/last" --resume "$src" >"$wd/last.out" 2>&1 || rc=$?
check "resumed at its last step: status 0 ($rc)" [ "$rc" -eq 0 ]
done_line=$(grep '^done:' "$wd/last.out")
check "... its summary says no step ran and prints no NaN ($(printf '%s' "$done_line" | cut -c 1-120))" \
    sh -c "printf '%s' '$done_line' | grep -q '^done: steps=2 val_loss [0-9.]* | no step run (resumed at step 2) |' &&
           ! printf '%s' '$done_line' | grep -qi nan"
done_testing
