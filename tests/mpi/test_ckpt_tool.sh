#!/bin/sh
# SPDX-License-Identifier: MIT
# ptrain-ckpt (info, verify, convert):
#  - checkpoints saved by ptrain-run under 1 rank, tp=2, pp=2 and ZeRO-1
#    dp=2 convert to llm.c's .bin; the file equals, byte for byte, one built
#    here from the 1-rank rank file of the same state (ptrain-run --resume
#    resharding to 1 rank) in llm.c's tensor order with dd; .bin -> checkpoint
#    -> .bin is identical; the plans' files agree to float tolerance;
#  - an llm.c file written by tests/mpi/llmc_tool (random values, header
#    20240326 version 3, padded vocabulary) loads: its tensors land at
#    ptrain's names (the same dd construction), at Hugging Face's names in
#    the safetensors file (llmc_tool check-st, Conv1D transposed), and
#    ptrain-run fine-tunes from the converted checkpoint (step 0);
#  - verify accepts sound checkpoints and reports a flipped byte, a
#    truncated file, a missing rank file and a missing manifest, one line
#    each, exit 1;
#  - the safetensors header parses (jq) with the expected names, shapes and
#    contiguous offsets, and the file size is 8 + header + data;
#  - bad inputs: one line, exit 2; ptrain-run's refusal of a checkpoint
#    whose rank-1 file is corrupt names rank 1 (not rank 0);
#  - resuming with the saved schedule gives no warning.
. "$top_srcdir/tests/lib.sh"
run="$top_builddir/ptrain-run"
ck="$top_builddir/ptrain-ckpt"
tool="$top_builddir/tests/mpi/llmc_tool"
[ -x "$run" ] && [ -x "$ck" ] && [ -x "$tool" ] || skip_all "ptrain-run, ptrain-ckpt or llmc_tool not built"
need_mpirun
need_jq
workdir
fresh_seed
diag "data seed $seed, init seed $init"
nolsan="ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
ckpt() { env "$nolsan" "$ck" "$@"; }
# the test model with a vocabulary llm.c pads (500 -> 512)
L=2 NH=4 C=64 T=32 V=500 VP=512
# AdamW's eps is 1e-2: with the default 1e-8 a first step moves each
# parameter by lr * sign(g), and a gradient near zero whose sign differs in
# the last bit between two layouts' summation orders moves it 2 lr apart
# (data seed 27176 under the sanitizer build: 1.1e-4 at 3 steps)
common="--model test --vocab $V --data synthetic:$seed --seed $init --batch 4 --val-every 0 --val-batches 1 --quiet --adam-eps 1e-2"

# expected_llmc CKPT HEADER OUT: llm.c's file from a 1-rank checkpoint's
# rank file (parameters are the first third of each tensor's record), in
# llm.c's order (wte, wpe, then each per-layer kind for all layers, lnf),
# wte padded with zero rows to VP, after the 1024-byte header taken from HEADER
expected_llmc() {
    jq -r '.files[0].tensors[] | "\(.index) \(.offset) \(.hi - .lo)"' "$1/manifest.json" >"$wd/idx"
    head -c 1024 "$2" >"$3"
    order="0 1"
    for k in 0 1 2 3 4 5 6 7 8 9 10 11; do
        l=0
        while [ $l -lt $L ]; do order="$order $((2 + 12 * l + k))"; l=$((l + 1)); done
    done
    order="$order $((2 + 12 * L)) $((3 + 12 * L))"
    for i in $order; do
        awk -v i="$i" '$1 == i { print $2, $3 }' "$wd/idx" >"$wd/idx1"
        read -r off n <"$wd/idx1"
        dd if="$1/rank-00000.bin" bs=4 skip=$((off / 4)) count="$n" status=none >>"$3"
        [ "$i" -ne 0 ] || head -c $(( (VP - V) * C * 4 )) /dev/zero >>"$3"
    done
}
header_ints() { od -An -td4 -N32 "$1" | tr -s ' \n' ' ' | sed 's/^ //; s/ $//'; }

