import mxnet as mx
import numpy as np
import pytest
from mxnet import autograd, gluon, nd

from gluon_bbb import resolve_context
from gluon_bbb.posterior import GaussianNoise, VariationalPosterior, assign_arrays, trainable_parameters


def test_assign_arrays_makes_the_net_compute_with_the_given_array():
    """Fails if MXNet stops honouring writes to Parameter._data (the one private attribute)."""
    for hybridize in (False, True):
        net = gluon.nn.HybridSequential()
        net.add(gluon.nn.Dense(2, in_units=3))
        net.initialize()
        if hybridize:
            net.hybridize()
        x = nd.ones((1, 3))
        net(x)
        weight, bias = [p for _, p in trainable_parameters(net)]
        new_weight = nd.array([[1.0, 2.0, 3.0], [0.0, 0.0, -1.0]])
        new_weight.attach_grad()
        assign_arrays([weight, bias], [new_weight, nd.zeros(2)])
        assert weight.data() is new_weight
        with autograd.record():
            out = net(x)
        out.backward(nd.array([[1.0, 0.0]]))
        np.testing.assert_allclose(out.asnumpy(), [[6.0, -1.0]])
        np.testing.assert_allclose(new_weight.grad.asnumpy(), [[1, 1, 1], [0, 0, 0]])


def test_assign_arrays_rejects_wrong_shapes():
    net = gluon.nn.Dense(2, in_units=3)
    net.initialize()
    with pytest.raises(ValueError, match="does not fit"):
        assign_arrays([net.weight], [nd.zeros((3, 2))])


def test_posterior_covers_trainable_parameters_only():
    net = gluon.nn.HybridSequential()
    net.add(gluon.nn.Dense(4, in_units=3), gluon.nn.BatchNorm(in_channels=4), gluon.nn.Dense(2, in_units=4))
    net.initialize()
    posterior = VariationalPosterior(net, rho_init=-3.0)
    posterior.initialize()
    covered = set(posterior.names)
    assert not any("running" in name for name in covered)
    assert any("gamma" in name for name in covered)
    assert posterior.num_weights == 3 * 4 + 4 + 4 + 4 + 4 * 2 + 2
    # mu_init='net' starts at the network's own values; sigma = softplus(-3)
    for mu, target in zip(posterior.mus, posterior.targets):
        np.testing.assert_array_equal(mu.data().asnumpy(), target.data().asnumpy())
    np.testing.assert_allclose(posterior.sigmas()[0].asnumpy(), np.log1p(np.exp(-3.0)), rtol=1e-6)


def test_posterior_initialisation_options():
    net = gluon.nn.Dense(500, in_units=400)
    net.initialize()
    posterior = VariationalPosterior(net, mu_init=0.1, rho_init=(-6.0, -4.0))
    posterior.initialize()
    mu = posterior.mus[0].data().asnumpy()
    rho = posterior.rhos[0].data().asnumpy()
    assert abs(mu.std() - 0.1) < 0.005
    assert rho.min() >= -6.0 and rho.max() <= -4.0 and abs(rho.mean() + 5.0) < 0.01
    with pytest.raises(ValueError, match="mu_init"):
        VariationalPosterior(net, mu_init="xavier")
    with pytest.raises(ValueError, match="rho_init"):
        VariationalPosterior(net, rho_init=(-1.0, -2.0))


def test_posterior_needs_known_shapes():
    net = gluon.nn.Dense(3)
    net.initialize()  # deferred: the input size is unknown
    with pytest.raises(ValueError, match="forward pass"):
        VariationalPosterior(net)


@pytest.mark.parametrize("generator", ["numpy", "mxnet"])
def test_gaussian_noise_is_standard_normal_and_reseeded(generator):
    shapes = [(300, 700), (300,), (10, 300)]
    noise = GaussianNoise(shapes, mx.cpu(), seed=3, generator=generator)
    noise.reseed(5)
    samples = noise.sample()
    assert [s.shape for s in samples] == shapes
    values = np.concatenate([s.asnumpy().ravel() for s in samples])
    assert abs(values.mean()) < 0.005 and abs(values.std() - 1) < 0.005
    mx.random.seed(99)  # disturbs MXNet's generator: reseed must still decide
    other = GaussianNoise(shapes, mx.cpu(), seed=4, generator=generator)
    other.reseed(5)
    np.testing.assert_array_equal(samples[2].asnumpy(), other.sample()[2].asnumpy())
    other.reseed(6)
    assert not np.array_equal(samples[2].asnumpy(), other.sample()[2].asnumpy())
    assert GaussianNoise(shapes, mx.cpu(), dtype="float64", generator=generator).sample()[0].dtype \
        == np.float64
    with pytest.raises(ValueError, match="generator must be one of"):
        GaussianNoise(shapes, mx.cpu(), generator="torch")


