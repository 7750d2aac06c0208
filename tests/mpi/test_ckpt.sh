#!/bin/sh
# SPDX-License-Identifier: MIT
# Checkpoints (lib/ckpt, ptrain-run --save-dir/--save-every/--keep/--resume):
#  - resume under the same plan is bit-identical: 6 steps straight leave the
#    same parameters, AdamW m and v (the step-6 rank files, compared byte for
#    byte) and the same losses as 3 steps + save + resume + 3 steps, for
#    dp=2, tp=2 (1d), pp=2, ZeRO-1 over dp=2 (ZeRO-3: see resharding),
#    dp=2 x tp=2, sp=2, 2d tp=4, 2.5d tp=8 (depth 2) and 3d tp=8;
#  - --keep K leaves the newest K;
#  - a truncated rank file, a flipped byte, a missing manifest are refused
#    with one line, and --resume auto falls back to the previous valid one;
#  - resharding: a ZeRO-1 dp=2 checkpoint loaded under 1 rank, tp=2, pp=2,
#    2d tp=4 and ZeRO-3, saved there and loaded back gives the same bytes;
#    continuing under tp=2 follows the straight run to float tolerance;
#  - SIGUSR1 to mpirun: the step finishes, a checkpoint is saved, exit 0.
. "$top_srcdir/tests/lib.sh"
need_run
need_mpirun
need_jq
workdir
fresh_seed
diag "data seed $seed, init seed $init"
common="--model test --vocab 512 --data synthetic:$seed --seed $init --steps 6 --batch 4 --val-every 0 --val-batches 1 --quiet"

# losses of the steps after step $2 from metrics file $1, full printed precision
losses() { jq -r "select(.type == \"train\" and .step > $2) | \"\(.step) \(.loss)\"" "$1" | tr '\n' ' '; }
# same rank files (same count, each identical)
same_files() {
    [ "$(ls "$1"/rank-*.bin | wc -l)" -eq "$(ls "$2"/rank-*.bin | wc -l)" ] || return 1
    for f in "$1"/rank-*.bin; do cmp -s "$f" "$2/$(basename "$f")" || return 1; done
}

resume_case() { # TAG NP PLAN-FLAGS...
    tag=$1; np=$2; shift 2
    cd_="$wd/$tag"
    mkdir -p "$cd_"
    rc=0
    # A: straight, one save at the end
    ptrain_mpirun -np "$np" "$run" $common "$@" --save-dir "$cd_/a" --save-every 6 --metrics "$cd_/a.jsonl" \
        >"$cd_/a.out" 2>&1 || rc=$?
    # B: saves at 3 (and 6); C: resumes B's step 3
    ptrain_mpirun -np "$np" "$run" $common "$@" --save-dir "$cd_/b" --save-every 3 >"$cd_/b.out" 2>&1 || rc=$?
    ptrain_mpirun -np "$np" "$run" $common "$@" --save-dir "$cd_/c" --save-every 3 \
        --resume "$cd_/b/step-00000003" --metrics "$cd_/c.jsonl" >"$cd_/c.out" 2>&1 || rc=$?
    check "[$tag] three runs exit 0 (status $rc)" [ "$rc" -eq 0 ]
    [ "$rc" -eq 0 ] || { diag "$(tail -n 3 "$cd_"/*.out | tr '\n' ' ')"; return; }
    check "[$tag] the resumed run says where it continues from" grep -q "^resume: $cd_/b/step-00000003 (step 3, AdamW step 3)" "$cd_/c.out"
    check "[$tag] the state changes between steps 3 and 6 (the comparison can fail)" \
        sh -c "! cmp -s '$cd_/b/step-00000003/rank-00000.bin' '$cd_/b/step-00000006/rank-00000.bin'"
    check "[$tag] 6 straight == 3 + save + resume + 3: every rank file (params, m, v) bit for bit" \
        same_files "$cd_/a/step-00000006" "$cd_/c/step-00000006"
    la=$(losses "$cd_/a.jsonl" 3)
    lc=$(losses "$cd_/c.jsonl" 3)
    check "[$tag] losses of steps 4-6 equal ($lc)" [ -n "$la" -a "$la" = "$lc" ]
    check "[$tag] the manifest records plan, step, AdamW step and every rank file" \
        sh -c "jq -e '.step == 6 and .adam_step == 6 and .plan.world == $np and (.files | length) == $np
            and (.tensors | length) > 0 and .data.position_step == 6' '$cd_/c/step-00000006/manifest.json' >/dev/null"
}

