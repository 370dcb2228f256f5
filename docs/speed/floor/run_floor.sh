#!/bin/bash
# The cost-floor benchmarks: each "after" command on this tree, then the same on the tree
# before this work (commit 0b10a7e, a git worktree at /tmp/before, through PYTHONPATH).
set -euo pipefail
cd /work/main
PY=/work/bench-venv/bin/python
OUT=docs/speed/floor
export GLUON_BBB_DATA=/work/shared/data OMP_NUM_THREADS=2
run() { echo "+ $*" >&2; "$@"; }
before() { PYTHONPATH=/tmp/before run "$@"; }
date -u +"start %FT%TZ"
run $PY benchmarks/cost_model.py --repeats 30 --json $OUT/cost_model.json > $OUT/cost_model.txt
for opt in sgd adam; do for w in 400 1200; do
  for side in after before; do
    cmd=($PY benchmarks/epoch_time.py --subset 20000 --optimizer $opt --hidden $w $w \
         --priors gaussian scale-mixture gaussian-closed-form --paths fused --repeats 2 \
         --json $OUT/epoch_${side}_${opt}_${w}.json)
    if [ $side = after ]; then run "${cmd[@]}"; else before "${cmd[@]}"; fi > $OUT/epoch_${side}_${opt}_${w}.txt
  done
done; done
for side in after before; do
  cmd=($PY benchmarks/step_latency.py --json $OUT/step_latency_${side}.json)
  if [ $side = after ]; then run "${cmd[@]}"; else before "${cmd[@]}"; fi > $OUT/step_latency_${side}.txt
done
for side in after before; do
  cmd=($PY benchmarks/train_vs_plain.py --epochs 10 --repeats 2 --json $OUT/train_vs_plain_${side}.json)
  if [ $side = after ]; then run "${cmd[@]}"; else before "${cmd[@]}"; fi > $OUT/train_vs_plain_${side}.txt
done
for side in after before; do
  cmd=($PY benchmarks/peer_pytorch.py --prior both --widths 400 1200 --optimizers sgd adam \
       --subset 20000 --repeats 2 --torch-threads 2 --json $OUT/peer_${side}.json)
  if [ $side = after ]; then run "${cmd[@]}"; else before "${cmd[@]}"; fi > $OUT/peer_${side}.txt
done
date -u +"end %FT%TZ"
