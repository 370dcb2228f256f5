"""Tests of the gluon-bbb command line (gluon_bbb.cli), on small subsets of the real MNIST."""
import json
import logging
import shutil
import subprocess
import sys

import pytest

from gluon_bbb.checkpoint import write_json
from gluon_bbb.cli import main
from synthetic import needs_mnist, require_mnist

TRAIN = ["train", "--subset", "512", "--epochs", "1", "--hidden", "32", "--no-progress"]



@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    """A run trained for one epoch; tests that change it work on a copy."""
    require_mnist()
    out = tmp_path_factory.mktemp("cli") / "run"
    code = main(TRAIN + ["--output-dir", str(out)])
    assert code == 0
    return out


def _copy(run, tmp_path):
    copy = tmp_path / "run"
    shutil.copytree(run, copy)
    return copy


@needs_mnist
def test_train_writes_a_complete_run_folder(run_dir):
    for name in ("checkpoint.bbb", "metrics.json", "config.json", "train.log"):
        assert (run_dir / name).is_file(), name
    metrics = json.loads((run_dir / "metrics.json").read_text())
    assert {"config", "history", "test_error_mean", "test_error_mc", "num_weights",
            "seconds"} <= set(metrics)
    assert 0.0 <= metrics["test_error_mean"] <= 1.0
    assert 0.0 <= metrics["test_error_mc"] <= 1.0
    assert len(metrics["history"]) == 1 and metrics["history"][0]["epoch"] == 1
    assert metrics["num_weights"] == 784 * 32 + 32 + 32 * 10 + 10
    config = json.loads((run_dir / "config.json").read_text())
    assert config == metrics["config"]
    assert config["hidden"] == [32] and config["subset"] == 512 and config["seed"] == 0
    log = (run_dir / "train.log").read_text()
    assert "start:" in log and "epoch 1/1  free energy " in log and "finish:" in log
    assert not logging.getLogger("gluon_bbb").handlers  # main() removed its log handlers


@needs_mnist
def test_train_prints_the_test_errors(tmp_path, capsys):
    assert main(TRAIN + ["--subset", "128", "--hidden", "8", "--prior", "gaussian",
                         "--output-dir", str(tmp_path / "g")]) == 0
    last = capsys.readouterr().out.strip().splitlines()[-1]
    assert last.startswith("test error: ") and "(posterior mean)" in last
    assert last.endswith("(MC 10 samples)")
    config = json.loads((tmp_path / "g" / "config.json").read_text())
    assert config["prior"] == "gaussian" and config["sigma"] == 1.0


