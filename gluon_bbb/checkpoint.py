"""Atomic, single-file checkpoints: a zip of MXNet arrays, optimizer state and JSON metadata."""
import io
import json
import math
import os
import tempfile
import zipfile

from mxnet import nd

__all__ = ["atomic_write_bytes", "write_json", "write_checkpoint", "read_checkpoint", "trainer_states", "load_trainer_states"]


def atomic_write_bytes(path, payload):
    """Write ``payload`` to ``path`` via a temporary file in the same folder and a rename.

    A crash mid-write leaves the previous file (or none), never a truncated one.
    """
    path = os.path.abspath(os.fspath(path))
    folder = os.path.dirname(path)
    os.makedirs(folder, exist_ok=True)
    handle, tmp_path = tempfile.mkstemp(dir=folder, prefix=os.path.basename(path) + ".", suffix=".tmp")
    try:
        with os.fdopen(handle, "wb") as tmp:
            tmp.write(payload)
            tmp.flush()
            os.fsync(tmp.fileno())
        os.replace(tmp_path, path)
    except BaseException:
        if os.path.exists(tmp_path):
            os.remove(tmp_path)
        raise


def _json_safe(value):
    """``value`` with non-finite floats replaced by None, so the file is strict JSON."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {key: _json_safe(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_safe(item) for item in value]
    return value


def write_json(path, payload):
    """Atomically write ``payload`` as strict, sorted, indented JSON (NaN and inf become null)."""
    text = json.dumps(_json_safe(payload), indent=2, sort_keys=True, allow_nan=False) + "\n"
    atomic_write_bytes(path, text.encode("utf-8"))


def _through_file(write, read=None, payload=None):
    """MXNet saves and loads only by file name: go through a private temporary file."""
    with tempfile.TemporaryDirectory() as folder:
        file_name = os.path.join(folder, "payload")
        if payload is not None:
            with open(file_name, "wb") as handle:
                handle.write(payload)
            return read(file_name)
        write(file_name)
        with open(file_name, "rb") as handle:
            return handle.read()


def _ndarrays_to_bytes(arrays):
    return _through_file(lambda name: nd.save(name, arrays))


def _bytes_to_ndarrays(payload):
    return _through_file(None, nd.load, payload)


def trainer_states(trainer):
    """The optimizer state of a ``gluon.Trainer`` as bytes (``Trainer.save_states``)."""
    return _through_file(trainer.save_states)


def load_trainer_states(trainer, payload):
    """Restore bytes from :func:`trainer_states` into a ``gluon.Trainer``."""
    _through_file(None, trainer.load_states, payload)


def write_checkpoint(path, arrays, metadata, optimizer_states=None):
    """Atomically write one checkpoint file.

    Parameters
    ----------
    path : str
    arrays : dict of str -> NDArray
    metadata : JSON-serialisable dict
    optimizer_states : bytes or None
        As written by ``gluon.Trainer.save_states``.
    """
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_STORED) as archive:
        archive.writestr("metadata.json", json.dumps(metadata, indent=1, sort_keys=True))
        archive.writestr("arrays.nd", _ndarrays_to_bytes(arrays))
        if optimizer_states is not None:
            archive.writestr("optimizer.states", optimizer_states)
    atomic_write_bytes(path, buffer.getvalue())


def read_checkpoint(path):
    """Read a checkpoint written by :func:`write_checkpoint`.

    Returns
    -------
    arrays : dict of str -> NDArray
    metadata : dict
    optimizer_states : bytes or None
    """
    path = os.fspath(path)
    if not os.path.isfile(path):
        raise FileNotFoundError(f"no checkpoint at {path}")
    try:
        with zipfile.ZipFile(path) as archive:
            names = set(archive.namelist())
            metadata = json.loads(archive.read("metadata.json"))
            arrays = _bytes_to_ndarrays(archive.read("arrays.nd"))
            states = archive.read("optimizer.states") if "optimizer.states" in names else None
    except (zipfile.BadZipFile, KeyError, json.JSONDecodeError) as error:
        raise ValueError(f"{path} is not a gluon_bbb checkpoint: {error}") from None
    return arrays, metadata, states
