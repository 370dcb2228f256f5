"""Training never loses work: a real ``gluon-bbb train`` process killed with SIGKILL at random
moments, and resumed after each kill, leaves a checkpoint that always loads and ends with the
network an uninterrupted run trains, bit for bit."""
import os
import random
import signal
import subprocess
import sys
import threading
import time

import numpy as np

from gluon_bbb.io.checkpoint import read_checkpoint, read_json

KILLS = 12
EPOCHS = 100
#: The SIGTERM test's run: long enough that the signal, sent once the first epoch's checkpoint
#: is there, lands before the last epoch; its resumption then trains the rest
SIGTERM_EPOCHS = 20


def _command(data_dir, out, epochs=EPOCHS):
    return [sys.executable, "-m", "gluon_bbb", "train", "--data-dir", str(data_dir),
            "--subset", "1024", "--num-validation", "100", "--hidden", "100", "--batch-size", "32", "--epochs", str(epochs),
            "--no-progress", "--resume", "--output-dir", str(out)]


class _Process:
    """A training process whose stderr is drained by a thread; ``started`` is set once it has
    begun training (its 'start:' log line)."""

    def __init__(self, command):
        self.process = subprocess.Popen(command, stdout=subprocess.DEVNULL,
                                        stderr=subprocess.PIPE, text=True,
                                        env=dict(os.environ, OMP_NUM_THREADS="1"))
        self.started, self.lines = threading.Event(), []
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self):
        for line in self.process.stderr:
            self.lines.append(line)
            if "start:" in line:
                self.started.set()
        self.started.set()  # the process ended

    def wait(self):
        code = self.process.wait(timeout=300)
        self.reader.join(timeout=10)
        return code


def _check_folder(out, epochs_before):
    """The folder after a kill: every file there loads; returns the checkpoint's epoch."""
    checkpoint = out / "checkpoint.bbb"
    if not checkpoint.exists():
        return epochs_before
    stored = read_checkpoint(checkpoint, with_optimizer=True)
    epoch = stored.metadata["epoch"]
    assert len(stored.metadata["history"]) == epoch >= epochs_before
    assert stored.optimizer is not None and stored.arrays
    read_json(out / "config.json")
    if (out / "best.bbb").exists():
        assert 1 <= read_checkpoint(out / "best.bbb").metadata["epoch"] <= epoch
    if (out / "sessions.json").exists():
        read_json(out / "sessions.json", kind=list)
    return epoch


def _timed_run(command):
    """Runs a process to the end; returns (seconds to its 'start:' line, seconds of training)."""
    launched = time.time()
    run = _Process(command)
    run.started.wait(timeout=120)
    started = time.time()
    assert run.wait() == 0, "".join(run.lines)
    return started - launched, time.time() - started


