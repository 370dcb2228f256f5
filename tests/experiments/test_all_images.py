"""Training on every training image with the test set scored after each epoch under each test
convention (gluon_bbb.experiments.all_images): the conventions against a float64 NumPy
computation on the same sampled networks, the epochs the Monte Carlo errors are measured at,
bit-exact resuming, and damaged records."""
import json

import mxnet as mx
import numpy as np
import pytest
from mxnet import nd

from gluon_bbb import experiments
from gluon_bbb.experiments import all_images
from gluon_bbb.experiments.runners import make_bbb_trainer

import reference as ref
from synthetic import needs_mnist

SMOKE = dict(hidden=[8], subset=256, num_validation=0)


def smoke_config(**overrides):
    return experiments.get_config("bbb-mixture-400-paper", **dict(SMOKE, **overrides))


def test_mc_epochs_are_every_kth_and_the_last_ones():
    assert all_images.mc_epochs(30, 10, 3) == {10, 20, 28, 29, 30}
    assert all_images.mc_epochs(5, 0, 0) == set()
    assert all_images.mc_epochs(4, 0, 10) == {1, 2, 3, 4}


def numpy_errors(weights, images, labels):
    """Errors (mean of softmax, mean of log-softmax) of the average over sampled networks."""
    probs, logprobs = 0.0, 0.0
    for ws in weights:
        logits = ref.mlp_forward(images, list(zip(ws[0::2], ws[1::2])))
        shifted = logits - logits.max(axis=1, keepdims=True)
        log_softmax = shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))
        probs, logprobs = probs + np.exp(log_softmax), logprobs + log_softmax
    return [float(np.mean(np.argmax(total, axis=1) != labels)) for total in (probs, logprobs)]


def test_conventions_match_numpy_on_the_same_sampled_networks():
    rng = np.random.default_rng(0)
    config = smoke_config(hidden=[16])
    trainer = make_bbb_trainer(config, mx.cpu())
    # small pixels, so that neither scale saturates the softmax: saturated probabilities of
    # exactly 0 and 1 make ties of the averages that float32 and float64 break differently
    scaled = rng.uniform(0, 0.02, size=(300, 784)).astype(np.float32)
    raw = (scaled * np.float32(126)).astype(np.float32)
    labels = rng.integers(0, 10, size=300)
    batches = {"x126": [nd.array(scaled[:200]), nd.array(scaled[200:])],
               "raw": [nd.array(raw[:200]), nd.array(raw[200:])]}
    label_batches = [nd.array(labels[:200]), nd.array(labels[200:])]
    trainer.prepare(batches["x126"][0])
    # spread the posterior so that the sampled networks disagree
    for rho in trainer.posterior.rhos:
        rho.set_data(nd.full(rho.shape, -1.0))
    trainer.reseed(5)
    samples = []
    for _ in range(7):
        trainer.draw_network()
        samples.append([t.data().asnumpy().astype(np.float64) for t in trainer.posterior.targets])
    trainer.set_mean()
    means = [m.data().asnumpy().astype(np.float64) for m in trainer.posterior.mus]
    trainer.reseed(5)
    got = all_images.convention_errors(trainer, batches, label_batches, 7)
    for scale, images in (("x126", scaled.astype(np.float64)), ("raw", raw.astype(np.float64))):
        prob, logprob = numpy_errors(samples, images, labels)
        assert got[f"mc_prob_{scale}"] == pytest.approx(prob, abs=1e-12)
        assert got[f"mc_logprob_{scale}"] == pytest.approx(logprob, abs=1e-12)
        assert got[f"mean_{scale}"] == pytest.approx(numpy_errors([means], images, labels)[0],
                                                     abs=1e-12)
    assert set(got) == {f"mean_{s}" for s in all_images.PIXEL_SCALES} | {
        f"mc_{a}_{s}" for a in all_images.AVERAGES for s in all_images.PIXEL_SCALES}
    assert all_images.convention_errors(trainer, batches, label_batches, 0).keys() == {
        "mean_x126", "mean_raw"}


