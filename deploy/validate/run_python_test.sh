#!/bin/sh
# Runs a deploy/validate test script with Debian's Python (python3-yaml).
set -eu
script=$1
shift
exec /usr/bin/python3 "$script" "$@"