plan_case() { # TAG NP PLAN-FLAGS...
    tag=$1; np=$2; shift 2
    pd="$wd/$tag"
    mkdir -p "$pd"
    rc=0
    ptrain_mpirun -np "$np" "$run" $common --steps 3 "$@" --save-dir "$pd/s" >"$pd/run.out" 2>&1 || rc=$?
    check "[$tag] ptrain-run saves step 3 (status $rc)" [ "$rc" -eq 0 -a -f "$pd/s/step-00000003/manifest.json" ]
    [ "$rc" -eq 0 ] || { diag "$(tail -n 3 "$pd/run.out")"; return; }
    out=$(ckpt verify "$pd/s" 2>&1); rc=$?
    check "[$tag] verify: sound (status $rc: $out)" [ "$rc" -eq 0 ]
    ckpt info "$pd/s" >"$pd/info" 2>&1; rc=$?
    check "[$tag] info names step, model, plan, files and tensors (status $rc)" \
        sh -c "[ $rc -eq 0 ] && grep -q '^step: 3 (AdamW step 3)' '$pd/info' && grep -q '^model: test L=$L H=$NH C=$C T=$T V=$V' '$pd/info' &&
               grep -q '^plan: .*world $np' '$pd/info' && grep -q '^files: $np,' '$pd/info' && grep -q '^tensors: $((4 + 12 * L))' '$pd/info'"
    ckpt convert "$pd/s" "$pd/a.bin" >"$pd/conv.out" 2>&1; rc=$?
    check "[$tag] convert to llm.c .bin (status $rc)" [ "$rc" -eq 0 ]
    check "[$tag] the llm.c header: 20240326 3 maxT V L NH C Vp ($(header_ints "$pd/a.bin"))" \
        [ "$(header_ints "$pd/a.bin")" = "20240326 3 $T $V $L $NH $C $VP" ]
    # the same state on 1 rank: ptrain-run resumes (reshards) and saves it again at step 3
    if [ "$np" -eq 1 ]; then one="$pd/s/step-00000003"; else
        rc=0
        ptrain_mpirun -np 1 "$run" $common --steps 3 --resume "$pd/s" --save-dir "$pd/one" >"$pd/one.out" 2>&1 || rc=$?
        check "[$tag] resumed on 1 rank and saved (status $rc)" [ "$rc" -eq 0 -a -f "$pd/one/step-00000003/manifest.json" ]
        check "[$tag] the same schedule: no warning" sh -c "! grep -q warning '$pd/one.out'"
        one="$pd/one/step-00000003"
    fi
    expected_llmc "$one" "$pd/a.bin" "$pd/expect.bin"
    check "[$tag] the .bin equals the saved parameters in llm.c's order, bit for bit ($(stat -c %s "$pd/a.bin") bytes)" \
        cmp -s "$pd/a.bin" "$pd/expect.bin"
    ckpt convert "$pd/a.bin" "$pd/back" >/dev/null 2>&1 && ckpt convert "$pd/back" "$pd/b.bin" >/dev/null 2>&1; rc=$?
    check "[$tag] .bin -> checkpoint -> .bin is identical (status $rc)" sh -c "[ $rc -eq 0 ] && cmp -s '$pd/a.bin' '$pd/b.bin'"
}
plan_case one 1
plan_case tp2 2 --tp 2
plan_case pp2 2 --pp 2
plan_case zero1 2 --dp 2 --zero 1
# the four plans trained the same model: their files agree to float tolerance
for tag in tp2 pp2 zero1; do
    out=$("$tool" close "$wd/one/a.bin" "$wd/$tag/a.bin" 1e-5 2>&1); rc=$?
    check "[$tag] its .bin matches the 1-rank run's to 1e-5 ($out)" [ "$rc" -eq 0 ]
done

# ---- an llm.c file from the independent writer -------------------------------
w="$wd/w"; mkdir -p "$w"
"$tool" write "$w/w.bin" $L $NH $C $T $V $VP "$seed"
out=$(ckpt convert "$w/w.bin" "$w/ck" 2>&1); rc=$?
check "llm.c file -> checkpoint (status $rc: $out)" [ "$rc" -eq 0 -a -f "$w/ck/step-00000000/manifest.json" ]
check "the checkpoint is at step 0 with a fresh AdamW state" \
    sh -c "jq -e '.step == 0 and .adam_step == 0' '$w/ck/step-00000000/manifest.json' >/dev/null"
