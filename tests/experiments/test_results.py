"""The committed headline results re-check: evaluating results/<name>/best.bbb (best.params for
the baselines) on the real test set gives the error recorded in its result.json
(docs/results/ quotes them)."""
import json
import pathlib
import shutil
import zipfile

import pytest

from gluon_bbb import data, experiments
from gluon_bbb.io.checkpoint import read_metadata
from gluon_bbb.cli import main

RESULTS = pathlib.Path(__file__).resolve().parents[2] / "results"
HEADLINE_RUNS = ["bbb-mixture-400-ls8-kl0.3-s2", "bbb-mixture-400-ls8", "bbb-mixture-400-s2",
                 "bbb-mixture-400-lrdecay", "bbb-gaussian-400-lrdecay", "bbb-mixture-400",
                 "bbb-gaussian-400", "fashion-bbb-mixture-400-kl0.1", "bbb-mixture-lenet",
                 "fashion-bbb-mixture-lenet", "bbb-mixture-lenet-kl0.1",
                 "searched-mixture-400-seed1", "searched-mixture-1200-seed0",
                 "searched-mixture-1200-seed1", "searched-gaussian-1200-seed1",
                 "paper-600/bbb-mixture-400-paper-s1", "paper-600/bbb-mixture-1200-paper-s0",
                 "paper-600/bbb-mixture-400-paper-rho4-s0"]


def _data_or_skip(dataset="mnist"):
    try:
        data.find_data_dir(dataset)
    except data.DataNotFoundError as error:
        pytest.skip(f"real {dataset} not available: {error}")


#: The committed deterministic baselines of Table 1 (best.params only, no per-epoch checkpoint).
BASELINE_RUNS = ["sgd-400", "dropout-400", "sgd-lenet", "dropout-lenet", "fashion-sgd-lenet",
                 "fashion-dropout-lenet", "searched-sgd-1200-seed1",
                 "searched-dropout-1200-seed1"]


def test_committed_checkpoints_are_in_the_current_format_without_optimizer_state():
    """Slimmed by scripts/slim_checkpoints.py: nothing committed holds a pickle or optimizer
    state. (A run still under way keeps its checkpoint as written, to resume from; with plain
    SGD its optimizer entry is empty.)"""
    checkpoints = sorted(RESULTS.glob("**/*.bbb"))
    assert len(checkpoints) >= len(HEADLINE_RUNS)
    for path in checkpoints:
        assert read_metadata(path)["format"] == 2, path
        with zipfile.ZipFile(path) as archive:
            names = sorted(archive.namelist())
            if "optimizer.bin" in names:
                assert archive.getinfo("optimizer.bin").file_size == 0, path
                names.remove("optimizer.bin")
            assert names == ["arrays.bin", "metadata.json"], path


@pytest.mark.parametrize("name", BASELINE_RUNS)
def test_committed_baseline_reproduces_its_recorded_test_error(name):
    run_dir = RESULTS / name
    _data_or_skip(json.loads((run_dir / "config.json").read_text())["dataset"])
    recorded = json.loads((run_dir / "result.json").read_text())
    measured = experiments.evaluate_run(str(run_dir))
    assert measured["best_epoch"] == recorded["best_epoch"]
    assert measured["validation_error"] == recorded["validation_error"]
    assert measured["test_error_mean"] == recorded["test_error_mean"]
    assert measured["test_error_mc"] is None


@pytest.mark.parametrize("name", HEADLINE_RUNS)
def test_committed_checkpoint_reproduces_its_recorded_test_error(name):
    run_dir = RESULTS / name
    _data_or_skip(json.loads((run_dir / "config.json").read_text())["dataset"])
    recorded = json.loads((run_dir / "result.json").read_text())
    measured = experiments.evaluate_run(str(run_dir), mc_samples=recorded["mc_samples"])
    assert measured["best_epoch"] == recorded["best_epoch"]
    assert measured["validation_error"] == recorded["validation_error"]
    assert measured["test_error_mean"] == recorded["test_error_mean"]  # deterministic
    # The MC average draws weights from the seeded generator; allow a few images for
    # last-bit differences of the compiled operator on another CPU.
    assert abs(measured["test_error_mc"] - recorded["test_error_mc"]) <= 5e-4


#: The Table 2 networks: name -> the greatest increase of the test error allowed when 95% and
#: 98% of the weights are removed by signal-to-noise ratio (issue 6's targets for the 2x400
#: network), or None where the targets were missed (issue 20: the 2x1200 network's are recorded
#: in docs/results/table1.md).
PRUNING_TARGETS = {"bbb-mixture-400-s2": (0.0010, 0.0030), "searched-mixture-1200-seed0": None,
                   "searched-mixture-1200-seed1": None, "paper-600/bbb-mixture-1200-paper-s0": None}


