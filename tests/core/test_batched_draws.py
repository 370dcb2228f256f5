"""Several weight draws a step in one batched pass (:mod:`gluon_bbb.batched`) against the loop
of one pass per draw: the same noise in both, then the step's cost, its two parts, the last
draw's output and every gradient of mu and rho must agree to rounding (float32: 2e-5 of the
largest value, float64: 1e-10), for K = 1, 2 and 10 draws, the three priors, both complexity
estimators and both dtypes. Plus which networks qualify and why not, fit on either path, and
an exact resume with K > 1.

Every test runs twice: on the fused C++ operator and on the pure-MXNet path. The fused loop
draws each draw's noise under a key of its own, the batched call all of them under one key, so
the comparison hands both the same eps (``variational_sample(epsilons=...)``); the pure-MXNet
path draws the same noise in both from its generator, whose state the test copies.
"""
import math

import mxnet as mx
import numpy as np
import pytest
from mxnet import gluon, nd

from gluon_bbb import (BBBLoss, BBBTrainer, DiagonalGaussianPrior, GaussianPrior,
                       ScaleMixturePrior)
from gluon_bbb import fused, trainer as trainer_module
from gluon_bbb.batched import BATCH_DRAWS_FROM, batched_network
from gluon_bbb.data import ArrayLoader

from gluon_bbb.experiments.machine import heap_in_use
from gluon_bbb.models import mlp

from synthetic import blobs
from test_long_run import SYNC_EVERY, heap_growth
from fused_paths import sampling_path  # noqa: F401 -- autouse fixture: both sampling paths

SHAPES = [(16, 6), (16,), (8, 16), (8,), (3, 8), (3,)]
TOLERANCE = {"float32": 2e-5, "float64": 1e-10}
PRIORS = {
    "gaussian": lambda dtype: GaussianPrior(0.5),
    "mixture": lambda dtype: ScaleMixturePrior(0.5, 1.0, math.exp(-6)),
    "diagonal": lambda dtype: DiagonalGaussianPrior(
        [np.random.default_rng(i).normal(scale=0.3, size=s).astype(dtype)
         for i, s in enumerate(SHAPES)],
        [np.exp(np.random.default_rng(10 + i).uniform(-2, 0, size=s)).astype(dtype)
         for i, s in enumerate(SHAPES)]),
}
CASES = [("gaussian", "monte_carlo"), ("gaussian", "closed_form"), ("mixture", "monte_carlo"),
         ("diagonal", "monte_carlo"), ("diagonal", "closed_form")]


def dense_net(dtype="float32"):
    """Flatten-Dense(16, relu)-Dense(8, tanh)-Dense(3) over (B, 2, 3) inputs."""
    net = gluon.nn.HybridSequential()
    net.add(gluon.nn.Flatten(), gluon.nn.Dense(16, activation="relu"),
            gluon.nn.Dense(8, activation="tanh"), gluon.nn.Dense(3))
    return net


def batch(dtype, size=24, seed=0):
    rng = np.random.default_rng(seed)
    x = nd.array(rng.normal(size=(size, 2, 3)), dtype=dtype)
    y = nd.array(rng.integers(0, 3, size=size), dtype=dtype)
    return x, y


def make(batch_draws, num_samples, prior="gaussian", kl="monte_carlo", dtype="float32", **kwargs):
    """A trainer with learning rate 0 (a step leaves mu and rho where they are)."""
    mx.random.seed(0)
    net = dense_net()
    net.initialize(mx.init.Xavier(magnitude=3.0))
    net.cast(dtype)
    x, _ = batch(dtype)
    net(x)
    kwargs.setdefault("optimizer", "sgd")
    kwargs.setdefault("optimizer_params", {"learning_rate": 0.0})
    trainer = BBBTrainer(net, BBBLoss(PRIORS[prior](dtype), kl=kl), num_samples=num_samples,
                         seed=1, rho_init=-2.0, batch_draws=batch_draws, **kwargs)
    trainer.prepare(x)
    return trainer


