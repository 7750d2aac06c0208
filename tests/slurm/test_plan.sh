#!/bin/bash
# SPDX-License-Identifier: MIT
# The planner in the SPANK plugin under a real local Slurm: a
# named mode or a pinned tp is honoured across nodes with a warning naming
# the slower link (never quietly tp=1), --ptrain-model / --ptrain-batch
# reach the plan and every task, --ptrain-explain prints the explanation
# once and ptrain-run trains with the plan it explains, and each task is
# bound mpibind-style (PTRAIN_CPUS = its CPU mask = the cores split among
# the node's tasks).
. "$top_srcdir/tests/lib.sh"
. "$top_srcdir/tests/slurm/slurm_lib.sh"
RUN="$top_builddir/ptrain-run"
slurm_up 2 8
D=$SLURM_TEST_DIR

cat >"$D/penv.sh" <<'SH'
#!/bin/sh
plan=$(printf '%s' "$PTRAIN_PLAN" | tr ' ' '_')
mask=$(sed -n 's/^Cpus_allowed_list:[[:space:]]*//p' /proc/self/status)
echo "TASK node=$SLURMD_NODENAME lid=$SLURM_LOCALID RANK=${RANK-unset} MODE=${PTRAIN_MODE-unset}" \
  "DP=${PTRAIN_DP-unset} TP=${PTRAIN_TP-unset} PP=${PTRAIN_PP-unset} SP=${PTRAIN_SP-unset}" \
  "MODEL=${PTRAIN_MODEL-unset} BATCH=${PTRAIN_BATCH-unset} CPUS=${PTRAIN_CPUS-unset}" \
  "BIND=${PTRAIN_BIND-unset} MASK=$mask CUDA=${CUDA_VISIBLE_DEVICES-unset} PLAN=${plan:-unset}"
SH
chmod +x "$D/penv.sh"

# field FILE KEY: the distinct values of KEY over the task lines
field() { grep '^TASK ' "$1" | tr ' ' '\n' | sed -n "s/^$2=//p" | sort -u | tr '\n' ' '; }
ntasks() { grep -c '^TASK ' "$1"; }

# 1. --ptrain-mode=2d on 2 nodes x 2 tasks: tp=4 spans both nodes (2d needs
# q*q ranks), with one warning naming the network link; never dp=4 tp=1.
srun --ptrain-mode=2d -N2 --ntasks-per-node=2 "$D/penv.sh" >"$D/o1" 2>"$D/e1"; rc=$?
if [ $rc -eq 0 ]; then
    check "2d on 2x2: 4 tasks ran" [ "$(ntasks "$D/o1")" -eq 4 ]
    check "2d on 2x2: every task has mode=2d tp=4 dp=1 ($(field "$D/o1" MODE)/$(field "$D/o1" TP)/$(field "$D/o1" DP))" \
        [ "$(field "$D/o1" MODE)$(field "$D/o1" TP)$(field "$D/o1" DP)" = "2d 4 1 " ]
    check "2d on 2x2: one warning that tp=4 spans the network link" \
        [ "$(grep -c 'warning: tp=4 (2d) spans the network link' "$D/e1")" -eq 1 ]
else
    check "2d on 2x2: refused with a reason naming 2d ($(head -n 1 "$D/e1"))" \
        grep -q -- '--ptrain-mode=2d' "$D/e1"
fi
diag "2d on 2x2: $(grep ptrain "$D/e1" | head -n 2 | tr '\n' ' ')"

# 2. --ptrain-tp=4 on 2x2 (once refused with "valid tp here: 1"):
# honoured, with the warning.
srun --ptrain-mode=auto --ptrain-tp=4 -N2 --ntasks-per-node=2 "$D/penv.sh" >"$D/o2" 2>"$D/e2"
check "--ptrain-tp=4 on 2x2: exits 0" [ $? -eq 0 ]
check "--ptrain-tp=4 on 2x2: every task has tp=4 dp=1 ($(field "$D/o2" TP)/$(field "$D/o2" DP))" \
    [ "$(field "$D/o2" TP)$(field "$D/o2" DP)" = "4 1 " ]
