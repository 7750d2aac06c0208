#!/bin/bash
# SPDX-License-Identifier: MIT
# --ptrain-energy under a real local Slurm (one fake node whose hwloc model
# has 4 GPUs, tests/topo/gpu4-pcie.xml), slurmd loading the stand-in NVML
# (tests/energy/fake_nvml.so through PTRAIN_NVML_LIBRARY; there is no GPU
# here): with energy=apply allowed, each task gets PTRAIN_ENERGY and the
# allowed clock range, its own GPU's application-clock restriction is
# lifted while it runs (the other GPUs' never) and put back, with the
# clocks reset, when it exits; a GPU the user or Slurm chose
# (CUDA_VISIBLE_DEVICES) is not the binding's, and nothing is lifted; a
# level beyond the cluster's, or not a level, is refused before anything is
# allocated (in a ptrain step); a ptrain-run killed by SIGKILL while a
# cpufreq plan lowered its CPUs' clocks (a fake tree, PTRAIN_SYSFS_ROOT in
# slurmd's environment) has them put back by the plugin at the task's exit.
. "$top_srcdir/tests/lib.sh"
. "$top_srcdir/tests/slurm/slurm_lib.sh"
fake="$top_builddir/tests/energy/.libs/fake_nvml.so"
[ -f "$fake" ] || skip_all "the stand-in NVML is not built"
nv=$(mktemp -d /tmp/ptrain-fake-nvml.XXXXXX) || skip_all "mktemp failed"
echo 4 >"$nv/count"
i=0
for b in 05 06 09 0A; do echo "00000000:$b:00.0" >"$nv/busid.$i"; i=$((i + 1)); done
touch "$nv/root" # slurmstepd is root
export PTRAIN_NVML_LIBRARY="$fake" FAKE_NVML_DIR="$nv"
export PTRAIN_SPANK_ARGS="energy=apply gpu_clock_mhz=1100-1980 gemm_gflops=32 inter_node_gbps=10 inter_node_lat_us=5"
export LOCAL_SLURM_HWLOC_XML_n1="$top_srcdir/tests/topo/gpu4-pcie.xml"
# a fake cpufreq tree for slurmd (the plugin, as root) and the tasks alike:
# CPUs 0-7 under the userspace governor at 2200000 kHz, none of the offered
# clocks, so that any clock a plan set differs from it
cf=$(mktemp -d /tmp/ptrain-fake-cpufreq.XXXXXX) || skip_all "mktemp failed"
for c in 0 1 2 3 4 5 6 7; do
    d=$cf/sys/devices/system/cpu/cpu$c/cpufreq
    mkdir -p "$d"
    echo userspace >"$d/scaling_governor"
    echo 2200000 >"$d/scaling_setspeed"
    echo 2200000 >"$d/scaling_cur_freq"
    echo 2400000 >"$d/scaling_max_freq"
    echo 800000 >"$d/cpuinfo_min_freq"
    echo 2400000 >"$d/cpuinfo_max_freq"
    echo "2400000 2000000 1600000 1200000 800000" >"$d/scaling_available_frequencies"
done
export PTRAIN_SYSFS_ROOT="$cf"
slurm_up 1 4
trap 'slurm_down; rm -rf "$nv" "$cf" "$cf.job"' EXIT

# each task: what it was given, and its own GPU's restriction while it runs
cat >"$SLURM_TEST_DIR/etask.sh" <<'SH'
#!/bin/sh
echo "TASK lid=$SLURM_LOCALID E=${PTRAIN_ENERGY-unset} G=${PTRAIN_ENERGY_GPU_MHZ-unset} C=${PTRAIN_ENERGY_CPU_MHZ-unset} CVD=${CUDA_VISIBLE_DEVICES-unset} R=$(cat "$FAKE_NVML_DIR/restricted.$CUDA_VISIBLE_DEVICES" 2>/dev/null || echo 1)"
SH
chmod +x "$SLURM_TEST_DIR/etask.sh"
rc=0
timeout 120 srun -N1 -n2 --ptrain-mode=1d --ptrain-energy=apply "$SLURM_TEST_DIR/etask.sh" >"$SLURM_TEST_DIR/o" 2>&1 || rc=$?
diag "$(tr '\n' ' ' <"$SLURM_TEST_DIR/o" | cut -c1-400)"
check "srun --ptrain-energy=apply with 2 tasks: exit 0 ($rc)" [ "$rc" -eq 0 ]
check "each task has PTRAIN_ENERGY=apply and the allowed GPU clocks, no CPU range (none set)" \
    sh -c "[ \$(grep -c '^TASK .* E=apply G=1100-1980 C=unset ' '$SLURM_TEST_DIR/o') -eq 2 ]"
