"""The per-weight diagonal Gaussian prior of Bayesian updating: log density, closed-form KL and
the Monte Carlo complexity against float64 NumPy references, gradients against central
differences, the imperative and hybridized costs alike, the snapshot that training never moves,
the fused path it takes, shape checks, and checkpoints with exact resume."""
import decimal
import gc
import json
import zipfile

import mxnet as mx
import numpy as np
import pytest
from mxnet import autograd, gluon, nd

from gluon_bbb import (BBBLoss, BBBTrainer, DiagonalGaussianPrior, GaussianPrior, fused,
                       prior_from_config)
from gluon_bbb._math import kl_normal_scales
from gluon_bbb.data.loaders import ArrayLoader, EpochShuffled
from gluon_bbb.io.checkpoint import CheckpointError, read_checkpoint

from fused_paths import fused_or_skip
import reference as ref
from synthetic import blobs
from test_loss import bbb_cost, tiny_problem

RNG = np.random.default_rng(7)
MEAN = RNG.normal(scale=0.5, size=(3, 4))
STD = np.exp(RNG.uniform(-4.0, 0.0, size=(3, 4)))
MU = RNG.normal(scale=0.5, size=(3, 4))
SIGMA = np.exp(RNG.uniform(-4.0, -0.5, size=(3, 4)))
W = RNG.normal(size=(3, 4))


def kl_reference(mu, sigma, mean, std):
    """sum_j KL(N(mu_j, sigma_j^2) || N(m_j, s_j^2)) in float64."""
    return np.sum(np.log(std / sigma) + (sigma ** 2 + (mu - mean) ** 2) / (2 * std ** 2) - 0.5)


def _prior(dtype="float64"):
    """A prior over a (2,) tensor and the (3, 4) tensor of MEAN, STD (index 1)."""
    return DiagonalGaussianPrior([np.array([0.1, -0.2]), MEAN], [np.array([0.5, 2.0]), STD]) \
        if dtype == "float64" else DiagonalGaussianPrior(
            [np.float32([0.1, -0.2]), MEAN.astype(np.float32)],
            [np.float32([0.5, 2.0]), STD.astype(np.float32)])


def _nd(array):
    return nd.array(array, dtype="float64")


def test_log_density_matches_the_float64_reference():
    prior = _prior()
    np.testing.assert_allclose(prior.log_prob(_nd(W), index=1).asnumpy(),
                               ref.log_normal(W - MEAN, STD), rtol=1e-12)
    np.testing.assert_allclose(prior.sum_log_prob(_nd(W), index=1).asnumpy(),
                               [np.sum(ref.log_normal(W - MEAN, STD))], rtol=1e-12)
    w0 = np.array([0.3, 1.0])
    np.testing.assert_allclose(prior.sum_log_prob(_nd(w0), index=0).asnumpy(),
                               [np.sum(ref.log_normal(w0 - [0.1, -0.2], np.array([0.5, 2.0])))],
                               rtol=1e-12)


def test_closed_form_kl_matches_the_float64_reference_and_vanishes_at_the_prior():
    prior = _prior()
    kl = prior.sum_kl(_nd(MU), _nd(SIGMA), index=1).asnumpy()[0]
    assert kl == pytest.approx(kl_reference(MU, SIGMA, MEAN, STD), rel=1e-12)
    assert kl > 0
    assert prior.sum_kl(_nd(MEAN), _nd(STD), index=1).asnumpy()[0] == pytest.approx(0.0, abs=1e-13)
    # in float32 a posterior equal to its prior has KL 0 to float32 rounding of each term
    prior32 = _prior("float32")
    kl32 = prior32.sum_kl(nd.array(MEAN), nd.array(STD), index=1).asnumpy()[0]
    assert abs(kl32) < 1e-6


