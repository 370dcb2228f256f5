"""Every reader of run folders and checkpoints, given damaged and hostile files.

For each file a command reads, in a ``train`` folder, a Bayes-by-Backprop ``reproduce`` folder
and a deterministic ``reproduce`` folder, the file is replaced by: nothing, an empty file,
random bytes, its first half, a pickle payload; a checkpoint also gets a pickle payload in
each entry, wrong JSON types in its metadata, a planted pickle in an extra entry, the format-1
layout with a pickled optimizer state, and another architecture's file; a JSON file also gets
wrong types. Then every command that reads the folder runs on it (``evaluate``,
``uncertainty``, ``plot``, ``prune``, ``reproduce-report``, and resuming with ``train
--resume`` / ``reproduce``), and ``BBBTrainer.load`` reads the checkpoint.

Each must either work (where the damaged file is not needed: a planted pickle in an entry
nothing opens, a missing optional file) or exit with status 2 and one line that names the
file: never a traceback, never status 1. The pickle payloads would create a marker file; it
must never appear.
"""
import json
import os
import pickle
import shutil
import zipfile

import mxnet as mx
import numpy as np
import pytest

from gluon_bbb import BBBLoss, BBBTrainer, GaussianPrior, models
from gluon_bbb.cli import main


class _Payload:
    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return (open, (self.marker, "w"))


@pytest.fixture(autouse=True)
def no_unpickling(monkeypatch):
    """Besides the marker files: any call of pickle's loaders (MXNet's optimizer state goes
    through ``pickle.loads``) fails the test."""
    def refuse(*args, **kwargs):
        raise AssertionError("a reader called pickle to read a file")
    for name in ("loads", "load"):
        monkeypatch.setattr(pickle, name, refuse)


COMMON = ["--subset", "256", "--epochs", "1", "--no-progress"]


def _train_args(folder, data, hidden="16"):
    return ["train", "--hidden", hidden, "--data-dir", data, "--output-dir", folder] + COMMON


def _reproduce_args(config, folder, data, hidden="16"):
    return ["reproduce", config, "--hidden", hidden, "--data-dir", data, "--output-dir", folder,
            "--mc-samples", "2"] + COMMON


@pytest.fixture(scope="module")
def originals(tmp_path_factory, fake_mnist):
    """Run folders of each kind, and the same of another architecture (hidden 8)."""
    root, data = tmp_path_factory.mktemp("originals"), str(fake_mnist)
    for suffix, hidden in (("", "16"), ("-other", "8")):
        assert main(_train_args(str(root / f"train{suffix}"), data, hidden)) == 0
        assert main(_reproduce_args("bbb-mixture-400", str(root / f"bbb{suffix}"), data, hidden)) == 0
        assert main(_reproduce_args("sgd-400", str(root / f"sgd{suffix}"), data, hidden)) == 0
    assert main(["prune", str(root / "train"), "--data-dir", data, "--fractions", "0", "0.5"]) == 0
    return root


# Commands in the order they run on one damaged copy (later ones may rewrite files that
# earlier ones read). Each: name -> argv(folder, data, scratch).
READERS = {
    "train": [  # the one run-folder format: every reader of a reproduce folder reads it
        ("evaluate", lambda d, data, out: ["evaluate", d, "--data-dir", data, "--num-samples", "2"]),
        ("uncertainty", lambda d, data, out: ["uncertainty", d, "--data-dir", data,
                                              "--ood-data-dir", data, "--num-noise", "10",
                                              "--mc-samples", "2", "--output-dir", out]),
        ("plot", lambda d, data, out: ["plot", d]),
        ("prune", lambda d, data, out: ["prune", d, "--data-dir", data, "--fractions", "0", "0.5"]),
        ("reproduce-report", lambda d, data, out: ["reproduce-report", d, "--data-dir", data,
                                                   "--mc-samples", "2"]),
        ("train --resume", lambda d, data, out: _train_args(d, data) + ["--resume"]),
    ],
    "bbb": [
        ("evaluate", lambda d, data, out: ["evaluate", d, "--data-dir", data, "--num-samples", "2"]),
        ("uncertainty", lambda d, data, out: ["uncertainty", d, "--data-dir", data,
                                              "--ood-data-dir", data, "--num-noise", "10",
                                              "--mc-samples", "2", "--output-dir", out]),
        ("plot", lambda d, data, out: ["plot", d]),
        ("prune", lambda d, data, out: ["prune", d, "--data-dir", data, "--fractions", "0", "0.5"]),
        ("reproduce-report", lambda d, data, out: ["reproduce-report", d, "--data-dir", data,
                                                   "--mc-samples", "2"]),
        ("reproduce", lambda d, data, out: _reproduce_args("bbb-mixture-400", d, data)),
    ],
    "sgd": [
        ("evaluate", lambda d, data, out: ["evaluate", d, "--data-dir", data]),
        ("uncertainty", lambda d, data, out: ["uncertainty", d, "--data-dir", data,
                                              "--ood-data-dir", data, "--num-noise", "10",
                                              "--output-dir", out]),
        ("reproduce-report", lambda d, data, out: ["reproduce-report", d, "--data-dir", data]),
        ("reproduce", lambda d, data, out: _reproduce_args("sgd-400", d, data)),
    ],
}