expected_llmc "$w/ck/step-00000000" "$w/w.bin" "$w/expect.bin"
check "its tensors land at ptrain's names (rank file in llm.c order == the written file)" cmp -s "$w/w.bin" "$w/expect.bin"
# the comparison can fail: the writer's values are not zero
check "control: the written file has non-zero tensors" sh -c "! cmp -s -n 4096 -i 1024:0 '$w/w.bin' /dev/zero"
ckpt convert "$w/ck" "$w/w2.bin" >/dev/null 2>&1
check "checkpoint -> .bin equals the written file" cmp -s "$w/w.bin" "$w/w2.bin"
out=$(ckpt convert "$w/ck" "$w/w.safetensors" 2>&1); rc=$?
check "checkpoint -> safetensors (status $rc)" [ "$rc" -eq 0 ]
out=$("$tool" check-st "$w/w.bin" "$w/w.safetensors" 2>&1); rc=$?
check "every llm.c tensor is at its Hugging Face name, Conv1D weights transposed ($out)" [ "$rc" -eq 0 ]
ckpt convert --to safetensors "$w/w.bin" "$w/direct.st" >/dev/null 2>&1
check "llm.c -> safetensors directly gives the same file" cmp -s "$w/w.safetensors" "$w/direct.st"

# ---- llm.c's bf16 files (version 5) -------------------------------------------
# an independent bf16 writer (llmc_tool write-bf16: its own rounding) ->
# checkpoint -> version 5 again, bit for bit; -> version 3: every float the
# bf16 widened; a fp32 checkpoint -> version 5: every element rounded to
# nearest even (llmc_tool check-round, written from IEEE 754's rule)
"$tool" write-bf16 "$w/w5.bin" $L $NH $C $T $V $VP "$seed"
out=$(ckpt convert "$w/w5.bin" "$w/ck5" 2>&1); rc=$?
check "llm.c bf16 (version 5) file -> checkpoint (status $rc: $out)" [ "$rc" -eq 0 -a -f "$w/ck5/step-00000000/manifest.json" ]
out=$(ckpt convert --dtype bf16 "$w/ck5" "$w/w5b.bin" 2>&1); rc=$?
check "... -> --dtype bf16 .bin says version 5 (status $rc: $out)" sh -c "[ $rc -eq 0 ] && printf '%s' '$out' | grep -q 'version 5 (bf16)'"
check "... and equals the written bf16 file, bit for bit" cmp -s "$w/w5.bin" "$w/w5b.bin"
check "control: the bf16 file's tensors are not zero" sh -c "! cmp -s -n 4096 -i 1024:0 '$w/w5.bin' /dev/zero"
ckpt convert "$w/ck5" "$w/w5f.bin" >/dev/null 2>&1
out=$("$tool" check-widen "$w/w5.bin" "$w/w5f.bin" 2>&1); rc=$?
check "... -> fp32 .bin (version 3): every float is the bf16 widened ($out)" [ "$rc" -eq 0 ]
out=$(ckpt convert --dtype bf16 "$w/ck" "$w/w3to5.bin" 2>&1); rc=$?
check "an fp32 checkpoint -> --dtype bf16 (status $rc)" [ "$rc" -eq 0 ]
out=$("$tool" check-round "$w/w.bin" "$w/w3to5.bin" 2>&1); rc=$?
check "... every element is the fp32 weight rounded to nearest even ($out)" [ "$rc" -eq 0 ]

