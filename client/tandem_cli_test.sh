#!/usr/bin/env bash
# The `tandem` CLI as a user runs it, against a fake server (no models): help texts,
# dashed and underscore flags, usage errors, streamed generate with stats on stderr, info,
# bench with table, cost-model table, --repeat rounds, --aa-control, --rules, --seed, JSON,
# output check (greedy and seeded coupled), plot, and soak.
set -uo pipefail
TANDEM=client/tandem
FAKE=client/fake_tandem_server
TMP=${TEST_TMPDIR:-$(mktemp -d)}
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
pass() { echo "ok: $*"; }

# --- help and usage errors -------------------------------------------------------
"$TANDEM" --help >"$TMP/help" && grep -q "generate" "$TMP/help" && grep -q "bench" "$TMP/help" \
  && pass "tandem --help lists commands" || fail "tandem --help"
for cmd in generate up bench quantize synth health info; do
  "$TANDEM" "$cmd" --help >"$TMP/help.$cmd" 2>&1 && grep -q "^Usage: tandem $cmd" "$TMP/help.$cmd" \
    && pass "tandem $cmd --help" || fail "tandem $cmd --help: $(head -3 "$TMP/help.$cmd")"
done
grep -q -- "--max-tokens=N" "$TMP/help.generate" && pass "help shows dashed flags" \
  || fail "help lacks --max-tokens"
grep -q -- "--ready-file=PATH" "$TMP/help.up" && pass "up help shows --ready-file" || fail "up help"
"$TANDEM" generate --concurrency=3 x 2>"$TMP/err"; rc=$?
[ $rc -eq 2 ] && grep -q "unknown flag '--concurrency=3'" "$TMP/err" \
  && pass "a flag of another command is rejected" || fail "unknown flag: rc=$rc $(cat "$TMP/err")"
"$TANDEM" quantize only-one-dir 2>"$TMP/err"; rc=$?
[ $rc -eq 2 ] && grep -q "give IN_DIR and OUT_DIR" "$TMP/err" \
  && pass "quantize needs two directories" || fail "quantize usage: rc=$rc $(cat "$TMP/err")"
"$TANDEM" quantize "$TMP/no-model" "$TMP/q8" 2>"$TMP/err"; rc=$?
[ $rc -eq 1 ] && grep -q "^tandem quantize: .*no-model" "$TMP/err" \
  && pass "quantize of a missing model fails with one line" || fail "quantize: rc=$rc $(cat "$TMP/err")"
"$TANDEM" quantize --format=q5_0 "$TMP/no-model" "$TMP/q5" 2>"$TMP/err"; rc=$?
[ $rc -eq 2 ] && grep -q "unknown --format=q5_0 (q8_0 or q4_0)" "$TMP/err" \
  && pass "quantize names its formats" || fail "quantize --format: rc=$rc $(cat "$TMP/err")"
"$TANDEM" frobnicate 2>/dev/null; [ $? -eq 2 ] && pass "unknown command exits 2" || fail "unknown command"
"$TANDEM" up --dry-run --tp 2 --cpu-affinity --draft-cpus 0 --target-cpus 1 --port 0 \
  --coordinator-bin /bin/true --worker-bin /bin/true --log-dir "$TMP/logs" >"$TMP/plan" 2>&1
grep -q "taskset -c 1 /bin/true --role=target --rank=1 --tp_size=2" "$TMP/plan" \
  && grep -q "taskset -c 0 /bin/true --role=draft" "$TMP/plan" \
  && pass "up --dry-run plans pinned ranks" || fail "up --dry-run: $(cat "$TMP/plan")"
"$TANDEM" synth 2>"$TMP/err"; rc=$?
[ $rc -eq 2 ] && grep -q "give one OUT_DIR" "$TMP/err" \
  && pass "synth needs an output directory" || fail "synth usage: rc=$rc $(cat "$TMP/err")"
