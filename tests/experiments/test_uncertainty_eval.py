"""Tests of gluon_bbb.uncertainty_eval and 'gluon-bbb uncertainty' on tiny run folders trained
on synthetic MNIST-format data: class k lights the horizontal band of rows k of the image,
the synthetic "Fashion-MNIST" lights vertical bands instead (outside the training data)."""
import json

import numpy as np
import pytest
from mxnet import nd

from gluon_bbb import data, experiments, uncertainty
from gluon_bbb.data import datafolders
from gluon_bbb.experiments import uncertainty_eval
from gluon_bbb.cli import main
from gluon_bbb.context import resolve_context
from test_data import write_idx

NUM_TRAIN, NUM_VALIDATION, NUM_TEST = 1200, 200, 200
SMOKE = dict(hidden=[16], num_validation=NUM_VALIDATION, subset=1000)


def band_images(labels, vertical, seed):
    """Dim noise, plus a bright band of 2 rows (or columns) at position 4 + 2 * label."""
    rng = np.random.default_rng(seed)
    images = rng.integers(0, 40, size=(len(labels), 28, 28)).astype(np.uint8)
    rows = 4 + 2 * np.asarray(labels)[:, None] + np.arange(2)  # (n, 2)
    index = np.arange(len(labels))[:, None]
    if vertical:
        images[index, 4:24, rows] = 230  # advanced indexing puts the columns first: (n, 2, 20)
    else:
        images[index, rows, 4:24] = 230
    return images


def write_band_dataset(folder, vertical, seed):
    folder.mkdir(parents=True)
    for prefix, count in (("train", NUM_TRAIN), ("t10k", NUM_TEST)):
        labels = (np.arange(count) % 10).astype(np.uint8)
        write_idx(folder / f"{prefix}-images-idx3-ubyte", band_images(labels, vertical, seed))
        write_idx(folder / f"{prefix}-labels-idx1-ubyte", labels)
        seed += 1


@pytest.fixture(scope="module")
def isolated_data(tmp_path_factory):
    """Data roots with and without the synthetic Fashion-MNIST; nothing else is searched."""
    root = tmp_path_factory.mktemp("uncertainty_data")
    write_band_dataset(root / "full" / "mnist", vertical=False, seed=0)
    write_band_dataset(root / "full" / "fashion-mnist", vertical=True, seed=10)
    write_band_dataset(root / "no-fashion" / "mnist", vertical=False, seed=0)
    with pytest.MonkeyPatch.context() as patch:
        patch.delenv(data.DATA_ENV_VAR, raising=False)
        patch.setenv("MXNET_HOME", str(root / "mxnet_home"))
        patch.setattr(datafolders, "DEBIAN_DATA_ROOT", root / "debian")
        yield root


def train(name, out, data_dir, epochs, **overrides):
    config = experiments.get_config(name, **dict(SMOKE, **overrides))
    experiments.run(config, epochs, str(out), data_dir=str(data_dir), mc_samples=2)
    return out


@pytest.fixture(scope="module")
def bbb_run(isolated_data):
    return train("bbb-mixture-400", isolated_data / "bbb", isolated_data / "full", 4, lr=0.01)


@pytest.fixture(scope="module")
def sgd_run(isolated_data):
    return train("sgd-400", isolated_data / "sgd", isolated_data / "full", 4)


@pytest.fixture(scope="module")
def bbb_result(bbb_run):
    return uncertainty_eval.evaluate_uncertainty(str(bbb_run), mc_samples=4, num_noise=300)


def recorded(run_dir):
    return json.loads((run_dir / "result.json").read_text())


