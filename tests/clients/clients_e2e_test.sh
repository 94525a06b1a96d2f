#!/usr/bin/env bash
# Tandem's clients end to end against one local cluster (`tandem up`, bundled models, tp 1,
# a bearer token; the target is a copy of models/target with a chat template added to its
# tokenizer_config.json): the OpenAI-compatible HTTP API with curl and with the official
# `openai` npm client (openai_sdk_check.js), the Python client (python_client_check.py),
# `tandem info` and `tandem generate --json` / `--chat`.
# The npm client comes from $TANDEM_NPM_DIR (./run.sh test installs third_party/npm and
# sets it); Python needs Debian's python3-grpcio. Under ./run.sh test
# (TANDEM_REQUIRE_NPM_DATA=1) a missing one fails the test; elsewhere its part is skipped
# with a message.
set -uo pipefail
ROOT=$PWD
TANDEM=$ROOT/client/tandem
TMP=${TEST_TMPDIR:-$(mktemp -d)}
PY=/usr/bin/python3
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
pass() { echo "ok: $*"; }
missing() {  # A client that is not installed: fails under ./run.sh test, else skipped.
  if [ "${TANDEM_REQUIRE_NPM_DATA:-0}" = 1 ]; then fail "$*"; else echo "SKIPPED: $*"; fi
}

