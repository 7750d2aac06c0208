#!/usr/bin/env node
// SPDX-License-Identifier: MIT
// Reference side of the tokenizer tests: the npm package gpt-3-encoder's own
// JavaScript encoder/decoder, plus writers of sample and random text files.
//
//   node gpt2_ref.js encode PKGDIR FILE...    one line per FILE: its ids, space separated
//   node gpt2_ref.js decode PKGDIR FILE       FILE holds ids; write the decoded text to stdout
//   node gpt2_ref.js samples JSON OUTDIR      write each string of the JSON array to OUTDIR/sample-NNN.txt
//   node gpt2_ref.js random OUTDIR COUNT      write COUNT fresh random valid UTF-8 texts to OUTDIR/random-NNN.txt
//                                             and one long random word to OUTDIR/random-long.txt
//
// Encoder.js's encode() concatenates arrays token by token (quadratic), so a
// large text is encoded in chunks of whole pre-tokens, cut after a match of
// the package's own pattern (read from Encoder.js) that ends in a non-space
// character.  encode() pre-tokenises each chunk exactly as it would the whole
// text: matches never look behind, and the only look-ahead, \s+(?!\S), can
// see a chunk end only after a white-space match -- where we never cut (a
// cut inside "\n\n" + "Psalms" would turn the matches "\n", "\n" into one).
'use strict';
const fs = require('fs');
const path = require('path');
const crypto = require('crypto');

function die(msg) {
  process.stderr.write('gpt2_ref.js: ' + msg + '\n');
  process.exit(2);
}

function loadPackage(pkgdir) {
  const enc = require(path.resolve(pkgdir, 'Encoder.js'));
  const src = fs.readFileSync(path.resolve(pkgdir, 'Encoder.js'), 'utf8');
  const m = src.match(/const pat = \/(.*)\/([a-z]*)\s*$/m);
  if (!m) die('cannot find the pre-tokenisation pattern in ' + pkgdir + '/Encoder.js');
  return { encode: enc.encode, decode: enc.decode, pat: new RegExp(m[1], m[2]) };
}

function encodeLarge(pkg, text) {
  // GPT2_REF_CHUNK_MIN (UTF-16 units, default 100000): smaller texts go to encode() whole
  const min = Number(process.env.GPT2_REF_CHUNK_MIN || 100000);
  if (text.length < min) return pkg.encode(text);
  const out = [];
  let chunk = '';
  let count = 0;
  let covered = 0;
  for (const m of text.matchAll(pkg.pat)) {
    if (m.index !== covered) die('pattern skipped text at UTF-16 offset ' + covered);
    covered = m.index + m[0].length;
    chunk += m[0];
    if (++count >= Number(process.env.GPT2_REF_CHUNK_MATCHES || 512) && !/\s$/u.test(m[0])) {
      for (const id of pkg.encode(chunk)) out.push(id);
      chunk = '';
      count = 0;
    }
  }
  if (covered !== text.length) die('pattern did not cover the text');
  for (const id of pkg.encode(chunk)) out.push(id);
  return out;
}

