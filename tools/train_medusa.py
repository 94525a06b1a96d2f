#!/usr/bin/python3
"""Train Medusa-1 heads for Tandem's bundled target (frozen base) on CPU.

    OMP_WAIT_POLICY=PASSIVE /usr/bin/python3 tools/train_medusa.py --out models

Medusa-1 (Cai et al. 2024, arXiv 2401.10774): K heads on the base model's last
(final-normed) hidden state h_t; head i (0-based) is one residual block
h + SiLU(W1 h + b1) followed by its own LM head W2 (no bias), and predicts the
token i + 2 positions after t's input, i.e. i + 1 tokens beyond the base LM
head's next token. The base model is frozen (Medusa-1); W1 starts at zero and W2
at a copy of the base lm_head, as in the paper.

Training targets: self-distillation. Head i at position t is trained to match the
target's own next-token distribution at position t + i + 1 (soft cross-entropy
against softmax(target logits)), with the training corpus as the context. Why not
the corpus tokens: verification accepts what the *target* would emit, and the
bundled target agrees with the corpus' next token only about half the time, so the
corpus labels would teach the heads the corpus' noise rather than the target's
choices; the paper's self-distillation recipe (Medusa-2 section) makes the same
argument. Why not the target's own generated continuations: one frozen forward over
corpus windows gives every position's target distribution at once, while sampling
continuations costs a forward per token on 2 cores; the contexts are then corpus
prefixes rather than the target's own text, which the held-out figures below measure.
Loss weights 0.8^i per head (the paper's decay).

Outputs (in --out, the models/ directory):
  target/medusa_lm_head.safetensors  Medusa's tensor names: "{i}.0.linear.weight"
      [hidden, hidden], "{i}.0.linear.bias" [hidden], "{i}.1.weight" [vocab, hidden]
      (F16 to keep the repository small; metadata carries medusa_num_heads and
      medusa_num_layers too).
  target/config.json                 gains "medusa_num_heads" and "medusa_num_layers"
      (Medusa's keys) and "medusa_choices" (Tandem's: the candidate tree's paths, most
      likely first, estimated from the held-out rank hit rates; see medusa_choices()).
  medusa_eval.json                   per-head top-1/top-5 on held-out code.
  medusa_training_log.txt            this run's log.

Reuses tools/train_models.py (corpus manifest, tokenizer stream, the Llama
implementation) and tests/reference/safetensors_io.py (file I/O). Never run by the
server or by ./run.sh test.
"""

import argparse
import json
import math
import os
import sys
import time

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tools"))
sys.path.insert(0, os.path.join(ROOT, "tests", "reference"))
import safetensors_io  # noqa: E402
import train_models as tm  # noqa: E402

LOSS_DECAY = 0.8
RANKS = 10  # Ranks per head the tree may use.
NUM_CHOICES = 64  # Paths written to config.json (medusa_choices).


class ResBlock(nn.Module):
    def __init__(self, hidden):
        super().__init__()
        self.linear = nn.Linear(hidden, hidden)
        nn.init.zeros_(self.linear.weight)
        nn.init.zeros_(self.linear.bias)

    def forward(self, x):
        return x + F.silu(self.linear(x))


def make_heads(num_heads, num_layers, hidden, lm_head):
    """Medusa's module tree: state_dict names are "{i}.{j}.linear.*", "{i}.{L}.weight"."""
    heads = nn.ModuleList()
    for _ in range(num_heads):
        head = nn.Sequential(*[ResBlock(hidden) for _ in range(num_layers)],
                             nn.Linear(hidden, lm_head.shape[0], bias=False))
        head[-1].weight.data.copy_(lm_head)
        heads.append(head)
    return heads


def load_target(model_dir):
    with open(os.path.join(model_dir, "config.json")) as f:
        cfg = json.load(f)
    model = tm.LlamaLM(cfg)
    arrays = safetensors_io.read(os.path.join(model_dir, "model.safetensors"), as_float32=True)
    model.load_state_dict({k: torch.from_numpy(v) for k, (_, v) in arrays.items()})
    model.eval()
    for p in model.parameters():
        p.requires_grad_(False)
    return model, cfg


