#!/usr/bin/python3
"""torch_ref.py: an independent PyTorch reference for lathe's trainer.

Usage: torch_ref.py CASE_DIR

CASE_DIR holds model/ (config.json + model.safetensors, written by lathe),
lora.safetensors (LoRA A/B in PEFT names), case.json (ids, mask, LoRA
settings) and c_out.safetensors (lathe's logits [T, V], loss [1] and one
"<name>.grad" per LoRA tensor). This script rebuilds the model from the
Hugging Face semantics (LlamaForCausalLM, MistralForCausalLM,
Qwen2ForCausalLM, Qwen3ForCausalLM: RMSNorm, rotate_half RoPE with Llama 3
scaling, grouped-query attention, optional sliding window, q/k norm, q/k/v
bias, SwiGLU) plus PEFT's LoRA (y += B A x * scaling), in float64 with
autograd, and compares.

Tolerances (lathe computes in fp32, the reference in fp64):
  logits   max |diff| <= 1e-4 * max(1, max |logit|)
  loss     |diff|     <= 1e-5 * max(1, |loss|)
  grads    max |diff| <= 1e-3 * max |grad| of the tensor (+1e-7)
Exit status: 0 all within tolerance, 1 a mismatch, 77 torch is missing.
"""
import json
import math
import os
import struct
import sys

try:
    import numpy as np
    import torch
except ImportError as e:  # the caller turns 77 into a skip
    print(f"SKIP: PyTorch is not importable by {sys.executable} ({e}); "
          "install Debian's python3-torch to run the reference comparison")
    sys.exit(77)

torch.set_default_dtype(torch.float64)


def read_safetensors(path):
    """name -> float64 tensor (F32, F16, BF16), parsed from the format."""
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    base = 8 + n
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        b, e = info["data_offsets"]
        raw = data[base + b:base + e]
        if info["dtype"] == "F32":
            arr = np.frombuffer(raw, dtype="<f4").astype(np.float64)
        elif info["dtype"] == "F16":
            arr = np.frombuffer(raw, dtype="<f2").astype(np.float64)
        elif info["dtype"] == "BF16":
            u = np.frombuffer(raw, dtype="<u2").astype(np.uint32) << 16
            arr = u.view(np.float32).astype(np.float64)
        else:
            raise ValueError(f"{path}: {name}: unsupported dtype {info['dtype']}")
        out[name] = torch.tensor(arr.reshape(info["shape"]))
    return out


def inv_freq(cfg):
    hd = cfg["head_dim"]
    inv = 1.0 / (cfg.get("rope_theta", 10000.0) ** (torch.arange(0, hd, 2) / hd))
    rs = cfg.get("rope_scaling")
    if not rs:
        return inv
    kind = rs.get("rope_type", rs.get("type"))
    if kind == "linear":
        return inv / rs["factor"]
    assert kind == "llama3", kind
    factor, lo, hi = rs["factor"], rs["low_freq_factor"], rs["high_freq_factor"]
    old = rs["original_max_position_embeddings"]
    wavelen = 2 * math.pi / inv
    out = torch.where(wavelen > old / lo, inv / factor, inv)
    smooth = (old / wavelen - lo) / (hi - lo)
    smoothed = (1 - smooth) * out / factor + smooth * out
    medium = (wavelen >= old / hi) & (wavelen <= old / lo)
    return torch.where(medium, smoothed, out)


def rotate_half(x):
    h = x.shape[-1] // 2
    return torch.cat((-x[..., h:], x[..., :h]), dim=-1)


def rmsnorm(x, w, eps):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w


