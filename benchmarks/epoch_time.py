#!/usr/bin/env python
"""Seconds per MNIST training epoch: a deterministic MLP versus gluon_bbb's BBBTrainer.

All models are timed in ONE process on the same shuffled ``gluon_bbb.data.ArrayLoader``
(60,000 images, batch 128, 469 batches) with the same network, a hybridized
784-400-400-10 ReLU ``gluon.nn.HybridSequential`` (``--hidden 1200 1200`` for other widths; or,
with ``--network lenet``, ``gluon_bbb.models.lenet()``), and the same optimizer, Adam at
1e-3 by default, or plain SGD at 1e-3 with ``--optimizer sgd`` (MXNet's for the deterministic
network; the fused path's FusedAdam or FusedSGD for BBB):

* ``deterministic``: ``gluon.Trainer`` + ``SoftmaxCrossEntropyLoss``; the epoch loop also
  accumulates the summed loss and the training mistakes on the device, as
  ``BBBTrainer.fit`` does, so both sides do the same bookkeeping;
* ``bbb-gaussian-fused`` / ``bbb-gaussian-mxnet``: ``BBBTrainer.fit`` with
  ``GaussianPrior(1.0)``, on the fused C++ operator and on the pure-MXNet fallback path;
* ``bbb-scale-mixture-fused`` / ``bbb-scale-mixture-mxnet``: the same with
  ``ScaleMixturePrior(0.5, 1.0, exp(-6))``;
* ``bbb-gaussian-closed-form-fused`` / ``-mxnet``: ``GaussianPrior(1.0)`` with the
  closed-form KL (``BBBLoss(kl='closed_form')``);
* ``--estimators local flipout`` adds the BBB models with those training estimators
  (``-local``, ``-flipout``); ``--priors`` and ``--paths`` choose among the above;
* with ``--tutorial``, ``tutorial-scale-mixture``: the un-hybridized, tutorial-style step of
  ``benchmarks/tutorial_style.py`` with the same scale-mixture prior.

Each model first does ``--warmup`` steps (default 20, not timed). One epoch is then timed
with ``time.perf_counter()`` around the full pass, ending with ``mx.nd.waitall()``. With
``--repeats N`` every model is timed N times (the models take turns, so a slow patch of the
machine hits all of them) and the best time is reported.

Usage::

    GLUON_BBB_DATA=/work/shared/data python benchmarks/epoch_time.py --tutorial
    GLUON_BBB_DATA=/work/shared/data python benchmarks/epoch_time.py --network lenet \\
        --priors scale-mixture --paths fused --estimators weights local flipout --repeats 3
    python benchmarks/epoch_time.py --data-dir /work/shared/data --subset 6000 --json /tmp/t.json
"""
import argparse
import hashlib
import json
import math
import os
import platform
import sys
import time
from pathlib import Path

import mxnet as mx
from mxnet import autograd, gluon, nd

import gluon_bbb
from gluon_bbb.data import get_loaders

sys.path.insert(0, str(Path(__file__).resolve().parent))
from timing import FitEpoch, make_net, warm_up  # noqa: E402 -- sibling file

BATCH_SIZE = 128
LEARNING_RATE = 1e-3
# Targets from the project's issues, as ratios to the deterministic MLP on this machine.
TARGETS = {"bbb-scale-mixture-fused": 1.5, "bbb-gaussian-fused": 1.5,
           "bbb-gaussian-closed-form-fused": 1.5, "bbb-scale-mixture-mxnet": 6.0}


# ---------------------------------------------------------------- machine
def cpu_model():
    try:
        with open("/proc/cpuinfo") as handle:
            for line in handle:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def source_fingerprint():
    """sha256 (first 12 hex digits) of gluon_bbb's .py files and the newest modification time.

    The library changes often; this ties a table of timings to the code that produced it.
    """
    root = Path(gluon_bbb.__file__).resolve().parent
    digest = hashlib.sha256()
    newest = 0.0
    for path in sorted(root.glob("*.py")):
        digest.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
        newest = max(newest, path.stat().st_mtime)
    return digest.hexdigest()[:12], time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(newest)) + " UTC"


