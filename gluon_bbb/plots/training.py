"""Figures of the data and of training runs: an image grid, the loss and error curves of one
run, error curves of several runs (Figure 2), and the posterior's widths over training."""
import math

import numpy as np

from .._checks import check_int, check_mapping
from .axes import as_numpy, axes_for, despine, finite_number, palette

__all__ = ["image_grid", "training_curves", "error_curves", "posterior_widths"]


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
    images, labels = as_numpy(images, "images"), as_numpy(labels, "labels").astype(int)
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
        predictions = as_numpy(predictions, "predictions").astype(int)
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
KEY_LABELS = {"loss": "free energy (loss)", "nll": "likelihood cost (nll)",
              "complexity": "complexity cost",
              "train_error": "training batches, as trained",
              "validation_error": "validation set, after the epoch",
              "test_error": "test set, after the epoch"}
"""Legend text of each history key in :func:`training_curves`. A trainer's training error is
measured on the batches as they were trained (for Bayes by Backprop: one sampled network a batch),
its validation and test errors after each epoch (for Bayes by Backprop: the posterior mean)."""


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
    Figure with two axes: one line per key present, labelled in words (:data:`KEY_LABELS`). The
    cost axis is logarithmic when every value drawn on it is positive, so the likelihood cost
    stays visible beside a complexity cost hundreds of times larger; the free energy, drawn
    dashed over the others, is then visible where it lies on the complexity cost.
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
        for key, color in zip(present, palette(drawn + len(present))[drawn:]):
            values = [scale * record[key] for record in history]
            dashed = dict(linestyle="--", linewidth=2.0, zorder=3) if key == "loss" else {}  # over complexity
            ax.plot(epochs, values, marker="o", markersize=3, color=color,
                    label=prefix + KEY_LABELS[key], **dashed)
        ax.set_xlabel("epoch")
        ax.xaxis.set_major_locator(ticker.MaxNLocator(integer=True))
        if present:
            ax.legend(frameon=False)
    positive = all(value > 0 for line in loss_ax.lines for value in line.get_ydata())
    if positive and loss_ax.lines:  # the complexity cost is often 100x the likelihood cost
        loss_ax.set_yscale("log")
    loss_ax.set_ylabel("summed over the epoch (nats" + (", log scale)" if positive else ")"))
    loss_ax.set_title("cost per epoch")
    error_ax.set_ylabel("error (%)")
    error_ax.set_title("classification error per epoch")
    despine(loss_ax, error_ax)
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
    span = finite_number(span, "span", positive=True)
    curves = _epoch_values(histories, lambda r: r.get(key))
    reference = {label: finite_number(value, f"reference[{label!r}]")
                 for label, value in (reference or {}).items()}
    ax = ax if ax is not None else axes_for(figsize=(8.0, 4.5))
    colors = palette(len(curves) + len(reference))
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
    despine(ax)
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
    for (label, (epochs, values)), color in zip(curves.items(), palette(len(curves))):
        for panel, column in zip(panels, values.T):
            panel.plot(epochs, column, color=color, label=label)
    panels[0].set(yscale="log", ylabel="median sigma (log scale)", title="median sigma of the weights")
    panels[1].set(ylabel="weights with |mu| / sigma < 1 (%)", title="share of weights with SNR < 1")
    for panel in panels:
        panel.set_xlabel("epoch")
        panel.legend(frameon=False, fontsize="small")
    despine(*panels)
    return panels[0].figure


