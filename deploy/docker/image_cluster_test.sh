#!/usr/bin/env bash
# image_cluster_test.sh [IMAGE]
# The CPU image for real: builds it (build_local.sh --prebuilt; the base image and
# Docker's layer cache make a rebuild quick) unless TANDEM_IMAGE_SKIP_BUILD=1, then runs
# the cpu-tiny cluster as six containers of that one image: the coordinator, the draft
# worker and a 4-rank target group (tcp collectives), each its own container on the
# host's network, listening on 127.0.0.1 only (ports chosen free by the image's own
# `tandem up --config cluster.json --dry-run`, so the flags are the ones `tandem up` and
# the Kubernetes manifests use). From the host, `tandem generate` must give the same
# greedy text with speculation (--method draft) as target-only (--method none); every
# process must run as uid 10001 with a read-only root file system and no capabilities;
# Docker's health checks (`tandem health` in each container) must all report healthy;
# /metrics must answer; `docker stop` in `tandem up`'s order (coordinator; target leader
# and draft; the followers) must end every container with exit code 0 before the grace
# period. Prints the image size and the time of each step.
# Skips (exit 0, with a message) when no Docker daemon answers. IMAGE: default tandem:cpu.
# TANDEM_CLI: the host's tandem binary (default: the one build_local.sh --prebuilt baked
# into the image, .image-prebuilt/tandem, else bazel-bin/client/tandem).
set -euo pipefail
cd "$(dirname "$0")/../.."

image=${1:-tandem:cpu}
run=tandem-test-$$
work=$(mktemp -d /tmp/tandem-image-test-XXXXXX)
tokens=32
grace_s=30
failures=0

log() { printf '[image_test] %s\n' "$*" >&2; }
fail() { log "FAIL: $*"; failures=$((failures + 1)); }

if ! command -v docker >/dev/null || ! docker info >/dev/null 2>&1; then
  log "SKIPPED: no Docker daemon answers (Debian: apt-get install docker.io; dockerd &)"
  exit 0
fi

