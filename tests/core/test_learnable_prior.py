"""Learnable priors (empirical Bayes): values and gradients against float64 NumPy references
and finite differences, the closed-form optimum of the Gaussian scale, and training, history,
checkpoints and resuming through BBBTrainer."""
import math

import mxnet as mx
import numpy as np
import pytest
from mxnet import autograd, gluon, nd

from gluon_bbb import BBBLoss, BBBTrainer, GaussianPrior, ScaleMixturePrior, prior_from_config
from gluon_bbb.io.checkpoint import CheckpointError
from gluon_bbb.data.loaders import ArrayLoader, EpochShuffled

from reference import log_gaussian_prior, log_scale_mixture_prior
from synthetic import blobs

W = np.array([-2.0, -0.7, -0.05, -1e-3, 0.0, 2e-3, 0.01, 0.3, 1.1, 3.0])
MU = np.linspace(-0.4, 0.5, 12)
SIGMA = np.linspace(0.01, 0.2, 12)


def _raw(values):
    """name -> float64 (1,) NDArray with a gradient buffer."""
    raw = {name: nd.array([value], dtype="float64") for name, value in values.items()}
    for array in raw.values():
        array.attach_grad()
    return raw


def _mixture_reference(w, raw):
    pi = 1.0 / (1.0 + math.exp(-raw["logit_pi"]))
    return log_scale_mixture_prior(w, pi, math.exp(raw["log_sigma1"]), math.exp(raw["log_sigma2"]))


def _gaussian_kl_reference(mu, sigma, raw):
    s = math.exp(raw["log_sigma"])
    return np.sum(np.log(s / sigma) + (sigma ** 2 + mu ** 2) / (2 * s ** 2) - 0.5)


CASES = [  # prior, raw values, the float64 reference sum of log P(w) as a function of them
    (GaussianPrior(0.4, learnable=True), {"log_sigma": math.log(0.4)},
     lambda w, raw: log_gaussian_prior(w, math.exp(raw["log_sigma"]))),
    (ScaleMixturePrior(0.3, 1.0, math.exp(-5), learnable=True),
     {"logit_pi": math.log(0.3 / 0.7), "log_sigma1": 0.0, "log_sigma2": -5.0}, _mixture_reference),
]


@pytest.mark.parametrize("prior,values,reference", CASES)
def test_learnable_log_prob_matches_the_reference(prior, values, reference):
    raw = _raw({name: value + 0.1 for name, value in values.items()})  # away from the start
    moved = {name: value + 0.1 for name, value in values.items()}
    w = nd.array(W, dtype="float64")
    np.testing.assert_allclose(prior.log_prob(w, raw=raw).asnumpy(), reference(W, moved), rtol=1e-10)
    np.testing.assert_allclose(prior.sum_log_prob(w, raw=raw).asnumpy(),
                               [np.sum(reference(W, moved))], rtol=1e-10)


@pytest.mark.parametrize("prior,values,reference", CASES)
def test_learnable_gradients_match_finite_differences(prior, values, reference):
    raw = _raw(values)
    w = nd.array(W, dtype="float64")
    with autograd.record():
        out = prior.sum_log_prob(w, raw=raw)
    out.backward()
    step = 1e-6
    for name in values:
        up, down = dict(values), dict(values)
        up[name] += step
        down[name] -= step
        numeric = (np.sum(reference(W, up)) - np.sum(reference(W, down))) / (2 * step)
        np.testing.assert_allclose(raw[name].grad.asnumpy()[0], numeric, rtol=1e-6, atol=1e-6,
                                   err_msg=name)


def test_learnable_closed_form_kl_and_its_gradient_match_the_reference():
    prior = GaussianPrior(0.4, learnable=True)
    values = {"log_sigma": math.log(0.15)}
    raw = _raw(values)
    with autograd.record():
        kl = prior.sum_kl(nd.array(MU, dtype="float64"), nd.array(SIGMA, dtype="float64"), raw=raw)
    kl.backward()
    assert kl.asnumpy()[0] == pytest.approx(_gaussian_kl_reference(MU, SIGMA, values), rel=1e-12)
    step = 1e-6
    numeric = (_gaussian_kl_reference(MU, SIGMA, {"log_sigma": values["log_sigma"] + step})
               - _gaussian_kl_reference(MU, SIGMA, {"log_sigma": values["log_sigma"] - step})) / (2 * step)
    np.testing.assert_allclose(raw["log_sigma"].grad.asnumpy()[0], numeric, rtol=1e-6)


