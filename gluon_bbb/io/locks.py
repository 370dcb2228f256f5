"""Exclusive locks on a file between the processes of one machine, through ``filelock``:
``fcntl.flock`` on Linux and macOS, Windows' own file lock on Windows. The operating system
releases either when the process ends, however it ends. Used by the run folders' writer lock
(:mod:`gluon_bbb.experiments.runlock`), the data fetcher (:mod:`gluon_bbb.data.fetch`) and the
search's workers (:mod:`gluon_bbb.experiments.search`).

What a lock file holds is ``filelock``'s: ``filelock`` before 3.30 (the newest on Python 3.9 is
3.19.1) empties it at every attempt, even one refused, and on Windows it is removed on release.
Nothing is kept in it: a holder that names itself writes a file of its own. ``filelock`` is
imported on first use, so importing this module needs neither ``fcntl`` nor ``msvcrt``.
"""
import contextlib
import errno
import os
from typing import Iterator, Optional

__all__ = ["LockTimeout", "try_lock", "waiting_lock"]


class LockTimeout(TimeoutError):
    """Another process held the lock for longer than the caller would wait."""


def _file_lock(path):
    import filelock  # on first use: see the module's docstring

    return filelock, filelock.FileLock(os.fspath(path), thread_local=False)


def _acquire(lock, **kwargs):
    """``lock.acquire(**kwargs)``. On a file system without ``flock``, ``filelock`` before 3.29
    raises NotImplementedError, an OSError (ENOSYS) here; later ones fall back to a lock file
    that names its holder, which a holder killed on the same machine leaves free."""
    try:
        lock.acquire(**kwargs)
    except NotImplementedError as error:
        raise OSError(errno.ENOSYS, str(error), lock.lock_file) from None


def try_lock(path):
    """Take the exclusive lock on the file ``path`` (created if need be) if no other process
    holds it; do not wait.

    Returns
    -------
    filelock.BaseFileLock or None
        The held lock (``.release()`` it, or let the process end), or None when another process
        holds it.

    Raises
    ------
    OSError
        ``path`` cannot be created or opened, or its file system has no locks.
    """
    filelock, lock = _file_lock(path)
    try:
        _acquire(lock, blocking=False)
    except filelock.Timeout:
        return None
    return lock


@contextlib.contextmanager
def waiting_lock(path, timeout: Optional[float] = None) -> Iterator[None]:
    """``with waiting_lock(path):`` -- hold the exclusive lock on the file ``path`` (created if
    need be), waiting for it: the processes of one machine take turns. Released when the block
    ends or the process dies.

    Parameters
    ----------
    path : str or os.PathLike
    timeout : float, optional
        Seconds to wait at most; None waits as long as it takes.

    Raises
    ------
    LockTimeout
        Another process held the lock for ``timeout`` seconds; the one-line message names
        ``path`` and the wait.
    """
    filelock, lock = _file_lock(path)
    try:
        _acquire(lock, timeout=-1 if timeout is None else timeout)
    except filelock.Timeout:
        raise LockTimeout(f"another process holds {os.fspath(path)}; waited {timeout:g} s "
                          "(let it finish, or stop it)") from None
    try:
        yield
    finally:
        lock.release()
