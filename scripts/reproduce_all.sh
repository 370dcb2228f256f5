#!/usr/bin/env bash
# Train the Table 1 configurations (2x400) and the Fashion-MNIST runs round-robin, a few
# epochs at a time, so that every run has a result whenever the machine is needed back.
# Every invocation resumes where the last one stopped (gluon-bbb reproduce is resumable).
#
#   GLUON_BBB_DATA=../shared/data nohup bash scripts/reproduce_all.sh > results/reproduce_all.log 2>&1 &
set -euo pipefail
cd "$(dirname "$0")/.."
CONFIGS=${CONFIGS:-"bbb-mixture-400 bbb-gaussian-400 sgd-400 dropout-400 fashion-bbb-mixture-400 fashion-dropout-400"}
LEVELS=${LEVELS:-"5 15 30 50 80 120 160 200 300 400 600"}
for epochs in $LEVELS; do
  for name in $CONFIGS; do
    echo "=== $(date -u +%FT%TZ) $name -> $epochs epochs"
    gluon-bbb reproduce "$name" --epochs "$epochs" --output-dir "results/$name" --no-progress
  done
  gluon-bbb reproduce-report $(for name in $CONFIGS; do echo "results/$name"; done)
done
