#!/usr/bin/env python
"""Test error after a fixed epoch budget for each training estimator (issue 16, item 6).

For each network (the 2x400 MLP and the LeNet) and each estimator ('weights', 'local',
'flipout'), one ``gluon-bbb train`` run on MNIST with the paper's protocol (validation on
the last 10,000 training images, the test set read at the best validation epoch), the
scale-mixture prior of ``bbb-mixture-400`` and the paper's cost. Every run folder is
resumable: run the same command again after an interruption. Writes a JSON summary and
prints a Markdown table.

    GLUON_BBB_DATA=../shared/data OMP_NUM_THREADS=1 python scripts/estimator_budget.py \\
        --mlp-epochs 20 --lenet-epochs 10 --output docs/estimator_budget.json
"""
import argparse
import os
import subprocess
import sys

from gluon_bbb.io.checkpoint import read_json, write_json

ESTIMATORS = ("weights", "local", "flipout")


def run(network, estimator, epochs, seed, work_dir):
    """Train (or finish) one run folder; returns its result.json."""
    out = os.path.join(work_dir, f"{network}-{estimator}-seed{seed}")
    command = [sys.executable, "-m", "gluon_bbb", "train", "--network", network,
               "--estimator", estimator, "--epochs", str(epochs), "--seed", str(seed),
               "--output-dir", out, "--no-progress"]
    if os.path.exists(os.path.join(out, "config.json")):
        command.append("--resume")
    subprocess.run(command, check=True)
    return read_json(os.path.join(out, "result.json"))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mlp-epochs", type=int, default=20)
    parser.add_argument("--lenet-epochs", type=int, default=10)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--work-dir", default="runs/estimator-budget")
    parser.add_argument("--output", default="docs/estimator_budget.json")
    args = parser.parse_args()
    rows = []
    for network, epochs in (("mlp", args.mlp_epochs), ("lenet", args.lenet_epochs)):
        for estimator in ESTIMATORS:
            result = run(network, estimator, epochs, args.seed, args.work_dir)
            history = result["history"]
            rows.append({"network": network, "estimator": estimator, "epochs": epochs,
                         "seed": args.seed, "best_epoch": result["best_epoch"],
                         "validation_error": result["validation_error"],
                         "test_error_mean": result["test_error_mean"],
                         "test_error_mc": result["test_error_mc"],
                         "seconds_per_epoch": sum(e["seconds"] for e in history) / len(history)})
            write_json(args.output, {"settings": vars(args), "runs": rows})
    print("| network | estimator | epochs | best epoch | validation | test (mean) | test (MC) |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for row in rows:
        print(f"| {row['network']} | {row['estimator']} | {row['epochs']} | {row['best_epoch']} | "
              f"{100 * row['validation_error']:.2f}% | {100 * row['test_error_mean']:.2f}% | "
              f"{100 * row['test_error_mc']:.2f}% |")


if __name__ == "__main__":
    main()