containers=()
cleanup() {
  if [ ${#containers[@]} -gt 0 ]; then docker rm -f "${containers[@]}" >/dev/null 2>&1 || true; fi
  rm -rf "$work"
}
trap cleanup EXIT

started=$SECONDS
if [ -z "${TANDEM_IMAGE_SKIP_BUILD:-}" ]; then
  deploy/docker/build_local.sh --prebuilt --tag "$image"
fi
cli=${TANDEM_CLI:-.image-prebuilt/tandem}
[ -x "$cli" ] || cli=bazel-bin/client/tandem
[ -x "$cli" ] || { log "no host CLI at $cli (bazel build //client:tandem)"; exit 1; }
size=$(docker image inspect --format '{{.Size}}' "$image") ||
  { log "no image $image"; exit 1; }
log "image $image: $((size / 1000000)) MB"

# The processes, as the image's CLI plans them from cpu-tiny's cluster description
# (rendezvous port 0: a free one): "NAME: BINARY ARGS... > LOG 2>&1".
sed 's/"rendezvous_port": *[0-9]*/"rendezvous_port": 0/' deploy/overlays/cpu-tiny/cluster.json |
  docker run --rm -i --network host --read-only --tmpfs /tmp "$image" tandem up \
    --config /dev/stdin --host 127.0.0.1 --port 0 --metrics-port 0 --dry-run >"$work/plan.txt"
sed -n '/^# processes$/,$p' "$work/plan.txt" | tail -n +2 | sed 's/ > .*$//' >"$work/processes"
[ "$(wc -l <"$work/processes")" -eq 6 ] || { cat "$work/plan.txt" >&2; log "expected 6 processes"; exit 1; }
coordinator_args=$(grep '^coordinator: ' "$work/processes")
endpoint=$(printf '%s\n' "$coordinator_args" | grep -o -- '--listen=[^ ]*' | cut -d= -f2)
metrics=$(printf '%s\n' "$coordinator_args" | grep -o -- '--metrics_listen=[^ ]*' | cut -d= -f2)

# One container per process, hardened like the manifests (read-only root, no
# capabilities, no privilege gain, /tmp as tmpfs); the program is PID 1. Docker's health
# check is the image's own `tandem health` against the process's --listen address.
start_step=$SECONDS
while read -r name binary args; do
  name=${name%:}
  listen=$(printf '%s\n' "$args" | grep -o -- '--listen=[^ ]*' | cut -d= -f2)
  # shellcheck disable=SC2086
  docker run -d --name "$run-$name" --network host --read-only --tmpfs /tmp \
    --cap-drop ALL --security-opt no-new-privileges \
    --health-cmd "tandem health --server $listen" --health-interval 1s --health-retries 3 \
    "$image" "$(basename "$binary")" $args >/dev/null
  containers+=("$run-$name")
done <"$work/processes"
log "started ${#containers[@]} containers: ${containers[*]}"

# Ready when Docker reports every container healthy; one that exits is a failure.
waited=0
while :; do
  healthy=0
  for c in "${containers[@]}"; do
    state=$(docker inspect -f '{{.State.Status}} {{.State.Health.Status}}' "$c")
    case "$state" in
      "running healthy") healthy=$((healthy + 1)) ;;
      running*) ;;
      *) docker logs "$c" 2>&1 | tail -20 >&2
         log "FAIL: $c is '$state' before the cluster was ready"; exit 1 ;;
    esac
  done
  [ $healthy -eq ${#containers[@]} ] && break
  [ $waited -ge 300 ] && { log "FAIL: $healthy of ${#containers[@]} healthy after 300 s"; exit 1; }
  sleep 1; waited=$((waited + 1))
done
log "all ${#containers[@]} containers healthy after $((SECONDS - start_step)) s"
"$cli" generate --server "$endpoint" --max-tokens 1 --quiet "def f():" >/dev/null ||
  fail "the coordinator is healthy but generate failed"

# Non-root, read-only root file system, no capabilities: from the running processes.
for c in "${containers[@]}"; do
  pid=$(docker inspect -f '{{.State.Pid}}' "$c")
  uid=$(awk '/^Uid:/ {print $2}' "/proc/$pid/status")
  caps=$(awk '/^CapEff:/ {print $2}' "/proc/$pid/status")
  [ "$uid" = 10001 ] || fail "$c runs as uid $uid, not 10001"
  [ "$caps" = 0000000000000000 ] || fail "$c has capabilities $caps"
  [ "$(docker inspect -f '{{.HostConfig.ReadonlyRootfs}}' "$c")" = true ] || fail "$c root is writable"
done

# Greedy speculation is lossless: --method draft must equal --method none, token for token.
prompts=(
  $'def fibonacci(n):\n    """Return the n-th Fibonacci number."""\n'
  $'class Stack:\n    def __init__(self):\n        self.items = []\n\n    def push(self, item):\n'
  $'def read_lines(path):\n    with open(path) as f:\n'
)
i=0
for prompt in "${prompts[@]}"; do
  i=$((i + 1))
  for method in none draft; do
    "$cli" generate --server "$endpoint" --max-tokens $tokens --temperature 0 --method $method \
      "$prompt" >"$work/$i.$method.txt" 2>"$work/$i.$method.stats" ||
      fail "prompt $i --method $method: $(cat "$work/$i.$method.stats")"
  done
  if [ -s "$work/$i.none.txt" ] && cmp -s "$work/$i.none.txt" "$work/$i.draft.txt"; then
    log "prompt $i: identical greedy text ($(cat "$work/$i.draft.stats"))"
  else
    fail "prompt $i: speculative text differs from target-only"
    diff "$work/$i.none.txt" "$work/$i.draft.txt" >&2 || true
  fi
done

# The metrics endpoint of the coordinator container.
if command -v curl >/dev/null; then
  curl -sf "http://$metrics/metrics" >"$work/metrics.txt" || fail "GET $metrics/metrics failed"
  grep -q '^tandem_' "$work/metrics.txt" || fail "no tandem_ metric at $metrics/metrics"
else
  log "no curl: /metrics not checked"
fi

# Clean shutdown in `tandem up`'s order; exit code 0 within the grace period, no SIGKILL.
stop_stage() {
  local c t0
  t0=$SECONDS
  for c in "$@"; do docker stop -t "$grace_s" "$c" >/dev/null & done
  wait
  for c in "$@"; do
    local code
    code=$(docker inspect -f '{{.State.ExitCode}}' "$c")
    [ "$code" = 0 ] || { fail "$c exited with $code"; docker logs "$c" 2>&1 | tail -5 >&2; }
  done
  log "stopped $* in $((SECONDS - t0)) s"
}
stop_stage "$run-coordinator"
stop_stage "$run-target-0" "$run-draft"
stop_stage "$run-target-1" "$run-target-2" "$run-target-3"

if [ $failures -gt 0 ]; then
  log "FAILED: $failures check(s) ($((SECONDS - started)) s)"
  exit 1
fi
log "PASSED: image $image ($((size / 1000000)) MB), 6 containers, greedy identity on ${#prompts[@]} prompts, clean shutdown ($((SECONDS - started)) s)"