@torch.no_grad()
def target_pass(model, ids):
    """Final-normed hidden states [B, T, H] and logits [B, T, V] of the frozen target."""
    T = ids.shape[1]
    x = model.model.embed_tokens(ids)
    cos, sin, mask = model.rope(T, x.dtype)
    for layer in model.model.layers:
        x = layer(x, cos, sin, mask)
    h = model.model.norm(x)
    return h, h @ model.lm_head.weight.t()


def head_losses(heads, h, logits):
    """Soft cross-entropy of head i at t against the target's distribution at t + i + 1."""
    losses = []
    T = h.shape[1]
    for i, head in enumerate(heads):
        n = T - i - 1
        out = head(h[:, :n])
        target = F.softmax(logits[:, i + 1:i + 1 + n], dim=-1)
        losses.append(-(target * F.log_softmax(out, dim=-1)).sum(-1).mean())
    return losses


def train(heads, model, stream, hp):
    torch.manual_seed(hp["seed"])
    opt = torch.optim.AdamW(heads.parameters(), lr=hp["lr"], betas=(0.9, 0.95),
                            weight_decay=0.0)
    t0 = time.time()
    for step, xb in enumerate(tm.batches(stream, hp["steps"], hp["batch"], hp["ctx"],
                                         hp["seed"])):
        lr = tm.lr_at(step, hp["steps"], hp["lr"], hp["warmup"])
        for g in opt.param_groups:
            g["lr"] = lr
        h, logits = target_pass(model, xb[:, :-1])
        losses = head_losses(heads, h, logits)
        loss = sum(LOSS_DECAY ** i * l for i, l in enumerate(losses))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(heads.parameters(), 1.0)
        opt.step()
        if step % 25 == 0 or step == hp["steps"] - 1:
            tm.log("medusa step %d/%d loss %.4f per head [%s] lr %.2e %.0fs"
                   % (step, hp["steps"], loss.item(),
                      " ".join("%.3f" % l.item() for l in losses), lr, time.time() - t0))
    return time.time() - t0


@torch.no_grad()
def evaluate(heads, model, stream, ctx, windows):
    """Per head over `windows` held-out windows: top-1/top-5 against the target's argmax
    (what greedy verification accepts) and against the corpus token, and how often the
    target's argmax is the head's rank-r token (r < RANKS; the tree's estimate)."""
    n_heads = len(heads)
    hits = {k: np.zeros(n_heads) for k in ("t1_target", "t5_target", "t1_corpus", "t5_corpus")}
    rank_hits = np.zeros((n_heads, RANKS))
    counts = np.zeros(n_heads)
    starts = np.linspace(0, len(stream) - ctx - 2, windows).astype(np.int64)
    for s in starts:
        ids = torch.from_numpy(stream[s:s + ctx + 1].astype(np.int64))[None]
        h, logits = target_pass(model, ids[:, :-1])
        greedy = logits.argmax(-1)[0]
        for i, head in enumerate(heads):
            n = ctx - i - 1
            top = head(h[0, :n]).topk(RANKS, dim=-1).indices
            want_t = greedy[i + 1:i + 1 + n]
            want_c = ids[0, i + 2:i + 2 + n]
            hits["t1_target"][i] += (top[:, 0] == want_t).sum().item()
            hits["t5_target"][i] += (top[:, :5] == want_t[:, None]).any(-1).sum().item()
            hits["t1_corpus"][i] += (top[:, 0] == want_c).sum().item()
            hits["t5_corpus"][i] += (top[:, :5] == want_c[:, None]).any(-1).sum().item()
            rank_hits[i] += (top == want_t[:, None]).sum(0).numpy()
            counts[i] += n
    out = {k: [round(float(v), 4) for v in (a / counts)] for k, a in hits.items()}
    out["rank_hit_target"] = [[round(float(v), 4) for v in row] for row in rank_hits / counts[:, None]]
    return out


