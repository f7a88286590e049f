#!/usr/bin/python3
"""torch_gen.py: PyTorch eager generation, the benchmark's baseline (b).

Usage: torch_gen.py MODEL_DIR REQUESTS.json OUT.json [--adapter DIR ...]
                    [--streams N] [--threads N]

REQUESTS.json is a list of {"prompt": [ids], "adapter": k (-1 = base),
"max_new": n}. Requests run in waves of --streams (static batching, PyTorch's
best case: the benchmark gives every request the same prompt length); within
a wave every decode step is one batched forward over all sequences, and each
adapter's LoRA delta is added to the rows of the sequences that use it (as
PEFT's mixed-adapter batches do). Greedy decoding, fp32, a KV cache grown by
concatenation (as transformers' DynamicCache). The model is rebuilt from the
Hugging Face semantics with the helpers of tests/train/torch_ref.py (RMSNorm,
rotate_half RoPE, grouped-query attention, q/k/v bias, tied embeddings).

OUT.json gets {"tokens_per_s", "ttft_ms": [per request], "generated":
[[ids] per request], "seconds"}. Exit 77 when torch is missing.
"""
import argparse
import importlib.util
import json
import math
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
spec = importlib.util.spec_from_file_location(
    "torch_ref", os.path.join(HERE, "..", "..", "tests", "train", "torch_ref.py"))
ref = importlib.util.module_from_spec(spec)
spec.loader.exec_module(ref)  # exits 77 without torch
import torch  # noqa: E402

torch.set_default_dtype(torch.float32)


class Adapter:
    def __init__(self, adir):
        with open(os.path.join(adir, "adapter_config.json")) as f:
            cfg = json.load(f)
        r = cfg["r"]
        alpha = cfg.get("lora_alpha", r)
        self.scale = alpha / (math.sqrt(r) if cfg.get("use_rslora") else r)
        raw = ref.read_safetensors(os.path.join(adir, "adapter_model.safetensors"))
        self.ab = {}
        for name, t in raw.items():
            # base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight
            if ".lora_A." not in name:
                continue
            pre = name.split("base_model.model.", 1)[1].rsplit(".lora_A.", 1)[0]
            b = raw[name.replace(".lora_A.", ".lora_B.")]
            self.ab[pre] = (t.float().T.contiguous(), b.float().T.contiguous())


