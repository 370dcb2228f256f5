"""The paper's toy regression (Blundell et al. 2015, section 5.2, Fig. 5).

Training targets follow

    y = x + 0.3 sin(2 pi (x + e)) + 0.3 sin(4 pi (x + e)) + e,    e ~ N(0, 0.02),

with inputs drawn on part of the axis only. The paper does not say whether 0.02 is the
variance or the standard deviation of e. Here it is the STANDARD DEVIATION
(:data:`NOISE_STD`): e also shifts the phase of the sines, and with a variance of 0.02
(std 0.14) that phase noise would average the sin(4 pi x) term of E[y | x] down to about a
fifth of its amplitude, leaving little of the curve the figure shows; a std of 0.02 keeps
it, and is also how public re-implementations read it. ``noise_std`` changes it.

Away from the training inputs a Bayes-by-Backprop network's sampled functions disagree,
so the quantiles of its predictions spread out; an ordinary network extrapolates with
one confident function. :func:`prediction_samples` draws predictions from either kind of
model and :func:`predictive_band` summarises them by their median and interquartile range.
:func:`predictive_mixture` gives any Gaussian regression network's predictive distribution,
with its scores (log-likelihood, interval coverage) and its aleatoric and epistemic parts; the
networks may take any (N, D) inputs, e.g. windows of a time series
(:func:`gluon_bbb.data.sliding_windows`). :func:`fit_least_squares` is the classical baseline for
such networks: a linear model fitted by ordinary least squares, with the Gaussian predictive
distribution of :class:`LeastSquaresFit` (on windows of a series, a linear autoregression).
"""
from collections import namedtuple
from dataclasses import dataclass

import numpy as np
from mxnet import autograd, gluon, nd

from .._checks import check_int
from .._math import softplus
from ..baselines import prepare_network, run_epochs
from ..context import resolve_context
from ..loss import BBBLoss
from ..plots import axes_for
from ..trainer import BBBTrainer
from ..analysis.uncertainty import GaussianMixturePrediction, sample_network_outputs

__all__ = [
    "NOISE_STD",
    "TRAIN_RANGE",
    "PLOT_RANGE",
    "Band",
    "toy_function",
    "make_toy_data",
    "train_deterministic_regression",
    "prediction_samples",
    "predictive_mixture",
    "predictive_band",
    "plot_regression",
    "LeastSquaresFit",
    "LinearGaussianPrediction",
    "fit_least_squares",
]

#: Standard deviation of the noise e in the toy curve (see the module docstring).
NOISE_STD = 0.02
#: Interval the training inputs are drawn from, uniformly.
TRAIN_RANGE = (0.0, 0.5)
#: Wider interval to show the predictions on.
PLOT_RANGE = (-0.2, 1.2)

#: Quantiles of the predictions at each input, each an array of shape (N,).
Band = namedtuple("Band", ["lower", "median", "upper"])


def toy_function(x, noise=0.0):
    """y = x + 0.3 sin(2 pi (x + e)) + 0.3 sin(4 pi (x + e)) + e.

    Parameters
    ----------
    x : array_like
    noise : array_like, broadcastable to ``x``
        The noise e; 0 gives the noise-free curve.

    Returns
    -------
    numpy.ndarray of float64, the broadcast shape of ``x`` and ``noise``
    """
    x = np.asarray(x, dtype=np.float64)
    shifted = x + noise
    return x + 0.3 * np.sin(2 * np.pi * shifted) + 0.3 * np.sin(4 * np.pi * shifted) + noise


def make_toy_data(num_points, x_range=TRAIN_RANGE, noise_std=NOISE_STD, seed=0):
    """Noisy samples of the toy curve at uniformly drawn inputs.

    Parameters
    ----------
    num_points : int, >= 1
    x_range : (low, high), low < high
    noise_std : float, >= 0
        Standard deviation of e ~ N(0, noise_std^2).
    seed : int
        Seeds a numpy Generator; the same seed gives the same data.

    Returns
    -------
    x : numpy.ndarray of float32, (num_points, 1), the network's input
    y : numpy.ndarray of float32, (num_points,), the targets
    """
    check_int("num_points", num_points)
    low, high = _check_range(x_range)
    noise_std = float(noise_std)
    if not (noise_std >= 0 and np.isfinite(noise_std)):
        raise ValueError(f"noise_std must be a finite number >= 0, got {noise_std!r}")
    rng = np.random.default_rng(seed)
    x = rng.uniform(low, high, size=num_points)
    noise = rng.normal(0.0, noise_std, size=num_points)
    return x[:, None].astype(np.float32), toy_function(x, noise).astype(np.float32)