# the sanitizer pass (PTRAIN_TEST_SUBSET=1, scripts/test.sh) runs the plans
# the later cases build on, and two reshards: the same code, fewer launches
full=1
[ "${PTRAIN_TEST_SUBSET:-0}" = 1 ] && full=0
resume_case dp2 2 --dp 2
[ $full = 1 ] && resume_case tp2 2 --dp 1 --tp 2 --mode 1d
[ $full = 1 ] && resume_case pp2 2 --dp 1 --pp 2
resume_case zero1 2 --dp 2 --zero 1
# every other layout: dp x tp, sequence parallelism, 2d, 2.5d and 3d
[ $full = 1 ] && resume_case dp2tp2 4 --dp 2 --tp 2 --mode 1d
[ $full = 1 ] && resume_case sp2 2 --dp 1 --sp 2
[ $full = 1 ] && resume_case 2d 4 --dp 1 --tp 4 --mode 2d
[ $full = 1 ] && resume_case 2.5d 8 --dp 1 --tp 8 --tp-depth 2 --mode 2.5d
[ $full = 1 ] && resume_case 3d 8 --dp 1 --tp 8 --mode 3d

# --keep: B of dp2 saved 3 and 6 without --keep; keep 1 leaves only the newest
cd_="$wd/keep"
rc=0
ptrain_mpirun -np 2 "$run" $common --dp 2 --save-dir "$cd_" --save-every 2 --keep 1 >"$wd/keep.out" 2>&1 || rc=$?
check "--keep 1: only step 6 is left, latest names it (status $rc)" \
    sh -c "[ \"\$(ls '$cd_')\" = \"latest
step-00000006\" ] && [ \"\$(cat '$cd_/latest')\" = step-00000006 ]"

# ---- corruption: copies of dp2's B (steps 3 and 6) --------------------------
src="$wd/dp2/b"
ref=$(losses "$wd/dp2/a.jsonl" 3)
corrupt_case() { # TAG HOW MESSAGE-PATTERN
    tag=$1; how=$2; pat=$3
    cd_="$wd/bad-$tag"
    cp -r "$src" "$cd_"
    s6="$cd_/step-00000006"
    case "$how" in
    truncate) truncate -s -4 "$s6/rank-00001.bin" ;;
    flip) printf '\377' | dd of="$s6/rank-00000.bin" bs=1 seek=1000 conv=notrunc 2>/dev/null
          printf '\000' | dd of="$s6/rank-00000.bin" bs=1 seek=1001 conv=notrunc 2>/dev/null ;;
    nomanifest) rm "$s6/manifest.json" ;;
    nofile) rm "$s6/rank-00001.bin" ;;
    esac
    rc=0
    ptrain_mpirun -np 2 "$run" $common --dp 2 --resume "$s6" >"$cd_.out" 2>"$cd_.err" || rc=$?
    check "[$tag] --resume DIR refuses it (status $rc)" [ "$rc" -ne 0 ]
    check "[$tag] ... with one line naming the problem" \
        sh -c "[ \$(grep -c 'ptrain-run: error' '$cd_.err') -eq 1 ] && grep -q '$pat' '$cd_.err' && ! grep -q '^step' '$cd_.out'"
    [ "$rc" -ne 0 ] && diag "$(grep 'ptrain-run: error' "$cd_.err")"
    rc=0
    ptrain_mpirun -np 2 "$run" $common --dp 2 --save-dir "$cd_" --resume auto --metrics "$cd_.jsonl" \
        >"$cd_.out2" 2>"$cd_.err2" || rc=$?
    check "[$tag] --resume auto falls back to step 3 (status $rc)" \
        sh -c "[ $rc -eq 0 ] && grep -q '^resume: $cd_/step-00000003 (step 3' '$cd_.out2' && grep -q 'warning: .*step-00000006' '$cd_.err2'"
    check "[$tag] ... and continues with the straight run's losses" [ -n "$ref" -a "$(losses "$cd_.jsonl" 3)" = "$ref" ]
}
corrupt_case truncated truncate "has [0-9]* bytes, the manifest says"
corrupt_case flipped flip "checksum .*corrupted"
corrupt_case no-manifest nomanifest "no manifest.json"
corrupt_case missing-file nofile "rank-00001.bin"

