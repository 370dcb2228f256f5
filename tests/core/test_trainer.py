"""BBBTrainer on small synthetic problems: training, reproducibility, robustness, checkpoints.

Every test runs twice: on the fused C++ operator and on the pure-MXNet path.
"""
import logging
import math
import os

import mxnet as mx
import numpy as np
import pytest
from mxnet import gluon, nd

from gluon_bbb import BBBLoss, BBBTrainer, GaussianPrior, NonFiniteLossError, ScaleMixturePrior
from gluon_bbb.data import ArrayLoader
from gluon_bbb.posterior import assign_arrays

from synthetic import blobs
from fused_paths import sampling_path  # noqa: F401 -- autouse fixture: each test runs on both paths


def small_mlp(num_outputs=3):
    net = gluon.nn.HybridSequential()
    net.add(gluon.nn.Dense(16, activation="relu"), gluon.nn.Dense(num_outputs))
    return net


def make_trainer(prior=None, seed=0, **kwargs):
    mx.random.seed(seed)
    loss = BBBLoss(prior or ScaleMixturePrior(0.5, 1.0, math.exp(-6)))
    kwargs.setdefault("optimizer_params", {"learning_rate": 0.01})
    return BBBTrainer(small_mlp(), loss, seed=seed, **kwargs)


@pytest.fixture(scope="module")
def data():
    x, y = blobs()
    return ArrayLoader(x[:384], y[:384], 32, shuffle=True, seed=0), ArrayLoader(x[384:], y[384:], 64)


@pytest.mark.parametrize("kl_weighting", ["uniform", "blundell"])
def test_training_reduces_loss_and_error(data, kl_weighting):
    train, test = data
    trainer = make_trainer(kl_weighting=kl_weighting)
    history = trainer.fit(train, num_epochs=8, eval_data=test, progress=False)
    assert history[-1]["loss"] < history[0]["loss"]
    assert history[-1]["nll"] < 0.5 * history[0]["nll"]
    assert history[-1]["test_error"] < 0.05
    assert trainer.evaluate(test, num_samples=5) < 0.05
    for record in history:
        assert record["loss"] == pytest.approx(record["nll"] + record["complexity"], rel=1e-4)


def test_kl_scale_multiplies_the_complexity_cost_only():
    """One batch per epoch: epoch 1 records the cost of the first sample, before any update."""
    x, y = blobs(seed=5)
    records = {}
    for scale in (1.0, 0.25):
        trainer = make_trainer(seed=3, kl_scale=scale)
        loader = ArrayLoader(x[:64], y[:64], 64)
        records[scale] = trainer.fit(loader, 1, progress=False)[0]
    assert records[0.25]["nll"] == pytest.approx(records[1.0]["nll"], rel=1e-6)
    assert records[0.25]["complexity"] == pytest.approx(0.25 * records[1.0]["complexity"], rel=1e-5)
    assert records[0.25]["loss"] == pytest.approx(records[0.25]["nll"] + records[0.25]["complexity"],
                                                  rel=1e-5)


@pytest.mark.parametrize("value", [0, -1.0, float("nan"), float("inf"), "a lot", True, None])
def test_bad_kl_scale_is_refused(value):
    with pytest.raises(ValueError, match="kl_scale must be a finite positive number"):
        make_trainer(kl_scale=value)


def test_same_seed_gives_identical_losses(data):
    train_x, train_y = blobs(seed=3)
    runs = []
    for _ in range(2):
        loader = ArrayLoader(train_x, train_y, 32, shuffle=True, seed=7)
        trainer = make_trainer(seed=11)
        runs.append([r["loss"] for r in trainer.fit(loader, 3, progress=False)])
    assert runs[0] == runs[1]
    other = make_trainer(seed=12).fit(ArrayLoader(train_x, train_y, 32, shuffle=True, seed=7), 3, progress=False)
    assert [r["loss"] for r in other] != runs[0]


