"""The fused operator with a per-weight prior (DiagonalGaussianPrior): values and gradients (for
mu, rho and the prior's means and standard deviations) against float64 NumPy and central
differences, float32 and float64, both complexities; the kept-noise rules unchanged; shape
errors named; and a BBBTrainer step on the fused path equal to the pure-MXNet path's for the
same noise."""
import mxnet as mx
import numpy as np
import pytest
from mxnet import autograd, gluon, nd

from gluon_bbb import BBBLoss, BBBTrainer, DiagonalGaussianPrior, fused

from fused_paths import fused_or_skip
import reference as ref

KLS = ["monte_carlo", "closed_form"]
DTYPES = ["float32", "float64"]
SHAPES = [(40, 30), (40,), (7, 40)]


@pytest.fixture(autouse=True)
def fused_available(monkeypatch):
    monkeypatch.setenv(fused.ENV_SWITCH, "1")
    fused_or_skip()


def problem(shapes=SHAPES, seed=0):
    """float64 NumPy mu, rho, eps, prior means m and stds s, and an upstream gradient of w."""
    rng = np.random.default_rng(seed)
    return {"mu": [rng.normal(scale=0.5, size=s) for s in shapes],
            "rho": [rng.uniform(-6, 1, size=s) for s in shapes],
            "eps": [rng.normal(size=s) for s in shapes],
            "m": [rng.normal(scale=0.3, size=s) for s in shapes],
            "s": [np.exp(rng.uniform(-3, 0.5, size=s)) for s in shapes],
            "upstream": [rng.normal(size=s) for s in shapes]}


def terms(kl, mu, rho, eps, m, s):
    """Each weight's complexity in float64: log q(w) - log P(w) at w = mu + sigma eps
    (monte_carlo), or KL(N(mu, sigma^2) || N(m, s^2)) (closed_form)."""
    sigma = ref.softplus(rho)
    w = mu + sigma * eps
    if kl == "closed_form":
        return np.log(s / sigma) + (sigma ** 2 + (mu - m) ** 2) / (2 * s ** 2) - 0.5
    return ref.log_normal(w - mu, sigma) - ref.log_normal(w - m, s)


C = 0.7  # the objective: C * complexity + sum(w * upstream)


def objective_terms(kl, mu, rho, eps, m, s, upstream):
    return C * terms(kl, mu, rho, eps, m, s) + (mu + ref.softplus(rho) * eps) * upstream


def numeric_gradients(kl, values, step=1e-6):
    """Central differences of the objective for mu, rho, m and s, per tensor: every weight's
    term depends on its own values only, so all of a tensor's entries move at once."""
    names = ["mu", "rho", "m", "s"]
    gradients = {name: [] for name in names}
    for t in range(len(values["mu"])):
        args = {name: values[name][t] for name in names + ["eps", "upstream"]}
        for name in names:
            up, down = dict(args), dict(args)
            up[name] = args[name] + step
            down[name] = args[name] - step
            gradients[name].append((objective_terms(kl, **up) - objective_terms(kl, **down))
                                   / (2 * step))
    return gradients


def run_operator(kl, values, dtype, return_eps=True, keep_eps=False, given_eps=True):
    """The operator on ``values`` with the prior's arrays as inputs of their own (so their
    gradients can be read): w, complexity and the gradients of the objective."""
    arrays = {name: [nd.array(v, dtype=dtype) for v in values[name]]
              for name in ("mu", "rho", "eps", "m", "s", "upstream")}
    k = len(values["mu"])
    for name in ("mu", "rho", "m", "s"):
        for array in arrays[name]:
            array.attach_grad()
    eps_inputs = arrays["eps"] if given_eps else []
    with autograd.record():
        outputs = nd.gluon_bbb_variational(
            *arrays["mu"], *arrays["rho"], *eps_inputs, *arrays["m"], *arrays["s"],
            num_tensors=k, eps_given=int(given_eps), return_eps=int(return_eps),
            keep_eps=int(keep_eps), prior="diagonal", kl=kl)
        weights, complexity = list(outputs[:k]), outputs[k]
        objective = C * complexity + nd.add_n(
            *[nd.sum(w * u) for w, u in zip(weights, arrays["upstream"])])
    objective.backward()
    as64 = lambda xs: [x.asnumpy().astype(np.float64) for x in xs]  # noqa: E731
    return (as64(weights), float(complexity.asscalar()),
            {name: as64([a.grad for a in arrays[name]]) for name in ("mu", "rho", "m", "s")})


