#!/usr/bin/env bash
# Plays 10,000 Thompson steps in one process; every 5 s logs: epoch seconds, VmRSS (kB), checkpoint mtime.
cd /work/main && . .venv/bin/activate
export OMP_NUM_THREADS=1 GLUON_BBB_DATA=/work/shared/data
gluon-bbb bandit --steps 10000 --agents thompson --output-dir runs/bandit-10k --no-progress > runs/bandit-10k/bandit.log 2>&1 &
pid=$!
while kill -0 $pid 2>/dev/null; do
  echo "$(date +%s) $(grep VmRSS /proc/$pid/status | awk '{print $2}') $(stat -c %Y runs/bandit-10k/agent-thompson.bbb 2>/dev/null || echo 0)" >> runs/bandit-10k/monitor.log
  sleep 5
done
