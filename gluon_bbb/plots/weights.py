"""Figures of the weights: their densities (Figure 3), the signal-to-noise ratios (Figure 4),
the pruning curve (Table 2) and one weight's posterior."""
import math
import numbers

import numpy as np

from .._checks import check_int
from .axes import as_numpy, axes_for, despine, finite_number, palette

__all__ = ["weight_densities", "log_snr_density", "pruning_curve", "posterior_gaussian"]

METHOD_LABELS = {"snr": "signal-to-noise ratio", "naive": "|mu| (naive)"}
"""Legend text of each pruning method in :func:`pruning_curve`."""


CUTOFF_COLORS = ("#de8f05", "#029e73", "#cc78bc", "#56b4e9", "black", "#d55e00")
"""Colours of the cutoff lines of :func:`log_snr_density` (the colorblind palette's orange, green,
pink, sky blue, then black and vermillion): no two alike, none the curve's blue."""
CUTOFF_STYLES = ("--", ":", "-.", (0, (6, 2, 1, 2, 1, 2)), (0, (1, 1)), (0, (10, 3)))
"""Dash patterns of the cutoff lines, one each: with :data:`CUTOFF_COLORS`, six cutoffs differ in
both colour and dash."""


# ---------------------------------------------------------------------------- Fig. 3 and 4
def _density_line(values, edges):
    """Histogram density of ``values`` over all of them (values outside the edges count)."""
    counts, _ = np.histogram(values, bins=edges)
    widths = np.diff(edges)
    return 0.5 * (edges[:-1] + edges[1:]), counts / (values.size * widths)


def weight_densities(named_weight_arrays, ax=None, bins=200, limits=None, log_density=True):
    """Density of the weights of several networks on one axes (the paper's Fig. 3).

    The density axis is logarithmic by default: a Bayes-by-Backprop network's spike at zero
    (a density near 100) would otherwise flatten the tails, where the networks differ.

    Parameters
    ----------
    named_weight_arrays : dict of str -> array
        Legend label -> weights of any shape, e.g. ``{'Bayes by Backprop':
        pruning.sample_weights(trainer), 'dropout': np.concatenate([...])}``.
    ax : matplotlib Axes, optional
    bins : int, >= 1
    limits : (float, float), optional
        x range; default symmetric, to the 99.5th percentile of abs(w) over all models.
    log_density : bool
        A logarithmic density axis (empty bins are left out of the lines).

    Returns
    -------
    Figure, one line per model.
    """
    if not isinstance(named_weight_arrays, dict) or not named_weight_arrays:
        raise ValueError("named_weight_arrays must be a non-empty dict of label -> weights")
    bins = check_int("bins", bins)
    arrays = {name: as_numpy(values, f"weights of {name!r}").ravel()
              for name, values in named_weight_arrays.items()}
    for name, values in arrays.items():
        if values.size == 0:
            raise ValueError(f"the weights of {name!r} are empty")
    if limits is None:
        half = max(np.percentile(np.abs(v), 99.5) for v in arrays.values()) or 1.0
        limits = (-half, half)
    low, high = (float(v) for v in limits)
    if not low < high:
        raise ValueError(f"limits must satisfy low < high, got {limits!r}")
    edges = np.linspace(low, high, bins + 1)
    ax = ax if ax is not None else axes_for()
    for (name, values), color in zip(arrays.items(), palette(len(arrays))):
        ax.plot(*_density_line(values, edges), color=color, label=name)
    ax.set_xlabel("weight")
    ax.set_ylabel("density (log scale)" if log_density else "density")
    if log_density:
        ax.set_yscale("log")
    ax.set_xlim(low, high)
    ax.legend(frameon=False)
    despine(ax)
    return ax.figure


