"""One writer per run folder (gluon_bbb.experiments.runlock), through the API and the command line, and a
GPU that this MXNet build cannot run named at once (gluon_bbb.context)."""
import os
import signal
import subprocess
import sys
import textwrap
import time

import mxnet as mx
import pytest

from gluon_bbb import context
from gluon_bbb.cli import main
from gluon_bbb.experiments.runlock import LOCK_FILES, PID_FILE, RunFolderBusyError, RunFolderLock


#: A process that holds the lock of each folder it reads, one line each, until the next line;
#: given ``try FOLDER``, it only tries to take that folder's lock and says whether it was busy.
HOLD_EACH = textwrap.dedent("""
    import sys
    from gluon_bbb.experiments.runlock import RunFolderBusyError, RunFolderLock
    while line := sys.stdin.readline().rstrip("\\n"):
        if line.startswith("try "):
            try:
                with RunFolderLock(line[len("try "):]):
                    print("free", flush=True)
            except RunFolderBusyError:
                print("busy", flush=True)
            continue
        with RunFolderLock(line):
            print("locked", flush=True)
            sys.stdin.readline()
        print("released", flush=True)
""")


@pytest.fixture(scope="module")
def holders():
    """The module's holding process, started again where a test killed it (each start imports
    MXNet: seconds)."""
    started = []

    def alive():
        if not started or started[-1].poll() is not None:
            started.append(subprocess.Popen([sys.executable, "-c", HOLD_EACH], stdin=subprocess.PIPE,
                                            stdout=subprocess.PIPE, text=True))
        return started[-1]

    yield alive
    for process in started:
        process.kill()
        process.wait()


@pytest.fixture
def held(tmp_path, holders):
    """A run folder whose lock another process holds; yields (folder, that process)."""
    folder = tmp_path / "run"
    holder = holders()
    holder.stdin.write(f"{folder}\n")
    holder.stdin.flush()
    assert holder.stdout.readline().strip() == "locked"
    yield folder, holder
    if holder.poll() is None:  # alive: it lets go of this folder
        holder.stdin.write("next\n")
        holder.stdin.flush()
        assert holder.stdout.readline().strip() == "released"


def test_a_second_writer_is_refused_with_the_folder_and_the_holders_pid(held):
    folder, holder = held
    with pytest.raises(RunFolderBusyError, match=f"{folder} is being written by another "
                                                 f"process \\(pid {holder.pid}\\)"):
        with RunFolderLock(folder):
            pass


def test_the_holders_pid_survives_refused_writers(held):
    """Each refused writer names the holder: an attempt leaves its record as it was."""
    folder, holder = held
    for _ in range(2):
        with pytest.raises(RunFolderBusyError, match=f"\\(pid {holder.pid}\\)"):
            with RunFolderLock(folder):
                pass


def test_the_lock_is_released_when_the_holder_is_killed(held):
    folder, holder = held
    holder.send_signal(signal.SIGKILL)
    holder.wait()
    with RunFolderLock(folder):  # the operating system released it
        assert int((folder / PID_FILE).read_text()) == os.getpid()


def test_the_lock_is_reentrant_within_a_process(tmp_path, holders):
    """Taken again inside itself, the lock is still held for other processes (the module's
    holding process tries it) until the outer block ends."""
    def other_process_finds(folder):
        holder = holders()
        holder.stdin.write(f"try {folder}\n")
        holder.stdin.flush()
        return holder.stdout.readline().strip()

    with RunFolderLock(tmp_path / "a"):
        with RunFolderLock(tmp_path / "a"):
            pass
        assert other_process_finds(tmp_path / "a") == "busy"
    assert other_process_finds(tmp_path / "a") == "free"