"$TANDEM" synth --format q3 "$TMP/s" 2>"$TMP/err"; rc=$?
[ $rc -eq 2 ] && grep -q "unknown weight format \"q3\"" "$TMP/err" \
  && pass "synth rejects an unknown format" || fail "synth --format: rc=$rc $(cat "$TMP/err")"
"$TANDEM" synth --shape gpt-2 "$TMP/s" 2>"$TMP/err"; rc=$?
[ $rc -eq 1 ] && [ "$(wc -l <"$TMP/err")" -eq 1 ] && grep -q "^tandem synth: .*unknown model 'gpt-2'" "$TMP/err" \
  && [ ! -e "$TMP/s" ] && pass "synth of an unknown shape fails with one line" \
  || fail "synth --shape: rc=$rc $(cat "$TMP/err")"
"$TANDEM" synth --shape tiny --format q8_0 --seed 3 "$TMP/s" >"$TMP/out" 2>&1 \
  && grep -q "synthetic tiny (random weights, NOT A MODEL), 2 layers" "$TMP/out" \
  && [ -s "$TMP/s/model.safetensors" ] && grep -q '"vocab_size": 256' "$TMP/s/config.json" \
  && pass "synth writes a tiny model directory" || fail "synth: $(cat "$TMP/out")"
"$TANDEM" synth --shape tiny "$TMP/s" 2>"$TMP/err"; rc=$?
[ $rc -eq 1 ] && grep -q "already holds a model" "$TMP/err" \
  && pass "synth does not overwrite a model" || fail "synth overwrite: rc=$rc $(cat "$TMP/err")"

# --- against the fake server -------------------------------------------------------
"$FAKE" "$TMP/addr" 2 &
FAKE_PID=$!
trap 'kill $FAKE_PID 2>/dev/null; wait $FAKE_PID 2>/dev/null' EXIT
for _ in $(seq 100); do [ -s "$TMP/addr" ] && break; sleep 0.1; done
ADDR=$(cat "$TMP/addr")

"$TANDEM" generate --server "$ADDR" --max-tokens 3 --method draft hello >"$TMP/out" 2>"$TMP/stats"
rc=$?
[ $rc -eq 0 ] && [ "$(cat "$TMP/out")" = "hello#0 hello#1 hello#2 " ] \
  && pass "generate streams the text to stdout" || fail "generate rc=$rc out=$(cat "$TMP/out")"
grep -q "method=draft" "$TMP/stats" && grep -q "acceptance=50.0% (3/6)" "$TMP/stats" \
  && grep -q "tok/s=" "$TMP/stats" && pass "generate prints stats to stderr" \
  || fail "stats: $(cat "$TMP/stats")"
echo "piped" | "$TANDEM" generate --server="$ADDR" --max_tokens=1 --quiet - >"$TMP/out" 2>"$TMP/stats"
grep -q "^piped" "$TMP/out" && [ ! -s "$TMP/stats" ] && pass "prompt from stdin, --quiet" \
  || fail "stdin prompt: $(cat "$TMP/out") / $(cat "$TMP/stats")"
"$TANDEM" generate --server "$ADDR" --max-tokens 2 --accept coupled --seed 5 --temperature 0.7 \
  --quiet hi >"$TMP/out" 2>&1 && grep -q "^hi" "$TMP/out" \
  && "$TANDEM" generate --server "$ADDR" --accept strict hi >/dev/null 2>"$TMP/err"; rc=$?
[ $rc -eq 2 ] && grep -q "coupled)" "$TMP/err" && pass "generate --accept coupled" \
  || fail "accept coupled: rc=$rc $(cat "$TMP/out" "$TMP/err")"
"$TANDEM" generate --server "$ADDR" fail >/dev/null 2>"$TMP/err"; rc=$?
[ $rc -eq 1 ] && grep -q "INVALID_ARGUMENT: fake: bad prompt" "$TMP/err" \
  && pass "server errors are reported" || fail "error: rc=$rc $(cat "$TMP/err")"
