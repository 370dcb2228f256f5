"""Paired continuations (gluon_bbb.experiments.paired, scripts/paired_continuation.py) end to end
on tiny synthetic MNIST files: both implementations continue the same state, each run resumes
bit for bit, a folder of another continuation is refused, and the comparison's arithmetic
equals a hand computation from the records."""
import json
import math
import pathlib
import shlex

import mxnet as mx
import numpy as np
import pytest

from gluon_bbb.experiments import all_images, paired, peer_state
from gluon_bbb.experiments.runners import make_bbb_trainer

from synthetic import write_dataset

# Student's t quantiles (97.5%) from the tables, for the hand computations
T975 = {1: 12.706204736174707, 2: 4.302652729749464, 4: 2.7764451051977987,
        8: 2.306004135204166, 30: 2.042272456301238}


def load_script(name):
    import importlib.util
    import os
    spec = importlib.util.spec_from_file_location(
        name, os.path.join(os.path.dirname(__file__), "..", "..", "scripts", f"{name}.py"))
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    return script


def test_t_distribution_against_tables_and_scipy():
    for df, quantile in T975.items():
        assert paired.t_quantile(0.975, df) == pytest.approx(quantile, abs=1e-9)
        assert paired.t_cdf(quantile, df) == pytest.approx(0.975, abs=1e-12)
        assert paired.t_quantile(0.025, df) == pytest.approx(-quantile, abs=1e-9)
    assert paired.t_cdf(0.0, 3) == 0.5
    assert paired.t_cdf(1.0, 1) == pytest.approx(0.75, abs=1e-14)  # Cauchy: 1/2 + atan(1)/pi
    stats = pytest.importorskip("scipy.stats")
    for df in (1, 2.5, 4, 17, 300):
        for t in (-7.0, -1.98, -0.3, 0.4, 2.2, 12.0):
            assert paired.t_cdf(t, df) == pytest.approx(stats.t.cdf(t, df), abs=1e-12)
    with pytest.raises(ValueError):
        paired.t_quantile(1.0, 3)


def test_the_paired_difference_by_hand():
    cells = {"a": {"gluon_bbb": [1.5, 1.7, 1.6], "peer": [1.4, 1.5, 1.45]},
             "b": {"gluon_bbb": [1.2, 1.3, 1.25], "peer": [1.25, 1.15, 1.2]},
             "c": {"gluon_bbb": [1.9, 1.8, 1.85], "peer": [1.7, 1.8, 1.75]}}
    got = paired.paired_difference(cells)
    d = {"a": 1.6 - 1.45, "b": 1.25 - 1.2, "c": 1.85 - 1.75}
    assert got["per_state"] == pytest.approx(d)
    mean = sum(d.values()) / 3
    sd = math.sqrt(sum((v - mean) ** 2 for v in d.values()) / 2)
    half = T975[2] * sd / math.sqrt(3)
    assert got["mean"] == pytest.approx(mean) and got["sd"] == pytest.approx(sd)
    assert got["interval"] == pytest.approx((mean - half, mean + half))
    # noise only: the six cells' squares about their means over 6 x 2 = 12 degrees of freedom
    squares = sum((v - np.mean(values)) ** 2 for groups in cells.values()
                  for values in groups.values() for v in values)
    se = math.sqrt(squares / 12 * 3 * (1 / 3 + 1 / 3)) / 3
    stats = pytest.importorskip("scipy.stats")
    noise_half = stats.t.ppf(0.975, 12) * se
    assert got["noise_df"] == 12
    assert got["noise_interval"] == pytest.approx((mean - noise_half, mean + noise_half))
    one = paired.paired_difference({"a": {"gluon_bbb": [1.0], "peer": [0.5]}})
    assert one["mean"] == 0.5 and one["interval"] is None and one["noise_interval"] is None
    with pytest.raises(ValueError, match="both"):
        paired.paired_difference({"a": {"gluon_bbb": [1.0], "peer": []}})


@pytest.fixture(scope="module")
def tiny_data(tmp_path_factory):
    folder = tmp_path_factory.mktemp("data")
    write_dataset(folder / "mnist", n_train=160, n_test=48)
    return str(folder)


class Stop(Exception):
    """A stop in the middle of a run (what SIGTERM or a crash does)."""


def strip(record):
    return [{k: v for k, v in entry.items() if k != "seconds"} for entry in record]


def peer_arrays(folder):
    with np.load(folder / "checkpoint.npz") as stored:
        return {name: stored[name] for name in stored.files}


def gluon_state(folder, seed, hidden=8):
    script = load_script("paired_continuation")
    trainer = make_bbb_trainer(script.gluon_config(hidden, 1e-3, seed), mx.cpu())
    trainer.load(str(folder / "checkpoint.bbb"))
    return trainer.epoch, peer_state.trainer_state(trainer)


