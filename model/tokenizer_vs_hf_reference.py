#!/usr/bin/python3
"""Checks that the native tokenizer.json tokenizer gives exactly the reference's results.

Usage: tokenizer_vs_hf_reference.py TOOL REFERENCE_JS NODE_MODULES MODEL_DIR...

The reference is @lenml/tokenizers (a JavaScript port of Hugging Face's tokenizers,
written by others) run by REFERENCE_JS (model/tokenizer_json_reference.js). For each
MODEL_DIR (holding tokenizer.json and tokenizer_config.json), runs it and TOOL
(model/tokenizer_tool) on the same inputs and requires equality of: the ids of every
text (the lines and the whole of the held-out files, awkward strings, random strings
made of vocabulary pieces); the decoded text of those ids, of random id sequences and of
random runs of byte-fallback tokens; and the streamed text (IncrementalDetokenizer) of
all of them, which must also equal the decoded text. Exits 1 on a mismatch.

A tokenizer.json in the legacy SentencePiece-style layout (normalizer Prepend "▁" +
Replace " ") is also compared in the layout that current Hugging Face exports use for
the same model (no normalizer; Metaspace pre-tokenizer with prepend_scheme "first",
split false), written to a temporary directory. ("add_prefix_space": true is kept
there: the reference ignores prepend_scheme without it; it also ignores "split", so
split=true is checked by unit tests only.)
"""
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile

HELDOUT = ["model/testdata/tokenizer_heldout.txt", "tests/data/heldout_code.txt"]

AWKWARD = [
    "", " ", "  ", "\t", "\n", "\n\n", " \n ", "\r\n", "a", " a", "a ", "  a  b  ",
    "   leading three", "trailing three   ", "tab\tinside\t", "\ttab first",
    "x" * 300, " " * 50, "\n" * 7, "Hello 世界! 🎉👍🏽 naïve café", "日本語のテキスト",
    "𝔘𝔫𝔦𝔠𝔬𝔡𝔢", "e\u0301", "\u00e9", "A\u030a", "\u212b", "\ufb01", "\u2581", "\u2581\u2581x",
    "NUL\x00byte", "\x07bell", "\ufffd", "a\u200bb", "\u3000", "\u00a0", "\u0085", "\x0b",
    "'s", "'S", "'ll", "'LL", "''", "it's", "IT'S", "x'y", "12345678", "١٢٣",
    "<s>", "</s>", "<unk>", "<0x41>", "<|begin_of_text|>", "<|eot_id|>", "<|im_start|>",
    "<|im_end|>", "<|endoftext|>", "<think>", "<|im_start|>user\nhi<|im_end|>",
    "a<|eot_id|>b", " <|eot_id|> ", "<|eot_id|><|eot_id|>", "<|im_start", "\U0010ffff",
]


def random_texts(pieces, rng, count):
    extra = [" ", "  ", "\t", "\n", "é", "世", "😀", "\u2581", "'s", "123", "\r\n"]
    texts = []
    for _ in range(count):
        parts = [rng.choice(pieces) if rng.random() < 0.7 else rng.choice(extra)
                 for _ in range(rng.randint(0, 12))]
        texts.append("".join(parts))
    return texts


def run_json(command, request, what, failures):
    run = subprocess.run(command, input=json.dumps(request).encode(), capture_output=True)
    if run.returncode != 0:
        failures.append("%s failed: %s" % (what, run.stderr.decode(errors="replace")[-2000:]))
        return None
    return json.loads(run.stdout)