def test_the_monte_carlo_complexity_averages_to_the_closed_form():
    """Eq. (8)'s log q(w) - log P(w) at w = mu + sigma eps, averaged over 4000 draws, is the
    closed-form KL within four standard errors (and the standard error is small)."""
    prior = _prior()
    loss = BBBLoss(prior)
    eps_all = np.random.default_rng(3).standard_normal((4000,) + MU.shape)
    w0, sigma0 = _nd([0.1, -0.2]), _nd([0.5, 2.0])   # tensor 0 equal to its prior: KL 0
    values = []
    for eps in eps_all:
        eps0 = nd.zeros((2,), dtype="float64")
        weights = [w0, _nd(MU + SIGMA * eps)]
        values.append(loss.complexity(nd, weights, [sigma0, _nd(SIGMA)], [eps0, _nd(eps)])
                      .asnumpy()[0])
    values = np.array(values)
    # each draw equals the float64 reference of log q - log P
    w = MU + SIGMA * eps_all[0]
    assert values[0] == pytest.approx(np.sum(ref.log_normal(w - MU, SIGMA))
                                      - np.sum(ref.log_normal(w - MEAN, STD)), rel=1e-10)
    closed = kl_reference(MU, SIGMA, MEAN, STD)
    standard_error = values.std(ddof=1) / np.sqrt(len(values))
    assert standard_error < 0.02 * closed
    assert abs(values.mean() - closed) < 4 * standard_error


def kl_exact(mu, sigma, mean, std):
    """sum_j KL(N(mu_j, sigma_j^2) || N(m_j, s_j^2)) of the given floating-point numbers, in
    40-digit decimal arithmetic (the textbook form, exact to 1e-30 here), as a float."""
    with decimal.localcontext() as context:
        context.prec = 40
        total = decimal.Decimal(0)
        for m, s, a, b in zip(*(np.ravel(x).astype(np.float64).tolist()
                                for x in (mu, sigma, mean, std))):
            r = decimal.Decimal(s) / decimal.Decimal(b)
            gap = (decimal.Decimal(m) - decimal.Decimal(a)) / decimal.Decimal(b)
            total += (r * r - 1 + gap * gap) / 2 - r.ln()
        return float(total)


@pytest.mark.parametrize("gap", [0.0, 0.002])
@pytest.mark.parametrize("deviation", [1e-2, 1e-3, 1e-4, 1e-5, 1e-6, -1e-2, -1e-3, -1e-4, -1e-5,
                                       -1e-6])
def test_float32_closed_form_kl_is_accurate_where_q_is_close_to_the_prior(deviation, gap):
    """sigma = s (1 + deviation), mu = m + gap s: 1,000 weights in float32, the state right after
    from_posterior. The relative error of the summed KL stays below 2e-6 (each term is good to
    about 5 units of float32's 6e-8; the float32 sum adds its own rounding); the textbook form
    (r^2 - 1) / 2 - log r was off by 2% at r = 1 + 1e-3 and by 50% from r = 1 + 1e-4 on."""
    rng = np.random.default_rng(11)
    mean = rng.normal(scale=0.5, size=1000).astype(np.float32)
    std = np.exp(rng.uniform(-5.0, 0.0, size=1000)).astype(np.float32)
    sigma = (std * np.float32(1.0 + deviation)).astype(np.float32)
    mu = (mean + np.float32(gap) * std).astype(np.float32)
    assert np.all(sigma != std) or abs(deviation) < 1e-6
    prior = DiagonalGaussianPrior([mean], [std])
    kl = prior.sum_kl(nd.array(mu), nd.array(sigma), index=0)
    assert kl.dtype == np.float32
    exact = kl_exact(mu, sigma, mean, std)
    assert exact > 0
    assert abs(kl.asnumpy()[0] / exact - 1.0) < 2e-6, (kl.asnumpy()[0], exact)
    # each term on its own: the shared elementwise helper
    terms = kl_normal_scales(nd, nd.array(sigma), nd.array(std)).asnumpy()
    exact_terms = [kl_exact([0.0], sigma[i:i + 1], [0.0], std[i:i + 1]) for i in range(50)]
    np.testing.assert_allclose(terms[:50], exact_terms, rtol=1e-6)


