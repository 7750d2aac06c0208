#!/bin/sh
# SPDX-License-Identifier: MIT
# ptrain-plan --energy: the chosen plan's time-energy frontier
# on a fixture: JSON ordered by time with falling energy, the intrinsic
# point at the max-clock time and cheaper, the deadline point within its
# slowdown; the table marks the model "modelled"; bad options in one line.
# --energy-plan-out writes the chosen point's clock of every instruction;
# --energy-profile reads a measured profile (fresh random numbers) in place
# of the power model, and refuses one of another pipeline, one with a clock
# 1e8 times slower than its type's fastest (quickly), and one of 8 GiB from
# its size; one type 1e7 times slower than the others is planned quickly.
. "$top_srcdir/tests/lib.sh"
plan="$top_builddir/ptrain-plan"
[ -x "$plan" ] || skip_all "ptrain-plan not built"
need_jq
workdir
topo="$top_srcdir/tests/topo/dgx8-nvswitch.xml"
rc=0
"$plan" --topology "$topo" --model gpt2-124M --pp 4 --batch 32 --energy --energy-slowdown 10 --json \
    >"$wd/e.json" 2>"$wd/e.err" || rc=$?
check "ptrain-plan --energy --json on dgx8 with pp=4 exits 0 ($rc)" [ "$rc" -eq 0 ]
j() { jq -e "$1" "$wd/e.json" >/dev/null; }
# jqe ARGS...: jq -e, its output dropped
jqe() { jq -e "$@" >/dev/null; }
check "the frontier has points, ordered by time with energy falling" \
    j '.energy.frontier | length > 10 and ([range(1; length) as $i | .[$i].time_s > .[$i-1].time_s and .[$i].energy_j < .[$i-1].energy_j] | all)'
check "the intrinsic point has the max-clock time and less energy" \
    j '.energy.intrinsic.time_s <= .energy.max_clock.time_s * (1 + 1e-9) and .energy.intrinsic.energy_j < .energy.max_clock.energy_j'
check "the deadline point is within 10% of the max-clock time and cheaper than the intrinsic one" \
    j '.energy.deadline.time_s <= .energy.max_clock.time_s * 1.1 and .energy.deadline.energy_j <= .energy.intrinsic.energy_j'
check "it is marked modelled, from the gpu power model (the fixture has GPUs)" j '.energy.modelled and .energy.power_model == "gpu"'
rc=0
"$plan" --topology "$topo" --model gpt2-124M --pp 4 --batch 32 --energy >"$wd/e.txt" 2>&1 || rc=$?
check "the table names the intrinsic point and says modelled" \
    sh -c "[ $rc -eq 0 ] && grep -q '^  intrinsic (same time)' '$wd/e.txt' && grep -q 'modelled' '$wd/e.txt'"
