"""The paper's long protocol as configurations: a multi-step learning-rate schedule, rho drawn
from a range, mu drawn uniformly, and the ``-paper`` configurations that use them."""
import functools
import json
from pathlib import Path

import mxnet as mx
import numpy as np
import pytest

from gluon_bbb import data, experiments
from gluon_bbb.io.checkpoint import read_checkpoint
from gluon_bbb.cli import main
from gluon_bbb.experiments import configs
from gluon_bbb.experiments.runners import make_bbb_trainer
from synthetic import needs_mnist

SMOKE = ["--hidden", "16", "--subset", "256", "--no-progress", "--mc-samples", "2"]


@pytest.fixture(scope="module", autouse=True)
def _read_mnist_once():
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(data, "load_raw", functools.lru_cache(maxsize=None)(data.load_raw))
        yield


def _json(path):
    return json.loads(Path(path).read_text())


def _without_seconds(history):
    return [{k: v for k, v in record.items() if k != "seconds"} for record in history]


def test_the_step_schedule_divides_the_rate_after_each_step():
    config = experiments.get_config("bbb-mixture-1200-paper")
    schedule = experiments.learning_rate_schedule(config)
    rates = [schedule(epoch) for epoch in (0, 299, 300, 599)]
    assert rates == pytest.approx([1e-3, 1e-3, 1e-4, 1e-4], rel=1e-12)
    two = experiments.learning_rate_schedule(dict(config, lr_steps=[2, 4], lr_step_factor=0.5,
                                                  lr_decay=0.9))
    expected = [1e-3 * 0.9 ** e * 0.5 ** ((e >= 2) + (e >= 4)) for e in range(6)]
    assert [two(e) for e in range(6)] == pytest.approx(expected, rel=1e-12)
    # no steps, or a factor of 1, and no decay: a constant rate
    assert experiments.learning_rate_schedule(dict(config, lr_steps=[])) is None
    assert experiments.learning_rate_schedule(dict(config, lr_step_factor=1.0)) is None


def test_the_paper_configurations():
    for name in ("bbb-mixture-400-paper", "bbb-mixture-1200-paper", "bbb-gaussian-1200-paper",
                 "sgd-1200-paper", "dropout-1200-paper"):
        config = experiments.get_config(name)
        assert config["optimizer"] == "sgd" and config["lr_steps"] == [300]
        assert config["lr_step_factor"] == 0.1
        assert experiments.PAPER_TEST_ERROR[name] == experiments.PAPER_TEST_ERROR[name[:-6]]
        if config["method"] == "bbb":
            assert config["lr"] == 1e-3 and config["rho_init"] == [-3.5, -3.0]
            assert config["mu_init"] == 0.03
        assert "after epoch 300, 600 epochs" in experiments.describe(config)
    mixture = experiments.get_config("bbb-mixture-400-paper")
    assert (mixture["pi"], mixture["neg_log_sigma1"], mixture["neg_log_sigma2"]) == (0.75, 0.0, 8.0)
    assert "rho ~ U(-3.5, -3), mu ~ U(-0.03, 0.03)" in experiments.describe(mixture)
    custom = experiments.custom_config(rho_init=[-3.5, -3], mu_init=0.03, lr_steps=[5, 9])
    assert "(x0.1 after epochs 5, 9)" in experiments.describe(custom)
    assert "rho ~ U(-3.5, -3), mu ~ U(-0.03, 0.03)" in experiments.describe(custom)


@pytest.mark.parametrize("key, value, message", [
    ("lr_steps", [3, 2], "increasing epochs"), ("lr_steps", [0], "increasing epochs"),
    ("lr_steps", [2, 2], "increasing epochs"), ("lr_steps", 300, "increasing epochs"),
    ("lr_steps", [1.5], "increasing epochs"), ("lr_steps", [True], "increasing epochs"),
    ("lr_step_factor", 0.0, "(0, 1]"), ("lr_step_factor", 2.0, "(0, 1]"),
    ("rho_init", [-3.0, -3.5], "low < high"), ("rho_init", [-3.0], "a range [low, high]"),
    ("rho_init", [float("nan"), 1.0], "two finite numbers"), ("rho_init", "x", "finite number"),
    ("mu_init", -0.1, "'net' or the half-width"), ("mu_init", "xavier", "'net' or the half-width"),
])
def test_bad_values_are_refused(key, value, message):
    with pytest.raises(ValueError, match=key) as error:
        experiments.get_config("bbb-mixture-400-paper", **{key: value})
    assert message in str(error.value)


