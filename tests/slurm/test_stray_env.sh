#!/bin/bash
# SPDX-License-Identifier: MIT
# A step that does not ask for ptrain is never failed by a PTRAIN_* variable
# left in the environment (one local fake node, the cluster's defaults:
# default_mode off, energy at most plan).  A ptrain step is one whose srun or
# sbatch names a --ptrain-* option, or whose environment has PTRAIN_MODE set
# to something other than off (how a job submitted through slurmrestd asks),
# or any step when the administrator's default_mode is not off.  Other steps:
# the plugin reads no PTRAIN_* variable and injects nothing; srun (sbatch)
# says in at most one line what it ignored, and the step runs.  The same
# variables in a ptrain step are refused as before.
. "$top_srcdir/tests/lib.sh"
. "$top_srcdir/tests/slurm/slurm_lib.sh"
export PTRAIN_SPANK_ARGS="gemm_gflops=32 inter_node_gbps=10 inter_node_lat_us=5"
unset PTRAIN_ENERGY PTRAIN_TP PTRAIN_MODE
slurm_up 1 2
D=$SLURM_TEST_DIR
cat >"$D/t.sh" <<'SH'
#!/bin/sh
echo "TASK RANK=${RANK-unset} PLAN=${PTRAIN_PLAN:+set} E=${PTRAIN_ENERGY-unset} TP=${PTRAIN_TP-unset}"
SH
chmod +x "$D/t.sh"

# plain: ENV... -- SRUN_ARGS...: a plain step with ENV (VAR=VALUE words) in
# srun's environment runs its one task, which gets no plan, and stderr has at
# most one line, a warning naming the variable (WANT, "" for none)
plain() {
    local want=$1 rc=0
    shift
    local envs=()
    while [ "$1" != -- ]; do envs+=("$1"); shift; done
    shift
    env "${envs[@]}" timeout 60 srun -N1 -n1 "$@" "$D/t.sh" >"$D/o" 2>"$D/e" || rc=$?
    local what="${envs[*]} srun $* (no ptrain option)"
    check "$what: exit 0, the task ran without a plan ($rc: $(head -c 300 "$D/e" | tr '\n' ' '))" \
        sh -c "[ $rc -eq 0 ] && grep -q '^TASK RANK=unset PLAN= ' '$D/o'"
    if [ -n "$want" ]; then
        check "$what: one warning line, naming $want" \
            sh -c '[ $(wc -l <"$1") -eq 1 ] && grep -qF -- "$2" "$1" && grep -q "ptrain: warning: .*not a ptrain step" "$1"' \
            _ "$D/e" "$want"
    else
        check "$what: nothing on stderr" [ ! -s "$D/e" ]
    fi
}
plain "PTRAIN_ENERGY=apply is not allowed on this cluster" PTRAIN_ENERGY=apply --
plain "PTRAIN_ENERGY='bogus' is invalid" PTRAIN_ENERGY=bogus --
plain "PTRAIN_TP='x' is invalid" PTRAIN_TP=x --
plain "PTRAIN_TP='x' is invalid" PTRAIN_MODE=off PTRAIN_TP=x --
plain "" PTRAIN_TP=2 PTRAIN_ENERGY=report --
check "... the task keeps the variables it was given (PTRAIN_ENERGY=report, PTRAIN_TP=2)" \
    grep -q '^TASK .* E=report TP=2$' "$D/o"
# only in the task's environment (srun --export): slurmstepd alone sees it
plain "" -- --export=ALL,PTRAIN_TP=x,PTRAIN_ENERGY=bogus

# the batch job's own step and its inner srun
cat >"$D/job.sh" <<SH
#!/bin/sh
#SBATCH -N 1
#SBATCH -n 1
#SBATCH -o $D/job.out
#SBATCH -e $D/job.err
srun "$D/t.sh"
echo "BATCH srun rc=\$?"
SH
job=$(PTRAIN_TP=x PTRAIN_ENERGY=bogus sbatch --parsable "$D/job.sh" 2>"$D/sb.err")
check "sbatch with PTRAIN_TP=x PTRAIN_ENERGY=bogus exported: accepted, one warning ($(head -c 200 "$D/sb.err"))" \
    sh -c "[ -n '$job' ] && [ \$(wc -l <'$D/sb.err') -le 1 ]"
check "... the job finished" slurm_wait "$job" 120
check "... its inner srun ran the task without a plan ($(cat "$D/job.out" "$D/job.err" 2>/dev/null | head -c 300 | tr '\n' ' '))" \
    sh -c "grep -q '^TASK RANK=unset PLAN= ' '$D/job.out' && grep -q '^BATCH srun rc=0' '$D/job.out'"

# ptrain steps: the same variables are refused, in one line
refused() { # WHAT TEXT ENV... -- SRUN_ARGS...
    local what=$1 text=$2 rc=0
    shift 2
    local envs=()
    while [ "$1" != -- ]; do envs+=("$1"); shift; done
    shift
    env "${envs[@]}" timeout 60 srun -N1 -n1 "$@" "$D/t.sh" >"$D/o" 2>"$D/e" || rc=$?
    check "$what: refused ($rc), naming it ($(head -c 200 "$D/e" | tr '\n' ' '))" \
        sh -c '[ "$3" -ne 0 ] && grep -qF -- "$2" "$1" && ! grep -q "^TASK" "$4"' _ "$D/e" "$text" "$rc" "$D/o"
}
refused "PTRAIN_TP=x with --ptrain-mode=auto" "PTRAIN_TP='x' is invalid" PTRAIN_TP=x -- --ptrain-mode=auto
refused "PTRAIN_TP=x with PTRAIN_MODE=auto" "PTRAIN_TP='x' is invalid" PTRAIN_MODE=auto PTRAIN_TP=x --
refused "PTRAIN_ENERGY=bogus with --ptrain-mode=1d" "PTRAIN_ENERGY='bogus' is invalid" PTRAIN_ENERGY=bogus -- \
    --ptrain-mode=1d
refused "PTRAIN_ENERGY=apply with --ptrain-verbose" "PTRAIN_ENERGY=apply is not allowed on this cluster" \
    PTRAIN_ENERGY=apply -- --ptrain-verbose
refused "PTRAIN_MODE=bogus" "PTRAIN_MODE" PTRAIN_MODE=bogus --
# slurmrestd's way: PTRAIN_MODE=auto only in the job's environment
refused "PTRAIN_MODE=auto PTRAIN_TP=x in the task's environment only" "PTRAIN_TP='x' is invalid" -- \
    --export=ALL,PTRAIN_MODE=auto,PTRAIN_TP=x

# an administrator's default_mode other than off makes every step a ptrain step
cp "$D/plugstack.conf" "$D/plugstack.conf.orig"
echo "required $PTRAIN_SPANK_SO default_mode=auto $PTRAIN_SPANK_ARGS" >"$D/plugstack.conf"
refused "default_mode=auto: PTRAIN_TP=x" "PTRAIN_TP='x' is invalid" PTRAIN_TP=x --
cp "$D/plugstack.conf.orig" "$D/plugstack.conf"
done_testing
