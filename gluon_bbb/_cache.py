"""The per-user cache folder that gluon_bbb writes to (the fused operator's builds, downloaded
data sets): ``$XDG_CACHE_HOME/gluon_bbb``, by default ``~/.cache/gluon_bbb`` (the XDG Base
Directory convention, which Linux desktops, pip and Jupyter follow)."""
import logging
import os
import tempfile

__all__ = ["user_cache_dir"]

logger = logging.getLogger(__name__)


def user_cache_dir(*parts):
    """``$XDG_CACHE_HOME/gluon_bbb/<parts...>``; the folder is not created.

    ``XDG_CACHE_HOME`` counts only when it is an absolute path (the XDG specification says a
    relative one is to be ignored); otherwise ``~/.cache``. Where the home folder cannot be
    found (no ``HOME`` and no entry in the password database, as in some containers), the
    cache is ``<temporary folder>/gluon_bbb-<user id>/cache``, with a warning, instead of a
    literal ``~`` folder under the working folder.

    Parameters
    ----------
    *parts : str
        Sub-folders below ``gluon_bbb``.

    Returns
    -------
    str
    """
    xdg = os.environ.get("XDG_CACHE_HOME", "")
    if os.path.isabs(xdg):
        base = xdg
    else:
        home = os.path.expanduser("~")
        if os.path.isabs(home):
            base = os.path.join(home, ".cache")
        else:
            user = os.getuid() if hasattr(os, "getuid") else "user"
            base = os.path.join(tempfile.gettempdir(), f"gluon_bbb-{user}", "cache")
            logger.warning("gluon_bbb: no home folder (HOME is unset and the user has no "
                           "password entry); caching under %s", base)
    return os.path.join(base, "gluon_bbb", *parts)
