#!/usr/bin/env node
// SPDX-License-Identifier: MIT
// Reference side of the Llama 3 tokenizer tests: tokenizers.js (npm
// @huggingface/tokenizers, Hugging Face's JavaScript implementation of
// tokenizer.json) and llama3-tokenizer-js's own encoder, both installed by
// scripts/get-tokenizer-llama3.sh into NPMDIR (its node_modules).
//
//   node llama3_ref.js encode NPMDIR TOKENIZER_JSON FILE...   tokenizers.js ids, one line per FILE
//   node llama3_ref.js encode-l3 NPMDIR FILE...               llama3-tokenizer-js's ids, one line per FILE
//   node llama3_ref.js decode NPMDIR TOKENIZER_JSON FILE      FILE holds ids; the decoded text to stdout
//   node llama3_ref.js pairs TOKENIZER_JSON OUT               OUT: the same file, merges as [a, b] pairs
//
// encode is Tokenizer.encode(text, {add_special_tokens: false}): added
// tokens in the text are matched (Hugging Face's default), no post-processor
// (no <|begin_of_text|> is prepended), which is what ptrain's encoder does.
'use strict';
const fs = require('fs');
const path = require('path');

function die(msg) {
  process.stderr.write('llama3_ref.js: ' + msg + '\n');
  process.exit(2);
}

function hfTokenizer(npmdir, file) {
  const { Tokenizer } = require(path.resolve(npmdir, 'node_modules/@huggingface/tokenizers'));
  return new Tokenizer(JSON.parse(fs.readFileSync(file, 'utf8')), {});
}

const [cmd, ...args] = process.argv.slice(2);
if (cmd === 'encode') {
  if (args.length < 3) die('usage: encode NPMDIR TOKENIZER_JSON FILE...');
  const t = hfTokenizer(args[0], args[1]);
  const lines = args.slice(2).map((f) => t.encode(fs.readFileSync(f, 'utf8'), { add_special_tokens: false }).ids.join(' '));
  process.stdout.write(lines.join('\n') + '\n');
} else if (cmd === 'encode-l3') {
  if (args.length < 2) die('usage: encode-l3 NPMDIR FILE...');
  const l3 = require(path.resolve(args[0],
    'node_modules/llama3-tokenizer-js/bundle/commonjs-llama3-tokenizer-with-baked-data.cjs')).llama3Tokenizer;
  const lines = args.slice(1).map((f) => l3.encode(fs.readFileSync(f, 'utf8'), { bos: false, eos: false }).join(' '));
  process.stdout.write(lines.join('\n') + '\n');
} else if (cmd === 'decode') {
  if (args.length !== 3) die('usage: decode NPMDIR TOKENIZER_JSON FILE');
  const t = hfTokenizer(args[0], args[1]);
  const ids = fs.readFileSync(args[2], 'utf8').split(/\s+/).filter((x) => x.length).map(Number);
  process.stdout.write(t.decode(ids, { skip_special_tokens: false, clean_up_tokenization_spaces: false }));
} else if (cmd === 'pairs') {
  if (args.length !== 2) die('usage: pairs TOKENIZER_JSON OUT');
  const j = JSON.parse(fs.readFileSync(args[0], 'utf8'));
  j.model.merges = j.model.merges.map((m) => (Array.isArray(m) ? m : m.split(' ')));
  fs.writeFileSync(args[1], JSON.stringify(j));
} else {
  die('unknown command ' + JSON.stringify(cmd) + ' (valid: encode, encode-l3, decode, pairs)');
}
