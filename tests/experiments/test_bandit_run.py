"""Tests of gluon_bbb.bandit_run and 'gluon-bbb bandit' on a tiny mushroom file: a few steps,
one minibatch per interaction."""
import json

import mxnet as mx
import numpy as np
import pytest

from gluon_bbb import bandit
from gluon_bbb.experiments import bandit_run, bandit_settings
from gluon_bbb.io.checkpoint import atomic_write_bytes, read_checkpoint, read_metadata
from gluon_bbb.cli import main
from gluon_bbb.data.mushroom import load_mushroom
from gluon_bbb.experiments.runlock import LOCK_FILES
from test_bandit import tiny_lines

STEPS = 6

#: The tests that read the PNG a run writes; the others' runs draw the figure without rendering it.
RENDERED = ("test_run_writes_every_file_with_finite_regret",)


@pytest.fixture(autouse=True)
def figures_unrendered(request, monkeypatch):
    """Every run ends by drawing its regret figure (``plot_cumulative_regret`` runs), and
    rendering it to PNG takes about 0.3 s, most of this file's time: outside :data:`RENDERED`
    the figure file is written empty."""
    if request.node.originalname not in RENDERED:
        monkeypatch.setattr(bandit_run.plots, "save_png",
                            lambda figure, path: atomic_write_bytes(path, b""))


@pytest.fixture
def tiny_file(tmp_path):
    path = tmp_path / "tiny.data"
    path.write_text("\n".join(tiny_lines()) + "\n")
    return path


def play(tiny_file, out, agents=tuple(bandit_settings.AGENTS), steps=STEPS):
    return bandit_run.run_agents(str(tiny_file), steps, str(out), agents=agents,
                                 num_minibatches=1)


def record(out, name):
    return json.loads((out / f"agent-{name}.json").read_text())


def command(tiny_file, out, agent, *options, steps=STEPS):
    """``gluon-bbb bandit`` of one agent on the tiny file, one minibatch per step; its status."""
    return main(["bandit", "--steps", str(steps), "--num-minibatches", "1", "--mushroom",
                 str(tiny_file), "--output-dir", str(out), "--agents", agent, "--no-progress",
                 *options])


class Interrupted(Exception):
    """Stands for a kill or Ctrl-C in the middle of an agent."""


class CountingPlay:
    """Wraps bandit_run._play, counting its calls; raises Interrupted at call ``stop``."""

    def __init__(self, monkeypatch, stop=None):
        self.original, self.played, self.stop = bandit_run._play, [], stop
        monkeypatch.setattr(bandit_run, "_play", self)

    def __call__(self, settings, *args):
        if len(self.played) + 1 == self.stop:
            raise Interrupted
        self.played.append(settings["agent"])
        return self.original(settings, *args)


def test_run_writes_every_file_with_finite_regret(tiny_file, tmp_path):
    out = tmp_path / "out"
    summary = play(tiny_file, out)
    names = list(bandit_settings.AGENTS)
    assert [row["agent"] for row in summary["agents"]] == names
    assert not any(row["skipped"] for row in summary["agents"])
    env = bandit.MushroomBandit(*load_mushroom(tiny_file)[:2])
    for name, row in zip(names, summary["agents"]):
        saved = record(out, name)
        assert saved["settings"]["steps"] == STEPS and saved["settings"]["num_minibatches"] == 1
        assert saved["settings"]["hidden"] == [100, 100] and saved["settings"]["buffer_size"] == 4096
        assert len(saved["actions"]) == STEPS and saved["seconds"] > 0
        curve = saved["curve"]
        assert curve["step"][-1] == STEPS
        assert np.all(np.isfinite(curve["cumulative_regret"] + curve["cumulative_expected_regret"]))
        history = bandit.replay_history(env, saved["actions"], seed=0)  # what was played
        assert curve["cumulative_expected_regret"] == history.cumulative_expected_regret.tolist()
        assert row["cumulative_regret"] == history.cumulative_regret[-1]
        assert row["cumulative_expected_regret"] >= 0
    assert record(out, "thompson")["settings"]["num_action_samples"] == 2
    assert record(out, "greedy-5")["settings"]["epsilon"] == 0.05
    saved = json.loads((out / "bandit.json").read_text())
    assert saved["agents"] == summary["agents"] and saved["num_mushrooms"] == 6
    table = (out / "bandit.md").read_text()
    assert "| Thompson sampling (BBB) | 6 |" in table and "| 5% greedy | 6 |" in table
    for row in saved["agents"]:  # the milestone table: only the last step in a run this short
        history = bandit.replay_history(env, record(out, row["agent"])["actions"], seed=0)
        assert row["expected_regret_at"] == {"6": history.cumulative_expected_regret[-1]}
        assert f"| {row['label']} | {history.cumulative_expected_regret[-1]:,.0f} |" in table
    assert bandit_run.milestones(6) == [6] and bandit_run.milestones(50_000) == \
        [1_000, 5_000, 10_000, 25_000, 50_000] and bandit_run.milestones(7_000) == [1_000, 5_000, 7_000]
    assert (out / "regret.png").read_bytes()[:4] == b"\x89PNG"


