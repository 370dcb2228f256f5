"""What the weight uncertainty is for: predictive uncertainty, calibration, OOD detection.

A Bayes-by-Backprop network predicts with the posterior predictive distribution
p(y | x) = E_q(w)[p(y | x, w)], estimated by Monte Carlo over S weight samples w_s ~ q:

- predictive entropy H[E_s p_s] (total uncertainty),
- expected entropy E_s H[p_s] (aleatoric part: what even a known w could not resolve),
- mutual information H[E_s p_s] - E_s H[p_s] between y and w (epistemic part: the
  disagreement of the sampled networks, which more data would remove).

For regression with a Gaussian likelihood each sample is a Gaussian N(m_s, sigma_s^2), and the
predictive distribution is their equal-weight mixture, :class:`GaussianMixturePrediction`:
its variance splits into an aleatoric part E_s[sigma_s^2] (the noise the likelihood expects)
and an epistemic part Var_s[m_s] (the disagreement of the sampled networks).

:func:`mc_predict` computes these for a :class:`~gluon_bbb.BBBTrainer`, and
:func:`deterministic_predict` the same quantities for an ordinary network (one "sample",
so its mutual information is 0), so that a plain MLP baseline (e.g. trained by
:func:`gluon_bbb.baselines.train_deterministic`) can be compared with it. Entropies are in
nats. Scoring the predictions against the truth (reliability diagrams, ECE, AUROC, refusal) is
:mod:`gluon_bbb.analysis.calibration`, and their figures are in :mod:`gluon_bbb.plots`; both are
re-exported here, so ``uncertainty.expected_calibration_error`` and
``uncertainty.plot_reliability_diagrams`` keep working.
"""
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np
from mxnet import autograd, nd

from .. import predictive
from .._checks import check_int
from .._math import LOG_SQRT_2PI, normal_cdf
from .calibration import (RefusalCurve, ReliabilityDiagram, auroc, block_bootstrap_se,
                          expected_calibration_error, interval_coverage, most_uncertain,
                          refuse_to_classify, reliability_diagram)
from ..context import resolve_context
from ..plots.uncertainty import (plot_refusal_curves, plot_reliability_diagrams,
                                 plot_score_histograms)

__all__ = [
    "Prediction",
    "GaussianMixturePrediction",
    "ReliabilityDiagram",
    "RefusalCurve",
    "entropy",
    "mutual_information",
    "sample_network_outputs",
    "mc_predict",
    "deterministic_predict",
    "most_uncertain",
    "reliability_diagram",
    "expected_calibration_error",
    "interval_coverage",
    "block_bootstrap_se",
    "auroc",
    "refuse_to_classify",
    "plot_reliability_diagrams",
    "plot_score_histograms",
    "plot_refusal_curves",
]


# ----------------------------------------------------------------------------
# Entropy and mutual information
# ----------------------------------------------------------------------------

def entropy(probs, axis=-1):
    """Shannon entropy -sum p log p in nats, with 0 log 0 = 0.

    Parameters
    ----------
    probs : array_like, (..., C) probability vectors along ``axis``
    axis : int

    Returns
    -------
    numpy.ndarray of float64, ``probs``'s shape without ``axis``
    """
    probs = np.asarray(probs, dtype=np.float64)
    safe = np.where(probs > 0, probs, 1.0)
    return -np.sum(np.where(probs > 0, probs * np.log(safe), 0.0), axis=axis)


def mutual_information(sample_probs):
    """Epistemic uncertainty H[mean_s p_s] - mean_s H[p_s], per example.

    Parameters
    ----------
    sample_probs : array_like, (S, N, C)
        Class probabilities of S sampled networks for N examples.

    Returns
    -------
    numpy.ndarray of float64, (N,)
        >= 0 (Jensen's inequality); float rounding below 0 is clipped to 0.
    """
    sample_probs = _check_sample_probs(sample_probs)
    value = entropy(sample_probs.mean(axis=0)) - entropy(sample_probs).mean(axis=0)
    return np.maximum(value, 0.0)


def _check_sample_probs(sample_probs):
    sample_probs = np.asarray(sample_probs, dtype=np.float64)
    if sample_probs.ndim != 3:
        raise ValueError(f"sample_probs must have shape (S, N, C), got shape {sample_probs.shape}")
    return sample_probs


