#!/usr/bin/env bash
# Tandem's entry point for a new user.
#   ./run.sh test   install missing Debian packages, build everything, run all tests
#   ./run.sh demo   (see README) build, start a local cluster and generate text
set -euo pipefail
cd "$(dirname "$0")"

# Debian 12 packages the build, the tests and the demo need.
PACKAGES=(
  bazel-bootstrap bazel-platforms bazel-skylib g++ clang libclang-rt-14-dev pkg-config
  protobuf-compiler protobuf-compiler-grpc libprotobuf-dev libgrpc++-dev libabsl-dev
  libgoogle-glog-dev libgflags-dev libgtest-dev libgmock-dev libgloo-dev
  nlohmann-json3-dev prometheus-cpp-dev openssl
  python3 python3-torch python3-numpy python3-sentencepiece libopenblas0-openmp
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

# Prints gtest's summary lines of every test that ran, one block per target.
print_test_summary() {
  local logs
  logs=$(find -L bazel-testlogs -name test.log 2>/dev/null | sort) || true
  for f in $logs; do
    local target=${f#bazel-testlogs/}
    target=//${target%/test.log}
    grep -hE '^\[  (PASSED|FAILED|SKIPPED) +\]|^\[==========\] [0-9]+ tests? from' "$f" 2>/dev/null \
      | sed "s|^|${target}: |" || true
  done
}

cmd_test() {
  install_packages
  log "building and testing (bazel test //...)"
  local rc=0
  bazel test //... "$@" || rc=$?
  print_test_summary
  if [ $rc -ne 0 ]; then
    log "FAILED (bazel exit code $rc: 3 = a test failed, 1 = build error)"
  else
    log "all tests passed"
  fi
  return $rc
}

usage() {
  sed -n '2,4p' "$0" | sed 's/^# \{0,1\}//'
}

case "${1:-}" in
  test) shift; cmd_test "$@" ;;
  -h|--help|help|"") usage ;;
  *) log "unknown command '$1'"; usage; exit 2 ;;
esac
