#!/usr/bin/env python
"""Wall time of one training step for small networks: gluon_bbb against a PyTorch peer.

For each network below, one process times, taking turns in rounds:

- ``gluon_bbb BBB``: one :meth:`gluon_bbb.BBBTrainer.step` (scale-mixture prior, Adam, the
  fused operator where it builds), called the way a user calls it, with a Python float for the
  complexity weight;
- ``gluon_bbb deterministic``: one deterministic step of the same network as gluon_bbb's bandit
  agents do it (:class:`gluon_bbb.apps.bandit.EpsilonGreedyAgent`): the network and its cost in one
  hybridized graph, ``autograd.record``, ``backward``, ``gluon.Trainer`` with
  :func:`gluon_bbb.fused.optimizers.adam` (one fused Adam call for all tensors);
- ``PyTorch BBB`` and ``PyTorch deterministic``: the same two steps written plainly in PyTorch
  (``benchmarks/peer_pytorch.py``'s ``BayesMLP``, ``torch.optim.Adam``).

Each step is timed alone: the clock stops once its work is done (``mx.nd.waitall()``; PyTorch
on the CPU is synchronous), which is the latency an agent that acts after every update sees.
BBB steps are timed with 1 and 2 weight samples. The networks:

- bandit: the mushroom bandit's reward network, 119-100-100-1 (117 mushroom features and a
  one-hot action), batch 64, Gaussian likelihood;
- regression: the toy regression's 1-100-100-1, batch 32, Gaussian likelihood;
- mnist: the paper's 784-400-400-10, batch 128, softmax likelihood.

Inputs are random (the time does not depend on the values). PyTorch runs with
``--torch-threads`` threads, default 1: what importing mxnet leaves it, and PyTorch's fastest
setting for the two small networks on a 2-core machine. More threads speed up its MNIST step,
but its idle threads then spin and slow the MXNet steps timed in between, so compare such
runs network by network. Prints a markdown table of the
median and 90th percentile in milliseconds, and the targets of issue 17 for the bandit
network; ``--json`` writes every number.

Usage::

    python benchmarks/step_latency.py [--steps 400] [--rounds 5] [--json out.json]
"""
import argparse
import json
import math
import os
import sys
import time

import numpy as np
import mxnet as mx
from mxnet import autograd, gluon, nd

import gluon_bbb
from gluon_bbb.experiments.machine import machine_info
from gluon_bbb.models import mlp

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from peer_pytorch import BayesMLP, ScaleMixture, torch, functional  # noqa: E402

#: name -> (layer sizes, batch size, likelihood)
NETWORKS = {
    "bandit": ((119, 100, 100, 1), 64, "gaussian"),
    "regression": ((1, 100, 100, 1), 32, "gaussian"),
    "mnist": ((784, 400, 400, 10), 128, "softmax"),
}
PRIOR = (0.5, 1.0, math.exp(-6.0))
LEARNING_RATE = 1e-3
#: Issue 17's targets on the bandit network (ms): BBB at 1 sample, deterministic.
TARGET_BBB_MS, TARGET_DET_MS = 1.0, 0.5


def _labels(likelihood, sizes, batch_size, rng):
    if likelihood == "softmax":
        return rng.integers(0, sizes[-1], size=batch_size).astype(np.float32)
    return rng.normal(size=(batch_size, sizes[-1])).astype(np.float32)


class GluonBBBStep:
    def __init__(self, sizes, likelihood, x, y, num_samples, kl_weight):
        mx.random.seed(0)
        net = mlp(sizes[1:-1], num_outputs=sizes[-1])
        loss = gluon_bbb.BBBLoss(gluon_bbb.ScaleMixturePrior(*PRIOR), likelihood=likelihood)
        self.trainer = gluon_bbb.BBBTrainer(net, loss, optimizer_params={"learning_rate": LEARNING_RATE},
                                            num_samples=num_samples, seed=0)
        self.x, self.y, self.kl_weight = nd.array(x), nd.array(y), kl_weight

    def __call__(self):
        self.trainer.step(self.x, self.y, self.kl_weight)
        nd.waitall()


