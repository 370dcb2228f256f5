"""Download a data set's files from the first source that serves them right, verified, written
atomically, once even when several processes ask at the same time.

For each file of the data set (:data:`gluon_bbb.data.sources.DATA_FILES`) not already in the
target folder with the right content, the sources (:func:`gluon_bbb.data.sources.source_urls`:
``$GLUON_BBB_MIRROR`` first, then the public ones) are tried in order. A download goes to a
temporary name in the target folder, is checked by the SHA-256 of its decompressed content
(:mod:`gluon_bbb.data.digests`) and only then renamed to its final name, so an interrupted or
wrong download never leaves a file that a later run would trust; it gets the mode of any new
file under the umask. A copy already there that fails its check is never overwritten: it is
renamed aside (:func:`set_aside`) in a line naming where it went. A lock on ``.fetch.lock`` in
the target folder (:mod:`gluon_bbb.io.locks`) makes a second process wait, at most as long as
the first may take (:class:`~gluon_bbb.io.locks.LockTimeout` names the lock file after that);
it then finds the verified file and downloads nothing; the lock's holder removes the temporary
files of a killed download. Every request has a timeout, every download a deadline, and a host
that does not answer is not asked again in the process. With ``progress``, "connecting to HOST"
comes before the bar and a line naming the file, its source and its folder stays after it. When every source
fails, :class:`FetchError` says in one line which sources were tried, why each failed, and where
to put the files by hand.

Typical use::

    folder = fetch("mnist")        # ~/.cache/gluon_bbb/data/mnist, or $GLUON_BBB_DATA/mnist
"""
import http.client
import logging
import os
import socket
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Optional

from ..io.checkpoint import new_file_mode
from ..io.locks import waiting_lock
from ..epochs import progress_bar_class
from ..version import __version__
from .datafolders import DATA_ENV_VAR, DataNotFoundError, copy_paths, download_root
from .checks import problem_of
from .digests import CHUNK_BYTES, ChecksumError, check_content, compression_of, write_content
from .sources import MIRROR_ENV_VAR, DataFile, files_of, source_urls

__all__ = ["DEFAULT_TIMEOUT_S", "DEFAULT_DEADLINE_S", "LOCK_NAME", "REJECTED_SUFFIX", "FetchError",
           "find_verified", "set_aside", "fetch", "fetch_file"]

logger = logging.getLogger(__name__)

DEFAULT_TIMEOUT_S = 30.0
"""Seconds a request may wait for the server (to connect, or for each chunk of data)."""

DEFAULT_DEADLINE_S = 900.0
"""Seconds a file's download from one source may take in all (a server that sends a byte at a
time never lets a read wait long enough to time out)."""

LOCK_NAME = ".fetch.lock"
"""The lock file in each target folder."""

REJECTED_SUFFIX = ".rejected"
"""Appended to the name of a file that failed its check when it is moved aside for a download
(``.rejected.1``, ``.rejected.2``, ... when that name is taken)."""


class FetchError(DataNotFoundError):
    """No source served a file with the right content (the message names each and why).

    Attributes
    ----------
    reasons : str
        The message without its "To fix" part: each file not downloaded, each source tried
        and why it failed.
    """

    def __init__(self, message, reasons=None):
        super().__init__(message)
        self.reasons = message if reasons is None else reasons


class _Unreachable(Exception):
    """The host did not answer the request (no connection, or no response within the timeout):
    its other files are not asked for in this process."""


class _TooSlow(Exception):
    """The download went past its deadline."""


#: Host -> why it did not answer, for this process (see :class:`_Unreachable`).
_failed_hosts = {}


def _say(line):
    """A line that stays on screen (a terminal, a notebook): on standard error, flushed."""
    print(line, file=sys.stderr, flush=True)


def find_verified(folder, data_file: DataFile) -> Optional[Path]:
    """``<name>`` or ``<name>.gz`` in ``folder`` if it holds ``data_file``'s content, else None."""
    for path in copy_paths(Path(folder), data_file.name):
        if path.is_file() and problem_of(path, data_file) is None:
            return path
    return None


