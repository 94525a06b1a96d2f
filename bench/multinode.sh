#!/usr/bin/env bash
# Multi-host emulation of a Tandem cluster on one machine (needs root and iproute2).
#
# Each process gets its own network namespace ("host"): the coordinator, the draft
# worker and the target ranks (tp of them), plus a client host for `tandem bench`, all
# on 10.77.0.0/24, with a one-way delay and a rate on every link (defaults 0.2 ms,
# 10 Gbit/s), so all traffic between processes crosses an emulated network. The links
# (--net, default auto: the first that works):
#   netem   veth pairs to a bridge in one more namespace, `tc netem` delay and rate on
#           each host's interface;
#   switch  kernels without sch_netem: bench/netswitch, a userspace Ethernet switch, owns
#           one TAP device per host (the host's eth0) and forwards every frame after the
#           delay, serialised at the rate (needs /dev/net/tun and the binary:
#           bazel build //bench:netswitch); it also keeps idle CPUs from halting
#           (idle-priority busy loops; --no-keep-awake: not), since waking a halted
#           vCPU can take longer than the delay;
#   tbf     veth and bridge with the rate alone (tbf): NO delay, with a warning.
# Every process listens on its own host's address; gloo ranks publish theirs
# (--hostname) and rendezvous through the coordinator's address. Everything is torn
# down on exit, also when interrupted.
#
#   sudo bench/multinode.sh [--delay 0.2ms] [--rate 10gbit] [--tp 4] [--requests 8]
#       [--concurrency 1,4] [--methods none,draft] [--max-tokens 64] [--out FILE]
#       [--comm tcp|gloo]  (target group collectives; default tcp)
#       [--net auto|netem|switch|tbf] [--netswitch-bin PATH]
#
# Other flags: --target DIR, --draft DIR (models; default models/target, models/draft),
# --prompts FILE (default bench/prompts/code_completion.jsonl),
# --bin-dir DIR (tandem-coordinator, tandem-worker, tandem, bench/netswitch; default:
# bazel-bin; netswitch is also looked for in the Bazel runfiles of a test),
# --tandem/--coordinator-bin/--worker-bin PATH, --threads N (per worker, default 1),
# --no-affinity (do not pin; by default with >= 2 cores the draft gets core 0 and the
# target ranks the others), --logs DIR (keep process logs there), --metrics-out FILE
# (the coordinator's Prometheus metrics at the end of the run), --timeout SECONDS
# (readiness, default 300), --check-only (exit 0 if namespaces can be created, else 77),
# --coordinator-flag FLAG and --bench-flag FLAG (repeatable: passed on to the
# coordinator and to `tandem bench`, e.g. --bench-flag --pipelining=on,off
# --bench-flag --repeat=3 --coordinator-flag --predraft_branches=4).
HELP_LINES=$(awk 'NR > 1 && !/^#/ { print NR - 1; exit }' "$0")
set -euo pipefail
cd "$(dirname "$0")/.."

