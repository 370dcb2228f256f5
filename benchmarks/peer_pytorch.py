#!/usr/bin/env python
"""Seconds per MNIST epoch: gluon_bbb against the same Bayes-by-Backprop MLP written in PyTorch.

The PyTorch peer is written the way a careful PyTorch user would (and the way public
PyTorch ports are): a ``BayesLinear`` module per layer holding mu and rho, sampling
w = mu + softplus(rho) * eps with ``torch.randn_like`` in ``forward``, the reparameterised
log q, the same prior (scale mixture pi=1/2, sigma1=1, sigma2=e^-6, or Gaussian sigma=1)
through ``torch.logaddexp``, Eq. (8) with uniform KL weighting, and ``torch.optim.Adam``
or ``torch.optim.SGD`` (learning rate 1e-3; ``--optimizers``). Both sides train a 784-H-H-10
ReLU MLP (``--widths``, H = 400 by default) on the same 60,000 MNIST images (pixels / 126,
batch 128, shuffled) for one timed epoch after ``--warmup`` steps, in one process, taking
turns ``--repeats`` times; the best epoch of each is reported with the ratio. gluon_bbb runs
on its fused path and, with ``--mxnet-path``, also on the pure-MXNet path (the one a GPU
uses). PyTorch uses ``torch.get_num_threads()`` threads (``--torch-threads`` sets it).

Runs only where torch is installed (``pip install torch==2.13.0`` gives a CPU build).

Usage::

    GLUON_BBB_DATA=/work/shared/data python benchmarks/peer_pytorch.py --repeats 3
    GLUON_BBB_DATA=/work/shared/data python benchmarks/peer_pytorch.py --prior scale-mixture \
        --widths 400 1200 --optimizers sgd adam --mxnet-path --json docs/speed/peer.json
"""
import json
import argparse
import math
import os
import sys

import numpy as np

try:
    import torch
    import torch.nn.functional as functional
except ImportError:  # pragma: no cover -- optional peer
    sys.exit("peer_pytorch.py needs PyTorch: pip install torch==2.13.0")

import mxnet as mx

import gluon_bbb
from gluon_bbb.models import mlp
from gluon_bbb.data import load_splits

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from timing import FitEpoch, TorchEpoch  # noqa: E402 -- sibling file

BATCH_SIZE = 128
LEARNING_RATE = 1e-3
TARGET_SPEEDUP = 2.0  # the target: gluon_bbb at least twice as fast as the PyTorch peer


# ---------------------------------------------------------------- the PyTorch peer
class ScaleMixture:
    def __init__(self, pi, sigma1, sigma2):
        self.log_pi, self.log_1mpi = math.log(pi), math.log1p(-pi)
        self.sigma1, self.sigma2 = sigma1, sigma2

    def log_prob(self, w):
        a = self.log_pi - math.log(self.sigma1) - 0.5 * (w / self.sigma1) ** 2
        b = self.log_1mpi - math.log(self.sigma2) - 0.5 * (w / self.sigma2) ** 2
        return (torch.logaddexp(a, b) - 0.5 * math.log(2 * math.pi)).sum()


class Gaussian:
    def __init__(self, sigma):
        self.sigma = sigma

    def log_prob(self, w):
        return (-math.log(self.sigma) - 0.5 * (w / self.sigma) ** 2 - 0.5 * math.log(2 * math.pi)).sum()


class BayesLinear(torch.nn.Module):
    def __init__(self, in_features, out_features, prior, rho_init=-5.0):
        super().__init__()
        bound = math.sqrt(6.0 / (in_features + out_features))
        self.weight_mu = torch.nn.Parameter(torch.empty(out_features, in_features).uniform_(-bound, bound))
        self.weight_rho = torch.nn.Parameter(torch.full((out_features, in_features), rho_init))
        self.bias_mu = torch.nn.Parameter(torch.zeros(out_features))
        self.bias_rho = torch.nn.Parameter(torch.full((out_features,), rho_init))
        self.prior = prior
        self.complexity = None

    def forward(self, x):
        total = 0.0
        sampled = []
        for mu, rho in ((self.weight_mu, self.weight_rho), (self.bias_mu, self.bias_rho)):
            sigma = functional.softplus(rho)
            eps = torch.randn_like(mu)
            w = mu + sigma * eps
            log_q = (-torch.log(sigma) - 0.5 * eps ** 2 - 0.5 * math.log(2 * math.pi)).sum()
            total = total + log_q - self.prior.log_prob(w)
            sampled.append(w)
        self.complexity = total
        return functional.linear(x, sampled[0], sampled[1])


class BayesMLP(torch.nn.Module):
    def __init__(self, prior, sizes):
        super().__init__()
        self.layers = torch.nn.ModuleList([BayesLinear(n_in, n_out, prior)
                                           for n_in, n_out in zip(sizes[:-1], sizes[1:])])

    def forward(self, x):
        for i, layer in enumerate(self.layers):
            x = layer(x)
            if i < len(self.layers) - 1:
                x = torch.relu(x)
        return x

    def complexity(self):
        return sum(layer.complexity for layer in self.layers)


TORCH_OPTIMIZERS = {"adam": torch.optim.Adam, "sgd": torch.optim.SGD}


