#!/bin/sh
# ptrain-run --data reads every data set layout of lib/data (pt_dataset_open):
# files written here by Python's struct (llm.c's write_datafile, nanoGPT's
# tofile, ptrain's shard format and index.json), each holding the tokens of
# one reference pair of ptrain shards:
#  - a directory of llm.c shards (fineweb names, a 3-token file among them,
#    so that sequences span files), a ptrain set of several shards listed in
#    index.json, and the reference train.bin/val.bin train to the same
#    losses, digit for digit, under dp=2;
#  - nanogpt:DIR trains with the model's vocabulary, and an id at or above it
#    is refused in one line naming the file and the token.
# Every check fails until ptrain-run opens its data with pt_dataset_open
# (mpi.am lists it in EXTRA_DIST only until then).
. "$top_srcdir/tests/lib.sh"
need_run
command -v python3 >/dev/null 2>&1 || skip_all "python3 not found"
need_mpirun
workdir
fresh_seed
diag "seed $seed"
python3 - "$wd" "$seed" <<'EOF'
import json, os, random, struct, sys
d, seed = sys.argv[1], int(sys.argv[2])
r = random.Random(seed)
def fnv(b, h=0xcbf29ce484222325):
    for x in b:
        h = ((h ^ x) * 0x100000001b3) & 0xffffffffffffffff
    return h
def u16(ids): return struct.pack("<%dH" % len(ids), *ids)
def shard(path, ids, vocab, sid):
    open(path, "wb").write(b"PTRNTOK\0" + struct.pack("<IIQIIQQ", 1, 2, len(ids), vocab, vocab - 1, fnv(u16(ids)), sid)
                           + bytes(16) + u16(ids))
V = 50257
train = [r.randrange(V) for _ in range(6000)]
val = [r.randrange(V) for _ in range(900)]
# the reference: one pair of one set
os.makedirs(d + "/ref")
sid = fnv(b"".join(struct.pack("<QQ", len(p), fnv(u16(p))) for p in (train, val))) or 1
shard(d + "/ref/train.bin", train, V, sid)
shard(d + "/ref/val.bin", val, V, sid)
# llm.c shards: val 0, train from 1, one of 3 tokens
os.makedirs(d + "/llmc")
def llmc(path, ids):
    open(path, "wb").write(struct.pack("<256i", 20240520, 1, len(ids), *([0] * 253)) + u16(ids))
cuts = [0, 2500, 2503, 6000]
for k in range(3):
    llmc("%s/llmc/fineweb_train_%06d.bin" % (d, k + 1), train[cuts[k]:cuts[k + 1]])
llmc(d + "/llmc/fineweb_val_000000.bin", val)
# a ptrain set of several shards and its index
os.makedirs(d + "/set")
parts = {"train": [train[0:1000], train[1000:1001], train[1001:4000], train[4000:]], "val": [val[:450], val[450:]]}
pairs = [p for s in ("train", "val") for p in parts[s]]
sid = fnv(b"".join(struct.pack("<QQ", len(p), fnv(u16(p))) for p in pairs)) or 1
idx = {"format": "ptrain-token-set", "version": 1, "set_id": "%016x" % sid, "vocab_size": V, "eot_id": V - 1}
for s in ("train", "val"):
    idx[s] = []
    for i, p in enumerate(parts[s]):
        name = "%s_%06d.bin" % (s, i)
        shard(d + "/set/" + name, p, V, sid)
        idx[s].append({"file": name, "tokens": len(p), "fnv1a64": "%016x" % fnv(u16(p))})
json.dump(idx, open(d + "/set/index.json", "w"))
# nanoGPT, a vocabulary of 65
os.makedirs(d + "/ng")
ids = [r.randrange(64) for _ in range(3000)]
open(d + "/ng/train.bin", "wb").write(u16(ids))
open(d + "/ng/val.bin", "wb").write(u16([r.randrange(64) for _ in range(500)] + [64]))
EOF
common="--model test --seed $init --batch 4 --steps 4 --val-every 2 --val-batches 2 --dp 2"
losses() { grep -E '^(step|val:|done)' "$1" | sed 's/|[^|]*ms.*//; s/ *$//'; }
ptrain_mpirun -np 2 "$run" $common --data "$wd/ref" >"$wd/ref.out" 2>&1
losses "$wd/ref.out" >"$wd/ref.l"
for tag in llmc set; do
    rc=0; ptrain_mpirun -np 2 "$run" $common --data "$wd/$tag" >"$wd/$tag.out" 2>&1 || rc=$?
    losses "$wd/$tag.out" >"$wd/$tag.l"
    check "--data $tag: trains (status $rc) to the losses of the reference pair ($(tail -n 1 "$wd/$tag.l"))" \
        sh -c "[ $rc -eq 0 ] && [ -s '$wd/ref.l' ] && cmp -s '$wd/ref.l' '$wd/$tag.l'"
done
rc=0; ptrain_mpirun -np 1 "$run" --model test --vocab 65 --batch 4 --steps 2 --val-every 0 --val-batches 1 \
    --data "nanogpt:$wd/ng" >"$wd/ng.out" 2>&1 || rc=$?
check "--data nanogpt:DIR --vocab 65 trains (status $rc)" sh -c "[ $rc -eq 0 ] && grep -q '^done:' '$wd/ng.out'"
rc=0; ptrain_mpirun -np 1 "$run" --model test --vocab 64 --batch 4 --steps 2 --data "nanogpt:$wd/ng" >"$wd/ng2.out" 2>&1 || rc=$?
check "--vocab 64 below a nanoGPT id: refused in one line ($(grep error "$wd/ng2.out" | head -n 1))" \
    sh -c "[ $rc -ne 0 ] && [ \$(grep -c 'ptrain-run: error' '$wd/ng2.out') -eq 1 ] && grep -q 'val.bin: token 500 has id 64 >= vocab_size 64' '$wd/ng2.out'"
done_testing