DELAY=0.2ms RATE=10gbit TP=4 REQUESTS=8 CONCURRENCY=1,4 METHODS=none,draft MAX_TOKENS=64 COMM=tcp
OUT="" PROMPTS=bench/prompts/code_completion.jsonl TARGET=models/target DRAFT=models/draft BIN_DIR=bazel-bin THREADS=1 AFFINITY=1
COORDINATOR_FLAGS=() BENCH_FLAGS=()
LOGS="" TIMEOUT=300 CHECK_ONLY=0 TANDEM="" COORDINATOR_BIN="" WORKER_BIN="" NET=auto NETSWITCH_BIN="" METRICS_OUT="" KEEP_AWAKE=1
while [ $# -gt 0 ]; do
  case "$1" in
    --delay) DELAY=$2; shift 2 ;;
    --rate) RATE=$2; shift 2 ;;
    --net) NET=$2; shift 2 ;;
    --netswitch-bin) NETSWITCH_BIN=$2; shift 2 ;;
    --no-keep-awake) KEEP_AWAKE=0; shift ;;
    --tp) TP=$2; shift 2 ;;
    --comm) COMM=$2; shift 2 ;;
    --requests) REQUESTS=$2; shift 2 ;;
    --concurrency) CONCURRENCY=$2; shift 2 ;;
    --methods) METHODS=$2; shift 2 ;;
    --max-tokens) MAX_TOKENS=$2; shift 2 ;;
    --out) OUT=$2; shift 2 ;;
    --metrics-out) METRICS_OUT=$2; shift 2 ;;
    --prompts) PROMPTS=$2; shift 2 ;;
    --target) TARGET=$2; shift 2 ;;
    --draft) DRAFT=$2; shift 2 ;;
    --bin-dir) BIN_DIR=$2; shift 2 ;;
    --tandem) TANDEM=$2; shift 2 ;;
    --coordinator-bin) COORDINATOR_BIN=$2; shift 2 ;;
    --coordinator-flag) COORDINATOR_FLAGS+=("$2"); shift 2 ;;
    --bench-flag) BENCH_FLAGS+=("$2"); shift 2 ;;
    --worker-bin) WORKER_BIN=$2; shift 2 ;;
    --threads) THREADS=$2; shift 2 ;;
    --no-affinity) AFFINITY=0; shift ;;
    --logs) LOGS=$2; shift 2 ;;
    --timeout) TIMEOUT=$2; shift 2 ;;
    --check-only) CHECK_ONLY=1; shift ;;
    -h|--help) sed -n "2,${HELP_LINES}p" "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "multinode.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
TANDEM=${TANDEM:-$BIN_DIR/client/tandem}
COORDINATOR_BIN=${COORDINATOR_BIN:-$BIN_DIR/coordinator/tandem-coordinator}
WORKER_BIN=${WORKER_BIN:-$BIN_DIR/worker/tandem-worker}
if [ -z "$NETSWITCH_BIN" ]; then
  NETSWITCH_BIN=$BIN_DIR/bench/netswitch
  runfiles=${RUNFILES_DIR:-${TEST_SRCDIR:-}}
  if [ ! -x "$NETSWITCH_BIN" ] && [ -n "$runfiles" ]; then
    NETSWITCH_BIN=$runfiles/${TEST_WORKSPACE:-tandem}/bench/netswitch
  fi
fi
case "$NET" in auto|netem|switch|tbf) ;; *) echo "multinode.sh: --net auto|netem|switch|tbf" >&2; exit 2 ;; esac

say() { printf '[multinode] %s\n' "$*" >&2; }

# Unique names for this run: namespaces "tmn<tag>-<host>", interfaces "v<tag><n>".
TAG=$(printf '%04x' $((RANDOM % 65536)))
NS_PREFIX="tmn$TAG"
BRIDGE_NS="$NS_PREFIX-br"
NAMESPACES=()
PIDS=()
SWITCH_PID=""

cleanup() {
  local rc=$?
  trap - EXIT INT TERM
  for pid in "${PIDS[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  local waited=0
  for pid in "${PIDS[@]}"; do
    while kill -0 "$pid" 2>/dev/null && [ $waited -lt 100 ]; do sleep 0.1; waited=$((waited + 1)); done
  done
  # The network goes last (the processes above may still be talking while they stop);
  # the switch prints its statistics when terminated.
  if [ -n "$SWITCH_PID" ]; then
    kill -TERM "$SWITCH_PID" 2>/dev/null || true
    wait "$SWITCH_PID" 2>/dev/null || true
    [ -s "$WORK/netswitch.log" ] && say "$(tail -n 1 "$WORK/netswitch.log")"
  fi
  # Anything still running inside our namespaces, whoever started it.
  for ns in "${NAMESPACES[@]}"; do
    for pid in $(ip netns pids "$ns" 2>/dev/null); do kill -KILL "$pid" 2>/dev/null || true; done
  done
  for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
  for ns in "${NAMESPACES[@]}"; do ip netns del "$ns" 2>/dev/null || true; done
  [ -n "${WORK:-}" ] && [ -z "$LOGS" ] && rm -rf "$WORK"
  exit $rc
}
trap cleanup EXIT
trap 'say "interrupted"; exit 130' INT TERM

