#!/usr/bin/python3
"""Write golden logits computed by the reference oracle (llama_ref.py).

    /usr/bin/python3 tests/reference/make_goldens.py [--only NAME ...]

One file per model: tests/reference/goldens/<name>.safetensors with, for each
case i in 0..num_cases-1,
    input_ids_<i>        I32 [T]     token ids (BOS included for text prompts)
    logit_positions_<i>  I32 [P]     positions whose logits are stored
    logits_<i>           F32 [P, V]  logits (computed in float64, rounded to f32)
and __metadata__ (all strings):
    num_cases, model_dir (relative to the repository root), compute_dtype
    ("float64"), f32_oracle_max_abs_diff (how far the same oracle run in
    float32 lands from these logits: a floor for a float32 implementation's
    tolerance), and prompt_text_<i> for text prompts.

Also written:
  goldens/greedy.json       greedy continuations (float64 oracle) of the
                            bundled target and draft for a few prompts, with
                            the smallest top-1/top-2 logit margin on the path
  goldens/medusa/heads.safetensors
                            the bundled target's Medusa heads (medusa_ref.py,
                            float64): "hidden" F32 [R, H] rows in, "logits" F32
                            [R, heads, V] out (a subdirectory: not a Llama golden)
  trainside/target_logits.safetensors
                            the same layout, logits from the *training* code
                            (tools/train_models.py) in float32, so the check
                            can prove the oracle computes what was trained
                            even where tools/ is not available.
"""

import argparse
import json
import os
import sys

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
import llama_ref  # noqa: E402
import medusa_ref  # noqa: E402
import safetensors_io  # noqa: E402

GOLDEN_DIR = os.path.join(HERE, "goldens")

# Text prompts for the bundled pair (tokenised with the model's tokenizer,
# BOS prepended).
SHORT_PROMPT = "def fibonacci(n):\n    "
HELDOUT = os.path.join(ROOT, "tests", "data", "heldout_code.txt")

GREEDY_PROMPTS = [
    "def fibonacci(n):\n",
    "import os\n\n\ndef read_file(path):\n",
    "class Stack:\n    def __init__(self):\n",
]
GREEDY_NEW_TOKENS = 32


def random_ids(seed, n, vocab):
    rng = np.random.default_rng(seed)
    return [int(x) for x in rng.integers(0, vocab, size=n)]


def heldout_slice(sp, start_line, n_tokens):
    with open(HELDOUT, encoding="utf-8", newline="") as f:
        lines = f.read().split("\n")
    # whole lines, as many as fit in n_tokens (newline is its own byte token,
    # so encode(text) of the cut text is exactly these ids)
    text = ""
    for line in lines[start_line:]:
        if len(sp.encode(text + line + "\n")) > n_tokens:
            break
        text += line + "\n"
    ids = sp.encode(text)
    assert sp.decode(ids) == text
    return ids, text


def bundled_cases(model_dir):
    import sentencepiece as spm
    sp = spm.SentencePieceProcessor(model_file=os.path.join(model_dir, "tokenizer.model"))
    bos = sp.bos_id()
    cases = []
    ids = [bos] + sp.encode(SHORT_PROMPT)
    cases.append(dict(ids=ids, positions=list(range(len(ids))), text=SHORT_PROMPT))
    ids, text = heldout_slice(sp, 100, 160)
    ids = [bos] + ids
    cases.append(dict(ids=ids, positions=[0, 1, 2, 31, 63, 64, 100, len(ids) - 2, len(ids) - 1], text=text))
    # longer than the training context (256)
    ids, text = heldout_slice(sp, 400, 599)
    ids = [bos] + ids
    cases.append(dict(ids=ids, positions=[0, 255, 256, 257, 400, 511, 512, len(ids) - 1], text=text))
    return cases


