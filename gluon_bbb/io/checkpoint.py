"""Checkpoint files that are safe to receive from a stranger, and atomic, durable writes.

A checkpoint is a zip archive (entries stored uncompressed) of:

``metadata.json``
    Strict JSON: the trainer's settings and history (whatever the caller stores), plus
    ``"format": 2`` and ``"payloads"``, which describes every binary entry: its size, its
    SHA-256 and the arrays it holds, as ``[name, dtype, shape]`` in storage order.
``arrays.bin``
    The network's arrays (mu, rho, running statistics), raw little-endian values, C order,
    one after another.
``optimizer.bin`` (optional)
    The optimizer's arrays (Adam's moments, SGD's momentum), laid out the same way; its
    payload entry also carries the optimizer's JSON state (see
    :mod:`gluon_bbb.io.optimizer_state`).

Reading distrusts the file: before an entry is inflated, its declared size must equal what
its manifest needs (and, where the caller says which arrays it expects, what the network
needs), so a zip bomb is refused unread; its SHA-256 must match; names, dtypes and shapes
must be well formed. Nothing is unpickled and no MXNet parser sees the bytes. Any problem is
one :class:`CheckpointError` (a ValueError) that names the file and what is wrong.

Files of format 1 (an unreleased version: MXNet's NDArray file and an optimizer state pickled
by ``gluon.Trainer.save_states``) are refused with one line: no code path unpickles.
"""
import collections
import hashlib
import io
import json
import math
import os
import re
import struct
import tempfile
import zipfile
import zlib

import numpy as np

__all__ = ["FORMAT", "CheckpointError", "StoredCheckpoint", "new_file_mode", "atomic_write_bytes",
           "write_json",
           "read_json", "write_checkpoint", "read_checkpoint", "read_metadata", "checked_field",
           "remove_stale_temporary_files"]

#: The format :func:`write_checkpoint` writes and :func:`read_checkpoint` reads.
FORMAT = 2
METADATA = "metadata.json"
ARRAYS = "arrays.bin"
OPTIMIZER = "optimizer.bin"
#: Largest metadata.json (or other JSON file) read, in bytes.
MAX_JSON_BYTES = 64 * 2**20
#: Largest payload read when the caller does not say which arrays it expects, in bytes.
MAX_PAYLOAD_BYTES = 8 * 2**30
#: dtypes a payload may hold.
DTYPES = ("float16", "float32", "float64", "uint8", "uint16", "int8", "int32", "int64")

StoredCheckpoint = collections.namedtuple(
    "StoredCheckpoint", ["arrays", "metadata", "optimizer"])
StoredCheckpoint.__doc__ = """What :func:`read_checkpoint` returns.

Attributes
----------
arrays : dict of str -> numpy.ndarray
metadata : dict, metadata.json without its 'payloads'
optimizer : (dict, dict of str -> numpy.ndarray) or None
    The optimizer's JSON state and arrays, if asked for and stored.
"""


class CheckpointError(ValueError):
    """A checkpoint or run-folder file that cannot be used; the message names the file."""


# ---------------------------------------------------------------------------- writing
def new_file_mode() -> int:
    """The mode ``open`` gives a new file under the process's umask: ``0o666 & ~umask``.

    A temporary file of :mod:`tempfile` is created 0600 and keeps that mode through a rename, so
    a file written through one would be readable by its owner only (a run folder or a data
    folder shared with a class: "Permission denied"). Writers set this mode before renaming.
    The umask is read from ``/proc`` where it can be, else set and restored at once.
    """
    mask = None
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("Umask:"):
                    mask = int(line.split()[1], 8)
                    break
    except (OSError, ValueError, IndexError):
        pass
    if mask is None:
        mask = os.umask(0o022)
        os.umask(mask)
    return 0o666 & ~mask


def atomic_write_bytes(path, payload):
    """Write ``payload`` to ``path`` durably, via a temporary file in the same folder.

    The temporary file is flushed and fsynced, renamed over ``path``, and the folder is
    fsynced, so that the rename itself survives a power cut. A crash at any moment leaves the
    previous file (or none), never a truncated one. The file gets the mode of any new file
    under the umask (:func:`new_file_mode`), not the temporary file's 0600.
    """
    path = os.path.abspath(os.fspath(path))
    folder = os.path.dirname(path)
    os.makedirs(folder, exist_ok=True)
    handle, tmp_path = tempfile.mkstemp(dir=folder, prefix=os.path.basename(path) + ".",
                                        suffix=TEMPORARY_SUFFIX)
    try:
        with os.fdopen(handle, "wb") as tmp:
            tmp.write(payload)
            tmp.flush()
            os.fsync(tmp.fileno())
        os.chmod(tmp_path, new_file_mode())
        os.replace(tmp_path, path)
    except BaseException:
        if os.path.exists(tmp_path):
            os.remove(tmp_path)
        raise
    _fsync_folder(folder)