@pytest.mark.parametrize("command", [
    ["train", "--resume", "--epochs", "1", "--no-progress", "--output-dir"],
    ["reproduce", "bbb-mixture-400", "--epochs", "1", "--hidden", "8", "--output-dir"],
    ["reproduce", "sgd-400", "--epochs", "1", "--hidden", "8", "--output-dir"],
])
def test_writing_commands_exit_2_on_a_folder_another_process_writes(held, command, capsys):
    folder, holder = held
    assert main(command + [str(folder)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"pid {holder.pid}" in err[0] and str(folder) in err[0]
    assert sorted(os.listdir(folder)) == sorted(LOCK_FILES)  # nothing was written


def test_search_trials_take_the_lock(tmp_path, fake_mnist):
    """A trial whose run folder another process writes fails (naming the folder and the pid)
    and the search goes on; the folder is left as the other writer has it."""
    trial = tmp_path / "search" / "trials" / "lr0.001_samples1_pi0.5_logsigma1-0_logsigma2-6"
    with RunFolderLock(trial):  # this process writes the trial's folder
        probe = subprocess.run(
            [sys.executable, "-m", "gluon_bbb", "search", "--epochs", "1", "--lr", "1e-3",
             "--num-samples", "1", "--pi", "0.5", "--neg-log-sigma1", "0", "--neg-log-sigma2", "6",
             "--hidden", "8", "--subset", "64", "--data-dir", str(fake_mnist),
             "--output-dir", str(tmp_path / "search"), "--no-progress"],
            capture_output=True, text=True)
    assert probe.returncode == 0, probe.stderr
    assert "1 trials (1 fail)" in probe.stdout
    assert f"{trial} is being written by another process (pid {os.getpid()})" in probe.stderr
    assert "Traceback" not in probe.stderr
    assert sorted(os.listdir(trial)) == sorted(LOCK_FILES)


# ---------------------------------------------------------------------------- GPUs
def test_a_gpu_this_mxnet_cannot_run_is_named_at_once(monkeypatch):
    """An H100 with the MXNet 1.9.1 CUDA wheels: the device exists, kernels fail."""
    monkeypatch.setattr(mx.context, "num_gpus", lambda: 1)

    def no_kernel(ctx):
        raise mx.base.MXNetError("[10:00:00] src/operator/tensor/elemwise_binary_scalar_op.h:"
                                 "Check failed: err == cudaSuccess (209 vs. 0) : Name: "
                                 "mxnet_generic_kernel ErrStr:no kernel image is available for "
                                 "execution on the device\nStack trace: ...")
    monkeypatch.setattr(context, "_run_one_kernel", no_kernel)
    monkeypatch.setattr(context, "gpu_compute_capability", lambda device_id=0: "9.0")
    with pytest.raises(ValueError) as caught:
        context.resolve_context("gpu(0)")
    message = str(caught.value)
    assert "gpu(0) (compute capability 9.0)" in message
    assert "no kernel image is available" in message and "sm_90" in message
    assert "5.0-8.6" in message and "\n" not in message
    monkeypatch.setattr(context, "gpu_compute_capability", lambda device_id=0: None)
    with pytest.raises(ValueError, match="an unknown compute capability"):
        context.resolve_context(mx.gpu(0))


def test_a_gpu_that_runs_is_accepted_and_checked_once(monkeypatch):
    monkeypatch.setattr(mx.context, "num_gpus", lambda: 2)
    calls = []
    monkeypatch.setattr(context, "_run_one_kernel", calls.append)
    monkeypatch.setattr(context, "_CHECKED_GPUS", set())
    assert context.resolve_context("gpu(1)") == mx.gpu(1)
    assert context.resolve_context("gpu:1") == mx.gpu(1)
    assert calls == [mx.gpu(1)]


def test_the_compute_capability_query_needs_no_mxnet_and_fails_softly():
    started = time.time()
    capability = context.gpu_compute_capability(0)
    assert capability is None or capability.count(".") == 1  # None on a machine without CUDA
    assert time.time() - started < 10


def test_taking_the_lock_removes_only_half_written_temporary_files(tmp_path):
    folder = tmp_path / "run"
    folder.mkdir()
    (folder / "checkpoint.bbb.k2x_9q0z.tmp").write_bytes(b"half")  # atomic_write_bytes' name
    (folder / "notes.v2.tmp").write_text("the user's")
    with RunFolderLock(folder):
        pass
    assert set(os.listdir(folder)) - set(LOCK_FILES) == {"notes.v2.tmp"}


def test_a_sigterm_inside_mxnets_constructor_waits_until_it_has_built_the_array(tmp_path,
                                                                               monkeypatch):
    """SIGTERM at the first line of ``NDArray``'s constructor (simulated there by a trace
    function calling the handler, as the interpreter would): raised there, the half-built array's
    ``__del__`` would report a missing ``handle``. The writer's handler sends the signal again
    instead, and it stops the run in the caller's code, with nothing reported."""
    from mxnet._ctypes.ndarray import NDArrayBase
    from gluon_bbb.experiments.runlock import Terminated
    unraisable = []
    monkeypatch.setattr(sys, "unraisablehook", unraisable.append)
    constructor = NDArrayBase.__init__.__code__
    with RunFolderLock(tmp_path):
        handler = signal.getsignal(signal.SIGTERM)
        interrupted = []

        def signal_at_the_constructors_first_line(frame, event, arg):
            if event == "call" and frame.f_code is constructor and not interrupted:
                interrupted.append(frame.f_code.co_name)
                handler(signal.SIGTERM, frame)
            return None

        sys.settrace(signal_at_the_constructors_first_line)
        try:
            array = mx.nd.zeros((3,))
        finally:
            sys.settrace(None)
        assert interrupted == ["__init__"]
        assert array.shape == (3,)  # built whole
        with pytest.raises(Terminated) as stopped:
            for _ in range(200):  # the signal sent again arrives within milliseconds
                time.sleep(0.01)
        assert stopped.value.code == 128 + signal.SIGTERM
    del array
    import gc
    gc.collect()
    assert unraisable == []
