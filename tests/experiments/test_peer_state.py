"""A variational state moved between gluon_bbb and the PyTorch peer of bayes1's training
(gluon_bbb.experiments.peer_state, scripts/paired_continuation.py): the same network in both
gives the same posterior-mean and sampled outputs, given the same eps, to float32 rounding and
equal to a float64 NumPy forward pass; the round trip is exact; bad states are named."""
import importlib.util
import os

import mxnet as mx
import numpy as np
import pytest
from mxnet import nd

from gluon_bbb import data
from gluon_bbb.experiments import peer_state
from gluon_bbb.experiments.runners import make_bbb_trainer

import reference as ref
from synthetic import write_dataset

# PyTorch (the [peer] extra) and the two scripts, which import it, are loaded when the first test
# of this file runs, not when it is collected: importing PyTorch takes seconds in every
# pytest-xdist worker
pytestmark = pytest.mark.skipif(importlib.util.find_spec("torch") is None,
                                reason="needs PyTorch (pip install -e .[peer])")
torch = paired_script = peer_script = None


def load_script(name):
    """A script of scripts/ as a module."""
    spec = importlib.util.spec_from_file_location(
        name, os.path.join(os.path.dirname(__file__), "..", "..", "scripts", f"{name}.py"))
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    return script


@pytest.fixture(scope="module", autouse=True)
def scripts():
    """PyTorch and the two scripts, as this module's globals."""
    global torch, paired_script, peer_script
    import torch
    paired_script = load_script("paired_continuation")
    peer_script = load_script("peer_all_images")


HIDDEN = 24


def trainer_and_peer(seed=0):
    config = paired_script.gluon_config(HIDDEN, 1e-4, seed)
    return make_bbb_trainer(config, mx.cpu()), paired_script.make_peer(config, seed + 1, False)


def spread(state, seed):
    """A state whose sigmas are large enough that sampled networks differ from the mean."""
    rng = np.random.default_rng(seed)
    return {name: (array + rng.normal(0, 0.05, array.shape)).astype(np.float32)
            if "_mu_" in name else rng.uniform(-2.0, -1.0, array.shape).astype(np.float32)
            for name, array in state.items()}


def numpy_log_softmax(state, x, eps=None):
    """float64 log-softmax outputs of the 784-H-H-10 ReLU network of ``state`` (its means, or
    mu + log(1 + exp(rho)) eps)."""
    layers = []
    for k in range(len(state) // 4):
        layer = []
        for part in ("weight", "bias"):
            mu = state[f"{k}_mu_{part}"].astype(np.float64)
            if eps is not None:
                mu = mu + ref.softplus(state[f"{k}_rho_{part}"].astype(np.float64)) \
                    * eps[f"{k}_{part}"].astype(np.float64)
            layer.append(mu)
        layers.append(tuple(layer))
    logits = ref.mlp_forward(x.astype(np.float64), layers)
    shifted = logits - logits.max(axis=1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))


def gluon_log_softmax(trainer, x):
    return nd.log_softmax(trainer.forward(nd.array(x)), axis=-1).asnumpy()


def peer_log_softmax(layers, x):
    with torch.no_grad():
        return peer_script.Peer.log_softmax_outputs(layers, torch.from_numpy(x)).numpy()