@pytest.mark.parametrize("deviation", [1e-1, 1e-2, 1e-3, 1e-4, 1e-6, -1e-3, -1e-5])
def test_float32_kl_gradient_near_the_prior_is_the_closed_form(deviation):
    """d KL / d sigma = (sigma^2 - s^2) / (sigma s^2) and d KL / d mu = (mu - m) / s^2, in
    float32 near r = 1, within 1e-6 of the float64 closed form at the same float32 inputs."""
    rng = np.random.default_rng(3)
    mean = rng.normal(scale=0.5, size=200).astype(np.float32)
    std = np.exp(rng.uniform(-5.0, 0.0, size=200)).astype(np.float32)
    sigma = (std * np.float32(1.0 + deviation)).astype(np.float32)
    mu = (mean + np.float32(0.002) * std).astype(np.float32)
    mu_nd, sigma_nd = nd.array(mu), nd.array(sigma)
    for array in (mu_nd, sigma_nd):
        array.attach_grad()
    with autograd.record():
        kl = DiagonalGaussianPrior([mean], [std]).sum_kl(mu_nd, sigma_nd, index=0)
    kl.backward()
    s64, std64 = sigma.astype(np.float64), std.astype(np.float64)
    np.testing.assert_allclose(sigma_nd.grad.asnumpy(),
                               (s64 ** 2 - std64 ** 2) / (s64 * std64 ** 2), rtol=1e-6)
    np.testing.assert_allclose(mu_nd.grad.asnumpy(),
                               (mu.astype(np.float64) - mean) / std64 ** 2, rtol=1e-6)

def test_float32_kl_terms_are_accurate_across_ratios():
    """From r = 0.01 to r = 100, where the series and the direct form of atanh(u) - u meet
    (|u| = 0.1, r = 11/9 and 9/11) included: each term within 1e-6 of the exact one."""
    ratios = np.concatenate([np.geomspace(0.01, 100.0, 201),
                             [0.81817, 0.81819, 1.22221, 1.22223, 1.0]])
    std = np.full(ratios.shape, 0.37, dtype=np.float32)
    sigma = (std * ratios).astype(np.float32)
    terms = kl_normal_scales(nd, nd.array(sigma), nd.array(std)).asnumpy()
    exact = np.array([kl_exact([0.0], sigma[i:i + 1], [0.0], std[i:i + 1])
                      for i in range(len(ratios))])
    np.testing.assert_allclose(terms, exact, rtol=1e-6, atol=0.0)
    assert terms[-1] == 0.0  # r = 1
    # a scalar s (the Gaussian prior's) gives the same terms
    np.testing.assert_array_equal(kl_normal_scales(nd, nd.array(sigma), 0.37).asnumpy(),
                                  kl_normal_scales(nd, nd.array(sigma),
                                                   nd.array([0.37])).asnumpy())

def test_gradients_match_the_closed_forms_and_central_differences():
    """d/dw log N(w; m, s^2) = -(w - m) / s^2; d KL / d mu = (mu - m) / s^2 and
    d KL / d sigma = sigma / s^2 - 1 / sigma; and each against central differences of the
    float64 reference (absolute error of the differences about 1e-16 |f| / step)."""
    prior = _prior()
    closed_forms = [[-(W - MEAN) / STD ** 2],
                    [(MU - MEAN) / STD ** 2, SIGMA / STD ** 2 - 1 / SIGMA]]
    for (function, reference, points), exact in zip([
            (lambda a: prior.sum_log_prob(a[0], index=1),
             lambda a: np.sum(ref.log_normal(a[0] - MEAN, STD)), [W]),
            (lambda a: prior.sum_kl(a[0], a[1], index=1),
             lambda a: kl_reference(a[0], a[1], MEAN, STD), [MU, SIGMA])], closed_forms):
        arrays = [_nd(p) for p in points]
        for array in arrays:
            array.attach_grad()
        with autograd.record():
            out = function(arrays)
        out.backward()
        step = 1e-6
        for k, point in enumerate(points):
            numeric = np.zeros_like(point)
            for index in np.ndindex(point.shape):
                up, down = [p.copy() for p in points], [p.copy() for p in points]
                up[k][index] += step
                down[k][index] -= step
                numeric[index] = (reference(up) - reference(down)) / (2 * step)
            np.testing.assert_allclose(arrays[k].grad.asnumpy(), exact[k], rtol=1e-12)
            np.testing.assert_allclose(arrays[k].grad.asnumpy(), numeric, rtol=1e-6, atol=1e-5)