@pytest.mark.parametrize("kl", KLS)
@pytest.mark.parametrize("dtype", DTYPES)
def test_values_match_float64_numpy(kl, dtype):
    values = problem()
    weights, complexity, _ = run_operator(kl, values, dtype)
    rtol = 2e-6 if dtype == "float32" else 1e-13
    expected = 0.0
    for t, w in enumerate(weights):
        sigma = ref.softplus(values["rho"][t])
        np.testing.assert_allclose(w, values["mu"][t] + sigma * values["eps"][t], rtol=rtol,
                                   atol=rtol)
        expected += np.sum(terms(kl, *(values[n][t] for n in ("mu", "rho", "eps", "m", "s"))))
    # float32: each term's rounding, summed in chunks of float32 partial sums
    scale = sum(np.sum(np.abs(terms(kl, *(values[n][t] for n in ("mu", "rho", "eps", "m", "s")))))
                for t in range(len(SHAPES)))
    assert abs(complexity - expected) <= (1e-6 if dtype == "float32" else 1e-14) * scale


@pytest.mark.parametrize("kl", KLS)
@pytest.mark.parametrize("dtype", DTYPES)
def test_gradients_match_central_differences_of_float64_numpy(kl, dtype):
    values = problem(seed=1)
    _, _, gradients = run_operator(kl, values, dtype)
    numeric = numeric_gradients(kl, values)
    for name in ("mu", "rho", "m", "s"):
        for t, (exact, expected) in enumerate(zip(gradients[name], numeric[name])):
            assert np.abs(expected).max() > 0.1
            scale = np.abs(expected).max()
            tolerance = 2e-5 * scale if dtype == "float32" else 1e-7 * scale
            np.testing.assert_allclose(exact, expected, rtol=0, atol=tolerance,
                                       err_msg=f"d/d{name}, tensor {t}")


@pytest.mark.parametrize("kl", KLS)
def test_the_closed_form_is_accurate_where_the_posterior_is_the_prior(kl):
    """Right after from_posterior, q = P: the closed-form KL is 0 and its gradients for mu and
    rho vanish (float32 too); the Monte Carlo estimate is 0 at every sample."""
    values = problem(seed=2)
    values["m"] = [mu.copy() for mu in values["mu"]]
    values["s"] = [ref.softplus(rho) for rho in values["rho"]]
    values["upstream"] = [np.zeros_like(u) for u in values["upstream"]]
    for dtype in DTYPES:
        cast = {name: [v.astype(dtype) for v in values[name]] for name in values}
        if dtype == "float32":  # s must be the operator's own float32 softplus of rho
            cast["s"] = [fused.variational_sample(
                [nd.zeros(r.shape, dtype=dtype)], [nd.array(r, dtype=dtype)],
                DiagonalGaussianPrior([np.zeros(r.shape)], [np.ones(r.shape)]),
                [nd.ones(r.shape, dtype=dtype)])[0][0].asnumpy() for r in cast["rho"]]
        _, complexity, gradients = run_operator(kl, cast, dtype)
        assert abs(complexity) <= (1e-3 if dtype == "float32" else 1e-9)
        if kl == "closed_form":
            for name in ("mu", "rho"):
                for g in gradients[name]:
                    assert np.abs(g).max() <= (1e-5 if dtype == "float32" else 1e-12)


@pytest.mark.parametrize("kl", KLS)
@pytest.mark.parametrize("dtype", DTYPES)
def test_variational_sample_reads_the_priors_arrays_and_matches_the_operator(kl, dtype):
    """variational_sample(mus, rhos, prior) hands the operator the prior's arrays in the mus'
    dtype: the same values and d/dmu, d/drho as the operator given m and s directly."""
    values = problem(seed=3)
    prior = DiagonalGaussianPrior(values["m"], values["s"])
    mus = [nd.array(v, dtype=dtype) for v in values["mu"]]
    rhos = [nd.array(v, dtype=dtype) for v in values["rho"]]
    eps = [nd.array(v, dtype=dtype) for v in values["eps"]]
    upstream = [nd.array(v, dtype=dtype) for v in values["upstream"]]
    for array in mus + rhos:
        array.attach_grad()
    with autograd.record():
        weights, complexity, _ = fused.variational_sample(mus, rhos, prior, eps, kl=kl)
        objective = C * complexity + nd.add_n(*[nd.sum(w * u) for w, u in zip(weights, upstream)])
    objective.backward()
    means, stds = fused.prior_inputs(prior, mus)
    assert all(a.dtype == np.dtype(dtype) for a in means + stds)
    cast = dict(values, m=[m.asnumpy() for m in means], s=[s.asnumpy() for s in stds])
    w_op, c_op, g_op = run_operator(kl, cast, dtype)
    assert float(complexity.asscalar()) == c_op
    for a, b in zip(weights, w_op):
        np.testing.assert_array_equal(a.asnumpy(), b)
    for name, arrays in (("mu", mus), ("rho", rhos)):
        for a, b in zip(arrays, g_op[name]):
            np.testing.assert_array_equal(a.grad.asnumpy(), b)