for bad in "--power-model tpu:invalid --power-model 'tpu' (valid: gpu, cpu)" \
           "--energy-slowdown -5:invalid --energy-slowdown '-5'"; do
    opt=${bad%%:*} want=${bad#*:}
    rc=0
    # shellcheck disable=SC2086
    "$plan" --topology "$topo" $opt >"$wd/b.out" 2>&1 || rc=$?
    check "$opt is refused in one line, status 2 ($rc)" \
        sh -c "[ $rc -eq 2 ] && [ \$(wc -l <'$wd/b.out') -eq 1 ] && grep -qF \"$want\" '$wd/b.out'"
done

# --energy-plan-out: the intrinsic point, every instruction of the plan's pipeline
rc=0
"$plan" --topology "$topo" --model gpt2-124M --pp 4 --batch 32 --energy --json --energy-plan-out "$wd/plan.json" \
    >"$wd/p.json" 2>"$wd/p.err" || rc=$?
check "--energy-plan-out exits 0 ($rc) and says what it wrote" \
    sh -c "[ $rc -eq 0 ] && grep -q 'wrote the intrinsic point' '$wd/p.err'"
m=$(jq '.best.microbatches' "$wd/p.json")
check "the plan file holds 2 x pp x microbatches = $((8 * m)) instructions, each once, at the intrinsic point" \
    jqe --argjson m "$m" '.format == "ptrain-energy-plan" and .point == "intrinsic" and .pp == 4 and .microbatches == $m
        and (.instructions | length) == 8 * $m
        and ([.instructions[] | [.rank, .chunk, .mb, .bwd]] | unique | length) == 8 * $m
        and all(.instructions[]; .freq_mhz >= 810 and .freq_mhz <= 1980)' "$wd/plan.json"
check "its time and energy are the JSON's intrinsic point" \
    sh -c "jq -e --slurpfile p '$wd/p.json' '((.time_s / \$p[0].energy.intrinsic.time_s - 1) | fabs) < 1e-5 and
        ((.energy_j / \$p[0].energy.intrinsic.energy_j - 1) | fabs) < 1e-5' '$wd/plan.json' >/dev/null"
check "... and some instructions off the critical path run below the top clock" \
    jqe 'any(.instructions[]; .freq_mhz < 1980)' "$wd/plan.json"
"$plan" --topology "$topo" --model gpt2-124M --pp 4 --batch 32 --energy-slowdown 10 --energy-plan-out "$wd/d.json" \
    >/dev/null 2>&1
check "with --energy-slowdown 10 it is the deadline point" jqe '.point == "deadline +10%" and .time_s <= .max_clock.time_s * 1.1' "$wd/d.json"
ln -s "$wd/victim" "$wd/link.json"
rc=0
"$plan" --topology "$topo" --model gpt2-124M --pp 4 --energy-plan-out "$wd/link.json" >"$wd/b.out" 2>&1 || rc=$?
check "--energy-plan-out to a symbolic link is refused before planning, one line, status 2 ($rc)" \
    sh -c "[ $rc -eq 2 ] && [ \$(wc -l <'$wd/b.out') -eq 1 ] && grep -q 'symbolic link' '$wd/b.out' && [ ! -e '$wd/victim' ]"

# --energy-profile: a measured profile (random times and energies) of pp=4
seed=$(od -An -N4 -tu4 /dev/urandom | tr -d ' ')
profile() { # FILE PP
    jq -n --argjson pp "$2" --argjson seed "$seed" '
        def rnd($i): (($seed + $i * 7919) * 48271 % 2147483647) / 2147483647;
        {format: "ptrain-energy-profile", version: 1, modelled: false, basis: "measured: test", device: "gpu",
         schedule: "1f1b", pp: $pp, virtual_stages: 1, microbatches: 8, plan: "", idle_w: (50 + 50 * rnd(1)),
         types: [range(0; 2 * $pp) as $t | {type: $t, rank: ($t / 2 | floor), chunk: 0, bwd: ($t % 2 == 1),
             choices: [range(0; 5) as $k | (0.01 + 0.01 * rnd($t * 13 + 3)) as $t0 |
                 {freq_mhz: (1000 + 200 * $k), time_s: ($t0 * (1 + 0.15 * (4 - $k))),
                  energy_j: ($t0 * (250 + 100 * $k) * (1 + 0.1 * rnd($t * 5 + $k)))}]}]}' >"$1"
}
profile "$wd/prof4.json" 4
rc=0
"$plan" --topology "$topo" --model gpt2-124M --pp 4 --batch 32 --energy-profile "$wd/prof4.json" --json \
    --energy-plan-out "$wd/mplan.json" >"$wd/m.json" 2>"$wd/m.err" || rc=$?
check "--energy-profile with a measured pp=4 profile exits 0 ($rc$([ $rc -eq 0 ] || echo ": $(head -c 200 "$wd/m.err")"))" [ "$rc" -eq 0 ]
check "... the JSON names the profile, not a power model, and is not modelled" \
    jqe --arg p "$wd/prof4.json" '.energy.profile == $p and .energy.power_model == null and (.energy.modelled | not)' "$wd/m.json"
check "... the intrinsic point is no slower than max clock and no dearer" \
    jqe '.energy.intrinsic.time_s <= .energy.max_clock.time_s * (1 + 1e-9) and .energy.intrinsic.energy_j <= .energy.max_clock.energy_j' "$wd/m.json"
check "... the plan file uses the profile's clocks only" \
    jqe '(.modelled | not) and all(.instructions[]; .freq_mhz == 1000 or .freq_mhz == 1200 or .freq_mhz == 1400
        or .freq_mhz == 1600 or .freq_mhz == 1800)' "$wd/mplan.json"