check "each task's own GPU (0 and 1) was unrestricted while it ran" \
    sh -c "grep -q '^TASK lid=0 .* CVD=0 R=0' '$SLURM_TEST_DIR/o' && grep -q '^TASK lid=1 .* CVD=1 R=0' '$SLURM_TEST_DIR/o'"
log=$(grep -v '^init$\|^shutdown$' "$nv/log" 2>/dev/null | sort | tr '\n' ';')
check "the plugin lifted GPUs 0 and 1, then reset their clocks and restricted them again; GPUs 2 and 3 untouched ($log)" \
    [ "$log" = "reset_app 0;reset_app 1;reset_locked 0;reset_locked 1;restriction 0 0;restriction 0 1;restriction 1 0;restriction 1 1;" ]
check "after the step every GPU is restricted" \
    sh -c "for g in 0 1; do [ \"\$(cat '$nv/restricted.'\$g)\" = 1 ] || exit 1; done; [ ! -e '$nv/restricted.2' ]"
rm -f "$nv/log"
# a GPU chosen by the user or by Slurm's gres (CUDA_VISIBLE_DEVICES in the
# step): the binding leaves it, so the binding's GPU is not the task's and
# its restriction must stay (another job's GPU, perhaps)
rc=0
CUDA_VISIBLE_DEVICES=3 timeout 120 srun -N1 -n2 --ptrain-mode=1d --ptrain-energy=apply "$SLURM_TEST_DIR/etask.sh" \
    >"$SLURM_TEST_DIR/o5" 2>&1 || rc=$?
log=$(grep -v '^init$\|^shutdown$' "$nv/log" 2>/dev/null | sort | tr '\n' ';')
check "CUDA_VISIBLE_DEVICES=3 given: exit 0 ($rc), the tasks keep GPU 3, restricted, and no GPU's restriction is touched ($log)" \
    sh -c "[ $rc -eq 0 ] && [ \$(grep -c '^TASK .* E=apply .* CVD=3 R=1' '$SLURM_TEST_DIR/o5') -eq 2 ] && [ -z '$log' ]"
rm -f "$nv/log"
rc=0
timeout 120 srun -N1 -n2 --ptrain-mode=1d --ptrain-energy=report "$SLURM_TEST_DIR/etask.sh" >"$SLURM_TEST_DIR/o2" 2>&1 || rc=$?
check "--ptrain-energy=report: PTRAIN_ENERGY=report, no NVML restriction touched ($rc)" \
    sh -c "[ $rc -eq 0 ] && [ \$(grep -c '^TASK .* E=report ' '$SLURM_TEST_DIR/o2') -eq 2 ] && ! grep -q restriction '$nv/log' 2>/dev/null"
rc=0
timeout 60 srun -N1 -n1 --ptrain-energy=max true >"$SLURM_TEST_DIR/o3" 2>&1 || rc=$?
check "--ptrain-energy=max is refused before allocation, naming the levels ($rc)" \
    sh -c "[ $rc -ne 0 ] && grep -q \"ptrain: --ptrain-energy='max' is invalid (valid: off, report, plan, apply)\" '$SLURM_TEST_DIR/o3'"
rc=0
PTRAIN_ENERGY=all timeout 60 srun -N1 -n1 --ptrain-mode=1d true >"$SLURM_TEST_DIR/o4" 2>&1 || rc=$?
check "PTRAIN_ENERGY=all in a ptrain step is refused as well ($rc)" \
    sh -c "[ $rc -ne 0 ] && grep -q \"ptrain: PTRAIN_ENERGY='all' is invalid\" '$SLURM_TEST_DIR/o4'"
# (in a step that names no ptrain option it is ignored with a warning:
# tests/slurm/test_stray_env.sh)

