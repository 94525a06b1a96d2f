#!/usr/bin/python3
"""Generate tiny random Llama checkpoints with awkward shapes (Hugging Face layout).

    /usr/bin/python3 tests/reference/random_checkpoints.py

writes tests/reference/checkpoints/<name>/{config.json, model.safetensors
| model-0000K-of-0000N.safetensors + model.safetensors.index.json}.
Deterministic (numpy PCG64 with fixed seeds). Needs numpy only.

Checkpoints:
  tiny_f16_hd20_kv1       f16, head_dim 20, 2 heads / 1 KV head, vocab 1000,
                          intermediate 72, untied head
  tiny_bf16_llama3_tied   bf16, llama3 rope_scaling, rope_theta 5e5, tied head,
                          4 heads / 2 KV heads
  tiny_f32_sharded        f32, 3 layers sharded over 3 files with
                          model.safetensors.index.json, untied head
  tiny_f32_tp             f32, 8 heads / 4 KV heads, intermediate 64, vocab 128:
                          every dimension divisible for tensor parallel 2 and 4
"""

import json
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import safetensors_io  # noqa: E402

CHECKPOINTS = {
    "tiny_f16_hd20_kv1": dict(
        seed=11, dtype="F16", torch_dtype="float16",
        hidden_size=40, intermediate_size=72, num_hidden_layers=2,
        num_attention_heads=2, num_key_value_heads=1, head_dim=20,
        vocab_size=1000, tie_word_embeddings=False,
        rms_norm_eps=1e-5, rope_theta=10000.0, rope_scaling=None,
        max_position_embeddings=128, shards=1),
    "tiny_bf16_llama3_tied": dict(
        seed=22, dtype="BF16", torch_dtype="bfloat16",
        hidden_size=64, intermediate_size=160, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, head_dim=16,
        vocab_size=512, tie_word_embeddings=True,
        rms_norm_eps=1e-5, rope_theta=500000.0,
        # head_dim 16 and theta 5e5 give wavelengths 6.3, 32.5, 167, ...: one
        # high-frequency pair (unchanged), one medium (smoothed) and the rest
        # low-frequency (divided by factor) against 64/4 = 16 and 64/1 = 64.
        rope_scaling={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                      "high_freq_factor": 4.0, "original_max_position_embeddings": 64},
        max_position_embeddings=512, shards=1),
    "tiny_f32_sharded": dict(
        seed=33, dtype="F32", torch_dtype="float32",
        hidden_size=32, intermediate_size=64, num_hidden_layers=3,
        num_attention_heads=4, num_key_value_heads=2, head_dim=8,
        vocab_size=300, tie_word_embeddings=False,
        rms_norm_eps=1e-6, rope_theta=1000000.0, rope_scaling=None,
        max_position_embeddings=256, shards=3),
    "tiny_f32_tp": dict(
        seed=44, dtype="F32", torch_dtype="float32",
        hidden_size=64, intermediate_size=64, num_hidden_layers=2,
        num_attention_heads=8, num_key_value_heads=4, head_dim=8,
        vocab_size=128, tie_word_embeddings=False,
        rms_norm_eps=1e-5, rope_theta=10000.0, rope_scaling=None,
        max_position_embeddings=256, shards=1),
}


