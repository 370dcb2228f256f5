#!/usr/bin/env python
"""Where one Bayes-by-Backprop training step spends its time, against a memory-bandwidth floor.

For each width (784-H-H-10 MLP, batch 128, scale-mixture prior, 1 sample, the fused path) and
optimizer (plain SGD, Adam), one process times the parts of a step, each alone between
``nd.waitall()`` calls, as the median over ``--repeats`` repetitions:

- ``sample``: the fused operator's forward, eps ~ N(0, 1), w = mu + softplus(rho) eps and the
  complexity (:func:`gluon_bbb.fused.variational_sample`);
- ``forward``: the network with the sample in it (the GEMMs);
- ``backward``: the cost's backward pass, GEMMs and the operator's backward, timed alone on a
  graph recorded before;
- ``finite guard``: the non-finite check over the gradients of mu and rho;
- ``update``: the trainer's optimizer class (FusedSGD or FusedAdam) over copies of mu and rho
  and their gradients, through an updater of its own;
- ``step``: one whole :meth:`gluon_bbb.BBBTrainer.step`;
- ``deterministic step``: the same network trained plainly (hybridized, ``gluon.Trainer`` with
  MXNet's optimizer), the baseline of the ratio.

A STREAM-style triad in NumPy (a = b + s c over float32 arrays far larger than the caches)
measures the memory bandwidth in the same process. For each elementwise part the bytes it must
move per weight (float32) give a floor, bytes x weights / bandwidth; the table shows each
part's time against it, and the floor of the whole step's ratio, (deterministic + the BBB
parts' floors) / deterministic.

Usage::

    OMP_NUM_THREADS=2 python benchmarks/step_profile.py [--widths 400 1200]
        [--optimizers sgd adam] [--repeats 30] [--json out.json]
"""
import argparse
import json
import math
import statistics
import time

import numpy as np
import mxnet as mx
from mxnet import autograd, gluon, nd

import gluon_bbb
from gluon_bbb import fused
from gluon_bbb.experiments.machine import machine_info
from gluon_bbb.posterior import assign_arrays

BATCH = 128
#: Bytes each part must move per weight, float32, one sample: what it reads and writes.
BYTES_PER_WEIGHT = {
    "sample": 4 * 4,          # reads mu, rho; writes w, eps
    "backward-op": 6 * 4,     # reads dL/dw, rho, w, eps; writes dmu, drho
    "finite guard": 2 * 4,    # reads dmu, drho
    "update-sgd": 2 * 3 * 4,  # for mu and rho: reads the value and its gradient, writes the value
    "update-adam": 2 * 7 * 4,  # ... and reads and writes two moments
}


def triad_bandwidth(size=50_000_000, repeats=5):
    """Bytes per second of a = b + s c over float32 arrays (12 bytes an element)."""
    b = np.ones(size, dtype=np.float32)
    c = np.ones(size, dtype=np.float32)
    a = np.empty_like(b)
    best = math.inf
    for _ in range(repeats):
        start = time.perf_counter()
        np.multiply(c, np.float32(3.0), out=a)
        np.add(a, b, out=a)  # numpy takes two passes: count the bytes of both
        best = min(best, time.perf_counter() - start)
    return 5 * 4 * size / best  # reads c, writes a; reads a and b, writes a


def median_ms(work, repeats, setup=None):
    """Median milliseconds of ``work(state)`` between ``nd.waitall()`` calls, where ``state``
    is what ``setup()`` returns (untimed, run before each repetition)."""
    times = []
    for repetition in range(repeats + 1):
        state = setup() if setup is not None else None
        nd.waitall()
        start = time.perf_counter()
        work(state)
        nd.waitall()
        if repetition:  # the first is a warm-up
            times.append(1000 * (time.perf_counter() - start))
    return statistics.median(times)


def mlp(width):
    net = gluon.nn.HybridSequential()
    net.add(gluon.nn.Dense(width, activation="relu", in_units=784),
            gluon.nn.Dense(width, activation="relu", in_units=width),
            gluon.nn.Dense(10, in_units=width))
    net.initialize(mx.init.Xavier())
    return net


#: The priors of the benchmarks (as epoch_time.py's).
PRIORS = {"mixture": lambda: gluon_bbb.ScaleMixturePrior(0.5, 1.0, math.exp(-6)),
          "gaussian": lambda: gluon_bbb.GaussianPrior(1.0)}


