#!/usr/bin/env python3
"""Test helper for ptrain-ckpt convert of Hugging Face GPT-2 safetensors
(tests/mpi/test_convert_st.sh), written from the formats' documents with the
standard library only (struct, json; no numpy, no safetensors package):

  write OUT L H C T V SEED DTYPE [--prefix] [--lm-head] [--buffers] [--config DIR]
      a random GPT-2 model.safetensors in transformers' layout (Conv1D weights
      [in, out]; DTYPE F32, F16 or BF16; --prefix: GPT2LMHeadModel's
      "transformer." names; --lm-head: a tied lm_head.weight; --buffers: the
      attention mask buffers h.N.attn.bias / masked_bias older transformers
      saved); --config DIR: config.json there, as transformers writes it
  same A B
      exit 0 when B (ptrain-ckpt's F32 output: GPT2Model names) holds every
      weight of A (any dtype, prefix, head or buffers) with the same shape
      and, widened to fp32 here, the same bits
  hostile DIR
      write malformed files into DIR, one per case, and print "FILE<TAB>TEXT"
      lines: the text the one-line refusal must contain
  shards DIR V SEED NTRAIN NVAL
      a ptrain token shard pair (train.bin, val.bin) of random ids < V, with
      its FNV-1a 64 checksums and set id (lib/data/shard.h)
  loss ST L H C T V DATA B
      the mean cross-entropy of the first training batch (pt_loader_batch at
      step 0: sequence i starts at token (i T) mod (n - T - 1)) under the
      weights of ST, by a GPT-2 forward pass in double precision written
      here (Radford et al. 2019; GELU tanh approximation; LayerNorm eps 1e-5)
"""
import json
import math
import random
import re
import struct
import sys

F16_SPECIAL = [0x0000, 0x8000, 0x0001, 0x03ff, 0x8001, 0x0400, 0x7bff, 0x3c00]  # zeros, subnormals, normals


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


def numel(shape):
    n = 1
    for d in shape:
        n *= d
    return n


def encode(values, dtype):
    if dtype == "F32":
        return struct.pack("<%df" % len(values), *values)
    if dtype == "F16":
        return struct.pack("<%de" % len(values), *values)
    # BF16: the upper half of the binary32, rounded to nearest even
    out = bytearray()
    for v in values:
        b = struct.unpack("<I", struct.pack("<f", v))[0]
        b = (b + 0x7FFF + ((b >> 16) & 1)) >> 16
        out += struct.pack("<H", b & 0xFFFF)
    return bytes(out)


def widen(data, dtype):
    """the fp32 bytes of data: F16 by Python's own half decoder, BF16 by shifting"""
    if dtype == "F32":
        return bytes(data)
    n = len(data) // 2
    if dtype == "F16":
        return struct.pack("<%df" % n, *struct.unpack("<%de" % n, data))
    return b"".join(struct.pack("<I", h << 16) for h in struct.unpack("<%dH" % n, data))


def write_st(path, tensors, meta=None, pad=b" "):
    """tensors: [(name, dtype, shape, bytes)] in data order"""
    hdr, off = {}, 0
    for name, dt, shape, data in tensors:
        hdr[name] = {"dtype": dt, "shape": shape, "data_offsets": [off, off + len(data)]}
        off += len(data)
    if meta is not None:
        hdr["__metadata__"] = meta
    js = json.dumps(hdr).encode()
    js += pad * ((8 - len(js) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(js)))
        f.write(js)
        for t in tensors:
            f.write(t[3])


def read_st(path):
    b = open(path, "rb").read()
    n = struct.unpack("<Q", b[:8])[0]
    h = json.loads(b[8:8 + n])
    d = b[8 + n:]
    return {k: (v["dtype"], v["shape"], d[v["data_offsets"][0]:v["data_offsets"][1]])
            for k, v in h.items() if k != "__metadata__"}