def log_snr_density(snr, cutoffs=None, ax=None, bins=200, lowest=0.01):
    """Density and CDF of the signal-to-noise ratio in decibels (the paper's Fig. 4).

    The x axis is 10 log10(abs(mu) / sigma), as in the paper. Weights with a ratio of 0 or
    inf have no finite logarithm and are left out of the curves.

    Parameters
    ----------
    snr : array, (num_weights,)
        From :func:`gluon_bbb.analysis.pruning.signal_to_noise`.
    cutoffs : sequence of float in (0, 1), optional
        Fractions pruned: a vertical line marks the ratio below which each fraction of the
        weights lies.
    ax : pair of matplotlib Axes, optional
        Drawn into; default a new Figure with two panels.
    bins : int, >= 1
    lowest : float in [0, 1), optional
        The x axis starts at this quantile of the finite ratios, so a long tail of tiny ratios
        does not squash the part where the cutoffs lie; the x label says what is left out.
        The density and the CDF still count every weight. 0 or None: the whole range.

    Returns
    -------
    Figure with two axes (density, CDF), each with 1 + len(cutoffs) lines.
    """
    snr = as_numpy(snr, "snr").ravel()
    bins = check_int("bins", bins)
    with np.errstate(divide="ignore"):
        decibels = 10.0 * np.log10(snr)
    decibels = decibels[np.isfinite(decibels)]
    if decibels.size == 0:
        raise ValueError("snr holds no finite positive ratios")
    cutoffs = [] if cutoffs is None else list(cutoffs)
    for fraction in cutoffs:
        if isinstance(fraction, bool) or not isinstance(fraction, numbers.Real) or not 0 < fraction < 1:
            raise ValueError(f"cutoffs must be fractions in (0, 1), got {fraction!r}")
    lowest = 0.0 if lowest is None else finite_number(lowest, "lowest")
    if not 0 <= lowest < 1:
        raise ValueError(f"lowest must be a fraction in [0, 1), got {lowest!r}")
    density_ax, cdf_ax = axes_for(ax, 2, figsize=(10.0, 3.8))
    start = float(np.quantile(decibels, lowest)) if lowest else float(decibels.min())
    edges = np.linspace(start, decibels.max() + 1e-9, bins + 1)
    centers, density = _density_line(decibels, edges)  # over all weights, those left out too
    counts, _ = np.histogram(decibels, bins=edges)
    curve_color = palette(1)[0]
    cut_colors = [CUTOFF_COLORS[i % len(CUTOFF_COLORS)] for i in range(len(cutoffs))]
    density_ax.plot(centers, density, color=curve_color)
    below = np.count_nonzero(decibels < edges[0])
    cdf_ax.plot(edges[1:], (below + np.cumsum(counts)) / decibels.size, color=curve_color)
    with np.errstate(divide="ignore"):
        positions = 10.0 * np.log10(np.quantile(snr, cutoffs)) if cutoffs else []
    for i, (fraction, position, color) in enumerate(zip(cutoffs, positions, cut_colors)):
        style = CUTOFF_STYLES[i % len(CUTOFF_STYLES)]
        for ax in (density_ax, cdf_ax):
            ax.axvline(position, color=color, linestyle=style, linewidth=1.6,
                       label=f"{100 * fraction:g}% removed")
    for ax, title in ((density_ax, "signal-to-noise ratio of the weights: density"),
                      (cdf_ax, "fraction of the weights below a ratio (CDF)")):
        ax.set_xlabel("signal-to-noise ratio (dB)" + (
            f"\nthe lowest {100 * lowest:g}% (down to {decibels.min():.0f} dB) left of the axis"
            if lowest else ""))
        ax.set_xlim(edges[0], edges[-1])
        ax.set_title(title)
        if cutoffs:
            ax.legend(frameon=False)
    density_ax.set_ylabel("density")
    cdf_ax.set_ylabel("fraction of weights")
    despine(density_ax, cdf_ax)
    return density_ax.figure