def test_the_two_averages_are_told_apart(monkeypatch):
    """Two sampled networks whose arithmetic and geometric means of the class probabilities pick
    different classes: (0.9, 0.1, 1e-9) and (0.01, 0.5, 0.49) average to class 0 as
    probabilities and to class 1 as log-probabilities."""
    logits = [nd.log(nd.array([[0.9, 0.1, 1e-9]])), nd.log(nd.array([[0.01, 0.5, 0.49]]))]

    def two_networks(trainer, batches, num_samples):
        assert num_samples == 2
        for output in logits:
            yield [output for _ in batches]

    class MeanNetwork:
        def set_mean(self):
            pass

        def forward(self, x):
            return logits[0]

    monkeypatch.setattr(all_images, "sample_outputs", two_networks)
    batches = {"x126": [nd.zeros((1, 3))], "raw": [nd.zeros((1, 3))]}
    got = all_images.convention_errors(MeanNetwork(), batches, [nd.array([1])], 2)
    assert got["mc_prob_x126"] == got["mc_prob_raw"] == 1.0  # predicts 0, the label is 1
    assert got["mc_logprob_x126"] == got["mc_logprob_raw"] == 0.0
    assert got["mean_x126"] == 1.0


@needs_mnist
@pytest.mark.real_data
def test_a_resumed_run_equals_an_uninterrupted_one(tmp_path):
    config = smoke_config()
    options = dict(mc_samples=3, mc_every=2, last_mc=1)
    whole = all_images.run_all_images(config, 3, str(tmp_path / "whole"), **options)
    assert [entry["epoch"] for entry in whole] == [1, 2, 3]
    assert [entry["mc_samples"] for entry in whole] == [0, 3, 3]
    assert "mc_logprob_raw" in whole[1] and "mc_prob_x126" not in whole[0]
    part = tmp_path / "part"
    all_images.run_all_images(config, 2, str(part), **options)
    # a stop between the checkpoint and the record: the record misses the last epoch
    record_path = part / all_images.RECORD
    stored = json.loads(record_path.read_text())
    stored["epochs"] = stored["epochs"][:1]
    record_path.write_text(json.dumps(stored))
    resumed = all_images.run_all_images(config, 3, str(part), **options)

    def without_time(record):
        return [{k: v for k, v in entry.items() if k != "seconds"} for entry in record]

    assert without_time(resumed) == without_time(whole)
    trainers = []
    for folder in ("whole", "part"):
        trainer = make_bbb_trainer(config, mx.cpu())
        trainer.load(str(tmp_path / folder / "checkpoint.bbb"))
        trainers.append([m.data().asnumpy() for m in trainer.posterior.mus])
    for a, b in zip(*trainers):
        np.testing.assert_array_equal(a, b)
    sessions = json.loads((part / "sessions.json").read_text())
    assert [s["epochs_after"] for s in sessions] == [2, 3]


@needs_mnist
@pytest.mark.real_data
def test_a_damaged_record_is_named(tmp_path):
    config = smoke_config()
    all_images.run_all_images(config, 1, str(tmp_path), mc_samples=2, mc_every=0, last_mc=0)
    (tmp_path / all_images.RECORD).write_text('{"config": "x", "epochs": [{"epoch": 5}]}')
    with pytest.raises(ValueError, match=all_images.RECORD):
        all_images.run_all_images(config, 2, str(tmp_path), mc_samples=2, mc_every=0, last_mc=0)


