"""The paper's long protocol as configurations: a multi-step learning-rate schedule, rho drawn
from a range, mu drawn uniformly, and the ``-paper`` configurations that use them."""
import functools
import json
from pathlib import Path

import mxnet as mx
import numpy as np
import pytest

from gluon_bbb import data, experiments
from gluon_bbb.checkpoint import read_checkpoint
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
    assert (mixture["pi"], mixture["log_sigma1"], mixture["log_sigma2"]) == (0.75, 0.0, 8.0)
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