def _parts(folder, data_file):
    """The temporary files of downloads of ``data_file`` into ``folder``: those of a process
    that was killed, unless the lock is held by one writing it now."""
    return sorted(Path(folder).glob(f".{data_file.name}.*.part"))


def _open(request, timeout):
    """``urlopen``, a failure before any answer raised as :class:`_Unreachable`."""
    try:
        return urllib.request.urlopen(request, timeout=timeout)
    except urllib.error.HTTPError:
        raise
    except urllib.error.URLError as error:
        reason = error.reason if isinstance(error.reason, BaseException) else error
        if isinstance(reason, (TimeoutError, socket.timeout)):
            raise _Unreachable(f"no answer within {timeout:g} s") from None
        raise _Unreachable(str(getattr(reason, "strerror", None) or reason)) from None
    except (TimeoutError, socket.timeout):
        raise _Unreachable(f"no answer within {timeout:g} s") from None
    except (ConnectionError, http.client.RemoteDisconnected) as error:
        raise _Unreachable(str(error) or type(error).__name__) from None


def _download(url, destination, data_file, progress, timeout, deadline):
    """Write the body at ``url`` into the open file ``destination`` within ``deadline``
    seconds; raise on any failure."""
    end = time.monotonic() + deadline
    request = urllib.request.Request(url, headers={"User-Agent": f"gluon_bbb/{__version__}"})
    limit = 4 * data_file.size + (1 << 20)  # a gzip file or an archive, with room to spare
    with _open(request, min(timeout, deadline)) as response:
        length = response.headers.get("Content-Length")
        expected = int(length) if length and length.isdigit() else None
        if expected is not None and expected > limit:
            raise ChecksumError(f"{expected} bytes, far more than expected")
        written = 0
        bar = progress_bar_class()(total=expected, unit="B", unit_scale=True, unit_divisor=1024,
                                   desc=f"{data_file.dataset}/{data_file.name}",
                                   disable=not progress, leave=False)
        with bar:
            while True:
                try:
                    chunk = response.read1(CHUNK_BYTES)  # what has come: the deadline is seen
                except http.client.IncompleteRead as error:
                    written += len(error.partial)
                    chunk = b""
                if not chunk:
                    break
                if not written and _looks_like_html(chunk):
                    raise ChecksumError("an HTML page, not the file (an error, login or "
                                        "captive-portal page served with status 200?)")
                written += len(chunk)
                if written > limit:
                    raise ChecksumError(f"more than {limit} bytes, far more than expected")
                destination.write(chunk)
                bar.update(len(chunk))
                if time.monotonic() > end:
                    raise _TooSlow(f"not done after {deadline:g} s ({written} bytes of "
                                   f"{expected if expected is not None else '?'})")
    if expected is not None and written != expected:
        raise ConnectionError(f"the connection closed after {written} of {expected} bytes")


def _looks_like_html(head):
    """Whether the first bytes of a download are those of an HTML page."""
    return head.lstrip()[:14].lower().startswith((b"<!doctype html", b"<html"))


def _host(url):
    """The host (and port) of ``url``; ``file`` for a local one."""
    return urllib.parse.urlsplit(url).netloc or urllib.parse.urlsplit(url).scheme or url


def _reason(error, timeout, temporary):
    """Why a source failed, in a few words."""
    if isinstance(error, urllib.error.HTTPError):
        return f"HTTP {error.code} {error.reason}"
    if isinstance(error, (_Unreachable, _TooSlow)):
        return str(error)
    if isinstance(error, urllib.error.URLError):
        error = error.reason if isinstance(error.reason, BaseException) else error
        if not isinstance(error, (TimeoutError, socket.timeout)):
            return str(getattr(error, "reason", error))
    if isinstance(error, (TimeoutError, socket.timeout)):
        return f"timed out (no answer for {timeout:g} s)"
    if isinstance(error, ChecksumError):
        return str(error).replace(f"{temporary}: ", "")
    if isinstance(error, ConnectionError) and str(error).startswith("the connection closed"):
        return str(error)
    return f"{type(error).__name__}: {error}"