# Which command reads which file (a damaged copy of it must stop the command).
READS = {
    ("train", "config.json"): {"evaluate", "uncertainty", "plot", "prune", "reproduce-report",
                               "train --resume"},
    ("train", "best.bbb"): {"evaluate", "uncertainty", "plot", "prune", "reproduce-report"},
    ("train", "checkpoint.bbb"): {"reproduce-report", "train --resume"},
    ("train", "result.json"): {"plot"},
    ("train", "sessions.json"): {"reproduce-report", "train --resume"},
    ("train", "pruning.json"): {"plot"},
    ("bbb", "config.json"): {"evaluate", "uncertainty", "plot", "prune", "reproduce-report",
                             "reproduce"},
    ("bbb", "best.bbb"): {"evaluate", "uncertainty", "plot", "prune", "reproduce-report"},
    ("bbb", "checkpoint.bbb"): {"reproduce-report", "reproduce"},
    ("bbb", "result.json"): {"plot"},
    ("bbb", "sessions.json"): {"reproduce-report", "reproduce"},
    ("sgd", "config.json"): {"evaluate", "uncertainty", "reproduce-report", "reproduce"},
    ("sgd", "best.params"): {"evaluate", "uncertainty", "reproduce-report"},
    ("sgd", "checkpoint.ckpt"): {"evaluate", "uncertainty", "reproduce-report", "reproduce"},
    ("sgd", "sessions.json"): {"reproduce-report", "reproduce"},
}
# Files a command does without: missing, it works (a resumed run starts afresh, say).
OPTIONAL = {
    ("train", "checkpoint.bbb"): {"train --resume"},
    ("train", "result.json"): {"plot"},
    ("train", "sessions.json"): {"reproduce-report", "train --resume"},
    ("train", "pruning.json"): {"plot"},
    ("bbb", "checkpoint.bbb"): {"reproduce"},
    ("bbb", "result.json"): {"plot"},
    ("bbb", "sessions.json"): {"reproduce-report", "reproduce"},
    ("sgd", "checkpoint.ckpt"): {"evaluate", "uncertainty", "reproduce"},
    ("sgd", "sessions.json"): {"reproduce-report", "reproduce"},
}
# Readers that use a checkpoint's optimizer state (they resume training).
RESUMING = {"train --resume", "reproduce"}
# Readers that use only a checkpoint's epoch and history (its metadata).
METADATA_ONLY = {("bbb", "checkpoint.bbb"): {"reproduce-report"},
                 ("train", "checkpoint.bbb"): {"reproduce-report"},
                 ("sgd", "checkpoint.ckpt"): {"evaluate", "uncertainty", "reproduce-report"}}
# What those readers do not use, so may find damaged.
NOT_HISTORY = {"arrays-pickle", "optimizer-pickle", "prior-list", "seed-text", "noise-state-text",
               "other-architecture"}


def _zip_entries(path):
    with zipfile.ZipFile(path) as archive:
        return {name: archive.read(name) for name in archive.namelist()}


def _write_zip(path, entries):
    with zipfile.ZipFile(path, "w") as archive:
        for name, payload in entries.items():
            archive.writestr(name, payload)


def _with_entry(name, payload_of):
    def mutate(path, marker, other):
        entries = _zip_entries(path)
        entries[name] = payload_of(entries, marker)
        _write_zip(path, entries)
    return mutate


