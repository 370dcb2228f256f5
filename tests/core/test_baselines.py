"""Deterministic baselines (gluon_bbb.baselines) on small synthetic problems."""
import mxnet as mx
import numpy as np
import pytest
from mxnet import autograd, gluon, nd

from gluon_bbb import models
from gluon_bbb.baselines import evaluate_deterministic, train_deterministic
from gluon_bbb.data import ArrayLoader

from synthetic import blobs
from reference import mlp_forward, softmax_nll


@pytest.fixture(scope="module")
def loaders():
    x, y = blobs()
    return ArrayLoader(x[:384], y[:384], 32, shuffle=True, seed=0), ArrayLoader(x[384:], y[384:], 64)


def numpy_layers(net):
    """[(W, b), ...] of the Dense layers of an mlp, as float64 NumPy arrays."""
    values = [p.data().asnumpy().astype(np.float64) for p in net.collect_params().values()]
    return list(zip(values[0::2], values[1::2]))


def numpy_error(net, x, y):
    logits = mlp_forward(x.astype(np.float64), numpy_layers(net))
    return float(np.mean(logits.argmax(axis=1) != y))


def test_learns_a_separable_problem_and_reports_the_numpy_error(loaders):
    train, test = loaders
    mx.random.seed(0)
    net = models.mlp((16,), num_outputs=3)
    history = train_deterministic(net, train, 5, eval_data=test, progress=False)
    assert [r["epoch"] for r in history] == [1, 2, 3, 4, 5]
    assert {"epoch", "loss", "train_error", "test_error", "seconds"} <= set(history[0])
    assert history[-1]["loss"] < 0.5 * history[0]["loss"]
    assert history[-1]["test_error"] < 0.05
    x, y = blobs()
    assert evaluate_deterministic(net, test) == pytest.approx(numpy_error(net, x[384:], y[384:]))
    assert history[-1]["test_error"] == evaluate_deterministic(net, test)


def test_epoch_loss_and_error_are_the_sums_over_the_data():
    """With a zero learning rate the network stays put: compare the epoch's totals to NumPy."""
    x, y = blobs(num_examples=100, seed=2)
    mx.random.seed(1)
    net = models.mlp((8,), num_outputs=3)
    history = train_deterministic(net, ArrayLoader(x, y, 32), 1, optimizer_params={"learning_rate": 0.0},
                                  progress=False)
    logits = mlp_forward(x.astype(np.float64), numpy_layers(net))
    assert history[0]["loss"] == pytest.approx(softmax_nll(logits, y), rel=1e-5)
    assert history[0]["train_error"] == pytest.approx(np.mean(logits.argmax(axis=1) != y))
    assert "test_error" not in history[0]


class ModeRecorder(gluon.Block):
    """A non-hybrid block that records, per forward pass, whether autograd is in training mode."""

    def __init__(self, inner, **kwargs):
        super().__init__(**kwargs)
        self.inner = inner
        self.modes = []

    def forward(self, x):
        self.modes.append(autograd.is_training())
        return self.inner(x)


def test_dropout_is_on_during_training_steps_only(loaders):
    train, test = loaders
    mx.random.seed(0)
    net = ModeRecorder(models.mlp((16,), num_outputs=3, dropout=0.5))
    train_deterministic(net, train, 1, eval_data=test, progress=False)
    # one shape-finding pass, the training batches, then the evaluation batches
    assert net.modes == [False] + [True] * len(train) + [False] * len(test)
    first = evaluate_deterministic(net, test)
    assert evaluate_deterministic(net, test) == first
    x, y = blobs()
    assert first == pytest.approx(numpy_error(net.inner, x[384:], y[384:]))  # dropout is the identity


def test_uses_the_given_optimizer_and_keeps_an_initialised_network(loaders):
    train, _ = loaders
    net = models.mlp((4,), num_outputs=3)
    net.initialize(mx.init.Constant(0.01))
    net(nd.zeros((1, 8)))
    train_deterministic(net, train, 1, optimizer="adam", optimizer_params={"learning_rate": 1e-3},
                        progress=False)
    values = np.concatenate([p.data().asnumpy().ravel() for p in net.collect_params().values()])
    # not re-initialised (Xavier would spread them over +-0.7), but trained by Adam steps,
    # each at most (1 - beta1) / sqrt(1 - beta2) * learning_rate = 3.2e-3
    assert np.all(np.abs(values - 0.01) <= 3.2e-3 * len(train))
    assert np.any(values != np.float32(0.01))


def test_bad_arguments_are_named(loaders):
    train, test = loaders
    with pytest.raises(TypeError, match="net must be a gluon Block"):
        train_deterministic(object(), train, 1)
    with pytest.raises(ValueError, match="num_epochs"):
        train_deterministic(models.mlp((4,), 3), train, 0)
    with pytest.raises(ValueError, match="train_data yields no batches"):
        train_deterministic(models.mlp((4,), 3), [], 1)
    net = models.mlp((4,), 3)
    with pytest.raises(ValueError, match="not initialised"):
        evaluate_deterministic(net, test)
    net.initialize()
    with pytest.raises(ValueError, match="no examples"):
        evaluate_deterministic(net, [])
    with pytest.raises(ValueError, match=r"input of shape \(32, 8\)"):
        train_deterministic(gluon.nn.Dense(3, in_units=5), train, 1, progress=False)


def test_the_loop_is_seeded_per_epoch_and_stops_on_a_non_finite_loss():
    """run_epochs with seed= draws the same dropout masks whatever MXNet's generator held,
    so a run resumed at epoch e trains like an uninterrupted one; a NaN stops it, named."""
    from gluon_bbb import NonFiniteLossError
    from gluon_bbb.baselines import classification_cost, run_epochs
    x, y = blobs(num_examples=96)
    losses = []
    for disturbance in (1, 2):
        mx.random.seed(0)
        net = models.mlp([16], dropout=0.5)
        net.initialize(mx.init.Xavier())
        net(nd.array(x[:1]))
        trainer = gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.1})
        mx.random.seed(disturbance)
        records = list(run_epochs(net, trainer, ArrayLoader(x, y, 32), 2, classification_cost(),
                                  progress=False, seed=5))
        losses.append([r["loss"] for r in records])
    assert losses[0] == losses[1]
    bad = x.copy()
    bad[0] = np.inf  # inf - inf in the first layer: a NaN loss
    with pytest.raises(NonFiniteLossError, match="epoch 1 is not finite"):
        list(run_epochs(net, trainer, ArrayLoader(bad, y, 32), 1, classification_cost(),
                        progress=False))