@needs_mnist
def test_default_output_dir_is_under_runs(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(TRAIN + ["--subset", "128", "--hidden", "8"]) == 0
    (run,) = (tmp_path / "runs").iterdir()
    assert run.name.startswith("mnist-scale-mixture-")
    assert (run / "metrics.json").is_file()


@needs_mnist
def test_resume_continues_to_the_requested_epoch(run_dir, tmp_path):
    run = _copy(run_dir, tmp_path)
    assert main(TRAIN + ["--epochs", "2", "--output-dir", str(run), "--resume"]) == 0
    metrics = json.loads((run / "metrics.json").read_text())
    assert [record["epoch"] for record in metrics["history"]] == [1, 2]
    first = json.loads((run_dir / "metrics.json").read_text())["history"][0]
    assert metrics["history"][0] == first  # epoch 1 was loaded, not retrained
    assert "resuming" in (run / "train.log").read_text()


@needs_mnist
def test_resumed_training_matches_an_uninterrupted_run(run_dir, tmp_path):
    resumed, straight = _copy(run_dir, tmp_path), tmp_path / "straight"
    assert main(TRAIN + ["--epochs", "2", "--output-dir", str(resumed), "--resume"]) == 0
    assert main(TRAIN + ["--epochs", "2", "--output-dir", str(straight)]) == 0
    history = [json.loads((run / "metrics.json").read_text())["history"]
               for run in (resumed, straight)]
    for record in history:
        for entry in record:
            entry.pop("seconds")
    assert history[0] == history[1]  # same minibatches and noise after the restart


@needs_mnist
def test_existing_checkpoint_is_not_overwritten_without_resume(run_dir, tmp_path, capsys):
    run = _copy(run_dir, tmp_path)
    before = (run / "checkpoint.bbb").read_bytes()
    assert main(TRAIN + ["--output-dir", str(run)]) == 2
    assert "--resume" in capsys.readouterr().err
    assert (run / "checkpoint.bbb").read_bytes() == before


@needs_mnist
def test_evaluate_prints_the_test_error_of_a_run(run_dir, capsys):
    assert main(["evaluate", str(run_dir), "--num-samples", "3"]) == 0
    last = capsys.readouterr().out.strip().splitlines()[-1]
    assert last.startswith("test error: ") and last.endswith("(MC 3 samples)")
    # the posterior mean is deterministic: the same number as at the end of training
    metrics = json.loads((run_dir / "metrics.json").read_text())
    assert f"{100 * metrics['test_error_mean']:.2f}% (posterior mean)" in last


@needs_mnist
def test_prune_writes_the_table_and_plot_writes_the_figures(run_dir, tmp_path, capsys):
    run = _copy(run_dir, tmp_path)
    assert main(["plot", str(run)]) == 0  # before pruning: no pruning curve
    figures = ["training_curves.png", "snr_density.png", "weight_density.png"]
    assert capsys.readouterr().out.split() == [str(run / name) for name in figures]
    assert not (run / "pruning_curve.png").exists()

    assert main(["prune", str(run), "--fractions", "0", "0.5", "--method", "snr", "naive"]) == 0
    printed = capsys.readouterr().out
    saved = json.loads((run / "pruning.json").read_text())
    rows = saved["rows"]
    assert [(r["method"], r["fraction"]) for r in rows] == [
        ("snr", 0.0), ("snr", 0.5), ("naive", 0.0), ("naive", 0.5)]
    num_weights = 784 * 32 + 32 * 10  # biases are kept and not counted
    assert all(r["num_weights"] == num_weights for r in rows)
    assert [r["num_nonzero"] for r in rows if r["fraction"] == 0.5] == [num_weights // 2] * 2
    # nothing removed: the posterior-mean error measured at the end of training
    test_error_mean = json.loads((run / "metrics.json").read_text())["test_error_mean"]
    assert [r["test_error"] for r in rows if r["fraction"] == 0] == [test_error_mean] * 2
    markdown = (run / "pruning.md").read_text()
    assert markdown in printed
    assert "| 50% | naive | 12,704 |" in markdown

    assert main(["plot", str(run)]) == 0
    for name in figures + ["pruning_curve.png"]:
        assert (run / name).read_bytes().startswith(b"\x89PNG"), name


@pytest.mark.parametrize("args, message", [
    (["train", "--ctx", "gpu(3)"], "gpu(3) is not available"),
    (["train", "--data-dir", "/nonexistent"], "/nonexistent"),
    (["train", "--pi", "1.5"], "pi must lie strictly between 0 and 1"),
    (["train", "--log-sigma2", "0", "--log-sigma1", "1"], "needs sigma2 < sigma1, i.e. log_sigma2 > log_sigma1 (--log-sigma2 > --log-sigma1"),
    (["train", "--prior", "gaussian", "--sigma", "0"], "sigma must be a positive"),
    (["train", "--optimizer", "bogus"], "unknown optimizer 'bogus'"),
    (["evaluate", "/nonexistent/run"], "config.json not found"),
    (["prune", "/nonexistent/run"], "config.json not found"),
    (["plot", "/nonexistent/run"], "config.json not found"),
])
def test_user_errors_exit_2_with_one_clear_message(args, message, tmp_path, capsys):
    code = main(args + ["--output-dir", str(tmp_path / "run")] if args[0] == "train" else args)
    captured = capsys.readouterr()
    assert code == 2
    assert captured.err.startswith("gluon-bbb: error: ")
    assert message in captured.err
    assert "Traceback" not in captured.err + captured.out
    assert not (tmp_path / "run" / "checkpoint.bbb").exists()


def test_missing_gpu_is_a_one_line_error(capsys):
    assert main(["train", "--ctx", "gpu(3)"]) == 2
    assert len(capsys.readouterr().err.strip().splitlines()) == 1


@pytest.mark.parametrize("args", [[], ["train", "--hidden", "0"], ["train", "--epochs", "x"],
                                  ["train", "--prior", "laplace"], ["train", "--kl-scale", "0"],
                                  ["fit"],
                                  ["prune", "run", "--fractions", "1"],
                                  ["prune", "run", "--fractions", "-0.1"],
                                  ["prune", "run", "--method", "random"], ["plot"]])
def test_usage_errors_exit_2(args, capsys):
    assert main(args) == 2
    assert "usage: gluon-bbb" in capsys.readouterr().err


def test_metrics_are_strict_json(tmp_path):
    path = tmp_path / "metrics.json"
    write_json(path, {"loss": float("nan"), "history": [{"x": float("inf"), "y": 1.5}]})
    assert json.loads(path.read_text()) == {"loss": None, "history": [{"x": None, "y": 1.5}]}


def test_python_dash_m_help():
    result = subprocess.run([sys.executable, "-m", "gluon_bbb", "--help"],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert all(command in result.stdout for command in ("train", "evaluate", "prune", "plot"))


def test_python_dash_m_exit_code_without_traceback():
    result = subprocess.run([sys.executable, "-m", "gluon_bbb", "train", "--pi", "0"],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 2
    assert result.stderr.startswith("gluon-bbb: error: ") and "Traceback" not in result.stderr
