"""What the weight uncertainty is for: predictive uncertainty, calibration, OOD detection.

A Bayes-by-Backprop network predicts with the posterior predictive distribution
p(y | x) = E_q(w)[p(y | x, w)], estimated by Monte Carlo over S weight samples w_s ~ q:

- predictive entropy H[E_s p_s] (total uncertainty),
- expected entropy E_s H[p_s] (aleatoric part: what even a known w could not resolve),
- mutual information H[E_s p_s] - E_s H[p_s] between y and w (epistemic part: the
  disagreement of the sampled networks, which more data would remove).

:func:`mc_predict` computes these for a :class:`~gluon_bbb.BBBTrainer`, and
:func:`deterministic_predict` the same quantities for an ordinary network (one "sample",
so its mutual information is 0), so that a plain MLP baseline (e.g. trained by
:func:`gluon_bbb.baselines.train_deterministic`) can be compared with every function
below. Entropies are in nats.
"""
from dataclasses import dataclass

import numpy as np
from mxnet import autograd, nd

from . import predictive
from ._checks import check_int
from .plots import axes_for
from .context import resolve_context

__all__ = [
    "Prediction",
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


# ----------------------------------------------------------------------------
# Ranking, calibration, OOD detection, refusing to classify
# ----------------------------------------------------------------------------

def most_uncertain(scores, num=16):
    """Indices of the ``num`` highest uncertainty scores, highest first (ties: lower index first).

    Parameters
    ----------
    scores : array_like, (N,), e.g. ``prediction.entropy`` or ``prediction.mutual_information``
    num : int, >= 1; at most N indices are returned

    Returns
    -------
    numpy.ndarray of int, (min(num, N),)
    """
    scores = _check_1d("scores", scores)
    check_int("num", num)
    return np.argsort(-scores, kind="stable")[:num]


@dataclass
class ReliabilityDiagram:
    """Calibration of the predicted class's probability in equal-width confidence bins.

    Bin b holds the examples whose confidence lies in (edges[b], edges[b + 1]]
    (the first bin also holds confidence 0).

    Attributes
    ----------
    bin_edges : (B + 1,) from 0 to 1
    counts : (B,) examples per bin
    confidence : (B,) mean confidence per bin, NaN for empty bins
    accuracy : (B,) fraction correct per bin, NaN for empty bins
    ece : float
        Expected calibration error, sum_b (counts_b / N) |accuracy_b - confidence_b|.
    """

    bin_edges: np.ndarray
    counts: np.ndarray
    confidence: np.ndarray
    accuracy: np.ndarray
    ece: float


def reliability_diagram(probs, labels, num_bins=15):
    """Reliability diagram data (Guo et al. 2017) of predicted class probabilities.

    Parameters
    ----------
    probs : array_like, (N, C) predictive probabilities (e.g. ``prediction.mean_probs``)
    labels : array_like of int, (N,)
    num_bins : int, >= 1

    Returns
    -------
    ReliabilityDiagram
    """
    probs = np.asarray(probs, dtype=np.float64)
    labels = _check_labels(probs, labels)
    check_int("num_bins", num_bins)
    confidence = probs.max(axis=-1)
    correct = (probs.argmax(axis=-1) == labels).astype(np.float64)
    edges = np.linspace(0.0, 1.0, num_bins + 1)
    bins = np.clip(np.searchsorted(edges, confidence, side="left") - 1, 0, num_bins - 1)
    counts = np.bincount(bins, minlength=num_bins)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean_confidence = np.bincount(bins, confidence, minlength=num_bins) / counts
        accuracy = np.bincount(bins, correct, minlength=num_bins) / counts
    gaps = np.where(counts > 0, np.abs(accuracy - mean_confidence), 0.0)
    ece = float(np.sum(counts * gaps) / len(labels))
    return ReliabilityDiagram(edges, counts, mean_confidence, accuracy, ece)


def expected_calibration_error(probs, labels, num_bins=15):
    """ECE = sum_b (n_b / N) |accuracy_b - confidence_b| over equal-width confidence bins.

    See :func:`reliability_diagram` for the parameters and the binning.

    Returns
    -------
    float, in [0, 1]
    """
    return reliability_diagram(probs, labels, num_bins).ece


def auroc(scores_in, scores_out):
    """Area under the ROC curve for telling out-of-distribution from in-distribution inputs.

    The probability that a random out-of-distribution example scores higher than a random
    in-distribution one, ties counting 1/2 (the Mann-Whitney U statistic over n_in * n_out),
    computed from average ranks. Use an uncertainty score, e.g. the predictive entropy:
    1 is perfect detection, 0.5 chance.

    Parameters
    ----------
    scores_in : array_like, (n_in,)
    scores_out : array_like, (n_out,)

    Returns
    -------
    float, in [0, 1]
    """
    scores_in = _check_1d("scores_in", scores_in)
    scores_out = _check_1d("scores_out", scores_out)
    scores = np.concatenate([scores_in, scores_out])
    _, inverse, counts = np.unique(scores, return_inverse=True, return_counts=True)
    below = np.cumsum(counts) - counts  # number of smaller scores for each distinct value
    average_rank = below + (counts + 1) / 2.0  # 1-based rank, ties share their mean rank
    rank_sum_out = average_rank[inverse[len(scores_in):]].sum()
    n_in, n_out = len(scores_in), len(scores_out)
    u_statistic = rank_sum_out - n_out * (n_out + 1) / 2.0
    return float(u_statistic / (n_in * n_out))


@dataclass
class RefusalCurve:
    """Coverage and error when the network may refuse examples it is unsure about.

    Attributes
    ----------
    thresholds : (T,) an example is classified iff its confidence >= threshold
    coverage : (T,) fraction of examples classified
    error : (T,) error rate among the classified examples, NaN where none is
    """

    thresholds: np.ndarray
    coverage: np.ndarray
    error: np.ndarray


def refuse_to_classify(probs, labels, thresholds):
    """Classify only examples whose predicted-class probability reaches a threshold.

    Parameters
    ----------
    probs : array_like, (N, C) predictive probabilities
    labels : array_like of int, (N,)
    thresholds : array_like, (T,) confidence thresholds in [0, 1]

    Returns
    -------
    RefusalCurve
    """
    probs = np.asarray(probs, dtype=np.float64)
    labels = _check_labels(probs, labels)
    thresholds = _check_1d("thresholds", thresholds)
    outside = (thresholds < 0) | (thresholds > 1)
    if np.any(outside):
        raise ValueError(f"thresholds must lie in [0, 1], got {thresholds[outside][:5].tolist()}")
    confidence = probs.max(axis=-1)
    wrong = probs.argmax(axis=-1) != labels
    kept = confidence[None, :] >= thresholds[:, None]  # (T, N)
    num_kept = kept.sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        error = (kept & wrong[None, :]).sum(axis=1) / num_kept
    return RefusalCurve(thresholds, num_kept / len(labels), np.where(num_kept > 0, error, np.nan))


# ----------------------------------------------------------------------------
# Plots (each draws on ``ax`` or a new Figure and returns the Figure; no pyplot state)
# ----------------------------------------------------------------------------

def plot_reliability_diagrams(diagrams, ax=None):
    """Accuracy against confidence per bin, one panel per model.

    Parameters
    ----------
    diagrams : dict of str -> ReliabilityDiagram
    ax : sequence of matplotlib Axes, one per model (an Axes for one model), optional
        Drawn into; default a new Figure.

    Returns
    -------
    matplotlib.figure.Figure
    """
    _check_mapping("diagrams", diagrams)
    axes = axes_for(ax, len(diagrams), figsize=(4.0 * len(diagrams), 4.0))
    axes = axes if isinstance(axes, list) else [axes]
    for ax, (name, diagram) in zip(axes, diagrams.items()):
        edges = diagram.bin_edges
        heights = np.nan_to_num(diagram.accuracy)
        ax.bar(edges[:-1], heights, width=np.diff(edges), align="edge", edgecolor="black",
               alpha=0.7, label="accuracy")
        ax.plot([0, 1], [0, 1], "k--", label="perfect calibration")
        ax.set(xlim=(0, 1), ylim=(0, 1), xlabel="confidence", ylabel="accuracy",
               title=f"{name}: ECE {diagram.ece:.4f}")
        ax.legend(loc="upper left")
    return axes[0].figure


def plot_score_histograms(scores, xlabel="predictive entropy (nats)", num_bins=50, ax=None):
    """Overlaid, normalised histograms of an uncertainty score for several data sets.

    Parameters
    ----------
    scores : dict of str -> array_like (n,)
    xlabel : str
    num_bins : int
    ax : matplotlib Axes, optional
        Drawn into; default a new Figure.

    Returns
    -------
    matplotlib.figure.Figure
    """
    _check_mapping("scores", scores)
    ax = axes_for(ax)
    values = [_check_1d(name, value) for name, value in scores.items()]
    high = max(float(v.max()) for v in values)
    edges = np.linspace(0.0, high if high > 0 else 1.0, num_bins + 1)
    for name, value in zip(scores, values):
        ax.hist(value, bins=edges, density=True, histtype="step", linewidth=1.5, label=name)
    ax.set(xlabel=xlabel, ylabel="density")
    ax.legend()
    return ax.figure


def plot_refusal_curves(curves, ax=None):
    """Error of the classified examples against coverage, one line per model.

    Parameters
    ----------
    curves : dict of str -> RefusalCurve
    ax : matplotlib Axes, optional
        Drawn into; default a new Figure.

    Returns
    -------
    matplotlib.figure.Figure
    """
    _check_mapping("curves", curves)
    ax = axes_for(ax)
    for name, curve in curves.items():
        ax.plot(curve.coverage, 100 * curve.error, marker=".", label=name)
    ax.set(xlabel="coverage (fraction classified)", ylabel="error among classified (%)")
    ax.invert_xaxis()
    ax.legend()
    return ax.figure


# ----------------------------------------------------------------------------
# Validation helpers
# ----------------------------------------------------------------------------

def _check_1d(name, values):
    values = np.asarray(values, dtype=np.float64)
    if values.ndim != 1 or len(values) == 0:
        raise ValueError(f"{name} must be a non-empty 1-d array, got shape {values.shape}")
    if not np.all(np.isfinite(values)):
        raise ValueError(f"{name} holds NaN or infinite values")
    return values


def _check_labels(probs, labels):
    if probs.ndim != 2:
        raise ValueError(f"probs must have shape (N, C), got shape {probs.shape}")
    labels = np.asarray(_require_labels(labels))
    if labels.shape != (probs.shape[0],):
        raise ValueError(f"{probs.shape[0]} predictions but labels of shape {labels.shape}")
    if np.any((labels < 0) | (labels >= probs.shape[1]) | (labels != np.round(labels))):
        raise ValueError(f"labels must be class indices in [0, {probs.shape[1]})")
    return labels.astype(np.int64)


def _check_mapping(name, mapping):
    if not isinstance(mapping, dict) or not mapping:
        raise ValueError(f"{name} must be a non-empty dict of name -> result")
