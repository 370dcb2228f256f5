"""Argument checks shared by the modules, so every user-facing error reads the same."""
import math
import numbers

import numpy as np

__all__ = ["check_int", "check_positive", "check_positive_ints", "check_finite_1d",
           "check_mapping"]


def check_int(name, value, minimum=1):
    """``value`` as an ``int``, or a ValueError that names the argument.

    Parameters
    ----------
    name : str
        The argument's name, for the message.
    value : object
        Must be an integer (Python or NumPy, not ``bool``) >= ``minimum``.
    minimum : int

    Returns
    -------
    int
    """
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")
    return int(value)


def check_positive(name, value):
    """``value`` as a finite ``float`` > 0, or a ValueError that names the argument.

    Parameters
    ----------
    name : str
        The argument's name, for the message.
    value : object
        Must be a real number (Python or NumPy, not ``bool``), finite and positive.

    Returns
    -------
    float
    """
    if (isinstance(value, bool) or not isinstance(value, numbers.Real)
            or not (math.isfinite(value) and value > 0)):
        raise ValueError(f"{name} must be a finite positive number, got {value!r}")
    return float(value)


def check_positive_ints(name, values):
    """``values`` as a list of Python ints, each >= 1, or a ValueError naming ``name``.

    Parameters
    ----------
    name : str
        The argument's name, for the message.
    values : sequence
        Of integers (Python or NumPy, not ``bool``); a string is refused.

    Returns
    -------
    list of int
    """
    if isinstance(values, (str, bytes)) or not hasattr(values, "__iter__"):
        raise ValueError(f"{name} must be a sequence of positive integers, got {values!r}")
    values = list(values)
    for value in values:
        if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
            raise ValueError(f"{name} must hold positive integers, got {value!r} in {values!r}")
    return [int(value) for value in values]


def check_finite_1d(name, values):
    """``values`` as a float64 array of shape (N,), N >= 1, all finite, or a ValueError that
    names the argument."""
    values = np.asarray(values, dtype=np.float64)
    if values.ndim != 1 or len(values) == 0:
        raise ValueError(f"{name} must be a non-empty 1-d array, got shape {values.shape}")
    if not np.all(np.isfinite(values)):
        raise ValueError(f"{name} holds NaN or infinite values")
    return values


def check_mapping(name, mapping):
    """A ValueError unless ``mapping`` is a non-empty dict (of name -> result)."""
    if not isinstance(mapping, dict) or not mapping:
        raise ValueError(f"{name} must be a non-empty dict of name -> result")
