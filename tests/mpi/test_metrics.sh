#!/bin/sh
# SPDX-License-Identifier: MIT
# ptrain-run --metrics: rank 0 writes one JSON object per step and per
# validation (JSON Lines) whose numbers are the ones the progress lines
# print; the step lines carry an ETA; ptrain-plot draws the curves; bad
# paths and bad metrics files get one line and status 2.
. "$top_srcdir/tests/lib.sh"
plot="$top_builddir/ptrain-plot"
need_run
need_mpirun
need_jq
workdir
fresh_seed
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

# the cost fields: achieved model GFLOP/s per rank, peak
# memory and bytes per group, gathered from every rank each step (a
# collective on rank 0 alone would hang this run, not pass it)
check "every train record has gflops_per_rank = tok_s * flops_per_token / world / 1e9" \
    sh -c "jq -s -e '(.[0].flops_per_token) as \$f | (.[0].world) as \$w | [.[] | select(.type == \"train\")]
        | length == 4 and all(.gflops_per_rank > 0 and ((.gflops_per_rank - .tok_s * \$f / \$w / 1e9) | fabs)
          <= 1e-3 * .gflops_per_rank + 1e-4)' '$wd/m.jsonl' >/dev/null"
check "without a peak given, the node model's GEMM rate is the peak: named in the header, mfu = gflops_per_rank / peak on every train record and the done record" \
    sh -c "jq -s -e '(.[0].peak_gflops_per_rank) as \$p | \$p > 0
        and (.[0].peak_source | startswith(\"the node model\"))
        and all(.[] | select(.type == \"train\"); ((.mfu - .gflops_per_rank / \$p) | fabs) <= 1e-3 * .mfu + 1e-9)
        and ([.[] | select(.type == \"done\")][0].mfu > 0)' '$wd/m.jsonl' >/dev/null"
check "peak_mib is positive, never falls, and ends at the summary's peak (max over ranks)" \
    sh -c "jq -s -e '[.[] | select(.type == \"train\") | .peak_mib] as \$p | [.[] | select(.type == \"done\")][0] as \$d
        | (\$p[0] > 0) and (\$p == (\$p | sort)) and ((\$p[-1] - \$d.peak_mib_per_rank) | fabs) < 0.011' '$wd/m.jsonl' >/dev/null"
check "sent_bytes names the dp, tp, pp, sp, sync and world groups with whole byte counts" \
    sh -c "jq -s -e 'all(.[] | select(.type == \"train\"); (.sent_bytes | keys) == [\"dp\",\"pp\",\"sp\",\"sync\",\"tp\",\"world\"]
        and all(.sent_bytes[]; . >= 0 and . == floor))' '$wd/m.jsonl' >/dev/null"
# dp=2, no tp/pp/sp: the traffic is the gradient sum (sync group) and the
# loss/norm reductions; summed over groups it is what the summary counts
# per step (pt_pctx_sent_total of rank 0; both ranks send the same here)
bytes=$(jq -r 'select(.type == "train") | .sent_bytes | "\(.sync) \(.tp) \(.pp) \(.sp)"' "$wd/m.jsonl" | tail -n 1)
check "dp-only run: gradient bytes in sync, none in tp/pp/sp ($bytes)" \
    sh -c "set -- $bytes; [ \"\$1\" -gt 0 ] && [ \"\$2\" = 0 ] && [ \"\$3\" = 0 ] && [ \"\$4\" = 0 ]"
check "the groups' bytes add up to the summary's MiB/step" \
    sh -c "jq -s -e '([.[] | select(.type == \"train\") | [.sent_bytes[]] | add] | add / length / 1048576) as \$g
        | ([.[] | select(.type == \"done\")][0].comm_mib_per_step_per_rank) as \$c | ((\$g - \$c) | fabs) <= 0.0006' '$wd/m.jsonl' >/dev/null"

# MFU against a stated peak: --peak-gflops, else PTRAIN_PEAK_GFLOPS
rc=0
PTRAIN_PEAK_GFLOPS=7.5 ptrain_mpirun -np 2 "$run" --model test --data "synthetic:$seed" --steps 2 --batch 4 \
    --val-every 0 --val-batches 1 --metrics "$wd/p.jsonl" >"$wd/pout1" 2>&1 || rc=$?
check "PTRAIN_PEAK_GFLOPS=7.5: mfu = gflops_per_rank / 7.5 on every train record (status $rc)" \
    sh -c "[ $rc -eq 0 ] && jq -s -e '.[0].peak_gflops_per_rank == 7.5 and .[0].peak_source == \"PTRAIN_PEAK_GFLOPS\" and all(.[] | select(.type == \"train\");
        ((.mfu - .gflops_per_rank / 7.5) | fabs) <= 1e-3 * .mfu + 1e-6)' '$wd/p.jsonl' >/dev/null"
check "... and the summary line shows MFU" grep -q '^done: .*| MFU [0-9.]*%$' "$wd/pout1"
rc=0
PTRAIN_PEAK_GFLOPS=7.5 ptrain_mpirun -np 1 "$run" --model test --data "synthetic:$seed" --steps 1 --batch 2 \
    --val-batches 1 --peak-gflops 300 --metrics "$wd/p2.jsonl" >/dev/null 2>&1 || rc=$?
check "--peak-gflops overrides the variable (status $rc)" \
    sh -c "[ $rc -eq 0 ] && jq -s -e '.[0].peak_gflops_per_rank == 300 and .[0].peak_source == \"--peak-gflops\"' '$wd/p2.jsonl' >/dev/null"
rc=0
PTRAIN_PEAK_GFLOPS=fast ptrain_mpirun -np 1 "$run" --model test --data synthetic --steps 1 >"$wd/pout3" 2>&1 || rc=$?
check "a bad PTRAIN_PEAK_GFLOPS is refused with status 2, naming it ($(grep -m1 error "$wd/pout3"))" \
    sh -c "[ $rc -eq 2 ] && grep -q \"PTRAIN_PEAK_GFLOPS: 'fast'\" '$wd/pout3'"

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

# a write that fails mid-run (a full disk, here a file-size limit of 2000 bytes:
# write gets EFBIG): one line naming the file, the file ends with its last
# whole record (valid JSON Lines, no torn line), training goes on to the
# end, status 1 (the line was once torn and the status 0)
if command -v prlimit >/dev/null 2>&1; then
    rc=0
    OMPI_MCA_btl=self ptrain_mpirun -np 1 prlimit --fsize=2000 "$run" --model test --data "synthetic:$seed" --steps 8 \
        --batch 4 --val-every 2 --val-batches 1 --metrics "$wd/full.jsonl" >"$wd/fout" 2>"$wd/ferr" || rc=$?
    check "a metrics write failure: status 1 ($rc), one line naming the file" \
        sh -c "[ $rc -eq 1 ] && [ \$(grep -c 'cannot write the metrics file $wd/full.jsonl' '$wd/ferr') -eq 1 ]"
    check "... the run still trained to the end" grep -q '^done: steps=8' "$wd/fout"
    check "... the file is whole records only ($(wc -c <"$wd/full.jsonl") bytes, $(wc -l <"$wd/full.jsonl") lines)" \
        sh -c "[ -s '$wd/full.jsonl' ] && [ \$(tail -c 1 '$wd/full.jsonl' | od -An -c | tr -d ' ') = '\\n' ] &&
            jq -e 'type == \"object\"' '$wd/full.jsonl' >/dev/null"
else
    ok "# SKIP prlimit not installed (util-linux)"
fi

# a resumed run: its first validation is at the
# step it resumes from, its train_loss starts at its own first step (not
# nan), its ms/step are over its own steps; resumed at its last step it ran
# no step: valid JSON (null, never inf) and "no step run"
ptrain_mpirun -np 1 "$run" --model test --data "synthetic:$seed" --steps 4 --batch 4 --val-every 0 --val-batches 1 \
    --save-dir "$wd/ck" >/dev/null 2>&1
rc=0
ptrain_mpirun -np 1 "$run" --model test --data "synthetic:$seed" --steps 6 --batch 4 --val-every 0 --val-batches 1 \
    --save-dir "$wd/ck" --resume auto --metrics "$wd/r.jsonl" >"$wd/rout" 2>&1 || rc=$?
check "resumed at step 4 of 6: status 0 ($rc), first validation labelled step 4" \
    sh -c "[ $rc -eq 0 ] && [ \"\$(grep -m1 '^val:' '$wd/rout' | cut -d'|' -f1)\" = 'val: step 4 ' ]"
check "... its train_loss starts from a number ($(grep '^done' "$wd/rout" | cut -d'|' -f1))" \
    sh -c "grep '^done:' '$wd/rout' | grep -q 'train_loss [0-9][0-9.]* -> [0-9]'"
check "... its done record counts 2 steps run from step 4" \
    sh -c "jq -s -e 'map(select(.type == \"done\"))[0] | .steps_run == 2 and .start_step == 4 and (.ms_per_step | type) == \"number\"' '$wd/r.jsonl' >/dev/null"
rc=0
ptrain_mpirun -np 1 "$run" --model test --data "synthetic:$seed" --steps 6 --batch 4 --val-every 0 --val-batches 1 \
    --save-dir "$wd/ck" --resume auto --metrics "$wd/r2.jsonl" >"$wd/rout2" 2>&1 || rc=$?
check "resumed at its last step: status 0 ($rc), 'no step run', valid JSON with nulls" \
    sh -c "[ $rc -eq 0 ] && grep -q 'no step run (resumed at step 6)' '$wd/rout2' &&
        jq -s -e 'map(select(.type == \"done\"))[0] | .steps_run == 0 and .ms_per_step == null and .tok_s == null' '$wd/r2.jsonl' >/dev/null"

# the plot
if command -v gnuplot >/dev/null 2>&1; then
    check "ptrain-plot writes an SVG" sh -c "sh '$plot' -o '$wd/loss.svg' '$wd/m.jsonl' >/dev/null"
    check "the SVG has both loss curves and the lr/norm panel" \
        sh -c "grep -q 'training loss' '$wd/loss.svg' && grep -q 'validation loss' '$wd/loss.svg' && grep -q 'gradient norm' '$wd/loss.svg'"
    check "ptrain-plot writes a PNG by the extension" sh -c "sh '$plot' -o '$wd/loss.png' '$wd/m.jsonl' >/dev/null && [ -s '$wd/loss.png' ]"
    # the PNG's loss panel (ptrain-plot's fixed layout: x 0.12..0.76, y
    # 0.67..0.93 of 900 x 900) decoded by gnuplot itself: pixels of the
    # training curve's colour (#0060ad) and the validation curve's (#dd181f)
    pixels() { # PNG R G B -> count inside the loss panel, 3 px in from the border
        gnuplot -e "set table '$wd/px.tab'; plot '$1' binary filetype=png with rgbimage" >/dev/null 2>&1 || { echo -1; return; }
        awk -v r="$2" -v g="$3" -v b="$4" '$1 ~ /^[0-9]+$/ && $1 > 0.12*900+3 && $1 < 0.76*900-3 &&
            $2 > 0.67*900+3 && $2 < 0.93*900-3 && $3 == r && $4 == g && $5 == b { n++ } END { print n + 0 }' "$wd/px.tab"
    }
    tr=$(pixels "$wd/loss.png" 0 96 173) va=$(pixels "$wd/loss.png" 221 24 31)
    check "the PNG's loss panel has the training curve drawn ($tr pixels) and the validation curve ($va)" \
        [ "$tr" -ge 200 -a "$va" -ge 200 ]
    grep -v '"type":"val"' "$wd/m.jsonl" >"$wd/noval.jsonl"
    sh "$plot" -o "$wd/noval.png" "$wd/noval.jsonl" >/dev/null 2>&1
    nv=$(pixels "$wd/noval.png" 221 24 31) nt=$(pixels "$wd/noval.png" 0 96 173)
    check "control: without validation records no validation pixels there ($nv), the training curve still ($nt)" \
        [ "$nv" -eq 0 -a "$nt" -ge 200 ]
    # several runs on one chart, labelled by plan, and the throughput panel
    sed 's/"plan":"[^"]*"/"plan":"other plan"/' "$wd/m.jsonl" >"$wd/m2.jsonl"
    check "two metrics files on one SVG, labelled by their plans, with a tokens/s panel" \
        sh -c "sh '$plot' -o '$wd/two.svg' '$wd/m.jsonl' '$wd/m2.jsonl' | grep -q '2 files' &&
            grep -q 'other plan train' '$wd/two.svg' && grep -q 'mode=1d.* val' '$wd/two.svg' && grep -q 'tokens/s' '$wd/two.svg'"
    check "--label file labels the curves by file name" \
        sh -c "sh '$plot' --label file -o '$wd/two.png' '$wd/m.jsonl' '$wd/m2.jsonl' >/dev/null && [ -s '$wd/two.png' ] &&
            sh '$plot' --label file -o '$wd/two2.svg' '$wd/m.jsonl' '$wd/m2.jsonl' >/dev/null && grep -q 'm2 train' '$wd/two2.svg'"
    echo "not json" >"$wd/bad.jsonl"
    rc=0
    sh "$plot" -o "$wd/bad.svg" "$wd/bad.jsonl" >"$wd/pout" 2>&1 || rc=$?
    check "ptrain-plot refuses a file that is not metrics with one line, status 2 ($(cat "$wd/pout"))" \
        sh -c "[ $rc -eq 2 ] && [ \$(wc -l <'$wd/pout') -eq 1 ] && grep -q bad.jsonl '$wd/pout'"
else
    ok "# SKIP gnuplot not installed (apt-get install gnuplot-nox)"
fi
done_testing