def test_paired_continuations_run_resume_and_compare(tmp_path, tiny_data, capsys, monkeypatch):
    pytest.importorskip("torch")  # the peer's half (the [peer] extra)
    script = load_script("paired_continuation")
    common = ["--hidden", "8", "--lr", "1e-3", "--data-dir", tiny_data, "--mc-samples", "2",
              "--last-mc", "2", "--eager", "--threads", "1"]

    def run(state, output, epochs, seeds=("0", "1"), extra=()):
        return script.main(["run", "--state", state, "--epochs", str(epochs), "--seeds", *seeds,
                            "--output-dir", str(output), *common, *extra])

    # two runs of each implementation from the peer's initialisation of seed 3
    whole = tmp_path / "whole"
    assert run("init:peer:3", whole, 3) == 0
    claim = json.loads((whole / "gluon_bbb-s1" / paired.CONTINUATION).read_text())
    start = script.resolve_state("init:peer:3", 8)
    assert claim["state_sha256"] == start["sha256"] and claim["state_epoch"] == 0
    assert claim["implementation"] == "gluon_bbb" and claim["noise_seed"] == 1
    assert "init:peer:3" in claim["command"] and claim["state_command"]
    for name in ("gluon_bbb-s0", "gluon_bbb-s1", "peer-s0", "peer-s1"):
        record = all_images.read_record(str(whole / name))
        assert [e["epoch"] for e in record] == [1, 2, 3]
        assert [e["mc_samples"] for e in record] == [0, 2, 2]
        assert (whole / name / "checkpoint.bbb").exists() == name.startswith("gluon")
    # the noise seeds make different runs, the implementations too
    records = {name: strip(all_images.read_record(str(whole / name)))
               for name in ("gluon_bbb-s0", "gluon_bbb-s1", "peer-s0")}
    assert records["gluon_bbb-s0"] != records["gluon_bbb-s1"]

    # the same command stopped inside a run, once in each implementation, and run again: the
    # same runs bit for bit (gluon_bbb stopped between its checkpoint and its record, the peer
    # between training an epoch and recording it)
    parts = tmp_path / "parts"

    def stop_at_second_call(module, name):
        original, calls = getattr(module, name), []

        def stopping(*args, **kwargs):
            calls.append(1)
            if len(calls) == 2:
                raise Stop
            return original(*args, **kwargs)
        monkeypatch.setattr(module, name, stopping)

    stop_at_second_call(all_images, "convention_errors")
    with pytest.raises(Stop):
        run("init:peer:3", parts, 3)
    monkeypatch.undo()
    assert len(all_images.read_record(str(parts / "gluon_bbb-s0"))) == 1
    stop_at_second_call(script.peer_module(), "test_errors")
    with pytest.raises(Stop):
        run("init:peer:3", parts, 3)
    monkeypatch.undo()
    assert len(all_images.read_record(str(parts / "peer-s0"))) == 1
    assert run("init:peer:3", parts, 3) == 0
    for name in ("gluon_bbb-s0", "gluon_bbb-s1", "peer-s0", "peer-s1"):
        assert strip(all_images.read_record(str(parts / name))) == \
            strip(all_images.read_record(str(whole / name))), name
    for seed in (0, 1):
        a, b = peer_arrays(whole / f"peer-s{seed}"), peer_arrays(parts / f"peer-s{seed}")
        assert sorted(a) == sorted(b) and all(np.array_equal(a[k], b[k]) for k in a)
        (ea, sa), (eb, sb) = gluon_state(whole / f"gluon_bbb-s{seed}", seed), \
            gluon_state(parts / f"gluon_bbb-s{seed}", seed)
        assert ea == eb == 3 and all(np.array_equal(sa[k], sb[k]) for k in sa)
    sessions = json.loads((parts / "peer-s0" / "sessions.json").read_text())
    assert [(s["epochs_after"], s["outcome"]) for s in sessions] == [
        (1, "stopped by Stop"), (3, "finished")]

    # a folder that continues something else is refused, named
    assert run("init:gluon_bbb:3", parts, 3) == 2
    assert "continuation.json" in capsys.readouterr().err
    assert run("init:peer:3", parts, 3, extra=("--lr", "1e-4")) == 2

    # both start from the state: at a rate too small to move a weight, one epoch leaves the
    # state as it was in both, and the two score the same network alike
    still = tmp_path / "still"
    assert script.main(["run", "--state", "init:gluon_bbb:5", "--epochs", "1", "--seeds", "0",
                        "--output-dir", str(still), "--hidden", "8", "--lr", "1e-30",
                        "--data-dir", tiny_data, "--mc-samples", "0", "--last-mc", "0",
                        "--eager"]) == 0
    state = script.resolve_state("init:gluon_bbb:5", 8)["state"]
    moved = peer_arrays(still / "peer-s0")
    assert all(np.array_equal(moved[name], state[name]) for name in state)
    kept = gluon_state(still / "gluon_bbb-s0", 0)[1]
    assert all(np.array_equal(a, state[k]) for k, a in kept.items())
    first = [all_images.read_record(str(still / name))[0] for name in ("gluon_bbb-s0", "peer-s0")]
    for key in ("mean_x126", "mean_raw"):  # the peer's error is a float32 mean: 1/48 apart
        assert first[0][key] == pytest.approx(first[1][key], abs=1e-6)

    # a second state, and the comparison against a hand computation from the records
    other = tmp_path / "other"
    assert run("init:gluon_bbb:4", other, 3) == 0
    capsys.readouterr()
    assert script.main(["compare", str(whole), str(other), "--last", "2"]) == 0
    table = capsys.readouterr().out
    values = {}
    for state_dir in (whole, other):
        for implementation in paired.IMPLEMENTATIONS:
            runs = [all_images.read_record(str(state_dir / f"{implementation}-s{seed}"))
                    for seed in (0, 1)]
            values[state_dir, implementation] = [
                [100 * (r[-1][key] + r[-2][key]) / 2 for r in runs]
                for key in ("mean_x126", "mc_logprob_raw")] + [
                [100 * r[-1]["mc_logprob_raw"] for r in runs]]
    for k, (key, label) in enumerate(script.MEASURES):
        label = label.format(last=2)
        d = [np.mean(values[s, "gluon_bbb"][k]) - np.mean(values[s, "peer"][k])
             for s in (whole, other)]
        mean, sd = np.mean(d), np.std(d, ddof=1)
        half = T975[1] * sd / math.sqrt(2)
        squares = sum(np.sum((np.array(values[s, i][k]) - np.mean(values[s, i][k])) ** 2)
                      for s in (whole, other) for i in paired.IMPLEMENTATIONS)
        noise_half = T975[4] * math.sqrt(squares / 4 * 2 * (1 / 2 + 1 / 2)) / 2
        row = next(line for line in table.splitlines()
                   if line.startswith(f"| {label} | **paired, 2 states**"))
        assert f"**{mean:+.3f}**" in row
        assert f"[{mean - half:+.3f}, {mean + half:+.3f}]" in row
        assert f"(4 df) [{mean - noise_half:+.3f}, {mean + noise_half:+.3f}]" in row
        assert f"| {label} | whole (0) |" in table
    assert script.main(["compare", str(whole), str(whole)]) == 2  # the same state twice
    assert script.main(["compare", str(tmp_path / "parts" / "peer-s0")]) == 2