def _prior_for(posterior, seed=5):
    """A per-weight prior over ``posterior``'s tensors with random means and stds."""
    rng = np.random.default_rng(seed)
    return DiagonalGaussianPrior([rng.normal(scale=0.3, size=s) for s in posterior.shapes],
                                 [np.exp(rng.uniform(-2.0, 0.0, size=s)) for s in posterior.shapes])


@pytest.mark.parametrize("kl", ["monte_carlo", "closed_form"])
@pytest.mark.parametrize("hybridize", [False, True])
def test_the_cost_gradients_for_mu_and_rho_match_central_differences(kl, hybridize):
    net, posterior, epsilons, x, y = tiny_problem(hybridize=hybridize)
    loss = BBBLoss(_prior_for(posterior), kl=kl)
    loss.prior.initialize(mx.cpu(), "float64")
    if hybridize:
        loss.hybridize()
    with autograd.record():
        cost = bbb_cost(net, posterior, loss, epsilons, x, y, kl_weight=0.3)[0]
    cost.backward()
    ref.check_against_central_differences(
        posterior, lambda: bbb_cost(net, posterior, loss, epsilons, x, y, kl_weight=0.3)[0])


@pytest.mark.parametrize("kl", ["monte_carlo", "closed_form"])
def test_hybridized_cost_equals_the_imperative_one(kl):
    results = []
    for hybridize in (False, True):
        net, posterior, epsilons, x, y = tiny_problem(dtype="float32", hybridize=hybridize)
        prior = _prior_for(posterior)
        loss = BBBLoss(prior, kl=kl)
        prior.initialize(mx.cpu(), "float32")
        if hybridize:
            loss.hybridize()
        with autograd.record():
            cost, _, complexity = bbb_cost(net, posterior, loss, epsilons, x, y, kl_weight=0.5)
        cost.backward()
        results.append([cost.asnumpy(), complexity.asnumpy()]
                       + [p.grad().asnumpy() for p in posterior.mus + posterior.rhos])
    for imperative, hybrid in zip(*results):
        np.testing.assert_allclose(hybrid, imperative, rtol=2e-5, atol=1e-6)


def test_bad_arrays_and_indices_are_named():
    with pytest.raises(ValueError, match="positive and finite"):
        DiagonalGaussianPrior([np.zeros(3)], [np.array([1.0, 0.0, 1.0])])
    with pytest.raises(ValueError, match="means must be finite"):
        DiagonalGaussianPrior([np.array([np.nan])], [np.ones(1)])
    with pytest.raises(ValueError, match="shape \\(3,\\) and .* shape \\(2,\\)"):
        DiagonalGaussianPrior([np.zeros(3)], [np.ones(2)])
    with pytest.raises(ValueError, match="2 means and 1 stds"):
        DiagonalGaussianPrior([np.zeros(3), np.zeros(2)], [np.ones(3)])
    prior = _prior()
    with pytest.raises(ValueError, match="index in \\[0, 2\\), got None"):
        prior.sum_log_prob(_nd(W))
    with pytest.raises(ValueError, match="tensor 0 has shape \\(3, 4\\), the prior's has \\(2,\\)"):
        prior.sum_kl(_nd(MU), _nd(SIGMA), index=0)
    with pytest.raises(TypeError, match="VariationalPosterior"):
        DiagonalGaussianPrior.from_posterior(None)
    with pytest.raises(TypeError, match="means\\(\\) and stds\\(\\)"):
        prior.values()
    with pytest.raises(ValueError, match="shapes a list of lists of positive integers"):
        prior_from_config({"name": "diagonal-gaussian", "shapes": [[3, 0]]})
    with pytest.raises(ValueError, match="shapes a list"):
        prior_from_config({"name": "diagonal-gaussian", "shapes": [[3]], "learnable": True})


