#!/bin/sh
# SPDX-License-Identifier: MIT
# The C GPT-2 tokenizer on a whole real corpus, the King James Bible (4.3 MB,
# from Debian's bible-kjv via scripts/get-corpus.sh): ids identical to the
# npm package gpt-3-encoder's JavaScript encoder, lossless decode, and
# prepare's shards holding exactly those ids.  Prints the encoding speed as a
# diagnostic (no timing assertion).  Skips without bible, node or the package.
. "$top_srcdir/tests/lib.sh"

command -v bible >/dev/null 2>&1 || skip_all "bible (Debian package bible-kjv) not found"
need_tokenizer

tmp=$(mktemp -d "${TMPDIR:-/tmp}/ptrain-test-corpus.XXXXXX")
trap 'rm -rf "$tmp"' EXIT INT TERM
"$top_srcdir/scripts/get-corpus.sh" "$tmp/kjv.txt" 2>/dev/null
size=$(wc -c <"$tmp/kjv.txt" 2>/dev/null || echo 0)
check "get-corpus.sh wrote the King James Bible ($size bytes)" test "$size" -gt 4000000

"$pd" prepare --vocab-dir "$bpe" --val-fraction 0.02 --out "$tmp/shards" "$tmp/kjv.txt" >"$tmp/prep.out" 2>&1
st=$?
diag "$(head -n 1 "$tmp/prep.out")"
check "prepare on the corpus succeeds" test "$st" -eq 0

"$pd" encode --vocab-dir "$bpe" "$tmp/kjv.txt" >"$tmp/c.ids"
"$node" "$ref" encode "$bpe" "$tmp/kjv.txt" | tr ' ' '\n' >"$tmp/js.ids"
n=$(wc -l <"$tmp/c.ids")
if cmp -s "$tmp/c.ids" "$tmp/js.ids"; then
    ok "all $n ids of the corpus equal the JS encoder's"
else
    not_ok "corpus ids differ from the JS encoder's ($n C ids, $(wc -l <"$tmp/js.ids") JS ids)"
    diag "$(diff "$tmp/c.ids" "$tmp/js.ids" | head -n 6 | tr '\n' ' ')"
fi

"$pd" decode --vocab-dir "$bpe" "$tmp/c.ids" >"$tmp/back.txt"
check "decode(encode(corpus)) == corpus" cmp -s "$tmp/kjv.txt" "$tmp/back.txt"

# train.bin + val.bin are <|endoftext|> and exactly the ids (the 4 MB
# document encoded in 1 MiB pieces on several threads), split at the last 2%
u16() { od -An -tu2 -v -j 64 "$1" | tr -s ' ' '\n' | sed '/^$/d'; }
{ u16 "$tmp/shards/train.bin"; u16 "$tmp/shards/val.bin"; } >"$tmp/shard.ids"
{ echo 50256; cat "$tmp/c.ids"; } >"$tmp/doc.ids"
n=$((n + 1))
nval=$(awk -v n="$n" 'BEGIN { printf "%d", n * 0.02 + 0.5 }')
nv=$(u16 "$tmp/shards/val.bin" | wc -l)
check "train.bin then val.bin hold <|endoftext|> and the corpus ids in order" cmp -s "$tmp/doc.ids" "$tmp/shard.ids"
check "val.bin holds the last 2% ($nval of $n tokens)" test "$nv" -eq "$nval"

done_testing