check "--ptrain-tp=4 on 2x2: one warning that tp=4 spans the network link" \
    [ "$(grep -c 'warning: tp=4 (1d) spans the network link' "$D/e2")" -eq 1 ]
diag "tp=4 on 2x2: $(grep ptrain "$D/e2" | head -n 1)"

# 3. --ptrain-mode=3d on 2 nodes x 4 tasks: tp=8 = 2*2*2 across both nodes
# (it once became "mode=3d dp=8 tp=1").
srun --ptrain-mode=3d -N2 --ntasks-per-node=4 "$D/penv.sh" >"$D/o3" 2>"$D/e3"; rc=$?
if [ $rc -eq 0 ]; then
    check "3d on 2x4: every task has mode=3d tp=8 dp=1 ($(field "$D/o3" MODE)/$(field "$D/o3" TP)/$(field "$D/o3" DP))" \
        [ "$(field "$D/o3" MODE)$(field "$D/o3" TP)$(field "$D/o3" DP)" = "3d 8 1 " ]
    check "3d on 2x4: one warning that tp=8 spans the network link" \
        [ "$(grep -c 'warning: tp=8 (3d) spans the network link' "$D/e3")" -eq 1 ]
else
    check "3d on 2x4: refused with a reason naming 3d ($(head -n 1 "$D/e3"))" grep -q -- '--ptrain-mode=3d' "$D/e3"
fi

# 4. --ptrain-model / --ptrain-batch reach every task; the environment too.
srun --ptrain-mode=auto --ptrain-model=small --ptrain-batch=16 -N2 --ntasks-per-node=2 "$D/penv.sh" >"$D/o4" 2>"$D/e4"
check "--ptrain-model=small --ptrain-batch=16: exits 0" [ $? -eq 0 ]
check "every task has PTRAIN_MODEL=small PTRAIN_BATCH=16" [ "$(field "$D/o4" MODEL)$(field "$D/o4" BATCH)" = "small 16 " ]
PTRAIN_MODEL=2,4,64,32,50257 PTRAIN_BATCH=4 srun --ptrain-mode=auto -N2 --ntasks-per-node=2 "$D/penv.sh" >"$D/o5" 2>"$D/e5"
check "PTRAIN_MODEL=2,4,64,32,50257 PTRAIN_BATCH=4 from srun's environment reach every task" \
    [ "$(field "$D/o5" MODEL)$(field "$D/o5" BATCH)" = "2,4,64,32,50257 4 " ]
srun --ptrain-mode=auto -N2 --ntasks-per-node=2 "$D/penv.sh" >"$D/o6" 2>"$D/e6"
check "no --ptrain-model: the plan is for ptrain-run's defaults (PTRAIN_MODEL=tiny PTRAIN_BATCH=8)" \
    [ "$(field "$D/o6" MODEL)$(field "$D/o6" BATCH)" = "tiny 8 " ]
# Jobs the controller knows with an id above $1 (the newest id before a
# refused srun): a count of all jobs is not stable, finished jobs leave
# after MinJobAge=10 s, which under load falls between two counts.
newest_job() { squeue -h -t all -o %i 2>/dev/null | sort -n | tail -1; }
jobs_since() { squeue -h -t all -o %i 2>/dev/null | awk -v b="${1:-0}" '$1 + 0 > b + 0' | wc -l; }
for bad in "--ptrain-model=huge:invalid --ptrain-model 'huge'" "--ptrain-batch=0:--ptrain-batch='0' is invalid"; do
    before=$(newest_job)
    srun --ptrain-mode=auto "${bad%%:*}" -N1 true >/dev/null 2>"$D/eb"; rc=$?
    # all three conditions inside the check (a '&&' after check's command
    # would not reach the TAP line)
    new=$(jobs_since "$before")
    check "${bad%%:*} refused before any allocation (one line: $(grep -m1 ptrain "$D/eb"))" \
        sh -c '[ "$1" -ne 0 ] && [ "$2" -eq 0 ] && grep -qF -- "$3" "$4"' sh "$rc" "$new" "${bad#*:}" "$D/eb"
