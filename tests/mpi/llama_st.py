#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Random Hugging Face Llama-family models, written with the standard library
only, as transformers' save_pretrained lays them out (an independent writer
for tests/mpi/test_convert_llama.sh):

  config.json                     json.dumps(cfg, indent=2, sort_keys=True) + "\\n"
  model.safetensors               safetensors' serialisation: u64 LE header
                                  length, compact JSON with "__metadata__"
                                  ({"format": "pt"}) first and the tensors
                                  sorted by dtype (descending) then name,
                                  padded with spaces to 8 bytes, then the data
  model-0000N-of-0000M.safetensors + model.safetensors.index.json
                                  (--max-shard BYTES: transformers' sharding,
                                  state-dict order, a new file past the size)

  write DIR L H KV C I T V SEED DTYPE [--arch llama|qwen2|mistral] [--tied]
        [--lm-head] [--max-shard N] [--rope-llama3] [--theta X] [--fast]
                         (--fast: tensors over 64 Ki elements repeat one random block)
  dump DIR               every tensor as "name dtype shape fnv" lines (fp32 values' bytes)
  get DIR NAME           one tensor's values widened to fp32, as hex of their bytes
  ckpt-equal DIR STEPDIR every weight of the checkpoint's rank file equals the HF tensors by name
"""
import json
import os
import random
import struct
import sys

DT = {"F32": (4, "f"), "F16": (2, "e"), "BF16": (2, None)}
ORDER = ["BOOL", "U8", "I8", "F8_E5M2", "F8_E4M3", "I16", "U16", "F16", "BF16", "I32", "U32", "F32", "F64", "I64", "U64"]


def names(L, qkv_bias, untied):
    out = [("model.embed_tokens.weight", "V,C")]
    for l in range(L):
        p = "model.layers.%d." % l
        out.append((p + "self_attn.q_proj.weight", "C,C"))
        if qkv_bias:
            out.append((p + "self_attn.q_proj.bias", "C"))
        out.append((p + "self_attn.k_proj.weight", "K,C"))
        if qkv_bias:
            out.append((p + "self_attn.k_proj.bias", "K"))
        out.append((p + "self_attn.v_proj.weight", "K,C"))
        if qkv_bias:
            out.append((p + "self_attn.v_proj.bias", "K"))
        out.append((p + "self_attn.o_proj.weight", "C,C"))
        out.append((p + "mlp.gate_proj.weight", "I,C"))
        out.append((p + "mlp.up_proj.weight", "I,C"))
        out.append((p + "mlp.down_proj.weight", "C,I"))
        out.append((p + "input_layernorm.weight", "C"))
        out.append((p + "post_attention_layernorm.weight", "C"))
    out.append(("model.norm.weight", "C"))
    if untied:
        out.append(("lm_head.weight", "V,C"))
    return out


FAST = {}


def rand_bytes(rng, dt, n, norm):
    if FAST.get("on") and n > 65536:  # large tensors for memory tests: a random block repeated
        blk = rand_bytes(rng, dt, 65536, norm)
        return (blk * (n // 65536 + 1))[:n * DT[dt][0]]
    vals = [1.0 + 0.1 * rng.gauss(0, 1) if norm else 0.05 * rng.gauss(0, 1) for _ in range(n)]
    if dt == "F32":
        return struct.pack("<%df" % n, *vals)
    if dt == "F16":
        if n > 4:  # half subnormals and signed zeros
            vals[0], vals[1], vals[2], vals[3] = 3e-7, -6e-8, 0.0, -0.0
        return struct.pack("<%de" % n, *vals)
    raw = struct.pack("<%df" % n, *vals)  # BF16: the upper half of each float
    return b"".join(raw[4 * i + 2:4 * i + 4] for i in range(n))


def st_bytes(tensors, metadata):
    """safetensors' serialisation of [(name, dtype, shape, bytes)]"""
    ts = sorted(tensors, key=lambda t: (-ORDER.index(t[1]), t[0]))
    hdr, off = {}, 0
    if metadata is not None:
        hdr["__metadata__"] = metadata
    for name, dt, shape, b in ts:
        hdr[name] = {"dtype": dt, "shape": shape, "data_offsets": [off, off + len(b)]}
        off += len(b)
    js = json.dumps(hdr, separators=(",", ":")).encode()
    js += b" " * ((8 - len(js) % 8) % 8)
    return struct.pack("<Q", len(js)) + js + b"".join(t[3] for t in ts)


def write(args):
    d = args[0]
    L, H, KV, C, I, T, V, seed = (int(x) for x in args[1:9])
    dt = args[9]
    opt = args[10:]
    arch = opt[opt.index("--arch") + 1] if "--arch" in opt else "llama"
    tied = "--tied" in opt
    max_shard = int(opt[opt.index("--max-shard") + 1]) if "--max-shard" in opt else 0
    theta = float(opt[opt.index("--theta") + 1]) if "--theta" in opt else 10000.0
    FAST["on"] = "--fast" in opt
    rng = random.Random(seed)
    K = KV * (C // H)
    dims = {"V": V, "C": C, "K": K, "I": I}
    os.makedirs(d, exist_ok=True)
    cls = {"llama": "LlamaForCausalLM", "qwen2": "Qwen2ForCausalLM", "mistral": "MistralForCausalLM"}[arch]
    cfg = {"architectures": [cls], "model_type": arch, "hidden_act": "silu", "hidden_size": C,
           "intermediate_size": I, "max_position_embeddings": T, "num_attention_heads": H,
           "num_hidden_layers": L, "num_key_value_heads": KV, "rms_norm_eps": 1e-05, "rope_theta": theta,
           "tie_word_embeddings": tied, "vocab_size": V, "initializer_range": 0.02, "use_cache": True,
           "bos_token_id": 1, "eos_token_id": 2, "attention_dropout": 0.0,
           "torch_dtype": {"F32": "float32", "F16": "float16", "BF16": "bfloat16"}[dt],
           "transformers_version": "4.46.0"}
    if arch == "llama":
        cfg.update({"attention_bias": False, "mlp_bias": False, "pretraining_tp": 1, "head_dim": C // H,
                    "rope_scaling": {"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                                     "original_max_position_embeddings": 8192, "rope_type": "llama3"}
                    if "--rope-llama3" in opt else None})
    if arch == "mistral":
        cfg["sliding_window"] = None
    if arch == "qwen2":
        cfg.update({"use_sliding_window": False, "sliding_window": None, "max_window_layers": L})
    with open(os.path.join(d, "config.json"), "w") as f:
        f.write(json.dumps(cfg, indent=2, sort_keys=True) + "\n")
    tensors = []
    for name, sh in names(L, arch == "qwen2", not tied):
        shape = [dims[x] for x in sh.split(",")]
        n = 1
        for x in shape:
            n *= x
        tensors.append((name, dt, shape, rand_bytes(rng, dt, n, name.endswith("norm.weight"))))
    if tied and "--lm-head" in opt:  # a tied head saved anyway: embed_tokens' bytes
        tensors.append(("lm_head.weight", dt, [V, C], tensors[0][3]))
    if not max_shard:
        with open(os.path.join(d, "model.safetensors"), "wb") as f:
            f.write(st_bytes(tensors, {"format": "pt"}))
        return
    shards, cur, size = [], [], 0
    for t in tensors:
        if cur and size + len(t[3]) > max_shard:
            shards.append(cur)
            cur, size = [], 0
        cur.append(t)
        size += len(t[3])
    shards.append(cur)
    wm, total = {}, 0
    for i, sh in enumerate(shards):
        fn = "model-%05d-of-%05d.safetensors" % (i + 1, len(shards))
        with open(os.path.join(d, fn), "wb") as f:
            f.write(st_bytes(sh, {"format": "pt"}))
        for t in sh:
            wm[t[0]] = fn
            total += len(t[3])
    with open(os.path.join(d, "model.safetensors.index.json"), "w") as f:
        f.write(json.dumps({"metadata": {"total_size": total}, "weight_map": wm}, indent=2, sort_keys=True) + "\n")


def tensors_of(d):
    files = [f for f in sorted(os.listdir(d)) if f.endswith(".safetensors")]
    out = {}
    for fn in files:
        with open(os.path.join(d, fn), "rb") as f:
            n = struct.unpack("<Q", f.read(8))[0]
            hdr = json.loads(f.read(n))
            data = f.read()
        for k, v in hdr.items():
            if k == "__metadata__":
                continue
            b = data[v["data_offsets"][0]:v["data_offsets"][1]]
            if v["dtype"] == "F32":
                x = b
            elif v["dtype"] == "F16":
                x = struct.pack("<%df" % (len(b) // 2), *struct.unpack("<%de" % (len(b) // 2), b))
            else:
                x = b"".join(b"\0\0" + b[2 * i:2 * i + 2] for i in range(len(b) // 2))
            out[k] = (v["dtype"], v["shape"], x)
    return out


def hf_of(pname):
    """the Hugging Face tensors (in row order) of a ptrain parameter name"""
    if pname == "wte":
        return ["model.embed_tokens.weight"]
    if pname == "lnf.w":
        return ["model.norm.weight"]
    if pname == "lm_head.w":
        return ["lm_head.weight"]
    l, rest = pname[1:].split(".", 1)
    p = "model.layers.%s." % l
    return {"ln1.w": [p + "input_layernorm.weight"], "q.w": [p + "self_attn.q_proj.weight"],
            "q.b": [p + "self_attn.q_proj.bias"],
            "kv.w": [p + "self_attn.k_proj.weight", p + "self_attn.v_proj.weight"],
            "kv.b": [p + "self_attn.k_proj.bias", p + "self_attn.v_proj.bias"],
            "proj.w": [p + "self_attn.o_proj.weight"], "ln2.w": [p + "post_attention_layernorm.weight"],
            "fc.w": [p + "mlp.gate_proj.weight", p + "mlp.up_proj.weight"],
            "fcproj.w": [p + "mlp.down_proj.weight"]}[rest]


def ckpt_equal(src, ck):
    """every weight of checkpoint ck (its rank file, by the manifest) equals
    the Hugging Face tensors of src widened to fp32, by name; AdamW m, v zero"""
    man = json.load(open(os.path.join(ck, "manifest.json")))
    hf = tensors_of(src)
    used = set()
    for f in man["files"]:
        data = open(os.path.join(ck, f["name"]), "rb").read()
        for t in f["tensors"]:
            n = t["hi"] - t["lo"]
            w = data[t["offset"]:t["offset"] + 4 * n]
            mv = data[t["offset"] + 4 * n:t["offset"] + 12 * n]
            want = b"".join(hf[h][2] for h in hf_of(t["name"]))
            used.update(hf_of(t["name"]))
            if w != want:
                sys.exit("tensor %s differs from %s" % (t["name"], "+".join(hf_of(t["name"]))))
            if mv != bytes(8 * n):
                sys.exit("tensor %s: AdamW state not zero" % t["name"])
    rest = set(hf) - used - {"lm_head.weight"}
    if rest:
        sys.exit("HF tensors not in the checkpoint: %s" % sorted(rest))
    print("%d tensors equal" % len(used))


def main():
    cmd, args = sys.argv[1], sys.argv[2:]
    if cmd == "write":
        write(args)
    elif cmd == "dump":
        for k, (dt, sh, x) in sorted(tensors_of(args[0]).items()):
            print(k, dt, sh, x.hex()[:64], len(x))
    elif cmd == "ckpt-equal":
        ckpt_equal(args[0], args[1])
    elif cmd == "get":
        print(tensors_of(args[0])[args[1]][2].hex())
    else:
        sys.exit("unknown command " + cmd)


if __name__ == "__main__":
    main()