@pytest.mark.parametrize("name", PRUNING_TARGETS)
def test_committed_pruning_table_reproduces(tmp_path, name):
    """`gluon-bbb prune` of a Table 2 network gives the committed pruning.json (deterministic:
    weights are removed from the posterior-mean network)."""
    _data_or_skip()
    run_dir = tmp_path / name  # prune writes into the folder: work on a copy
    shutil.copytree(RESULTS / name, run_dir, ignore=shutil.ignore_patterns("*.png"))
    recorded = json.loads((run_dir / "pruning.json").read_text())
    assert main(["prune", str(run_dir)]) == 0
    measured = json.loads((run_dir / "pruning.json").read_text())
    assert measured["epoch"] == recorded["epoch"]
    assert measured["rows"] == recorded["rows"]
    if (run_dir / "pruning-last.json").is_file():  # the network at the end of training too
        last = json.loads((run_dir / "pruning-last.json").read_text())
        assert main(["prune", str(run_dir), "--network", "last"]) == 0
        assert json.loads((run_dir / "pruning-last.json").read_text()) == last
    by_row = {(row["method"], row["fraction"]): row["test_error"] for row in measured["rows"]}
    assert sorted(fraction for method, fraction in by_row if method == "snr") == [
        0.0, 0.5, 0.75, 0.95, 0.98]
    if PRUNING_TARGETS[name] is not None:
        at_95, at_98 = PRUNING_TARGETS[name]
        assert by_row["snr", 0.95] - by_row["snr", 0.0] <= at_95
        assert by_row["snr", 0.98] - by_row["snr", 0.0] <= at_98


#: Issue 20: the record (config, result, log) of every seed behind the Table 1 rows at 2x800 and
#: 2x1200 (and the 2x400 Gaussian prior's seed 1), from which `gluon-bbb reproduce-report
#: --recorded` writes the table over seeds.
SEED_RECORDS = RESULTS / "table1-seeds"


def test_the_table_over_seeds_is_written_from_the_committed_records(capsys):
    folders = sorted(SEED_RECORDS.iterdir())
    assert main(["reproduce-report", "--recorded"] + [str(f) for f in folders]) == 0
    rows = capsys.readouterr().out.splitlines()[2:]
    assert {row.split(" | ")[0].lstrip("| ") for row in rows} == {
        json.loads((folder / "result.json").read_text())["config"] for folder in folders}


@pytest.mark.parametrize("name", sorted(path.name for path in RESULTS.glob("searched-*-1200-seed*")))
def test_a_committed_2x1200_network_is_the_recorded_seed(name):
    """Each committed 2x1200 network is one of the recorded seeds, with the same measurements
    (a finished run asked again reports again: the times of the report may differ)."""
    committed = json.loads((RESULTS / name / "result.json").read_text())
    record = SEED_RECORDS / f"{committed['config']}-s{committed['hyperparameters']['seed']}"
    recorded = json.loads((record / "result.json").read_text())
    for key in ("config", "hyperparameters", "history", "best_epoch", "validation_error",
                "test_error_mean", "test_error_mc"):
        assert committed[key] == recorded[key], key


#: Issue 34: the runs of the paper's long protocol (600 epochs of plain SGD), one record each.
PAPER_RECORDS = RESULTS / "paper-600"


def test_the_long_protocol_table_and_curves_are_drawn_from_the_committed_records(tmp_path, capsys):
    folders = sorted(PAPER_RECORDS.iterdir())
    results = [json.loads((folder / "result.json").read_text()) for folder in folders]
    curves, widths = tmp_path / "curves.png", tmp_path / "widths.png"
    # the widths are recorded from the 2x1200 run on (the 2x400 runs started before)
    has_widths = any("posterior" in record for r in results for record in r["history"])
    assert main(["reproduce-report", "--recorded", *map(str, folders), "--curves", str(curves)]
                + (["--widths", str(widths)] if has_widths else [])) == 0
    rows = [row for row in capsys.readouterr().out.splitlines()[2:] if row.startswith("| ")]
    configs = {json.loads((folder / "result.json").read_text())["config"] for folder in folders}
    assert {row.split(" | ")[0].lstrip("| ") for row in rows} == configs
    for result in results:
        assert result["epochs_run"] == 600 and len(result["history"]) == 600
        assert result["hyperparameters"]["lr_steps"] == [300]
    assert curves.stat().st_size > 10_000
    assert not has_widths or widths.stat().st_size > 10_000
