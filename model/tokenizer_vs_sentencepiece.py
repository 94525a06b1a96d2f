#!/usr/bin/python3
"""Checks that the native tokenizer gives exactly SentencePiece's results.

Usage: tokenizer_vs_sentencepiece.py TOOL MODEL...

For each MODEL, runs SentencePiece (Debian's python3-sentencepiece) and TOOL
(model/tokenizer_tool) on the same inputs and requires equality of: the vocabulary
(pieces, control and byte pieces, BOS/EOS ids); the ids of every text (the lines and
the whole of tests/data/heldout_code.txt, the texts of tests/data/tokenizer_cases.json,
awkward strings, random strings); the decoded text of those ids; the decoded and the
streamed text of random id sequences. For models/target/tokenizer.model it also
checks the committed ids of tests/data/tokenizer_cases.json. Exits 1 on a mismatch.
"""
import json
import random
import subprocess
import sys

import sentencepiece as spm

HELDOUT = "tests/data/heldout_code.txt"
CASES = "tests/data/tokenizer_cases.json"
BUNDLED = "models/target/tokenizer.model"
SPACE = "\u2581"

AWKWARD = [
    "", " ", "  ", "\t", "\n", "\n\n", " \n ", "\r\n", "a", " a", "a ", "  a  b  ",
    "   leading three", "trailing three   ", "tab\tinside\t", "\ttab first",
    "mixed \t \n  whitespace", "x" * 200, " " * 50, "Hello 世界! 🎉👍🏽 naïve café",
    "日本語のテキスト", "𝔘𝔫𝔦𝔠𝔬𝔡𝔢", "Ελληνικά русский עברית", "emoji 😀😀😀 run",
    "\u2581", "\u2581\u2581", "a\u2581b", " \u2581 ", "\u2581leading", "trailing\u2581",
    "<s>", "</s>", "<unk>", "<s> hello </s>", "<0x41>", "<0x0A>\n", "<pad>",
    "<tool> self.x == retu @@", "<tool><tool>", "self.self.", "retur",
    "NUL\x00byte", "\x07bell", "\ufffd", "\ufeffbom", "a\u200bb",
    "def f(x):\n    return x + 1\n", "    indented", "\u3000ideographic space",
    "12345 67890 3.14159", "éééé", "e\u0301", "\U0010ffff", "\u00a0nbsp",
]


def random_texts(sp, rng, count):
    pieces = [sp.id_to_piece(i) for i in range(sp.get_piece_size())
              if not (sp.is_control(i) or sp.is_unknown(i) or sp.is_byte(i))]
    extra = [" ", "  ", "\t", "\n", "é", "世", "😀", "\u2581", "<s>", "<0x41>", "\x00"]
    texts = []
    for _ in range(count):
        parts = []
        for _ in range(rng.randint(0, 12)):
            if rng.random() < 0.75:
                piece = rng.choice(pieces)
                parts.append(piece.replace(SPACE, " ") if rng.random() < 0.8 else piece)
            else:
                parts.append(rng.choice(extra))
        texts.append("".join(parts))
    return texts


def random_id_sequences(sp, rng, count):
    size = sp.get_piece_size()
    byte_ids = [i for i in range(size) if sp.is_byte(i)]
    special = [i for i in range(size) if sp.is_control(i) or sp.is_unknown(i)]
    spaced = [i for i in range(size) if sp.id_to_piece(i).startswith(SPACE)]
    euro = [sp.piece_to_id("<0x%02X>" % b) for b in b"\xe2\x82\xac"] if byte_ids else []
    sequences = []
    for _ in range(count):
        ids = []
        for _ in range(rng.randint(0, 20)):
            kind = rng.randrange(6)
            if kind == 0 and byte_ids:
                ids.append(rng.choice(byte_ids))
            elif kind == 1 and spaced:
                ids.append(rng.choice(spaced))
            elif kind == 2:
                ids.append(rng.choice(special))
            elif kind == 3 and euro:
                ids.extend(euro)
            else:
                ids.append(rng.randrange(size))
        sequences.append(ids)
    return sequences


def byte_value(sp, i):
    return int(sp.id_to_piece(i)[3:5], 16) if sp.is_byte(i) else -1


