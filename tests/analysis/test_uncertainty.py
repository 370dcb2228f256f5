"""Uncertainty measures against hand-computed values and brute force; MC prediction on blobs."""
import math

import mxnet as mx
import numpy as np
import pytest
from matplotlib.figure import Figure
from mxnet import gluon, nd

from gluon_bbb import BBBLoss, BBBTrainer, GaussianPrior, baselines, uncertainty
from gluon_bbb.data import ArrayLoader

import reference as ref
from synthetic import blobs as _blobs


def blobs(num_examples=256, seed=0):
    return _blobs(num_examples, num_features=6, seed=seed)


def small_mlp():
    net = gluon.nn.HybridSequential()
    net.add(gluon.nn.Dense(16, activation="relu"), gluon.nn.Dense(3))
    return net


@pytest.fixture(scope="module")
def trained():
    x, y = blobs()
    mx.random.seed(0)
    trainer = BBBTrainer(small_mlp(), BBBLoss(GaussianPrior(1.0)), seed=0,
                         optimizer_params={"learning_rate": 0.02})
    trainer.fit(ArrayLoader(x, y, 32, shuffle=True, seed=0), 4, progress=False)
    return trainer, x, y


# ------------------------------------------------------------------ entropy and MI
def test_entropy_matches_hand_values():
    probs = np.array([[0.5, 0.5, 0.0, 0.0], [1.0, 0.0, 0.0, 0.0], [0.25] * 4, [0.7, 0.2, 0.1, 0.0]])
    expected = [math.log(2), 0.0, math.log(4),
                -(0.7 * math.log(0.7) + 0.2 * math.log(0.2) + 0.1 * math.log(0.1))]
    np.testing.assert_allclose(uncertainty.entropy(probs), expected, rtol=1e-12)