@dataclass
class Prediction:
    """Monte Carlo predictive distribution of a network on N examples with C classes.

    Attributes
    ----------
    sample_probs : numpy.ndarray, (S, N, C)
        Softmax outputs of S weight samples (S = 1 for a deterministic network).
    labels : numpy.ndarray of int, (N,), or None
        True classes, if the data had them.
    mean_probs : numpy.ndarray, (N, C)
        The predictive distribution, the mean over the samples.
    entropy : numpy.ndarray, (N,)
        Predictive entropy H[mean_probs] (total uncertainty).
    expected_entropy : numpy.ndarray, (N,)
        mean_s H[p_s] (aleatoric part).
    mutual_information : numpy.ndarray, (N,)
        entropy - expected_entropy (epistemic part; 0 for S = 1).
    """

    sample_probs: np.ndarray
    labels: np.ndarray = None

    def __post_init__(self):
        self.sample_probs = _check_sample_probs(self.sample_probs)
        if self.labels is not None:
            self.labels = np.asarray(self.labels).astype(np.int64)
            if self.labels.shape != self.sample_probs.shape[1:2]:
                raise ValueError(f"{self.sample_probs.shape[1]} predictions but labels of "
                                 f"shape {self.labels.shape}")
        self.mean_probs = self.sample_probs.mean(axis=0)
        self.entropy = entropy(self.mean_probs)
        self.expected_entropy = entropy(self.sample_probs).mean(axis=0)
        self.mutual_information = np.maximum(self.entropy - self.expected_entropy, 0.0)

    @property
    def predictions(self):
        """(N,) argmax of the predictive distribution."""
        return self.mean_probs.argmax(axis=-1)

    @property
    def confidence(self):
        """(N,) probability of the predicted class."""
        return self.mean_probs.max(axis=-1)

    @property
    def error(self):
        """Fraction of misclassified examples (needs labels)."""
        return float(np.mean(self.predictions != _require_labels(self.labels)))


