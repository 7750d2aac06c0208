#!/bin/sh
# SPDX-License-Identifier: MIT
# The C GPT-2 tokenizer (ptrain-data encode/decode) against the reference: the
# npm package gpt-3-encoder's JavaScript encoder, run by node on the same files.
#  - hand-written samples (tests/data/tokenizer-samples.json): contractions,
#    numbers, punctuation runs, runs of spaces/newlines/tabs, trailing white
#    space, accents, CJK, emoji, Unicode white space that JS's \s does and
#    PCRE's \s does not treat alike (U+0085, U+180E, U+FEFF, U+2028)
#  - 40 random valid UTF-8 texts and one long random word, fresh each run
#  - decode(encode(x)) == x, also for random bytes that are not UTF-8
#  - Hugging Face's vocab.json + merges.txt give the ids of encoder.json + vocab.bpe
#  - prepare: <|endoftext|> first, train/val split sizes and contents; one-line errors, exit 2
# Skips when node or the tokenizer package is missing.
. "$top_srcdir/tests/lib.sh"

need_tokenizer

tmp=$(mktemp -d "${TMPDIR:-/tmp}/ptrain-test-tok.XXXXXX")
trap 'rm -rf "$tmp"' EXIT INT TERM
mkdir "$tmp/in"
"$node" "$ref" samples "$top_srcdir/tests/data/tokenizer-samples.json" "$tmp/in" >/dev/null ||
    { echo "Bail out! cannot write the samples"; exit 1; }
"$node" "$ref" random "$tmp/in" 40 >/dev/null || { echo "Bail out! cannot write random texts"; exit 1; }

