"""Tests of the paper-reproduction runner (gluon_bbb.reproduce and its commands), on tiny
subsets of the real MNIST."""
import functools
import json
import shutil
import zipfile
from pathlib import Path

import pytest

from gluon_bbb import data, experiments, plots
from gluon_bbb.io.checkpoint import read_checkpoint
from gluon_bbb.cli import main
from synthetic import needs_mnist, require_mnist

SMOKE = ["--hidden", "16", "--subset", "256", "--no-progress", "--mc-samples", "3"]
RESULT_KEYS = {"config", "method", "hyperparameters", "overrides", "protocol", "best_epoch",
               "validation_error", "validation_error_recheck", "test_error_mean",
               "test_error_mc", "mc_samples", "epochs_run", "epochs_requested", "finished",
               "history", "train_seconds", "total_wall_seconds", "machine", "fused",
               "num_weights", "command", "commands", "paper_test_error"}



@pytest.fixture(scope="module", autouse=True)
def _read_mnist_once():
    """Parse the IDX files once for the whole module (each parse takes seconds)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(data, "load_raw", functools.lru_cache(maxsize=None)(data.load_raw))
        yield


def _reproduce(name, out, epochs, *extra):
    return main(["reproduce", name, "--epochs", str(epochs), "--output-dir", str(out)]
                + SMOKE + list(extra))


def _json(path):
    return json.loads(Path(path).read_text())


def _metadata(path):
    with zipfile.ZipFile(path) as archive:
        return json.loads(archive.read("metadata.json"))


def _without_seconds(history):
    return [{k: v for k, v in record.items() if k != "seconds"} for record in history]


@pytest.fixture(scope="module")
def bbb_run(tmp_path_factory):
    """bbb-mixture-400 (at 16 units) trained for 2 epochs without interruption."""
    require_mnist()
    out = tmp_path_factory.mktemp("reproduce") / "bbb"
    assert _reproduce("bbb-mixture-400", out, 2) == 0
    return out


# ---------------------------------------------------------------------------- configurations
def test_the_paper_configurations_are_defined():
    for units in (400, 800, 1200):
        for method in ("bbb-mixture", "bbb-gaussian", "sgd", "dropout"):
            name = f"{method}-{units}"
            config = experiments.CONFIGS[name]
            assert config["hidden"] == [units, units] and name in experiments.DESCRIPTIONS
            assert (config["dataset"], config["num_validation"], config["preprocessing"],
                    config["batch_size"]) == ("mnist", 10000, "paper", 128)
    mixture = experiments.CONFIGS["bbb-mixture-400"]
    assert (mixture["pi"], mixture["neg_log_sigma1"], mixture["neg_log_sigma2"], mixture["lr"],
            mixture["optimizer"], mixture["num_samples"]) == (0.5, 0.0, 6.0, 1e-3, "adam", 1)
    assert experiments.CONFIGS["dropout-800"]["dropout"] == 0.5
    assert experiments.CONFIGS["sgd-800"]["dropout"] == 0.0


def test_get_config_applies_and_checks_overrides():
    config = experiments.get_config("bbb-mixture-400", hidden=(16,), subset=256, seed=0)
    assert config["hidden"] == [16] and config["subset"] == 256
    assert config["overrides"] == {"hidden": [16], "subset": 256}  # seed 0 is the default
    assert config["reproduce"] == "bbb-mixture-400"
    assert experiments.describe(config) == (experiments.DESCRIPTIONS["bbb-mixture-400"]
                                          + "; changed: hidden=[16], subset=256")
    assert experiments.describe(experiments.get_config("sgd-400")) == experiments.DESCRIPTIONS["sgd-400"]
    with pytest.raises(ValueError, match="unknown configuration"):
        experiments.get_config("bbb-mixture-401")
    with pytest.raises(ValueError, match="no hyperparameter 'dropout'"):
        experiments.get_config("bbb-mixture-400", dropout=0.5)
    with pytest.raises(ValueError, match="sigma2 < sigma1"):
        experiments.get_config("bbb-mixture-400", neg_log_sigma1=7.0)
    with pytest.raises(ValueError, match="pi must"):
        experiments.get_config("bbb-mixture-400", pi=1.0)
    with pytest.raises(ValueError, match="log_sigma2 is now called neg_log_sigma2"):
        experiments.get_config("bbb-mixture-400", log_sigma2=8.0)  # the older name: -log sigma2


def test_a_run_folder_written_under_the_older_names_reads_with_the_current_ones(tmp_path):
    """config.json files of before the rename (log_sigma1/2 for the mixture's -log sigma) load
    with neg_log_sigma1/2, overrides included; so do result.json files."""
    from gluon_bbb.experiments import runfolder
    from gluon_bbb.io.checkpoint import write_json
    config = experiments.get_config("bbb-mixture-400", neg_log_sigma2=8.0, seed=3)
    older = {{"neg_log_sigma1": "log_sigma1", "neg_log_sigma2": "log_sigma2"}.get(k, k): v
             for k, v in config.items()}
    older["overrides"] = {"log_sigma2": 8.0, "seed": 3}
    write_json(str(tmp_path / "config.json"), older)
    read = runfolder.read_run_config(str(tmp_path))
    assert read == config
    write_json(str(tmp_path / "result.json"), {"hyperparameters": older, "overrides": older["overrides"],
                                                "history": []})
    result = runfolder.read_result(str(tmp_path))
    assert result["hyperparameters"]["neg_log_sigma2"] == 8.0 and "log_sigma2" not in result["hyperparameters"]
    assert result["overrides"] == config["overrides"]


def test_results_table_names_each_runs_changes():
    base = {"config": "bbb-mixture-400", "hyperparameters": {"hidden": [400, 400]},
            "num_weights": 478410, "epochs_run": 30, "best_epoch": 14, "validation_error": 0.0153,
            "test_error_mean": 0.0162, "test_error_mc": 0.018, "mc_samples": 10,
            "paper_test_error": 1.36}
    table = experiments.results_table([dict(base, overrides={}),
                                     dict(base, overrides={"num_samples": 2, "lr_decay": 0.97},
                                          test_error_mc=None)]).splitlines()
    assert table[0].startswith("| configuration | changed |") and len(table) == 4
    assert table[2] == ("| bbb-mixture-400 | - | 400x400 | 478,410 | 30 | 14 | 1.53% | 1.62% "
                        "| 1.80% (10 samples) | 1.36% |")
    assert table[3].startswith("| bbb-mixture-400 | lr_decay=0.97, num_samples=2 | 400x400 |")
    assert table[3].endswith("| 1.62% | - | 1.36% |")


def test_grid_and_seeded_sample():
    grid = experiments.grid_settings()
    assert len(grid) == 3 * 4 * 3 * 3 * 3
    assert grid[0] == {"lr": 1e-3, "num_samples": 1, "pi": 0.25, "neg_log_sigma1": 0.0,
                       "neg_log_sigma2": 6.0}
    sample = experiments.sample_settings(grid, 5, seed=3)
    assert sample == experiments.sample_settings(grid, 5, seed=3) and len(sample) == 5
    assert all(setting in grid for setting in sample)
    assert experiments.sample_settings(grid, 1000) == grid
    assert experiments.parse_setting("lr=1e-4,num-samples=2") == {"lr": 1e-4, "num_samples": 2}
    with pytest.raises(ValueError, match="keys among"):
        experiments.parse_setting("momentum=0.9")


# ---------------------------------------------------------------------------- runs
@needs_mnist
def test_smoke_run_writes_the_result_and_the_best_checkpoint(bbb_run, capsys):
    result = _json(bbb_run / "result.json")
    assert RESULT_KEYS <= set(result)
    assert result["config"] == "bbb-mixture-400" and result["epochs_run"] == 2
    assert result["finished"] and result["mc_samples"] == 3
    assert result["hyperparameters"]["hidden"] == [16]
    assert result["overrides"] == {"hidden": [16], "subset": 256}
    assert result["protocol"]["train_examples"] == 256
    assert [r["epoch"] for r in result["history"]] == [1, 2]
    errors = [r["validation_error"] for r in result["history"]]
    assert result["validation_error"] == min(errors)
    assert result["best_epoch"] == 1 + errors.index(min(errors))
    assert result["validation_error_recheck"] == result["validation_error"]
    assert 0 <= result["test_error_mean"] <= 1 and 0 <= result["test_error_mc"] <= 1
    assert result["machine"]["mxnet"] == "1.9.1" and result["machine"]["cpu_cores"] >= 1
    assert isinstance(result["fused"]["used_in_training"], bool)
    assert result["command"].startswith("gluon-bbb reproduce bbb-mixture-400 --epochs 2")
    assert result["total_wall_seconds"] >= result["train_seconds"] > 0
    # best.bbb holds the epoch with the lowest validation error
    best = _metadata(bbb_run / "best.bbb")
    assert best["epoch"] == result["best_epoch"]
    assert best["history"][-1]["test_error"] == min(errors)
    # 'gluon-bbb evaluate' re-checks the headline numbers of result.json
    capsys.readouterr()
    assert main(["evaluate", str(bbb_run), "--num-samples", "3"]) == 0
    last = capsys.readouterr().out.strip().splitlines()[-1]
    assert last == (f"test error: {100 * result['test_error_mean']:.2f}% (posterior mean), "
                    f"{100 * result['test_error_mc']:.2f}% (MC 3 samples)")
    sessions = _json(bbb_run / "sessions.json")
    assert [s["outcome"] for s in sessions] == ["finished"]


@needs_mnist
def test_prune_uses_the_best_epoch_of_a_reproduce_run(bbb_run, tmp_path, capsys):
    run = tmp_path / "bbb"
    shutil.copytree(bbb_run, run)
    assert main(["prune", str(run), "--fractions", "0", "0.5", "--method", "snr"]) == 0
    result, table = _json(run / "result.json"), _json(run / "pruning.json")
    assert table["epoch"] == result["best_epoch"]
    assert table["rows"][0]["test_error"] == result["test_error_mean"]  # nothing removed


@needs_mnist
def test_plot_of_a_reproduce_run_draws_the_whole_run_as_validation_error(bbb_run, tmp_path,
                                                                         monkeypatch):
    """The learning curves of a reproduce folder are those of every epoch (result.json), not
    only up to the best one (best.bbb), and the evaluated split is called validation."""
    drawn, original = [], plots.training_curves

    def recording(history, **kwargs):
        drawn.append(history)
        return original(history, **kwargs)

    monkeypatch.setattr(plots, "training_curves", recording)
    run = tmp_path / "bbb"
    shutil.copytree(bbb_run, run)
    assert main(["plot", str(run)]) == 0
    assert (run / "training_curves.png").stat().st_size > 0
    assert drawn[-1] == _json(run / "result.json")["history"]
    assert [r["epoch"] for r in drawn[-1]] == [1, 2]
    # without result.json: the best checkpoint's history, its split renamed
    (run / "result.json").unlink()
    assert main(["plot", str(run)]) == 0
    best = _metadata(run / "best.bbb")["history"]
    assert len(drawn[-1]) == len(best)
    assert all("test_error" not in r and r["validation_error"] == b["test_error"]
               for r, b in zip(drawn[-1], best))


@needs_mnist
def test_interrupted_run_resumes_as_if_uninterrupted(bbb_run, tmp_path):
    out = tmp_path / "bbb"
    assert _reproduce("bbb-mixture-400", out, 1) == 0
    first = _json(out / "result.json")["history"]
    assert [r["epoch"] for r in first] == [1]
    assert _reproduce("bbb-mixture-400", out, 2) == 0
    result = _json(out / "result.json")
    assert [r["epoch"] for r in result["history"]] == [1, 2]
    assert result["history"][0] == first[0]  # loaded, not retrained
    # same data order, noise and optimizer state as the run that was never interrupted
    assert _without_seconds(result["history"]) == _without_seconds(
        _json(bbb_run / "result.json")["history"])
    assert len(result["commands"]) == 2
    assert "resuming" in (out / "train.log").read_text()


@needs_mnist
def test_another_configuration_in_the_same_folder_is_refused(bbb_run, tmp_path, capsys):
    out = tmp_path / "bbb"
    shutil.copytree(bbb_run, out)
    before = {name: (out / name).read_bytes() for name in ("checkpoint.bbb", "config.json")}
    capsys.readouterr()
    assert _reproduce("bbb-gaussian-400", out, 2) == 2
    err = capsys.readouterr().err
    assert err.startswith("gluon-bbb: error: ") and len(err.strip().splitlines()) == 1
    assert "holds a run of configuration 'bbb-mixture-400'" in err
    assert main(["reproduce", "bbb-mixture-400", "--epochs", "2", "--output-dir", str(out),
                 "--hidden", "32", "--subset", "256"]) == 2
    assert "hidden: [16] there, [32] now" in capsys.readouterr().err
    assert {name: (out / name).read_bytes() for name in before} == before


@needs_mnist
@pytest.mark.parametrize("extra", [[], ["--set", "momentum=0.9,lr_decay=0.5"]],
                         ids=["plain", "momentum-and-decay"])
def test_deterministic_baseline_resumes(tmp_path, capsys, extra):
    """Also with momentum (its buffers are in the checkpoint) and a decaying learning rate."""
    straight, resumed = tmp_path / "straight", tmp_path / "resumed"
    assert _reproduce("dropout-400", straight, 2, *extra) == 0
    assert _reproduce("dropout-400", resumed, 1, *extra) == 0
    first = _json(resumed / "result.json")["history"][0]
    assert _reproduce("dropout-400", resumed, 2, *extra) == 0
    state, arrays = read_checkpoint(resumed / "checkpoint.ckpt", with_optimizer=True).optimizer
    assert bool(arrays) == bool(extra)  # momentum buffers, one per parameter
    assert state["learning_rate"] == pytest.approx(0.1 * (0.5 if extra else 1.0))  # epoch 2's
    result = _json(resumed / "result.json")
    assert [r["epoch"] for r in result["history"]] == [1, 2]
    assert result["history"][0] == first
    assert _without_seconds(result["history"]) == _without_seconds(
        _json(straight / "result.json")["history"])
    assert result["test_error_mc"] is None and result["fused"] is None
    errors = [r["validation_error"] for r in result["history"]]
    assert result["validation_error"] == min(errors)
    assert result["validation_error_recheck"] == min(errors)  # best.params is the best epoch
    assert _metadata(resumed / "checkpoint.ckpt")["best"]["epoch"] == result["best_epoch"]
    capsys.readouterr()
    assert main(["evaluate", str(resumed)]) == 0
    assert capsys.readouterr().out.strip().endswith(
        f"test error: {100 * result['test_error_mean']:.2f}% (deterministic network)")
    # a committed folder keeps best.params but not the per-epoch checkpoint: result.json
    # names the epoch
    (resumed / "checkpoint.ckpt").unlink()
    evaluation = experiments.evaluate_run(str(resumed))
    assert evaluation["best_epoch"] == result["best_epoch"]
    assert evaluation["test_error_mean"] == result["test_error_mean"]
    (resumed / "result.json").unlink()
    assert main(["evaluate", str(resumed)]) == 2
    error = capsys.readouterr().err
    assert "best.params but neither checkpoint.ckpt nor result.json" in error
    assert "Traceback" not in error


def test_search_dry_run_lists_a_seeded_sample(capsys):
    assert main(["search", "--epochs", "1", "--max-trials", "4", "--search-seed", "1",
                 "--dry-run"]) == 0
    lines = capsys.readouterr().out.split()
    assert len(lines) == 4
    assert [experiments.parse_setting(line) for line in lines] == experiments.sample_settings(
        experiments.grid_settings(), 4, seed=1)


def test_reproduce_list(capsys):
    assert main(["reproduce", "--list"]) == 0
    out = capsys.readouterr().out
    assert all(name in out for name in experiments.CONFIGS)


@pytest.mark.parametrize("args, message", [
    (["reproduce"], "give a configuration NAME"),
    (["reproduce", "bbb-mixture-401", "--epochs", "1"], "unknown configuration 'bbb-mixture-401'"),
    (["reproduce", "sgd-400"], "--epochs is required"),
    (["reproduce", "sgd-400", "--epochs", "1", "--ctx", "gpu(3)"], "gpu(3) is not available"),
    (["reproduce-report", "/nonexistent/run"], "config.json not found"),
    (["search", "--epochs", "1", "--base", "sgd-400"], "the search of sgd-400 varies nothing"),
    (["search", "--epochs", "1", "--base", "sgd-400", "--pi", "0.5"], "unknown search keys"),
    (["search", "--epochs", "1", "--sampler", "tpe"], "the tpe sampler needs a number of trials"),
    (["search", "--epochs", "1", "--storage", "bogus://x"], "cannot open the study storage"),
])
def test_user_errors_exit_2_with_one_line(args, message, tmp_path, capsys):
    if args[0] in ("reproduce", "search") and len(args) > 1:
        args = args + ["--output-dir", str(tmp_path / "run")]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert err.startswith("gluon-bbb: error: ") and message in err
    assert len(err.strip().splitlines()) == 1
    assert not (tmp_path / "run").exists()


@needs_mnist
def test_learning_rate_decay_resumes_on_schedule(tmp_path):
    """--set lr_decay: every epoch's rate depends on the epoch alone, so 1 + 1 epochs equal 2."""
    decayed = ["--set", "lr_decay=0.5"]
    whole, parts = tmp_path / "whole", tmp_path / "parts"
    assert _reproduce("bbb-mixture-400", whole, 2, *decayed) == 0
    assert _reproduce("bbb-mixture-400", parts, 1, *decayed) == 0
    assert _reproduce("bbb-mixture-400", parts, 2, *decayed) == 0
    histories = [_without_seconds(_json(out / "result.json")["history"]) for out in (whole, parts)]
    assert histories[0] == histories[1]
    config = _json(whole / "config.json")
    assert config["lr_decay"] == 0.5 and config["overrides"]["lr_decay"] == 0.5
    assert "lr_decay=0.5" in config["description"].split("; changed: ")[1]
    assert experiments.learning_rate_schedule(config)(3) == pytest.approx(1e-3 / 8)
    assert experiments.learning_rate_schedule(experiments.get_config("bbb-mixture-400")) is None


@needs_mnist
def test_report_describes_the_run_from_its_configuration(bbb_run, tmp_path):
    """A folder whose config.json carries an old description (written before the overrides
    were named) gets a current one in its report."""
    out = tmp_path / "stale"
    shutil.copytree(bbb_run, out)
    config = _json(out / "config.json")
    config["description"] = "an outdated description"
    (out / "config.json").write_text(json.dumps(config))
    result = experiments.report(str(out))
    assert result["description"] == experiments.describe(config)
    assert result["description"].startswith(experiments.DESCRIPTIONS[config["reproduce"]])


@needs_mnist
def test_report_of_a_folder_with_only_the_best_checkpoint_says_so(bbb_run, tmp_path, capsys):
    out = tmp_path / "committed"
    shutil.copytree(bbb_run, out)
    (out / "checkpoint.bbb").unlink()
    with pytest.raises(FileNotFoundError, match="best.bbb but no checkpoint.bbb"):
        experiments.report(str(out))
    assert main(["evaluate", str(out)]) == 0  # the suggested command works
    assert "test error" in capsys.readouterr().out


@needs_mnist
def test_folders_written_before_lr_decay_existed_still_resume(bbb_run, tmp_path):
    out = tmp_path / "old"
    shutil.copytree(bbb_run, out)
    config = _json(out / "config.json")
    del config["lr_decay"], config["kl_scale"]
    (out / "config.json").write_text(json.dumps(config))
    assert _reproduce("bbb-mixture-400", out, 3) == 0
    assert [r["epoch"] for r in _json(out / "result.json")["history"]] == [1, 2, 3]


@pytest.mark.parametrize("setting, message", [("lr_decay=1.5", "lr_decay must be a number in (0, 1]"),
                                              ("momentum=0.9", "configuration bbb-mixture-400 has no hyperparameter 'momentum'"), ("nesterov=1", "bad setting 'nesterov=1'"),
                                              ("kl_scale=0", "kl_scale must be a positive number"),
                                              ("optimizer=bogus", "unknown optimizer 'bogus'; MXNet has")])
def test_bad_set_values_are_refused(setting, message, tmp_path, capsys):
    assert main(["reproduce", "bbb-mixture-400", "--epochs", "1", "--output-dir",
                 str(tmp_path / "run"), "--set", setting]) == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "run").exists()


