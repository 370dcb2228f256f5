"""Predictive uncertainty of trained MNIST run folders: calibration, OOD detection, refusal.

:func:`evaluate_uncertainty` loads the best checkpoint (on validation) of a folder written by
``gluon-bbb reproduce`` for a network trained on MNIST and measures, on the MNIST test set:

- the test error and the expected calibration error (:data:`NUM_BINS` equal-width bins) of
  the posterior-mean network and, for Bayes by Backprop, of the Monte Carlo average of
  ``mc_samples`` sampled networks (a deterministic baseline has only its softmax);
- how well an uncertainty score separates the MNIST test images (in distribution) from the
  Fashion-MNIST test images and from uniform-noise images (out of distribution), as the
  area under the ROC curve (:func:`gluon_bbb.analysis.uncertainty.auroc`: 1 perfect, 0.5 chance):
  the predictive entropy of every predictor and, for the Monte Carlo average, the mutual
  information between the label and the weights;
- the error among the images kept when the network refuses the least confident ones, at the
  coverages :data:`COVERAGES` (:func:`gluon_bbb.analysis.uncertainty.refuse_to_classify`).

The noise images have integer pixels drawn uniformly from 0..255 with a seeded generator and
go through the run's own preprocessing (the paper's: divide by 126), as do the Fashion-MNIST
images. One set of ``mc_samples`` weight samples serves all three sets. Nothing is downloaded:
the data are read from local files (see :func:`gluon_bbb.data.find_data_dir`).

Example::

    from gluon_bbb import uncertainty_eval
    result = uncertainty_eval.evaluate_uncertainty("results/bbb-mixture-400")
    print(result["predictors"]["mc"]["auroc_entropy"]["fashion"])
"""
from dataclasses import dataclass
import os
import re
import time

import numpy as np

from .. import data
from .._checks import check_int
from ..context import resolve_context
from ..analysis.uncertainty import (Prediction, auroc, deterministic_predict,
                                    expected_calibration_error, mc_predict,
                                    plot_reliability_diagrams, plot_score_histograms,
                                    refuse_to_classify, reliability_diagram)
from .configs import run_kind
from .runfolder import FILES, read_run_config
from .runners import make_runner

__all__ = [
    "COVERAGES",
    "NUM_BINS",
    "SETS",
    "RunPredictions",
    "noise_images",
    "load_evaluation_sets",
    "predict_run",
    "coverage_thresholds",
    "refusal_at_coverages",
    "summarize_predictor",
    "summarize",
    "evaluate_uncertainty",
    "uncertainty_table",
    "reliability_figure",
    "entropy_figure",
    "figure_name",
]

#: Fractions of the test images kept (the most confident ones) for the refusal errors.
COVERAGES = (1.0, 0.95, 0.9, 0.8)
#: Equal-width confidence bins of the expected calibration error.
NUM_BINS = 15
#: The evaluation sets: MNIST test (in distribution), Fashion-MNIST test and noise (out).
SETS = ("mnist", "fashion", "noise")
SET_NAMES = {"mnist": "MNIST test", "fashion": "Fashion-MNIST test", "noise": "uniform noise"}
OOD_DATASET = "fashion-mnist"
BATCH_SIZE = 10000  # inputs per forward pass: a few large matrix products per weight sample


@dataclass
class RunPredictions:
    """The predictions of one run's best network on the evaluation sets.

    Attributes
    ----------
    run_dir : str
    config : dict, the run's ``config.json``
    best_epoch : int
    labels : numpy.ndarray of int, (N,), the MNIST test labels
    predictions : dict
        predictor -> set -> :class:`~gluon_bbb.analysis.uncertainty.Prediction`; predictors are
        ``"mean"`` (the posterior-mean network, or the deterministic network) and, for
        Bayes by Backprop, ``"mc"``; sets are :data:`SETS`.
    mc_samples : int or None, None for a deterministic run
    seconds : float, loading and predicting
    """

    run_dir: str
    config: dict
    best_epoch: int
    labels: np.ndarray
    predictions: dict
    mc_samples: int
    seconds: float

    @property
    def name(self):
        """The run folder's name, e.g. ``bbb-mixture-400-lrdecay`` (two runs of one
        configuration stay apart); the configuration is ``config['reproduce']``."""
        return os.path.basename(os.path.normpath(self.run_dir))

    def label(self, predictor):
        """How a predictor is called in tables and figures."""
        if predictor == "mc":
            return f"MC average of {self.mc_samples}"
        return "posterior mean" if self.config["method"] == "bbb" else "network (softmax)"