def test_settings_write_lists_with_colons():
    keys = configs.SEARCH_KEYS + configs.EXTRA_KEYS
    assert experiments.parse_setting("lr_steps=300:450,rho_init=-3.5:-3,mu_init=0.03", keys) == {
        "lr_steps": [300, 450], "rho_init": [-3.5, -3.0], "mu_init": 0.03}
    assert experiments.parse_setting("rho_init=-4,mu_init=net,lr_steps=", keys) == {
        "rho_init": -4.0, "mu_init": "net", "lr_steps": []}


def test_rho_and_mu_start_uniformly_in_their_ranges():
    config = experiments.get_config("bbb-mixture-400-paper", hidden=[50])
    mx.random.seed(0)
    trainer = make_bbb_trainer(config, mx.cpu())
    rhos = np.concatenate([rho.data().asnumpy().ravel() for rho in trainer.posterior.rhos])
    mus = np.concatenate([mu.data().asnumpy().ravel() for mu in trainer.posterior.mus])
    assert rhos.size == mus.size == 784 * 50 + 50 + 50 * 10 + 10
    assert rhos.min() >= -3.5 and rhos.max() <= -3.0
    assert mus.min() >= -0.03 and mus.max() <= 0.03
    # uniform: the mean and variance of U(a, b) within 5 standard errors
    for values, low, high in ((rhos, -3.5, -3.0), (mus, -0.03, 0.03)):
        mean, variance = (low + high) / 2, (high - low) ** 2 / 12
        assert abs(values.mean() - mean) < 5 * np.sqrt(variance / values.size)
        assert values.var() == pytest.approx(variance, rel=0.05)
    # the default keeps the network's own (Xavier) values for mu and rho -5
    default = make_bbb_trainer(experiments.get_config("bbb-mixture-400", hidden=[50]), mx.cpu())
    assert all((rho.data() == -5).asnumpy().all() for rho in default.posterior.rhos)


@needs_mnist
@pytest.mark.parametrize("name", ["bbb-mixture-400-paper", "sgd-1200-paper"])
def test_a_stepped_schedule_resumes_on_schedule(name, tmp_path):
    """With a step after epoch 1, two epochs in one go equal one epoch, then another."""
    stepped = ["--set", "lr_steps=1"]
    whole, parts = tmp_path / "whole", tmp_path / "parts"
    for out, epochs in ((whole, 2), (parts, 1), (parts, 2)):
        assert main(["reproduce", name, "--epochs", str(epochs), "--output-dir", str(out)]
                    + SMOKE + stepped) == 0
    histories = [_without_seconds(_json(out / "result.json")["history"]) for out in (whole, parts)]
    assert histories[0] == histories[1]
    kind = "bbb" if name.startswith("bbb") else "deterministic"
    checkpoint = parts / experiments.runfolder.FILES[kind]["checkpoint"]
    state, _ = read_checkpoint(checkpoint, with_optimizer=True).optimizer
    base = experiments.get_config(name)["lr"]
    assert state["learning_rate"] == pytest.approx(base * 0.1)  # epoch 2's rate
    config = _json(whole / "config.json")
    assert config["lr_steps"] == [1] and config["overrides"]["lr_steps"] == [1]


@needs_mnist
def test_train_takes_the_paper_protocol_options(tmp_path):
    out = tmp_path / "run"
    assert main(["train", "--epochs", "1", "--output-dir", str(out), "--hidden", "16",
                 "--subset", "256", "--no-progress", "--mc-samples", "2", "--optimizer", "sgd",
                 "--lr-steps", "300", "--rho-init", "-3.5", "-3", "--mu-init", "0.03"]) == 0
    config = _json(out / "config.json")
    assert (config["lr_steps"], config["rho_init"], config["mu_init"]) == ([300], [-3.5, -3.0], 0.03)
    assert main(["train", "--epochs", "1", "--output-dir", str(tmp_path / "bad"),
                 "--rho-init", "1", "2", "3"]) == 2


def test_error_curves_draw_each_history_zoomed_on_the_lowest_error():
    from gluon_bbb import plots
    histories = {"a": [{"epoch": e, "validation_error": 0.05 / e} for e in range(1, 21)],
                 "b": [{"epoch": e, "validation_error": 0.03} for e in range(1, 11)]}
    figure = plots.error_curves(histories, reference={"paper": 1.32}, span=0.8)
    ax = figure.axes[0]
    lines = [line for line in ax.lines if len(line.get_xdata()) > 2]
    assert [list(line.get_xdata()) for line in lines] == [list(range(1, 21)), list(range(1, 11))]
    assert np.allclose(lines[0].get_ydata(), [5.0 / e for e in range(1, 21)])
    assert np.allclose(lines[1].get_ydata(), 3.0)
    low, high = ax.get_ylim()
    assert low == pytest.approx(0.1) and high == pytest.approx(0.9)  # just below 0.25%
    assert any(np.allclose(line.get_ydata(), 1.32) for line in ax.lines)  # the paper's line
    labels = [text.get_text() for text in ax.get_legend().get_texts()]
    assert labels == ["a (lowest 0.25%)", "b (lowest 3.00%)", "paper: 1.32%"]
    with pytest.raises(ValueError, match="no run"):
        plots.error_curves({"a": [{"epoch": 1}]})


