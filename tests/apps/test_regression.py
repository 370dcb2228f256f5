"""Toy regression (paper Fig. 5): data, learned-noise likelihood, predictive bands."""
import math

import mxnet as mx
import numpy as np
import pytest
from matplotlib.figure import Figure
from mxnet import autograd, nd

from gluon_bbb import BBBLoss, BBBTrainer, GaussianPrior, regression
from gluon_bbb.data import ArrayLoader
from gluon_bbb.models import mlp

import reference as ref

NORMAL_QUARTILE = 0.6744897501960817  # Phi^-1(0.75)


# ------------------------------------------------------------------ data
def test_toy_function_matches_hand_values():
    assert regression.toy_function(0.25) == pytest.approx(0.25 + 0.3 * 1.0 + 0.3 * 0.0, abs=1e-12)
    expected = 0.0 + 0.3 * math.sin(0.2 * math.pi) + 0.3 * math.sin(0.4 * math.pi) + 0.1
    assert regression.toy_function(0.0, 0.1) == pytest.approx(expected, abs=1e-12)
    np.testing.assert_allclose(regression.toy_function([0.5, 1.0]), [0.5, 1.0], atol=1e-12)


def test_make_toy_data_shapes_range_seed_and_noise():
    x, y = regression.make_toy_data(200, x_range=(0.0, 0.5), seed=3)
    assert x.shape == (200, 1) and y.shape == (200,) and x.dtype == y.dtype == np.float32
    assert x.min() >= 0.0 and x.max() <= 0.5
    again = regression.make_toy_data(200, x_range=(0.0, 0.5), seed=3)
    np.testing.assert_array_equal(x, again[0])
    np.testing.assert_array_equal(y, again[1])
    x0, y0 = regression.make_toy_data(50, noise_std=0.0, seed=1)
    np.testing.assert_allclose(y0, regression.toy_function(x0[:, 0]), atol=1e-6)
    # The same seed draws the same inputs, then e ~ N(0, noise_std^2) of the chosen std.
    x1, y1 = regression.make_toy_data(20000, noise_std=1e-4, seed=2)
    slope = 1 + 0.6 * np.pi * np.cos(2 * np.pi * x1[:, 0]) + 1.2 * np.pi * np.cos(4 * np.pi * x1[:, 0])
    noise = (y1 - regression.toy_function(x1[:, 0])) / slope  # first order in e
    keep = np.abs(slope) > 1  # away from the turning points, where float32 rounding dominates
    assert np.std(noise[keep]) == pytest.approx(1e-4, rel=0.1)
    with pytest.raises(ValueError, match="num_points"):
        regression.make_toy_data(0)
    with pytest.raises(ValueError, match="x_range"):
        regression.make_toy_data(5, x_range=(1.0, 0.0))
    with pytest.raises(ValueError, match="noise_std"):
        regression.make_toy_data(5, noise_std=-1.0)


# ------------------------------------------------------------------ learned-noise likelihood
def test_learned_noise_nll_matches_numpy_and_hybridizes():
    rng = np.random.default_rng(0)
    pred = rng.normal(size=(7, 2))
    label = rng.normal(size=7)
    sigma = ref.softplus(pred[:, 1])
    expected = -ref.log_normal(label - pred[:, 0], sigma).sum()
    loss = BBBLoss(GaussianPrior(1.0), likelihood="gaussian", noise_sigma=None)
    args = [nd.array(pred, dtype="float64"), nd.array(label, dtype="float64")]
    assert loss.negative_log_likelihood(nd, *args).asscalar() == pytest.approx(expected, rel=1e-12)
    loss.hybridize()
    zeros = [nd.zeros(3, dtype="float64")]
    _, nll, _ = loss(*args, nd.array([0.0], dtype="float64"), zeros, [nd.ones(3, dtype="float64")], zeros)
    assert nll.asscalar() == pytest.approx(expected, rel=1e-12)


def test_learned_noise_gradient_matches_finite_differences():
    rng = np.random.default_rng(1)
    pred = nd.array(rng.normal(size=(5, 2)), dtype="float64")
    label = nd.array(rng.normal(size=5), dtype="float64")
    loss = BBBLoss(GaussianPrior(1.0), likelihood="gaussian", noise_sigma=None)
    pred.attach_grad()
    with autograd.record():
        nll = loss.negative_log_likelihood(nd, pred, label)
    nll.backward()
    values, step = pred.asnumpy(), 1e-6
    for index in [(0, 0), (2, 1), (4, 1)]:
        shifted = []
        for sign in (1, -1):
            perturbed = values.copy()
            perturbed[index] += sign * step
            moved = nd.array(perturbed, dtype="float64")
            shifted.append(loss.negative_log_likelihood(nd, moved, label).asscalar())
        assert pred.grad.asnumpy()[index] == pytest.approx((shifted[0] - shifted[1]) / (2 * step), rel=1e-6)