@dataclass
class GaussianMixturePrediction:
    """Predictive distribution of a Gaussian regression: an equal-weight mixture of S Gaussians.

    Sample s (a weight sample of Bayes by Backprop, a dropout mask, or the one network of an
    ordinary model, S = 1) predicts N(m_s, sigma_s^2) for each of N targets, so

        p(y) = (1/S) sum_s N(y; m_s, sigma_s^2),
        E[y] = mean_s m_s,    Var[y] = mean_s sigma_s^2 + Var_s m_s   (total variance),

    with Var_s the population variance over the samples (ddof 0): the first term is the aleatoric
    part, the second the epistemic part.

    Attributes
    ----------
    means : numpy.ndarray of float64, (S, N)
    sigmas : numpy.ndarray of float64, (S, N), > 0
    targets : numpy.ndarray of float64, (N,), or None
    mean : numpy.ndarray, (N,)
        mean_s m_s.
    aleatoric_variance : numpy.ndarray, (N,)
        mean_s sigma_s^2.
    epistemic_variance : numpy.ndarray, (N,)
        mean_s (m_s - mean)^2; 0 for S = 1.
    variance : numpy.ndarray, (N,)
        Their sum, the variance of the mixture.
    """

    means: np.ndarray
    sigmas: np.ndarray
    targets: np.ndarray = None

    def __post_init__(self):
        self.means = np.asarray(self.means, dtype=np.float64)
        self.sigmas = np.asarray(self.sigmas, dtype=np.float64)
        if self.means.ndim != 2 or self.sigmas.shape != self.means.shape:
            raise ValueError(f"means and sigmas must both have shape (S, N), got {self.means.shape} "
                             f"and {self.sigmas.shape}")
        if not (np.all(np.isfinite(self.means)) and np.all(np.isfinite(self.sigmas))
                and np.all(self.sigmas > 0)):
            raise ValueError("means must be finite and sigmas finite and positive")
        if self.targets is not None:
            self.targets = self._check_targets(self.targets)
        self.mean = self.means.mean(axis=0)
        self.aleatoric_variance = np.square(self.sigmas).mean(axis=0)
        self.epistemic_variance = np.square(self.means - self.mean).mean(axis=0)
        self.variance = self.aleatoric_variance + self.epistemic_variance

    def _check_targets(self, targets):
        targets = np.asarray(targets, dtype=np.float64)
        if targets.shape != self.means.shape[1:]:
            raise ValueError(f"{self.means.shape[1]} predictions but targets of shape {targets.shape}")
        return targets

    def _targets(self, y):
        if y is not None:
            return self._check_targets(y)
        if self.targets is None:
            raise ValueError("this needs targets, but the prediction has none; pass them")
        return self.targets

    def cdf(self, y=None):
        """F(y) = mean_s Phi((y - m_s) / sigma_s) at each target (default: ``targets``), (N,)."""
        return self._cdf_at(self._targets(y))

    def _cdf_at(self, x):
        """F at points ``x`` of shape (..., N), one value per point: (..., N)."""
        z = (x[..., None, :] - self.means) / self.sigmas  # (..., S, N)
        return normal_cdf(nd, nd.array(z, dtype="float64")).asnumpy().mean(axis=-2)

    def _log_density_at(self, x):
        """log p(x) = log mean_s N(x; m_s, sigma_s^2) (log-sum-exp) at points ``x`` of shape
        (..., N): (..., N)."""
        z = (x[..., None, :] - self.means) / self.sigmas
        log_densities = -0.5 * np.square(z) - np.log(self.sigmas) - LOG_SQRT_2PI  # (..., S, N)
        top = log_densities.max(axis=-2)
        return top + np.log(np.exp(log_densities - top[..., None, :]).mean(axis=-2))

    def log_likelihood(self, y=None):
        """log p(y_n) = log mean_s N(y_n; m_s, sigma_s^2) per target (log-sum-exp), (N,)."""
        return self._log_density_at(self._targets(y))

    def nll(self, y=None):
        """Mean negative log predictive density over the targets (nats per target)."""
        return float(-self.log_likelihood(y).mean())

    def rmse(self, y=None):
        """Root mean squared error of the predictive mean."""
        return float(np.sqrt(np.mean(np.square(self._targets(y) - self.mean))))

    def coverage(self, levels=(0.5, 0.8, 0.9, 0.95), y=None):
        """Fraction of targets inside each central interval, (K,); see
        :func:`~gluon_bbb.analysis.calibration.interval_coverage`."""
        return interval_coverage(self.cdf(y), levels)

    def quantile(self, q):
        """The q-quantile of the mixture at each of the N points, (N,): the x with F(x) = q.

        Found by Newton's method on F(x) - q, whose derivative is the mixture's density p(x),
        safeguarded by bisection. The quantile lies between the lowest and the highest of the
        components' own q-quantiles m_s + sigma_s Phi^-1(q) (F is at most q at the one, at
        least q at the other): that is the first bracket, and every x tried becomes one of its
        ends. The first x is the quantile of the Gaussian with the mixture's mean and variance;
        a Newton step that would leave the bracket is replaced by its midpoint. It stops where
        F(x) is within 1e-15 of q (a few roundings of F, which bound any method's precision),
        or where the bracket or the next Newton step is a few float64 spacings of x wide: in a
        handful of evaluations of F where bisection takes 60.

        Parameters
        ----------
        q : float in (0, 1)
        """
        q = float(q)
        if not 0.0 < q < 1.0:
            raise ValueError(f"q must lie in (0, 1), got {q!r}")
        return self._quantiles(np.array([q]))[0]

    def _quantiles(self, qs):
        """The quantiles ``qs`` (Q,) at each point, (Q, N); see :meth:`quantile`."""
        qs = np.asarray(qs, dtype=np.float64)[:, None]
        standard = np.array([[NormalDist().inv_cdf(q)] for q in qs[:, 0]])  # Phi^-1(q), (Q, 1)
        # every component's own q-quantile: F <= q at the lowest, F >= q at the highest
        component_quantiles = self.means + self.sigmas * standard[:, :, None]  # (Q, S, N)
        low, high = component_quantiles.min(axis=1), component_quantiles.max(axis=1)
        x = np.clip(self.mean + np.sqrt(self.variance) * standard, low, high)
        resolution, smallest_sigma = 4 * np.finfo(np.float64).eps, self.sigmas.min(axis=0)
        for _ in range(_QUANTILE_MAX_STEPS):
            excess = self._cdf_at(x) - qs
            done = np.abs(excess) <= _QUANTILE_TOLERANCE
            low, high = np.where(excess < 0, x, low), np.where(excess < 0, high, x)
            done |= high - low <= resolution * np.maximum(np.abs(low), np.abs(high))
            with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
                newton_step = excess / np.exp(self._log_density_at(x))
                done |= np.abs(newton_step) <= resolution * np.maximum(np.abs(x), smallest_sigma)
                if done.all():
                    return x
                newton = x - newton_step
                use_newton = (newton > low) & (newton < high)
            x = np.where(done, x, np.where(use_newton, newton, 0.5 * (low + high)))
        return x

    def interval(self, level):
        """The central interval of ``level`` at each point: (lower, upper), (N,) each."""
        level = float(level)
        if not 0.0 < level < 1.0:
            raise ValueError(f"level must lie in (0, 1), got {level!r}")
        lower, upper = self._quantiles(np.array([(1.0 - level) / 2.0, (1.0 + level) / 2.0]))
        return lower, upper


#: Where :meth:`GaussianMixturePrediction.quantile` stops: |F(x) - q| at most this, and at most
#: this many evaluations of F (bisection alone would reach float64's resolution in about 60).
_QUANTILE_TOLERANCE = 1e-15
_QUANTILE_MAX_STEPS = 200