@needs_mnist
@pytest.mark.real_data
def test_training_errors_of_a_checkpoint_match_numpy(tmp_path):
    """bayes1's training accuracy, measured on a run folder's network: the posterior mean on
    both pixel scales against a float64 NumPy forward pass of the checkpoint's mu, the Monte
    Carlo errors drawn from their own seeded stream (the same twice)."""
    from gluon_bbb import data
    config = smoke_config()
    all_images.run_all_images(config, 1, str(tmp_path), mc_samples=0, mc_every=0, last_mc=0)
    got = all_images.training_errors(str(tmp_path), num_samples=3)
    assert got["epoch"] == 1 and got["num_examples"] == SMOKE["subset"]
    trainer = make_bbb_trainer(config, mx.cpu())
    trainer.load(str(tmp_path / "checkpoint.bbb"))
    mus = [m.data().asnumpy().astype(np.float64) for m in trainer.posterior.mus]
    scaled, labels = data.load_dataset("mnist", "train", preprocessing="paper")
    raw, _ = data.load_raw("mnist", "train")
    n = SMOKE["subset"]
    for scale, images in (("x126", scaled[:n]), ("raw", raw[:n].reshape(n, -1))):
        expected = numpy_errors([mus], images.astype(np.float64), labels[:n])[0]
        assert got[f"mean_{scale}"] == pytest.approx(expected, abs=1e-12)
    assert got == all_images.training_errors(str(tmp_path), num_samples=3)
    first = all_images.training_errors(str(tmp_path), num_samples=0, num_examples=100)
    expected = numpy_errors([mus], scaled[:100].astype(np.float64), labels[:100])[0]
    assert first["num_examples"] == 100 and first["mean_x126"] == pytest.approx(expected, abs=1e-12)
    assert {f"mc_{a}_{s}" for a in all_images.AVERAGES for s in all_images.PIXEL_SCALES} < set(got)
    load_script("all_images_training_errors").main([str(tmp_path), "--mc-samples", "2",
                                                    "--num-examples", "50"])
    written = json.loads((tmp_path / "training-errors-1-50-mc2.json").read_text())
    assert written["num_examples"] == 50 and written["mc_samples"] == 2
    assert written["mean_x126"] == all_images.training_errors(str(tmp_path), 0, 50)["mean_x126"]
    with pytest.raises(ValueError, match="every training image"):
        (tmp_path / "config.json").write_text(json.dumps(dict(
            json.loads((tmp_path / "config.json").read_text()), num_validation=100)))
        all_images.training_errors(str(tmp_path))


def test_the_validation_protocol_and_this_one_refuse_each_others_configurations(tmp_path):
    with pytest.raises(ValueError, match="num_validation=0"):
        experiments.run(smoke_config(), 1, str(tmp_path / "a"))
    with pytest.raises(ValueError, match="num_validation=0"):
        all_images.run_all_images(smoke_config(num_validation=100), 1, str(tmp_path / "b"))


def load_script(name):
    import importlib.util
    import os
    spec = importlib.util.spec_from_file_location(
        name, os.path.join(os.path.dirname(__file__), "..", "..", "scripts", f"{name}.py"))
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    return script


def test_a_pickled_curve_is_read_without_unpickling_and_anything_else_refused(tmp_path):
    import pickle
    decoder = load_script("decode_pickled_curve")
    curve = [np.float64(92.93), np.float64(98.5), np.float64(98.67)]
    path = tmp_path / "curve.pkl"
    path.write_bytes(pickle.dumps(curve, protocol=3))
    assert decoder.main([str(path), "--source", "test", "--output", str(tmp_path / "c.json")]) == 0
    assert json.loads((tmp_path / "c.json").read_text())["values"] == [92.93, 98.5, 98.67]

    class Payload:  # what a hostile file would carry: a call of os.system
        def __reduce__(self):
            import os
            return os.system, ("echo executed > " + str(tmp_path / "executed"),)

    path.write_bytes(pickle.dumps([Payload()], protocol=3))
    assert decoder.main([str(path), "--source", "x", "--output", str(tmp_path / "d.json")]) == 2
    assert not (tmp_path / "executed").exists() and not (tmp_path / "d.json").exists()
    path.write_bytes(pickle.dumps([np.float32(1.5)], protocol=3))
    assert decoder.main([str(path), "--source", "x", "--output", str(tmp_path / "e.json")]) == 2