done

# 5. binding: 2 tasks per node on this 2-core machine get one core each;
# PTRAIN_CPUS is the task's real mask and the golden placement (task k of
# n: cores k*nc/n .. (k+1)*nc/n - 1, hwloc-calc's PU list of them).
expand() { # "0-2,5" -> "0 1 2 5"
    echo "$1" | tr ',' '\n' | awk -F- 'NF { if (NF == 1) print $1; else for (i = $1; i <= $2; i++) print i }' | tr '\n' ' '
}
if command -v hwloc-calc >/dev/null 2>&1; then
    nc=$(hwloc-calc --number-of core machine:0)
    n=2
    bad=0
    while read -r node lid cpus mask; do
        lo=$((lid * nc / n)); hi=$(((lid + 1) * nc / n - 1)); [ $hi -lt $lo ] && hi=$lo
        want=$(hwloc-calc -I pu --physical-output core:$lo-$hi)
        if [ "$(expand "$cpus")" != "$(expand "$want")" ] || [ "$(expand "$mask")" != "$(expand "$want")" ]; then
            bad=$((bad + 1))
            diag "$node task $lid: PTRAIN_CPUS=$cpus mask=$mask, expected $want"
        fi
    done < <(grep '^TASK ' "$D/o6" | sed 's/.*node=\([^ ]*\) lid=\([0-9]*\) .*CPUS=\([^ ]*\) BIND=[^ ]* MASK=\([^ ]*\) .*/\1 \2 \3 \4/')
    check "binding: each of the 4 tasks runs on its golden core set ($nc cores, 2 tasks per node) and PTRAIN_CPUS names it" \
        [ $bad -eq 0 ] && [ "$(ntasks "$D/o6")" -eq 4 ]
    check "binding: PTRAIN_BIND=ptrain in every task" [ "$(field "$D/o6" BIND)" = "ptrain " ]
    check "binding: no GPU here, so no CUDA_VISIBLE_DEVICES" [ "$(field "$D/o6" CUDA)" = "unset " ]
else
    diag "hwloc-calc not installed: golden core sets not checked"
fi
cp "$D/plugstack.conf" "$D/plugstack.conf.orig"
echo "required $PTRAIN_SPANK_SO bind=none" >"$D/plugstack.conf"
srun --ptrain-mode=auto -N2 --ntasks-per-node=2 "$D/penv.sh" >"$D/o7" 2>"$D/e7"
check "bind=none: no PTRAIN_CPUS and every task keeps the whole machine's mask" \
    [ "$(field "$D/o7" CPUS)" = "unset " ] && [ "$(field "$D/o7" MASK)" = "$(sed -n 's/^Cpus_allowed_list:[[:space:]]*//p' /proc/self/status) " ]
# ptrain.conf's planner keys: a bad value refuses ptrain steps with one line
printf 'inter_node_gbps = -1;\n' >"$D/badrate.conf"
echo "required $PTRAIN_SPANK_SO config=$D/badrate.conf" >"$D/plugstack.conf"
srun --ptrain-mode=auto -N2 --ntasks-per-node=2 "$D/penv.sh" >"$D/o8" 2>"$D/e8"; rc=$?
check "ptrain.conf inter_node_gbps = -1: a ptrain step is refused naming the file and the key" \
    [ $rc -ne 0 ] && grep -q 'badrate.conf:1: inter_node_gbps = -1 is out of range' "$D/e8"
