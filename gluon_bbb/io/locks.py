"""Exclusive locks on a file, between the processes of one machine: ``fcntl.flock`` where it
exists (Linux, macOS), ``msvcrt.locking`` on the file's first byte on Windows. The operating
system releases either when the process ends, however it ends. Used by the run folders' writer
lock (:mod:`gluon_bbb.experiments.runlock`) and the data fetcher (:mod:`gluon_bbb.data.fetch`);
importing this module needs neither.
"""
import contextlib
import errno
import os
import time

try:
    import fcntl
except ImportError:  # Windows
    fcntl = None
try:
    import msvcrt
except ImportError:  # not Windows
    msvcrt = None

__all__ = ["try_lock", "unlock", "waiting_lock"]

_POLL_S = 0.05


def _lock_windows(descriptor, blocking):
    os.lseek(descriptor, 0, os.SEEK_SET)
    while True:
        try:
            msvcrt.locking(descriptor, msvcrt.LK_NBLCK, 1)
            return
        except OSError:
            if not blocking:
                raise BlockingIOError(errno.EWOULDBLOCK, "locked by another process") from None
            time.sleep(_POLL_S)


def try_lock(descriptor, blocking=False):
    """Lock the open file ``descriptor`` exclusively; wait for it with ``blocking``.

    Raises
    ------
    BlockingIOError
        Without ``blocking``, another process holds the lock (errno EWOULDBLOCK or EAGAIN).
    OSError
        The platform has no file locks.
    """
    if fcntl is not None:
        fcntl.flock(descriptor, fcntl.LOCK_EX | (0 if blocking else fcntl.LOCK_NB))
    elif msvcrt is not None:
        _lock_windows(descriptor, blocking)
    else:
        raise OSError(errno.ENOSYS, "no file locks on this platform")


def unlock(descriptor):
    """Release the lock that :func:`try_lock` took (closing the file releases it too)."""
    if fcntl is not None:
        fcntl.flock(descriptor, fcntl.LOCK_UN)
    elif msvcrt is not None:
        os.lseek(descriptor, 0, os.SEEK_SET)
        msvcrt.locking(descriptor, msvcrt.LK_UNLCK, 1)


@contextlib.contextmanager
def waiting_lock(path):
    """``with waiting_lock(path):`` -- hold an exclusive lock on the file ``path`` (created with
    mode 0644 under the umask if need be), waiting for it: the processes of one machine take
    turns. Released when the block ends or the process dies."""
    descriptor = os.open(os.fspath(path), os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try_lock(descriptor, blocking=True)
        yield
    finally:
        os.close(descriptor)  # closing releases the lock