def test_noise_sigma_none_is_accepted_and_bad_values_are_not():
    assert BBBLoss(GaussianPrior(1.0), likelihood="gaussian", noise_sigma=None).noise_sigma is None
    assert BBBLoss(GaussianPrior(1.0), "gaussian", 0.5).noise_sigma == 0.5  # old signature
    with pytest.raises(ValueError, match="noise_sigma"):
        BBBLoss(GaussianPrior(1.0), likelihood="gaussian", noise_sigma=-1.0)


def test_maximum_likelihood_learns_the_noise_level():
    rng = np.random.default_rng(0)
    x = rng.uniform(-1, 1, size=(2000, 1)).astype(np.float32)
    y = (2 * x[:, 0] + rng.normal(0, 0.3, size=2000)).astype(np.float32)
    mx.random.seed(0)
    net = mlp((), num_outputs=2)  # linear: a mean and a raw noise scale
    loss = BBBLoss(GaussianPrior(1.0), likelihood="gaussian", noise_sigma=None)
    regression.train_deterministic_regression(net, ArrayLoader(x, y, 200, shuffle=True, seed=0), loss, 60,
                                              optimizer_params={"learning_rate": 0.05}, progress=False)
    grid = np.linspace(-1, 1, 5)[:, None]
    samples = regression.prediction_samples(net, grid, num_samples=1)
    np.testing.assert_allclose(samples[0], 2 * grid[:, 0], atol=0.05)
    sigma = ref.softplus(net(nd.array(grid)).asnumpy()[:, 1])
    np.testing.assert_allclose(sigma, 0.3, rtol=0.1)


# ------------------------------------------------------------------ prediction and bands
def test_predictive_band_on_a_hand_example():
    samples = np.array([[1.0, 10.0], [2.0, 10.0], [3.0, 10.0], [4.0, 10.0], [5.0, 10.0]])
    band = regression.predictive_band(samples)
    np.testing.assert_allclose(band.lower, [2.0, 10.0])
    np.testing.assert_allclose(band.median, [3.0, 10.0])
    np.testing.assert_allclose(band.upper, [4.0, 10.0])
    with pytest.raises(ValueError, match="quantiles"):
        regression.predictive_band(samples, quantiles=(0.75, 0.5, 0.25))


def test_deterministic_net_band_is_a_line_or_the_noise_quartiles():
    mx.random.seed(0)
    net = mlp((4,), num_outputs=1)
    net.initialize()
    grid = np.linspace(0, 1, 3)[:, None]
    point = regression.prediction_samples(net, grid)
    assert point.shape == (1, 3)
    band = regression.predictive_band(point)
    np.testing.assert_array_equal(band.upper - band.lower, 0.0)
    noisy = regression.prediction_samples(net, grid, num_samples=40000, include_noise=True, noise_sigma=0.2)
    band = regression.predictive_band(noisy)
    np.testing.assert_allclose(band.upper - band.lower, 2 * NORMAL_QUARTILE * 0.2, rtol=0.03)
    np.testing.assert_allclose(band.median, point[0], atol=0.01)
    with pytest.raises(ValueError, match="noise_sigma"):
        regression.prediction_samples(net, grid, include_noise=True)
    two_columns = mlp((4,), num_outputs=2)
    two_columns.initialize()
    with pytest.raises(ValueError, match="noise_sigma must be None"):
        regression.prediction_samples(two_columns, grid, noise_sigma=0.1)
    with pytest.raises(ValueError, match=r"\(N, D\)"):
        regression.prediction_samples(net, np.zeros(3))


def train_bbb(learn_noise, num_epochs, seed=0):
    x, y = regression.make_toy_data(128, seed=seed)
    mx.random.seed(seed)
    loss = BBBLoss(GaussianPrior(1.0), likelihood="gaussian", noise_sigma=None if learn_noise else 0.05)
    trainer = BBBTrainer(mlp((32, 32), num_outputs=2 if learn_noise else 1), loss, seed=seed,
                         optimizer_params={"learning_rate": 0.01})
    history = trainer.fit(ArrayLoader(x, y, 32, shuffle=True, seed=seed), num_epochs, progress=False)
    return trainer, history


