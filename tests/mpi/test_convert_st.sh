#!/bin/sh
# SPDX-License-Identifier: MIT
# ptrain-ckpt convert of Hugging Face GPT-2 model.safetensors, against files
# written by an independent writer (tests/mpi/gpt2_st.py: struct and json,
# from the safetensors and transformers layouts):
#  - random models in F32, F16 (with half subnormals and signed zeros) and
#    BF16, with or without GPT2LMHeadModel's "transformer." prefix, a tied
#    lm_head.weight and the attention mask buffers, shaped by config.json
#    beside them or by --model: converted to a checkpoint and back to
#    safetensors, every weight equals the written one widened to fp32 by
#    Python, bit for bit (a control with another seed differs);
#  - a checkpoint trained by ptrain-run under tp=2 -> safetensors ->
#    checkpoint -> safetensors and llm.c .bin: identical weights;
#  - hostile files (header lengths that overflow or pass the end, offsets
#    outside the data, overlapping or with gaps, shapes whose size
#    overflows, unknown dtypes, duplicate names, bad JSON, tensors and
#    config.json fields that are not this GPT-2): exit 2, one line, before
#    any allocation of their sizes (the sanitizer build runs this too);
#  - memory: a file whose model does not fit the memory this process may
#    use (lib/core/hostmem.h, ptrain-run's check) is refused in one line
#    naming the GiB needed and available, exit 1, before anything is
#    allocated from it: config.json within limits (L=1, C=1024, V=2^22)
#    declaring a 16 GiB wte (sparse) under a 3 GB address-space limit (not
#    under ASan), and a 4 TiB wte no machine holds (every build);
#  - fine-tuning: ptrain-run --resume on the converted checkpoint trains
#    under 1 rank and tp=2, and its first loss equals the loss of the same
#    batch computed by gpt2_st.py's own forward pass in double precision
#    from the weights it wrote (to 1e-4), the two plans agreeing to 1e-5.
. "$top_srcdir/tests/lib.sh"
run="$top_builddir/ptrain-run"
ck="$top_builddir/ptrain-ckpt"
[ -x "$run" ] && [ -x "$ck" ] || skip_all "ptrain-run or ptrain-ckpt not built"
command -v python3 >/dev/null 2>&1 || skip_all "python3 not found"
need_mpirun
workdir
fresh_seed
diag "seed $seed"
G="python3 $top_srcdir/tests/mpi/gpt2_st.py"
nolsan="ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
ckpt() { env "$nolsan" "$ck" "$@"; }
L=2 H=4 C=48 T=24 V=200
jget() { python3 -c "import json,sys; print(json.load(open(sys.argv[1]))$2)" "$1"; }

