#!/usr/bin/env bash
# GPU check of Tandem's CUDA backend on one machine with an NVIDIA GPU (target: H200,
# under 8 minutes):
#   1. checks the machine (GPU visible, nvcc, bazel and the Debian packages of run.sh;
#      installs missing packages when run as root and apt can reach a mirror);
#   2. builds with --config=cuda (nvcc -arch=sm_90 unless TANDEM_CUDA_ARCH is set);
#   3. runs the GPU tests (every CUDA kernel and the whole model against the CPU
#      backend, the backend factory, the NCCL communicator); a test that reports
#      "SKIPPED: no CUDA device" counts as a failure here;
#   4. runs bench/gpu_bench: a Llama-2-70B tensor-parallel rank (0 of 4) decode and
#      verify (K+1 = 2..8) times with achieved HBM bandwidth vs 4.8 TB/s, the 7B draft
#      step, c, nu(K) and the modelled speedups at acceptance 0.6/0.7/0.8 (synthetic
#      weights, not a model);
#   5. writes gpu_check.json and summary.txt (plus gpu_bench.json/.txt, test logs and
#      the build log) to $OUT if set, else ./gpu_check_out.
#
# Usage: tools/gpu_check.sh [--dry-run] [--cpu-plumbing] [--bundle FILE] [--out DIR]
#   --dry-run       print the steps and the commands, run nothing
#   --cpu-plumbing  run every step without a GPU (default build, tests skip, the
#                   benchmark on the CPU backend with tiny models): checks the script
#   --bundle FILE   a GPU machine without Bazel or Debian packages: skip the build and
#                   run the binaries of FILE (made by tools/gpu_bundle.sh from the same
#                   commit on a machine with nvcc); the CUDA libraries come from the
#                   machine (/usr/local/cuda, or the NVIDIA Python wheels)
#   --out DIR       output folder (overrides $OUT)
# Exit status: 0 when every step passed; 1 when a step failed (see summary.txt);
# 2 for bad usage or a machine that cannot run the check (missing GPU/tools/packages).
set -uo pipefail

CALLER_DIR=$PWD
cd "$(dirname "$0")/.." || exit 2
REPO=$(pwd)

DRY_RUN=0
CPU_PLUMBING=0
BUNDLE=""
OUT_DIR=${OUT:-$REPO/gpu_check_out}
while [ $# -gt 0 ]; do
  case "$1" in
    --dry-run) DRY_RUN=1 ;;
    --cpu-plumbing) CPU_PLUMBING=1 ;;
    --bundle) shift; BUNDLE=${1:?--bundle needs a file} ;;
    --bundle=*) BUNDLE=${1#--bundle=} ;;
    --out) shift; OUT_DIR=${1:?--out needs a directory} ;;
    --out=*) OUT_DIR=${1#--out=} ;;
    -h|--help) sed -n '2,28p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "gpu_check: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
  shift
done

START=$(date +%s)
DEADLINE=$((START + 470))  # Leaves margin under 8 minutes.
CUDA_ROOT=${CUDA_PATH:-/usr/local/cuda}

log() { printf '[gpu_check %3ds] %s\n' "$(($(date +%s) - START))" "$*" >&2; }
die() { log "FATAL: $*"; exit 2; }
remaining() { echo $((DEADLINE - $(date +%s))); }
# Seconds for a step: its cap, or what is left of the overall budget if less.
budget() { local left; left=$(remaining); [ "$left" -lt "$1" ] && echo "$left" || echo "$1"; }

