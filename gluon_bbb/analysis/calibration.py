"""Scores of predictive uncertainty against the truth: ranking the most uncertain inputs,
calibration (reliability diagrams and the expected calibration error, Guo et al. 2017; the
coverage of a regression's predictive intervals, and the standard error of such a score over a
series, by the moving-block bootstrap), out-of-distribution detection (AUROC) and refusing to
classify.

Every function takes plain arrays, e.g. :class:`gluon_bbb.analysis.uncertainty.Prediction`'s
``mean_probs`` and ``entropy``, so that a Bayes-by-Backprop network and an ordinary one are
scored by the same code. All are re-exported by :mod:`gluon_bbb.analysis.uncertainty`.
"""
from dataclasses import dataclass

import numpy as np

from .._checks import check_finite_1d, check_int

__all__ = ["ReliabilityDiagram", "RefusalCurve", "most_uncertain", "reliability_diagram",
           "expected_calibration_error", "interval_coverage", "block_bootstrap_se", "auroc",
           "refuse_to_classify"]


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
    scores = check_finite_1d("scores", scores)
    check_int("num", num)
    return np.argsort(-scores, kind="stable")[:num]


@dataclass
class ReliabilityDiagram:
    """Calibration of the predicted class's probability in equal-width confidence bins.

    Bin b holds the examples whose confidence lies in (edges[b], edges[b + 1]]
    (the first bin also holds confidence 0).

    Attributes
    ----------
    bin_edges : numpy.ndarray, (B + 1,)
        From 0 to 1.
    counts : numpy.ndarray, (B,)
        Examples per bin.
    confidence : numpy.ndarray, (B,)
        Mean confidence per bin, NaN for empty bins.
    accuracy : numpy.ndarray, (B,)
        Fraction correct per bin, NaN for empty bins.
    ece : float
        Expected calibration error, sum_b (counts_b / N) abs(accuracy_b - confidence_b).
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
    labels = _check_class_labels(probs, labels)
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
    """ECE = sum_b (n_b / N) abs(accuracy_b - confidence_b) over equal-width confidence bins.

    See :func:`reliability_diagram` for the parameters and the binning.

    Returns
    -------
    float, in [0, 1]
    """
    return reliability_diagram(probs, labels, num_bins).ece


def interval_coverage(cdf_values, levels=(0.5, 0.8, 0.9, 0.95)):
    """Fraction of targets inside the central predictive interval of each nominal level.

    The central interval of level p runs from the (1 - p)/2 to the (1 + p)/2 quantile of the
    predictive distribution, so a target y lies inside it iff its predictive distribution
    function F(y) lies in [(1 - p)/2, (1 + p)/2]. A calibrated predictor covers a fraction p
    of the targets; less is overconfident, more underconfident. Taking F(y) (the probability
    integral transform) makes this the same computation for any predictive distribution, e.g.
    :meth:`gluon_bbb.analysis.uncertainty.GaussianMixturePrediction.cdf`.

    Parameters
    ----------
    cdf_values : array_like, (N,), in [0, 1]
        F_n(y_n), each target's value of its own predictive distribution function.
    levels : sequence of float in (0, 1), (K,)

    Returns
    -------
    numpy.ndarray of float64, (K,)
    """
    cdf_values = check_finite_1d("cdf_values", cdf_values)
    if np.any((cdf_values < 0) | (cdf_values > 1)):
        raise ValueError("cdf_values must lie in [0, 1]")
    levels = check_finite_1d("levels", levels)
    if np.any((levels <= 0) | (levels >= 1)):
        raise ValueError(f"levels must lie in (0, 1), got {levels.tolist()}")
    lower, upper = (1.0 - levels) / 2.0, (1.0 + levels) / 2.0
    inside = (cdf_values[None, :] >= lower[:, None]) & (cdf_values[None, :] <= upper[:, None])
    return inside.mean(axis=1)


def block_bootstrap_se(values, block, num_draws=2000, seed=0):
    """Standard error of the mean of a series whose neighbouring values are dependent.

    The moving-block bootstrap (Kunsch 1989): each draw joins ceil(N / block) blocks of
    ``block`` consecutive values, their starts drawn uniformly among the N - block + 1, keeps
    the first N values and takes their mean; the standard error is the standard deviation of
    the draws' means. Dependence within a block is kept, so for positively correlated values
    (e.g. whether consecutive years fall inside a predictive interval) it is larger than
    sqrt(var / N), which assumes independent values; ``block=1`` is the ordinary bootstrap,
    whose standard error tends to sqrt(var / N) (population variance). Where N is a multiple
    of ``block``, it tends to the standard deviation of the N - block + 1 block means divided
    by sqrt(N / block).

    Parameters
    ----------
    values : array_like, (N,), finite, in time order, e.g. 0/1 indicators of coverage
    block : int, 1 <= block <= N
        Length of a block; it should exceed the span of the dependence (e.g. one cycle).
    num_draws : int, >= 2
    seed : int
        Seeds a numpy Generator.

    Returns
    -------
    float
    """
    values = check_finite_1d("values", values)
    check_int("block", block)
    check_int("num_draws", num_draws)
    if block > len(values) or num_draws < 2:
        raise ValueError(f"block must be at most the {len(values)} values and num_draws at least "
                         f"2, got block={block}, num_draws={num_draws}")
    rng = np.random.default_rng(seed)
    num_blocks = -(-len(values) // block)
    starts = rng.integers(0, len(values) - block + 1, size=(num_draws, num_blocks))
    indices = (starts[:, :, None] + np.arange(block)).reshape(num_draws, -1)[:, :len(values)]
    return float(values[indices].mean(axis=1).std())


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
    scores_in = check_finite_1d("scores_in", scores_in)
    scores_out = check_finite_1d("scores_out", scores_out)
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
    thresholds : numpy.ndarray, (T,)
        An example is classified iff its confidence >= threshold.
    coverage : numpy.ndarray, (T,)
        Fraction of examples classified.
    error : numpy.ndarray, (T,)
        Error rate among the classified examples, NaN where none is.
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
    labels = _check_class_labels(probs, labels)
    thresholds = check_finite_1d("thresholds", thresholds)
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


def _check_class_labels(probs, labels):
    if probs.ndim != 2:
        raise ValueError(f"probs must have shape (N, C), got shape {probs.shape}")
    if labels is None:
        raise ValueError("this needs labels, but the data had none; pass labels=...")
    labels = np.asarray(labels)
    if labels.shape != (probs.shape[0],):
        raise ValueError(f"{probs.shape[0]} predictions but labels of shape {labels.shape}")
    if np.any((labels < 0) | (labels >= probs.shape[1]) | (labels != np.round(labels))):
        raise ValueError(f"labels must be class indices in [0, {probs.shape[1]})")
    return labels.astype(np.int64)