def model_tensors(L, H, C, T, V, seed, dtype, prefix="", lm_head=False, buffers=False):
    rnd = random.Random(seed)
    ts = []
    for name, shape in layout(L, C, T, V):
        vals = [rnd.gauss(0, 0.2) if not name.endswith("ln_1.weight") and not name.endswith("ln_2.weight")
                and not name.startswith("ln_f.weight") else 1 + rnd.gauss(0, 0.2) for _ in range(numel(shape))]
        if name == "wpe.weight" and dtype == "F16":  # half subnormals and signed zeros, read back exactly
            data = bytearray(encode(vals, dtype))
            for i, h in enumerate(F16_SPECIAL):
                data[2 * i:2 * i + 2] = struct.pack("<H", h)
            data = bytes(data)
        else:
            data = encode(vals, dtype)
        ts.append((prefix + name, dtype, shape, data))
    if lm_head:
        ts.append(("lm_head.weight", dtype, [V, C], ts[0][3]))
    if buffers:
        for l in range(L):
            mask = bytes(1 if s <= t else 0 for t in range(T) for s in range(T))
            ts.append((prefix + "h.%d.attn.bias" % l, "U8", [1, 1, T, T], mask))
            ts.append((prefix + "h.%d.attn.masked_bias" % l, "F32", [], struct.pack("<f", -1e4)))
    rnd.shuffle(ts)  # data order need not be name order
    return ts


def config(L, H, C, T, V):
    return {"activation_function": "gelu_new", "architectures": ["GPT2LMHeadModel"], "attn_pdrop": 0.1,
            "bos_token_id": 50256, "embd_pdrop": 0.1, "eos_token_id": 50256, "initializer_range": 0.02,
            "layer_norm_epsilon": 1e-05, "model_type": "gpt2", "n_ctx": T, "n_embd": C, "n_head": H,
            "n_inner": None, "n_layer": L, "n_positions": T, "reorder_and_upcast_attn": False,
            "resid_pdrop": 0.1, "scale_attn_by_inverse_layer_idx": False, "scale_attn_weights": True,
            "vocab_size": V}


def cmd_write(a):
    out, L, H, C, T, V, seed, dtype = a[0], *map(int, a[1:7]), a[7]
    flags = a[8:]
    cdir = flags[flags.index("--config") + 1] if "--config" in flags else None
    ts = model_tensors(L, H, C, T, V, seed, dtype, "transformer." if "--prefix" in flags else "",
                       "--lm-head" in flags, "--buffers" in flags)
    write_st(out, ts, {"format": "pt"})
    if cdir:
        json.dump(config(L, H, C, T, V), open(cdir + "/config.json", "w"), indent=2)


def weights(path):
    """name (without transformer.) -> (shape, fp32 bytes) of the GPT-2 weights of a file"""
    out = {}
    for k, (dt, shape, data) in read_st(path).items():
        name = k[len("transformer."):] if k.startswith("transformer.") else k
        if name == "lm_head.weight" or re.fullmatch(r"h\.\d+\.attn\.(bias|masked_bias)", name):
            continue
        out[name] = (shape, widen(data, dt))
    return out


def cmd_same(a):
    x, y = weights(a[0]), weights(a[1])
    if set(x) != set(y):
        print("names differ: %s" % sorted(set(x) ^ set(y))[:5])
        return 1
    bad = [k for k in x if x[k] != y[k]]
    if bad:
        print("%d of %d tensors differ, e.g. %s" % (len(bad), len(x), bad[0]))
        return 1
    print("%d tensors, %d bytes of fp32, equal bit for bit" % (len(x), sum(len(v[1]) for v in x.values())))
    return 0


