#!/usr/bin/env python
"""Seconds per epoch with K weight draws a step: the loop, the batched pass and PyTorch.

``BBBTrainer(num_samples=K)`` averages Eq. (8) over K weight samples a step. It runs them
either in a loop, one sample, forward and backward pass per draw (``batch_draws=False``), or
as one batched pass (:mod:`gluon_bbb.batched`, the default for a stack of Dense layers). This
benchmark times one epoch of each, in one process, for every K of ``--draws`` (1, 2, 5, 10) on
two networks:

* ``784-100-100-10``: ReLU, batch 256;
* ``784-400-400-10`` (2x400): ReLU, batch 128;

each for ``--steps`` steps an epoch (50; the first 50 * batch MNIST training images, pixels /
126, shuffled), Adam at 1e-3, the Gaussian prior N(0, 1), on the fused path where it builds.
Models:

* ``loop-K``: ``batch_draws=False``;
* ``batched-K``: ``batch_draws=True`` (at K = 1 too, to show what the batched pass costs there);
* ``pytorch-K``: the PyTorch peer of ``peer_pytorch.py`` drawing its K networks batched
  (the K weight sets as (K, out, in) tensors, the first layer as one GEMM, the later ones
  ``torch.baddbmm``), skipped where torch is not installed;
* ``shared-prior-K`` and ``per-weight-prior-K`` (K = 1 and the largest K, on the first network):
  the Gaussian prior against a ``DiagonalGaussianPrior`` (``from_posterior`` of a fresh
  trainer), each on the path its trainer takes (the record names it).

Every model first runs ``--warmup`` untimed steps; then the models take turns ``--repeats``
times, each timing one epoch (``time.perf_counter()`` around ``fit`` or the PyTorch loop,
ending with ``mx.nd.waitall()``); the best epoch of each is reported, and every ratio is to
``loop-1`` of the same network (``pytorch-1`` for PyTorch) measured in the same run.
``--memory-steps N`` then runs N batched steps with the largest K on the first network and
records the resident set size and the C allocator's bytes in use every N / 10 steps: they
must stay flat. ``--quick`` is a seconds-long check of the script itself (random images, the
first network, K = 1 and 2, three steps, no repeats): its numbers mean nothing.

Usage::

    GLUON_BBB_DATA=/work/shared/data python benchmarks/draws_per_step.py --repeats 3 \\
        --json draws.json
    python benchmarks/draws_per_step.py --quick --json /tmp/draws.json
"""
import argparse
import json
import math
import os
import sys
import time
from pathlib import Path

import numpy as np
import mxnet as mx
from mxnet import nd

import gluon_bbb
from gluon_bbb.data import ArrayLoader, load_splits
from gluon_bbb.experiments.machine import heap_in_use, machine_info, resident_memory

sys.path.insert(0, str(Path(__file__).resolve().parent))
from timing import FitEpoch, TorchEpoch, make_net  # noqa: E402 -- sibling file

try:
    import torch
    import torch.nn.functional as functional
except ImportError:  # pragma: no cover -- optional peer
    torch = None

LEARNING_RATE = 1e-3
NETWORKS = {"784-100-100-10": ((100, 100), 256), "784-400-400-10": ((400, 400), 128)}
GOALS = {"batched K=10 / K=1 on 784-100-100-10": 4.0, "per-weight / shared prior, K=1": 1.3}


# ---------------------------------------------------------------- gluon_bbb
class GluonModel(FitEpoch):
    """BBBTrainer.fit for one epoch."""

    def __init__(self, name, hidden, loader, num_samples, batch_draws, prior=None):
        mx.random.seed(0)
        self.name, self.loader = name, loader
        self.trainer = gluon_bbb.BBBTrainer(
            make_net(hidden=hidden), gluon_bbb.BBBLoss(prior or gluon_bbb.GaussianPrior(1.0)),
            optimizer="adam", optimizer_params={"learning_rate": LEARNING_RATE}, seed=0,
            num_samples=num_samples, batch_draws=batch_draws)

    def path(self):
        trainer = self.trainer
        return {"draws_path": trainer.draws_path, "draws_reason": trainer.draws_reason,
                "fused": bool(trainer.fused), "fused_reason": trainer.fused_reason}


def per_weight_prior(hidden, loader):
    """A DiagonalGaussianPrior made from a fresh trainer's posterior (as continual learning's
    second task has it)."""
    source = GluonModel("source", hidden, loader, 1, None)
    source.trainer.prepare(next(iter(loader))[0])
    return gluon_bbb.DiagonalGaussianPrior.from_posterior(source.trainer.posterior)