# a cached node model that cannot be read: planned from hwloc, with a warning
printf 'topology = "%s/missing.json";\n' "$D" >"$D/topo.conf"
echo "required $PTRAIN_SPANK_SO config=$D/topo.conf" >"$D/plugstack.conf"
srun --ptrain-mode=auto -N2 --ntasks-per-node=2 "$D/penv.sh" >"$D/o9" 2>"$D/e9"
check "topology = missing file: the step runs, planned from hwloc, one warning naming the file" \
    [ $? -eq 0 ] && [ "$(ntasks "$D/o9")" -eq 4 ] && [ "$(grep -c 'cannot load the node model topology=.*missing.json' "$D/e9")" -eq 1 ]
# a cached node model with GPUs and an HCA (the 4-GPU PCIe fixture), read by
# both nodes: each task gets its GPU and the HCA nearest it, both nodes plan
# the same, and the explanation names the cached model
printf 'topology = "%s";\n' "$top_srcdir/tests/topo/gpu4-pcie.xml" >"$D/gpu.conf"
echo "required $PTRAIN_SPANK_SO config=$D/gpu.conf" >"$D/plugstack.conf"
env -u PTRAIN_DEVICE srun --ptrain-mode=auto --ptrain-explain -N2 --ntasks-per-node=2 \
    sh -c 'echo "GPU node=$SLURMD_NODENAME lid=$SLURM_LOCALID cuda=${CUDA_VISIBLE_DEVICES-unset} order=${CUDA_DEVICE_ORDER-unset} hca=${NCCL_IB_HCA-unset} ucx=${UCX_NET_DEVICES-unset} device=${PTRAIN_DEVICE-unset} plan=$(echo $PTRAIN_PLAN | tr " " _)"' \
    >"$D/o10" 2>"$D/e10"
check "cached 4-GPU model: the step runs (4 tasks)" [ $? -eq 0 ] && [ "$(grep -c '^GPU ' "$D/o10")" -eq 4 ]
check "cached 4-GPU model: local task i gets CUDA_VISIBLE_DEVICES=i in PCI bus order" \
    [ "$(grep '^GPU ' "$D/o10" | awk '{ split($3, a, "="); split($4, b, "="); if (a[2] != b[2]) bad++ } END { print bad + 0 }')" = 0 ] &&
    [ "$(grep -c 'order=PCI_BUS_ID' "$D/o10")" -eq 4 ]
check "cached 4-GPU model: NCCL_IB_HCA=mlx5_0 UCX_NET_DEVICES=mlx5_0:1 (its only HCA)" \
    [ "$(grep -c 'hca=mlx5_0 ucx=mlx5_0:1 ' "$D/o10")" -eq 4 ]
check "cached 4-GPU model: the plugin bound a GPU, so PTRAIN_DEVICE=cuda in every task (ptrain-run --device)" \
    [ "$(grep -c ' device=cuda ' "$D/o10")" -eq 4 ]
PTRAIN_DEVICE=cpu srun --ptrain-mode=auto -N1 --ntasks-per-node=2 sh -c 'echo "GPU device=$PTRAIN_DEVICE"' >"$D/o12" 2>&1
check "a PTRAIN_DEVICE the user set is left alone" [ "$(grep -c '^GPU device=cpu$' "$D/o12")" -eq 2 ]
check "cached 4-GPU model: both nodes computed the same plan" [ "$(grep '^GPU ' "$D/o10" | sed 's/.*plan=//' | sort -u | wc -l)" -eq 1 ]
check "cached 4-GPU model: the explanation names the cached model, once" \
    [ "$(grep -c "node model: cached model .*gpu4-pcie.xml" "$D/e10")" -eq 1 ]
CUDA_VISIBLE_DEVICES=3 env -u PTRAIN_DEVICE srun --ptrain-mode=auto -N1 --ntasks-per-node=2 \
    sh -c 'echo "GPU cuda=$CUDA_VISIBLE_DEVICES device=${PTRAIN_DEVICE-unset}"' >"$D/o11" 2>&1
check "a CUDA_VISIBLE_DEVICES the user set is left alone, and no PTRAIN_DEVICE is set (the plugin bound nothing)" \
    [ "$(grep -c '^GPU cuda=3 device=unset$' "$D/o11")" -eq 2 ]
