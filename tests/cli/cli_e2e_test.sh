#!/usr/bin/env bash
# End-to-end test of the tandem CLI with the bundled models (see BUILD).
set -uo pipefail
ROOT=$PWD
TANDEM=$ROOT/client/tandem
COORDINATOR=$ROOT/coordinator/tandem-coordinator
WORKER=$ROOT/worker/tandem-worker
TARGET=${CLI_E2E_TARGET:-$ROOT/models/target}  # Overridable for trying other models.
DRAFT=${CLI_E2E_DRAFT:-$ROOT/models/draft}
TMP=${TEST_TMPDIR:-$(mktemp -d)}
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
pass() { echo "ok: $*"; }

for m in "$TARGET" "$DRAFT"; do
  [ -f "$m/config.json" ] || { echo "FAIL: bundled model $m is missing"; exit 1; }
done

# --- tandem up ----------------------------------------------------------------------
UP_FLAGS=(--target "$TARGET" --draft "$DRAFT" --tp 2 --port 0 --ready-file "$TMP/ready"
          --log-dir "$TMP/logs" --startup-timeout 150)
[ "$(nproc)" -ge 2 ] && UP_FLAGS+=(--cpu-affinity)
"$TANDEM" up "${UP_FLAGS[@]}" >"$TMP/up.out" 2>&1 &
UP=$!
trap 'kill -TERM $UP 2>/dev/null; wait $UP 2>/dev/null' EXIT
waited=0
until [ -s "$TMP/ready" ]; do
  if ! kill -0 $UP 2>/dev/null; then
    echo "FAIL: tandem up exited before becoming ready:"; cat "$TMP/up.out"; exit 1
  fi
  [ $waited -ge 1500 ] && { echo "FAIL: not ready after 150 s"; cat "$TMP/up.out"; exit 1; }
  sleep 0.1; waited=$((waited + 1))
done
SERVER=$(head -n 1 "$TMP/ready")
METRICS=$(sed -n 's/^metrics=//p' "$TMP/ready")
PIDS=$(sed -n 's/^pids=//p' "$TMP/ready" | tr ',' ' ')
[ "$(echo $PIDS | wc -w)" = 4 ] && pass "up is ready on $SERVER after $((waited / 10)) s (4 processes)" \
  || fail "ready file: $(cat "$TMP/ready")"
for pid in $PIDS; do
  [ "$(ps -o ppid= -p "$pid" | tr -d ' ')" = "$UP" ] || fail "pid $pid is not a child of up"
done
grep -q "Tandem is serving on $SERVER" "$TMP/up.out" && pass "up prints the endpoint" \
  || fail "endpoint not printed: $(cat "$TMP/up.out")"

# --- tandem generate: none vs draft, greedy -----------------------------------------
for prompt in $'def fibonacci(n):\n' $'import os\n\ndef list_files(path):\n'; do
  "$TANDEM" generate --server "$SERVER" --max-tokens 32 --method none "$prompt" \
    >"$TMP/none.txt" 2>"$TMP/none.err" || fail "generate none: $(cat "$TMP/none.err")"
  "$TANDEM" generate --server "$SERVER" --max-tokens 32 --method draft --temperature 0 "$prompt" \
    >"$TMP/draft.txt" 2>"$TMP/draft.err" || fail "generate draft: $(cat "$TMP/draft.err")"
  if [ -s "$TMP/none.txt" ] && cmp -s "$TMP/none.txt" "$TMP/draft.txt"; then
    pass "greedy draft text == none text ($(wc -c <"$TMP/none.txt") bytes)"
  else
    fail "texts differ:"; diff "$TMP/none.txt" "$TMP/draft.txt" | head -10
  fi
  grep -q "method=draft tokens=32" "$TMP/draft.err" && grep -q "acceptance=" "$TMP/draft.err" \
    && pass "draft stats: $(cat "$TMP/draft.err")" || fail "draft stats: $(cat "$TMP/draft.err")"
done

# --- tandem bench ---------------------------------------------------------------------
printf '%s\n' '{"prompt": "def add(a, b):\n"}' '{"prompt": "for i in range(10):\n"}' \
  '{"prompt": "class Point:\n    def __init__(self, x, y):\n"}' >"$TMP/prompts.jsonl"
"$TANDEM" bench --server "$SERVER" --metrics "$METRICS" --prompts "$TMP/prompts.jsonl" \
  --requests 4 --chunks 2 --concurrency 1,2 --methods none,draft --max-tokens 16 --warmup 0 \
  --out "$TMP/bench.json" >"$TMP/bench.out" 2>"$TMP/bench.err"