@pytest.mark.parametrize("kl", KLS)
@pytest.mark.parametrize("dtype", DTYPES)
def test_kept_and_redrawn_noise_give_the_returned_noises_values_and_gradients(kl, dtype):
    """The kept-noise rules hold with the per-weight prior: return_eps=False with keep_eps on
    or off gives the values and gradients of the call returning eps, bit for bit."""
    shapes = [(300, 70), (70,), (9, 8193)]  # several chunks, an odd tail
    values = problem(shapes, seed=4)
    results = []
    for return_eps, keep_eps in ((True, False), (False, True), (False, False)):
        mx.random.seed(11)
        weights, complexity, gradients = run_operator(kl, values, dtype, return_eps=return_eps,
                                                      keep_eps=keep_eps, given_eps=False)
        results.append(weights + [np.float64(complexity)]
                       + [g for name in ("mu", "rho", "m", "s") for g in gradients[name]])
    for returned, kept, redrawn in zip(*results):
        np.testing.assert_array_equal(kept, returned)
        np.testing.assert_array_equal(redrawn, returned)


class DiagonalSample(gluon.HybridBlock):
    """The operator with the prior's arrays as inputs, inside a (hybridizable) graph."""

    def __init__(self, kl, **kwargs):
        super().__init__(**kwargs)
        self.kl = kl

    def hybrid_forward(self, F, upstream_w, upstream_b, mu_w, mu_b, rho_w, rho_b, eps_w, eps_b,
                       m_w, m_b, s_w, s_b):
        outputs = F.gluon_bbb_variational(mu_w, mu_b, rho_w, rho_b, eps_w, eps_b, m_w, m_b, s_w,
                                          s_b, num_tensors=2, eps_given=1, return_eps=0,
                                          prior="diagonal", kl=self.kl)
        return C * outputs[2] + F.sum(outputs[0] * upstream_w) + F.sum(outputs[1] * upstream_b)


@pytest.mark.parametrize("kl", KLS)
def test_hybridized_equals_imperative_and_numpy(kl):
    """In a hybridized graph (shapes and dtypes inferred through the symbol API) the operator
    gives the imperative values and gradients, bit for bit, and NumPy's to float64 rounding."""
    values = problem(shapes=[(6, 4), (6,)], seed=6)
    results = []
    for hybridize in (False, True):
        block = DiagonalSample(kl)
        if hybridize:
            block.hybridize()
        arrays = [nd.array(v, dtype="float64") for name in ("upstream", "mu", "rho", "eps", "m", "s")
                  for v in values[name]]
        for array in arrays[2:]:
            array.attach_grad()
        with autograd.record():
            objective = block(*arrays)
        objective.backward()
        results.append([objective.asnumpy()] + [a.grad.asnumpy() for a in arrays[2:6] + arrays[8:]])
    for imperative, hybrid in zip(*results):
        np.testing.assert_array_equal(hybrid, imperative)
    expected = sum(np.sum(objective_terms(kl, *(values[n][t] for n in
                                                 ("mu", "rho", "eps", "m", "s", "upstream"))))
                   for t in range(2))
    assert results[0][0][0] == pytest.approx(expected, rel=1e-13)
    numeric = numeric_gradients(kl, values)
    grads = results[0][1:]
    for got, want in zip(grads, numeric["mu"] + numeric["rho"] + numeric["m"] + numeric["s"]):
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-8)


def test_shape_and_coverage_errors_are_named():
    mus = [nd.zeros((3, 2)), nd.zeros((3,))]
    with pytest.raises(mx.base.MXNetError, match="prior's means and mu have different shapes"):
        nd.gluon_bbb_variational(*mus, *mus, nd.zeros((2, 3)), nd.zeros((3,)), *[nd.ones((3, 2)),
                                 nd.ones((3,))], num_tensors=2, prior="diagonal").wait_to_read()
    with pytest.raises(ValueError, match="covers 1 weight tensors, got 2"):
        fused.variational_sample(mus, mus, DiagonalGaussianPrior([np.zeros((3, 2))],
                                                                 [np.ones((3, 2))]))
    with pytest.raises(ValueError, match="tensor 1 has shape \\(3,\\), the prior's has \\(4,\\)"):
        fused.variational_sample(mus, mus, DiagonalGaussianPrior(
            [np.zeros((3, 2)), np.zeros(4)], [np.ones((3, 2)), np.ones(4)]))


