"""The fused C++ operators against independent computations.

* the normals it draws: mean, variance and the Kolmogorov-Smirnov distance over 2 million, no
  correlation between neighbours, chunks, tensors, calls and seeds, and under a given key the
  values of an independent NumPy Philox4x32-10 (checked against Random123's known answers);
* reproducible from ``mx.random.seed`` and independent of the number of threads;
* values and gradients equal the pure-MXNet path (float32) and central finite differences
  (float64), hybridized and imperative;
* the finite guard and FusedAdam against their MXNet counterparts;
* the fallback is visible: a reason, an attribute, a log line;
* ``normal_sample`` (mean + std * eps, the same random streams) and the local
  reparameterisation of ``BBBTrainer`` (``sampling='local'``): the per-example mean and
  variance of sampled pre-activations and logits against their closed forms in float64 NumPy.
"""
import logging
import math
import os
import subprocess
import sys

import mxnet as mx
import numpy as np
import pytest
from mxnet import autograd, gluon, nd

from gluon_bbb import predictive
from gluon_bbb import BBBLoss, BBBTrainer, GaussianPrior, ScaleMixturePrior, fused
from gluon_bbb.fused import build as fused_build, optimizers as fused_optimizers
from gluon_bbb._math import softplus

from fused_paths import fused_or_skip
import kept_noise_scenarios
import reference as ref

PRIORS = [GaussianPrior(0.3), ScaleMixturePrior(0.25, math.exp(-1), math.exp(-7))]
SHAPES = [(5, 4), (5,), (3, 5), (3,)]


@pytest.fixture(autouse=True)
def fused_available(monkeypatch):
    monkeypatch.setenv(fused.ENV_SWITCH, "1")
    fused_or_skip()


def random_parameters(dtype, seed=0, shapes=SHAPES):
    rng = np.random.default_rng(seed)
    mus = [nd.array(rng.normal(scale=0.5, size=s), dtype=dtype) for s in shapes]
    rhos = [nd.array(rng.uniform(-6, 1, size=s), dtype=dtype) for s in shapes]
    eps = [nd.array(rng.normal(size=s), dtype=dtype) for s in shapes]
    return mus, rhos, eps


def normal_cdf(x):
    return 0.5 * (1.0 + np.frompyfunc(math.erf, 1, 1)(x / math.sqrt(2.0)).astype(np.float64))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_drawn_noise_is_standard_normal(dtype):
    mx.random.seed(123)
    shapes = [(1000, 1000), (1000, 999), (3,)]  # odd sizes: Box-Muller pairs split at the end
    zeros = [nd.zeros(s, dtype=dtype) for s in shapes]
    _, _, eps = fused.variational_sample(zeros, zeros, GaussianPrior(1.0))
    values = np.concatenate([e.asnumpy().ravel() for e in eps]).astype(np.float64)
    n = values.size
    assert abs(values.mean()) < 5 / math.sqrt(n)
    assert abs(values.var() - 1.0) < 5 * math.sqrt(2.0 / n)
    assert abs(np.mean(values ** 4) - 3.0) < 0.02  # the tails have the right weight
    values.sort()
    cdf = normal_cdf(values)
    empirical_hi = np.arange(1, n + 1) / n
    ks_distance = max(np.max(empirical_hi - cdf), np.max(cdf - (empirical_hi - 1.0 / n)))
    assert ks_distance < 1.63 / math.sqrt(n)  # 1% critical value of the KS test
    # Neighbouring values are uncorrelated (Box-Muller pairs use independent uniforms).
    first = eps[0].asnumpy().ravel().astype(np.float64)
    assert abs(np.corrcoef(first[:-1], first[1:])[0, 1]) < 5 / math.sqrt(first.size)


def test_noise_is_reproducible_from_mxnet_seed():
    zeros = [nd.zeros(s) for s in SHAPES]
    mx.random.seed(7)
    first = fused.variational_sample(zeros, zeros, GaussianPrior(1.0))[2]
    second = fused.variational_sample(zeros, zeros, GaussianPrior(1.0))[2]
    mx.random.seed(7)
    again = fused.variational_sample(zeros, zeros, GaussianPrior(1.0))[2]
    for a, b, c in zip(first, second, again):
        np.testing.assert_array_equal(a.asnumpy(), c.asnumpy())
        assert not np.array_equal(a.asnumpy(), b.asnumpy())


def test_noise_does_not_depend_on_the_number_of_threads(tmp_path):
    script = (
        "import sys, numpy as np, mxnet as mx\n"
        "from mxnet import nd\n"
        "from gluon_bbb import fused, GaussianPrior\n"
        "mx.random.seed(5)\n"
        "zeros = [nd.zeros((3000, 700)), nd.zeros((5,))]\n"
        "w, c, eps = fused.variational_sample(zeros, [z - 3 for z in zeros], GaussianPrior(1.0))\n"
        "local = fused.normal_sample(zeros[0] + 1, variance=zeros[0] + 4)\n"
        "np.save(sys.argv[1], np.concatenate([e.asnumpy().ravel() for e in eps] + [c.asnumpy()]\n"
        "                                    + [local.asnumpy().ravel()]))\n"
    )
    results = []
    for threads in ("1", "2"):
        out = str(tmp_path / f"eps{threads}.npy")
        env = dict(os.environ, OMP_NUM_THREADS=threads, MXNET_CPU_WORKER_NTHREADS=threads)
        subprocess.run([sys.executable, "-c", script, out], check=True, env=env, capture_output=True)
        results.append(np.load(out))
    np.testing.assert_array_equal(results[0], results[1])


#: Random123's published known-answer vectors of Philox4x32-10: (counter, key, output).
PHILOX_KNOWN_ANSWERS = [
    ((0, 0, 0, 0), (0, 0), (0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8)),
    ((0xFFFFFFFF,) * 4, (0xFFFFFFFF,) * 2, (0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD)),
    ((0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344), (0xA4093822, 0x299F31D0),
     (0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1)),
]


@pytest.mark.parametrize("counter, key, expected", PHILOX_KNOWN_ANSWERS)
def test_the_reference_generator_gives_the_published_known_answers(counter, key, expected):
    assert tuple(int(x) for x in ref.philox4x32_10([counter], key)[0]) == expected


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_noise_under_a_key_is_the_independent_counter_based_reference(dtype):
    """eps_j of tensor t is Philox4x32-10 of (j // 4 or j // 2, t) and Box-Muller: the NumPy
    reference gives every value, across chunk boundaries (8192 values) and odd tails."""
    key = 2**40 + 12345
    shapes = [(3, 8193), (7,), (1,), (4096, 5)]
    zeros = [nd.zeros(s, dtype=dtype) for s in shapes]
    _, _, eps = fused.variational_sample(zeros, zeros, GaussianPrior(1.0), key=key)
    tolerance = 2e-6 if dtype == "float32" else 1e-13  # float32: polynomial log, sin and cos
    for tensor, values in enumerate(eps):
        expected = ref.counter_normals(key, tensor, values.size, np.dtype(dtype))
        np.testing.assert_allclose(values.asnumpy().ravel(), expected, rtol=0, atol=tolerance)
    # The local sampler draws one tensor's worth the same way.
    local = fused.normal_sample(zeros[0], zeros[0] + 1, key=key).asnumpy().ravel()
    np.testing.assert_array_equal(local, eps[0].asnumpy().ravel())