class Model:
    def __init__(self, model_dir, lora, case):
        with open(os.path.join(model_dir, "config.json")) as f:
            self.cfg = cfg = json.load(f)
        cfg.setdefault("head_dim", cfg["hidden_size"] // cfg["num_attention_heads"])
        self.w = read_safetensors(os.path.join(model_dir, "model.safetensors"))
        self.lora = lora
        r = case["rank"]
        self.scale = case["alpha"] / (math.sqrt(r) if case["rslora"] else r)

    def linear(self, x, layer, block, proj):
        pre = f"model.layers.{layer}.{block}.{proj}"
        y = x @ self.w[pre + ".weight"].T
        if pre + ".bias" in self.w:
            y = y + self.w[pre + ".bias"]
        a = self.lora.get(f"base_model.model.{pre}.lora_A.weight")
        if a is not None:
            b = self.lora[f"base_model.model.{pre}.lora_B.weight"]
            y = y + (x @ a.T) @ b.T * self.scale
        return y

    def attention(self, x, i, cos, sin):
        c = self.cfg
        T, hd = x.shape[0], c["head_dim"]
        hq, hkv = c["num_attention_heads"], c.get("num_key_value_heads", c["num_attention_heads"])
        eps = c.get("rms_norm_eps", 1e-6)
        q = self.linear(x, i, "self_attn", "q_proj").view(T, hq, hd).transpose(0, 1)
        k = self.linear(x, i, "self_attn", "k_proj").view(T, hkv, hd).transpose(0, 1)
        v = self.linear(x, i, "self_attn", "v_proj").view(T, hkv, hd).transpose(0, 1)
        if c["model_type"] == "qwen3":
            q = rmsnorm(q, self.w[f"model.layers.{i}.self_attn.q_norm.weight"], eps)
            k = rmsnorm(k, self.w[f"model.layers.{i}.self_attn.k_norm.weight"], eps)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        rep = hq // hkv  # repeat_kv: query head h reads kv head h // rep
        k = k.repeat_interleave(rep, dim=0)
        v = v.repeat_interleave(rep, dim=0)
        s = q @ k.transpose(1, 2) / math.sqrt(hd)
        qi = torch.arange(T).view(T, 1)
        kj = torch.arange(T).view(1, T)
        allowed = kj <= qi
        sw = c.get("sliding_window")
        if sw and (c["model_type"] == "mistral" or c.get("use_sliding_window")):
            allowed = allowed & (kj > qi - sw)
        s = s.masked_fill(~allowed, float("-inf"))
        o = torch.softmax(s, dim=-1) @ v
        return self.linear(o.transpose(0, 1).reshape(T, hq * hd), i, "self_attn", "o_proj")

    def mlp(self, x, i):
        g = self.linear(x, i, "mlp", "gate_proj")
        u = self.linear(x, i, "mlp", "up_proj")
        return self.linear(torch.nn.functional.silu(g) * u, i, "mlp", "down_proj")

    def logits(self, ids):
        c = self.cfg
        eps = c.get("rms_norm_eps", 1e-6)
        x = self.w["model.embed_tokens.weight"][ids]
        freqs = torch.outer(torch.arange(len(ids), dtype=torch.float64), inv_freq(c))
        emb = torch.cat((freqs, freqs), dim=-1)
        cos, sin = emb.cos(), emb.sin()
        for i in range(c["num_hidden_layers"]):
            x = x + self.attention(rmsnorm(x, self.w[f"model.layers.{i}.input_layernorm.weight"], eps), i, cos, sin)
            x = x + self.mlp(rmsnorm(x, self.w[f"model.layers.{i}.post_attention_layernorm.weight"], eps), i)
        x = rmsnorm(x, self.w["model.norm.weight"], eps)
        head = self.w.get("lm_head.weight", self.w["model.embed_tokens.weight"])
        return x @ head.T


def main():
    case_dir = sys.argv[1]
    with open(os.path.join(case_dir, "case.json")) as f:
        case = json.load(f)
    lora = {k: v.clone().requires_grad_(True)
            for k, v in read_safetensors(os.path.join(case_dir, "lora.safetensors")).items()}
    model = Model(os.path.join(case_dir, "model"), lora, case)
    ids = torch.tensor(case["ids"])
    mask = torch.tensor(case["mask"], dtype=torch.bool)
    logits = model.logits(ids)
    targets = torch.nonzero(mask[1:]).flatten()  # predict ids[j+1] from position j
    loss = torch.nn.functional.cross_entropy(logits[targets], ids[targets + 1], reduction="sum")
    loss.backward()

    c = read_safetensors(os.path.join(case_dir, "c_out.safetensors"))
    ok = True
    lmax = logits.detach().abs().max().item()
    d = (c["logits"] - logits.detach()).abs().max().item()
    tol = 1e-4 * max(1.0, lmax)
    print(f"{case['name']}: logits max|diff| {d:.3g} (tol {tol:.3g})")
    ok &= d <= tol
    dl = abs(c["loss"].item() - loss.item())
    tol = 1e-5 * max(1.0, abs(loss.item()))
    print(f"{case['name']}: loss {loss.item():.8f} lathe {c['loss'].item():.8f} |diff| {dl:.3g} (tol {tol:.3g})")
    ok &= dl <= tol
    worst = 0.0
    for name, p in lora.items():
        g = p.grad
        scale = g.abs().max().item()
        diff = (c[name + ".grad"] - g).abs().max().item()
        worst = max(worst, diff / (scale + 1e-12))
        if diff > 1e-3 * scale + 1e-7:
            print(f"{case['name']}: {name}: grad max|diff| {diff:.3g} vs scale {scale:.3g}")
            ok = False
    print(f"{case['name']}: LoRA grads worst max|diff|/max|grad| {worst:.3g} (tol 1e-3) over {len(lora)} tensors")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