# safetensors header: names, shapes, offsets, size
st="$w/w.safetensors"
hl=$(od -An -tu8 -N8 "$st" | tr -d ' ')
tail -c +9 "$st" | head -c "$hl" >"$w/hdr.json"
check "the header parses as JSON ($hl bytes, a multiple of 8)" sh -c "jq -e . '$w/hdr.json' >/dev/null && [ $((hl % 8)) -eq 0 ]"
want="wpe.weight:$T,$C wte.weight:$V,$C ln_f.bias:$C ln_f.weight:$C"
l=0
while [ $l -lt $L ]; do
    want="$want h.$l.ln_1.weight:$C h.$l.ln_1.bias:$C h.$l.attn.c_attn.weight:$C,$((3 * C)) h.$l.attn.c_attn.bias:$((3 * C))"
    want="$want h.$l.attn.c_proj.weight:$C,$C h.$l.attn.c_proj.bias:$C h.$l.ln_2.weight:$C h.$l.ln_2.bias:$C"
    want="$want h.$l.mlp.c_fc.weight:$C,$((4 * C)) h.$l.mlp.c_fc.bias:$((4 * C)) h.$l.mlp.c_proj.weight:$((4 * C)),$C h.$l.mlp.c_proj.bias:$C"
    l=$((l + 1))
done
want=$(printf '%s\n' $want | sort | tr '\n' ' ')
have=$(jq -r 'to_entries[] | select(.key != "__metadata__") | "\(.key):\(.value.shape | map(tostring) | join(","))"' "$w/hdr.json" | sort | tr '\n' ' ')
check "names and shapes are Hugging Face GPT-2's ($(echo "$have" | wc -w) tensors)" [ "$want" = "$have" ]
[ "$want" = "$have" ] || diag "want: $want; have: $have"
check "every tensor is F32 and its offsets span 4 bytes per element" \
    sh -c "jq -e '[to_entries[] | select(.key != \"__metadata__\") | .value | .dtype == \"F32\" and
        (.data_offsets[1] - .data_offsets[0]) == 4 * (.shape | reduce .[] as \$x (1; . * \$x))] | all' '$w/hdr.json' >/dev/null"
check "offsets are contiguous from 0" \
    sh -c "jq -e '[to_entries[] | select(.key != \"__metadata__\") | .value.data_offsets] | sort | . as \$o |
        \$o[0][0] == 0 and ([range(1; \$o | length) | \$o[.][0] == \$o[. - 1][1]] | all)' '$w/hdr.json' >/dev/null"
end=$(jq '[to_entries[] | select(.key != "__metadata__") | .value.data_offsets[1]] | max' "$w/hdr.json")
size=$(stat -c %s "$st")
check "file size $size == 8 + $hl + $end" [ "$size" -eq $((8 + hl + end)) ]

# fine-tuning from the converted checkpoint under another plan
rc=0
ptrain_mpirun -np 2 "$run" $common --steps 2 --tp 2 --resume "$w/ck" --save-dir "$w/ck" >"$w/ft.out" 2>&1 || rc=$?
check "ptrain-run --resume fine-tunes from it under tp=2 (status $rc)" \
    sh -c "[ $rc -eq 0 ] && grep -q '^resume: $w/ck/step-00000000 (step 0, AdamW step 0)' '$w/ft.out' && [ -f '$w/ck/step-00000002/manifest.json' ]"
[ "$rc" -eq 0 ] || diag "$(tail -n 3 "$w/ft.out")"
check "a converted llm.c checkpoint has no schedule to compare: no warning" sh -c "! grep -q 'warning: checkpoint' '$w/ft.out'"

