"""BBBLoss against a float64 NumPy Eq. (8), and gradients against finite differences."""
import math
import warnings

import mxnet as mx
import numpy as np
import pytest
from mxnet import autograd, gluon, nd

from gluon_bbb import BBBLoss, GaussianPrior, ScaleMixturePrior, kl_weights
from gluon_bbb.posterior import VariationalPosterior, assign_arrays

import reference as ref

PRIORS = [GaussianPrior(0.5), ScaleMixturePrior(0.25, math.exp(-1), math.exp(-6))]


def tiny_problem(dtype="float64", seed=0, hybridize=False, likelihood="softmax"):
    """A 3-5-4 MLP, its posterior with random mu and rho, fixed eps, and one batch."""
    rng = np.random.default_rng(seed)
    mx.random.seed(seed)
    net = gluon.nn.HybridSequential()
    net.add(gluon.nn.Dense(5, activation="relu", in_units=3, dtype=dtype), gluon.nn.Dense(4, in_units=5, dtype=dtype))
    net.initialize()
    posterior = VariationalPosterior(net, mu_init=0.5, rho_init=(-4.0, -1.0))
    posterior.initialize()
    if hybridize:
        net.hybridize()
        posterior.hybridize()
    epsilons = [nd.array(rng.standard_normal(s), dtype=dtype) for s in posterior.shapes]
    x = nd.array(rng.standard_normal((6, 3)), dtype=dtype)
    if likelihood == "softmax":
        y = nd.array(rng.integers(0, 4, size=6), dtype=dtype)
    else:
        y = nd.array(rng.standard_normal((6, 4)), dtype=dtype)
    return net, posterior, epsilons, x, y


def bbb_cost(net, posterior, loss, epsilons, x, y, kl_weight):
    outputs = posterior(*epsilons)
    k = len(epsilons)
    weights, sigmas = outputs[:k], outputs[k:]
    assign_arrays(posterior.targets, weights)
    kl = nd.array([kl_weight], dtype=x.dtype)
    return loss(net(x), y, kl, weights, sigmas, epsilons)


def numpy_eq8(posterior, epsilons, x, y, prior, kl_weight, likelihood="softmax", noise_sigma=1.0):
    mus = [m.data().asnumpy().astype(np.float64) for m in posterior.mus]
    rhos = [r.data().asnumpy().astype(np.float64) for r in posterior.rhos]
    eps = [e.asnumpy().astype(np.float64) for e in epsilons]
    ws = [m + ref.softplus(r) * e for m, r, e in zip(mus, rhos, eps)]
    log_q = sum(ref.log_q(m, r, e).sum() for m, r, e in zip(mus, rhos, eps))
    if isinstance(prior, GaussianPrior):
        log_p = sum(ref.log_gaussian_prior(w, prior.sigma).sum() for w in ws)
    else:
        log_p = sum(ref.log_scale_mixture_prior(w, prior.pi, prior.sigma1, prior.sigma2).sum() for w in ws)
    out = ref.mlp_forward(x.asnumpy().astype(np.float64), list(zip(ws[0::2], ws[1::2])))
    labels = y.asnumpy().astype(np.float64)
    if likelihood == "softmax":
        nll = ref.softmax_nll(out, labels)
    else:
        nll = -ref.log_normal(labels - out, noise_sigma).sum()
    return kl_weight * (log_q - log_p) + nll, nll, log_q - log_p


@pytest.mark.parametrize("prior", PRIORS, ids=["gaussian", "mixture"])
@pytest.mark.parametrize("likelihood", ["softmax", "gaussian"])
def test_loss_matches_numpy_eq8(prior, likelihood):
    net, posterior, epsilons, x, y = tiny_problem(likelihood=likelihood)
    loss = BBBLoss(prior, likelihood=likelihood, noise_sigma=0.7)
    cost, nll, complexity = bbb_cost(net, posterior, loss, epsilons, x, y, kl_weight=0.1)
    expected = numpy_eq8(posterior, epsilons, x, y, prior, 0.1, likelihood, noise_sigma=0.7)
    np.testing.assert_allclose([cost.asscalar(), nll.asscalar(), complexity.asscalar()], expected, rtol=1e-7)


