#!/bin/bash
# Preemption under a real local Slurm: a batch job that requeues itself.
# The batch script is the pattern of share/sbatch (a trap on SIGUSR1 in the
# batch shell forwards it to the step, the step saves and exits 0, the
# script requeues the job, the requeued job runs `--resume auto`):
#   1. a straight run of STEPS steps under srun gives the reference losses;
#   2. the same run as an sbatch --requeue job gets SIGUSR1 in its batch
#      shell (scancel --batch --signal=USR1, what --signal=B:USR1@120 does
#      at the time limit) after a few steps: one "stop:" line names the
#      checkpoint; the job is requeued (Restarts=1), resumes from that
#      checkpoint and finishes; every step after the resume reports the
#      reference's loss (bit-identical resume: same data order and lr).
. "$top_srcdir/tests/lib.sh"
. "$top_srcdir/tests/slurm/slurm_lib.sh"
RUN="$top_builddir/ptrain-run"
[ -x "$RUN" ] || skip_all "ptrain-run not built yet ($RUN missing)"
slurm_need
slurm_mpi
slurm_up 1 2
D=$SLURM_TEST_DIR
STEPS=300
ARGS="--model test --vocab 512 --data synthetic:11 --seed 5 --steps $STEPS --batch 4 --val-every 0 --val-batches 1"
# the model and batch the plugin plans for are the ones ptrain-run trains
# (the start-up agreement refuses a plan made for others)
PLUG="--ptrain-mode=auto --ptrain-model=2,4,64,32,512 --ptrain-batch=4"

# losses FILE: "step loss" per line, from ptrain-run's step lines.
losses() { sed -n 's/^step *\([0-9]*\)\/[0-9]* | loss \([0-9.]*\) .*/\1 \2/p' "$1"; }

srun_run "$D/ref.out" "$D/ref.err" srun --mpi=pmix $PLUG -N1 -n2 "$RUN" $ARGS
rc=$SRUN_RC
check "reference run under srun: exit 0 and $STEPS steps" \
    sh -c "[ $rc -eq 0 ] && [ \$(grep -c '^step ' '$D/ref.out') -eq $STEPS ]"
[ $rc -eq 0 ] || diag "stderr: $(tail -n 3 "$D/ref.err" | tr '\n' ' ')"

cat >"$D/job.sh" <<SH
#!/bin/bash
#SBATCH --ptrain-mode=auto
#SBATCH --ptrain-model=2,4,64,32,512
#SBATCH --ptrain-batch=4
#SBATCH -N 1
#SBATCH -n 2
#SBATCH --requeue
#SBATCH --open-mode=append
#SBATCH -o $D/job.out
#SBATCH -e $D/job.err
requeue=0
trap 'requeue=1; kill -USR1 \$pid' USR1
echo "batch: start (restart \${SLURM_RESTART_COUNT:-0})"
srun --mpi=pmix "$RUN" $ARGS --save-dir "$D/ck" --resume auto &
pid=\$!
wait \$pid; rc=\$?
while kill -0 \$pid 2>/dev/null; do wait \$pid; rc=\$?; done
echo "batch: step exited \$rc (requeue \$requeue)"
[ \$requeue = 1 ] && [ \$rc -eq 0 ] && exec scontrol requeue "\$SLURM_JOB_ID"
exit \$rc
SH
job=$(sbatch --parsable "$D/job.sh" 2>"$D/sb.err")
check "sbatch --requeue job accepted" [ -n "$job" ]
i=0
while [ $i -lt 1200 ] && ! grep -q '^step *20/' "$D/job.out" 2>/dev/null; do sleep 0.1; i=$((i + 1)); done
check "the job trains (step 20 seen)" grep -q '^step *20/' "$D/job.out"
scancel --batch --signal=USR1 "$job"
# the requeued job: wait for its second start and then for its end
i=0
while [ $i -lt 3000 ] && [ "$(grep -c '^batch: start' "$D/job.out" 2>/dev/null)" -lt 2 ]; do sleep 0.1; i=$((i + 1)); done
check "the job was requeued and started again" [ "$(grep -c '^batch: start' "$D/job.out")" -eq 2 ]
check "requeued job finished" slurm_wait "$job" 300
check "requeued job: exit code 0 (${SLURM_WAIT_EXIT:-none})" [ "${SLURM_WAIT_EXIT:-1}" = 0 ]
restarts=$(scontrol -o show job "$job" 2>/dev/null | sed -n 's/.* Restarts=\([0-9]*\) .*/\1/p')
check "Slurm counts one restart (Restarts=$restarts)" [ "$restarts" = 1 ]
stop=$(grep '^stop: signal SIGUSR1: checkpoint' "$D/job.out")
check "one stop line names the checkpoint ($stop)" [ "$(grep -c '^stop: signal SIGUSR1' "$D/job.out")" -eq 1 ]
n=$(echo "$stop" | sed -n 's/.* saved at step \([0-9]*\);.*/\1/p')
check "the requeued run resumed from step $n" grep -q "^resume: .* (step $n," "$D/job.out"
check "and ended with 'done:'" grep -q '^done:' "$D/job.out"
# the second run's steps (after the resume line) against the reference
sed -n '/^batch: start (restart 1)/,$p' "$D/job.out" >"$D/second.out"
losses "$D/second.out" >"$D/second.loss"
losses "$D/ref.out" | awk -v n="${n:-0}" '$1 > n' >"$D/ref.loss"
check "steps $((${n:-0} + 1))..$STEPS after the resume report the reference's losses ($(wc -l <"$D/second.loss") steps)" \
    sh -c "[ -s '$D/second.loss' ] && cmp -s '$D/second.loss' '$D/ref.loss'"
cmp -s "$D/second.loss" "$D/ref.loss" || diag "first difference: $(diff "$D/ref.loss" "$D/second.loss" | head -n 3 | tr '\n' ' ')"
done_testing