# SIGKILL (KillWait, the OOM killer) to a ptrain-run applying a cpufreq plan:
# it cannot put its clocks back; the plugin, which recorded the settings of
# the task's CPUs before the task ran, writes back what the step left changed
# when its last task exits.  It takes the tree from slurmd's environment
# only: a job that names another (PTRAIN_SYSFS_ROOT in its own environment)
# does not make root write there.
speeds() { # TREE: the distinct speeds of its 8 CPUs (no newline once written)
    for f in "$1"/sys/devices/system/cpu/cpu[0-7]/cpufreq/scaling_setspeed; do echo "$(cat "$f")"; done |
        sort -u | tr '\n' ' '
}
# killed_run TREE: a ptrain-run whose PTRAIN_SYSFS_ROOT is TREE, SIGKILLed once
# its plan set a clock there; sets low (the speeds then) and got (after)
killed_run() {
    local tree=$1 i sp job pids
    PTRAIN_SYSFS_ROOT=$tree srun -J ptkill --mpi=pmix -N1 -n1 --ptrain-mode=auto --ptrain-model=test --ptrain-batch=4 \
        "$RUN" --device cpu --data synthetic --steps 100000 --val-every 0 --energy-plan auto --energy-clock cpufreq \
        >"$SLURM_TEST_DIR/k.out" 2>&1 &
    sp=$!
    i=0
    while [ $i -lt 3000 ] && [ "$(speeds "$tree")" = "2200000 " ] && kill -0 "$sp" 2>/dev/null; do
        sleep 0.1
        i=$((i + 1))
    done
    low=$(speeds "$tree")
    check "ptrain-run under srun with a cpufreq plan changed a clock ($low; $(grep -m1 '^energy: clocks' "$SLURM_TEST_DIR/k.out"))" \
        [ "$low" != "2200000 " ]
    # SIGKILL to the task itself (scancel --signal=KILL on a job is a
    # cancel: SIGTERM first, which the rank handles); its pid from slurmd
    job=$(squeue -h -n ptkill -o %i | head -n 1)
    pids=$(scontrol listpids "$job.0" 2>/dev/null | awk '$4 ~ /^[0-9]+$/ {print $1}')
    check "the task's pid is known (job $job: $(echo $pids))" [ -n "$pids" ]
    for p in $pids; do kill -KILL "$p"; done
    i=0
    while [ $i -lt 600 ] && kill -0 "$sp" 2>/dev/null; do sleep 0.1; i=$((i + 1)); done
    kill "$sp" 2>/dev/null
    wait "$sp" 2>/dev/null
    got=$(speeds "$tree")
}
RUN="$top_builddir/ptrain-run"
if [ ! -x "$RUN" ]; then
    ok "# SKIP ptrain-run not built"
elif ! { [ -e /usr/lib/x86_64-linux-gnu/pmix2 ] || [ -n "$(ls /usr/lib/*/libpmix.so* 2>/dev/null)" ]; }; then
    ok "# SKIP PMIx not installed: srun --mpi=pmix cannot start ptrain-run"
else
    export OMPI_MCA_btl=self,tcp OMPI_MCA_btl_tcp_if_include=lo OMPI_MCA_oob_tcp_if_include=lo
    export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 PTRAIN_HEARTBEAT=0
    killed_run "$cf"
    check "SIGKILL to it: the plugin put the CPUs' scaling_setspeed back at 2200000 kHz when the task exited (was $low, now $got)" \
        [ "$got" = "2200000 " ]
    [ "$got" = "2200000 " ] || diag "$(grep -h 'cpufreq' "$SLURM_TEST_DIR"/log/slurmd-n1.log 2>/dev/null | tail -n 3 | tr '\n' ' ')"
    # the job's own tree: a copy; slurmd's stays as it was, the copy is not written by root
    cp -a "$cf" "$cf.job"
    killed_run "$cf.job"
    check "a tree named in the job's environment only: the plugin writes nothing there (was $low, now $got) and slurmd's is untouched ($(speeds "$cf"))" \
        [ "$got" = "$low" -a "$(speeds "$cf")" = "2200000 " ]
    rm -rf "$cf.job"
fi
done_testing
