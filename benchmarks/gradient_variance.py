#!/usr/bin/env python
"""Variance of the minibatch gradient d cost / d mu under each training estimator (issue 16).

At a fixed theta, a trained network's best epoch (``best.bbb`` of a run folder, e.g. the
committed ``results/bbb-mixture-400``), and on one fixed training minibatch, the cost of
Eq. (8) with pi = 1/M, and its likelihood term alone (pi = 0), are differentiated ``--draws``
times with fresh noise for each estimator of :mod:`gluon_bbb.estimators`. The learning rate is set to 0, so theta does not move. For
every layer the variance of each weight's gradient over the draws is averaged over the
layer's weights; the table gives it per estimator and as a ratio to weight sampling.

Optionally (``--time-steps N``) the seconds per training step of each estimator, the
estimators taking turns ``--repeats`` times, best of the repeats: a ratio measured in one
run. Time only on an otherwise idle machine.

Usage::

    GLUON_BBB_DATA=/work/shared/data python benchmarks/gradient_variance.py results/bbb-mixture-400 \\
        --json docs/gradient_variance_mlp.json
"""
import argparse
import json
import math
import os
import platform
import sys
import time

import mxnet as mx
import numpy as np
from mxnet import nd

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from gluon_bbb import data  # noqa: E402
from gluon_bbb.estimators import ESTIMATORS  # noqa: E402
from gluon_bbb.experiments.runfolder import read_run_config  # noqa: E402
from gluon_bbb.experiments.runners import make_bbb_trainer  # noqa: E402


def trainer_at_best(run_dir, config, estimator, ctx):
    mx.random.seed(config["seed"])
    trainer = make_bbb_trainer(config, ctx, estimator=estimator)
    trainer.load(os.path.join(run_dir, "best.bbb"), optimizer=False)
    trainer.gluon_trainer.set_learning_rate(0.0)  # gradients only: theta stays where it is
    return trainer


def gradient_draws(trainer, x, y, kl_weight, draws, seed):
    """(draws, weights) per layer: the gradient of the cost wrt mu, one row per draw."""
    trainer.reseed(seed)
    # the tensor's name without the network's prefix: every trainer's network has its own
    names = [name.split("_", 1)[-1] for name in trainer.posterior.names]
    rows = {name: [] for name in names}
    for _ in range(draws):
        trainer.step(x, y, kl_weight)
        for name, mu in zip(names, trainer.posterior.mus):
            rows[name].append(mu.grad().asnumpy().ravel().copy())
    return {name: np.array(values) for name, values in rows.items()}


def step_seconds(trainer, x, y, kl_weight, steps):
    for _ in range(5):  # warm-up
        trainer.step(x, y, kl_weight)
    nd.waitall()
    start = time.perf_counter()
    for _ in range(steps):
        trainer.step(x, y, kl_weight)
    nd.waitall()
    return (time.perf_counter() - start) / steps


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run_dir")
    parser.add_argument("--data-dir", default=None)
    parser.add_argument("--draws", type=int, default=200)
    parser.add_argument("--time-steps", type=int, default=0)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--json", default=None)
    args = parser.parse_args(argv)
    ctx = mx.cpu()
    config = read_run_config(args.run_dir)
    loaders = data.get_loaders(config["dataset"], batch_size=config["batch_size"],
                               data_dir=args.data_dir, preprocessing=config["preprocessing"],
                               num_validation=config["num_validation"], subset=config["subset"],
                               ctx=ctx, seed=config["seed"])
    x, y = next(iter(loaders["train"]))
    kl_weight = 1.0 / len(loaders["train"])
    trainers = {est: trainer_at_best(args.run_dir, config, est, ctx) for est in ESTIMATORS}
    # the whole cost (pi = 1/M), and its likelihood term alone (pi = 0)
    terms = {"cost": kl_weight, "likelihood": 0.0}
    variances = {term: {} for term in terms}
    reports = {est: trainer.estimator_report for est, trainer in trainers.items()}
    for term, weight in terms.items():
        for est, trainer in trainers.items():
            draws = gradient_draws(trainer, x, y, weight, args.draws, seed=2024)
            variances[term][est] = {name: float(g.var(axis=0, ddof=1).mean())
                                    for name, g in draws.items()}
        print(f"\n{args.run_dir}: mean variance over the weights of d {term} / d mu, "
              f"{args.draws} draws, one minibatch of {x.shape[0]}, pi = {weight:.3g}")
        print("| layer | " + " | ".join(ESTIMATORS) + " | local / weights | flipout / weights |")
        print("|---|" + "---:|" * (len(ESTIMATORS) + 2))
        for name in variances[term]["weights"]:
            values = [variances[term][est][name] for est in ESTIMATORS]
            print(f"| {name} | " + " | ".join(f"{v:.3e}" for v in values)
                  + f" | {values[1] / values[0]:.3f} | {values[2] / values[0]:.3f} |")
    seconds = {}
    if args.time_steps:
        best = {est: math.inf for est in ESTIMATORS}
        for _ in range(args.repeats):
            for est, trainer in trainers.items():
                best[est] = min(best[est], step_seconds(trainer, x, y, kl_weight, args.time_steps))
        seconds = best
        print("seconds per step (best of {}): ".format(args.repeats)
              + ", ".join(f"{est} {1e3 * s:.2f} ms ({s / best['weights']:.2f}x)" for est, s in best.items()))
    record = {"run_dir": args.run_dir, "draws": args.draws, "batch_size": int(x.shape[0]),
              "kl_weight": kl_weight, "variance": variances, "estimator_report": reports,
              "step_seconds": seconds, "fused": trainers["weights"].fused,
              "machine": {"platform": platform.platform(), "processor": platform.processor(),
                          "cpus": os.cpu_count(), "mxnet": mx.__version__}}
    if args.json:
        with open(args.json, "w") as f:
            json.dump(record, f, indent=1)


if __name__ == "__main__":
    main()
