#!/bin/sh
# Entry point of the Tandem image: one image, three programs.
#   tandem-entrypoint coordinator [FLAGS...]   tandem-coordinator (public API, rendezvous)
#   tandem-entrypoint worker [FLAGS...]        tandem-worker (draft worker or target rank)
#   tandem-entrypoint tandem COMMAND [...]     the CLI (generate, up, bench, health)
# The full program names (tandem-coordinator, tandem-worker) work as well, and every
# program is also on PATH, so `docker run IMAGE tandem generate ...` and a Kubernetes
# `command: [tandem-worker]` both work. The program replaces this shell (exec), so it
# receives SIGTERM directly and drains.
set -eu
bin_dir="${TANDEM_HOME:-/opt/tandem}/bin"

usage() {
  sed -n '2,9p' "$0" | sed 's/^# \{0,1\}//'
}

if [ $# -eq 0 ]; then
  usage
  exit 2
fi
program=$1
shift
case "$program" in
  coordinator | tandem-coordinator) exec "$bin_dir/tandem-coordinator" "$@" ;;
  worker | tandem-worker) exec "$bin_dir/tandem-worker" "$@" ;;
  tandem | cli) exec "$bin_dir/tandem" "$@" ;;
  -h | --help | help) usage ;;
  *)
    echo "tandem-entrypoint: unknown program '$program' (coordinator, worker or tandem)" >&2
    exit 2
    ;;
esac
