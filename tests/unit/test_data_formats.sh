#!/bin/sh
# ptrain-data info and export on the token files of other tools, written here
# by an independent Python writer (struct, from llm.c's
# dev/data/data_common.py write_datafile and nanoGPT's prepare.py tofile):
#  - a directory of llm.c shards as llm.c's fineweb.py names them (val 0,
#    train from 1; other files beside them) is one data set: info counts its
#    files and tokens; export writes llm.c files whose headers and ids,
#    read back by Python, are the written ones in order, bit for bit
#    (re-sharded by --shard-tokens N: N ids each but the last); one llm.c
#    file exported is the same file, byte for byte;
#  - nanoGPT's headerless train.bin / val.bin (nanogpt:DIR with --vocab):
#    exported ids equal the file's bytes; without --vocab, or with one below
#    an id: refused in one line;
#  - a ptrain shard pair written by Python (checksums and set id computed
#    there) exports to the same ids;
#  - malformed llm.c files (version 2, sizes that do not match the header,
#    an id outside GPT-2's vocabulary): one line, exit 1 (the sanitizer
#    build runs this too).
. "$top_srcdir/tests/lib.sh"
pd=$top_builddir/ptrain-data
[ -x "$pd" ] || skip_all "ptrain-data not built"
command -v python3 >/dev/null 2>&1 || skip_all "python3 not found"
workdir
fresh_seed
diag "seed $seed"
W='
import random, struct, sys
def llmc(path, ids, version=1, count=None):
    h = [0] * 256
    h[0], h[1], h[2] = 20240520, version, len(ids) if count is None else count
    open(path, "wb").write(struct.pack("<256i", *h) + struct.pack("<%dH" % len(ids), *ids))