if [ "$(id -u)" -ne 0 ]; then say "needs root (network namespaces)"; exit 77; fi
command -v ip >/dev/null && command -v tc >/dev/null || { say "needs iproute2 (ip, tc)"; exit 77; }
if ! ip netns add "$BRIDGE_NS" 2>/dev/null; then
  say "cannot create network namespaces here"; exit 77
fi
NAMESPACES+=("$BRIDGE_NS")
if [ $CHECK_ONLY -eq 1 ]; then say "network namespaces are available"; exit 0; fi

for f in "$TANDEM" "$COORDINATOR_BIN" "$WORKER_BIN"; do
  [ -x "$f" ] || { say "missing $f (bazel build //client:tandem //coordinator:tandem-coordinator //worker:tandem-worker)"; exit 2; }
done
for m in "$TARGET" "$DRAFT"; do
  [ -f "$m/config.json" ] || { say "missing model $m (no config.json)"; exit 2; }
done
TARGET=$(realpath "$TARGET") DRAFT=$(realpath "$DRAFT")
if [ -n "$LOGS" ]; then WORK=$LOGS; mkdir -p "$WORK"; else WORK=$(mktemp -d /tmp/tandem-multinode-XXXXXX); fi

# --- network ---------------------------------------------------------------------
if [ "$NET" = auto ] || [ "$NET" = netem ]; then
  # Probed on the bridge namespace's own loopback, which goes away with it.
  if ip netns exec "$BRIDGE_NS" tc qdisc add dev lo root netem delay 0ms 2>/dev/null; then
    NET=netem
  elif [ "$NET" = netem ]; then
    say "this kernel has no netem qdisc (sch_netem); try --net switch"; exit 2
  elif [ -x "$NETSWITCH_BIN" ] && [ -c /dev/net/tun ]; then
    NET=switch
  else
    NET=tbf
    say "WARNING: no netem qdisc, and no $NETSWITCH_BIN or /dev/net/tun for the userspace switch:" \
        "delay $DELAY is NOT emulated, only the rate (tbf)"
  fi
fi
if [ "$NET" = switch ]; then
  [ -x "$NETSWITCH_BIN" ] || { say "missing $NETSWITCH_BIN (bazel build //bench:netswitch)"; exit 2; }
  [ -c /dev/net/tun ] || { say "no /dev/net/tun (CONFIG_TUN) for the userspace switch"; exit 2; }
else
  ip -n "$BRIDGE_NS" link add br0 type bridge
  ip -n "$BRIDGE_NS" link set br0 up
fi

# add_host NAME INDEX ADDRESS: a namespace whose eth0 will have ADDRESS/24. netem and
# tbf: a veth pair to the bridge; switch: eth0 is made by the switch, below.
HOST_NAMES=() HOST_ADDRS=()
add_host() {
  local name=$1 index=$2 address=$3 ns="$NS_PREFIX-$1"
  ip netns add "$ns"
  NAMESPACES+=("$ns")
  HOST_NAMES+=("$ns") HOST_ADDRS+=("$address")
  ip -n "$ns" link set lo up
  [ "$NET" = switch ] && return
  ip link add "v${TAG}h$index" type veth peer name "v${TAG}b$index"
  ip link set "v${TAG}h$index" netns "$ns"
  ip link set "v${TAG}b$index" netns "$BRIDGE_NS"
  ip -n "$ns" link set "v${TAG}h$index" name eth0
  ip -n "$BRIDGE_NS" link set "v${TAG}b$index" master br0
  ip -n "$BRIDGE_NS" link set "v${TAG}b$index" up
  if [ "$NET" = netem ]; then
    ip netns exec "$ns" tc qdisc add dev eth0 root netem delay "$DELAY" rate "$RATE" limit 100000
  else
    ip netns exec "$ns" tc qdisc add dev eth0 root tbf rate "$RATE" burst 4mb latency 50ms
  fi
}