# ---------------------------------------------------------------------------- through BBBTrainer
def test_the_arrays_are_placed_once_and_handed_out_again(monkeypatch):
    """arrays() (the fused operator's inputs, read every step) places the prior's arrays
    (initialise, move, cast) on its first call only: later calls with the same likes hand out
    the same tuples, with the prior's values; another dtype, or arrays replaced behind its
    back, places them again, and a checkpoint's set_data shows through the same arrays."""
    prior = _prior("float32")
    likes = [nd.zeros((2,)), nd.zeros((3, 4))]
    means, stds = prior.arrays(likes)
    for got, want in zip(means + stds, prior.means() + prior.stds()):
        assert got.dtype == np.float32
        np.testing.assert_array_equal(got.asnumpy(), want)
    np.testing.assert_array_equal(stds[1].asnumpy(), STD.astype(np.float32))
    placements = []
    initialize = prior.initialize
    monkeypatch.setattr(prior, "initialize",
                        lambda *args: (placements.append(args), initialize(*args)))
    again = prior.arrays(list(likes))
    assert again[0] is means and again[1] is stds and placements == []
    prior.sum_log_prob(likes[1], index=1)  # the imperative cost reads the same placement
    assert placements == []
    wide = [like.astype("float64") for like in likes]
    wide_means, wide_stds = prior.arrays(wide)
    assert len(placements) == 1 and all(a.dtype == np.float64 for a in wide_means + wide_stds)
    np.testing.assert_array_equal(wide_means[1].asnumpy(), MEAN.astype(np.float32))
    assert prior.arrays(wide)[0] is wide_means and len(placements) == 1
    param = prior.constants()["mean1"]
    param.set_data(nd.ones((3, 4), dtype="float64"))  # as a checkpoint's load: in place
    assert prior.arrays(wide)[0][1] is wide_means[1] and len(placements) == 1
    np.testing.assert_array_equal(wide_means[1].asnumpy(), np.ones((3, 4)))
    param.cast("float64")  # replaces the parameter's arrays: placed again
    assert prior.arrays(wide)[0][1] is param.data() and len(placements) == 2
    prior.sum_log_prob(likes[1], index=1)  # the imperative cost in float32 places them again
    assert len(placements) == 3 and param.data().dtype == np.float32
    # so the float64 arrays handed out before are no longer the prior's: placed once more
    wide_means, wide_stds = prior.arrays(wide)
    assert wide_means[1] is param.data() and len(placements) == 4
    assert all(a.dtype == np.float64 for a in wide_means + wide_stds)


def _net(hidden=16, seed=3):
    mx.random.seed(seed)
    net = gluon.nn.HybridSequential()
    net.add(gluon.nn.Dense(hidden, activation="relu"), gluon.nn.Dense(3))
    net.initialize(mx.init.Xavier())
    net(nd.zeros((1, 8)))
    return net


def _data(trainer, seed=0):
    x, y = blobs(num_examples=256, seed=seed)
    return EpochShuffled(ArrayLoader(x, y, batch_size=64, shuffle=True), 0, lambda: trainer.epoch)


@pytest.fixture(scope="module")
def task_a_prior():
    """The prior of a second task: the posterior after one epoch on a first one."""
    trainer = BBBTrainer(_net(), BBBLoss(GaussianPrior(1.0)), seed=1,
                         optimizer_params={"learning_rate": 0.02})
    trainer.fit(_data(trainer, seed=1), 1, progress=False)
    prior = DiagonalGaussianPrior.from_posterior(trainer.posterior)
    expected = ([mu.asnumpy() for mu in trainer.posterior.means()],
                [sigma.asnumpy() for sigma in trainer.posterior.sigmas()])
    return prior, expected


def _copy(prior):
    return DiagonalGaussianPrior(prior.means(), prior.stds())


def _task_b(prior, kl="closed_form", seed=3, fused=None):
    return BBBTrainer(_net(seed=seed), BBBLoss(prior, kl=kl), seed=seed, fused=fused,
                      optimizer_params={"learning_rate": 0.02})