# ---------------------------------------------------------------------------- measures
def test_coverage_thresholds_and_refusal_by_hand():
    confidence = np.array([0.9, 0.5, 0.7, 0.6, 0.8])
    np.testing.assert_array_equal(
        uncertainty_eval.coverage_thresholds(confidence, [1.0, 0.8, 0.5, 0.1]), [0.5, 0.6, 0.7, 0.9])
    # ties keep more than asked for
    np.testing.assert_array_equal(uncertainty_eval.coverage_thresholds([1, 1, 1, 0.5], [0.5]), [1])
    with pytest.raises(ValueError, match="coverages"):
        uncertainty_eval.coverage_thresholds(confidence, [0.0])
    probs = np.array([[0.9, 0.1], [0.5, 0.5], [0.3, 0.7], [0.4, 0.6], [0.2, 0.8]])
    labels = np.array([0, 1, 0, 1, 1])  # wrong: index 1 (argmax 0) and 2 (confidence 0.7)
    rows = uncertainty_eval.refusal_at_coverages(probs, labels, [1.0, 0.8, 0.4])
    assert [row["coverage"] for row in rows] == [1.0, 0.8, 0.4]
    assert [row["error"] for row in rows] == pytest.approx([2 / 5, 1 / 4, 0.0])


def test_noise_images_are_seeded_uniform_pixels_with_the_data_scaling():
    noise = uncertainty_eval.noise_images(4, seed=3)
    pixels = np.random.default_rng(3).integers(0, 256, size=(4, 28, 28), dtype=np.uint8)
    np.testing.assert_array_equal(noise, data.preprocess(pixels, "paper"))
    assert noise.shape == (4, 784) and noise.dtype == np.float32
    assert not np.array_equal(noise, uncertainty_eval.noise_images(4, seed=4))
    with pytest.raises(ValueError, match="num_noise"):
        uncertainty_eval.noise_images(0)


# ---------------------------------------------------------------------------- runs
def test_bbb_run_measures_have_the_documented_structure(bbb_run, bbb_result):
    result = bbb_result
    assert result["config"] == "bbb-mixture-400" and result["method"] == "bbb"
    assert result["mc_samples"] == 4 and result["num_bins"] == 15
    assert result["best_epoch"] == recorded(bbb_run)["best_epoch"]
    assert result["num_examples"] == {"mnist": NUM_TEST, "fashion": NUM_TEST, "noise": 300}
    assert set(result["predictors"]) == {"mean", "mc"}
    for key, summary in result["predictors"].items():
        assert 0 <= summary["ece"] <= 1 and 0 <= summary["test_error"] <= 1
        assert 0.1 <= summary["mean_confidence"] <= 1
        for scores in [summary["auroc_entropy"]] + ([summary["auroc_mutual_information"]]
                                                    if key == "mc" else []):
            assert set(scores) == {"fashion", "noise"}
            assert all(0 <= value <= 1 for value in scores.values())
        refusal = summary["refusal"]
        assert [row["target_coverage"] for row in refusal] == list(uncertainty_eval.COVERAGES)
        assert all(row["coverage"] >= row["target_coverage"] for row in refusal)
        assert refusal[0]["error"] == summary["test_error"]
    assert result["predictors"]["mean"]["auroc_mutual_information"] is None
    # the posterior-mean network is the best checkpoint's: its test error is result.json's
    assert result["predictors"]["mean"]["test_error"] == recorded(bbb_run)["test_error_mean"]
    json.dumps(result, allow_nan=False)


def test_the_trained_toy_model_is_more_uncertain_out_of_distribution(bbb_result):
    for summary in bbb_result["predictors"].values():
        assert summary["test_error"] < 0.05  # it learnt the bands
        entropy = summary["mean_entropy"]
        assert entropy["fashion"] > 2 * entropy["mnist"]
        assert summary["auroc_entropy"]["fashion"] > 0.9


def test_deterministic_run_has_only_the_softmax(sgd_run):
    result = uncertainty_eval.evaluate_uncertainty(str(sgd_run), mc_samples=3, num_noise=50)
    assert result["method"] == "sgd" and result["mc_samples"] is None
    (summary,) = result["predictors"].values()
    assert summary["label"] == "network (softmax)" and summary["auroc_mutual_information"] is None
    assert summary["test_error"] == recorded(sgd_run)["test_error_mean"]
    assert 0 <= summary["auroc_entropy"]["noise"] <= 1


