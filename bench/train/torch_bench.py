#!/usr/bin/python3
"""torch_bench.py: the PyTorch side of bench/train. One LoRA training step
(forward, backward, AdamW on the LoRA parameters) of a Qwen2-architecture
model with random fp32 weights, written the way a PyTorch user would write it
(frozen nn.Linear + LoRA A/B as PEFT does, eager attention), timed with the
given thread count. Prints one JSON line: {"step_s": [...], "cpu_s": [...] (CPU seconds of
the process per step), "loss": ..., "max_rss_mib": ...}.

usage: torch_bench.py --threads N --seq T --rank R --steps S --dim D --hidden F
       --layers L --heads H --kv-heads K --vocab V
"""
import argparse
import json
import math
import resource
import sys
import time

try:
    import torch
    import torch.nn.functional as F
except ImportError as e:
    print(json.dumps({"skip": f"PyTorch not importable by {sys.executable}: {e}"}))
    sys.exit(77)


class LoRALinear(torch.nn.Module):
    def __init__(self, i, o, r, alpha, bias):
        super().__init__()
        self.base = torch.nn.Linear(i, o, bias=bias)
        self.base.weight.requires_grad_(False)
        if bias:
            self.base.bias.requires_grad_(False)
        torch.nn.init.normal_(self.base.weight, std=0.02)
        self.a = torch.nn.Parameter(torch.empty(r, i))
        torch.nn.init.kaiming_uniform_(self.a, a=math.sqrt(5))
        self.b = torch.nn.Parameter(torch.zeros(o, r))
        self.scale = alpha / r

    def forward(self, x):
        return self.base(x) + (x @ self.a.t()) @ self.b.t() * self.scale


def rmsnorm(x, w, eps=1e-6):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w


def rotate_half(x):
    h = x.shape[-1] // 2
    return torch.cat((-x[..., h:], x[..., :h]), dim=-1)


class Layer(torch.nn.Module):
    def __init__(self, a):
        super().__init__()
        hd = a.dim // a.heads
        r, al = a.rank, 2 * a.rank
        self.q = LoRALinear(a.dim, a.heads * hd, r, al, True)
        self.k = LoRALinear(a.dim, a.kv_heads * hd, r, al, True)
        self.v = LoRALinear(a.dim, a.kv_heads * hd, r, al, True)
        self.o = LoRALinear(a.heads * hd, a.dim, r, al, False)
        self.gate = LoRALinear(a.dim, a.hidden, r, al, False)
        self.up = LoRALinear(a.dim, a.hidden, r, al, False)
        self.down = LoRALinear(a.hidden, a.dim, r, al, False)
        self.ln1 = torch.ones(a.dim)
        self.ln2 = torch.ones(a.dim)
        self.h, self.kv, self.hd = a.heads, a.kv_heads, hd

    def forward(self, x, cos, sin, mask):
        T = x.shape[0]
        h = rmsnorm(x, self.ln1)
        q = self.q(h).view(T, self.h, self.hd).transpose(0, 1)
        k = self.k(h).view(T, self.kv, self.hd).transpose(0, 1)
        v = self.v(h).view(T, self.kv, self.hd).transpose(0, 1)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        rep = self.h // self.kv
        k = k.repeat_interleave(rep, dim=0)
        v = v.repeat_interleave(rep, dim=0)
        s = (q @ k.transpose(1, 2)) / math.sqrt(self.hd)
        p = torch.softmax(s.masked_fill(mask, float("-inf")), dim=-1)
        x = x + self.o((p @ v).transpose(0, 1).reshape(T, -1))
        h = rmsnorm(x, self.ln2)
        return x + self.down(F.silu(self.gate(h)) * self.up(h))


def main():
    ap = argparse.ArgumentParser()
    for k in ["threads", "seq", "rank", "steps", "dim", "hidden", "layers", "heads", "kv_heads", "vocab"]:
        ap.add_argument("--" + k.replace("_", "-"), type=int, required=True)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    with torch.no_grad():
        embed = torch.randn(a.vocab, a.dim) * 0.02
    layers = torch.nn.ModuleList([Layer(a) for _ in range(a.layers)])
    norm = torch.ones(a.dim)
    params = [p for p in layers.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=2e-4, weight_decay=0.0)
    T, hd = a.seq, a.dim // a.heads
    ids = torch.randint(0, a.vocab, (T,))
    inv = 1.0 / (1e6 ** (torch.arange(0, hd, 2).float() / hd))
    fr = torch.outer(torch.arange(T).float(), inv)
    emb = torch.cat((fr, fr), -1)
    cos, sin = emb.cos(), emb.sin()
    mask = torch.triu(torch.ones(T, T, dtype=torch.bool), 1)
    times, cpu = [], []
    loss = None
    for _ in range(a.steps):
        t0 = time.perf_counter()
        c0 = time.process_time()
        opt.zero_grad()
        x = embed[ids]
        for l in layers:
            x = l(x, cos, sin, mask)
        logits = rmsnorm(x, norm) @ embed.t()  # tied lm_head
        loss = F.cross_entropy(logits[:-1], ids[1:])
        loss.backward()
        opt.step()
        times.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
    print(json.dumps({"step_s": times, "cpu_s": cpu, "loss": loss.item(), "max_rss_mib": rss}))


if __name__ == "__main__":
    main()