COORD_ADDR=10.77.0.1 DRAFT_ADDR=10.77.0.2 CLIENT_ADDR=10.77.0.100
add_host coord 0 $COORD_ADDR
add_host draft 1 $DRAFT_ADDR
for r in $(seq 0 $((TP - 1))); do add_host "t$r" $((r + 2)) "10.77.0.$((10 + r))"; done
add_host client 99 $CLIENT_ADDR

if [ "$NET" = switch ]; then
  # Runs in the bridge namespace (so the namespace sweep in cleanup finds it too); it
  # creates each host's eth0 inside that host's namespace and keeps the TAP fds.
  SWITCH_ARGS=(--delay="$DELAY" --rate="$RATE" --ready="$WORK/netswitch.ready" --realtime)
  [ $KEEP_AWAKE -eq 1 ] && SWITCH_ARGS+=(--keep_awake)
  for ns in "${HOST_NAMES[@]}"; do SWITCH_ARGS+=(--port="$ns:eth0"); done
  ip netns exec "$BRIDGE_NS" "$NETSWITCH_BIN" "${SWITCH_ARGS[@]}" >"$WORK/netswitch.log" 2>&1 &
  SWITCH_PID=$!
  waited=0
  until [ -s "$WORK/netswitch.ready" ]; do
    if ! kill -0 "$SWITCH_PID" 2>/dev/null; then
      say "netswitch failed: $(cat "$WORK/netswitch.log")"; SWITCH_PID=""; exit 1
    fi
    [ $waited -ge 100 ] && { say "netswitch not ready after 10 s"; exit 1; }
    sleep 0.1; waited=$((waited + 1))
  done
  LINKS="userspace switch (bench/netswitch, TAP devices$( [ $KEEP_AWAKE -eq 1 ] && echo ", CPUs kept awake"); no sch_netem in this kernel): delay $DELAY, rate $RATE per link"
elif [ "$NET" = netem ]; then
  LINKS="netem delay $DELAY rate $RATE per interface"
else
  LINKS="tbf rate $RATE per interface, NO delay"
fi
for i in "${!HOST_NAMES[@]}"; do
  ip -n "${HOST_NAMES[$i]}" addr add "${HOST_ADDRS[$i]}/24" dev eth0
  ip -n "${HOST_NAMES[$i]}" link set eth0 up
done
say "$((TP + 3)) hosts on 10.77.0.0/24 (coordinator $COORD_ADDR, draft $DRAFT_ADDR, target 10.77.0.10-$((9 + TP)), client $CLIENT_ADDR); $LINKS"
# The delay as the hosts see it (an ARP exchange first, then 20 echoes).
if command -v ping >/dev/null; then
  if ip netns exec "$NS_PREFIX-client" ping -c 1 -W 5 -q $COORD_ADDR >/dev/null 2>&1; then
    rtt=$(ip netns exec "$NS_PREFIX-client" ping -c 20 -i 0.05 -q $COORD_ADDR 2>&1 | grep -o 'rtt.*' || true)
    say "ping client -> coordinator: ${rtt:-no summary}"
  else
    say "ping client -> coordinator: no answer"
  fi
fi

# --- processes ----------------------------------------------------------------------
DRAFT_CPUS="" TARGET_CPUS=""
if [ $AFFINITY -eq 1 ] && [ "$(nproc)" -ge 2 ]; then
  DRAFT_CPUS=0 TARGET_CPUS="1-$(($(nproc) - 1))"
fi
# start NAME [CPUS] -- COMMAND...: runs COMMAND in host NAME, logging to WORK/NAME.log.
start() {
  local name=$1 cpus=$2; shift 3
  local pin=()
  [ -n "$cpus" ] && pin=(taskset -c "$cpus")
  ip netns exec "$NS_PREFIX-$name" "${pin[@]}" "$@" >"$WORK/$name.log" 2>&1 &
  PIDS+=($!)
  PID_NAMES+=("$name")
}
PID_NAMES=()
RUN_ID="multinode-$TAG-$$"
start coord "" -- "$COORDINATOR_BIN" --listen=$COORD_ADDR:50051 --target=10.77.0.10:50061 \
  --draft=$DRAFT_ADDR:50061 --tokenizer="$TARGET" --rendezvous_listen=$COORD_ADDR:50052 \
  --metrics_listen=$COORD_ADDR:9090 --worker_wait_s="$TIMEOUT" "${COORDINATOR_FLAGS[@]}"
