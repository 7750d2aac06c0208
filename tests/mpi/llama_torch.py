#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Independent float64 reference of Hugging Face's LlamaForCausalLM for
tests/mpi/test_llama_torch.sh, written from transformers' modeling_llama.py
semantics (not from ptrain's code):

  RMSNorm      w * x / sqrt(mean(x^2) + eps)
  RoPE         rotate-half layout: q' = q cos + rotate_half(q) sin, cos/sin
               of position * inv_freq repeated over both halves; inv_freq =
               theta^(-2i/HS), with Llama 3.1's scaling (rope_type llama3)
  attention    grouped-query: each KV head repeated over n_head/n_kv_head
               consecutive query heads (repeat_kv), causal softmax, scale
               1/sqrt(HS)
  MLP          down(silu(gate x) * up x)
  head         lm_head, or the embedding when tied
and AdamW (decoupled weight decay on the 2-D weights, bias correction,
global-norm clipping) as ptrain's pt_train_step applies it.

  llama_torch.py DUMP TOL
reads llama_dump's file (tests/mpi/llama_dump.c), trains the same steps in
float64 and prints one TAP line per validation loss compared with ptrain's
(relative difference < TOL); exit status 1 on any difference.
"""
import math
import struct
import sys

import torch

torch.set_default_dtype(torch.float64)


def read_dump(path):
    with open(path, "rb") as f:
        buf = f.read()
    if buf[:8] != b"PTLLAMA1":
        sys.exit("%s: not a llama_dump file" % path)
    off = 8
    ints = struct.unpack_from("<13i", buf, off)
    off += 13 * 4
    dbl = struct.unpack_from("<11d", buf, off)
    off += 11 * 8
    keys = ["L", "H", "KV", "C", "I", "V", "untied", "qkv_bias", "orig_ctx", "B", "T", "steps", "nparams"]
    cfg = dict(zip(keys, ints))
    cfg.update(zip(["eps", "theta", "factor", "low", "high", "lr", "b1", "b2", "adam_eps", "wd", "clip"], dbl))
    params = {}
    order = []
    for _ in range(cfg["nparams"]):
        name = buf[off:off + 24].split(b"\0")[0].decode()
        rows, cols = struct.unpack_from("<2q", buf, off + 24)
        off += 40
        n = rows * cols
        vals = struct.unpack_from("<%df" % n, buf, off)
        off += 4 * n
        t = torch.tensor(vals, dtype=torch.float64).reshape(rows, cols)
        params[name] = t.squeeze(1) if cols == 1 else t
        order.append(name)
    nb = cfg["B"] * cfg["T"] + 1
    ntok = nb * (cfg["steps"] + 1)
    tok = torch.tensor(struct.unpack_from("<%di" % ntok, buf, off), dtype=torch.long).reshape(cfg["steps"] + 1, nb)
    off += 4 * ntok
    losses = struct.unpack_from("<%dd" % (cfg["steps"] + 1), buf, off)
    return cfg, params, order, tok, losses


def inv_freq(cfg, hs):
    inv = [1.0 / (cfg["theta"] ** (2.0 * i / hs)) for i in range(hs // 2)]
    if cfg["factor"] > 0:  # transformers' _compute_llama3_parameters
        low_wl = cfg["orig_ctx"] / cfg["low"]
        high_wl = cfg["orig_ctx"] / cfg["high"]
        out = []
        for f in inv:
            wl = 2 * math.pi / f
            if wl > low_wl:
                out.append(f / cfg["factor"])
            elif wl < high_wl:
                out.append(f)
            else:
                smooth = (cfg["orig_ctx"] / wl - cfg["low"]) / (cfg["high"] - cfg["low"])
                out.append((1 - smooth) * f / cfg["factor"] + smooth * f)
        inv = out
    return torch.tensor(inv)


def rotate_half(x):
    h = x.shape[-1] // 2
    return torch.cat((-x[..., h:], x[..., :h]), dim=-1)


def rmsnorm(x, w, eps):
    return w * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps))


def forward(cfg, p, tokens):
    B, T, C, H, KV = cfg["B"], cfg["T"], cfg["C"], cfg["H"], cfg["KV"]
    hs, I, eps = C // H, cfg["I"], cfg["eps"]
    inp = tokens[:-1].reshape(B, T)
    tgt = tokens[1:].reshape(B, T)
    x = p["wte"][inp]
    ang = torch.outer(torch.arange(T, dtype=torch.float64), inv_freq(cfg, hs))
    emb = torch.cat((ang, ang), dim=-1)
    cos, sin = emb.cos(), emb.sin()
    mask = torch.full((T, T), float("-inf")).triu(1)
    for l in range(cfg["L"]):
        h = "h%d." % l
        n1 = rmsnorm(x, p[h + "ln1.w"], eps)
        q = n1 @ p[h + "q.w"].T
        kv = n1 @ p[h + "kv.w"].T
        if cfg["qkv_bias"]:
            q = q + p[h + "q.b"]
            kv = kv + p[h + "kv.b"]
        k, v = kv[..., :KV * hs], kv[..., KV * hs:]
        q = q.reshape(B, T, H, hs).transpose(1, 2)
        k = k.reshape(B, T, KV, hs).transpose(1, 2)
        v = v.reshape(B, T, KV, hs).transpose(1, 2)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        k = k.repeat_interleave(H // KV, dim=1)  # repeat_kv
        v = v.repeat_interleave(H // KV, dim=1)
        att = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(hs) + mask, dim=-1)
        y = (att @ v).transpose(1, 2).reshape(B, T, C)
        x = x + y @ p[h + "proj.w"].T
        n2 = rmsnorm(x, p[h + "ln2.w"], eps)
        gu = n2 @ p[h + "fc.w"].T
        g, u = gu[..., :I], gu[..., I:]
        x = x + (torch.nn.functional.silu(g) * u) @ p[h + "fcproj.w"].T
    x = rmsnorm(x, p["lnf.w"], eps)
    logits = x @ (p["lm_head.w"] if cfg["untied"] else p["wte"]).T
    return torch.nn.functional.cross_entropy(logits.reshape(B * T, -1), tgt.reshape(-1))


def main():
    cfg, p, order, tok, ref = read_dump(sys.argv[1])
    tol = float(sys.argv[2])
    for t in p.values():
        t.requires_grad_(True)
    m = {k: torch.zeros_like(t) for k, t in p.items()}
    v = {k: torch.zeros_like(t) for k, t in p.items()}
    losses = [forward(cfg, p, tok[-1]).item()]
    for s in range(cfg["steps"]):
        for t in p.values():
            t.grad = None
        forward(cfg, p, tok[s]).backward()
        with torch.no_grad():
            norm = math.sqrt(sum(float((t.grad ** 2).sum()) for t in p.values()))
            scale = cfg["clip"] / norm if cfg["clip"] > 0 and norm > cfg["clip"] else 1.0
            b1, b2, step = cfg["b1"], cfg["b2"], s + 1
            for k in order:
                t = p[k]
                g = t.grad * scale
                m[k].mul_(b1).add_((1 - b1) * g)
                v[k].mul_(b2).add_((1 - b2) * g * g)
                mhat = m[k] / (1 - b1 ** step)
                vhat = v[k] / (1 - b2 ** step)
                wd = cfg["wd"] if t.dim() == 2 else 0.0
                t.sub_(cfg["lr"] * (mhat / (vhat.sqrt() + cfg["adam_eps"]) + wd * t))
            losses.append(forward(cfg, p, tok[-1]).item())
    bad = 0
    for i, (a, b) in enumerate(zip(ref, losses)):
        rel = abs(a - b) / abs(b)
        ok = rel < tol
        bad += not ok
        print("%s - validation loss %s: ptrain fp32 %.9f, PyTorch float64 %.9f (rel diff %.2e < %.0e)" %
              ("ok" if ok else "not ok", "before training" if i == 0 else "after step %d" % i, a, b, rel, tol))
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