def test_from_posterior_is_a_snapshot_that_training_never_moves(task_a_prior):
    prior, (means, stds) = task_a_prior
    prior = _copy(prior)
    for a, b in zip(prior.means() + prior.stds(), means + stds):
        np.testing.assert_array_equal(a, b)
    assert prior.shapes == [(16, 8), (16,), (3, 16), (3,)] and prior.means()[0].dtype == np.float32
    trainer = _task_b(prior)
    trainer.fit(_data(trainer), 2, progress=False)
    assert all(p.grad_req == "null" for p in prior.constants().values())
    assert trainer.prior_params == []  # nothing of the prior is trained
    assert set(trainer.loss.collect_params().values()) == set(prior.constants().values())
    for a, b in zip(prior.means() + prior.stds(), means + stds):
        np.testing.assert_array_equal(a, b)
    # the posterior moved away from the prior; the KL in the history is the cost's complexity
    assert trainer.history[-1]["complexity"] > 0


def test_the_prior_takes_the_fused_path_where_it_is_available(task_a_prior, monkeypatch):
    """The fused operator takes the prior's arrays (tests/fused/test_fused_diagonal_prior.py
    pins its values and gradients): no fallback for a per-weight prior."""
    monkeypatch.setenv(fused.ENV_SWITCH, "1")
    fused_or_skip()
    trainer = _task_b(_copy(task_a_prior[0]))
    assert trainer.fused and trainer.fused_reason == ""
    assert _task_b(_copy(task_a_prior[0]), fused=True).fused
    pure = _task_b(_copy(task_a_prior[0]), fused=False)
    assert not pure.fused and "fused=False" in pure.fused_reason


def test_a_long_run_with_the_prior_keeps_its_objects(task_a_prior):
    """Steps with the prior (two draws a step, on the path the machine gives) create nothing
    that outlives them: the live NDArrays and Python objects are as many after 40 more
    steps as after the first 5."""
    trainer = BBBTrainer(_net(), BBBLoss(_copy(task_a_prior[0]), kl="closed_form"),
                         num_samples=2, seed=3)
    x, y = blobs(num_examples=64, seed=0)
    x, y = nd.array(x), nd.array(y)

    def live():
        nd.waitall()
        gc.collect()
        objects = gc.get_objects()
        return sum(isinstance(o, nd.NDArray) for o in objects), len(objects)

    counts = []
    for steps in (5, 40):
        for _ in range(steps):
            trainer.step(x, y, 0.01)
        counts.append(live())
    (arrays_before, objects_before), (arrays_after, objects_after) = counts
    assert arrays_after == arrays_before
    assert objects_after - objects_before < 10  # one object a step would be 40


def test_a_prior_of_another_network_is_refused(task_a_prior):
    prior = _copy(task_a_prior[0])
    with pytest.raises(ValueError, match="weight tensor 0 \\(.*weight\\) has shape \\(8, 8\\), "
                                         "the prior's tensor 0 has \\(16, 8\\)"):
        BBBTrainer(_net(hidden=8), BBBLoss(prior))
    deeper = gluon.nn.HybridSequential()
    deeper.add(gluon.nn.Dense(16), gluon.nn.Dense(16), gluon.nn.Dense(3))
    deeper.initialize()
    deeper(nd.zeros((1, 8)))
    with pytest.raises(ValueError, match="covers 4 weight tensors, the network has 6"):
        BBBTrainer(deeper, BBBLoss(prior))