def test_loss_float32_matches_numpy_eq8():
    net, posterior, epsilons, x, y = tiny_problem(dtype="float32")
    prior = PRIORS[1]
    cost, nll, complexity = bbb_cost(net, posterior, BBBLoss(prior), epsilons, x, y, kl_weight=0.3)
    expected = numpy_eq8(posterior, epsilons, x, y, prior, 0.3)
    np.testing.assert_allclose([cost.asscalar(), nll.asscalar(), complexity.asscalar()], expected, rtol=2e-5)


@pytest.mark.parametrize("prior", PRIORS, ids=["gaussian", "mixture"])
@pytest.mark.parametrize("hybridize", [False, True])
def test_gradients_match_central_finite_differences(prior, hybridize):
    net, posterior, epsilons, x, y = tiny_problem(hybridize=hybridize)
    loss = BBBLoss(prior)
    if hybridize:
        loss.hybridize()
    with autograd.record():
        cost = bbb_cost(net, posterior, loss, epsilons, x, y, kl_weight=0.2)[0]
    cost.backward()
    ref.check_against_central_differences(
        posterior, lambda: bbb_cost(net, posterior, loss, epsilons, x, y, kl_weight=0.2)[0])


@pytest.mark.parametrize("prior", PRIORS, ids=["gaussian", "mixture"])
def test_hybridized_matches_imperative(prior):
    results = []
    for hybridize in (False, True):
        net, posterior, epsilons, x, y = tiny_problem(dtype="float32", hybridize=hybridize)
        loss = BBBLoss(prior)
        if hybridize:
            loss.hybridize()
        with autograd.record():
            cost = bbb_cost(net, posterior, loss, epsilons, x, y, kl_weight=0.5)[0]
        cost.backward()
        results.append((cost.asscalar(), [p.grad().asnumpy() for p in posterior.mus + posterior.rhos]))
    (cost_a, grads_a), (cost_b, grads_b) = results
    np.testing.assert_allclose(cost_a, cost_b, rtol=1e-6)
    for a, b in zip(grads_a, grads_b):
        assert np.abs(a).max() > 0
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def test_log_q_gradient_is_finite_for_tiny_sigma():
    """The reparameterised log q keeps finite gradients where (w - mu)^2 / 2 sigma^2 would not."""
    rho = nd.array([-40.0, -30.0, -20.0])
    rho.attach_grad()
    eps = nd.array([0.3, -1.2, 2.0])
    prior = GaussianPrior(1.0)
    loss = BBBLoss(prior)
    with autograd.record():
        from gluon_bbb._math import softplus
        sigma = softplus(nd, rho)
        w = nd.zeros(3) + sigma * eps
        complexity = loss.complexity(nd, [w], [sigma], [eps])
    complexity.backward()
    assert np.all(np.isfinite(rho.grad.asnumpy()))
    np.testing.assert_allclose(rho.grad.asnumpy(), -1.0, rtol=1e-4)  # d(-log sigma)/d rho -> -1


def test_bad_loss_settings():
    with pytest.raises(TypeError, match="prior"):
        BBBLoss("gaussian")
    with pytest.raises(ValueError, match="likelihood"):
        BBBLoss(GaussianPrior(1.0), likelihood="poisson")
    with pytest.raises(ValueError, match="noise_sigma"):
        BBBLoss(GaussianPrior(1.0), likelihood="gaussian", noise_sigma=0.0)


def test_kl_weights_uniform_and_blundell_eq9():
    np.testing.assert_allclose(kl_weights("uniform", 4), [0.25] * 4)
    m = 7
    exact = [2 ** (m - i) / (2 ** m - 1) for i in range(1, m + 1)]
    np.testing.assert_allclose(kl_weights("blundell", m), exact, rtol=1e-14)
    large = kl_weights("blundell", 469)
    assert np.all(np.isfinite(large)) and abs(large.sum() - 1) < 1e-12 and large[0] == pytest.approx(0.5)
    with pytest.raises(ValueError, match="kl_weighting"):
        kl_weights("linear", 3)
    with pytest.raises(ValueError, match="num_batches"):
        kl_weights("uniform", 0)


