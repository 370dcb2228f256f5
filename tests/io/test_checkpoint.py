"""The checkpoint format (gluon_bbb.io.checkpoint, .ndfile, .optimizer_state): a round trip, every
integrity check, format-1 files refused without unpickling, and resumed runs that equal
uninterrupted ones bit for bit for each optimizer the project trains with, on both sampling
paths."""
import hashlib
import io
import json
import logging
import os
import pickle
import zipfile

import mxnet as mx
import numpy as np
import pytest
from mxnet import gluon, nd

from gluon_bbb import BBBLoss, BBBTrainer, GaussianPrior
from gluon_bbb.io import ndfile, optimizer_state
from gluon_bbb.posterior import GaussianNoise
from gluon_bbb.io.checkpoint import (CheckpointError, atomic_write_bytes, new_file_mode,
                                  read_checkpoint, read_json, read_metadata, write_checkpoint,
                                  write_json)
from gluon_bbb.io.paramfile import load_parameter_file, save_parameter_file
from gluon_bbb.data import ArrayLoader, EpochShuffled
from synthetic import blobs


class _Payload:
    """Unpickling this creates the file ``marker``: proof that code from a file ran."""

    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return (open, (self.marker, "w"))


def planted_pickle(marker):
    return pickle.dumps(_Payload(marker))


def _arrays():
    rng = np.random.default_rng(0)
    return {"mu0": rng.normal(size=(3, 4)).astype(np.float32),
            "rho0": rng.normal(size=(4,)).astype(np.float64),
            "net:count": np.arange(5, dtype=np.int64)}


def _zip(path, entries):
    with zipfile.ZipFile(path, "w") as archive:
        for name, payload in entries.items():
            archive.writestr(name, payload)


def _entries(path):
    with zipfile.ZipFile(path) as archive:
        return {name: archive.read(name) for name in archive.namelist()}


def test_round_trip_keeps_values_dtypes_metadata_and_optimizer(tmp_path):
    path = tmp_path / "a.bbb"
    optimizer = ({"family": "adam", "anything": [1, 2]}, {"0/0": np.ones((2, 2), np.float32)})
    write_checkpoint(path, _arrays(), {"epoch": 3, "history": [{"loss": 1.5}]}, optimizer)
    stored = read_checkpoint(path, expected={k: v.shape for k, v in _arrays().items()},
                             with_optimizer=True)
    for name, value in _arrays().items():
        assert stored.arrays[name].dtype == value.dtype
        np.testing.assert_array_equal(stored.arrays[name], value)
    assert stored.metadata == {"epoch": 3, "history": [{"loss": 1.5}], "format": 2}
    assert stored.optimizer[0] == optimizer[0]
    np.testing.assert_array_equal(stored.optimizer[1]["0/0"], optimizer[1]["0/0"])
    assert read_checkpoint(path).optimizer is None  # not asked for: not read
    assert read_metadata(path)["epoch"] == 3
    entries = _entries(path)
    assert set(entries) == {"metadata.json", "arrays.bin", "optimizer.bin"}
    recorded = json.loads(entries["metadata.json"])["payloads"]["arrays.bin"]["sha256"]
    assert recorded == hashlib.sha256(entries["arrays.bin"]).hexdigest()


def test_readers_that_only_need_the_network_never_open_the_optimizer_entry(tmp_path, monkeypatch):
    path = tmp_path / "a.bbb"
    write_checkpoint(path, _arrays(), {"epoch": 1}, ({"family": "sgd"}, {"x": np.ones(2)}))
    opened = []
    original = zipfile.ZipFile.open

    def recording(self, name, *args, **kwargs):
        opened.append(getattr(name, "filename", name))
        return original(self, name, *args, **kwargs)

    monkeypatch.setattr(zipfile.ZipFile, "open", recording)
    read_checkpoint(path)
    assert "optimizer.bin" not in opened and "arrays.bin" in opened


def _rewrite(path, change):
    """Rewrite the zip at ``path`` with ``change(entries)`` applied to its dict of entries."""
    entries = _entries(path)
    change(entries)
    _zip(path, entries)


def _metadata_change(function):
    def change(entries):
        metadata = json.loads(entries["metadata.json"])
        function(metadata)
        entries["metadata.json"] = json.dumps(metadata)
    return change


