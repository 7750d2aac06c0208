#!/bin/sh
# SPDX-License-Identifier: MIT
# ptrain-run's energy, on fake sysfs trees (PTRAIN_SYSFS_ROOT;
# there is no RAPL, cpufreq or GPU here):
#  - a RAPL package counter that a background writer advances and wraps past
#    its range: joules per step, watts and tokens per joule in the step
#    lines, the train records and the summary, consistent (the steps' sum is
#    the total, the ranks' sum is the total, the whole run's meter is at
#    least that), no wrap seen as a huge or negative step;
#  - --energy none: the fields are null, the lines have no energy;
#  - --profile-energy sweeps the fake cpufreq clocks and writes a measured
#    profile that ptrain-plan --energy-profile reads and plans from;
#    without settable clocks the profile says modelled;
#  - --energy-plan FILE (random clocks per instruction) with the dry
#    controller: each rank's log is its instructions' clocks in its 1F1B
#    order, step after step; --energy-plan auto from a profile with a
#    clock at 1e6 s warns in one line and runs unplanned, quickly;
#    --energy-plan auto with cpufreq writes the
#    rank's scaling_setspeed and restores it; without cpufreq, one line and
#    the run goes on at the default clocks; a run ended by SIGTERM (no
#    --save-dir; a rank blocked in MPI for a stopped peer), SIGINT, SIGHUP or
#    the heartbeat's abort restores them too;
#  - a dp replica made slow (PTRAIN_ENERGY_DELAY) is named a straggler and
#    the other replica moves to a slower frontier point;
#  - ranks with different energy options stop at the agreement; bad
#    values in one line, status 2 (an 8 GiB plan or profile from its size);
#  - on this machine's own /sys and NVML: --energy auto measures exactly
#    when ptrain-topo --energy says it can (real joules there; skipped,
#    with the reason, where nothing is readable).
. "$top_srcdir/tests/lib.sh"
need_run
need_mpirun
need_jq
plan="$top_builddir/ptrain-plan"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/ptrain-energy.XXXXXX")
writer=
trap 'rm -f "$tmp/run"; [ -z "$writer" ] || kill "$writer" 2>/dev/null; rm -rf "$tmp"' EXIT INT TERM
fresh_seed
diag "data seed $seed"
R="$run --model test --data synthetic:$seed --batch 4 --val-every 0 --val-batches 1"
jqe() { jq -e "$@" >/dev/null; }

# a fake tree: one RAPL package whose range (0.15 J) the writer below passes
# several times a second, and CPUs 0-7 under the userspace governor
RANGE=150000
root=$tmp/root
zone=$root/sys/class/powercap/intel-rapl:0
mkdir -p "$zone"
echo package-0 >"$zone/name"
echo $RANGE >"$zone/max_energy_range_uj"
start=$((RANGE - 1000))
echo $start >"$zone/energy_uj"
for c in 0 1 2 3 4 5 6 7; do
    d=$root/sys/devices/system/cpu/cpu$c/cpufreq
    mkdir -p "$d"
    echo userspace >"$d/scaling_governor"
    echo 2000000 >"$d/scaling_setspeed"
    echo 2000000 >"$d/scaling_cur_freq"
    echo 2400000 >"$d/scaling_max_freq"
    echo 800000 >"$d/cpuinfo_min_freq"
    echo 2400000 >"$d/cpuinfo_max_freq"
    echo "2400000 2000000 1600000 1200000 800000" >"$d/scaling_available_frequencies"
done
# the writer: 3000-8000 uJ every few ms (fresh random steps), modulo the
# range; each wrap adds a line to $tmp/wraps
touch "$tmp/run" "$tmp/wraps"
(
    v=$start s=$seed
    while [ -e "$tmp/run" ]; do
        s=$(( (s * 1103515245 + 12345) % 2147483648 ))
        w=$(( (v + 3000 + s % 5000) % RANGE ))
        [ "$w" -ge "$v" ] || echo >>"$tmp/wraps"
        v=$w
        echo $v >"$zone/e.tmp" && mv "$zone/e.tmp" "$zone/energy_uj"
        sleep 0.003
    done
) &
writer=$!
export PTRAIN_SYSFS_ROOT="$root"
export PTRAIN_NVML_LIBRARY="$tmp/no-nvml.so" # no NVML: the fake tree alone

