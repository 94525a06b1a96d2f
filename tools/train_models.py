#!/usr/bin/python3
"""Train Tandem's bundled draft/target model pair from scratch on CPU.

One command reproduces tokenizer, both models, evaluation and the exported
Hugging Face style directories:

    OMP_WAIT_POLICY=PASSIVE /usr/bin/python3 tools/train_models.py --out models

Stages (each cached in --work, keyed by its settings, so an interrupted run
resumes):
  1. corpus    Python standard library sources (PSF licence), sorted file list,
               train/held-out split by a hash of the relative path.
  2. tokenizer SentencePiece BPE (byte fallback, identity normalisation,
               no dummy prefix).
  3. target    Llama (GQA, SwiGLU, RMSNorm, rotate_half RoPE), untied head.
  4. draft     smaller Llama with tied embeddings, trained on the data, then
               distilled from the target (forward KL on the logits).
  5. eval      held-out loss/perplexity, greedy agreement, sampling acceptance,
               greedy samples from the target.
  6. export    config.json, generation_config.json, model.safetensors (f32),
               tokenizer.model per model directory, plus eval.json.

Requirements: python3-torch (>= 1.13), python3-numpy, python3-sentencepiece.
"""

import argparse
import hashlib
import json
import math
import os
import struct
import sys
import time

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

BOS_ID = 1
EOS_ID = 2
UNK_ID = 0

CORPUS_ROOT = "/usr/lib/python3.11"
# Directories (relative to CORPUS_ROOT) that are not part of the corpus:
# test suites, third-party packages, build configuration, generated data and
# the charmap tables in encodings/.
EXCLUDED_DIRS = (
    "test", "tests", "idle_test", "site-packages", "dist-packages",
    "__pycache__", "encodings", "pydoc_data", "tkinter",
)
EXCLUDED_DIR_PREFIXES = ("config-3.",)
EXCLUDED_FILE_PREFIXES = ("_sysconfigdata",)
HELDOUT_MODULUS = 10  # one file in ten (by path hash) is held out

TARGET_SHAPE = dict(hidden_size=256, intermediate_size=688, num_hidden_layers=4,
                    num_attention_heads=8, num_key_value_heads=2,
                    tie_word_embeddings=False)
DRAFT_SHAPE = dict(hidden_size=128, intermediate_size=344, num_hidden_layers=2,
                   num_attention_heads=4, num_key_value_heads=2,
                   tie_word_embeddings=True)
COMMON_CONFIG = dict(rms_norm_eps=1e-5, rope_theta=10000.0,
                     max_position_embeddings=2048)


def log(msg, _state={}):
    line = "[%s] %s" % (time.strftime("%H:%M:%S"), msg)
    print(line, flush=True)
    path = _state.get("path")
    if path:
        with open(path, "a") as f:
            f.write(line + "\n")


def settings_key(d):
    return hashlib.sha256(json.dumps(d, sort_keys=True).encode()).hexdigest()[:12]


# --------------------------------------------------------------------------
# Corpus
# --------------------------------------------------------------------------

def list_corpus(root=CORPUS_ROOT):
    files = []
    for dirpath, dirnames, filenames in os.walk(root):
        rel_dir = os.path.relpath(dirpath, root)
        parts = [] if rel_dir == "." else rel_dir.split(os.sep)
        if any(p in EXCLUDED_DIRS for p in parts):
            dirnames[:] = []
            continue
        if parts and any(parts[0].startswith(x) for x in EXCLUDED_DIR_PREFIXES):
            dirnames[:] = []
            continue
        for fn in filenames:
            if not fn.endswith(".py"):
                continue
            if any(fn.startswith(x) for x in EXCLUDED_FILE_PREFIXES):
                continue
            files.append(os.path.normpath(os.path.join(*(parts + [fn]))))
    files.sort()
    return files


def is_heldout(relpath):
    h = int(hashlib.md5(relpath.encode("utf-8")).hexdigest(), 16)
    return h % HELDOUT_MODULUS == 0