def profile(width, optimizer, repeats, prior="mixture"):
    mx.random.seed(0)
    rng = np.random.default_rng(0)
    data = nd.array(rng.normal(size=(BATCH, 784)))
    label = nd.array(rng.integers(0, 10, size=BATCH))
    prior = PRIORS[prior]()
    trainer = gluon_bbb.BBBTrainer(mlp(width), gluon_bbb.BBBLoss(prior), optimizer=optimizer,
                                   optimizer_params={"learning_rate": 1e-3}, seed=0)
    kl_weight = nd.array([1.0 / 390])
    trainer.step(data, label, kl_weight)
    assert trainer.fused, trainer.fused_reason
    posterior = trainer.posterior
    mus = [mu.data() for mu in posterior.mus]
    rhos = [rho.data() for rho in posterior.rhos]
    net, loss = trainer.net, trainer.loss

    def sample(_=None):
        return fused.variational_sample(mus, rhos, prior)

    weights, complexity, _ = sample()
    assign_arrays(posterior.targets, weights)

    def recorded_cost():
        with autograd.record():
            w, c, _ = fused.variational_sample(mus, rhos, prior)
            assign_arrays(posterior.targets, w)
            return loss(net(data), label, kl_weight, c)[0]

    cost = recorded_cost()
    cost.backward()
    # the optimizer alone, through an updater of its own over copies of mu and rho
    updater = mx.optimizer.get_updater(type(trainer.gluon_trainer.optimizer)(learning_rate=1e-3))
    values = [p.data().copy() for p in trainer.variational_params]
    grads = [p.grad().copy() for p in trainer.variational_params]
    indices = list(range(len(values)))
    parts = {
        "sample": median_ms(sample, repeats),
        "forward": median_ms(lambda _: net(data), repeats),
        "backward": median_ms(lambda c: c.backward(), repeats, setup=recorded_cost),
        "finite guard": median_ms(lambda _: trainer.finite_guard(cost), repeats),
        "update": median_ms(lambda _: updater(indices, grads, values), repeats),
        "step": median_ms(lambda _: trainer.step(data, label, kl_weight), repeats),
    }

    det = mlp(width)
    det.hybridize()
    ce = gluon.loss.SoftmaxCrossEntropyLoss()
    det_trainer = gluon.Trainer(det.collect_params(), optimizer, {"learning_rate": 1e-3})

    def det_step(_):
        with autograd.record():
            value = ce(det(data), label)
        value.backward()
        det_trainer.step(BATCH)

    parts["deterministic step"] = median_ms(det_step, repeats)
    return {"width": width, "optimizer": optimizer, "num_weights": posterior.num_weights,
            "optimizer_class": type(trainer.gluon_trainer.optimizer).__name__, "ms": parts}


def floors(result, bandwidth):
    """Milliseconds each elementwise part needs at ``bandwidth`` bytes/s."""
    n = result["num_weights"]
    update = "update-" + result["optimizer"]
    ms = {name: 1000 * BYTES_PER_WEIGHT[name] * n / bandwidth
          for name in ("sample", "backward-op", "finite guard", update)}
    return ms


def markdown(results, bandwidth):
    lines = [f"STREAM-style triad: {bandwidth / 1e9:.1f} GB/s", "",
             "| width | optimizer | sample | forward | backward | finite guard | update | step "
             "| deterministic step | ratio | floor of the ratio |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in results:
        ms, floor = r["ms"], floors(r, bandwidth)
        bbb_floor = sum(floor.values())
        det = ms["deterministic step"]
        lines.append(
            f"| {r['width']} | {r['optimizer']} | {ms['sample']:.2f} ({floor['sample']:.2f}) "
            f"| {ms['forward']:.2f} | {ms['backward']:.2f} (op {floor['backward-op']:.2f}) "
            f"| {ms['finite guard']:.2f} ({floor['finite guard']:.2f}) "
            f"| {ms['update']:.2f} ({floor['update-' + r['optimizer']]:.2f}) | {ms['step']:.2f} "
            f"| {det:.2f} | {ms['step'] / det:.2f} | {(det + bbb_floor) / det:.2f} |")
    lines += ["", "Milliseconds, medians; in brackets the floor of the part at the triad's "
              "bandwidth. The deterministic step's GEMMs stand in for the BBB step's, so the floor "
              "of the ratio is (deterministic + the BBB parts' floors) / deterministic."]
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--widths", nargs="+", type=int, default=[400, 1200])
    parser.add_argument("--optimizers", nargs="+", choices=("sgd", "adam"), default=["sgd", "adam"])
    parser.add_argument("--repeats", type=int, default=30)
    parser.add_argument("--json", help="write every number here")
    args = parser.parse_args(argv)
    bandwidth = triad_bandwidth()
    results = [profile(width, optimizer, args.repeats)
               for width in args.widths for optimizer in args.optimizers]
    print(markdown(results, bandwidth))
    if args.json:
        with open(args.json, "w", encoding="utf-8") as handle:
            json.dump({"machine": machine_info(), "args": vars(args),
                       "triad_bytes_per_s": bandwidth, "results": results}, handle, indent=1)


if __name__ == "__main__":
    main()