def test_custom_config_starts_from_the_paper_defaults_and_checks_every_value():
    config = experiments.custom_config(hidden=[64], prior="gaussian", sigma=0.5,
                                       optimizer="RMSProp", num_validation=500)
    assert config["reproduce"] == experiments.CUSTOM and config["overrides"] == {}
    base = experiments.CONFIGS["bbb-gaussian-400"]
    assert {k: v for k, v in config.items() if k in base and k not in (
        "hidden", "sigma", "optimizer", "num_validation")} == {
        k: v for k, v in base.items() if k not in ("hidden", "sigma", "optimizer", "num_validation")}
    assert config["optimizer"] == "rmsprop" and config["sigma"] == 0.5 and "pi" not in config
    assert experiments.describe(config) == (
        "custom Bayes by Backprop on mnist, 64 ReLU, Gaussian prior sigma=0.5; rmsprop lr "
        "0.001, 1 sample, uniform KL weights, rho_init -5")
    # what a run folder stores is read back as it was written
    stored = json.loads(json.dumps(dict(config, epochs=3, data_dir=None)))
    assert experiments.runfolder.checked_stored_config(stored, "x") == stored
    for bad, message in [({"pi": 0.5, "prior": "gaussian"}, "has no hyperparameter 'pi'"),
                         ({"method": "sgd"}, "has no hyperparameter 'method'"),
                         ({"lr": -1.0}, "lr must be a positive number"),
                         ({"dataset": "cifar"}, "dataset must be one of mnist, fashion-mnist"),
                         ({"optimizer": "bogus"}, "unknown optimizer 'bogus'"),
                         ({"neg_log_sigma1": 7.0}, "needs sigma2 < sigma1")]:
        with pytest.raises(ValueError, match=message):
            experiments.custom_config(**bad)