# ---------------------------------------------------------------------------- data
def noise_images(num, dataset="mnist", preprocessing="paper", seed=0):
    """``num`` images of integer pixels uniform in 0..255, preprocessed like ``dataset``'s.

    Parameters
    ----------
    num : int, >= 1
    dataset : str, whose preprocessing constants apply (see :func:`gluon_bbb.data.preprocess`)
    preprocessing : {"paper", "255", "standardize"}
    seed : int

    Returns
    -------
    numpy.ndarray of float32, (num, 784)
    """
    check_int("num_noise", num)
    rng = np.random.default_rng(seed)
    pixels = rng.integers(0, 256, size=(num,) + data.IMAGE_SHAPE, dtype=np.uint8)
    return data.preprocess(pixels, preprocessing, *data.TRAIN_PIXEL_STATS[dataset])


def _test_images(name, data_dir, config):
    """Test images of data set ``name``, preprocessed like the run's, and their labels."""
    images, labels = data.load_raw(name, "test", data_dir, download=False)
    subset = config.get("subset")
    if subset is not None:  # smoke runs
        images, labels = images[:subset], labels[:subset]
    return data.preprocess(images, config["preprocessing"],
                           *data.TRAIN_PIXEL_STATS[config["dataset"]]), labels


def load_evaluation_sets(config, data_dir=None, ood_data_dir=None, num_noise=10000, seed=0):
    """The inputs of :data:`SETS` for a run, and the MNIST test labels.

    Parameters
    ----------
    config : dict, a run's ``config.json`` (its dataset must be MNIST)
    data_dir : str, optional, where MNIST is (see :func:`gluon_bbb.data.find_data_dir`)
    ood_data_dir : str, optional, where Fashion-MNIST is; default ``data_dir``
    num_noise : int, noise images
    seed : int, seeds the noise

    Returns
    -------
    inputs : dict of set -> numpy.ndarray float32 (n, 784)
    labels : numpy.ndarray of int, the MNIST test labels

    Raises
    ------
    FileNotFoundError
        MNIST or Fashion-MNIST is missing; the message names the folders searched.
    """
    check_int("seed", seed, minimum=0)
    noise = noise_images(num_noise, config["dataset"], config["preprocessing"], seed)
    mnist, labels = _test_images(config["dataset"], data_dir, config)
    try:
        fashion, _ = _test_images(OOD_DATASET, data_dir if ood_data_dir is None else ood_data_dir,
                                  config)
    except data.DataNotFoundError as error:
        raise FileNotFoundError(
            f"Fashion-MNIST, the out-of-distribution test set, is missing (pass ood_data_dir, "
            f"--ood-data-dir on the command line, with the folder holding fashion-mnist/): "
            f"{error}") from None
    return {"mnist": mnist, "fashion": fashion, "noise": noise}, labels.astype(np.int64)


# ---------------------------------------------------------------------------- prediction
def _mnist_config(run_dir):
    config = read_run_config(run_dir)
    if config.get("dataset") != "mnist":
        raise ValueError(f"{run_dir} holds a run trained on {config.get('dataset')!r}; the "
                         "uncertainty evaluation needs a run trained on MNIST (Fashion-MNIST "
                         "is its out-of-distribution set)")
    best = os.path.join(run_dir, FILES[run_kind(config)]["best"])
    if not os.path.isfile(best):
        raise FileNotFoundError(f"{best} not found: {run_dir} has no completed epoch yet")
    return config


def _split(prediction, sizes, labels):
    """Per-set Predictions from one Prediction over the concatenated sets."""
    bounds = np.cumsum([0] + [sizes[name] for name in SETS])
    return {name: Prediction(prediction.sample_probs[:, bounds[i]:bounds[i + 1]],
                             labels if name == "mnist" else None)
            for i, name in enumerate(SETS)}


