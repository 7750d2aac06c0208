#!/bin/sh
# ptrain-data prepare on a real corpus layout: several files, a directory,
# standard input, JSON Lines; "<|endoftext|>" (50256) before every
# document; whole documents held out for validation; the parallel encoder
# (documents over 1 MiB cut into pieces) equal to one `encode` of the whole
# text; bad input named by file, line and byte offset with the previous
# shards left untouched.  The expected ids come from `ptrain-data encode`
# of each document (itself checked against the reference encoder by
# test_tokenizer.sh).
. "$top_srcdir/tests/lib.sh"
need_tokenizer
export PTRAIN_BPE_DIR=$bpe
w=$(mktemp -d)
trap 'rm -rf "$w"' EXIT
EOT=50256
ids() { od -An -tu2 -j64 -v "$1" | tr -s ' \n' '\n\n' | sed '/^$/d'; }
enc() { "$pd" encode "$1"; }  # ids of one document, one per line

# 1. a directory (sorted, recursive, empty files skipped), a file, standard input
mkdir -p "$w/in/sub" "$w/in/.hidden"
printf 'In the beginning God created the heaven and the earth.\n' >"$w/in/a.txt"
printf '{"text": "First JSON document, caf\\u00e9."}\n\n{"text": "Second one\\nwith two lines", "id": 2}\n' >"$w/in/b.jsonl"
: >"$w/in/c-empty.txt"
printf 'A document in a subdirectory\n' >"$w/in/sub/d.txt"
printf 'hidden, never read\n' >"$w/in/.hidden/x.txt"
printf 'A file given by name.' >"$w/e.txt"
printf 'From standard input!\n' >"$w/stdin.txt"
printf 'First JSON document, caf\303\251.' >"$w/j1.txt"
printf 'Second one\nwith two lines' >"$w/j2.txt"
rc=0
"$pd" prepare --out "$w/out" --val-fraction 0.2 "$w/in" "$w/e.txt" - <"$w/stdin.txt" >"$w/p.out" 2>&1 || rc=$?
check "prepare DIR FILE - exits 0 ($(head -n 1 "$w/p.out"))" [ "$rc" -eq 0 ]
for f in "$w/in/a.txt" "$w/j1.txt" "$w/j2.txt" "$w/in/sub/d.txt" "$w/e.txt" "$w/stdin.txt"; do
    echo $EOT; enc "$f"
done >"$w/want"
{ ids "$w/out/train.bin"; ids "$w/out/val.bin"; } >"$w/got"
check "train+val = <|endoftext|> + the ids of each of the 6 documents, in order ($(wc -l <"$w/want") ids)" \
    cmp -s "$w/want" "$w/got"
check "6 documents reported, the last one (standard input) held out (20% of 6 rounds to 1)" \
    sh -c "grep -q '6 documents' '$w/p.out' && grep -q 'the last 1 of 6 documents' '$w/p.out'"
{ echo $EOT; enc "$w/stdin.txt"; } >"$w/valwant"
ids "$w/out/val.bin" >"$w/valgot"
check "val.bin is exactly the last document" cmp -s "$w/valwant" "$w/valgot"

# 2. a large document: pieces on threads equal one encode of the whole text
i=0
while [ $i -lt 600 ]; do
    printf 'Verse %d: and the LORD said unto Moses, go forth; %d sheep, 3.5 "cubits" -- caf\303\251\n\n' $i $((i * 7919))
    i=$((i + 1))
done >"$w/chunk"
for k in 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30; do cat "$w/chunk"; done >"$w/big.txt"
size=$(wc -c <"$w/big.txt")
"$pd" prepare --out "$w/big1" --threads 1 --val-fraction 0.1 "$w/big.txt" >/dev/null 2>&1
"$pd" prepare --out "$w/big2" --threads 2 --val-fraction 0.1 "$w/big.txt" >/dev/null 2>&1
check "a $size-byte document: 1 and 2 threads write identical shards" \
    sh -c "cmp -s '$w/big1/train.bin' '$w/big2/train.bin' && cmp -s '$w/big1/val.bin' '$w/big2/val.bin'"
{ echo $EOT; enc "$w/big.txt"; } >"$w/bigwant"
{ ids "$w/big2/train.bin"; ids "$w/big2/val.bin"; } >"$w/biggot"
check "... and equal <|endoftext|> + one encode of the whole text (pieces cut where the pre-tokenizer splits)" \
    cmp -s "$w/bigwant" "$w/biggot"