# ---------------------------------------------------------------- the PyTorch peer
class TorchBatched(TorchEpoch):
    """The peer of ``peer_pytorch.py`` drawing K networks a step, batched: eps of shape
    (K, out, in) for every layer, the first layer as one GEMM of x against the K weight
    matrices stacked to (K * out, in), the later ones ``torch.baddbmm`` over (K, B, .),
    Eq. (8) averaged over the K draws."""

    def __init__(self, name, hidden, images, labels, batch_size, num_samples, seed=0):
        from peer_pytorch import Gaussian  # noqa: PLC0415 -- sibling file, needs torch
        torch.manual_seed(seed)
        self.name, self.num_samples, self.batch_size = name, num_samples, batch_size
        self.prior = Gaussian(1.0)
        sizes = (784,) + tuple(hidden) + (10,)
        self.params = []
        for n_in, n_out in zip(sizes[:-1], sizes[1:]):
            bound = math.sqrt(6.0 / (n_in + n_out))
            self.params.append([
                torch.nn.Parameter(torch.empty(n_out, n_in).uniform_(-bound, bound)),
                torch.nn.Parameter(torch.full((n_out, n_in), -5.0)),
                torch.nn.Parameter(torch.zeros(n_out)),
                torch.nn.Parameter(torch.full((n_out,), -5.0))])
        self.optimizer = torch.optim.Adam([p for layer in self.params for p in layer],
                                          lr=LEARNING_RATE)
        self.images = torch.from_numpy(images)
        self.labels = torch.from_numpy(labels.astype(np.int64))
        self.generator = np.random.default_rng(seed)
        self.num_batches = math.ceil(len(images) / batch_size)

    def _sample(self, mu, rho):
        """K samples of one tensor, (K, ...) and the summed log q - log P."""
        sigma = functional.softplus(rho)
        eps = torch.randn((self.num_samples,) + tuple(mu.shape))
        w = mu + sigma * eps
        log_q = (-torch.log(sigma) - 0.5 * math.log(2 * math.pi)).sum() * self.num_samples \
            - 0.5 * (eps ** 2).sum()
        return w, log_q - self.prior.log_prob(w)

    def step(self, x, y):
        K = self.num_samples
        self.optimizer.zero_grad(set_to_none=True)
        complexity, h = 0.0, None
        for i, (w_mu, w_rho, b_mu, b_rho) in enumerate(self.params):
            w, c_w = self._sample(w_mu, w_rho)
            b, c_b = self._sample(b_mu, b_rho)
            complexity = complexity + c_w + c_b
            if h is None:  # (B, in) x (K * out, in)^T -> (K, B, out)
                h = (x @ w.reshape(-1, w.shape[-1]).T).reshape(len(x), K, -1).transpose(0, 1)
                h = h + b[:, None, :]
            else:
                h = torch.baddbmm(b[:, None, :], h, w.transpose(1, 2))
            if i < len(self.params) - 1:
                h = torch.relu(h)
        nll = functional.cross_entropy(h.reshape(-1, h.shape[-1]), y.repeat(K), reduction="sum")
        cost = (complexity / self.num_batches + nll) / K
        cost.backward()
        self.optimizer.step()
        return cost.detach()

    def path(self):
        return {"torch": torch.__version__, "torch_threads": torch.get_num_threads()}


# ---------------------------------------------------------------- the runs
def data(quick, num_examples, data_dir):
    """(images, labels) as float32 and float32 class indices: MNIST, or random for --quick."""
    if quick:
        rng = np.random.default_rng(0)
        return (rng.uniform(0, 2, size=(num_examples, 784)).astype(np.float32),
                rng.integers(0, 10, size=num_examples).astype(np.float32))
    images, labels = load_splits("mnist", data_dir=data_dir, preprocessing="paper",
                                 subset=num_examples)["train"]
    return images.reshape(len(images), -1).astype(np.float32), labels.astype(np.float32)


def models_for(network, hidden, batch_size, draws, images, labels, first):
    loader = ArrayLoader(images, labels, batch_size, shuffle=True, seed=0)
    models = []
    for K in draws:
        models.append(GluonModel(f"loop-{K}", hidden, loader, K, False))
        models.append(GluonModel(f"batched-{K}", hidden, loader, K, True))
        if torch is not None:
            models.append(TorchBatched(f"pytorch-{K}", hidden, images, labels, batch_size, K))
    if first:
        prior = per_weight_prior(hidden, loader)
        for K in sorted({draws[0], draws[-1]}):
            batch = True if K > 1 else None  # the priors compared on the batched pass
            models.append(GluonModel(f"shared-prior-{K}", hidden, loader, K, batch))
            models.append(GluonModel(f"per-weight-prior-{K}", hidden, loader, K, batch, prior))
    return models