def random_cases(seed, vocab, long_len=None):
    cases = [dict(ids=random_ids(seed, 5, vocab), positions=list(range(5))),
             dict(ids=random_ids(seed + 1, 33, vocab), positions=list(range(33)))]
    if long_len:
        ids = random_ids(seed + 2, long_len, vocab)
        cases.append(dict(ids=ids, positions=[0, 15, 16, 63, 64, 65, long_len // 2, long_len - 1]))
    return cases


def golden_specs():
    specs = {}
    for name in ("target", "draft"):
        d = os.path.join("models", name)
        if os.path.exists(os.path.join(ROOT, d, "config.json")):
            specs[name] = (d, lambda d=d: bundled_cases(os.path.join(ROOT, d)))
        else:
            print("warning: %s missing, no golden for it" % d)
    ck = os.path.join("tests", "reference", "checkpoints")
    specs["tiny_f16_hd20_kv1"] = (os.path.join(ck, "tiny_f16_hd20_kv1"), lambda: random_cases(101, 1000))
    specs["tiny_bf16_llama3_tied"] = (os.path.join(ck, "tiny_bf16_llama3_tied"),
                                      lambda: random_cases(202, 512, long_len=200))
    specs["tiny_f32_sharded"] = (os.path.join(ck, "tiny_f32_sharded"), lambda: random_cases(303, 300, long_len=100))
    specs["tiny_f32_tp"] = (os.path.join(ck, "tiny_f32_tp"), lambda: random_cases(404, 128, long_len=100))
    return specs


def write_golden(name, model_dir, cases):
    m64 = llama_ref.LlamaRef.load(os.path.join(ROOT, model_dir), dtype=torch.float64)
    m32 = llama_ref.LlamaRef.load(os.path.join(ROOT, model_dir), dtype=torch.float32)
    tensors = {}
    meta = {"num_cases": len(cases), "model_dir": model_dir, "compute_dtype": "float64",
            "generator": "tests/reference/make_goldens.py (oracle tests/reference/llama_ref.py)"}
    worst32 = 0.0
    for i, c in enumerate(cases):
        pos = c["positions"]
        l64 = m64.forward(c["ids"])[pos]
        l32 = m32.forward(c["ids"])[pos]
        worst32 = max(worst32, (l64 - l32.double()).abs().max().item())
        tensors["input_ids_%d" % i] = ("I32", np.asarray(c["ids"], dtype=np.int32))
        tensors["logit_positions_%d" % i] = ("I32", np.asarray(pos, dtype=np.int32))
        tensors["logits_%d" % i] = ("F32", l64.numpy().astype(np.float32))
        if "text" in c:
            meta["prompt_text_%d" % i] = c["text"]
    meta["f32_oracle_max_abs_diff"] = "%.3e" % worst32
    os.makedirs(GOLDEN_DIR, exist_ok=True)
    path = os.path.join(GOLDEN_DIR, name + ".safetensors")
    safetensors_io.write(path, tensors, metadata=meta)
    print("%-24s %d cases, %7d bytes, f32 oracle max diff %.2e"
          % (name, len(cases), os.path.getsize(path), worst32))


def write_greedy():
    out = {"notes": ("greedy (argmax) continuations computed by the float64 oracle; "
                     "prompt_ids include BOS; min_margin is the smallest gap between "
                     "the top-1 and top-2 logits along the path (a float32 "
                     "implementation may legitimately diverge where it is tiny)."),
           "max_new_tokens": GREEDY_NEW_TOKENS, "models": {}}
    import sentencepiece as spm
    for name in ("target", "draft"):
        d = os.path.join("models", name)
        if not os.path.exists(os.path.join(ROOT, d, "config.json")):
            continue
        m = llama_ref.LlamaRef.load(os.path.join(ROOT, d))
        sp = spm.SentencePieceProcessor(model_file=os.path.join(ROOT, d, "tokenizer.model"))
        cases = []
        for p in GREEDY_PROMPTS:
            ids = [sp.bos_id()] + sp.encode(p)
            seq = list(ids)
            margin = float("inf")
            for _ in range(GREEDY_NEW_TOKENS):
                last = m.forward(seq)[-1]
                top2 = torch.topk(last, 2).values
                margin = min(margin, float(top2[0] - top2[1]))
                nxt = int(last.argmax())
                seq.append(nxt)
                if nxt == sp.eos_id():
                    break
            new = seq[len(ids):]
            cases.append({"prompt": p, "prompt_ids": ids, "output_ids": new,
                          "output_text": sp.decode(new), "min_margin": margin})
        out["models"][name] = {"model_dir": d, "cases": cases}
    path = os.path.join(GOLDEN_DIR, "greedy.json")
    with open(path, "w") as f:
        json.dump(out, f, indent=1)
        f.write("\n")
    print("greedy.json written")


def write_trainside():
    """Logits of the bundled target from the training implementation."""
    d = os.path.join(ROOT, "models", "target")
    sys.path.insert(0, os.path.join(ROOT, "tools"))
    import train_models
    with open(os.path.join(d, "config.json")) as f:
        cfg = json.load(f)
    model = train_models.LlamaLM({k: cfg[k] for k in (
        "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
        "num_key_value_heads", "tie_word_embeddings", "rms_norm_eps", "rope_theta",
        "max_position_embeddings", "vocab_size")})
    tensors, _ = llama_ref.load_state_dict(d)
    model.load_state_dict({k: torch.from_numpy(v) for k, v in tensors.items()})
    model.eval()
    import sentencepiece as spm
    sp = spm.SentencePieceProcessor(model_file=os.path.join(d, "tokenizer.model"))
    ids, text = heldout_slice(sp, 200, 40)
    ids = [sp.bos_id()] + ids
    with torch.no_grad():
        logits = model(torch.tensor([ids]))[0].float().numpy()
    pos = list(range(len(ids)))
    os.makedirs(os.path.join(HERE, "trainside"), exist_ok=True)
    path = os.path.join(HERE, "trainside", "target_logits.safetensors")
    safetensors_io.write(path, {
        "input_ids_0": ("I32", np.asarray(ids, dtype=np.int32)),
        "logit_positions_0": ("I32", np.asarray(pos, dtype=np.int32)),
        "logits_0": ("F32", logits[pos])},
        metadata={"num_cases": 1, "model_dir": "models/target", "compute_dtype": "float32",
                  "generator": "tools/train_models.py LlamaLM (training implementation)"})
    print("trainside/target_logits.safetensors written (%d bytes)" % os.path.getsize(path))


MEDUSA_GOLDEN = os.path.join(GOLDEN_DIR, "medusa", "heads.safetensors")
MEDUSA_ROWS = 6


def medusa_hidden_rows(hidden_size, seed=18):
    """Rows scaled like final-normed hidden states (unit RMS times a spread)."""
    rng = np.random.default_rng(seed)
    return (rng.standard_normal((MEDUSA_ROWS, hidden_size)) * 2.0).astype(np.float32)


def write_medusa():
    model_dir = os.path.join(ROOT, "models", "target")
    ref = medusa_ref.MedusaRef(model_dir)
    hidden = medusa_hidden_rows(ref.w["0.%d.weight" % ref.num_layers].shape[1])
    logits = ref.forward(torch.from_numpy(hidden).double()).numpy().astype(np.float32)
    os.makedirs(os.path.dirname(MEDUSA_GOLDEN), exist_ok=True)
    safetensors_io.write(MEDUSA_GOLDEN, {"hidden": ("F32", hidden), "logits": ("F32", logits)},
                         metadata={"model_dir": "models/target", "compute_dtype": "float64",
                                   "generator": "tests/reference/make_goldens.py (oracle "
                                                "tests/reference/medusa_ref.py)"})
    print("%-24s %d rows, %7d bytes" % ("medusa/heads", MEDUSA_ROWS,
                                        os.path.getsize(MEDUSA_GOLDEN)))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--only", nargs="*", help="golden names to (re)write")
    args = ap.parse_args()
    torch.set_num_threads(int(os.environ.get("TANDEM_TORCH_THREADS", "2")))
    for name, (model_dir, make_cases) in golden_specs().items():
        if args.only and name not in args.only:
            continue
        write_golden(name, model_dir, make_cases())
    if not args.only or "greedy" in args.only:
        write_greedy()
    if not args.only or "medusa" in args.only:
        write_medusa()
    if (not args.only or "trainside" in args.only) and os.path.exists(os.path.join(ROOT, "models", "target", "config.json")):
        write_trainside()


if __name__ == "__main__":
    main()
