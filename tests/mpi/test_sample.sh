#!/bin/sh
# SPDX-License-Identifier: MIT
# ptrain-ckpt sample: text from a checkpoint's model.
#  - a model trained (ptrain-run, tp=2) on a tiny repetitive corpus
#    continues the pattern under greedy decoding (--top-k 1);
#  - --top-k 1 picks, at every step, the argmax of the logits it wrote
#    (--logits), computed here with od and awk;
#  - --logits never writes through a symbolic link, nor blocks on a FIFO;
#  - --top-k 5 only ever picks one of the 5 largest logits of its step;
#  - the same seed gives the same text, another seed another text (at
#    temperature 5, where the distribution is flat enough to differ);
#    every id is inside the vocabulary;
#  - bad values: one line, exit 2;
#  - memory: a checkpoint whose model does not fit the memory this process
#    may use (lib/core/hostmem.h, ptrain-run's check) is refused in one
#    line naming the GiB needed and available, exit 1, before anything is
#    allocated: L=1 C=1024 V=2^22 (16 GiB per weight copy) under a 3 GB
#    address-space limit (not under ASan), C=65536 V=2^24 (a 4 TiB wte) in
#    every build -- manifests only, their rank files absent.
. "$top_srcdir/tests/lib.sh"
need_tokenizer
export PTRAIN_BPE_DIR=$bpe
run="$top_builddir/ptrain-run"
ck="$top_builddir/ptrain-ckpt"
[ -x "$run" ] && [ -x "$ck" ] || skip_all "ptrain-run or ptrain-ckpt not built"
need_mpirun
workdir
nolsan="ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
ckpt() { env "$nolsan" "$ck" "$@"; }
V=50257
i=0
while [ $i -lt 400 ]; do printf 'the cat sat on the mat. '; i=$((i + 1)); done >"$wd/rep.txt"
"$pd" prepare --out "$wd/rep" --val-fraction 0.1 "$wd/rep.txt" >/dev/null 2>&1
check "the repetitive corpus was prepared" [ -f "$wd/rep/train.bin" ]
rc=0
ptrain_mpirun -np 2 "$run" --model test --data "$wd/rep" --seed 5 --steps 80 --batch 4 --lr 3e-3 --val-every 0 \
    --val-batches 1 --tp 2 --quiet --save-dir "$wd/s" >"$wd/run.out" 2>&1 || rc=$?
check "ptrain-run trains on it under tp=2 and saves (status $rc)" [ "$rc" -eq 0 -a -f "$wd/s/step-00000080/manifest.json" ]
[ "$rc" -eq 0 ] || diag "$(tail -n 3 "$wd/run.out")"
diag "$(grep '^done' "$wd/run.out")"

# greedy continuation reproduces the pattern
out=$(ckpt sample --prompt "the cat" --tokens 14 --top-k 1 "$wd/s" 2>"$wd/err"); rc=$?
check "greedy: 'the cat' continues the corpus's pattern ($out)" \
    sh -c "[ $rc -eq 0 ] && [ '$out' = 'the cat sat on the mat. the cat sat on the mat. the cat' ]"
check "sample says which checkpoint and settings on stderr" grep -q "^sample: $wd/s/step-00000080 (step 80, .*top-k 1, seed" "$wd/err"

# argmax from the logits, computed another way
ckpt sample --prompt "on the" --tokens 6 --top-k 1 --ids --logits "$wd/lg" "$wd/s" >"$wd/ids" 2>/dev/null; rc=$?
check "greedy with --ids and --logits (status $rc)" [ "$rc" -eq 0 -a "$(stat -c %s "$wd/lg" 2>/dev/null)" = $((6 * V * 4)) ]
od -An -v -f -w4 "$wd/lg" | awk -v V=$V '{ r = int((NR - 1) / V); if ((NR - 1) % V == 0 || $1 > m) { m = $1; a[r] = (NR - 1) % V } }
    END { for (i = 0; i in a; i++) print a[i] }' >"$wd/argmax"
check "every greedy id is the argmax of its logits ($(tr '\n' ' ' <"$wd/ids"))" \
    sh -c "[ -s '$wd/ids' ] && cmp -s '$wd/ids' '$wd/argmax'"
check "control: the logits are not constant" sh -c "[ \$(od -An -v -f -w4 -N 4000 '$wd/lg' | sort -u | wc -l) -gt 10 ]"

# --logits FILE follows the output rule (lib/core/file.h): a symbolic link
# there is refused in one line (never followed, never replaced: the link
# and its target stay as they were), and so is a FIFO, without blocking the
# run (timeout 300: status 124 if it did)
head -c 3000 /dev/urandom >"$wd/victim"
cp "$wd/victim" "$wd/victim.orig"
ln -s "$wd/victim" "$wd/lglink"
ckpt sample --prompt "on the" --tokens 2 --top-k 1 --ids --logits "$wd/lglink" "$wd/s" >/dev/null 2>&1; rc=$?
check "--logits to a symbolic link: the link's target is untouched (status $rc)" cmp -s "$wd/victim" "$wd/victim.orig"
check "... refused (status $rc), the link still a link" sh -c "[ $rc -ne 0 ] && [ -L '$wd/lglink' ]"
mkfifo "$wd/fifo"
timeout 300 env "$nolsan" "$ck" sample --prompt "on the" --tokens 2 --top-k 1 --ids --logits "$wd/fifo" "$wd/s" >/dev/null 2>&1; rc=$?
check "--logits to a FIFO does not block on it (status $rc)" [ "$rc" -ne 124 ]