# 1. measured joules
rc=0
w0=$(wc -l <"$tmp/wraps")
ptrain_mpirun -np 2 $R --steps 5 --metrics "$tmp/m.jsonl" >"$tmp/out" 2>"$tmp/err" || rc=$?
w1=$(wc -l <"$tmp/wraps")
check "2 ranks measuring a RAPL package: exit 0 ($rc)" [ "$rc" -eq 0 ]
[ "$rc" -eq 0 ] || diag "$(tail -n 3 "$tmp/err" | tr '\n' ' ')"
check "the counter wrapped $((w1 - w0)) times during the run" [ $((w1 - w0)) -ge 2 ]
check "the start says what is measured: the package, shared by the node's 2 ranks" \
    grep -q '^energy: measuring rapl package-0 (share 0.5) on rank 0; 2 of 2 ranks measure$' "$tmp/out"
check "every step line has joules, watts and tokens per joule before the ETA" \
    sh -c "[ \$(grep -c '^step .* | [0-9.e+-]* J | [0-9.e+-]* W | [0-9.e+-]* tok/J | eta' '$tmp/out') -eq 5 ]"
check "the summary has the job's energy, watts, tokens per joule and 2/2 ranks" \
    grep -q '^done: .* | energy [0-9.e+-]* J ([0-9.e+-]* W, [0-9.e+-]* tok/J; rank 0 .*; 2/2 ranks measured)' "$tmp/out"
check "every train record: energy_j > 0 (no wrap seen as a negative or huge step), power_w = energy_j / step time, tok_per_j = tokens / energy_j" \
    jqe -s '(.[0].tokens_per_step) as $tok | [.[] | select(.type == "train")] | length == 5 and all(.[];
        .energy_j > 0 and .energy_j < 1000 and .energy_ranks == 2
        and ((.power_w - .energy_j / (.step_ms / 1000)) | fabs) <= 1e-6 * .power_w + 1e-9
        and ((.tok_per_j - $tok / .energy_j) | fabs) <= 1e-6 * .tok_per_j)' "$tmp/m.jsonl"
check "the steps' joules add up to the summary's total" \
    jqe -s '([.[] | select(.type == "train") | .energy_j] | add) as $s | (.[] | select(.type == "done")) as $d
        | (($s - $d.energy_j) | fabs) <= 1e-9 * $d.energy_j' "$tmp/m.jsonl"
check "the ranks' joules add up to the total; the whole run's meter (validation included) is no less" \
    jqe -s '(.[] | select(.type == "done")) as $d | ($d.energy_j_per_rank | length) == 2
        and ((($d.energy_j_per_rank | add) - $d.energy_j) | fabs) <= 1e-9 * $d.energy_j
        and $d.energy_run_j >= $d.energy_j * (1 - 1e-9)
        and (($d.tok_per_j - 5 * .[0].tokens_per_step / $d.energy_j) | fabs) <= 1e-6 * $d.tok_per_j' "$tmp/m.jsonl"
check "the header names the source" jqe '.type != "header" or (.energy_source == "rapl package-0 (share 0.5)" and .energy_ranks == 2)' "$tmp/m.jsonl"

# 2. none: nulls, no energy in the lines
rc=0
ptrain_mpirun -np 1 $R --steps 2 --energy none --metrics "$tmp/n.jsonl" >"$tmp/nout" 2>&1 || rc=$?
check "--energy none: exit 0 ($rc), the fields are null, no energy on the lines" \
    sh -c "[ $rc -eq 0 ] && ! grep -q ' J |\|energy' '$tmp/nout' &&
        jq -e -s 'all(.[] | select(.type == \"train\" or .type == \"done\"); .energy_j == null and .tok_per_j == null)' '$tmp/n.jsonl' >/dev/null"

# 3. the sweep: pp=2, 3 clocks x 2 steps from the second step
rc=0
ptrain_mpirun -np 2 $R --steps 8 --pp 2 --micro-batches 2 --profile-energy "$tmp/prof.json" --profile-clocks 3 \
    --profile-steps 2 >"$tmp/pout" 2>&1 || rc=$?
