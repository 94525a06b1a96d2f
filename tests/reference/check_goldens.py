#!/usr/bin/python3
"""Recompute every committed golden with the oracle and compare.

    /usr/bin/python3 tests/reference/check_goldens.py

Checks:
  1. each tests/reference/goldens/*.safetensors: the oracle (float64, rounded
     to float32 like the stored logits) reproduces logits_<i> at
     logit_positions_<i> within GOLDEN_TOL absolute; input ids and positions
     are well formed.
  2. goldens/greedy.json: the oracle's greedy continuations are unchanged.
  3. goldens/medusa/heads.safetensors: the Medusa heads oracle (medusa_ref.py)
     reproduces the stored logits from the stored hidden rows within GOLDEN_TOL.
  4. the oracle computes what was trained: its logits for the bundled target
     match the training implementation (tools/train_models.py, imported when
     present) and the training-side logits stored in
     trainside/target_logits.safetensors, within TRAIN_TOL.

Without torch this fails, unless TANDEM_REFERENCE_ALLOW_SKIP=1 is set, in
which case it prints why and exits 0.
Paths are resolved from this file's location, so it runs from a source
checkout or from a Bazel runfiles tree.
"""

import glob
import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))

GOLDEN_TOL = 1e-5   # oracle vs committed golden (same float64 math)
TRAIN_TOL = 1e-4    # float64 oracle vs float32 training implementation

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

try:
    import numpy as np
    import torch
except ImportError as e:  # pragma: no cover - depends on the machine
    if os.environ.get("TANDEM_REFERENCE_ALLOW_SKIP") == "1":
        print("SKIPPED: reference oracle needs python3 torch and numpy (%s); "
              "TANDEM_REFERENCE_ALLOW_SKIP=1 allows skipping" % e)
        sys.exit(0)
    print("FAILED: reference oracle needs python3 torch and numpy (%s). Install "
          "python3-torch python3-numpy, or set TANDEM_REFERENCE_ALLOW_SKIP=1 to skip." % e)
    sys.exit(1)

sys.path.insert(0, HERE)
import llama_ref  # noqa: E402
import medusa_ref  # noqa: E402
import safetensors_io  # noqa: E402

_models = {}


def oracle(model_dir):
    if model_dir not in _models:
        _models[model_dir] = llama_ref.LlamaRef.load(os.path.join(ROOT, model_dir))
    return _models[model_dir]


def read_cases(path):
    meta = safetensors_io.read_metadata(path)
    raw = safetensors_io.read(path)
    t = {k: v for k, (dt, v) in raw.items()}
    dts = {k: dt for k, (dt, v) in raw.items()}
    n = int(meta["num_cases"])
    cases = []
    for i in range(n):
        names = ("input_ids_%d" % i, "logit_positions_%d" % i, "logits_%d" % i)
        for nm, want in zip(names, ("I32", "I32", "F32")):
            if dts.get(nm) != want:
                raise ValueError("%s: %s has dtype %s, expected %s" % (path, nm, dts.get(nm), want))
        cases.append(tuple(t[nm] for nm in names))
    return meta, cases


def check_golden(path):
    meta, cases = read_cases(path)
    m = oracle(meta["model_dir"])
    worst = 0.0
    for ids, pos, logits in cases:
        if ids.ndim != 1 or pos.ndim != 1 or logits.shape != (len(pos), m.vocab):
            raise ValueError("bad shapes: ids %s pos %s logits %s" % (ids.shape, pos.shape, logits.shape))
        if ids.min() < 0 or ids.max() >= m.vocab or pos.min() < 0 or pos.max() >= len(ids):
            raise ValueError("ids or positions out of range")
        got = m.forward(ids.tolist())[torch.as_tensor(pos, dtype=torch.long)].numpy().astype(np.float32)
        worst = max(worst, float(np.abs(got - logits).max()))
    return worst, len(cases)


def check_greedy(path):
    with open(path) as f:
        g = json.load(f)
    bad = 0
    for name, entry in g["models"].items():
        m = oracle(entry["model_dir"])
        for c in entry["cases"]:
            seq = list(c["prompt_ids"])
            for _ in range(len(c["output_ids"])):
                seq.append(int(m.forward(seq)[-1].argmax()))
            if seq[len(c["prompt_ids"]):] != c["output_ids"]:
                bad += 1
    return bad