def ids_of(path, header):
    b = open(path, "rb").read()[header:]
    return list(struct.unpack("<%dH" % (len(b) // 2), b))
'

# ---- llm.c shards ---------------------------------------------------------------
mkdir -p "$wd/fw"
python3 -c "$W
r = random.Random(int(sys.argv[2])); d = sys.argv[1]
out = {'train': [], 'val': []}
for name, split, n in [('fineweb_val_000000.bin', 'val', 700), ('fineweb_train_000001.bin', 'train', 1500),
                       ('fineweb_train_000002.bin', 'train', 3), ('fineweb_train_000003.bin', 'train', 2222)]:
    ids = [r.randrange(50257) for _ in range(n + r.randrange(50))]
    ids[0] = 50256
    llmc(d + '/' + name, ids)
    out[split] += ids
for s in out: open(d + '/../' + s + '.ids', 'w').write(' '.join(map(str, out[s])))
open(d + '/README.md', 'w').write('not a shard')
" "$wd/fw" "$seed"
"$pd" info "$wd/fw" >"$wd/info" 2>&1; rc=$?
nt=$(wc -w <"$wd/train.ids") nv=$(wc -w <"$wd/val.ids")
check "info of a directory of llm.c shards: train $nt tokens in 3 files, val $nv in 1 (status $rc)" \
    sh -c "[ $rc -eq 0 ] && grep -q '^format  *llmc' '$wd/info' && grep -q '^train  *$nt tokens in 3 files, vocab_size 50257' '$wd/info' &&
           grep -q '^val  *$nv tokens in 1 file,' '$wd/info'"
check_export() { # DIR SPLIT FILES PER: the exported files hold the written ids, PER each but the last
    python3 -c "$W
d, split, nfiles, per = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
want = list(map(int, open(d + '/../' + split + '.ids').read().split()))
got, sizes = [], []
for k in range(nfiles):
    p = '%s/ptrain_%s_%06d.bin' % (d, split, k)
    h = struct.unpack('<256i', open(p, 'rb').read(1024))
    ids = ids_of(p, 1024)
    assert h[0] == 20240520 and h[1] == 1 and h[2] == len(ids) and not any(h[3:]), 'header of ' + p
    got += ids; sizes.append(len(ids))
assert got == want, 'ids differ'
assert all(s == per for s in sizes[:-1]) and 0 < sizes[-1] <= per, 'sizes %s' % sizes
print('%d files, %d ids' % (nfiles, len(got)))" "$@"
}
rc=0; "$pd" export "$wd/fw" "$wd/ex" >"$wd/ex.out" 2>&1 || rc=$?
out=$(check_export "$wd/ex" train 1 100000000 2>&1) && out2=$(check_export "$wd/ex" val 1 100000000 2>&1); rc2=$?
check "export of the set: ptrain_train_000000.bin and ptrain_val_000000.bin hold the written ids in name order (status $rc: $out; $out2)" \
    [ "$rc" -eq 0 -a "$rc2" -eq 0 ]
per=$((500 + seed % 700))
rc=0; "$pd" export --shard-tokens $per "$wd/fw" "$wd/ex2" >"$wd/ex2.out" 2>&1 || rc=$?
files=$(( (nt + per - 1) / per ))
out=$(check_export "$wd/ex2" train $files $per 2>&1); rc2=$?
check "export --shard-tokens $per: $files train files of $per ids but the last, the written ids in order ($out)" \
    [ "$rc" -eq 0 -a "$rc2" -eq 0 ]
"$pd" export "$wd/fw/fineweb_train_000003.bin" "$wd/one.bin" >/dev/null 2>&1
check "export of one llm.c file is that file, byte for byte" cmp -s "$wd/fw/fineweb_train_000003.bin" "$wd/one.bin"
rc=0; "$pd" export --format ckpt "$wd/fw" "$wd/x" >"$wd/e" 2>&1 || rc=$?
check "export --format ckpt: refused naming llmc ($(cat "$wd/e"))" sh -c "[ $rc -eq 2 ] && grep -q 'not one of llmc' '$wd/e'"

# ---- nanoGPT ----------------------------------------------------------------------
mkdir -p "$wd/ng"
python3 -c "$W
r = random.Random(int(sys.argv[2]) + 1); d = sys.argv[1]
for name, n in [('train.bin', 3000), ('val.bin', 400)]:
    ids = [r.randrange(64) for _ in range(n)]
    ids[9] = 64
    open(d + '/' + name, 'wb').write(struct.pack('<%dH' % n, *ids))
" "$wd/ng" "$seed"
rc=0; "$pd" info --vocab 65 "nanogpt:$wd/ng" >"$wd/ngi" 2>&1 || rc=$?
check "info --vocab 65 nanogpt:DIR: train 3000 tokens, val 400 (status $rc)" \
    sh -c "[ $rc -eq 0 ] && grep -q '^format  *nanogpt' '$wd/ngi' && grep -q '^train  *3000 tokens in 1 file, vocab_size 65' '$wd/ngi'"
rc=0; "$pd" export --vocab 65 "nanogpt:$wd/ng/train.bin" "$wd/ng.bin" >/dev/null 2>&1 || rc=$?
check "export of a nanoGPT file: the llm.c file's ids are its bytes (status $rc)" \
    sh -c "[ $rc -eq 0 ] && tail -c +1025 '$wd/ng.bin' | cmp -s - '$wd/ng/train.bin'"
rc=0; "$pd" info "nanogpt:$wd/ng" >"$wd/e" 2>&1 || rc=$?
check "nanogpt: without --vocab: exit 2, one line ($(cat "$wd/e"))" \
    sh -c "[ $rc -eq 2 ] && [ \$(wc -l <'$wd/e') -eq 1 ] && grep -q 'give --vocab N' '$wd/e'"
rc=0; "$pd" info --vocab 64 "nanogpt:$wd/ng" >"$wd/e" 2>&1 || rc=$?
check "--vocab below an id: exit 1, one line naming it ($(cat "$wd/e"))" \
    sh -c "[ $rc -eq 1 ] && [ \$(wc -l <'$wd/e') -eq 1 ] && grep -q 'token 9 has id 64 >= vocab_size 64' '$wd/e'"
rc=0; "$pd" info "$wd/ng" >"$wd/e" 2>&1 || rc=$?
check "a nanoGPT directory without the prefix: one line naming nanogpt: ($(cat "$wd/e"))" \
    sh -c "[ $rc -eq 1 ] && [ \$(wc -l <'$wd/e') -eq 1 ] && grep -q 'nanogpt:' '$wd/e'"

# ---- a ptrain shard pair from Python ------------------------------------------------
mkdir -p "$wd/pt"
python3 -c "$W
r = random.Random(int(sys.argv[2]) + 2); d = sys.argv[1]
def fnv(b, h=0xcbf29ce484222325):
    for x in b: h = ((h ^ x) * 0x100000001b3) & 0xffffffffffffffff
    return h
parts = [[r.randrange(1000) for _ in range(n)] for n in (2500, 300)]
pays = [struct.pack('<%dH' % len(p), *p) for p in parts]
sums = [fnv(p) for p in pays]
sid = fnv(b''.join(struct.pack('<QQ', len(p), s) for p, s in zip(parts, sums))) or 1
for name, p, pay, s in zip(('train.bin', 'val.bin'), parts, pays, sums):
    open(d + '/' + name, 'wb').write(b'PTRNTOK\0' + struct.pack('<IIQIIQQ', 1, 2, len(p), 1000, 999, s, sid) + bytes(16) + pay)
" "$wd/pt" "$seed"
rc=0; "$pd" export "$wd/pt/train.bin" "$wd/pt.bin" >/dev/null 2>&1 || rc=$?
check "export of a ptrain shard: the llm.c file's ids are the shard's (status $rc)" \
    sh -c "[ $rc -eq 0 ] && tail -c +1025 '$wd/pt.bin' | cmp -s -i 0:64 - '$wd/pt/train.bin'"
"$pd" info "$wd/pt" >"$wd/pti" 2>&1
check "info of the pair: a ptrain set with its set id" sh -c "grep -q '^format  *ptrain' '$wd/pti' && grep -q '^set_id  *[0-9a-f]\{16\}' '$wd/pti'"

# ---- malformed llm.c files: one line each -----------------------------------------------
bad() { # NAME PATTERN PYTHON-ARGS-OF-llmc
    python3 -c "$W
llmc(sys.argv[1], $3)" "$wd/$1"
    rc=0; "$pd" info "$wd/$1" >/dev/null 2>"$wd/e" || rc=$?
    check "llm.c $1: exit 1, one line ($(cat "$wd/e"))" sh -c "[ $rc -eq 1 ] && [ \$(wc -l <'$wd/e') -eq 1 ] && grep -qF -- '$2' '$wd/e'"
}
bad v2.bin "version 2 is not supported" "[1, 2, 3], version=2"
bad over.bin "header says 5 tokens" "[1, 2, 3], count=5"
bad huge.bin "header says 2147483647 tokens" "[1, 2, 3], count=2147483647"
bad neg.bin "negative token count" "[1, 2, 3], count=-1"
bad id.bin "token 1 has id 50257 >= vocab_size 50257" "[1, 50257, 3]"
printf 'tiny' >"$wd/short.bin"
rc=0; "$pd" info "llmc:$wd/short.bin" >/dev/null 2>"$wd/e" || rc=$?
check "llmc: a 4-byte file: exit 1, one line ($(cat "$wd/e"))" sh -c "[ $rc -eq 1 ] && grep -q 'not an llm.c token file' '$wd/e'"
done_testing