# ---------------------------------------------------------------------------- closed-form KL
def numpy_gaussian_kl(mus, sigmas, s):
    """sum KL(N(mu, sigma^2) || N(0, s^2)) in float64, written from the densities' definition."""
    return sum(np.sum(np.log(s / sg) + (sg ** 2 + m ** 2) / (2 * s ** 2) - 0.5)
               for m, sg in zip(mus, sigmas))


@pytest.mark.parametrize("hybridize", [False, True])
def test_closed_form_kl_matches_a_float64_formula(hybridize):
    net, posterior, epsilons, x, y = tiny_problem(hybridize=hybridize)
    prior = GaussianPrior(0.5)
    loss = BBBLoss(prior, kl="closed_form")
    if hybridize:
        loss.hybridize()
    cost, nll, complexity = bbb_cost(net, posterior, loss, epsilons, x, y, kl_weight=0.1)
    mus = [m.data().asnumpy() for m in posterior.mus]
    sigmas = [ref.softplus(r.data().asnumpy()) for r in posterior.rhos]
    expected_kl = numpy_gaussian_kl(mus, sigmas, 0.5)
    expected_nll = numpy_eq8(posterior, epsilons, x, y, prior, 0.1)[1]  # the same sample
    np.testing.assert_allclose(complexity.asscalar(), expected_kl, rtol=1e-8)  # mu = w - sigma eps
    np.testing.assert_allclose(cost.asscalar(), 0.1 * expected_kl + expected_nll, rtol=1e-8)
    np.testing.assert_allclose(nll.asscalar(), expected_nll, rtol=1e-10)
    # the same value whatever the noise: only nll depends on eps
    other = [e * 0 + 1 for e in epsilons]
    again = bbb_cost(net, posterior, loss, other, x, y, kl_weight=0.1)[2].asscalar()
    np.testing.assert_allclose(again, expected_kl, rtol=1e-8)


def test_the_monte_carlo_complexity_averages_to_the_closed_form():
    """E_q[log q(w) - log P(w)] = KL(q || P): the paper's estimate is unbiased. 1,500 draws; the
    average must lie within 4 standard errors of the closed form."""
    net, posterior, _, x, y = tiny_problem()
    prior = GaussianPrior(0.5)
    mc, closed = BBBLoss(prior), BBBLoss(prior, kl="closed_form")
    rng = np.random.default_rng(3)
    draws = []
    for _ in range(1500):
        eps = [nd.array(rng.standard_normal(s), dtype="float64") for s in posterior.shapes]
        draws.append(bbb_cost(net, posterior, mc, eps, x, y, 1.0)[2].asscalar())
    exact = bbb_cost(net, posterior, closed, eps, x, y, 1.0)[2].asscalar()
    standard_error = np.std(draws, ddof=1) / np.sqrt(len(draws))
    assert abs(np.mean(draws) - exact) < 4 * standard_error, (np.mean(draws), exact, standard_error)


def test_closed_form_kl_gradients_match_central_finite_differences():
    net, posterior, epsilons, x, y = tiny_problem()
    loss = BBBLoss(GaussianPrior(0.5), kl="closed_form")
    with autograd.record():
        complexity = bbb_cost(net, posterior, loss, epsilons, x, y, kl_weight=1.0)[2]
    complexity.backward()
    ref.check_against_central_differences(
        posterior, lambda: bbb_cost(net, posterior, loss, epsilons, x, y, 1.0)[2])


def test_closed_form_kl_is_refused_for_the_scale_mixture():
    with pytest.raises(ValueError, match="ScaleMixturePrior has none .*kl='monte_carlo'"):
        BBBLoss(ScaleMixturePrior(), kl="closed_form")
    with pytest.raises(ValueError, match="unknown kl 'exact'"):
        BBBLoss(GaussianPrior(), kl="exact")
    with pytest.raises(ValueError, match="no closed-form KL"):
        ScaleMixturePrior().sum_kl(nd.zeros((2,)), nd.ones((2,)))