def test_posterior_widths_draw_the_records_that_have_them():
    from gluon_bbb import plots
    history = [{"epoch": 1}] + [{"epoch": e, "posterior": {"median_sigma": 0.1 / e,
                                                          "snr_below_1": 0.5 + e / 100}}
                                for e in range(2, 6)]
    figure = plots.posterior_widths({"run": history, "baseline": [{"epoch": 1}]})
    sigma_ax, snr_ax = figure.axes
    assert len(sigma_ax.lines) == len(snr_ax.lines) == 1  # the baseline has no widths
    assert list(sigma_ax.lines[0].get_xdata()) == [2, 3, 4, 5]
    assert np.allclose(sigma_ax.lines[0].get_ydata(), [0.1 / e for e in range(2, 6)])
    assert np.allclose(snr_ax.lines[0].get_ydata(), [50 + e for e in range(2, 6)])
    assert sigma_ax.get_yscale() == "log"


@needs_mnist
def test_reproduce_report_draws_the_curves_of_recorded_runs(tmp_path, capsys):
    runs = []
    for name in ("bbb-mixture-400-paper", "sgd-1200-paper"):
        runs.append(tmp_path / name)
        assert main(["reproduce", name, "--epochs", "2", "--output-dir", str(runs[-1])]
                    + SMOKE) == 0
    curves, widths = tmp_path / "curves.png", tmp_path / "widths.png"
    assert main(["reproduce-report", "--recorded", *map(str, runs), "--curves", str(curves),
                 "--widths", str(widths)]) == 0
    assert curves.read_bytes()[:8] == widths.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    label, history = experiments.protocol.recorded_history(str(runs[0]))
    assert label == "bbb-mixture-400-paper (hidden=[16], subset=256), seed 0"
    assert [set(r["posterior"]) for r in history] == [{"median_sigma", "snr_below_1"}] * 2
    # a result.json from someone else: a bad field is one line naming the file, exit 2
    result = _json(runs[1] / "result.json")
    result["history"][1]["validation_error"] = float("nan")
    (runs[1] / "result.json").write_text(json.dumps(result))
    capsys.readouterr()
    assert main(["reproduce-report", "--recorded", *map(str, runs), "--curves", str(curves)]) == 2
    error = capsys.readouterr().err.strip()
    assert len(error.splitlines()) == 1 and str(runs[1] / "result.json") in error
    assert "validation_error of epoch 2 is nan" in error


@needs_mnist
def test_evaluate_and_prune_the_network_at_the_end_of_training(tmp_path, capsys):
    """Table 2 in the paper uses the network at the end of training: --network last reads
    checkpoint.bbb, the best epoch's numbers stay in best.bbb and pruning.json."""
    run = tmp_path / "run"
    assert main(["reproduce", "bbb-mixture-400-paper", "--epochs", "3", "--output-dir", str(run)]
                + SMOKE) == 0
    result = _json(run / "result.json")
    last = experiments.evaluate_run(str(run), mc_samples=2, network="last")
    best = experiments.evaluate_run(str(run), mc_samples=2)
    assert (last["network"], last["epoch"], best["epoch"]) == ("last", 3, result["best_epoch"])
    assert "best_epoch" not in last and best["test_error_mean"] == result["test_error_mean"]
    if result["best_epoch"] == 3:
        assert last["test_error_mean"] == best["test_error_mean"]
    capsys.readouterr()
    assert main(["evaluate", str(run), "--network", "last", "--num-samples", "2"]) == 0
    assert f"last epoch 3, {last['num_test']} test examples" in capsys.readouterr().out
    assert main(["prune", str(run), "--network", "last", "--fractions", "0", "0.5"]) == 0
    table = _json(run / "pruning-last.json")
    assert table["epoch"] == 3 and not (run / "pruning.json").exists()
    assert [row["fraction"] for row in table["rows"] if row["method"] == "snr"] == [0.0, 0.5]
    snr_0 = next(r for r in table["rows"] if r["method"] == "snr" and r["fraction"] == 0.0)
    assert snr_0["test_error"] == last["test_error_mean"]  # nothing removed: the mean network
    (run / "checkpoint.bbb").unlink()
    with pytest.raises(FileNotFoundError, match="committed without it"):
        experiments.evaluate_run(str(run), network="last")
