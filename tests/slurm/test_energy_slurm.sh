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
# allocated (in a ptrain step).
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
slurm_up 1 4
trap 'slurm_down; rm -rf "$nv"' EXIT

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
done_testing