def test_bbb_band_is_wider_outside_the_training_range():
    trainer, history = train_bbb(learn_noise=False, num_epochs=150)  # 600 steps
    assert history[-1]["nll"] < history[0]["nll"]
    inside = np.linspace(0.05, 0.45, 9)[:, None]
    left, right = np.linspace(-0.5, -0.3, 5)[:, None], np.linspace(1.1, 1.3, 5)[:, None]
    widths = {}
    for name, grid in [("inside", inside), ("left", left), ("right", right)]:
        band = regression.predictive_band(regression.prediction_samples(trainer, grid, num_samples=200))
        widths[name] = band.upper - band.lower
    # Everywhere beyond the data the band is wider than anywhere inside it, and more than
    # twice as wide as it typically is inside.
    for side in ("left", "right"):
        assert widths[side].min() > widths["inside"].max(), widths
        assert widths[side].min() > 2 * np.median(widths["inside"]), widths
    fitted = regression.predictive_band(regression.prediction_samples(trainer, inside, num_samples=50)).median
    assert np.abs(fitted - regression.toy_function(inside[:, 0])).mean() < 0.1


def test_bbb_with_learned_noise_trains_and_predicts_targets():
    trainer, history = train_bbb(learn_noise=True, num_epochs=5)
    assert all(np.isfinite(record["loss"]) for record in history)
    assert history[-1]["nll"] < history[0]["nll"]
    grid = np.linspace(0, 0.5, 4)[:, None]
    functions = regression.prediction_samples(trainer, grid, num_samples=30)
    targets = regression.prediction_samples(trainer, grid, num_samples=30, include_noise=True)
    assert functions.shape == targets.shape == (30, 4)
    assert np.all(targets.std(axis=0) > functions.std(axis=0))  # the learned noise adds spread


def test_predictive_mixture_of_an_ordinary_network_is_its_one_gaussian():
    mx.random.seed(0)
    net = mlp((4,), num_outputs=2)
    net.initialize()
    x = np.random.default_rng(0).normal(size=(6, 3)).astype(np.float32)  # any (N, D) input
    outputs = net(nd.array(x)).asnumpy().astype(np.float64)
    targets = np.linspace(-1, 1, 6)
    prediction = regression.predictive_mixture(net, x, targets=targets)
    assert prediction.means.shape == (1, 6)
    np.testing.assert_allclose(prediction.means[0], outputs[:, 0], rtol=1e-6)
    np.testing.assert_allclose(prediction.sigmas[0], np.log1p(np.exp(outputs[:, 1])), rtol=1e-5)
    np.testing.assert_array_equal(prediction.epistemic_variance, 0.0)
    one = mlp((4,), num_outputs=1)
    one.initialize()
    known = regression.predictive_mixture(one, x, noise_sigma=0.3)
    np.testing.assert_array_equal(known.sigmas, 0.3)
    with pytest.raises(ValueError, match="one-column network predicts only the mean.*noise_sigma"):
        regression.predictive_mixture(one, x)


def test_mc_dropout_draws_a_mask_per_sample_and_is_off_otherwise():
    mx.random.seed(0)
    net = mlp((32,), num_outputs=2, dropout=0.5)
    net.initialize()
    x = np.random.default_rng(0).normal(size=(5, 2)).astype(np.float32)
    plain = regression.predictive_mixture(net, x, num_samples=20)
    assert plain.means.shape == (1, 5)
    again = regression.predictive_mixture(net, x)
    np.testing.assert_array_equal(plain.means, again.means)  # dropout off: deterministic
    sampled = regression.predictive_mixture(net, x, num_samples=20, mc_dropout=True)
    assert sampled.means.shape == (20, 5)
    assert np.all(sampled.epistemic_variance > 0)
    assert len({tuple(row) for row in sampled.means}) == 20  # 20 different masks
    # the dropout layer scales by 1 / (1 - p), so the masks average to the plain network
    many = regression.predictive_mixture(net, x, num_samples=4000, mc_dropout=True)
    np.testing.assert_allclose(many.mean, plain.mean, atol=5 * np.sqrt(many.epistemic_variance.max() / 4000) + 0.05)
    samples = regression.prediction_samples(net, x, num_samples=7, mc_dropout=True)
    assert samples.shape == (7, 5)


