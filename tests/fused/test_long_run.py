"""A long-lived process must not grow: the memory a training loop holds stays the same.

The measure is the C allocator's bytes in use (glibc's ``mallinfo2``, through
:func:`gluon_bbb.experiments.machine.heap_in_use`), read after ``nd.waitall()`` at the end of a warm-up and
again after many more repetitions of the same work. It is deterministic enough for a test:

* every array a step creates is freed by the time the engine is idle, and MXNet's storage pool
  hands the same buffers back for the same shapes, so after the warm-up the bytes in use return
  to the same value whenever the loop is idle;
* Python's small objects live in pymalloc arenas taken from ``mmap`` directly, outside
  ``mallinfo2``, so the interpreter's own free lists do not count;
* the loops wait for the engine every 64 steps, as the bandit's agents do, so MXNet's queue of
  pending operations (and its allocations) cannot grow with the loop's length.

A leak shows as steady growth. Before the fixes (:mod:`gluon_bbb.fused`, the bridges in its
C++ source), every call of an operator with mutable inputs leaked MXNet's copy of its index
array, about 0.2 KB per fused training step, 0.6 MB per 3,000 steps; and once any of the
library's operators had failed, every later call leaked a copy of every error message so far. The thresholds below are a third
of that or less.
"""
import gc
import math

import mxnet as mx
import numpy as np
import pytest
from mxnet import nd

import gluon_bbb
from gluon_bbb import fused
from gluon_bbb.experiments.machine import heap_in_use
from gluon_bbb.models import mlp

from fused_paths import fused_or_skip

pytestmark = pytest.mark.skipif(heap_in_use() is None, reason="needs glibc's mallinfo2")

SYNC_EVERY = 64


def heap_growth(work, warmup, repeats):
    """Bytes in use after ``repeats`` calls of ``work(i)``, minus before, after ``warmup`` calls;
    measured over two such intervals in a row, and the smaller growth returned.

    A leak grows both intervals alike. MXNet's storage pool and the allocator may still take
    memory once, when a busy machine lets the queue of pending operations run deeper than it
    did in the warm-up; that lands in one interval only.
    """
    def idle_reading():
        nd.waitall()
        gc.collect()
        return heap_in_use()

    for i in range(warmup):
        work(i)
    readings = [idle_reading()]
    for interval in range(2):
        for i in range(warmup + interval * repeats, warmup + (interval + 1) * repeats):
            work(i)
        readings.append(idle_reading())
    return min(readings[1] - readings[0], readings[2] - readings[1])


def test_operators_with_mutable_inputs_allocate_nothing_per_call():
    fused_or_skip()
    rng = np.random.default_rng(0)
    shapes = [(7, 5), (5,)]
    weights = [nd.array(rng.normal(size=s)) for s in shapes]
    grads = [nd.array(rng.normal(size=s)) for s in shapes]
    means = [nd.zeros(s) for s in shapes]
    variances = [nd.zeros(s) for s in shapes]
    cost = nd.ones((1,))

    def guard_and_adam(i):
        fused.finite_guard(cost, grads)
        nd.gluon_bbb_adam(*weights, *grads, *means, *variances, num_tensors=2, lrs="0.001,0.001",
                          wds="0,0", beta1="0.9", beta2="0.999", epsilon="1e-08",
                          rescale_grad="1", clip_gradient="-1")
        if i % SYNC_EVERY == 0:
            nd.waitall()

    growth = heap_growth(guard_and_adam, warmup=2_000, repeats=10_000)
    # leaking, 20,000 calls kept at least 32 bytes each: 0.6 MB
    assert growth < 128 * 1024, f"{growth / 1024:.0f} KB stayed behind after 20,000 calls"


def mxnet_error_text(call):
    with pytest.raises(mx.base.MXNetError) as error:
        call()
        nd.waitall()
    return str(error.value)


def test_a_failed_operator_call_leaves_nothing_behind():
    """MXNet reads the library's error messages after every call; they are reported with the
    error that made them, once, and later calls neither repeat nor copy them."""
    fused_or_skip()
    first = mxnet_error_text(lambda: fused.variational_sample(
        [nd.zeros((3, 2))], [nd.zeros((2, 3))], gluon_bbb.GaussianPrior(1.0)))
    assert "rho and mu have different shapes" in first
    second = mxnet_error_text(lambda: nd.gluon_bbb_adam(
        nd.ones((3,)), nd.ones((3,)), nd.ones((3,)), nd.ones((3,)), num_tensors=1, lrs="0.1"))
    assert "gluon_bbb_adam: needs num_tensors" in second
    assert "different shapes" not in second  # the first error's message is not repeated
    grads = [nd.ones((7, 5)), nd.ones((5,))]
    cost = nd.ones((1,))

    def guard(i):
        fused.finite_guard(cost, grads)
        if i % SYNC_EVERY == 0:
            nd.waitall()

    growth = heap_growth(guard, warmup=1_000, repeats=5_000)
    # leaking, every call copied every message so far: about 1.5 KB a call
    assert growth < 64 * 1024, f"{growth / 1024:.0f} KB stayed behind after 10,000 calls"