def test_the_report_summarises_as_each_run_reports():
    """The mean of the last ten epochs (bayes1's rule), the last epoch and the lowest, for
    bayes1's curve and for every convention measured on each of the last ten epochs."""
    report = load_script("all_images_report")
    jinkehe = [3.0 - 0.1 * e for e in range(20)]  # 3.0, 2.9, ..., 1.1
    ours = [dict(epoch=e + 1, mean_x126=0.02 + 0.001 * ((e * 7) % 5), mean_raw=0.03,
                 mc_samples=100 if e >= 10 else 0,
                 **({"mc_logprob_raw": 0.01 * (e % 3 + 1)} if e >= 10 else {}))
            for e in range(12)]
    lines = report.summary(jinkehe, ours).splitlines()
    assert lines[0].startswith("| test error after epoch 12 | mean of epochs 3-12 | epoch 12 |")
    bayes1 = [3.0 - 0.1 * e for e in range(2, 12)]
    assert lines[2] == (f"| JINKEHE bayes1: MC 100, log-probabilities, raw pixels | "
                        f"{sum(bayes1) / 10:.2f} | 1.90 | 1.90 (12) |")
    mean_x126 = [100 * entry["mean_x126"] for entry in ours[2:]]
    assert lines[3] == (f"| gluon_bbb: posterior mean, pixels / 126 | {sum(mean_x126) / 10:.2f} | "
                        f"{mean_x126[-1]:.2f} | 2.00 (1) |")
    # the Monte Carlo column was measured on two of the last ten epochs only: no row
    assert not any("log-probabilities, raw pixels (bayes1" in line for line in lines)
    assert report.moving_mean([1, 2, 3, 4], width=3) == [1.5, 2, 3, 3.5]  # centred, shorter at the ends
    gap_lines = report.gaps(jinkehe, ours, phase=10).splitlines()
    first = [100 * e["mean_x126"] - jinkehe[e["epoch"] - 1] for e in ours[:10]]
    assert gap_lines[2] == f"| 1-10 |  | {sum(first) / 10:+.2f} |"  # no Monte Carlo epoch
    mc = [100 * e["mc_logprob_raw"] - jinkehe[e["epoch"] - 1] for e in ours[10:]]
    assert gap_lines[3].startswith(f"| 11-12 | {sum(mc) / 2:+.2f} (2) |")


def write_record(folder, values, mc=None):
    """A run folder whose record has test errors ``values`` (mean_x126) and, on the epochs
    ``mc`` maps, a Monte Carlo error under bayes1's convention."""
    folder.mkdir()
    epochs = [dict(epoch=e + 1, mean_x126=v, mean_raw=v, mc_samples=100 if e + 1 in (mc or {}) else 0,
                   **({"mc_logprob_raw": mc[e + 1]} if e + 1 in (mc or {}) else {}))
              for e, v in enumerate(values)]
    (folder / all_images.RECORD).write_text(json.dumps({"config": "x", "epochs": epochs}))
    return str(folder)


