"""Signal-to-noise pruning (gluon_bbb.analysis.pruning) of a small trained BBB network, against NumPy."""
import math

import mxnet as mx
import numpy as np
import pytest
from mxnet import gluon, nd

from gluon_bbb import BBBLoss, BBBTrainer, ScaleMixturePrior, pruning
from gluon_bbb.data import ArrayLoader
from gluon_bbb.posterior import trainable_parameters

from synthetic import blobs as _blobs
from reference import mlp_forward, softplus

NUM_FEATURES, HIDDEN, NUM_CLASSES = 8, 16, 3
NUM_WEIGHTS = NUM_FEATURES * HIDDEN + HIDDEN * NUM_CLASSES  # biases are not counted
NUM_BIASES = HIDDEN + NUM_CLASSES


def blobs(num_examples=512, seed=0):
    return _blobs(num_examples, NUM_FEATURES, NUM_CLASSES, seed=seed, scale=1.5)


def small_mlp():
    net = gluon.nn.HybridSequential()
    net.add(gluon.nn.Dense(HIDDEN, activation="relu"), gluon.nn.Dense(NUM_CLASSES))
    return net


@pytest.fixture(scope="module")
def trained():
    """A trainer with varied sigmas (rho ~ U(-6, -1)), so SNR and |mu| orders differ."""
    x, y = blobs()
    mx.random.seed(0)
    loss = BBBLoss(ScaleMixturePrior(0.5, 1.0, math.exp(-6)))
    trainer = BBBTrainer(small_mlp(), loss, optimizer_params={"learning_rate": 0.01},
                         rho_init=(-6.0, -1.0), seed=0)
    trainer.fit(ArrayLoader(x[:384], y[:384], 32, shuffle=True, seed=0), 3, progress=False)
    return trainer, ArrayLoader(x[384:], y[384:], 64), (x[384:], y[384:])


def numpy_posterior(trainer):
    """Per tensor (mu, sigma) in float64, with sigma = log(1 + exp(rho)) from the raw rho."""
    return [(mu.data().asnumpy().astype(np.float64), softplus(rho.data().asnumpy().astype(np.float64)))
            for mu, rho in zip(trainer.posterior.mus, trainer.posterior.rhos)]


def numpy_weights(tensors):
    return np.concatenate([t.ravel() for t in tensors if t.ndim == 2])


def net_values(net):
    return [p.data().asnumpy() for _, p in trainable_parameters(net)]


def test_signal_to_noise_is_abs_mu_over_softplus_rho(trained):
    trainer, _, _ = trained
    tensors = numpy_posterior(trainer)
    snr = pruning.signal_to_noise(trainer)
    expected = numpy_weights([np.abs(mu) / sigma for mu, sigma in tensors])
    assert snr.shape == (NUM_WEIGHTS,)
    np.testing.assert_allclose(snr, expected, rtol=1e-5)
    with_bias = pruning.signal_to_noise(trainer, include_bias=True)
    assert with_bias.shape == (NUM_WEIGHTS + NUM_BIASES,)
    np.testing.assert_allclose(with_bias, np.concatenate([(np.abs(m) / s).ravel() for m, s in tensors]),
                               rtol=1e-5)
    order_snr, order_mu = np.argsort(snr), np.argsort(np.abs(numpy_weights([m for m, _ in tensors])))
    assert not np.array_equal(order_snr, order_mu)  # the fixture makes the two methods differ