def cmd_hostile(a):
    d = a[0]
    L, H, C, T, V = 1, 2, 8, 4, 16
    good = model_tensors(L, H, C, T, V, 7, "F32")
    json.dump(config(L, H, C, T, V), open(d + "/config.json", "w"))
    cases = []

    def raw(name, data, text):
        open(d + "/" + name, "wb").write(data)
        cases.append((name, text))

    def hdr(name, h, data, text):
        js = json.dumps(h).encode() if not isinstance(h, bytes) else h
        raw(name, struct.pack("<Q", len(js)) + js + data, text)

    def tensors(name, ts, text):
        write_st(d + "/" + name, ts)
        cases.append((name, text))

    raw("short.safetensors", b"\x10\x00\x00", "shorter than its 8-byte header length")
    raw("len-overflow.safetensors", struct.pack("<Q", 2 ** 64 - 1) + b"{}", "header length 18446744073709551615 does not fit")
    raw("len-past-end.safetensors", struct.pack("<Q", 1000) + b'{"a": 1}', "header length 1000 does not fit")
    raw("len-huge.safetensors", struct.pack("<Q", 2 ** 40) + b"{" + b" " * 100, "header length 1099511627776 does not fit")
    raw("len-zero.safetensors", struct.pack("<Q", 0) + b"{}", "header length 0 does not fit")
    hdr("not-brace.safetensors", b'["x"]', b"", "does not start with '{'")
    hdr("not-json.safetensors", b'{"wte.weight": {"dtype": "F32",', b"", "is not valid JSON")
    hdr("dup-key.safetensors", b'{"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}, '
                               b'"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}}', b"\0" * 4, "duplicate")
    hdr("dtype.safetensors", {"a": {"dtype": "F128", "shape": [1], "data_offsets": [0, 16]}}, b"\0" * 16, "dtype 'F128'")
    hdr("dtype-num.safetensors", {"a": {"dtype": 32, "shape": [1], "data_offsets": [0, 4]}}, b"\0" * 4, "is not {\"dtype\"")
    hdr("end-outside.safetensors", {"a": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}}, b"\0" * 8,
        "not a range inside the 8 bytes of data")
    hdr("offset-huge.safetensors", {"a": {"dtype": "F32", "shape": [1], "data_offsets": [2 ** 62, 2 ** 62 + 4]}},
        b"\0" * 4, "not a range inside the 4 bytes of data")
    hdr("offset-2e64.safetensors", {"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 2 ** 64 + 4]}},
        b"\0" * 4, "is not valid JSON")
    hdr("begin-after-end.safetensors", {"a": {"dtype": "F32", "shape": [0], "data_offsets": [8, 4]}}, b"\0" * 8, "not a range inside")
    hdr("negative.safetensors", {"a": {"dtype": "F32", "shape": [1], "data_offsets": [-4, 0]}}, b"\0" * 4, "non-negative")
    hdr("size-mismatch.safetensors", {"a": {"dtype": "F32", "shape": [3], "data_offsets": [0, 8]}}, b"\0" * 8, "need 12")
    hdr("overflow-shape.safetensors", {"a": {"dtype": "F32", "shape": [2 ** 39, 2 ** 39, 2 ** 39], "data_offsets": [0, 0]}},
        b"", "2^62 bytes or more")
    hdr("dim-huge.safetensors", {"a": {"dtype": "U8", "shape": [2 ** 40], "data_offsets": [0, 0]}}, b"", "not an integer in [0, 2^40)")
    hdr("dim-negative.safetensors", {"a": {"dtype": "U8", "shape": [-1], "data_offsets": [0, 0]}}, b"", "not an integer")
    hdr("dims.safetensors", {"a": {"dtype": "U8", "shape": [1] * 9, "data_offsets": [0, 1]}}, b"\0", "9 dimensions")
    hdr("overlap.safetensors", {"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
                                "b": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}}, b"\0" * 12, "overlapping data")
    hdr("gap.safetensors", {"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]},
                            "b": {"dtype": "F32", "shape": [1], "data_offsets": [8, 12]}}, b"\0" * 12, "a gap")
    hdr("trailing.safetensors", {"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}}, b"\0" * 12,
        "hold 4 bytes of data, the file 12")
    hdr("meta.safetensors", {"__metadata__": [1]}, b"", "__metadata__ is not an object")
    # well-formed files that are not this GPT-2 model
    tensors("missing.safetensors", [t for t in good if t[0] != "h.0.mlp.c_fc.bias"], "no tensor 'h.0.mlp.c_fc.bias'")
    tensors("extra.safetensors", good + [("h.0.attn.c_attn.lora_A", "F32", [2], b"\0" * 8)], "'h.0.attn.c_attn.lora_A' is not a weight")
    tensors("wrong-shape.safetensors", [(n, dt, ([T + 1, C] if n == "wpe.weight" else s),
                                         (data + b"\0" * 4 * C if n == "wpe.weight" else data)) for n, dt, s, data in good],
            "'wpe.weight' has shape [%d, %d]" % (T + 1, C))
    tensors("int-weight.safetensors", [(n, ("I32" if n == "ln_f.bias" else dt), s, data) for n, dt, s, data in good],
            "'ln_f.bias' is I32")
    wte = [t for t in good if t[0] == "wte.weight"][0][3]
    tensors("untied.safetensors", good + [("lm_head.weight", "F32", [V, C], bytes(len(wte)))], "lm_head.weight differs")
    tensors("head-shape.safetensors", good + [("lm_head.weight", "F32", [V + 1, C], wte + bytes(4 * C))], "lm_head.weight is not")
    tensors("not-gpt2.safetensors", [("model.embed_tokens.weight", "F32", [V, C], wte)], "'model.embed_tokens.weight' is not a weight")
    for name, _ in cases:
        print("%s\t%s" % (name, dict(cases)[name]))
    # config.json cases, each in its own directory beside a good model
    cfgs = [("cfg-huge", dict(config(L, H, C, T, V), n_layer=10 ** 12), "\"n_layer\" is not an integer in [1, 2^31)"),
            ("cfg-heads", dict(config(L, H, C, T, V), n_head=3), "n_head dividing n_embd"),
            ("cfg-missing", {k: v for k, v in config(L, H, C, T, V).items() if k != "vocab_size"}, "\"vocab_size\""),
            ("cfg-llama", dict(config(L, H, C, T, V), model_type="llama"), "not \"gpt2\""),
            ("cfg-relu", dict(config(L, H, C, T, V), activation_function="relu"), "tanh GELU"),
            ("cfg-eps", dict(config(L, H, C, T, V), layer_norm_epsilon=1e-6), "layer_norm_epsilon"),
            ("cfg-inverse", dict(config(L, H, C, T, V), scale_attn_by_inverse_layer_idx=True), "1/sqrt(head size)"),
            ("cfg-big-model", dict(config(L, H, C, T, V), n_layer=4000, n_embd=60000, n_head=4), "has shape"),
            ("cfg-notjson", None, "not valid JSON")]
    import os
    for name, c, text in cfgs:
        os.makedirs(d + "/" + name, exist_ok=True)
        write_st(d + "/" + name + "/model.safetensors", good)
        with open(d + "/" + name + "/config.json", "w") as f:
            f.write(json.dumps(c) if c is not None else '{"n_layer": 1,')
        print("%s/model.safetensors\t%s" % (name, text))
    os.makedirs(d + "/no-config", exist_ok=True)
    write_st(d + "/no-config/model.safetensors", good)
    print("no-config/model.safetensors\tno config.json beside it")
    return 0


FNV_BASIS, FNV_PRIME = 0xCBF29CE484222325, 0x100000001B3


def fnv(data, h=FNV_BASIS):
    for b in data:
        h = ((h ^ b) * FNV_PRIME) & 0xFFFFFFFFFFFFFFFF
    return h


def cmd_shards(a):
    d, V, seed, nt, nv = a[0], *map(int, a[1:5])
    rnd = random.Random(seed)
    parts = [[rnd.randrange(V) for _ in range(n)] for n in (nt, nv)]
    payloads = [struct.pack("<%dH" % len(p), *p) for p in parts]
    sums = [fnv(p) for p in payloads]
    set_id = fnv(b"".join(struct.pack("<QQ", len(p), s) for p, s in zip(parts, sums))) or 1
    for name, p, pay, s in zip(("train.bin", "val.bin"), parts, payloads, sums):
        h = b"PTRNTOK\0" + struct.pack("<IIQIIQQ", 1, 2, len(p), V, V - 1, s, set_id) + bytes(16)
        open(d + "/" + name, "wb").write(h + pay)
    return 0


def cmd_loss(a):
    st, L, H, C, T, V, data, B = a[0], *map(int, a[1:6]), a[6], int(a[7])
    W = {k: struct.unpack("<%df" % (len(v[1]) // 4), v[1]) for k, v in weights(st).items()}
    raw = open(data + "/train.bin", "rb").read()[64:]
    toks = struct.unpack("<%dH" % (len(raw) // 2), raw)
    span, HS = len(toks) - T - 1, C // H

    def ln(x, w, b):
        m = sum(x) / C
        var = sum((v - m) ** 2 for v in x) / C
        r = 1 / math.sqrt(var + 1e-5)
        return [(x[i] - m) * r * w[i] + b[i] for i in range(C)]

    def conv1d(x, w, b, n_in, n_out):  # transformers' Conv1D: y = x @ W[in, out] + b
        return [sum(x[i] * w[i * n_out + o] for i in range(n_in)) + b[o] for o in range(n_out)]

    def gelu(x):
        return 0.5 * x * (1 + math.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))

    total = 0.0
    for s in range(B):
        off = (s * T) % span
        inp, tgt = toks[off:off + T], toks[off + 1:off + T + 1]
        h = [[W["wte.weight"][t * C + i] + W["wpe.weight"][p * C + i] for i in range(C)] for p, t in enumerate(inp)]
        for l in range(L):
            g = lambda n: W["h.%d.%s" % (l, n)]
            qkv = [conv1d(ln(x, g("ln_1.weight"), g("ln_1.bias")), g("attn.c_attn.weight"), g("attn.c_attn.bias"), C, 3 * C)
                   for x in h]
            y = []
            for t in range(T):
                out = [0.0] * C
                for hd in range(H):
                    q = qkv[t][hd * HS:(hd + 1) * HS]
                    sc = [sum(q[i] * qkv[u][C + hd * HS + i] for i in range(HS)) / math.sqrt(HS) for u in range(t + 1)]
                    mx = max(sc)
                    e = [math.exp(v - mx) for v in sc]
                    z = sum(e)
                    for i in range(HS):
                        out[hd * HS + i] = sum(e[u] / z * qkv[u][2 * C + hd * HS + i] for u in range(t + 1))
                y.append(out)
            h = [[h[t][i] + v for i, v in enumerate(conv1d(y[t], g("attn.c_proj.weight"), g("attn.c_proj.bias"), C, C))]
                 for t in range(T)]
            for t in range(T):
                m = conv1d(ln(h[t], g("ln_2.weight"), g("ln_2.bias")), g("mlp.c_fc.weight"), g("mlp.c_fc.bias"), C, 4 * C)
                m = conv1d([gelu(v) for v in m], g("mlp.c_proj.weight"), g("mlp.c_proj.bias"), 4 * C, C)
                h[t] = [h[t][i] + m[i] for i in range(C)]
        for t in range(T):
            x = ln(h[t], W["ln_f.weight"], W["ln_f.bias"])
            logits = [sum(x[i] * W["wte.weight"][v * C + i] for i in range(C)) for v in range(V)]
            mx = max(logits)
            total += mx + math.log(sum(math.exp(v - mx) for v in logits)) - logits[tgt[t]]
    print("%.9f" % (total / (B * T)))
    return 0


if __name__ == "__main__":
    cmds = {"write": cmd_write, "same": cmd_same, "hostile": cmd_hostile, "shards": cmd_shards, "loss": cmd_loss}
    sys.exit(cmds[sys.argv[1]](sys.argv[2:]) or 0)