def _check_range(x_range):
    low, high = (float(v) for v in x_range)
    if not low < high:
        raise ValueError(f"x_range must satisfy low < high, got {x_range!r}")
    return low, high


def train_deterministic_regression(net, train_data, loss, num_epochs, optimizer="adam",
                                   optimizer_params=None, ctx=None, progress=True):
    """Train an ordinary regression network by maximum likelihood (the Fig. 5 baseline).

    The cost of a minibatch is ``loss.negative_log_likelihood`` summed over its examples,
    the data part of Bayes by Backprop's Eq. (8) without the complexity cost, so the
    baseline has the same Gaussian likelihood, with known or learned noise. (For
    classifiers, use :func:`gluon_bbb.baselines.train_deterministic`.)

    Parameters
    ----------
    net : gluon.Block
        Initialised with ``mx.init.Xavier()`` on ``ctx`` if it is not yet.
    train_data : iterable of (data, label) NDArray batches with ``len()``
        data : (batch_size, D); label : (batch_size,)
    loss : BBBLoss
        With ``likelihood='gaussian'``; only its likelihood is used, not its prior.
    num_epochs : int, >= 1
    optimizer, optimizer_params
        As for ``gluon.Trainer``; default Adam with learning rate 1e-3.
    ctx : mx.Context or str, optional
    progress : bool
        Show progress, as :func:`gluon_bbb.baselines.run_epochs` does.

    Returns
    -------
    list of dict
        One per epoch: 'epoch', 'nll' (summed over the epoch's examples), 'seconds'.
    """
    if not isinstance(loss, BBBLoss) or loss.likelihood != "gaussian":
        raise ValueError(f"loss must be a BBBLoss with likelihood='gaussian', got {loss!r}")
    check_int("num_epochs", num_epochs)
    ctx = resolve_context(ctx)
    first_data, _ = next(iter(train_data))
    prepare_network(net, first_data.as_in_context(ctx), ctx, hybridize=False)
    trainer = gluon.Trainer(net.collect_params(), optimizer,
                            dict(optimizer_params or {"learning_rate": 1e-3}))

    def cost(output, label):  # the data part of Eq. (8): summed Gaussian negative log-likelihood
        return loss.negative_log_likelihood(nd, output, label).reshape((1,)), None

    return [{"epoch": record["epoch"], "nll": record["loss"], "seconds": record["seconds"]}
            for record in run_epochs(net, trainer, train_data, num_epochs, cost, ctx=ctx,
                                     progress=progress, mean_gradient=False)]


def prediction_samples(model, x, num_samples=100, include_noise=False, noise_sigma=None, seed=0,
                       mc_dropout=False):
    """Predictions of a one-target regression network at the inputs ``x``.

    The network outputs one column (the mean, with known noise ``noise_sigma``) or two
    (the mean and a raw scale s with noise softplus(s), as with ``BBBLoss(noise_sigma=None)``).

    Parameters
    ----------
    model : BBBTrainer or gluon.Block
        A trainer gives one prediction per weight sample w_s ~ q(w | theta); an ordinary
        network gives its single prediction (S = 1 unless ``include_noise`` or ``mc_dropout``).
    x : array_like or NDArray, (N, D), the network's inputs (D = 1 for the toy curve)
    num_samples : int, >= 1
        Weight samples for a trainer; dropout masks with ``mc_dropout``; noise draws for an
        ordinary network with ``include_noise``.
    include_noise : bool
        False: samples of the regression function f(x; w) (the model's uncertainty).
        True: samples of y = f(x; w) + noise, the predictive distribution of new targets.
    noise_sigma : float, optional
        Known noise standard deviation of a one-column network; by default the trainer's
        ``loss.noise_sigma``. Must be None for a two-column (learned-noise) network.
    seed : int
        Seeds the noise draws of ``include_noise``.
    mc_dropout : bool
        For an ordinary network: keep its Dropout layers on and run it ``num_samples`` times,
        one mask per run (Monte Carlo dropout, Gal & Ghahramani 2016).

    Returns
    -------
    numpy.ndarray of float64, (S, N)
    """
    outputs, noise_sigma = _network_outputs(model, x, num_samples, noise_sigma, mc_dropout)
    means, sigmas = _means_and_sigmas(outputs, noise_sigma, include_noise)
    if not include_noise:
        return means
    if means.shape[0] == 1:
        means, sigmas = (np.repeat(a, num_samples, axis=0) for a in (means, sigmas))
    return means + sigmas * np.random.default_rng(seed).standard_normal(means.shape)