def test_mc_prediction_matches_mc_predict_on_the_same_weight_samples(bbb_run):
    run = uncertainty_eval.predict_run(str(bbb_run), mc_samples=3, num_noise=20)
    inputs, labels = uncertainty_eval.load_evaluation_sets(run.config, num_noise=20,
                                                           data_dir=run.config["data_dir"])
    runner = experiments.make_runner(run.config, resolve_context(None))
    runner.load_best(str(bbb_run))
    everything = np.concatenate([inputs[name] for name in uncertainty_eval.SETS])
    expected = uncertainty.mc_predict(runner.trainer, nd.array(everything), 3)
    np.testing.assert_allclose(run.predictions["mc"]["mnist"].sample_probs,
                               expected.sample_probs[:, :NUM_TEST], rtol=1e-5, atol=1e-7)
    np.testing.assert_array_equal(run.labels, labels)


# ---------------------------------------------------------------------------- command and errors
def test_command_prints_the_table_and_writes_json_md_and_figures(bbb_run, sgd_run, tmp_path,
                                                                 capsys):
    out = tmp_path / "report"
    code = main(["uncertainty", str(bbb_run), str(sgd_run), "--output-dir", str(out),
                 "--mc-samples", "2", "--num-noise", "100", "--figures"])
    assert code == 0
    table = capsys.readouterr().out
    # rows are named by run folder, so two runs of one configuration stay apart
    assert table.count(f"| {bbb_run.name} |") == 2 and table.count(f"| {sgd_run.name} |") == 1
    saved = json.loads((out / "uncertainty.json").read_text())
    assert [run["config"] for run in saved["runs"]] == ["bbb-mixture-400", "sgd-400"]
    assert [run["name"] for run in saved["runs"]] == [bbb_run.name, sgd_run.name]
    assert saved["command"].startswith("gluon-bbb uncertainty") and saved["wall_seconds"] > 0
    assert table in (out / "uncertainty.md").read_text()
    for name in ("reliability.png", "entropy_bbb.png", "entropy_sgd.png"):
        assert (out / name).read_bytes()[:4] == b"\x89PNG"


def test_missing_fashion_mnist_is_a_clear_error(bbb_run, isolated_data, tmp_path, capsys):
    no_fashion = isolated_data / "no-fashion"
    with pytest.raises(FileNotFoundError, match="Fashion-MNIST") as error:
        uncertainty_eval.evaluate_uncertainty(str(bbb_run), data_dir=str(no_fashion))
    assert str(no_fashion / "fashion-mnist") in str(error.value)
    code = main(["uncertainty", str(bbb_run), "--data-dir", str(no_fashion),
                 "--output-dir", str(tmp_path / "out")])
    assert code == 2 and "--ood-data-dir" in capsys.readouterr().err
    assert main(["uncertainty", "--help"]) == 0 and "--figures" in capsys.readouterr().out
    assert not (tmp_path / "out" / "uncertainty.json").exists()


def test_runs_not_trained_on_mnist_or_unfinished_are_refused(tmp_path):
    fashion = tmp_path / "fashion"
    fashion.mkdir()
    (fashion / "config.json").write_text(json.dumps(
        experiments.get_config("fashion-bbb-mixture-400")))
    with pytest.raises(ValueError, match="trained on 'fashion-mnist'"):
        uncertainty_eval.evaluate_uncertainty(str(fashion))
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "config.json").write_text(json.dumps(experiments.get_config("sgd-400")))
    with pytest.raises(FileNotFoundError, match="best.params"):
        uncertainty_eval.evaluate_uncertainty(str(empty))
    with pytest.raises(FileNotFoundError, match="config.json"):
        uncertainty_eval.evaluate_uncertainty(str(tmp_path / "nowhere"))