// ---- random text: mixtures of ranges assigned in Unicode <= 14 (PCRE2 10.42's
// tables) so letter/number classes agree with node's newer Unicode.
const RANGES = [
  [0x20, 0x7e, 30], // printable ASCII
  [0x00, 0x7f, 3], // any ASCII, control characters included
  [0x30, 0x39, 4], // digits
  [0x61, 0x7a, 12], // lower-case letters
  [0xa0, 0xff, 4], // Latin-1 (NBSP, accents, ², ½)
  [0x100, 0x17f, 3], // Latin Extended-A
  [0x300, 0x36f, 2], // combining marks
  [0x391, 0x3c9, 2], // Greek
  [0x410, 0x44f, 2], // Cyrillic
  [0x5d0, 0x5ea, 1], // Hebrew
  [0x621, 0x64a, 1], // Arabic
  [0x660, 0x669, 1], // Arabic-Indic digits
  [0x905, 0x939, 1], // Devanagari
  [0x966, 0x96f, 1], // Devanagari digits
  [0xe01, 0xe30, 1], // Thai
  [0x2000, 0x206f, 2], // general punctuation incl. U+2000..200A spaces, U+2028/2029
  [0x2150, 0x2188, 1], // number forms (Roman numerals: Nl)
  [0x3000, 0x3003, 1], // ideographic space, punctuation
  [0x3041, 0x3096, 2], // Hiragana
  [0x30a1, 0x30fa, 1], // Katakana
  [0x4e00, 0x9fa5, 3], // CJK ideographs
  [0xac00, 0xd7a3, 2], // Hangul syllables
  [0xff10, 0xff19, 1], // full-width digits
  [0x1f300, 0x1f64f, 3], // emoji
  [0x1f900, 0x1f9ff, 1], // supplemental symbols
];
const SPECIAL = [' ', ' ', '  ', '\n', '\n\n', '\t', '\r\n', '\u000b', '\u000c', '\u00a0', '\u0085', '\u1680',
  '\u180e', '\u2003', '\u2028', '\u2029', '\u202f', '\u205f', '\u3000', '\ufeff', "'s", "'t", "'re", "'ve", "'m",
  "'ll", "'d", "'S", "''", '...', '!!!', '😀', '👍🏽', '👨‍👩‍👧', 'é', 'e\u0301', '¹²³', '½'];
const TOTAL = RANGES.reduce((a, r) => a + r[2], 0);

function rnd(n) { return crypto.randomInt(n); }

function randomText() {
  const len = 1 + rnd(400);
  let s = '';
  for (let i = 0; i < len; i++) {
    if (rnd(5) === 0) { s += SPECIAL[rnd(SPECIAL.length)]; continue; }
    let w = rnd(TOTAL);
    let r = RANGES[0];
    for (const x of RANGES) { if (w < x[2]) { r = x; break; } w -= x[2]; }
    const run = 1 + rnd(8);
    for (let k = 0; k < run; k++) s += String.fromCodePoint(r[0] + rnd(r[1] - r[0] + 1));
  }
  return s;
}

const [cmd, ...args] = process.argv.slice(2);
if (cmd === 'encode') {
  if (args.length < 2) die('usage: encode PKGDIR FILE...');
  const pkg = loadPackage(args[0]);
  const lines = [];
  for (const f of args.slice(1)) {
    const ids = encodeLarge(pkg, fs.readFileSync(f, 'utf8'));
    if (ids.some((x) => !Number.isInteger(x))) die(f + ': encode() produced a non-integer id');
    lines.push(ids.join(' '));
  }
  process.stdout.write(lines.join('\n') + '\n');
} else if (cmd === 'decode') {
  if (args.length !== 2) die('usage: decode PKGDIR FILE');
  const pkg = loadPackage(args[0]);
  const ids = fs.readFileSync(args[1], 'utf8').split(/\s+/).filter((x) => x.length).map(Number);
  process.stdout.write(pkg.decode(ids));
} else if (cmd === 'samples') {
  if (args.length !== 2) die('usage: samples JSON OUTDIR');
  const samples = JSON.parse(fs.readFileSync(args[0], 'utf8'));
  samples.forEach((s, i) => fs.writeFileSync(path.join(args[1], 'sample-' + String(i).padStart(3, '0') + '.txt'), s));
  console.log(samples.length);
} else if (cmd === 'random') {
  if (args.length !== 2) die('usage: random OUTDIR COUNT');
  const n = Number(args[1]);
  for (let i = 0; i < n; i++) fs.writeFileSync(path.join(args[0], 'random-' + String(i).padStart(3, '0') + '.txt'), randomText());
  // one long word (many merge rounds): 1500..2500 letters, a few accented
  let w = '';
  const len = 1500 + rnd(1000);
  for (let i = 0; i < len; i++) w += rnd(50) === 0 ? 'éèàüößçñ'[rnd(8)] : String.fromCharCode(97 + rnd(26));
  fs.writeFileSync(path.join(args[0], 'random-long.txt'), w);
  console.log(n + 1);
} else {
  die('unknown command ' + JSON.stringify(cmd) + ' (valid: encode, decode, samples, random)');
}
