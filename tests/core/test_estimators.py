"""The training estimators (gluon_bbb.estimators): 'local' and 'flipout' have the expected
gradient of the paper's weight sampling, checked statistically in float64; with the noise held
fixed the cost is a smooth function of (mu, rho) whose autograd gradient matches central finite
differences; hybridizing the posterior and loss changes nothing; outside training the layers
compute as before."""
import functools

import mxnet as mx
import numpy as np
import pytest
from mxnet import gluon, nd

from gluon_bbb import BBBLoss, BBBTrainer, GaussianPrior, ScaleMixturePrior
from gluon_bbb.estimators import ESTIMATORS, LayerEstimators, check_estimator

DTYPE = "float64"


def _dense_net():
    net = gluon.nn.HybridSequential()
    net.add(gluon.nn.Dense(4, activation="tanh"), gluon.nn.Dense(3))
    return net


def _conv_net():
    net = gluon.nn.HybridSequential()
    net.add(gluon.nn.Conv2D(2, 3, activation="tanh"), gluon.nn.Dense(3))
    return net


def _data(kind, batch_size=6, seed=0):
    rng = np.random.default_rng(seed)
    shape = (batch_size, 3) if kind == "dense" else (batch_size, 1, 4, 4)
    x = nd.array(rng.normal(size=shape), dtype=DTYPE)
    y = nd.array(rng.integers(0, 3, size=batch_size), dtype=DTYPE)
    return x, y


def _trainer(kind, estimator, fused=False, hybridize=True, prior=None, seed=1, num_samples=1):
    mx.random.seed(0)
    net = _dense_net() if kind == "dense" else _conv_net()
    net.initialize(mx.init.Xavier(magnitude=3.0))
    net.cast(DTYPE)
    x, _ = _data(kind)
    net(x)
    loss = BBBLoss(prior or GaussianPrior(1.0))
    # learning rate 0: a step computes the gradient and leaves (mu, rho) where they are
    trainer = BBBTrainer(net, loss, optimizer="sgd", optimizer_params={"learning_rate": 0.0},
                         rho_init=-1.0, seed=seed, fused=fused, hybridize=hybridize,
                         estimator=estimator, num_samples=num_samples)
    trainer.prepare(x)
    return trainer


def _gradient(trainer):
    posterior = trainer.posterior
    return np.concatenate([p.grad().asnumpy().ravel() for p in posterior.mus + posterior.rhos])


#: Draws per step: a step's gradient is the mean over its samples, so the steps' gradients
#: are independent means of SAMPLES_PER_STEP draws each.
SAMPLES_PER_STEP = 25
NUM_STEPS = 48  # 1,200 draws


def _gradients(kind, estimator, fused=False, trainer=None):
    """NUM_STEPS gradients of the cost, each the mean over SAMPLES_PER_STEP draws."""
    trainer = trainer or _trainer(kind, estimator, fused=fused, num_samples=SAMPLES_PER_STEP)
    x, y = _data(kind)
    trainer.reseed(123)
    steps = []
    for _ in range(NUM_STEPS):
        trainer.step(x, y, 0.3)  # the complexity cost is in the gradient too
        steps.append(_gradient(trainer))
    return np.array(steps)


@functools.lru_cache(maxsize=None)
def _weight_sampling_gradients(kind):
    """The paper's estimator, the reference of several tests (computed once)."""
    return _gradients(kind, "weights")


def _z_scores(first, second):
    """abs(difference of the means) / its standard error, per coordinate."""
    standard_error = np.sqrt((first.var(axis=0, ddof=1) + second.var(axis=0, ddof=1)) / len(first))
    assert standard_error.max() > 0  # the draws do vary
    return np.abs(first.mean(axis=0) - second.mean(axis=0)) / np.maximum(standard_error, 1e-12)


@pytest.mark.parametrize("kind, estimator", [("dense", "local"), ("dense", "flipout"),
                                             ("conv", "flipout")])
def test_expected_gradient_equals_weight_sampling(kind, estimator):
    """Each of the 2 x (number of weights) coordinates of the mean gradient over 1,200 draws
    agrees with weight sampling's within 4.5 standard errors of the difference (a false alarm
    on a correct estimator: probability below 1e-3 over all coordinates)."""
    z = _z_scores(_gradients(kind, estimator), _weight_sampling_gradients(kind))
    assert z.max() < 4.5, (z.max(), int(z.argmax()))


def test_the_statistic_finds_a_wrong_estimator():
    """The test above can fail: a 'local' layer whose noise is twice too large has another
    expected gradient for rho, found by the same statistic."""
    reference = _weight_sampling_gradients("dense")
    trainer = _trainer("dense", "local", num_samples=SAMPLES_PER_STEP)
    forward = trainer.net[0].hybrid_forward
    original_local = forward._local

    def doubled_noise(F, x, mu, bias):
        out = original_local(F, x, mu, bias)
        mean = F.FullyConnected(x, mu, trainer.posterior.mus[forward.bias_index].data(), num_hidden=4)
        return mean + 2 * (out - mean)

    forward._local = doubled_noise
    assert _z_scores(_gradients("dense", "local", trainer=trainer), reference).max() > 6.0


@pytest.mark.parametrize("kind, estimator", [("dense", "local"), ("dense", "flipout"),
                                             ("conv", "flipout")])
