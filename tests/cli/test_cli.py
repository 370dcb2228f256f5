"""Tests of the gluon-bbb command line (gluon_bbb.cli), on small subsets of the real MNIST."""
import json
import logging
import shutil
import subprocess
import sys

import pytest

from gluon_bbb.io.checkpoint import write_json
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


def _result(run):
    return json.loads((run / "result.json").read_text())


@needs_mnist
def test_train_writes_the_one_run_folder_format(run_dir):
    for name in ("checkpoint.bbb", "best.bbb", "result.json", "sessions.json", "config.json",
                 "train.log"):
        assert (run_dir / name).is_file(), name
    result = _result(run_dir)
    # the recorded errors are the best network's, measured again from the folder alone
    from gluon_bbb import experiments
    measured = experiments.evaluate_run(str(run_dir), mc_samples=result["mc_samples"])
    assert measured["num_test"] == 512 and measured["best_epoch"] == result["best_epoch"]
    assert measured["test_error_mean"] == result["test_error_mean"]
    assert measured["test_error_mc"] == result["test_error_mc"]
    assert (512 * result["test_error_mc"]).is_integer() and result["mc_samples"] >= 1
    assert result["config"] == "custom" and result["paper_test_error"] is None
    assert result["description"].startswith("custom Bayes by Backprop on mnist, 32 ReLU, "
                                            "scale-mixture prior pi=0.5")
    assert len(result["history"]) == 1 and result["history"][0]["epoch"] == 1
    assert "validation_error" in result["history"][0] and result["best_epoch"] == 1
    assert result["protocol"]["validation_examples"] == 512  # --subset applies to each split
    assert result["num_weights"] == 784 * 32 + 32 + 32 * 10 + 10
    config = json.loads((run_dir / "config.json").read_text())
    assert config["reproduce"] == "custom" and config["method"] == "bbb"
    assert config["hidden"] == [32] and config["subset"] == 512 and config["seed"] == 0
    assert "sigma" not in config and config["pi"] == 0.5  # the chosen prior's keys only
    assert result["hyperparameters"] == {k: v for k, v in config.items() if k not in (
        "reproduce", "overrides", "epochs", "data_dir", "description")}
    log = (run_dir / "train.log").read_text()
    assert "start:" in log and "epoch 1/1  free energy " in log and "finish:" in log
    assert not logging.getLogger("gluon_bbb").handlers  # main() removed its log handlers


@needs_mnist
def test_train_a_lenet_with_the_flipout_estimator(tmp_path, monkeypatch):
    from gluon_bbb.experiments import runners
    made = []
    real = runners.make_bbb_trainer
    monkeypatch.setattr(runners, "make_bbb_trainer",
                        lambda *a, **k: made.append(real(*a, **k)) or made[-1])
    out = tmp_path / "run"
    assert main(TRAIN + ["--network", "lenet", "--estimator", "flipout", "--output-dir", str(out)]) == 0
    config = json.loads((out / "config.json").read_text())
    assert config["estimator"] == "flipout" and config["network"] == "lenet"
    result = _result(out)
    assert result["description"].startswith("custom Bayes by Backprop on mnist, LeNet-5, ")
    assert result["description"].endswith(", flipout estimator")
    assert result["num_weights"] == 61_706
    assert made and all(t.estimator == "flipout" for t in made)
    assert made[0].estimator_report.count("conv") == 2  # both convolutions, and the Dense layers
    assert main(["evaluate", str(out), "--num-samples", "2"]) == 0  # read back as a LeNet


@needs_mnist
def test_train_learns_the_prior_and_resumes_it(tmp_path):
    out = tmp_path / "run"
    args = TRAIN + ["--subset", "256", "--hidden", "16", "--learn-prior", "--lr", "0.01",
                    "--output-dir", str(out)]
    assert main(args) == 0
    assert main(args[:4] + ["2"] + args[5:] + ["--resume"]) == 0  # --epochs 2
    config = json.loads((out / "config.json").read_text())
    assert config["learn_prior"] is True
    result = _result(out)
    assert "scale-mixture prior learned from pi=0.5" in result["description"]
    learned = [record["prior"] for record in result["history"]]
    assert len(learned) == 2 and learned[0] != learned[1]
    assert learned[1]["sigma1"] != 1.0 and learned[1]["pi"] != 0.5
    # the stopped and resumed run learned exactly what an uninterrupted one learns
    straight = tmp_path / "straight"
    assert main(args[:4] + ["2"] + args[5:-1] + [str(straight)]) == 0
    assert [record["prior"] for record in _result(straight)["history"]] == learned
    # and the checkpoint holds the prior of its last epoch
    from gluon_bbb.io.checkpoint import read_metadata
    stored = read_metadata(str(out / "checkpoint.bbb"))["prior"]
    assert stored["learnable"] is True
    assert {key: stored[key] for key in learned[1]} == pytest.approx(learned[1], rel=1e-6)
    assert "prior pi 0." in (out / "train.log").read_text()
    assert main(["evaluate", str(out), "--num-samples", "2"]) == 0  # read back, prior and all


@needs_mnist
def test_train_prints_the_test_errors(tmp_path, capsys):
    assert main(TRAIN + ["--subset", "128", "--hidden", "8", "--prior", "gaussian",
                         "--output-dir", str(tmp_path / "g")]) == 0
    last = capsys.readouterr().out.strip().splitlines()[-1]
    assert last.startswith("test error: ") and "(posterior mean)" in last
    assert last.endswith("(MC 10 samples)")
    config = json.loads((tmp_path / "g" / "config.json").read_text())
    assert config["prior"] == "gaussian" and config["sigma"] == 1.0 and "pi" not in config


