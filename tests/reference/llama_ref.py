"""Reference oracle: Hugging Face LlamaForCausalLM semantics in plain PyTorch.

Written from the Llama definition (as implemented by transformers'
modeling_llama.py), independent of any training code in this repository.
It reads a Hugging Face model directory directly:

  * config.json (hidden_size, intermediate_size, num_attention_heads,
    num_key_value_heads, num_hidden_layers, optional head_dim, rms_norm_eps,
    rope_theta, rope_scaling, vocab_size, tie_word_embeddings,
    attention_bias, mlp_bias, hidden_act == "silu")
  * model.safetensors, or model.safetensors.index.json plus its shards
  * tensor dtypes F32, F16, BF16 (F64 also accepted)

Computation is in float64 by default (dtype=torch.float32 is available to
estimate what a float32 implementation deviates by).

Semantics, per decoder layer (pre-norm residual):
    h = x + o_proj(attn(rope(q_proj(rms(x))), rope(k_proj(rms(x))), v_proj(rms(x))))
    y = h + down_proj(silu(gate_proj(rms(h))) * up_proj(rms(h)))
  rms(x)   = weight * x / sqrt(mean(x^2) + eps)
  rope     = x * cos + rotate_half(x) * sin, rotate_half(x) = [-x2, x1] (halves),
             cos/sin of position * inv_freq duplicated over both halves,
             inv_freq[i] = rope_theta ** (-2i / head_dim), optionally rescaled
             (rope_scaling: "llama3" or "linear")
  attn     = causal softmax(q k^T / sqrt(head_dim)) v, key/value head
             j serves query heads j*G .. j*G+G-1 (G = heads / kv_heads)
  logits   = rms(x_final) @ W^T with W = lm_head.weight, or
             model.embed_tokens.weight when tie_word_embeddings is true.

Usage:
    m = LlamaRef.load("models/target")
    logits = m.forward([1, 345, 23])        # torch.float64 [T, vocab]
"""

import json
import math
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import safetensors_io  # noqa: E402


def load_state_dict(model_dir):
    """Returns ({name: float32/float64 np.ndarray}, {name: dtype_str})."""
    index = os.path.join(model_dir, "model.safetensors.index.json")
    if os.path.exists(index):
        with open(index) as f:
            weight_map = json.load(f)["weight_map"]
        files = sorted(set(weight_map.values()))
    else:
        weight_map = None
        files = ["model.safetensors"]
    tensors, dtypes = {}, {}
    for fn in files:
        for name, (dt, arr) in safetensors_io.read(os.path.join(model_dir, fn), as_float32=True).items():
            if weight_map is not None and weight_map.get(name) != fn:
                raise ValueError("%s found in %s but index maps it to %s" % (name, fn, weight_map.get(name)))
            if name in tensors:
                raise ValueError("duplicate tensor %s" % name)
            tensors[name] = arr
            dtypes[name] = dt
    if weight_map is not None:
        missing = set(weight_map) - set(tensors)
        if missing:
            raise ValueError("index lists missing tensors: %s" % sorted(missing)[:5])
    return tensors, dtypes


def default_inv_freq(head_dim, theta):
    i = torch.arange(0, head_dim, 2, dtype=torch.float64)
    return 1.0 / (theta ** (i / head_dim))


def llama3_inv_freq(inv_freq, scaling):
    """transformers' _compute_llama3_parameters."""
    factor = float(scaling["factor"])
    low_freq_factor = float(scaling["low_freq_factor"])
    high_freq_factor = float(scaling["high_freq_factor"])
    old_context_len = float(scaling["original_max_position_embeddings"])
    low_freq_wavelen = old_context_len / low_freq_factor
    high_freq_wavelen = old_context_len / high_freq_factor
    wavelen = 2 * math.pi / inv_freq
    # wavelen < high_freq_wavelen: unchanged; wavelen > low_freq_wavelen: / factor
    inv_freq_llama = torch.where(wavelen > low_freq_wavelen, inv_freq / factor, inv_freq)
    # in between: interpolate smoothly
    smooth_factor = (old_context_len / wavelen - low_freq_factor) / (high_freq_factor - low_freq_factor)
    smoothed = (1 - smooth_factor) * inv_freq_llama / factor + smooth_factor * inv_freq_llama
    is_medium = (~(wavelen < high_freq_wavelen)) & (~(wavelen > low_freq_wavelen))
    return torch.where(is_medium, smoothed, inv_freq_llama)


def rope_inv_freq(cfg, head_dim):
    inv = default_inv_freq(head_dim, float(cfg.get("rope_theta", 10000.0)))
    rs = cfg.get("rope_scaling")
    if not rs:
        return inv
    kind = rs.get("rope_type", rs.get("type", "default"))
    if kind == "default":
        return inv
    if kind == "llama3":
        return llama3_inv_freq(inv, rs)
    if kind == "linear":
        return inv / float(rs["factor"])
    raise NotImplementedError("rope_scaling type %r" % kind)


def rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


