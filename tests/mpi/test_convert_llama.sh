#!/bin/sh
# SPDX-License-Identifier: MIT
# ptrain-ckpt convert of Hugging Face Llama-family models, against files
# written by an independent writer (tests/mpi/llama_st.py: struct and json,
# laid out as transformers' save_pretrained and safetensors' serialiser do):
#  - LlamaForCausalLM (GQA, tied and untied, a tied lm_head saved anyway,
#    Llama 3.1 rope_scaling), Qwen2ForCausalLM (q/k/v biases) and
#    MistralForCausalLM (no sliding window), F32, F16 (half subnormals,
#    signed zeros) and BF16, in one model.safetensors or sharded with
#    model.safetensors.index.json: converted to a checkpoint, every weight of
#    its rank file equals the Hugging Face tensors by name (k|v and gate|up
#    rows concatenated), AdamW state zero; converted back (--to hf), the
#    directory is the source's byte for byte (safetensors, index, config.json);
#  - --max-shard-size N from one file gives transformers' shards and index of
#    the same model, byte for byte; --dtype bf16 writes BF16;
#  - the manifest names the family and the spec; ptrain-ckpt verify accepts it;
#  - memory: a 340 MB model converts in and out within 64 MiB of info's
#    resident memory (streamed in blocks; no model is built);
#  - refusals (exit 2, one line naming the value): config fields ptrain does
#    not compute, tensors missing, misshapen, unknown, of another dtype, not
#    finite, a tied head that differs, an index naming another file, a
#    conflicting --model, llm.c's format for a llama checkpoint;
#  - ptrain-run --resume takes the model from the manifest (GPT-2) and refuses
#    a conflicting --model in one line;
#  - through lib/model's Llama: the converted checkpoint trains under
#    ptrain-run --resume (no --model); a trained checkpoint -> hf ->
#    checkpoint -> hf gives the same files; a dp=2 ZeRO-1 save converts
#    through the model (a one-rank holder, resharded by pt_ckpt_load) to the
#    same bytes as the one-rank resave streamed from its rank file; a
#    fine-tuned checkpoint goes out in the source's files, dtype and config.
. "$top_srcdir/tests/lib.sh"
run="$top_builddir/ptrain-run"
# ptrain-run as an MPI singleton: Open MPI's own allocations at exit are not
# ptrain's (the sanitizer pass; ptrain_mpirun does the same for mpirun)
run1() { ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" "$run" "$@"; }
ck="$top_builddir/ptrain-ckpt"
[ -x "$run" ] && [ -x "$ck" ] || skip_all "ptrain-run or ptrain-ckpt not built"
command -v python3 >/dev/null 2>&1 || skip_all "python3 not found"
workdir
fresh_seed
diag "seed $seed"
G="python3 $top_srcdir/tests/mpi/llama_st.py"
nolsan="ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
ckpt() { env "$nolsan" "$ck" "$@"; }
jget() { python3 -c "import json,sys; print(json.load(open(sys.argv[1]))$2)" "$1"; }
S="2 4 2 64 96 32 300"

# ---- in and out, bit for bit ----------------------------------------------------
variant() { # TAG DTYPE FLAGS...
    tag=$1 dt=$2; shift 2
    v="$wd/$tag"
    $G write "$v/src" $S $((seed + ${#tag})) "$dt" "$@"
    out=$(ckpt convert "$v/src" "$v/ck" 2>&1); rc=$?
    check "[$tag] $dt $* -> checkpoint (status $rc: $out)" [ "$rc" -eq 0 ]
    [ "$rc" -eq 0 ] || return
    m="$v/ck/step-00000000/manifest.json"
    check "[$tag] the manifest names the family llama" [ "$(jget "$m" "['model']['family']")" = llama ]
    out=$($G ckpt-equal "$v/src" "$v/ck/step-00000000" 2>&1); rc=$?
    check "[$tag] every weight equals the Hugging Face tensors by name ($out)" [ "$rc" -eq 0 ]
    out=$(ckpt verify "$v/ck" 2>&1); rc=$?
    check "[$tag] verify accepts it ($out)" [ "$rc" -eq 0 ]
    out=$(ckpt convert --to hf "$v/ck" "$v/out" 2>&1); rc=$?
    check "[$tag] checkpoint -> Hugging Face directory (status $rc: $out)" [ "$rc" -eq 0 ]
    out=$(diff -r "$v/src" "$v/out" 2>&1); rc=$?
    check "[$tag] the written directory is the source's, byte for byte ($out)" [ "$rc" -eq 0 ]
}
variant f32 F32
variant f32-sharded F32 --max-shard 60000
variant f16-tied F16 --tied
variant bf16-lmhead BF16 --tied --lm-head
variant qwen2 BF16 --arch qwen2 --tied --theta 1000000
variant mistral-sharded F16 --arch mistral --max-shard 100000
variant llama31 BF16 --rope-llama3 --theta 500000
out=$($G ckpt-equal "$wd/f32-sharded/src" "$wd/f32/ck/step-00000000" 2>&1); rc=$?
check "control: another model's weights differ ($out)" [ "$rc" -ne 0 ]

# one file -> transformers' shards, and --dtype
$G write "$wd/one/src" $S $((seed + 7)) F32
$G write "$wd/one/sharded" $S $((seed + 7)) F32 --max-shard 60000
ckpt convert "$wd/one/src" "$wd/one/ck" >/dev/null 2>&1
out=$(ckpt convert --to hf --max-shard-size 60000 "$wd/one/ck" "$wd/one/out" 2>&1); rc=$?
check "--max-shard-size 60000 (status $rc: $out)" [ "$rc" -eq 0 ]
out=$(diff -r "$wd/one/sharded" "$wd/one/out" 2>&1); rc=$?
check "its shards and index are transformers' of the same model, byte for byte ($out)" [ "$rc" -eq 0 ]
out=$(ckpt convert --to hf --dtype bf16 "$wd/one/ck" "$wd/one/bf16" 2>&1); rc=$?
dts=$($G dump "$wd/one/bf16" 2>/dev/null | awk '{print $2}' | sort -u | tr '\n' ' ')
check "--dtype bf16 writes BF16 tensors (status $rc, dtypes: $dts)" [ "$rc" -eq 0 ] && [ "$dts" = "BF16 " ]
out=$(ckpt convert "$wd/one/ck" "$wd/one/x.safetensors" 2>&1); rc=$?
check "a llama checkpoint to one .safetensors file (status $rc: $out)" [ "$rc" -eq 0 ] && [ -s "$wd/one/x.safetensors" ]

# ---- memory: streamed, so resident memory does not grow with the model -----------------
# (a 340 MB fp32 model: converting it in and out stays within 64 MiB of
# the resident memory of `ptrain-ckpt info` on a tiny checkpoint, the
# binary's own libraries; measured by hand on every tensor shape of
# llama3.1-8b, L=1 (1.27 G parameters, BF16): 218 MiB in and out, as info)
if [ -x /usr/bin/time ] && [ -z "${ASAN_OPTIONS:-}" ]; then
    $G write "$wd/mem/src" 2 16 4 1024 2816 64 32000 $seed F32 --fast
    rss() { /usr/bin/time -f "%M" -o "$wd/mem/rss" "$ck" "$@" >/dev/null 2>&1; cat "$wd/mem/rss"; }
    base=$(rss info "$wd/f32/ck") rin=$(rss convert "$wd/mem/src" "$wd/mem/ck") rout=$(rss convert --to hf "$wd/mem/ck" "$wd/mem/out")
    diag "resident KiB: info $base, convert in $rin, out $rout (model $(du -k "$wd/mem/src/model.safetensors" | cut -f1) KiB)"
    check "converting a 340 MB model in and out stays within 64 MiB of info's resident memory ($base: $rin, $rout KiB)" \
        [ "$rin" -le $((base + 65536)) ] && [ "$rout" -le $((base + 65536)) ]
    cmp -s "$wd/mem/src/model.safetensors" "$wd/mem/out/model.safetensors"; rc=$?
    check "... and back bit for bit" [ "$rc" -eq 0 ]
    rm -rf "$wd/mem"
fi

# ---- refusals: exit 2, one line naming the value ------------------------------------
bad() { # DESCRIPTION PATTERN ARGS...
    desc=$1 pat=$2; shift 2
    out=$(ckpt "$@" 2>&1 >/dev/null); rc=$?
    lines=$(printf '%s\n' "$out" | grep -c .)
    if [ "$rc" -eq 2 ] && [ "$lines" -eq 1 ] && printf '%s' "$out" | grep -q -- "$pat"; then ok "$desc: $out"
    else not_ok "$desc: status $rc, $lines lines: $out"; fi
}
edit() { # DIR PYTHON (c: the config dict)
    python3 -c "import json,sys; p=sys.argv[1]+'/config.json'; c=json.load(open(p)); $2; open(p,'w').write(json.dumps(c))" "$1"
}
hostile() { # TAG PYTHON-EDIT
    h="$wd/h/$1"; mkdir -p "$wd/h"; cp -r "$wd/f32/src" "$h"; edit "$h" "$2"
}
hostile headdim "c['head_dim']=32"
bad "head_dim other than hidden/heads" '"head_dim" 32 is not hidden_size / num_attention_heads = 16' convert "$wd/h/headdim" "$wd/h/o1"
hostile act "c['hidden_act']='gelu'"
bad "hidden_act gelu" 'hidden_act.*gelu.*silu' convert "$wd/h/act" "$wd/h/o2"
hostile yarn "c['rope_scaling']={'rope_type':'yarn','factor':4.0}"
bad "rope_scaling yarn" 'rope_scaling.*yarn.*llama3' convert "$wd/h/yarn" "$wd/h/o3"
hostile obias "c['attention_bias']=True"
bad "attention_bias true on Llama" 'attention_bias.*o_proj' convert "$wd/h/obias" "$wd/h/o4"
hostile sw "c['model_type']='mistral'; c['architectures']=['MistralForCausalLM']; c['sliding_window']=4096"
bad "Mistral with a sliding window" 'sliding_window' convert "$wd/h/sw" "$wd/h/o5"
hostile kv "c['num_key_value_heads']=3"
bad "KV heads not dividing heads" 'num_key_value_heads 3' convert "$wd/h/kv" "$wd/h/o6"
hostile arch "c['architectures']=['LlamaForSequenceClassification']"
bad "another architecture" 'LlamaForSequenceClassification' convert "$wd/h/arch" "$wd/h/o7"
hostile layers "c['num_hidden_layers']=3"
bad "a missing layer's tensors" "no tensor 'model.layers.2" convert "$wd/h/layers" "$wd/h/o8"
hostile inter "c['intermediate_size']=128"
bad "a misshapen tensor" "gate_proj.weight' has shape \[96, 64\].*needs \[128, 64\]" convert "$wd/h/inter" "$wd/h/o9"
hostile tied "c['tie_word_embeddings']=True"
bad "an untied lm_head under tie_word_embeddings true" "lm_head.weight differs" convert "$wd/h/tied" "$wd/h/o10"
# an unknown tensor, a tensor of another dtype, a NaN weight: rewritten files
python3 - "$wd" <<'EOF'
import json, os, shutil, struct, sys
wd = sys.argv[1]
def rewrite(tag, fn):
    d = os.path.join(wd, "h", tag)
    shutil.copytree(os.path.join(wd, "f32", "src"), d)
    p = os.path.join(d, "model.safetensors")
    b = open(p, "rb").read()
    n = struct.unpack("<Q", b[:8])[0]
    hdr, data = json.loads(b[8:8 + n]), bytearray(b[8 + n:])
    hdr, data = fn(hdr, data)
    js = json.dumps(hdr, separators=(",", ":")).encode()
    js += b" " * ((8 - len(js) % 8) % 8)
    open(p, "wb").write(struct.pack("<Q", len(js)) + js + bytes(data))
def extra(h, d):
    h["model.layers.0.self_attn.rotary.weight"] = {"dtype": "F32", "shape": [1], "data_offsets": [len(d), len(d) + 4]}
    return h, d + b"\0\0\0\0"
def i32(h, d):
    h["model.norm.weight"]["dtype"] = "I32"
    return h, d
def nan(h, d):
    o = h["model.layers.1.mlp.down_proj.weight"]["data_offsets"][0] + 4 * 5
    d[o:o + 4] = struct.pack("<f", float("nan"))
    return h, d
rewrite("extra", extra)
rewrite("i32", i32)
rewrite("nan", nan)
EOF
bad "an unknown tensor" "model.layers.0.self_attn.rotary.weight' is not a weight" convert "$wd/h/extra" "$wd/h/o11"
bad "an I32 tensor" "model.norm.weight' is I32 (valid: F32, F16 or BF16)" convert "$wd/h/i32" "$wd/h/o12"
bad "a NaN weight" "down_proj.weight' element 5 is nan" convert "$wd/h/nan" "$wd/h/o13"
h="$wd/h/index"; cp -r "$wd/f32-sharded/src" "$h"
python3 -c "import json,sys; p=sys.argv[1]; x=json.load(open(p)); x['weight_map']['model.norm.weight']='model-00001-of-00007.safetensors'; open(p,'w').write(json.dumps(x))" "$h/model.safetensors.index.json"
bad "an index naming the wrong file" "weight_map names model-00001-of-00007.safetensors for 'model.norm.weight'" convert "$h" "$wd/h/o14"
bad "a conflicting --model" "--model llama:2,4,2,64,128,32,300,untied is not the model of" convert --model llama:2,4,2,64,128,32,300,untied "$wd/f32/src" "$wd/h/o15"
out=$(ckpt convert --model llama:2,4,2,64,96,77,300,untied "$wd/f32/src" "$wd/h/o16" 2>&1); rc=$?
check "--model keeps its T, the rest from config.json (status $rc: $out)" [ "$rc" -eq 0 ] &&
    [ "$(jget "$wd/h/o16/step-00000000/manifest.json" "['model']['seq_len']")" = 77 ]
bad "llm.c's format for a llama checkpoint" "llm.c's model file holds GPT-2 models only" convert "$wd/f32/ck" "$wd/h/x.bin"
bad "--dtype fp8" "--dtype 'fp8' is not one of fp32, bf16, fp16" convert --to hf --dtype fp8 "$wd/f32/ck" "$wd/h/o17"
bad "--max-shard-size 0" "--max-shard-size '0' is not a size" convert --to hf --max-shard-size 0 "$wd/f32/ck" "$wd/h/o18"
E="python3 $top_srcdir/tests/mpi/ckpt_edit.py"
cp -r "$wd/f32/ck" "$wd/h/ck-dup"
m="$wd/h/ck-dup/step-00000000/manifest.json"
t0=$(python3 -c "import json,sys; print(json.dumps(json.load(open(sys.argv[1]))['hf']['files'][0]['tensors'][0]))" "$m")
tl=$(python3 -c "import json,sys; f=json.load(open(sys.argv[1]))['hf']['files']; f[0]['tensors'][1]=f[0]['tensors'][0]; print(json.dumps(f))" "$m")
$E set "$wd/h/ck-dup/step-00000000" hf.files "$tl" >/dev/null 2>&1
bad "a manifest hf record naming a tensor twice ($t0)" "names tensor '.*' twice" convert --to hf "$wd/h/ck-dup" "$wd/h/o19"
$E set "$wd/h/ck-dup/step-00000000" model.family '"bert"' >/dev/null 2>&1
bad "a manifest of an unknown family" 'family "bert" is not valid' convert --to hf "$wd/h/ck-dup" "$wd/h/o20"
for d in o1 o2 o3 o4 o5 o6 o7 o8 o9 o10 o11 o12 o13 o14 o15; do
    [ -e "$wd/h/$d/step-00000000" ] && not_ok "a refused conversion left $d/step-00000000"
done

# ---- ptrain-run --resume: the model from the manifest ---------------------------------
common="--vocab 300 --data synthetic:$seed --seed 1 --batch 2 --val-every 0 --val-batches 1 --quiet"
out=$(run1 --model tiny $common --steps 1 --save-dir "$wd/r" 2>&1); rc=$?
check "ptrain-run saves a tiny checkpoint (status $rc)" [ "$rc" -eq 0 ]
out=$(run1 $common --steps 2 --resume "$wd/r" 2>&1); rc=$?
check "--resume without --model takes the checkpoint's model (status $rc: $(printf '%s' "$out" | tail -1))" [ "$rc" -eq 0 ]
out=$(run1 --model test $common --steps 2 --resume "$wd/r" 2>&1); rc=$?
lines=$(printf '%s\n' "$out" | grep -c .)
if [ "$rc" -ne 0 ] && [ "$lines" -eq 1 ] && printf '%s' "$out" | grep -q "holds model 4,4,128,64,300 (L=4 H=4 C=128 T=64 V=300), --model gives 2,4,64,32,300"; then
    ok "--resume with a conflicting --model: one line ($out)"
else not_ok "--resume with a conflicting --model: status $rc, $lines lines: $out"; fi

# an older manifest (no family, no spec) reads as GPT-2
run1 --model test $common --steps 1 --save-dir "$wd/old" >/dev/null 2>&1
$E set "$wd/old/step-00000001" model.family DEL >/dev/null 2>&1 && $E set "$wd/old/step-00000001" model.spec DEL >/dev/null 2>&1
out=$(ckpt verify "$wd/old" 2>&1) && out=$(ckpt convert "$wd/old" "$wd/old.safetensors" 2>&1) &&
    out=$(run1 $common --steps 2 --resume "$wd/old" 2>&1); rc=$?
check "a manifest without family and spec is GPT-2's: verify, convert and --resume without --model (status $rc: $(printf '%s' "$out" | tail -1))" \
    [ "$rc" -eq 0 ] && ! grep -q '"family"' "$wd/old/step-00000001/manifest.json"

# ---- through the model (lib/model's Llama): a converted checkpoint trains, and
# the model's tensors (a one-rank holder, resharded) equal the rank file's --------
lc="--data synthetic:$seed --batch 2 --val-every 0 --val-batches 1 --quiet"
out=$(run1 $lc --steps 2 --resume "$wd/f32/ck" --save-dir "$wd/lt" 2>&1); rc=$?
check "ptrain-run --resume trains the converted Llama, its model from the manifest (status $rc: $(printf '%s' "$out" | tail -1))" [ "$rc" -eq 0 ] && [ -d "$wd/lt/step-00000002" ]
out=$(ckpt convert --to hf "$wd/lt" "$wd/lt-hf" 2>&1) && out=$(ckpt convert "$wd/lt-hf" "$wd/lt-ck" 2>&1) &&
    out=$(ckpt convert --to hf "$wd/lt-ck" "$wd/lt-hf2" 2>&1); rc=$?
out2=$(diff -r "$wd/lt-hf" "$wd/lt-hf2" 2>&1); rc2=$?
check "a trained checkpoint -> hf -> checkpoint -> hf: the same files (status $rc: $out; $out2)" [ "$rc" -eq 0 ] && [ "$rc2" -eq 0 ]
# a fine-tuned model goes out as its source was laid out (the "hf" record carried by ptrain-run's saves)
run1 $lc --steps 2 --resume "$wd/mistral-sharded/ck" --save-dir "$wd/ft" >/dev/null 2>&1
out=$(ckpt convert --to hf "$wd/ft" "$wd/ft-hf" 2>&1); rc=$?
same=$(cd "$wd/ft-hf" && ls) srcl=$(cd "$wd/mistral-sharded/src" && ls)
check "a fine-tuned checkpoint -> hf: the source's files, index and config.json (status $rc: $out)" [ "$rc" -eq 0 ] &&
    [ "$same" = "$srcl" ] && cmp -s "$wd/ft-hf/config.json" "$wd/mistral-sharded/src/config.json" &&
    cmp -s "$wd/ft-hf/model.safetensors.index.json" "$wd/mistral-sharded/src/model.safetensors.index.json"
dts=$($G dump "$wd/ft-hf" 2>/dev/null | awk '{print $2}' | sort -u | tr '\n' ' ')
out=$(cmp "$wd/ft-hf/model-00001-of-00003.safetensors" "$wd/mistral-sharded/src/model-00001-of-00003.safetensors" 2>&1); rc=$?
check "... in the source's dtype (F16: $dts), with the trained weights (differ: $out)" [ "$dts" = "F16 " ] && [ "$rc" -ne 0 ]
if command -v "${MPIRUN:-mpirun}" >/dev/null 2>&1; then
    ptrain_mpirun -np 2 "$run" $lc --steps 1 --zero 1 --resume "$wd/f32/ck" --save-dir "$wd/z2" >"$wd/z2.out" 2>&1; rc=$?
    check "ptrain-run saves the Llama under dp=2 ZeRO-1 (status $rc)" [ "$rc" -eq 0 ]
    out=$(ckpt convert --to hf "$wd/z2" "$wd/z2-hf" 2>&1); rc=$?
    check "a two-rank Llama checkpoint converts through the model, resharded (status $rc: $out)" [ "$rc" -eq 0 ]
    run1 $lc --steps 1 --resume "$wd/z2" --save-dir "$wd/z1" >/dev/null 2>&1
    out=$(ckpt convert --to hf "$wd/z1" "$wd/z1-hf" 2>&1); rc=$?
    out2=$(cmp "$wd/z2-hf/model.safetensors" "$wd/z1-hf/model.safetensors" 2>&1); rc2=$?
    check "the model's tensors by name (two ranks, resharded) equal the one-rank rank file's ($out2)" [ "$rc" -eq 0 ] && [ "$rc2" -eq 0 ]
fi
done_testing
