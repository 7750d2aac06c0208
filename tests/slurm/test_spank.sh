#!/bin/bash
# SPDX-License-Identifier: MIT
# The ptrain SPANK plugin under a real local Slurm with 2 fake nodes
# (scripts/local-slurm.sh): options in srun/sbatch, the per-task plan
# environment, refusals before allocation, admin arguments.
. "$top_srcdir/tests/lib.sh"
. "$top_srcdir/tests/slurm/slurm_lib.sh"
# The planner's rates that depend on this machine (the GEMM estimate scales
# with its cores) are pinned, so the plans of named modes below are the same
# on every machine the test runs on.
export PTRAIN_SPANK_ARGS="gemm_gflops=32 inter_node_gbps=10 inter_node_lat_us=5"
slurm_up 2 8
D=$SLURM_TEST_DIR

# One line per task: Slurm's view (node, local id, job, step) and ours.
cat >"$D/penv.sh" <<'SH'
#!/bin/sh
plan=$(printf '%s' "$PTRAIN_PLAN" | tr ' ' '_')
echo "TASK node=$SLURMD_NODENAME lid=$SLURM_LOCALID job=$SLURM_JOB_ID step=$SLURM_STEP_ID" \
  "RANK=${RANK-unset} WORLD_SIZE=${WORLD_SIZE-unset} LOCAL_RANK=${LOCAL_RANK-unset}" \
  "LOCAL_WORLD_SIZE=${LOCAL_WORLD_SIZE-unset} MASTER_ADDR=${MASTER_ADDR-unset}" \
  "MASTER_PORT=${MASTER_PORT-unset} MODE=${PTRAIN_MODE-unset} DP=${PTRAIN_DP-unset}" \
  "PP=${PTRAIN_PP-unset} TP=${PTRAIN_TP-unset} TPD=${PTRAIN_TP_DEPTH-unset} SP=${PTRAIN_SP-unset}" \
  "ZERO=${PTRAIN_ZERO-unset} MB=${PTRAIN_MICROBATCHES-unset} RC=${PTRAIN_RECOMPUTE-unset}" \
  "CKPT=${PTRAIN_CKPT_ACT-unset}" \
  "OFFLOAD=${PTRAIN_OFFLOAD-unset} ORDER=${PTRAIN_RANK_ORDER-unset} PLAN=${plan:-unset}" \
  "SCHED=${PTRAIN_SCHEDULE-unset} VS=${PTRAIN_VIRTUAL_STAGES-unset} SPLIT=${PTRAIN_PP_SPLIT-unset}" \
  "NVARS=$(env | grep -c -E '^(PTRAIN_(MODE|DP|PP|TP|TP_DEPTH|SP|ZERO|MICROBATCHES|RECOMPUTE|CKPT_ACT|RANK_ORDER|PLAN)|RANK|WORLD_SIZE|LOCAL_RANK|LOCAL_WORLD_SIZE|MASTER_ADDR|MASTER_PORT)=')"
SH
chmod +x "$D/penv.sh"

