#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The bench preset's GPT-2 training step in PyTorch, for bench-torch.sh.

Same model as ptrain's (lib/model/gpt.c; GPT-2, Radford et al. 2019):
token + position embedding, L pre-LN blocks (LayerNorm, causal multi-head
attention with a fused qkv Linear(C, 3C) + bias and a Linear(C, C)
projection, LayerNorm, Linear(C, 4C), tanh GELU, Linear(4C, C), residuals),
a final LayerNorm, the head tied to the token embedding, mean cross-entropy;
AdamW (beta 0.9/0.95, eps 1e-8, weight decay 0.1) in fp32.

  torch_gpt.py [--layers 4 --heads 4 --embd 256 --seq-len 128 --vocab 50257]
               [--batch 8] [--steps 6] [--threads N] [--ddp RANKS]

Prints "result: tok_s=<best step> mean_tok_s=<mean>" (the first step is a
warm-up and not timed).  --ddp R runs R processes with gloo
DistributedDataParallel, --batch sequences each, --threads threads each,
and reports the tokens of all ranks per step.
"""
import argparse
import math
import os
import sys
import time


def build(args):
    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    C, NH, T, V = args.embd, args.heads, args.seq_len, args.vocab

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1 = nn.LayerNorm(C)
            self.qkv = nn.Linear(C, 3 * C)
            self.proj = nn.Linear(C, C)
            self.ln2 = nn.LayerNorm(C)
            self.fc = nn.Linear(C, 4 * C)
            self.fcproj = nn.Linear(4 * C, C)
            self.mask = torch.tril(torch.ones(T, T, dtype=torch.bool))  # not a buffer: DDP/gloo has no bool

        def forward(self, x):
            B, Tl, _ = x.shape
            q, k, v = self.qkv(self.ln1(x)).split(C, dim=2)
            q = q.view(B, Tl, NH, C // NH).transpose(1, 2)
            k = k.view(B, Tl, NH, C // NH).transpose(1, 2)
            v = v.view(B, Tl, NH, C // NH).transpose(1, 2)
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(C // NH))
            att = att.masked_fill(~self.mask[:Tl, :Tl], float("-inf")).softmax(dim=-1)
            y = (att @ v).transpose(1, 2).reshape(B, Tl, C)
            x = x + self.proj(y)
            return x + self.fcproj(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.wte = nn.Embedding(V, C)
            self.wpe = nn.Embedding(T, C)
            self.blocks = nn.ModuleList(Block() for _ in range(args.layers))
            self.lnf = nn.LayerNorm(C)

        def forward(self, idx, tgt):
            x = self.wte(idx) + self.wpe(torch.arange(idx.shape[1]))
            for b in self.blocks:
                x = b(x)
            logits = self.lnf(x) @ self.wte.weight.t()  # tied head
            return F.cross_entropy(logits.view(-1, V), tgt.view(-1))

    m = GPT()
    for name, p in m.named_parameters():  # GPT-2 initialisation, as ptrain's
        if name.endswith("bias"):
            torch.nn.init.zeros_(p)
        elif p.dim() == 2 and "ln" not in name:
            torch.nn.init.normal_(p, std=0.02)
    return m


def run(rank, world, args, out):
    import torch

    torch.set_num_threads(args.threads)
    torch.manual_seed(1337 + rank)
    model = build(args)
    if world > 1:
        import torch.distributed as dist
        dist.init_process_group("gloo", rank=rank, world_size=world)
        model = torch.nn.parallel.DistributedDataParallel(model)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.1)
    g = torch.Generator().manual_seed(5 + rank)
    idx = torch.randint(0, args.vocab, (args.batch, args.seq_len + 1), generator=g)
    x, y = idx[:, :-1].contiguous(), idx[:, 1:].contiguous()
    times = []
    for s in range(args.steps + 1):
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        loss = model(x, y)
        loss.backward()
        opt.step()
        if world > 1:
            import torch.distributed as dist
            t = torch.tensor([time.perf_counter() - t0])
            dist.all_reduce(t, op=dist.ReduceOp.MAX)
            dt = float(t)
        else:
            dt = time.perf_counter() - t0
        if s:
            times.append(dt)
    if not math.isfinite(float(loss)):
        print(f"torch_gpt: loss is {float(loss)}", file=sys.stderr)
        sys.exit(1)
    tok = args.batch * args.seq_len * world
    if rank == 0:
        out.put((tok / min(times), tok * len(times) / sum(times), float(loss)))
    if world > 1:
        import torch.distributed as dist
        dist.destroy_process_group()


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--embd", type=int, default=256)
    p.add_argument("--seq-len", type=int, default=128)
    p.add_argument("--vocab", type=int, default=50257)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--steps", type=int, default=6)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--ddp", type=int, default=1)
    args = p.parse_args()
    for name in ("layers", "heads", "embd", "seq_len", "vocab", "batch", "steps", "threads", "ddp"):
        if getattr(args, name) < 1:
            p.error(f"--{name.replace('_', '-')} must be >= 1, got {getattr(args, name)}")
    if args.embd % args.heads:
        p.error(f"--embd {args.embd} is not a multiple of --heads {args.heads}")
    try:
        import torch  # noqa: F401
    except ImportError:
        print("torch_gpt: PyTorch is not installed (Debian: apt-get install python3-torch)", file=sys.stderr)
        sys.exit(77)
    import torch.multiprocessing as mp

    if args.ddp > 1:
        os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
        os.environ.setdefault("MASTER_PORT", str(29500 + os.getpid() % 1000))
        ctx = mp.get_context("spawn")
        q = ctx.Queue()
        mp.start_processes(run, args=(args.ddp, args, q), nprocs=args.ddp, join=True, start_method="spawn")
    else:
        import queue
        q = queue.Queue()
        run(0, 1, args, q)
    best, mean, loss = q.get()
    print(f"result: tok_s={best:.1f} mean_tok_s={mean:.1f} loss={loss:.4f}")


if __name__ == "__main__":
    main()