"$TANDEM" generate --server 127.0.0.1:1 x >/dev/null 2>"$TMP/err"; rc=$?
[ $rc -eq 1 ] && grep -q "tandem up" "$TMP/err" && pass "unreachable server hint" \
  || fail "unreachable: $(cat "$TMP/err")"
"$TANDEM" health --server "$ADDR" >"$TMP/out" 2>&1 && grep -q "$ADDR: SERVING" "$TMP/out" \
  && pass "health: a serving server exits 0" || fail "health: $(cat "$TMP/out")"
"$TANDEM" health --server 127.0.0.1:1 >/dev/null 2>"$TMP/err"; rc=$?
[ $rc -eq 1 ] && grep -q "^tandem health: 127.0.0.1:1: " "$TMP/err" \
  && pass "health: nothing listening exits 1 with the reason" || fail "health: rc=$rc $(cat "$TMP/err")"
"$TANDEM" health --server "$ADDR" extra >/dev/null 2>&1; rc=$?
[ $rc -eq 2 ] && pass "health: an argument is a usage error" || fail "health extra arg: rc=$rc"
"$TANDEM" info --server "$ADDR" >"$TMP/out" 2>&1 && grep -q "^target     fake-target" "$TMP/out" \
  && grep -q "stop ids \[2, 7\]" "$TMP/out" && grep -q "temperature 0.7, top_p 0.9, top_k 40" "$TMP/out" \
  && pass "info: models, stop ids and sampling defaults" || fail "info: $(cat "$TMP/out")"
"$TANDEM" info --server "$ADDR" --json >"$TMP/out" 2>&1 \
  && grep -q '"stop_token_ids":\[2,7\]' "$TMP/out" && pass "info --json" || fail "info --json: $(cat "$TMP/out")"
"$TANDEM" info --server 127.0.0.1:1 --timeout 5 >/dev/null 2>"$TMP/err"; rc=$?
[ $rc -eq 1 ] && grep -q "^tandem info: UNAVAILABLE" "$TMP/err" \
  && pass "info: an unreachable server exits 1" || fail "info: rc=$rc $(cat "$TMP/err")"

printf '{"prompt": "alpha"}\n{"prompt": "beta"}\n"gamma"\n' >"$TMP/prompts.jsonl"
"$TANDEM" bench --server "$ADDR" --prompts "$TMP/prompts.jsonl" --concurrency 1,3 --requests 6 \
  --methods none,draft,prompt_lookup --pipelining on,off --max-tokens 4 --out "$TMP/r.json" \
  --plot "$TMP/r.png" >"$TMP/table" 2>"$TMP/bench.err"
rc=$?
[ $rc -eq 0 ] && pass "bench exits 0" || fail "bench rc=$rc: $(cat "$TMP/bench.err")"
grep -q "Output check: all .* identical" "$TMP/table" && pass "bench output check" \
  || fail "output check: $(cat "$TMP/table")"
sed '/^Cost model/,$d' "$TMP/table" >"$TMP/results_table"
[ "$(grep -c '^draft ' "$TMP/results_table")" = 4 ] \
  && [ "$(grep -c '^none ' "$TMP/results_table")" = 2 ] \
  && pass "bench table rows (none once per concurrency)" || fail "rows: $(cat "$TMP/table")"
sed -n '/^Cost model/,$p' "$TMP/table" >"$TMP/cost_table"
[ "$(grep -c '^draft ' "$TMP/cost_table")" = 4 ] && ! grep -q '^none ' "$TMP/cost_table" \
  && pass "bench cost-model table (speculative rows only)" || fail "cost: $(cat "$TMP/table")"