def test_predictive_mixture_of_a_trainer_has_one_component_per_weight_sample():
    trainer, _ = train_bbb(learn_noise=True, num_epochs=1)
    grid = np.linspace(0, 0.5, 4)[:, None]
    prediction = regression.predictive_mixture(trainer, grid, num_samples=30)
    assert prediction.means.shape == prediction.sigmas.shape == (30, 4)
    assert np.all(prediction.epistemic_variance > 0)
    trainer.reseed(3)
    functions = regression.prediction_samples(trainer, grid, num_samples=30)
    trainer.reseed(3)
    np.testing.assert_array_equal(regression.predictive_mixture(trainer, grid, num_samples=30).means,
                                  functions)
    with pytest.raises(ValueError, match="mc_dropout"):
        regression.predictive_mixture(trainer, grid, mc_dropout=True)


def test_plot_regression_returns_a_figure():
    x, y = regression.make_toy_data(10)
    grid = np.linspace(-0.2, 1.2, 7)
    band = regression.Band(grid - 0.1, grid, grid + 0.1)
    figure = regression.plot_regression(x, y, grid, {"BBB": band, "MLP": band}, train_range=(0, 0.5))
    assert isinstance(figure, Figure) and len(figure.axes) == 2


# ------------------------------------------------------------------ least squares baseline
def _linear_data(n, num_features, seed, noise=0.5):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, num_features))
    beta = np.arange(1.0, num_features + 2)  # intercept 1, slopes 2, 3, ...
    return x, beta[0] + x @ beta[1:] + noise * rng.standard_normal(n), beta


def test_least_squares_matches_numpy_lstsq_and_the_closed_forms():
    x, y, _ = _linear_data(40, 3, seed=0)
    fit = regression.fit_least_squares(x, y)
    design = np.column_stack([np.ones(40), x])
    expected, *_ = np.linalg.lstsq(design, y, rcond=None)
    np.testing.assert_allclose(fit.coefficients, expected, rtol=1e-12, atol=1e-12)
    residuals = y - design @ expected
    assert fit.degrees_of_freedom == 36 and fit.num_examples == 40
    assert fit.noise_variance == pytest.approx(residuals @ residuals / 36, rel=1e-12)
    np.testing.assert_allclose(fit.inverse_gram, np.linalg.inv(design.T @ design), rtol=1e-10, atol=1e-14)
    new = np.array([[0.0, 0.0, 0.0], [3.0, -2.0, 1.0]])
    row = np.column_stack([np.ones(2), new])
    leverage = np.array([r @ np.linalg.inv(design.T @ design) @ r for r in row])
    prediction = fit.predict(new, targets=[1.0, 2.0])
    np.testing.assert_allclose(prediction.mean, row @ expected, rtol=1e-12)
    np.testing.assert_allclose(prediction.variance, fit.noise_variance * (1 + leverage), rtol=1e-10)
    np.testing.assert_allclose(prediction.epistemic_variance, fit.noise_variance * leverage, rtol=1e-10)
    np.testing.assert_allclose(prediction.aleatoric_variance, fit.noise_variance, rtol=1e-10)
    assert prediction.epistemic_variance[1] > 10 * prediction.epistemic_variance[0]  # far out
    # its scores are those of one Gaussian
    sd = np.sqrt(prediction.variance)
    nll = -np.mean(ref.log_normal(np.array([1.0, 2.0]) - prediction.mean, sd))
    assert prediction.nll() == pytest.approx(nll, rel=1e-10)
    lower, upper = prediction.interval(0.95)
    np.testing.assert_allclose(upper, prediction.mean + 1.959963984540054 * sd, rtol=1e-9)
    np.testing.assert_allclose(lower, prediction.mean - 1.959963984540054 * sd, rtol=1e-9)
    plug_in = fit.predict(new, parameter_uncertainty=False)
    np.testing.assert_allclose(plug_in.variance, fit.noise_variance, rtol=1e-12)
    np.testing.assert_array_equal(plug_in.epistemic_variance, 0.0)