for r in $(seq 0 $((TP - 1))); do
  addr="10.77.0.$((10 + r))"
  start "t$r" "$TARGET_CPUS" -- "$WORKER_BIN" --role=target --rank="$r" --tp_size="$TP" \
    --model_dir="$TARGET" --threads="$THREADS" --listen="$addr:50061" --comm="$COMM" \
    --rendezvous=$COORD_ADDR:50052 --run_id="$RUN_ID" --hostname="$addr"
done
start draft "$DRAFT_CPUS" -- "$WORKER_BIN" --role=draft --model_dir="$DRAFT" --threads="$THREADS" \
  --listen=$DRAFT_ADDR:50061 --comm=local

# Ready when a one-token request succeeds from the client host.
say "waiting for the cluster (logs in $WORK)"
waited=0
until ip netns exec "$NS_PREFIX-client" "$TANDEM" generate --server $COORD_ADDR:50051 \
    --max-tokens 1 --timeout 10 --quiet "ready?" >/dev/null 2>&1; do
  for i in "${!PIDS[@]}"; do
    if ! kill -0 "${PIDS[$i]}" 2>/dev/null; then
      say "${PID_NAMES[$i]} exited; last lines of its log:"; tail -15 "$WORK/${PID_NAMES[$i]}.log" >&2
      exit 1
    fi
  done
  [ $waited -ge "$TIMEOUT" ] && { say "not ready after ${TIMEOUT}s"; tail -5 "$WORK"/*.log >&2; exit 1; }
  sleep 1; waited=$((waited + 1))
done
say "cluster ready after ${waited}s"

BENCH=(bench --server $COORD_ADDR:50051 --metrics $COORD_ADDR:9090 --requests "$REQUESTS"
       --prompts "$(realpath "$PROMPTS")"
       --concurrency "$CONCURRENCY" --methods "$METHODS" --max-tokens "$MAX_TOKENS"
       "${BENCH_FLAGS[@]}")
[ -n "$OUT" ] && BENCH+=(--out "$(realpath -m "$OUT")")
say "tandem ${BENCH[*]}"
# In the background so that a signal to this script is handled at once (bash runs
# traps only between foreground commands); the cleanup stops it with the rest.
ip netns exec "$NS_PREFIX-client" "$TANDEM" "${BENCH[@]}" &
BENCH_PID=$!
PIDS=("$BENCH_PID" "${PIDS[@]}")
PID_NAMES=(bench "${PID_NAMES[@]}")
# The round trip under load: 10 echoes a second while the benchmark runs.
PING_PID=""
if command -v ping >/dev/null; then
  ip netns exec "$NS_PREFIX-client" ping -i 0.1 -q $COORD_ADDR >"$WORK/ping.txt" 2>&1 &
  PING_PID=$!
  PIDS+=("$PING_PID")
fi
status=0
wait "$BENCH_PID" || status=$?
if [ -n "$PING_PID" ]; then
  kill -INT "$PING_PID" 2>/dev/null || true
  wait "$PING_PID" 2>/dev/null || true
  say "ping client -> coordinator during the benchmark: $(grep -o 'rtt.*' "$WORK/ping.txt" || echo "no summary")"
fi
if [ -n "$METRICS_OUT" ]; then
  if ip netns exec "$NS_PREFIX-client" curl -sf -m 10 "http://$COORD_ADDR:9090/metrics" >"$METRICS_OUT"; then
    say "coordinator metrics in $METRICS_OUT"
  else
    say "could not read the coordinator's metrics (needs curl)"
  fi
fi
exit $status
