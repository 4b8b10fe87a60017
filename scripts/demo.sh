#!/usr/bin/env bash
# The end-to-end demo behind `make run`: a private embedded broker, a public-domain text,
# wordcount on Spark, and the top 10 words read back from the output topic.
set -euo pipefail
export KSTOOL_HOME="${KSTOOL_HOME:-$PWD/.kstool-demo}"
unset KSTOOL_BOOTSTRAP_SERVERS
TEXT="$(dirname "$0")/data/gettysburg-address.txt"

kstool broker start --port 0 >/dev/null
trap 'kstool broker stop' EXIT
rm -rf "$KSTOOL_HOME/apps/demo-wordcount"

kstool topics create demo-lines --partitions 2
kstool produce demo-lines --file "$TEXT"
kstool run wordcount --input demo-lines --output demo-word-counts --app-id demo-wordcount --once
kstool groups describe demo-wordcount

echo
echo "Top 10 words (latest count per word in demo-word-counts):"
# updates of one word share a partition, in order: the last one seen is its total
kstool consume demo-word-counts -e --value-format long -f '%k %s\n' \
  | awk '{ count[$1] = $2 } END { for (w in count) print count[w], w }' \
  | sort -k1,1nr -k2 | head -10
