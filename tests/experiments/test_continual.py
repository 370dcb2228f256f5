"""The resumable continual-learning runner (gluon_bbb.experiments.continual) on tiny synthetic
tasks: a record after every task, a resumed run identical to an uninterrupted one, a foreign or
bad run folder refused with one line, one writer per folder."""
import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from gluon_bbb.cli import main
from gluon_bbb.experiments import continual
from gluon_bbb.io.checkpoint import read_checkpoint
from gluon_bbb.experiments.runlock import RunFolderBusyError

from synthetic import blobs

#: What differs between two runs of the same settings: when and where they ran.
TIMING = ("seconds", "seconds_per_task", "machine", "command", "written")


@pytest.fixture(scope="module")
def data():
    x, y = blobs(96, 12, 3, seed=0)
    return x[:64], y[:64], x[64:], y[64:]


def tiny(**overrides):
    values = dict(NUM_TASKS=3, TRAIN_PER_TASK=64, TEST_PER_TASK=32, EPOCHS_PER_TASK=2,
                  ML_START_EPOCHS=1, BATCH_SIZE=16, HIDDEN=8, TRAIN_SAMPLES=2, EVAL_SAMPLES=2,
                  LEARNING_RATE=0.01)
    values.update(overrides)
    return continual.continual_settings("vcl", **values)


def untimed(record):
    return {key: value for key, value in record.items() if key not in TIMING}


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory, data):
    """An uninterrupted run of three tasks, with every record it wrote on the way."""
    folder = tmp_path_factory.mktemp("uninterrupted")
    written = []
    original = continual._write_record

    def keep(run_dir, record):
        written.append(json.loads(json.dumps(record)))
        original(run_dir, record)

    continual._write_record = keep
    try:
        record = continual.run_continual(str(folder), tiny(), data=data)
    finally:
        continual._write_record = original
    return folder, record, written


def test_a_record_after_every_task_with_its_settings(uninterrupted):
    folder, record, written = uninterrupted
    assert [r["tasks_done"] for r in written] == [1, 2, 3]
    assert continual.read_record(str(folder)) == json.loads(json.dumps(record))
    for done, r in enumerate(written, start=1):
        assert r["settings"]["PREPROCESSING"] == "255" and r["settings"]["TRAIN_SAMPLES"] == 2
        assert r["settings"]["EPOCHS_PER_TASK"] == 2 and r["settings"]["SEED"] == 0
        assert r["methods"] == [continual.PLAIN, continual.UPDATING_ML]
        for method in r["methods"]:
            matrix = r["errors_after_task_on_task"][method]
            assert len(matrix) == 3 and all(len(row) == 3 for row in matrix)
            for t, row in enumerate(matrix):  # measured: the tasks seen after each task done
                seen = t < done
                assert all((e is not None) == (seen and k <= t) for k, e in enumerate(row))
                # the same measurements in every later record
                assert row == record["errors_after_task_on_task"][method][t] or not seen
            averages = r["average_accuracy_after_task"][method]
            assert averages == pytest.approx([1 - np.mean(matrix[t][:t + 1])
                                              for t in range(done)], abs=1e-6)
            assert len(r["seconds_per_task"][method]) == done
        assert r["ml_start_error_task_1"] is not None
    # the error is a fraction of the 32 test images (rounded to 6 places)
    errors = [e for row in record["errors_after_task_on_task"][continual.PLAIN] for e in row
              if e is not None]
    assert all(abs(e * 32 - round(e * 32)) < 1e-4 for e in errors)


@pytest.mark.parametrize("where", ["inside a task", "between checkpoint and record"])
def test_a_resumed_run_writes_the_uninterrupted_record(uninterrupted, tmp_path, data, where,
                                                        monkeypatch):
    _, expected, _ = uninterrupted
    folder = tmp_path / "run"
    calls = []
    if where == "inside a task":  # the second method of task 2 is stopped
        original = continual._learn_task

        def stop(method, t, *args):
            calls.append((method, t))
            if len(calls) == 4:
                raise KeyboardInterrupt
            return original(method, t, *args)
        monkeypatch.setattr(continual, "_learn_task", stop)
    else:  # task 2's checkpoint is written, its record is not
        original = continual._write_record

        def stop(run_dir, record):
            calls.append(record["tasks_done"])
            if len(calls) == 2:
                raise KeyboardInterrupt
            return original(run_dir, record)
        monkeypatch.setattr(continual, "_write_record", stop)
    with pytest.raises(KeyboardInterrupt):
        continual.run_continual(str(folder), tiny(), data=data)
    assert continual.read_record(str(folder))["tasks_done"] == 1
    monkeypatch.undo()
    resumed = continual.run_continual(str(folder), tiny(), data=data)
    assert untimed(resumed) == untimed(expected)
    assert untimed(continual.read_record(str(folder))) == untimed(json.loads(json.dumps(expected)))
    ours = read_checkpoint(str(folder / continual.CHECKPOINT)).arrays
    theirs = read_checkpoint(str(uninterrupted[0] / continual.CHECKPOINT)).arrays
    assert ours.keys() == theirs.keys()
    for name in ours:
        np.testing.assert_array_equal(ours[name], theirs[name])