n=$(wc -l <"$w/bigwant"); v=$(ids "$w/big2/val.bin" | wc -l)
check "one document: the last 10% of its tokens are held out ($v of $n)" [ "$v" -ge $((n / 10 - 1)) -a "$v" -le $((n / 10 + 1)) ]

# 3. JSON Lines with another field; --val-file
printf '{"body": "alpha beta"}\n{"body": "gamma"}\n' >"$w/docs.jsonl"
printf '{"body": "held-out document"}\n' >"$w/heldout.jsonl"
rc=0
"$pd" prepare --out "$w/js" --jsonl-field body --val-file "$w/heldout.jsonl" "$w/docs.jsonl" >"$w/js.out" 2>&1 || rc=$?
printf 'alpha beta' >"$w/t1"; printf 'gamma' >"$w/t2"; printf 'held-out document' >"$w/t3"
{ echo $EOT; enc "$w/t1"; echo $EOT; enc "$w/t2"; } >"$w/jswant"
ids "$w/js/train.bin" >"$w/jsgot"
check "--jsonl-field body: train is the two documents (status $rc)" cmp -s "$w/jswant" "$w/jsgot"
{ echo $EOT; enc "$w/t3"; } >"$w/jsv"
ids "$w/js/val.bin" >"$w/jsvgot"
check "--val-file: val is its document" cmp -s "$w/jsv" "$w/jsvgot"

# 4. bad input: one line naming file, line and byte; the previous pair untouched
cp "$w/js/train.bin" "$w/keep-train"; cp "$w/js/val.bin" "$w/keep-val"
printf '{"body": "ok"}\n{"text": "no body here"}\n' >"$w/missing.jsonl"
rc=0
"$pd" prepare --out "$w/js" --jsonl-field body "$w/missing.jsonl" >"$w/e1" 2>&1 || rc=$?
check "a JSONL line without the field: status 1 (malformed file), one line naming file:2 and its byte offset ($(cat "$w/e1"))" \
    sh -c "[ $rc -eq 1 ] && [ \$(wc -l <'$w/e1') -eq 1 ] && grep -q 'missing.jsonl:2 (byte 15)' '$w/e1'"
printf '{"body": "ok"}\n{"body": "broken\n' >"$w/broken.jsonl"
rc=0
"$pd" prepare --out "$w/js" --jsonl-field body "$w/broken.jsonl" >"$w/e2" 2>&1 || rc=$?
check "a line that is not JSON: status 1, named by file:line and byte ($(cat "$w/e2"))" \
    sh -c "[ $rc -eq 1 ] && grep -q 'broken.jsonl:2 (byte ' '$w/e2' && grep -q 'not JSON' '$w/e2'"
check "after both failures the previous train.bin and val.bin are untouched" \
    sh -c "cmp -s '$w/keep-train' '$w/js/train.bin' && cmp -s '$w/keep-val' '$w/js/val.bin'"
check "no temporary files left in the output directory (train.bin, val.bin, index.json)" sh -c "[ \$(ls -A '$w/js' | wc -l) -eq 3 ]"
rc=0; "$pd" prepare --out "$w/x" --val-fraction 0.1 --val-file "$w/t1" "$w/t2" >"$w/e3" 2>&1 || rc=$?
check "--val-fraction with --val-file is refused ($(cat "$w/e3"))" sh -c "[ $rc -eq 2 ] && grep -q 'not both' '$w/e3'"
rc=0; "$pd" prepare --out "$w/x" "$w/in/c-empty.txt" >"$w/e4" 2>&1 || rc=$?
check "inputs without any document are refused ($(cat "$w/e4"))" sh -c "[ $rc -eq 2 ] && grep -q 'no document' '$w/e4'"
rc=0; "$pd" prepare --out "$w/x" --format csv "$w/t1" >"$w/e5" 2>&1 || rc=$?
check "--format csv is refused naming the valid formats" sh -c "[ $rc -eq 2 ] && grep -q 'auto, text, jsonl' '$w/e5'"
rc=0; "$pd" prepare --out "$w/x" - - <"$w/t1" >"$w/e6" 2>&1 || rc=$?
check "standard input twice is refused" sh -c "[ $rc -eq 2 ] && grep -q 'given twice' '$w/e6'"