def test_learned_gaussian_scale_reaches_the_closed_form_optimum():
    """With q fixed, KL(q || N(0, s^2)) is smallest at s^2 = mean(sigma_j^2 + mu_j^2); gradient
    descent on the prior's parameter through the loss must find it."""
    prior = GaussianPrior(1.0, learnable=True)
    loss = BBBLoss(prior, kl="closed_form")
    prior.initialize(mx.cpu(), "float64")
    trainer = gluon.Trainer(loss.collect_params(), "sgd", {"learning_rate": 0.02})
    eps = np.random.RandomState(0).normal(size=MU.shape)
    inputs = [[nd.array(a, dtype="float64")] for a in (MU + SIGMA * eps, SIGMA, eps)]
    pred, label = nd.zeros((1, 2), dtype="float64"), nd.zeros((1,), dtype="float64")
    for _ in range(400):
        with autograd.record():
            cost = loss(pred, label, nd.ones((1,), dtype="float64"), *inputs)[0]
        cost.backward()
        trainer.step(1)
    assert prior.sigma == pytest.approx(math.sqrt(np.mean(SIGMA ** 2 + MU ** 2)), rel=1e-6)


def test_a_learnable_loss_hybridized_equals_imperative():
    eps = np.random.RandomState(1).normal(size=W.shape)
    sigma = 0.05 + 0.01 * np.arange(W.size)
    inputs = [[nd.array(a)] for a in (W, sigma, eps)]
    pred = nd.array(np.random.RandomState(2).normal(size=(4, 3)))
    label = nd.array([0, 2, 1, 1])
    results = []
    for hybridize in (False, True):
        prior = ScaleMixturePrior(0.4, 1.0, math.exp(-4), learnable=True)
        loss = BBBLoss(prior)
        loss.initialize()
        if hybridize:
            loss.hybridize()
        with autograd.record():
            cost = loss(pred, label, nd.array([0.1]), *inputs)[0]
        cost.backward()
        results.append([cost.asnumpy()] + [p.grad().asnumpy() for p in loss.collect_params().values()])
    for imperative, hybrid in zip(*results):
        np.testing.assert_allclose(hybrid, imperative, rtol=1e-5)


def test_swapped_mixture_components_report_wide_then_narrow():
    prior = ScaleMixturePrior(0.3, 1.0, 0.1, learnable=True)
    prior.initialize(mx.cpu())
    prior.parameters()["log_sigma2"].set_data(nd.array([1.0]))  # sigma2 = e > sigma1 = 1
    values = prior.values()
    assert values["sigma1"] == pytest.approx(math.e, rel=1e-6)
    assert values["sigma2"] == pytest.approx(1.0) and values["pi"] == pytest.approx(0.7)
    np.testing.assert_allclose(prior.log_prob(nd.array(W)).asnumpy(),
                               log_scale_mixture_prior(W, 0.7, math.e, 1.0), rtol=1e-5)
    assert prior_from_config(prior.config()).values() == pytest.approx(values)


def test_prior_config_round_trip_and_bad_learnable_flag():
    prior = ScaleMixturePrior(0.25, 1.5, 0.01, learnable=True)
    rebuilt = prior_from_config(prior.config())
    assert rebuilt.learnable and rebuilt.values() == pytest.approx(prior.values())
    assert "learnable" not in GaussianPrior(0.5).config()  # fixed priors' files are unchanged
    with pytest.raises(ValueError, match="learnable must be true or false"):
        prior_from_config({"name": "gaussian", "sigma": 1.0, "learnable": "yes"})
    # one spelling, the configurations' and the command line's; files of the older one load
    assert prior.config()["name"] == "scale-mixture"
    older = prior_from_config({"name": "scale_mixture", "pi": 0.5, "sigma1": 1.0, "sigma2": 0.1})
    assert isinstance(older, ScaleMixturePrior) and older.values() == pytest.approx(
        {"pi": 0.5, "sigma1": 1.0, "sigma2": 0.1})
    with pytest.raises(ValueError, match="unknown prior 'mixture'"):
        prior_from_config({"name": "mixture", "pi": 0.5, "sigma1": 1.0, "sigma2": 0.1})