def test_sigkill_at_random_moments_never_loses_work(tmp_path, fake_mnist):
    # The uninterrupted run comes first and sets the kill clock: however fast the machine, the
    # kills' training time adds up to at most half of one whole run, so the killed run cannot
    # finish before its last kill.
    reference = tmp_path / "uninterrupted"
    startup_seconds, training_seconds = _timed_run(_command(fake_mnist, reference))
    per_kill = training_seconds / (2 * KILLS)

    rng = random.Random(0)
    out = tmp_path / "killed"
    kills, epoch, started, mid_training = 0, 0, time.time(), 0
    while kills < KILLS:
        assert time.time() - started < 300, f"only {kills} kills in 300 s"
        run = _Process(_command(fake_mnist, out))
        if kills % 4 == 3:  # now and then anywhere, start-up and config writing included
            time.sleep(rng.uniform(0.0, startup_seconds))
        else:  # mostly during training and checkpoint writes
            run.started.wait(timeout=120)
            time.sleep(rng.uniform(0.0, per_kill))
        if run.process.poll() is not None:  # finished before the kill: nothing to kill
            assert run.wait() == 0, "".join(run.lines)
            break
        run.process.send_signal(signal.SIGKILL)
        assert run.wait() == -signal.SIGKILL
        kills += 1
        epoch = _check_folder(out, epoch)
        mid_training += epoch < EPOCHS
    assert kills == KILLS, f"the run finished after {kills} kills: make it longer"
    assert mid_training >= KILLS - 2, f"only {mid_training} kills came before the last epoch"
    assert epoch > 0, "no kill came after the first checkpoint"
    leftovers = [name for name in os.listdir(out) if name.endswith(".tmp")]
    finish = _Process(_command(fake_mnist, out))
    assert finish.wait() == 0, "".join(finish.lines)
    assert not [name for name in os.listdir(out) if name.endswith(".tmp")], leftovers

    a = read_checkpoint(out / "checkpoint.bbb", with_optimizer=True)
    b = read_checkpoint(reference / "checkpoint.bbb", with_optimizer=True)
    assert a.metadata["epoch"] == b.metadata["epoch"] == EPOCHS
    for name in b.arrays:
        np.testing.assert_array_equal(a.arrays[name], b.arrays[name])
    assert a.optimizer[0] == b.optimizer[0]
    for name in b.optimizer[1]:
        np.testing.assert_array_equal(a.optimizer[1][name], b.optimizer[1][name])

    def without_times(history):
        return [{k: v for k, v in record.items() if k != "seconds"} for record in history]
    assert without_times(a.metadata["history"]) == without_times(b.metadata["history"])
    result_a, result_b = read_json(out / "result.json"), read_json(reference / "result.json")
    for key in ("best_epoch", "validation_error", "test_error_mean", "test_error_mc"):
        assert result_a[key] == result_b[key], key
    best_a = read_checkpoint(out / "best.bbb").arrays
    best_b = read_checkpoint(reference / "best.bbb").arrays
    for name in best_b:
        np.testing.assert_array_equal(best_a[name], best_b[name])


def test_sigterm_stops_a_run_as_an_exception_would_and_records_its_session(tmp_path, fake_mnist):
    """``kill``'s default signal during training: exit status 143, the session recorded as
    stopped by Terminated with the epochs done, the checkpoint loadable, and the same command
    resumes it."""
    out = tmp_path / "terminated"
    run = _Process(_command(fake_mnist, out, epochs=SIGTERM_EPOCHS))
    run.started.wait(timeout=120)
    deadline = time.time() + 120
    while not (out / "checkpoint.bbb").exists():  # at least one epoch done
        assert run.process.poll() is None and time.time() < deadline, "".join(run.lines)
        time.sleep(0.05)
    run.process.send_signal(signal.SIGTERM)
    assert run.wait() == 128 + signal.SIGTERM, "".join(run.lines)
    epoch = _check_folder(out, 1)
    session = read_json(out / "sessions.json", kind=list)[-1]
    assert session["outcome"] == "stopped by Terminated"
    assert session["epochs_before"] == 0 and 1 <= session["epochs_after"] < SIGTERM_EPOCHS
    assert session["epochs_after"] in (epoch, epoch + 1)  # a last epoch's checkpoint may be ahead
    assert "Traceback" not in "".join(run.lines)
    resumed = _Process(_command(fake_mnist, out, epochs=SIGTERM_EPOCHS))
    assert resumed.wait() == 0, "".join(resumed.lines)
    assert read_json(out / "sessions.json", kind=list)[-1]["epochs_before"] >= epoch


def test_the_sigterm_handler_is_the_writers_alone(tmp_path):
    """Taken with the first folder a process holds, given back with the last; a handler the
    program set itself is left alone."""
    from gluon_bbb.experiments.runlock import RunFolderLock, Terminated
    assert signal.getsignal(signal.SIGTERM) == signal.SIG_DFL
    with RunFolderLock(tmp_path / "a"):
        with RunFolderLock(tmp_path / "b"):
            handler = signal.getsignal(signal.SIGTERM)
            assert handler != signal.SIG_DFL
        assert signal.getsignal(signal.SIGTERM) is handler
        try:
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(1)  # the handler runs in the main thread between bytecodes
            raise AssertionError("SIGTERM did not stop the writer")
        except Terminated as stopped:
            assert stopped.code == 128 + signal.SIGTERM
    assert signal.getsignal(signal.SIGTERM) == signal.SIG_DFL

    def own(signum, frame):
        pass
    signal.signal(signal.SIGTERM, own)
    try:
        with RunFolderLock(tmp_path / "c"):
            assert signal.getsignal(signal.SIGTERM) is own
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