class GivenNoise:
    """Stands in for ``variational_sample`` in the trainer: hands the operator the next draws'
    eps from a fixed list, one draw a call (the loop) or ``num_draws`` at once (batched)."""

    def __init__(self, draws):
        self.draws, self.next = draws, 0

    def __call__(self, mus, rhos, prior, num_draws=None, keep_eps=False, **kwargs):
        count = 1 if num_draws is None else num_draws
        given = self.draws[self.next:self.next + count]
        self.next += count
        return fused.variational_sample(mus, rhos, prior, num_draws=num_draws,
                                        epsilons=given[0] if num_draws is None else given,
                                        **kwargs)


def step_with_noise(trainer, draws, monkeypatch, x, y):
    """One step with the draws' eps given; returns its values and gradients as numpy."""
    if trainer.fused:
        monkeypatch.setattr(trainer_module, "variational_sample", GivenNoise(draws))
    cost, nll, complexity, pred, finite = trainer.step(x, y, 0.05)
    monkeypatch.undo()
    assert finite.asscalar() == 1
    values = [v.asnumpy() for v in (cost, nll, complexity, pred)]
    grads = [p.grad().asnumpy() for p in trainer.posterior.mus + trainer.posterior.rhos]
    return values, grads


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("prior, kl", CASES)
@pytest.mark.parametrize("num_samples", [1, 2, 10])
def test_the_batched_pass_equals_the_loop(num_samples, prior, kl, dtype, monkeypatch):
    loop = make(False, num_samples, prior, kl, dtype)
    batched = make(True, num_samples, prior, kl, dtype)
    assert (loop.draws_path, batched.draws_path, batched.draws_reason) == ("loop", "batched", "")
    assert loop.fused == batched.fused
    rng = np.random.default_rng(5)
    draws = [[nd.array(rng.standard_normal(s), dtype=dtype) for s in batched.posterior.shapes]
             for _ in range(num_samples)]
    batched.noise.set_state(loop.noise.get_state())
    x, y = batch(dtype)
    loop_values, loop_grads = step_with_noise(loop, draws, monkeypatch, x, y)
    values, grads = step_with_noise(batched, draws, monkeypatch, x, y)
    tol = TOLERANCE[dtype]
    for name, a, b in zip(("cost", "nll", "complexity", "pred"), values, loop_values):
        assert a.shape == b.shape, name
        np.testing.assert_allclose(a, b, rtol=tol, atol=tol * np.abs(b).max(), err_msg=name)
    for i, (a, b) in enumerate(zip(grads, loop_grads)):
        assert np.abs(b).max() > 0
        np.testing.assert_allclose(a, b, rtol=tol, atol=tol * np.abs(b).max(),
                                   err_msg=f"gradient {i}")
    # the network holds the last draw, as after the loop
    for a, b in zip(batched.posterior.targets, loop.posterior.targets):
        np.testing.assert_allclose(a.data().asnumpy(), b.data().asnumpy(), rtol=tol, atol=tol)


def test_many_draws_batch_by_default_and_few_draws_loop():
    assert make(None, BATCH_DRAWS_FROM).draws_path == "batched"
    few = make(None, BATCH_DRAWS_FROM - 1)
    assert few.draws_path == "loop" and "batch_draws=True" in few.draws_reason
    assert make(True, 2).draws_path == "batched"
    single = make(None, 1)
    assert (single.draws_path, single.draws_reason) == ("loop", "one draw a step (num_samples=1)")
    assert make(False, 3).draws_reason == "batch_draws=False was requested"
    with pytest.raises(ValueError, match="batch_draws"):
        make("yes", 3)


def conv_net():
    net = gluon.nn.HybridSequential()
    net.add(gluon.nn.HybridLambda(lambda F, x: F.reshape(x, (-1, 1, 8, 8))),
            gluon.nn.Conv2D(4, kernel_size=3, activation="relu"), gluon.nn.Flatten(),
            gluon.nn.Dense(2))
    return net