def test_trains_a_conv2d_network():
    rng = np.random.default_rng(0)
    labels = rng.integers(0, 2, size=256)
    images = rng.normal(scale=0.3, size=(256, 1, 8, 8)).astype(np.float32)
    images[labels == 1, :, :4, :] += 1.0  # class 1: bright top half
    loader = ArrayLoader(images.reshape(256, -1), labels, 32, shuffle=True, seed=0)
    mx.random.seed(0)
    net = gluon.nn.HybridSequential()
    net.add(gluon.nn.HybridLambda(lambda F, x: F.reshape(x, (-1, 1, 8, 8))),
            gluon.nn.Conv2D(4, kernel_size=3, activation="relu"), gluon.nn.MaxPool2D(2),
            gluon.nn.Flatten(), gluon.nn.Dense(2))
    trainer = BBBTrainer(net, BBBLoss(GaussianPrior(1.0)), optimizer_params={"learning_rate": 0.02}, seed=0)
    history = trainer.fit(loader, 6, eval_data=loader, progress=False)
    assert any(len(s) == 4 for s in trainer.posterior.shapes)  # the conv kernel is covered
    assert history[-1]["test_error"] < 0.1


def test_several_samples_per_step_average_the_cost(data):
    """The loop over the draws (the batched pass is checked against it in
    test_batched_draws.py)."""
    train, _ = data
    x, y = next(iter(train))
    trainer = make_trainer(num_samples=3, batch_draws=False)
    trainer.prepare(x)
    state = trainer.noise.get_state()
    mx.random.seed(99)  # the fused operator draws from MXNet's generator
    cost = trainer.step(x, y, 0.1)[0].asscalar()
    # The same seed gives the same initial mu and rho; replay the same three noise draws.
    replay = make_trainer(num_samples=3, batch_draws=False)
    replay.prepare(x)
    replay.noise.set_state(state)
    mx.random.seed(99)
    singles = []
    for _ in range(3):
        weights, complexity_inputs = replay._sample()
        assign_arrays(replay.posterior.targets, weights)
        singles.append(replay.loss(replay.net(x), y, nd.array([0.1]), *complexity_inputs)[0].asscalar())
    assert len(set(singles)) == 3
    assert cost == pytest.approx(np.mean(singles), rel=1e-5)


def test_non_finite_step_is_discarded_and_parameters_stay_finite(data):
    train, _ = data
    x, y = next(iter(train))
    trainer = make_trainer()
    trainer.prepare(x)
    before = [p.data().copy() for p in trainer.variational_params]
    bad = x.copy()
    bad[0, 0] = np.nan
    cost, _, _, _, finite = trainer.step(bad, y, 0.1)
    # A ReLU may hide the NaN from the cost, but not from the gradients: the step is discarded.
    assert finite.asscalar() == 0
    for param, old in zip(trainer.variational_params, before):
        values = param.data().asnumpy()
        assert np.all(np.isfinite(values))
        np.testing.assert_allclose(values, old.asnumpy())  # first step: Adam state is zero
    trainer.step(x, y, 0.1)  # training goes on
    assert all(np.all(np.isfinite(p.data().asnumpy())) for p in trainer.variational_params)


def test_nan_batch_warns_and_all_nan_data_stops(data):
    x, y = blobs(num_examples=128)
    x_bad = x.copy()
    x_bad[:32] = np.nan  # the first of four batches
    trainer = make_trainer()
    with pytest.warns(RuntimeWarning, match="1 of 4 steps"):
        history = trainer.fit(ArrayLoader(x_bad, y, 32), 1, progress=False)
    assert history[0]["skipped_steps"] == 1
    assert all(np.isfinite(history[0][key]) for key in ("loss", "nll", "complexity"))
    assert all(np.all(np.isfinite(p.data().asnumpy())) for p in trainer.variational_params)
    x_bad[:] = np.nan
    with pytest.raises(NonFiniteLossError, match="non-finite"):
        make_trainer().fit(ArrayLoader(x_bad, y, 32), 1, progress=False)


