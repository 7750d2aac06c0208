#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Edit ptrain checkpoints and model files the way a user, a bad disk or a
diverged run could, keeping every checksum valid, for tests/mpi/test_ckpt_finite.sh,
test_convert_st.sh and test_sample.sh.  Independent of ptrain's code: the
layout is the one docs/ARCHITECTURE.md and lib/ckpt/ckpt.h describe (a
manifest.json whose member "manifest_fnv1a64" is the FNV-1a 64 of the file
with those 16 digits as '0'; rank files of [weights | AdamW m | AdamW v]
fp32 slices per tensor, each file's FNV-1a 64 in the manifest).

  set CKPT KEY JSON           manifest member KEY (dotted: lr_schedule.lr) = JSON
                              (a JSON text, or DEL to remove it); checksum redone
  float CKPT FILE TENSOR WHICH ELEM VALUE
                              rank file FILE (index in files), its TENSOR-th slice,
                              WHICH 0 weight / 1 m / 2 v, element ELEM (or "all")
                              = VALUE (a Python float: nan, inf, -1, 3e38); the
                              file's and the manifest's checksums redone
  nonfinite CKPT              prints how many floats of CKPT's rank files are not
                              finite, and how many AdamW v are negative
  st-set FILE TENSOR ELEM VALUE
                              F32 element ELEM of safetensors tensor TENSOR = VALUE
  bin-set FILE INDEX VALUE    float INDEX after llm.c's 1 KiB header = VALUE (fp32 file)
  sparse-st FILE L H C T V    a safetensors header of GPT-2 (L, H, C, T, V) in F32,
                              its data a hole (truncate), config.json beside it
  huge-ckpt DIR L H C T V     DIR/step-00000000/manifest.json of a one-rank
                              checkpoint of that model (sound, checksummed), its
                              rank file absent (nothing may read it), DIR/latest
"""
import json
import math
import os
import struct
import sys

FNV_BASIS, FNV_PRIME = 0xCBF29CE484222325, 0x100000001B3
SUM = "manifest_fnv1a64"


def fnv(data):
    h = FNV_BASIS
    for b in data:
        h = ((h ^ b) * FNV_PRIME) & 0xFFFFFFFFFFFFFFFF
    return h


def write_manifest(path, m):
    m.pop(SUM, None)
    m[SUM] = "0" * 16
    text = json.dumps(m, indent=1)
    at = text.rindex('"' + SUM + '": "') + len(SUM) + 5
    text = text[:at] + "%016x" % fnv(text.encode()) + text[at + 16:]
    with open(path, "w") as f:
        f.write(text)


def load(ckpt):
    return json.load(open(os.path.join(ckpt, "manifest.json")))


def cmd_set(a):
    ckpt, key, val = a
    m = load(ckpt)
    keys = key.split(".")
    o = m
    for k in keys[:-1]:
        o = o[k]
    if val == "DEL":
        del o[keys[-1]]
    else:
        o[keys[-1]] = json.loads(val)
    write_manifest(os.path.join(ckpt, "manifest.json"), m)


def cmd_float(a):
    ckpt, fi, ti, which, elem, value = a
    m = load(ckpt)
    f = m["files"][int(fi)]
    t = f["tensors"][int(ti)]
    n = t["hi"] - t["lo"]
    p = os.path.join(ckpt, f["name"])
    b = bytearray(open(p, "rb").read())
    base = t["offset"] + 4 * n * int(which)
    for e in (range(n) if elem == "all" else [int(elem)]):
        b[base + 4 * e:base + 4 * e + 4] = struct.pack("<f", float(value))
    open(p, "wb").write(b)
    f["fnv1a64"] = "%016x" % fnv(b)
    write_manifest(os.path.join(ckpt, "manifest.json"), m)
    print(t["name"])


def cmd_nonfinite(a):
    m = load(a[0])
    bad = neg = 0
    for f in m["files"]:
        b = open(os.path.join(a[0], f["name"]), "rb").read()
        for t in f["tensors"]:
            n = t["hi"] - t["lo"]
            x = struct.unpack_from("<%df" % (3 * n), b, t["offset"])
            bad += sum(1 for v in x if not math.isfinite(v))
            neg += sum(1 for v in x[2 * n:] if v < 0)
    print(bad, neg)


def st_header(path):
    b = open(path, "rb").read(8)
    n = struct.unpack("<Q", b)[0]
    with open(path, "rb") as f:
        f.seek(8)
        return json.loads(f.read(n)), 8 + n


def cmd_st_set(a):
    path, name, elem, value = a
    h, data = st_header(path)
    t = h[name]
    assert t["dtype"] == "F32"
    with open(path, "r+b") as f:
        f.seek(data + t["data_offsets"][0] + 4 * int(elem))
        f.write(struct.pack("<f", float(value)))


def cmd_bin_set(a):
    path, idx, value = a
    with open(path, "r+b") as f:
        f.seek(1024 + 4 * int(idx))
        f.write(struct.pack("<f", float(value)))


def layout(L, C, T, V):
    out = [("wte.weight", [V, C]), ("wpe.weight", [T, C])]
    for l in range(L):
        p = "h.%d." % l
        out += [(p + "ln_1.weight", [C]), (p + "ln_1.bias", [C]),
                (p + "attn.c_attn.weight", [C, 3 * C]), (p + "attn.c_attn.bias", [3 * C]),
                (p + "attn.c_proj.weight", [C, C]), (p + "attn.c_proj.bias", [C]),
                (p + "ln_2.weight", [C]), (p + "ln_2.bias", [C]),
                (p + "mlp.c_fc.weight", [C, 4 * C]), (p + "mlp.c_fc.bias", [4 * C]),
                (p + "mlp.c_proj.weight", [4 * C, C]), (p + "mlp.c_proj.bias", [C])]
    return out + [("ln_f.weight", [C]), ("ln_f.bias", [C])]


def cmd_sparse_st(a):
    path, (L, H, C, T, V) = a[0], map(int, a[1:6])
    hdr, off = {}, 0
    for name, shape in layout(L, C, T, V):
        n = 4 * math.prod(shape)
        hdr[name] = {"dtype": "F32", "shape": shape, "data_offsets": [off, off + n]}
        off += n
    js = json.dumps(hdr).encode()
    js += b" " * ((8 - len(js) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(js)) + js)
        f.truncate(8 + len(js) + off)
    cfg = {"model_type": "gpt2", "n_layer": L, "n_head": H, "n_embd": C, "n_positions": T, "vocab_size": V}
    json.dump(cfg, open(os.path.join(os.path.dirname(path) or ".", "config.json"), "w"))
    print(off)


def cmd_huge_ckpt(a):
    d, (L, H, C, T, V) = a[0], map(int, a[1:6])
    ck = os.path.join(d, "step-00000000")
    os.makedirs(ck)
    tens, slices, off = [], [], 0
    for i, (name, shape) in enumerate(layout(L, C, T, V)):
        rows, cols = (shape[0], shape[1]) if len(shape) == 2 else (1, shape[0])
        n = rows * cols
        tens.append({"name": name, "index": i, "rows": rows, "cols": cols})
        slices.append({"name": name, "index": i, "rows": rows, "cols": cols, "local_numel": n, "lo": 0, "hi": n,
                       "offset": off})
        off += 12 * n
    m = {"format": "ptrain-checkpoint", "version": 1, "step": 0, "adam_step": 0,
         "model": {"n_layer": L, "n_head": H, "n_embd": C, "seq_len": T, "vocab": V},
         "plan": {"summary": "mode=1d dp=1 tp=1 pp=1 sp=1 zero=0", "world": 1, "mode": "1d", "tp_depth": 1, "dp": 1,
                  "tp": 1, "pp": 1, "sp": 1, "zero": 0},
         "data": {"spec": "synthetic", "position_step": 0},
         "lr_schedule": {"lr": 0.0, "min_lr": 0.0, "warmup": 0, "total_steps": 0},
         "rng": {"init_seed": 0, "note": "none"}, "tensors": tens,
         "files": [{"name": "rank-00000.bin", "rank": 0, "coords": {"dp": 0, "pp": 0, "tp": 0, "sp": 0},
                    "bytes": off, "fnv1a64": "0" * 16, "tensors": slices}],
         "model_name": "custom"}
    write_manifest(os.path.join(ck, "manifest.json"), m)
    with open(os.path.join(d, "latest"), "w") as f:
        f.write("step-00000000\n")


if __name__ == "__main__":
    cmds = {"set": cmd_set, "float": cmd_float, "nonfinite": cmd_nonfinite, "st-set": cmd_st_set,
            "bin-set": cmd_bin_set, "sparse-st": cmd_sparse_st, "huge-ckpt": cmd_huge_ckpt}
    sys.exit(cmds[sys.argv[1]](sys.argv[2:]) or 0)