check "--profile-energy on 2 ranks: exit 0 ($rc), the profile written" \
    sh -c "[ $rc -eq 0 ] && grep -q '^energy: profile written to $tmp/prof.json (measured: 3 clocks x 2 steps' '$tmp/pout'"
check "the profile: measured, pp 2, 4 types at the three swept clocks 2400, 1600, 800 MHz, times > 0, idle power >= 0" \
    jqe '.modelled == false and .pp == 2 and .microbatches == 2 and (.types | length) == 4 and .idle_w >= 0
        and all(.types[]; ([.choices[].freq_mhz] | sort) == [800, 1600, 2400] and all(.choices[]; .time_s > 0 and .energy_j >= 0))' "$tmp/prof.json"
check "the clocks are restored after the sweep (scaling_setspeed 2000000 on CPUs 0 and 1)" \
    sh -c "[ \$(cat '$root/sys/devices/system/cpu/cpu0/cpufreq/scaling_setspeed') = 2000000 ] &&
        [ \$(cat '$root/sys/devices/system/cpu/cpu1/cpufreq/scaling_setspeed') = 2000000 ]"
rc=0
"$plan" --model test --pp 2 --microbatches 2 --batch 4 --tasks-per-node 2 --energy-profile "$tmp/prof.json" \
    --energy-plan-out "$tmp/from-prof.json" --json >"$tmp/pj" 2>"$tmp/perr" || rc=$?
check "ptrain-plan --energy-profile reads the measured profile and writes a plan ($rc)" \
    sh -c "[ $rc -eq 0 ] && jq -e '(.energy.modelled | not) and .energy.profile != null' '$tmp/pj' >/dev/null &&
        jq -e '(.instructions | length) == 8' '$tmp/from-prof.json' >/dev/null"
# no clock can be set: a modelled profile, from the measured times
rc=0
PTRAIN_SYSFS_ROOT="$tmp/empty" ptrain_mpirun -np 2 $R --steps 4 --pp 2 --micro-batches 2 --profile-energy "$tmp/mprof.json" \
    --profile-clocks 2 --profile-steps 1 >"$tmp/mout" 2>&1 || rc=$?
check "--profile-energy where no clock can be set: exit 0 ($rc), one line saying so, a profile marked modelled" \
    sh -c "[ $rc -eq 0 ] && [ \$(grep -c 'cannot set clocks' '$tmp/mout') -eq 1 ] &&
        jq -e '.modelled and (.basis | startswith(\"modelled: the clocks could not be set\")) and (.types | length) == 4' '$tmp/mprof.json' >/dev/null"

# PTRAIN_ENERGY=plan (its dry controller) with --profile-energy: no clash with
# the level's plan, and a dry controller sweeps nothing, so the profile is modelled
rc=0
PTRAIN_ENERGY=plan ptrain_mpirun -np 2 $R --steps 4 --pp 2 --micro-batches 2 --profile-energy "$tmp/dprof.json" \
    --profile-clocks 2 --profile-steps 1 >"$tmp/dpout" 2>&1 || rc=$?
check "PTRAIN_ENERGY=plan with --profile-energy: exit 0 ($rc), the dry controller said to sweep nothing, a modelled profile" \
    sh -c "[ $rc -eq 0 ] && grep -q 'the dry controller sets no clock' '$tmp/dpout' &&
        jq -e '.modelled and (.basis | contains(\"times measured at the default clock\"))' '$tmp/dprof.json' >/dev/null"

# 4. a plan file with fresh random clocks per instruction, applied by the dry controller
jq -n --argjson seed "$seed" '
    def clk($i): [800, 1200, 1600, 2000, 2400][(($seed + $i * 7919) * 48271 % 2147483647) % 5];
    {format: "ptrain-energy-plan", version: 1, point: "intrinsic", modelled: true, device: "cpu", basis: "test",
     schedule: "1f1b", pp: 2, virtual_stages: 1, microbatches: 2, plan: "", time_s: 0.1, energy_j: 1,
     max_clock: {time_s: 0.1, energy_j: 1.2},
     instructions: [range(0; 2) as $r | range(0; 2) as $mb | range(0; 2) as $b |
         {rank: $r, chunk: 0, mb: $mb, bwd: ($b == 1), freq_mhz: clk($r * 4 + $mb * 2 + $b)}]}' >"$tmp/plan.json"