def set_aside(path, reason) -> Path:
    """Rename ``path``, a file that failed its check, to ``<name>.rejected`` (or
    ``<name>.rejected.<n>``, the first such name not taken), and say so in one line naming both
    and ``reason``; the file is kept as it was, never overwritten or deleted.

    Returns
    -------
    pathlib.Path
        Where the file now is.
    """
    path = Path(path)
    target, number = path.with_name(path.name + REJECTED_SUFFIX), 0
    while target.exists() or target.is_symlink():
        number += 1
        target = path.with_name(f"{path.name}{REJECTED_SUFFIX}.{number}")
    os.rename(path, target)
    _say(f"{path} failed its check ({reason}); kept as {target}")
    return target


def _store(temporary, folder, data_file):
    """Rename the checked download to its final name (decompressed first unless it is a gzip
    file kept as such), after setting aside every copy already there (each failed the check:
    it must neither be overwritten nor shadow the download)."""
    kind = compression_of(temporary)
    plain = None
    if kind == "gzip" and data_file.keep_gzip:
        final, ready = folder / (data_file.name + ".gz"), temporary
    elif kind == "none":
        final, ready = folder / data_file.name, temporary
    else:
        final = folder / data_file.name
        handle, plain = tempfile.mkstemp(dir=folder, prefix=f".{data_file.name}.", suffix=".part")
        os.close(handle)
        ready = plain
    try:
        if plain is not None:
            write_content(temporary, data_file, plain)
        os.chmod(ready, new_file_mode())  # as any new file (a temporary one is 0600)
        for other in copy_paths(folder, data_file.name):
            if other.exists() or other.is_symlink():
                set_aside(other, _problem(other, data_file))
        os.replace(ready, final)
    finally:
        if plain is not None and os.path.exists(plain):
            os.unlink(plain)
    return final


def _problem(path, data_file):
    """Why ``path`` fails its check, in a few words."""
    try:
        check_content(path, data_file)
    except (ChecksumError, OSError) as error:
        return str(error).replace(f"{path}: ", "", 1)
    return "it holds the right content, but was found only now"


def _fetch_missing(folder, data_file, progress, timeout, deadline):
    """Download ``data_file`` into ``folder`` from its first good source (lock held)."""
    failures = []
    for url in source_urls(data_file):
        host = _host(url)
        if host in _failed_hosts:
            failures.append(f"{url}: not asked, {host} did not answer before "
                            f"({_failed_hosts[host]})")
            continue
        if progress:
            _say(f"connecting to {host} for {data_file.dataset}/{data_file.name}")
        handle, temporary = tempfile.mkstemp(dir=folder, prefix=f".{data_file.name}.",
                                             suffix=".part")
        try:
            with os.fdopen(handle, "wb") as destination:
                _download(url, destination, data_file, progress, timeout, deadline)
            check_content(temporary, data_file)
            final = _store(temporary, folder, data_file)
            logger.info("downloaded %s/%s from %s", data_file.dataset, data_file.name, url)
            if progress:  # the bar is gone: this line stays
                _say(f"downloaded {data_file.dataset}/{data_file.name} from {url} into {folder}")
            return final
        except Exception as error:  # noqa: BLE001 -- every failure is a reason to try the next
            if isinstance(error, _Unreachable):
                _failed_hosts[host] = str(error)
            failures.append(f"{url}: {_reason(error, timeout, temporary)}")
        finally:
            if os.path.exists(temporary):
                os.unlink(temporary)
    raise FetchError(_all_failed_message(folder, data_file, failures),
                     _failed_reasons(data_file, failures))


def _failed_reasons(data_file, failures):
    tried = "; ".join(failures) if failures else "no source to try"
    return f"could not download {data_file.dataset}/{data_file.name}, every source failed: {tried}"