def _trainer(prior, seed=3):
    mx.random.seed(seed)
    net = gluon.nn.Sequential()
    net.add(gluon.nn.Dense(16, activation="relu"), gluon.nn.Dense(3))
    net.initialize(mx.init.Xavier())
    net(nd.zeros((1, 8)))
    return BBBTrainer(net, BBBLoss(prior), optimizer_params={"learning_rate": 0.02}, seed=seed)


def _data(trainer):
    x, y = blobs(num_examples=256)
    return EpochShuffled(ArrayLoader(x, y, batch_size=64, shuffle=True), 0, lambda: trainer.epoch)


def test_trainer_learns_the_prior_records_it_and_resumes_exactly(tmp_path):
    uninterrupted = _trainer(ScaleMixturePrior(0.5, 1.0, math.exp(-6), learnable=True))
    assert not uninterrupted.fused and "learnable" in uninterrupted.fused_reason
    uninterrupted.fit(_data(uninterrupted), 4, progress=False)
    history = uninterrupted.history
    assert [set(record["prior"]) for record in history] == [{"pi", "sigma1", "sigma2"}] * 4
    assert history[-1]["prior"] != {"pi": 0.5, "sigma1": 1.0, "sigma2": math.exp(-6)}
    assert history[-1]["prior"] == pytest.approx(uninterrupted.loss.prior.values())

    first = _trainer(ScaleMixturePrior(0.5, 1.0, math.exp(-6), learnable=True))
    path = str(tmp_path / "run.bbb")
    first.fit(_data(first), 2, progress=False, checkpoint_path=path)
    resumed = _trainer(prior_from_config(first.loss.prior.config()))
    resumed.load(path)
    assert resumed.loss.prior.values() == first.loss.prior.values()
    resumed.fit(_data(resumed), 4, progress=False)
    assert resumed.loss.prior.values() == uninterrupted.loss.prior.values()
    for a, b in zip(resumed.variational_params, uninterrupted.variational_params):
        np.testing.assert_array_equal(a.data().asnumpy(), b.data().asnumpy())


def test_a_learnable_checkpoint_needs_a_learnable_loss(tmp_path):
    trainer = _trainer(GaussianPrior(0.5, learnable=True))
    trainer.fit(_data(trainer), 1, progress=False)
    path = str(tmp_path / "run.bbb")
    trainer.save(path)
    with pytest.raises(CheckpointError, match="learnable prior must be the same kind"):
        _trainer(GaussianPrior(0.5)).load(path)
    fixed = _trainer(GaussianPrior(0.5))
    fixed.fit(_data(fixed), 1, progress=False)
    fixed.save(path)
    with pytest.raises(CheckpointError, match="learnable prior must be the same kind"):
        _trainer(GaussianPrior(0.5, learnable=True)).load(path)


@pytest.mark.parametrize("learnable", [False, True])
def test_optimizer_state_keeps_the_sorted_name_order_of_earlier_checkpoints(learnable):
    """Checkpoints index the optimizer state by the gluon.Trainer's parameter order, which has
    always been sorted by name (gluon.Trainer sorts a dict): files written before learned priors
    existed must still resume. A learned prior's parameters come after the posterior's."""
    from gluon_bbb.io import optimizer_state
    trainer = _trainer(GaussianPrior(0.5, learnable=learnable))
    trainer.fit(_data(trainer), 1, progress=False)
    _, arrays = optimizer_state.capture(trainer.gluon_trainer)
    params = {p.name: p for p in trainer.variational_params + trainer.prior_params}
    names = sorted(params)
    if learnable:
        assert names[-1] == "prior_log_sigma"
    for index, name in enumerate(names):
        assert arrays[f"{index}/0"].shape == params[name].shape, (index, name)