if [ "$CPU_PLUMBING" -eq 1 ]; then
  BAZEL_CONFIG=()
  TESTS=(//kernels/cuda/... //kernels:backend_factory_test)
  BENCH_ARGS=(--backend=cpu --target=tiny:0/2 --draft=tiny --context=32 --max_k=7
              --min_seconds=0.05 --threads=1)
else
  BAZEL_CONFIG=(--config=cuda)
  TESTS=(//kernels/cuda/... //kernels:backend_factory_test //comm:nccl_communicator_test)
  BENCH_ARGS=(--backend=cuda --target=llama-2-70b:0/4 --draft=llama-2-7b --context=1024
              --max_k=7 --gemm=both --min_seconds=0.5)
fi
BUILD_TARGETS=(//bench:gpu_bench "${TESTS[@]}")

# Debian packages: run.sh's list without the Python/PyTorch tooling (not needed here).
packages() {
  sed -n '/^PACKAGES=(/,/^)/p' "$REPO/run.sh" | sed '1d;$d' | tr ' ' '\n' |
    grep -v -E '^(|python3.*|libopenblas.*)$'
}

[ -n "$BUNDLE" ] && [ "${BUNDLE#/}" = "$BUNDLE" ] && BUNDLE=$CALLER_DIR/$BUNDLE

if [ "$DRY_RUN" -eq 1 ]; then
  echo "gpu_check dry run (nothing is executed); output folder: $OUT_DIR"
  echo "1. machine: nvidia-smi -L (a GPU), $CUDA_ROOT/bin/nvcc, bazel; Debian packages:"
  echo "   $(packages | tr '\n' ' ')"
  echo "   (missing ones: apt-get install -y --no-install-recommends ... when root)"
  echo "2. build ($(budget 240)s): bazel build ${BAZEL_CONFIG[*]} ${BUILD_TARGETS[*]}"
  echo "3. tests (<=150s): bazel test ${BAZEL_CONFIG[*]} --test_output=errors ${TESTS[*]}"
  echo "   then: no test log may contain 'SKIPPED: no CUDA device'; logs -> $OUT_DIR/test_logs"
  echo "4. bench (the rest of the 470s budget): bazel-bin/bench/gpu_bench ${BENCH_ARGS[*]} --out_dir=$OUT_DIR"
  echo "5. summary: $OUT_DIR/gpu_check.json, $OUT_DIR/summary.txt"
  [ -n "$BUNDLE" ] && echo "--bundle $BUNDLE: no packages, bazel or build; step 3 runs its binaries"
  exit 0
fi

mkdir -p "$OUT_DIR" || die "cannot create output folder $OUT_DIR"
OUT_DIR=$(cd "$OUT_DIR" && pwd)

# ---- 1. machine ------------------------------------------------------------------
DEVICE="none (cpu plumbing run)"
if [ "$CPU_PLUMBING" -eq 0 ]; then
  command -v nvidia-smi >/dev/null || die "nvidia-smi not found: no NVIDIA driver on this machine"
  DEVICE=$(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>&1 | head -1)
  nvidia-smi -L >/dev/null 2>&1 || die "nvidia-smi sees no GPU: $DEVICE"
  if [ -z "$BUNDLE" ]; then
    [ -x "$CUDA_ROOT/bin/nvcc" ] || die "nvcc not found at $CUDA_ROOT/bin/nvcc (set CUDA_PATH)"
    log "GPU: $DEVICE; $("$CUDA_ROOT/bin/nvcc" --version | tail -1)"
  else
    log "GPU: $DEVICE"
  fi
fi
if [ -n "$BUNDLE" ]; then
  [ -f "$BUNDLE" ] || die "bundle $BUNDLE not found (make it with tools/gpu_bundle.sh)"
else
  missing=()
  while read -r p; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' ||
      missing+=("$p")
  done < <(packages)
  if [ ${#missing[@]} -gt 0 ]; then
    [ "$(id -u)" -eq 0 ] || die "missing Debian packages (run as root to install): ${missing[*]}"
    log "installing ${#missing[@]} Debian packages: ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    if ! apt-get install -y -qq --no-install-recommends "${missing[@]}" \
        >"$OUT_DIR/apt.log" 2>&1; then
      apt-get update -qq >>"$OUT_DIR/apt.log" 2>&1
      apt-get install -y -qq --no-install-recommends "${missing[@]}" >>"$OUT_DIR/apt.log" 2>&1 ||
        die "apt-get could not install ${missing[*]} (no mirror reachable?); see $OUT_DIR/apt.log"
    fi
  fi
  command -v bazel >/dev/null || die "bazel not found (Debian package bazel-bootstrap)"
fi

# ---- 2. build --------------------------------------------------------------------
BUILD_STATUS=failed
BENCH_BIN=bazel-bin/bench/gpu_bench
if [ -n "$BUNDLE" ]; then
  # Unpacks the bundle and adds the folders of the CUDA libraries its binaries miss.
  BUNDLE_DIR=$(mktemp -d)
  if tar -C "$BUNDLE_DIR" -xJf "$BUNDLE"; then
    BUNDLE_DIR=$BUNDLE_DIR/gpu_bundle
    BENCH_BIN=$BUNDLE_DIR/bin/gpu_bench
    export LD_LIBRARY_PATH=$BUNDLE_DIR/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
    for lib in $(ldd "$BUNDLE_DIR"/bin/* 2>/dev/null | awk '/not found/ { print $1 }' | sort -u); do
      found=$(find "$CUDA_ROOT"/ /usr/local/cuda*/ /opt /usr/lib -name "$lib" 2>/dev/null | head -1)
      [ -n "$found" ] && LD_LIBRARY_PATH=$LD_LIBRARY_PATH:$(dirname "$found")
      log "library $lib: ${found:-NOT FOUND}"
    done
    log "bundle built from commit $(cat "$BUNDLE_DIR/COMMIT"); $(wc -l <"$BUNDLE_DIR/TESTS") tests"
    ldd "$BUNDLE_DIR"/bin/* | grep -q 'not found' || BUILD_STATUS=passed
    ldd "$BUNDLE_DIR"/bin/* >"$OUT_DIR/build.log" 2>&1
  else
    log "cannot unpack $BUNDLE"
  fi
else
  log "building ${BUILD_TARGETS[*]} ${BAZEL_CONFIG[*]} (log: $OUT_DIR/build.log)"
  if timeout "$(budget 240)" bazel build "${BAZEL_CONFIG[@]}" "${BUILD_TARGETS[@]}" \
      >"$OUT_DIR/build.log" 2>&1; then
    BUILD_STATUS=passed
  else
    log "BUILD FAILED (exit $?); last lines:"
    tail -20 "$OUT_DIR/build.log" >&2
  fi
fi

# ---- 3. tests --------------------------------------------------------------------
# N of gtest's "[  $1  ] N tests" summary line in log $2, 0 when absent.
gtest_count() {
  local n
  n=$(grep -oE "^\[  $1 *\] [0-9]+ test" "$2" | grep -oE '[0-9]+' | head -1)
  echo "${n:-0}"
}

# "<log>: passed P, skipped S, failed F" per copied gtest log.
test_counts() {
  local f
  for f in "$OUT_DIR"/test_logs/*.log; do
    [ -e "$f" ] || continue
    if ! grep -q '^\[==========\] .* ran\.' "$f"; then
      echo "$(basename "$f" .log): no gtest summary (crashed or timed out)"
      continue
    fi
    echo "$(basename "$f" .log): passed $(gtest_count PASSED "$f"), skipped $(gtest_count SKIPPED "$f"), failed $(gtest_count FAILED "$f")"
  done
}

# Copies the logs of the test targets that exist now (not stale ones of removed tests).
copy_test_logs() {
  local query label path
  query="tests($(IFS=+; echo "${TESTS[*]}"))"
  while read -r label; do
    path=${label#//}
    path=${path/://}
    [ -e "bazel-testlogs/$path/test.log" ] &&
      cp "bazel-testlogs/$path/test.log" "$OUT_DIR/test_logs/${path//\//_}.log"
  done < <(bazel query --noshow_progress --ui_event_filters=-info "$query" 2>/dev/null)
}

# Runs the bundle's test binaries one by one from the repository root (they read the
# models there), each log named as bazel-testlogs would name it; 1 if any failed.
run_bundled_tests() {
  local label path rc=0
  while read -r label; do
    path=${label#//}
    path=${path/://}
    timeout "$(budget 120)" "$BUNDLE_DIR/bin/$(basename "$path")" \
      >"$OUT_DIR/test_logs/${path//\//_}.log" 2>&1 || { rc=1; log "FAILED: $label"; }
  done <"$BUNDLE_DIR/TESTS"
  return $rc
}

TEST_STATUS=not_run
TEST_LINES=""
if [ "$BUILD_STATUS" = passed ]; then
  if [ -n "$BUNDLE" ]; then
    log "testing the bundle's $(wc -l <"$BUNDLE_DIR/TESTS") test binaries"
  else
    log "testing ${TESTS[*]}"
  fi
  TEST_STATUS=passed
  mkdir -p "$OUT_DIR/test_logs"
  if [ -n "$BUNDLE" ]; then
    run_bundled_tests || TEST_STATUS=failed
  else
    timeout "$(budget 150)" bazel test "${BAZEL_CONFIG[@]}" --test_output=errors "${TESTS[@]}" \
      >"$OUT_DIR/test.log" 2>&1 || TEST_STATUS=failed
    copy_test_logs
  fi
  TEST_LINES=$(test_counts)
  if [ "$CPU_PLUMBING" -eq 0 ] && grep -rl 'SKIPPED: no CUDA device' "$OUT_DIR/test_logs" >/dev/null 2>&1; then
    log "GPU tests skipped for lack of a device although a GPU is present:"
    grep -rh 'SKIPPED: no CUDA device' "$OUT_DIR/test_logs" | sort -u >&2
    TEST_STATUS=failed
  fi
  log "tests: $TEST_STATUS"
  [ -n "$TEST_LINES" ] && printf '%s\n' "$TEST_LINES" >&2
fi

# ---- 4. benchmark ----------------------------------------------------------------
BENCH_STATUS=not_run
if [ "$BUILD_STATUS" = passed ]; then
  left=$(remaining)
  if [ "$left" -lt 60 ]; then
    log "skipping the benchmark: only ${left}s of the time budget left"
  else
    log "benchmark (${left}s left; log: $OUT_DIR/bench.log)"
    if timeout "$left" "$BENCH_BIN" "${BENCH_ARGS[@]}" --out_dir="$OUT_DIR" \
        >"$OUT_DIR/bench.log" 2>&1; then
      BENCH_STATUS=passed
    else
      BENCH_STATUS=failed
      log "BENCHMARK FAILED; last lines:"
      tail -20 "$OUT_DIR/bench.log" >&2
    fi
  fi
fi

# ---- 5. summary ------------------------------------------------------------------
ELAPSED=$(($(date +%s) - START))
json_string() {
  printf '%s' "$1" | sed 's/\\/\\\\/g; s/"/\\"/g; s/\t/ /g' |
    awk 'BEGIN { ORS = "" } NR > 1 { print "\\n" } { print }'
}
{
  printf '{\n  "device": "%s",\n' "$(json_string "$DEVICE")"
  printf '  "cpu_plumbing": %s,\n' "$([ "$CPU_PLUMBING" -eq 1 ] && echo true || echo false)"
  printf '  "elapsed_seconds": %d,\n' "$ELAPSED"
  printf '  "build": "%s",\n  "tests": "%s",\n  "benchmark": "%s",\n' \
    "$BUILD_STATUS" "$TEST_STATUS" "$BENCH_STATUS"
  printf '  "test_results": "%s",\n' "$(json_string "$TEST_LINES")"
  printf '  "gpu_bench": '
  if [ -s "$OUT_DIR/gpu_bench.json" ] && [ "$BENCH_STATUS" = passed ]; then
    cat "$OUT_DIR/gpu_bench.json"
  else
    echo null
  fi
  printf '}\n'
} >"$OUT_DIR/gpu_check.json"
{
  echo "Tandem GPU check ($(date -u +%Y-%m-%dT%H:%M:%SZ), ${ELAPSED}s)"
  echo "device: $DEVICE"
  echo "build: $BUILD_STATUS   tests: $TEST_STATUS   benchmark: $BENCH_STATUS"
  [ -n "$TEST_LINES" ] && printf '%s\n' "$TEST_LINES"
  [ -s "$OUT_DIR/gpu_bench.txt" ] && [ "$BENCH_STATUS" = passed ] && cat "$OUT_DIR/gpu_bench.txt"
} >"$OUT_DIR/summary.txt"
cat "$OUT_DIR/summary.txt"
log "wrote $OUT_DIR/gpu_check.json and $OUT_DIR/summary.txt"
[ "$BUILD_STATUS" = passed ] && [ "$TEST_STATUS" = passed ] && [ "$BENCH_STATUS" = passed ]
exit $(( $? == 0 ? 0 : 1 ))