/usr/bin/python3 - "$TMP/r.json" <<'PY' && pass "bench JSON fields" || fail "bench JSON"
import json, sys
r = json.load(open(sys.argv[1]))
assert r["command_line"][1] == "bench", r["command_line"]
assert r["machine"]["online_cpus"] >= 1
assert r["server"]["model_info"]["target"]["name"] == "fake-target"
assert len(r["results"]) == 10, len(r["results"])
for row in r["results"]:
    for key in ("method", "pipelining", "concurrency", "throughput_tok_s", "requests_per_s",
                "ttft_ms", "tpot_ms", "acceptance_rate", "mean_accepted_length",
                "speedup_vs_none", "draft_busy", "target_busy", "errors"):
        assert key in row, key
    assert row["ok"] == 6 and row["generated_tokens"] == 24, row
    assert row["ttft_ms"]["p50"] > 0 and row["tpot_ms"]["p99"] >= row["tpot_ms"]["p50"]
draft = [x for x in r["results"] if x["method"] == "draft"]
assert all(abs(x["acceptance_rate"] - 0.5) < 1e-9 for x in draft)
assert all(abs(x["mean_accepted_length"] - 2.0) < 1e-9 for x in draft)
# 10 configurations x 6 requests, less the 3 baseline outputs themselves.
assert r["output_check"]["ok"] and r["output_check"]["compared"] == 57, r["output_check"]
PY
if /usr/bin/python3 -c "import matplotlib" 2>/dev/null; then
  [ -s "$TMP/r.png" ] && head -c 4 "$TMP/r.png" | grep -q PNG && pass "bench plot is a PNG" \
    || fail "plot missing: $(cat "$TMP/bench.err")"
else
  echo "skip: python3-matplotlib not installed, plot not checked"
fi

"$TANDEM" bench --server "$ADDR" --prompts "$TMP/prompts.jsonl" --requests 3 --repeat 3 \
  --methods none,draft --max-tokens 4 --out "$TMP/rep.json" >"$TMP/table" 2>"$TMP/bench.err"
rc=$?
[ $rc -eq 0 ] && grep -q "3 interleaved rounds" "$TMP/table" \
  && grep -q "round 3 of 3" "$TMP/bench.err" && pass "bench --repeat" \
  || fail "repeat rc=$rc: $(cat "$TMP/table" "$TMP/bench.err")"
/usr/bin/python3 - "$TMP/rep.json" <<'PY' && pass "bench --repeat JSON" || fail "repeat JSON"
import json, statistics, sys
r = json.load(open(sys.argv[1]))
assert r["settings"]["repeat"] == 3
assert len(r["results"]) == 2, r["results"]
for row in r["results"]:
    assert row["rounds"] == 3 and row["requests"] == 9 and row["ok"] == 9, row
    assert [x["round"] for x in row["repeats"]] == [0, 1, 2], row["repeats"]
    assert all(x["requests"] == 3 for x in row["repeats"])
draft = r["results"][1]
ratios = [x["speedup_vs_none"] for x in draft["repeats"]]
assert abs(draft["speedup_vs_none"] - statistics.median(ratios)) < 1e-12, draft
assert draft["spread"]["/speedup_vs_none"]["min"] == min(ratios)
PY

"$TANDEM" bench --server "$ADDR" --prompts "$TMP/prompts.jsonl" --requests 3 --repeat 3 \
  --methods none,draft --max-tokens 4 --warmup 0 --aa-control --out "$TMP/aa.json" \
  >"$TMP/table" 2>"$TMP/bench.err"; rc=$?
[ $rc -eq 0 ] && grep -q "^none (A/A) " "$TMP/table" && grep -q "vs A/A" "$TMP/table" \
  && grep -q "Output check: all 24 outputs identical" "$TMP/table" \
  && /usr/bin/python3 -c "
import json, sys
r = json.load(open(sys.argv[1]))
assert r['settings']['aa_control'] is True
rows = [(x['label'], x['aa_control'], x['rounds']) for x in r['results']]
assert rows == [('none', False, 3), ('none (A/A)', True, 3), ('draft', False, 3)], rows
control, draft = r['results'][1], r['results'][2]
assert all(y['aa_control'] for y in control['repeats'])
assert all(y['speedup_vs_none'] > 0 for y in control['repeats'])
v = draft['vs_aa_control']
assert v['verdict'] in ('faster', 'slower', 'within noise'), v
assert v['rounds'] == [3, 3] and abs(v['false_verdict_chance'] - 0.1) < 1e-12, v
assert 'vs_aa_control' not in r['results'][0] and 'vs_aa_control' not in control
" "$TMP/aa.json" && pass "bench --aa-control: control row, verdict, JSON, output check" \
  || fail "aa-control: rc=$rc $(cat "$TMP/table" "$TMP/bench.err")"