@pytest.mark.parametrize("direction", ["gluon_to_peer", "peer_to_gluon"])
def test_the_same_state_gives_the_same_outputs_in_both(direction):
    trainer, peer = trainer_and_peer()
    x = np.random.default_rng(1).uniform(0, 255 / 126, (64, 784)).astype(np.float32)
    if direction == "gluon_to_peer":
        state = spread(peer_state.trainer_state(trainer), 2)
        peer_state.set_trainer_state(trainer, state)
        paired_script.set_peer_state(peer, peer_state.trainer_state(trainer))
    else:
        state = spread(paired_script.peer_state(peer), 3)
        paired_script.set_peer_state(peer, state)
        peer_state.set_trainer_state(trainer, paired_script.peer_state(peer))
    # the posterior mean
    expected = numpy_log_softmax(state, x)
    trainer.set_mean()
    gluon = gluon_log_softmax(trainer, x)
    peer_out = peer_log_softmax(peer.mean(), x)
    scale = np.abs(expected).max()
    np.testing.assert_allclose(gluon, expected, rtol=0, atol=2e-6 * scale)
    np.testing.assert_allclose(peer_out, expected, rtol=0, atol=2e-6 * scale)
    np.testing.assert_allclose(gluon, peer_out, rtol=0, atol=2e-6 * scale)
    assert (gluon.argmax(1) == peer_out.argmax(1)).all()
    # a sampled network, the same eps in both: w = mu + log(1 + exp(rho)) eps
    rng = np.random.default_rng(4)
    eps = {f"{k}_{part}": rng.standard_normal(state[f"{k}_mu_{part}"].shape).astype(np.float32)
           for k in range(3) for part in ("weight", "bias")}
    trainer.posterior.set_sample([nd.array(eps[f"{k}_{part}"]) for k in range(3)
                                  for part in ("weight", "bias")])
    gluon = gluon_log_softmax(trainer, x)
    with torch.no_grad():
        layers = [tuple(layer[f"mu_{part}"] + torch.log(1 + torch.exp(layer[f"rho_{part}"]))
                        * torch.from_numpy(eps[f"{k}_{part}"]) for part in ("weight", "bias"))
                  for k, layer in enumerate(peer.params)]
    peer_out = peer_log_softmax(layers, x)
    expected = numpy_log_softmax(state, x, eps)
    scale = np.abs(expected).max()
    assert np.abs(expected - numpy_log_softmax(state, x)).max() > 100 * 2e-6 * scale  # sampled
    np.testing.assert_allclose(gluon, expected, rtol=0, atol=2e-6 * scale)
    np.testing.assert_allclose(peer_out, expected, rtol=0, atol=2e-6 * scale)


def test_the_round_trip_is_exact_and_the_peers_files_carry_it(tmp_path):
    trainer, peer = trainer_and_peer()
    start = spread(paired_script.peer_state(peer), 5)
    paired_script.set_peer_state(peer, start)
    peer_state.set_trainer_state(trainer, paired_script.peer_state(peer))
    other, _ = trainer_and_peer(seed=7)
    peer_state.set_trainer_state(other, peer_state.trainer_state(trainer))
    paired_script.set_peer_state(peer, peer_state.trainer_state(other))
    back = paired_script.peer_state(peer)
    assert sorted(back) == sorted(start) == peer_state.state_names(3)
    assert all(np.array_equal(back[name], start[name]) for name in start)
    assert peer_state.state_fingerprint(back) == peer_state.state_fingerprint(start)
    assert peer_state.state_fingerprint(spread(start, 6)) != peer_state.state_fingerprint(start)
    # a state file is the peer's checkpoint, both ways
    path = str(tmp_path / "state.npz")
    peer_state.write_state(path, peer_state.trainer_state(trainer), epoch=300)
    fresh = paired_script.make_peer(paired_script.gluon_config(HIDDEN, 1e-4, 0), 9, False)
    assert peer_script.load_checkpoint(path, fresh) == 300
    loaded = paired_script.peer_state(fresh)
    assert all(np.array_equal(a, start[name]) for name, a in loaded.items())
    peer_script.save_checkpoint(str(tmp_path / "peer.npz"), fresh, 12)
    state, epoch = peer_state.read_state(str(tmp_path / "peer.npz"), [784, HIDDEN, HIDDEN, 10])
    assert epoch == 12 and all(np.array_equal(state[n], start[n]) for n in start)
    # the stacked peer's flat rows (weight then bias, layer by layer)
    order = [f"{k}_{{}}_{part}" for k in range(3) for part in ("weight", "bias")]
    rows = {kind: np.concatenate([start[name.format(kind)].ravel() for name in order])
            for kind in ("mu", "rho")}
    np.savez(tmp_path / "stacked.npz", epoch=np.array(4), **rows)
    state, epoch = peer_state.read_state(str(tmp_path / "stacked.npz"), [784, HIDDEN, HIDDEN, 10])
    assert epoch == 4 and all(np.array_equal(state[n], start[n]) for n in start)