def test_rerun_skips_finished_agents_and_replays_changed_ones(tiny_file, tmp_path, monkeypatch):
    out = tmp_path / "out"
    play(tiny_file, out, agents=["thompson", "greedy-1"])
    before = (out / "agent-thompson.json").read_text()
    counter = CountingPlay(monkeypatch)
    summary = play(tiny_file, out)
    assert counter.played == ["greedy-0", "greedy-5"]
    assert [row["skipped"] for row in summary["agents"]] == [True, False, True, False]
    assert (out / "agent-thompson.json").read_text() == before
    play(tiny_file, out, agents=["thompson"], steps=STEPS + 1)  # other settings: played again
    assert counter.played[-1] == "thompson" and len(record(out, "thompson")["actions"]) == STEPS + 1
    tiny_file.write_text("\n".join(tiny_lines()[::-1]) + "\n")  # other data: played again
    play(tiny_file, out, agents=["greedy-0"])
    assert counter.played[-1] == "greedy-0"


def test_an_interrupted_run_keeps_the_finished_agents(tiny_file, tmp_path, monkeypatch):
    out = tmp_path / "out"
    CountingPlay(monkeypatch, stop=2)
    with pytest.raises(Interrupted):
        play(tiny_file, out)
    assert [path.name for path in out.iterdir() if path.name not in LOCK_FILES] == ["agent-thompson.json"]
    monkeypatch.undo()
    counter = CountingPlay(monkeypatch)
    play(tiny_file, out)
    assert counter.played == ["greedy-0", "greedy-1", "greedy-5"]


