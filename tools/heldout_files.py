#!/usr/bin/env python3
"""Prints the held-out files of the bundled models' corpus, one absolute path a line.

The same split as tools/train_models.py (a hash of each path); for bench/quality_eval.
Run with the Debian python (/usr/bin/python3): it imports train_models, which needs
numpy and torch.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import train_models  # noqa: E402


def main():
    _, heldout = train_models.read_corpus()
    for rel, _ in heldout:
        print(os.path.join(train_models.CORPUS_ROOT, rel))


if __name__ == "__main__":
    main()