def compare(tool, model, texts, failures):
    sp = spm.SentencePieceProcessor(model_file=model)
    rng = random.Random(model)
    texts = texts + random_texts(sp, rng, 400)
    encoded = [sp.encode(t) for t in texts]
    sequences = random_id_sequences(sp, rng, 400)
    sequences += [[sp.bos_id()] + ids + [sp.eos_id()] for ids in encoded[:50]
                  if sp.bos_id() >= 0 and sp.eos_id() >= 0]
    request = json.dumps({"texts": texts, "id_sequences": sequences})
    run = subprocess.run([tool, model], input=request.encode(), capture_output=True)
    if run.returncode != 0:
        failures.append("%s: tool failed: %s" % (model, run.stderr.decode(errors="replace")))
        return 0
    ours = json.loads(run.stdout)
    size = sp.get_piece_size()
    expected = {
        "vocab_size": size,
        "bos_id": sp.bos_id(),
        "eos_id": sp.eos_id(),
        "pieces": [sp.id_to_piece(i) for i in range(size)],
        "control": [sp.is_control(i) for i in range(size)],
        "byte_values": [byte_value(sp, i) for i in range(size)],
        "encoded": encoded,
        "round_trip": [sp.decode(ids) for ids in encoded],
        "decoded": [sp.decode(ids) for ids in sequences],
    }
    expected["streamed"] = expected["decoded"]
    inputs = {"encoded": texts, "round_trip": texts, "decoded": sequences,
              "streamed": sequences}
    before = len(failures)
    for key, value in expected.items():
        if key not in inputs:
            if ours.get(key) != value:
                failures.append("%s: %s differs" % (model, key))
            continue
        for i, (want, got) in enumerate(zip(value, ours[key])):
            if want != got:
                failures.append("%s: %s of %r: SentencePiece %r, ours %r"
                                % (model, key, inputs[key][i], want, got))
        if len(ours[key]) != len(value):
            failures.append("%s: %s has %d results for %d inputs"
                            % (model, key, len(ours[key]), len(value)))
    if model == BUNDLED:
        # The serving tokenizer must give back every text (SentencePiece itself maps
        # a literal "▁" to a space, so those texts are exempt).
        for text, decoded in zip(texts, ours["round_trip"]):
            if SPACE not in text and decoded != text:
                failures.append("%s: %r decodes to %r" % (model, text, decoded))
    status = "all equal" if len(failures) == before else "MISMATCHES"
    round_trips = sum(1 for t, d in zip(texts, expected["round_trip"]) if t == d)
    print("%s: %d texts (%d decode back to themselves), %d id sequences, vocabulary "
          "of %d: %s" % (model, len(texts), round_trips, len(sequences), size, status))
    return len(texts)


def check_cases(tool, failures):
    with open(CASES, encoding="utf-8") as f:
        cases = json.load(f)
    texts = [c["text"] for c in cases["cases"]]
    request = json.dumps({"texts": texts, "id_sequences": []})
    run = subprocess.run([tool, BUNDLED], input=request.encode(), capture_output=True)
    if run.returncode != 0:
        failures.append("%s: tool failed: %s" % (BUNDLED, run.stderr.decode()))
        return
    ours = json.loads(run.stdout)
    for case, ids in zip(cases["cases"], ours["encoded"]):
        if ids != case["ids"]:
            failures.append("%s: committed ids of %r: %r, ours %r"
                            % (CASES, case["text"], case["ids"], ids))
    print("%s: %d committed cases checked" % (CASES, len(texts)))


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    tool, models = sys.argv[1], sys.argv[2:]
    with open(HELDOUT, encoding="utf-8") as f:
        heldout = f.read()
    with open(CASES, encoding="utf-8") as f:
        case_texts = [c["text"] for c in json.load(f)["cases"]]
    texts = AWKWARD + case_texts + [heldout] + heldout.split("\n")
    failures = []
    compared = sum(compare(tool, model, texts, failures) for model in models)
    if BUNDLED in models:
        check_cases(tool, failures)
    for failure in failures[:20]:
        print("MISMATCH " + failure)
    if failures:
        sys.exit("%d mismatches" % len(failures))
    print("all equal: %d texts over %d models" % (compared, len(models)))


if __name__ == "__main__":
    main()