def test_a_given_key_repeats_and_leaves_the_seeded_generator_alone():
    zeros = [nd.zeros((100, 100))]
    mx.random.seed(3)
    drawn = fused.variational_sample(zeros, zeros, GaussianPrior(1.0))[2][0].asnumpy()
    mx.random.seed(3)
    keyed = [fused.variational_sample(zeros, zeros, GaussianPrior(1.0), key=k)[2][0].asnumpy()
             for k in (9, 9, 10)]
    after = fused.variational_sample(zeros, zeros, GaussianPrior(1.0))[2][0].asnumpy()
    np.testing.assert_array_equal(keyed[0], keyed[1])
    assert np.mean(keyed[0] == keyed[2]) < 0.01
    np.testing.assert_array_equal(after, drawn)  # the keyed calls drew nothing from the seed
    for bad in (-1, 2**64, 1.5, True, "7"):
        with pytest.raises(ValueError, match="key must be an integer"):
            fused.variational_sample(zeros, zeros, GaussianPrior(1.0), key=bad)
        with pytest.raises(ValueError, match="key must be an integer"):
            fused.normal_sample(zeros[0], zeros[0], key=bad)


def test_noise_is_uncorrelated_across_chunks_tensors_calls_and_seeds():
    """Counter-based streams are independent by construction if the generator is good; check
    the places where a bad counter layout would show: the same offset in neighbouring chunks,
    the same index in two tensors of one call, two calls and two seeds."""
    shape = (64, 8192)  # one chunk per row
    zeros = [nd.zeros(shape), nd.zeros(shape)]
    mx.random.seed(0)
    first_call = [e.asnumpy().astype(np.float64) for e in
                  fused.variational_sample(zeros, zeros, GaussianPrior(1.0))[2]]
    second_call = fused.variational_sample(zeros, zeros, GaussianPrior(1.0))[2][0].asnumpy()
    mx.random.seed(1)
    other_seed = fused.variational_sample(zeros, zeros, GaussianPrior(1.0))[2][0].asnumpy()
    a = first_call[0]
    bound = 5 / math.sqrt(a.size)  # 5 standard errors of a correlation of independent values
    pairs = {"neighbouring chunks": (a[:-1].ravel(), a[1:].ravel()),
             "two tensors": (a.ravel(), first_call[1].ravel()),
             "two calls": (a.ravel(), second_call.astype(np.float64).ravel()),
             "two seeds": (a.ravel(), other_seed.astype(np.float64).ravel()),
             "the two values of a Box-Muller pair": (a.ravel()[0::2], a.ravel()[1::2]),
             "squares of neighbours": (a.ravel()[:-1] ** 2, a.ravel()[1:] ** 2)}
    for name, (x, y) in pairs.items():
        assert abs(np.corrcoef(x, y)[0, 1]) < bound, name
    # Each chunk on its own is standard normal (no chunk starts a stream badly).
    chunk_means = a.mean(axis=1)
    assert np.all(np.abs(chunk_means) < 5 / math.sqrt(shape[1]))


