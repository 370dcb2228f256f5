"""Time series as supervised examples: windows of past values and the value that follows.

For a series z_0, ..., z_{T-1}, a window length L and a horizon h >= 1, example i has the inputs
(z_i, ..., z_{i+L-1}) and the target z_{i+L-1+h}, for i = 0, ..., T - L - h: one-step-ahead
regression with h = 1, a direct h-step forecast otherwise. Standardise the series with the
statistics of its training part before windowing, and split the examples by ``target_index``
(all inputs of an example precede its target), so that no held-out target is ever trained on.
"""
from collections import namedtuple

import numpy as np

from .._checks import check_finite_1d, check_int

__all__ = ["Windows", "sliding_windows"]

#: Examples cut from a series: ``inputs`` (N, L) and ``targets`` (N,), both float32, and the
#: position of each target in the series, ``target_index`` (N,) of int64.
Windows = namedtuple("Windows", ["inputs", "targets", "target_index"])


def sliding_windows(series, window, horizon=1):
    """Every window of ``window`` consecutive values, with the value ``horizon`` steps after it.

    Parameters
    ----------
    series : array_like, (T,), finite
    window : int, L >= 1
    horizon : int, h >= 1

    Returns
    -------
    Windows
        ``inputs[i] = series[i:i + L]``, ``targets[i] = series[i + L - 1 + h]``,
        ``target_index[i] = i + L - 1 + h``; N = T - L - h + 1 examples, in time order.

    Raises
    ------
    ValueError
        A series that is not 1-D and finite, a window or horizon that is not a positive integer,
        or a series too short for one example (T < L + h).
    """
    series = check_finite_1d("series", series)
    window, horizon = check_int("window", window), check_int("horizon", horizon)
    count = len(series) - window - horizon + 1
    if count < 1:
        raise ValueError(f"a series of {len(series)} values is too short for a window of {window} "
                         f"and a horizon of {horizon} (it needs at least {window + horizon})")
    starts = np.arange(count)
    inputs = series[starts[:, None] + np.arange(window)[None, :]]
    target_index = starts + window - 1 + horizon
    return Windows(inputs.astype(np.float32), series[target_index].astype(np.float32),
                   target_index.astype(np.int64))