# mixed nodes (node_models): n1 an 8-GPU NVSwitch node, n2 a 4-GPU PCIe
# node; the plan adapts (the explanation names the limiting node), and
# mixed_nodes = "refuse" refuses the step in one line naming the kinds
printf 'node_models = ["n1=%s", "n2=%s"];\n' "$top_srcdir/tests/topo/dgx8-nvswitch.xml" \
    "$top_srcdir/tests/topo/gpu4-pcie.xml" >"$D/mixed.conf"
echo "required $PTRAIN_SPANK_SO config=$D/mixed.conf" >"$D/plugstack.conf"
srun --ptrain-mode=auto --ptrain-explain -N2 --ntasks-per-node=2 "$D/penv.sh" >"$D/o12" 2>"$D/e12"; rc=$?
check "node_models n1, n2 of two kinds: the step runs (4 tasks), both nodes plan the same" \
    [ $rc -eq 0 ] && [ "$(ntasks "$D/o12")" -eq 4 ] && [ "$(field "$D/o12" PLAN | wc -w)" -eq 1 ]
check "mixed nodes: the explanation names the limiting node, once" \
    [ "$(grep -c 'limiting node: .*for compute' "$D/e12")" -eq 1 ]
printf 'node_models = ["n1=%s", "n2=%s"];\nmixed_nodes = "refuse";\n' "$top_srcdir/tests/topo/dgx8-nvswitch.xml" \
    "$top_srcdir/tests/topo/gpu4-pcie.xml" >"$D/mixed.conf"
srun --ptrain-mode=auto -N2 --ntasks-per-node=2 "$D/penv.sh" >"$D/o13" 2>"$D/e13"; rc=$?
check "mixed_nodes = refuse: the step is refused naming both kinds ($(grep -m1 'mixed_nodes' "$D/e13" | cut -c1-120))" \
    [ $rc -ne 0 ] && [ "$(ntasks "$D/o13")" -eq 0 ] && grep -q "the step's nodes are of 2 kinds.*mixed_nodes=refuse" "$D/e13"
srun --ptrain-mode=auto -N1 --ntasks-per-node=2 "$D/penv.sh" >"$D/o14" 2>"$D/e14"; rc=$?
check "mixed_nodes = refuse: a step on one kind runs" [ $rc -eq 0 ] && [ "$(ntasks "$D/o14")" -eq 2 ]
cp "$D/plugstack.conf.orig" "$D/plugstack.conf"

