"""The per-user cache folder that gluon_bbb writes to (the fused operator's builds, downloaded
data sets): ``$XDG_CACHE_HOME/gluon_bbb``, by default ``~/.cache/gluon_bbb`` (the XDG Base
Directory convention, which Linux desktops, pip and Jupyter follow)."""
import os

__all__ = ["user_cache_dir"]


def user_cache_dir(*parts):
    """``$XDG_CACHE_HOME/gluon_bbb/<parts...>`` (``~/.cache`` when ``XDG_CACHE_HOME`` is unset
    or empty); the folder is not created.

    Parameters
    ----------
    *parts : str
        Sub-folders below ``gluon_bbb``.

    Returns
    -------
    str
    """
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "gluon_bbb", *parts)
