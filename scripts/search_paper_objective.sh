#!/usr/bin/env bash
# Issue 18: the paper's objective (kl_scale = 1, scale-mixture prior, 2x400) searched with TPE
# and Hyperband, then the best setting trained to completion on three seeds. Every step resumes
# where the last invocation stopped: the study is in runs/search-paper-objective/study.db and
# every trial and seed is a resumable run folder.
#
#   GLUON_BBB_DATA=../shared/data nohup bash scripts/search_paper_objective.sh > runs/search-paper-objective.out 2>&1 &
set -euo pipefail
cd "$(dirname "$0")/.."
SEARCH=runs/search-paper-objective
TRIALS=${TRIALS:-30}
SEED_EPOCHS=${SEED_EPOCHS:-100}
gluon-bbb search --base bbb-mixture-400 --epochs 27 --sampler tpe --max-trials "$TRIALS" \
  --pruner hyperband --lr 1e-2 1e-3 1e-4 --num-samples 1 2 5 --pi 0.25 0.5 0.75 \
  --neg-log-sigma1 0 1 2 --neg-log-sigma2 6 7 8 --optimizer adam sgd --lr-decay 1 0.97 \
  --search-seed 0 --output-dir "$SEARCH" --no-progress
gluon-bbb search-report "$SEARCH"
# the best setting on validation, as --set KEY=VALUE pairs
SETTING=$(python - "$SEARCH" <<'PY'
import sys
from gluon_bbb.experiments import search_report
rows = search_report.trial_rows(search_report.load_search(sys.argv[1]))
best = min((r for r in rows if r["value"] is not None), key=lambda r: (r["value"], r["number"]))
keys = ("lr", "num_samples", "pi", "neg_log_sigma1", "neg_log_sigma2", "optimizer", "lr_decay")
print(",".join(f"{key}={best[key]}" for key in keys if key in best))
PY
)
echo "=== best setting on validation: $SETTING"
for seed in 0 1 2; do
  gluon-bbb reproduce bbb-mixture-400 --set "$SETTING" --seed "$seed" --epochs "$SEED_EPOCHS" \
    --output-dir "runs/searched-mixture-400-s$seed" --no-progress
done
gluon-bbb reproduce-report runs/searched-mixture-400-s0 runs/searched-mixture-400-s1 runs/searched-mixture-400-s2