def test_least_squares_parameter_variance_is_the_sampling_variance_of_the_fitted_mean():
    """Over 4,000 data sets with the same inputs, the fitted mean at a point varies with variance
    sigma^2 X*(X'X)^-1 X*' and s^2 averages to sigma^2 (relative sd of a variance from 4,000
    draws: sqrt(2/3999) = 2.2%; tolerance 5 sd)."""
    rng = np.random.default_rng(1)
    x = rng.normal(size=(30, 2))
    design = np.column_stack([np.ones(30), x])
    point = np.array([[2.0, -1.5]])
    sigma = 0.7
    fits = [regression.fit_least_squares(x, 1.0 + x @ [0.5, -0.2] + sigma * rng.standard_normal(30))
            for _ in range(4000)]
    means = np.array([f.predict(point).mean[0] for f in fits])
    expected = sigma ** 2 * (np.r_[1.0, point[0]] @ np.linalg.inv(design.T @ design) @ np.r_[1.0, point[0]])
    assert means.var() == pytest.approx(expected, rel=0.11)
    assert np.mean([f.noise_variance for f in fits]) == pytest.approx(sigma ** 2, rel=0.025)
    # the predictive's parameter part estimates it (s^2 in place of sigma^2)
    assert np.mean([f.predict(point).parameter_variance[0] for f in fits]) == pytest.approx(expected, rel=0.025)


def test_least_squares_interval_covers_new_targets_only_with_the_parameter_uncertainty():
    """A new target at a point of leverage about 1 (far from the inputs): the 95% predictive
    interval holds it in about 95% of 4,000 data sets (binomial sd 0.35 points, tolerance 1.5
    points, which also covers the Student-t correction for 57 degrees of freedom: 94.5%);
    the noise alone (plug-in) holds about P(|Z| < 1.96 / sqrt(2)) = 83%."""
    rng = np.random.default_rng(2)
    x = rng.normal(size=(60, 2))
    design = np.column_stack([np.ones(60), x])
    inverse_gram = np.linalg.inv(design.T @ design)
    direction = np.array([1.0, 0.3])
    point = direction * np.sqrt(1.0 / (direction @ inverse_gram[1:, 1:] @ direction))
    inside = {True: 0, False: 0}
    for _ in range(4000):
        y = 0.2 + x @ [1.0, 2.0] + rng.standard_normal(60)
        new = 0.2 + point @ [1.0, 2.0] + rng.standard_normal()
        fit = regression.fit_least_squares(x, y)
        for with_parameters in inside:
            inside[with_parameters] += fit.predict(point[None, :], [new], with_parameters).coverage([0.95])[0]
    assert inside[True] / 4000 == pytest.approx(0.95, abs=0.015)
    assert inside[False] / 4000 < 0.88


def test_least_squares_on_windows_is_a_linear_autoregression():
    """Windows of an AR(2) series x_t = 0.3 + 1.2 x_{t-1} - 0.5 x_{t-2} + e_t: the fit on the
    last two values of each window finds its coefficients (standard errors about 0.01 with 5,000
    windows; tolerance 0.05) and its noise variance."""
    from gluon_bbb.data import sliding_windows

    rng = np.random.default_rng(3)
    series = np.zeros(5100)
    for t in range(2, len(series)):
        series[t] = 0.3 + 1.2 * series[t - 1] - 0.5 * series[t - 2] + 0.4 * rng.standard_normal()
    windows = sliding_windows(series[100:], 8)
    fit = regression.fit_least_squares(windows.inputs[:, -2:], windows.targets)
    np.testing.assert_allclose(fit.coefficients, [0.3, -0.5, 1.2], atol=0.05)
    assert fit.noise_variance == pytest.approx(0.16, rel=0.1)


def test_least_squares_rejects_bad_inputs():
    x, y, _ = _linear_data(10, 2, seed=4)
    with pytest.raises(ValueError, match="shape"):
        regression.fit_least_squares(x, y[:-1])
    with pytest.raises(ValueError, match="more examples than coefficients"):
        regression.fit_least_squares(x[:3], y[:3])
    with pytest.raises(ValueError, match="rank deficient"):
        regression.fit_least_squares(np.column_stack([x, 2 * x[:, 0]]), y)
    with pytest.raises(ValueError, match="finite"):
        regression.fit_least_squares(np.where(x > 1, np.nan, x), y)
    with pytest.raises(ValueError, match=r"\(N, 2\)"):
        regression.fit_least_squares(x, y).predict(x[:, :1])
    with pytest.raises(ValueError, match="parameter_variance"):
        regression.LinearGaussianPrediction(np.zeros((1, 2)), np.ones((1, 2)),
                                            parameter_variance=[0.5, 2.0])