def make_weights(spec):
    rng = np.random.default_rng(spec["seed"])
    H, I, V = spec["hidden_size"], spec["intermediate_size"], spec["vocab_size"]
    nh, nkv, hd = spec["num_attention_heads"], spec["num_key_value_heads"], spec["head_dim"]

    def lin(out_f, in_f, gain=1.0):
        return (rng.standard_normal((out_f, in_f)) * gain / np.sqrt(in_f)).astype(np.float32)

    def norm(n):
        return (1.0 + 0.2 * rng.standard_normal(n)).astype(np.float32)

    # a tied head reuses the embedding, so keep it smaller to avoid
    # near-one-hot softmax outputs
    emb_std = 0.4 if spec["tie_word_embeddings"] else 1.0
    w = {"model.embed_tokens.weight": (emb_std * rng.standard_normal((V, H))).astype(np.float32)}
    for i in range(spec["num_hidden_layers"]):
        p = "model.layers.%d." % i
        w[p + "input_layernorm.weight"] = norm(H)
        w[p + "self_attn.q_proj.weight"] = lin(nh * hd, H, 2.0)
        w[p + "self_attn.k_proj.weight"] = lin(nkv * hd, H, 2.0)
        w[p + "self_attn.v_proj.weight"] = lin(nkv * hd, H)
        w[p + "self_attn.o_proj.weight"] = lin(H, nh * hd)
        w[p + "post_attention_layernorm.weight"] = norm(H)
        w[p + "mlp.gate_proj.weight"] = lin(I, H)
        w[p + "mlp.up_proj.weight"] = lin(I, H)
        w[p + "mlp.down_proj.weight"] = lin(H, I)
    w["model.norm.weight"] = norm(H)
    if not spec["tie_word_embeddings"]:
        w["lm_head.weight"] = lin(V, H, 3.0)
    return w


def config_json(spec):
    keys = ["hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
            "num_key_value_heads", "head_dim", "vocab_size", "tie_word_embeddings",
            "rms_norm_eps", "rope_theta", "rope_scaling", "max_position_embeddings",
            "torch_dtype"]
    cfg = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_act": "silu",
           "attention_bias": False, "mlp_bias": False, "bos_token_id": 1, "eos_token_id": 2}
    cfg.update({k: spec[k] for k in keys})
    return cfg


def shard_names(names, n_shards):
    """Split names into n_shards groups by layer index (embed first, head last)."""
    if n_shards == 1:
        return [sorted(names)]

    def key(name):
        if name.startswith("model.embed_tokens"):
            return -1
        if name.startswith("model.layers."):
            return int(name.split(".")[2])
        return 10 ** 6

    ordered = sorted(names, key=lambda n: (key(n), n))
    groups = np.array_split(np.arange(len(ordered)), n_shards)
    return [[ordered[i] for i in g] for g in groups]


def write_checkpoint(name, spec, root):
    out = os.path.join(root, name)
    os.makedirs(out, exist_ok=True)
    for fn in os.listdir(out):
        os.remove(os.path.join(out, fn))
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(config_json(spec), f, indent=2)
        f.write("\n")
    w = make_weights(spec)
    dt = spec["dtype"]
    n = spec["shards"]
    groups = shard_names(list(w), n)
    if n == 1:
        safetensors_io.write(os.path.join(out, "model.safetensors"),
                             {k: (dt, w[k]) for k in groups[0]}, metadata={"format": "pt"})
    else:
        weight_map = {}
        total = 0
        for i, g in enumerate(groups):
            fn = "model-%05d-of-%05d.safetensors" % (i + 1, n)
            safetensors_io.write(os.path.join(out, fn), {k: (dt, w[k]) for k in g},
                                 metadata={"format": "pt"})
            for k in g:
                weight_map[k] = fn
                total += w[k].size * {"F32": 4, "F16": 2, "BF16": 2}[dt]
        index = {"metadata": {"total_size": total},
                 "weight_map": {k: weight_map[k] for k in sorted(weight_map)}}
        with open(os.path.join(out, "model.safetensors.index.json"), "w") as f:
            json.dump(index, f, indent=2)
            f.write("\n")
    size = sum(os.path.getsize(os.path.join(out, fn)) for fn in os.listdir(out))
    print("%-24s %7d bytes  %s" % (name, size, sorted(os.listdir(out))))
    return out


def main():
    root = os.path.join(HERE, "checkpoints")
    for name, spec in CHECKPOINTS.items():
        write_checkpoint(name, spec, root)


if __name__ == "__main__":
    main()