class LlamaRef:
    def __init__(self, cfg, tensors, dtype=torch.float64):
        self.cfg = cfg
        self.dtype = dtype
        if cfg.get("hidden_act", "silu") != "silu":
            raise NotImplementedError("hidden_act %r" % cfg.get("hidden_act"))
        self.hidden = int(cfg["hidden_size"])
        self.n_heads = int(cfg["num_attention_heads"])
        self.n_kv = int(cfg.get("num_key_value_heads") or self.n_heads)
        self.head_dim = int(cfg.get("head_dim") or self.hidden // self.n_heads)
        self.n_layers = int(cfg["num_hidden_layers"])
        self.eps = float(cfg.get("rms_norm_eps", 1e-6))
        self.vocab = int(cfg["vocab_size"])
        self.tied = bool(cfg.get("tie_word_embeddings", False))
        if self.n_heads % self.n_kv:
            raise ValueError("num_attention_heads must be a multiple of num_key_value_heads")
        self.w = {k: torch.from_numpy(np.asarray(v)).to(dtype) for k, v in tensors.items()}
        self._check_shapes()
        self.inv_freq = rope_inv_freq(cfg, self.head_dim)

    @classmethod
    def load(cls, model_dir, dtype=torch.float64):
        with open(os.path.join(model_dir, "config.json")) as f:
            cfg = json.load(f)
        tensors, _ = load_state_dict(model_dir)
        return cls(cfg, tensors, dtype)

    def _check_shapes(self):
        H, hd, nh, nkv = self.hidden, self.head_dim, self.n_heads, self.n_kv
        I = int(self.cfg["intermediate_size"])
        want = {"model.embed_tokens.weight": (self.vocab, H), "model.norm.weight": (H,)}
        for i in range(self.n_layers):
            p = "model.layers.%d." % i
            want[p + "self_attn.q_proj.weight"] = (nh * hd, H)
            want[p + "self_attn.k_proj.weight"] = (nkv * hd, H)
            want[p + "self_attn.v_proj.weight"] = (nkv * hd, H)
            want[p + "self_attn.o_proj.weight"] = (H, nh * hd)
            want[p + "mlp.gate_proj.weight"] = (I, H)
            want[p + "mlp.up_proj.weight"] = (I, H)
            want[p + "mlp.down_proj.weight"] = (H, I)
            want[p + "input_layernorm.weight"] = (H,)
            want[p + "post_attention_layernorm.weight"] = (H,)
        if not self.tied:
            want["lm_head.weight"] = (self.vocab, H)
        for name, shape in want.items():
            if name not in self.w:
                raise KeyError("missing tensor %s" % name)
            if tuple(self.w[name].shape) != shape:
                raise ValueError("%s has shape %s, expected %s" % (name, tuple(self.w[name].shape), shape))

    def _linear(self, x, name):
        y = x @ self.w[name + ".weight"].T
        b = self.w.get(name + ".bias")
        return y if b is None else y + b

    def _rms(self, x, name):
        var = x.pow(2).mean(-1, keepdim=True)
        return self.w[name] * (x * torch.rsqrt(var + self.eps))

    def rope_cos_sin(self, positions):
        pos = torch.as_tensor(positions, dtype=torch.float64)
        freqs = pos[:, None] * self.inv_freq[None, :]
        emb = torch.cat((freqs, freqs), dim=-1)
        return emb.cos().to(self.dtype), emb.sin().to(self.dtype)

    @torch.no_grad()
    def forward(self, input_ids, positions=None):
        """Full causal forward over one sequence; returns logits [T, vocab]."""
        ids = torch.as_tensor(list(input_ids), dtype=torch.long)
        T = ids.shape[0]
        if positions is None:
            positions = list(range(T))
        cos, sin = self.rope_cos_sin(positions)
        cos, sin = cos[:, None, :], sin[:, None, :]  # [T, 1, hd]
        mask = torch.full((T, T), float("-inf"), dtype=self.dtype).triu(1)
        group = self.n_heads // self.n_kv
        x = self.w["model.embed_tokens.weight"][ids]
        for i in range(self.n_layers):
            p = "model.layers.%d." % i
            h = self._rms(x, p + "input_layernorm.weight")
            q = self._linear(h, p + "self_attn.q_proj").view(T, self.n_heads, self.head_dim)
            k = self._linear(h, p + "self_attn.k_proj").view(T, self.n_kv, self.head_dim)
            v = self._linear(h, p + "self_attn.v_proj").view(T, self.n_kv, self.head_dim)
            q = q * cos + rotate_half(q) * sin
            k = k * cos + rotate_half(k) * sin
            # repeat_kv: query head h reads key/value head h // group
            k = k[:, :, None, :].expand(T, self.n_kv, group, self.head_dim).reshape(T, self.n_heads, self.head_dim)
            v = v[:, :, None, :].expand(T, self.n_kv, group, self.head_dim).reshape(T, self.n_heads, self.head_dim)
            scores = torch.einsum("qhd,khd->hqk", q, k) / math.sqrt(self.head_dim) + mask
            probs = torch.softmax(scores, dim=-1)
            attn = torch.einsum("hqk,khd->qhd", probs, v).reshape(T, self.n_heads * self.head_dim)
            x = x + self._linear(attn, p + "self_attn.o_proj")
            h = self._rms(x, p + "post_attention_layernorm.weight")
            gate = self._linear(h, p + "mlp.gate_proj")
            up = self._linear(h, p + "mlp.up_proj")
            x = x + self._linear(torch.nn.functional.silu(gate) * up, p + "mlp.down_proj")
        x = self._rms(x, "model.norm.weight")
        head = self.w["model.embed_tokens.weight"] if self.tied else self.w["lm_head.weight"]
        return x @ head.T

    def greedy(self, input_ids, max_new_tokens, eos_id=None):
        ids = list(input_ids)
        for _ in range(max_new_tokens):
            nxt = int(self.forward(ids)[-1].argmax())
            ids.append(nxt)
            if eos_id is not None and nxt == eos_id:
                break
        return ids[len(input_ids):]
