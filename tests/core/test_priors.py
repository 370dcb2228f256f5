import math

import mxnet as mx
import numpy as np
import pytest
from mxnet import gluon, nd

from gluon_bbb import GaussianPrior, ScaleMixturePrior, prior_from_config
from gluon_bbb._math import softplus

from reference import log_gaussian_prior, log_scale_mixture_prior
from reference import softplus as softplus_ref

EXTREME_W = np.array([-50.0, -3.0, -1e-3, -1e-8, 0.0, 1e-6, 0.01, 0.5, 2.0, 10.0, 50.0])


@pytest.mark.parametrize("dtype,rtol", [("float64", 1e-12), ("float32", 2e-6)])
def test_gaussian_log_prob_matches_closed_form(dtype, rtol):
    prior = GaussianPrior(0.3)
    got = prior.log_prob(nd.array(EXTREME_W, dtype=dtype)).asnumpy()
    expected = log_gaussian_prior(EXTREME_W, 0.3)
    np.testing.assert_allclose(got, expected, rtol=rtol, atol=rtol)


@pytest.mark.parametrize("sigma2", [math.exp(-6), math.exp(-8)])
@pytest.mark.parametrize("dtype,tol", [("float64", 1e-6), ("float32", 1e-5)])
def test_scale_mixture_log_prob_matches_closed_form(sigma2, dtype, tol):
    prior = ScaleMixturePrior(pi=0.25, sigma1=1.0, sigma2=sigma2)
    got = prior.log_prob(nd.array(EXTREME_W, dtype=dtype)).asnumpy().astype(np.float64)
    expected = log_scale_mixture_prior(EXTREME_W, 0.25, 1.0, sigma2)
    assert np.all(np.isfinite(got))
    np.testing.assert_allclose(got, expected, rtol=tol, atol=tol)


def test_scale_mixture_is_finite_far_in_the_tail():
    prior = ScaleMixturePrior(pi=0.5, sigma1=1.0, sigma2=math.exp(-8))
    w = np.array([-50.0, 50.0, 1e3, -1e4], dtype=np.float32)
    got = prior.log_prob(nd.array(w)).asnumpy()
    assert np.all(np.isfinite(got))
    np.testing.assert_allclose(got, log_scale_mixture_prior(w.astype(np.float64), 0.5, 1.0, math.exp(-8)), rtol=1e-6)


class _PriorBlock(gluon.HybridBlock):
    def __init__(self, prior):
        super().__init__()
        self.prior = prior

    def hybrid_forward(self, F, w):
        return self.prior.log_prob(w, F)


@pytest.mark.parametrize("prior", [GaussianPrior(0.5), ScaleMixturePrior(0.5, 1.0, math.exp(-7))])
def test_log_prob_works_inside_hybrid_forward(prior):
    block = _PriorBlock(prior)
    block.initialize()
    w = nd.array(EXTREME_W)
    imperative = block(w).asnumpy()
    block.hybridize()
    hybridized = block(w).asnumpy()
    np.testing.assert_allclose(hybridized, imperative, rtol=1e-6)
    assert isinstance(prior.log_prob(mx.sym.var("w")), mx.sym.Symbol)


@pytest.mark.parametrize(
    "make, name",
    [
        (lambda: GaussianPrior(0.0), "sigma"),
        (lambda: GaussianPrior(-1.0), "sigma"),
        (lambda: GaussianPrior(float("nan")), "sigma"),
        (lambda: ScaleMixturePrior(0.0, 1.0, 0.1), "pi"),
        (lambda: ScaleMixturePrior(1.0, 1.0, 0.1), "pi"),
        (lambda: ScaleMixturePrior(0.5, -1.0, 0.1), "sigma1"),
        (lambda: ScaleMixturePrior(0.5, 1.0, 0.0), "sigma2"),
        (lambda: ScaleMixturePrior(0.5, 0.1, 1.0), "sigma2 must be smaller than sigma1"),
    ],
)
def test_invalid_prior_settings_name_the_argument(make, name):
    with pytest.raises(ValueError, match=name):
        make()