def test_a_longer_run_extends_a_finished_one_with_the_last_posterior_as_prior(
        uninterrupted, tmp_path, data, monkeypatch):
    """Task 3's prior is task 2's posterior: its means are the stored mu bit for bit, its
    standard deviations softplus(rho) in float64 NumPy (to float32's rounding); the run is the
    uninterrupted one."""
    _, expected, _ = uninterrupted
    folder = tmp_path / "run"
    first = continual.run_continual(str(folder), tiny(NUM_TASKS=2), data=data)
    assert first["tasks_done"] == 2 and len(first["errors_after_task_on_task"]["plain"]) == 2
    stored = read_checkpoint(str(folder / continual.CHECKPOINT)).arrays
    priors = []
    original = continual.DiagonalGaussianPrior

    def keep(means, stds):
        priors.append((means, stds))
        return original(means, stds)
    monkeypatch.setattr(continual, "DiagonalGaussianPrior", keep)
    assert untimed(continual.run_continual(str(folder), tiny(), data=data)) == untimed(expected)
    assert len(priors) == 1  # task 3 of the one Bayesian-updating method (index 1)
    means, stds = priors[0]
    rhos = [stored[f"1.rho.{i}"].astype(np.float64) for i in range(6)]
    for i, (mean, std) in enumerate(zip(means, stds)):
        np.testing.assert_array_equal(mean, stored[f"1.mu.{i}"])
        np.testing.assert_allclose(std, np.log1p(np.exp(rhos[i])), rtol=1e-5)  # float32
        np.testing.assert_array_equal(stored[f"1.mu.{i}"], stored[f"1.net.{i}"])
    monkeypatch.undo()
    with pytest.raises(ValueError, match="holds 3 finished tasks, more than the 2 asked for"):
        continual.run_continual(str(folder), tiny(NUM_TASKS=2), data=data)


def one_line(capsys):
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1, lines
    return lines[0]


def test_a_foreign_folder_is_refused_with_one_line(tmp_path, capsys):
    folder = tmp_path / "reproduce-run"
    folder.mkdir()
    (folder / "config.json").write_text("{}")
    command = ["continual", "--setting", "vcl", "--tasks", "2", "--run-dir", str(folder)]
    assert main(command) == 2
    line = one_line(capsys)
    assert str(folder) in line and "config.json" in line and "not a continual-learning" in line
    assert sorted(os.listdir(folder)) == ["config.json"]  # nothing written there
    file = tmp_path / "a-file"
    file.write_text("x")
    assert main(command[:-1] + [str(file)]) == 2
    assert "is a file" in one_line(capsys)


def test_a_damaged_checkpoint_is_refused_with_one_line(uninterrupted, tmp_path, capsys, data):
    folder = tmp_path / "damaged"
    folder.mkdir()
    (folder / continual.CHECKPOINT).write_bytes(b"PK\x03\x04 not a zip archive at all")
    assert main(["continual", "--setting", "vcl", "--run-dir", str(folder)]) == 2
    assert str(folder / continual.CHECKPOINT) in one_line(capsys)
    with pytest.raises(ValueError, match="continual.ckpt"):
        continual.run_continual(str(folder), tiny(), data=data)


def test_a_run_of_other_settings_or_data_is_refused(uninterrupted, data, capsys):
    folder = str(uninterrupted[0])
    before = (uninterrupted[0] / continual.CHECKPOINT).read_bytes()
    with pytest.raises(ValueError, match="other settings .*TRAIN_SAMPLES: 2 there, 3 now"):
        continual.run_continual(folder, tiny(TRAIN_SAMPLES=3), data=data)
    other = (data[0] + 1, *data[1:])
    with pytest.raises(ValueError, match="on other data"):
        continual.run_continual(folder, tiny(), data=other)
    assert main(["continual", "--setting", "notebook", "--tasks", "3", "--run-dir", folder]) == 2
    assert "other settings" in one_line(capsys)
    assert (uninterrupted[0] / continual.CHECKPOINT).read_bytes() == before


HOLD = textwrap.dedent("""
    import sys, time
    from gluon_bbb.experiments.runlock import RunFolderLock
    with RunFolderLock(sys.argv[1]):
        print("locked", flush=True)
        time.sleep(120)
""")


def test_one_writer_per_run_folder(tmp_path, data, capsys):
    folder = tmp_path / "run"
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(folder)], stdout=subprocess.PIPE,
                              text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        with pytest.raises(RunFolderBusyError, match=f"pid {holder.pid}"):
            continual.run_continual(str(folder), tiny(), data=data)
        assert main(["continual", "--tasks", "2", "--run-dir", str(folder)]) == 2
        assert f"pid {holder.pid}" in one_line(capsys)
        assert not os.path.exists(folder / continual.CHECKPOINT)
    finally:
        holder.kill()
        holder.wait()


@pytest.mark.parametrize("overrides, message", [
    ({"NUM_TASKS": 0}, "NUM_TASKS must be an integer >= 1"),
    ({"EVAL_SAMPLES": -1}, "EVAL_SAMPLES must be an integer >= 0"),
    ({"METHODS": ["plain", "plain"]}, "METHODS must be distinct"),
    ({"EPOCHS": 3}, "unknown continual-learning setting 'EPOCHS'"),
])
def test_settings_are_checked(overrides, message):
    with pytest.raises(ValueError, match=message):
        continual.continual_settings("vcl", **overrides)


def test_the_reference_permutations():
    """Task t + 1 of Nguyen et al.'s code: np.random.seed(t), then a shuffle of 784 pixels."""
    orders = continual.permutations(784, 3, 0, True)
    for t, order in enumerate(orders):
        np.random.seed(t)
        expected = np.arange(784)
        np.random.shuffle(expected)
        np.testing.assert_array_equal(order, expected)
    notebook = continual.permutations(784, 3, 0, False)
    np.testing.assert_array_equal(notebook[0], np.arange(784))
    np.testing.assert_array_equal(notebook[1], np.random.default_rng(1).permutation(784))