# check_plan FILE WORLD DP TP FIRST_NODE WHAT [MODE TP_DEPTH SP]: every
# property of the injected plan (MODE 1d, TP_DEPTH 1, SP 1 by default).
# FIRST_NODE "step": the node a one-node step ran on (srun -N1 takes
# whichever node is free: n2 while n1 still completes the previous job,
# which made a fixed n1 fail at random).
# DP "auto": the planner's choice (a search over the cost model, whose
# figures depend on the machine), so instead of fixed sizes every task must
# carry one concrete plan whose PTRAIN_* variables agree with its
# PTRAIN_PLAN summary and multiply to WORLD_SIZE.
check_plan() {
    local f=$1 w=$2 dp=$3 tp=$4 first=$5 what=$6 mode=${7:-1d} tpd=${8:-1} sp=${9:-1}
    local res
    res=$(grep '^TASK ' "$f" | awk -v W="$w" -v DP="$dp" -v TP="$tp" -v FIRST="$first" \
          -v MODE="$mode" -v TPD="$tpd" -v SP="$sp" '
      { for (i = 2; i <= NF; i++) { split($i, kv, "="); v[NR, kv[1]] = substr($i, length(kv[1]) + 2) }
        n++; node[n] = v[NR, "node"]; pernode[v[NR, "node"]]++ }
      END {
        if (FIRST == "step") { FIRST = node[1]; for (t = 2; t <= n; t++) if (node[t] != FIRST) FIRST = "(several nodes)" }
        AUTO = (DP == "auto")
        if (AUTO) {   # the sizes of the plan every task was given
          pl = v[1, "PLAN"]; gsub(/_tp_depth=/, "_tpdepth=", pl); np = split(pl, kvs, "_")
          for (i = 1; i <= np; i++) { split(kvs[i], kv, "="); p[kv[1]] = kv[2] }
          MODE = p["mode"]; DP = p["dp"]; TP = p["tp"]; SP = p["sp"]; PPV = p["pp"]; ZV = p["zero"]; OV = p["order"]
          TPD = v[1, "TPD"]
        } else { PPV = 1; ZV = 0; OV = "DPT" }
        ok_count = (n == W)
        perm = 1; agree = 1; env = 1; local = 1; groups = 1; master = 1; port = 1
        for (t = 1; t <= n; t++) {
          r = v[t, "RANK"]
          if (r !~ /^[0-9]+$/ || r + 0 >= W || seen[r]++) perm = 0
          if (v[t, "WORLD_SIZE"] != W || v[t, "MODE"] != MODE || v[t, "DP"] != DP ||
              v[t, "TP"] != TP || v[t, "PP"] != PPV || v[t, "SP"] != SP || v[t, "TPD"] != TPD ||
              v[t, "ZERO"] != ZV || v[t, "OFFLOAD"] != "unset" || v[t, "ORDER"] != OV) env = 0
          if (!AUTO && (v[t, "MB"] != 1 || v[t, "RC"] != "none")) env = 0
          if (v[t, "CKPT"] != "unset") env = 0   # the old name of PTRAIN_RECOMPUTE is not injected
          if (MODE !~ /^(1d|2d|2\.5d|3d)$/) env = 0
          if (v[t, "PLAN"] != v[1, "PLAN"] || v[t, "MASTER_PORT"] != v[1, "MASTER_PORT"]) agree = 0
          if (index(v[t, "PLAN"], "mode=" MODE "_dp=" DP "_tp=" TP "_pp=" PPV "_sp=" SP "_") != 1) agree = 0
          if (v[t, "LOCAL_RANK"] != v[t, "lid"] || v[t, "LOCAL_WORLD_SIZE"] != pernode[node[t]]) local = 0
          g = int(r / (TP * SP))   # DPT order, pp = 1: tensor x sequence block of rank r
          if (pernode[node[t]] % (TP * SP) == 0 && PPV == 1 && OV == "DPT") {
            if (g in gnode && gnode[g] != node[t]) groups = 0
            gnode[g] = node[t]
          }
          if (v[t, "MASTER_ADDR"] != FIRST) master = 0
          want = 29500 + (v[t, "job"] * 64 + v[t, "step"] % 64) % 1000
          if (v[t, "MASTER_PORT"] != want) port = 0
        }
        printf "%d one task line per rank (%d of %d)\n", ok_count, n, W
        printf "%d RANK values are a permutation of 0..%d\n", perm && ok_count, W - 1
        printf "%d PTRAIN_* values: %smode=%s dp=%d tp=%d tp_depth=%d sp=%d pp=%d zero=%d order=%s, WORLD_SIZE=%d\n", env, AUTO ? "as PTRAIN_PLAN says, " : "", MODE, DP, TP, TPD, SP, PPV, ZV, OV, W
        printf "%d dp*pp*tp*sp == WORLD_SIZE\n", (DP * TP * SP * PPV == W)
        printf "%d all tasks agree on PTRAIN_PLAN and MASTER_PORT\n", agree
        printf "%d LOCAL_RANK = Slurm local id, LOCAL_WORLD_SIZE = tasks on the node\n", local
        printf "%d every tensor/sequence-parallel group that fits in a node sits on one node\n", groups
        printf "%d MASTER_ADDR is the first node (%s)\n", master, FIRST
        printf "%d MASTER_PORT = 29500 + (job*64 + step%%64) %% 1000\n", port
      }')
    local bad=0
    while read -r pass text; do
        if [ "$pass" = 1 ]; then ok "$what: $text"; else not_ok "$what: $text"; bad=1; fi
    done <<<"$res"
    [ $bad = 0 ] || diag "$what: first task: $(grep -m1 '^TASK ' "$f")"
}

# check_sp FILE W SP WHAT: every one of W tasks got the pinned sp (the
# search chooses the tensor layout and tp around it, so check_plan's sizes
# are "auto" there).
check_sp() {
    check "$4: every task plans sp=$3 ($(grep -m1 -o 'PLAN=[^ ]*' "$1"))" \
        [ "$(grep '^TASK ' "$1" | grep -w "SP=$3" | grep -c "_sp=$3_")" -eq "$2" ]
}

# 1. auto on 2 nodes x 2 tasks, with the verbose plan line: the planner's
# choice (a search over the cost model, not the fixed "1d tp
# inside a node" rule), the same on every task and the one announced.
srun --ptrain-mode=auto --ptrain-verbose -N2 --ntasks-per-node=2 "$D/penv.sh" >"$D/o1" 2>"$D/e1"
check "srun --ptrain-mode=auto -N2 --ntasks-per-node=2 exits 0" [ $? -eq 0 ]
check_plan "$D/o1" 4 auto 0 n1 "2x2"
announced=$(sed -n 's/.*ptrain: plan \(mode=[^(]*\) (nodes=.*/\1/p' "$D/e1" | sed 's/ *$//' | tr ' ' '_')
check "--ptrain-verbose prints the plan once (rank 0's task), the one every task got ($announced)" \
    [ "$(grep -c 'ptrain: plan mode=' "$D/e1")" -eq 1 ] && [ -n "$announced" ] &&
    grep -q "PLAN=$announced " "$D/o1"

# 2. non-uniform tasks per node (2 + 1).
srun --ptrain-mode=auto -N2 -n3 "$D/penv.sh" >"$D/o2" 2>"$D/e2"
check "srun -N2 -n3 exits 0" [ $? -eq 0 ]
check_plan "$D/o2" 3 auto 0 n1 "2+1 tasks"

# 3. --ptrain-tp pins tp; 1d same as auto here.
srun --ptrain-mode=1d --ptrain-tp=1 -N2 --ntasks-per-node=2 "$D/penv.sh" >"$D/o3" 2>"$D/e3"
check "srun --ptrain-mode=1d --ptrain-tp=1 exits 0" [ $? -eq 0 ]
check_plan "$D/o3" 4 4 1 n1 "pinned tp=1"

# 4. off, and the default (admin default_mode off): nothing injected.
srun --ptrain-mode=off -N2 --ntasks-per-node=2 "$D/penv.sh" >"$D/o4" 2>&1
check "--ptrain-mode=off: 4 tasks ran" [ "$(grep -c '^TASK ' "$D/o4")" -eq 4 ]
check "--ptrain-mode=off: no PTRAIN_* / RANK / MASTER_* variable in any task" \
    [ "$(grep '^TASK ' "$D/o4" | grep -vc 'NVARS=0$')" -eq 0 ]
srun -N2 --ntasks-per-node=2 "$D/penv.sh" >"$D/o5" 2>&1
check "no option, default_mode off: nothing injected" \
    [ "$(grep -c 'NVARS=0$' "$D/o5")" -eq 4 ]

# 5. the environment as default: PTRAIN_MODE=auto, and the option wins over it.
PTRAIN_MODE=auto srun -N2 --ntasks-per-node=2 "$D/penv.sh" >"$D/o6" 2>&1
check_plan "$D/o6" 4 auto 0 n1 "PTRAIN_MODE=auto from the environment"
PTRAIN_MODE=auto srun --ptrain-mode=off -N2 --ntasks-per-node=2 "$D/penv.sh" >"$D/o7" 2>&1
check "--ptrain-mode=off beats PTRAIN_MODE=auto (no plan injected)" \
    [ "$(grep -c 'RANK=unset .*DP=unset .*PLAN=unset' "$D/o7")" -eq 4 ]

# 6. refusals: before any allocation, with the plugin's own message.
# refused [--after-allocation] DESCRIPTION EXPECTED_TEXT SRUN_ARGS...
# Errors that need the step's geometry (--ptrain-tp) are found by srun
# after the allocation, and values that only slurmstepd sees (--export)
# on the node; both still stop every task.
# Jobs the controller knows with an id above $1 (the newest id before a
# refused srun): a count of all jobs is not stable, finished jobs leave
# after MinJobAge=10 s, which under load falls between two counts.
newest_job() { squeue -h -t all -o %i 2>/dev/null | sort -n | tail -1; }
jobs_since() { squeue -h -t all -o %i 2>/dev/null | awk -v b="${1:-0}" '$1 + 0 > b + 0' | wc -l; }
refused() {
    local alloc_ok=0
    [ "$1" = --after-allocation ] && { alloc_ok=1; shift; }
    local what=$1 text=$2; shift 2
    local before after rc
    before=$(newest_job)
    srun "$@" -N2 --ntasks-per-node=2 "$D/penv.sh" >"$D/or" 2>"$D/er"; rc=$?
    after=$(jobs_since "$before")
    check "$what: srun fails" [ $rc -ne 0 ]
    check "$what: message '$text'" grep -qF -- "$text" "$D/er"
    check "$what: no task ran" [ "$(grep -c '^TASK ' "$D/or")" -eq 0 ]
    [ $alloc_ok = 1 ] || check "$what: no job was allocated" [ "$after" -eq 0 ]
    grep -q . "$D/er" && diag "$(head -n 2 "$D/er" | tr '\n' ' ')"
}
refused "--ptrain-mode=bogus" "invalid mode 'bogus' (valid: off, auto, 1d, 2d, 2.5d, 3d)" --ptrain-mode=bogus
refused --after-allocation "--ptrain-tp=3 on 4 tasks" \
    "--ptrain-tp=3 does not divide the 4 tasks of the step (valid tp here: 1, 2, 4)" \
    --ptrain-mode=auto --ptrain-tp=3
refused "--ptrain-tp=0" "--ptrain-tp='0' is invalid" --ptrain-mode=auto --ptrain-tp=0
# a PTRAIN_* value longer than the plugin reads (it was once
# taken as unset, here the model: the plan was made for another model)
long_model=$(printf '2,4,64,32,%0300d' 1)
PTRAIN_MODEL=$long_model refused "PTRAIN_MODEL of 310 bytes" \
    "PTRAIN_MODEL in the job environment is longer than 255 bytes" --ptrain-mode=auto
refused "--ptrain-mode=2d --ptrain-tp=2" "--ptrain-tp=2 is not q*q for --ptrain-mode=2d (valid tp of that shape: 1, 4, 9, 16, 25, 36, ...)" \
    --ptrain-mode=2d --ptrain-tp=2
# a tensor group may span nodes: 2d tp=4 on 2 tasks per node
# is honoured with a warning naming the slower link (tests/slurm/test_plan.sh
# checks the warning); 3d tp=8 still cannot fit 4 tasks
srun --ptrain-mode=2d --ptrain-tp=4 -N2 --ntasks-per-node=2 "$D/penv.sh" >"$D/g0" 2>"$D/ge0"
check "--ptrain-mode=2d --ptrain-tp=4 on 2 tasks per node: exits 0, with a warning naming the network link" \
    [ $? -eq 0 ] && grep -q 'warning: tp=4 (2d) spans the network link' "$D/ge0"
check_plan "$D/g0" 4 1 4 n1 "2d tp=4 across 2 nodes" 2d 1 1
refused --after-allocation "--ptrain-mode=3d --ptrain-tp=8 on 4 tasks" \
    "--ptrain-tp=8 does not divide the 4 tasks of the step (valid tp here: 1, 2, 4)" \
    --ptrain-mode=3d --ptrain-tp=8
refused --after-allocation "--ptrain-mode=3d on 4 tasks (no l*l*l > 1 fits)" \
    "--ptrain-mode=3d" --ptrain-mode=3d
refused "--ptrain-tp-depth=2 with --ptrain-mode=2d" \
    "--ptrain-tp-depth=2 is for --ptrain-mode=2.5d, but the mode is 2d (valid: --ptrain-mode=2.5d, or no --ptrain-tp-depth)" \
    --ptrain-mode=2d --ptrain-tp-depth=2
refused "--ptrain-tp-depth=0" "--ptrain-tp-depth='0' is invalid" --ptrain-mode=2.5d --ptrain-tp-depth=0
refused --after-allocation "--ptrain-sp=3 on 4 tasks" \
    "--ptrain-sp=3 does not divide the 4 tasks of the step (valid sp here: 1, 2, 4)" \
    --ptrain-mode=auto --ptrain-sp=3
refused "--ptrain-sp=x" "--ptrain-sp='x' is invalid" --ptrain-mode=auto --ptrain-sp=x
# pipeline / ZeRO / recompute: injected into every task
# (the plan is made for --ptrain-model=test, 2 blocks, which the split 1,1 covers)
srun --ptrain-mode=auto --ptrain-pp=2 --ptrain-zero=1 --ptrain-microbatches=4 --ptrain-schedule=gpipe \
    --ptrain-recompute=block --ptrain-pp-split=1,1 --ptrain-model=test -N2 --ntasks-per-node=2 "$D/penv.sh" >"$D/p1" 2>"$D/pe1"
check "srun --ptrain-pp=2 --ptrain-zero=1 ... exits 0" [ $? -eq 0 ]
check "every task gets PTRAIN_PP=2 ZERO=1 MICROBATCHES=4 SCHEDULE=gpipe RECOMPUTE=block PP_SPLIT=1,1 DP=2 TP=1" \
    [ "$(grep '^TASK ' "$D/p1" | grep -w PP=2 | grep -w ZERO=1 | grep -w MB=4 | grep -w SCHED=gpipe | \
        grep -w RC=block | grep -w SPLIT=1,1 | grep -w DP=2 | grep -w TP=1 | grep -wc VS=1)" -eq 4 ]
check "PTRAIN_PLAN names pp=2, zero=1 and the pipeline settings" \
    grep -q 'PLAN=mode=1d_dp=2_tp=1_pp=2_sp=1_zero=1_order=DPT_microbatches=4_schedule=gpipe_split=1,1_recompute=block' "$D/p1"
# PTRAIN_CKPT_ACT, the old name of PTRAIN_RECOMPUTE: read as the request
# (an option wins over it), never left in a task beside the plan's
# PTRAIN_RECOMPUTE; both naming two modes are refused before allocation
PTRAIN_CKPT_ACT=attention srun --ptrain-mode=auto --ptrain-model=test -N1 --ntasks-per-node=2 "$D/penv.sh" \
    >"$D/p3" 2>"$D/pe3"
check "PTRAIN_CKPT_ACT=attention in srun's environment: every task gets PTRAIN_RECOMPUTE=attention, no CKPT_ACT" \
    [ "$(grep '^TASK ' "$D/p3" | grep -w RC=attention | grep -wc CKPT=unset)" -eq 2 ]
PTRAIN_CKPT_ACT=attention srun --ptrain-mode=auto --ptrain-recompute=block --ptrain-model=test -N1 --ntasks-per-node=2 \
    "$D/penv.sh" >"$D/p4" 2>"$D/pe4"
check "--ptrain-recompute=block over PTRAIN_CKPT_ACT=attention: every task gets PTRAIN_RECOMPUTE=block, no CKPT_ACT" \
    [ "$(grep '^TASK ' "$D/p4" | grep -w RC=block | grep -wc CKPT=unset)" -eq 2 ]
PTRAIN_RECOMPUTE=block PTRAIN_CKPT_ACT=attention refused "PTRAIN_RECOMPUTE=block with PTRAIN_CKPT_ACT=attention" \
    "PTRAIN_RECOMPUTE=block and PTRAIN_CKPT_ACT=attention differ" --ptrain-mode=auto
PTRAIN_PP=2 PTRAIN_SCHEDULE=interleaved PTRAIN_VIRTUAL_STAGES=2 PTRAIN_MICROBATCHES=2 \
    srun --ptrain-mode=auto -N2 --ntasks-per-node=2 "$D/penv.sh" >"$D/p2" 2>"$D/pe2"
[ "$(grep -c '^TASK ' "$D/p2")" -eq 4 ] || diag "interleaved: $(head -n 2 "$D/pe2" | tr '\n' ' ')"
check "PTRAIN_PP=2 PTRAIN_SCHEDULE=interleaved PTRAIN_VIRTUAL_STAGES=2 in srun's environment reach every task" \
    [ "$(grep '^TASK ' "$D/p2" | grep -w PP=2 | grep -w SCHED=interleaved | grep -wc VS=2)" -eq 4 ]
refused --after-allocation "--ptrain-pp=3 on 4 tasks" \
    "--ptrain-pp=3 does not divide the 4 tasks of the step (valid pp here: 1, 2, 4)" \
    --ptrain-mode=auto --ptrain-pp=3
refused --after-allocation "--ptrain-zero=1 with --ptrain-pp=4 on 4 tasks (dp=1)" \
    "zero=1 with dp=1 sp=1: ZeRO shards the optimizer state over the data-parallel ranks and this plan has one, so there is nothing to shard" \
    --ptrain-mode=auto --ptrain-pp=4 --ptrain-zero=1
refused "--ptrain-zero=4" "--ptrain-zero='4' is invalid (valid ZeRO stages: 0, 1, 2, 3)" --ptrain-mode=auto --ptrain-zero=4
refused "--ptrain-schedule=interleaved without virtual stages" \
    "schedule=interleaved with virtual_stages=1: interleaving needs at least 2 model chunks per rank" \
    --ptrain-mode=auto --ptrain-pp=2 --ptrain-schedule=interleaved
refused "--ptrain-virtual-stages=2 with 1f1b" "virtual_stages=2 with schedule=1f1b" \
    --ptrain-mode=auto --ptrain-pp=2 --ptrain-virtual-stages=2
refused "--ptrain-pp-split with 3 entries for pp=2" "pp_split 1,1,1 has 3 entries, but pp=2 x virtual_stages=1 makes 2 stages" \
    --ptrain-mode=auto --ptrain-pp=2 --ptrain-pp-split=1,1,1
refused "--ptrain-recompute=full" "invalid --ptrain-recompute 'full' (valid: none, block, attention" \
    --ptrain-mode=auto --ptrain-recompute=full
refused --after-allocation "PTRAIN_SP=3 exported to the tasks only" "--ptrain-sp=3 does not divide the 4 tasks of the step" \
    --ptrain-mode=auto --export=ALL,PTRAIN_SP=3
PTRAIN_MODE=1d PTRAIN_TP_DEPTH=2 srun -N1 true 2>"$D/er8"; rc=$?
check "PTRAIN_MODE=1d PTRAIN_TP_DEPTH=2 in srun's environment is refused" [ $rc -ne 0 ] &&
    grep -q -- "--ptrain-tp-depth=2 is for --ptrain-mode=2.5d, but the mode is 1d" "$D/er8"

# 6b. 2d, 2.5d, 3d and sequence parallelism reach every task.
srun --ptrain-mode=2d -N2 --ntasks-per-node=4 "$D/penv.sh" >"$D/g1" 2>"$D/ge1"
check "srun --ptrain-mode=2d -N2 --ntasks-per-node=4 exits 0" [ $? -eq 0 ]
check_plan "$D/g1" 8 2 4 n1 "2d on 2x4" 2d 1 1
srun --ptrain-mode=2.5d -N1 --ntasks-per-node=8 "$D/penv.sh" >"$D/g2" 2>"$D/ge2"
check "srun --ptrain-mode=2.5d -N1 --ntasks-per-node=8 exits 0" [ $? -eq 0 ]
check_plan "$D/g2" 8 auto 0 step "2.5d on 1x8"
check "2.5d on 1x8: the planner's 2.5d plan, never tp=1 ($(grep -m1 -o 'PLAN=[^ ]*' "$D/g2"))" \
    [ "$(grep '^TASK ' "$D/g2" | grep -w MODE=2.5d | grep -vc -w TP=1)" -eq 8 ]
srun --ptrain-mode=2.5d --ptrain-tp-depth=2 -N2 --ntasks-per-node=4 "$D/penv.sh" >"$D/g3" 2>"$D/ge3"
check "srun --ptrain-mode=2.5d --ptrain-tp-depth=2 -N2 --ntasks-per-node=4 exits 0" [ $? -eq 0 ]
check_plan "$D/g3" 8 1 8 n1 "2.5d depth 2 on 2x4 (tp=8: each depth slice's 2x2 grid inside a node, only the depth sum of the weights' gradients across the network)" 2.5d 2 1
srun --ptrain-mode=3d -N2 --ntasks-per-node=8 "$D/penv.sh" >"$D/g4" 2>"$D/ge4"
check "srun --ptrain-mode=3d -N2 --ntasks-per-node=8 exits 0" [ $? -eq 0 ]
check_plan "$D/g4" 16 2 8 n1 "3d on 2x8" 3d 1 1
srun --ptrain-mode=auto --ptrain-sp=2 -N2 --ntasks-per-node=2 "$D/penv.sh" >"$D/g5" 2>"$D/ge5"
check "srun --ptrain-mode=auto --ptrain-sp=2 exits 0" [ $? -eq 0 ]
check_plan "$D/g5" 4 auto 0 n1 "auto with --ptrain-sp=2 on 2x2"
check_sp "$D/g5" 4 2 "auto with --ptrain-sp=2 on 2x2"
# sequence x tensor parallelism (ring attention on each rank's heads)
srun --ptrain-mode=auto --ptrain-sp=2 --ptrain-tp=2 -N2 --ntasks-per-node=2 "$D/penv.sh" >"$D/g5b" 2>"$D/ge5b"
check "srun --ptrain-mode=auto --ptrain-sp=2 --ptrain-tp=2 exits 0" [ $? -eq 0 ]
check_plan "$D/g5b" 4 1 2 n1 "auto with --ptrain-sp=2 --ptrain-tp=2 on 2x2" 1d 1 2
PTRAIN_MODE=2d PTRAIN_TP=4 srun -N1 --ntasks-per-node=4 "$D/penv.sh" >"$D/g6" 2>"$D/ge6"
check_plan "$D/g6" 4 1 4 step "PTRAIN_MODE=2d PTRAIN_TP=4 from the environment" 2d 1 1
PTRAIN_MODE=2.5d PTRAIN_TP_DEPTH=4 PTRAIN_TP=4 srun -N1 --ntasks-per-node=4 "$D/penv.sh" >"$D/g7" 2>"$D/ge7"
check_plan "$D/g7" 4 1 4 step "PTRAIN_TP_DEPTH=4 from the environment" 2.5d 4 1
# a one-node step that Slurm puts on n2 (n1 held whole by another job):
# the plan names n2 as MASTER_ADDR, and check_plan's "step" follows it
hold=$(sbatch --parsable -w n1 --exclusive -N1 -o /dev/null --wrap "sleep 120" 2>"$D/hold.err")
i=0
while [ -n "$hold" ] && [ "$(squeue -h -j "$hold" -o %T 2>/dev/null)" != RUNNING ] && [ $i -lt 60 ]; do sleep 1; i=$((i + 1)); done
PTRAIN_MODE=2d PTRAIN_TP=4 srun -N1 --ntasks-per-node=4 "$D/penv.sh" >"$D/g7b" 2>"$D/ge7b"
[ -z "$hold" ] || scancel "$hold"
check "with n1 held by job ${hold:-(none: $(head -c 100 "$D/hold.err"))}, the one-node step ran on n2" \
    [ "$(grep '^TASK ' "$D/g7b" | grep -c 'node=n2 ')" -eq 4 ]
check_plan "$D/g7b" 4 1 4 step "a one-node step on n2" 2d 1 1
PTRAIN_MODE=auto PTRAIN_SP=4 srun -N2 --ntasks-per-node=4 "$D/penv.sh" >"$D/g8" 2>"$D/ge8"
check_plan "$D/g8" 8 auto 0 n1 "PTRAIN_SP=4 from the environment"
check_sp "$D/g8" 8 4 "PTRAIN_SP=4 from the environment"
PTRAIN_SP=4 srun --ptrain-mode=auto --ptrain-sp=2 -N2 --ntasks-per-node=4 "$D/penv.sh" >"$D/g9" 2>"$D/ge9"
check_plan "$D/g9" 8 auto 0 n1 "--ptrain-sp=2 beats PTRAIN_SP=4"
check_sp "$D/g9" 8 2 "--ptrain-sp=2 beats PTRAIN_SP=4"

# 7. sbatch: #SBATCH --ptrain-mode=auto reaches the inner srun; the batch
#    script's own step gets nothing.
cat >"$D/job.sh" <<SH
#!/bin/sh
#SBATCH --ptrain-mode=auto
#SBATCH -N 2
#SBATCH --ntasks-per-node=2
#SBATCH -o $D/job.out
#SBATCH -e $D/job.err
echo "BATCH PTRAIN_MODE=\${PTRAIN_MODE-unset} RANK=\${RANK-unset}"
srun "$D/penv.sh"
echo "BATCH srun rc=\$?"
SH
job=$(sbatch --parsable "$D/job.sh" 2>"$D/sb.err")
check "sbatch with #SBATCH --ptrain-mode=auto accepted" [ -n "$job" ]
check "batch job finished" slurm_wait "$job" 120
check "batch script's own step has no plan" grep -q '^BATCH PTRAIN_MODE=unset RANK=unset' "$D/job.out"
check "inner srun exited 0" grep -q '^BATCH srun rc=0' "$D/job.out"
check_plan "$D/job.out" 4 auto 0 n1 "sbatch inner srun"
[ -f "$D/job.err" ] && grep -q . "$D/job.err" && diag "job stderr: $(head -n 3 "$D/job.err" | tr '\n' ' ')"

# 7b. a job submitted as slurmrestd submits it: no SPANK option can be
#     given there, only the job's environment; PTRAIN_MODE=auto and
#     PTRAIN_SP=2 in it reach the inner srun's plan (README, "Submitting
#     through slurmrestd").
cat >"$D/job2.sh" <<SH
#!/bin/sh
#SBATCH -N 2
#SBATCH --ntasks-per-node=2
#SBATCH -o $D/job2.out
#SBATCH -e $D/job2.err
srun "$D/penv.sh"
echo "BATCH srun rc=\$?"
SH
job=$( (unset PTRAIN_MODE PTRAIN_SP; sbatch --parsable --export=ALL,PTRAIN_MODE=auto,PTRAIN_SP=2 "$D/job2.sh") 2>"$D/sb2.err")
check "a job with PTRAIN_MODE=auto and PTRAIN_SP=2 only in its environment accepted" [ -n "$job" ]
check "... finished" slurm_wait "$job" 120
check_plan "$D/job2.out" 4 auto 0 n1 "the job environment's PTRAIN_MODE=auto PTRAIN_SP=2 (slurmrestd's way)"
check_sp "$D/job2.out" 4 2 "the job environment's PTRAIN_MODE=auto PTRAIN_SP=2"

# 8. options listed by srun --help and sbatch --help.
srun --help >"$D/help" 2>&1
# every plan setting the plugin offers (lib/contract/settings.c's rows,
# registered by spank/options.c), with its argument, and the plugin's own
opts="--ptrain-verbose --ptrain-explain --ptrain-energy=off|report|plan|apply"
settings="$top_builddir/tests/unit/test_settings"
[ -x "$settings" ] && opts="$opts $("$settings" --dump | awk 'int($3) % 2 == 1 { printf "--ptrain-%s=%s ", $1, $4 }')"
check "the settings table names the plugin's options ($(echo $opts | wc -w) options)" [ "$(echo $opts | wc -w)" -ge 17 ]
for o in $opts; do
    check "srun --help lists $o" grep -qF -- "$o" "$D/help"
done
sbatch --help 2>&1 | grep -q -- --ptrain-mode=MODE
check "sbatch --help lists --ptrain-mode" [ $? -eq 0 ]

# 9. admin arguments (plugstack.conf is re-read by every srun).
cp "$D/plugstack.conf" "$D/plugstack.conf.orig"
echo "required $PTRAIN_SPANK_SO max_tp=1 $PTRAIN_SPANK_ARGS" >"$D/plugstack.conf"
srun --ptrain-mode=auto -N2 --ntasks-per-node=2 "$D/penv.sh" >"$D/o9" 2>&1
check_plan "$D/o9" 4 4 1 n1 "plugstack max_tp=1"
echo "required $PTRAIN_SPANK_SO default_mode=auto $PTRAIN_SPANK_ARGS" >"$D/plugstack.conf"
srun -N2 --ntasks-per-node=2 "$D/penv.sh" >"$D/o10" 2>&1
check_plan "$D/o10" 4 auto 0 n1 "plugstack default_mode=auto, no option"
cat >"$D/ptrain.conf" <<CONF
default_mode = "auto";
max_tp = 8;
allowed_modes = ["auto", "1d"];
master_port_base = 40000;
master_port_count = 10;
CONF
echo "required $PTRAIN_SPANK_SO config=$D/ptrain.conf $PTRAIN_SPANK_ARGS" >"$D/plugstack.conf"
srun -N2 --ntasks-per-node=2 "$D/penv.sh" >"$D/o11" 2>&1
srun --ptrain-mode=2d -N2 --ntasks-per-node=2 "$D/penv.sh" >"$D/o11b" 2>"$D/e11b"; rc=$?
check "allowed_modes [auto, 1d]: --ptrain-mode=2d refused" [ $rc -ne 0 ] &&
    [ "$(grep -c '^TASK ' "$D/o11b")" -eq 0 ] &&
    grep -q -- "--ptrain-mode=2d is not allowed on this cluster (allowed_modes in ptrain.conf)" "$D/e11b"
ports=$(grep '^TASK ' "$D/o11" | sed 's/.*job=\([0-9]*\) step=\([0-9]*\).*MASTER_PORT=\([0-9]*\).*/\1 \2 \3/' |
        awk '{ if ($3 != 40000 + ($1 * 64 + $2 % 64) % 10) bad++ } END { print NR, bad + 0 }')
check "ptrain.conf: default_mode auto and master_port_base 40000 (count 10) applied" [ "$ports" = "4 0" ]
# pipeline limits and defaults of ptrain.conf
printf 'max_pp = 2;\nmax_zero = 1;\ndefault_zero = 1;\ndefault_schedule = "gpipe";\nallowed_schedules = ["gpipe", "1f1b"];\ndefault_recompute = "attention";\n' >"$D/pipe.conf"
echo "required $PTRAIN_SPANK_SO config=$D/pipe.conf $PTRAIN_SPANK_ARGS" >"$D/plugstack.conf"
srun --ptrain-mode=auto -N2 --ntasks-per-node=2 "$D/penv.sh" >"$D/o14" 2>"$D/e14"
check "ptrain.conf default_zero 1, default_schedule gpipe, default_recompute attention reach every task (dp=2)" \
    [ "$(grep '^TASK ' "$D/o14" | grep -w ZERO=1 | grep -w SCHED=gpipe | grep -wc RC=attention)" -eq 4 ]
srun --ptrain-mode=auto --ptrain-tp=2 --ptrain-pp=2 -N2 --ntasks-per-node=2 "$D/penv.sh" >"$D/o14b" 2>"$D/e14b"
check "default_zero 1 is not applied where dp=1 (nothing to shard): the step runs with zero=0" \
    [ "$(grep '^TASK ' "$D/o14b" | grep -w DP=1 | grep -wc ZERO=0)" -eq 4 ]
srun --ptrain-mode=auto --ptrain-pp=4 -N2 --ntasks-per-node=2 "$D/penv.sh" >"$D/o14c" 2>"$D/e14c"; rc=$?
check "max_pp 2: --ptrain-pp=4 refused" [ $rc -ne 0 ] && [ "$(grep -c '^TASK ' "$D/o14c")" -eq 0 ] &&
    grep -q -- "--ptrain-pp=4 exceeds this cluster's max_pp=2" "$D/e14c"
srun --ptrain-mode=auto --ptrain-zero=2 -N2 --ntasks-per-node=2 "$D/penv.sh" >"$D/o14d" 2>"$D/e14d"; rc=$?
check "max_zero 1: --ptrain-zero=2 refused" [ $rc -ne 0 ] &&
    grep -q -- "--ptrain-zero=2 exceeds this cluster's max_zero=1" "$D/e14d"
srun --ptrain-mode=auto --ptrain-pp=2 --ptrain-schedule=interleaved --ptrain-virtual-stages=2 -N2 --ntasks-per-node=2 \
    "$D/penv.sh" >"$D/o14e" 2>"$D/e14e"; rc=$?
check "allowed_schedules [gpipe, 1f1b]: --ptrain-schedule=interleaved refused" [ $rc -ne 0 ] &&
    grep -q -- "--ptrain-schedule=interleaved is not allowed on this cluster" "$D/e14e"
printf 'default_schedule = "interleaved";\n' >"$D/badpipe.conf"
echo "required $PTRAIN_SPANK_SO config=$D/badpipe.conf $PTRAIN_SPANK_ARGS" >"$D/plugstack.conf"
srun --ptrain-mode=auto -N2 --ntasks-per-node=2 "$D/penv.sh" >"$D/o14f" 2>"$D/e14f"; rc=$?
check "ptrain.conf default_schedule interleaved is refused as a configuration that cannot work" [ $rc -ne 0 ] &&
    grep -q 'cannot be a default' "$D/e14f"
printf 'default_mode = "2d";\nallowed_modes = ["2d", "2.5d", "3d"];\n' >"$D/grid.conf"
echo "required $PTRAIN_SPANK_SO config=$D/grid.conf $PTRAIN_SPANK_ARGS" >"$D/plugstack.conf"
srun -N2 --ntasks-per-node=4 "$D/penv.sh" >"$D/o11c" 2>&1
check_plan "$D/o11c" 8 2 4 n1 "ptrain.conf default_mode 2d, allowed_modes [2d, 2.5d, 3d]" 2d 1 1
srun --ptrain-mode=auto -N2 --ntasks-per-node=2 "$D/penv.sh" >"$D/o11d" 2>"$D/e11d"; rc=$?
check "allowed_modes without 1d: --ptrain-mode=auto refused" [ $rc -ne 0 ] &&
    grep -q -- "--ptrain-mode=auto is not allowed on this cluster" "$D/e11d"
printf 'default_mode = "auto"\nmax_tpp = 3;\n' >"$D/bad.conf"
echo "required $PTRAIN_SPANK_SO config=$D/bad.conf $PTRAIN_SPANK_ARGS" >"$D/plugstack.conf"
srun --ptrain-mode=auto -N2 --ntasks-per-node=2 "$D/penv.sh" >"$D/o12" 2>"$D/e12"; rc=$?
check "invalid ptrain.conf: a ptrain step is refused" [ $rc -ne 0 ] && [ "$(grep -c '^TASK ' "$D/o12")" -eq 0 ]
check "invalid ptrain.conf: one-line message names the file and line" grep -q "bad.conf:2" "$D/e12"
diag "$(grep ptrain "$D/e12" | head -n 1)"
srun -N2 --ntasks-per-node=2 "$D/penv.sh" >"$D/o13" 2>&1
check "invalid ptrain.conf: steps without ptrain still run" [ "$(grep -c 'NVARS=0$' "$D/o13")" -eq 4 ]
# this config used to load, then break every srun (auto
# plans 1d, which it does not allow); now it is refused, and only steps
# that ask for ptrain fail
printf 'default_mode = "auto";\nallowed_modes = ["auto"];\n' >"$D/auto.conf"
echo "required $PTRAIN_SPANK_SO config=$D/auto.conf $PTRAIN_SPANK_ARGS" >"$D/plugstack.conf"
srun -N2 --ntasks-per-node=2 "$D/penv.sh" >"$D/o14" 2>"$D/e14"; rc=$?
check "ptrain.conf with auto but not 1d: a step without ptrain options runs (status $rc)" \
    [ $rc -eq 0 ] && [ "$(grep -c 'NVARS=0$' "$D/o14")" -eq 4 ]
srun --ptrain-mode=auto -N2 --ntasks-per-node=2 "$D/penv.sh" >"$D/o15" 2>"$D/e15"; rc=$?
check "ptrain.conf with auto but not 1d: --ptrain-mode=auto is refused naming the file" \
    [ $rc -ne 0 ] && [ "$(grep -c '^TASK ' "$D/o15")" -eq 0 ] && grep -q 'auto.conf.*has "auto" but not "1d"' "$D/e15"
diag "$(grep ptrain "$D/e15" | head -n 1)"
cp "$D/plugstack.conf.orig" "$D/plugstack.conf"

done_testing