rc=0
ptrain_mpirun -np 2 "$run" $common --dp 2 --save-dir "$wd/empty" --resume auto >"$wd/fresh.out" 2>&1 || rc=$?
check "--resume auto with no checkpoint starts fresh (status $rc)" \
    sh -c "[ $rc -eq 0 ] && grep -q 'no valid checkpoint' '$wd/fresh.out' && grep -q '^done:' '$wd/fresh.out'"
rc=0
ptrain_mpirun -np 2 "$run" $common --layers 3 --dp 2 --resume "$src/step-00000003" >"$wd/model.out" 2>"$wd/model.err" || rc=$?
check "a checkpoint of another model is refused with one line naming both (status $rc)" \
    sh -c "[ $rc -ne 0 ] && [ \$(grep -c 'ptrain-run: error' '$wd/model.err') -eq 1 ] && grep -q 'L=2 .*L=3' '$wd/model.err'"

# ---- resharding: ZeRO-1 dp=2's step 3 loaded under plan Y and saved there
# (a resumed run with nothing left to do saves at its end), then loaded back
# under ZeRO-1 dp=2 and saved: every rank file equals the original byte for byte
zsrc="$wd/zero1/b/step-00000003"
reshard_case() { # TAG NP PLAN-FLAGS...
    tag=$1; np=$2; shift 2
    rd="$wd/rs-$tag"
    mkdir -p "$rd"
    rc=0
    ptrain_mpirun -np "$np" "$run" $common --steps 3 "$@" --resume "$zsrc" --save-dir "$rd/y" >"$rd.out" 2>&1 || rc=$?
    ptrain_mpirun -np 2 "$run" $common --steps 3 --dp 2 --zero 1 --resume "$rd/y/step-00000003" --save-dir "$rd/x" \
        >"$rd.out2" 2>&1 || rc=$?
    check "[reshard $tag] zero1 dp=2 -> $* ($np ranks) -> zero1 dp=2 runs (status $rc)" [ "$rc" -eq 0 ]
    [ "$rc" -eq 0 ] || diag "$(grep error "$rd.out" "$rd.out2" | head -n 2 | tr '\n' ' ')"
    check "[reshard $tag] ... and gives back every parameter, m and v bit for bit" \
        same_files "$zsrc" "$rd/x/step-00000003"
}
[ $full = 1 ] && reshard_case 1rank 1 --dp 1
reshard_case tp2 2 --dp 1 --tp 2 --mode 1d
[ $full = 1 ] && reshard_case pp2 2 --dp 1 --pp 2
[ $full = 1 ] && reshard_case 2d 4 --dp 1 --tp 4 --mode 2d
reshard_case zero3 2 --dp 2 --zero 3
# continuing under another plan follows the straight run to float tolerance
rc=0
ptrain_mpirun -np 2 "$run" $common --dp 1 --tp 2 --mode 1d --resume "$zsrc" --metrics "$wd/rs-cont.jsonl" \
    >"$wd/rs-cont.out" 2>&1 || rc=$?
