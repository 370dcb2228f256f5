"""``variational_sample(num_draws=K)``: K weight sets from one call of the fused operator.

* draw 0 is a single draw's noise under the same key, and the draws' noise is independent
  (correlation within 6 standard errors of 0);
* with the same eps given, each draw's w equals a single call's, and the complexity is the sum
  of the K single calls' (float64 NumPy as the independent reference);
* MXNet's autograd adds the gradients that reach mu and rho through their K inputs: they equal
  the sum of K single calls' gradients, with the drawn noise kept or drawn again;
* bad counts are named.
"""
import math

import mxnet as mx
import numpy as np
import pytest
from mxnet import autograd, nd

from gluon_bbb import GaussianPrior, ScaleMixturePrior, fused

import reference as ref
from fused_paths import fused_or_skip

PRIORS = [GaussianPrior(0.3), ScaleMixturePrior(0.25, math.exp(-1), math.exp(-7))]
SHAPES = [(40, 30), (40,), (3, 40)]


@pytest.fixture(autouse=True)
def fused_available(monkeypatch):
    monkeypatch.setenv(fused.ENV_SWITCH, "1")
    fused_or_skip()


def parameters(dtype, seed=0):
    rng = np.random.default_rng(seed)
    mus = [nd.array(rng.normal(scale=0.5, size=s), dtype=dtype) for s in SHAPES]
    rhos = [nd.array(rng.uniform(-6, 1, size=s), dtype=dtype) for s in SHAPES]
    return mus, rhos


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_draw_zero_is_the_single_draw_and_the_draws_are_independent(dtype):
    mus, rhos = parameters(dtype)
    zeros = [nd.zeros_like(m) for m in mus]
    single = fused.variational_sample(zeros, zeros, GaussianPrior(1.0), key=77)[2]
    weights, _, eps = fused.variational_sample(zeros, zeros, GaussianPrior(1.0), key=77,
                                               num_draws=4)
    assert len(weights) == len(eps) == 4
    assert all([tuple(w.shape) for w in draw] == SHAPES for draw in weights)
    for a, b in zip(eps[0], single):
        np.testing.assert_array_equal(a.asnumpy(), b.asnumpy())
    flat = [np.concatenate([e.asnumpy().ravel() for e in draw]).astype(np.float64) for draw in eps]
    bound = 6 / math.sqrt(flat[0].size)
    for i in range(4):
        for j in range(i + 1, 4):
            assert abs(np.corrcoef(flat[i], flat[j])[0, 1]) < bound, (i, j)


@pytest.mark.parametrize("prior", PRIORS, ids=["gaussian", "mixture"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_given_noise_gives_each_draws_weights_and_the_summed_complexity(prior, dtype):
    mus, rhos = parameters(dtype)
    rng = np.random.default_rng(1)
    given = [[nd.array(rng.normal(size=s), dtype=dtype) for s in SHAPES] for _ in range(3)]
    weights, complexity, _ = fused.variational_sample(mus, rhos, prior, given, num_draws=3)
    expected = 0.0
    for draw, eps in zip(weights, given):
        for w, mu, rho, e in zip(draw, mus, rhos, eps):
            sigma = ref.softplus(rho.asnumpy().astype(np.float64))
            e64 = e.asnumpy().astype(np.float64)
            w64 = mu.asnumpy().astype(np.float64) + sigma * e64
            tol = 1e-6 if dtype == "float32" else 1e-13
            np.testing.assert_allclose(w.asnumpy(), w64, rtol=tol, atol=tol)
            log_q = np.sum(-np.log(sigma) - 0.5 * e64 ** 2 - ref.LOG_SQRT_2PI)
            if isinstance(prior, ScaleMixturePrior):
                log_p = ref.log_scale_mixture_prior(w64, prior.pi, prior.sigma1, prior.sigma2)
            else:
                log_p = ref.log_gaussian_prior(w64, prior.sigma)
            expected += log_q - np.sum(log_p)
    assert complexity.asscalar() == pytest.approx(expected, rel=1e-5 if dtype == "float32" else 1e-12)


def _gradients(dtype, prior, num_draws, keep_eps, seed=5):
    """d/d(mu, rho) of sum over the draws of sum(w_d * g_d) + 0.01 * complexity."""
    mus, rhos = parameters(dtype)
    for array in mus + rhos:
        array.attach_grad()
    rng = np.random.default_rng(2)
    upstream = [[nd.array(rng.normal(size=s), dtype=dtype) for s in SHAPES] for _ in range(3)]
    mx.random.seed(seed)
    if num_draws:
        with autograd.record():
            draws, complexity, _ = fused.variational_sample(
                mus, rhos, prior, return_eps=False, keep_eps=keep_eps, num_draws=num_draws)
            objective = 0.01 * complexity + nd.add_n(*[
                nd.sum(w * g) for draw, grads in zip(draws, upstream) for w, g in zip(draw, grads)])
        objective.backward()
        return [a.grad.asnumpy().astype(np.float64) for a in mus + rhos], draws
    # the reference: one call per draw, the same noise given, the gradients added up
    _, _, eps = fused.variational_sample([nd.zeros_like(m) for m in mus],
                                         [nd.zeros_like(m) for m in mus], prior, num_draws=3)
    total = [0.0] * (2 * len(mus))
    for draw_eps, grads in zip(eps, upstream):
        with autograd.record():
            weights, complexity, _ = fused.variational_sample(mus, rhos, prior, draw_eps)
            objective = 0.01 * complexity + nd.add_n(*[nd.sum(w * g)
                                                       for w, g in zip(weights, grads)])
        objective.backward()
        total = [t + a.grad.asnumpy().astype(np.float64) for t, a in zip(total, mus + rhos)]
    return total, None


@pytest.mark.parametrize("keep_eps", [True, False], ids=["kept", "redrawn"])
@pytest.mark.parametrize("prior", PRIORS, ids=["gaussian", "mixture"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_gradients_of_repeated_inputs_are_summed_over_the_draws(dtype, prior, keep_eps):
    """The same key draws the same noise for both: mx.random.seed(5) before each call, and the
    zero-mu, zero-rho call with num_draws=3 returns the noise the training call drew."""
    batched, _ = _gradients(dtype, prior, 3, keep_eps)
    summed, _ = _gradients(dtype, prior, 0, keep_eps)
    tol = 1e-5 if dtype == "float32" else 1e-12
    for i, (a, b) in enumerate(zip(batched, summed)):
        np.testing.assert_allclose(a, b, rtol=tol, atol=tol * np.abs(b).max(), err_msg=str(i))


def test_bad_draw_counts_are_named():
    mus, rhos = parameters("float32")
    with pytest.raises(ValueError, match="num_draws"):
        fused.variational_sample(mus, rhos, GaussianPrior(1.0), num_draws=0)
    eps = [nd.zeros_like(m) for m in mus]
    with pytest.raises(ValueError, match="each of the 2 draws"):
        fused.variational_sample(mus, rhos, GaussianPrior(1.0), [eps], num_draws=2)
    with pytest.raises(ValueError, match="one eps per mu"):
        fused.variational_sample(mus, rhos, GaussianPrior(1.0), [eps, eps[:1]], num_draws=2)
