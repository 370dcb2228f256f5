#!/bin/bash
# Second round: the epoch cells again (after, then before), for the spread of the ratios.
set -euo pipefail
cd /work/main
PY=/work/bench-venv/bin/python
OUT=docs/speed/floor
export GLUON_BBB_DATA=/work/shared/data OMP_NUM_THREADS=2
date -u +"start %FT%TZ"
for opt in sgd adam; do for w in 400 1200; do
  $PY benchmarks/epoch_time.py --subset 20000 --optimizer $opt --hidden $w $w \
      --priors gaussian scale-mixture gaussian-closed-form --paths fused --repeats 2 \
      --json $OUT/epoch_after2_${opt}_${w}.json > $OUT/epoch_after2_${opt}_${w}.txt
  PYTHONPATH=/tmp/before $PY benchmarks/epoch_time.py --subset 20000 --optimizer $opt --hidden $w $w \
      --priors gaussian scale-mixture --paths fused --repeats 2 \
      --json $OUT/epoch_before2_${opt}_${w}.json > $OUT/epoch_before2_${opt}_${w}.txt
done; done
date -u +"end %FT%TZ"
