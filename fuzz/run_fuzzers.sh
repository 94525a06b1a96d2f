#!/usr/bin/env bash
# Builds the fuzz targets with clang's libFuzzer, ASan and UBSan (in their own Bazel
# output base, so the gcc build's cache is untouched) and runs each for a bounded time
# on its committed seed corpus. New inputs go to a scratch directory, never into the
# repository. Prints the executions per fuzzer; exits 1 if any fuzzer finds a crash, a
# leak, undefined behaviour or a broken invariant (the input is kept under
# $TANDEM_FUZZ_ARTIFACTS, default /tmp/tandem-fuzz-artifacts).
#   fuzz/run_fuzzers.sh [SECONDS_PER_FUZZER]      (default 20)
set -euo pipefail
cd "$(dirname "$0")/.."

seconds=${1:-20}
output_base=${TANDEM_FUZZ_OUTPUT_BASE:-$HOME/.cache/tandem-fuzz}
artifacts=${TANDEM_FUZZ_ARTIFACTS:-/tmp/tandem-fuzz-artifacts}
log() { printf '[fuzz] %s\n' "$*" >&2; }

log "building the fuzzers (clang, libFuzzer + ASan + UBSan) in $output_base"
fuzz_bazel() { bazel --output_base="$output_base" --max_idle_secs=300 "$@"; }
fuzz_bazel build --config=fuzz --noshow_progress --ui_event_filters=-info //fuzz:fuzzers
bin=$(fuzz_bazel info --config=fuzz bazel-bin 2>/dev/null)

# name  binary  corpus
targets=(
  "chat_template $bin/fuzz/chat_template_fuzzer fuzz/corpus/chat_template"
  "openai_request $bin/fuzz/openai_request_fuzzer fuzz/corpus/openai_request"
  "request_validation $bin/fuzz/request_validation_fuzzer fuzz/corpus/request_validation"
  "tokenizer $bin/fuzz/tokenizer_fuzzer fuzz/corpus/tokenizer"
  "worker_request $bin/fuzz/worker_request_fuzzer fuzz/corpus/worker_request"
  "safetensors $bin/model/safetensors_fuzzer model/testdata/safetensors_corpus"
)
mkdir -p "$artifacts"
scratch=$(mktemp -d /tmp/tandem-fuzz-XXXXXX)
trap 'rm -rf "$scratch"' EXIT
failed=0
for t in "${targets[@]}"; do
  read -r name binary corpus <<<"$t"
  mkdir -p "$scratch/$name"
  out="$scratch/$name.log"
  rc=0
  TANDEM_FUZZ_TOKENIZER=models/target \
    "$binary" "$scratch/$name" "$corpus" -max_total_time="$seconds" -print_final_stats=1 \
    -artifact_prefix="$artifacts/$name-" -rss_limit_mb=2048 -timeout=10 >"$out" 2>&1 || rc=$?
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$out")
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$out")
  units=$(sed -n 's/^stat::new_units_added: *//p' "$out")
  if [ "$rc" -ne 0 ]; then
    failed=1
    log "$name: FAILED (exit $rc); input saved under $artifacts; last lines:"
    tail -30 "$out" >&2
  else
    printf '[fuzz] %-19s %10s executions in %ss (%s/s), %s new coverage units, no findings\n' \
      "$name" "${runs:-?}" "$seconds" "${rate:-?}" "${units:-?}" >&2
  fi
done
exit $failed