def predict_run(run_dir, mc_samples=10, data_dir=None, ood_data_dir=None, num_noise=10000,
                seed=0, ctx=None):
    """Predictions of a run's best network on the MNIST test set, Fashion-MNIST and noise.

    Parameters
    ----------
    run_dir : str, a folder written by ``gluon-bbb reproduce`` for an MNIST configuration
    mc_samples : int, weight samples of the Monte Carlo average (Bayes by Backprop only)
    data_dir : str, optional, default the run's recorded data folder, then the usual search
    ood_data_dir, num_noise, seed
        See :func:`load_evaluation_sets`.
    ctx : mx.Context or str, optional

    Returns
    -------
    RunPredictions

    Raises
    ------
    FileNotFoundError
        No run folder, no best checkpoint, or missing data.
    ValueError
        The run was not trained on MNIST, or a bad argument.
    """
    start = time.time()
    check_int("mc_samples", mc_samples)
    config = _mnist_config(run_dir)
    inputs, labels = load_evaluation_sets(config, data_dir or config.get("data_dir"),
                                          ood_data_dir, num_noise, seed)
    ctx = resolve_context(ctx)
    runner = make_runner(config, ctx)
    best_epoch = runner.load_best(run_dir)
    everything = np.concatenate([inputs[name] for name in SETS])
    sizes = {name: len(inputs[name]) for name in SETS}
    if runner.kind == "bbb":
        runner.trainer.set_mean()
        predictions = {"mean": deterministic_predict(runner.trainer.net, everything, ctx=ctx,
                                                     batch_size=BATCH_SIZE),
                       "mc": mc_predict(runner.trainer, everything, mc_samples,
                                        batch_size=BATCH_SIZE)}
    else:
        predictions = {"mean": deterministic_predict(runner.net, everything, ctx=ctx,
                                                     batch_size=BATCH_SIZE)}
        mc_samples = None
    predictions = {key: _split(value, sizes, labels) for key, value in predictions.items()}
    return RunPredictions(str(run_dir), config, best_epoch, labels, predictions, mc_samples,
                          time.time() - start)


# ---------------------------------------------------------------------------- measures
def coverage_thresholds(confidence, coverages=COVERAGES):
    """Confidence thresholds that keep at least each fraction of the examples.

    Threshold c keeps the examples with confidence >= c: the ceil(coverage * N) most
    confident ones, and any others tied with the last of them.

    Parameters
    ----------
    confidence : array_like, (N,)
    coverages : sequence of float in (0, 1]

    Returns
    -------
    numpy.ndarray, (len(coverages),)
    """
    confidence = np.sort(np.asarray(confidence, dtype=np.float64).ravel())
    coverages = np.asarray(coverages, dtype=np.float64)
    if confidence.size == 0:
        raise ValueError("no confidences given")
    if coverages.ndim != 1 or np.any((coverages <= 0) | (coverages > 1)):
        raise ValueError(f"coverages must be fractions in (0, 1], got {coverages.tolist()}")
    count = len(confidence)
    keep = np.clip(np.ceil(coverages * count - 1e-9).astype(np.int64), 1, count)
    return confidence[count - keep]


def refusal_at_coverages(probs, labels, coverages=COVERAGES):
    """Error among the kept examples when refusing the least confident ones.

    Parameters
    ----------
    probs : array_like, (N, C) predictive probabilities
    labels : array_like of int, (N,)
    coverages : sequence of float in (0, 1], the target fractions kept

    Returns
    -------
    list of dict
        'target_coverage', 'coverage' (reached: ties may keep a few more), 'threshold',
        'error' per coverage.
    """
    probs = np.asarray(probs, dtype=np.float64)
    thresholds = coverage_thresholds(probs.max(axis=-1), coverages)
    curve = refuse_to_classify(probs, labels, thresholds)
    return [{"target_coverage": float(target), "coverage": float(coverage),
             "threshold": float(threshold), "error": float(error)}
            for target, coverage, threshold, error in zip(coverages, curve.coverage,
                                                          curve.thresholds, curve.error)]


def summarize_predictor(predictions, coverages=COVERAGES, num_bins=NUM_BINS,
                        mutual_information=False):
    """The measures of one predictor on the evaluation sets.

    Parameters
    ----------
    predictions : dict of set -> Prediction, keys :data:`SETS` (``"mnist"`` with labels)
    coverages : sequence of float, see :func:`refusal_at_coverages`
    num_bins : int, bins of the expected calibration error
    mutual_information : bool
        Also the AUROC of the mutual information (for a Monte Carlo average).

    Returns
    -------
    dict
        'test_error', 'ece', 'mean_confidence' (on MNIST: above 1 - test_error means
        over-confident), 'mean_entropy' (per set), 'auroc_entropy' and
        'auroc_mutual_information' (per out-of-distribution set; the latter None unless
        asked for), 'mean_mutual_information' (per set, or None), 'refusal'.
    """
    inside = predictions["mnist"]
    outside = [name for name in SETS if name != "mnist"]

    def aurocs(score):
        return {name: auroc(getattr(inside, score), getattr(predictions[name], score))
                for name in outside}

    def means(score):
        return {name: float(np.mean(getattr(predictions[name], score))) for name in SETS}

    return {
        "test_error": inside.error,
        "ece": expected_calibration_error(inside.mean_probs, inside.labels, num_bins),
        "mean_confidence": float(np.mean(inside.confidence)),
        "mean_entropy": means("entropy"),
        "auroc_entropy": aurocs("entropy"),
        "mean_mutual_information": means("mutual_information") if mutual_information else None,
        "auroc_mutual_information": aurocs("mutual_information") if mutual_information else None,
        "refusal": refusal_at_coverages(inside.mean_probs, inside.labels, coverages),
    }