# ---------------------------------------------------------------------------- through BBBTrainer
def _net(dtype, seed=3):
    mx.random.seed(seed)
    net = gluon.nn.HybridSequential()
    net.add(gluon.nn.Dense(16, activation="relu"), gluon.nn.Dense(3))
    net.initialize(mx.init.Xavier(magnitude=3.0))
    net.cast(dtype)
    net(nd.zeros((1, 8), dtype=dtype))
    return net


def _prior(shapes, seed=5):
    rng = np.random.default_rng(seed)
    return DiagonalGaussianPrior([rng.normal(scale=0.3, size=s) for s in shapes],
                                 [np.exp(rng.uniform(-2.0, 0.0, size=s)) for s in shapes])


def _trainer(dtype, kl, fused_request, hybridize):
    net = _net(dtype)
    shapes = [p.shape for p in net.collect_params().values()]
    return BBBTrainer(net, BBBLoss(_prior(shapes), kl=kl), seed=1, rho_init=-2.0,
                      fused=fused_request, hybridize=hybridize, optimizer="sgd",
                      optimizer_params={"learning_rate": 0.0625})  # exact in float32 too


@pytest.mark.parametrize("hybridize", [True, False], ids=["hybridized", "imperative"])
@pytest.mark.parametrize("kl", KLS)
@pytest.mark.parametrize("dtype", DTYPES)
def test_a_fused_step_equals_the_pure_mxnet_step_for_the_same_noise(dtype, kl, hybridize):
    """A DiagonalGaussianPrior trainer runs fused; its step's cost, complexity, gradients and
    updated mu and rho equal the pure-MXNet path's (fused=False) given the same eps."""
    rng = np.random.default_rng(0)
    x = nd.array(rng.normal(size=(32, 8)), dtype=dtype)
    y = nd.array(rng.integers(0, 3, size=32), dtype=dtype)
    fast = _trainer(dtype, kl, True, hybridize)
    fast.prepare(x)
    assert fast.fused and fast.fused_reason == ""
    posterior = fast.posterior
    before = [p.data().asnumpy().astype(np.float64) for p in posterior.mus + posterior.rhos]
    fast.reseed(3)
    cost, _, complexity = fast.step(x, y, 0.3)[:3]
    # the sample the operator drew is in the network: eps = (w - mu) / sigma
    k = len(posterior.mus)
    sigmas = [np.logaddexp(0.0, rho) for rho in before[k:]]
    epsilons = [(target.data().asnumpy().astype(np.float64) - mu) / sigma
                for target, mu, sigma in zip(posterior.targets, before[:k], sigmas)]
    pure = _trainer(dtype, kl, False, hybridize)
    pure.prepare(x)
    assert not pure.fused
    for mine, theirs in zip(pure.posterior.mus + pure.posterior.rhos, before):
        mine.set_data(nd.array(theirs, dtype=dtype))
    pure.noise.sample = lambda: [nd.array(e, dtype=dtype) for e in epsilons]
    pure_cost, _, pure_complexity = pure.step(x, y, 0.3)[:3]
    rtol = 1e-5 if dtype == "float32" else 1e-10
    assert float(complexity.asscalar()) == pytest.approx(float(pure_complexity.asscalar()),
                                                         rel=rtol)
    assert float(cost.asscalar()) == pytest.approx(float(pure_cost.asscalar()), rel=rtol)
    for a, b in zip(fast.posterior.mus + fast.posterior.rhos,
                    pure.posterior.mus + pure.posterior.rhos):
        g_fast, g_pure = a.grad().asnumpy(), b.grad().asnumpy()
        assert np.abs(g_pure).max() > 0
        scale = np.abs(g_pure).max()
        np.testing.assert_allclose(g_fast, g_pure, rtol=0, atol=(2e-5 if dtype == "float32"
                                                                  else 1e-11) * scale)
        np.testing.assert_allclose(a.data().asnumpy(), b.data().asnumpy(), rtol=rtol,
                                   atol=1e-6 if dtype == "float32" else 1e-12)
