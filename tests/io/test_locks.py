"""The one lock helper (gluon_bbb.io.locks) on its own: taken and refused within a process, and a
file system without ``flock``. Between processes: tests/experiments/test_runlock.py (the run
lock) and tests/data/test_fetch.py (the fetcher's lock)."""
import errno
import warnings

import pytest

from gluon_bbb.io import locks

fcntl = pytest.importorskip("fcntl")


def test_a_lock_is_refused_while_held_and_free_after_release(tmp_path):
    path = tmp_path / "x.lock"
    held = locks.try_lock(path)
    assert held is not None
    assert locks.try_lock(path) is None  # another open file: refused, as in another process
    with pytest.raises(locks.LockTimeout, match=f"^another process holds {path}; waited 0 s"):
        with locks.waiting_lock(path, timeout=0):
            pass
    held.release()
    with locks.waiting_lock(path, timeout=0):
        pass


def test_a_file_system_without_flock_is_an_oserror_or_a_lock_that_names_its_holder(tmp_path,
                                                                                  monkeypatch):
    """filelock before 3.29 raises NotImplementedError there (an OSError, ENOSYS, here); later
    ones take a lock file instead, with a warning."""
    def no_flock(descriptor, operation):
        raise OSError(errno.ENOSYS, "no flock on this file system")

    monkeypatch.setattr(fcntl, "flock", no_flock)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # filelock's "falling back to SoftFileLock"
        try:
            held = locks.try_lock(tmp_path / "x.lock")
        except OSError as error:
            assert error.errno == errno.ENOSYS and error.filename == str(tmp_path / "x.lock")
        else:
            assert held is not None
            assert locks.try_lock(tmp_path / "x.lock") is None
            held.release()