def _precomputed_call(prior, hybridize=True):
    """A loss with ``prior`` and the arguments of a call with a precomputed complexity."""
    loss = BBBLoss(prior)
    if hybridize:
        loss.hybridize()
    pred = nd.array(np.random.default_rng(0).normal(size=(6, 4)))
    return loss, (pred, nd.array([0, 1, 2, 3, 0, 1]), nd.array([0.1]), nd.array([2.5]))


def _diagonal_prior():
    from gluon_bbb import DiagonalGaussianPrior
    return DiagonalGaussianPrior([np.zeros((4, 3)), np.zeros(4)], [np.ones((4, 3)), np.ones(4)])


@pytest.mark.parametrize("hybridize", [False, True])
def test_a_precomputed_complexity_leaves_the_per_weight_priors_arrays_unreported(hybridize):
    """With the fused operator's complexity the per-weight prior's arrays are not inputs of the
    cost: gluon reports no unused parameter, and the cost is pi * complexity + nll."""
    loss, args = _precomputed_call(_diagonal_prior(), hybridize)
    loss.initialize()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(2):
            cost, nll, complexity = loss(*args)
    assert [str(w.message) for w in caught] == []
    pred, label = args[0].asnumpy(), args[1].asnumpy().astype(int)
    want = -np.sum(pred[np.arange(6), label] - np.log(np.exp(pred).sum(axis=1)))
    np.testing.assert_allclose(nll.asnumpy(), [want], rtol=1e-6)
    np.testing.assert_allclose(cost.asnumpy(), [0.1 * 2.5 + want], rtol=1e-6)
    assert complexity.asscalar() == 2.5


def test_a_hybridized_loss_takes_both_calling_conventions():
    """Weights, sigmas and eps in one call and a precomputed complexity in the next: each
    convention has its graph, with the imperative loss's values."""
    net, posterior, epsilons, x, y = tiny_problem()
    hybrid, imperative = BBBLoss(PRIORS[0]), BBBLoss(PRIORS[0])
    hybrid.hybridize()
    for loss in (hybrid, imperative):
        full = bbb_cost(net, posterior, loss, epsilons, x, y, 0.1)
        short = loss(net(x), y, nd.array([0.1], dtype=x.dtype), full[2])
        full_again = bbb_cost(net, posterior, loss, epsilons, x, y, 0.1)
        for a, b, c in zip(full, short, full_again):
            np.testing.assert_allclose(a.asnumpy(), b.asnumpy(), rtol=1e-12)
            np.testing.assert_array_equal(a.asnumpy(), c.asnumpy())


def test_a_learnable_prior_still_refuses_a_precomputed_complexity():
    loss, args = _precomputed_call(GaussianPrior(0.5, learnable=True))
    loss.initialize()
    with pytest.raises(TypeError, match="learnable prior needs"):
        loss(*args)


def _users_warning():
    warnings.warn("a warning of the user's own", UserWarning)


def test_the_loss_leaves_the_users_warnings_alone():
    """The loss's calls touch no warning filter: a user's warning raised inside the loss (a
    likelihood of their own) is shown, and one repeated between steps under the 'default'
    action is shown once, not again after every call of the loss."""
    class Warns(BBBLoss):
        def negative_log_likelihood(self, F, pred, label):
            warnings.warn("inside the likelihood", RuntimeWarning)
            return super().negative_log_likelihood(F, pred, label)

    inside, args = Warns(_diagonal_prior()), _precomputed_call(_diagonal_prior(), False)[1]
    inside.initialize()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        inside(*args)
    assert [str(w.message) for w in caught] == ["inside the likelihood"]
    loss, args = _precomputed_call(_diagonal_prior())
    loss.initialize()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("default")
        for _ in range(3):
            loss(*args)
            _users_warning()
    assert [str(w.message) for w in caught] == ["a warning of the user's own"]