@pytest.mark.parametrize("damage, message", [
    (lambda e: e.update({"arrays.bin": e["arrays.bin"][:-1] + b"x"}), "SHA-256"),
    (lambda e: e.update({"arrays.bin": e["arrays.bin"][:10]}), "declares 10 bytes"),
    (lambda e: e.pop("arrays.bin"), "no entry arrays.bin"),
    (lambda e: e.pop("metadata.json"), "no entry metadata.json"),
    (lambda e: e.update({"metadata.json": b"{"}), "not valid JSON"),
    (lambda e: e.update({"metadata.json": b"[1, 2]"}), "holds a JSON list"),
    (lambda e: e.update({"metadata.json": b"\xff\xfe"}), "not valid JSON"),
    (_metadata_change(lambda m: m.update(format="2")), "'format' must be int"),
    (_metadata_change(lambda m: m.update(format=7)), "format 7"),
    (_metadata_change(lambda m: m.update(payloads=[])), "'payloads' must be dict"),
    (_metadata_change(lambda m: m["payloads"]["arrays.bin"].update(arrays="mu0")), "must be list"),
    (_metadata_change(lambda m: m["payloads"]["arrays.bin"]["arrays"][0].__setitem__(1, "object")),
     "is not \\[name, dtype, shape\\]"),
    (_metadata_change(lambda m: m["payloads"]["arrays.bin"]["arrays"][0].__setitem__(2, [-1])),
     "is not \\[name, dtype, shape\\]"),
    (_metadata_change(lambda m: m["payloads"]["arrays.bin"].update(size=1)), "it declares 1"),
    (_metadata_change(lambda m: m["payloads"]["arrays.bin"].update(sha256=5)), "must be str"),
])
def test_a_damaged_file_is_one_named_error(tmp_path, damage, message):
    path = tmp_path / "a.bbb"
    write_checkpoint(path, _arrays(), {"epoch": 1})
    _rewrite(path, damage)
    with pytest.raises(CheckpointError, match=message) as caught:
        read_checkpoint(path)
    assert str(path) in str(caught.value) and "\n" not in str(caught.value)