"$TANDEM" bench --server "$ADDR" --prompts "$TMP/prompts.jsonl" --methods draft --aa-control \
  >"$TMP/table" 2>"$TMP/bench.err"; rc=$?
[ $rc -eq 2 ] && grep -q "aa-control needs .none. in --methods" "$TMP/bench.err" \
  && pass "bench --aa-control without none: usage error" \
  || fail "aa-control without none: rc=$rc $(cat "$TMP/bench.err")"

"$TANDEM" bench --server "$ADDR" --prompts "$TMP/prompts.jsonl" --requests 3 --methods none,draft \
  --rules rejection,coupled --repeat 2 --seed 7 --temperature 0.8 --max-tokens 2 --warmup 0 \
  --out "$TMP/rules.json" >"$TMP/table" 2>"$TMP/bench.err"; rc=$?
[ $rc -eq 0 ] && grep -q "2 interleaved rounds" "$TMP/table" \
  && grep -q "round 2 of 2" "$TMP/bench.err" \
  && grep -q "Output check: all 9 outputs identical" "$TMP/table" \
  && /usr/bin/python3 -c "
import json, sys
r = json.load(open(sys.argv[1]))
rows = [(x['method'], x['rule'], x['rounds'], x['ok']) for x in r['results']]
assert rows == [('none', 'rejection', 2, 6), ('none', 'coupled', 2, 6),
                ('draft', 'rejection', 2, 6), ('draft', 'coupled', 2, 6)], rows
assert r['settings']['seed'] == 7 and r['settings']['repeat'] == 2
assert all(y['rule'] == x['rule'] for x in r['results'] for y in x['repeats'])
assert r['output_check']['compared'] == 9 and r['output_check']['ok']
" "$TMP/rules.json" \
  && pass "bench --rules --repeat --seed: rules interleaved, coupled output check" \
  || fail "rules: rc=$rc $(cat "$TMP/table" "$TMP/bench.err")"

printf 'fine\nwill diverge\n' >"$TMP/diverge.txt"
"$TANDEM" bench --server "$ADDR" --prompts "$TMP/diverge.txt" --requests 2 --methods none,draft \
  --max-tokens 2 --warmup 0 >"$TMP/table" 2>&1; rc=$?
[ $rc -eq 1 ] && grep -q "Output check: FAILED, 1 of 2" "$TMP/table" \
  && grep -q "draft rule=default pipelining=default c=1 prompt 1" "$TMP/table" \
  && pass "bench detects a lossy server" || fail "divergence: rc=$rc $(cat "$TMP/table")"

"$TANDEM" bench --server "$ADDR" --prompts "$TMP/prompts.jsonl" --soak 1s --concurrency 2 \
  --methods draft --max-tokens 2 --pids "$FAKE_PID" --out "$TMP/soak.json" >"$TMP/soak" 2>&1; rc=$?
[ $rc -eq 0 ] && grep -q "requests served" "$TMP/soak" && pass "soak runs" \
  || fail "soak rc=$rc: $(cat "$TMP/soak")"
/usr/bin/python3 - "$TMP/soak.json" "$FAKE_PID" <<'PY' && pass "soak JSON" || fail "soak JSON"
import json, sys
s = json.load(open(sys.argv[1]))["soak"]
assert s["requests_served"] > 5 and s["requests_failed"] == 0, s
assert s["rss"][sys.argv[2]]["max_kib"] > 0, s["rss"]
assert s["duration_s"] >= 1.0
PY

echo "$failures failed"
[ $failures -eq 0 ]