rc=0
ptrain_mpirun -np 2 $R --steps 3 --pp 2 --micro-batches 2 --energy-plan "$tmp/plan.json" --energy-clock "dry:$tmp/dry" \
    >"$tmp/dout" 2>&1 || rc=$?
check "--energy-plan FILE with the dry controller: exit 0 ($rc), says dry, and achieved against planned" \
    sh -c "[ $rc -eq 0 ] && grep -q 'dry: clocks logged, not set' '$tmp/dout' &&
        grep -q '^energy plan: intrinsic point of $tmp/plan.json (modelled) planned 100.000 ms, 1.000 J per pipeline iteration; achieved' '$tmp/dout'"
# 1F1B, pp 2, 2 microbatches (lib/contract/schedule.h): rank 0 runs F0 F1 B0 B1
# (one warm-up forward), rank 1 F0 B0 F1 B1; 3 training steps, each change logged once
expect_log() { # RANK "mb,bwd ..." -> the clocks that rank sets, consecutive repeats collapsed
    seq=
    for s in 1 2 3; do for x in $2; do
        seq="$seq $(jq -r --argjson r "$1" --argjson mb "${x%,*}" --argjson b "${x#*,}" \
            '.instructions[] | select(.rank == $r and .mb == $mb and .bwd == ($b == 1)) | .freq_mhz' "$tmp/plan.json")"
    done; done
    echo $seq | tr ' ' '\n' | uniq | tr '\n' ' '
}
want0=$(expect_log 0 "0,0 1,0 0,1 1,1") got0=$(tr '\n' ' ' <"$tmp/dry.0")
want1=$(expect_log 1 "0,0 0,1 1,0 1,1") got1=$(tr '\n' ' ' <"$tmp/dry.1")
check "rank 0 set its instructions' clocks in its order, step after step ($got0)" [ -n "$got0" -a "$got0" = "$want0" ]
check "rank 1 set its instructions' clocks in its order, step after step ($got1)" [ -n "$got1" -a "$got1" = "$want1" ]

# 4b. --energy-plan auto from a measured profile with one clock at 1e6 s
# (found by fuzzing: the start-up planner ran for hours; a type's clocks
# span at most PT_ENERGY_MAX_SPREAD, lib/plan/energy.h): one warning line
# naming the clock, and the run goes on without a plan.  Under timeout, so
# that a planner that does not end fails here.
jq -n '{format: "ptrain-energy-profile", version: 1, modelled: false, basis: "measured: test", device: "cpu",
        schedule: "1f1b", pp: 1, virtual_stages: 1, microbatches: 4, plan: "", idle_w: 11.5,
        types: [range(0; 2) as $t | {type: $t, rank: 0, chunk: 0, bwd: ($t == 1),
            choices: [{freq_mhz: 1000, time_s: (if $t == 1 then 1e6 else 0.02 end), energy_j: 3.5},
                      {freq_mhz: 2000, time_s: 0.015, energy_j: 4.5}]}]}' >"$tmp/slowprof.json"
rc=0
ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" timeout 120 "${MPIRUN:-mpirun}" --allow-run-as-root \
    --oversubscribe --bind-to none -np 1 $R --batch 32 --micro-batches 32 --steps 2 --energy-plan auto \
    --energy-clock "dry:$tmp/sdry1" --energy-profile "$tmp/slowprof.json" >"$tmp/sout" 2>&1 || rc=$?
check "--energy-plan auto from a profile with a clock at 1e6 s: exit 0 within 120 s ($rc), one warning naming the clock, no plan applied" \
    sh -c "[ $rc -eq 0 ] && [ \$(grep -c 'clock 0 takes 1e+06 s' '$tmp/sout') -eq 1 ] &&
        grep -q 'at most 1000 times its fastest.*no plan applied' '$tmp/sout' && grep -q '^done:' '$tmp/sout'"

# 5. auto with cpufreq: the rank's CPUs are set, then restored
rm -f "$tmp/sets"
rc=0
ptrain_mpirun -np 2 $R --steps 3 --pp 2 --micro-batches 2 --energy-plan auto --energy-clock cpufreq --metrics "$tmp/c.jsonl" \
    >"$tmp/cout" 2>&1 || rc=$?