# top-k 5 at a flat temperature: each id among its row's 5 largest
ckpt sample --prompt "the" --tokens 8 --top-k 5 --temperature 5 --seed 3 --ids --logits "$wd/lg5" "$wd/s" >"$wd/ids5" 2>/dev/null
od -An -v -f -w4 "$wd/lg5" | awk -v V=$V 'NR == FNR { pick[NR - 1] = $1; next }
    { r = int((FNR - 1) / V); id = (FNR - 1) % V; v[id] = $1
      if (id == V - 1) { n = 0; for (j = 0; j < V; j++) if (v[j] > v[pick[r]]) n++; if (n >= 5) bad++ } }
    END { print bad + 0 }' "$wd/ids5" - >"$wd/bad5"
check "top-k 5: every id is among its step's 5 largest logits ($(tr '\n' ' ' <"$wd/ids5"))" \
    sh -c "[ \$(wc -l <'$wd/ids5') -eq 8 ] && [ \$(cat '$wd/bad5') -eq 0 ]"

# seeds
a=$(ckpt sample --prompt "the" --tokens 12 --temperature 5 --seed 7 --ids "$wd/s" 2>/dev/null | tr '\n' ' ')
b=$(ckpt sample --prompt "the" --tokens 12 --temperature 5 --seed 7 --ids "$wd/s" 2>/dev/null | tr '\n' ' ')
c=$(ckpt sample --prompt "the" --tokens 12 --temperature 5 --seed 8 --ids "$wd/s" 2>/dev/null | tr '\n' ' ')
check "the same seed gives the same ids ($a)" [ -n "$a" -a "$a" = "$b" ]
check "another seed gives other ids ($c)" [ -n "$c" -a "$a" != "$c" ]
check "every id is inside the vocabulary [0, $V)" \
    sh -c "echo '$a $c' | tr ' ' '\n' | sed '/^$/d' | awk '\$1 < 0 || \$1 >= $V { bad = 1 } END { exit bad }'"
t=$(ckpt sample --prompt "the" --tokens 12 --temperature 5 --seed 7 "$wd/s" 2>/dev/null)
printf 'the' >"$wd/p.txt"
want=$(echo "$("$pd" encode "$wd/p.txt" | tr '\n' ' ') $a" | "$pd" decode -)
check "the text is the prompt and the same ids decoded ($t)" [ -n "$t" -a "$t" = "$want" ]

# bad values
bad() { desc=$1 pat=$2; shift 2
    out=$(ckpt "$@" 2>&1 >/dev/null); rc=$?
    check "$desc: exit 2, one line ($out)" sh -c "[ $rc -eq 2 ] && [ \$(printf '%s\n' '$out' | grep -c .) -eq 1 ] && printf '%s' '$out' | grep -q '$pat'"
}
bad "--temperature 0" "not a number in (0, 100]" sample --temperature 0 "$wd/s"
bad "--tokens 0" "tokens" sample --tokens 0 "$wd/s"
bad "--top-k on convert" "convert: --top-k is only valid for sample" convert --top-k 3 "$wd/s" "$wd/x.bin"
bad "no tokenizer" "tokenizer" sample --vocab-dir "$wd/nowhere" "$wd/s"

# memory: refused in one line before anything is allocated
E="python3 $top_srcdir/tests/mpi/ckpt_edit.py"
mem_refused() { # FILE STATUS MODEL WHENCE: exit 1, one line naming the need and the room
    [ "$2" -eq 1 ] && [ "$(grep -c . "$1")" -eq 1 ] &&
        grep -q -- "^ptrain-ckpt: sample: model $3 needs [0-9.]* GiB (.*), but this process may use [0-9.]* GiB ($4" "$1"
}
bin=$top_builddir/.libs/ptrain-ckpt; [ -f "$bin" ] || bin=$ck
if grep -qa __asan_init "$bin"; then
    ok "sample of a 16 GiB wte under an address-space limit # SKIP ASan build (it reserves terabytes of address space)"
else
    $E huge-ckpt "$wd/mem16" 1 16 1024 1024 4194304
    (ulimit -v 3000000 && exec env "$nolsan" "$ck" sample --tokens 2 "$wd/mem16") >"$wd/mem16.out" 2>&1; rc=$?
    check "a 16 GiB wte (L=1 C=1024 V=2^22) under a 3 GB limit: exit 1, one line ($(cat "$wd/mem16.out"))" \
        mem_refused "$wd/mem16.out" $rc "L=1 H=16 C=1024 T=1024 V=4194304" "the address-space limit (ulimit -v / -d)"
fi
$E huge-ckpt "$wd/mem4t" 1 1 65536 1 16777216
ckpt sample --tokens 2 "$wd/mem4t" >"$wd/mem4t.out" 2>&1; rc=$?
check "a 4 TiB wte (C=65536 V=2^24), no limit: exit 1, one line ($(cat "$wd/mem4t.out"))" \
    mem_refused "$wd/mem4t.out" $rc "L=1 H=1 C=65536 T=1 V=16777216" ""
done_testing
