"""Figures of the paper and of training runs, with matplotlib and seaborn.

Every function draws into the axes it is given (``ax``, or ``axes`` for the two-panel
figures, or ``fig`` for the image grid) or, by default, into a new ``matplotlib.figure.Figure``
that is not registered with pyplot; it returns the Figure. Nothing here changes global
state (no ``plt.show``, no style changes): save with ``fig.savefig(path)``; in Jupyter a
returned Figure is displayed like any other.

Drawing weight samples for :func:`weight_densities` is done by
:func:`gluon_bbb.pruning.sample_weights`, next to :func:`gluon_bbb.pruning.signal_to_noise`.

Densities of millions of weights are histograms drawn as lines (``np.histogram``, linear in
the number of weights), not kernel density estimates. matplotlib is imported when drawing.
"""
import io
import math
import numbers

import numpy as np
from ._checks import check_finite_1d, check_int, check_mapping
from .checkpoint import atomic_write_bytes

__all__ = [
    "axes_for",
    "save_png",
    "image_grid",
    "training_curves",
    "error_curves",
    "posterior_widths",
    "weight_densities",
    "log_snr_density",
    "pruning_curve",
    "posterior_gaussian",
]

METHOD_LABELS = {"snr": "signal-to-noise ratio", "naive": "|mu| (naive)"}
"""Legend text of each pruning method in :func:`pruning_curve`."""


# ---------------------------------------------------------------------------- helpers
def axes_for(ax=None, count=1, figsize=None, sharey=False, max_columns=None):
    """The axes a plot function draws on: the caller's, or new ones in a new Figure.

    Every plot function of gluon_bbb takes ``ax=None`` and returns the Figure it drew on;
    this is the one place that makes that rule.

    Parameters
    ----------
    ax : matplotlib Axes, sequence of ``count`` Axes, or None
        None: a new Figure with ``count`` panels side by side.
    count : int, >= 1
        Panels the plot needs (one per model for multi-panel plots).
    figsize : (float, float), optional
        Of a new Figure; default 6 x 4 inches, 4 inches wide per panel for several.
    sharey : bool
        New panels share their y axis.
    max_columns : int, optional
        New panels wrap into rows of at most this many (default: one row).

    Returns
    -------
    Axes (count 1) or list of Axes
    """
    count = check_int("count", count)
    if ax is None:
        from matplotlib.figure import Figure
        columns = count if max_columns is None else min(count, check_int("max_columns", max_columns))
        rows = -(-count // columns)
        figure = Figure(figsize=figsize or ((6.0, 4.0) if count == 1 else (4.0 * columns, 4.0 * rows)),
                        constrained_layout=True)
        axes = list(figure.subplots(rows, columns, squeeze=False, sharey=sharey).ravel())
        for spare in axes[count:]:
            figure.delaxes(spare)
        return axes[:count] if count > 1 else axes[0]
    if count == 1:
        if isinstance(ax, (list, tuple)):
            raise ValueError("ax must be one matplotlib Axes for this plot, got a sequence")
        return ax
    if not isinstance(ax, (list, tuple)) or len(ax) != count:
        raise ValueError(f"this plot draws {count} panels: ax must be a sequence of {count} "
                         f"Axes, got {ax!r:.60}")
    return list(ax)


def save_png(figure, path, dpi=120):
    """Write ``figure`` as a PNG to ``path`` atomically (a reader never sees half a file)."""
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=dpi)
    atomic_write_bytes(path, buffer.getvalue())


def _colors(count):
    # seaborn is imported here, not at the top: it adds about a second to ``import gluon_bbb``.
    import seaborn as sns

    return sns.color_palette("colorblind", max(int(count), 1))


def _despine(*axes):
    import seaborn as sns

    for ax in axes:
        sns.despine(ax=ax)


def _as_numpy(values, name):
    if hasattr(values, "asnumpy"):
        values = values.asnumpy()
    try:
        return np.asarray(values, dtype=float)
    except (TypeError, ValueError):
        raise TypeError(f"{name} must be an array of numbers, got {type(values).__name__}") from None


def _finite_number(value, name, positive=False):
    if hasattr(value, "asscalar"):
        value = value.asscalar()
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a number, got {type(value).__name__}")
    if not math.isfinite(value) or (positive and not value > 0):
        raise ValueError(f"{name} must be a {'positive' if positive else 'finite'} number, got {value!r}")
    return float(value)