def test_mutual_information_matches_hand_values():
    # (S=2, N=3, C=2): total disagreement, total agreement, partial disagreement
    samples = np.array([[[1.0, 0.0], [0.5, 0.5], [0.8, 0.2]],
                        [[0.0, 1.0], [0.5, 0.5], [0.4, 0.6]]])
    h = lambda p: -sum(v * math.log(v) for v in p if v > 0)  # noqa: E731
    expected_mi = [math.log(2), 0.0, h([0.6, 0.4]) - (h([0.8, 0.2]) + h([0.4, 0.6])) / 2]
    np.testing.assert_allclose(uncertainty.mutual_information(samples), expected_mi, rtol=1e-12, atol=1e-15)
    prediction = uncertainty.Prediction(samples, labels=[0, 1, 0])
    np.testing.assert_allclose(prediction.entropy, [math.log(2), math.log(2), h([0.6, 0.4])], rtol=1e-12)
    expected_entropy = [0.0, math.log(2), (h([0.8, 0.2]) + h([0.4, 0.6])) / 2]
    np.testing.assert_allclose(prediction.expected_entropy, expected_entropy, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(prediction.mutual_information, expected_mi, rtol=1e-12, atol=1e-15)
    np.testing.assert_array_equal(prediction.predictions, [0, 0, 0])
    np.testing.assert_allclose(prediction.confidence, [0.5, 0.5, 0.6])
    assert prediction.error == pytest.approx(1 / 3)


def test_prediction_rejects_bad_shapes():
    with pytest.raises(ValueError, match=r"\(S, N, C\)"):
        uncertainty.Prediction(np.ones((3, 2)))
    with pytest.raises(ValueError, match="labels"):
        uncertainty.Prediction(np.full((1, 3, 2), 0.5), labels=[0, 1])
    with pytest.raises(ValueError, match="labels"):
        uncertainty.Prediction(np.full((1, 3, 2), 0.5)).error


# ------------------------------------------------------------------ calibration
def test_ece_and_reliability_diagram_match_hand_computation():
    probs = np.array([[0.95, 0.05], [0.15, 0.85], [0.7, 0.3], [0.45, 0.55], [0.35, 0.65]])
    labels = np.array([0, 0, 0, 1, 0])
    # bins of width 0.2: (0.8, 1] holds .95 (right) and .85 (wrong): |0.5 - 0.9| * 2/5 = 0.16
    # (0.6, 0.8] holds .7 (right) and .65 (wrong): |0.5 - 0.675| * 2/5 = 0.07
    # (0.4, 0.6] holds .55 (right): |1 - 0.55| * 1/5 = 0.09
    diagram = uncertainty.reliability_diagram(probs, labels, num_bins=5)
    np.testing.assert_array_equal(diagram.counts, [0, 0, 1, 2, 2])
    np.testing.assert_allclose(diagram.accuracy[2:], [1.0, 0.5, 0.5])
    np.testing.assert_allclose(diagram.confidence[2:], [0.55, 0.675, 0.9])
    assert np.isnan(diagram.accuracy[:2]).all()
    assert diagram.ece == pytest.approx(0.32, abs=1e-12)
    assert uncertainty.expected_calibration_error(probs, labels, num_bins=5) == pytest.approx(0.32, abs=1e-12)


def test_ece_is_zero_for_a_perfectly_calibrated_bin_and_one_for_confident_mistakes():
    probs = np.array([[0.75, 0.25]] * 4)
    assert uncertainty.expected_calibration_error(probs, [0, 0, 0, 1]) == pytest.approx(0.0, abs=1e-12)
    assert uncertainty.expected_calibration_error(np.array([[1.0, 0.0]] * 3), [1, 1, 1]) == pytest.approx(1.0)


def test_calibration_rejects_bad_labels():
    with pytest.raises(ValueError, match="labels"):
        uncertainty.expected_calibration_error(np.full((2, 2), 0.5), [0, 2])
    with pytest.raises(ValueError, match="labels"):
        uncertainty.expected_calibration_error(np.full((2, 2), 0.5), [0])
    with pytest.raises(ValueError, match="num_bins"):
        uncertainty.expected_calibration_error(np.full((2, 2), 0.5), [0, 1], num_bins=0)


# ------------------------------------------------------------------ OOD detection
def brute_force_auroc(scores_in, scores_out):
    wins = sum((o > i) + 0.5 * (o == i) for o in scores_out for i in scores_in)
    return wins / (len(scores_in) * len(scores_out))


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_auroc_matches_brute_force_pair_count_with_ties(seed):
    rng = np.random.default_rng(seed)
    scores_in = rng.integers(0, 6, size=37).astype(float)  # many ties
    scores_out = rng.integers(2, 9, size=23).astype(float)
    assert uncertainty.auroc(scores_in, scores_out) == pytest.approx(
        brute_force_auroc(scores_in, scores_out), abs=1e-12)
    continuous_in, continuous_out = rng.normal(size=50), rng.normal(0.5, size=40)
    assert uncertainty.auroc(continuous_in, continuous_out) == pytest.approx(
        brute_force_auroc(continuous_in, continuous_out), abs=1e-12)


def test_auroc_extremes():
    assert uncertainty.auroc([0.1, 0.2], [0.3, 0.4, 0.5]) == 1.0
    assert uncertainty.auroc([0.3, 0.4, 0.5], [0.1, 0.2]) == 0.0
    assert uncertainty.auroc([1.0, 1.0], [1.0]) == 0.5
    with pytest.raises(ValueError, match="scores_out"):
        uncertainty.auroc([1.0], [])
    with pytest.raises(ValueError, match="NaN"):
        uncertainty.auroc([1.0, np.nan], [2.0])


# ------------------------------------------------------------------ ranking and refusing
def test_most_uncertain_orders_by_score_then_index():
    np.testing.assert_array_equal(uncertainty.most_uncertain([0.1, 0.5, 0.5, 0.9, 0.0], num=3), [3, 1, 2])
    assert len(uncertainty.most_uncertain([0.3, 0.2], num=10)) == 2
    with pytest.raises(ValueError, match="num"):
        uncertainty.most_uncertain([0.3], num=0)


def test_refuse_to_classify_on_a_hand_example():
    # confidences .9 (right), .6 (wrong), .8 (wrong), .55 (right)
    probs = np.array([[0.9, 0.1], [0.4, 0.6], [0.8, 0.2], [0.45, 0.55]])
    labels = np.array([0, 0, 1, 1])
    curve = uncertainty.refuse_to_classify(probs, labels, [0.0, 0.7, 0.85, 0.95])
    np.testing.assert_allclose(curve.coverage, [1.0, 0.5, 0.25, 0.0])
    np.testing.assert_allclose(curve.error[:3], [0.5, 0.5, 0.0])
    assert np.isnan(curve.error[3])
    with pytest.raises(ValueError, match="thresholds"):
        uncertainty.refuse_to_classify(probs, labels, [1.5])


# ------------------------------------------------------------------ networks
def test_mc_predict_matches_numpy_forward_passes_of_the_same_weight_samples(trained):
    trainer, x, y = trained
    state = trainer.noise.get_state()
    mx.random.seed(7, ctx=trainer.ctx)  # the fused path draws from MXNet's generator
    prediction = uncertainty.mc_predict(trainer, ArrayLoader(x, y, 100), num_samples=3)
    assert prediction.sample_probs.shape == (3, len(x), 3)
    np.testing.assert_array_equal(prediction.labels, y)
    # Replay the three draws of the same stream, then a float64 forward pass of each.
    trainer.noise.set_state(state)
    mx.random.seed(7, ctx=trainer.ctx)
    for sample in range(3):
        trainer.draw_network()
        weights = [t.data().asnumpy().astype(np.float64) for t in trainer.posterior.targets]
        logits = ref.mlp_forward(x.astype(np.float64), list(zip(weights[0::2], weights[1::2])))
        probs = np.exp(logits - logits.max(1, keepdims=True))
        probs /= probs.sum(1, keepdims=True)
        np.testing.assert_allclose(prediction.sample_probs[sample], probs, rtol=1e-4, atol=1e-6)
    trainer.set_mean()
    np.testing.assert_allclose(prediction.mean_probs, prediction.sample_probs.mean(axis=0))
    assert prediction.mutual_information.max() > 0  # the sampled networks disagree somewhere
    for target, mu in zip(trainer.posterior.targets, trainer.posterior.mus):  # means restored
        np.testing.assert_array_equal(target.data().asnumpy(), mu.data().asnumpy())
    assert prediction.error < 0.1


@pytest.mark.parametrize("sampling", ["weights", "local"])
def test_mc_predict_and_the_trainer_share_one_monte_carlo_path(trained, sampling):
    """uncertainty.mc_predict and BBBTrainer.predict_proba draw the same networks from the
    same stream (gluon_bbb.predictive), for both sampling methods."""
    trainer, x, y = trained
    state = trainer.noise.get_state()
    mx.random.seed(11, ctx=trainer.ctx)
    ours = uncertainty.mc_predict(trainer, x, num_samples=4, labels=y, sampling=sampling)
    trainer.noise.set_state(state)
    mx.random.seed(11, ctx=trainer.ctx)
    theirs = trainer.predict_proba(mx.nd.array(x), num_samples=4, sampling=sampling).asnumpy()
    np.testing.assert_allclose(ours.mean_probs, theirs, rtol=1e-5, atol=1e-7)


def test_mc_predict_on_arrays_with_labels_and_batches(trained):
    trainer, x, y = trained
    prediction = uncertainty.mc_predict(trainer, x, num_samples=2, labels=y, batch_size=50)
    assert prediction.sample_probs.shape == (2, len(x), 3)
    np.testing.assert_array_equal(prediction.labels, y)
    with pytest.raises(ValueError, match="num_samples"):
        uncertainty.mc_predict(trainer, x, num_samples=0)


def test_deterministic_baseline_trains_and_predicts_softmax():
    x, y = blobs(seed=1)
    mx.random.seed(1)
    net = small_mlp()
    history = baselines.train_deterministic(net, ArrayLoader(x, y, 32, shuffle=True, seed=0), 3,
                                            optimizer="adam", optimizer_params={"learning_rate": 0.02},
                                            progress=False)
    assert history[-1]["loss"] < history[0]["loss"]
    prediction = uncertainty.deterministic_predict(net, x, labels=y)
    logits = net(nd.array(x)).asnumpy().astype(np.float64)
    expected = np.exp(logits - logits.max(1, keepdims=True))
    expected /= expected.sum(1, keepdims=True)
    np.testing.assert_allclose(prediction.sample_probs[0], expected, rtol=1e-5, atol=1e-7)
    np.testing.assert_array_equal(prediction.mutual_information, 0.0)
    assert prediction.error < 0.05


def test_plots_draw_the_numbers_they_are_given():
    """Each uncertainty plot draws its data: the reliability bars are the per-bin accuracies,
    the histograms the normalised counts, the refusal curve the coverage and the error (%)."""
    probs = np.array([[0.9, 0.1], [0.3, 0.7], [0.6, 0.4]])
    labels = np.array([0, 0, 0])
    diagram = uncertainty.reliability_diagram(probs, labels)
    figure = uncertainty.plot_reliability_diagrams({"a": diagram, "b": diagram})
    assert isinstance(figure, Figure) and len(figure.axes) == 2
    heights = [patch.get_height() for patch in figure.axes[0].patches]
    np.testing.assert_allclose(heights, np.nan_to_num(diagram.accuracy))
    assert figure.axes[1].get_title() == f"b: ECE {diagram.ece:.4f}"

    scores = {"in": [0.1, 0.2, 0.2, 0.9], "out": [0.5, 0.9]}
    figure = uncertainty.plot_score_histograms(scores, num_bins=3, log_density=False)
    drawn = figure.axes[0].patches  # one step outline per data set
    assert [p.get_label() for p in drawn] == ["in", "out"]
    for patch, values in zip(drawn, scores.values()):
        expected, _ = np.histogram(values, bins=np.linspace(0, 0.9, 4), density=True)
        outline = patch.get_xy()[:, 1]  # the step heights, each bin's twice
        np.testing.assert_allclose(sorted(set(np.round(outline, 9)) - {0.0}),
                                   sorted(set(np.round(expected, 9)) - {0.0}))

    curve = uncertainty.refuse_to_classify(probs, labels, [0, 0.5, 0.8])
    figure = uncertainty.plot_refusal_curves({"a": curve})
    line, = figure.axes[0].lines
    np.testing.assert_allclose(line.get_xdata(), curve.coverage)
    np.testing.assert_allclose(line.get_ydata(), 100 * np.asarray(curve.error))
    assert figure.axes[0].xaxis_inverted()


# ---------------------------------------------------------------- Gaussian regression
def _mixture(num_samples=5, num_points=7, seed=0):
    rng = np.random.default_rng(seed)
    means = rng.normal(size=(num_samples, num_points))
    sigmas = rng.uniform(0.2, 1.5, size=(num_samples, num_points))
    targets = rng.normal(scale=1.5, size=num_points)
    return uncertainty.GaussianMixturePrediction(means, sigmas, targets)


def _mixture_cdf(prediction, y):
    """mean_s Phi((y - m_s) / sigma_s) by math.erf, one value at a time, in float64."""
    return np.array([np.mean([0.5 * (1 + math.erf((y[n] - m) / (s * math.sqrt(2))))
                              for m, s in zip(prediction.means[:, n], prediction.sigmas[:, n])])
                     for n in range(len(y))])


def test_normal_cdf_matches_math_erf_on_both_namespaces():
    from gluon_bbb._math import normal_cdf
    z = np.array([-6.0, -1.5, 0.0, 0.3, 2.0, 8.0])
    expected = [0.5 * (1 + math.erf(v / math.sqrt(2))) for v in z]
    np.testing.assert_allclose(normal_cdf(nd, nd.array(z, dtype="float64")).asnumpy(), expected,
                               rtol=1e-14, atol=1e-300)
    symbol = normal_cdf(mx.sym, mx.sym.var("z"))
    value = symbol.eval(ctx=mx.cpu(), z=nd.array(z, dtype="float64"))[0].asnumpy()
    np.testing.assert_allclose(value, expected, rtol=1e-14)


def test_mixture_moments_follow_the_law_of_total_variance_and_match_draws():
    prediction = _mixture()
    means, sigmas = prediction.means, prediction.sigmas
    np.testing.assert_allclose(prediction.mean, means.mean(axis=0), rtol=1e-15)
    np.testing.assert_allclose(prediction.aleatoric_variance, (sigmas ** 2).mean(axis=0), rtol=1e-14)
    np.testing.assert_allclose(prediction.epistemic_variance, means.var(axis=0), rtol=1e-12)
    # against draws from the mixture: pick a component, then add its noise (4e5 draws per point)
    rng = np.random.default_rng(1)
    draws = 400_000
    component = rng.integers(0, means.shape[0], size=(draws, means.shape[1]))
    columns = np.arange(means.shape[1])
    y = means[component, columns] + sigmas[component, columns] * rng.standard_normal(component.shape)
    # standard errors: sd / sqrt(n) for the mean, about sd^2 sqrt(2 / n) for the variance
    np.testing.assert_allclose(y.mean(axis=0), prediction.mean,
                               atol=5 * np.sqrt(prediction.variance / draws).max())
    # (a mixture's kurtosis is at most a few times a Gaussian's: 5 sd with sqrt(6 / n))
    np.testing.assert_allclose(y.var(axis=0), prediction.variance, rtol=5 * np.sqrt(6.0 / draws))


def test_mixture_cdf_log_likelihood_and_rmse_match_float64_references():
    prediction = _mixture()
    y = prediction.targets
    np.testing.assert_allclose(prediction.cdf(), _mixture_cdf(prediction, y), rtol=1e-12, atol=1e-15)
    densities = np.exp(-0.5 * ((y - prediction.means) / prediction.sigmas) ** 2) / (
        prediction.sigmas * math.sqrt(2 * math.pi))
    np.testing.assert_allclose(prediction.log_likelihood(), np.log(densities.mean(axis=0)), rtol=1e-12)
    assert prediction.nll() == pytest.approx(-np.log(densities.mean(axis=0)).mean(), rel=1e-12)
    assert prediction.rmse() == pytest.approx(np.sqrt(np.mean((y - prediction.means.mean(0)) ** 2)))
    # far in the tail the log-sum-exp keeps a finite log-likelihood where the density underflows
    far = prediction.log_likelihood(np.full(7, 60.0))
    assert np.all(np.isfinite(far)) and np.all(far < -700)


def test_a_single_gaussian_has_the_normal_quantiles_and_no_epistemic_part():
    one = uncertainty.GaussianMixturePrediction([[1.0, -2.0]], [[2.0, 0.5]])
    np.testing.assert_array_equal(one.epistemic_variance, 0.0)
    lower, upper = one.interval(0.9)
    z = 1.6448536269514722  # Phi^-1(0.95)
    np.testing.assert_allclose(lower, [1.0 - 2.0 * z, -2.0 - 0.5 * z], rtol=1e-12)
    np.testing.assert_allclose(upper, [1.0 + 2.0 * z, -2.0 + 0.5 * z], rtol=1e-12)
    np.testing.assert_allclose(one.quantile(0.5), [1.0, -2.0], atol=1e-12)


def test_mixture_quantiles_invert_its_cdf_and_bound_the_covered_targets():
    prediction = _mixture(num_samples=4, num_points=50, seed=2)
    for q in (0.01, 0.25, 0.5, 0.9, 0.999):
        np.testing.assert_allclose(_mixture_cdf(prediction, prediction.quantile(q)), q, atol=1e-12)
    levels = (0.5, 0.8, 0.95)
    by_hand = []
    for level in levels:
        lower, upper = prediction.interval(level)
        by_hand.append(np.mean((prediction.targets >= lower) & (prediction.targets <= upper)))
    np.testing.assert_allclose(prediction.coverage(levels), by_hand)


def test_quantiles_of_far_apart_modes_flat_stretches_and_far_tails():
    """Where Newton's method needs its safeguard: modes thousands of sigmas apart (the start
    lies in the gap between them, where the density underflows), a stretch where F is flat at q
    (q = 1/3 of three components), tails at 1e-9, and a component of sigma 1e-4. Each quantile
    x has F(x) = q by the math.erf reference, to F's own resolution at x: a float64 step of x
    changes F by p(x) times that step."""
    means = np.array([[-50.0, 0.0, 3.0], [50.0, 1e-3, 3.0], [51.0, 0.0, 3.0]])
    sigmas = np.array([[0.01, 1e-4, 1.0], [0.01, 1e-4, 2.0], [0.02, 1e-4, 0.5]])
    prediction = uncertainty.GaussianMixturePrediction(means, sigmas)
    for q in (1e-9, 1e-6, 0.2, 1 / 3, 0.5, 0.9, 1 - 1e-6):
        x = prediction.quantile(q)
        density = (np.exp(-0.5 * ((x - means) / sigmas) ** 2) / (sigmas * math.sqrt(2 * math.pi))).mean(0)
        resolution = 1e-15 + 8 * density * np.spacing(np.abs(x))
        assert np.all(np.abs(_mixture_cdf(prediction, x) - q) <= resolution), q
    # the flat stretch: any x between the modes is a 1/3-quantile; it must lie there
    flat = prediction.quantile(1 / 3)[0]
    assert -49.9 < flat < 49.9


def test_an_interval_takes_a_few_evaluations_of_the_cdf(monkeypatch):
    """Both ends in one evaluation of F per step, and far fewer steps than bisection's 60 (120
    evaluations for an interval before)."""
    prediction = _mixture(num_samples=100, num_points=300, seed=3)
    calls = []
    cdf_at = uncertainty.GaussianMixturePrediction._cdf_at
    monkeypatch.setattr(uncertainty.GaussianMixturePrediction, "_cdf_at",
                        lambda self, x: calls.append(x.shape) or cdf_at(self, x))
    for level in (0.5, 0.9, 0.99):
        calls.clear()
        lower, upper = prediction.interval(level)
        assert set(calls) == {(2, 300)} and len(calls) <= 15, (level, len(calls))
        np.testing.assert_allclose(_mixture_cdf(prediction, lower), (1 - level) / 2, atol=1e-14)
        np.testing.assert_allclose(_mixture_cdf(prediction, upper), (1 + level) / 2, atol=1e-14)


def test_interval_coverage_on_a_hand_example_and_calibrated_draws():
    # level p covers F(y) in [(1 - p)/2, (1 + p)/2]: 0.4 -> [0.3, 0.7] holds 0.5 and 0.3 (ends
    # included); 0.5 -> [0.25, 0.75] adds 0.74; 0.95 -> [0.025, 0.975] adds 0.04; 0.99 all five
    cdf = [0.5, 0.3, 0.04, 0.99, 0.74]
    np.testing.assert_allclose(uncertainty.interval_coverage(cdf, [0.4, 0.5, 0.95, 0.99]),
                               [2 / 5, 3 / 5, 4 / 5, 5 / 5])
    # targets drawn from their own predictive distribution: coverage p +- 5 standard errors
    rng = np.random.default_rng(0)
    prediction = _mixture(num_samples=3, num_points=20000, seed=3)
    pick = rng.integers(0, 3, size=20000)
    columns = np.arange(20000)
    y = prediction.means[pick, columns] + prediction.sigmas[pick, columns] * rng.standard_normal(20000)
    levels = np.array([0.5, 0.8, 0.9, 0.95])
    np.testing.assert_allclose(prediction.coverage(levels, y), levels,
                               atol=5 * np.sqrt(0.25 / 20000))
    for bad in ([1.2], [[0.5]]):
        with pytest.raises(ValueError, match="cdf_values"):
            uncertainty.interval_coverage(bad)
    with pytest.raises(ValueError, match="levels"):
        uncertainty.interval_coverage([0.5], [1.0])


def test_block_bootstrap_se_against_its_limits():
    """Where N is a multiple of the block, the bootstrap's standard error tends to the standard
    deviation of all N - b + 1 block means over sqrt(N / b); with one-value blocks, to
    sqrt(var / N). 20,000 draws: relative Monte Carlo error about 0.5%; tolerance 3%."""
    rng = np.random.default_rng(5)
    values = np.repeat(np.arange(15) % 2, rng.integers(8, 20, size=15))[:99].astype(float)  # runs of 8-19
    block_means = np.array([values[s:s + 11].mean() for s in range(99 - 11 + 1)])
    expected = block_means.std() / np.sqrt(99 / 11)
    assert uncertainty.block_bootstrap_se(values, 11, num_draws=20000) == pytest.approx(expected, rel=0.03)
    assert uncertainty.block_bootstrap_se(values, 1, num_draws=20000) == pytest.approx(
        values.std() / np.sqrt(99), rel=0.03)
    assert expected > 2 * values.std() / np.sqrt(99)  # the runs make the mean far less sure
    assert uncertainty.block_bootstrap_se(values, 11, seed=1) == uncertainty.block_bootstrap_se(values, 11, seed=1)


def test_block_bootstrap_se_of_an_autoregressive_series_is_its_long_run_one():
    """AR(1) with phi = 0.6: the standard error of the mean of N values is about
    sd * sqrt((1 + phi) / (1 - phi) / N), twice the independent-values one. Averaged over 10
    series of 2,000 with blocks of 40 (the estimate's relative sd per series about 8%, its bias
    about -2%); tolerance 10%."""
    rng = np.random.default_rng(6)
    phi, n = 0.6, 2000
    ratios = []
    for _ in range(10):
        series = np.zeros(n + 100)
        for t in range(1, len(series)):
            series[t] = phi * series[t - 1] + rng.standard_normal()
        series = series[100:]
        long_run = np.sqrt(1 / (1 - phi ** 2) * (1 + phi) / (1 - phi) / n)
        ratios.append(uncertainty.block_bootstrap_se(series, 40, num_draws=1000, seed=len(ratios)) / long_run)
    assert np.mean(ratios) == pytest.approx(1.0, abs=0.1)


def test_block_bootstrap_se_rejects_bad_arguments():
    for block, draws in ((0, 10), (5, 10), (2, 1)):
        with pytest.raises(ValueError):
            uncertainty.block_bootstrap_se([0.0, 1.0, 1.0, 0.0], block, num_draws=draws)
    with pytest.raises(ValueError, match="values"):
        uncertainty.block_bootstrap_se([0.0, np.nan], 1)


def test_mixture_refuses_bad_shapes_and_scales_and_asks_for_targets():
    with pytest.raises(ValueError, match="shape"):
        uncertainty.GaussianMixturePrediction(np.zeros((2, 3)), np.ones((2, 2)))
    with pytest.raises(ValueError, match="positive"):
        uncertainty.GaussianMixturePrediction(np.zeros((2, 3)), np.zeros((2, 3)))
    with pytest.raises(ValueError, match="targets of shape"):
        uncertainty.GaussianMixturePrediction(np.zeros((2, 3)), np.ones((2, 3)), np.zeros(2))
    with pytest.raises(ValueError, match="needs targets"):
        uncertainty.GaussianMixturePrediction(np.zeros((2, 3)), np.ones((2, 3))).nll()
    with pytest.raises(ValueError, match="level"):
        uncertainty.GaussianMixturePrediction(np.zeros((1, 1)), np.ones((1, 1))).interval(1.0)