class NetworkCost(gluon.HybridBlock):
    """A network and its summed cost in one hybridized graph: softmax cross-entropy, or the
    Gaussian negative log-likelihood up to a constant."""

    def __init__(self, net, softmax):
        super().__init__(prefix="")
        self.net, self.softmax = net, softmax

    def hybrid_forward(self, F, x, y):
        out = self.net(x)
        if self.softmax:
            return F.sum(F.pick(-F.log_softmax(out), y))
        return F.sum(F.square(out - y)) * 0.5


class GluonDeterministicStep:
    def __init__(self, sizes, likelihood, x, y):
        mx.random.seed(0)
        self.net = mlp(sizes[1:-1], num_outputs=sizes[-1])
        self.net.initialize(mx.init.Xavier())
        self.cost = NetworkCost(self.net, likelihood == "softmax")
        self.cost.hybridize(static_alloc=True, static_shape=True)
        self.x, self.y = nd.array(x), nd.array(y)
        self.trainer = gluon.Trainer(self.net.collect_params(),
                                     gluon_bbb.fused.optimizers.adam(mx.cpu(), learning_rate=LEARNING_RATE))

    def __call__(self):
        with autograd.record():
            cost = self.cost(self.x, self.y)
        cost.backward()
        self.trainer.step(1)
        nd.waitall()


class TorchBBBStep:
    def __init__(self, sizes, likelihood, x, y, num_samples, kl_weight):
        torch.manual_seed(0)
        self.model = BayesMLP(ScaleMixture(*PRIOR), sizes)
        self.optimizer = torch.optim.Adam(self.model.parameters(), lr=LEARNING_RATE)
        self.x, self.y = torch.from_numpy(x), torch.from_numpy(y)
        if likelihood == "softmax":
            self.y = self.y.long()
        self.softmax, self.num_samples, self.kl_weight = likelihood == "softmax", num_samples, kl_weight

    def __call__(self):
        self.optimizer.zero_grad(set_to_none=True)
        total = 0.0
        for _ in range(self.num_samples):
            out = self.model(self.x)
            if self.softmax:
                nll = functional.cross_entropy(out, self.y, reduction="sum")
            else:
                nll = 0.5 * ((out - self.y) ** 2).sum()
            total = total + self.kl_weight * self.model.complexity() + nll
        (total / self.num_samples).backward()
        self.optimizer.step()


class TorchDeterministicStep:
    def __init__(self, sizes, likelihood, x, y):
        torch.manual_seed(0)
        layers = []
        for i, (n_in, n_out) in enumerate(zip(sizes[:-1], sizes[1:])):
            layers.append(torch.nn.Linear(n_in, n_out))
            if i < len(sizes) - 2:
                layers.append(torch.nn.ReLU())
        self.model = torch.nn.Sequential(*layers)
        self.optimizer = torch.optim.Adam(self.model.parameters(), lr=LEARNING_RATE)
        self.x, self.y = torch.from_numpy(x), torch.from_numpy(y)
        if likelihood == "softmax":
            self.y = self.y.long()
        self.softmax = likelihood == "softmax"

    def __call__(self):
        self.optimizer.zero_grad(set_to_none=True)
        out = self.model(self.x)
        if self.softmax:
            cost = functional.cross_entropy(out, self.y, reduction="sum")
        else:
            cost = 0.5 * ((out - self.y) ** 2).sum()
        cost.backward()
        self.optimizer.step()


