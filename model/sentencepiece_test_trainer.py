#!/usr/bin/python3
"""Trains the small SentencePiece models that the tokenizer tests load.

Usage: sentencepiece_test_trainer.py OUT_DIR

Writes into OUT_DIR (each from the same deterministic prose-and-code corpus, with
Debian's python3-sentencepiece):
  bpe_dummy_prefix.model       BPE, byte fallback, identity normalisation,
                               add_dummy_prefix, extra whitespace kept (Llama-2 style)
  bpe_no_dummy_prefix.model    as above without the dummy prefix, whitespace-only
                               pieces and split digits (the bundled models' settings)
  bpe_extra_whitespaces.model  BPE without byte fallback (unknown characters become
                               <unk>), remove_extra_whitespaces, user-defined and
                               extra control symbols
  bpe_unused.model             bpe_dummy_prefix with some merged pieces marked UNUSED
  unigram.model                a unigram model (unsupported)
  nfkc.model                   BPE with the nmt_nfkc normaliser (unsupported)
"""
import os
import random
import sys

import sentencepiece as spm

WORDS = [
    "the", "model", "token", "draft", "target", "verify", "accept", "reject", "cache",
    "batch", "stream", "server", "request", "def", "return", "import", "class", "self",
    "value", "index", "for", "in", "range", "if", "else", "print", "café", "naïve",
    "über", "x", "y", "0", "1", "42", "2024", "(", ")", ":", "=", "+", ",", ".", "<", ">",
    "\t", "#", "\"\"\"",
]

COMMON = dict(
    vocab_size=400,
    character_coverage=1.0,
    hard_vocab_limit=False,
    normalization_rule_name="identity",
    num_threads=1,
    minloglevel=2,
    shuffle_input_sentence=False,
)


def corpus():
    rng = random.Random(7)
    lines = []
    for line in range(1200):
        text = "    " if line % 3 == 0 else ""
        words = [rng.choice(WORDS) for _ in range(rng.randint(3, 12))]
        for i, word in enumerate(words):
            if i > 0:
                text += "  " if rng.random() < 0.09 else " "
            text += word
        lines.append(text)
    return "\n".join(lines) + "\n"


def train(out_dir, name, corpus_path, **options):
    prefix = os.path.join(out_dir, name)
    spm.SentencePieceTrainer.train(input=corpus_path, model_prefix=prefix,
                                   **dict(COMMON, **options))
    os.remove(prefix + ".vocab")
    return prefix + ".model"


def varint(value):
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def read_varint(data, pos):
    value = shift = 0
    while True:
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if byte < 0x80:
            return value, pos


def fields(data):
    """(field number, wire type, raw field bytes) of a serialized message."""
    pos = 0
    while pos < len(data):
        start = pos
        key, pos = read_varint(data, pos)
        wire = key & 7
        if wire == 0:
            _, pos = read_varint(data, pos)
        elif wire == 1:
            pos += 8
        elif wire == 2:
            length, pos = read_varint(data, pos)
            pos += length
        elif wire == 5:
            pos += 4
        else:
            raise ValueError("unexpected wire type %d" % wire)
        yield key >> 3, wire, data[start:pos]


def mark_unused(source, destination):
    """Marks every fifth multi-character NORMAL piece UNUSED by rewriting the
    ModelProto's pieces (field 1: SentencePiece{piece = 1, type = 3}, UNUSED = 5)."""
    with open(source, "rb") as f:
        data = f.read()
    out = bytearray()
    multi_char = 0
    for number, _, raw in fields(data):
        if number == 1:
            _, body_start = read_varint(raw, 0)
            _, body_start = read_varint(raw, body_start)
            body = raw[body_start:]
            piece, piece_type = b"", 1
            for n, _, r in fields(body):
                if n == 1:
                    piece = r[2:]  # Pieces are shorter than 128 bytes.
                elif n == 3:
                    piece_type = r[1]
            if piece_type == 1 and len(piece.decode("utf-8")) > 1:
                multi_char += 1
                if multi_char % 5 == 0:
                    body = b"".join(r for n, _, r in fields(body) if n != 3)
                    body += varint(3 << 3) + varint(5)
                    raw = varint(1 << 3 | 2) + varint(len(body)) + body
        out += raw
    with open(destination, "wb") as f:
        f.write(bytes(out))


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    out_dir = sys.argv[1]
    os.makedirs(out_dir, exist_ok=True)
    corpus_path = os.path.join(out_dir, "corpus.txt")
    with open(corpus_path, "w", encoding="utf-8") as f:
        f.write(corpus())
    bpe = dict(model_type="bpe", byte_fallback=True, remove_extra_whitespaces=False)
    dummy = train(out_dir, "bpe_dummy_prefix", corpus_path, add_dummy_prefix=True, **bpe)
    train(out_dir, "bpe_no_dummy_prefix", corpus_path, add_dummy_prefix=False,
          allow_whitespace_only_pieces=True, split_digits=True, **bpe)
    train(out_dir, "bpe_extra_whitespaces", corpus_path, model_type="bpe",
          byte_fallback=False, remove_extra_whitespaces=True, add_dummy_prefix=True,
          character_coverage=0.9995,
          user_defined_symbols=["<tool>", "@@", "self.", "==", "retu"],
          control_symbols=["<ctl>"])
    mark_unused(dummy, os.path.join(out_dir, "bpe_unused.model"))
    train(out_dir, "unigram", corpus_path, model_type="unigram", byte_fallback=True)
    train(out_dir, "nfkc", corpus_path, model_type="bpe",
          normalization_rule_name="nmt_nfkc")
    os.remove(corpus_path)


if __name__ == "__main__":
    main()
