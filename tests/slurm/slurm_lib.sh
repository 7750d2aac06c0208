# SPDX-License-Identifier: MIT
# Shared setup of the tests under a real local Slurm: source after
# tests/lib.sh.  slurm_up NNODES starts a private cluster with the plugin
# built in this tree (scripts/local-slurm.sh) and tears it down on exit,
# whatever happens; it skips the whole test when Slurm, munge or the
# plugin (no slurm/spank.h at configure time) are absent.
PTRAIN_SPANK_SO="$top_builddir/spank/.libs/ptrain.so"

slurm_need() {
    for b in slurmctld slurmd srun sbatch munged mungekey; do
        command -v "$b" >/dev/null 2>&1 || [ -x "/usr/sbin/$b" ] ||
            skip_all "$b not installed (apt-get install slurmctld slurmd slurm-client munge)"
    done
    [ -f "$PTRAIN_SPANK_SO" ] || skip_all "SPANK plugin not built (configure found no slurm/spank.h)"
}

slurm_down() {
    [ -n "${SLURM_TEST_DIR:-}" ] || return 0
    "$top_srcdir/scripts/local-slurm.sh" down "$SLURM_TEST_DIR" >/dev/null 2>&1
    if [ "${KEEP_SLURM_TEST_DIR:-0}" = 1 ]; then echo "# kept $SLURM_TEST_DIR" >&2
    else rm -rf "$SLURM_TEST_DIR"; fi
}

# slurm_up NNODES [CPUS]: start the cluster, export SLURM_CONF.
slurm_up() {
    slurm_need
    # A test run inside a Slurm job must not talk to that job's cluster.
    for v in $(env | sed -n 's/^\(SLURM_[A-Za-z0-9_]*\)=.*/\1/p'); do unset "$v"; done
    unset PTRAIN_MODE PTRAIN_TP PTRAIN_VERBOSE PTRAIN_MODEL PTRAIN_BATCH PTRAIN_EXPLAIN
    SLURM_TEST_DIR=$(mktemp -d /tmp/ptrain-slurm.XXXXXX) || skip_all "mktemp failed"
    trap slurm_down EXIT
    trap 'exit 1' INT TERM
    local rc=0
    PTRAIN_SPANK_PLUGIN="$PTRAIN_SPANK_SO" \
        "$top_srcdir/scripts/local-slurm.sh" up "$SLURM_TEST_DIR" "$1" "${2:-4}" >"$SLURM_TEST_DIR.up.log" 2>&1 || rc=$?
    if [ $rc -eq 3 ]; then skip_all "$(cat "$SLURM_TEST_DIR.up.log")"; fi
    if [ $rc -ne 0 ]; then
        echo "Bail out! local Slurm did not start: $(tail -n 3 "$SLURM_TEST_DIR.up.log" | tr '\n' ' ')"
        rm -f "$SLURM_TEST_DIR.up.log"
        exit 1
    fi
    rm -f "$SLURM_TEST_DIR.up.log"
    . "$SLURM_TEST_DIR/env.sh"
}

# slurm_mpi: what every test that starts MPI ranks with srun --mpi=pmix
# needs: skip without PMIx, then Open MPI over loopback TCP and one
# compute thread per rank.
slurm_mpi() {
    [ -e /usr/lib/x86_64-linux-gnu/pmix2 ] || [ -n "$(ls /usr/lib/*/libpmix.so* 2>/dev/null)" ] ||
        skip_all "PMIx not installed (apt-get install libpmix-dev): srun --mpi=pmix cannot start MPI ranks"
    export OMPI_MCA_btl=self,tcp OMPI_MCA_btl_tcp_if_include=lo OMPI_MCA_oob_tcp_if_include=lo
    export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
}

# slurm_wait JOBID [SECONDS=120]: poll until the controller reports the job
# in a final state; sets SLURM_WAIT_EXIT to its ExitCode (empty if the record
# was already purged).  An empty or failed squeue is not taken as "done": a
# controller slow to answer under load (squeue's socket timeout) printed
# nothing and made an earlier version read a running job's output.
SLURM_WAIT_EXIT=
slurm_wait() {
    local i out
    SLURM_WAIT_EXIT=
    for i in $(seq $((${2:-120} * 10))); do
        out=$(scontrol -o show job "$1" 2>&1)
        case $out in *"Invalid job id"*) return 0 ;; esac
        case $(echo "$out" | sed -n 's/.* JobState=\([A-Z_]*\) .*/\1/p') in
        COMPLETED|FAILED|CANCELLED|TIMEOUT|NODE_FAIL|OUT_OF_MEMORY|BOOT_FAIL|DEADLINE|PREEMPTED)
            SLURM_WAIT_EXIT=$(echo "$out" | sed -n 's/.* ExitCode=\([0-9]*\):.*/\1/p')
            return 0 ;;
        esac
        sleep 0.1
    done
    diag "job $1 did not finish in ${2:-120} s: $out"
    scancel "$1" 2>/dev/null
    return 1
}

# srun_run OUT ERR CMD...: run CMD with stdout/stderr to OUT/ERR; sets
# SRUN_RC.  (No relaunch: the start-up crash that earlier versions
# relaunched around was Slurm's barrier not holding across nodes, fixed by
# the plugin's SLURM_PMIX_FENCE=ring; tests/slurm/test_fence.sh.)
srun_run() {
    local out=$1 err=$2
    shift 2
    SRUN_RC=0
    "$@" >"$out" 2>"$err" || SRUN_RC=$?
}

# Number of jobs the controller knows (finished ones stay MinJobAge=10 s).
slurm_job_count() { squeue -h -t all -o %i 2>/dev/null | wc -l; }