def compare(tool, reference, node_modules, model_dir, texts, failures):
    rng = random.Random(model_dir)
    before = len(failures)
    # Our vocabulary and the text of single tokens, to build random inputs from.
    ours = run_json([tool, model_dir], {"texts": [], "id_sequences": []}, "tool", failures)
    if ours is None:
        return 0
    size = ours["vocab_size"]
    singles = [[i] for i in rng.sample(range(size), 3000)]
    words = run_json([tool, model_dir], {"texts": [], "id_sequences": singles}, "tool", failures)
    if words is None:
        return 0
    words = words["decoded"] + [ours["pieces"][rng.randrange(size)] for _ in range(3000)]
    texts = texts + random_texts([w for w in words if w], rng, 300)
    # Our ids of the texts, decoded back; random id sequences; runs of byte tokens.
    ours = run_json([tool, model_dir], {"texts": texts, "id_sequences": []}, "tool", failures)
    if ours is None:
        return 0
    sequences = ours["encoded"] + [[rng.randrange(size) for _ in range(rng.randint(0, 20))]
                                   for _ in range(300)]
    byte_ids = {b: i for i, b in enumerate(ours["byte_values"]) if b >= 0}
    if byte_ids:  # Whole characters, characters cut short, stray bytes.
        for _ in range(300):
            data = "".join(rng.choice(["a", "é", "中", "😀", " "]) for _ in range(4)).encode()
            cut = bytes(b for b in data if rng.random() < 0.9)
            sequences.append([byte_ids[b] for b in cut])
    request = {"texts": texts, "id_sequences": sequences}
    want = run_json(["node", reference, node_modules, model_dir], request, "reference", failures)
    got = run_json([tool, model_dir], request, "tool", failures)
    if want is None or got is None:
        return 0
    for text, w, g in zip(texts, want["encoded"], got["encoded"]):
        if w != g:
            failures.append("%s: ids of %r: reference %r, ours %r" % (model_dir, text, w, g))
    for ids, w, g, s in zip(sequences, want["decoded"], got["decoded"], got["streamed"]):
        if w != g:
            failures.append("%s: text of %r: reference %r, ours %r" % (model_dir, ids, w, g))
        if s != g:
            failures.append("%s: streamed text of %r: %r, decoded %r" % (model_dir, ids, s, g))
    status = "all equal" if len(failures) == before else "MISMATCHES"
    print("%s: %d texts, %d id sequences, vocabulary of %d: %s"
          % (model_dir, len(texts), len(sequences), size, status))
    return len(texts)


def metaspace_variant(model_dir):
    """The Metaspace layout of a legacy SentencePiece-style tokenizer.json, or None."""
    with open(os.path.join(model_dir, "tokenizer.json"), encoding="utf-8") as f:
        spec = json.load(f)
    normalizer = spec.get("normalizer") or {}
    if normalizer.get("type") != "Sequence" or spec.get("pre_tokenizer") is not None:
        return None
    spec["normalizer"] = None
    spec["pre_tokenizer"] = {"type": "Metaspace", "replacement": "\u2581",
                             "prepend_scheme": "first", "split": False,
                             "add_prefix_space": True}
    variant = tempfile.mkdtemp(prefix="metaspace_", dir=os.environ.get("TEST_TMPDIR"))
    with open(os.path.join(variant, "tokenizer.json"), "w", encoding="utf-8") as f:
        json.dump(spec, f)
    shutil.copy(os.path.join(model_dir, "tokenizer_config.json"), variant)
    return variant


def main():
    if len(sys.argv) < 5:
        sys.exit(__doc__)
    tool, reference, node_modules, model_dirs = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
    texts = list(AWKWARD)
    for path in HELDOUT:
        with open(path, encoding="utf-8", newline="") as f:
            heldout = f.read()
        texts += [heldout] + heldout.split("\n")
    variants = [v for v in map(metaspace_variant, model_dirs) if v is not None]
    failures = []
    compared = sum(compare(tool, reference, node_modules, d, texts, failures)
                   for d in model_dirs + variants)
    for variant in variants:
        shutil.rmtree(variant)
    for failure in failures[:30]:
        print("MISMATCH " + failure)
    if failures:
        sys.exit("%d mismatches" % len(failures))
    print("all equal: %d texts over %d tokenizers" % (compared, len(model_dirs) + len(variants)))


if __name__ == "__main__":
    main()
