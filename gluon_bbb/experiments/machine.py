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
import urllib.parse
from typing import Sequence

import mxnet as mx
import numpy as np

from ..context import resolve_context
from ..version import __version__

__all__ = ["machine_info", "hide_password", "hide_password_in", "recorded_command",
           "resident_memory", "heap_in_use"]

_HIDDEN = "***"

#: A URL's scheme, its ``://`` (or a malformed ``:``, ``:/``, ``::/``...) and what follows up to
#: the last ``@``: the user information that :func:`hide_password` hides whole where SQLAlchemy
#: cannot read the URL (a password may hold an unencoded ``@``, ``/`` or ``:``).
_USERINFO = re.compile(r"(?P<scheme>[A-Za-z][A-Za-z0-9+.\-]*:(?://)?)(?P<userinfo>.*)@", re.DOTALL)

#: A secret in a URL's query: libpq's ``password`` and ``sslpassword``, and a token or secret.
_QUERY_SECRET = re.compile(r"(?P<key>[?&](?:ssl)?(?:password|passwd|pwd)=|"
                           r"[?&][A-Za-z0-9_.\-]*(?:token|secret)=)(?P<value>[^&#]*)",
                           re.IGNORECASE)


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
        ``argument`` with the URL's password hidden, and the values of its query parameters
        ``password``, ``sslpassword``, ``passwd``, ``pwd`` and any ``...token`` or
        ``...secret``. The URL is read as SQLAlchemy reads it (``make_url``), so the password
        hidden is the one it would send: ``postgresql://user:***@host/db``, and
        ``postgresql://user%40server:***@host/db`` for ``user@server:password@host``, the
        user name that Azure Database for PostgreSQL requires. Where SQLAlchemy is missing or
        reads the URL otherwise than as a user, a password and a host (it cannot parse the URL
        at all, or an ``@`` lands in the host, the database of a server or the query:
        ``postgresql:///user:password@host/db``, ``postgresql+psycopg:://...``, an unencoded
        ``@`` in the password), everything between the scheme's ``://`` (or the ``:`` after a
        malformed scheme) and the last ``@`` is hidden: ``postgresql://***@host/db``. Text
        without ``@`` after a scheme's ``:`` has no password there and keeps its user part.
    """
    match = _USERINFO.search(argument)
    if match is not None:
        url = argument[match.start():]
        parsed = _sqlalchemy_url(url)
        if parsed is None or _misread(parsed):
            url = _USERINFO.sub(lambda found: f"{found['scheme']}{_HIDDEN}@", url, count=1)
        elif parsed.password is not None:
            url = parsed.render_as_string(hide_password=True)
        argument = argument[:match.start()] + url
    return _QUERY_SECRET.sub(lambda found: f"{found['key']}{_HIDDEN}", argument)


def hide_password_in(text: str, url: str) -> str:
    """``text`` (a message of a database driver, SQLAlchemy or Optuna about the storage
    ``url``) with ``url`` and its password hidden wherever they occur.

    Parameters
    ----------
    text : str
        A message that may repeat ``url`` or its password.
    url : str
        The URL the message is about (as given, password and all).

    Returns
    -------
    str
        ``text`` with every spelling of ``url`` (as given, percent-decoded, and as SQLAlchemy
        writes it) replaced by :func:`hide_password`'s ``url``, and every spelling of what
        :func:`hide_password` hides in it (as given, percent-decoded and percent-encoded) and
        of the password SQLAlchemy reads replaced by ``***``. A short password hides every
        occurrence of its characters, inside other words too: a message that cannot show the
        password is worth more than one that reads well.
    """
    shown = hide_password(url)
    if shown == url:
        return text
    replacements = dict.fromkeys(_spellings(_secrets(url)), _HIDDEN)
    parsed = _sqlalchemy_url(url)
    whole = [url, urllib.parse.unquote(url)]
    if parsed is not None:
        whole.append(parsed.render_as_string(hide_password=False))
    replacements.update(dict.fromkeys(whole, shown))
    replacements.pop("", None)
    pattern = re.compile("|".join(map(re.escape, sorted(replacements, key=len, reverse=True))))
    return pattern.sub(lambda found: replacements[found[0]], text)


def _sqlalchemy_url(url):
    """SQLAlchemy's reading of ``url`` (``sqlalchemy.engine.URL``), or None where SQLAlchemy
    is missing or cannot parse it."""
    try:
        from sqlalchemy.engine import make_url
    except ImportError:
        return None
    try:
        return make_url(url)
    except Exception:  # ArgumentError, or ValueError for a port that is not a number
        return None


def _misread(parsed):
    """Whether an ``@`` of the URL lands outside its user information: in its host, its query,
    or the database of a server (a SQLite database is a file, whose name may hold one)."""
    parts = [parsed.host or ""] + [f"{key}={value}" for key, value in parsed.query.items()]
    if parsed.get_backend_name() != "sqlite":
        parts.append(parsed.database or "")
    return any("@" in part for part in parts)


def _secrets(url):
    """What :func:`hide_password` hides in ``url``, its parts that may be the password, and
    the password SQLAlchemy reads."""
    secrets = []
    match = _USERINFO.search(url)
    if match is not None:
        parsed = _sqlalchemy_url(url[match.start():])
        if parsed is None or _misread(parsed) or parsed.password is not None:
            userinfo = match["userinfo"]  # up to the last '@'; the password follows a ':'
            secrets += [userinfo] + [userinfo[colon + 1:] for colon, char in
                                     enumerate(userinfo) if char == ":"]
        if parsed is not None and parsed.password is not None:
            secrets.append(str(parsed.password))
    secrets += [found["value"] for found in _QUERY_SECRET.finditer(url)]
    return secrets


def _spellings(secrets):
    """Each of ``secrets`` as given, percent-decoded (``%40`` as ``@``, ``+`` as a space too)
    and percent-encoded (every reserved character, or all but a space and ``+`` as SQLAlchemy
    writes a password)."""
    spellings = []
    for secret in secrets:
        for plain in (secret, urllib.parse.unquote(secret), urllib.parse.unquote_plus(secret)):
            spellings += [plain, urllib.parse.quote(plain, safe=""),
                          urllib.parse.quote(plain, safe=" +"), urllib.parse.quote_plus(plain)]
    return spellings


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
