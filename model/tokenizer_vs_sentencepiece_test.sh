#!/bin/bash
# Compares the native tokenizer with SentencePiece itself (Debian's
# python3-sentencepiece) on the test models and, when present, the bundled ones.
# Usage: tokenizer_vs_sentencepiece_test.sh TOOL SCRIPT
set -euo pipefail
tool=$1
script=$2
models=(model/test_tokenizers/bpe_*.model)
for bundled in models/target/tokenizer.model models/draft/tokenizer.model; do
  if [[ -f $bundled ]]; then
    models+=("$bundled")
  else
    echo "note: $bundled is not present; comparing the test models only"
  fi
done
exec /usr/bin/python3 "$script" "$tool" "${models[@]}"