@pytest.mark.parametrize("change, message", [
    ({"method": "sgd"}, "a custom configuration needs method 'bbb'"),
    ({"prior": "laplace"}, "a custom configuration needs method 'bbb' and a prior"),
    ({"kl_weighting": "none"}, "kl_weighting must be one of uniform, blundell"),
    ({"hidden": "400"}, "hidden"),
])
def test_a_damaged_custom_config_is_refused_naming_the_file(change, message):
    stored = dict(experiments.custom_config(), epochs=1, data_dir=None, **change)
    with pytest.raises(ValueError, match=message) as caught:
        experiments.runfolder.checked_stored_config(stored, "run/config.json")
    assert str(caught.value).startswith("run/config.json")


def _recorded(folder, config, seed, validation, test, mc=None, seconds=None, **overrides):
    folder.mkdir(parents=True)
    result = {"config": config, "validation_error": validation, "test_error_mean": test,
              "test_error_mc": mc, "train_seconds": seconds,
              "paper_test_error": experiments.PAPER_TEST_ERROR.get(config),
              "overrides": dict(overrides, seed=seed), "hyperparameters": {"seed": seed}}
    (folder / "result.json").write_text(json.dumps(result))
    return folder


def test_the_table_over_seeds_reads_the_recorded_results(tmp_path, capsys):
    """reproduce-report --recorded: one row per configuration and setting, each seed's test
    error, their mean and spread, and the seed the validation error selects; nothing is
    evaluated again (there is no network in these folders)."""
    folders = [_recorded(tmp_path / "a1", "sgd-1200", 1, 0.0150, 0.0160, seconds=812.4, lr=0.3),
               _recorded(tmp_path / "a0", "sgd-1200", 0, 0.0140, 0.0170, seconds=1500.6, lr=0.3),
               _recorded(tmp_path / "b0", "sgd-1200", 0, 0.0100, 0.0120, lr=0.1),
               _recorded(tmp_path / "c0", "bbb-mixture-1200", 0, 0.0130, 0.0140, mc=0.0151)]
    assert main(["reproduce-report", "--recorded"] + [str(f) for f in folders]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 5  # header, rule, three settings
    assert lines[2] == ("| sgd-1200 | lr=0.3 | 0, 1 | 1.40%, 1.50% | 1.70%, 1.60% | -, - | 1.65% | "
                        "0.10 | seed 0: 1.70% | 1.88% | 1,501, 812 |")  # seed 0: lower validation
    assert lines[3] == ("| sgd-1200 | lr=0.1 | 0 | 1.00% | 1.20% | - | 1.20% | 0.00 | "
                        "seed 0: 1.20% | 1.88% | - |")
    assert lines[4].startswith("| bbb-mixture-1200 | - | 0 | 1.30% | 1.40% | 1.51% | 1.40% |")


@pytest.mark.parametrize("change, message", [
    ({"test_error_mean": "1.2%"}, "field 'test_error_mean' must be float"),
    ({"hyperparameters": {}}, "lacks the field 'seed'"),
    ({"config": None}, "field 'config' must be str"),
    ({"train_seconds": "812"}, "field 'train_seconds' must be"),
])
def test_a_bad_recorded_result_is_one_line(tmp_path, capsys, change, message):
    folder = _recorded(tmp_path / "run", "sgd-400", 0, 0.01, 0.02)
    result = json.loads((folder / "result.json").read_text())
    (folder / "result.json").write_text(json.dumps(dict(result, **change)))
    assert main(["reproduce-report", "--recorded", str(folder)]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and message in err and "result.json" in err