@pytest.mark.parametrize("prior", PRIORS, ids=["gaussian", "mixture"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_noise_drawn_again_in_the_backward_pass_gives_the_same_gradients(prior, dtype):
    """Without eps among its outputs (the training step's call) the operator's backward pass
    draws eps again from the key it output: values and gradients equal those of the call that
    returns eps, bit for bit, and hybridized the same."""
    rng = np.random.default_rng(4)
    shapes = [(300, 70), (70,), (9, 8193)]  # several chunks, an odd tail
    upstream = [nd.array(rng.normal(size=s), dtype=dtype) for s in shapes]

    def run(return_eps, seed=8):
        mus = [nd.array(rng_values(s, 0.5, k), dtype=dtype) for k, s in enumerate(shapes)]
        rhos = [nd.array(rng_values(s, 1.0, k + 9) - 4, dtype=dtype) for k, s in enumerate(shapes)]
        for array in mus + rhos:
            array.attach_grad()
        mx.random.seed(seed)
        with autograd.record():
            weights, complexity, eps = fused.variational_sample(mus, rhos, prior,
                                                                return_eps=return_eps)
            objective = 0.01 * complexity + nd.add_n(
                *[nd.sum(w * g) for w, g in zip(weights, upstream)])
        objective.backward()
        assert (eps is None) != return_eps
        return [a.asnumpy() for a in weights + [complexity] + [p.grad for p in mus + rhos]]

    for kept, redrawn in zip(run(True), run(False)):
        np.testing.assert_array_equal(kept, redrawn)


def rng_values(shape, scale, seed):
    return np.random.default_rng(seed).normal(scale=scale, size=shape)


def _values_and_gradients(prior, dtype, path):
    """w, complexity and d/d(mu, rho) of 0.01 * complexity + sum(w * upstream), float64 out."""
    rng = np.random.default_rng(0)
    shapes = [(400, 300), (400,), (10, 400)]
    mus = [nd.array(rng.normal(scale=0.5, size=s), dtype=dtype) for s in shapes]
    rhos = [nd.array(rng.uniform(-6, 1, size=s), dtype=dtype) for s in shapes]
    eps = [nd.array(rng.normal(size=s), dtype=dtype) for s in shapes]
    upstream = [nd.array(rng.normal(size=s), dtype=dtype) for s in shapes]
    for array in mus + rhos:
        array.attach_grad()
    with autograd.record():
        if path == "fused":
            weights, complexity, _ = fused.variational_sample(mus, rhos, prior, eps)
        else:
            sigmas = [softplus(nd, r) for r in rhos]
            weights = [m + s * e for m, s, e in zip(mus, sigmas, eps)]
            complexity = BBBLoss(prior).complexity(nd, weights, sigmas, eps)
        objective = 0.01 * complexity + nd.add_n(*[nd.sum(w * g) for w, g in zip(weights, upstream)])
    objective.backward()
    as64 = lambda arrays: [a.asnumpy().astype(np.float64) for a in arrays]  # noqa: E731
    return as64(weights), float(complexity.asscalar()), as64([a.grad for a in mus + rhos])


@pytest.mark.parametrize("prior", PRIORS, ids=["gaussian", "mixture"])
def test_float32_values_and_gradients_match_the_mxnet_path(prior):
    """Both paths agree within float32 accuracy, measured against the float64 MXNet path.

    The mixture's gradient is ill-conditioned in float32 where the two components trade
    places (k2 w^2 ~ 1e5 cancels), so the tolerance is the MXNet path's own float32 error.
    """
    w_truth, c_truth, g_truth = _values_and_gradients(prior, "float64", "mxnet")
    w_fused, c_fused, g_fused = _values_and_gradients(prior, "float32", "fused")
    w_mxnet, c_mxnet, g_mxnet = _values_and_gradients(prior, "float32", "mxnet")
    for a, b in zip(w_fused, w_mxnet):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    assert c_fused == pytest.approx(c_mxnet, rel=1e-5)
    assert c_fused == pytest.approx(c_truth, rel=1e-5)
    def max_error(grads, reference):
        return max(np.abs(g - r).max() for g, r in zip(grads, reference))

    float32_error = max_error(g_mxnet, g_truth) + 1e-6 * max(np.abs(t).max() for t in g_truth)
    assert max_error(g_fused, g_truth) <= 1.5 * float32_error
    assert max_error(g_fused, g_mxnet) <= 2.5 * float32_error


@pytest.mark.parametrize("prior", PRIORS, ids=["gaussian", "mixture"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_complexity_matches_float64_numpy(prior, dtype):
    mus, rhos, eps = random_parameters(dtype, seed=3)
    weights, complexity, _ = fused.variational_sample(mus, rhos, prior, eps)
    expected = 0.0
    for mu, rho, e, w in zip(mus, rhos, eps, weights):
        sigma = ref.softplus(rho.asnumpy().astype(np.float64))
        w64 = mu.asnumpy().astype(np.float64) + sigma * e.asnumpy().astype(np.float64)
        np.testing.assert_allclose(w.asnumpy(), w64, rtol=1e-6 if dtype == "float32" else 1e-13)
        log_q = np.sum(-np.log(sigma) - 0.5 * e.asnumpy().astype(np.float64) ** 2 - ref.LOG_SQRT_2PI)
        expected += log_q - np.sum(log_prior(prior, w64))
    assert complexity.asscalar() == pytest.approx(expected, rel=1e-5 if dtype == "float32" else 1e-12)


def log_prior(prior, w):
    if isinstance(prior, ScaleMixturePrior):
        return ref.log_scale_mixture_prior(w, prior.pi, prior.sigma1, prior.sigma2)
    return ref.log_gaussian_prior(w, prior.sigma)


class TinyBBBCost(gluon.HybridBlock):
    """x -> Dense(w) -> Eq. (8), with w and the complexity from the fused operator."""

    def __init__(self, prior, **kwargs):
        super().__init__(**kwargs)
        self.prior = prior
        self.loss = BBBLoss(prior)

    def hybrid_forward(self, F, x, y, kl_weight, mu_w, mu_b, rho_w, rho_b, eps_w, eps_b):
        outputs = F.gluon_bbb_variational(mu_w, mu_b, rho_w, rho_b, eps_w, eps_b, num_tensors=2,
                                          eps_given=1, **fused.prior_attributes(self.prior))
        pred = F.FullyConnected(x, outputs[0], outputs[1], num_hidden=3)
        return self.loss(pred, y, kl_weight, outputs[2])[0]


@pytest.mark.parametrize("prior", PRIORS, ids=["gaussian", "mixture"])
@pytest.mark.parametrize("hybridize", [False, True], ids=["imperative", "hybridized"])
def test_gradients_match_central_finite_differences_float64(prior, hybridize):
    rng = np.random.default_rng(2)
    x = nd.array(rng.normal(size=(6, 4)), dtype="float64")
    y = nd.array(rng.integers(0, 3, size=6), dtype="float64")
    kl_weight = nd.array([0.3], dtype="float64")
    mus, rhos, eps = random_parameters("float64", seed=4, shapes=[(3, 4), (3,)])
    block = TinyBBBCost(prior)
    if hybridize:
        block.hybridize()
    params = mus + rhos

    def cost():
        return block(x, y, kl_weight, *params, *eps)

    for p in params:
        p.attach_grad()
    with autograd.record():
        value = cost()
    value.backward()
    analytic = [p.grad.asnumpy().copy() for p in params]
    step = 1e-6
    for p, grad in zip(params, analytic):
        flat = p.reshape((-1,))
        for j in range(flat.size):
            original = flat[j].asscalar()
            flat[j] = original + step
            plus = cost().asscalar()
            flat[j] = original - step
            minus = cost().asscalar()
            flat[j] = original
            numeric = (plus - minus) / (2 * step)
            assert grad.ravel()[j] == pytest.approx(numeric, rel=1e-6, abs=1e-7)


def test_hybridized_equals_imperative():
    rng = np.random.default_rng(5)
    x = nd.array(rng.normal(size=(6, 4)))
    y = nd.array(rng.integers(0, 3, size=6))
    kl_weight = nd.array([0.3])
    mus, rhos, eps = random_parameters("float32", seed=6, shapes=[(3, 4), (3,)])
    results = []
    for hybridize in (False, True):
        block = TinyBBBCost(PRIORS[1])
        if hybridize:
            block.hybridize()
        for p in mus + rhos:
            p.attach_grad()
        with autograd.record():
            value = block(x, y, kl_weight, *mus, *rhos, *eps)
        value.backward()
        results.append([value.asnumpy()] + [p.grad.asnumpy() for p in mus + rhos])
    for a, b in zip(*results):
        np.testing.assert_allclose(a, b, rtol=1e-6)


def test_finite_guard_zeroes_gradients_only_when_something_is_not_finite():
    grads = [nd.array(np.random.default_rng(0).normal(size=s)) for s in [(300, 70), (7,)]]
    before = [g.asnumpy().copy() for g in grads]
    assert fused.finite_guard(nd.array([2.0]), grads).asscalar() == 1
    for g, b in zip(grads, before):
        np.testing.assert_array_equal(g.asnumpy(), b)
    assert fused.finite_guard(nd.array([np.inf]), grads).asscalar() == 0
    assert all(not g.asnumpy().any() for g in grads)
    grads[0][:] = 1.0
    grads[0][123, 4] = np.nan
    assert fused.finite_guard(nd.array([1.0]), grads).asscalar() == 0
    assert all(not g.asnumpy().any() for g in grads)


@pytest.mark.parametrize("options", [{}, {"wd": 0.01, "clip_gradient": 0.5}], ids=["plain", "wd-clip"])
def test_fused_adam_matches_mxnet_adam(options):
    rng = np.random.default_rng(0)
    shapes = [(50, 30), (30,), (7, 3, 3)]
    initial = [rng.normal(size=s).astype(np.float32) for s in shapes]
    gradients = [[rng.normal(size=s).astype(np.float32) for s in shapes] for _ in range(5)]
    results = []
    for optimizer in (mx.optimizer.Adam(learning_rate=0.01, **options),
                      fused_optimizers.FusedAdam(learning_rate=0.01, **options)):
        updater = mx.optimizer.get_updater(optimizer)  # what gluon.Trainer uses
        optimizer.rescale_grad = 1.0 / 4
        weights = [nd.array(values) for values in initial]
        for step_gradients in gradients:
            updater(list(range(len(weights))), [nd.array(g) for g in step_gradients], weights)
        results.append([w.asnumpy() for w in weights])
    for a, b in zip(*results):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("options", [
    {}, {"momentum": 0.9}, {"momentum": 0.9, "wd": 0.01}, {"wd": 0.01, "clip_gradient": 0.5},
    {"momentum": 0.5, "clip_gradient": 0.3}])
def test_fused_sgd_matches_mxnet_sgd(options, dtype):
    """Five steps through gluon.Trainer's updater: weights and momenta equal MXNet's SGD."""
    rng = np.random.default_rng(0)
    shapes = [(50, 30), (30,), (7, 3, 3), (9000,)]
    initial = [rng.normal(size=s) for s in shapes]
    gradients = [[rng.normal(size=s) for s in shapes] for _ in range(5)]
    results = []
    for optimizer in (mx.optimizer.SGD(learning_rate=0.05, **options),
                      fused_optimizers.FusedSGD(learning_rate=0.05, **options)):
        updater = mx.optimizer.get_updater(optimizer)
        optimizer.rescale_grad = 1.0 / 4
        weights = [nd.array(values, dtype=dtype) for values in initial]
        for step_gradients in gradients:
            updater(list(range(len(weights))), [nd.array(g, dtype=dtype) for g in step_gradients],
                    weights)
        momenta = [updater.states[i] for i in range(len(weights))]
        results.append(([w.asnumpy() for w in weights],
                        [None if m is None else m.asnumpy() for m in momenta]))
    (weights, momenta), (fused_weights, fused_momenta) = results
    # MXNet's multi_sgd kernels hold lr and wd as float32 even for float64 weights; the fused
    # operator keeps them in the weights' precision, so float64 agrees to lr's float32 rounding
    tolerance = {"float32": 1e-6, "float64": 1e-7}[dtype]
    for a, b in zip(weights, fused_weights):
        np.testing.assert_allclose(b, a, rtol=tolerance, atol=tolerance)
    for a, b in zip(momenta, fused_momenta):
        assert (a is None) == (b is None) == ("momentum" not in options)
        if a is not None:
            np.testing.assert_allclose(b, a, rtol=tolerance, atol=tolerance)


def test_fused_sgd_refuses_a_negative_momentum():
    w, g = nd.ones((3,)), nd.ones((3,))
    with pytest.raises(mx.base.MXNetError, match="momentum"):
        nd.gluon_bbb_sgd(w, g, num_tensors=1, lrs="0.1", wds="0", momentum="-0.5",
                         rescale_grad="1", clip_gradient="-1").wait_to_read()


@pytest.mark.parametrize("name, fused_class", [("adam", "FusedAdam"), ("sgd", "FusedSGD"),
                                               ("SGD", "FusedSGD")])
def test_trainer_uses_the_fused_optimizer(name, fused_class):
    net = gluon.nn.Dense(3, in_units=4)
    net.initialize()
    trainer = BBBTrainer(net, BBBLoss(GaussianPrior(1.0)), optimizer=name,
                         optimizer_params={"learning_rate": 0.1, "momentum": 0.9}
                         if name.lower() == "sgd" else None)
    optimizer = trainer.gluon_trainer.optimizer
    assert type(optimizer) is getattr(fused_optimizers, fused_class)
    if name.lower() == "sgd":
        assert optimizer.momentum == 0.9 and optimizer.learning_rate == 0.1
    plain = BBBTrainer(net, BBBLoss(GaussianPrior(1.0)), optimizer=name, fused=False)
    assert type(plain.gluon_trainer.optimizer) in (mx.optimizer.Adam, mx.optimizer.SGD)
    with pytest.warns(DeprecationWarning, match="use BBBTrainer.gluon_trainer"):
        assert plain.trainer is plain.gluon_trainer  # the old name


def test_trainer_uses_the_fused_path_and_fused_adam():
    net = gluon.nn.Dense(3, in_units=4)
    net.initialize()
    trainer = BBBTrainer(net, BBBLoss(GaussianPrior(1.0)))
    assert trainer.fused and trainer.fused_reason == ""
    assert isinstance(trainer.gluon_trainer._optimizer, fused_optimizers.FusedAdam)


def test_fallback_is_visible(monkeypatch, caplog):
    net = gluon.nn.Dense(3, in_units=4)
    net.initialize()
    trainer = BBBTrainer(net, BBBLoss(GaussianPrior(1.0)), fused=False)
    assert not trainer.fused and "fused=False" in trainer.fused_reason
    monkeypatch.setenv(fused.ENV_SWITCH, "0")
    with caplog.at_level(logging.WARNING, logger="gluon_bbb"):
        trainer = BBBTrainer(net, BBBLoss(GaussianPrior(1.0)))
    assert not trainer.fused and fused.ENV_SWITCH in trainer.fused_reason
    assert any(fused.ENV_SWITCH in record.getMessage() for record in caplog.records)
    with pytest.raises(RuntimeError, match=fused.ENV_SWITCH):
        BBBTrainer(net, BBBLoss(GaussianPrior(1.0)), fused=True)
    with pytest.raises(ValueError, match="fused"):
        BBBTrainer(net, BBBLoss(GaussianPrior(1.0)), fused="yes")


def test_failed_build_and_missing_compiler_give_a_reason(monkeypatch, tmp_path):
    broken = tmp_path / "broken.cc"
    broken.write_text("this is not C++\n")
    monkeypatch.setenv("GLUON_BBB_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(fused_build, "SOURCE", str(broken))
    # MXNet's lib_api.cc, compiled beside the source, takes seconds at -O3: an empty stand-in
    include_dir, _ = fused_build._mxnet_dirs()
    (tmp_path / "lib_api.cc").write_text("")
    monkeypatch.setattr(fused_build, "_mxnet_dirs", lambda: (include_dir, str(tmp_path / "lib_api.cc")))
    status = fused_build._build_and_load()
    assert not status.available and "compiling broken.cc failed" in status.reason
    assert not any((tmp_path / "cache").glob("*.so"))  # nothing half-built is left behind
    monkeypatch.setattr(fused_build, "_compiler", lambda: None)
    status = fused_build._build_and_load()
    assert not status.available and "no C++ compiler" in status.reason


def test_library_is_cached_per_user_under_a_content_key():
    status = fused.fused_status()
    name = os.path.basename(status.library_path)
    assert name.startswith("gluon_bbb_variational-") and name.endswith(".so")
    include_dir, lib_api = fused_build._mxnet_dirs()
    assert fused_build._build_key(fused_build._compiler(), include_dir, lib_api) in name


def test_operator_rejects_mismatched_shapes_by_name():
    with pytest.raises(mx.base.MXNetError, match="rho and mu have different shapes"):
        fused.variational_sample([nd.zeros((3, 2))], [nd.zeros((2, 3))], GaussianPrior(1.0)).__repr__()
        nd.waitall()


# ------------------------------------------------------------------ normal_sample
def _standardised(out, mean, scale, given):
    """(out - mean) / std in float64, from the arrays exactly as the operator saw them."""
    mean64 = mean.asnumpy().astype(np.float64)
    std64 = scale.asnumpy().astype(np.float64)
    if given == "variance":
        std64 = np.sqrt(std64)
    return (out.asnumpy().astype(np.float64) - mean64) / std64, std64


@pytest.mark.parametrize("given", ["std", "variance"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_normal_sample_has_the_given_mean_and_std(dtype, given):
    rng = np.random.default_rng(1)
    shape = (1000, 1001)  # over a million values, an odd count: the last Box-Muller pair splits
    mean = nd.array(rng.normal(scale=2.0, size=shape), dtype=dtype)
    std = rng.uniform(0.1, 3.0, size=shape)
    scale = nd.array(std if given == "std" else std ** 2, dtype=dtype)
    mx.random.seed(11)
    out = fused.normal_sample(mean, **{given: scale})
    assert out.shape == shape and out.dtype == np.dtype(dtype)
    z, std64 = _standardised(out, mean, scale, given)
    n = z.size
    assert abs(z.mean()) < 5 / math.sqrt(n)
    assert abs(z.var() - 1.0) < 5 * math.sqrt(2.0 / n)
    # the scale is applied value by value: small and large std standardise alike
    for part in (std64 < 1.0, std64 > 2.0):
        assert abs(z[part].var() - 1.0) < 5 * math.sqrt(2.0 / part.sum())
    z = np.sort(z.ravel())
    cdf = normal_cdf(z)
    empirical_hi = np.arange(1, n + 1) / n
    ks_distance = max(np.max(empirical_hi - cdf), np.max(cdf - (empirical_hi - 1.0 / n)))
    assert ks_distance < 1.63 / math.sqrt(n)  # 1% critical value of the KS test


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_normal_sample_is_mean_plus_std_times_the_seeded_eps(dtype):
    rng = np.random.default_rng(2)
    shape = (300, 70)  # 21,000 values: three chunks
    mean = nd.array(rng.normal(scale=3.0, size=shape), dtype=dtype)
    std = nd.array(rng.uniform(0.0, 2.0, size=shape), dtype=dtype)
    zeros = nd.zeros(shape, dtype=dtype)
    mx.random.seed(4)
    eps = fused.normal_sample(zeros, zeros + 1).asnumpy().astype(np.float64)
    mx.random.seed(4)  # the same key and counters as the fused weight sampler: the same eps
    _, _, eps_weights = fused.variational_sample([zeros], [zeros], GaussianPrior(1.0))
    np.testing.assert_array_equal(eps, eps_weights[0].asnumpy().astype(np.float64))
    mx.random.seed(4)
    out = fused.normal_sample(mean, std).asnumpy().astype(np.float64)
    mx.random.seed(4)
    out_from_variance = fused.normal_sample(mean, variance=std * std).asnumpy().astype(np.float64)
    different = fused.normal_sample(mean, std).asnumpy()  # a new key
    mean64, std64 = mean.asnumpy().astype(np.float64), std.asnumpy().astype(np.float64)
    expected = mean64 + std64 * eps
    bound = 4 * np.finfo(dtype).eps * (np.abs(mean64) + np.abs(std64 * eps))  # a few roundings
    assert np.all(np.abs(out - expected) <= bound)
    assert np.all(np.abs(out_from_variance - expected) <= 2 * bound)
    assert np.mean(different == out) < 0.01


def test_normal_sample_rejects_bad_arguments():
    zeros = nd.zeros((3, 2))
    with pytest.raises(ValueError, match="exactly one of std and variance"):
        fused.normal_sample(zeros)
    with pytest.raises(ValueError, match="exactly one of std and variance"):
        fused.normal_sample(zeros, zeros, zeros)
    with pytest.raises(ValueError, match=r"variance has shape \(2, 3\), the mean \(3, 2\)"):
        fused.normal_sample(zeros, variance=nd.zeros((2, 3)))
    with pytest.raises(mx.base.MXNetError, match="mean and scale have different shapes"):
        nd.gluon_bbb_normal(zeros, nd.zeros((2, 3))).wait_to_read()
    with pytest.raises(mx.base.MXNetError, match="scale_is must be 'std' or 'variance', got 'sd'"):
        nd.gluon_bbb_normal(zeros, zeros, scale_is="sd").wait_to_read()
    with pytest.raises(mx.base.MXNetError, match="all inputs must share one dtype"):
        fused.normal_sample(zeros, zeros.astype("float64")).wait_to_read()


# ------------------------------------------------------------------ local reparameterisation
def random_posterior_trainer(net, input_shape, seed=0, frozen=()):
    """A BBBTrainer on ``net`` whose posterior has random mu and large sigma (0.2 to 0.7).

    ``frozen``: (parameter, value) pairs set and taken out of the posterior (grad_req 'null').
    """
    mx.random.seed(seed)
    net.initialize()
    net(nd.zeros((1,) + input_shape))
    for param, value in frozen:
        param.set_data(nd.array(value))
        param.grad_req = "null"
    trainer = BBBTrainer(net, BBBLoss(GaussianPrior(1.0)), seed=seed)
    assert trainer.fused
    rng = np.random.default_rng(seed)
    for mu, rho in zip(trainer.posterior.mus, trainer.posterior.rhos):
        mu.set_data(nd.array(rng.normal(scale=0.8, size=mu.shape)))
        rho.set_data(nd.array(rng.uniform(-1.5, 0.0, size=rho.shape)))
    trainer.set_mean()
    return trainer


def posterior_float64(trainer):
    """[(mu, sigma)] per weight tensor, float64, sigma by NumPy's own softplus."""
    return [(mu.data().asnumpy().astype(np.float64), ref.softplus(rho.data().asnumpy().astype(np.float64)))
            for mu, rho in zip(trainer.posterior.mus, trainer.posterior.rhos)]


def dense_moments(x, weight, bias=None):
    """Mean and variance of x . W^T + b for W, b ~ q: x . mu^T + mu_b, x^2 . sigma^2^T + sigma_b^2."""
    (mu_w, sigma_w) = weight
    mean, variance = x @ mu_w.T, (x * x) @ (sigma_w ** 2).T
    if bias is not None:
        mean, variance = mean + bias[0], variance + bias[1] ** 2
    return mean, variance


def relu_moments(mean, variance):
    """E[relu(a)] and E[relu(a)^2] for a ~ N(mean, variance)."""
    std = np.sqrt(variance)
    ratio = mean / std
    cdf = normal_cdf(ratio)
    pdf = np.exp(-0.5 * ratio ** 2) / math.sqrt(2 * math.pi)
    return mean * cdf + std * pdf, (mean ** 2 + variance) * cdf + mean * std * pdf


def single_dense_moments(trainer, x):
    """The network is one Dense layer without bias or activation: its pre-activations."""
    return dense_moments(x.reshape(len(x), -1), *posterior_float64(trainer))


def relu_mlp_moments(trainer, x):
    """Dense(relu) -> Dense: the logits' mean and variance, exact for every example.

    The hidden units h_j = relu(a_j) are independent (rows of W1 are), and independent of
    W2, b2, so Var(logit_k) = sum_j [E(W2_kj^2) E(h_j^2) - E(W2_kj)^2 E(h_j)^2] + sigma_b2_k^2.
    """
    w1, b1, (mu2, sigma2), (mu_b2, sigma_b2) = posterior_float64(trainer)
    h1, h2 = relu_moments(*dense_moments(x, w1, b1))
    mean = h1 @ mu2.T + mu_b2
    variance = h2 @ (mu2 ** 2 + sigma2 ** 2).T - (h1 ** 2) @ (mu2 ** 2).T + sigma_b2 ** 2
    return mean, variance


def assert_moments_match(samples, mean, variance):
    """Sample mean and variance over axis 0 within Monte Carlo error of the closed forms."""
    n = samples.shape[0]
    sample_mean = samples.mean(axis=0)
    centred = samples - sample_mean
    sample_variance = (centred ** 2).mean(axis=0)
    fourth = (centred ** 4).mean(axis=0)
    np.testing.assert_array_less(np.abs(sample_mean - mean), 5 * np.sqrt(variance / n))
    np.testing.assert_array_less(np.abs(sample_variance - variance),
                                 6 * np.sqrt((fourth - sample_variance ** 2) / n))


def dense_without_bias():
    return gluon.nn.Dense(5, use_bias=False)  # flatten=True: inputs (batch, 2, 3)


def relu_mlp():
    net = gluon.nn.HybridSequential()
    net.add(gluon.nn.Dense(6, activation="relu"), gluon.nn.Dense(3))
    return net


@pytest.mark.parametrize("make_net, input_shape, closed_form", [
    (dense_without_bias, (2, 3), single_dense_moments),
    (relu_mlp, (4,), relu_mlp_moments),
], ids=["dense-preactivations", "relu-mlp-logits"])
def test_local_sampling_has_the_per_example_distribution_of_weight_sampling(
        make_net, input_shape, closed_form):
    trainer = random_posterior_trainer(make_net(), input_shape)
    x = np.random.default_rng(3).uniform(-1.0, 1.5, size=(3,) + input_shape)
    mean, variance = closed_form(trainer, x.reshape(3, -1) if make_net is relu_mlp else x)
    num_samples = 3000
    for sampling in ("weights", "local"):
        mx.random.seed(5)
        outputs = [o[0] for o in predictive.sample_outputs(trainer, [nd.array(x)], num_samples, sampling)]
        samples = nd.stack(*outputs).asnumpy().astype(np.float64)
        assert samples.shape == (num_samples,) + mean.shape
        assert_moments_match(samples, mean, variance)
    for target, mu in zip(trainer.posterior.targets, trainer.posterior.mus):  # the means are back
        np.testing.assert_array_equal(target.data().asnumpy(), mu.data().asnumpy())


def test_local_sampling_draws_each_example_independently():
    """Two copies of one example: the same output under weight sampling, independent ones
    under local sampling (they no longer share the first layer's weights)."""
    trainer = random_posterior_trainer(gluon.nn.Dense(4, in_units=3), (3,))
    x = nd.array(np.tile([[0.5, -1.0, 2.0]], (2, 1)))
    shared, local = [nd.stack(*[o[0] for o in predictive.sample_outputs(trainer, [x], 2000, sampling)]).asnumpy()
                     for sampling in ("weights", "local")]
    np.testing.assert_array_equal(shared[:, 0], shared[:, 1])
    for unit in range(4):
        correlation = np.corrcoef(local[:, 0, unit], local[:, 1, unit])[0, 1]
        assert abs(correlation) < 5 / math.sqrt(2000)


def test_local_sampling_is_reproducible_from_the_mxnet_seed():
    trainer = random_posterior_trainer(relu_mlp(), (4,))
    x = nd.array(np.random.default_rng(0).normal(size=(5, 4)))
    runs = []
    for _ in range(2):
        mx.random.seed(21)
        runs.append(trainer.predict_proba(x, num_samples=3, sampling="local").asnumpy())
    np.testing.assert_array_equal(runs[0], runs[1])
    assert not np.array_equal(runs[0], trainer.predict_proba(x, num_samples=3, sampling="local").asnumpy())


def test_local_sampling_treats_a_parameter_outside_the_posterior_as_a_constant():
    net = gluon.nn.Dense(5)
    bias = np.arange(5.0) - 2.0
    trainer = random_posterior_trainer(net, (4,), frozen=[(net.bias, bias)])
    assert len(trainer.posterior.targets) == 1  # the weight only
    x = np.random.default_rng(4).uniform(-1.0, 1.0, size=(3, 4))
    mean, variance = dense_moments(x, *posterior_float64(trainer), bias=(bias, 0.0))
    mx.random.seed(6)
    outputs = [o[0] for o in predictive.sample_outputs(trainer, [nd.array(x)], 3000, "local")]
    assert_moments_match(nd.stack(*outputs).asnumpy().astype(np.float64), mean, variance)


@pytest.mark.parametrize("path", ["fused", "mxnet"])
def test_closed_form_kl_through_either_path_has_the_analytic_gradient(path):
    """kl='closed_form' on the fused path recovers mu = w - sigma * eps from the operator's
    sample: the gradient must be the closed form's own, d/dmu = mu / s^2 and
    d/drho = (sigma / s^2 - 1 / sigma) * sigmoid(rho), whatever the noise."""
    if path == "fused":
        fused_or_skip()
    rng = np.random.default_rng(2)
    shapes = [(30, 20), (30,)]
    mus = [nd.array(rng.normal(scale=0.5, size=s), dtype="float64") for s in shapes]
    rhos = [nd.array(rng.uniform(-6, 1, size=s), dtype="float64") for s in shapes]
    for array in mus + rhos:
        array.attach_grad()
    loss = BBBLoss(GaussianPrior(0.5), kl="closed_form")
    with autograd.record():
        sigmas = [softplus(nd, r) for r in rhos]
        if path == "fused":
            weights, _, eps = fused.variational_sample(mus, rhos, loss.prior)
        else:
            eps = [nd.array(rng.normal(size=s), dtype="float64") for s in shapes]
            weights = [m + s * e for m, s, e in zip(mus, sigmas, eps)]
        kl = loss.closed_form_complexity(nd, weights, sigmas, eps)
    kl.backward()
    for mu, rho in zip(mus, rhos):
        m, r = mu.asnumpy(), rho.asnumpy()
        sigma = np.log1p(np.exp(r))
        np.testing.assert_allclose(mu.grad.asnumpy(), m / 0.25, rtol=1e-6, atol=1e-9)
        np.testing.assert_allclose(rho.grad.asnumpy(), (sigma / 0.25 - 1 / sigma) / (1 + np.exp(-r)),
                                   rtol=1e-6, atol=1e-9)


def test_adam_factory_picks_the_fused_rule_where_it_can(monkeypatch):
    assert isinstance(fused_optimizers.adam(mx.cpu(), learning_rate=0.01), fused_optimizers.FusedAdam)
    monkeypatch.setenv(fused.ENV_SWITCH, "0")
    plain = fused_optimizers.adam(mx.cpu(), learning_rate=0.01)
    assert type(plain) is mx.optimizer.Adam and plain.learning_rate == 0.01


def test_fused_adam_decides_per_set_of_tensors():
    """One optimizer, two sets of tensors of different dtypes: each set is decided (and
    cached) on its own, and both follow MXNet's Adam."""
    rng = np.random.default_rng(1)
    sets = {(0, 1): "float32", (2,): "float64"}
    gradients = [{key: [rng.normal(size=(4, 3)) for _ in key] for key in sets} for _ in range(3)]
    results = []
    for optimizer in (mx.optimizer.Adam(learning_rate=0.01), fused_optimizers.FusedAdam(learning_rate=0.01)):
        updater = mx.optimizer.get_updater(optimizer)
        weights = {i: nd.array(np.ones((4, 3)), dtype=sets[key]) for key in sets for i in key}
        for step_gradients in gradients:
            for key, grads in step_gradients.items():
                updater(list(key), [nd.array(g, dtype=sets[key]) for g in grads],
                        [weights[i] for i in key])
        results.append([weights[i].asnumpy() for i in sorted(weights)])
    assert optimizer._fusable == {(0, 1): True, (2,): True}
    for a, b in zip(*results):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


# ------------------------------------------------------------------ eps kept for the backward pass
def _sample_and_gradients(prior, dtype, keep_eps, samples=1, extra_draws=0, kl="monte_carlo",
                          seed=8):
    """Values and gradients of sum_s [0.01 * complexity_s + sum(w_s * upstream)] over
    ``samples`` draws recorded together, with ``extra_draws`` more draws (kept too) made
    between them and the backward pass."""
    rng = np.random.default_rng(4)
    shapes = [(300, 70), (70,), (9, 8193)]  # several chunks, an odd tail
    upstream = [nd.array(rng.normal(size=s), dtype=dtype) for s in shapes]
    mus = [nd.array(rng_values(s, 0.5, k), dtype=dtype) for k, s in enumerate(shapes)]
    rhos = [nd.array(rng_values(s, 1.0, k + 9) - 4, dtype=dtype) for k, s in enumerate(shapes)]
    for array in mus + rhos:
        array.attach_grad()
    mx.random.seed(seed)
    outputs = []
    with autograd.record():
        objective = 0
        for _ in range(samples):
            weights, complexity, _ = fused.variational_sample(
                mus, rhos, prior, return_eps=False, keep_eps=keep_eps, kl=kl)
            objective = objective + 0.01 * complexity + nd.add_n(
                *[nd.sum(w * g) for w, g in zip(weights, upstream)])
            outputs += weights + [complexity]
    for _ in range(extra_draws):  # later draws that take the store's slots
        fused.variational_sample(mus, rhos, prior, return_eps=False, keep_eps=True, kl=kl)
    objective.backward()
    return [a.asnumpy() for a in outputs + [p.grad for p in mus + rhos]]


@pytest.mark.parametrize("prior", PRIORS, ids=["gaussian", "mixture"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("samples, extra_draws", [(1, 0), (2, 0), (1, 9)],
                         ids=["one-sample", "two-samples", "store-overrun"])
def test_eps_kept_for_the_backward_pass_changes_no_value(prior, dtype, samples, extra_draws):
    """keep_eps=True (the training step's call) reads eps back where keep_eps=False draws it
    again: values and gradients are equal bit for bit, with two samples recorded together,
    and when more draws than the store holds came between the forward and the backward
    passes (the backward then draws eps again)."""
    kept = _sample_and_gradients(prior, dtype, True, samples, extra_draws)
    redrawn = _sample_and_gradients(prior, dtype, False, samples, 0)
    for a, b in zip(kept, redrawn):
        np.testing.assert_array_equal(a, b)


def test_a_kept_eps_is_the_forward_draw_even_under_a_reused_key():
    """Two draws under the same given key, for tensors of other sizes, do not mix: the store
    files eps under the key and the sizes."""
    prior = GaussianPrior(1.0)
    gradients = []
    for shapes in ([(40, 30)], [(1200,)], [(40, 30)]):
        mus = [nd.zeros(s) for s in shapes]
        rhos = [nd.zeros(s) for s in shapes]
        for array in mus + rhos:
            array.attach_grad()
        with autograd.record():
            weights, _, _ = fused.variational_sample(mus, rhos, prior, key=77, return_eps=False,
                                                     keep_eps=True)
            objective = nd.sum(weights[0])  # d/dmu = 1, d/drho = sigmoid(0) * eps
        objective.backward()
        _, _, eps = fused.variational_sample(mus, rhos, prior, key=77)
        np.testing.assert_array_equal(rhos[0].grad.asnumpy(),
                                      (eps[0] * 0.5).asnumpy())
        gradients.append(rhos[0].grad.asnumpy())
    np.testing.assert_array_equal(gradients[0], gradients[2])


# ------------------------------------------------------------------ kept noise and its own draw
KEPT_NOISE_SCENARIOS = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                    "kept_noise_scenarios.py")


def _run_kept_noise_scenarios(scenarios, folder, engine=None):
    """Runs scenarios of kept_noise_scenarios.py one after another in a process of their own;
    their arrays by name."""
    env = dict(os.environ, **{fused.ENV_SWITCH: "1"})
    if engine is not None:
        env["MXNET_ENGINE_TYPE"] = engine
    out = os.path.join(str(folder), f"{engine}.npz")
    run = subprocess.run([sys.executable, KEPT_NOISE_SCENARIOS, ",".join(scenarios), out],
                         env=env, capture_output=True, text=True)
    assert run.returncode == 0, run.stderr[-3000:]
    with np.load(out) as arrays:
        return dict(arrays)


@pytest.fixture(scope="module")
def fresh_draws(tmp_path_factory):
    """Every draw of the scenarios alone, in a process that keeps no noise."""
    fused_or_skip()
    return _run_kept_noise_scenarios(["fresh"], tmp_path_factory.mktemp("fresh-draws"))


KEPT_NOISE_CASES = tuple(kept_noise_scenarios.SCENARIOS)


@pytest.fixture(scope="module")
def kept_noise_runs(tmp_path_factory):
    """The arrays of every scenario run on an engine, by engine: the scenarios one after another
    in one process per engine (a process each would cost an import of MXNet each). Each
    scenario's draws must read their own noise whatever ran before them in the process."""
    fused_or_skip()
    runs = {}

    def on(engine):
        if engine not in runs:
            runs[engine] = _run_kept_noise_scenarios(KEPT_NOISE_CASES,
                                                     tmp_path_factory.mktemp(engine), engine)
        return runs[engine]
    return on


def test_the_fresh_draws_have_the_float64_gradients(fresh_draws):
    """The reference of the kept-noise scenarios against float64 NumPy: under key 7, eps is the
    NumPy generator's; d/dmu = upstream - d log P / dw and d/drho = sigmoid(rho) (upstream eps
    - 1 / sigma - d log P / dw eps) at w = mu + sigma eps."""
    import kept_noise_scenarios as scenarios

    def prior_gradient(w, prior):  # d log P / dw; the mixture's through its responsibilities
        values = prior.values()
        if "sigma" in values:
            return -w / values["sigma"] ** 2
        pi, sigma1, sigma2 = values["pi"], values["sigma1"], values["sigma2"]
        a = np.log(pi) + ref.log_normal(w, sigma1)
        b = np.log1p(-pi) + ref.log_normal(w, sigma2)
        r1 = np.exp(a - np.logaddexp(a, b))
        return -w * (r1 / sigma1 ** 2 + (1 - r1) / sigma2 ** 2)

    checked = 0
    for name, (network, dtype, prior, key) in scenarios.DRAWS.items():
        if key == "seed3":  # the key MXNet's generator gives; the same code path as key 7
            continue
        mu, rho, upstream = (a.asnumpy().astype(np.float64)
                             for a in scenarios.parameters(network, dtype))
        eps = ref.counter_normals(key, 0, scenarios.WEIGHTS, np.dtype(dtype).type)
        sigma = ref.softplus(rho)
        w = mu + sigma * eps
        dlogp = prior_gradient(w, prior)
        sigmoid = 1 / (1 + np.exp(-rho))
        rtol = 1e-4 if dtype == "float32" else 1e-7
        np.testing.assert_allclose(fresh_draws[f"{name}/w"], w, rtol=rtol, atol=1e-9)
        scale = np.max(np.abs(upstream - dlogp))
        np.testing.assert_allclose(fresh_draws[f"{name}/mu_grad"], upstream - dlogp,
                                   rtol=rtol, atol=rtol * scale)
        expected = sigmoid * (upstream * eps - 1 / sigma - dlogp * eps)
        np.testing.assert_allclose(fresh_draws[f"{name}/rho_grad"], expected,
                                   rtol=rtol, atol=rtol * np.max(np.abs(expected)))
        checked += 1
    assert checked == 3


@pytest.mark.parametrize("engine", ["NaiveEngine", "ThreadedEnginePerDevice"])
@pytest.mark.parametrize("scenario", KEPT_NOISE_CASES)
def test_kept_noise_is_read_only_by_the_backward_pass_of_its_own_draw(scenario, engine,
                                                                      fresh_draws, kept_noise_runs):
    """Draws that share a key (a given one, or mx.random.seed before each of two networks of one
    shape), a draw without keep_eps after one with it, and a float32 scale-mixture draw beside a
    float64 Gaussian one of the same byte count: every draw's sample, complexity and gradients
    are bit for bit those of the same draw alone in a process that keeps nothing, after the
    scenarios before it ran in the same process."""
    prefix = f"{scenario}:"
    results = {name[len(prefix):]: value for name, value in kept_noise_runs(engine).items()
               if name.startswith(prefix)}
    assert len(results) == 8
    for name, value in results.items():
        np.testing.assert_array_equal(value, fresh_draws[name], err_msg=name)


def test_the_key_output_carries_the_key_and_the_id_of_the_kept_draw():
    """The operator's key output: the noise's 64-bit key, then the draw id of its kept noise,
    each in four 16-bit pieces: id 0 for a draw that keeps nothing, a new one for each kept
    draw (the number the backward pass looks its noise up by)."""
    fused.load_fused_op()
    zeros = nd.zeros((3, 4))
    key = 3 + (7 << 16) + (5 << 40)

    def key_output(keep_eps):
        outputs = getattr(nd, fused.OP_NAME)(
            zeros, zeros, num_tensors=1, return_eps=0, key=str(key),
            **({"keep_eps": 1} if keep_eps else {}), **fused.prior_attributes(GaussianPrior(1.0)))
        return outputs[2].asnumpy()

    first, second, not_kept = key_output(True), key_output(True), key_output(False)
    for output in (first, second, not_kept):
        np.testing.assert_array_equal(output[:4], [3, 7, 5 << 8, 0])
    ids = [int(sum(int(piece) << (16 * i) for i, piece in enumerate(output[4:])))
           for output in (first, second, not_kept)]
    assert ids[0] > 0 and ids[1] == ids[0] + 1 and ids[2] == 0


def test_a_second_backward_pass_of_a_kept_draw_draws_eps_again():
    """A backward pass frees the slot of its draw's kept noise; a second one (retain_graph)
    draws eps again from the key and gives the same gradients bit for bit."""
    prior = ScaleMixturePrior(0.5, 1.0, 0.0025)
    mus = [nd.array(np.random.default_rng(1).normal(scale=0.005, size=(40, 25)))]
    rhos = [nd.full((40, 25), -5.0)]
    for array in mus + rhos:
        array.attach_grad()
    with autograd.record():
        weights, complexity, _ = fused.variational_sample(mus, rhos, prior, key=7,
                                                          return_eps=False, keep_eps=True)
        objective = complexity + nd.sum(weights[0] * weights[0])
    gradients = []
    for retain_graph in (True, False):
        objective.backward(retain_graph=retain_graph)
        gradients.append([a.grad.asnumpy() for a in mus + rhos])
    for first, second in zip(*gradients):
        np.testing.assert_array_equal(first, second)


# ------------------------------------------------------------------ the closed-form KL, fused
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_closed_form_kl_in_the_operator_matches_float64_numpy(dtype):
    """kl='closed_form': the operator's complexity is sum_j [log(s / sigma_j) +
    (sigma_j^2 + mu_j^2) / (2 s^2) - 1/2], whatever the noise, and w is the same sample."""
    prior = GaussianPrior(0.3)
    mus, rhos, eps = random_parameters(dtype, seed=3)
    weights, kl, _ = fused.variational_sample(mus, rhos, prior, eps, kl="closed_form")
    weights_mc, _, _ = fused.variational_sample(mus, rhos, prior, eps)
    expected = 0.0
    for mu, rho in zip(mus, rhos):
        sigma = ref.softplus(rho.asnumpy().astype(np.float64))
        m = mu.asnumpy().astype(np.float64)
        expected += np.sum(np.log(0.3 / sigma) + (sigma ** 2 + m ** 2) / (2 * 0.3 ** 2) - 0.5)
    assert kl.asscalar() == pytest.approx(expected, rel=1e-5 if dtype == "float32" else 1e-12)
    for a, b in zip(weights, weights_mc):
        np.testing.assert_array_equal(a.asnumpy(), b.asnumpy())


@pytest.mark.parametrize("keep_eps", [False, True], ids=["drawn-again", "kept"])
def test_closed_form_kl_in_the_operator_has_the_analytic_gradient(keep_eps):
    """float64: the operator's d/dmu and d/drho of 0.01 KL + sum(w * upstream) are the float64
    NumPy formula's, upstream + 0.01 mu / s^2 and sigmoid(rho) (upstream eps + 0.01 (sigma /
    s^2 - 1 / sigma)), and central differences of the operator's own value agree."""
    prior = GaussianPrior(0.5)
    rng = np.random.default_rng(6)
    shapes = [(30, 20), (30,)]
    upstream = [nd.array(rng.normal(size=s), dtype="float64") for s in shapes]
    mus = [nd.array(rng.normal(scale=0.5, size=s), dtype="float64") for s in shapes]
    rhos = [nd.array(rng.uniform(-6, 1, size=s), dtype="float64") for s in shapes]
    for array in mus + rhos:
        array.attach_grad()
    with autograd.record():
        weights, kl, _ = fused.variational_sample(mus, rhos, prior, key=5, return_eps=False,
                                                  kl="closed_form", keep_eps=keep_eps)
        objective = 0.01 * kl + nd.add_n(*[nd.sum(w * g) for w, g in zip(weights, upstream)])
    objective.backward()
    fused_grads = [a.grad.asnumpy() for a in mus + rhos]
    _, _, eps = fused.variational_sample(mus, rhos, prior, key=5)
    for k in range(len(shapes)):
        m, r, e, g = (a.asnumpy() for a in (mus[k], rhos[k], eps[k], upstream[k]))
        sigma, sigmoid = np.log1p(np.exp(r)), 1 / (1 + np.exp(-r))
        np.testing.assert_allclose(fused_grads[k], g + 0.01 * m / 0.25, rtol=1e-12, atol=1e-15)
        np.testing.assert_allclose(fused_grads[2 + k],
                                   sigmoid * (g * e + 0.01 * (sigma / 0.25 - 1 / sigma)),
                                   rtol=1e-12, atol=1e-15)
    # central differences of the operator's value (eps fixed by the key)
    values = [a.asnumpy() for a in mus + rhos]
    step = 1e-6
    for tensor, flat in [(0, 7), (1, 3), (2, 11), (3, 29)]:
        shifted = []
        for sign in (1, -1):
            moved = [v.copy() for v in values]
            moved[tensor].flat[flat] += sign * step
            arrays = [nd.array(v, dtype="float64") for v in moved]
            w, c, _ = fused.variational_sample(arrays[:2], arrays[2:], prior, key=5,
                                               kl="closed_form")
            shifted.append(0.01 * c.asscalar() + sum(
                float(nd.sum(a * g).asscalar()) for a, g in zip(w, upstream)))
        numeric = (shifted[0] - shifted[1]) / (2 * step)
        np.testing.assert_allclose(fused_grads[tensor].flat[flat], numeric, rtol=1e-6, atol=1e-9)


@pytest.mark.parametrize("gap", [1e-2, 1e-3, 1e-4, -1e-3, -1e-4])
def test_closed_form_kl_in_the_operator_is_accurate_near_the_prior(gap):
    """float32, sigma = s (1 + gap) and mu = 0 (the state right after a posterior is made the
    prior): the operator's KL against the exact (r^2 - 1)/2 - log r (40 digits) of the sigma it
    computes with. softplus(rho) in float32 carries a few ulps, which move r - 1 by about
    ulp / gap relative to itself; the bound allows 4 ulps of that and 1e-5 besides (the
    textbook form, summed with its constant, was off by 56% at gap 1e-3)."""
    from decimal import Decimal, getcontext
    getcontext().prec = 40
    s = 0.37
    sigma = np.float32(s * (1 + gap))
    rho = np.float32(np.log(np.expm1(np.float64(sigma))))
    rhos = [nd.array(np.full(1000, rho, np.float32))]
    _, kl, _ = fused.variational_sample([nd.zeros(1000)], rhos, GaussianPrior(s),
                                        return_eps=False, kl="closed_form")
    r = Decimal(float(np.log1p(np.exp(np.float64(rho))))) / Decimal(s)
    exact = float(1000 * ((r * r - 1) / 2 - r.ln()))
    bound = 1e-5 + 2 * 4 * float(np.finfo(np.float32).eps) / abs(gap)
    assert abs(kl.asscalar() / exact - 1) < bound


def test_closed_form_kl_in_the_operator_needs_the_gaussian_prior():
    mus, rhos, _ = random_parameters("float32")
    with pytest.raises(ValueError, match="closed_form"):
        fused.variational_sample(mus, rhos, ScaleMixturePrior(), kl="closed_form")
    with pytest.raises(ValueError, match="unknown kl"):
        fused.variational_sample(mus, rhos, GaussianPrior(1.0), kl="exact")