# 6. --ptrain-explain: the explanation once, from one task, and ptrain-run
# trains with the plan it explains.
if [ -x "$RUN" ]; then
    slurm_mpi
    srun_run "$D/t.out" "$D/t.err" srun --mpi=pmix --ptrain-mode=auto --ptrain-explain --ptrain-verbose \
        --ptrain-model=tiny -N2 --ntasks-per-node=2 "$RUN" --data synthetic --steps 2
    rc=$SRUN_RC
    check "srun --ptrain-mode=auto --ptrain-explain --ptrain-model=tiny ptrain-run: exit 0" [ $rc -eq 0 ]
    check "the explanation is printed once (one 'ptrain: plan for model tiny' header)" \
        [ "$(grep -c 'ptrain: plan for model tiny, global batch 8, on 2 nodes' "$D/t.err")" -eq 1 ]
    lines=$(sed -n '/ptrain: plan for model tiny/,$p' "$D/t.err" | grep -v '^\(step\|val\|plan\|done\)' | wc -l)
    check "the explanation has the runners-up and the why line ($lines lines)" [ "$lines" -ge 3 ]
    announced=$(sed -n 's/.*ptrain: plan \(mode=[^(]*\) (nodes=.*/\1/p' "$D/t.err" | sed 's/ *$//')
    trained=$(sed -n 's/^plan: \(mode=.*\) (source: .*/\1/p' "$D/t.out" | sed 's/ *$//')
    check "ptrain-run trains with the plugin's plan ('$trained' = '$announced')" \
        [ -n "$announced" ] && [ "$announced" = "$trained" ]
    check "ptrain-run: 2 steps and done" [ "$(grep -c '^step ' "$D/t.out")" -eq 2 ] && grep -q '^done:' "$D/t.out"
    check "ptrain-run used the model the plan was made for (tiny)" grep -q '^model: tiny ' "$D/t.out"
    sed -n '/ptrain: plan for model/,$p' "$D/t.err" | head -n 20 | while IFS= read -r l; do diag "$l"; done
    [ $rc -eq 0 ] || diag "stderr: $(tail -n 5 "$D/t.err" | tr '\n' ' ')"
    # ptrain-run --mode auto without the plugin's plan (--ptrain-mode=off)
    # plans on the same nodes exactly what the plugin planned: one handle,
    # one loader (this node's hwloc model for both), one request builder
    srun_run "$D/u.out" "$D/u.err" env SLURM_PMIX_FENCE=ring srun --mpi=pmix --ptrain-mode=off -N2 --ntasks-per-node=2 "$RUN" --mode auto \
        --model tiny --batch 8 --data synthetic --dry-run
    own=$(sed -n 's/^rank 0\/4 .* plan=//p' "$D/u.out" | sed 's/ *$//')
    check "ptrain-run --mode auto under srun without the plugin plans what the plugin planned ('$own' = '$announced')" \
        [ -n "$own" ] && [ "$own" = "$announced" ]
    # a plan made for another model or batch than ptrain-run trains is
    # refused at start-up, in one line naming both
    srun_run "$D/w.out" "$D/w.err" srun --mpi=pmix --ptrain-mode=auto --ptrain-model=tiny -N2 --ntasks-per-node=2 \
        "$RUN" --data synthetic --steps 2 --model test
    rc=$SRUN_RC
    check "the plugin planned tiny, ptrain-run --model test: refused at start-up ($(grep -m1 'ptrain-run: error' "$D/w.err" | cut -c1-100))" \
        [ $rc -ne 0 ] && [ "$(grep -c 'ptrain-run: error: the plan (PTRAIN_PLAN, from the SPANK plugin) was made for model L=4 H=4 C=128' "$D/w.err")" -eq 1 ]
else
    diag "ptrain-run not built: the training check is skipped"
fi
# 7. a task Slurm bound already keeps Slurm's mask (task/affinity binds
# before the plugin's task_init): map_cpu:1,0 is the opposite of the
# plugin's own placement, so a kept mask is visible.
if [ "$(env -u OMP_NUM_THREADS -u OMP_THREAD_LIMIT nproc)" -ge 2 ]; then
    slurm_down
    LOCAL_SLURM_EXTRA_CONF="TaskPlugin=task/affinity" slurm_up 2 2
    D=$SLURM_TEST_DIR
    srun --ptrain-mode=auto --cpu-bind=map_cpu:1,0 -N2 --ntasks-per-node=2 \
        sh -c 'echo "AFF lid=$SLURM_LOCALID cpus=$PTRAIN_CPUS bind=$PTRAIN_BIND mask=$(sed -n "s/^Cpus_allowed_list:[[:space:]]*//p" /proc/self/status)"' \
        >"$D/a1" 2>"$D/ae1"
    check "task/affinity --cpu-bind=map_cpu:1,0: every task keeps Slurm's CPU (task 0 on 1, task 1 on 0), PTRAIN_BIND=slurm" \
        [ "$(grep -c -e '^AFF lid=0 cpus=1 bind=slurm mask=1$' -e '^AFF lid=1 cpus=0 bind=slurm mask=0$' "$D/a1")" -eq 4 ]
    [ "$(grep -c '^AFF' "$D/a1")" -eq 4 ] || diag "affinity: $(cat "$D/a1" "$D/ae1" | head -n 4 | tr '\n' ' ')"
else
    diag "fewer than 2 CPUs: Slurm's own binding not checked"
fi
done_testing