def test_a_run_folders_recorded_command_trains_its_state_again(tmp_path, tiny_data, monkeypatch):
    """What a continuation records as the command that trains its state again, run again into
    another folder, makes the same state bit for bit, for both implementations' run folders:
    every option that shapes the state (a rate, a drop, a prior, a width) is in it."""
    pytest.importorskip("torch")  # the peer's half (the [peer] extra)
    script = load_script("paired_continuation")
    monkeypatch.setenv("GLUON_BBB_DATA", tiny_data)
    scripts = {"scripts/peer_all_images.py": load_script("peer_all_images"),
               "scripts/all_images.py": load_script("all_images")}
    # each run on the command line, then on what its state's record says
    made = {
        "peer": ["scripts/peer_all_images.py", "--hidden", "8", "--seed", "2", "--epochs", "2",
                 "--lr", "2e-3", "--lr-step", "2", "--pi", "0.5", "--neg-log-sigma2", "6"],
        "gluon_bbb": ["scripts/all_images.py", "bbb-mixture-400-paper", "--seed", "2",
                      "--epochs", "2", "--set", "hidden=[8, 8]", "--set", "lr=0.002",
                      "--set", "pi=0.5"]}
    quiet = {"peer": ["--mc-samples", "2", "--eager", "--threads", "1"],
             "gluon_bbb": ["--mc-samples", "2"]}
    for name, words in made.items():
        first = tmp_path / f"{name}-first"
        scripts[words[0]].main(words[1:] + ["--output-dir", str(first)] + quiet[name])
        state = script.resolve_state(str(first), 8)
        again = shlex.split(state["command"])
        assert again[:2] == ["python", words[0]] and again.count("--output-dir") == 1
        again[again.index("--output-dir") + 1] = str(tmp_path / f"{name}-again")
        scripts[words[0]].main(again[2:] + quiet[name])
        assert script.resolve_state(str(tmp_path / f"{name}-again"), 8)["sha256"] == \
            state["sha256"], (name, state["command"])


#: The paired experiment's committed records, one folder per experiment and state.
PAIRED_RECORDS = pathlib.Path(__file__).resolve().parents[2] / "results" / "paired"
LONG_PROTOCOL = PAIRED_RECORDS.parents[1] / "docs" / "results" / "long-protocol.md"


@pytest.mark.parametrize("experiment", ["before-drop-400", "after-drop-400"])
def test_the_paired_tables_in_the_docs_are_the_committed_records(experiment):
    """docs/results/long-protocol.md quotes ``compare``'s table of each experiment's committed
    records line for line: no state left out, no number from elsewhere."""
    script = load_script("paired_continuation")
    states = sorted(str(path) for path in (PAIRED_RECORDS / experiment).iterdir()
                    if path.is_dir())
    lines = script.compare_table(states).splitlines()
    assert any(f"paired, {len(states)} state" in line for line in lines)
    page = LONG_PROTOCOL.read_text()
    missing = [line for line in lines if line.strip() and line not in page]
    assert not missing, missing