MANIFEST = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus_manifest.txt")


def write_manifest(root=CORPUS_ROOT, path=MANIFEST):
    with open(path, "w") as out:
        out.write("# sha256  path relative to %s (corpus of tools/train_models.py)\n" % root)
        for rel in list_corpus(root):
            with open(os.path.join(root, rel), "rb") as f:
                out.write("%s  %s\n" % (hashlib.sha256(f.read()).hexdigest(), rel))


def read_manifest(path=MANIFEST):
    entries = []
    with open(path) as f:
        for line in f:
            if line.startswith("#") or not line.strip():
                continue
            digest, rel = line.rstrip("\n").split("  ", 1)
            entries.append((rel, digest))
    return entries


def read_corpus(root=CORPUS_ROOT, manifest=MANIFEST):
    """Returns (train, heldout) lists of (relpath, text).

    The file set is pinned by tools/corpus_manifest.txt (path and sha256), so
    packages installed later under the same directory do not change it.
    """
    train, heldout = [], []
    problems = []
    for rel, digest in read_manifest(manifest):
        try:
            with open(os.path.join(root, rel), "rb") as f:
                data = f.read()
        except OSError as e:
            problems.append("%s: %s" % (rel, e))
            continue
        if hashlib.sha256(data).hexdigest() != digest:
            problems.append("%s: content differs from the manifest" % rel)
            continue
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            log("skipping non-UTF-8 file %s" % rel)
            continue
        if not text.strip():
            continue
        (heldout if is_heldout(rel) else train).append((rel, text))
    if problems:
        raise SystemExit(
            "corpus differs from %s (%d problems, first: %s). The committed models were "
            "trained on Debian bookworm's Python 3.11 standard library (libpython3.11-minimal, "
            "libpython3.11-stdlib, python3-distutils, python3-lib2to3, python3.11-venv)."
            % (manifest, len(problems), problems[:3]))
    return train, heldout


# --------------------------------------------------------------------------
# Tokenizer
# --------------------------------------------------------------------------

SPM_OPTIONS = dict(
    model_type="bpe",
    vocab_size=2048,
    character_coverage=0.9995,
    normalization_rule_name="identity",
    remove_extra_whitespaces=False,
    add_dummy_prefix=False,
    byte_fallback=True,
    allow_whitespace_only_pieces=True,
    split_digits=True,
    max_sentencepiece_length=16,
    unk_id=UNK_ID, bos_id=BOS_ID, eos_id=EOS_ID, pad_id=-1,
    input_sentence_size=0,
    shuffle_input_sentence=False,
    num_threads=2,
    minloglevel=1,
)


def train_tokenizer(train_docs, work):
    import sentencepiece as spm
    key = settings_key({"spm": SPM_OPTIONS, "files": [r for r, _ in train_docs]})
    prefix = os.path.join(work, "tokenizer-" + key)
    if os.path.exists(prefix + ".model"):
        log("tokenizer: cached %s.model" % prefix)
        return prefix + ".model"
    inp = os.path.join(work, "spm_input-%s.txt" % key)
    with open(inp, "w", encoding="utf-8") as f:
        for _, text in train_docs:
            for line in text.split("\n"):
                if line.strip():
                    f.write(line + "\n")
    t0 = time.time()
    spm.SentencePieceTrainer.train(input=inp, model_prefix=prefix, **SPM_OPTIONS)
    log("tokenizer: trained in %.1fs -> %s.model" % (time.time() - t0, prefix))
    return prefix + ".model"


def encode_docs(sp, docs):
    """Concatenated stream: BOS doc EOS BOS doc EOS ..."""
    out = []
    for _, text in docs:
        out.append(BOS_ID)
        out.extend(sp.encode(text))
        out.append(EOS_ID)
    return np.asarray(out, dtype=np.int32)


# --------------------------------------------------------------------------
# Model (training implementation; the test oracle is a separate file)
# --------------------------------------------------------------------------