def bandit_trainer(fused_path):
    net = mlp((100, 100), num_outputs=1)
    loss = gluon_bbb.BBBLoss(gluon_bbb.ScaleMixturePrior(0.5, 1.0, math.exp(-6)),
                             likelihood="gaussian")
    trainer = gluon_bbb.BBBTrainer(net, loss, optimizer="adam", seed=0, fused=fused_path)
    rng = np.random.default_rng(0)
    inputs = nd.array(rng.normal(size=(16 * 64, 119)))
    rewards = nd.array(rng.normal(size=(16 * 64,)))
    batches = [(inputs[i:i + 64], rewards[i:i + 64]) for i in range(0, 16 * 64, 64)]

    def step(i):
        data, label = batches[i % len(batches)]
        cost = trainer.step(data, label, 0.01)[0]
        if i % SYNC_EVERY == 0:
            cost.wait_to_read()

    return trainer, step


@pytest.mark.parametrize("path,repeats", [("fused", 3_000), ("pure", 500)])
def test_training_steps_hold_no_more_memory_as_they_go(path, repeats):
    if path == "fused":
        fused_or_skip()
    trainer, step = bandit_trainer(path == "fused")
    growth = heap_growth(step, warmup=500, repeats=repeats)
    assert trainer.fused == (path == "fused")
    # leaking, the fused path kept about 0.6 MB per 3,000 steps
    assert growth < 192 * 1024, f"{growth / 1024:.0f} KB stayed behind after {repeats} steps"


def _live_ndarrays():
    """The NDArrays alive now, told by their type: ``isinstance`` reads every object's
    ``__class__``, which warns on PyTorch's deprecated attributes where PyTorch is imported."""
    return sum(issubclass(type(obj), nd.NDArray) for obj in gc.get_objects())


def test_training_steps_keep_no_arrays_alive():
    """The Python side: no NDArray outlives the step that made it."""
    trainer, step = bandit_trainer(None)
    step(0)
    nd.waitall()
    gc.collect()
    before = _live_ndarrays()
    for i in range(1, 200):
        step(i)
    nd.waitall()
    gc.collect()
    after = _live_ndarrays()
    assert after == before


@pytest.mark.parametrize("agent_kind", ["thompson", "greedy"])
def test_bandit_agents_hold_no_more_memory_as_they_play(agent_kind):
    """act then observe, as the bandit loop calls them, with 8 minibatches an interaction."""
    from gluon_bbb import bandit

    fused_or_skip()
    rng = np.random.default_rng(0)
    contexts = rng.normal(size=(64, 20)).astype(np.float32)
    options = dict(buffer_size=256, num_minibatches=8, batch_size=32, seed=0)
    if agent_kind == "thompson":
        agent = bandit.ThompsonAgent(20, **options)
    else:
        agent = bandit.EpsilonGreedyAgent(20, epsilon=0.05, **options)

    def interact(i):
        context = contexts[i % len(contexts)]
        action = agent.act(context)  # waits for the network: a host sync every interaction
        agent.observe(context, action, float(context[0] > 0) * (2 * action - 1))

    growth = heap_growth(interact, warmup=100, repeats=250)
    # leaking, 2,000 steps kept 0.45 MB (Thompson) or 0.16 MB (greedy, its fused Adam)
    assert growth < 64 * 1024, f"{growth / 1024:.0f} KB stayed behind after 250 interactions"


def test_monte_carlo_prediction_holds_no_more_memory_as_it_goes():
    trainer, step = bandit_trainer(None)
    step(0)
    data = nd.array(np.random.default_rng(1).normal(size=(64, 119)))

    def predict(i):
        trainer.predict_proba(data, num_samples=10).wait_to_read()

    growth = heap_growth(predict, warmup=50, repeats=150)
    assert growth < 64 * 1024, f"{growth / 1024:.0f} KB stayed behind after 150 predictions"
