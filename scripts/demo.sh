#!/usr/bin/env bash
# The end-to-end demo behind `make run`: a private embedded broker, a public-domain text,
# wordcount on Spark (run twice: cold, then through the warm engine the first run started), and
# the top 10 words read back from the output topic.
set -euo pipefail
export KSTOOL_HOME="${KSTOOL_HOME:-$PWD/.kstool-demo}"
unset KSTOOL_BOOTSTRAP_SERVERS
TEXT="$(dirname "$0")/data/gettysburg-address.txt"

kstool engine stop >/dev/null 2>&1  # a cold start, even after an interrupted demo
kstool broker start --port 0 >/dev/null
trap 'kstool engine stop >/dev/null; kstool broker stop' EXIT
rm -rf "$KSTOOL_HOME/apps/demo-wordcount"

run_wordcount() {  # prints the whole command's wall time in seconds
  local started ended
  started=$(date +%s.%N)
  kstool run wordcount --input demo-lines --output demo-word-counts --app-id demo-wordcount --once >&2
  ended=$(date +%s.%N)
  echo "$started $ended" | awk '{ printf "%.1f", $2 - $1 }'
}

kstool topics create demo-lines --partitions 2
kstool produce demo-lines --file "$TEXT"
cold=$(run_wordcount)
kstool produce demo-lines --file "$TEXT"  # the text once more: new records for the second run
warm=$(run_wordcount)
kstool groups describe demo-wordcount
echo
echo "wordcount --once: first run ${cold}s (cold: starts Spark and the warm engine), second run ${warm}s (through the engine)"

echo
echo "Top 10 words (latest count per word in demo-word-counts; the text was produced twice):"
# updates of one word share a partition, in order: the last one seen is its total
kstool consume demo-word-counts -e --value-format long -f '%k %s\n' \
  | awk '{ count[$1] = $2 } END { for (w in count) print count[w], w }' \
  | sort -k1,1nr -k2 | head -10