def _require_labels(labels):
    if labels is None:
        raise ValueError("this needs labels, but the data had none; pass labels=...")
    return labels


# ----------------------------------------------------------------------------
# Monte Carlo prediction
# ----------------------------------------------------------------------------

def _as_batches(data, ctx, batch_size):
    """Input batches on ``ctx``, and the labels (numpy, or None) of an array or a loader."""
    if isinstance(data, (nd.NDArray, np.ndarray)):
        if len(data) == 0:
            raise ValueError("got an empty array of inputs")
        inputs = data if isinstance(data, nd.NDArray) else nd.array(data)
        inputs = inputs.reshape((inputs.shape[0], -1)) if inputs.ndim > 2 else inputs
        inputs = inputs.as_in_context(ctx)
        if batch_size is not None:
            check_int("batch_size", batch_size)
        step = len(inputs) if batch_size is None else int(batch_size)
        return [inputs[i:i + step] for i in range(0, len(inputs), step)], None
    batches, label_batches = [], []
    for batch in data:
        if not isinstance(batch, (tuple, list)) or len(batch) != 2:
            raise ValueError("data must be an array of inputs or an iterable of (data, label) batches")
        batches.append(batch[0].as_in_context(ctx))
        label_batches.append(batch[1].as_in_context(ctx))
    if not batches:
        raise ValueError("data yields no batches")
    return batches, nd.concat(*label_batches, dim=0).asnumpy()


def sample_network_outputs(trainer, data, num_samples, batch_size=None, sampling="weights"):
    """Raw network outputs for ``num_samples`` posterior draws (:mod:`gluon_bbb.predictive`).

    The draws come from the trainer's own random stream, one draw serves every example (with
    ``sampling='weights'``), and the network holds the posterior means again afterwards.

    Parameters
    ----------
    trainer : BBBTrainer
    data : NDArray or numpy.ndarray (N, ...), or an iterable of (data, label) batches
    num_samples : int, >= 1
    batch_size : int, optional
        Split an array input into batches of this size (default: one batch).
    sampling : {'weights', 'local'}
        See :mod:`gluon_bbb.predictive`.

    Returns
    -------
    outputs : NDArray, (num_samples, N, num_outputs), on the trainer's context
    labels : numpy.ndarray (N,) or None
    """
    check_int("num_samples", num_samples)
    batches, labels = _as_batches(data, trainer.ctx, batch_size)
    trainer.prepare(batches[0])  # sets the trainer up (shapes, posterior) if it is not yet
    dtype = trainer.posterior.dtype
    batches = [x.astype(dtype, copy=False) for x in batches]
    samples = [outputs[0] if len(outputs) == 1 else nd.concat(*outputs, dim=0)
               for outputs in predictive.sample_outputs(trainer, batches, num_samples, sampling)]
    return nd.stack(*samples, axis=0), labels


def mc_predict(trainer, data, num_samples, labels=None, batch_size=None, sampling="weights"):
    """Monte Carlo predictive distribution of a Bayes-by-Backprop classifier.

    Parameters
    ----------
    trainer : BBBTrainer
        A trained classifier (softmax likelihood).
    data : NDArray or numpy.ndarray (N, ...), or an iterable of (data, label) batches
        A loader's labels are kept in the result.
    num_samples : int, >= 1
        S, the number of weight samples.
    labels : array_like (N,), optional
        Labels for array inputs.
    batch_size : int, optional
        See :func:`sample_network_outputs`.
    sampling : {'weights', 'local'}
        See :mod:`gluon_bbb.predictive`.

    Returns
    -------
    Prediction
        ``sample_probs`` of shape (S, N, C), their mean, entropies and mutual information.
    """
    outputs, data_labels = sample_network_outputs(trainer, data, num_samples, batch_size, sampling)
    probs = nd.softmax(outputs, axis=-1).asnumpy()
    return Prediction(probs, data_labels if labels is None else labels)


def deterministic_predict(net, data, labels=None, ctx=None, batch_size=None):
    """The :func:`mc_predict` equivalent of an ordinary network: its softmax outputs.

    Parameters
    ----------
    net : gluon.Block, a classifier returning logits (run in prediction mode: dropout off)
    data, labels, batch_size
        See :func:`mc_predict`.
    ctx : mx.Context or str, optional
        Where the inputs go; the network's parameters must live there.

    Returns
    -------
    Prediction
        With S = 1: ``sample_probs`` (1, N, C); its mutual information is 0.
    """
    batches, data_labels = _as_batches(data, resolve_context(ctx), batch_size)
    with autograd.predict_mode():  # dropout off
        probs = nd.concat(*[nd.softmax(net(x), axis=-1) for x in batches], dim=0)
    return Prediction(probs.asnumpy()[None], data_labels if labels is None else labels)