def test_bad_states_are_named_and_change_nothing(tmp_path):
    trainer, peer = trainer_and_peer()
    good = peer_state.trainer_state(trainer)
    before = peer_state.state_fingerprint(good)
    peer_before = peer_state.state_fingerprint(paired_script.peer_state(peer))
    wide = make_bbb_trainer(paired_script.gluon_config(HIDDEN + 1, 1e-4, 0), mx.cpu())
    bad_cases = {
        "another width": peer_state.trainer_state(wide),
        "a missing tensor": {k: v for k, v in good.items() if k != "1_rho_bias"},
        "float64": dict(good, **{"0_mu_bias": good["0_mu_bias"].astype(np.float64)}),
        "not finite": dict(good, **{"2_rho_weight": np.full_like(good["2_rho_weight"], np.nan)}),
        "a transposed weight": dict(good, **{"0_mu_weight": good["0_mu_weight"].T.copy(),
                                             "0_rho_weight": good["0_rho_weight"].T.copy()}),
    }
    for case, state in bad_cases.items():
        with pytest.raises(ValueError):
            peer_state.set_trainer_state(trainer, state)
        with pytest.raises(ValueError):
            paired_script.set_peer_state(peer, state)
        assert peer_state.state_fingerprint(peer_state.trainer_state(trainer)) == before, case
        assert peer_state.state_fingerprint(paired_script.peer_state(peer)) == peer_before, case
    path = tmp_path / "state.npz"
    path.write_bytes(b"not a state")
    with pytest.raises(ValueError, match="state.npz"):
        peer_state.read_state(str(path))
    np.savez(path, epoch=np.array(1), mu=np.zeros(5, np.float32), rho=np.zeros(5, np.float32))
    with pytest.raises(ValueError, match="state.npz"):
        peer_state.read_state(str(path), [784, HIDDEN, HIDDEN, 10])
    with pytest.raises(ValueError, match="widths"):
        peer_state.read_state(str(path))


def test_both_read_the_same_pixels(tmp_path, monkeypatch):
    """The peer's own loader (training pixels / 126) and gluon_bbb's ``preprocessing="paper"``
    give the same float32 arrays; the test images raw in both."""
    write_dataset(tmp_path / "mnist", n_train=40, n_test=20)
    monkeypatch.setenv(data.DATA_ENV_VAR, str(tmp_path))
    images, labels, test, test_labels = peer_script.load_mnist()
    ours, our_labels = data.load_dataset("mnist", "train", str(tmp_path), "paper")
    np.testing.assert_array_equal(images.numpy(), ours)
    np.testing.assert_array_equal(labels.numpy(), our_labels)
    loaded = paired_script.load_images(str(tmp_path))
    np.testing.assert_array_equal(loaded[0].numpy(), ours)
    for scale in ("x126", "raw"):
        np.testing.assert_array_equal(loaded[2][scale].numpy(), test[scale].numpy())
    np.testing.assert_array_equal(loaded[3].numpy(), test_labels.numpy())
    assert float(test["raw"].max()) > 200 and float(ours.max()) <= 255 / 126


@pytest.mark.parametrize("hidden", [400, 1200])
def test_the_protocols_widths_move_exactly(hidden):
    """bayes1's 784-400-400-10 and 784-1200-1200-10: the peer's initialisation into gluon_bbb
    and back is exact, and the two posterior means agree to float32 rounding."""
    config = paired_script.gluon_config(hidden, 1e-4, 0)
    trainer = make_bbb_trainer(config, mx.cpu())
    peer = paired_script.make_peer(config, 1, False)
    state = paired_script.peer_state(peer)
    assert peer_state.state_widths(state) == [784, hidden, hidden, 10]
    peer_state.set_trainer_state(trainer, state)
    back = peer_state.trainer_state(trainer)
    assert all(np.array_equal(back[name], state[name]) for name in state)
    x = np.random.default_rng(2).uniform(0, 255 / 126, (16, 784)).astype(np.float32)
    trainer.set_mean()
    gluon, theirs = gluon_log_softmax(trainer, x), peer_log_softmax(peer.mean(), x)
    np.testing.assert_allclose(gluon, theirs, rtol=0, atol=2e-6 * np.abs(theirs).max())