class TorchBBB(TorchEpoch):
    def __init__(self, name, prior, images, labels, width, optimizer, seed=0):
        torch.manual_seed(seed)
        self.name, self.batch_size = name, BATCH_SIZE
        self.model = BayesMLP(prior, (784, width, width, 10))
        self.optimizer = TORCH_OPTIMIZERS[optimizer](self.model.parameters(), lr=LEARNING_RATE)
        self.images = torch.from_numpy(images)
        self.labels = torch.from_numpy(labels.astype(np.int64))
        self.generator = np.random.default_rng(seed)
        self.num_batches = math.ceil(len(images) / BATCH_SIZE)

    def step(self, x, y):
        self.optimizer.zero_grad(set_to_none=True)
        logits = self.model(x)
        nll = functional.cross_entropy(logits, y, reduction="sum")
        cost = self.model.complexity() / self.num_batches + nll
        cost.backward()
        self.optimizer.step()
        return cost.detach()


# ---------------------------------------------------------------- gluon_bbb
class GluonBBB(FitEpoch):
    def __init__(self, name, prior, images, labels, width, optimizer, fused=None, seed=0):
        mx.random.seed(seed)
        self.name = name
        self.loader = gluon_bbb.data.ArrayLoader(images, labels, BATCH_SIZE, shuffle=True, seed=seed)
        net = mlp((width, width))
        self.trainer = gluon_bbb.BBBTrainer(net, gluon_bbb.BBBLoss(prior), optimizer=optimizer,
                                            optimizer_params={"learning_rate": LEARNING_RATE},
                                            seed=seed, fused=fused)
        if fused is False and self.trainer.fused:
            raise RuntimeError(f"{name}: asked for the pure-MXNet path, got the fused one")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data-dir", default=None)
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("--subset", type=int, default=None, help="first N training images only")
    parser.add_argument("--prior", choices=("scale-mixture", "gaussian", "both"), default="both")
    parser.add_argument("--widths", type=int, nargs="+", default=[400])
    parser.add_argument("--optimizers", nargs="+", choices=sorted(TORCH_OPTIMIZERS), default=["adam"])
    parser.add_argument("--mxnet-path", action="store_true",
                        help="also time gluon_bbb's pure-MXNet path (fused=False)")
    parser.add_argument("--torch-threads", type=int, default=None)
    parser.add_argument("--json", help="write every time here")
    args = parser.parse_args(argv)
    if args.torch_threads:
        torch.set_num_threads(args.torch_threads)
    splits = load_splits("mnist", data_dir=args.data_dir, preprocessing="paper", subset=args.subset)
    images, labels = splits["train"]
    images = images.reshape(len(images), -1).astype(np.float32)
    priors = {"scale-mixture": ((0.5, 1.0, math.exp(-6.0)), ScaleMixture, gluon_bbb.ScaleMixturePrior),
              "gaussian": ((1.0,), Gaussian, gluon_bbb.GaussianPrior)}
    chosen = list(priors) if args.prior == "both" else [args.prior]
    cases = [(name, width, optimizer) for name in chosen for width in args.widths
             for optimizer in args.optimizers]
    results, fused_reason = [], None
    for name, width, optimizer in cases:
        settings, torch_prior, gluon_prior = priors[name]
        models = {"gluon_bbb": GluonBBB("gluon_bbb", gluon_prior(*settings), images, labels, width,
                                        optimizer),
                  "pytorch": TorchBBB("pytorch", torch_prior(*settings), images, labels, width,
                                      optimizer)}
        if args.mxnet_path:
            models["gluon_bbb pure-MXNet"] = GluonBBB("gluon_bbb pure-MXNet", gluon_prior(*settings),
                                                      images, labels, width, optimizer, fused=False)
        for model in models.values():
            model.warmup(args.warmup)
        fused_reason = models["gluon_bbb"].trainer.fused or models["gluon_bbb"].trainer.fused_reason
        seconds = {label: [] for label in models}
        for repeat in range(args.repeats):
            for label, model in models.items():
                seconds[label].append(model.time_epoch())
                print(f"{name} 2x{width} {optimizer} repeat {repeat + 1}/{args.repeats}  {label:<22s} "
                      f"{seconds[label][-1]:8.2f} s", flush=True)
        results.append({"prior": name, "width": width, "optimizer": optimizer, "seconds": seconds})
        del models
    command = " ".join([os.path.basename(sys.executable)] + sys.argv)
    print(f"\ncommand: {command}")
    print(f"MNIST train: {len(images)} images, batch {BATCH_SIZE}; torch {torch.__version__} "
          f"({torch.get_num_threads()} threads), mxnet {mx.__version__}; gluon_bbb fused path: "
          f"{fused_reason}")
    mxnet_column = " | pure-MXNet s/epoch" if args.mxnet_path else ""
    print(f"| prior | network | optimizer | gluon_bbb s/epoch{mxnet_column} | PyTorch s/epoch "
          f"| PyTorch / gluon_bbb |")
    print("|---|---|---|---:|" + ("---:|" if args.mxnet_path else "") + "---:|---|")
    for row in results:
        best = {label: min(times) for label, times in row["seconds"].items()}
        ours, theirs = best["gluon_bbb"], best["pytorch"]
        verdict = "meets" if theirs / ours >= TARGET_SPEEDUP else "MISSES"
        mxnet_cell = f" | {best['gluon_bbb pure-MXNet']:.2f}" if args.mxnet_path else ""
        print(f"| {row['prior']} | 2x{row['width']} | {row['optimizer']} | {ours:.2f}{mxnet_cell} "
              f"| {theirs:.2f} | {theirs / ours:.2f} ({verdict} >= {TARGET_SPEEDUP}) |")
    if args.json:
        from gluon_bbb.experiments.machine import machine_info
        with open(args.json, "w", encoding="utf-8") as handle:
            json.dump({"command": command, "machine": machine_info(), "torch": torch.__version__,
                       "torch_threads": torch.get_num_threads(), "results": results}, handle,
                      indent=1)
    return results


if __name__ == "__main__":
    main()
