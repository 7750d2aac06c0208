#!/bin/sh
# SPDX-License-Identifier: MIT
# share/sbatch templates (ptrain-sbatch(7)):
#  - they parse (bash -n), ask for --requeue and --signal=B:USR1@N, run
#    ptrain-run with --resume auto and --save-dir, and pass it only options
#    its getopt table has; their #SBATCH options are sbatch's (from its
#    manual page when installed);
#  - run as batch scripts without Slurm (srun and scontrol replaced by
#    stand-ins: srun -> mpirun -np 2, scontrol -> a log), SIGUSR1 to the
#    batch shell reaches every rank: a checkpoint is saved, the script exits 0
#    and requeues the job; the "requeued" run resumes from that checkpoint,
#    finishes, and does not requeue again.
# The local Slurm is not used (tests/slurm/* own it).
. "$top_srcdir/tests/lib.sh"
need_run
need_mpirun
wd=$(mktemp -d)
bpid=
trap '[ -n "$bpid" ] && kill "$bpid" 2>/dev/null; rm -rf "$wd"' EXIT
tdir=$top_srcdir/share/sbatch
# the long options of ptrain-run's getopt table
sed -n '/struct option [a-z_]*\[\] *= *{/,/{ *0, *0, *0, *0 *}/p' "$top_srcdir/bin/run/options.c" |
    grep -o '{ *"[a-z0-9-]*"' | sed 's/{ *"//; s/"$//' | sort -u >"$wd/run.opts"
for t in ptrain-single-node ptrain-multi-node; do
    f=$tdir/$t.sbatch
    check "[$t] exists" [ -f "$f" ]
    check "[$t] bash -n" bash -n "$f"
    check "[$t] #SBATCH --requeue" grep -q '^#SBATCH --requeue$' "$f"
    check "[$t] #SBATCH --signal=B:USR1@N (to the batch shell, N s before the limit)" grep -q '^#SBATCH --signal=B:USR1@[0-9][0-9]*$' "$f"
    check "[$t] a USR1 trap in the script" grep -q "^trap '.*' USR1" "$f"
    # the ptrain-run command: from "$PTRAIN_RUN" to the line ending in '&'
    sed -n '/"\$PTRAIN_RUN"/,/&$/p' "$f" | sed 's/.*"\$PTRAIN_RUN"//' | grep -o -- '--[a-z0-9-]*' | sed 's/^--//' | sort -u >"$wd/$t.used"
    check "[$t] runs ptrain-run with --resume auto and --save-dir" \
        sh -c "grep -q -- '--resume auto' '$f' && grep -qx save-dir '$wd/$t.used'"
    missing=$(comm -23 "$wd/$t.used" "$wd/run.opts" | tr '\n' ' ')
    check "[$t] every ptrain-run option ($(wc -l <"$wd/$t.used")) is in its getopt table${missing:+ (not: $missing)}" \
        [ -s "$wd/$t.used" -a -z "$missing" ]
    # sbatch's options: its manual page (sbatch --help needs a cluster's configuration)
    man=$(ls /usr/share/man/man1/sbatch.1* 2>/dev/null | head -n 1)
    if [ -n "$man" ] || sbatch --help >/dev/null 2>&1; then
        { [ -n "$man" ] && zcat -f "$man" | sed 's/\\-/-/g'; sbatch --help 2>/dev/null; } |
            grep -o -- '--[a-z-]*' | sort -u >"$wd/sbatch.opts"
        bad=
        for o in $(sed -n 's/^#SBATCH --\([a-z-]*\).*/\1/p' "$f"); do
            grep -qx -- "--$o" "$wd/sbatch.opts" || bad="$bad --$o"
        done
        check "[$t] every #SBATCH option is one of sbatch's${bad:+ (not:$bad)}" [ -z "$bad" ]
        grep -qx -- --no-such-opt "$wd/sbatch.opts" && not_ok "[$t] control: --no-such-opt is not an sbatch option" ||
            ok "[$t] control: --no-such-opt is not an sbatch option"
    else
        ok "[$t] # SKIP no sbatch manual page or configuration"
    fi
