"""Re-measure the Monte Carlo test errors of committed Bayes-by-Backprop networks.

The posterior-mean errors are deterministic; the Monte Carlo averages depend on the weight
noise that the fused operator draws, so they move when its generator changes. For each run
folder this evaluates the network(s) asked for with each number of samples and writes one
JSON record: the value in the run's result.json (where it records one), the value measured
now, and the posterior-mean error as a check that the network itself did not change.

    GLUON_BBB_DATA=../shared/data python scripts/remeasure_mc.py results/bbb-mixture-400 \\
        --samples 10 100 --networks best last --json runs/remeasure.json
"""
import argparse
import json
import os
import sys
import time

from gluon_bbb import experiments


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+", help="run folders with best.bbb")
    parser.add_argument("--samples", type=int, nargs="+", default=[10])
    parser.add_argument("--networks", nargs="+", choices=["best", "last"], default=["best"])
    parser.add_argument("--json", required=True, help="where to write the record")
    args = parser.parse_args(argv)
    rows = []
    for run in args.runs:
        result = experiments.read_result(run)  # checked like every run folder's file
        for network in args.networks:
            if network == "last" and not os.path.isfile(os.path.join(run, "checkpoint.bbb")):
                continue
            for samples in args.samples:
                start = time.perf_counter()
                measured = experiments.evaluate_run(run, mc_samples=samples, network=network)
                recorded = (result.get("test_error_mc") if network == "best"
                            and samples == result.get("mc_samples") else None)
                rows.append({"run": run, "network": network, "epoch": measured["epoch"],
                             "mc_samples": samples, "recorded": recorded,
                             "measured": measured["test_error_mc"],
                             "test_error_mean": measured["test_error_mean"],
                             "seconds": round(time.perf_counter() - start, 1)})
                row = rows[-1]
                print(f"{run} {network} MC {samples}: recorded {row['recorded']}, "
                      f"now {row['measured']} (mean {row['test_error_mean']})", flush=True)
    with open(args.json, "w") as f:
        json.dump({"command": " ".join(sys.argv), "rows": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