def test_the_comparison_of_groups_reports_each_run_and_each_group(tmp_path, capsys):
    compare = load_script("all_images_compare")
    a0 = write_record(tmp_path / "a0", [0.03] * 10 + [0.02] * 10, mc={e: 0.015 for e in range(11, 21)})
    a1 = write_record(tmp_path / "a1", [0.03] * 10 + [0.01] * 10, mc={e: 0.017 for e in range(11, 21)})
    b0 = write_record(tmp_path / "b0", [0.04] * 15)  # not yet at the others' last epoch
    groups = {"A": {a0: all_images.read_record(a0), a1: all_images.read_record(a1)},
              "B": {b0: all_images.read_record(b0)}}
    rows = compare.run_table(groups).splitlines()
    assert rows[2] == "| A | a0 | 20 | 1.50 | 2.00 |"
    assert rows[3] == "| A | a1 | 20 | 1.70 | 1.00 |"
    sd_mc, sd_mean = np.std([1.5, 1.7], ddof=1), np.std([2.0, 1.0], ddof=1)
    assert rows[4] == (f"| A | mean ± sd (runs at epoch 20) | | 1.60 ± {sd_mc:.2f} (2) | "
                       f"1.50 ± {sd_mean:.2f} (2) |")
    assert rows[5] == "| B | b0 | 15 |  | 4.00 |"  # no Monte Carlo error measured
    assert rows[6] == "| B | mean ± sd (runs at epoch 20) | |  |  |"  # b0 is still under way
    phases = compare.phase_table(groups, phase=10).splitlines()
    assert phases[2] == "| 1-10 | 3.00 (3.00-3.00, 2 runs) | 4.00 (4.00-4.00, 1 run) |"
    assert phases[3] == "| 11-20 | 1.50 (1.00-2.00, 2 runs) |  |"  # b0 stopped at 15
    # a reference curve (bayes1's, in %) gets a column of its own means, where it is long enough
    with_reference = compare.phase_table(groups, phase=10, reference=("R", [2.0] * 10 + [1.0] * 5))
    assert with_reference.splitlines()[0].startswith("| epochs | R | A: mean")
    assert with_reference.splitlines()[2].startswith("| 1-10 | 2.00 | 3.00 (")
    assert with_reference.splitlines()[3].startswith("| 11-20 |  | 1.50 (")
    # where each run stands over a window, and how far it fell from there to its last ten
    window = compare.window_table(groups, 11, 14, reference=("R", [float(e) for e in range(1, 21)]),
                                  last=5).splitlines()
    assert window[0] == "| run | epochs 11-14 | epochs 16-20 | change |"
    assert window[2] == "| A: a0 | 2.00 | 2.00 | +0.00 |"
    assert window[3] == "| A: a1 | 1.00 | 1.00 | +0.00 |"
    assert window[4] == f"| A: mean ± sd (range) | 1.50 ± {sd_mean:.2f} (1.00-2.00, 2 runs) |  | +0.00 (2 runs) |"
    assert window[5] == "| B: b0 | 4.00 |  |  |"  # covers the window, not yet at epoch 20
    assert window[7] == "| R | 12.50 | 18.00 | +5.50 |"  # epochs 11-14 and 16-20 of the curve
    falling = write_record(tmp_path / "falling", [0.03] * 14 + [0.02] * 6)
    row = compare.window_table({"C": {falling: all_images.read_record(falling)}}, 11, 14,
                               last=5).splitlines()[2]
    assert row == "| C: falling | 3.00 | 2.00 | -1.00 |"
    short = compare.window_table({"B": {b0: groups["B"][b0]}}, 14, 18).splitlines()
    assert short[0] == "| run | epochs 14-18 | epochs 6-15 | change |"
    assert short[2] == "| B: b0 |  | 4.00 |  |"  # stopped inside the window: no mean there
    assert len(short) == 3  # and no group row without a run that covers the window
    assert compare.main(["--group", "A", a0, a1, "--window", "11", "14"]) == 0
    assert "| A: a0 | 2.00 |" in capsys.readouterr().out
    curve = tmp_path / "curve.json"
    curve.write_text('{"values": [98.0, 98.5]}')
    assert compare.read_bayes1(str(curve)) == [2.0, 1.5]
    for bad in ('{"values": [98.0, 120.0]}', '{"values": "98"}', "[1, 2]", "{not json"):
        curve.write_text(bad)
        with pytest.raises(ValueError, match="curve.json"):
            compare.read_bayes1(str(curve))
    assert len(compare.read_bayes1()) == 600  # the committed decoded curve
    assert compare.main(["--group", "A", a0, a1, "--group", "B", b0]) == 0
    assert "| A | a0 | 20 |" in capsys.readouterr().out
    (tmp_path / "a1" / all_images.RECORD).write_text('{"epochs": [{"epoch": 2}]}')
    assert compare.main(["--group", "A", a0, a1]) == 2
    assert "a1" in capsys.readouterr().err


@needs_mnist
@pytest.mark.real_data
def test_the_pytorch_peer_resumes_bit_for_bit_and_names_a_bad_checkpoint(tmp_path):
    """scripts/peer_all_images.py (runs where PyTorch is installed): two epochs in one go equal
    one epoch, a stop, and a resumed second; a damaged checkpoint is one ValueError naming it."""
    pytest.importorskip("torch")
    peer = load_script("peer_all_images")
    common = ["--hidden", "16", "--subset", "512", "--mc-samples", "3", "--mc-every", "1",
              "--threads", "1", "--eager"]
    whole, parts = tmp_path / "whole", tmp_path / "parts"
    peer.main(common + ["--epochs", "2", "--output-dir", str(whole)])
    peer.main(common + ["--epochs", "1", "--output-dir", str(parts)])
    peer.main(common + ["--epochs", "2", "--output-dir", str(parts)])
    strip = lambda record: [{k: v for k, v in e.items() if k != "seconds"} for e in record]  # noqa: E731
    assert strip(all_images.read_record(str(whole))) == strip(all_images.read_record(str(parts)))
    with np.load(whole / "checkpoint.npz") as a, np.load(parts / "checkpoint.npz") as b:
        assert a.files == b.files and all(np.array_equal(a[k], b[k]) for k in a.files)
    (parts / "checkpoint.npz").write_bytes(b"not a checkpoint")
    with pytest.raises(ValueError, match="checkpoint.npz"):
        peer.main(common + ["--epochs", "3", "--output-dir", str(parts)])
    (parts / "config.json").write_text("{not json")
    with pytest.raises(ValueError, match="config.json"):
        peer.main(common + ["--epochs", "3", "--output-dir", str(parts)])