@pytest.mark.parametrize("method", ["snr", "naive"])
@pytest.mark.parametrize("fraction", [0.25, 0.5, 0.9, 0.98])
def test_prune_zeroes_exactly_the_lowest_scores(trained, method, fraction):
    trainer, _, _ = trained
    tensors = numpy_posterior(trainer)
    mu_before = [m.copy() for m, _ in tensors]
    mu = numpy_weights([m for m, _ in tensors])
    scores = np.abs(mu) / numpy_weights([s for _, s in tensors]) if method == "snr" else np.abs(mu)
    num_removed = int(np.floor(fraction * NUM_WEIGHTS + 0.5))
    removed = np.zeros(NUM_WEIGHTS, dtype=bool)
    removed[np.argsort(scores, kind="stable")[:num_removed]] = True

    pruned = pruning.prune(trainer, fraction, method=method)
    assert pruned.net is trainer.net
    assert (pruned.num_weights, pruned.num_nonzero) == (NUM_WEIGHTS, NUM_WEIGHTS - num_removed)
    values = net_values(trainer.net)
    weights = numpy_weights(values)
    np.testing.assert_array_equal(weights == 0, removed)
    np.testing.assert_array_equal(weights[~removed], mu[~removed].astype(np.float32))
    for value, before in zip(values, mu_before):
        if value.ndim == 1:  # biases are never pruned
            np.testing.assert_array_equal(value, before.astype(np.float32))
    # the posterior itself is untouched; set_mean() restores the mean network
    for (m, _), before in zip(numpy_posterior(trainer), mu_before):
        np.testing.assert_array_equal(m, before)
    trainer.set_mean()
    np.testing.assert_array_equal(numpy_weights(net_values(trainer.net)), mu.astype(np.float32))


def test_include_bias_prunes_biases_too(trained):
    trainer, _, _ = trained
    pruned = pruning.prune(trainer, 0.5, include_bias=True)
    total = NUM_WEIGHTS + NUM_BIASES
    assert pruned.num_weights == total
    assert pruned.num_nonzero == total - int(np.floor(0.5 * total + 0.5))
    snr = pruning.signal_to_noise(trainer, include_bias=True)
    values = np.concatenate([v.ravel() for v in net_values(trainer.net)])
    removed = np.argsort(snr)[: total - pruned.num_nonzero]
    np.testing.assert_array_equal(values == 0, np.isin(np.arange(total), removed))
    trainer.set_mean()


@pytest.mark.parametrize("scores, fraction, expected_removed", [
    ([1.0, 1.0, 1.0, 1.0, 2.0, 0.0], 0.5, [0, 1, 5]),   # ties at the threshold: first in order
    ([3.0] * 8, 0.25, [0, 1]),                          # everything tied
    ([0.5, np.nan, 0.1, 0.2], 0.75, [0, 2, 3]),         # NaN counts as the highest score
    ([5.0, 4.0, 3.0, 2.0], 0.375, [2, 3]),              # 1.5 weights round half up to 2
    ([5.0, 4.0, 3.0, 2.0], 0.0, []),
])
def test_pruning_mask_removes_an_exact_count_whatever_the_ties(scores, fraction, expected_removed):
    keep = pruning.pruning_mask(np.array(scores), fraction)
    assert sorted(np.flatnonzero(~keep).tolist()) == expected_removed


def test_pruning_table_matches_a_numpy_evaluation(trained):
    trainer, test, (x_test, y_test) = trained
    mu_before = [m.copy() for m, _ in numpy_posterior(trainer)]
    mean_error = trainer.evaluate(test)
    fractions = (0.0, 0.5, 0.9)
    table = pruning.pruning_table(trainer, test, fractions=fractions)
    assert [(row["method"], row["fraction"]) for row in table] == [
        (m, f) for m in ("snr", "naive") for f in fractions]
    tensors = numpy_posterior(trainer)
    mu = numpy_weights([m for m, _ in tensors])
    for row in table:
        assert row["num_weights"] == NUM_WEIGHTS
        num_removed = int(np.floor(row["fraction"] * NUM_WEIGHTS + 0.5))
        assert row["num_nonzero"] == NUM_WEIGHTS - num_removed
        scores = np.abs(mu) / numpy_weights([s for _, s in tensors]) if row["method"] == "snr" else np.abs(mu)
        keep = np.ones(NUM_WEIGHTS, dtype=bool)
        keep[np.argsort(scores)[:num_removed]] = False
        masks = iter(np.split(keep, [NUM_FEATURES * HIDDEN]))
        values = [np.where(next(masks).reshape(m.shape), m, 0) if m.ndim == 2 else m for m, _ in tensors]
        logits = mlp_forward(x_test.astype(np.float64), list(zip(values[0::2], values[1::2])))
        assert row["test_error"] == pytest.approx(np.mean(logits.argmax(axis=1) != y_test))
        if row["fraction"] == 0:
            assert row["test_error"] == mean_error
    # the posterior is untouched and the trainer's network holds the mean again
    for (m, _), before in zip(tensors, mu_before):
        np.testing.assert_array_equal(m, before)
    np.testing.assert_array_equal(numpy_weights(net_values(trainer.net)), mu.astype(np.float32))
    markdown = table.to_markdown().splitlines()
    assert len(markdown) == 2 + len(table)
    assert markdown[0].startswith("| Proportion removed |")
    assert "| 90% | naive |" in markdown[-1]