def test_gaussian_noise_seed_and_state():
    shapes = [(300, 700), (300,), (10, 300)]
    noise = GaussianNoise(shapes, mx.cpu(), seed=3)
    state = noise.get_state()
    samples = noise.sample()
    again = GaussianNoise(shapes, mx.cpu(), seed=3).sample()
    np.testing.assert_array_equal(samples[2].asnumpy(), again[2].asnumpy())
    noise.set_state(state)
    np.testing.assert_array_equal(samples[0].asnumpy(), noise.sample()[0].asnumpy())
    with pytest.raises(ValueError, match="not a state of the noise generator"):
        noise.set_state({"bit_generator": "PCG64", "state": "x"})
    mx.random.seed(42)
    a = GaussianNoise(shapes, mx.cpu()).sample()[1].asnumpy()
    mx.random.seed(42)
    b = GaussianNoise(shapes, mx.cpu()).sample()[1].asnumpy()
    np.testing.assert_array_equal(a, b)
    assert GaussianNoise(shapes, mx.cpu(), generator="mxnet").get_state() is None


def test_resolve_context():
    assert resolve_context(None) == mx.cpu()
    assert resolve_context("cpu") == mx.cpu()
    with pytest.raises(ValueError, match=r"gpu\(0\) is not available"):
        resolve_context("gpu")
    with pytest.raises(ValueError, match=r"gpu\(2\)"):
        resolve_context(mx.gpu(2))
    with pytest.raises(ValueError, match="unknown context"):
        resolve_context("cuda:0")


# ---------------------------------------------------------------------------- MOPED
def test_inverse_softplus_inverts_softplus_in_float64():
    from gluon_bbb.posterior import inverse_softplus
    sigma = np.array([1e-12, 1e-8, 0.0067, 0.5, 1.0, 29.9, 30.1, 400.0])
    rho = inverse_softplus(sigma)
    np.testing.assert_allclose(np.logaddexp(0.0, rho), sigma, rtol=1e-12)
    with pytest.raises(ValueError, match="positive"):
        inverse_softplus([0.1, 0.0])


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_moped_starts_each_sigma_in_proportion_to_its_trained_weight(dtype):
    from gluon_bbb.posterior import MOPED_MIN_SIGMA
    net = gluon.nn.HybridSequential()
    net.add(gluon.nn.Dense(7, in_units=5, dtype=dtype), gluon.nn.Dense(3, in_units=7, dtype=dtype))
    net.initialize(mx.init.Normal(0.3))  # the "trained" network; its biases are 0
    posterior = VariationalPosterior(net, sigma_init="moped", moped_delta=0.2)
    posterior.initialize()
    for target, mu, sigma in zip(posterior.targets, posterior.mus, posterior.sigmas()):
        w = target.data().asnumpy().astype(np.float64)
        np.testing.assert_array_equal(mu.data().asnumpy(), target.data().asnumpy())
        expected = np.maximum(0.2 * np.abs(w), MOPED_MIN_SIGMA)
        np.testing.assert_allclose(sigma.asnumpy(), expected, rtol=1e-6 if dtype == "float64" else 1e-4)


@pytest.mark.parametrize("kwargs, message", [
    ({"sigma_init": "moped", "mu_init": 0.1}, "needs mu_init='net'"),
    ({"sigma_init": "kaiming"}, "sigma_init must be None or 'moped'"),
    ({"sigma_init": "moped", "moped_delta": 0.0}, "moped_delta"),
])
def test_bad_moped_settings_are_refused(kwargs, message):
    net = gluon.nn.Dense(3, in_units=2)
    net.initialize()
    with pytest.raises(ValueError, match=message):
        VariationalPosterior(net, **kwargs)


def test_width_summary_against_numpy_and_in_every_fit_record():
    """The median sigma and the share of weights with abs(mu) < sigma over the weight
    tensors (not the biases), against a float64 NumPy computation; fit records it."""
    from gluon_bbb import BBBLoss, BBBTrainer, GaussianPrior
    from gluon_bbb.data import ArrayLoader
    net = gluon.nn.HybridSequential()
    net.add(gluon.nn.Dense(7, in_units=5), gluon.nn.Dense(3, in_units=7))
    net.initialize(mx.init.Uniform(0.3))
    posterior = VariationalPosterior(net, rho_init=(-3.0, 0.0))
    posterior.initialize()
    summary = posterior.width_summary()
    mus = [mu.data().asnumpy().astype(np.float64) for mu in posterior.mus]
    rhos = [rho.data().asnumpy().astype(np.float64) for rho in posterior.rhos]
    weights = [i for i, mu in enumerate(mus) if mu.ndim == 2]
    assert weights == [0, 2]
    mu = np.concatenate([mus[i].ravel() for i in weights])
    sigma = np.concatenate([np.log1p(np.exp(rhos[i])).ravel() for i in weights])
    assert summary["median_sigma"] == pytest.approx(np.median(sigma), rel=1e-6)
    assert summary["snr_below_1"] == np.mean(np.abs(mu) < sigma)
    assert 0 < summary["snr_below_1"] < 1  # the check is not vacuous

    rng = np.random.default_rng(0)
    x = rng.normal(size=(64, 5)).astype(np.float32)
    y = (x[:, 0] > 0).astype(np.float32)
    trainer = BBBTrainer(net, BBBLoss(GaussianPrior(1.0)), seed=0)
    history = trainer.fit(ArrayLoader(x, y, batch_size=16), 2, progress=False)
    assert [set(r["posterior"]) for r in history] == [{"median_sigma", "snr_below_1"}] * 2
    assert history[-1]["posterior"] == trainer.posterior.width_summary()