@needs_mnist
def test_default_output_dir_is_under_runs(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(TRAIN + ["--subset", "128", "--hidden", "8"]) == 0
    (run,) = (tmp_path / "runs").iterdir()
    assert run.name.startswith("mnist-scale-mixture-")
    assert (run / "result.json").is_file()


@needs_mnist
def test_resume_continues_to_the_requested_epoch(run_dir, tmp_path):
    run = _copy(run_dir, tmp_path)
    assert main(TRAIN + ["--epochs", "2", "--output-dir", str(run), "--resume"]) == 0
    history = _result(run)["history"]
    assert [record["epoch"] for record in history] == [1, 2]
    assert history[0] == _result(run_dir)["history"][0]  # epoch 1 was loaded, not retrained
    assert "resuming" in (run / "train.log").read_text()


@needs_mnist
def test_resumed_training_matches_an_uninterrupted_run(run_dir, tmp_path):
    resumed, straight = _copy(run_dir, tmp_path), tmp_path / "straight"
    assert main(TRAIN + ["--epochs", "2", "--output-dir", str(resumed), "--resume"]) == 0
    assert main(TRAIN + ["--epochs", "2", "--output-dir", str(straight)]) == 0
    history = [_result(run)["history"] for run in (resumed, straight)]
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
    # resuming with other hyperparameters is refused: the folder holds one configuration
    assert main(TRAIN + ["--output-dir", str(run), "--resume", "--lr", "0.01"]) == 2
    assert "lr: 0.001 there, 0.01 now" in capsys.readouterr().err
    assert (run / "checkpoint.bbb").read_bytes() == before


@needs_mnist
def test_one_folder_format_for_train_and_reproduce(run_dir, tmp_path, capsys):
    """reproduce-report reads a train folder; train --resume refuses a reproduce folder."""
    assert main(["reproduce-report", str(run_dir), "--mc-samples", "2"]) == 0
    assert "| custom | - | 32 |" in capsys.readouterr().out
    other = tmp_path / "named"
    assert main(["reproduce", "bbb-gaussian-400", "--hidden", "8", "--subset", "128",
                 "--epochs", "1", "--no-progress", "--output-dir", str(other)]) == 0
    capsys.readouterr()
    assert main(TRAIN + ["--output-dir", str(other), "--resume"]) == 2
    assert "holds a run of configuration 'bbb-gaussian-400', not 'custom'" in capsys.readouterr().err


@needs_mnist
def test_evaluate_prints_the_test_error_of_a_run(run_dir, capsys):
    assert main(["evaluate", str(run_dir), "--num-samples", "3"]) == 0
    last = capsys.readouterr().out.strip().splitlines()[-1]
    assert last.startswith("test error: ") and last.endswith("(MC 3 samples)")
    # the posterior mean is deterministic: the same number as at the end of training
    assert f"{100 * _result(run_dir)['test_error_mean']:.2f}% (posterior mean)" in last


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
    test_error_mean = _result(run)["test_error_mean"]
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
    (["train", "--pi", "1.5"], "pi must be a number strictly between 0 and 1"),
    # checked against the training set's size, so the data must be there
    pytest.param(["train", "--num-validation", "60000"], "num_validation", marks=needs_mnist),
    (["train", "--neg-log-sigma2", "0", "--neg-log-sigma1", "1"], "needs sigma2 < sigma1, i.e. neg_log_sigma2 > neg_log_sigma1 (--neg-log-sigma2 > --neg-log-sigma1"),
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


@pytest.mark.parametrize("command", ["evaluate", "prune", "plot", "reproduce-report"])
def test_a_folder_of_the_old_train_format_is_one_clear_error(command, tmp_path, capsys):
    run = tmp_path / "old"
    run.mkdir()
    write_json(run / "config.json", {"hidden": [32], "prior": "gaussian", "sigma": 1.0})
    assert main([command, str(run)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"gluon-bbb: error: {run / 'config.json'} names no configuration")
    assert len(err.strip().splitlines()) == 1


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


def test_the_search_without_optuna_says_which_extra_to_install(tmp_path):
    """Optuna is the ``search`` extra: without it the other commands start, and the search
    fails in one line naming the extra (exit status 2)."""
    code = ("import sys; sys.modules['optuna'] = None\n"  # an import of optuna now fails
            "from gluon_bbb.cli import main\n"
            "assert main(['--version']) == 0\n"
            f"sys.exit(main(['search', '--epochs', '1', '--output-dir', {str(tmp_path / 's')!r}]))\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip().splitlines()[-1] == (
        "gluon-bbb: error: the search needs Optuna: pip install 'gluon_bbb[search]'")


def test_commands_record_their_line_without_passwords_and_rerun_it_with_them(monkeypatch):
    """What the run folders record hides the password of a URL; the arguments that rerun the
    command (the search's worker processes) keep it."""
    from gluon_bbb.cli import search
    seen = {}
    monkeypatch.setattr(search, "search_command", lambda args: seen.update(vars(args)) or 0)
    url = "postgresql://bbb:s3cr%40t@127.0.0.1:5499/bbbsearch"
    argv = ["search", "--epochs", "1", "--storage", url, "--output-dir", "my runs"]
    assert main(argv) == 0
    assert seen["command_line"] == ("gluon-bbb search --epochs 1 --storage "
                                    "'postgresql://bbb:***@127.0.0.1:5499/bbbsearch' "
                                    "--output-dir 'my runs'")
    assert seen["argv"] == argv and seen["storage"] == url
