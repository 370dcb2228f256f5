#!/usr/bin/env bash
# Play one bandit agent to the end, restarting its process from the checkpoint every $EVERY
# checkpoints (default 3, i.e. 3,000 steps). A long-lived `gluon-bbb bandit` process slows down
# as it ages (106 -> 173 s per 1,000 steps and 240 -> 570 MB over 24,000 steps, cause not
# found); a fresh process resumes exactly where the checkpoint stopped and is fast again.
#
#   OMP_NUM_THREADS=1 GLUON_BBB_DATA=../shared/data nohup bash scripts/bandit_restart_loop.sh \
#       OUTPUT_DIR AGENT LOG -- --steps 50000 [other gluon-bbb bandit options] &
#
# AGENT is one of thompson, greedy-0, greedy-1, greedy-5; LOG collects the command's output.
# Stopping the loop (and its command) loses at most the steps since the last checkpoint; the
# checkpoint is written atomically, so a kill at any moment leaves the last one whole.
set -u
cd "$(dirname "$0")/.."
if [ $# -lt 4 ] || [ "$4" != "--" ]; then
  echo "usage: $0 OUTPUT_DIR AGENT LOG -- GLUON-BBB-BANDIT-OPTIONS..." >&2
  exit 2
fi
out=$1; agent=$2; log=$3; shift 4
EVERY=${EVERY:-3}
POLL=${POLL:-5}  # seconds between looks at the checkpoint
checkpoint=$out/agent-$agent.bbb
mtime() { stat -c %Y "$checkpoint" 2>/dev/null || echo 0; }
while [ ! -f "$out/agent-$agent.json" ]; do
  gluon-bbb bandit --output-dir "$out" --agents "$agent" --no-progress "$@" >> "$log" 2>&1 &
  pid=$!
  written=0; before=$(mtime)
  while kill -0 "$pid" 2>/dev/null; do
    sleep "$POLL"
    now=$(mtime)
    if [ "$now" != "$before" ]; then written=$((written + 1)); before=$now; fi
    if [ "$written" -ge "$EVERY" ]; then
      kill "$pid"; wait "$pid"; echo "$(date +%T) restarting from the checkpoint"; break
    fi
  done
  wait "$pid" 2>/dev/null
  status=$?
  if [ ! -f "$out/agent-$agent.json" ] && [ "$written" -lt "$EVERY" ]; then
    echo "$(date +%T) gluon-bbb bandit stopped (status $status) before its next checkpoint: see $log" >&2
    exit 1
  fi
done
echo "$(date +%T) $agent finished"
