#!/bin/bash
# SPDX-License-Identifier: MIT
# How the tools create and read files:
#  - prepare writes train.bin and val.bin as one set: a failed write
#    (here: RLIMIT_FSIZE makes the larger val.bin fail, as a full disk
#    would) leaves the previous pair byte for byte, and no temporary;
#    ptrain-run refuses a pair from two different prepare runs;
#  - a killed prepare leaves no *.tmp.* behind (O_TMPFILE);
#  - ptrain-topo --save never follows a planted symlink at a temporary name;
#  - ptrain-topo --save and prepare's train.bin/val.bin replace only regular
#    files: a FIFO, symbolic link (also to a regular file), directory or
#    character device there is refused in one line and left as it was;
#  - FIFOs (and directories) given as input are refused in one line,
#    without blocking, by ptrain-data info/encode, ptrain-topo
#    --load/--topology and ptrain-run --data;
#  - a full standard output is reported in one line by ptrain-data info,
#    prepare and ptrain-topo; a topology file is typed by its first byte
#    before it is read whole;
#  - hwloc XML that crashes hwloc is refused in one line (case 8, fuzzing);
#  - ptrain-ckpt verify prints one line per problem whatever the
#    manifest's strings hold (fuzzing);
#  - decode refuses a NUL byte instead of dropping the ids after it;
#  - one long word without spaces encodes like the reference (the JS
#    encoder, on a word short enough for it) and a 1 MB one finishes.
. "$top_srcdir/tests/lib.sh"
need_tokenizer
topo="$top_builddir/ptrain-topo"
run="$top_builddir/ptrain-run"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/ptrain-files.XXXXXX")
trap 'rm -rf "$tmp"' EXIT INT TERM
export PTRAIN_BPE_DIR=$bpe
# ptrain-run is an MPI program: under ASan its leak check is off, as
# ptrain_mpirun does (Open MPI keeps allocations LeakSanitizer cannot attribute)
nolsan="ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
# one-line refusal, not a block (guard: 60 s; an MPI start under ASan on a
# loaded machine takes several seconds): desc, status wanted, pattern, command...
refuse() {
    desc=$1; want=$2; pat=$3; shift 3
    rc=0
    timeout 60 "$@" >"$tmp/r.out" 2>&1 || rc=$?
    if [ "$rc" -eq 124 ]; then
        not_ok "$desc: blocked (killed after 60 s)"
    elif [ "$rc" -eq "$want" ] && [ "$(grep -c . "$tmp/r.out")" -eq 1 ] && grep -q -- "$pat" "$tmp/r.out"; then
        ok "$desc: $(cut -c1-160 "$tmp/r.out")"
    else
        not_ok "$desc: expected status $want and one line matching '$pat' (status $rc)"
        sed 's/^/# /' "$tmp/r.out" | head -5
    fi
}

# corpora: A (previous run), B (the run that fails)
awk 'BEGIN { srand(11); for (i = 0; i < 3000; i++) printf "alpha %d beta %c.\n", int(rand() * 1e6), 97 + i % 26 }' >"$tmp/a.txt"
awk 'BEGIN { srand(22); for (i = 0; i < 3000; i++) printf "gamma %d delta %c!\n", int(rand() * 1e6), 97 + i % 26 }' >"$tmp/b.txt"
"$pd" prepare --val-fraction 0.1 --out "$tmp/ds" "$tmp/a.txt" >/dev/null || { echo "Bail out! prepare A failed"; exit 1; }
cp "$tmp/ds/train.bin" "$tmp/trainA"; cp "$tmp/ds/val.bin" "$tmp/valA"
"$pd" prepare --val-fraction 0.1 --out "$tmp/dsB" "$tmp/b.txt" >/dev/null || { echo "Bail out! prepare B failed"; exit 1; }
# dsB/train.bin holds 90% of B's tokens; prepared again with --val-fraction
# 0.9, train.bin gets 10% and val.bin 90%: a file size limit of half of
# dsB/train.bin lets train.bin through and makes val.bin fail (EFBIG)
tsz=$(stat -c %s "$tmp/dsB/train.bin")
lim=$(( tsz / 2 / 1024 ))
rc=0
(trap '' XFSZ; ulimit -f "$lim"; exec "$pd" prepare --val-fraction 0.9 --out "$tmp/ds" "$tmp/b.txt") \
    >"$tmp/p.out" 2>&1 || rc=$?
check "prepare with a failing val.bin write exits non-zero with one line ($(head -c 150 "$tmp/p.out"))" \
    sh -c "[ $rc -ne 0 ] && [ \$(grep -c . '$tmp/p.out') -eq 1 ]"
