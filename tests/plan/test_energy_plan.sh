#!/bin/sh
# ptrain-plan --energy (issue 26): the chosen plan's time-energy frontier
# on a fixture: JSON ordered by time with falling energy, the intrinsic
# point at the max-clock time and cheaper, the deadline point within its
# slowdown; the table marks the model "modelled"; bad options in one line.
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
done_testing