done

# ---- the single-node template as a batch script, with stand-ins -------------
mkdir -p "$wd/bin"
cat >"$wd/bin/srun" <<EOF
#!/bin/sh
# stand-in for srun: drop srun's options, start the program on 2 ranks
while [ \$# -gt 0 ]; do case \$1 in -*) shift ;; *) break ;; esac; done
exec ${MPIRUN:-mpirun} --allow-run-as-root --oversubscribe --bind-to none -np 2 "\$@"
EOF
cat >"$wd/bin/scontrol" <<EOF
#!/bin/sh
echo "scontrol \$*" >>"$wd/scontrol.log"
EOF
chmod +x "$wd/bin/srun" "$wd/bin/scontrol"
batch() { # STEPS OUT: run the template in the background (bpid)
    env PATH="$wd/bin:$PATH" SLURM_JOB_ID=4242 SLURM_JOB_NAME=ptest PTRAIN_RUN="$run" MODEL=test \
        DATA_DIR=synthetic:11 STEPS="$1" BATCH=4 CKPT_DIR="$wd/ck" SAVE_EVERY=100000 KEEP=2 \
        EXTRA_ARGS="--vocab 512 --val-every 0 --val-batches 1 --tp 2" \
        ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" \
        bash "$tdir/ptrain-single-node.sbatch" >"$2" 2>&1 &
    bpid=$!
}
batch 1000000 "$wd/first.out"
# wait until the ranks train (the plan line comes after start-up), then warn like Slurm
n=0
while ! grep -q '^plan:' "$wd/first.out" && [ $n -lt 600 ]; do sleep 0.2; n=$((n + 1)); done
sleep 1
kill -USR1 "$bpid"
rc=0; wait "$bpid" || rc=$?
bpid=
check "USR1 to the batch shell: it exits 0 (status $rc)" [ "$rc" -eq 0 ]
check "every rank stopped after saving (ptrain-run's stop line)" grep -q '^stop: signal SIGUSR1: checkpoint .* saved at step' "$wd/first.out"
check "the script requeued job 4242" grep -qx 'scontrol requeue 4242' "$wd/scontrol.log"
[ "$rc" -eq 0 ] || diag "$(tail -n 5 "$wd/first.out" | tr '\n' ' ')"
saved=$(sed -n 's/^step-0*\([0-9][0-9]*\)$/\1/p' "$wd/ck/latest" 2>/dev/null)
check "a checkpoint was saved mid-run (step ${saved:-none})" [ -n "$saved" ] && [ "${saved:-0}" -gt 0 ] && [ "${saved:-0}" -lt 1000000 ]
# the requeued job: the same script, a few steps past the checkpoint
: >"$wd/scontrol.log"
if [ -n "$saved" ]; then
    batch $((saved + 3)) "$wd/second.out"
    rc=0; wait "$bpid" || rc=$?
    bpid=
    check "the requeued run exits 0 (status $rc)" [ "$rc" -eq 0 ]
    check "it resumed from step $saved" grep -q "^resume: $wd/ck/step-0*$saved (step $saved," "$wd/second.out"
    check "it finished at step $((saved + 3)) and kept that checkpoint" [ -f "$wd/ck/step-$(printf %08d $((saved + 3)))/manifest.json" ]
    check "no second requeue without a signal" [ ! -s "$wd/scontrol.log" ]
    check "its other --steps is named in one warning line" \
        sh -c "[ \$(grep -c '^ptrain-run: warning: checkpoint .* was trained with --steps 1000000 .* this run has --steps $((saved + 3)) .* changes from step $saved on' '$wd/second.out') -eq 1 ]"
    [ "$rc" -eq 0 ] || diag "$(tail -n 5 "$wd/second.out" | tr '\n' ' ')"
fi
done_testing