def test_prior_config_round_trip():
    for prior in [GaussianPrior(0.2), ScaleMixturePrior(0.75, math.exp(-1), math.exp(-7))]:
        assert prior_from_config(prior.config()) == prior
    with pytest.raises(ValueError, match="unknown prior"):
        prior_from_config({"name": "laplace"})


@pytest.mark.parametrize("dtype,rtol", [("float32", 5e-6), ("float64", 1e-7)])
def test_softplus_is_accurate_positive_and_finite(dtype, rtol):
    rho = np.concatenate([np.linspace(-50, 50, 40001), [-3.0, -2.9999999, -3.0000001]])
    got = softplus(nd, nd.array(rho, dtype=dtype)).asnumpy().astype(np.float64)
    expected = softplus_ref(rho)
    assert np.all(np.isfinite(got)) and np.all(got > 0)
    np.testing.assert_allclose(got, expected, rtol=rtol)


@pytest.mark.parametrize("prior", [GaussianPrior(0.3), ScaleMixturePrior(0.25, 1.0, math.exp(-8)),
                                   ScaleMixturePrior(0.75, math.exp(-2), math.exp(-6))])
def test_sum_log_prob_equals_the_sum_of_the_elementwise_log_prob(prior):
    w = np.concatenate([EXTREME_W, np.random.default_rng(0).normal(scale=0.05, size=1000)])
    got = prior.sum_log_prob(nd.array(w, dtype="float64")).asnumpy()
    assert got.shape == (1,)
    if isinstance(prior, GaussianPrior):
        expected = log_gaussian_prior(w, prior.sigma).sum()
    else:
        expected = log_scale_mixture_prior(w, prior.pi, prior.sigma1, prior.sigma2).sum()
    np.testing.assert_allclose(got[0], expected, rtol=1e-9)
    block = _SumBlock(prior)
    block.initialize()
    block.hybridize()
    np.testing.assert_allclose(block(nd.array(w, dtype="float64")).asnumpy()[0], expected, rtol=1e-9)


class _SumBlock(gluon.HybridBlock):
    def __init__(self, prior):
        super().__init__()
        self.prior = prior

    def hybrid_forward(self, F, w):
        return self.prior.sum_log_prob(w, F)


@pytest.mark.parametrize("learnable", [False, True])
@pytest.mark.parametrize("deviation", [1e-2, 1e-4, 1e-6, -1e-3, -1e-5])
def test_float32_gaussian_closed_form_kl_is_accurate_near_the_prior(deviation, learnable):
    """KL(N(mu, sigma^2) || N(0, s^2)) summed over 1,000 weights in float32 with sigma_j = s (1 +
    deviation) and small mu_j: within 2e-6 of the exact value (40-digit decimal arithmetic on
    the same float32 numbers), for a fixed s and a learned one (a (1,) array); the textbook form
    was off by 50% from |r - 1| = 1e-4 on."""
    import decimal
    rng = np.random.default_rng(5)
    s = 0.37
    sigma = np.full(1000, np.float32(s) * np.float32(1.0 + deviation), dtype=np.float32)
    mu = (rng.normal(size=1000) * 1e-3 * s).astype(np.float32)
    prior = GaussianPrior(s, learnable=learnable)
    if learnable:
        prior.initialize(mx.cpu(), "float32")
    kl = prior.sum_kl(nd.array(mu), nd.array(sigma))
    assert kl.dtype == np.float32
    # the s the float32 arithmetic uses: float32(s), or exp of float32(log s) by MXNet's kernel
    s_used = float(nd.exp(nd.array([math.log(s)])).asnumpy()[0] if learnable else np.float32(s))
    assert prior.sigma == pytest.approx(s_used, rel=1e-6)
    with decimal.localcontext() as context:
        context.prec = 40
        d_s = decimal.Decimal(s_used)
        exact = sum(((decimal.Decimal(float(b)) / d_s) ** 2 - 1
                     + (decimal.Decimal(float(a)) / d_s) ** 2) / 2
                    - (decimal.Decimal(float(b)) / d_s).ln() for a, b in zip(mu, sigma))
    assert abs(kl.asnumpy()[0] / float(exact) - 1.0) < 2e-6, (kl.asnumpy()[0], float(exact))