def predictive_mixture(model, x, num_samples=100, targets=None, noise_sigma=None, mc_dropout=False):
    """The Gaussian predictive distribution of a regression network at the inputs ``x``.

    Each of S samples (weight samples of a trainer, dropout masks with ``mc_dropout``, or the
    one ordinary network) predicts N(m_s(x), sigma_s(x)^2), with sigma the known
    ``noise_sigma`` or the network's learned softplus(s); the predictive distribution is their
    equal-weight mixture, with the mean, the aleatoric and epistemic variances, the
    distribution function, quantiles, log-likelihood and interval coverage of
    :class:`~gluon_bbb.analysis.uncertainty.GaussianMixturePrediction`.

    Parameters
    ----------
    model, x, num_samples, noise_sigma, mc_dropout
        As for :func:`prediction_samples`.
    targets : array_like, (N,), optional
        The true values, for the scores (``nll``, ``rmse``, ``coverage``).

    Returns
    -------
    GaussianMixturePrediction
        ``means`` and ``sigmas`` of shape (S, N); S = 1 for an ordinary network without
        ``mc_dropout``.
    """
    outputs, noise_sigma = _network_outputs(model, x, num_samples, noise_sigma, mc_dropout)
    means, sigmas = _means_and_sigmas(outputs, noise_sigma, True)
    return GaussianMixturePrediction(means, sigmas, targets)


def _network_outputs(model, x, num_samples, noise_sigma, mc_dropout):
    """The (S, N, 1 or 2) outputs of a trainer's weight samples, of a network's dropout masks or
    of the network alone, and the known noise sigma (the trainer's if not given)."""
    check_int("num_samples", num_samples)
    if isinstance(model, BBBTrainer):
        if mc_dropout:
            raise ValueError("mc_dropout is for ordinary networks; a trainer samples its weights")
        outputs, _ = sample_network_outputs(model, _as_ndarray(x, model.ctx), num_samples)
        if noise_sigma is None and outputs.shape[-1] == 1:
            noise_sigma = model.loss.noise_sigma
        return outputs, noise_sigma
    if not isinstance(model, gluon.Block):
        raise ValueError(f"model must be a BBBTrainer or a gluon Block, got {type(model).__name__}")
    x = _as_ndarray(x, list(model.collect_params().values())[0].list_ctx()[0])
    if not mc_dropout:
        with autograd.predict_mode():
            return model(x).expand_dims(axis=0), noise_sigma
    with autograd.train_mode():  # dropout on, nothing recorded
        return nd.stack(*[model(x) for _ in range(num_samples)], axis=0), noise_sigma


def _as_ndarray(x, ctx):
    x = x if isinstance(x, nd.NDArray) else nd.array(np.asarray(x, dtype=np.float32))
    if x.ndim != 2:
        raise ValueError(f"x must have shape (N, D), got {x.shape}")
    return x.as_in_context(ctx)


def _means_and_sigmas(outputs, noise_sigma, need_sigma):
    """(S, N) means and noise standard deviations from (S, N, 1 or 2) network outputs."""
    num_columns = outputs.shape[-1]
    if num_columns == 2:
        if noise_sigma is not None:
            raise ValueError("the network outputs 2 columns (mean, learned noise scale): "
                             f"noise_sigma must be None, got {noise_sigma!r}")
        sigmas = softplus(nd, outputs[:, :, 1]).asnumpy().astype(np.float64)
        return outputs[:, :, 0].asnumpy().astype(np.float64), sigmas
    if num_columns != 1:
        raise ValueError(f"a one-target regression network outputs 1 or 2 columns, got {num_columns}")
    means = outputs[:, :, 0].asnumpy().astype(np.float64)
    if not need_sigma:
        return means, None
    if noise_sigma is None or not float(noise_sigma) > 0:
        raise ValueError("a one-column network predicts only the mean: its noise needs a positive "
                         f"noise_sigma (the known noise's standard deviation), got {noise_sigma!r}")
    return means, np.full_like(means, float(noise_sigma))


def predictive_band(samples, quantiles=(0.25, 0.5, 0.75)):
    """Lower quantile, median and upper quantile of the predictions at each input.

    Parameters
    ----------
    samples : array_like, (S, N), e.g. from :func:`prediction_samples`
    quantiles : (lower, middle, upper), increasing, in [0, 1]
        The default gives the median and the interquartile range (upper - lower).

    Returns
    -------
    Band
        ``lower``, ``median``, ``upper``, each of shape (N,) (numpy's linear interpolation).
    """
    samples = np.asarray(samples, dtype=np.float64)
    if samples.ndim != 2:
        raise ValueError(f"samples must have shape (S, N), got shape {samples.shape}")
    quantiles = np.asarray(quantiles, dtype=np.float64)
    if quantiles.shape != (3,) or np.any(np.diff(quantiles) <= 0) or quantiles[0] < 0 or quantiles[-1] > 1:
        raise ValueError(f"quantiles must be 3 increasing numbers in [0, 1], got {quantiles.tolist()}")
    return Band(*np.quantile(samples, quantiles, axis=0))