def contenders(name):
    sizes, batch_size, likelihood = NETWORKS[name]
    rng = np.random.default_rng(0)
    x = rng.normal(size=(batch_size, sizes[0])).astype(np.float32)
    y = _labels(likelihood, sizes, batch_size, rng)
    kl_weight = 1.0 / 64
    steps = {}
    for samples in (1, 2):
        steps[f"gluon_bbb BBB, {samples} sample{'s' * (samples > 1)}"] = GluonBBBStep(
            sizes, likelihood, x, y, samples, kl_weight)
        steps[f"PyTorch BBB, {samples} sample{'s' * (samples > 1)}"] = TorchBBBStep(
            sizes, likelihood, x, y, samples, kl_weight)
    steps["gluon_bbb deterministic"] = GluonDeterministicStep(sizes, likelihood, x, y)
    steps["PyTorch deterministic"] = TorchDeterministicStep(sizes, likelihood, x, y)
    return steps


def time_steps(step, num_steps):
    times = np.empty(num_steps)
    for i in range(num_steps):
        start = time.perf_counter()
        step()
        times[i] = time.perf_counter() - start
    return times


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--networks", nargs="+", choices=list(NETWORKS), default=list(NETWORKS))
    parser.add_argument("--steps", type=int, default=400, help="timed steps per contender per round")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--warmup", type=int, default=50)
    parser.add_argument("--torch-threads", type=int, default=1,
                        help="PyTorch's threads (default 1, what importing mxnet leaves it)")
    parser.add_argument("--json", default=None)
    args = parser.parse_args(argv)
    torch.set_num_threads(args.torch_threads)
    results = {"command": " ".join(["python"] + sys.argv), "machine": machine_info(),
               "torch": torch.__version__, "torch_threads": torch.get_num_threads(),
               "mxnet": mx.__version__, "networks": {}}
    print(f"torch {torch.__version__} ({torch.get_num_threads()} threads), mxnet {mx.__version__}")
    for name in args.networks:
        steps = contenders(name)
        for step in steps.values():
            time_steps(step, args.warmup)
        fused = next(iter(steps.values())).trainer
        print(f"\n{name}: {'-'.join(map(str, NETWORKS[name][0]))}, batch {NETWORKS[name][1]}; "
              f"fused path: {fused.fused or fused.fused_reason}", flush=True)
        times = {label: [] for label in steps}
        for _ in range(args.rounds):
            for label, step in steps.items():
                times[label].append(time_steps(step, args.steps))
        rows = {}
        print("| step | median ms | p90 ms |\n|---|---:|---:|")
        for label in steps:
            values = np.concatenate(times[label]) * 1e3
            rows[label] = {"median_ms": float(np.median(values)),
                           "p90_ms": float(np.percentile(values, 90)), "num_steps": len(values)}
            print(f"| {label} | {rows[label]['median_ms']:.3f} | {rows[label]['p90_ms']:.3f} |")
        results["networks"][name] = {"sizes": NETWORKS[name][0], "batch_size": NETWORKS[name][1],
                                     "fused": bool(fused.fused), "steps": rows}
    if "bandit" in results["networks"]:
        rows = results["networks"]["bandit"]["steps"]
        bbb, det = rows["gluon_bbb BBB, 1 sample"]["median_ms"], rows["gluon_bbb deterministic"]["median_ms"]
        checks = {
            f"BBB step <= {TARGET_BBB_MS} ms": bbb <= TARGET_BBB_MS,
            f"deterministic step <= {TARGET_DET_MS} ms": det <= TARGET_DET_MS,
            "BBB step below PyTorch's": bbb < rows["PyTorch BBB, 1 sample"]["median_ms"],
            "deterministic step below PyTorch's": det < rows["PyTorch deterministic"]["median_ms"],
        }
        results["targets"] = checks
        print("\nbandit network targets: " + "; ".join(
            f"{what}: {'met' if ok else 'MISSED'}" for what, ok in checks.items()))
    if args.json:
        with open(args.json, "w", encoding="utf-8") as handle:
            json.dump(results, handle, indent=2)
    return results


if __name__ == "__main__":
    main()