@pytest.mark.parametrize("compiled", [False, True], ids=["eager", "compiled"])
def test_the_pytorch_peers_complexity_gradient_matches_a_float64_reference(compiled):
    """The peer's per-tensor term log q(w) - log P(w) (bayes1's mixture, with its float32
    underflow branch) differentiated by PyTorch, eager and compiled, against the float64
    closed form: d/dmu = -dlogP/dw (log q's terms cancel), d/drho = (-dlogP/dw eps - 1/sigma)
    sigmoid(rho), on the paper's initial spread of weights."""
    torch = pytest.importorskip("torch")
    peer = load_script("peer_all_images")
    generator = torch.Generator().manual_seed(0)
    mu = (torch.rand((60, 40), generator=generator) * 0.06 - 0.03).requires_grad_()
    rho = (torch.rand((60, 40), generator=generator) * 0.5 - 3.5).requires_grad_()
    eps = torch.randn((60, 40), generator=generator)
    prior = (0.75, 1.0, float(np.exp(-8)))
    cost_of = torch.compile(peer.sample_with_complexity, dynamic=False) if compiled \
        else peer.sample_with_complexity
    w, term = cost_of(mu, rho, eps, *prior)
    term.backward()
    m, r, e = (t.detach().double().numpy() for t in (mu, rho, eps))
    sigma = ref.softplus(r)
    w64 = m + sigma * e
    np.testing.assert_allclose(w.detach().numpy(), w64, rtol=0, atol=1e-6)
    expected_term = (ref.log_normal(w64 - m, sigma)
                     - ref.log_scale_mixture_prior(w64, *prior)).sum()
    assert abs(term.item() - expected_term) < 1e-5 * abs(expected_term)
    dlogp = ref.mixture_log_prior_gradient(w64, *prior)
    expected = {"mu": -dlogp, "rho": (-dlogp * e - 1 / sigma) / (1 + np.exp(-r))}
    for name, param in (("mu", mu), ("rho", rho)):
        scale = np.abs(expected[name]).max()
        np.testing.assert_allclose(param.grad.double().numpy(), expected[name], rtol=0,
                                   atol=2e-4 * scale, err_msg=name)