def test_a_convolutional_network_falls_back_to_the_loop_and_says_why():
    rng = np.random.default_rng(0)
    images = rng.normal(size=(64, 64)).astype(np.float32)
    labels = (images[:, :32].sum(axis=1) > 0).astype(np.float32)
    loader = ArrayLoader(images, labels, 32, shuffle=True, seed=0)
    mx.random.seed(0)
    trainer = BBBTrainer(conv_net(), BBBLoss(GaussianPrior(1.0)), num_samples=BATCH_DRAWS_FROM,
                         seed=0)
    history = trainer.fit(loader, 2, progress=False)
    assert trainer.draws_path == "loop"
    assert "not a stack of Dense layers" in trainer.draws_reason
    assert "HybridLambda" in trainer.draws_reason
    assert len(history) == 2 and all(np.isfinite(r["loss"]) for r in history)
    with pytest.raises(RuntimeError, match="batch_draws=True, but"):
        mx.random.seed(0)
        BBBTrainer(conv_net(), BBBLoss(GaussianPrior(1.0)), num_samples=3,
                   batch_draws=True).prepare(nd.array(images[:4]))


@pytest.mark.parametrize("build, reason", [
    (lambda: [gluon.nn.Dense(8, activation="relu"), gluon.nn.Dropout(0.5), gluon.nn.Dense(3)],
     "Dropout"),
    (lambda: [gluon.nn.Dense(8, flatten=False), gluon.nn.Dense(3)], "flatten=False"),
    (lambda: [gluon.nn.Dense(8), gluon.nn.PReLU(), gluon.nn.Dense(3)], "PReLU"),
])
def test_networks_that_cannot_be_batched_are_named(build, reason):
    net = gluon.nn.HybridSequential()
    net.add(*build())
    net.initialize()
    net(nd.zeros((2, 5)))
    params = [p for p in net.collect_params().values()]
    block, why = batched_network(net, params, 3)
    assert block is None and reason in why


def test_nested_sequentials_and_a_bare_dense_layer_qualify():
    inner = gluon.nn.HybridSequential()
    inner.add(gluon.nn.Dense(8), gluon.nn.LeakyReLU(0.1))
    net = gluon.nn.HybridSequential()
    net.add(inner, gluon.nn.Dense(3))
    for candidate in (net, gluon.nn.Dense(4)):
        candidate.initialize()
        candidate(nd.zeros((2, 5)))
        block, why = batched_network(candidate, list(candidate.collect_params().values()), 2)
        assert block is not None and why == ""


def test_a_frozen_layer_keeps_the_loop():
    mx.random.seed(0)
    net = dense_net()
    net.initialize()
    net(batch("float32")[0])
    net[1].collect_params().setattr("grad_req", "null")
    trainer = BBBTrainer(net, BBBLoss(GaussianPrior(1.0)), num_samples=BATCH_DRAWS_FROM)
    assert trainer.draws_path == "loop" and "not in the posterior" in trainer.draws_reason


@pytest.mark.parametrize("batch_draws", [False, True])
def test_fit_with_three_draws_a_step(batch_draws):
    x, y = blobs()
    loader = ArrayLoader(x[:200], y[:200], 32, shuffle=True, seed=0)  # a last batch of 8
    mx.random.seed(0)
    net = gluon.nn.HybridSequential()
    net.add(gluon.nn.Dense(16, activation="relu"), gluon.nn.Dense(3))
    trainer = BBBTrainer(net, BBBLoss(GaussianPrior(1.0)), num_samples=3, seed=0,
                         optimizer_params={"learning_rate": 0.02}, batch_draws=batch_draws)
    history = trainer.fit(loader, 3, eval_data=loader, progress=False)
    assert trainer.draws_path == ("batched" if batch_draws else "loop")
    assert history[-1]["loss"] < history[0]["loss"]
    for record in history:
        assert record["loss"] == pytest.approx(record["nll"] + record["complexity"], rel=1e-4)