# ---------------------------------------------------------------------------- Table 2
def pruning_curve(table, ax=None):
    """Test error against the share of weights kept, one line per pruning method (Table 2).

    Both axes are logarithmic: the interesting region (90-99% of the weights removed, errors
    of a few percent) is then spread out instead of squeezed into a corner. The x axis runs
    from all weights kept (left) to few kept (right).

    Parameters
    ----------
    table : list of dict
        Rows of :func:`gluon_bbb.analysis.pruning.pruning_table` (or read back from its JSON), each
        with 'fraction' (removed, in [0, 1)), 'method' and 'test_error'.
    ax : matplotlib Axes, optional

    Returns
    -------
    Figure, one line per method.
    """
    from matplotlib import ticker  # here, not at the top: a light import
    if not isinstance(table, (list, tuple)) or not table:
        raise ValueError("table must be a non-empty list of rows")
    for row in table:
        if not isinstance(row, dict) or not {"fraction", "method", "test_error"} <= set(row):
            raise ValueError(f"each row of table needs 'fraction', 'method' and 'test_error', got {row!r}")
        if not (0 <= row["fraction"] < 1 and row["test_error"] > 0):
            raise ValueError(f"each row needs a fraction in [0, 1) and a positive test error, got {row!r}")
    methods = list(dict.fromkeys(row["method"] for row in table))
    ax = ax if ax is not None else axes_for()
    for method, color in zip(methods, palette(len(methods))):
        rows = sorted((row for row in table if row["method"] == method), key=lambda r: r["fraction"])
        ax.plot([100 * (1 - r["fraction"]) for r in rows], [100 * r["test_error"] for r in rows],
                marker="o", color=color, label=METHOD_LABELS.get(method, method))
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.invert_xaxis()
    for axis in (ax.xaxis, ax.yaxis):
        axis.set_major_formatter(ticker.ScalarFormatter())
        axis.set_minor_formatter(ticker.NullFormatter())
    kept = sorted({100 * (1 - row["fraction"]) for row in table})
    ax.set_xticks(kept)
    ax.set_xticklabels([f"{value:g}" for value in kept])
    low, high = min(errors := [100 * row["test_error"] for row in table]), max(errors)
    nice = [m * 10.0 ** e for e in range(-2, 3) for m in (1, 2, 5)]
    ticks = [t for t in nice if low / 1.1 <= t <= high * 1.1]
    if len(ticks) < 3:  # often all within one decade (1.5% to 1.8%, say)
        ticks = sorted({float(f"{v:.2g}") for v in np.geomspace(low, high, 6)})
    elif low < ticks[0] / 1.3:  # label the unpruned network's error too
        ticks.insert(0, float(f"{low:.2g}"))
    ax.set_yticks(ticks)
    ax.set_yticklabels([f"{value:g}" for value in ticks])
    ax.set_xlabel("weights kept (%, log scale)")
    ax.set_ylabel("test error (%, log scale)")
    ax.set_title("test error as weights are removed")
    ax.legend(title="removed first: lowest", frameon=False)
    despine(ax)
    return ax.figure


# ---------------------------------------------------------------------------- one weight
def posterior_gaussian(mu, sigma, ax=None, label=None, num_std=4.0):
    """The density N(w; mu, sigma^2) of one weight's posterior, over mu +- num_std sigma.

    Parameters
    ----------
    mu : float
    sigma : float, > 0
    ax : matplotlib Axes, optional
        Draw several weights on one axes by passing the same ``ax``.
    label : str, optional
        Legend entry; default "mu = ..., sigma = ...".
    num_std : float, > 0

    Returns
    -------
    Figure, one more line on the axes.
    """
    mu = finite_number(mu, "mu")
    sigma = finite_number(sigma, "sigma", positive=True)
    num_std = finite_number(num_std, "num_std", positive=True)
    w = np.linspace(mu - num_std * sigma, mu + num_std * sigma, 201)
    density = np.exp(-0.5 * ((w - mu) / sigma) ** 2) / (sigma * math.sqrt(2.0 * math.pi))
    ax = ax if ax is not None else axes_for()
    color = palette(len(ax.lines) + 1)[-1]
    ax.plot(w, density, color=color, label=label or f"mu = {mu:.3g}, sigma = {sigma:.3g}")
    ax.set_xlabel("weight")
    ax.set_ylabel("posterior density")
    ax.legend(frameon=False)
    despine(ax)
    return ax.figure
