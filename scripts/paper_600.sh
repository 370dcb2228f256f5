#!/usr/bin/env bash
# The paper's long protocol: 600 epochs of plain SGD with the learning rate divided by 10 after
# epoch 300 (the `-paper` configurations), for Table 1's scale-mixture rows at 2x400 and 2x1200,
# the 2x1200 networks of Figure 2 (SGD, dropout, the Gaussian prior) and Table 2 on the network
# at the end of training. Each run is a resumable run folder $ROOT/<config>-s<seed>: the same
# command continues it after the last completed epoch.
#
#   GLUON_BBB_DATA=../shared/data nohup bash scripts/paper_600.sh > runs/paper.out 2>&1 &
#   bash scripts/paper_600.sh bbb-mixture-400-paper:0 bbb-mixture-400-paper:1   # chosen runs
#
# With no argument, all of them, the 2x1200 scale mixture first. EXTRA_OPTIONS="--hidden 8
# --subset 256" and EPOCHS=2 make a smoke run.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=${ROOT:-runs/paper}
EPOCHS=${EPOCHS:-600}
EXTRA_OPTIONS=${EXTRA_OPTIONS:-}
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
RUNS=${*:-bbb-mixture-1200-paper:0 bbb-mixture-400-paper:0 bbb-mixture-400-paper:1 \
  sgd-1200-paper:0 dropout-1200-paper:0 bbb-gaussian-1200-paper:0 bbb-mixture-1200-paper:1}
for run in $RUNS; do
  config=${run%%:*}
  seed=${run##*:}
  # shellcheck disable=SC2086  # the extra options are a list of options
  gluon-bbb reproduce "$config" --seed "$seed" --epochs "$EPOCHS" \
    --output-dir "$ROOT/$config-s$seed" --no-progress $EXTRA_OPTIONS
done