def medusa_choices(rank_hit, n_paths):
    """The `n_paths` most likely paths, Medusa's format ([rank at depth 1, rank at depth
    2, ...]), most likely first, estimating a path's acceptance as the product of its
    ranks' hit rates (heads taken as independent). Every path's prefix comes before it
    (a product of rates <= 1 never grows), so any leading part of the list is a tree."""
    import heapq
    heap = [(-rank_hit[0][r], (r,)) for r in range(len(rank_hit[0]))]
    heapq.heapify(heap)
    paths = []
    while heap and len(paths) < n_paths:
        neg, path = heapq.heappop(heap)
        paths.append(list(path))
        if len(path) < len(rank_hit):
            for r in range(len(rank_hit[len(path)])):
                heapq.heappush(heap, (neg * rank_hit[len(path)][r], path + (r,)))
    return paths


def save(heads, out_dir, cfg, num_layers, choices):
    target_dir = os.path.join(out_dir, "target")
    tensors = {name: ("F16", t.detach().numpy()) for name, t in heads.state_dict().items()}
    meta = {"format": "pt", "medusa_num_heads": len(heads), "medusa_num_layers": num_layers}
    path = os.path.join(target_dir, "medusa_lm_head.safetensors")
    safetensors_io.write(path, tensors, metadata=meta)
    cfg = dict(cfg)
    cfg["medusa_num_heads"] = len(heads)
    cfg["medusa_num_layers"] = num_layers
    cfg["medusa_choices"] = "@CHOICES@"
    text = json.dumps(cfg, indent=2).replace('"@CHOICES@"', json.dumps(choices, separators=(",", ":")))
    with open(os.path.join(target_dir, "config.json"), "w") as f:
        f.write(text + "\n")
    return path


def round_to_f16(heads):
    for p in heads.parameters():
        p.data.copy_(p.data.half().float())


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=os.path.join(ROOT, "models"))
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--layers", type=int, default=1)
    ap.add_argument("--steps", type=int, default=600)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--ctx", type=int, default=256)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--eval-windows", type=int, default=48)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--seed", type=int, default=1234)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    log_path = os.path.join(args.out, "medusa_training_log.txt")
    open(log_path, "w").close()
    tm.log.__defaults__[0]["path"] = log_path
    tm.log("train_medusa %s" % " ".join(sys.argv[1:]))

    import sentencepiece as spm
    sp = spm.SentencePieceProcessor(model_file=os.path.join(args.out, "target", "tokenizer.model"))
    train_docs, heldout_docs = tm.read_corpus()
    train_stream = tm.encode_docs(sp, train_docs)
    heldout_stream = tm.encode_docs(sp, heldout_docs)
    tm.log("corpus: %d train tokens, %d held-out tokens" % (len(train_stream), len(heldout_stream)))

    model, cfg = load_target(os.path.join(args.out, "target"))
    cfg = {k: v for k, v in cfg.items() if not k.startswith("medusa_")}
    torch.manual_seed(args.seed)
    heads = make_heads(args.heads, args.layers, cfg["hidden_size"], model.lm_head.weight.data)
    hp = dict(steps=args.steps, batch=args.batch, ctx=args.ctx, lr=args.lr,
              warmup=20, seed=args.seed)
    base = evaluate(heads, model, heldout_stream, args.ctx, args.eval_windows)
    tm.log("before training (heads = base lm_head): %s" % json.dumps(base))
    secs = train(heads, model, train_stream, hp)
    round_to_f16(heads)
    ev = evaluate(heads, model, heldout_stream, args.ctx, args.eval_windows)
    tm.log("held-out after training (F16 weights): %s" % json.dumps(ev))
    choices = medusa_choices(ev["rank_hit_target"], NUM_CHOICES)
    tm.log("medusa_choices (most likely first): %s" % json.dumps(choices))
    path = save(heads, args.out, cfg, args.layers, choices)
    report = dict(hp=hp, heads=args.heads, layers=args.layers, train_seconds=round(secs, 1),
                  eval_positions_per_head=args.eval_windows * args.ctx, untrained=base,
                  heldout=ev, file=os.path.relpath(path, args.out),
                  file_bytes=os.path.getsize(path))
    with open(os.path.join(args.out, "medusa_eval.json"), "w") as f:
        json.dump(report, f, indent=2)
        f.write("\n")
    tm.log("wrote %s (%d bytes) in %.0fs of training" % (path, os.path.getsize(path), secs))


if __name__ == "__main__":
    main()