def test_network_holds_the_means_after_training_and_exports_a_plain_net(data, tmp_path):
    train, test = data
    trainer = make_trainer()
    trainer.fit(train, 2, progress=False)
    for target, mu in zip(trainer.posterior.targets, trainer.posterior.mus):
        np.testing.assert_array_equal(target.data().asnumpy(), mu.data().asnumpy())
    error = trainer.evaluate(test)
    path = str(tmp_path / "mean.params")
    trainer.net.save_parameters(path)
    plain = small_mlp()
    plain.load_parameters(path)
    mistakes = sum(float((plain(xb).argmax(axis=1) != yb).sum().asscalar()) for xb, yb in test)
    assert mistakes / test.num_examples == pytest.approx(error)


def test_predict_proba_is_a_distribution(data):
    train, test = data
    trainer = make_trainer()
    trainer.fit(train, 1, progress=False)
    x, _ = next(iter(test))
    for n in (0, 4):
        probs = trainer.predict_proba(x, num_samples=n).asnumpy()
        assert probs.shape == (64, 3)
        np.testing.assert_allclose(probs.sum(axis=1), 1.0, rtol=1e-5)
    with pytest.raises(ValueError, match="num_samples"):
        trainer.predict_proba(x, num_samples=-1)


def test_save_load_round_trip_and_resume(data, tmp_path):
    train, test = data
    path = str(tmp_path / "ckpt.bbb")
    prior = ScaleMixturePrior(0.25, 1.0, math.exp(-7))
    trainer = make_trainer(prior=prior)
    trainer.fit(train, 2, checkpoint_path=path, progress=False)
    assert os.path.exists(path) and not [f for f in os.listdir(tmp_path) if f.endswith(".tmp")]

    # An uninterrupted 4-epoch run, from the same checkpoint state, ...
    reference = make_trainer(prior=prior)
    reference.fit(ArrayLoader(*blobs()[0:2], 32), 0, progress=False)  # builds the posterior
    reference.load(path)
    restored = make_trainer(prior=GaussianPrior(1.0))  # the checkpoint's prior replaces this one
    restored.fit(ArrayLoader(*blobs()[0:2], 32), 0, progress=False)
    restored.load(path)
    assert restored.loss.prior == prior and restored.epoch == 2 and len(restored.history) == 2
    for a, b in zip(trainer.variational_params, restored.variational_params):
        np.testing.assert_array_equal(a.data().asnumpy(), b.data().asnumpy())
    states_a = trainer.gluon_trainer._updaters[0].states
    states_b = restored.gluon_trainer._updaters[0].states
    assert states_a.keys() == states_b.keys() and states_a
    for key in states_a:
        for sa, sb in zip(states_a[key], states_b[key]):
            np.testing.assert_array_equal(sa.asnumpy(), sb.asnumpy())

    # ... resumed: both continue identically to epoch 4.
    x, y = blobs()
    continued = [t.fit(ArrayLoader(x[:384], y[:384], 32, shuffle=True, seed=5), 4, progress=False)
                 for t in (reference, restored)]
    assert [r["epoch"] for r in continued[1]] == [1, 2, 3, 4]
    assert [r["loss"] for r in continued[0]] == [r["loss"] for r in continued[1]]