@pytest.mark.parametrize("damage", [
    lambda text: "",
    lambda text: text[: len(text) // 2],
    lambda text: "[1, 2]",
    lambda text: text.replace('"actions":[', '"actions":[7,', 1),
    lambda text: text.replace('"seconds":', '"seconds":"x","was":', 1),
    lambda text: text.replace('"final":{', '"final":{"eaten":"many","x":', 1),
], ids=["empty", "truncated", "list", "bad-action", "seconds-text", "final-text"])
def test_a_damaged_agent_record_is_named_and_played_again(tiny_file, tmp_path, monkeypatch,
                                                          caplog, damage):
    out = tmp_path / "out"
    play(tiny_file, out, agents=["greedy-0"])
    good = record(out, "greedy-0")
    (out / "agent-greedy-0.json").write_text(damage((out / "agent-greedy-0.json").read_text()))
    counter = CountingPlay(monkeypatch)
    play(tiny_file, out, agents=["greedy-0"])
    assert counter.played == ["greedy-0"]
    assert "agent-greedy-0.json" in caplog.text and "played again" in caplog.text
    again = record(out, "greedy-0")  # the same seeded play
    assert again["actions"] == good["actions"] and again["final"] == good["final"]


def test_an_agent_plays_the_same_alone_or_after_others(tiny_file, tmp_path):
    play(tiny_file, tmp_path / "all")
    play(tiny_file, tmp_path / "alone", agents=["greedy-5"])
    assert (record(tmp_path / "all", "greedy-5")["actions"]
            == record(tmp_path / "alone", "greedy-5")["actions"])


def test_command_prints_the_table_and_reports_bad_input(tiny_file, tmp_path, capsys):
    out = tmp_path / "out"
    code = main(["bandit", "--steps", "3", "--num-minibatches", "1", "--mushroom", str(tiny_file),
                 "--output-dir", str(out), "--agents", "greedy-0", "thompson", "--no-progress"])
    assert code == 0
    printed = capsys.readouterr().out
    assert "| 0% greedy | 3 |" in printed and "| Thompson sampling (BBB) | 3 |" in printed
    assert json.loads((out / "bandit.json").read_text())["command"].startswith("gluon-bbb bandit")
    code = main(["bandit", "--steps", "3", "--mushroom", str(tmp_path / "nowhere.data"),
                 "--output-dir", str(tmp_path / "other")])
    assert code == 2 and "nowhere.data" in capsys.readouterr().err
    assert main(["bandit", "--steps", "3", "--agents", "greedy-2"]) == 2
    assert main(["bandit", "--help"]) == 0
    assert "greedy-1: 1% greedy" in capsys.readouterr().out
    with pytest.raises(ValueError, match="unknown agent"):
        play(tiny_file, out, agents=["greedy-2"])


class StopAfterSegments:
    """Wraps bandit.run_bandit; raises Interrupted once ``stop`` segments were saved."""

    def __init__(self, monkeypatch, stop):
        self.original, self.stop = bandit.run_bandit, stop
        monkeypatch.setattr(bandit, "run_bandit", self)

    def __call__(self, *args, on_segment=None, **kwargs):
        saved = []

        def save_then_maybe_stop(num_done, actions):
            on_segment(num_done, actions)
            saved.append(num_done)
            if len(saved) == self.stop:
                raise Interrupted

        return self.original(*args, on_segment=save_then_maybe_stop, **kwargs)


@pytest.mark.parametrize("agent", ["thompson", "greedy-5"])
def test_an_agent_stopped_mid_run_resumes_from_its_checkpoint(tiny_file, tmp_path, monkeypatch,
                                                              caplog, agent):
    """Killed after 2 of 3 segments, the same command continues from step 4 and gives the
    uninterrupted run's actions."""
    monkeypatch.setattr(bandit.play, "SEGMENT_STEPS", 2)
    play(tiny_file, tmp_path / "whole", agents=[agent], steps=STEPS)
    out = tmp_path / "out"
    with monkeypatch.context() as patch:
        StopAfterSegments(patch, stop=2)
        with pytest.raises(Interrupted):
            play(tiny_file, out, agents=[agent])
    assert (out / f"agent-{agent}.bbb").exists() and not (out / f"agent-{agent}.json").exists()
    caplog.set_level("INFO")
    play(tiny_file, out, agents=[agent])
    assert "resuming after step 4" in caplog.text
    assert record(out, agent)["actions"] == record(tmp_path / "whole", agent)["actions"]


def test_a_finished_run_is_extended_to_more_steps(tiny_file, tmp_path, monkeypatch, caplog):
    monkeypatch.setattr(bandit.play, "SEGMENT_STEPS", 2)
    play(tiny_file, tmp_path / "long", agents=["thompson"], steps=STEPS + 3)
    out = tmp_path / "out"
    play(tiny_file, out, agents=["thompson"], steps=STEPS + 1)  # checkpoint after step 6
    caplog.set_level("INFO")
    play(tiny_file, out, agents=["thompson"], steps=STEPS + 3)
    assert "resuming after step 6" in caplog.text
    assert record(out, "thompson")["actions"] == record(tmp_path / "long", "thompson")["actions"]
    play(tiny_file, out, agents=["thompson"], steps=STEPS - 2)  # shorter: from the start
    assert "past the 4 asked for" in caplog.text
    assert record(out, "thompson")["actions"] == record(tmp_path / "long", "thompson")["actions"][:4]
    kept = read_metadata(str(out / "agent-thompson.bbb"))["extra"]  # not moved back to step 4
    assert len(kept["actions"]) == 8 and kept["settings"]["steps"] == STEPS + 3


def test_a_damaged_agent_checkpoint_is_named_and_the_agent_played_from_the_start(
        tiny_file, tmp_path, monkeypatch, caplog):
    monkeypatch.setattr(bandit.play, "SEGMENT_STEPS", 2)
    out = tmp_path / "out"
    play(tiny_file, out, agents=["greedy-0"])
    good = record(out, "greedy-0")
    (out / "agent-greedy-0.json").unlink()
    path = out / "agent-greedy-0.bbb"
    path.write_bytes(path.read_bytes()[:100])
    play(tiny_file, out, agents=["greedy-0"])
    assert str(path) in caplog.text and "played from the start" in caplog.text
    assert record(out, "greedy-0")["actions"] == good["actions"]


def test_thompson_settings_are_checked_recorded_and_change_the_run(tiny_file, tmp_path):
    assert bandit_settings.thompson_settings() == bandit_settings.THOMPSON_SETTINGS
    for bad, message in (({"rho": 1}, "unknown Thompson settings"),
                         ({"num_action_samples": 0}, "num_action_samples"),
                         ({"kl_data": "all"}, "kl_data"),
                         ({"rho_init": float("nan")}, "rho_init"),
                         ({"prior": {"pi": 1.5, "neg_log_sigma1": 0, "neg_log_sigma2": 6}}, "pi")):
        with pytest.raises(ValueError, match=message):
            bandit_settings.thompson_settings(bad)
    out = tmp_path / "out"
    play(tiny_file, out, agents=["thompson"])
    before = record(out, "thompson")
    chosen = {"num_action_samples": 1, "kl_data": "seen", "rho_init": -4.0}
    summary = bandit_run.run_agents(str(tiny_file), STEPS, str(out), agents=["thompson"],
                                    num_minibatches=1, thompson=chosen)
    after = record(out, "thompson")
    assert not summary["agents"][0]["skipped"]  # other settings: played again
    assert {key: after["settings"][key] for key in chosen} == chosen
    assert summary["thompson"] == dict(bandit_settings.THOMPSON_SETTINGS, **chosen)
    assert before["settings"]["kl_data"] == "buffer"
    code = main(["bandit", "--steps", str(STEPS), "--num-minibatches", "1", "--mushroom", str(tiny_file),
                 "--output-dir", str(out), "--agents", "thompson", "--no-progress",
                 "--action-samples", "1", "--kl-data", "seen", "--rho-init", "-4"])
    assert code == 0 and record(out, "thompson")["actions"] == after["actions"]  # skipped: the same
    assert main(["bandit", "--steps", "3", "--mushroom", str(tiny_file), "--output-dir",
                 str(tmp_path / "x"), "--prior-pi", "1.5"]) == 2


def test_the_buffer_size_is_checked_recorded_and_given_to_every_agent(tiny_file, tmp_path):
    with pytest.raises(ValueError, match="buffer_size"):
        bandit_settings.agent_settings("greedy-0", STEPS, buffer_size=0)
    for name in ("thompson", "greedy-1"):
        settings = bandit_settings.agent_settings(name, STEPS, buffer_size=3)
        agent = bandit_settings.make_agent(settings, num_features=5)
        assert settings["buffer_size"] == 3 and agent.buffer.capacity == 3
    assert bandit_settings.make_agent(bandit_settings.agent_settings("thompson", STEPS, buffer_size=3),
                                 num_features=5).kl_weight == 64 / 3
    out = tmp_path / "out"
    play(tiny_file, out, agents=["greedy-0"])
    assert command(tiny_file, out, "greedy-0", "--buffer-size", "2") == 0
    assert record(out, "greedy-0")["settings"]["buffer_size"] == 2  # other settings: played again
    assert command(tiny_file, tmp_path / "x", "greedy-0", "--buffer-size", "0") == 2


def test_kl_scale_tempers_the_complexity_weight_and_old_records_still_match(tiny_file, tmp_path):
    for bad in (0, -1.0, float("inf"), "x", True):
        with pytest.raises(ValueError, match="kl_scale"):
            bandit_settings.thompson_settings({"kl_scale": bad})
    settings = bandit_settings.agent_settings("thompson", STEPS, thompson={"kl_scale": 0.25})
    agent = bandit_settings.make_agent(settings, num_features=5)
    assert agent.kl_scale == 0.25 and agent.kl_weight == 0.25 * 64 / 4096
    out = tmp_path / "out"
    play(tiny_file, out, agents=["thompson"])
    # a record written before kl_scale existed ran with kl_scale 1: it is the same run
    path = out / "agent-thompson.json"
    stored = json.loads(path.read_text())
    del stored["settings"]["kl_scale"]
    path.write_text(json.dumps(stored))
    summary = play(tiny_file, out, agents=["thompson"])
    assert summary["agents"][0]["skipped"] and summary["thompson"]["kl_scale"] == 1.0
    assert command(tiny_file, out, "thompson", "--kl-scale", "0.5") == 0
    assert record(out, "thompson")["settings"]["kl_scale"] == 0.5  # another run: played again
    assert command(tiny_file, tmp_path / "x", "thompson", "--kl-scale", "0") == 2


@pytest.mark.parametrize("folder, agent", [("bandit", "thompson"), ("bandit", "greedy-0"),
                                           ("bandit-kl2", "thompson")])
def test_the_committed_50k_checkpoints_load_with_their_optimizer_state(folder, agent):
    """docs/bandit's checkpoints were written by earlier versions; a later version must resume
    them (optimizer state included), not play the agent again from the start."""
    import os
    path = os.path.join(os.path.dirname(__file__), "..", "..", "docs", folder, f"agent-{agent}.bbb")
    extra = read_metadata(path)["extra"]
    restored = bandit_settings.make_agent(extra["settings"], 117)  # the mushrooms' one-hot features
    loaded = restored.load(path)
    assert len(loaded["actions"]) == len(extra["actions"]) == 50000
    if folder == "bandit-kl2":
        assert extra["settings"]["kl_scale"] == 2.0


def committed_tuned_checkpoints():
    """docs/bandit-tuned*/agent-*.bbb: the 50,000-step runs with the settings chosen on seed 1,
    committed while they play so that a later session resumes them."""
    import glob
    import os
    docs = os.path.join(os.path.dirname(__file__), "..", "..", "docs")
    return sorted(os.path.relpath(path, docs)
                  for path in glob.glob(os.path.join(docs, "bandit-tuned*", "agent-*.bbb")))


@pytest.mark.parametrize("path", committed_tuned_checkpoints())
def test_the_committed_tuned_runs_resume_with_the_chosen_settings(path):
    """Each committed checkpoint of the tuned 50,000-step runs loads, optimizer state included,
    at a segment boundary, with the settings docs/results/bandit.md names: JINKEHE's setting at 1e-6
    for Thompson sampling, the paper's Adam 1e-3 for the greedy agents."""
    import os
    full = os.path.join(os.path.dirname(__file__), "..", "..", "docs", path)
    extra = read_metadata(full)["extra"]
    settings = bandit_settings.with_later_defaults(extra["settings"])
    loaded = bandit_settings.make_agent(settings, 117).load(full)  # the mushrooms' features
    actions = loaded["actions"]
    assert len(actions) == len(extra["actions"]) and 0 < len(actions) <= settings["steps"] == 50000
    assert len(actions) % bandit.play.SEGMENT_STEPS == 0
    assert settings["seed"] == (2 if "-s2" in path else 0)
    if settings["agent"] == "thompson":
        assert {key: settings[key] for key in ("optimizer", "learning_rate", "prior", "rho_init",
                                               "act_on", "num_train_samples")} == {
            "optimizer": "sgd", "learning_rate": 1e-6, "rho_init": [-7.0, -6.0], "act_on": "weights",
            "prior": {"pi": 0.5, "neg_log_sigma1": 3.0, "neg_log_sigma2": 8.0},
            "num_train_samples": 2}
    else:
        assert (settings["optimizer"], settings["learning_rate"]) == ("adam", 1e-3)


# ------------------------------------------------------------------ the reproductions' settings
def optimizer_of(agent):
    """The mx.optimizer.Optimizer of an agent's gluon.Trainer."""
    trainer = agent.trainer.gluon_trainer if isinstance(agent, bandit.ThompsonAgent) else agent.trainer
    return trainer.optimizer


def test_each_kind_of_agent_has_its_own_optimizer_checked_recorded_and_used(tiny_file, tmp_path):
    assert bandit_settings.greedy_settings() == bandit_settings.GREEDY_SETTINGS == bandit_settings.OPTIMIZER_SETTINGS
    for check in (bandit_settings.thompson_settings, bandit_settings.greedy_settings):
        for bad, message in (({"optimizer": "rmsprop"}, "optimizer"),
                             ({"learning_rate": 0}, "learning_rate"),
                             ({"learning_rate": "fast"}, "learning_rate"),
                             ({"clip_gradient": -1.0}, "clip_gradient"),
                             ({"clip_gradient": float("inf")}, "clip_gradient")):
            with pytest.raises(ValueError, match=message):
                check(bad)
    with pytest.raises(ValueError, match="unknown greedy settings"):
        bandit_settings.greedy_settings({"kl_scale": 2.0})
    thompson = bandit_settings.make_agent(bandit_settings.agent_settings(
        "thompson", STEPS, thompson={"optimizer": "sgd", "learning_rate": 2e-7, "clip_gradient": 1.0}),
        num_features=5)
    optimizer = optimizer_of(thompson)
    assert isinstance(optimizer, mx.optimizer.SGD) and optimizer.momentum == 0.0
    assert (optimizer.learning_rate, optimizer.clip_gradient) == (2e-7, 1.0)
    greedy_settings = bandit_settings.agent_settings("greedy-1", STEPS, greedy={"learning_rate": 1e-5})
    optimizer = optimizer_of(bandit_settings.make_agent(greedy_settings, num_features=5))
    assert isinstance(optimizer, mx.optimizer.Adam) and optimizer.learning_rate == 1e-5
    assert optimizer.clip_gradient is None
    out = tmp_path / "out"
    assert command(tiny_file, out, "thompson", "--optimizer", "sgd", "--learning-rate", "2e-7",
                   "--clip-gradient", "1", "--greedy-learning-rate", "1e-5") == 0
    settings = record(out, "thompson")["settings"]
    assert (settings["optimizer"], settings["learning_rate"], settings["clip_gradient"]) == ("sgd", 2e-7, 1.0)
    assert command(tiny_file, out, "greedy-0", "--greedy-optimizer", "sgd", "--greedy-learning-rate",
                   "1e-5", "--learning-rate", "0.5", "--optimizer", "adam") == 0
    settings = record(out, "greedy-0")["settings"]  # the Thompson options leave it alone
    assert (settings["optimizer"], settings["learning_rate"], settings["clip_gradient"]) == ("sgd", 1e-5, None)
    summary = json.loads((out / "bandit.json").read_text())
    assert summary["greedy"] == {"optimizer": "sgd", "learning_rate": 1e-5, "clip_gradient": None}
    assert summary["thompson"] is None and "learning_rate" not in summary["settings"]
    assert "sgd at learning rate 1e-05 (the greedy agents)" in (out / "bandit.md").read_text()
    for bad in (["--optimizer", "rmsprop"], ["--greedy-optimizer", "momentum"],
                ["--learning-rate", "0"], ["--greedy-learning-rate", "-1e-3"],
                ["--clip-gradient", "0"]):
        assert command(tiny_file, tmp_path / "x", "thompson", *bad) == 2


def test_rho_init_takes_a_value_or_a_uniform_range(tiny_file, tmp_path):
    assert bandit_settings.thompson_settings({"rho_init": (-7, -6)})["rho_init"] == [-7.0, -6.0]
    for bad in ([-6, -7], [-7], [-7, -6, -5], [float("nan"), 0], "x", True):
        with pytest.raises(ValueError, match="rho_init"):
            bandit_settings.thompson_settings({"rho_init": bad})
    settings = bandit_settings.agent_settings("thompson", STEPS, thompson={"rho_init": [-7.0, -6.0]})
    agent = bandit_settings.make_agent(settings, num_features=5)
    rhos = np.concatenate([rho.data().asnumpy().ravel() for rho in agent.trainer.posterior.rhos])
    assert rhos.min() >= -7.0 and rhos.max() < -6.0 and rhos.std() > 0.2  # U(-7, -6): std 0.29
    again = bandit_settings.make_agent(settings, num_features=5)  # seeded: the same draw
    np.testing.assert_array_equal(
        np.concatenate([rho.data().asnumpy().ravel() for rho in again.trainer.posterior.rhos]), rhos)
    out = tmp_path / "out"
    assert command(tiny_file, out, "thompson", "--rho-init", "-7", "-6") == 0
    assert record(out, "thompson")["settings"]["rho_init"] == [-7.0, -6.0]
    assert command(tiny_file, out, "thompson", "--rho-init", "-4") == 0
    assert record(out, "thompson")["settings"]["rho_init"] == -4.0
    for bad in (["-6", "-7"], ["-7", "-6", "-5"], ["-7", "nan"]):
        assert command(tiny_file, tmp_path / "x", "thompson", "--rho-init", *bad) == 2


def test_the_training_samples_are_recorded_and_reach_the_trainer(tiny_file, tmp_path):
    settings = bandit_settings.agent_settings("thompson", STEPS, thompson={"num_train_samples": 3})
    assert bandit_settings.make_agent(settings, num_features=5).trainer.num_samples == 3
    assert bandit_settings.make_agent(bandit_settings.agent_settings("thompson", STEPS),
                                 num_features=5).trainer.num_samples == 2  # the paper's
    out = tmp_path / "out"
    assert command(tiny_file, out, "thompson", "--train-samples", "3") == 0
    assert record(out, "thompson")["settings"]["num_train_samples"] == 3
    assert command(tiny_file, tmp_path / "x", "thompson", "--train-samples", "0") == 2


def test_kl_weighting_and_act_on_are_checked_recorded_and_reach_the_agent(tiny_file, tmp_path):
    for bad, message in (({"kl_weighting": "linear"}, "kl_weighting"), ({"act_on": "mean"}, "act_on")):
        with pytest.raises(ValueError, match=message):
            bandit_settings.thompson_settings(bad)
    settings = bandit_settings.agent_settings("thompson", STEPS, thompson={"kl_weighting": "blundell",
                                                                      "act_on": "weights"})
    agent = bandit_settings.make_agent(settings, num_features=5)
    assert agent.kl_weighting == "blundell" and agent.act_on == "weights"
    expected = [2 ** (64 - i) / (2 ** 64 - 1) for i in range(1, 65)]  # the paper's 64 x 64 / 4096
    np.testing.assert_allclose(agent.kl_weights, expected, rtol=1e-14)
    paper = bandit_settings.make_agent(bandit_settings.agent_settings("thompson", STEPS), num_features=5)
    assert paper.kl_weighting == "uniform" and paper.act_on == "outputs"
    np.testing.assert_array_equal(paper.kl_weights, np.full(64, 64 / 4096))
    out = tmp_path / "out"
    assert command(tiny_file, out, "thompson", "--kl-weighting", "blundell", "--act-on", "weights") == 0
    stored = record(out, "thompson")["settings"]
    assert (stored["kl_weighting"], stored["act_on"]) == ("blundell", "weights")
    for bad in (["--kl-weighting", "linear"], ["--act-on", "mean"]):
        assert command(tiny_file, tmp_path / "x", "thompson", *bad) == 2


NEW_KEYS = ("optimizer", "clip_gradient", "kl_weighting", "act_on", "kl_scale")


def without_new_keys(settings):
    return {key: value for key, value in settings.items() if key not in NEW_KEYS}


def test_records_and_checkpoints_written_before_the_new_settings_still_match(tiny_file, tmp_path,
                                                                              monkeypatch, caplog):
    monkeypatch.setattr(bandit.play, "SEGMENT_STEPS", 2)  # a checkpoint after step 6
    out = tmp_path / "out"
    play(tiny_file, out, agents=["thompson", "greedy-0"])
    for name in ("thompson", "greedy-0"):  # as an earlier version wrote them
        path = out / f"agent-{name}.json"
        stored = json.loads(path.read_text())
        stored["settings"] = without_new_keys(stored["settings"])
        path.write_text(json.dumps(stored))
    summary = play(tiny_file, out, agents=["thompson", "greedy-0"])
    assert [row["skipped"] for row in summary["agents"]] == [True, True]
    assert summary["thompson"] == bandit_settings.THOMPSON_SETTINGS
    assert summary["greedy"] == bandit_settings.GREEDY_SETTINGS
    # an old checkpoint of a shorter run: continued, not played from the start
    play(tiny_file, tmp_path / "whole", agents=["thompson", "greedy-0"], steps=STEPS + 2)
    for name in ("thompson", "greedy-0"):
        (out / f"agent-{name}.json").unlink()
        path = str(out / f"agent-{name}.bbb")
        extra = read_metadata(path)["extra"]
        agent = bandit_settings.make_agent(without_new_keys(extra["settings"]), 27)
        agent.load(path)
        agent.save(path, extra=dict(extra, settings=without_new_keys(extra["settings"])))
    caplog.set_level("INFO")
    play(tiny_file, out, agents=["thompson", "greedy-0"], steps=STEPS + 2)
    assert caplog.text.count(f"resuming after step {STEPS}") == 2
    for name in ("thompson", "greedy-0"):
        assert record(out, name)["actions"] == record(tmp_path / "whole", name)["actions"]


REPRODUCTION = {"optimizer": "sgd", "learning_rate": 1e-3, "rho_init": [-7.0, -6.0],
                "kl_weighting": "blundell", "clip_gradient": 1.0, "act_on": "weights",
                "num_action_samples": 3, "num_train_samples": 1}
GREEDY_REPRODUCTION = {"optimizer": "sgd", "learning_rate": 1e-5, "clip_gradient": 1.0}


def play_reproduction(tiny_file, out, agent):
    return bandit_run.run_agents(str(tiny_file), STEPS, str(out), agents=[agent], num_minibatches=3,
                                 thompson=REPRODUCTION, greedy=GREEDY_REPRODUCTION)


@pytest.mark.parametrize("agent", ["thompson", "greedy-1"])
def test_a_run_with_the_reproductions_settings_resumes_exactly(tiny_file, tmp_path, monkeypatch,
                                                               caplog, agent):
    """SGD, a rho range, Eq. (9) weighting, clipping and acting on averaged weights: stopped
    after 2 of 3 segments and resumed, the same actions and the same final network and
    optimizer state as the uninterrupted run."""
    monkeypatch.setattr(bandit.play, "SEGMENT_STEPS", 2)
    play_reproduction(tiny_file, tmp_path / "whole", agent)
    out = tmp_path / "out"
    with monkeypatch.context() as patch:
        StopAfterSegments(patch, stop=2)
        with pytest.raises(Interrupted):
            play_reproduction(tiny_file, out, agent)
    caplog.set_level("INFO")
    play_reproduction(tiny_file, out, agent)
    assert "resuming after step 4" in caplog.text
    resumed, whole = record(out, agent), record(tmp_path / "whole", agent)
    assert resumed["actions"] == whole["actions"] and resumed["settings"] == whole["settings"]
    expected = REPRODUCTION if agent == "thompson" else GREEDY_REPRODUCTION
    assert {key: resumed["settings"][key] for key in expected} == expected
    ours = read_checkpoint(str(out / f"agent-{agent}.bbb"), with_optimizer=True)
    theirs = read_checkpoint(str(tmp_path / "whole" / f"agent-{agent}.bbb"), with_optimizer=True)
    assert sorted(ours.arrays) == sorted(theirs.arrays) and ours.arrays
    for name in ours.arrays:
        np.testing.assert_array_equal(ours.arrays[name], theirs.arrays[name])
    assert ours.optimizer[0] == theirs.optimizer[0] and ours.optimizer[0]["family"] == "sgd"


def test_stored_agent_settings_of_before_a_rename_read_with_the_current_names():
    """An agent record whose prior gives -log sigma as log_sigma1/2 (the older names) is read
    with neg_log_sigma1/2 and the later settings' defaults, and then passes the checks."""
    stored = dict(bandit_settings.THOMPSON_SETTINGS,
                  prior={"pi": 0.5, "log_sigma1": 0.0, "log_sigma2": 6.0})
    current = bandit_settings.with_later_defaults(stored)
    assert current["prior"] == {"pi": 0.5, "neg_log_sigma1": 0.0, "neg_log_sigma2": 6.0}
    assert bandit_settings.thompson_settings(current) == current


# ------------------------------------------------------------------ reading a recorded run back
def test_recorded_histories_replay_every_recorded_agent_in_order(tiny_file, tmp_path):
    out = tmp_path / "out"
    play(tiny_file, out, agents=["greedy-1", "thompson"])
    env = bandit.MushroomBandit(*load_mushroom(tiny_file)[:2])
    histories = bandit_run.recorded_histories(str(out), env)
    assert list(histories) == ["Thompson sampling (BBB)", "1% greedy"]  # AGENTS' order
    for name, history in zip(["thompson", "greedy-1"], histories.values()):
        saved = record(out, name)
        assert history.actions.tolist() == saved["actions"]
        assert history.cumulative_expected_regret.tolist() == saved["curve"]["cumulative_expected_regret"]
        assert history.cumulative_regret[-1] == saved["final"]["cumulative_regret"]
    with pytest.raises(ValueError, match="holds no agent's record"):
        bandit_run.recorded_histories(str(tmp_path / "empty"), env)


def test_recorded_histories_refuse_records_of_other_mushrooms(tiny_file, tmp_path):
    out = tmp_path / "out"
    play(tiny_file, out, agents=["greedy-0"])
    data = load_mushroom(tiny_file)
    flipped = bandit.MushroomBandit(data.contexts, ~data.edible)  # every class the other way
    with pytest.raises(ValueError, match="agent-greedy-0.json"):
        bandit_run.recorded_histories(str(out), flipped)


@pytest.mark.parametrize("agent", ["thompson", "greedy-0"])
def test_recorded_agent_is_the_agent_at_the_end_of_its_run(tiny_file, tmp_path, monkeypatch, agent):
    monkeypatch.setattr(bandit.play, "SEGMENT_STEPS", 2)  # a checkpoint after the last step
    made = []

    def keep(*args, **kwargs):
        made.append(bandit_settings.make_agent(*args, **kwargs))
        return made[-1]

    with monkeypatch.context() as patch:
        patch.setattr(bandit_run, "make_agent", keep)
        play(tiny_file, tmp_path / "out", agents=[agent])
    played = made[-1]  # the agent that played the run, as it ended
    restored, saved = bandit_run.recorded_agent(str(tmp_path / "out"), agent, played.num_features)
    assert saved["actions"] == record(tmp_path / "out", agent)["actions"]
    assert type(restored) is type(played)
    if isinstance(played, bandit.ThompsonAgent):  # mu and rho
        ends = [[p.data().asnumpy() for p in a.trainer.posterior.mus + a.trainer.posterior.rhos]
                for a in (played, restored)]
    else:
        ends = [[p.data().asnumpy() for p in a.net.collect_params().values()]
                for a in (played, restored)]
    assert len(ends[0]) == len(ends[1]) > 0
    for mine, theirs in zip(*ends):
        np.testing.assert_array_equal(mine, theirs)


def test_recorded_agent_names_a_missing_or_foreign_checkpoint(tiny_file, tmp_path, monkeypatch):
    out = tmp_path / "out"
    play(tiny_file, out, agents=["greedy-0", "greedy-1"])  # 6 steps: no checkpoint yet
    with pytest.raises(ValueError, match="no checkpoint"):
        bandit_run.recorded_agent(str(out), "greedy-0", 117)
    monkeypatch.setattr(bandit.play, "SEGMENT_STEPS", 2)
    out = tmp_path / "checkpointed"
    play(tiny_file, out, agents=["greedy-0", "greedy-1"])
    num_features = bandit.MushroomBandit(*load_mushroom(tiny_file)[:2]).num_features
    (out / "agent-greedy-1.bbb").write_bytes((out / "agent-greedy-0.bbb").read_bytes())
    with pytest.raises(ValueError, match="agent-greedy-1.bbb is not the checkpoint"):
        bandit_run.recorded_agent(str(out), "greedy-1", num_features)
    (out / "agent-greedy-0.bbb").write_bytes(b"not a checkpoint")
    with pytest.raises(ValueError, match="agent-greedy-0.bbb"):
        bandit_run.recorded_agent(str(out), "greedy-0", num_features)
    with pytest.raises(ValueError, match="no readable record"):
        bandit_run.recorded_agent(str(out), "greedy-5", num_features)


def thompson_stopped_after_two_segments(tiny_file, out, monkeypatch):
    """The Thompson agent played into ``out`` and interrupted after its second checkpoint."""
    with monkeypatch.context() as patch:
        StopAfterSegments(patch, stop=2)
        with pytest.raises(Interrupted):
            play(tiny_file, out, agents=["thompson"])


def test_checkpointed_history_is_the_steps_played_so_far(tiny_file, tmp_path, monkeypatch):
    """An agent stopped after 2 of 3 segments: its checkpoint replays to the first 4 steps of
    the uninterrupted run; no checkpoint is None; a bad or foreign file is named."""
    monkeypatch.setattr(bandit.play, "SEGMENT_STEPS", 2)
    play(tiny_file, tmp_path / "whole", agents=["thompson"])
    out = tmp_path / "out"
    thompson_stopped_after_two_segments(tiny_file, out, monkeypatch)
    data = load_mushroom(tiny_file)
    env = bandit.MushroomBandit(data.contexts, data.edible)
    settings, history, seconds = bandit_run.checkpointed_history(str(out), "thompson", env)
    whole = record(tmp_path / "whole", "thompson")
    assert settings == whole["settings"] and seconds > 0
    assert history.actions.tolist() == whole["actions"][:4]
    assert history.cumulative_expected_regret.tolist() == \
        whole["curve"]["cumulative_expected_regret"][:4]
    assert bandit_run.checkpointed_history(str(out), "greedy-0", env) is None
    (out / "agent-greedy-0.bbb").write_bytes((out / "agent-thompson.bbb").read_bytes())
    with pytest.raises(ValueError, match="agent-greedy-0.bbb is not a checkpoint of bandit agent"):
        bandit_run.checkpointed_history(str(out), "greedy-0", env)
    (out / "agent-thompson.bbb").write_bytes(b"not a checkpoint")
    with pytest.raises(ValueError, match="agent-thompson.bbb"):
        bandit_run.checkpointed_history(str(out), "thompson", env)


def test_the_tuning_table_shows_finished_and_in_progress_agents(tiny_file, tmp_path, monkeypatch,
                                                                 capsys):
    """scripts/bandit_tuning_table.py: a finished agent's row from its record; with
    --in-progress, an interrupted agent's row from its checkpoint, its regret that of the
    uninterrupted run at the steps it has played."""
    import importlib.util
    import pathlib
    path = pathlib.Path(__file__).resolve().parents[2] / "scripts" / "bandit_tuning_table.py"
    spec = importlib.util.spec_from_file_location("bandit_tuning_table", path)
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    monkeypatch.setattr(bandit.play, "SEGMENT_STEPS", 2)
    play(tiny_file, tmp_path / "whole", agents=["thompson"])
    out = tmp_path / "out"
    play(tiny_file, out, agents=["greedy-0"])
    thompson_stopped_after_two_segments(tiny_file, out, monkeypatch)
    arguments = [str(out), "--steps", "2", "4", "6", "--mushroom", str(tiny_file)]
    script.main(arguments)
    rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith("| out |")]
    assert len(rows) == 1 and "0% greedy" in rows[0]
    greedy_curve = record(out, "greedy-0")["curve"]["cumulative_expected_regret"]
    assert [cell.strip() for cell in rows[0].split("|")[5:8]] == \
        [f"{greedy_curve[step - 1]:,.0f}" for step in (2, 4, 6)]
    script.main(arguments + ["--in-progress"])
    rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith("| out |")]
    assert len(rows) == 2 and "(in progress: 4 of 6 steps)" in rows[0]
    whole = record(tmp_path / "whole", "thompson")["curve"]["cumulative_expected_regret"]
    assert [cell.strip() for cell in rows[0].split("|")[5:8]] == \
        [f"{whole[1]:,.0f}", f"{whole[3]:,.0f}", ""]  # step 6 not played yet
