"""Each data file's check (:func:`gluon_bbb.data.digests.check_content`), remembered by the
file's size, modification time (in nanoseconds) and inode, so that a file already checked is not
read again until it changes: a warm load costs a ``stat`` per file, not a SHA-256 of 55 MB.

The results live in one small JSON file in the per-user cache folder,
``$XDG_CACHE_HOME/gluon_bbb/data-checks.json`` (read as data, never executed; a file that does
not parse is ignored). A file changed less than :data:`SETTLE_S` seconds ago is checked but not
remembered, since a write within the same clock tick would leave its size and time unchanged.
Where the cache folder cannot be written, every check reads the file.
"""
import json
import os
import tempfile
import time
from pathlib import Path
from typing import Optional

from .._cache import user_cache_dir
from . import digests
from .sources import DataFile

__all__ = ["CHECKS_FILE", "SETTLE_S", "checks_path", "problem_of"]

CHECKS_FILE = "data-checks.json"
"""Name of the file of remembered checks in the per-user cache folder."""

SETTLE_S = 2.0
"""A file modified less than this many seconds ago is not remembered."""

_MAX_ENTRIES = 512


def checks_path() -> Path:
    """``$XDG_CACHE_HOME/gluon_bbb/data-checks.json`` (by default under ``~/.cache``)."""
    return Path(user_cache_dir(CHECKS_FILE))


def _load():
    try:
        with open(checks_path(), encoding="utf-8") as stream:
            entries = json.load(stream)
    except (OSError, ValueError):
        return {}
    return entries if isinstance(entries, dict) else {}


def _save(entries):
    path = checks_path()
    temporary = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{CHECKS_FILE}.",
                                             suffix=".part")
        with os.fdopen(handle, "w", encoding="utf-8") as stream:
            json.dump(entries, stream)
        os.replace(temporary, path)
    except OSError:  # a read-only cache: nothing remembered, every check reads the file
        pass
    finally:
        if temporary is not None and os.path.exists(temporary):
            os.unlink(temporary)


def _stamp(info, data_file):
    return [info.st_size, info.st_mtime_ns, info.st_ino, data_file.sha256]


def problem_of(path, data_file: DataFile) -> Optional[str]:
    """None if ``path`` holds ``data_file``'s content, else the one-line problem naming ``path``.

    Parameters
    ----------
    path : str or os.PathLike
    data_file : DataFile

    Returns
    -------
    str or None
        E.g. ``"<path>: not mnist/... (the SHA-256 of its content is ...)"``, or
        ``"<path>: cannot be read (...)"``.
    """
    path = Path(path)
    try:
        before = path.stat()
    except OSError as error:
        return f"{path}: cannot be read ({error.strerror or error})"
    key = str(path.resolve())
    entries = _load()
    entry = entries.get(key)
    if isinstance(entry, list) and len(entry) == 5 and entry[:4] == _stamp(before, data_file):
        return None if entry[4] is None else f"{path}: {entry[4]}"
    try:
        digests.check_content(path, data_file)
        reason = None
    except digests.ChecksumError as error:
        reason = str(error).replace(f"{path}: ", "", 1)
    except OSError as error:
        return f"{path}: cannot be read ({error.strerror or error})"
    try:
        after = path.stat()
    except OSError:
        after = None
    settled = time.time() - before.st_mtime > SETTLE_S
    if settled and after is not None and _stamp(after, data_file) == _stamp(before, data_file):
        entries.pop(key, None)
        entries[key] = _stamp(before, data_file) + [reason]
        while len(entries) > _MAX_ENTRIES:
            entries.pop(next(iter(entries)))
        _save(entries)
    return None if reason is None else f"{path}: {reason}"