def test_checkpoint_write_is_atomic(data, tmp_path, monkeypatch):
    train, _ = data
    path = tmp_path / "ckpt.bbb"
    trainer = make_trainer()
    trainer.fit(train, 1, checkpoint_path=str(path), progress=False)
    good = path.read_bytes()

    def crash(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", crash)
    with pytest.raises(OSError, match="disk full"):
        trainer.save(str(path))
    assert path.read_bytes() == good
    assert sorted(os.listdir(tmp_path)) == ["ckpt.bbb"]


def test_bad_inputs_get_named_errors(data):
    train, _ = data
    x, y = next(iter(train))
    with pytest.raises(ValueError, match="num_samples"):
        make_trainer(num_samples=0)
    with pytest.raises(ValueError, match="kl_weighting"):
        make_trainer(kl_weighting="linear")
    with pytest.raises(TypeError, match="BBBLoss"):
        BBBTrainer(small_mlp(), gluon.loss.SoftmaxCrossEntropyLoss())
    trainer = make_trainer()
    trainer.fit(train, 1, progress=False)
    with pytest.raises(ValueError, match=r"input of shape \(32, 5\)"):
        trainer.step(nd.ones((32, 5)), y, 0.1)
    with pytest.raises(ValueError, match=r"labels must be class indices in \[0, 3\)"):
        make_trainer().fit(ArrayLoader(x.asnumpy(), np.full(32, 7), 32), 1, progress=False)
    with pytest.raises(ValueError, match="3 inputs but 2 labels"):
        make_trainer().fit([(x[:3], y[:2])], 1, progress=False)


def test_unknown_context_is_refused_by_name():
    with pytest.raises(ValueError, match=r"gpu\(7\)"):
        make_trainer(ctx=mx.gpu(7))
    with pytest.raises(ValueError, match="unknown context"):
        make_trainer(ctx="tpu")


def test_learning_rate_schedule_sets_each_epochs_rate(data):
    train, _ = data
    seen = []
    trainer = make_trainer()
    trainer.fit(train, 3, progress=False, learning_rate_schedule=lambda epoch: 0.01 * 0.5 ** epoch,
                epoch_callback=lambda t, record: seen.append(t.gluon_trainer.learning_rate))
    assert seen == pytest.approx([0.01, 0.005, 0.0025])
    # a schedule of 0 on every epoch leaves the parameters where they are
    frozen = make_trainer()
    frozen.fit(train, 1, progress=False)
    before = [p.data().asnumpy().copy() for p in frozen.variational_params]
    frozen.fit(train, 2, progress=False, learning_rate_schedule=lambda epoch: 1e-30)
    for old, param in zip(before, frozen.variational_params):
        np.testing.assert_allclose(param.data().asnumpy(), old, atol=1e-20)


@pytest.mark.parametrize("value, message", [(0.0, "finite positive"), (float("nan"), "finite positive"),
                                            ("fast", "not a number")])
def test_bad_learning_rate_schedule_is_named(data, value, message):
    train, _ = data
    with pytest.raises(ValueError, match=message):
        make_trainer().fit(train, 1, progress=False, learning_rate_schedule=lambda epoch: value)


def test_local_sampling_evaluates_like_weight_sampling(caplog):
    """sampling='local' on the fused path, its logged fallback to 'weights' on the MXNet path."""
    x, y = blobs(num_examples=1024, scale=1.0, seed=5)  # overlapping classes: errors well above 0
    train = ArrayLoader(x[:512], y[:512], 32, shuffle=True, seed=0)
    test = ArrayLoader(x[512:], y[512:], 128)
    trainer = make_trainer(rho_init=-3.0)
    trainer.fit(train, 4, progress=False)
    mean_error = trainer.evaluate(test)
    assert mean_error > 0.05
    with caplog.at_level(logging.WARNING, logger="gluon_bbb"):
        local = trainer.evaluate(test, num_samples=30, sampling="local")
        trainer.evaluate(test, num_samples=2, sampling="local")
    weights = trainer.evaluate(test, num_samples=30, sampling="weights")
    assert abs(local - weights) < 0.04
    assert abs(local - mean_error) < 0.04 and abs(weights - mean_error) < 0.04
    fallbacks = [r.getMessage() for r in caplog.records if "sampling='local'" in r.getMessage()]
    if trainer.fused:
        assert not fallbacks
    else:  # logged once per trainer, with the reason
        assert len(fallbacks) == 1 and trainer.fused_reason in fallbacks[0]
    batch = nd.array(x[512:640])
    probs = trainer.predict_proba(batch, num_samples=4, sampling="local").asnumpy()
    assert probs.shape == (128, 3)
    np.testing.assert_allclose(probs.sum(axis=1), 1.0, rtol=1e-5)
    for target, mu in zip(trainer.posterior.targets, trainer.posterior.mus):  # the means are back
        np.testing.assert_array_equal(target.data().asnumpy(), mu.data().asnumpy())
    np.testing.assert_array_equal(trainer.predict_proba(batch, sampling="local").asnumpy(),
                                  trainer.predict_proba(batch).asnumpy())  # n = 0: the mean net


class _Doubled(gluon.nn.HybridSequential):
    def hybrid_forward(self, F, x):
        return 2 * super().hybrid_forward(F, x)


class _Custom(gluon.HybridBlock):
    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        with self.name_scope():
            self.dense = gluon.nn.Dense(3)

    def hybrid_forward(self, F, x):
        return self.dense(x)


def test_sampling_argument_is_checked(data):
    train, test = data
    trainer = make_trainer()
    trainer.fit(train, 1, progress=False)
    x, _ = next(iter(test))
    for bad in ("layer", None, "LOCAL"):
        with pytest.raises(ValueError, match="sampling must be one of"):
            trainer.evaluate(test, num_samples=2, sampling=bad)
    with pytest.raises(ValueError, match="sampling must be one of"):
        trainer.predict_proba(x, num_samples=2, sampling="both")
    # 'local' needs a first Dense layer; refused on every path, before any fallback
    first_lambda = gluon.nn.HybridSequential()
    first_lambda.add(gluon.nn.HybridLambda(lambda F, v: F.relu(v)), gluon.nn.Dense(3))
    nested = gluon.nn.HybridSequential()
    nested.add(small_mlp())
    doubled = _Doubled()
    doubled.add(gluon.nn.Dense(3))
    for net, message in [(first_lambda, "the first block is a HybridLambda"),
                         (nested, "the first block is a HybridSequential"),
                         (doubled, "got a _Doubled"), (_Custom(), "got a _Custom")]:
        other = BBBTrainer(net, BBBLoss(GaussianPrior(1.0)))
        with pytest.raises(ValueError, match=message):
            other.evaluate(test, num_samples=2, sampling="local")
    with pytest.raises(ValueError, match="the first block is a HybridLambda"):
        BBBTrainer(first_lambda, BBBLoss(GaussianPrior(1.0))).predict_proba(x, sampling="local")


def test_epoch_log_line_is_readable():
    from gluon_bbb.epochs import epoch_line
    record = {"epoch": 3, "loss": 1059669.4, "nll": 3353.6, "complexity": 1056315.8,
              "train_error": 0.01757, "test_error": 0.0247, "skipped_steps": 0, "seconds": 4.26}
    assert epoch_line(record, 10) == ("epoch 3/10  free energy 1,059,669 (nll 3,354 + complexity "
                                      "1,056,316)  train 1.76%  test 2.47%  4.3 s")
    assert "validation 2.47%" in epoch_line(record, 10, "validation")
    assert "2 steps skipped" in epoch_line(dict(record, skipped_steps=2), 10)


def test_epoch_seconds_are_measured_after_the_epochs_one_sync(monkeypatch):
    """MXNet runs asynchronously: the clock must be read after the host sync, or 'seconds'
    would count the dispatch of the epoch's operations, not their computation."""
    from gluon_bbb import epochs
    totals = epochs.EpochTotals(False, None, mx.cpu(), "float32")
    one = mx.nd.ones((1,))
    totals.add(mx.nd.zeros((4,)), one, one, one, one, None, one)
    events = []
    concat = mx.nd.concat

    class Synced:
        def __init__(self, array):
            self.array = array

        def asnumpy(self):
            events.append("sync")
            return self.array.asnumpy()

    monkeypatch.setattr(epochs.nd, "concat", lambda *a, **k: Synced(concat(*a, **k)))
    monkeypatch.setattr(epochs.time, "time", lambda: events.append("clock") or 10.0)
    record = totals.record(1, start=4.0)
    assert events == ["sync", "clock"] and record["seconds"] == 6.0
    assert record["loss"] == 1.0 and record["skipped_steps"] == 0


def test_closed_form_kl_trains_on_either_path(sampling_path):
    rng = np.random.default_rng(0)
    x = rng.normal(size=(128, 6)).astype("float32")
    y = (x[:, 0] > 0).astype("float32")
    net = gluon.nn.HybridSequential()
    net.add(gluon.nn.Dense(8, activation="relu"), gluon.nn.Dense(2))
    net.initialize(mx.init.Xavier())
    net(nd.zeros((1, 6)))
    prior = GaussianPrior(0.3)
    trainer = BBBTrainer(net, BBBLoss(prior, kl="closed_form"), seed=0)
    history = trainer.fit(ArrayLoader(x, y, batch_size=32, shuffle=True, seed=0), 3,
                          progress=False)
    assert trainer.fused is (sampling_path == "fused")
    assert all(np.isfinite(r["loss"]) for r in history)
    mus = [m.data().asnumpy().astype(np.float64) for m in trainer.posterior.mus]
    sigmas = [np.log1p(np.exp(r.data().asnumpy().astype(np.float64)))
              for r in trainer.posterior.rhos]
    expected = sum(np.sum(np.log(0.3 / s) + (s ** 2 + m ** 2) / (2 * 0.09) - 0.5)
                   for m, s in zip(mus, sigmas))
    complexity = trainer.step(nd.array(x[:32]), nd.array(y[:32]), 0.25)[2]
    np.testing.assert_allclose(complexity.asscalar(), expected, rtol=2e-4)  # float32


def test_moped_start_from_a_trained_network():
    """BBBTrainer(sigma_init='moped'): mu is the trained network, sigma = delta * |w|."""
    net = gluon.nn.HybridSequential()
    net.add(gluon.nn.Dense(6, activation="relu"), gluon.nn.Dense(2))
    net.initialize(mx.init.Normal(0.2))
    net(nd.zeros((1, 4)))
    weights = [p.data().asnumpy() for p in net.collect_params().values()]
    trainer = BBBTrainer(net, BBBLoss(GaussianPrior(1.0)), sigma_init="moped", moped_delta=0.05)
    for w, sigma in zip(weights, trainer.posterior.sigmas()):
        np.testing.assert_allclose(sigma.asnumpy(), np.maximum(0.05 * np.abs(w), 1e-8), rtol=1e-4)


def test_a_float_complexity_weight_is_copied_once_and_follows_its_value(data):
    """Steps with a float weight equal steps with the same weight as an NDArray, also when
    the float changes between steps."""
    x, y = next(iter(data[0]))
    costs = []
    for as_array in (False, True):
        trainer = make_trainer()
        costs.append([trainer.step(x, y, nd.array([w]) if as_array else w)[0].asscalar()
                      for w in (0.5, 0.5, 0.25, 0.5)])
    assert costs[0] == costs[1]
    trainer = make_trainer()
    trainer.step(x, y, 0.5)
    first = trainer._kl_weight_cache[1]
    trainer.step(x, y, 0.5)
    assert trainer._kl_weight_cache[1] is first


def test_reseed_restarts_the_weight_noise(data):
    x, y = next(iter(data[0]))
    costs = []
    for seed in (11, 11, 12):  # the same start each time; the noise follows the seed
        trainer = make_trainer()
        trainer.prepare(x)
        trainer.reseed(seed)
        costs.append(trainer.step(x, y, 0.1)[0].asscalar())
    assert costs[0] == costs[1] != costs[2]
    with pytest.raises(RuntimeError, match="seen data"):
        BBBTrainer(small_mlp(), BBBLoss(GaussianPrior(1.0))).reseed(1)


def test_extra_metadata_is_saved_and_returned(data, tmp_path):
    x, y = next(iter(data[0]))
    trainer = make_trainer()
    trainer.step(x, y, 0.1)
    trainer.save(str(tmp_path / "c.bbb"), extra={"steps": 3, "actions": [0, 1]})
    other = make_trainer(seed=1)
    other.step(x, y, 0.1)
    assert other.load(str(tmp_path / "c.bbb"))["extra"] == {"steps": 3, "actions": [0, 1]}