def _to_fix(folder, data_files):
    """The one "To fix" part, naming every file not downloaded."""
    published = ", ".join(data_file.name if data_file.text else data_file.name + "[.gz]"
                          for data_file in data_files)
    dataset = data_files[0].dataset
    return (f"To fix: on a machine with network, download {published} from one of them and "
            f"put it in {folder}/ (or set {DATA_ENV_VAR} to a folder holding {dataset}/, or "
            f"{MIRROR_ENV_VAR} to a server laid out like one)")


def _all_failed_message(folder, data_file, failures):
    return f"{_failed_reasons(data_file, failures)}. {_to_fix(folder, [data_file])}"


def fetch_file(folder, data_file: DataFile, progress: bool = True,
               timeout: float = DEFAULT_TIMEOUT_S, deadline: float = DEFAULT_DEADLINE_S,
               lock_timeout: Optional[float] = None) -> Path:
    """``data_file`` in ``folder`` (created if need be), downloaded unless already there.

    Parameters
    ----------
    folder : str or os.PathLike
        The data set's folder, e.g. ``~/.cache/gluon_bbb/data/mnist``.
    data_file : DataFile
    progress : bool
        Show "connecting to HOST", a progress bar while downloading, and then a line that
        stays, naming the file, its source and ``folder``.
    timeout : float
        Seconds each request may wait for the server (to answer, or for each read). A host
        that does not answer is not asked again in this process.
    deadline : float
        Seconds a download from one source may take in all.
    lock_timeout : float, optional
        Seconds to wait for another process that fetches into ``folder``; by default as long as
        it may take (``deadline`` plus ``timeout`` for each source of the file, or once if
        there is none).

    Returns
    -------
    pathlib.Path
        The verified file (``<name>`` or ``<name>.gz``).

    Raises
    ------
    FetchError
        Every source failed; the one-line message names each and why.
    gluon_bbb.io.locks.LockTimeout
        Another process held ``folder``'s lock for ``lock_timeout`` seconds (one line naming
        the lock file).
    OSError
        ``folder`` cannot be created or written.
    """
    folder = Path(folder).expanduser()
    found = find_verified(folder, data_file)
    if found is not None and not _parts(folder, data_file):
        return found
    folder.mkdir(parents=True, exist_ok=True)
    if lock_timeout is None:
        lock_timeout = max(1, len(source_urls(data_file))) * (deadline + timeout)
    with waiting_lock(folder / LOCK_NAME, timeout=lock_timeout):
        for part in _parts(folder, data_file):  # the lock's holder writes the only live one
            part.unlink()
        found = find_verified(folder, data_file)  # another process may have fetched it
        return found if found is not None else _fetch_missing(folder, data_file, progress,
                                                              timeout, deadline)


def fetch(name: str, root=None, progress: bool = True,
          timeout: float = DEFAULT_TIMEOUT_S, deadline: float = DEFAULT_DEADLINE_S,
          lock_timeout: Optional[float] = None) -> Path:
    """Every file of data set ``name`` in ``root/<name>``, downloading those not already there.

    Parameters
    ----------
    name : {"mnist", "fashion-mnist", "mushroom"}
    root : str or os.PathLike, optional
        The folder holding a folder per data set; default
        :func:`~gluon_bbb.data.datafolders.download_root` (``$GLUON_BBB_DATA``, else
        ``~/.cache/gluon_bbb/data``).
    progress, timeout, deadline, lock_timeout
        As for :func:`fetch_file`.

    Returns
    -------
    pathlib.Path
        ``root/<name>``.

    Raises
    ------
    ValueError
        Unknown ``name``.
    FetchError, LockTimeout, OSError
        As for :func:`fetch_file`.
    """
    files = files_of(name)
    folder = Path(download_root() if root is None else root).expanduser() / name
    failed = []
    for data_file in files:  # each file, so that the error names every one not downloaded
        try:
            fetch_file(folder, data_file, progress=progress, timeout=timeout, deadline=deadline,
                       lock_timeout=lock_timeout)
        except FetchError as error:
            failed.append((data_file, error.reasons))
    if failed:
        reasons = "; ".join(reason for _, reason in failed)
        raise FetchError(f"{reasons}. {_to_fix(folder, [data_file for data_file, _ in failed])}",
                         reasons)
    return folder
