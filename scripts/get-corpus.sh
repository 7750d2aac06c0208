#!/bin/sh
# SPDX-License-Identifier: MIT
# Write the whole King James Bible (Debian package bible-kjv, public domain
# text, ~4.3 MB of English) to OUTFILE as plain text, one verse per line.
#
#   usage: scripts/get-corpus.sh OUTFILE
#
# Idempotent (an existing, non-empty OUTFILE is kept) and atomic (written to
# a temporary file in the same directory, then renamed).
set -eu
[ $# -eq 1 ] || { echo "usage: get-corpus.sh OUTFILE" >&2; exit 2; }
out=$1
if [ -s "$out" ]; then echo "get-corpus.sh: $out exists, keeping it" >&2; exit 0; fi
command -v bible >/dev/null 2>&1 || { echo "get-corpus.sh: 'bible' not found (Debian: apt-get install bible-kjv)" >&2; exit 1; }
outdir=$(dirname "$out")
[ -d "$outdir" ] || { echo "get-corpus.sh: directory $outdir does not exist" >&2; exit 2; }
tmp=$(mktemp "$out.tmp.XXXXXX")
trap 'rm -f "$tmp"' EXIT
trap 'exit 130' INT TERM
# -l0: no line wrapping; the range covers Genesis 1:1 to Revelation 22:21.
bible -l0 'Gen1:1-Rev22:21' </dev/null >"$tmp"
size=$(wc -c <"$tmp")
[ "$size" -gt 4000000 ] || { echo "get-corpus.sh: bible printed only $size bytes (expected ~4.3 MB)" >&2; exit 1; }
chmod 644 "$tmp"
mv -f "$tmp" "$out"
trap - EXIT INT TERM
echo "get-corpus.sh: wrote $out ($size bytes)" >&2
