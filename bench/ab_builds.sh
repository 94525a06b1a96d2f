#!/bin/bash
# Interleaved A/B of two Tandem builds end to end: starts one `tandem up` cluster per build
# (tp 4, --cpu-affinity, both pinned alike; the idle one waits; TP=1 in the environment: tp 1
# unpinned, the grids' tp-1 layout), then runs ROUNDS rounds of
# `tandem bench` (the client of build B) against A and B in ABBA order (A B, B A, A B, ...),
# so a drift in machine load falls on both sides alike (with each side's --metrics, for the
# cost terms). bench/ab_summary.py prints the
# median of the per-round B/A throughput ratios per configuration.
#
#   bench/ab_builds.sh A_BIN_DIR B_BIN_DIR ROUNDS OUT_DIR [tandem bench flags...]
#   bench/ab_summary.py OUT_DIR
# A *_BIN_DIR holds tandem, tandem-coordinator and tandem-worker (copies of bazel-bin/...).
# Default bench flags: --requests 12 --max-tokens 64 --methods none,draft,prompt_lookup
# --concurrency 1,4.
# Two configurations of one build: the same BIN_DIR twice, and A_CONFIG / B_CONFIG naming a
# `tandem up --config` file per side, e.g. {"coordinator":{"args":["--draft_tree_nodes=32"]},
# "target":{"args":["--max_speculative_tokens=32"]},"draft":{...}} against chains.
set -u
if [ $# -lt 4 ]; then sed -n 2,15p "$0"; exit 2; fi
A=$1 B=$2 ROUNDS=$3 OUT=$4
shift 4
FLAGS=("$@")
[ ${#FLAGS[@]} -eq 0 ] && FLAGS=(--requests 12 --max-tokens 64 --methods none,draft,prompt_lookup --concurrency 1,4)
mkdir -p "$OUT"
start() {  # BIN_DIR SIDE CONFIG
  local config=()
  [ -n "$3" ] && config=(--config "$3")
  local layout=(--tp 4 --cpu-affinity)
  [ "${TP:-4}" = 1 ] && layout=(--tp 1)
  "$1/tandem" up "${config[@]}" "${layout[@]}" --port 0 --metrics-port 0 \
    --coordinator-bin "$1/tandem-coordinator" --worker-bin "$1/tandem-worker" \
    --ready-file "$OUT/$2.ready" --log-dir "$OUT/$2-logs" > "$OUT/$2.up.log" 2>&1 &
  echo $! > "$OUT/$2.pid"
}
stop() { kill -TERM "$(cat "$OUT/a.pid")" "$(cat "$OUT/b.pid")" 2>/dev/null; wait; }
trap stop EXIT
start "$A" a "${A_CONFIG:-}"
start "$B" b "${B_CONFIG:-}"
for _ in $(seq 120); do [ -s "$OUT/a.ready" ] && [ -s "$OUT/b.ready" ] && break; sleep 1; done
[ -s "$OUT/a.ready" ] && [ -s "$OUT/b.ready" ] || { echo "a cluster did not start: $OUT/*.up.log"; exit 1; }
for r in $(seq "$ROUNDS"); do
  order="a b"; [ $((r % 2)) = 0 ] && order="b a"
  for side in $order; do
    metrics=$(grep '^metrics=' "$OUT/$side.ready" | cut -d= -f2)
    "$B/tandem" bench --server "$(head -1 "$OUT/$side.ready")" ${metrics:+--metrics "$metrics"} "${FLAGS[@]}" \
      --out "$OUT/$side.r$r.json" > "$OUT/$side.r$r.txt" 2>&1 || echo "round $r $side: bench failed"
  done
  echo "round $r of $ROUNDS done"
done
