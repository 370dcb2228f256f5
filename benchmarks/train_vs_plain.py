#!/usr/bin/env python
"""A whole ``gluon-bbb train`` run against a plain Gluon training loop of the same length.

Both run as fresh processes, one after the other, timed from start to exit (interpreter start,
imports, data loading, the fused operator's load, training, evaluation):

- ``gluon-bbb train --dataset mnist --hidden H H --epochs E --optimizer O --no-progress`` into
  a temporary run folder: Bayes by Backprop (scale mixture, one sample) on the first 50,000
  training images, the validation error of the posterior mean after every epoch, a checkpoint
  after every epoch, and at the end the test error of the posterior mean and of 10 Monte Carlo
  samples;
- ``--plain``, the deterministic baseline: the same 784-H-H-10 ReLU MLP hybridized,
  ``gluon.Trainer`` with MXNet's optimizer O at 1e-3, softmax cross-entropy, batch 128, on
  the same loaders (``gluon_bbb.data.get_loaders``, the CLI's preprocessing and validation
  split), the validation error after every epoch and the test error at the end; no
  checkpoints and no Monte Carlo samples, which a plain loop does not have.

Usage::

    OMP_NUM_THREADS=2 GLUON_BBB_DATA=/work/shared/data python benchmarks/train_vs_plain.py \\
        [--hidden 400 400] [--epochs 10] [--optimizer adam] [--repeats 2] [--json out.json]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.abspath(__file__)


def plain_loop(hidden, epochs, optimizer):
    """The deterministic baseline, in this process; the test error at the end."""
    import mxnet as mx
    from mxnet import autograd, gluon, nd

    from gluon_bbb.data import get_loaders

    mx.random.seed(0)
    loaders = get_loaders("mnist", batch_size=128, num_validation=10000, seed=0)
    net = gluon.nn.HybridSequential()
    for units in hidden:
        net.add(gluon.nn.Dense(units, activation="relu"))
    net.add(gluon.nn.Dense(10))
    net.initialize(mx.init.Xavier())
    net.hybridize()
    loss = gluon.loss.SoftmaxCrossEntropyLoss()
    trainer = gluon.Trainer(net.collect_params(), optimizer, {"learning_rate": 1e-3})

    def error(loader):
        wrong = nd.zeros((1,))
        for data, label in loader:
            wrong += nd.sum(nd.argmax(net(data), axis=-1) != label)
        return float(wrong.asscalar()) / loader.num_examples

    for epoch in range(epochs):
        total = nd.zeros((1,))
        for data, label in loaders["train"]:
            with autograd.record():
                value = loss(net(data), label)
            value.backward()
            trainer.step(data.shape[0])
            total += nd.sum(value)
        print(f"epoch {epoch + 1}: loss {float(total.asscalar()):.1f}, "
              f"validation error {error(loaders['validation']):.4f}", flush=True)
    return error(loaders["test"])


def timed(command, env, cwd):
    start = time.perf_counter()
    result = subprocess.run(command, env=env, cwd=cwd, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    if result.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} failed:\n{result.stderr[-2000:]}")
    return seconds, result.stdout


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hidden", nargs="+", type=int, default=[400, 400])
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--optimizer", choices=("adam", "sgd"), default="adam")
    parser.add_argument("--repeats", type=int, default=1, help="runs of each; the best is reported")
    parser.add_argument("--json", help="write every number here")
    parser.add_argument("--plain", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.plain:
        print(f"test error {plain_loop(args.hidden, args.epochs, args.optimizer):.4f}")
        return

    from gluon_bbb.experiments.machine import machine_info

    env = dict(os.environ)
    hidden = [str(h) for h in args.hidden]
    times = {"gluon-bbb train": [], "plain Gluon loop": []}
    commands = {}
    for _ in range(args.repeats):
        with tempfile.TemporaryDirectory() as run_dir:
            commands["gluon-bbb train"] = [
                sys.executable, "-m", "gluon_bbb", "train", "--dataset", "mnist", "--hidden",
                *hidden, "--epochs", str(args.epochs), "--optimizer", args.optimizer,
                "--no-progress", "--output-dir", os.path.join(run_dir, "run")]
            # from the run folder: ``-m`` puts the working directory first on sys.path
            seconds, _ = timed(commands["gluon-bbb train"], env, run_dir)
            times["gluon-bbb train"].append(seconds)
        commands["plain Gluon loop"] = [sys.executable, HERE, "--plain", "--hidden", *hidden,
                                        "--epochs", str(args.epochs), "--optimizer",
                                        args.optimizer]
        seconds, _ = timed(commands["plain Gluon loop"], env, None)
        times["plain Gluon loop"].append(seconds)
        print(", ".join(f"{name}: {values[-1]:.1f} s" for name, values in times.items()),
              flush=True)
    best = {name: min(values) for name, values in times.items()}
    ratio = best["gluon-bbb train"] / best["plain Gluon loop"]
    print(f"\n| run | seconds (best of {args.repeats}) | all |\n|---|---:|---|")
    for name, values in times.items():
        print(f"| {name} | {best[name]:.1f} | {', '.join(f'{v:.1f}' for v in values)} |")
    print(f"\nratio {ratio:.2f}")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as handle:
            json.dump({"machine": machine_info(), "args": vars(args), "commands": commands,
                       "seconds": times, "best_seconds": best, "ratio": ratio}, handle, indent=1)


if __name__ == "__main__":
    main()