# 5. a corpus laid out as symbolic links (Hugging Face's hub cache, git-annex,
# DVC): links to regular files are read (relative and absolute, a .jsonl link
# as JSON Lines), a linked directory is entered; broken links, link loops, a
# link to a directory that contains it and a FIFO are passed over and listed
# on standard error with the reason, one line each (a newline in a name as
# ?); an empty subdirectory is fine (it was qsort(NULL, 0), undefined
# behaviour).  The old code skipped every link.
seed=$(od -An -N4 -tu4 /dev/urandom | tr -d ' ')
diag "random text seed $seed"
nl='
'
rtext() { awk -v s="$1" 'BEGIN { srand(s); n = 5 + int(rand() * 40); for (i = 0; i < n; i++) printf "%s%c%d", i ? " " : "", 97 + int(rand() * 26), int(rand() * 1e4); printf ".\n" }'; }
h=$w/hub
mkdir -p "$h/blobs" "$h/extra" "$h/snapshots/rev/sub" "$h/snapshots/rev/empty"
rtext $((seed + 1)) >"$h/blobs/1a2b"
rtext $((seed + 2)) >"$h/blobs/3c4d"
rtext $((seed + 3)) | tr -d '\n' >"$w/jdoc"
printf '{"text": "%s"}\n' "$(cat "$w/jdoc")" >"$h/blobs/5e6f"
rtext $((seed + 4)) >"$h/extra/d.txt"
ln -s ../../blobs/1a2b "$h/snapshots/rev/a.txt"
ln -s "$h/blobs/3c4d" "$h/snapshots/rev/sub/b.txt"
ln -s ../../blobs/5e6f "$h/snapshots/rev/c.jsonl"
ln -s ../../extra "$h/snapshots/rev/linked"
ln -s ../../blobs/missing "$h/snapshots/rev/broken.txt"
ln -s .. "$h/snapshots/rev/sub/up"
ln -s self.txt "$h/snapshots/rev/self.txt"
mkfifo "$h/snapshots/rev/fifo"
ln -s "../x${nl}y" "$h/snapshots/rev/nl.txt"
rc=0
"$pd" prepare --out "$w/hubout" --val-fraction 0.25 "$h/snapshots/rev" >"$w/h.out" 2>"$w/h.err" || rc=$?
check "prepare of a directory of symbolic links exits 0 ($(head -n 1 "$w/h.out"))" [ "$rc" -eq 0 ]
for f in "$h/blobs/1a2b" "$w/jdoc" "$h/extra/d.txt" "$h/blobs/3c4d"; do echo $EOT; enc "$f"; done >"$w/hwant"
{ ids "$w/hubout/train.bin"; ids "$w/hubout/val.bin"; } >"$w/hgot"
check "the documents are the links' targets, in the order of the links' names (a.txt, c.jsonl, linked/d.txt, sub/b.txt)" \
    cmp -s "$w/hwant" "$w/hgot"
check "4 documents reported" grep -q '4 documents' "$w/h.out"
r=$h/snapshots/rev
for pat in "skipped $r/broken.txt: a broken symbolic link (to '../../blobs/missing', which does not exist)" \
    "skipped $r/fifo: a FIFO, not a regular file" \
    "skipped $r/self.txt: a symbolic link loop (to 'self.txt')" \
    "skipped $r/sub/up: a symbolic link to $r, a directory that contains it (a directory loop)" \
    "skipped $r/nl.txt: a broken symbolic link (to '../x?y', which does not exist)" \
    "skipped 5 entries of the input directories in all"; do
    check "standard error says: $pat" grep -qF -- "$pat" "$w/h.err"
done
check "standard error has those 6 lines and nothing else (a newline in a link's target shown as ?)" \
    [ "$(wc -l <"$w/h.err")" -eq 6 ]
done_testing