# ---- weights in, bit for bit --------------------------------------------------
variant() { # TAG DTYPE FLAGS... (not $d: check() uses it)
    tag=$1 dt=$2; shift 2
    vd="$wd/$tag"; mkdir -p "$vd"
    cfg="--config $vd"; model=""
    case " $* " in *" --model "*) cfg=""; model="--model $L,$H,$C,$T,$V" ;; esac
    flags=$(echo " $* " | sed 's/ --model / /; s/^ *//; s/ *$//')
    $G write "$vd/model.safetensors" $L $H $C $T $V $((seed + ${#tag})) "$dt" $flags $cfg
    out=$(ckpt convert $model "$vd/model.safetensors" "$vd/ck" 2>&1); rc=$?
    check "[$tag] $dt${flags:+ $flags} safetensors -> checkpoint (status $rc: $out)" [ "$rc" -eq 0 ]
    [ "$rc" -eq 0 ] || return
    m="$vd/ck/step-00000000/manifest.json"
    check "[$tag] a step-0 checkpoint with a fresh AdamW state" [ "$(jget "$m" "['step']") $(jget "$m" "['adam_step']")" = "0 0" ]
    ckpt convert "$vd/ck" "$vd/back.safetensors" >/dev/null 2>&1
    out=$($G same "$vd/model.safetensors" "$vd/back.safetensors" 2>&1); rc=$?
    check "[$tag] back to safetensors: every weight is the written one in fp32 ($out)" [ "$rc" -eq 0 ]
}
variant f32 F32
variant f16 F16 --prefix --lm-head --buffers
variant bf16 BF16 --prefix
variant model F32 --lm-head --model
$G write "$wd/other.safetensors" $L $H $C $T $V $((seed + 99)) F32
out=$($G same "$wd/other.safetensors" "$wd/f32/back.safetensors" 2>&1); rc=$?
check "control: another model's weights differ ($out)" [ "$rc" -ne 0 ]

# ---- checkpoint -> safetensors -> checkpoint ----------------------------------------
r="$wd/rt"; mkdir -p "$r"
common="--model test --vocab 500 --data synthetic:$seed --seed $init --batch 4 --val-every 0 --val-batches 1 --quiet"
rc=0
ptrain_mpirun -np 2 "$run" $common --steps 3 --tp 2 --save-dir "$r/s" >"$r/run.out" 2>&1 || rc=$?
check "ptrain-run saves a trained checkpoint under tp=2 (status $rc)" [ "$rc" -eq 0 ]
tm=$(python3 -c "import json,sys; m = json.load(open(sys.argv[1]))['model']
print('%d,%d,%d,%d,%d' % (m['n_layer'], m['n_head'], m['n_embd'], m['seq_len'], m['vocab']))" "$r/s/step-00000003/manifest.json" 2>/dev/null)
ckpt convert "$r/s" "$r/a.safetensors" >/dev/null 2>&1 &&
    ckpt convert --model "$tm" "$r/a.safetensors" "$r/b" >"$r/b.out" 2>&1 &&
    ckpt convert "$r/b" "$r/b.safetensors" >/dev/null 2>&1; rc=$?
out=$($G same "$r/a.safetensors" "$r/b.safetensors" 2>&1); rc2=$?
check "checkpoint -> safetensors -> checkpoint -> safetensors: the same weights (status $rc; $out)" \
    [ "$rc" -eq 0 -a "$rc2" -eq 0 ]
ckpt convert "$r/s" "$r/a.bin" >/dev/null 2>&1; ckpt convert "$r/b" "$r/b.bin" >/dev/null 2>&1
check "... and the two checkpoints' llm.c files are identical, byte for byte" cmp -s "$r/a.bin" "$r/b.bin"

# ---- hostile files: one line, exit 2 --------------------------------------------------
h="$wd/hostile"; mkdir -p "$h"
$G hostile "$h" >"$h/cases"
tab=$(printf '\t')
while IFS="$tab" read -r f pat; do
    out=$(ckpt convert "$h/$f" "$h/out-ck" 2>&1 >/dev/null); rc=$?
    n=$(printf '%s\n' "$out" | grep -c .)
    if [ "$rc" -eq 2 ] && [ "$n" -eq 1 ] && printf '%s' "$out" | grep -qF -- "$pat"; then
        ok "hostile $f: exit 2, one line ($out)"
    else
        not_ok "hostile $f: exit $rc, $n lines (want 2, one line with '$pat'): $out"
    fi
done <"$h/cases"
check "no checkpoint was written for any of them" [ ! -e "$h/out-ck/latest" ]

# ---- memory: refused in one line before anything is allocated ----------------------------
E="python3 $top_srcdir/tests/mpi/ckpt_edit.py"
mem_refused() { # FILE STATUS MODEL WHENCE: exit 1, one line naming the need and the room
    [ "$2" -eq 1 ] && [ "$(grep -c . "$1")" -eq 1 ] &&
        grep -q -- "model $3 needs [0-9.]* GiB (.*), but this process may use [0-9.]* GiB ($4" "$1"
}
bin=$top_builddir/.libs/ptrain-ckpt; [ -f "$bin" ] || bin=$ck
if grep -qa __asan_init "$bin"; then
    ok "convert of a 16 GiB wte under an address-space limit # SKIP ASan build (it reserves terabytes of address space)"
else
    mkdir -p "$wd/mem16"
    $E sparse-st "$wd/mem16/model.safetensors" 1 16 1024 1024 4194304 >/dev/null
    (ulimit -v 3000000 && exec env "$nolsan" "$ck" convert "$wd/mem16/model.safetensors" "$wd/mem16/ck") >"$wd/mem16.out" 2>&1; rc=$?
    check "a 16 GiB wte (L=1 C=1024 V=2^22) under a 3 GB limit: exit 1, one line ($(cat "$wd/mem16.out"))" \
        mem_refused "$wd/mem16.out" $rc "L=1 H=16 C=1024 T=1024 V=4194304" "the address-space limit (ulimit -v / -d)"
    rm -rf "$wd/mem16"
fi
mkdir -p "$wd/mem4t"
if $E sparse-st "$wd/mem4t/model.safetensors" 1 1 65536 1 16777216 >/dev/null 2>&1; then
    ckpt convert "$wd/mem4t/model.safetensors" "$wd/mem4t/ck" >"$wd/mem4t.out" 2>&1; rc=$?
    check "a 4 TiB wte (C=65536 V=2^24), no limit: exit 1, one line ($(cat "$wd/mem4t.out"))" \
        mem_refused "$wd/mem4t.out" $rc "L=1 H=1 C=65536 T=1 V=16777216" ""
    check "... nothing written" [ ! -e "$wd/mem4t/ck" ]
else
    ok "convert of a 4 TiB wte # SKIP this file system holds no sparse 4 TiB file"
fi
rm -rf "$wd/mem4t"

# ---- fine-tuning from the converted model: the first loss against Python's forward pass --
f="$wd/ft"; mkdir -p "$f/m" "$f/d"
$G write "$f/m/model.safetensors" $L $H $C $T $V $((seed + 7)) F16 --prefix --lm-head --config "$f/m"
$G shards "$f/d" $V $((seed + 8)) 20000 2000
ckpt convert "$f/m/model.safetensors" "$f/ck" >/dev/null 2>&1
want=$($G loss "$f/m/model.safetensors" $L $H $C $T $V "$f/d" 4)
ft="--model $L,$H,$C,$T,$V --data $f/d --batch 4 --val-every 0 --val-batches 1 --resume $f/ck"
first() { python3 -c "import json,sys
for l in open(sys.argv[1]):
    j = json.loads(l)
    if j.get('type') == 'train': print(j['loss']); break" "$1"; }
for plan in "1" "2 --tp 2"; do
    np=${plan%% *}; pflags=${plan#"$np"}; tag=np$np
    rc=0
    ptrain_mpirun -np "$np" "$run" $ft $pflags --steps 3 --save-dir "$f/s$np" --metrics "$f/$tag.jsonl" >"$f/$tag.out" 2>&1 || rc=$?
    got=$(first "$f/$tag.jsonl" 2>/dev/null)
    diag "ptrain-run -np $plan --resume (converted F16 model): $(grep -E '^(resume|step|done)' "$f/$tag.out" | tr '\n' ' ')"
    check "[$tag] ptrain-run --resume fine-tunes from the converted checkpoint (status $rc) and saves step 3" \
        sh -c "[ $rc -eq 0 ] && grep -q '^resume: $f/ck/step-00000000 (step 0, AdamW step 0)' '$f/$tag.out' &&
               [ -f '$f/s$np/step-00000003/manifest.json' ]"
    check "[$tag] its first loss $got equals the reference $want (Python, double precision) to 1e-4" \
        python3 -c "import sys; sys.exit(abs(float('$got') - float('$want')) > 1e-4)"
done
a=$(first "$f/np1.jsonl" 2>/dev/null) b=$(first "$f/np2.jsonl" 2>/dev/null)
check "the first losses of the two plans agree to 1e-5 ($a, $b)" python3 -c "import sys; sys.exit(abs($a - $b) > 1e-5)"
done_testing