@pytest.mark.parametrize("content", [b"", b"PK\x03\x04garbage", os.urandom(4096)])
def test_empty_random_and_truncated_files_are_refused(tmp_path, content):
    path = tmp_path / "a.bbb"
    path.write_bytes(content)
    with pytest.raises(CheckpointError, match="not a gluon_bbb checkpoint"):
        read_checkpoint(path)
    write_checkpoint(path, _arrays(), {"epoch": 1})
    whole = path.read_bytes()
    for cut in (len(whole) // 3, len(whole) - 30):
        path.write_bytes(whole[:cut])
        with pytest.raises(CheckpointError, match=str(path)):
            read_checkpoint(path)
    with pytest.raises(FileNotFoundError, match="no checkpoint"):
        read_checkpoint(tmp_path / "missing.bbb")


def test_a_zip_bomb_is_refused_without_inflating_it(tmp_path, monkeypatch):
    """An entry that inflates to 256 MiB, and a manifest that claims as much, are refused
    from their declared sizes: no byte of the entry is inflated."""
    path = tmp_path / "bomb.bbb"
    write_checkpoint(path, _arrays(), {"epoch": 1})
    entries = _entries(path)
    huge = 2**28
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("metadata.json", entries["metadata.json"])
        with archive.open("arrays.bin", "w", force_zip64=True) as handle:
            block = bytes(2**24)
            for _ in range(huge // len(block)):
                handle.write(block)
    assert path.stat().st_size < 2**21  # under 2 MB on disk
    read_entries = []
    original = zipfile.ZipExtFile.read
    monkeypatch.setattr(zipfile.ZipExtFile, "read",
                        lambda self, n=-1: read_entries.append(self.name) or original(self, n))
    with pytest.raises(CheckpointError, match="declares 268435456 bytes, not the .* refused unread"):
        read_checkpoint(path)
    assert read_entries == ["metadata.json"]  # arrays.bin was never opened for reading
    # A manifest that claims huge arrays: refused against the network, or against the cap.
    metadata = json.loads(entries["metadata.json"])
    metadata["payloads"]["arrays.bin"].update(arrays=[["mu0", "float32", [huge // 4]]], size=huge)
    _zip(path, {"metadata.json": json.dumps(metadata), "arrays.bin": b""})
    with pytest.raises(CheckpointError, match=r"mu0 has shape \(67108864,\), the network \(3, 4\)"):
        read_checkpoint(path, expected={"mu0": (3, 4)})
    from gluon_bbb.io import checkpoint
    monkeypatch.setattr(checkpoint, "MAX_PAYLOAD_BYTES", 2**20)
    with pytest.raises(CheckpointError, match="declares 268435456 bytes, more than"):
        read_checkpoint(path)


def test_arrays_that_do_not_fit_the_network_are_named(tmp_path):
    path = tmp_path / "a.bbb"
    write_checkpoint(path, _arrays(), {"epoch": 1})
    expected = {k: v.shape for k, v in _arrays().items()}
    with pytest.raises(CheckpointError, match=r"mu0 has shape \(3, 4\), the network \(4, 3\)"):
        read_checkpoint(path, expected=dict(expected, mu0=(4, 3)))
    with pytest.raises(CheckpointError, match="lacks mu1"):
        read_checkpoint(path, expected=dict(expected, mu1=(2,)))
    with pytest.raises(CheckpointError, match="unexpected rho0"):
        read_checkpoint(path, expected={"mu0": (3, 4), "net:count": (5,)})


def test_read_json_names_the_file_and_the_problem(tmp_path):
    path = tmp_path / "config.json"
    for content, message in ((b"{", "not valid JSON"), (b"[]", "holds a JSON list"),
                             (b"\x80", "not valid JSON"), (b"[" * 100000 + b"]" * 100000,
                                                          "not valid JSON")):
        path.write_bytes(content)
        with pytest.raises(CheckpointError, match=message) as caught:
            read_json(path)
        assert str(path) in str(caught.value)
    with pytest.raises(FileNotFoundError, match="missing.json"):
        read_json(tmp_path / "missing.json")


def test_atomic_write_syncs_the_folder_after_the_rename(tmp_path, monkeypatch):
    from gluon_bbb.io import checkpoint
    events = []
    real_replace = os.replace
    monkeypatch.setattr(os, "replace", lambda a, b: events.append("rename") or real_replace(a, b))
    monkeypatch.setattr(checkpoint, "_fsync_folder", lambda folder: events.append(("sync", folder)))
    atomic_write_bytes(tmp_path / "x", b"payload")
    assert events == ["rename", ("sync", str(tmp_path))]
    assert (tmp_path / "x").read_bytes() == b"payload"


# ---------------------------------------------------------------------------- ndfile
def test_ndfile_reads_and_writes_mxnets_format_bit_for_bit(tmp_path):
    arrays = {"w": nd.array(np.arange(6).reshape(2, 3)), "b": nd.array([1.5], dtype="float64"),
              "i": nd.array([3, 4], dtype="int32")}
    nd.save(str(tmp_path / "a.nd"), arrays)
    payload = (tmp_path / "a.nd").read_bytes()
    parsed = ndfile.loads(payload)
    assert set(parsed) == set(arrays)
    for name, value in arrays.items():
        assert parsed[name].dtype == value.dtype
        np.testing.assert_array_equal(parsed[name], value.asnumpy())
    assert ndfile.dumps(parsed) == payload
    nd.save(str(tmp_path / "list.nd"), [nd.ones((2, 2))])
    assert isinstance(ndfile.loads((tmp_path / "list.nd").read_bytes()), list)


@pytest.mark.parametrize("cut", [0, 8, 20, 30, 60, -3])
def test_ndfile_refuses_truncated_and_inflated_headers(tmp_path, cut):
    payload = ndfile.dumps({"w": np.ones((2, 3), np.float32)})
    with pytest.raises(ndfile.NDFileError):
        ndfile.loads(payload[:cut])
    huge = bytearray(payload)
    huge[36:44] = (2**40).to_bytes(8, "little")  # the first dimension
    with pytest.raises(ndfile.NDFileError, match="more than the file holds"):
        ndfile.loads(bytes(huge))


def _mlp(hidden=8):
    net = gluon.nn.HybridSequential()
    net.add(gluon.nn.Dense(hidden, activation="relu"), gluon.nn.Dense(3))
    return net


def test_parameter_files_load_like_load_parameters_and_refuse_other_networks(tmp_path):
    net = _mlp()
    net.initialize(mx.init.Xavier())
    net(nd.ones((1, 8)))
    path = tmp_path / "net.params"
    save_parameter_file(net, path)
    plain = _mlp()
    plain.load_parameters(str(path))  # an ordinary Gluon file
    checked = _mlp()  # uninitialised, deferred shapes: filled from the file
    load_parameter_file(checked, path)
    for a, b, c in zip(net.collect_params().values(), plain.collect_params().values(),
                       checked.collect_params().values()):
        np.testing.assert_array_equal(a.data().asnumpy(), b.data().asnumpy())
        np.testing.assert_array_equal(a.data().asnumpy(), c.data().asnumpy())
    other = _mlp(hidden=5)
    other.initialize()
    other(nd.ones((1, 8)))
    with pytest.raises(CheckpointError, match="has shape"):
        load_parameter_file(other, path)
    path.write_bytes(path.read_bytes()[:-7])
    with pytest.raises(CheckpointError, match="not a Gluon parameter file"):
        load_parameter_file(_mlp(), path)


# ---------------------------------------------------------------------------- format 1
def _format_1_file(path, trainer, optimizer_payload):
    """A checkpoint as gluon_bbb wrote it before format 2 (MXNet's NDArray file and a pickle)."""
    metadata = json.loads(_entries(path)["metadata.json"])
    stored = read_checkpoint(path)
    legacy = {key: value for key, value in metadata.items() if key != "payloads"}
    legacy.update(format=1)
    buffer = io.BytesIO()
    nd.save(str(path) + ".nd", {k: nd.array(v, dtype=v.dtype) for k, v in stored.arrays.items()})
    with open(str(path) + ".nd", "rb") as handle:
        arrays = handle.read()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("metadata.json", json.dumps(legacy))
        archive.writestr("arrays.nd", arrays)
        archive.writestr("optimizer.states", optimizer_payload)
    path.write_bytes(buffer.getvalue())


def _trainer(optimizer="adam", optimizer_params=None, fused=None, seed=3):
    mx.random.seed(seed)
    np.random.seed(seed)
    net = _mlp()
    net.initialize(mx.init.Xavier())
    net(nd.ones((1, 8)))
    return BBBTrainer(net, BBBLoss(GaussianPrior(1.0)), optimizer=optimizer,
                      optimizer_params=optimizer_params or {"learning_rate": 0.01},
                      fused=fused, seed=seed)


def _loader(trainer=None):
    """Shuffled batches; with ``trainer``, in an order fixed by (1, trainer.epoch)."""
    x, y = blobs(num_examples=192)
    loader = ArrayLoader(x, y, 32, shuffle=True, seed=1)
    return loader if trainer is None else EpochShuffled(loader, 1, lambda: trainer.epoch)


def test_format_1_files_are_refused_in_one_line_and_never_unpickled(tmp_path):
    marker = tmp_path / "marker"
    path = tmp_path / "old.bbb"
    trainer = _trainer()
    trainer.fit(_loader(), 1, checkpoint_path=str(path), progress=False)
    _format_1_file(path, trainer, planted_pickle(marker))
    for load in (lambda: _trainer().load(str(path)),
                 lambda: _trainer().load(str(path), optimizer=False),
                 lambda: read_metadata(path)):
        with pytest.raises(CheckpointError) as error:
            load()
        message = str(error.value)
        assert str(path) in message and "format 1" in message and "\n" not in message
    assert not marker.exists()


# ---------------------------------------------------------------------------- resuming
def _trainer_on(path, optimizer, params, seed=3):
    """A trainer on one sampling path: 'fused' (if it builds), 'pure-numpy' (the pure-MXNet
    path as the CPU runs it) or 'pure-device' (the pure-MXNet path with the noise drawn by
    MXNet on the context: the code a GPU runs, here on the CPU)."""
    trainer = _trainer(optimizer, params, None if path == "fused" else False, seed)
    if path == "pure-device":
        trainer.noise = GaussianNoise(trainer.posterior.shapes, trainer.ctx, generator="mxnet")
    return trainer


@pytest.mark.parametrize("path", ["fused", "pure-numpy", "pure-device"])
@pytest.mark.parametrize("optimizer, params", [
    ("adam", {"learning_rate": 0.01}),
    ("sgd", {"learning_rate": 0.05}),
    ("sgd", {"learning_rate": 0.05, "momentum": 0.9}),
], ids=["adam", "sgd", "sgd-momentum"])
def test_a_resumed_run_equals_an_uninterrupted_one_bit_for_bit(tmp_path, optimizer, params,
                                                               path):
    """2 + 2 epochs through a checkpoint give the same losses, mu, rho and optimizer state as
    4 uninterrupted epochs, for each optimizer the project trains with and on every sampling
    path (the pure-MXNet path with device noise is the code every GPU runs)."""
    checkpoint = str(tmp_path / "run.bbb")
    uninterrupted = _trainer_on(path, optimizer, params)
    uninterrupted.fit(_loader(uninterrupted), 4, progress=False)
    first = _trainer_on(path, optimizer, params)
    first.fit(_loader(first), 2, checkpoint_path=checkpoint, progress=False)
    resumed = _trainer_on(path, optimizer, params, seed=99)  # other initial weights and noise
    mx.random.seed(12345)  # and another state of MXNet's generator
    resumed.load(checkpoint)
    assert resumed.seed == 3
    resumed.fit(_loader(resumed), 4, progress=False)
    assert [r["loss"] for r in resumed.history] == [r["loss"] for r in uninterrupted.history]
    for a, b in zip(uninterrupted.variational_params, resumed.variational_params):
        np.testing.assert_array_equal(a.data().asnumpy(), b.data().asnumpy())
    state_a, arrays_a = optimizer_state.capture(uninterrupted.gluon_trainer)
    state_b, arrays_b = optimizer_state.capture(resumed.gluon_trainer)
    assert state_a == state_b and arrays_a.keys() == arrays_b.keys()
    assert bool(arrays_a) == (optimizer == "adam" or "momentum" in params)
    for name in arrays_a:
        np.testing.assert_array_equal(arrays_a[name].asnumpy(), arrays_b[name].asnumpy())


@pytest.mark.parametrize("path", ["pure-numpy", "pure-device"])
def test_seed_governs_the_noise_on_the_pure_mxnet_path(path):
    losses = []
    for seed in (3, 3, 4):
        trainer = _trainer_on(path, "adam", None, seed=seed)
        mx.random.seed(1234 + len(losses))  # whatever MXNet's generator holds, seed= decides
        trainer.fit(_loader(), 1, progress=False)
        losses.append(trainer.history[0]["loss"])
    assert losses[0] == losses[1] != losses[2]


def test_other_optimizers_start_afresh_with_a_warning(tmp_path, caplog):
    path = str(tmp_path / "run.bbb")
    trainer = _trainer("rmsprop", {"learning_rate": 0.001})
    trainer.fit(_loader(), 1, checkpoint_path=path, progress=False)
    assert "optimizer.bin" not in _entries(path)
    restored = _trainer("rmsprop", {"learning_rate": 0.001})
    with caplog.at_level(logging.WARNING):
        restored.load(path)
    assert "RMSProp is not stored in checkpoints; it starts afresh" in caplog.text
    adam = _trainer("adam")
    with caplog.at_level(logging.WARNING):
        adam.load(path)
    assert "holds no optimizer state" in caplog.text


def test_a_bad_optimizer_state_changes_nothing(tmp_path):
    path = tmp_path / "run.bbb"
    trainer = _trainer()
    trainer.fit(_loader(), 1, checkpoint_path=str(path), progress=False)

    def break_state(metadata):
        metadata["payloads"]["optimizer.bin"]["state"]["num_params"] = 99
    _rewrite(path, _metadata_change(break_state))
    fresh = _trainer(seed=7)
    before = [p.data().asnumpy() for p in fresh.variational_params]
    with pytest.raises(CheckpointError, match="is for 99 parameters"):
        fresh.load(str(path))
    assert fresh.epoch == 0 and not fresh.gluon_trainer._updaters[0].states
    for value, param in zip(before, fresh.variational_params):
        np.testing.assert_array_equal(value, param.data().asnumpy())
    fresh.load(str(path), optimizer=False)  # the network alone is fine
    assert fresh.epoch == 1


def test_the_slim_script_drops_the_optimizer_state_and_keeps_the_network(tmp_path):
    import importlib.util
    spec = importlib.util.spec_from_file_location(
        "slim_checkpoints", os.path.join(os.path.dirname(__file__), "..", "..", "scripts",
                                         "slim_checkpoints.py"))
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    path = tmp_path / "run.bbb"
    trainer = _trainer()
    trainer.fit(_loader(), 1, checkpoint_path=str(path), progress=False)
    before = path.stat().st_size
    assert "optimizer.bin" in _entries(path)
    assert script.main([str(path)]) == 0
    assert "optimizer.bin" not in _entries(path) and path.stat().st_size < before / 2
    slimmed = _trainer(seed=8)
    slimmed.load(str(path))
    for a, b in zip(trainer.variational_params, slimmed.variational_params):
        np.testing.assert_array_equal(a.data().asnumpy(), b.data().asnumpy())
    assert slimmed.history == trainer.history
    path.write_bytes(b"junk")
    assert script.main([str(path)]) == 2


@pytest.mark.parametrize("umask, mode", [(0o022, 0o644), (0o027, 0o640), (0o077, 0o600)])
def test_atomic_writes_give_the_mode_of_a_new_file_under_the_umask(tmp_path, umask, mode):
    """A run folder shared with a class: its records readable by others as the umask allows
    (a temporary file is created 0600 and would keep that mode through the rename)."""
    previous = os.umask(umask)
    try:
        assert new_file_mode() == mode
        atomic_write_bytes(tmp_path / "record.json", b"{}")
        write_json(str(tmp_path / "other.json"), {"a": 1})
    finally:
        os.umask(previous)
    for name in ("record.json", "other.json"):
        assert (tmp_path / name).stat().st_mode & 0o777 == mode, name