class Model:
    def __init__(self, mdir, adapters):
        with open(os.path.join(mdir, "config.json")) as f:
            self.cfg = c = json.load(f)
        c.setdefault("head_dim", c["hidden_size"] // c["num_attention_heads"])
        self.w = {k: v.float().contiguous() for k, v in
                  ref.read_safetensors(os.path.join(mdir, "model.safetensors")).items()}
        self.wt = {k: v.T.contiguous() for k, v in self.w.items() if v.dim() == 2}
        self.adapters = adapters
        self.eps = c.get("rms_norm_eps", 1e-6)
        self.inv = ref.inv_freq(c).float()
        self.head = self.wt.get("lm_head.weight", self.wt["model.embed_tokens.weight"])

    def linear(self, x, pre, groups):
        """x [B, T, in] -> [B, T, out]; groups: (adapter, row indices)."""
        y = x @ self.wt[pre + ".weight"]
        if pre + ".bias" in self.w:
            y = y + self.w[pre + ".bias"]
        for ad, rows in groups:
            ab = ad.ab.get(pre)
            if ab is not None:
                y[rows] += (x[rows] @ ab[0]) @ ab[1] * ad.scale
        return y

    def forward(self, ids, start, cache, groups):
        """ids [B, T] at positions start..; returns logits of the last row [B, V]."""
        c = self.cfg
        B, T = ids.shape
        hd, hq = c["head_dim"], c["num_attention_heads"]
        hkv = c.get("num_key_value_heads", hq)
        x = self.w["model.embed_tokens.weight"][ids]
        pos = torch.arange(start, start + T, dtype=torch.float32)
        emb = torch.outer(pos, self.inv)
        emb = torch.cat((emb, emb), dim=-1)
        cos, sin = emb.cos(), emb.sin()
        causal = None
        if T > 1:
            qi = torch.arange(T).view(T, 1) + start
            kj = torch.arange(start + T).view(1, start + T)
            causal = (kj > qi)
        for i in range(c["num_hidden_layers"]):
            p = f"model.layers.{i}"
            h = ref.rmsnorm(x, self.w[p + ".input_layernorm.weight"], self.eps)
            q = self.linear(h, p + ".self_attn.q_proj", groups).view(B, T, hq, hd).transpose(1, 2)
            k = self.linear(h, p + ".self_attn.k_proj", groups).view(B, T, hkv, hd).transpose(1, 2)
            v = self.linear(h, p + ".self_attn.v_proj", groups).view(B, T, hkv, hd).transpose(1, 2)
            if c["model_type"] == "qwen3":
                q = ref.rmsnorm(q, self.w[p + ".self_attn.q_norm.weight"], self.eps)
                k = ref.rmsnorm(k, self.w[p + ".self_attn.k_norm.weight"], self.eps)
            q = q * cos + ref.rotate_half(q) * sin
            k = k * cos + ref.rotate_half(k) * sin
            if cache[i] is not None:
                k = torch.cat((cache[i][0], k), dim=2)
                v = torch.cat((cache[i][1], v), dim=2)
            cache[i] = (k, v)
            rep = hq // hkv
            kk = k.repeat_interleave(rep, dim=1)
            vv = v.repeat_interleave(rep, dim=1)
            s = q @ kk.transpose(2, 3) / math.sqrt(hd)
            if causal is not None:
                s = s.masked_fill(causal, float("-inf"))
            o = torch.softmax(s, dim=-1) @ vv
            o = o.transpose(1, 2).reshape(B, T, hq * hd)
            x = x + self.linear(o, p + ".self_attn.o_proj", groups)
            h = ref.rmsnorm(x, self.w[p + ".post_attention_layernorm.weight"], self.eps)
            g = self.linear(h, p + ".mlp.gate_proj", groups)
            u = self.linear(h, p + ".mlp.up_proj", groups)
            x = x + self.linear(torch.nn.functional.silu(g) * u, p + ".mlp.down_proj", groups)
        last = ref.rmsnorm(x[:, -1, :], self.w["model.norm.weight"], self.eps)
        return last @ self.head


def run_wave(model, reqs):
    """Greedy generation of one wave; returns (generated ids, ttft seconds)."""
    t0 = time.perf_counter()
    ids = torch.tensor([r["prompt"] for r in reqs])
    groups = {}
    for j, r in enumerate(reqs):
        if r["adapter"] >= 0:
            groups.setdefault(r["adapter"], []).append(j)
    groups = [(model.adapters[a], torch.tensor(rows)) for a, rows in sorted(groups.items())]
    cache = [None] * model.cfg["num_hidden_layers"]
    out = [[] for _ in reqs]
    steps = max(r["max_new"] for r in reqs)
    start = 0
    ttft = None
    with torch.no_grad():
        for s in range(steps):
            logits = model.forward(ids, start, cache, groups)
            start += ids.shape[1]
            nxt = logits.argmax(dim=-1)
            if ttft is None:
                ttft = time.perf_counter() - t0
            for j, r in enumerate(reqs):
                if len(out[j]) < r["max_new"]:
                    out[j].append(int(nxt[j]))
            ids = nxt.view(-1, 1)
    return out, ttft


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("requests")
    ap.add_argument("out")
    ap.add_argument("--adapter", action="append", default=[])
    ap.add_argument("--streams", type=int, default=1)
    ap.add_argument("--threads", type=int, default=0)
    a = ap.parse_args()
    if a.threads > 0:
        torch.set_num_threads(a.threads)
    with open(a.requests) as f:
        reqs = json.load(f)
    model = Model(a.model, [Adapter(d) for d in a.adapter])
    gen, ttft = [], []
    t0 = time.perf_counter()
    for w in range(0, len(reqs), a.streams):
        wave = reqs[w:w + a.streams]
        out, t = run_wave(model, wave)
        gen += out
        ttft += [t * 1000.0] * len(wave)
    secs = time.perf_counter() - t0
    total = sum(len(g) for g in gen)
    with open(a.out, "w") as f:
        json.dump({"tokens_per_s": total / secs, "ttft_ms": ttft, "generated": gen,
                   "seconds": secs, "threads": torch.get_num_threads()}, f)


if __name__ == "__main__":
    sys.exit(main())