def plot_regression(x_train, y_train, x_grid, bands, train_range=None, show_curve=True, ax=None):
    """Fig. 5 of the paper: training data, and each model's median and band over a wider range.

    Parameters
    ----------
    x_train : array_like, (n, 1) or (n,)
    y_train : array_like, (n,)
    x_grid : array_like, (N, 1) or (N,), the inputs the bands were computed at
    bands : dict of str -> Band, one panel per model
    train_range : (low, high), optional
        Shade the interval the training inputs came from.
    show_curve : bool
        Draw the noise-free curve :func:`toy_function` (x, 0) for reference.
    ax : sequence of matplotlib Axes, one per model (an Axes for one model), optional
        Drawn into; default a new Figure whose panels share the y axis.

    Returns
    -------
    matplotlib.figure.Figure
    """
    if not isinstance(bands, dict) or not bands:
        raise ValueError("bands must be a non-empty dict of name -> Band")
    x_train, x_grid = np.ravel(x_train), np.ravel(x_grid)
    axes = axes_for(ax, len(bands), figsize=(5.0 * len(bands), 4.0), sharey=True)
    axes = axes if isinstance(axes, list) else [axes]
    for ax, (name, band) in zip(axes, bands.items()):
        if train_range is not None:
            ax.axvspan(*train_range, color="0.9", label="training inputs")
        if show_curve:
            ax.plot(x_grid, toy_function(x_grid), color="0.5", linewidth=1, label="noise-free curve")
        ax.fill_between(x_grid, band.lower, band.upper, alpha=0.4, label="interquartile range")
        ax.plot(x_grid, band.median, color="red", label="median")
        ax.plot(x_train, np.ravel(y_train), "kx", markersize=4, label="training data")
        ax.set(title=name, xlabel="x")
    axes[0].set_ylabel("y")
    axes[0].legend(loc="upper left", fontsize=8)
    return axes[0].figure


@dataclass
class LinearGaussianPrediction(GaussianMixturePrediction):
    """One Gaussian N(mean, s^2 + v) per point whose variance is split into the noise s^2
    (aleatoric) and the variance v of the fitted mean (epistemic, the parameters' uncertainty).

    A :class:`~gluon_bbb.analysis.uncertainty.GaussianMixturePrediction` with S = 1, so it has the
    same scores (``nll``, ``rmse``, ``coverage``, ``interval``), but its ``epistemic_variance`` is
    ``parameter_variance`` and its ``aleatoric_variance`` the rest, where a one-component
    mixture would count the whole variance as aleatoric.

    Attributes
    ----------
    parameter_variance : numpy.ndarray of float64, (N,), >= 0 and <= sigmas[0]^2
    """

    parameter_variance: np.ndarray = None

    def __post_init__(self):
        super().__post_init__()
        if self.means.shape[0] != 1:
            raise ValueError("a linear Gaussian prediction has one component, got "
                             f"{self.means.shape[0]}")
        parameter_variance = np.asarray(self.parameter_variance, dtype=np.float64)
        if parameter_variance.shape != self.mean.shape or not np.all(
                (parameter_variance >= 0) & (parameter_variance <= self.variance * (1 + 1e-12))):
            raise ValueError(f"parameter_variance must have shape {self.mean.shape} and lie in "
                             "[0, sigmas^2]")
        self.parameter_variance = parameter_variance
        self.epistemic_variance = parameter_variance
        self.aleatoric_variance = np.maximum(self.variance - parameter_variance, 0.0)