class RMSNorm(nn.Module):
    def __init__(self, dim, eps):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x):
        var = x.pow(2).mean(-1, keepdim=True)
        return self.weight * (x * torch.rsqrt(var + self.eps))


def rope_cos_sin(head_dim, theta, n_pos, dtype=torch.float32):
    inv = 1.0 / (theta ** (torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim))
    t = torch.arange(n_pos, dtype=torch.float64)
    freqs = torch.outer(t, inv)
    emb = torch.cat([freqs, freqs], dim=-1)
    return emb.cos().to(dtype), emb.sin().to(dtype)


def rotate_half(x):
    h = x.shape[-1] // 2
    return torch.cat([-x[..., h:], x[..., :h]], dim=-1)


class Attention(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        d = cfg["hidden_size"]
        self.nh = cfg["num_attention_heads"]
        self.nkv = cfg["num_key_value_heads"]
        self.hd = d // self.nh
        self.q_proj = nn.Linear(d, self.nh * self.hd, bias=False)
        self.k_proj = nn.Linear(d, self.nkv * self.hd, bias=False)
        self.v_proj = nn.Linear(d, self.nkv * self.hd, bias=False)
        self.o_proj = nn.Linear(self.nh * self.hd, d, bias=False)

    def forward(self, x, cos, sin, mask):
        B, T, _ = x.shape
        q = self.q_proj(x).view(B, T, self.nh, self.hd).transpose(1, 2)
        k = self.k_proj(x).view(B, T, self.nkv, self.hd).transpose(1, 2)
        v = self.v_proj(x).view(B, T, self.nkv, self.hd).transpose(1, 2)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        rep = self.nh // self.nkv
        if rep > 1:
            k = k.repeat_interleave(rep, dim=1)
            v = v.repeat_interleave(rep, dim=1)
        att = (q @ k.transpose(-1, -2)) * (1.0 / math.sqrt(self.hd)) + mask
        att = att.softmax(dim=-1)
        y = (att @ v).transpose(1, 2).reshape(B, T, self.nh * self.hd)
        return self.o_proj(y)


class MLP(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        d, i = cfg["hidden_size"], cfg["intermediate_size"]
        self.gate_proj = nn.Linear(d, i, bias=False)
        self.up_proj = nn.Linear(d, i, bias=False)
        self.down_proj = nn.Linear(i, d, bias=False)

    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class DecoderLayer(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.self_attn = Attention(cfg)
        self.mlp = MLP(cfg)
        self.input_layernorm = RMSNorm(cfg["hidden_size"], cfg["rms_norm_eps"])
        self.post_attention_layernorm = RMSNorm(cfg["hidden_size"], cfg["rms_norm_eps"])

    def forward(self, x, cos, sin, mask):
        x = x + self.self_attn(self.input_layernorm(x), cos, sin, mask)
        return x + self.mlp(self.post_attention_layernorm(x))


class LlamaBody(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.embed_tokens = nn.Embedding(cfg["vocab_size"], cfg["hidden_size"])
        self.layers = nn.ModuleList([DecoderLayer(cfg) for _ in range(cfg["num_hidden_layers"])])
        self.norm = RMSNorm(cfg["hidden_size"], cfg["rms_norm_eps"])


class LlamaLM(nn.Module):
    """Parameter names match Hugging Face LlamaForCausalLM."""

    def __init__(self, cfg):
        super().__init__()
        self.cfg = cfg
        self.model = LlamaBody(cfg)
        self.tied = cfg["tie_word_embeddings"]
        if not self.tied:
            self.lm_head = nn.Linear(cfg["hidden_size"], cfg["vocab_size"], bias=False)
        self.head_dim = cfg["hidden_size"] // cfg["num_attention_heads"]
        self._rope = {}
        self.reset_parameters()

    def reset_parameters(self):
        std = 0.02
        n_layers = self.cfg["num_hidden_layers"]
        for name, p in self.named_parameters():
            if p.dim() == 1:
                nn.init.ones_(p)
            elif name.endswith("o_proj.weight") or name.endswith("down_proj.weight"):
                nn.init.normal_(p, 0.0, std / math.sqrt(2 * n_layers))
            else:
                nn.init.normal_(p, 0.0, std)

    def rope(self, T, dtype):
        key = (T, dtype)
        if key not in self._rope:
            cos, sin = rope_cos_sin(self.head_dim, self.cfg["rope_theta"], T, dtype)
            mask = torch.full((T, T), float("-inf"), dtype=dtype).triu(1)
            self._rope = {key: (cos, sin, mask)}
        return self._rope[key]

    def forward(self, ids):
        T = ids.shape[1]
        x = self.model.embed_tokens(ids)
        cos, sin, mask = self.rope(T, x.dtype)
        for layer in self.model.layers:
            x = layer(x, cos, sin, mask)
        x = self.model.norm(x)
        w = self.model.embed_tokens.weight if self.tied else self.lm_head.weight
        return x @ w.t()


def num_params(model):
    return sum(p.numel() for p in model.parameters())


def make_config(shape, vocab_size):
    cfg = dict(shape)
    cfg.update(COMMON_CONFIG)
    cfg["vocab_size"] = vocab_size
    return cfg


# --------------------------------------------------------------------------
# Training
# --------------------------------------------------------------------------

def lr_at(step, total, peak, warmup, final_frac=0.1):
    if step < warmup:
        return peak * (step + 1) / warmup
    p = (step - warmup) / max(1, total - warmup)
    return peak * (final_frac + (1 - final_frac) * 0.5 * (1 + math.cos(math.pi * p)))


def batches(stream, n_steps, batch, ctx, seed):
    rng = np.random.default_rng(seed)
    hi = len(stream) - ctx - 1
    for _ in range(n_steps):
        starts = rng.integers(0, hi, size=batch)
        x = np.stack([stream[s:s + ctx + 1] for s in starts]).astype(np.int64)
        yield torch.from_numpy(x)


def train(model, stream, hp, work, tag, teacher=None):
    """hp: steps, batch, ctx, lr, warmup, seed, weight_decay. Returns model."""
    key = settings_key({"cfg": model.cfg, "hp": hp, "tag": tag,
                        "teacher": teacher.cfg if teacher is not None else None,
                        "n_tokens": int(len(stream))})
    ckpt = os.path.join(work, "%s-%s.pt" % (tag, key))
    if os.path.exists(ckpt):
        model.load_state_dict(torch.load(ckpt))
        with open(ckpt + ".json") as f:
            secs = json.load(f)["seconds"]
        log("%s: cached %s (trained in %.1fs)" % (tag, ckpt, secs))
        return model, secs
    torch.manual_seed(hp["seed"])
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": hp["weight_decay"]},
                             {"params": no_decay, "weight_decay": 0.0}],
                            lr=hp["lr"], betas=(0.9, 0.95), eps=1e-8)
    model.train()
    t0 = time.time()
    ema = None
    n_tok = hp["batch"] * hp["ctx"]
    for step, xb in enumerate(batches(stream, hp["steps"], hp["batch"], hp["ctx"], hp["seed"])):
        lr = lr_at(step, hp["steps"], hp["lr"], hp["warmup"])
        for g in opt.param_groups:
            g["lr"] = lr
        inp, tgt = xb[:, :-1], xb[:, 1:]
        # bf16 autocast for the matrix products (f32 master weights, f32
        # residual stream, norms, softmax and loss).
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=hp["bf16"]):
            logits = model(inp)
        logits = logits.float()
        if teacher is None:
            loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), tgt.reshape(-1))
        else:
            with torch.no_grad():
                with torch.autocast("cpu", dtype=torch.bfloat16, enabled=hp["bf16"]):
                    t_logits = teacher(inp)
                t_logp = F.log_softmax(t_logits.float(), dim=-1)
            s_logp = F.log_softmax(logits, dim=-1)
            # forward KL(teacher || student), mean over positions
            loss = (t_logp.exp() * (t_logp - s_logp)).sum(-1).mean()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        lv = loss.item()
        ema = lv if ema is None else 0.98 * ema + 0.02 * lv
        if step % 50 == 0 or step == hp["steps"] - 1:
            el = time.time() - t0
            log("%s step %d/%d loss %.4f (ema %.4f) lr %.2e  %.0f tok/s  %.0fs"
                % (tag, step, hp["steps"], lv, ema, lr, (step + 1) * n_tok / el, el))
    el = time.time() - t0
    log("%s: done %d steps in %.1fs" % (tag, hp["steps"], el))
    torch.save(model.state_dict(), ckpt)
    with open(ckpt + ".json", "w") as f:
        json.dump({"seconds": el, "hp": hp, "tag": tag}, f)
    return model, el


