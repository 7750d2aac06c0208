#!/bin/sh
# ptrain-run --metrics: rank 0 writes one JSON object per step and per
# validation (JSON Lines) whose numbers are the ones the progress lines
# print; the step lines carry an ETA; ptrain-plot draws the curves; bad
# paths and bad metrics files get one line and status 2.
. "$top_srcdir/tests/lib.sh"
run="$top_builddir/ptrain-run"
plot="$top_builddir/ptrain-plot"
[ -x "$run" ] || skip_all "ptrain-run not built"
command -v "${MPIRUN:-mpirun}" >/dev/null 2>&1 || skip_all "mpirun not found"
command -v jq >/dev/null 2>&1 || skip_all "jq not installed (apt-get install jq)"
wd=$(mktemp -d)
trap 'rm -rf "$wd"' EXIT
seed=$(( $(date +%s) % 100000 ))
diag "data seed $seed"

rc=0
ptrain_mpirun -np 2 "$run" --model test --data "synthetic:$seed" --steps 4 --batch 4 --val-every 2 \
    --val-batches 1 --metrics "$wd/m.jsonl" >"$wd/out" 2>"$wd/err" || rc=$?
check "a 2-rank run with --metrics exits 0" [ "$rc" -eq 0 ]
[ "$rc" -eq 0 ] || diag "$(tail -n 3 "$wd/err" | tr '\n' ' ')"
check "every line of the metrics file is a JSON object" sh -c "jq -e 'type == \"object\"' '$wd/m.jsonl' >/dev/null"
n() { jq -c "select(.type == \"$1\")" "$wd/m.jsonl" | wc -l; }
counts="$(n header)/$(n train)/$(n val)/$(n done)"
check "one header, 4 train, 3 val (steps 0, 2, 4), one done record ($counts)" [ "$counts" = 1/4/3/1 ]
check "written by rank 0 only: the header comes once, first" \
    sh -c "head -n 1 '$wd/m.jsonl' | jq -e '.type == \"header\" and .world == 2 and .steps == 4' >/dev/null"
# the same numbers as the progress lines (4 decimals printed there)
printed=$(sed -n 's/^step *\([0-9]*\)\/4 | loss \([0-9.]*\) .*/\1 \2/p' "$wd/out" | tr '\n' ' ')
logged=$(jq -r 'select(.type == "train") | "\(.step) \(.loss * 10000 | round / 10000)"' "$wd/m.jsonl" |
    awk '{printf "%d %.4f ", $1, $2}')
check "train losses equal the printed ones ($logged)" [ -n "$printed" -a "$printed" = "$logged" ]
pv=$(sed -n 's/^val: step \([0-9]*\) | val_loss \([0-9.]*\)/\1 \2/p' "$wd/out" | tr '\n' ' ')
lv=$(jq -r 'select(.type == "val") | "\(.step) \(.val_loss)"' "$wd/m.jsonl" | awk '{printf "%d %.4f ", $1, $2}')
check "validation losses equal the printed ones ($lv)" [ -n "$pv" -a "$pv" = "$lv" ]
check "steps, learning rates and elapsed times increase" \
    sh -c "jq -s -e '[.[] | select(.type == \"train\")] as \$t | (\$t | map(.step)) == [1,2,3,4]
        and (\$t[0].lr > \$t[3].lr) and ([\$t[].elapsed_s] == ([\$t[].elapsed_s] | sort))' '$wd/m.jsonl' >/dev/null"
check "the step lines carry an ETA, 0s on the last" \
    sh -c "[ \$(grep -c '^step .*| eta [0-9hms]*\$' '$wd/out') -eq 4 ] && grep '^step *4/4' '$wd/out' | grep -q 'eta 0s\$'"

# bad paths: one line naming the file, no training
ln -s "$wd/target" "$wd/link"
rc=0
ptrain_mpirun -np 1 "$run" --model test --data synthetic --steps 1 --metrics "$wd/link" >"$wd/out2" 2>&1 || rc=$?
check "a symlink as metrics file is refused (status $rc), its target not created" [ "$rc" -ne 0 -a ! -e "$wd/target" ]
check "... with one line naming it" grep -q "metrics file $wd/link" "$wd/out2"
rc=0
ptrain_mpirun -np 1 "$run" --model test --data synthetic --steps 1 --metrics "$wd/no/such/dir/m.jsonl" >"$wd/out3" 2>&1 || rc=$?
check "an unwritable metrics path is refused before training (status $rc)" \
    sh -c "[ $rc -ne 0 ] && ! grep -q '^step ' '$wd/out3'"

# the plot
if command -v gnuplot >/dev/null 2>&1; then
    check "ptrain-plot writes an SVG" sh -c "sh '$plot' -o '$wd/loss.svg' '$wd/m.jsonl' >/dev/null"
    check "the SVG has both loss curves and the lr/norm panel" \
        sh -c "grep -q 'training loss' '$wd/loss.svg' && grep -q 'validation loss' '$wd/loss.svg' && grep -q 'gradient norm' '$wd/loss.svg'"
    check "ptrain-plot writes a PNG by the extension" sh -c "sh '$plot' -o '$wd/loss.png' '$wd/m.jsonl' >/dev/null && [ -s '$wd/loss.png' ]"
    echo "not json" >"$wd/bad.jsonl"
    rc=0
    sh "$plot" -o "$wd/bad.svg" "$wd/bad.jsonl" >"$wd/pout" 2>&1 || rc=$?
    check "ptrain-plot refuses a file that is not metrics with one line, status 2 ($(cat "$wd/pout"))" \
        sh -c "[ $rc -eq 2 ] && [ \$(wc -l <'$wd/pout') -eq 1 ] && grep -q bad.jsonl '$wd/pout'"
else
    ok "# SKIP gnuplot not installed (apt-get install gnuplot-nox)"
fi
done_testing