def _with_metadata(**changes):
    def payload(entries, marker):
        metadata = json.loads(entries["metadata.json"])
        metadata.update(changes)
        return json.dumps(metadata)
    return _with_entry("metadata.json", payload)


def _format_1(path, marker, other):
    """The layout of format 1: MXNet's NDArray file and a pickled optimizer state (here a
    payload), which nothing may unpickle."""
    entries = _zip_entries(path)
    metadata = json.loads(entries["metadata.json"])
    payload = entries["arrays.bin"]
    arrays = {}
    for name, dtype, shape in metadata["payloads"]["arrays.bin"]["arrays"]:
        size = int(np.prod(shape)) * np.dtype(dtype).itemsize
        arrays[name] = mx.nd.array(np.frombuffer(payload[:size], dtype=dtype).reshape(shape),
                                   dtype=dtype)
        payload = payload[size:]
    mx.nd.save(str(path) + ".nd", arrays)
    with open(str(path) + ".nd", "rb") as handle:
        legacy_arrays = handle.read()
    os.remove(str(path) + ".nd")
    del metadata["payloads"]
    metadata["format"] = 1
    _write_zip(path, {"metadata.json": json.dumps(metadata), "arrays.nd": legacy_arrays,
                      "optimizer.states": pickle.dumps(_Payload(marker))})


def _pickled(path, marker, other):
    path.write_bytes(pickle.dumps(_Payload(marker)))


def _replace_json(value):
    def mutate(path, marker, other):
        path.write_text(json.dumps(value))
    return mutate


def _json_field(key, value):
    def mutate(path, marker, other):
        content = json.loads(path.read_text())
        content[key] = value
        path.write_text(json.dumps(content))
    return mutate