check "the previous train.bin is untouched" cmp -s "$tmp/ds/train.bin" "$tmp/trainA"
check "the previous val.bin is untouched" cmp -s "$tmp/ds/val.bin" "$tmp/valA"
check "no temporary file is left" sh -c "! ls -a '$tmp/ds' | grep -q tmp"
# a pair from two runs (what a crash between the renames would leave)
mkdir "$tmp/mixed"; cp "$tmp/dsB/train.bin" "$tmp/mixed/"; cp "$tmp/valA" "$tmp/mixed/val.bin"
refuse "ptrain-run refuses train.bin and val.bin of two prepare runs" 2 "were not written together" \
    env "$nolsan" "$run" --model test --vocab 50257 --data "$tmp/mixed" --steps 1 --batch 2
rc=0
env "$nolsan" "$run" --model test --data "$tmp/ds" --steps 1 --batch 2 --seq-len 16 --val-batches 1 >"$tmp/ok.out" 2>&1 || rc=$?
check "ptrain-run trains on the pair of one prepare run (status $rc)" grep -q '^done:' "$tmp/ok.out"

# killed prepare: nothing left behind (kill at several points of the write)
awk 'BEGIN { srand(5); for (i = 0; i < 400000; i++) printf "word%d ", int(rand() * 1e5) }' >"$tmp/big.txt"
left=0
for delay in 0.2 0.5 0.9 1.4; do
    mkdir -p "$tmp/k"
    "$pd" prepare --out "$tmp/k" "$tmp/big.txt" >/dev/null 2>&1 &
    p=$!
    sleep $delay
    kill -9 $p 2>/dev/null
    wait $p 2>/dev/null
    ls -a "$tmp/k" | grep -q 'tmp' && left=$((left + 1))
done
check "prepare killed with SIGKILL at 4 points of its run leaves no *.tmp.* file" [ "$left" -eq 0 ]

# ptrain-topo --save with symlinks planted at the predictable temporary names
xml="$top_srcdir/tests/topo/cpu2s.xml"
ln -s "$tmp/victim" "$tmp/model.json.tmp.XXXXXX"
next=$(sh -c 'echo $$')
i=0
while [ $i -lt 400 ]; do
    ln -s "$tmp/victim" "$tmp/model.json.tmp.$((next + i))" 2>/dev/null
    ln -s "$tmp/victim" "$tmp/model.json.tmp.$((next + i)).0" 2>/dev/null
    i=$((i + 1))
done
"$topo" --topology "$xml" --save "$tmp/model.json" >/dev/null 2>&1
check "ptrain-topo --save writes its file" sh -c "grep -q ptrain-topo '$tmp/model.json'"
check "ptrain-topo --save follows no planted symlink (the link target was not created)" test ! -e "$tmp/victim"

# outputs that are not regular files: ptrain-topo --save and ptrain-data
# prepare refuse them in one line, status 2, before any work, and leave them
# (and what a link points to) as they were; the old writers renamed a
# regular file over them (as root, --save /dev/null replaced /dev/null)
mkdir "$tmp/out"
awk 'BEGIN { srand(); printf "victim %d\n", int(rand() * 1e9) }' >"$tmp/out/victim"
cp "$tmp/out/victim" "$tmp/out/victim.orig"
mkfifo "$tmp/out/fifo.json"
ln -s victim "$tmp/out/link.json"
ln -s nowhere "$tmp/out/dangling.json"
mkdir "$tmp/out/dir.json"
refuse "ptrain-topo --save FIFO" 2 "fifo.json is a FIFO, not a regular file: refusing to replace it" \
    "$topo" --topology "$xml" --save "$tmp/out/fifo.json"
check "... the FIFO is still a FIFO" test -p "$tmp/out/fifo.json"
refuse "ptrain-topo --save LINK (to a regular file)" 2 "link.json is a symbolic link, not a regular file" \
    "$topo" --topology "$xml" --save "$tmp/out/link.json"
check "... the link is still a link to victim, and victim is unchanged" \
    sh -c "[ -L '$tmp/out/link.json' ] && [ \"\$(readlink '$tmp/out/link.json')\" = victim ] && cmp -s '$tmp/out/victim' '$tmp/out/victim.orig'"
refuse "ptrain-topo --save DANGLING-LINK" 2 "dangling.json is a symbolic link, not a regular file" \
    "$topo" --topology "$xml" --save "$tmp/out/dangling.json"
check "... the link's target was not created" test ! -e "$tmp/out/nowhere"
refuse "ptrain-topo --save DIR" 2 "dir.json is a directory, not a regular file" "$topo" --topology "$xml" --save "$tmp/out/dir.json"
if mknod "$tmp/out/null.json" c 1 3 2>/dev/null; then
    refuse "ptrain-topo --save CHAR-DEVICE (mknod c 1 3, as /dev/null)" 2 "null.json is a character device, not a regular file" \
        "$topo" --topology "$xml" --save "$tmp/out/null.json"
    check "... the device is still a character device" test -c "$tmp/out/null.json"
    rm -f "$tmp/out/null.json"