def test_save_and_reload_keep_the_zeros_and_the_predictions(trained, tmp_path):
    trainer, test, _ = trained
    pruned = pruning.prune(trainer, 0.75)
    x, _ = next(iter(test))
    expected = pruned.predict_proba(x).asnumpy()
    error = pruned.evaluate(test)
    path = tmp_path / "pruned.params"
    pruned.save(path)
    trainer.set_mean()  # the trainer's network no longer holds the pruned weights
    loaded = pruning.load_pruned(path, small_mlp())
    assert loaded.net is not trainer.net
    assert (loaded.num_nonzero, loaded.num_weights) == (pruned.num_nonzero, pruned.num_weights)
    assert repr(pruned) == (f"PrunedNetwork(method='snr', fraction=0.75, num_nonzero="
                            f"{pruned.num_nonzero}, num_weights={pruned.num_weights}, 75.0% zero)")
    assert repr(loaded) == (f"PrunedNetwork(num_nonzero={pruned.num_nonzero}, "
                            f"num_weights={pruned.num_weights}, 75.0% zero)")  # no None
    for a, b in zip(net_values(loaded.net), [v.asnumpy() for v in pruned.arrays]):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_allclose(loaded.predict_proba(x).asnumpy(), expected, rtol=1e-6, atol=1e-7)
    assert loaded.evaluate(test) == error
    plain = small_mlp()  # a plain Gluon parameter file
    plain.load_parameters(str(path))
    np.testing.assert_allclose(nd.softmax(plain(x)).asnumpy(), expected, rtol=1e-6, atol=1e-7)


def test_sample_weights_are_drawn_from_the_posterior(trained):
    trainer, _, _ = trained
    samples = pruning.sample_weights(trainer, 4000, seed=1)
    assert samples.shape == (4000, NUM_WEIGHTS)
    mu, sigma = pruning.posterior_parameters(trainer)
    z = (samples.mean(axis=0) - mu) / (sigma / math.sqrt(4000))
    assert np.all(np.abs(z) < 5)
    np.testing.assert_allclose(samples.std(axis=0), sigma, rtol=0.1)
    np.testing.assert_array_equal(samples[:3], pruning.sample_weights(trainer, 4000, seed=1)[:3])


@pytest.mark.parametrize("call, message", [
    (lambda t: pruning.prune(t, 1.0), "fraction must be a number in \\[0, 1\\)"),
    (lambda t: pruning.prune(t, -0.1), "fraction"),
    (lambda t: pruning.prune(t, float("nan")), "fraction"),
    (lambda t: pruning.prune(t, True), "fraction"),
    (lambda t: pruning.prune(t, "0.5"), "fraction"),
    (lambda t: pruning.prune(t, 0.5, method="random"), "method must be one of"),
    (lambda t: pruning.pruning_table(t, [], fractions=(0.0, 1.0)), "fractions"),
    (lambda t: pruning.pruning_table(t, [], fractions=()), "fractions must not be empty"),
    (lambda t: pruning.pruning_table(t, [], methods="snr"), "methods must be a sequence"),
    (lambda t: pruning.sample_weights(t, 0), "num_samples"),
    (lambda t: pruning.pruning_mask(np.zeros((2, 2)), 0.5), "one-dimensional"),
])
def test_bad_arguments_are_named(trained, call, message):
    with pytest.raises(ValueError, match=message):
        call(trained[0])


def test_an_untrained_trainer_is_refused():
    trainer = BBBTrainer(small_mlp(), BBBLoss(ScaleMixturePrior(0.5, 1.0, math.exp(-6))))
    with pytest.raises(ValueError, match="no posterior yet"):
        pruning.signal_to_noise(trainer)
    with pytest.raises(TypeError, match="net must be a gluon Block"):
        pruning.load_pruned("x.params", object())
