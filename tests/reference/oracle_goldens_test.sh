#!/usr/bin/env bash
# Recomputes the committed golden logits with the reference oracle.
# Runs from a Bazel runfiles tree (working directory = workspace root there)
# or from a source checkout.
set -euo pipefail
export OMP_WAIT_POLICY=PASSIVE
export OMP_NUM_THREADS="${OMP_NUM_THREADS:-2}"
export TANDEM_TORCH_THREADS="${TANDEM_TORCH_THREADS:-2}"
script="tests/reference/check_goldens.py"
if [[ ! -f "$script" ]]; then
  script="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/check_goldens.py"
fi
exec /usr/bin/python3 "$script"