def machine_info():
    try:
        usable = len(os.sched_getaffinity(0))
    except AttributeError:
        usable = os.cpu_count()
    try:
        mkldnn = mx.runtime.Features().is_enabled("MKLDNN")
    except Exception:  # noqa: BLE001 -- purely informative
        mkldnn = None
    fingerprint, newest = source_fingerprint()
    return {
        "platform": platform.platform(),
        "python": platform.python_version(),
        "cpu": cpu_model(),
        "cores": os.cpu_count(),
        "usable_cores": usable,
        "mxnet": mx.__version__,
        "mkldnn": mkldnn,
        "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "unset"),
        "gluon_bbb": gluon_bbb.__version__,
        "gluon_bbb_sources_sha256": fingerprint,
        "gluon_bbb_sources_newest": newest,
    }


# ---------------------------------------------------------------- models
class Deterministic:
    """The plain network trained with gluon.Trainer + MXNet's optimizer + SoftmaxCrossEntropyLoss."""

    name = "deterministic"

    def __init__(self, loader, network="mlp", hidden=(400, 400), optimizer="adam"):
        self.loader = loader
        self.net = make_net(network, hidden)
        self.net.hybridize()
        self.loss = gluon.loss.SoftmaxCrossEntropyLoss()
        self.loss.hybridize()
        self.trainer = gluon.Trainer(self.net.collect_params(), optimizer,
                                     {"learning_rate": LEARNING_RATE})

    def step(self, data, label):
        with autograd.record():
            pred = self.net(data)
            loss = self.loss(pred, label)
        loss.backward()
        self.trainer.step(data.shape[0])
        return loss, pred

    def warmup(self, num_batches):
        warm_up(self.loader, num_batches, self.step)

    def time_epoch(self):
        start = time.perf_counter()
        total = nd.zeros((1,))
        mistakes = nd.zeros((1,))
        for data, label in self.loader:
            loss, pred = self.step(data, label)
            total += nd.sum(loss)
            mistakes += nd.sum(nd.argmax(pred, axis=-1) != label)
        nd.waitall()
        seconds = time.perf_counter() - start
        if not math.isfinite(float(total.asscalar())):
            raise FloatingPointError("deterministic training produced a non-finite loss")
        return seconds


class BBB(FitEpoch):
    """gluon_bbb.BBBTrainer.fit for one epoch."""

    def __init__(self, name, prior, loader, fused, network="mlp", estimator="weights",
                 hidden=(400, 400), optimizer="adam", kl="monte_carlo"):
        self.name = name
        self.loader = loader
        self.trainer = gluon_bbb.BBBTrainer(
            make_net(network, hidden), gluon_bbb.BBBLoss(prior, kl=kl), optimizer=optimizer,
            optimizer_params={"learning_rate": LEARNING_RATE}, seed=0, fused=fused,
            estimator=estimator)


class Tutorial:
    """benchmarks/tutorial_style.py, a fresh model for every timed epoch."""

    name = "tutorial-scale-mixture"

    def __init__(self, loader, warmup_batches):
        from tutorial_style import time_epoch  # noqa: PLC0415 -- optional, sibling file
        self._time_epoch = time_epoch
        self.loader = loader
        self.warmup_batches = warmup_batches

    def warmup(self, num_batches):
        pass  # time_epoch does its own warm-up

    def time_epoch(self):
        return self._time_epoch(self.loader, prior="scale-mixture",
                                warmup_batches=self.warmup_batches)


# ---------------------------------------------------------------- report
def format_table(results, baseline):
    rows = [("model", "s/epoch (best)", "all repeats (s)", "ratio to deterministic")]
    for name, times in results.items():
        best = min(times)
        rows.append((name, f"{best:.2f}", ", ".join(f"{t:.2f}" for t in times),
                     f"{best / baseline:.2f}"))
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = ["| " + " | ".join(cell.ljust(w) for cell, w in zip(row, widths)) + " |" for row in rows]
    lines.insert(1, "|" + "|".join("-" * (w + 2) for w in widths) + "|")
    return "\n".join(lines)


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data-dir", default=None,
                        help="folder holding mnist/ (default: $GLUON_BBB_DATA and the usual places)")
    parser.add_argument("--subset", "--epochs-subset", dest="subset", type=int, default=None,
                        help="use only the first N training images (quick runs); default all 60,000")
    parser.add_argument("--repeats", type=int, default=1, help="timed epochs per model; best is reported")
    parser.add_argument("--warmup", type=int, default=20, help="untimed warm-up steps per model")
    parser.add_argument("--tutorial", action="store_true",
                        help="also time benchmarks/tutorial_style.py (scale-mixture prior)")
    parser.add_argument("--json", default=None, help="write the results to this JSON file")
    parser.add_argument("--no-fused", action="store_true", help="time only the pure-MXNet path")
    parser.add_argument("--network", choices=("mlp", "lenet"), default="mlp",
                        help="the network of every model: the 2x400 MLP or the LeNet-5")
    parser.add_argument("--hidden", nargs="+", type=int, default=[400, 400],
                        help="hidden widths of the MLP")
    parser.add_argument("--optimizer", choices=("adam", "sgd"), default="adam",
                        help="of every model (plain SGD without momentum)")
    parser.add_argument("--priors", nargs="+",
                        choices=("gaussian", "scale-mixture", "gaussian-closed-form"),
                        default=["gaussian", "scale-mixture"])
    parser.add_argument("--paths", nargs="+", choices=("fused", "mxnet"), default=["fused", "mxnet"],
                        help="the fused operator and/or the pure-MXNet path")
    parser.add_argument("--estimators", nargs="+", choices=gluon_bbb.estimators.ESTIMATORS,
                        default=["weights"], help="training estimators of the BBB models "
                        "(names get a -local or -flipout suffix)")
    args = parser.parse_args(argv)
    if args.repeats < 1:
        parser.error("--repeats must be >= 1")
    if args.subset is not None and args.subset < 1:
        parser.error("--subset must be >= 1")
    return args


