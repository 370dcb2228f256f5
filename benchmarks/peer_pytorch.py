#!/usr/bin/env python
"""Seconds per MNIST epoch: gluon_bbb against the same Bayes-by-Backprop MLP written in PyTorch.

The PyTorch peer is written the way a careful PyTorch user would (and the way public
PyTorch ports are): a ``BayesLinear`` module per layer holding mu and rho, sampling
w = mu + softplus(rho) * eps with ``torch.randn_like`` in ``forward``, the reparameterised
log q, the same prior (scale mixture pi=1/2, sigma1=1, sigma2=e^-6, or Gaussian sigma=1)
through ``torch.logaddexp``, Eq. (8) with uniform KL weighting, and ``torch.optim.Adam``
(learning rate 1e-3). Both sides train a 784-400-400-10 ReLU MLP on the same 60,000 MNIST
images (pixels / 126, batch 128, shuffled) for one timed epoch after ``--warmup`` steps, in one
process, taking turns ``--repeats`` times; the best epoch of each is reported with the
ratio. PyTorch uses as many threads as the machine has cores (``torch.get_num_threads()``).

Runs only where torch is installed (``pip install torch==2.13.0`` gives a CPU build).

Usage::

    GLUON_BBB_DATA=/work/shared/data python benchmarks/peer_pytorch.py --repeats 3
"""
import argparse
import math
import os
import sys
import time

import numpy as np

try:
    import torch
    import torch.nn.functional as functional
except ImportError:  # pragma: no cover -- optional peer
    sys.exit("peer_pytorch.py needs PyTorch: pip install torch==2.13.0")

import mxnet as mx
from mxnet import nd

import gluon_bbb
from gluon_bbb.models import mlp
from gluon_bbb.data import load_splits

BATCH_SIZE = 128
LEARNING_RATE = 1e-3
TARGET_SPEEDUP = 1.5  # issue 3: gluon_bbb at least 1.5x faster than the PyTorch peer


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
    def __init__(self, prior, sizes=(784, 400, 400, 10)):
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


class TorchBBB:
    def __init__(self, name, prior, images, labels, seed=0):
        torch.manual_seed(seed)
        self.name = name
        self.model = BayesMLP(prior)
        self.optimizer = torch.optim.Adam(self.model.parameters(), lr=LEARNING_RATE)
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

    def batches(self, limit=None):
        order = torch.from_numpy(self.generator.permutation(len(self.images)))
        for i, start in enumerate(range(0, len(order), BATCH_SIZE)):
            if limit is not None and i >= limit:
                return
            index = order[start:start + BATCH_SIZE]
            yield self.images[index], self.labels[index]

    def warmup(self, num_batches):
        for x, y in self.batches(num_batches):
            self.step(x, y)

    def time_epoch(self):
        start = time.perf_counter()
        total = torch.zeros(())
        for x, y in self.batches():
            total += self.step(x, y)  # summed on the tensor: no per-step host sync
        if not math.isfinite(float(total)):
            raise FloatingPointError(f"{self.name}: non-finite loss")
        return time.perf_counter() - start


# ---------------------------------------------------------------- gluon_bbb
class GluonBBB:
    def __init__(self, name, prior, images, labels, seed=0):
        mx.random.seed(seed)
        self.name = name
        self.loader = gluon_bbb.data.ArrayLoader(images, labels, BATCH_SIZE, shuffle=True, seed=seed)
        net = mlp((400, 400))
        self.trainer = gluon_bbb.BBBTrainer(net, gluon_bbb.BBBLoss(prior), optimizer="adam",
                                            optimizer_params={"learning_rate": LEARNING_RATE}, seed=seed)

    def warmup(self, num_batches):
        for i, (x, y) in enumerate(self.loader):
            if i >= num_batches:
                break
            self.trainer.step(x, y, 1.0 / len(self.loader))
        nd.waitall()

    def time_epoch(self):
        start = time.perf_counter()
        self.trainer.fit(self.loader, num_epochs=self.trainer.epoch + 1, progress=False)
        nd.waitall()
        return time.perf_counter() - start


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data-dir", default=None)
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("--subset", type=int, default=None, help="first N training images only")
    parser.add_argument("--prior", choices=("scale-mixture", "gaussian", "both"), default="both")
    args = parser.parse_args(argv)
    splits = load_splits("mnist", data_dir=args.data_dir, preprocessing="paper", subset=args.subset)
    images, labels = splits["train"]
    images = images.reshape(len(images), -1).astype(np.float32)
    priors = {"scale-mixture": ((0.5, 1.0, math.exp(-6.0)), ScaleMixture, gluon_bbb.ScaleMixturePrior),
              "gaussian": ((1.0,), Gaussian, gluon_bbb.GaussianPrior)}
    chosen = list(priors) if args.prior == "both" else [args.prior]
    models = []
    for name in chosen:
        settings, torch_prior, gluon_prior = priors[name]
        models.append(GluonBBB(f"gluon_bbb-{name}", gluon_prior(*settings), images, labels))
        models.append(TorchBBB(f"pytorch-{name}", torch_prior(*settings), images, labels))
    print(f"MNIST train: {len(images)} images, batch {BATCH_SIZE}; torch {torch.__version__} "
          f"({torch.get_num_threads()} threads), mxnet {mx.__version__}; "
          f"gluon_bbb fused path: {models[0].trainer.fused or models[0].trainer.fused_reason}", flush=True)
    for model in models:
        model.warmup(args.warmup)
    results = {model.name: [] for model in models}
    for repeat in range(args.repeats):
        for model in models:
            seconds = model.time_epoch()
            results[model.name].append(seconds)
            print(f"repeat {repeat + 1}/{args.repeats}  {model.name:<26s} {seconds:8.2f} s", flush=True)
    print(f"\ncommand: {' '.join([os.path.basename(sys.executable)] + sys.argv)}")
    print("| prior | gluon_bbb s/epoch | PyTorch s/epoch | PyTorch / gluon_bbb |")
    print("|---|---|---|---|")
    for name in chosen:
        ours, theirs = min(results[f"gluon_bbb-{name}"]), min(results[f"pytorch-{name}"])
        verdict = "meets" if theirs / ours >= TARGET_SPEEDUP else "MISSES"
        print(f"| {name} | {ours:.2f} | {theirs:.2f} | {theirs / ours:.2f} ({verdict} >= {TARGET_SPEEDUP}) |")
    return results


if __name__ == "__main__":
    main()
