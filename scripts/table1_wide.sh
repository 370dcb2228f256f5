#!/usr/bin/env bash
# Issue 20: Table 1's 2x800 and 2x1200 rows, every method tuned on the same budget.
#
# Each method (SGD, dropout, BBB Gaussian, BBB scale mixture; the paper's objective, kl_scale 1)
# is searched with the same sampler (random), number of trials ($TRIALS), epochs per trial
# ($EPOCHS) and pruner (Hyperband); its best setting on validation is then trained for
# $FINAL_EPOCHS epochs on seeds 0 and 1 with the paper's protocol (50k/10k split, best epoch on
# validation, the test set once). Every step resumes where the last invocation stopped: a
# search's study is in runs/table1/search-<config>/study.db, every trial and seed a run folder.
#
#   GLUON_BBB_DATA=../shared/data nohup bash scripts/table1_wide.sh > runs/table1.out 2>&1 &
#   bash scripts/table1_wide.sh search-sgd-800 train-sgd-800-s0   # chosen steps, in that order
#
# Steps: search-<config> and train-<config>-s<seed>, <config> one of {sgd,dropout,bbb-gaussian,
# bbb-mixture}-{400,800,1200}. With no step, all of them, the 2x1200 scale mixture (Table 2's
# network) first and 2x400 last.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=${ROOT:-runs/table1}
TRIALS=${TRIALS:-8}
EPOCHS=${EPOCHS:-10}
FINAL_EPOCHS=${FINAL_EPOCHS:-100}
EXTRA_OPTIONS=${EXTRA_OPTIONS:-}  # e.g. "--hidden 8 --subset 256" for a smoke run
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}

space() {  # the values each method may take
  case "$1" in
    sgd-*) echo "--lr 0.3 0.1 0.03 0.01 --momentum 0 0.5 0.9 --lr-decay 1 0.98 0.95" ;;
    dropout-*) echo "--lr 0.3 0.1 0.03 0.01 --momentum 0 0.5 0.9 --lr-decay 1 0.98 0.95 --dropout 0.2 0.35 0.5" ;;
    bbb-gaussian-*) echo "--lr 1e-3 3e-4 --num-samples 1 2 --sigma 1 0.3679 0.1353" ;;
    bbb-mixture-*) echo "--lr 1e-3 3e-4 --num-samples 1 2 --pi 0.25 0.5 0.75 --neg-log-sigma1 0 1 2 --neg-log-sigma2 6 7 8" ;;
    *) echo "unknown configuration $1" >&2; exit 2 ;;
  esac
}

search_step() {
  local config=$1
  # shellcheck disable=SC2046,SC2086  # the space and the extra options are lists of options
  gluon-bbb search --base "$config" --epochs "$EPOCHS" --sampler random --max-trials "$TRIALS" \
    --pruner hyperband --search-seed 0 $(space "$config") --output-dir "$ROOT/search-$config" \
    --no-progress $EXTRA_OPTIONS
  gluon-bbb search-report "$ROOT/search-$config"
}

train_step() {
  local config=$1 seed=$2 setting
  setting=$(gluon-bbb search-report "$ROOT/search-$config" --print-best)
  echo "=== $config seed $seed: the best setting on validation: $setting"
  # shellcheck disable=SC2086
  gluon-bbb reproduce "$config" --set "$setting" --seed "$seed" --epochs "$FINAL_EPOCHS" \
    --output-dir "$ROOT/$config-s$seed" --no-progress $EXTRA_OPTIONS
}

steps=("$@")
if [ ${#steps[@]} -eq 0 ]; then
  steps=(search-bbb-mixture-1200 train-bbb-mixture-1200-s0)
  for config in sgd-1200 dropout-1200 bbb-gaussian-1200; do steps+=("search-$config"); done
  for config in sgd-800 dropout-800 bbb-gaussian-800 bbb-mixture-800; do steps+=("search-$config"); done
  steps+=(train-bbb-mixture-1200-s1)
  for config in sgd-1200 dropout-1200 bbb-gaussian-1200 sgd-800 dropout-800 bbb-gaussian-800 bbb-mixture-800; do
    steps+=("train-$config-s0" "train-$config-s1")
  done
  # the 2x400 row again, every method on the same budget (the first 2x400 baselines were untuned)
  for config in sgd-400 dropout-400 bbb-gaussian-400 bbb-mixture-400; do
    steps+=("search-$config" "train-$config-s0" "train-$config-s1")
  done
fi
for step in "${steps[@]}"; do
  echo "=== $(date -u +%FT%TZ) $step"
  case "$step" in
    search-*) search_step "${step#search-}" ;;
    train-*-s*) rest=${step#train-}; train_step "${rest%-s*}" "${rest##*-s}" ;;
    *) echo "unknown step $step" >&2; exit 2 ;;
  esac
done
echo "=== $(date -u +%FT%TZ) done"