else
    ok "ptrain-topo --save CHAR-DEVICE # SKIP cannot create a character device here (needs root with CAP_MKNOD)"
fi
"$topo" --topology "$xml" --save "$tmp/out/plain.json" >/dev/null 2>&1
check "ptrain-topo --save over an existing regular file still replaces it" sh -c "grep -q ptrain-topo '$tmp/out/plain.json'"
mkdir "$tmp/out/ds"
ln -s ../victim "$tmp/out/ds/train.bin"
refuse "prepare --out DIR with DIR/train.bin a link to a regular file" 2 "train.bin is a symbolic link, not a regular file" \
    "$pd" prepare --out "$tmp/out/ds" "$tmp/a.txt"
check "... the link and victim are unchanged, and no val.bin was written" \
    sh -c "[ -L '$tmp/out/ds/train.bin' ] && cmp -s '$tmp/out/victim' '$tmp/out/victim.orig' && [ ! -e '$tmp/out/ds/val.bin' ]"
rm "$tmp/out/ds/train.bin"; mkfifo "$tmp/out/ds/val.bin"
refuse "prepare --out DIR with DIR/val.bin a FIFO" 2 "val.bin is a FIFO, not a regular file" \
    "$pd" prepare --out "$tmp/out/ds" "$tmp/a.txt"
check "... the FIFO is still a FIFO and no train.bin was written" sh -c "[ -p '$tmp/out/ds/val.bin' ] && [ ! -e '$tmp/out/ds/train.bin' ]"
refuse "prepare --out FILE" 2 "victim exists and is not a directory" "$pd" prepare --out "$tmp/out/victim" "$tmp/a.txt"

# standard output that cannot be written (a full disk: /dev/full) is an
# error in one line, not a silent success with lost output
if [ -w /dev/full ]; then
    refuse "ptrain-data info >/dev/full" 1 "info: cannot write standard output: No space left on device" \
        sh -c "exec '$pd' info '$tmp/valA' >/dev/full"
    refuse "ptrain-data prepare >/dev/full" 1 "prepare: cannot write standard output: No space left on device" \
        sh -c "exec '$pd' prepare --out '$tmp/full' '$tmp/a.txt' >/dev/full"
    refuse "ptrain-topo --json >/dev/full" 1 "cannot write standard output: No space left on device" \
        sh -c "exec '$topo' --topology '$xml' --json >/dev/full"
else
    ok "writes to /dev/full # SKIP no writable /dev/full"
fi
# a topology file is typed by its first non-blank byte before the rest is
# read: a 4 GiB (sparse) file starting with 'x' is refused at once, under a
# 1 GB address-space limit that the old code, reading it whole first, ran
# out of (not under ASan, which needs the address space for its shadow)
truncate -s 4G "$tmp/big.json" && printf x | dd of="$tmp/big.json" conv=notrunc 2>/dev/null
if grep -q '^SAN_CFLAGS = -fsanitize' "$top_builddir/Makefile" 2>/dev/null; then
    ok "ptrain-topo --load of a 4 GiB non-topology file # SKIP sanitizer build (ulimit -v)"
else
    refuse "ptrain-topo --load of a 4 GiB file starting with 'x', 1 GB address space" 2 \
        "big.json' is neither ptrain JSON ('{') nor hwloc XML ('<')" sh -c "ulimit -v 1000000; exec '$topo' --load '$tmp/big.json'"
fi
rm -f "$tmp/big.json"

# FIFOs and directories as input: one line, no blocking
mkfifo "$tmp/fifo"
mkdir -p "$tmp/fifodata"; mkfifo "$tmp/fifodata/train.bin"; cp "$tmp/valA" "$tmp/fifodata/val.bin"
refuse "ptrain-data info FIFO" 2 "is a FIFO, not a regular file" "$pd" info "$tmp/fifo"
refuse "ptrain-data encode FIFO" 2 "is a FIFO, not a regular file" "$pd" encode "$tmp/fifo"
refuse "ptrain-data info DIR (a directory that is not a data set)" 1 "holds no data set" "$pd" info "$tmp"
refuse "ptrain-topo --load FIFO" 2 "is a FIFO, not a regular file" "$topo" --load "$tmp/fifo"
refuse "ptrain-topo --topology FIFO" 2 "is a FIFO, not a regular file" "$topo" --topology "$tmp/fifo"
refuse "ptrain-run --data with a FIFO train.bin" 2 "train.bin is a FIFO, not a regular file" \
    env "$nolsan" "$run" --model test --data "$tmp/fifodata" --steps 1 --batch 2