la=$(losses "$wd/zero1/a.jsonl" 3)
lc=$(losses "$wd/rs-cont.jsonl" 3)
check "[reshard] zero1 dp=2 step 3 -> tp=2: steps 4-6 match the straight run within 1e-4 ($lc / $la)" \
    sh -c "[ $rc -eq 0 ] && echo '$la $lc' | awk '{ if (NF != 12) exit 1; for (i = 2; i <= 6; i += 2) { d = \$i - \$(i + 6); if (d < -1e-4 || d > 1e-4) exit 1 } }'"

rc=0
ptrain_mpirun -np 1 "$run" $common --keep 2 >"$wd/opt.out" 2>&1 || rc=$?
check "--keep without --save-dir is refused (status $rc)" sh -c "[ $rc -eq 2 ] && grep -q 'needs --save-dir' '$wd/opt.out'"
rc=0
ptrain_mpirun -np 1 "$run" $common --resume auto >"$wd/opt2.out" 2>&1 || rc=$?
check "--resume auto without --save-dir is refused (status $rc)" sh -c "[ $rc -eq 2 ] && grep -q 'needs --save-dir' '$wd/opt2.out'"

# ---- SIGUSR1: finish the step, save, exit 0 ---------------------------------
cd_="$wd/sig"
rc=0
# mpirun itself in the background ($! is its pid; mpirun forwards SIGUSR1 to the ranks)
bg_mpirun() { ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" exec "${MPIRUN:-mpirun}" --allow-run-as-root \
    --oversubscribe --bind-to none "$@"; }
(bg_mpirun -np 2 "$run" --model test --vocab 512 --data "synthetic:$seed" --seed "$init" --steps 100000 \
    --batch 4 --val-every 0 --val-batches 1 --dp 2 --save-dir "$cd_") >"$wd/sig.out" 2>"$wd/sig.err" &
pid=$!
i=0
while [ $i -lt 600 ] && ! grep -q '^step *3/' "$wd/sig.out" 2>/dev/null; do sleep 0.1; i=$((i+1)); done
kill -USR1 "$pid"
wait "$pid" || rc=$?
check "SIGUSR1 to mpirun: exit 0 (status $rc)" [ "$rc" -eq 0 ]
[ "$rc" -eq 0 ] || diag "$(tail -n 3 "$wd/sig.err" | tr '\n' ' ')"
line=$(grep '^stop: signal SIGUSR1: checkpoint' "$wd/sig.out")
check "... with one line saying where ($line)" [ -n "$line" ]
s=$(cat "$cd_/latest" 2>/dev/null)
check "... and the checkpoint it names is complete" \
    sh -c "[ -n '$s' ] && echo '$line' | grep -q '$cd_/$s saved at step' && jq -e '.files | length == 2' '$cd_/$s/manifest.json' >/dev/null"
n=$(echo "$s" | sed 's/step-0*//')
rc=0
(bg_mpirun -np 2 "$run" --model test --vocab 512 --data "synthetic:$seed" --seed "$init" --steps 100000 \
    --batch 4 --val-every 0 --val-batches 1 --dp 2 --save-dir "$cd_" --resume auto --save-every $((n + 1))) \
    >"$wd/sig2.out" 2>&1 &
pid=$!
i=0
while [ $i -lt 600 ] && ! grep -q "^checkpoint: $cd_/step-" "$wd/sig2.out" 2>/dev/null; do sleep 0.1; i=$((i+1)); done
kill -USR1 "$pid"
wait "$pid" || rc=$?
check "the requeued run continues at step $((n + 1)) (status $rc)" \
    sh -c "[ $rc -eq 0 ] && grep -q '^resume: $cd_/$s (step $n,' '$wd/sig2.out' && grep -q \"^step *$((n + 1))/\" '$wd/sig2.out'"
done_testing