# --- the cluster -----------------------------------------------------------------------
# models/target with a chat template that raises for a system message that is not first.
mkdir -p "$TMP/models/target"
for f in "$ROOT"/models/target/*; do ln -sf "$f" "$TMP/models/target/"; done
rm "$TMP/models/target/tokenizer_config.json"
$PY - "$ROOT/models/target/tokenizer_config.json" "$TMP/models/target/tokenizer_config.json" <<'PY'
import json, sys
config = json.load(open(sys.argv[1]))
config["chat_template"] = (
    "{{ bos_token }}{% for m in messages %}"
    "{% if m.role == 'system' and not loop.first %}"
    "{{ raise_exception('a system message must come first') }}{% endif %}"
    "### {{ m.role }}:\n{{ m.content }}\n{% endfor %}"
    "{% if add_generation_prompt %}### assistant:\n{% endif %}")
json.dump(config, open(sys.argv[2], "w"), indent=2)
PY
TOKEN=e2e-secret-token
printf '%s\n' "$TOKEN" >"$TMP/token"
cat >"$TMP/cluster.json" <<JSON
{"coordinator": {"args": ["--auth_token_file=$TMP/token", "--openai_max_body_bytes=65536"]}}
JSON
"$TANDEM" up --config "$TMP/cluster.json" --target "$TMP/models/target" \
  --draft "$ROOT/models/draft" --tp 1 --port 0 --openai-port 0 --ready-file "$TMP/ready" \
  --log-dir "$TMP/logs" --startup-timeout 120 >"$TMP/up.out" 2>&1 &
UP=$!
trap 'kill -TERM $UP 2>/dev/null; wait $UP 2>/dev/null' EXIT
waited=0
until [ -s "$TMP/ready" ]; do
  kill -0 $UP 2>/dev/null || { echo "FAIL: tandem up exited:"; cat "$TMP/up.out"; exit 1; }
  [ $waited -ge 1200 ] && { echo "FAIL: not ready after 120 s"; cat "$TMP/up.out"; exit 1; }
  sleep 0.1; waited=$((waited + 1))
done
SERVER=$(head -n 1 "$TMP/ready")
OPENAI=http://$(sed -n 's/^openai=//p' "$TMP/ready")
METRICS=http://$(sed -n 's/^metrics=//p' "$TMP/ready")/metrics
pass "cluster ready after $((waited / 10)) s: grpc $SERVER, $OPENAI"

# --- curl ------------------------------------------------------------------------------
AUTH=(-H "Authorization: Bearer $TOKEN")
status() { curl -s -o "$TMP/body" -w '%{http_code}' "$@"; }
error_shape() {  # $1 = expected HTTP status; the body must be {"error": {message,type,param,code}}
  $PY -c 'import json,sys; e=json.load(open(sys.argv[1]))["error"]; assert set(e)=={"message","type","param","code"}, e' "$TMP/body"
}
check_error() {  # $1 name, $2 expected status, then curl args
  local name=$1 want=$2; shift 2
  local got; got=$(status "$@")
  if [ "$got" = "$want" ] && error_shape; then pass "$name: $got $(head -c 160 "$TMP/body")"
  else fail "$name: status $got (want $want): $(head -c 300 "$TMP/body")"; fi
}
[ "$(status "$OPENAI/health")" = 200 ] && pass "/health open" || fail "/health: $(cat "$TMP/body")"
check_error "no token" 401 "$OPENAI/v1/models"
[ "$(status "${AUTH[@]}" "$OPENAI/v1/models")" = 200 ] && grep -q '"id":"target"' "$TMP/body" \
  && pass "/v1/models" || fail "/v1/models: $(cat "$TMP/body")"
post() { curl -s "${AUTH[@]}" -H 'Content-Type: application/json' "$OPENAI/v1/completions" -d "$1"; }
GREEDY='"model": "target", "prompt": "def add(a, b):\n", "max_tokens": 12, "temperature": 0'
post "{$GREEDY}" >"$TMP/whole.json"
post "{$GREEDY, \"stream\": true, \"stream_options\": {\"include_usage\": true}}" >"$TMP/stream.txt"
$PY - "$TMP/whole.json" "$TMP/stream.txt" <<'PY' && pass "curl: whole == streamed (SSE, usage, [DONE])" || fail "curl whole/stream"
import json, sys
whole = json.load(open(sys.argv[1]))
events = [l[6:] for l in open(sys.argv[2]).read().split("\n") if l.startswith("data: ")]
assert events[-1] == "[DONE]", events[-1]
usage = json.loads(events[-2])["usage"]
text = "".join(json.loads(e)["choices"][0]["text"] for e in events[:-2])
assert text == whole["choices"][0]["text"] and text, (text, whole)
assert usage["completion_tokens"] == whole["usage"]["completion_tokens"] == 12, usage
assert "acceptance_rate" in usage["tandem"] and "mean_accepted_length" in usage["tandem"]
PY
JSONH=(-H 'Content-Type: application/json')
check_error "malformed JSON" 400 "${AUTH[@]}" "${JSONH[@]}" "$OPENAI/v1/completions" -d '{"model": "target", "prompt":'
check_error "wrong type" 400 "${AUTH[@]}" "${JSONH[@]}" "$OPENAI/v1/completions" -d '{"model": "target", "prompt": "x", "stream": "yes"}'
check_error "unknown role" 400 "${AUTH[@]}" "${JSONH[@]}" "$OPENAI/v1/chat/completions" -d '{"model": "target", "messages": [{"role": "wizard", "content": "x"}]}'
check_error "template raises" 400 "${AUTH[@]}" "${JSONH[@]}" "$OPENAI/v1/chat/completions" -d '{"model": "target", "messages": [{"role": "user", "content": "x"}, {"role": "system", "content": "y"}]}'
# Chat: rendered by the template; greedy, the same text as the rendered prompt completed.
CHAT='"model": "target", "max_tokens": 12, "temperature": 0, "messages": [{"role": "system", "content": "Write Python."}, {"role": "user", "content": "def add(a, b):"}]'
curl -s "${AUTH[@]}" "${JSONH[@]}" "$OPENAI/v1/chat/completions" -d "{$CHAT}" >"$TMP/chat.json"
curl -s "${AUTH[@]}" "${JSONH[@]}" "$OPENAI/v1/chat/completions" -d "{$CHAT, \"stream\": true}" >"$TMP/chat.txt"
post '{"model": "target", "max_tokens": 12, "temperature": 0, "prompt": "### system:\nWrite Python.\n### user:\ndef add(a, b):\n### assistant:\n"}' >"$TMP/rendered.json"
$PY - "$TMP/chat.json" "$TMP/chat.txt" "$TMP/rendered.json" <<'PY' && pass "chat: whole == streamed == the rendered prompt's completion" || fail "chat: $(cat "$TMP/chat.json")"
import json, sys
chat = json.load(open(sys.argv[1]))
assert chat["object"] == "chat.completion", chat
content = chat["choices"][0]["message"]["content"]
events = [json.loads(l[6:]) for l in open(sys.argv[2]).read().split("\n")
          if l.startswith("data: ") and l != "data: [DONE]"]
assert events[0]["choices"][0]["delta"]["role"] == "assistant", events[0]
streamed = "".join(e["choices"][0]["delta"].get("content", "") for e in events)
rendered = json.load(open(sys.argv[3]))
assert content and content == streamed == rendered["choices"][0]["text"], (content, streamed, rendered)
assert chat["usage"]["prompt_tokens"] == rendered["usage"]["prompt_tokens"], (chat, rendered)
PY
head -c 100000 /dev/zero | tr '\0' ' ' >"$TMP/big.json"
check_error "oversize body" 413 "${AUTH[@]}" "${JSONH[@]}" "$OPENAI/v1/completions" --data-binary @"$TMP/big.json"
check_error "unknown model" 404 "${AUTH[@]}" "${JSONH[@]}" "$OPENAI/v1/completions" -d '{"model": "gpt-4", "prompt": "x"}'
# A client that hangs up mid-stream: its request is cancelled (nothing left running) and
# the workers' KV blocks are released (the coordinator refreshes them from the workers).
# The client reads the first 3000 bytes (about a dozen events) and hangs up: curl exits
# on its next write (a time limit raced a fast greedy generation that finished first).
curl -s -N --max-time 20 "${AUTH[@]}" "${JSONH[@]}" "$OPENAI/v1/completions" \
  -d '{"model": "target", "prompt": "import os\n", "max_tokens": 4000, "ignore_eos": true, "stream": true}' |
  head -c 3000 >"$TMP/cut.txt" || true
busy=1
for _ in $(seq 100); do
  busy=$(curl -s "$METRICS" | sed -n -e 's/^tandem_running_sequences \([0-9.e+]*\)$/\1/p' \
    -e 's/^tandem_kv_blocks_used{worker="[a-z]*"} \([0-9.e+]*\)$/\1/p' | grep -vc '^0$')
  [ "$busy" = 0 ] && break; sleep 0.1
done
[ "$(grep -c '^data: ' "$TMP/cut.txt")" -gt 1 ] && ! grep -q '\[DONE\]' "$TMP/cut.txt" \
  || fail "the stream was not cut mid-generation: $(tail -c 200 "$TMP/cut.txt")"
[ "$busy" = 0 ] && pass "curl disconnect cancels the request (running 0, KV blocks 0)" \
  || fail "after disconnect: $(curl -s "$METRICS" | grep -E '^tandem_(running|kv_blocks_used)')"
# Without "temperature": the bundled models' generation_config.json ("do_sample": false)
# makes it greedy, the same text as the explicit temperature 0.
post '{"model": "target", "prompt": "def add(a, b):\n", "max_tokens": 12}' >"$TMP/again.json"
cmp -s <($PY -c 'import json,sys; print(json.load(open(sys.argv[1]))["choices"][0]["text"])' "$TMP/whole.json") \
       <($PY -c 'import json,sys; print(json.load(open(sys.argv[1]))["choices"][0]["text"])' "$TMP/again.json") \
  && pass "still serving after bad requests; omitted temperature = the model's greedy default" \
  || fail "after bad requests: $(cat "$TMP/again.json")"

# --- the openai npm client ---------------------------------------------------------------
if [ -n "${TANDEM_NPM_DIR:-}" ] && [ -d "${TANDEM_NPM_DIR}/openai" ] && command -v node >/dev/null; then
  node "$ROOT/tests/clients/openai_sdk_check.js" "$TANDEM_NPM_DIR" "$OPENAI/v1" "$METRICS" "$TOKEN" target \
    && pass "openai npm client" || fail "openai npm client"
else
  missing "the openai npm client: TANDEM_NPM_DIR='${TANDEM_NPM_DIR:-}' has no openai (./run.sh test installs third_party/npm and sets it)"
fi

# --- tandem info, tandem generate --json ------------------------------------------------
"$TANDEM" info --server "$SERVER" --token-file "$TMP/token" --json >"$TMP/info.json" 2>&1 \
  && $PY -c 'import json,sys; i=json.load(open(sys.argv[1])); assert i["stop_token_ids"] == [2] and i["eos_token_id"] == 2 and i["default_sampling"]["temperature"] == 0, i' "$TMP/info.json" \
  && pass "tandem info: stop ids [2], greedy defaults" || fail "tandem info: $(cat "$TMP/info.json")"
"$TANDEM" generate --server "$SERVER" --token-file "$TMP/token" --max-tokens 10 --json \
  $'def add(a, b):\n' >"$TMP/gen.json" 2>"$TMP/gen.err" || fail "generate --json: $(cat "$TMP/gen.err")"
"$TANDEM" generate --server "$SERVER" --token-file "$TMP/token" --max-tokens 10 --quiet \
  $'def add(a, b):\n' >"$TMP/gen.txt" 2>&1 || fail "generate: $(cat "$TMP/gen.txt")"
"$TANDEM" generate --server "$SERVER" --token-file "$TMP/token" --max-tokens 12 --json --chat \
  --system "Write Python." "def add(a, b):" >"$TMP/gen_chat.json" 2>"$TMP/gen_chat.err" \
  || fail "generate --chat: $(cat "$TMP/gen_chat.err")"
$PY -c 'import json,sys; a=json.load(open(sys.argv[1])); b=json.load(open(sys.argv[2])); assert a["text"] == b["choices"][0]["message"]["content"], (a, b)' \
  "$TMP/gen_chat.json" "$TMP/chat.json" && pass "generate --chat --system: the API's chat text" \
  || fail "generate --chat: $(cat "$TMP/gen_chat.json")"
$PY - "$TMP/gen.json" "$TMP/gen.txt" <<'PY' && pass "generate --json: text, token ids, logprobs, stats" || fail "generate --json: $(cat "$TMP/gen.json")"
import json, sys
r = json.load(open(sys.argv[1]))
n = r["stats"]["generated_tokens"]
assert n == 10 and len(r["token_ids"]) == n and len(r["logprobs"]) == n, r
assert all(lp <= 0 for lp in r["logprobs"]) and r["finish_reason"] == "length", r
assert r["text"].rstrip("\n") == open(sys.argv[2]).read().rstrip("\n"), (r["text"], open(sys.argv[2]).read())
PY

# --- the Python client ---------------------------------------------------------------------
if $PY -c 'import grpc, google.protobuf' 2>/dev/null; then
  PYTHONPATH="$ROOT/client/python/pkg" $PY "$ROOT/tests/clients/python_client_check.py" "$SERVER" "$TOKEN" \
    && pass "python client" || fail "python client"
else
  missing "python3-grpcio is not installed (run.sh PACKAGES has it)"
fi

[ $failures -eq 0 ] && echo "PASSED" || echo "FAILED: $failures check(s)"
exit $((failures > 0))
