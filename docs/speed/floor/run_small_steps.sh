#!/bin/bash
# Rounds 2 and 3 of the small-network steps, after then before (run by hand after run_floor2.sh).
cd /work/main
export GLUON_BBB_DATA=/work/shared/data OMP_NUM_THREADS=2
for r in 2 3; do
  /work/bench-venv/bin/python benchmarks/step_latency.py --networks bandit regression \
      --json docs/speed/floor/step_latency_after$r.json > docs/speed/floor/step_latency_after$r.txt
  PYTHONPATH=/tmp/before /work/bench-venv/bin/python benchmarks/step_latency.py --networks bandit regression \
      --json docs/speed/floor/step_latency_before$r.json > docs/speed/floor/step_latency_before$r.txt
done