# ---------------------------------------------------------------------------- data
def image_grid(images, labels, class_names=None, rows=3, cols=3, predictions=None, fig=None):
    """The first ``rows * cols`` images in a grid, titled by their class.

    Parameters
    ----------
    images : array or NDArray, (n, H, W), (n, 1, H, W) or (n, H * W) with square images
    labels : array or NDArray, (n,) class indices
    class_names : sequence of str, optional
        Name of each class index, e.g. ``data.CLASS_NAMES['fashion-mnist']``.
    rows, cols : int, >= 1
    predictions : array or NDArray, (n,), optional
        Predicted class indices: titles become "true / predicted", in red where wrong.
    fig : matplotlib Figure, optional
        Drawn into (it gets rows x cols new axes); default a new Figure.

    Returns
    -------
    Figure with rows * cols axes (those without an image are hidden).
    """
    rows, cols = check_int("rows", rows), check_int("cols", cols)
    images, labels = _as_numpy(images, "images"), _as_numpy(labels, "labels").astype(int)
    if images.ndim == 4 and images.shape[1] == 1:
        images = images[:, 0]
    if images.ndim == 2:
        side = int(round(math.sqrt(images.shape[1])))
        if side * side != images.shape[1]:
            raise ValueError(f"images of shape {images.shape} are not square: pass (n, H, W)")
        images = images.reshape(len(images), side, side)
    if images.ndim != 3:
        raise ValueError(f"images must have shape (n, H, W), (n, 1, H, W) or (n, H*W), got {images.shape}")
    if labels.shape != (len(images),):
        raise ValueError(f"labels must have shape ({len(images)},), got {labels.shape}")
    if predictions is not None:
        predictions = _as_numpy(predictions, "predictions").astype(int)
        if predictions.shape != labels.shape:
            raise ValueError(f"predictions must have shape {labels.shape}, got {predictions.shape}")

    def name(index):
        return str(class_names[index]) if class_names is not None else str(index)

    if fig is None:
        from matplotlib.figure import Figure
        fig = Figure(figsize=(1.6 * cols, 1.8 * rows), constrained_layout=True)
    axes = fig.subplots(rows, cols, squeeze=False).ravel()
    for i, ax in enumerate(axes):
        ax.set_axis_off()
        if i >= len(images):
            continue
        ax.imshow(images[i], cmap="gray")
        if predictions is None:
            ax.set_title(name(labels[i]), fontsize=9)
        else:
            wrong = predictions[i] != labels[i]
            ax.set_title(f"{name(labels[i])} / {name(predictions[i])}", fontsize=9,
                         color="tab:red" if wrong else "black")
    return fig


# ---------------------------------------------------------------------------- training
LOSS_KEYS = ("loss", "nll", "complexity")
ERROR_KEYS = ("train_error", "validation_error", "test_error")


def training_curves(history, label=None, ax=None):
    """Loss (and its nll and complexity parts) and error rates per epoch.

    Parameters
    ----------
    history : list of dict
        :attr:`BBBTrainer.history` or the history of
        :func:`gluon_bbb.baselines.train_deterministic`. The keys present among 'loss', 'nll',
        'complexity' are drawn on the left, 'train_error', 'validation_error' and 'test_error'
        (in %) on the right.
    label : str, optional
        Prefix of the legend entries, to compare several runs on the same ``axes``.
    ax : pair of matplotlib Axes, optional
        Drawn into; default a new Figure with two panels.

    Returns
    -------
    Figure with two axes: one line per key present. The cost axis is logarithmic when every
    value drawn on it is positive, so the likelihood cost stays visible beside a complexity
    cost hundreds of times larger.
    """
    from matplotlib import ticker  # here, not at the top: a light import
    if not isinstance(history, (list, tuple)) or not history or not all(isinstance(r, dict) for r in history):
        raise ValueError("history must be a non-empty list of dicts, one per epoch")
    loss_ax, error_ax = axes_for(ax, 2, figsize=(10.0, 3.8))
    epochs = [record.get("epoch", i + 1) for i, record in enumerate(history)]
    prefix = f"{label}: " if label else ""
    for ax, keys, scale in ((loss_ax, LOSS_KEYS, 1.0), (error_ax, ERROR_KEYS, 100.0)):
        present = [key for key in keys if all(record.get(key) is not None for record in history)]
        drawn = len(ax.lines)  # earlier runs on the same axes keep their colours
        for key, color in zip(present, _colors(drawn + len(present))[drawn:]):
            values = [scale * record[key] for record in history]
            dashed = dict(linestyle="--", zorder=3) if key == "loss" else {}  # over complexity
            ax.plot(epochs, values, marker="o", markersize=3, color=color, label=prefix + key, **dashed)
        ax.set_xlabel("epoch")
        ax.xaxis.set_major_locator(ticker.MaxNLocator(integer=True))
        if present:
            ax.legend(frameon=False)
    positive = all(value > 0 for line in loss_ax.lines for value in line.get_ydata())
    if positive and loss_ax.lines:  # the complexity cost is often 100x the likelihood cost
        loss_ax.set_yscale("log")
    loss_ax.set_ylabel("summed over the epoch (nats" + (", log scale)" if positive else ")"))
    loss_ax.set_title("cost per epoch: cost = complexity + likelihood (nll)")
    error_ax.set_ylabel("error (%)")
    error_ax.set_title("classification error per epoch")
    _despine(loss_ax, error_ax)
    return loss_ax.figure