# --------------------------------------------------------------------------
# Evaluation
# --------------------------------------------------------------------------

@torch.no_grad()
def evaluate(target, draft, stream, ctx, max_tokens):
    target.eval()
    draft.eval()
    n = min(len(stream) - 1, max_tokens)
    n_win = n // ctx
    sums = dict(t_nll=0.0, d_nll=0.0, agree=0, accept=0.0, count=0)
    bs = 8
    for w0 in range(0, n_win, bs):
        ws = range(w0, min(n_win, w0 + bs))
        x = torch.from_numpy(np.stack([stream[w * ctx:w * ctx + ctx + 1] for w in ws]).astype(np.int64))
        inp, tgt = x[:, :-1], x[:, 1:]
        lt = F.log_softmax(target(inp).double(), -1)
        ld = F.log_softmax(draft(inp).double(), -1)
        sums["t_nll"] += -lt.gather(-1, tgt[..., None]).sum().item()
        sums["d_nll"] += -ld.gather(-1, tgt[..., None]).sum().item()
        sums["agree"] += (lt.argmax(-1) == ld.argmax(-1)).sum().item()
        sums["accept"] += torch.minimum(lt.exp(), ld.exp()).sum(-1).sum().item()
        sums["count"] += tgt.numel()
    c = sums["count"]
    res = dict(
        heldout_tokens=c,
        target_loss=sums["t_nll"] / c, draft_loss=sums["d_nll"] / c,
        greedy_agreement=sums["agree"] / c,
        sampling_acceptance_t1=sums["accept"] / c,
    )
    res["target_ppl"] = math.exp(res["target_loss"])
    res["draft_ppl"] = math.exp(res["draft_loss"])
    return res