#: How :func:`atomic_write_bytes` names its temporary files: ``<name>.<random>.tmp``.
TEMPORARY_SUFFIX = ".tmp"
#: Such a name: ``tempfile.mkstemp`` puts 8 characters of [a-z0-9_] between the dots.
_TEMPORARY_NAME = re.compile(r".+\.[a-z0-9_]{8}\.tmp")


def remove_stale_temporary_files(folder):
    """Delete the temporary files that writers killed mid-write left in ``folder``.

    Only for a writer that holds the folder's lock (:mod:`gluon_bbb.experiments.runlock`): no other
    process can be writing there. Returns the names removed.
    """
    removed = []
    for name in sorted(os.listdir(folder)):
        path = os.path.join(folder, name)
        if _TEMPORARY_NAME.fullmatch(name) and os.path.isfile(path):
            os.remove(path)
            removed.append(name)
    return removed


def _fsync_folder(folder):
    """Make a rename in ``folder`` durable (a no-op where folders cannot be opened)."""
    try:
        descriptor = os.open(folder, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:
        return
    try:
        os.fsync(descriptor)
    except OSError:
        pass  # some file systems do not sync folders; the rename is still atomic
    finally:
        os.close(descriptor)


def _json_safe(value):
    """``value`` with non-finite floats replaced by None, so the file is strict JSON."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {key: _json_safe(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_safe(item) for item in value]
    return value


def _json_text(payload, indent=1):
    return json.dumps(_json_safe(payload), indent=indent, sort_keys=True, allow_nan=False) + "\n"


def write_json(path, payload):
    """Atomically write ``payload`` as strict, sorted, indented JSON (NaN and inf become null)."""
    atomic_write_bytes(path, _json_text(payload, indent=2).encode("utf-8"))


def _pack(arrays):
    """(bytes, manifest) of a dict of arrays: raw little-endian values one after another."""
    parts, manifest = [], []
    for name, value in arrays.items():
        array = np.ascontiguousarray(value.asnumpy() if hasattr(value, "asnumpy") else value)
        if array.dtype.name not in DTYPES:
            raise ValueError(f"cannot store array {name!r} of dtype {array.dtype}")
        parts.append(array.astype(array.dtype.newbyteorder("<"), copy=False).tobytes())
        manifest.append([str(name), array.dtype.name, [int(d) for d in array.shape]])
    payload = b"".join(parts)
    return payload, {"size": len(payload), "sha256": hashlib.sha256(payload).hexdigest(),
                     "arrays": manifest}


def write_checkpoint(path, arrays, metadata, optimizer=None):
    """Atomically write one checkpoint file (format :data:`FORMAT`).

    Parameters
    ----------
    path : str
    arrays : dict of str -> NDArray or numpy.ndarray
    metadata : dict
        JSON-serialisable; must not use the key 'payloads'.
    optimizer : (dict, dict of str -> array), optional
        The optimizer's JSON state and its arrays (:func:`gluon_bbb.io.optimizer_state.capture`).
    """
    if "payloads" in metadata:
        raise ValueError("metadata may not use the key 'payloads'")
    entries, payloads = {}, {}
    entries[ARRAYS], payloads[ARRAYS] = _pack(arrays)
    if optimizer is not None:
        state, optimizer_arrays = optimizer
        entries[OPTIMIZER], payloads[OPTIMIZER] = _pack(optimizer_arrays)
        payloads[OPTIMIZER]["state"] = state
    metadata = dict(metadata, format=FORMAT, payloads=payloads)
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_STORED) as archive:
        archive.writestr(METADATA, _json_text(metadata))
        for name, payload in entries.items():
            archive.writestr(name, payload)
    atomic_write_bytes(path, buffer.getvalue())


# ---------------------------------------------------------------------------- reading
#: What a damaged or hostile zip can make the standard library raise.
_READ_ERRORS = (zipfile.BadZipFile, zipfile.LargeZipFile, OSError, EOFError, zlib.error,
                NotImplementedError, RuntimeError, ValueError, struct.error, KeyError,
                OverflowError, IndexError, TypeError)


def read_json(path, what="a JSON object", kind=dict):
    """The JSON value in ``path``, distrustfully.

    Parameters
    ----------
    path : str
    what : str
        What the file should hold, for the message.
    kind : type or tuple of types
        The type the top-level value must have (default a JSON object).

    Raises
    ------
    FileNotFoundError
        No file at ``path``.
    CheckpointError
        Too large, not UTF-8, not JSON, or of the wrong type; the message names the file.
    """
    path = os.fspath(path)
    if not os.path.isfile(path):
        raise FileNotFoundError(f"{path} not found")
    try:
        with open(path, "rb") as handle:
            text = handle.read(MAX_JSON_BYTES + 1)
    except OSError as error:
        raise CheckpointError(f"{path} cannot be read: {error.strerror or error}") from None
    return _parse_json(text, path, what, kind)


def _parse_json(text, source, what, kind):
    if len(text) > MAX_JSON_BYTES:
        raise CheckpointError(f"{source} is larger than {MAX_JSON_BYTES} bytes: not {what}")
    try:
        value = json.loads(text.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as error:
        raise CheckpointError(f"{source} is not valid JSON ({error}): expected {what}") from None
    if not isinstance(value, kind):
        raise CheckpointError(f"{source} holds a JSON {type(value).__name__}, not {what}")
    return value


def checked_field(mapping, key, kind, source, optional=False, default=None):
    """``mapping[key]`` if it has type ``kind``, else a CheckpointError naming ``source``.

    ``bool`` never passes for ``int``/``float`` and an ``int`` passes for ``float``. With
    ``optional=True`` a missing key gives ``default``.
    """
    if key not in mapping:
        if optional:
            return default
        raise CheckpointError(f"{source} lacks the field {key!r}")
    value = mapping[key]
    kinds = kind if isinstance(kind, tuple) else (kind,)
    if float in kinds:
        kinds = kinds + (int,)
    if isinstance(value, bool) and bool not in kinds or not isinstance(value, kinds):
        names = " or ".join(k.__name__ for k in kinds)
        raise CheckpointError(f"{source}: field {key!r} must be {names}, got {value!r:.80}")
    return value


def read_metadata(path):
    """The metadata of a checkpoint without reading its arrays (payload descriptions removed).

    Raises FileNotFoundError for a missing file and CheckpointError for a bad one.
    """
    with _open_archive(path) as archive:
        return _public(_read_metadata(archive, path))


def read_checkpoint(path, expected=None, with_optimizer=False):
    """Read a checkpoint of format 2, checking everything before using it.

    Parameters
    ----------
    path : str
    expected : dict of str -> tuple, optional
        The arrays the caller's network needs, name -> shape. The file must hold exactly
        these; this is checked against the manifest before any array is read.
    with_optimizer : bool
        Also read the optimizer state. False (the default, for commands that only use the
        network) never opens the optimizer entry.

    Returns
    -------
    StoredCheckpoint

    Raises
    ------
    FileNotFoundError
        No file at ``path``.
    CheckpointError
        Anything wrong with the file, named.
    """
    with _open_archive(path) as archive:
        metadata = _read_metadata(archive, path)
        payloads = checked_field(metadata, "payloads", dict, f"{path}: {METADATA}")
        arrays = _read_payload(archive, path, ARRAYS, payloads, expected)
        optimizer = None
        if with_optimizer and OPTIMIZER in payloads:
            state = checked_field(checked_field(payloads, OPTIMIZER, dict, f"{path}: payloads"),
                                  "state", dict, f"{path}: payload {OPTIMIZER}")
            optimizer = (state, _read_payload(archive, path, OPTIMIZER, payloads, None))
    return StoredCheckpoint(arrays, _public(metadata), optimizer)


def _public(metadata):
    return {key: value for key, value in metadata.items() if key != "payloads"}


class _open_archive:  # noqa: N801 -- used like a function: ``with _open_archive(path):``
    """The zip archive at ``path``, with every failure turned into a named error."""

    def __init__(self, path):
        self.path = os.fspath(path)

    def __enter__(self):
        if not os.path.isfile(self.path):
            raise FileNotFoundError(f"no checkpoint at {self.path}")
        try:
            self.archive = zipfile.ZipFile(self.path)
        except _READ_ERRORS as error:
            raise CheckpointError(f"{self.path} is not a gluon_bbb checkpoint (not a readable zip "
                                  f"archive: {error})") from None
        names = self.archive.namelist()
        if len(set(names)) != len(names):
            self.archive.close()
            raise CheckpointError(f"{self.path} is not a gluon_bbb checkpoint (an entry name "
                                  "appears twice)")
        return self.archive

    def __exit__(self, *exc_info):
        self.archive.close()
        return False


def _entry(archive, path, name, size_limit, exact=False):
    """The bytes of entry ``name``, refusing one that declares more than ``size_limit``
    bytes (or, with ``exact``, other than that) before inflating it."""
    try:
        info = archive.getinfo(name)
    except KeyError:
        raise CheckpointError(f"{path} is not a gluon_bbb checkpoint (no entry {name})") from None
    if info.flag_bits & 0x1:
        raise CheckpointError(f"{path}: entry {name} is encrypted")
    if info.compress_type not in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED):
        raise CheckpointError(f"{path}: entry {name} uses compression method "
                              f"{info.compress_type}; only stored or deflated entries are read")
    if info.file_size > size_limit or (exact and info.file_size != size_limit):
        raise CheckpointError(f"{path}: entry {name} declares {info.file_size} bytes, "
                              f"{'not' if exact else 'more than'} the {size_limit} expected; "
                              "refused unread")
    try:
        with archive.open(info) as handle:
            payload = handle.read(size_limit + 1)  # the reader stops at the declared size
    except _READ_ERRORS as error:
        raise CheckpointError(f"{path}: entry {name} is damaged ({error})") from None
    if len(payload) != info.file_size:
        raise CheckpointError(f"{path}: entry {name} is truncated ({len(payload)} of "
                              f"{info.file_size} bytes)")
    return payload


def _read_metadata(archive, path):
    text = _entry(archive, path, METADATA, MAX_JSON_BYTES)
    metadata = _parse_json(text, f"{path}: {METADATA}", "a checkpoint's metadata object", dict)
    file_format = checked_field(metadata, "format", int, f"{path}: {METADATA}")
    if file_format == 1:
        raise CheckpointError(f"{path} is a checkpoint of format 1, whose optimizer state is a "
                              "pickle; gluon_bbb no longer reads it (nothing may unpickle): "
                              "train the run again")
    if file_format != FORMAT:
        raise CheckpointError(f"{path} has checkpoint format {file_format}; this gluon_bbb "
                              f"reads format {FORMAT}")
    return metadata


def _manifest(description, source):
    """[(name, dtype, shape, offset, nbytes)] of a payload description, checked."""
    manifest = checked_field(description, "arrays", list, source)
    entries, offset, names = [], 0, set()
    for item in manifest:
        if not (isinstance(item, list) and len(item) == 3 and isinstance(item[0], str)
                and item[1] in DTYPES and isinstance(item[2], list) and len(item[2]) <= 32
                and all(isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in item[2])):
            raise CheckpointError(f"{source}: {item!r:.80} is not [name, dtype, shape]")
        name, dtype, shape = item
        if name in names:
            raise CheckpointError(f"{source}: array {name!r} appears twice")
        names.add(name)
        nbytes = int(np.prod(shape, dtype=object)) * np.dtype(dtype).itemsize
        entries.append((name, dtype, tuple(shape), offset, nbytes))
        offset += nbytes
    return entries, offset


def _check_expected(manifest, expected, source):
    """CheckpointError unless the manifest holds exactly the arrays ``expected`` names."""
    stored = {name: shape for name, _, shape, _, _ in manifest}
    missing, extra = sorted(set(expected) - set(stored)), sorted(set(stored) - set(expected))
    if missing or extra:
        parts = ([f"lacks {', '.join(missing[:5])}"] if missing else []) + \
                ([f"has unexpected {', '.join(extra[:5])}"] if extra else [])
        raise CheckpointError(f"{source} does not fit the network: it {' and '.join(parts)}")
    for name, shape in expected.items():
        if tuple(stored[name]) != tuple(shape):
            raise CheckpointError(f"{source} does not fit the network: {name} has shape "
                                  f"{tuple(stored[name])}, the network {tuple(shape)}")


def _read_payload(archive, path, name, payloads, expected):
    source = f"{path}: payload {name}"
    description = checked_field(payloads, name, dict, f"{path}: payloads")
    manifest, total = _manifest(description, source)
    if expected is not None:
        _check_expected(manifest, expected, path)
    elif total > MAX_PAYLOAD_BYTES:
        raise CheckpointError(f"{source} declares {total} bytes, more than the {MAX_PAYLOAD_BYTES} read")
    size = checked_field(description, "size", int, source)
    digest = checked_field(description, "sha256", str, source)
    if size != total:
        raise CheckpointError(f"{source}: its arrays need {total} bytes, it declares {size}")
    payload = _entry(archive, path, name, total, exact=True)
    if hashlib.sha256(payload).hexdigest() != digest.lower():
        raise CheckpointError(f"{path}: entry {name} does not match its SHA-256 (the file was "
                              "modified or damaged)")
    return {array_name: np.frombuffer(payload, dtype=np.dtype(dtype).newbyteorder("<"),
                                      count=nbytes // np.dtype(dtype).itemsize, offset=offset)
            .reshape(shape).astype(dtype)
            for array_name, dtype, shape, offset, nbytes in manifest}