rc=$?
[ $rc -eq 0 ] && pass "bench exits 0" || fail "bench rc=$rc: $(cat "$TMP/bench.out" "$TMP/bench.err")"
cat "$TMP/bench.out"
/usr/bin/python3 - "$TMP/bench.json" <<'PY' && pass "bench JSON has the expected fields" || fail "bench JSON"
import json, sys
r = json.load(open(sys.argv[1]))
assert r["command_line"][1] == "bench"
assert r["server"]["model_info"]["target"]["tensor_parallel_size"] == 2, r["server"]
assert len(r["results"]) == 4, len(r["results"])
assert r["settings"]["chunks"] == 2, r["settings"]
for row in r["results"]:
    for key in ("method", "pipelining", "concurrency", "throughput_tok_s", "requests_per_s",
                "ttft_ms", "tpot_ms", "acceptance_rate", "mean_accepted_length",
                "speedup_vs_none", "draft_busy", "target_busy"):
        assert key in row, key
    # Two chunks of 2 requests make one row of 4 (prompts 0, 1, 2, 0).
    assert row["ok"] == 4 and row["throughput_tok_s"] > 0, row
    assert row["target_busy"] is not None, "metrics were given: busy fractions expected"
draft = [x for x in r["results"] if x["method"] == "draft"]
# The speculation controller may turn the draft off for a whole row (then no proposal was
# verified and the acceptance rate is null); otherwise it is a rate.
for x in draft:
    a = x["acceptance_rate"]
    assert x["speculation_off_share"] is not None, x
    assert (a is not None and 0 <= a <= 1) or (a is None and x["speculation_off_share"] > 0.5), x
assert r["output_check"]["ok"], r["output_check"]
PY

# --- shutdown: SIGTERM, no orphans ----------------------------------------------------
kill -TERM $UP
for _ in $(seq 600); do kill -0 $UP 2>/dev/null || break; sleep 0.1; done
if kill -0 $UP 2>/dev/null; then
  fail "up still running 60 s after SIGTERM"; kill -KILL $UP
fi
wait $UP; rc=$?
trap - EXIT
[ $rc -eq 0 ] && pass "up exits 0 on SIGTERM" || fail "up exit code $rc: $(tail -5 "$TMP/up.out")"
orphans=""
for pid in $PIDS; do
  if kill -0 "$pid" 2>/dev/null && [ "$(ps -o stat= -p "$pid" | cut -c1)" != Z ]; then
    orphans="$orphans $pid($(ps -o comm= -p "$pid"))"
  fi
done
[ -z "$orphans" ] && pass "no orphan processes" || fail "orphans left:$orphans"
pgrep -f "run_id=up-$UP-" >/dev/null && fail "a target rank of this run is still alive"
[ ! -e "$TMP/ready" ] && pass "ready file removed" || fail "ready file still there"

# --- multi-host emulation ---------------------------------------------------------------
MULTINODE=$ROOT/tests/cli/multinode.sh
if "$MULTINODE" --check-only 2>/dev/null; then
  "$MULTINODE" --tp 2 --target "$TARGET" --draft "$DRAFT" --tandem "$TANDEM" \
    --coordinator-bin "$COORDINATOR" --worker-bin "$WORKER" --netswitch-bin "$ROOT/bench/netswitch" \
    --prompts "$TMP/prompts.jsonl" --requests 2 --concurrency 1 --max-tokens 8 --timeout 120 \
    >"$TMP/mn.out" 2>&1
  rc=$?
  cat "$TMP/mn.out"
  [ $rc -eq 0 ] && grep -q "Output check: all" "$TMP/mn.out" && pass "multinode emulation" \
    || fail "multinode rc=$rc"
  # The links delay: netem or the userspace switch (which then reports what it forwarded).
  if grep -q "userspace switch" "$TMP/mn.out"; then
    grep -q "netswitch: [1-9][0-9]* packets in" "$TMP/mn.out" && pass "multinode links: userspace switch" \
      || fail "multinode: no netswitch statistics"
  elif grep -q "netem delay" "$TMP/mn.out"; then
    pass "multinode links: netem"
  else
    echo "note: multinode links had no delay here (no netem, no TAP switch)"
  fi
  ip netns list | grep -q "^tmn" && fail "network namespaces left behind: $(ip netns list)"
else
  echo "skip: network namespaces are not available here (needs root and ip netns); multinode part not run"
fi

echo "$failures failed"
[ $failures -eq 0 ]