def summarize(run, coverages=COVERAGES, num_bins=NUM_BINS):
    """The JSON-serialisable measures of a :class:`RunPredictions` (see
    :func:`evaluate_uncertainty`)."""
    return {
        "run_dir": run.run_dir,
        "name": run.name,
        "config": run.config["reproduce"],
        "method": run.config["method"],
        "best_epoch": run.best_epoch,
        "mc_samples": run.mc_samples,
        "num_examples": {name: len(run.predictions["mean"][name].entropy) for name in SETS},
        "num_bins": num_bins,
        "predictors": {key: dict(summarize_predictor(sets, coverages, num_bins, key == "mc"),
                                 label=run.label(key))
                       for key, sets in run.predictions.items()},
        "seconds": run.seconds,
    }


def evaluate_uncertainty(run_dir, mc_samples=10, data_dir=None, ood_data_dir=None,
                         num_noise=10000, seed=0, ctx=None):
    """Calibration, OOD detection and refusal of a run folder's best network on MNIST.

    Parameters
    ----------
    run_dir, mc_samples, data_dir, ood_data_dir, num_noise, seed, ctx
        See :func:`predict_run`.

    Returns
    -------
    dict
        'run_dir', 'config', 'method', 'best_epoch', 'mc_samples' (None for a deterministic
        run), 'num_examples' (per set), 'num_bins', 'seconds', and 'predictors': ``"mean"``
        and, for Bayes by Backprop, ``"mc"``, each with the keys of
        :func:`summarize_predictor` and a 'label'.
    """
    return summarize(predict_run(run_dir, mc_samples, data_dir, ood_data_dir, num_noise, seed,
                                 ctx))


# ---------------------------------------------------------------------------- reporting
def _percent(value):
    return "-" if value is None else f"{100 * value:.2f}%"


def _number(value):
    return "-" if value is None else f"{value:.4f}"


def uncertainty_table(results):
    """A markdown table of :func:`evaluate_uncertainty` results, one row per predictor."""
    coverages = [row["target_coverage"]
                 for row in next(iter(results[0]["predictors"].values()))["refusal"]]
    kept = " | ".join(f"error kept {100 * c:g}%" for c in coverages)
    lines = [f"| run | predictor | test error | ECE | AUROC H Fashion | AUROC H noise "
             f"| AUROC MI Fashion | AUROC MI noise | {kept} |",
             "| --- | --- |" + " ---: |" * (6 + len(coverages))]
    for result in results:
        for summary in result["predictors"].values():
            mutual = summary["auroc_mutual_information"] or {}
            refusal = " | ".join(_percent(row["error"]) for row in summary["refusal"])
            lines.append(
                f"| {result['name']} | {summary['label']} | {_percent(summary['test_error'])} "
                f"| {_number(summary['ece'])} | {_number(summary['auroc_entropy']['fashion'])} "
                f"| {_number(summary['auroc_entropy']['noise'])} "
                f"| {_number(mutual.get('fashion'))} | {_number(mutual.get('noise'))} "
                f"| {refusal} |")
    return "\n".join(lines) + "\n"


def _headline(run):
    """The predictor a figure shows for a run: the MC average if there is one."""
    return "mc" if "mc" in run.predictions else "mean"


def reliability_figure(runs, num_bins=NUM_BINS, ax=None):
    """Reliability diagrams of every predictor of every run, one panel each.

    Parameters
    ----------
    runs : list of RunPredictions
    num_bins : int
    ax : sequence of matplotlib Axes, one per panel, optional

    Returns
    -------
    matplotlib.figure.Figure
    """
    diagrams = {}
    for run in runs:
        for key, sets in run.predictions.items():
            inside = sets["mnist"]
            diagrams[f"{run.name}\n{run.label(key)}"] = reliability_diagram(
                inside.mean_probs, inside.labels, num_bins)
    return plot_reliability_diagrams(diagrams, ax=ax)


def entropy_figure(run, ax=None):
    """Histograms of the predictive entropy on the three sets (the MC average for BBB).

    Parameters
    ----------
    run : RunPredictions
    ax : matplotlib Axes, optional

    Returns
    -------
    matplotlib.figure.Figure
    """
    key = _headline(run)
    figure = plot_score_histograms({SET_NAMES[name]: run.predictions[key][name].entropy
                                    for name in SETS}, ax=ax)
    (ax or figure.axes[0]).set_title(f"{run.name}, {run.label(key)}")
    return figure


def figure_name(run):
    """A file-name-safe stem for a run's figures."""
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", os.path.basename(os.path.normpath(run.run_dir)))