@pytest.mark.parametrize("compiled", [False, True], ids=["eager", "compiled"])
def test_the_stacked_peers_step_is_each_seeds_own_step(compiled):
    """scripts/peer_all_images_stacked.py: each row of the stack starts where
    peer_all_images.py's network of that seed starts, and one step of the stack, with given
    minibatches and noise, eager or compiled whole, moves each row as peer_all_images.py's cost
    (its own ``sample_with_complexity``, log-softmax outputs and 1/468.75) moves that seed's
    network."""
    torch = pytest.importorskip("torch")
    stacked = load_script("peer_all_images_stacked")
    peer = load_script("peer_all_images")
    seeds, hidden, prior, lr = [3, 5], 16, (0.75, 1.0, float(np.exp(-8))), 0.01
    stack = stacked.StackedPeers(hidden, *prior, seeds, compiled=compiled)
    generator = torch.Generator().manual_seed(0)
    x = torch.rand((2, 20, 784), generator=generator)
    y = torch.randint(0, 10, (2, 20), generator=generator)
    eps = torch.randn((2, stack.size), generator=generator)
    before = [(stack.mu[k].detach().clone(), stack.rho[k].detach().clone()) for k in range(2)]
    wrong = stack.step(x, y, eps, lr)
    for k, seed in enumerate(seeds):
        single = peer.Peer(hidden, *prior, seed, compiled=False)
        flat = {kind: torch.cat([layer[f"{kind}_{name}"].detach().reshape(-1)
                                 for layer in single.params for name in ("weight", "bias")])
                for kind in ("mu", "rho")}
        assert torch.equal(flat["mu"], before[k][0]) and torch.equal(flat["rho"], before[k][1])
        layers, complexity, offset = [], 0.0, 0
        for layer in single.params:
            drawn = []
            for name in ("weight", "bias"):
                mu, rho = layer["mu_" + name], layer["rho_" + name]
                noise = eps[k, offset:offset + mu.numel()].reshape(mu.shape)
                offset += mu.numel()
                w, term = peer.sample_with_complexity(mu, rho, noise, *prior)
                drawn.append(w)
                complexity = complexity + term
            layers.append(tuple(drawn))
        outputs = peer.Peer.log_softmax_outputs(layers, x[k])
        nll = -outputs[torch.arange(20), y[k]].sum()
        (complexity * peer.BATCH_SIZE / peer.TRAIN_IMAGES + nll).backward()
        assert int(wrong[k]) == int((outputs.argmax(dim=1) != y[k]).sum())
        for kind, row in (("mu", stack.mu[k]), ("rho", stack.rho[k])):
            moved = torch.cat([(layer[f"{kind}_{name}"] - lr * layer[f"{kind}_{name}"].grad)
                               .detach().reshape(-1)
                               for layer in single.params for name in ("weight", "bias")])
            step = (flat[kind] - moved).abs().max()
            assert step > 0
            # compiled, the mixture's exponent w^2 / (2 sigma2^2) (up to thousands) is rounded
            # in another order, and exp() multiplies that rounding by the exponent's size
            tolerance = (1e-3 if compiled else 1e-4) * float(step)
            torch.testing.assert_close(row.detach(), moved, rtol=0, atol=tolerance,
                                       msg=f"seed {seed}, {kind}")


@needs_mnist
@pytest.mark.real_data
def test_a_stacked_seed_runs_alike_alone_or_stacked_and_resumes_bit_for_bit(tmp_path):
    """A seed's run does not depend on the seeds beside it; a stack stopped after one epoch and
    resumed equals one run in one go; a damaged checkpoint is one ValueError naming it."""
    pytest.importorskip("torch")
    stacked = load_script("peer_all_images_stacked")
    common = ["--hidden", "16", "--subset", "384", "--mc-samples", "3", "--mc-every", "1",
              "--threads", "1", "--eager"]
    strip = lambda record: [{k: v for k, v in e.items() if k != "seconds"} for e in record]  # noqa: E731
    stacked.main(common + ["--seeds", "4", "7", "--epochs", "2",
                           "--output-dir", str(tmp_path / "whole-s{seed}")])
    stacked.main(common + ["--seeds", "7", "--epochs", "2",
                           "--output-dir", str(tmp_path / "alone-s{seed}")])
    stacked.main(common + ["--seeds", "4", "7", "--epochs", "1",
                           "--output-dir", str(tmp_path / "parts-s{seed}")])
    stacked.main(common + ["--seeds", "4", "7", "--epochs", "2",
                           "--output-dir", str(tmp_path / "parts-s{seed}")])
    whole = strip(all_images.read_record(str(tmp_path / "whole-s7")))
    assert len(whole) == 2 and whole[1]["mc_samples"] == 3
    assert whole == strip(all_images.read_record(str(tmp_path / "alone-s7")))
    for seed in (4, 7):
        assert strip(all_images.read_record(str(tmp_path / f"whole-s{seed}"))) == \
            strip(all_images.read_record(str(tmp_path / f"parts-s{seed}")))
        with np.load(tmp_path / f"whole-s{seed}" / "checkpoint.npz") as a, \
                np.load(tmp_path / f"parts-s{seed}" / "checkpoint.npz") as b:
            assert a.files == b.files and all(np.array_equal(a[k], b[k]) for k in a.files)
    assert strip(all_images.read_record(str(tmp_path / "whole-s4"))) != whole
    (tmp_path / "parts-s7" / "checkpoint.npz").write_bytes(b"not a checkpoint")
    with pytest.raises(ValueError, match="parts-s7.checkpoint.npz"):
        stacked.main(common + ["--seeds", "4", "7", "--epochs", "3",
                               "--output-dir", str(tmp_path / "parts-s{seed}")])