@torch.no_grad()
def greedy(model, ids, n_new):
    model.eval()
    ids = list(ids)
    for _ in range(n_new):
        logits = model(torch.tensor([ids], dtype=torch.long))[0, -1]
        nxt = int(logits.argmax())
        ids.append(nxt)
        if nxt == EOS_ID:
            break
    return ids


# --------------------------------------------------------------------------
# Export (Hugging Face layout)
# --------------------------------------------------------------------------

def write_safetensors(path, tensors, metadata=None):
    header = {}
    if metadata:
        header["__metadata__"] = {k: str(v) for k, v in metadata.items()}
    offset = 0
    blobs = []
    for name in sorted(tensors):
        a = np.ascontiguousarray(tensors[name].detach().cpu().numpy().astype("<f4"))
        b = a.tobytes()
        header[name] = {"dtype": "F32", "shape": list(a.shape),
                        "data_offsets": [offset, offset + len(b)]}
        offset += len(b)
        blobs.append(b)
    hb = json.dumps(header, separators=(",", ":")).encode("utf-8")
    hb += b" " * ((8 - len(hb) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(hb)))
        f.write(hb)
        for b in blobs:
            f.write(b)


def export(model, out_dir, tokenizer_path):
    import shutil
    os.makedirs(out_dir, exist_ok=True)
    cfg = model.cfg
    config = {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "hidden_size": cfg["hidden_size"],
        "intermediate_size": cfg["intermediate_size"],
        "num_attention_heads": cfg["num_attention_heads"],
        "num_key_value_heads": cfg["num_key_value_heads"],
        "num_hidden_layers": cfg["num_hidden_layers"],
        "head_dim": cfg["hidden_size"] // cfg["num_attention_heads"],
        "hidden_act": "silu",
        "rms_norm_eps": cfg["rms_norm_eps"],
        "rope_theta": cfg["rope_theta"],
        "rope_scaling": None,
        "vocab_size": cfg["vocab_size"],
        "tie_word_embeddings": cfg["tie_word_embeddings"],
        "max_position_embeddings": cfg["max_position_embeddings"],
        "bos_token_id": BOS_ID,
        "eos_token_id": EOS_ID,
        "attention_bias": False,
        "mlp_bias": False,
        "attention_dropout": 0.0,
        "initializer_range": 0.02,
        "pretraining_tp": 1,
        "use_cache": True,
        "torch_dtype": "float32",
    }
    with open(os.path.join(out_dir, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
        f.write("\n")
    gen = {"bos_token_id": BOS_ID, "eos_token_id": EOS_ID, "do_sample": False}
    with open(os.path.join(out_dir, "generation_config.json"), "w") as f:
        json.dump(gen, f, indent=2)
        f.write("\n")
    tok_cfg = {
        "tokenizer_class": "LlamaTokenizer",
        "bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>",
        "add_bos_token": True, "add_eos_token": False,
        "legacy": True, "model_max_length": cfg["max_position_embeddings"],
    }
    with open(os.path.join(out_dir, "tokenizer_config.json"), "w") as f:
        json.dump(tok_cfg, f, indent=2)
        f.write("\n")
    shutil.copyfile(tokenizer_path, os.path.join(out_dir, "tokenizer.model"))
    sd = model.state_dict()
    write_safetensors(os.path.join(out_dir, "model.safetensors"), sd,
                      metadata={"format": "pt"})


# --------------------------------------------------------------------------
# Main
# --------------------------------------------------------------------------

def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default="models", help="output directory (models/)")
    ap.add_argument("--work", default="/tmp/tandem_train_models", help="cache directory")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--ctx", type=int, default=256)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--target-steps", type=int, default=1500)
    ap.add_argument("--draft-steps", type=int, default=1200)
    ap.add_argument("--distill-steps", type=int, default=600)
    ap.add_argument("--eval-tokens", type=int, default=10 ** 9,
                    help="cap on held-out tokens used for evaluation")
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--no-bf16", action="store_true",
                    help="train in plain f32 instead of bf16 autocast")
    ap.add_argument("--stop-after", choices=["tokenizer"], default=None)
    ap.add_argument("--write-manifest", action="store_true",
                    help="rewrite tools/corpus_manifest.txt from %s and exit" % CORPUS_ROOT)
    args = ap.parse_args()
    if args.write_manifest:
        write_manifest()
        return

    torch.set_num_threads(args.threads)
    os.makedirs(args.work, exist_ok=True)
    os.makedirs(args.out, exist_ok=True)
    log.__defaults__[0]["path"] = os.path.join(args.work, "train.log")
    log("args: %s" % vars(args))
    t_start = time.time()

    import sentencepiece as spm
    train_docs, held_docs = read_corpus()
    log("corpus: %d train files (%d bytes), %d held-out files (%d bytes)"
        % (len(train_docs), sum(len(t.encode()) for _, t in train_docs),
           len(held_docs), sum(len(t.encode()) for _, t in held_docs)))
    tok_path = train_tokenizer(train_docs, args.work)
    sp = spm.SentencePieceProcessor(model_file=tok_path)
    assert sp.bos_id() == BOS_ID and sp.eos_id() == EOS_ID and sp.unk_id() == UNK_ID
    vocab = sp.get_piece_size()

    # exact round trip on every held-out file
    bad = [r for r, t in held_docs if sp.decode(sp.encode(t)) != t]
    if bad:
        raise SystemExit("tokenizer round trip failed on: %s" % bad[:5])
    log("tokenizer: vocab %d, round trip exact on all %d held-out files" % (vocab, len(held_docs)))
    train_stream = encode_docs(sp, train_docs)
    held_stream = encode_docs(sp, held_docs)
    n_bytes_train = sum(len(t.encode()) for _, t in train_docs)
    log("tokens: train %d (%.2f bytes/token), held-out %d"
        % (len(train_stream), n_bytes_train / len(train_stream), len(held_stream)))
    if args.stop_after == "tokenizer":
        return

    base = dict(batch=args.batch, ctx=args.ctx, seed=args.seed, weight_decay=0.1,
                bf16=not args.no_bf16)

    torch.manual_seed(args.seed)
    target = LlamaLM(make_config(TARGET_SHAPE, vocab))
    torch.manual_seed(args.seed + 1)
    draft = LlamaLM(make_config(DRAFT_SHAPE, vocab))
    log("params: target %d, draft %d" % (num_params(target), num_params(draft)))

    hp_draft = dict(base, steps=args.draft_steps, lr=3e-3, warmup=100, seed=args.seed + 1)
    draft, secs_draft = train(draft, train_stream, hp_draft, args.work, "draft")
    hp_target = dict(base, steps=args.target_steps, lr=2e-3, warmup=100)
    target, secs_target = train(target, train_stream, hp_target, args.work, "target")

    res_before = evaluate(target, draft, held_stream, args.ctx, min(args.eval_tokens, 65536))
    log("before distillation (first %d held-out tokens): %s" % (res_before["heldout_tokens"], res_before))

    target.eval()
    for p in target.parameters():
        p.requires_grad_(False)
    hp_dist = dict(base, steps=args.distill_steps, lr=1e-3, warmup=20, seed=args.seed + 2)
    draft, secs_dist = train(draft, train_stream, hp_dist, args.work, "distill", teacher=target)

    res = evaluate(target, draft, held_stream, args.ctx, args.eval_tokens)
    log("eval: %s" % res)

    # greedy samples from the target
    # (a bare "class " prompt degenerates into a "#####..." banner comment)
    prompts = ["def ", "import os\n\n\ndef ", "class Stack:\n    def __init__(self):\n"]
    samples = []
    for p in prompts:
        ids = [BOS_ID] + sp.encode(p)
        out = greedy(target, ids, 96)
        text = sp.decode([i for i in out[1:] if i != EOS_ID])
        samples.append({"prompt": p, "completion": text})
        log("sample %r:\n%s" % (p, text))

    export(target, os.path.join(args.out, "target"), tok_path)
    export(draft, os.path.join(args.out, "draft"), tok_path)

    n_files = len(train_docs) + len(held_docs)
    report = {
        "corpus": {"root": CORPUS_ROOT, "files": n_files, "train_files": len(train_docs),
                   "heldout_files": len(held_docs), "train_tokens": int(len(train_stream)),
                   "heldout_tokens": int(len(held_stream)),
                   "train_bytes_per_token": n_bytes_train / len(train_stream)},
        "tokenizer": {"vocab_size": vocab, "options": SPM_OPTIONS},
        "target": {"params": num_params(target), "config": target.cfg, "hp": hp_target,
                   "train_seconds": secs_target},
        "draft": {"params": num_params(draft), "config": draft.cfg, "hp": hp_draft,
                  "train_seconds": secs_draft,
                  "distill_hp": hp_dist,
                  "distill_seconds": secs_dist},
        "eval_before_distillation": res_before,
        "eval": res,
        "samples": samples,
        "torch_version": torch.__version__,
        "threads": args.threads,
        "total_seconds_this_run": time.time() - t_start,
    }
    with open(os.path.join(args.out, "eval.json"), "w") as f:
        json.dump(report, f, indent=2)
        f.write("\n")
    log("done in %.1fs" % (time.time() - t_start))
    import shutil
    shutil.copyfile(os.path.join(args.work, "train.log"), os.path.join(args.out, "training_log.txt"))


if __name__ == "__main__":
    main()