check "--energy-plan auto with cpufreq: exit 0 ($rc), the modelled intrinsic point over the offered 800-2400 MHz" \
    sh -c "[ $rc -eq 0 ] && grep -q '^energy plan: intrinsic point, modelled (cost model, cpu power model 800-2400 MHz)' '$tmp/cout' &&
        grep -q 'applied per instruction' '$tmp/cout'"
check "... clocks were changed (train records count them) and scaling_setspeed is back at 2000000 after the run" \
    sh -c "jq -e -s '[.[] | select(.type == \"train\") | .clock_changes] | max > 0' '$tmp/c.jsonl' >/dev/null &&
        [ \$(cat '$root/sys/devices/system/cpu/cpu0/cpufreq/scaling_setspeed') = 2000000 ]"
check "... the done record has the plan and what was achieved" \
    jqe 'select(.type == "done") | .plan_time_s > 0 and .achieved_time_s > 0 and .achieved_energy_j > 0' "$tmp/c.jsonl"
rc=0
PTRAIN_SYSFS_ROOT="$tmp/empty" ptrain_mpirun -np 2 $R --steps 2 --energy-plan auto --energy-clock cpufreq >"$tmp/eout" 2>&1 || rc=$?
check "no cpufreq: one line saying the clocks cannot be set, the run goes on at the default clocks ($rc)" \
    sh -c "[ $rc -eq 0 ] && [ \$(grep -c 'cannot set clocks' '$tmp/eout') -eq 1 ] &&
        grep -q 'runs at the default clocks' '$tmp/eout' && grep -q 'not applied: no rank can set clocks' '$tmp/eout' &&
        grep -q '^done:' '$tmp/eout'"
rc=0
PTRAIN_ENERGY=plan ptrain_mpirun -np 1 $R --steps 2 >"$tmp/lout" 2>&1 || rc=$?
check "PTRAIN_ENERGY=plan: the intrinsic point planned and logged by the dry controller ($rc)" \
    sh -c "[ $rc -eq 0 ] && grep -q '^energy plan: intrinsic point.*dry: clocks logged, not set' '$tmp/lout'"

# 5b. a run that ends by a signal or an abort puts the clocks back: a tree of
# its own whose speed (2200000 kHz) is none of the offered clocks, so any
# clock the plan set differs from it
root2=$tmp/root2
for c in 0 1 2 3 4 5 6 7; do
    d=$root2/sys/devices/system/cpu/cpu$c/cpufreq
    mkdir -p "$d"
    echo userspace >"$d/scaling_governor"
    echo 2200000 >"$d/scaling_setspeed"
    echo 2200000 >"$d/scaling_cur_freq"
    echo 2400000 >"$d/scaling_max_freq"
    echo 800000 >"$d/cpuinfo_min_freq"
    echo 2400000 >"$d/cpuinfo_max_freq"
    echo "2400000 2000000 1600000 1200000 800000" >"$d/scaling_available_frequencies"
