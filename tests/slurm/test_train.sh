#!/bin/bash
# SPDX-License-Identifier: MIT
# Training through Slurm: ptrain-run launched by srun (and by an sbatch
# job) with --ptrain-mode=auto on 2 fake nodes x 2 tasks, reading the plan
# the SPANK plugin injected.  The plan is the planner's choice for the
# model and batch given to the plugin (--ptrain-model=test
# --ptrain-batch=4, which ptrain-run takes from PTRAIN_MODEL/PTRAIN_BATCH):
# each run must train with exactly the plan the plugin announced
# (--ptrain-verbose) and every rank must hold it.
. "$top_srcdir/tests/lib.sh"
. "$top_srcdir/tests/slurm/slurm_lib.sh"
RUN="$top_builddir/ptrain-run"
[ -x "$RUN" ] || skip_all "ptrain-run not built yet ($RUN missing)"
slurm_need
slurm_mpi
slurm_up 2 4
D=$SLURM_TEST_DIR
ARGS="--data synthetic --steps 3"
PLUG="--ptrain-mode=auto --ptrain-verbose --ptrain-model=test --ptrain-batch=4"
# announced ERR: the plan the plugin printed (--ptrain-verbose), "" if none
announced() { sed -n 's/.*ptrain: plan \(mode=[^(]*\) (nodes=.*/\1/p' "$1" | sed 's/ *$//'; }

# check_run OUT ERR RC WHAT: exit 0, the plan line, three steps, done.
check_run() {
    local out=$1 err=$2 rc=$3 what=$4
    check "$what: exit status 0" [ "$rc" -eq 0 ]
    local plan want
    plan=$(sed -n 's/^plan: \(mode=.*\) (source: slurm.*/\1/p' "$out" | sed 's/ *$//')
    want=$(announced "$err")
    check "$what: one 'plan:' line (from rank 0 only)" [ "$(grep -c '^plan:' "$out")" -eq 1 ]
    check "$what: trains with the plan the plugin announced ('$plan' = '$want')" \
        [ -n "$want" ] && [ "$plan" = "$want" ]
    check "$what: the model and batch the plan was made for (test, 4 sequences)" \
        grep -q '^model: test ' "$out" && grep -q 'batch 4 x 32 ' "$out"
    check "$what: 3 'step ' lines" [ "$(grep -c '^step ' "$out")" -eq 3 ]
    check "$what: final 'done:' line" sh -c "tail -n 1 '$out' | grep -q '^done:'"
    if [ "$rc" -ne 0 ] || ! grep -q '^done:' "$out"; then
        diag "stdout: $(tail -n 5 "$out" | tr '\n' ' ')"
        diag "stderr: $(head -n 30 "$err" | tr '\n' ' ')"
    fi
}

# 1. --dry-run: every rank reports the grid it built from the plugin's plan.
srun_run "$D/d.out" "$D/d.err" srun --mpi=pmix $PLUG -N2 --ntasks-per-node=2 "$RUN" --dry-run $ARGS
rc=$SRUN_RC
check "dry run exits 0" [ $rc -eq 0 ]
check "dry run: 4 rank lines" [ "$(grep -c '^rank ' "$D/d.out")" -eq 4 ]
ranks=$(sed -n 's|^rank \([0-9]*\)/4 .*|\1|p' "$D/d.out" | sort -n | tr '\n' ' ')
check "dry run: ranks 0..3 of world 4 ($ranks)" [ "$ranks" = "0 1 2 3 " ]
want=$(announced "$D/d.err")
wdp=$(echo "$want" | sed -n 's/.* dp=\([0-9]*\) .*/\1/p'); wtp=$(echo "$want" | sed -n 's/.* tp=\([0-9]*\) .*/\1/p')
check "dry run: every rank has the announced dp=$wdp tp=$wtp ($want)" \
    [ -n "$wdp" ] && [ "$(grep '^rank ' "$D/d.out" | grep -w "dp=$wdp" | grep -wc "tp=$wtp")" -eq 4 ]
[ $rc -eq 0 ] || diag "stderr: $(tail -n 5 "$D/d.err" | tr '\n' ' ')"

# 2. the training run under srun.
srun_run "$D/t.out" "$D/t.err" srun --mpi=pmix $PLUG -N2 --ntasks-per-node=2 "$RUN" $ARGS
check_run "$D/t.out" "$D/t.err" $SRUN_RC "srun"

# 3. the same through sbatch (#SBATCH --ptrain-mode=auto, inner srun).
cat >"$D/train.sh" <<SH
#!/bin/sh
#SBATCH --ptrain-mode=auto
#SBATCH --ptrain-verbose
#SBATCH --ptrain-model=test
#SBATCH --ptrain-batch=4
#SBATCH -N 2
#SBATCH --ntasks-per-node=2
#SBATCH -o $D/b.out
#SBATCH -e $D/b.err
srun --mpi=pmix "$RUN" $ARGS
SH
job=$(sbatch --parsable "$D/train.sh" 2>"$D/sb.err")
check "sbatch accepted the training job" [ -n "$job" ]
check "training job finished" slurm_wait "$job" 300
check_run "$D/b.out" "$D/b.err" "${SLURM_WAIT_EXIT:-1}" "sbatch"

# 4. a pipeline with ZeRO through the plugin: the plan it injects (pp=2,
# zero=1, 2 microbatches pinned, tp=1 pinned, so dp=2) is the one the job
# trains with, and it reaches the same losses as the auto run above (the
# same model, seed and data: every plan computes the same step).
srun_run "$D/p.out" "$D/p.err" srun --mpi=pmix $PLUG --ptrain-pp=2 --ptrain-zero=1 --ptrain-microbatches=2 \
    --ptrain-tp=1 --ptrain-sp=1 -N2 --ntasks-per-node=2 "$RUN" $ARGS
rc=$SRUN_RC
check "srun --ptrain-pp=2 --ptrain-zero=1: exit status 0" [ $rc -eq 0 ]
plan=$(grep -m1 '^plan:' "$D/p.out")
check "pipeline run trains with the injected plan pp=2 zero=1 microbatches=2 dp=2 ($plan)" \
    sh -c 'for w in pp=2 zero=1 microbatches=2 dp=2 tp=1; do echo "$1" | grep -qw "$w" || exit 1; done' _ "$plan"
check "pipeline run: 3 'step ' lines and 'done:'" \
    sh -c "[ \$(grep -c '^step ' '$D/p.out') -eq 3 ] && tail -n 1 '$D/p.out' | grep -q '^done:'"
l1=$(sed -n 's/^done: .*train_loss \([0-9.]*\) -> \([0-9.]*\).*/\1 \2/p' "$D/t.out")
l2=$(sed -n 's/^done: .*train_loss \([0-9.]*\) -> \([0-9.]*\).*/\1 \2/p' "$D/p.out")
check "pipeline + ZeRO run reports the 1d run's losses ($l2 vs $l1)" sh -c '[ -n "$1" ] && [ "$1" = "$2" ]' _ "$l1" "$l2"
[ $rc -eq 0 ] || diag "stderr: $(tail -n 5 "$D/p.err" | tr '\n' ' ')"
done_testing