def test_gradient_matches_finite_differences_with_the_noise_held(kind, estimator):
    trainer = _trainer(kind, estimator)
    x, y = _data(kind)
    posterior = trainer.posterior

    def cost():
        trainer.reseed(7)  # the same eps, Gaussians and signs every time
        return float(trainer.step(x, y, 0.3)[0].asscalar())

    cost()
    gradient = [p.grad().asnumpy().copy() for p in posterior.mus + posterior.rhos]
    rng = np.random.default_rng(1)
    step = 1e-6
    for k, param in enumerate(posterior.mus + posterior.rhos):
        value = param.data().asnumpy()
        for _ in range(3):
            index = tuple(rng.integers(0, n) for n in value.shape)
            shifted = []
            for sign in (1, -1):
                moved = value.copy()
                moved[index] += sign * step
                param.set_data(nd.array(moved, dtype=DTYPE))
                shifted.append(cost())
            param.set_data(nd.array(value, dtype=DTYPE))
            numeric = (shifted[0] - shifted[1]) / (2 * step)
            assert numeric == pytest.approx(gradient[k][index], rel=1e-5, abs=1e-6), (k, index)


@pytest.mark.parametrize("estimator", ["local", "flipout"])
def test_hybridized_posterior_and_loss_give_the_same_step(estimator):
    results = []
    for hybridize in (True, False):
        trainer = _trainer("dense", estimator, hybridize=hybridize,
                           prior=ScaleMixturePrior(0.5, 1.0, np.exp(-6)))
        x, y = _data("dense")
        trainer.reseed(5)
        cost = trainer.step(x, y, 0.3)[0].asscalar()
        results.append((cost, _gradient(trainer)))
    assert results[0][0] == pytest.approx(results[1][0], rel=1e-12)
    np.testing.assert_allclose(results[0][1], results[1][1], rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("estimator", ["local", "flipout"])
def test_fused_path_agrees_with_the_pure_path_in_expectation(estimator):
    """The fused operator draws w differently; the expected gradients agree all the same."""
    z = _z_scores(_gradients("dense", estimator, fused=False), _gradients("dense", estimator, fused=None))
    assert z.max() < 4.5


@pytest.mark.parametrize("estimator", ESTIMATORS)
def test_outside_training_the_layers_compute_with_their_parameters(estimator):
    trainer = _trainer("dense", estimator)
    x, y = _data("dense")
    trainer.step(x, y, 0.3)
    trainer.set_mean()
    first, second = trainer.net(x).asnumpy(), trainer.net(x).asnumpy()
    np.testing.assert_array_equal(first, second)  # no noise outside step()
    w1, b1, w2, b2 = [p.data().asnumpy() for p in trainer.posterior.mus]
    expected = np.tanh(x.asnumpy() @ w1.T + b1) @ w2.T + b2
    np.testing.assert_allclose(first, expected, rtol=1e-12)
    assert 0.0 <= trainer.evaluate([(x, y)]) <= 1.0


def test_the_report_names_each_layers_estimator():
    trainer = _trainer("conv", "local")
    conv, dense = trainer.net[0].name, trainer.net[1].name
    assert trainer.estimators.assignment == {conv: "weights", dense: "local"}
    assert trainer.estimator_report == f"local: {dense}; weights: {conv} ('local' covers Dense layers only)"
    trainer = _trainer("conv", "flipout")
    assert trainer.estimator_report == f"flipout: {trainer.net[0].name}, {trainer.net[1].name}"
    assert _trainer("dense", "weights").estimator_report.startswith("weights: every layer")


def test_a_frozen_layer_keeps_its_weights():
    mx.random.seed(0)
    net = _dense_net()
    net.initialize()
    net.cast(DTYPE)
    x, y = _data("dense")
    net(x)
    net[0].weight.grad_req = "null"
    net[0].bias.grad_req = "null"
    net[1].bias.grad_req = "null"  # a frozen bias beside a trained weight
    net[1].bias.set_data(nd.array([0.5, -1.0, 2.0], dtype=DTYPE))
    frozen_bias = net[1].bias.data().asnumpy().copy()
    trainer = BBBTrainer(net, BBBLoss(GaussianPrior(1.0)), estimator="local", fused=False,
                         rho_init=-30.0)  # sigma ~ 1e-13: the local draw is the mean
    trainer.prepare(x)
    assert trainer.estimators.assignment[net[0].name] == "weights"
    assert trainer.estimators.assignment[net[1].name] == "local"
    assert "frozen" in trainer.estimator_report
    with trainer.estimators.training():
        hidden = net[0](x)
        local = net[1](hidden).asnumpy()
    mu = trainer.posterior.mus[-1].data().asnumpy()  # the second layer's weight
    np.testing.assert_allclose(local, hidden.asnumpy() @ mu.T + frozen_bias, rtol=1e-9, atol=1e-9)
    trainer.step(x, y, 0.1)


def test_unknown_estimators_are_refused():
    with pytest.raises(ValueError, match="estimator must be one of"):
        check_estimator("dropout")
    with pytest.raises(ValueError, match="estimator must be one of"):
        BBBTrainer(_dense_net(), BBBLoss(GaussianPrior(1.0)), estimator="Local")
    assert LayerEstimators.__doc__
