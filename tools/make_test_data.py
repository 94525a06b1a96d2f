#!/usr/bin/python3
"""Write the test and benchmark data derived from the held-out corpus split.

    /usr/bin/python3 tools/make_test_data.py

Outputs (deterministic; the corpus and split are the ones tools/train_models.py
uses, the tokenizer is models/target/tokenizer.model):
  tests/data/heldout_code.txt        whole held-out Python files, concatenated
  tests/data/tokenizer_cases.json    texts with their SentencePiece ids/pieces
  bench/prompts/code_completion.jsonl  code-completion prompts cut mid-function
"""

import argparse
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
import train_models  # noqa: E402

HELDOUT_FILES = ["fractions.py", "code.py", "shelve.py", "chunk.py"]
N_PROMPTS = 40
MIN_CHARS, MAX_CHARS = 100, 600

TOKENIZER_TEXTS = [
    "def add(a, b):\n    return a + b\n",
    "import os\nimport sys\n\n\nclass Foo(object):\n    \"\"\"Docstring.\"\"\"\n\n    def __init__(self, x=1):\n        self.x = x\n",
    "",
    "x",
    " leading space",
    "trailing spaces   ",
    "\n\n\n",
    "\tindented with a tab\n",
    "windows line end\r\n",
    "numbers 12345 and 3.14159e-10",
    "unicode: h\u00e9llo \u2603 \u4e2d\u6587 \U0001F600",
    "some_very_long_identifier_name_that_is_unusual = SomeOtherName.attribute",
    "if x:\n        y = {'k': [1, 2, 3]}  # comment\n",
    "NUL\x00byte and bell\x07",
]


def heldout_docs():
    _, held = train_models.read_corpus()
    return dict(held)


def write_heldout_code(held, path):
    text = "".join(held[name] for name in HELDOUT_FILES)
    with open(path, "w", encoding="utf-8", newline="") as f:
        f.write(text)
    return text


def tokenizer_cases(sp, heldout_text):
    texts = list(TOKENIZER_TEXTS)
    # a slice of real held-out code (cut at line boundaries)
    lines = heldout_text.split("\n")
    texts.append("\n".join(lines[40:80]) + "\n")
    cases = []
    for t in texts:
        ids = sp.encode(t)
        assert sp.decode(ids) == t, repr(t)
        cases.append({"text": t, "ids": ids, "pieces": [sp.id_to_piece(i) for i in ids]})
    return {
        "tokenizer": "models/target/tokenizer.model",
        "notes": ("ids are SentencePieceProcessor.encode(text) without BOS/EOS; "
                  "decode(ids) == text exactly; add_dummy_prefix=false, identity "
                  "normalisation, byte fallback (newline is <0x0A>)."),
        "bos_id": sp.bos_id(), "eos_id": sp.eos_id(), "unk_id": sp.unk_id(),
        "pad_id": sp.pad_id(), "vocab_size": sp.get_piece_size(),
        "cases": cases,
    }


def function_prompts(held):
    """Candidate prompts: a def line plus some body lines, ending with '\\n'
    while at least two more lines of the same function follow."""
    cands = []
    for name in sorted(held):
        lines = held[name].split("\n")
        for i, line in enumerate(lines):
            stripped = line.lstrip(" ")
            if not stripped.startswith("def ") or not line.rstrip().endswith(":"):
                continue
            indent = len(line) - len(stripped)
            # body: following lines that are blank or indented deeper
            j = i + 1
            while j < len(lines) and (not lines[j].strip() or
                                      len(lines[j]) - len(lines[j].lstrip(" ")) > indent):
                j += 1
            body = lines[i + 1:j]
            while body and not body[-1].strip():
                body.pop()
            if len(body) < 5:
                continue
            # longest cut within MAX_CHARS that leaves >= 2 body lines and
            # ends after a non-blank line
            best = None
            for k in range(1, len(body) - 1):
                if not body[k - 1].strip():
                    continue
                text = "\n".join([line] + body[:k]) + "\n"
                if len(text) > MAX_CHARS:
                    break
                best = text
            if best and len(best) >= MIN_CHARS:
                cands.append((name, i + 1, best))
    return cands


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tokenizer", default=os.path.join(ROOT, "models", "target", "tokenizer.model"))
    args = ap.parse_args()
    import sentencepiece as spm
    sp = spm.SentencePieceProcessor(model_file=args.tokenizer)

    held = heldout_docs()
    os.makedirs(os.path.join(ROOT, "tests", "data"), exist_ok=True)
    text = write_heldout_code(held, os.path.join(ROOT, "tests", "data", "heldout_code.txt"))
    assert sp.decode(sp.encode(text)) == text
    print("heldout_code.txt: %d bytes, %d tokens" % (len(text.encode()), len(sp.encode(text))))

    cases = tokenizer_cases(sp, text)
    with open(os.path.join(ROOT, "tests", "data", "tokenizer_cases.json"), "w") as f:
        json.dump(cases, f, indent=1, ensure_ascii=True)
        f.write("\n")
    print("tokenizer_cases.json: %d cases" % len(cases["cases"]))

    cands = function_prompts(held)
    step = len(cands) / N_PROMPTS
    chosen = [cands[int(i * step)] for i in range(N_PROMPTS)]
    os.makedirs(os.path.join(ROOT, "bench", "prompts"), exist_ok=True)
    with open(os.path.join(ROOT, "bench", "prompts", "code_completion.jsonl"), "w") as f:
        for n, (name, line_no, prompt) in enumerate(chosen):
            rec = {"id": "heldout-%02d" % n, "source": "%s:%d" % (name, line_no),
                   "prompt": prompt}
            f.write(json.dumps(rec, ensure_ascii=True) + "\n")
    lens = [len(p) for _, _, p in chosen]
    print("code_completion.jsonl: %d prompts from %d candidates, %d-%d chars"
          % (len(chosen), len(cands), min(lens), max(lens)))


if __name__ == "__main__":
    main()
