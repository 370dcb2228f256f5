#!/usr/bin/env python
"""Memory and speed of a long-lived training process: does it grow, does it slow down?

Three loops, each in its own child process so that one cannot inherit another's memory:

- ``step-fused`` and ``step-pure``: :meth:`gluon_bbb.BBBTrainer.step` on the mushroom
  bandit's reward network (119-100-100-1, batch 64, Gaussian likelihood, scale-mixture prior,
  Adam, one weight sample, a Python float for the complexity weight), on the fused operator
  and on the pure-MXNet path (``fused=False``, the path a GPU takes). The 64 minibatches are
  views made once and reused, as the bandit's agents do, and the loop waits for the cost
  once every 64 steps, as an agent does when it acts after each interaction.
- ``fit``: :meth:`gluon_bbb.BBBTrainer.fit` over many short epochs of a small classifier
  (20-50-3, 16 batches of 32 an epoch), with ``eval_data`` and a checkpoint written after
  every epoch.

After a warm-up, each loop reports in blocks: the resident set size (RSS), the bytes the C
allocator has handed out and not taken back (glibc's ``mallinfo2``; a leak shows as steady
growth there, while memory the allocator or MXNet's storage pool keeps for reuse does not),
the number of live ``NDArray`` objects, and the time per step or epoch. Prints a markdown
table per loop and the growth over the last ``--window`` steps; ``--json`` writes every
number.

Usage::

    OMP_NUM_THREADS=1 python benchmarks/long_run.py [--steps 100000] [--block 10000]
        [--warmup 2000] [--epochs 400] [--loops step-fused step-pure fit] [--json out.json]
"""
import argparse
import gc
import json
import multiprocessing
import os
import sys
import tempfile
import time

LOOPS = ("step-fused", "step-pure", "fit")
SYNC_EVERY = 64  # steps between waits for the cost: one bandit interaction


def _bandit_trainer(fused):
    import math
    import numpy as np
    import mxnet as mx
    from mxnet import nd
    import gluon_bbb
    from gluon_bbb.models import mlp

    mx.random.seed(0)
    net = mlp((100, 100), num_outputs=1)
    loss = gluon_bbb.BBBLoss(gluon_bbb.ScaleMixturePrior(0.5, 1.0, math.exp(-6)),
                             likelihood="gaussian")
    trainer = gluon_bbb.BBBTrainer(net, loss, optimizer="adam", seed=0, fused=fused)
    rng = np.random.default_rng(0)
    inputs = nd.array(rng.normal(size=(64 * 64, 119)))
    rewards = nd.array(rng.normal(size=(64 * 64,)))
    batches = [(inputs[i:i + 64], rewards[i:i + 64]) for i in range(0, 64 * 64, 64)]
    return trainer, batches


def _reading():
    from mxnet import nd
    from gluon_bbb.experiments.machine import heap_in_use, resident_memory

    nd.waitall()
    gc.collect()
    live = sum(isinstance(obj, nd.NDArray) for obj in gc.get_objects())
    return {"rss_mb": resident_memory() / 2**20, "heap_mb": (heap_in_use() or 0) / 2**20,
            "live_ndarrays": live}


def run_steps(fused, steps, block, warmup):
    """The step loop; returns one record per block."""
    trainer, batches = _bandit_trainer(fused)

    def play(count, start):
        for s in range(start, start + count):
            data, label = batches[s % len(batches)]
            cost = trainer.step(data, label, 0.01)[0]
            if (s + 1) % SYNC_EVERY == 0:
                cost.wait_to_read()

    play(warmup, 0)
    base = _reading()
    records, done = [], 0
    while done < steps:
        count = min(block, steps - done)
        start = time.perf_counter()
        play(count, warmup + done)
        reading = _reading()
        seconds = time.perf_counter() - start
        done += count
        records.append({"steps": done, "ms_per_step": 1000 * seconds / count,
                        **{f"{key}_growth": reading[key] - base[key] for key in reading}})
    return {"path": "fused" if fused else "pure", "fused": trainer.fused, "records": records}


