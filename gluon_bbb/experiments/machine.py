"""What ran a measurement: the machine, the library versions and the command line, recorded
with results, and the process's memory, for measurements of long runs.

Nothing recorded holds a secret: a command line is recorded with the password of every URL in
its arguments hidden (:func:`recorded_command`), and the only environment variable recorded is
``OMP_NUM_THREADS``.
"""
import ctypes
import ctypes.util
import os
import platform
import re
import shlex
from typing import Sequence

import mxnet as mx
import numpy as np

from ..context import resolve_context
from ..version import __version__

__all__ = ["machine_info", "hide_password", "recorded_command", "resident_memory", "heap_in_use"]

_HIDDEN = "***"

#: The user name of a URL's ``scheme://user:password@host``, with the colon: the password runs
#: from there to the last ``@`` (a password may hold an unencoded ``@``, ``/`` or ``:``).
_USERINFO = re.compile(r"(?P<user>[A-Za-z][A-Za-z0-9+.\-]*://[^:@/?#]*:).*@", re.DOTALL)

#: A secret in a URL's query: libpq's ``password`` and ``sslpassword``, and a token or secret.
_QUERY_SECRET = re.compile(r"(?P<key>[?&](?:ssl)?(?:password|passwd|pwd)=|"
                           r"[?&][A-Za-z0-9_.\-]*(?:token|secret)=)[^&#]*", re.IGNORECASE)


def machine_info(ctx=None):
    """What ran it: CPU model and cores, platform, library versions, context."""
    cpu_model = None
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as handle:
            for line in handle:
                if line.startswith("model name"):
                    cpu_model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    try:
        usable = len(os.sched_getaffinity(0))
    except AttributeError:
        usable = os.cpu_count()
    return {
        "cpu_model": cpu_model or platform.processor() or platform.machine(),
        "cpu_cores": os.cpu_count(),
        "cpu_cores_usable": usable,
        "platform": platform.platform(),
        "python": platform.python_version(),
        "mxnet": mx.__version__,
        "numpy": np.__version__,
        "gluon_bbb": __version__,
        "ctx": str(resolve_context(ctx)),
        "omp_num_threads": os.environ.get("OMP_NUM_THREADS"),
    }


def hide_password(argument: str) -> str:
    """``argument`` with the password of the URL it holds replaced by ``***``.

    Works on one command-line argument or one URL: ``URL`` as well as ``--option=URL``.

    Parameters
    ----------
    argument : str
        Text that may hold a URL such as ``postgresql://user:password@host:5432/db``.

    Returns
    -------
    str
        ``argument`` with everything from the colon after the user name to the last ``@``
        hidden (``postgresql://user:***@host:5432/db``; more, should the URL's path hold an
        ``@`` too), and the values of the query parameters ``password``, ``sslpassword``,
        ``passwd``, ``pwd`` and any ``...token`` or ``...secret``; text without ``://`` is
        returned unchanged.
    """
    if "://" not in argument:
        return argument
    argument = _USERINFO.sub(lambda match: f"{match['user']}{_HIDDEN}@", argument)
    return _QUERY_SECRET.sub(lambda match: f"{match['key']}{_HIDDEN}", argument)


def recorded_command(argv: Sequence[str]) -> str:
    """A command line as results record it: ``argv`` quoted for a POSIX shell, with the
    password of every URL-valued argument hidden (:func:`hide_password`).

    Parameters
    ----------
    argv : sequence of str
        The program and its arguments.

    Returns
    -------
    str
        The line, which reruns the command once the passwords are given again (in the URL, or
        where the database client looks for them, such as ``PGPASSWORD`` or ``~/.pgpass``).
    """
    return " ".join(shlex.quote(hide_password(str(argument))) for argument in argv)


def resident_memory():
    """The process's resident set size in bytes (Linux's /proc/self/statm), or None elsewhere."""
    try:
        with open("/proc/self/statm", encoding="ascii") as handle:
            return int(handle.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return None


class _MallInfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in (
        "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks",
        "fordblks", "keepcost")]


def _mallinfo2():
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        function = libc.mallinfo2  # glibc >= 2.33
    except (OSError, AttributeError):
        return None
    function.restype = _MallInfo2
    return function


_MALLINFO2 = _mallinfo2()


def heap_in_use():
    """Bytes the C allocator has handed out and not taken back (glibc's ``mallinfo2``: the
    arenas' allocated chunks plus the mmapped ones), or None without glibc 2.33.

    Unlike the resident set size it does not count memory that ``free`` kept for reuse, so a
    leak shows as steady growth in it, while the allocator's own caching does not.
    """
    if _MALLINFO2 is None:
        return None
    info = _MALLINFO2()
    return int(info.uordblks + info.hblkhd)