"$plan" --topology "$topo" --model gpt2-124M --pp 4 --batch 32 --energy-profile "$wd/prof4.json" >"$wd/m.txt" 2>&1
check "... the table says profile FILE and measured" grep -q "profile $wd/prof4.json, measured)" "$wd/m.txt"
profile "$wd/prof2.json" 2
for bad in "--energy-profile $wd/prof2.json:the energy profile was made with pp=2 virtual_stages=1, the plan has pp=4" \
           "--energy-profile $wd/nonexistent.json:--energy-profile: " \
           "--energy-profile $wd/prof4.json --power-model gpu:--power-model and --energy-profile exclude each other"; do
    opt=${bad%%:*} want=${bad#*:}
    rc=0
    # shellcheck disable=SC2086
    "$plan" --topology "$topo" --model gpt2-124M --pp 4 --batch 32 $opt >"$wd/b.out" 2>&1 || rc=$?
    check "$(echo "$opt" | sed "s|$wd/||g") is refused in one line, status 2 ($rc: $(head -c 160 "$wd/b.out"))" \
        sh -c "[ $rc -eq 2 ] && [ \$(wc -l <'$wd/b.out') -eq 1 ] && grep -qF -- \"$want\" '$wd/b.out'"
done
# times far apart: each run under `timeout`, so a planner that does not end
# fails here.  A clock at 1e6 s (found by fuzzing; the input is in
# tests/fuzz/regress/energy_json/): refused in one line, where it kept
# ptrain-plan busy for hours
fz="$top_srcdir/tests/fuzz/regress/energy_json/profile-slowest-clock-1e6s.json"
rc=0
timeout 60 "$plan" --topology "$topo" --model gpt2-124M --pp 4 --batch 32 --energy-profile "$fz" >"$wd/b.out" 2>&1 || rc=$?
check "--energy-profile with one clock at 1e6 s: status 2 within 60 s, one line naming the clock and the limit ($rc: $(head -c 300 "$wd/b.out"))" \
    sh -c "[ $rc -eq 2 ] && [ \$(wc -l <'$wd/b.out') -eq 1 ] &&
        grep -qF 'type 3 (rank 1 chunk 0 backward) clock 0 takes 1e+06 s' '$wd/b.out' &&
        grep -qF 'at most 1000 times its fastest' '$wd/b.out'"
# every clock of one type 1e7 times slower than the others' (each within
# its own range): planned in units of 1/1e6 of the slowest iteration
jq '.types[3].choices |= map(.time_s *= 1e7)' "$wd/prof4.json" >"$wd/slow3.json"
rc=0
timeout 60 "$plan" --topology "$topo" --model gpt2-124M --pp 4 --batch 32 --energy-profile "$wd/slow3.json" --json \
    >"$wd/s.json" 2>"$wd/s.err" || rc=$?
check "--energy-profile with type 3 1e7 times slower: exit 0 within 60 s ($rc$([ $rc -eq 0 ] || echo ": $(head -c 200 "$wd/s.err")"))" [ "$rc" -eq 0 ]
check "... in units of at least 1/1e6 of the max-clock time, the intrinsic point no slower and no dearer than max clock" \
    sh -c "[ $rc -eq 0 ] && jq -e '.energy.tau_s * 1e6 >= .energy.max_clock.time_s and
        .energy.intrinsic.time_s <= .energy.max_clock.time_s * (1 + 1e-9) and
        .energy.intrinsic.energy_j <= .energy.max_clock.energy_j' '$wd/s.json' >/dev/null"

# a profile of 8 GiB (sparse): refused from its size, before it is read; under
# an address-space limit, so that reading it whole fails rather than takes the
# machine's memory (not under ASan, which reserves terabytes)
truncate -s 8G "$wd/big.json"
lim="ulimit -v 3000000 &&"
grep -qa __asan_init "$plan" "$top_builddir/.libs/ptrain-plan" 2>/dev/null && lim=
rc=0
sh -c "$lim exec \"\$@\"" _ "$plan" --topology "$topo" --model gpt2-124M --pp 4 --batch 32 \
    --energy-profile "$wd/big.json" >"$wd/b.out" 2>&1 || rc=$?
check "--energy-profile of an 8 GiB sparse file: status 2, one line naming the file, its size and the limit ($rc: $(head -c 200 "$wd/b.out"))" \
    sh -c "[ $rc -eq 2 ] && [ \$(wc -l <'$wd/b.out') -eq 1 ] &&
        grep -qF '$wd/big.json is 8589934592 bytes, more than the 67108864 bytes allowed' '$wd/b.out'"
rm -f "$wd/big.json"
done_testing
