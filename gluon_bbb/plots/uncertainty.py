"""Figures of predictive uncertainty (:mod:`gluon_bbb.analysis.calibration`, :mod:`gluon_bbb.analysis.uncertainty`):
reliability diagrams, histograms of an uncertainty score, refusal curves.

Like every plot of gluon_bbb (:mod:`gluon_bbb.plots`), each function draws into the axes it is
given or a new Figure, and returns the Figure.
"""
import numpy as np

from .._checks import check_finite_1d, check_mapping
from .axes import axes_for

__all__ = ["RELIABILITY_COLUMNS", "plot_reliability_diagrams", "plot_score_histograms",
           "plot_refusal_curves"]

#: Panels per row of :func:`plot_reliability_diagrams`.
RELIABILITY_COLUMNS = 4


def plot_reliability_diagrams(diagrams, ax=None):
    """Accuracy against confidence per bin, one panel per model.

    Parameters
    ----------
    diagrams : dict of str -> ReliabilityDiagram
    ax : sequence of matplotlib Axes, one per model (an Axes for one model), optional
        Drawn into; default a new Figure, :data:`RELIABILITY_COLUMNS` panels to a row.

    Returns
    -------
    matplotlib.figure.Figure
    """
    check_mapping("diagrams", diagrams)
    axes = axes_for(ax, len(diagrams), max_columns=RELIABILITY_COLUMNS)
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


def plot_score_histograms(scores, xlabel="predictive entropy (nats)", num_bins=50, ax=None,
                          log_density=True):
    """Overlaid, normalised histograms of an uncertainty score for several data sets.

    Parameters
    ----------
    scores : dict of str -> array_like (n,)
    xlabel : str
    num_bins : int
    ax : matplotlib Axes, optional
        Drawn into; default a new Figure.
    log_density : bool
        A logarithmic density axis (default): a confident classifier's spike near zero
        entropy is a hundred times the density of its tail, where the data sets differ.

    Returns
    -------
    matplotlib.figure.Figure
    """
    check_mapping("scores", scores)
    ax = axes_for(ax)
    values = [check_finite_1d(name, value) for name, value in scores.items()]
    high = max(float(v.max()) for v in values)
    edges = np.linspace(0.0, high if high > 0 else 1.0, num_bins + 1)
    for name, value in zip(scores, values):
        ax.hist(value, bins=edges, density=True, histtype="step", linewidth=1.5, label=name)
    ax.set(xlabel=xlabel, ylabel="density (log scale)" if log_density else "density")
    if log_density:
        ax.set_yscale("log")
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
    check_mapping("curves", curves)
    ax = axes_for(ax)
    for name, curve in curves.items():
        ax.plot(curve.coverage, 100 * curve.error, marker=".", label=name)
    ax.set(xlabel="coverage (fraction classified)", ylabel="error among classified (%)")
    ax.invert_xaxis()
    ax.legend()
    return ax.figure