def main(argv=None):
    args = parse_args(argv)
    mx.random.seed(0)
    info = machine_info()
    loader = get_loaders("mnist", batch_size=BATCH_SIZE, data_dir=args.data_dir,
                         subset=args.subset)["train"]
    print(f"MNIST train: {loader.num_examples} images, batch {BATCH_SIZE}, {len(loader)} batches/epoch",
          flush=True)
    print(f"network: {args.network} {args.hidden if args.network == 'mlp' else ''}, "
          f"optimizer: {args.optimizer}", flush=True)
    models = [
        Deterministic(loader, args.network, tuple(args.hidden), args.optimizer),
    ]
    priors = {"gaussian": lambda: gluon_bbb.GaussianPrior(1.0),
              "scale-mixture": lambda: gluon_bbb.ScaleMixturePrior(0.5, 1.0, math.exp(-6.0)),
              "gaussian-closed-form": lambda: gluon_bbb.GaussianPrior(1.0)}
    paths = [path for path in args.paths if not (args.no_fused and path == "fused")]
    for path in paths:
        for prior_name in args.priors:
            for estimator in args.estimators:
                suffix = "" if estimator == "weights" else f"-{estimator}"
                models.append(BBB(f"bbb-{prior_name}-{path}{suffix}", priors[prior_name](), loader,
                                  path == "fused", args.network, estimator,
                                  tuple(args.hidden), args.optimizer,
                                  "closed_form" if prior_name.endswith("closed-form")
                                  else "monte_carlo"))
    if args.tutorial:
        models.append(Tutorial(loader, args.warmup))
    for model in models:
        model.warmup(args.warmup)
    results = {model.name: [] for model in models}
    for repeat in range(args.repeats):
        for model in models:
            seconds = model.time_epoch()
            results[model.name].append(seconds)
            print(f"repeat {repeat + 1}/{args.repeats}  {model.name:<24s} {seconds:8.2f} s", flush=True)

    baseline = min(results["deterministic"])
    print()
    print("machine: " + ", ".join(f"{k}={v}" for k, v in info.items()))
    print(f"command: {' '.join([os.path.basename(sys.executable)] + sys.argv)}")
    print()
    print(format_table(results, baseline))
    print()
    for name, target in TARGETS.items():
        if name in results:
            ratio = min(results[name]) / baseline
            verdict = "meets" if ratio <= target else "MISSES"
            print(f"{name} / deterministic = {ratio:.2f} ({verdict} the target <= {target:g})")

    if args.json:
        payload = {
            "machine": info,
            "argv": sys.argv,
            "num_examples": loader.num_examples,
            "batch_size": BATCH_SIZE,
            "num_batches": len(loader),
            "network": args.network,
            "hidden": args.hidden,
            "optimizer": args.optimizer,
            "warmup_batches": args.warmup,
            "repeats": args.repeats,
            "seconds": results,
            "best_seconds": {name: min(times) for name, times in results.items()},
            "ratio_to_deterministic": {name: min(times) / baseline for name, times in results.items()},
            "target_ratios": TARGETS,
            "date": time.strftime("%Y-%m-%d %H:%M:%S"),
        }
        Path(args.json).write_text(json.dumps(payload, indent=2) + "\n")
        print(f"wrote {args.json}")
    return results


if __name__ == "__main__":
    main()