def test_a_checkpoint_stores_the_arrays_as_arrays_and_loads_them(task_a_prior, tmp_path):
    path = str(tmp_path / "b.bbb")
    trainer = _task_b(_copy(task_a_prior[0]))
    trainer.fit(_data(trainer), 1, progress=False)
    trainer.save(path)
    stored = read_checkpoint(path)
    assert stored.metadata["prior"] == {"name": "diagonal-gaussian",
                                        "shapes": [[16, 8], [16], [3, 16], [3]]}
    for i, (mean, std) in enumerate(zip(trainer.loss.prior.means(), trainer.loss.prior.stds())):
        assert stored.arrays[f"prior:mean{i}"].dtype == np.float32
        np.testing.assert_array_equal(stored.arrays[f"prior:mean{i}"], mean)
        np.testing.assert_array_equal(stored.arrays[f"prior:std{i}"], std)
    with zipfile.ZipFile(path) as archive:
        assert len(archive.read("metadata.json")) < 20000  # no array written as JSON numbers
    # a loss built from the file's config gets the file's arrays
    fresh = BBBTrainer(_net(seed=9), BBBLoss(prior_from_config(stored.metadata["prior"]),
                                             kl="closed_form"), seed=9)
    fresh.load(path)
    assert fresh.loss.prior == trainer.loss.prior
    # a scalar prior cannot take a per-weight prior's arrays, nor the other way round
    with pytest.raises(CheckpointError, match="per-weight prior must be the same kind"):
        BBBTrainer(_net(seed=9), BBBLoss(GaussianPrior(1.0))).load(path)
    plain = BBBTrainer(_net(seed=9), BBBLoss(GaussianPrior(1.0)))
    plain.fit(_data(plain), 1, progress=False)
    plain.save(str(tmp_path / "plain.bbb"))
    with pytest.raises(CheckpointError, match="per-weight prior must be the same kind"):
        _task_b(_copy(task_a_prior[0])).load(str(tmp_path / "plain.bbb"))


def test_a_damaged_checkpoint_is_one_named_error(task_a_prior, tmp_path):
    path = tmp_path / "b.bbb"
    trainer = _task_b(_copy(task_a_prior[0]))
    trainer.fit(_data(trainer), 1, progress=False)
    trainer.save(str(path))
    whole = path.read_bytes()
    with zipfile.ZipFile(path) as archive:
        entries = {name: archive.read(name) for name in archive.namelist()}
    metadata = json.loads(entries["metadata.json"])
    # flip one byte inside the last prior array's values
    layout = metadata["payloads"]["arrays.bin"]["arrays"]
    assert layout[-1][0].startswith("prior:")
    damaged = dict(entries, **{"arrays.bin": entries["arrays.bin"][:-2] + b"\x00\x01"})
    tampered = tmp_path / "tampered.bbb"
    with zipfile.ZipFile(tampered, "w") as archive:
        for name, payload in damaged.items():
            archive.writestr(name, payload)
    truncated = tmp_path / "truncated.bbb"
    truncated.write_bytes(whole[: len(whole) * 2 // 3])
    for bad, message in ((tampered, "SHA-256"), (truncated, "not a gluon_bbb checkpoint")):
        fresh = _task_b(_copy(task_a_prior[0]), seed=9)
        before = fresh.loss.prior.means()
        with pytest.raises(ValueError, match=message) as caught:
            fresh.load(str(bad))
        assert str(bad) in str(caught.value) and "\n" not in str(caught.value)
        for a, b in zip(before, fresh.loss.prior.means()):
            np.testing.assert_array_equal(a, b)  # the trainer is as it was


@pytest.mark.parametrize("kl", ["monte_carlo", "closed_form"])
def test_a_resumed_run_equals_an_uninterrupted_one_bit_for_bit(task_a_prior, tmp_path, kl):
    checkpoint = str(tmp_path / "b.bbb")
    uninterrupted = _task_b(_copy(task_a_prior[0]), kl=kl)
    uninterrupted.fit(_data(uninterrupted), 4, progress=False)
    first = _task_b(_copy(task_a_prior[0]), kl=kl)
    first.fit(_data(first), 2, checkpoint_path=checkpoint, progress=False)
    config = read_checkpoint(checkpoint).metadata["prior"]
    resumed = _task_b(prior_from_config(config), kl=kl, seed=99)  # other weights, N(0, 1) prior
    mx.random.seed(12345)
    resumed.load(checkpoint)
    resumed.fit(_data(resumed), 4, progress=False)
    assert [r["loss"] for r in resumed.history] == [r["loss"] for r in uninterrupted.history]
    for a, b in zip(uninterrupted.variational_params, resumed.variational_params):
        np.testing.assert_array_equal(a.data().asnumpy(), b.data().asnumpy())
    assert resumed.loss.prior == uninterrupted.loss.prior
