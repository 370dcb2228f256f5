"""What every figure shares: the axes it draws on (the caller's or a new Figure's), the PNG
writer, the palette and the number checks."""
import io
import math
import numbers

import numpy as np

from .._checks import check_int
from ..io.checkpoint import atomic_write_bytes

__all__ = ["axes_for", "save_png", "palette", "despine", "as_numpy", "finite_number"]


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


def palette(count):
    """The colour-blind-safe palette of ``count`` colours."""
    # seaborn is imported here, not at the top: it adds about a second to ``import gluon_bbb``.
    import seaborn as sns

    return sns.color_palette("colorblind", max(int(count), 1))


def despine(*axes):
    """Remove the top and right spines of each axes."""
    import seaborn as sns

    for ax in axes:
        sns.despine(ax=ax)


def as_numpy(values, name):
    """``values`` (an NDArray or anything array-like) as a float NumPy array."""
    if hasattr(values, "asnumpy"):
        values = values.asnumpy()
    try:
        return np.asarray(values, dtype=float)
    except (TypeError, ValueError):
        raise TypeError(f"{name} must be an array of numbers, got {type(values).__name__}") from None


def finite_number(value, name, positive=False):
    """``value`` as a float, checked finite (or positive)."""
    if hasattr(value, "asscalar"):
        value = value.asscalar()
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a number, got {type(value).__name__}")
    if not math.isfinite(value) or (positive and not value > 0):
        raise ValueError(f"{name} must be a {'positive' if positive else 'finite'} number, got {value!r}")
    return float(value)