def _epoch_values(histories, read):
    """{label: (epochs, values)} of each run's records that ``read(record)`` gives values for."""
    check_mapping("histories", histories)
    curves = {}
    for label, history in histories.items():
        if not isinstance(history, (list, tuple)) or not all(isinstance(r, dict) for r in history):
            raise ValueError(f"histories[{label!r}] must be a list of dicts, one per epoch")
        points = [(r.get("epoch", i + 1), read(r)) for i, r in enumerate(history)
                  if read(r) is not None]
        if points:
            curves[label] = (np.array([p[0] for p in points]), np.array([p[1] for p in points], float))
    if not curves:
        raise ValueError("no run in histories has the values to draw")
    return curves


def error_curves(histories, key="validation_error", reference=None, span=1.0, ax=None):
    """Error against epoch for several runs (the paper's Figure 2), zoomed on their lowest
    values: the y axis runs from just below the lowest error to ``span`` points above it, with a
    grid every 0.1 point, so the last tenths of a percent after hundreds of epochs can be read.

    Parameters
    ----------
    histories : dict of label -> list of dict, per-epoch records (e.g. a result.json's 'history')
    key : str, the error drawn, a fraction (e.g. 'validation_error', 'test_error')
    reference : dict of label -> float, optional; errors in % drawn as dotted lines (the paper's)
    span : float, > 0, height of the y axis in percentage points
    ax : matplotlib Axes, optional

    Returns the Figure, one line per run.
    """
    from matplotlib import ticker  # here, not at the top: a light import
    span = _finite_number(span, "span", positive=True)
    curves = _epoch_values(histories, lambda r: r.get(key))
    reference = {label: _finite_number(value, f"reference[{label!r}]")
                 for label, value in (reference or {}).items()}
    ax = ax if ax is not None else axes_for(figsize=(8.0, 4.5))
    colors = _colors(len(curves) + len(reference))
    for (label, (epochs, values)), color in zip(curves.items(), colors):
        ax.plot(epochs, 100 * values, color=color, linewidth=1.2,
                label=f"{label} (lowest {100 * values.min():.2f}%)")
    for (label, value), color in zip(reference.items(), colors[len(curves):]):
        ax.axhline(value, color=color, linestyle=":", linewidth=1.5, label=f"{label}: {value:.2f}%")
    lowest = min([100 * values.min() for _, values in curves.values()] + list(reference.values()))
    low = math.floor(10 * lowest - 1) / 10
    ax.set_ylim(low, low + span)
    ax.yaxis.set_major_locator(ticker.MultipleLocator(0.1 if span <= 1.5 else 0.5))
    ax.grid(axis="y", alpha=0.3)
    ax.set(xlim=(0, None), xlabel="epoch", ylabel=f"{key.replace('_', ' ')} (%)",
           title=f"{key.replace('_', ' ')} against epoch")
    ax.legend(frameon=False, fontsize="small")
    _despine(ax)
    return ax.figure