def run_fit(epochs, block, warmup):
    """Many short epochs of ``fit`` with evaluation and checkpoints; one record per block."""
    import numpy as np
    import mxnet as mx
    import gluon_bbb
    from gluon_bbb.data import ArrayLoader
    from gluon_bbb.models import mlp

    mx.random.seed(0)
    rng = np.random.default_rng(0)
    x = rng.normal(size=(512, 20)).astype(np.float32)
    y = (x[:, :3].argmax(axis=1)).astype(np.float32)
    train = ArrayLoader(x, y, batch_size=32, shuffle=True, seed=0)
    evaluation = ArrayLoader(x[:128], y[:128], batch_size=64)
    trainer = gluon_bbb.BBBTrainer(mlp((50,), num_outputs=3),
                                   gluon_bbb.BBBLoss(gluon_bbb.GaussianPrior(1.0)), seed=0)
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "fit.bbb")

        def fit_to(total):
            trainer.fit(train, total, eval_data=evaluation, checkpoint_path=path, progress=False)

        fit_to(warmup)
        base = _reading()
        records = []
        while trainer.epoch < warmup + epochs:
            start, first = time.perf_counter(), trainer.epoch
            fit_to(min(trainer.epoch + block, warmup + epochs))
            reading = _reading()
            seconds = time.perf_counter() - start
            records.append({"epochs": trainer.epoch - warmup,
                            "ms_per_epoch": 1000 * seconds / (trainer.epoch - first),
                            **{f"{key}_growth": reading[key] - base[key] for key in reading}})
    # the history grows by one small record per epoch: that is kept on purpose
    return {"path": "fit", "fused": trainer.fused, "records": records}


def _child(loop, args, queue):
    if loop == "fit":
        queue.put(run_fit(args.epochs, args.epoch_block, args.epoch_warmup))
    else:
        queue.put(run_steps(loop == "step-fused", args.steps, args.block, args.warmup))


def window_growth(records, unit, window):
    """(RSS growth, heap growth, steps covered) between the record ``window`` units before the
    last one (or the first record) and the last: growth in steady state."""
    last = records[-1]
    earlier = [r for r in records if r[unit] <= last[unit] - window] or [records[0]]
    start = earlier[-1]
    return (last["rss_mb_growth"] - start["rss_mb_growth"],
            last["heap_mb_growth"] - start["heap_mb_growth"], last[unit] - start[unit])


def markdown(result, window):
    unit = "epochs" if result["path"] == "fit" else "steps"
    time_key = "ms_per_epoch" if unit == "epochs" else "ms_per_step"
    lines = [f"### {result['path']} (fused operator: {result['fused']})", "",
             f"| {unit} after warm-up | RSS growth (MB) | heap in use, growth (MB) | live NDArrays, growth | {time_key.replace('_', ' ')} |",
             "|---:|---:|---:|---:|---:|"]
    for r in result["records"]:
        lines.append(f"| {r[unit]:,} | {r['rss_mb_growth']:+.2f} | {r['heap_mb_growth']:+.3f} | "
                     f"{r['live_ndarrays_growth']:+d} | {r[time_key]:.3f} |")
    if unit == "steps":
        rss, heap, covered = window_growth(result["records"], unit, window)
        lines += ["", f"Over the last {covered:,} steps: RSS {rss:+.2f} MB, heap in use {heap:+.3f} MB."]
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=100_000)
    parser.add_argument("--block", type=int, default=10_000)
    parser.add_argument("--warmup", type=int, default=2_000)
    parser.add_argument("--window", type=int, default=20_000,
                        help="report the growth over the last this many steps")
    parser.add_argument("--epochs", type=int, default=400)
    parser.add_argument("--epoch-block", type=int, default=50)
    parser.add_argument("--epoch-warmup", type=int, default=10)
    parser.add_argument("--loops", nargs="+", choices=LOOPS, default=list(LOOPS))
    parser.add_argument("--json", help="write every number here")
    args = parser.parse_args(argv)
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    from gluon_bbb.experiments.machine import machine_info

    context = multiprocessing.get_context("spawn")
    results = []
    for loop in args.loops:
        queue = context.Queue()
        child = context.Process(target=_child, args=(loop, args, queue))
        child.start()
        result = queue.get()
        child.join()
        results.append(result)
        print(markdown(result, args.window), "\n", flush=True)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as handle:
            json.dump({"machine": machine_info(), "args": vars(args), "results": results}, handle,
                      indent=1)


if __name__ == "__main__":
    main()