def memory_run(hidden, batch_size, num_samples, images, labels, steps):
    """RSS and heap in use every steps / 10 batched steps (after one block of warm-up)."""
    loader = ArrayLoader(images, labels, batch_size, shuffle=True, seed=0)
    model = GluonModel("memory", hidden, loader, num_samples, True)
    batches = list(loader)
    block = max(1, steps // 10)
    readings = []
    for s in range(steps + block):
        x, y = batches[s % len(batches)]
        cost = model.trainer.step(x, y, 0.01)[0]
        if (s + 1) % 64 == 0:
            cost.wait_to_read()
        if (s + 1) % block == 0 and s + 1 > block:
            nd.waitall()
            readings.append({"step": s + 1 - block, "rss_mb": resident_memory() / 2**20,
                             "heap_mb": (heap_in_use() or 0) / 2**20})
    return {"network": hidden, "num_samples": num_samples, "draws_path": model.trainer.draws_path,
            "readings": readings}


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data-dir", default=None, help="folder holding mnist/")
    parser.add_argument("--draws", type=int, nargs="+", default=[1, 2, 5, 10])
    parser.add_argument("--networks", nargs="+", choices=sorted(NETWORKS), default=list(NETWORKS))
    parser.add_argument("--steps", type=int, default=50, help="steps an epoch")
    parser.add_argument("--repeats", type=int, default=3, help="timed epochs per model; best reported")
    parser.add_argument("--warmup", type=int, default=10, help="untimed warm-up steps per model")
    parser.add_argument("--memory-steps", type=int, default=0,
                        help="then run this many batched steps with the largest K and record "
                             "the memory every tenth of them")
    parser.add_argument("--quick", action="store_true",
                        help="random images, the first network, K = 1 and 2, 3 steps, 1 repeat: "
                             "checks the script")
    parser.add_argument("--json", default=None, help="write the record here")
    args = parser.parse_args(argv)
    if args.quick:
        args.draws, args.steps, args.repeats, args.warmup = [1, 2], 3, 1, 1
        args.networks = args.networks[:1]
        args.memory_steps = min(args.memory_steps, 20)
    if min(args.draws) < 1 or args.steps < 1 or args.repeats < 1 or args.warmup < 0:
        parser.error("--draws, --steps and --repeats must be >= 1, --warmup >= 0")
    args.draws = sorted(set(args.draws))
    return args


def main(argv=None):
    args = parse_args(argv)
    record = {"command": " ".join([os.path.basename(sys.executable)] + sys.argv),
              "machine": machine_info(), "quick": args.quick, "draws": args.draws,
              "steps": args.steps, "repeats": args.repeats, "warmup": args.warmup,
              "learning_rate": LEARNING_RATE, "networks": {}, "goals": GOALS,
              "date": time.strftime("%Y-%m-%d %H:%M:%S")}
    for n, network in enumerate(args.networks):
        hidden, batch_size = NETWORKS[network]
        images, labels = data(args.quick, args.steps * batch_size, args.data_dir)
        models = models_for(network, hidden, batch_size, args.draws, images, labels, n == 0)
        for model in models:
            model.warmup(args.warmup)
        seconds = {model.name: [] for model in models}
        for repeat in range(args.repeats):
            for model in models:
                seconds[model.name].append(model.time_epoch())
                print(f"{network} repeat {repeat + 1}/{args.repeats}  {model.name:<20s} "
                      f"{seconds[model.name][-1]:8.3f} s", flush=True)
        best = {name: min(times) for name, times in seconds.items()}
        ratios = {}
        for name, value in best.items():
            base = "pytorch-1" if name.startswith("pytorch") else "loop-1"
            if name.startswith(("shared-prior", "per-weight-prior")):
                base = f"shared-prior-{name.rsplit('-', 1)[1]}"
            if base in best:
                ratios[name] = value / best[base]
        record["networks"][network] = {
            "hidden": list(hidden), "batch_size": batch_size, "num_examples": len(images),
            "seconds": seconds, "best_seconds": best, "ratios": ratios,
            "paths": {model.name: model.path() for model in models}}
        print_table(network, args.draws, best, ratios)
    if args.memory_steps:
        hidden, batch_size = NETWORKS[args.networks[0]]
        images, labels = data(args.quick, args.steps * batch_size, args.data_dir)
        record["memory"] = memory_run(hidden, batch_size, args.draws[-1], images, labels,
                                      args.memory_steps)
        for reading in record["memory"]["readings"]:
            print(f"memory: step {reading['step']:>7d}  RSS {reading['rss_mb']:8.1f} MB  "
                  f"heap {reading['heap_mb']:8.1f} MB")
    print(f"\ncommand: {record['command']}")
    print("machine: " + ", ".join(f"{k}={v}" for k, v in record["machine"].items()))
    if args.json:
        Path(args.json).write_text(json.dumps(record, indent=1) + "\n")
        print(f"wrote {args.json}")
    return record


def print_table(network, draws, best, ratios):
    print(f"\n{network}: seconds per epoch (best); ratios to loop K=1 (the default trainer's "
          "K=1), PyTorch's to PyTorch K=1")
    print("| K | loop s | loop / K=1 | batched s | batched / K=1 | PyTorch s | PyTorch / K=1 "
          "| PyTorch / batched |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|")
    for K in draws:
        cells = []
        for name in (f"loop-{K}", f"batched-{K}", f"pytorch-{K}"):
            cells += ([f"{best[name]:.3f}", f"{ratios.get(name, float('nan')):.2f}"]
                      if name in best else ["-", "-"])
        peer = (f"{best[f'pytorch-{K}'] / best[f'batched-{K}']:.2f}"
                if f"pytorch-{K}" in best else "-")
        print(f"| {K} | " + " | ".join(cells) + f" | {peer} |")
    for name, value in ratios.items():
        if name.startswith("per-weight-prior"):
            print(f"{name} / shared-prior: {value:.2f}")


if __name__ == "__main__":
    main()