done
# speeds [CPU...]: the distinct speeds of those CPUs (default all 8; the
# files hold no newline once written)
speeds() {
    local c
    for c in ${@:-0 1 2 3 4 5 6 7}; do echo "$(cat "$root2/sys/devices/system/cpu/cpu$c/cpufreq/scaling_setspeed")"; done |
        sort -u | tr '\n' ' '
}
alive() { [ -d "/proc/$1" ] && ! grep -q '^State:.*Z' "/proc/$1/status" 2>/dev/null; }
# cpus_of PID: the CPUs (0-7) it may run on
cpus_of() {
    local l c out=
    l=$(sed -n 's/^Cpus_allowed_list:[[:space:]]*//p' "/proc/$1/status" 2>/dev/null)
    for c in 0 1 2 3 4 5 6 7; do
        echo ",$l," | awk -v c=$c -F, '{ for (i = 1; i <= NF; i++) { n = split($i, r, "-");
            if ($i != "" && c >= r[1] && c <= r[n]) f = 1 } } END { exit !f }' && out="$out $c"
    done
    echo $out
}
# wait_changed CPU...: until a clock of those CPUs was set (bounded)
wait_changed() {
    local i=0
    while [ $i -lt 3000 ] && [ "$(speeds "$@")" = "2200000 " ] && alive "$mp"; do sleep 0.1; i=$((i + 1)); done
    [ "$(speeds "$@")" != "2200000 " ]
}
# mpirun itself in the background ($! is its pid, its children the ranks);
# each rank on a core of its own, so that one rank's clocks are its own
# (ranks whose CPUs share a policy set each other's clock)
bg_run() { PTRAIN_SYSFS_ROOT="$root2" ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" \
    exec "${MPIRUN:-mpirun}" --allow-run-as-root --oversubscribe --bind-to core:overload-allowed "$@"; }
# start NP: the speeds back at 2200000 (a failed check before must not
# spoil the next), then a long cpufreq plan run; sets mp (mpirun's pid) and
# ranks (its children) once the plan has changed a clock; 1 if it never does
start() {
    for f in "$root2"/sys/devices/system/cpu/cpu[0-7]/cpufreq/scaling_setspeed; do echo 2200000 >"$f"; done
    (bg_run -np "$1" $R --steps 100000 --pp "$1" --micro-batches 2 --energy-plan auto --energy-clock cpufreq) \
        >"$tmp/sig.out" 2>&1 &
    mp=$! ranks=
    wait_changed
    ranks=$(pgrep -P "$mp" | tr '\n' ' ')
    [ "$(speeds)" != "2200000 " ] && [ $(echo $ranks | wc -w) -eq "$1" ]
}
# finish: end what is left of the run (a stopped rank included)
finish() {
    for p in $ranks; do kill -KILL "$p" 2>/dev/null; done
    kill -KILL "$mp" 2>/dev/null
    wait "$mp" 2>/dev/null
}
nostart() { check "the run under a cpufreq plan changes a clock ($(tail -n 2 "$tmp/sig.out" | tr '\n' ' '))" false; }
# SIGTERM without --save-dir (scancel, a time limit, preemption) to a rank
# blocked in MPI: one rank stopped, the other waits for it in a collective,
# where a flag for the loop would never be seen; the handler writes its
# clocks back itself (the heartbeat is off, so it is the signal that ends it;
# the stopped rank is then killed, and its own CPUs are not looked at)
export PTRAIN_HEARTBEAT=0
if start 2; then
    set -- $ranks
    mine=$(cpus_of "$2")
    wait_changed $mine
    low=$(speeds $mine)
    kill -STOP "$1"
    sleep 1
    kill -TERM "$2"
    i=0
    while [ $i -lt 300 ] && alive "$2"; do sleep 0.1; i=$((i + 1)); done
    got=$(speeds $mine)
    finish
    check "SIGTERM to a rank waiting in MPI for a stopped peer: it ends and its CPUs' ($mine) scaling_setspeed is back at 2200000 kHz (was $low, now $got)" \
        [ -n "$mine" -a "$got" = "2200000 " ]
else
    finish
    nostart
fi
# SIGINT and SIGHUP (a terminal closed) to the only rank
for sig in INT HUP; do
    if start 1; then
        set -- $ranks
        low=$(speeds)
        kill -$sig "$1"
        i=0
        while [ $i -lt 300 ] && alive "$1"; do sleep 0.1; i=$((i + 1)); done
        got=$(speeds)
        finish
        check "SIG$sig to the rank: the CPUs' scaling_setspeed is back at 2200000 kHz (was $low, now $got)" \
            [ "$got" = "2200000 " ]
    else
        finish
        nostart
    fi
done
# a stopped peer found by the heartbeat: the rank that finds it aborts the
# job (MPI_Abort, then _exit), and puts its clocks back first
export PTRAIN_HEARTBEAT=10
if start 2; then
    set -- $ranks
    mine=$(cpus_of "$2")
    wait_changed $mine
    low=$(speeds $mine)
    kill -STOP "$1"
    i=0
    while [ $i -lt 1200 ] && alive "$2"; do sleep 0.1; i=$((i + 1)); done
    got=$(speeds $mine)
    finish
    check "a peer stopped: the heartbeat aborts the job and the aborting rank's CPUs ($mine) are back at 2200000 kHz (was $low, now $got; $(grep -m1 -o 'no heartbeat[^;]*\|a peer rank died' "$tmp/sig.out"))" \
        [ -n "$mine" -a "$got" = "2200000 " ]
else
    finish
    nostart
fi
unset PTRAIN_HEARTBEAT

# 6. a straggler: dp replica 1 sleeps 1.5 s before each step's first instruction
rc=0
PTRAIN_ENERGY_DELAY=1:1.5 ptrain_mpirun -np 2 $R --steps 5 --energy-plan auto --energy-clock "dry:$tmp/sdry" \
    --metrics "$tmp/s.jsonl" >"$tmp/sout" 2>&1 || rc=$?
check "a slow dp replica: exit 0 ($rc), named a straggler" \
    sh -c "[ $rc -eq 0 ] && grep -q '^energy: dp replica 1 is a straggler' '$tmp/sout' &&
        jq -e -s 'any(.[] | select(.type == \"train\"); .straggler == 1)' '$tmp/s.jsonl' >/dev/null"
first=$(head -n 1 "$tmp/sdry.0") low=$(sort -n "$tmp/sdry.0" | head -n 1)
check "... replica 0 moved to a slower point: its clock went from $first MHz down to $low MHz" \
    sh -c "[ -n '$first' ] && [ '$low' -lt '$first' ]"

# 7. the agreement and bad values
rc=0
ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" timeout 180 "${MPIRUN:-mpirun}" --allow-run-as-root \
    --oversubscribe --bind-to none -np 1 $R --steps 1 --energy none : -np 1 $R --steps 1 >"$tmp/aout" 2>&1 || rc=$?
check "--energy none on rank 0 only: every rank exits 2 at the agreement, naming the energy options ($rc)" \
    sh -c "[ $rc -eq 2 ] && grep -q 'ranks disagree at start-up: energy options' '$tmp/aout'"
bad() { # DESC PATTERN ARGS... (PTRAIN_ENERGY* taken from the environment)
    d=$1 p=$2
    shift 2
    rc=0
    ptrain_mpirun -np 1 $R --steps 1 "$@" >"$tmp/bout" 2>&1 || rc=$?
    check "$d: status 2, one line ($(grep -m1 'error' "$tmp/bout" | cut -c1-160))" \
        sh -c "[ $rc -eq 2 ] && [ \$(grep -c 'ptrain-run: error' '$tmp/bout') -eq 1 ] && grep -qF -- \"$p\" '$tmp/bout'"
}
bad "--energy joules" "--energy: energy source 'joules' is not valid" --energy joules
bad "--energy-clock turbo" "--energy-clock: clock controller 'turbo' is not valid" --energy-clock turbo
bad "--profile-energy with --energy-plan" "--profile-energy and --energy-plan auto exclude each other" \
    --profile-energy "$tmp/x.json" --energy-plan auto
bad "--energy-profile without a plan" "--energy-profile is the profile --energy-plan plans from" --energy-profile "$tmp/prof.json"
bad "a plan file of another pipeline" "is for 1f1b pp=2 virtual_stages=1 microbatches=2, this run is 1f1b pp=1" \
    --energy-plan "$tmp/plan.json"
# a clock of 1.7e308 MHz (the nearest offered clock to it was the lowest)
jq '.instructions[1].freq_mhz = 1.7e308' "$tmp/plan.json" >"$tmp/huge-plan.json"
bad "a plan with a clock of 1.7e308 MHz" "is not a number > 0 and <= 100000 (a clock in MHz)" \
    --energy-plan "$tmp/huge-plan.json"
bad "--profile-energy with too few steps" "--profile-energy needs 13 steps" --profile-energy "$tmp/x.json"
ln -s "$tmp/victim" "$tmp/link.json"
bad "--profile-energy to a symbolic link" "$tmp/link.json is a symbolic link" --steps 20 --profile-energy "$tmp/link.json"
check "... the link's target was not created" test ! -e "$tmp/victim"
# an 8 GiB (sparse) plan or profile: refused from its size before it is read;
# under an address-space limit, so that reading it whole fails rather than
# takes the machine's memory (not under ASan, which reserves terabytes)
truncate -s 8G "$tmp/big.json"
lim=3000000
grep -qa __asan_init "$run" "$top_builddir/.libs/ptrain-run" 2>/dev/null && lim=unlimited
for opt in "--energy-plan $tmp/big.json" "--energy-plan auto --energy-profile $tmp/big.json"; do
    rc=0
    # shellcheck disable=SC2086
    (ulimit -v $lim && ptrain_mpirun -np 1 $R --steps 1 $opt) >"$tmp/bout" 2>&1 || rc=$?
    check "${opt%% $tmp*} ... of an 8 GiB file: status 2, one line naming it, its size and the limit ($(grep -m1 'error' "$tmp/bout" | cut -c1-200))" \
        sh -c "[ $rc -eq 2 ] && [ \$(grep -c 'ptrain-run: error' '$tmp/bout') -eq 1 ] &&
            grep -qF '$tmp/big.json is 8589934592 bytes, more than the 67108864 bytes allowed' '$tmp/bout'"
done
rm -f "$tmp/big.json"
export PTRAIN_ENERGY=max
bad "PTRAIN_ENERGY=max" "PTRAIN_ENERGY='max' is not valid (valid: off, report, plan, apply)"
unset PTRAIN_ENERGY
export PTRAIN_ENERGY_CPU_MHZ=fast
bad "PTRAIN_ENERGY_CPU_MHZ=fast" "PTRAIN_ENERGY_CPU_MHZ='fast' is not a clock range"
# strtod's hex and exponents are not plain decimals (1e-300 MHz allowed no clock)
for v in 0x400-0x800 1e-300-2000 1100-100001; do
    export PTRAIN_ENERGY_CPU_MHZ=$v
    bad "PTRAIN_ENERGY_CPU_MHZ=$v" "PTRAIN_ENERGY_CPU_MHZ='$v' is not a clock range (valid: MIN-MAX in MHz, plain decimals, 1 <= MIN <= MAX <= 100000"
done
unset PTRAIN_ENERGY_CPU_MHZ

# 8. this machine's own /sys and NVML (no fake tree): ptrain-run --energy auto
# measures exactly when ptrain-topo --energy says it can, and then every step
# has real joules; where nothing is readable here the joules are skipped, with
# ptrain-topo's reason
unset PTRAIN_SYSFS_ROOT PTRAIN_NVML_LIBRARY
rc=0
"$top_builddir/ptrain-topo" --energy >"$tmp/topo" 2>&1 || rc=$?
auto=$(sed -n 's/^  ptrain-run --energy auto: \([^;]*\);.*/\1/p' "$tmp/topo")
check "ptrain-topo --energy here: exit 0 ($rc), it says what --energy auto measures ($auto)" [ "$rc" -eq 0 -a -n "$auto" ]
# NVML is used for the rank's GPU only: name one where the probe found NVML and nothing names one
case "$auto" in nvml*) [ -n "${CUDA_VISIBLE_DEVICES:-}${PTRAIN_ENERGY_GPU:-}" ] || export PTRAIN_ENERGY_GPU=0 ;; esac
rc=0
ptrain_mpirun -np 1 $R --steps 3 --energy auto --metrics "$tmp/real.jsonl" >"$tmp/rout" 2>&1 || rc=$?
case "$auto" in
none*)
    check "nothing measurable here: exit 0 ($rc), the joules are null" \
        sh -c "[ $rc -eq 0 ] && jq -e -s 'all(.[] | select(.type == \"train\" or .type == \"done\"); .energy_j == null)' '$tmp/real.jsonl' >/dev/null"
    ok "# SKIP no real joules on this machine: $(grep -E '^  (NVML|RAPL):' "$tmp/topo" | sed 's/^  //' | tr '\n' ' ')"
    ;;
*)
    check "measurable here ($auto): exit 0 ($rc), every step has joules > 0 from the source ptrain-topo names" \
        sh -c "[ $rc -eq 0 ] && jq -e -s --arg a '$auto' '(.[0].energy_source // \"none\") as \$s
            | ((\$a | contains(\"rapl\")) == (\$s | contains(\"rapl\"))) and ((\$a | contains(\"nvml\")) == (\$s | contains(\"nvml\")))
            and ([.[] | select(.type == \"train\")] | length == 3 and all(.[]; .energy_j > 0))' '$tmp/real.jsonl' >/dev/null"
    diag "measured here: $(jq -r -s '(.[0].energy_source) + ": " + ([.[] | select(.type == "train") | .energy_j | tostring] | join(", ")) + " J per step"' "$tmp/real.jsonl")"
    ;;
esac
done_testing
