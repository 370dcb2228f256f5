"""benchmarks/draws_per_step.py runs (its --quick mode, a few seconds of work on random
images) and writes a complete record: every model timed, every ratio finite and positive,
each model on the path its name says."""
import json
import math
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_quick_mode_writes_a_valid_record(tmp_path):
    out = tmp_path / "draws.json"
    env = dict(os.environ, PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1")
    result = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "draws_per_step.py"),
                             "--quick", "--memory-steps", "10", "--json", str(out)],
                            capture_output=True, text=True, env=env, timeout=600)
    assert result.returncode == 0, result.stderr[-2000:]
    record = json.loads(out.read_text())
    assert record["quick"] and record["draws"] == [1, 2]
    (network, run), = record["networks"].items()
    assert network == "784-100-100-10" and run["batch_size"] == 256
    names = [f"{kind}-{k}" for kind in ("loop", "batched", "shared-prior", "per-weight-prior")
             for k in (1, 2)]
    try:
        import torch  # noqa: F401
        names += ["pytorch-1", "pytorch-2"]
    except ImportError:
        pass
    assert sorted(run["best_seconds"]) == sorted(names)
    for name in names:
        assert len(run["seconds"][name]) == record["repeats"] == 1
        assert 0 < run["best_seconds"][name] == min(run["seconds"][name])
        assert math.isfinite(run["ratios"][name]) and run["ratios"][name] > 0
    assert run["ratios"]["loop-1"] == 1.0
    paths = run["paths"]
    assert [paths[f"loop-{k}"]["draws_path"] for k in (1, 2)] == ["loop", "loop"]
    assert [paths[f"batched-{k}"]["draws_path"] for k in (1, 2)] == ["batched", "batched"]
    assert paths["shared-prior-2"]["draws_path"] == "batched"
    memory = record["memory"]
    assert memory["num_samples"] == 2 and memory["draws_path"] == "batched"
    assert len(memory["readings"]) == 10 and all(r["rss_mb"] > 0 for r in memory["readings"])
    assert "| 2 |" in result.stdout  # the table's row for K = 2