FILE_MUTATIONS = {
    "missing": lambda path, marker, other: path.unlink(),
    "empty": lambda path, marker, other: path.write_bytes(b""),
    "random": lambda path, marker, other: path.write_bytes(
        np.random.default_rng(0).integers(0, 256, 4096, dtype=np.uint8).tobytes()),
    "truncated": lambda path, marker, other: path.write_bytes(
        path.read_bytes()[:len(path.read_bytes()) // 2]),
    "pickle": _pickled,
}
ZIP_MUTATIONS = {
    "metadata-pickle": _with_entry("metadata.json", lambda e, m: pickle.dumps(_Payload(m))),
    "arrays-pickle": _with_entry("arrays.bin", lambda e, m: pickle.dumps(_Payload(m))),
    "optimizer-pickle": _with_entry("optimizer.bin", lambda e, m: pickle.dumps(_Payload(m))),
    "planted-optimizer-states": _with_entry("optimizer.states",
                                            lambda e, m: pickle.dumps(_Payload(m))),
    "format-1-with-pickle": _format_1,
    "epoch-text": _with_metadata(epoch="one"),
    "history-number": _with_metadata(history=5),
    "prior-list": _with_metadata(prior=[1, 2]),
    "seed-text": _with_metadata(seed="s"),
    "noise-state-text": _with_metadata(noise_state="s"),
    "other-architecture": lambda path, marker, other: shutil.copy(other, path),
}
JSON_MUTATIONS = {
    "list": _replace_json([1, 2]),
    "hidden-text": _json_field("hidden", "abc"),
    "lr-text": _json_field("lr", "fast"),
    "seed-float": _json_field("seed", 1.5),
    "prior-number": _json_field("prior", 7),
    "history-text": _json_field("history", "none"),
    "rows-number": _json_field("rows", 3),
}
PARAMS_MUTATIONS = {"other-architecture": ZIP_MUTATIONS["other-architecture"]}
# A mutation that leaves the file usable for readers that do not touch what it broke.
HARMLESS = {"planted-optimizer-states"}
NETWORK_ONLY_HARMLESS = {"optimizer-pickle"}  # only resuming readers open optimizer.bin


def _mutations(name):
    if name.endswith(".json"):
        return dict(FILE_MUTATIONS, **JSON_MUTATIONS)
    if name.endswith(".params"):
        return dict(FILE_MUTATIONS, **PARAMS_MUTATIONS)
    mutations = dict(FILE_MUTATIONS, **ZIP_MUTATIONS)
    if name.endswith(".ckpt"):  # a deterministic checkpoint has neither
        mutations.pop("prior-list")
        mutations.pop("noise-state-text")
    return mutations


def _json_mutation_applies(name, mutation):
    """JSON field mutations only for the files that have such fields."""
    fields = {"config.json": {"hidden-text", "lr-text", "seed-float", "prior-number"},
              "result.json": {"history-text"}, "pruning.json": {"rows-number"},
              "sessions.json": set()}
    return mutation not in JSON_MUTATIONS or mutation == "list" or \
        mutation in fields.get(name, set())


CASES = [(kind, name, mutation) for (kind, name) in READS for mutation in _mutations(name)
         if _json_mutation_applies(name, mutation)
         and not (kind == "sgd" and mutation in ("prior-number",))]


def _expected(kind, name, mutation, reader):
    """'ok', 'error' or 'any' for one reader of one damaged file."""
    if reader not in READS[(kind, name)]:
        return "any"  # does not read it: may still stop on what an earlier command rewrote
    if mutation == "missing":
        return "ok" if reader in OPTIONAL.get((kind, name), set()) else "error"
    if mutation in HARMLESS:
        return "ok"
    if mutation in NOT_HISTORY and reader in METADATA_ONLY.get((kind, name), set()):
        return "ok"
    if mutation in NETWORK_ONLY_HARMLESS:
        return "error" if reader in RESUMING else "ok"
    return "error"


@pytest.mark.parametrize("kind, name, mutation", CASES,
                         ids=[f"{k}-{n}-{m}" for k, n, m in CASES])
def test_every_reader_refuses_or_survives_a_damaged_file(kind, name, mutation, originals,
                                                         fake_mnist, tmp_path, capsys):
    folder = tmp_path / kind
    shutil.copytree(originals / kind, folder)
    marker = tmp_path / "marker"
    other = originals / f"{kind}-other" / name
    FILE_MUTATIONS.get(mutation, _mutations(name).get(mutation))(folder / name, marker, other)
    problems = []
    for reader, argv in READERS[kind]:
        capsys.readouterr()
        code = main(argv(str(folder), str(fake_mnist), str(tmp_path / "out")))
        err = capsys.readouterr().err
        expected = _expected(kind, name, mutation, reader)
        last = err.strip().splitlines()[-1] if err.strip() else ""
        if "Traceback" in err or code not in (0, 2):
            problems.append(f"{reader}: exit {code}\n{err}")
        elif expected == "ok" and code != 0:
            problems.append(f"{reader}: should work, exit {code}: {last}")
        elif expected == "error" and code != 2:
            problems.append(f"{reader}: should refuse the damaged {name}, exit {code}")
        elif code == 2 and not (last.startswith("gluon-bbb: error: ") and (
                name in last or expected == "any")):
            problems.append(f"{reader}: the error does not name {name}: {last}")
        assert not marker.exists(), f"{reader} ran code from {name}"
    assert not problems, "\n".join(problems)


def _trainer(hidden):
    net = models.mlp([hidden])
    net.initialize(mx.init.Xavier())
    net(mx.nd.zeros((1, 784)))
    return BBBTrainer(net, BBBLoss(GaussianPrior(1.0)))


@pytest.mark.parametrize("mutation", sorted(dict(FILE_MUTATIONS, **ZIP_MUTATIONS)))
def test_bbbtrainer_load_refuses_or_survives_a_damaged_checkpoint(mutation, originals, tmp_path):
    path = tmp_path / "checkpoint.bbb"
    shutil.copy(originals / "train" / "checkpoint.bbb", path)
    marker = tmp_path / "marker"
    mutate = dict(FILE_MUTATIONS, **ZIP_MUTATIONS)[mutation]
    mutate(path, marker, originals / "train-other" / "checkpoint.bbb")
    trainer = _trainer(16)
    before = [p.data().asnumpy() for p in trainer.variational_params]
    if mutation in HARMLESS | NETWORK_ONLY_HARMLESS:
        trainer.load(str(path), optimizer=mutation not in NETWORK_ONLY_HARMLESS)
        assert trainer.epoch == 1
    else:
        error = FileNotFoundError if mutation == "missing" else ValueError
        with pytest.raises(error) as caught:
            trainer.load(str(path))
        message = str(caught.value)
        assert str(path) in message and "\n" not in message
        assert trainer.epoch == 0  # nothing half-loaded
        for value, param in zip(before, trainer.variational_params):
            np.testing.assert_array_equal(value, param.data().asnumpy())
    assert not marker.exists()