def posterior_widths(histories, ax=None):
    """The median sigma (log scale) and the share of weights with abs(mu) / sigma < 1 against
    epoch, from each record's 'posterior' (:meth:`gluon_bbb.VariationalPosterior.width_summary`);
    runs without it are left out. ``ax``: a pair of Axes, optional. Returns the Figure."""
    def widths(record):
        posterior = record.get("posterior")
        return None if posterior is None else (posterior["median_sigma"], 100 * posterior["snr_below_1"])

    curves = _epoch_values(histories, widths)
    panels = axes_for(ax, 2, figsize=(10.0, 3.8))
    for (label, (epochs, values)), color in zip(curves.items(), _colors(len(curves))):
        for panel, column in zip(panels, values.T):
            panel.plot(epochs, column, color=color, label=label)
    panels[0].set(yscale="log", ylabel="median sigma (log scale)", title="median sigma of the weights")
    panels[1].set(ylabel="weights with |mu| / sigma < 1 (%)", title="share of weights with SNR < 1")
    for panel in panels:
        panel.set_xlabel("epoch")
        panel.legend(frameon=False, fontsize="small")
    _despine(*panels)
    return panels[0].figure


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
    arrays = {name: _as_numpy(values, f"weights of {name!r}").ravel()
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
    for (name, values), color in zip(arrays.items(), _colors(len(arrays))):
        ax.plot(*_density_line(values, edges), color=color, label=name)
    ax.set_xlabel("weight")
    ax.set_ylabel("density (log scale)" if log_density else "density")
    if log_density:
        ax.set_yscale("log")
    ax.set_xlim(low, high)
    ax.legend(frameon=False)
    _despine(ax)
    return ax.figure


def log_snr_density(snr, cutoffs=None, ax=None, bins=200):
    """Density and CDF of the signal-to-noise ratio in decibels (the paper's Fig. 4).

    The x axis is 10 log10(abs(mu) / sigma), as in the paper. Weights with a ratio of 0 or
    inf have no finite logarithm and are left out of the curves.

    Parameters
    ----------
    snr : array, (num_weights,)
        From :func:`gluon_bbb.pruning.signal_to_noise`.
    cutoffs : sequence of float in (0, 1), optional
        Fractions pruned: a vertical line marks the ratio below which each fraction of the
        weights lies.
    ax : pair of matplotlib Axes, optional
        Drawn into; default a new Figure with two panels.
    bins : int, >= 1

    Returns
    -------
    Figure with two axes (density, CDF), each with 1 + len(cutoffs) lines.
    """
    snr = _as_numpy(snr, "snr").ravel()
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
    density_ax, cdf_ax = axes_for(ax, 2, figsize=(10.0, 3.8))
    edges = np.linspace(decibels.min(), decibels.max() + 1e-9, bins + 1)
    centers, density = _density_line(decibels, edges)
    counts, _ = np.histogram(decibels, bins=edges)
    curve_color, *cut_colors = _colors(len(cutoffs) + 1)
    density_ax.plot(centers, density, color=curve_color)
    cdf_ax.plot(edges[1:], np.cumsum(counts) / decibels.size, color=curve_color)
    with np.errstate(divide="ignore"):
        positions = 10.0 * np.log10(np.quantile(snr, cutoffs)) if cutoffs else []
    styles = ("--", ":", "-.", (0, (6, 2, 1, 2, 1, 2)))  # colour and dash: no two lines alike
    for i, (fraction, position, color) in enumerate(zip(cutoffs, positions, cut_colors)):
        for ax in (density_ax, cdf_ax):
            ax.axvline(position, color=color, linestyle=styles[i % 4], label=f"{100 * fraction:g}% removed")
    for ax, title in ((density_ax, "signal-to-noise ratio of the weights: density"),
                      (cdf_ax, "fraction of the weights below a ratio (CDF)")):
        ax.set_xlabel("signal-to-noise ratio (dB)")
        ax.set_title(title)
        if cutoffs:
            ax.legend(frameon=False)
    density_ax.set_ylabel("density")
    cdf_ax.set_ylabel("fraction of weights")
    _despine(density_ax, cdf_ax)
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
        Rows of :func:`gluon_bbb.pruning.pruning_table` (or read back from its JSON), each
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
    for method, color in zip(methods, _colors(len(methods))):
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
    _despine(ax)
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
    mu = _finite_number(mu, "mu")
    sigma = _finite_number(sigma, "sigma", positive=True)
    num_std = _finite_number(num_std, "num_std", positive=True)
    w = np.linspace(mu - num_std * sigma, mu + num_std * sigma, 201)
    density = np.exp(-0.5 * ((w - mu) / sigma) ** 2) / (sigma * math.sqrt(2.0 * math.pi))
    ax = ax if ax is not None else axes_for()
    color = _colors(len(ax.lines) + 1)[-1]
    ax.plot(w, density, color=color, label=label or f"mu = {mu:.3g}, sigma = {sigma:.3g}")
    ax.set_xlabel("weight")
    ax.set_ylabel("posterior density")
    ax.legend(frameon=False)
    _despine(ax)
    return ax.figure
