#!/usr/bin/env bash
# The end-to-end demo behind `make run`, on a private embedded broker that is stopped afterwards.
set -euo pipefail
export KSTOOL_HOME="${KSTOOL_HOME:-$PWD/.kstool-demo}"
unset KSTOOL_BOOTSTRAP_SERVERS

kstool broker start --port 0 >/dev/null
trap 'kstool broker stop' EXIT

kstool topics create demo-lines --partitions 2
kstool topics list