@dataclass(frozen=True)
class LeastSquaresFit:
    """The linear model y = b + a'x + e, e ~ N(0, s^2), fitted by ordinary least squares.

    With the design matrix X = [1, x] of n examples and p = D + 1 columns, the coefficients
    beta = (b, a) minimise ||y - X beta||^2, and s^2 = RSS / (n - p) is the unbiased noise
    variance. At a new input x* (row X* = [1, x*]) the predictive distribution is

        N(X* beta, s^2 (1 + X* (X'X)^-1 X*')),

    the noise plus the sampling variance s^2 X* (X'X)^-1 X*' of the fitted mean, which grows
    with the distance of x* from the training inputs (its leverage). The exact predictive of a
    flat prior on (beta, log s) is a Student t with n - p degrees of freedom; this is its Gaussian
    of the same variance, close for n - p in the hundreds (95% quantile 1.97 against 1.96 at
    n - p = 200).

    Attributes
    ----------
    coefficients : numpy.ndarray of float64, (D + 1,), the intercept b first
    noise_variance : float, s^2
    inverse_gram : numpy.ndarray of float64, (D + 1, D + 1), (X'X)^-1
    num_examples : int, n
    """

    coefficients: np.ndarray
    noise_variance: float
    inverse_gram: np.ndarray
    num_examples: int

    @property
    def degrees_of_freedom(self) -> int:
        """n - p, the residual degrees of freedom."""
        return self.num_examples - len(self.coefficients)

    def predict(self, x, targets=None,
                parameter_uncertainty: bool = True) -> "LinearGaussianPrediction":
        """The Gaussian predictive distribution at the inputs ``x``.

        Parameters
        ----------
        x : array_like, (N, D)
        targets : array_like, (N,), optional
            The true values, for the scores.
        parameter_uncertainty : bool
            True: variance s^2 (1 + X* (X'X)^-1 X*'); False: the noise s^2 alone (the plug-in
            predictive that takes the fitted coefficients as exact).

        Returns
        -------
        LinearGaussianPrediction
            Mean X* beta; ``parameter_variance`` s^2 X* (X'X)^-1 X*' (0 without
            ``parameter_uncertainty``).
        """
        design = _design_matrix(x, len(self.coefficients) - 1)
        mean = design @ self.coefficients
        if parameter_uncertainty:
            leverage = np.einsum("nd,de,ne->n", design, self.inverse_gram, design)
            parameter_variance = self.noise_variance * np.maximum(leverage, 0.0)
        else:
            parameter_variance = np.zeros_like(mean)
        sigma = np.sqrt(self.noise_variance + parameter_variance)
        return LinearGaussianPrediction(mean[None, :], sigma[None, :], targets,
                                        parameter_variance=parameter_variance)


def fit_least_squares(x, y) -> LeastSquaresFit:
    """Fit y = b + a'x + e by ordinary least squares, in float64 (see :class:`LeastSquaresFit`).

    On windows of a series (:func:`gluon_bbb.data.sliding_windows`), with ``x`` the last p
    values of each window, this is the linear autoregression AR(p) fitted by conditional least
    squares.

    Parameters
    ----------
    x : array_like, (n, D), finite
    y : array_like, (n,), finite

    Returns
    -------
    LeastSquaresFit

    Raises
    ------
    ValueError
        Shapes that do not match, non-finite values, fewer examples than D + 2 (no residual
        degree of freedom) or inputs whose design matrix [1, x] is rank deficient.
    """
    y = np.asarray(y, dtype=np.float64)
    design = _design_matrix(x)
    if y.shape != design.shape[:1] or not np.all(np.isfinite(y)):
        raise ValueError(f"y must be finite with shape ({design.shape[0]},), got {y.shape}")
    n, p = design.shape
    if n <= p:
        raise ValueError(f"{n} examples for {p} coefficients: least squares needs more examples "
                         "than coefficients")
    q, r = np.linalg.qr(design)  # X = QR: beta = R^-1 Q'y, (X'X)^-1 = R^-1 R^-T
    diagonal = np.abs(np.diag(r))
    if diagonal.min() <= 1e-10 * diagonal.max():
        raise ValueError("the design matrix [1, x] is rank deficient: a column of x is constant "
                         "or a combination of the others")
    coefficients = np.linalg.solve(r, q.T @ y)
    residuals = y - design @ coefficients
    r_inverse = np.linalg.solve(r, np.eye(p))
    return LeastSquaresFit(coefficients, float(residuals @ residuals / (n - p)),
                           r_inverse @ r_inverse.T, n)


def _design_matrix(x, num_features=None):
    """[1, x] in float64, (N, D + 1), from finite (N, D) inputs (D checked if given)."""
    x = np.asarray(x, dtype=np.float64)
    if x.ndim != 2 or (num_features is not None and x.shape[1] != num_features):
        wanted = f"(N, {num_features})" if num_features is not None else "(N, D)"
        raise ValueError(f"x must have shape {wanted}, got {x.shape}")
    if not np.all(np.isfinite(x)):
        raise ValueError("x must be finite")
    return np.concatenate([np.ones((len(x), 1)), x], axis=1)