# one line of ids per file, from node and from C
"$node" "$ref" encode "$bpe" "$tmp"/in/*.txt >"$tmp/js.out" || { echo "Bail out! node encoder failed"; exit 1; }
i=0
for f in "$tmp"/in/*.txt; do
    i=$((i + 1))
    name=$(basename "$f" .txt)
    js=$(sed -n "${i}p" "$tmp/js.out")
    if ! "$pd" encode --vocab-dir "$bpe" "$f" >"$tmp/ids" 2>"$tmp/err"; then
        not_ok "$name: ptrain-data encode failed: $(cat "$tmp/err")"
        continue
    fi
    c=$(tr '\n' ' ' <"$tmp/ids" | sed 's/ *$//')
    if [ "$c" = "$js" ]; then
        ok "$name: C ids equal the JS encoder's ($(printf '%s' "$c" | wc -w) tokens)"
    else
        not_ok "$name: C ids differ from the JS encoder's"
        diag "text (hex): $(od -An -tx1 "$f" | head -c 400 | tr -s ' \n' ' ')"
        diag "JS: $(printf '%s' "$js" | head -c 400)"
        diag "C : $(printf '%s' "$c" | head -c 400)"
    fi
    # decode(encode(x)) == x, byte for byte
    if "$pd" decode --vocab-dir "$bpe" "$tmp/ids" >"$tmp/back" &&
        cmp -s "$f" "$tmp/back"; then :; else
        echo "$name" >>"$tmp/roundtrip-failed"
    fi
done
if [ -s "$tmp/roundtrip-failed" ]; then
    not_ok "decode(encode(x)) == x for every sample: fails for $(tr '\n' ' ' <"$tmp/roundtrip-failed")"
else
    ok "decode(encode(x)) == x for all $i samples and random texts"
fi

# the JS decoder reads C's ids back to the same text
cat "$tmp"/in/sample-*.txt >"$tmp/all.txt"
"$pd" encode --vocab-dir "$bpe" "$tmp/all.txt" >"$tmp/all.ids"
"$node" "$ref" decode "$bpe" "$tmp/all.ids" >"$tmp/all.js-back"
check "the JS decoder turns C's ids of all samples back into the same bytes" cmp -s "$tmp/all.txt" "$tmp/all.js-back"

# the reference helper's chunked encoding (used on the corpus) equals encode() of the whole text
"$node" "$ref" encode "$bpe" "$tmp/all.txt" >"$tmp/whole.js"
GPT2_REF_CHUNK_MIN=0 GPT2_REF_CHUNK_MATCHES=3 "$node" "$ref" encode "$bpe" "$tmp/all.txt" >"$tmp/chunked.js"
check "reference: chunked JS encoding equals encode() of the whole text" cmp -s "$tmp/whole.js" "$tmp/chunked.js"

# random bytes, mostly invalid UTF-8: still a lossless round trip
head -c 4096 /dev/urandom >"$tmp/bytes.bin"
"$pd" encode --vocab-dir "$bpe" "$tmp/bytes.bin" >"$tmp/bytes.ids" &&
    "$pd" decode --vocab-dir "$bpe" "$tmp/bytes.ids" >"$tmp/bytes.back"
check "decode(encode(x)) == x for 4096 random bytes (invalid UTF-8)" cmp -s "$tmp/bytes.bin" "$tmp/bytes.back"

# stdin works like a file
"$pd" encode --vocab-dir "$bpe" - <"$tmp/all.txt" >"$tmp/stdin.ids"
check "encode reads standard input ('-')" cmp -s "$tmp/all.ids" "$tmp/stdin.ids"

# Hugging Face's names for the same files (vocab.json, merges.txt, as in the
# gpt2 model repository): the same ids.  The text uses the first merge
# ("\xc4\xa0 t", a space then t) and the last ("\xc4\xa0g azed", " gazed"), so a
# reader that drops or keeps one line too many differs; the second copy has
# no "#version" line and no newline after its last merge (as Hugging Face's
# tokenizers accept).
mkdir "$tmp/hf1" "$tmp/hf2" "$tmp/hf0"
cp "$bpe/encoder.json" "$tmp/hf1/vocab.json"; cp "$bpe/vocab.bpe" "$tmp/hf1/merges.txt"
cp "$bpe/encoder.json" "$tmp/hf2/vocab.json"; tail -n +2 "$bpe/vocab.bpe" | head -c -1 >"$tmp/hf2/merges.txt"
{ cat "$tmp/all.txt"; printf 'She gazed at the stars; they gazed back.\n'; } >"$tmp/gazed.txt"
"$pd" encode --vocab-dir "$bpe" "$tmp/gazed.txt" >"$tmp/gazed.ids"
for d in hf1 hf2; do
    rc=0; "$pd" encode --vocab-dir "$tmp/$d" "$tmp/gazed.txt" >"$tmp/$d.ids" 2>"$tmp/$d.err" || rc=$?
    check "vocab.json + merges.txt ($d$([ $d = hf2 ] && echo ': no #version line, no final newline')): the ids of encoder.json + vocab.bpe (status $rc, $(wc -l <"$tmp/$d.ids") ids)" \
        sh -c "[ $rc -eq 0 ] && cmp -s '$tmp/gazed.ids' '$tmp/$d.ids'"
done
# the control: without its last merge the text encodes differently
head -n -1 "$bpe/vocab.bpe" >"$tmp/hf0/merges.txt"; cp "$bpe/encoder.json" "$tmp/hf0/vocab.json"
"$pd" encode --vocab-dir "$tmp/hf0" "$tmp/gazed.txt" >"$tmp/hf0.ids" 2>/dev/null
check "control: merges.txt without its last merge gives other ids" sh -c "! cmp -s '$tmp/gazed.ids' '$tmp/hf0.ids'"
rm "$tmp/hf0/vocab.json" "$tmp/hf0/merges.txt"
rc=0; "$pd" encode --vocab-dir "$tmp/hf0" "$tmp/gazed.txt" >/dev/null 2>"$tmp/hf0.err" || rc=$?
check "a directory with neither pair: exit 2, one line naming both ($(cat "$tmp/hf0.err"))" \
    sh -c "[ $rc -eq 2 ] && [ \$(wc -l <'$tmp/hf0.err') -eq 1 ] && grep -q 'encoder.json and vocab.bpe' '$tmp/hf0.err' && grep -q 'vocab.json and merges.txt' '$tmp/hf0.err'"

# prepare: one document is <|endoftext|> (50256) and its ids; the
# validation split is the last fraction of those tokens
"$pd" prepare --vocab-dir "$bpe" --val-fraction 0.25 --out "$tmp/shards" "$tmp/all.txt" >"$tmp/prep.out" 2>&1
{ echo 50256; cat "$tmp/all.ids"; } >"$tmp/doc.ids"
n=$(wc -l <"$tmp/doc.ids")
nval=$(awk -v n="$n" 'BEGIN { printf "%d", n * 0.25 + 0.5 }')
u16() { od -An -tu2 -v -j 64 "$1" | tr -s ' ' '\n' | sed '/^$/d'; }
u16 "$tmp/shards/train.bin" >"$tmp/train.ids"
u16 "$tmp/shards/val.bin" >"$tmp/val.ids"
head -n $((n - nval)) "$tmp/doc.ids" >"$tmp/train.want"
tail -n "$nval" "$tmp/doc.ids" >"$tmp/val.want"
if cmp -s "$tmp/train.ids" "$tmp/train.want" && cmp -s "$tmp/val.ids" "$tmp/val.want"; then
    ok "prepare --val-fraction 0.25: train.bin = <|endoftext|> + first $((n - nval - 1)) ids, val.bin = last $nval ids"
else
    not_ok "prepare: shards are not the first/last split of the ids ($n ids, $nval for validation)"
    diag "$(cat "$tmp/prep.out")"
fi
"$pd" info "$tmp/shards/val.bin" >"$tmp/info.out"
check "info prints the header (ntokens $nval, vocab 50257, eot 50256)" \
    sh -c "grep -q '^ntokens  *$nval\$' '$tmp/info.out' && grep -q '^vocab_size  *50257\$' '$tmp/info.out' && grep -q '^eot_id  *50256\$' '$tmp/info.out'"

# one-line errors, exit 2 for bad command lines and missing files
expect_err() { # DESCRIPTION STATUS PATTERN CMD...
    d=$1 want=$2 pat=$3
    shift 3
    "$@" >/dev/null 2>"$tmp/err"
    st=$?
    if [ "$st" -eq "$want" ] && [ "$(wc -l <"$tmp/err")" -eq 1 ] && grep -q -- "$pat" "$tmp/err"; then
        ok "$d: exit $st, $(cat "$tmp/err")"
    else
        not_ok "$d: exit $st (want $want), stderr: $(cat "$tmp/err")"
    fi
}
expect_err "unknown option" 2 "unknown option '--bogus'" "$pd" encode --vocab-dir "$bpe" --bogus "$tmp/all.txt"
expect_err "unknown command" 2 "unknown command 'frobnicate'" "$pd" frobnicate
expect_err "missing input file" 2 "no-such-file" "$pd" encode --vocab-dir "$bpe" "$tmp/no-such-file"
expect_err "missing vocabulary directory" 2 "not a directory" "$pd" encode --vocab-dir "$tmp/no-such-dir" "$tmp/all.txt"
expect_err "no vocabulary at all" 2 "PTRAIN_BPE_DIR" env -u PTRAIN_BPE_DIR "$pd" encode "$tmp/all.txt"
expect_err "bad --val-fraction" 2 "'1.5' is not a number in \[0, 1)" "$pd" prepare --vocab-dir "$bpe" --val-fraction 1.5 --out "$tmp/x" "$tmp/all.txt"
expect_err "prepare without --out" 2 "--out OUTDIR is required" "$pd" prepare --vocab-dir "$bpe" "$tmp/all.txt"
printf '1 2 50257\n' >"$tmp/bad.ids"
expect_err "decode of id 50257" 2 "50257" "$pd" decode --vocab-dir "$bpe" "$tmp/bad.ids"
printf '1 2 x3\n' >"$tmp/bad.ids"
expect_err "decode of a non-number" 2 "'x3'" "$pd" decode --vocab-dir "$bpe" "$tmp/bad.ids"
expect_err "info on a text file" 1 "not a ptrain token shard" "$pd" info "$tmp/all.txt"
mkdir "$tmp/badvocab"
printf '{"a": 0,\n' >"$tmp/badvocab/encoder.json"
: >"$tmp/badvocab/vocab.bpe"
expect_err "malformed encoder.json" 1 "not valid JSON" "$pd" encode --vocab-dir "$tmp/badvocab" "$tmp/all.txt"

# a vocabulary that gives one id to two tokens (every id 0): refused, naming
# the id and two of its tokens (it made every id 0)
mkdir "$tmp/dupid"
python3 -c "import json, sys; json.dump({k: 0 for k in json.load(open(sys.argv[1]))}, open(sys.argv[2], 'w'))" \
    "$bpe/encoder.json" "$tmp/dupid/vocab.json"
cp "$bpe/vocab.bpe" "$tmp/dupid/merges.txt"
expect_err "vocab.json with every id 0" 1 'vocab.json: id 0 is given to two tokens, "!" and "\\""' \
    "$pd" encode --vocab-dir "$tmp/dupid" "$tmp/all.txt"
expect_err "... prepare with it" 1 'id 0 is given to two tokens' \
    "$pd" prepare --vocab-dir "$tmp/dupid" --out "$tmp/dupout" "$tmp/all.txt"
check "... and writes nothing" sh -c "! ls '$tmp/dupout'/*.bin >/dev/null 2>&1"
# tokenizer files are sized before they are read (sparse files: no disk used)
mkdir "$tmp/bigvocab" "$tmp/bigmerges"
truncate -s 65M "$tmp/bigvocab/encoder.json"; cp "$bpe/vocab.bpe" "$tmp/bigvocab/vocab.bpe"
cp "$bpe/encoder.json" "$tmp/bigmerges/encoder.json"; truncate -s 65M "$tmp/bigmerges/vocab.bpe"
expect_err "a 65 MiB encoder.json: refused before reading it" 1 'encoder.json is 68157440 bytes, more than the 67108864 bytes allowed' \
    "$pd" encode --vocab-dir "$tmp/bigvocab" "$tmp/all.txt"
expect_err "a 65 MiB vocab.bpe: refused before reading it" 1 'vocab.bpe is 68157440 bytes, more than the 67108864 bytes allowed' \
    "$pd" encode --vocab-dir "$tmp/bigmerges" "$tmp/all.txt"

# a pre-token over 16384 bytes is encoded in pieces of at most 16384 bytes,
# each cut backed off to a character boundary, the pattern matching again
# after each cut: a letter then 20000 two-byte letters (one pre-token of
# 40001 bytes) encodes as its parts [0, 16383), [16383, 32767), [32767, 40001)
python3 - "$tmp" <<'EOF'
import sys
t = b"a" + "\u00e9".encode() * 20000
d = sys.argv[1]
open(d + "/long-word.txt", "wb").write(t)
for i, (a, b) in enumerate([(0, 16383), (16383, 32767), (32767, len(t))]):
    open(d + "/long-word.%d" % i, "wb").write(t[a:b])
EOF
"$pd" encode --vocab-dir "$bpe" "$tmp/long-word.txt" >"$tmp/lw.ids"
for i in 0 1 2; do "$pd" encode --vocab-dir "$bpe" "$tmp/long-word.$i"; done >"$tmp/lw-parts.ids"
check "a pre-token of 40001 bytes: the ids of its pieces of 16383, 16384 and 7234 bytes ($(wc -l <"$tmp/lw.ids") ids)" \
    cmp -s "$tmp/lw.ids" "$tmp/lw-parts.ids"
python3 - "$tmp/runs.bin" <<'EOF'
import random, sys
r = random.Random()
parts = [b"x" * 70000, b"\0" * 40000, b"\xff" * 40000, b" " * 40000, "\u65e5".encode() * 30000,
         "\U0001f600".encode() * 10000, bytes(r.randrange(256) for _ in range(50000)), b"\t\n" * 20000]
r.shuffle(parts)
open(sys.argv[1], "wb").write(b"".join(parts))
EOF
"$pd" encode --vocab-dir "$bpe" "$tmp/runs.bin" >"$tmp/runs.ids" && "$pd" decode --vocab-dir "$bpe" "$tmp/runs.ids" >"$tmp/runs.back"
check "decode(encode(x)) == x for runs of 40-70 KB (letters, NUL, 0xff, spaces, CJK, emoji, random bytes)" \
    cmp -s "$tmp/runs.bin" "$tmp/runs.back"

done_testing
