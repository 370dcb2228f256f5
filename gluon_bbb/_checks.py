"""Argument checks shared by the modules, so every user-facing error reads the same."""
import numbers

__all__ = ["check_int"]


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
