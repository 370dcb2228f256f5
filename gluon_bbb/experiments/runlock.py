"""One writer per run folder; and a start barrier for worker processes (:func:`meet_workers`).

``train``, ``reproduce`` and every ``search`` trial hold an exclusive lock on their run folder
while they write it: an exclusive lock (:mod:`gluon_bbb.io.locks`: ``filelock``, which takes
``fcntl.flock``, or Windows' own file lock) on the file :data:`LOCK_FILE` inside it; the holder
writes its pid in :data:`PID_FILE`. The operating system releases the lock when the process ends,
however it ends (even by SIGKILL), so a crashed run never leaves the folder locked. While a process
holds a folder, SIGTERM (``kill``'s default, what a scheduler or a container stop sends) stops it
as an exception would, raising :class:`Terminated` in the main thread: the run's session is
recorded before the process ends, with exit status 143 (128 + SIGTERM). A signal that lands inside
MXNet's own Python code is delivered again a few milliseconds later, until it lands outside it:
raised there, the exception could leave an object MXNet was building without the attribute its
``__del__`` frees (an ``NDArray`` without its ``handle``). A second writer is refused
at once with a :class:`RunFolderBusyError` naming the folder and the holder's pid. Within one
process the lock is re-entrant (the command line holds it around ``reproduce.run``, which takes it
too). Readers (``evaluate``, ``prune``, ``plot``, ...) take no lock: checkpoints are replaced
atomically. The writer that takes the lock removes the temporary files a killed writer may have
left half-written.
"""
import logging
import os
import signal
import threading
import time

from .._checks import check_int
from ..io.locks import try_lock, waiting_lock
from ..io.checkpoint import remove_stale_temporary_files

__all__ = ["LOCK_FILE", "PID_FILE", "LOCK_FILES", "RunFolderBusyError", "RunFolderLock",
           "Terminated", "waiting_lock", "meet_workers"]

logger = logging.getLogger(__name__)

#: The lock file inside a run folder (its content is ``filelock``'s; on Windows it is removed on
#: release).
LOCK_FILE = ".writer.lock"
#: The file inside a run folder that holds the pid of the last process that locked it (apart
#: from the lock file: ``filelock`` before 3.30 empties the lock file at each refused attempt).
PID_FILE = ".writer.pid"
#: The writer lock's files, which a run folder may hold besides a run's own.
LOCK_FILES = (LOCK_FILE, PID_FILE)
#: Folders (real paths) this process holds, with how many times each is entered.
_HELD = {}


#: The SIGTERM handler that was in place before this process took its first folder.
_SIGTERM_BEFORE = []


class RunFolderBusyError(ValueError):
    """Another process is writing the run folder."""


class Terminated(SystemExit):
    """Raised in the main thread by SIGTERM while a run folder is held: the writer's cleanup
    (its session record) runs, and the process exits with status 128 + SIGTERM."""


#: Seconds after which a signal that landed inside MXNet's own code is sent again.
_REDELIVERY_DELAY = 0.005


def _inside_mxnet(frame):
    """Whether the Python frame a signal interrupted is MXNet's own code."""
    return frame is not None and frame.f_globals.get("__name__", "").partition(".")[0] == "mxnet"


def _send_again(signum):
    timer = threading.Timer(_REDELIVERY_DELAY, os.kill, (os.getpid(), signum))
    timer.daemon = True
    timer.start()


def _stop(signum, frame):
    if _inside_mxnet(frame):
        _send_again(signum)
        return
    raise Terminated(128 + signum)


def _catch_sigterm():
    """Turn SIGTERM into :class:`Terminated`, where it can be: in the main thread, over the
    default action only (a handler the program set stays)."""
    if threading.current_thread() is threading.main_thread() \
            and signal.getsignal(signal.SIGTERM) == signal.SIG_DFL:
        _SIGTERM_BEFORE.append(signal.signal(signal.SIGTERM, _stop))


def _release_sigterm():
    if _SIGTERM_BEFORE and threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, _SIGTERM_BEFORE.pop())


class RunFolderLock:
    """``with RunFolderLock(folder):`` -- hold the folder's writer lock (creating the folder).

    Parameters
    ----------
    folder : str

    Raises
    ------
    RunFolderBusyError
        On entering, if another process holds the lock.
    """

    def __init__(self, folder):
        self.folder = os.fspath(folder)
        self.path = os.path.join(self.folder, LOCK_FILE)
        self.lock = None
        self.key = None

    def __enter__(self):
        os.makedirs(self.folder, exist_ok=True)
        self.key = os.path.realpath(self.folder)
        if self.key in _HELD:
            _HELD[self.key] += 1
            return self
        lock = try_lock(self.path)
        if lock is None:
            holder = _read_pid(os.path.join(self.folder, PID_FILE))
            raise RunFolderBusyError(
                f"{self.folder} is being written by another process (pid {holder or 'unknown'}); "
                "wait for it to finish, stop it, or choose another output folder")
        try:
            with open(os.path.join(self.folder, PID_FILE), "w", encoding="ascii") as handle:
                handle.write(f"{os.getpid()}\n")
        except BaseException:
            lock.release()
            raise
        self.lock = lock
        if not _HELD:
            _catch_sigterm()
        _HELD[self.key] = 1
        removed = remove_stale_temporary_files(self.folder)
        if removed:
            logger.info("removed %d half-written temporary file(s) of an interrupted writer in %s",
                        len(removed), self.folder)
        return self

    def __exit__(self, *exc_info):
        _HELD[self.key] -= 1
        if not _HELD[self.key]:
            del _HELD[self.key]
            if not _HELD:
                _release_sigterm()
        if self.lock is not None:
            self.lock.release()
            self.lock = None
        return False


def _read_pid(path):
    """The pid written in the file ``path``, or None."""
    try:
        with open(path, "rb") as handle:
            text = handle.read(32).decode("ascii").strip()
    except (OSError, UnicodeDecodeError):
        return None
    return int(text) if text.isdigit() else None


def meet_workers(folder, worker, count, timeout=120.0):
    """Wait until ``count`` workers started together have each called this (a start barrier).

    The workers that ``gluon-bbb search --workers N`` starts on one machine meet here before
    their first trial, so that each takes one of the first N trials: without it the first
    to start can take every trial of a small study before the others have imported MXNet.
    Each worker leaves a file ``worker-<index>`` in ``folder``.

    Parameters
    ----------
    folder : str, one folder per start (created if missing)
    worker : int, this worker's index, 0 <= worker < count
    count : int, the workers that meet
    timeout : float, seconds; then the worker goes on alone (a sibling may have died)

    Returns
    -------
    bool, True if all ``count`` workers arrived in time.
    """
    count = check_int("count", count)
    if not 0 <= worker < count:
        raise ValueError(f"worker must lie in [0, {count}), got {worker!r}")
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, f"worker-{worker}"), "w", encoding="utf-8") as handle:
        handle.write(str(os.getpid()))
    deadline = time.monotonic() + timeout
    while True:
        arrived = sum(os.path.exists(os.path.join(folder, f"worker-{index}"))
                      for index in range(count))
        if arrived == count:
            return True
        if time.monotonic() >= deadline:
            logger.warning("worker %d: %d of %d workers arrived within %g s; going on",
                           worker, arrived, count, timeout)
            return False
        time.sleep(0.05)