def check_trained():
    """Returns list of (what, max_abs_diff)."""
    out = []
    st = os.path.join(HERE, "trainside", "target_logits.safetensors")
    meta, cases = read_cases(st)
    ids, pos, logits = cases[0]
    m = oracle(meta["model_dir"])
    ref = m.forward(ids.tolist())[torch.as_tensor(pos, dtype=torch.long)].numpy()
    out.append(("stored training-side logits", float(np.abs(ref - logits).max())))
    tools = os.path.join(ROOT, "tools", "train_models.py")
    if os.path.exists(tools):
        sys.path.insert(0, os.path.dirname(tools))
        import train_models
        d = os.path.join(ROOT, meta["model_dir"])
        with open(os.path.join(d, "config.json")) as f:
            cfg = json.load(f)
        model = train_models.LlamaLM({k: cfg[k] for k in (
            "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
            "num_key_value_heads", "tie_word_embeddings", "rms_norm_eps", "rope_theta",
            "max_position_embeddings", "vocab_size")})
        tensors, _ = llama_ref.load_state_dict(d)
        model.load_state_dict({k: torch.from_numpy(v) for k, v in tensors.items()})
        model.eval()
        with torch.no_grad():
            live = model(torch.as_tensor(ids.astype(np.int64))[None])[0].double()
        live = live[torch.as_tensor(pos, dtype=torch.long)].numpy()
        out.append(("live tools/train_models.py", float(np.abs(ref - live).max())))
    return out


def main():
    torch.set_num_threads(int(os.environ.get("TANDEM_TORCH_THREADS", "2")))
    t0 = time.time()
    passed = failed = 0
    goldens = sorted(glob.glob(os.path.join(HERE, "goldens", "*.safetensors")))
    if not goldens:
        print("FAILED: no goldens found under %s" % os.path.join(HERE, "goldens"))
        return 1
    for path in goldens:
        name = os.path.basename(path)
        try:
            worst, n = check_golden(path)
            ok = worst <= GOLDEN_TOL
            msg = "%d cases, max abs diff %.3e (tolerance %.0e)" % (n, worst, GOLDEN_TOL)
        except Exception as e:  # report and continue
            ok, msg = False, "error: %r" % (e,)
        print("%s golden %s: %s" % ("PASS" if ok else "FAIL", name, msg))
        passed, failed = passed + ok, failed + (not ok)

    greedy = os.path.join(HERE, "goldens", "greedy.json")
    if os.path.exists(greedy):
        try:
            bad = check_greedy(greedy)
            ok, msg = bad == 0, "%d mismatching continuations" % bad
        except Exception as e:
            ok, msg = False, "error: %r" % (e,)
        print("%s greedy.json: %s" % ("PASS" if ok else "FAIL", msg))
        passed, failed = passed + ok, failed + (not ok)

    medusa = os.path.join(HERE, "goldens", "medusa", "heads.safetensors")
    if os.path.exists(medusa):
        try:
            t = safetensors_io.read(medusa)
            ref = medusa_ref.MedusaRef(os.path.join(ROOT, "models", "target"))
            got = ref.forward(torch.from_numpy(t["hidden"][1]).double()).float().numpy()
            worst = float(np.abs(got - t["logits"][1]).max())
            ok, msg = worst <= GOLDEN_TOL, "max abs diff %.3e (tolerance %.0e)" % (worst, GOLDEN_TOL)
        except Exception as e:
            ok, msg = False, "error: %r" % (e,)
        print("%s golden medusa/heads.safetensors: %s" % ("PASS" if ok else "FAIL", msg))
        passed, failed = passed + ok, failed + (not ok)

    try:
        for what, diff in check_trained():
            ok = diff <= TRAIN_TOL
            print("%s oracle vs %s: max abs diff %.3e (tolerance %.0e)"
                  % ("PASS" if ok else "FAIL", what, diff, TRAIN_TOL))
            passed, failed = passed + ok, failed + (not ok)
    except Exception as e:
        print("FAIL oracle vs training implementation: error: %r" % (e,))
        failed += 1

    print("(%.1fs)" % (time.time() - t0))
    print("%d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