def test_resume_with_several_draws_is_exact(tmp_path):
    """Two epochs, a checkpoint, two more: the same losses as four uninterrupted epochs."""
    x, y = blobs()

    def fresh():
        mx.random.seed(0)
        net = gluon.nn.HybridSequential()
        net.add(gluon.nn.Dense(16, activation="relu"), gluon.nn.Dense(3))
        return BBBTrainer(net, BBBLoss(ScaleMixturePrior(0.25, 1.0, math.exp(-7))),
                          num_samples=4, seed=3, optimizer_params={"learning_rate": 0.01},
                          batch_draws=True)

    def loader():
        return ArrayLoader(x[:256], y[:256], 32)

    path = str(tmp_path / "ckpt.bbb")
    uninterrupted = fresh()
    uninterrupted.fit(loader(), 4, progress=False)
    first = fresh()
    first.fit(loader(), 2, checkpoint_path=path, progress=False)
    resumed = fresh()
    resumed.fit(loader(), 0, progress=False)
    resumed.load(path)
    resumed.fit(loader(), 4, progress=False)
    assert uninterrupted.draws_path == resumed.draws_path == "batched"
    assert [r["loss"] for r in resumed.history] == [r["loss"] for r in uninterrupted.history]
    for a, b in zip(uninterrupted.variational_params, resumed.variational_params):
        np.testing.assert_array_equal(a.data().asnumpy(), b.data().asnumpy())


@pytest.mark.skipif(heap_in_use() is None, reason="needs glibc's mallinfo2")
def test_ten_draws_a_step_hold_no_more_memory_as_they_go(sampling_path):
    """The long-run check of tests/fused/test_long_run.py with K = 10 batched draws a step (a
    small regression network, so that many steps fit in a test): the C allocator's bytes in
    use stay where the warm-up left them."""
    mx.random.seed(0)
    loss = BBBLoss(ScaleMixturePrior(0.5, 1.0, math.exp(-6)), likelihood="gaussian")
    trainer = BBBTrainer(mlp((10, 10), num_outputs=1), loss, seed=0, num_samples=10)
    rng = np.random.default_rng(0)
    inputs = nd.array(rng.normal(size=(8 * 8, 5)))
    rewards = nd.array(rng.normal(size=(8 * 8,)))
    batches = [(inputs[i:i + 8], rewards[i:i + 8]) for i in range(0, 8 * 8, 8)]

    def step(i):
        data, label = batches[i % len(batches)]
        cost = trainer.step(data, label, 0.01)[0]
        if i % SYNC_EVERY == 0:
            cost.wait_to_read()

    repeats = 600 if sampling_path == "fused" else 100  # the pure path's steps cost more
    growth = heap_growth(step, warmup=200 if sampling_path == "fused" else 50, repeats=repeats)
    assert trainer.draws_path == "batched" and trainer.fused == (sampling_path == "fused")
    # leaking, the fused path kept 25 KB per 1,200 steps when the steps looped over the draws
    assert growth < 16 * 1024, f"{growth / 1024:.1f} KB stayed behind after {repeats} steps"


@pytest.mark.parametrize("network, path", [("mlp", "batched"), ("lenet", "loop")])
def test_configurations_take_the_batched_pass_where_it_applies(network, path):
    """What ``gluon-bbb train --num-samples 6`` and ``reproduce`` build: the MLP batches its
    draws, the LeNet loops and says why."""
    from gluon_bbb.experiments import get_config
    from gluon_bbb.experiments.runners import make_bbb_trainer

    mx.random.seed(0)
    config = get_config("bbb-mixture-400", num_samples=BATCH_DRAWS_FROM, network=network)
    trainer = make_bbb_trainer(config, mx.cpu())
    assert trainer.num_samples == BATCH_DRAWS_FROM and trainer.draws_path == path
    assert (trainer.draws_reason == "") == (path == "batched")