# topology caches: the error names the file read, not the JSON's source field
"$topo" --topology "$top_srcdir/tests/topo/pairs8-nvlink.xml" --save "$tmp/t.json" >/dev/null
python3 - "$tmp" <<'PY'
import json, sys
d = sys.argv[1]
t = json.load(open(d + "/t.json"))
t["source"] = "/elsewhere/other.xml"
t["gpu_links"][0][1] = "NV99999999999999999999"
json.dump(t, open(d + "/nv.json", "w"))
t = json.load(open(d + "/t.json"))
t["numa"].append(dict(t["numa"][0]))
json.dump(t, open(d + "/dup.json", "w"))
PY
refuse "NV99999999999999999999 in a cache is refused naming the file" 2 "nv.json: field 'gpu_links' holds 'NV99999999999999999999': an NVLink count must be 1..64" \
    "$topo" --load "$tmp/nv.json"
refuse "a duplicate NUMA os_index is refused" 2 "dup.json: field 'numa' lists os_index 0 twice" "$topo" --load "$tmp/dup.json"

# hwloc XML that crashes hwloc 2.9's own import (its built-in parser drops
# the attributes after a stray quote, then dereferences the missing
# complete_cpuset): imported first in a child process, so ptrain-topo (often
# run as root) and any caller such as slurmstepd get one line instead of a
# crash.  Found by tests/fuzz/fuzz_topo_xml; libxml2's parser (Debian's
# libhwloc-plugins) rejects the same file as malformed.
crash_xml="$top_srcdir/tests/fuzz/regress/topo_xml/hwloc-stray-quote.xml"
for opt in --topology --load; do
    HWLOC_LIBXML_IMPORT=0 refuse "ptrain-topo $opt: XML that crashes hwloc's import" 2 \
        "hwloc-stray-quote.xml': hwloc cannot import this XML (hwloc crashed with signal 11" "$topo" $opt "$crash_xml"
done
refuse "ptrain-topo --topology: the same XML with the default backend" 2 "hwloc-stray-quote.xml" "$topo" --topology "$crash_xml"

# ptrain-ckpt verify prints one line per problem, also when the manifest's
# strings hold newlines (a rank file named "rank<newline>00000.bin", with a
# correct checksum, so that the manifest is read): found by
# tests/fuzz/fuzz_ckpt_manifest in the library's check, the same in verify's
# own lines
mkdir -p "$tmp/nlck"
python3 - "$top_srcdir/tests/fuzz/corpus/ckpt_manifest/old-no-checksum.json" "$tmp/nlck/manifest.json" <<'PY'
import json, sys
m = json.load(open(sys.argv[1]))
m["files"][0]["name"] = "rank\n00000.bin"
m["manifest_fnv1a64"] = "0" * 16
text = json.dumps(m, indent=1)
h = 0xcbf29ce484222325
for b in text.encode():
    h = ((h ^ b) * 0x100000001b3) & 0xFFFFFFFFFFFFFFFF
open(sys.argv[2], "w").write(text.replace('"' + "0" * 16 + '"', '"%016x"' % h))
PY
refuse "ptrain-ckpt verify: a rank file name holding a newline" 1 "rank 00000.bin is missing" \
    "$top_builddir/ptrain-ckpt" verify "$tmp/nlck"

# decode: a NUL byte is an error, not the end of the list
printf '15496\n11\0\n995\n' >"$tmp/nul.ids"
refuse "decode refuses a NUL byte in the id list" 2 "a NUL byte on line 2" "$pd" decode "$tmp/nul.ids"

# one word without spaces: equal to the reference encoder, and 1 MB finishes
awk 'BEGIN { srand(7); for (i = 0; i < 6000; i++) printf "%c", 97 + int(rand() * 26) }' >"$tmp/word.txt"
"$node" "$ref" encode "$bpe" "$tmp/word.txt" >"$tmp/word.js" 2>/dev/null
"$pd" encode "$tmp/word.txt" | tr '\n' ' ' | sed 's/ *$//' >"$tmp/word.c"
echo >>"$tmp/word.c"
check "a 6000-byte word without spaces encodes like the JS reference ($(wc -w <"$tmp/word.js") tokens)" \
    cmp -s "$tmp/word.js" "$tmp/word.c"
awk 'BEGIN { srand(8); for (i = 0; i < 1048576; i++) printf "%c", 97 + int(rand() * 26) }' >"$tmp/mb.txt"
"$pd" encode "$tmp/mb.txt" >"$tmp/mb.ids" && "$pd" decode "$tmp/mb.ids" >"$tmp/mb.back"
check "a 1 MB word without spaces encodes and decodes back (was quadratic: 0.05 MB/s)" cmp -s "$tmp/mb.txt" "$tmp/mb.back"
done_testing