# ---- verify catches corruption, one line each ---------------------------------
src="$wd/tp2/s/step-00000003"
corrupt() { rm -rf "$wd/bad"; cp -r "$src" "$wd/bad"; }
verify_one() { # DESCRIPTION PATTERN
    out=$(ckpt verify "$wd/bad" 2>&1); rc=$?
    n=$(printf '%s\n' "$out" | grep -c .)
    check "verify: $1: exit 1, one line ($out)" sh -c "[ $rc -eq 1 ] && [ $n -eq 1 ] && printf '%s' '$out' | grep -q '$2'"
}
if [ -d "$src" ]; then
    corrupt
    b=$(od -An -tu1 -j 1000 -N1 "$wd/bad/rank-00001.bin" | tr -d ' ')
    printf "\\$(printf %03o $(( (b + 1) % 256 )))" | dd of="$wd/bad/rank-00001.bin" bs=1 seek=1000 conv=notrunc status=none
    verify_one "a flipped byte" "rank-00001.bin has checksum"
    corrupt
    truncate -s -4 "$wd/bad/rank-00000.bin"
    verify_one "a truncated file" "rank-00000.bin has .* bytes, the manifest says"
    corrupt
    rm "$wd/bad/rank-00001.bin"
    verify_one "a missing rank file" "rank-00001.bin is missing"
    corrupt
    rm "$wd/bad/manifest.json"
    verify_one "a missing manifest" "no manifest.json"
    corrupt
    out=$(ckpt verify "$wd/bad" 2>&1); rc=$?
    check "control: the unmodified copy verifies ($rc)" [ "$rc" -eq 0 ]
    # ptrain-run refuses it naming the rank whose file is bad, not rank 0
    b=$(od -An -tu1 -j 2000 -N1 "$wd/bad/rank-00001.bin" | tr -d ' ')
    printf "\\$(printf %03o $(( (b + 1) % 256 )))" | dd of="$wd/bad/rank-00001.bin" bs=1 seek=2000 conv=notrunc status=none
    rc=0
    ptrain_mpirun -np 2 "$run" $common --steps 4 --tp 2 --resume "$wd/bad" >"$wd/bad.out" 2>&1 || rc=$?
    check "resume of a checkpoint with rank 1's file corrupted: one line naming rank 1, not rank 0 ($(grep 'ptrain-run: error' "$wd/bad.out"))" \
        sh -c "[ $rc -ne 0 ] && [ \$(grep -c 'ptrain-run: error' '$wd/bad.out') -eq 1 ] &&
               grep -q '^ptrain-run: error: --resume: rank 1: checkpoint .*rank-00001.bin has checksum' '$wd/bad.out'"
else
    not_ok "verify cases need the tp2 checkpoint"
fi

# ---- bad inputs: one line, exit 2 ---------------------------------------------
bad() { # DESCRIPTION PATTERN ARGS...
    desc=$1 pat=$2; shift 2
    out=$(ckpt "$@" 2>&1 >/dev/null); rc=$?
    n=$(printf '%s\n' "$out" | grep -c .)
    check "$desc: exit 2, one line ($out)" sh -c "[ $rc -eq 2 ] && [ $n -eq 1 ] && printf '%s' '$out' | grep -q '$pat'"
}
echo "not a model" >"$wd/text.bin"
bad "convert a short text file" "shorter than its 1024-byte header" convert "$wd/text.bin" "$wd/x.safetensors"
yes "not a model" | head -c 3000 >"$wd/text.bin"
bad "convert a text file" "magic .* (expected 20240326 version 3" convert "$wd/text.bin" "$wd/x.safetensors"
cp "$w/w.bin" "$wd/bf16.bin"; printf '\005' | dd of="$wd/bf16.bin" bs=1 seek=4 conv=notrunc status=none
bad "convert fp32 data under a version 5 (bf16) header" "version 5, .* needs" convert "$wd/bf16.bin" "$wd/x.safetensors"
cp "$w/w.bin" "$wd/v7.bin"; printf '\007' | dd of="$wd/v7.bin" bs=1 seek=4 conv=notrunc status=none
bad "convert a version 7 file" "version 7 (expected 20240326 version 3, fp32, or 5, bf16)" convert "$wd/v7.bin" "$wd/x.safetensors"
bad "convert --dtype fp16" "fp16.* is not one of fp32, bf16" convert --dtype fp16 "$w/ck" "$wd/x.bin"
bad "convert --dtype bf16 to safetensors" "dtype bf16 is for llm.c files" convert --dtype bf16 "$w/ck" "$wd/x.safetensors"
head -c 5000 "$w/w.bin" >"$wd/short.bin"
bad "convert a truncated llm.c file" "needs" convert "$wd/short.bin" "$wd/x.safetensors"
bad "convert --to an unknown format" "not one of llmc, safetensors, ckpt" convert --to onnx "$w/w.bin" "$wd/x"
bad "convert a checkpoint into a checkpoint" "already a checkpoint" convert "$w/ck" "$wd/x"
bad "info of a missing directory" "not a directory" info "$wd/nowhere"
bad "an unknown command" "unknown command" frobnicate
done_testing
