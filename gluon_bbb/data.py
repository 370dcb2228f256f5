"""Loading MNIST and Fashion-MNIST from IDX files (batches: :mod:`gluon_bbb.loaders`, whose
:class:`ArrayLoader` and :class:`EpochShuffled` are also importable from here).

The four files of each data set, ``{train,t10k}-{images-idx3,labels-idx1}-ubyte``
(gzip-compressed with a ``.gz`` suffix, or raw), are looked for in these places,
in order (see :func:`find_data_dir`):

1. the ``data_dir`` argument: the folder holding the files, or a parent folder
   holding ``<name>/``;
2. ``$GLUON_BBB_DATA/<name>`` (``GLUON_BBB_DATA`` holds ``mnist/`` and
   ``fashion-mnist/``);
3. MXNet's download cache, ``$MXNET_HOME/datasets/<name>`` (``MXNET_HOME``
   defaults to ``~/.mxnet``);
4. Debian's ``/usr/share/datasets/<name>`` (package ``dataset-fashion-mnist``).

If none holds all four files, :func:`load_dataset` (with ``download=True``) tries
MXNet's own downloader as a last resort, and otherwise raises a single
:class:`DataNotFoundError` listing every folder it searched.

Typical use::

    loaders = get_loaders("mnist", batch_size=128, num_validation=10000)
    for data, label in loaders["train"]:   # data: (128, 784), label: (128,)
        ...
"""
import gzip
import os
import zlib
from pathlib import Path

import mxnet as mx
import numpy as np

from .loaders import ArrayLoader, EpochShuffled

__all__ = [
    "DATASETS",
    "CLASS_NAMES",
    "SPLITS",
    "PREPROCESSING_METHODS",
    "TRAIN_PIXEL_STATS",
    "DATA_ENV_VAR",
    "DataNotFoundError",
    "IDXFormatError",
    "idx_filenames",
    "read_idx",
    "find_data_dir",
    "preprocess",
    "load_raw",
    "load_dataset",
    "load_splits",
    "ArrayLoader",
    "EpochShuffled",
    "get_loaders",
]

DATASETS = ("mnist", "fashion-mnist")
"""Names of the supported data sets."""

CLASS_NAMES = {
    "mnist": [str(digit) for digit in range(10)],
    "fashion-mnist": [
        "T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
        "Sandal", "Shirt", "Sneaker", "Bag", "Ankle boot",
    ],
}
"""Human-readable name of each label 0..9, per data set."""

SPLITS = ("train", "test")
"""Splits stored on disk (a validation split is cut from "train", see :func:`load_splits`)."""

PREPROCESSING_METHODS = ("paper", "255", "standardize")
"""Valid ``method`` values of :func:`preprocess`."""

TRAIN_PIXEL_STATS = {
    "mnist": (0.1307, 0.3081),
    "fashion-mnist": (0.2860, 0.3530),
}
"""(mean, std) of all training-set pixels, scaled to [0, 1] (i.e. divided by 255).

Used by ``preprocessing="standardize"`` so that the train, validation and test
splits are all standardized with the same constants (from the full 60,000-image
training set).
"""

DATA_ENV_VAR = "GLUON_BBB_DATA"
"""Environment variable naming a folder that holds ``mnist/`` and ``fashion-mnist/``."""

DEBIAN_DATA_ROOT = Path("/usr/share/datasets")
"""Where Debian's ``dataset-*`` packages install data sets (searched last)."""

NUM_CLASSES = 10
IMAGE_SHAPE = (28, 28)
PAPER_PIXEL_SCALE = 126.0  # Blundell et al. (2015) divide pixel values by 126.

_IDX_UINT8 = 0x08
_IDX_IMAGES_MAGIC = 0x00000803  # 2051: uint8, 3 dimensions
_IDX_LABELS_MAGIC = 0x00000801  # 2049: uint8, 1 dimension
_GZIP_MAGIC = b"\x1f\x8b"
_SPLIT_PREFIX = {"train": "train", "test": "t10k"}


class DataNotFoundError(FileNotFoundError):
    """A data set's files are in none of the searched folders."""


class IDXFormatError(ValueError):
    """An IDX file is malformed: bad header, wrong size, corrupt gzip or bad labels."""


# ----------------------------------------------------------------------------
# IDX files
# ----------------------------------------------------------------------------

def idx_filenames(split):
    """Base names (without ``.gz``) of the image and label files of a split.

    Parameters
    ----------
    split : {"train", "test"}

    Returns
    -------
    tuple of str
        ``(images_name, labels_name)``, e.g.
        ``("train-images-idx3-ubyte", "train-labels-idx1-ubyte")``.
    """
    _check_split(split)
    prefix = _SPLIT_PREFIX[split]
    return prefix + "-images-idx3-ubyte", prefix + "-labels-idx1-ubyte"


def _all_idx_filenames():
    return [name for split in SPLITS for name in idx_filenames(split)]


def _read_file_bytes(path):
    """Whole content of ``path``, transparently gunzipped (detected by magic bytes)."""
    with open(path, "rb") as raw:
        is_gzip = raw.read(2) == _GZIP_MAGIC
    if not is_gzip:
        return Path(path).read_bytes()
    try:
        with gzip.open(path, "rb") as stream:
            return stream.read()
    except (OSError, EOFError, zlib.error) as err:
        raise IDXFormatError(f"{path}: corrupt gzip data ({err})") from err


def _parse_idx_header(content, path):
    """Decode an IDX header.

    Returns
    -------
    dims : tuple of int
        Size of each dimension.
    header_size : int
        Number of header bytes (4 + 4 * ndim).
    """
    if len(content) < 4:
        raise IDXFormatError(
            f"{path}: file too short for an IDX header ({len(content)} bytes)")
    zero, type_code, ndim = int.from_bytes(content[0:2], "big"), content[2], content[3]
    magic = int.from_bytes(content[0:4], "big")
    if zero != 0 or type_code != _IDX_UINT8 or ndim == 0:
        raise IDXFormatError(
            f"{path}: bad IDX magic number {magic} (0x{magic:08x}); expected "
            f"0x000008NN for uint8 data with NN dimensions, e.g. "
            f"{_IDX_IMAGES_MAGIC} for images or {_IDX_LABELS_MAGIC} for labels")
    header_size = 4 + 4 * ndim
    if len(content) < header_size:
        raise IDXFormatError(
            f"{path}: truncated IDX header: expected {header_size} bytes for "
            f"{ndim} dimensions, found {len(content)}")
    dims = tuple(int.from_bytes(content[4 + 4 * i: 8 + 4 * i], "big")
                 for i in range(ndim))
    return dims, header_size


def read_idx(path):
    """Read an IDX file of unsigned bytes (gzip-compressed or raw).

    Parameters
    ----------
    path : str or os.PathLike
        The file. Gzip compression is detected from its content, not its name.

    Returns
    -------
    numpy.ndarray of uint8
        Shape given by the header, e.g. ``(n, 28, 28)`` for an ``idx3`` image
        file (magic 2051) or ``(n,)`` for an ``idx1`` label file (magic 2049).

    Raises
    ------
    FileNotFoundError
        ``path`` does not exist.
    IDXFormatError
        Corrupt gzip stream, magic number other than ``0x000008NN`` (only uint8
        data are accepted), truncated header, or payload length different from
        the product of the dimensions.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"IDX file not found: {path}")
    content = _read_file_bytes(path)
    dims, header_size = _parse_idx_header(content, path)
    expected = int(np.prod(dims, dtype=np.int64))
    found = len(content) - header_size
    if found != expected:
        kind = {3: "pixel data", 1: "label data"}.get(len(dims), "data")
        shape = "x".join(str(d) for d in dims)
        raise IDXFormatError(
            f"{path}: expected {expected} bytes of {kind} for shape {shape}, "
            f"found {found}" + (" (file truncated?)" if found < expected else ""))
    return np.frombuffer(content, dtype=np.uint8, offset=header_size).reshape(dims).copy()


# ----------------------------------------------------------------------------
# Finding the files
# ----------------------------------------------------------------------------

def _check_name(name):
    if name not in DATASETS:
        raise ValueError(f"unknown data set {name!r}; valid names: {', '.join(DATASETS)}")


def _check_split(split):
    if split not in SPLITS:
        raise ValueError(f"unknown split {split!r}; valid splits: {', '.join(SPLITS)}")


def _idx_file(folder, base_name):
    """Path of ``base_name`` or ``base_name.gz`` in ``folder`` (raw preferred), or None."""
    for candidate in (folder / base_name, folder / (base_name + ".gz")):
        if candidate.is_file():
            return candidate
    return None


def _has_all_files(folder):
    return folder.is_dir() and all(_idx_file(folder, base) is not None
                                   for base in _all_idx_filenames())


def _mxnet_home():
    """MXNet's data folder: ``$MXNET_HOME``, by default ``~/.mxnet``."""
    return Path(mx.base.data_dir()).expanduser()


def _candidate_dirs(name, data_dir):
    """Folders to search, in order (see the module docstring).

    Raises
    ------
    DataNotFoundError
        ``data_dir`` is given but does not exist.
    """
    candidates = []
    if data_dir is not None:
        data_dir = Path(data_dir).expanduser()
        if not data_dir.is_dir():
            raise DataNotFoundError(f"data_dir {str(data_dir)!r} does not exist "
                                    f"(or is not a folder)")
        candidates.append(data_dir / name)
        # Accept the folder holding the files directly, unless its name says it
        # holds another data set (data_dir=".../mnist" with name="fashion-mnist").
        if data_dir.name not in DATASETS or data_dir.name == name:
            candidates.append(data_dir)
    env_root = os.environ.get(DATA_ENV_VAR)
    if env_root:
        candidates.append(Path(env_root).expanduser() / name)
    candidates.append(_mxnet_home() / "datasets" / name)
    candidates.append(Path(DEBIAN_DATA_ROOT) / name)
    return candidates


def _search_data_dir(name, data_dir=None):
    """First candidate folder holding the four IDX files.

    Returns
    -------
    found : pathlib.Path or None
        The folder, or None when no candidate holds all four files.
    searched : list of pathlib.Path
        Every folder that was looked at, in order.
    """
    _check_name(name)
    searched = _candidate_dirs(name, data_dir)
    for folder in searched:
        if _has_all_files(folder):
            return folder, searched
    return None, searched


def _not_found_message(name, searched, download_note):
    places = "\n".join(f"  - {folder}" for folder in searched)
    files = ", ".join(_all_idx_filenames())
    return (
        f"could not find the {name!r} data set. Looked for its four IDX files "
        f"({files}; raw or .gz) in:\n{places}\n{download_note}\n"
        f"To fix: pass data_dir='/path/to/{name}' (or its parent folder), set "
        f"{DATA_ENV_VAR}=/path/holding/{name}/ (a folder containing mnist/ and "
        f"fashion-mnist/), or place the files in one of the folders listed above.")


def find_data_dir(name, data_dir=None):
    """Folder holding the four IDX files of a data set (no download).

    Parameters
    ----------
    name : {"mnist", "fashion-mnist"}
    data_dir : str or os.PathLike, optional
        Searched first: the folder holding the files, or a parent holding
        ``<name>/``.

    Returns
    -------
    pathlib.Path
        The first folder in search order (``data_dir``, ``$GLUON_BBB_DATA/<name>``,
        ``$MXNET_HOME/datasets/<name>``, ``/usr/share/datasets/<name>``) that
        holds all four files.

    Raises
    ------
    ValueError
        Unknown ``name``.
    DataNotFoundError
        ``data_dir`` is given but does not exist, or no folder holds the files
        (the message lists every folder searched).
    """
    found, searched = _search_data_dir(name, data_dir)
    if found is None:
        raise DataNotFoundError(_not_found_message(
            name, searched, "(find_data_dir does not download.)"))
    return found


def _download_with_mxnet(name, split):
    """Last resort: let MXNet download a split into ``$MXNET_HOME/datasets/<name>``.

    Returns
    -------
    images : numpy.ndarray of uint8, shape (n, 28, 28)
    labels : numpy.ndarray of int32, shape (n,)
    """
    vision = mx.gluon.data.vision
    dataset_class = {"mnist": vision.MNIST, "fashion-mnist": vision.FashionMNIST}[name]
    root = _mxnet_home() / "datasets" / name
    dataset = dataset_class(root=str(root), train=(split == "train"))
    images = dataset._data  # pylint: disable=protected-access
    images = images.asnumpy() if hasattr(images, "asnumpy") else np.asarray(images)
    labels = dataset._label  # pylint: disable=protected-access
    labels = labels.asnumpy() if hasattr(labels, "asnumpy") else np.asarray(labels)
    return images.reshape(len(images), *IMAGE_SHAPE).astype(np.uint8), labels.astype(np.int32)


# ----------------------------------------------------------------------------
# Loading
# ----------------------------------------------------------------------------

def _read_split(folder, split):
    """Read and check the images and labels of one split from ``folder``.

    Returns
    -------
    images : numpy.ndarray of uint8, shape (n, 28, 28)
    labels : numpy.ndarray of int32, shape (n,)
    """
    images_name, labels_name = idx_filenames(split)
    images_path = _idx_file(folder, images_name)
    labels_path = _idx_file(folder, labels_name)
    images = read_idx(images_path)
    labels = read_idx(labels_path)
    if images.ndim != 3 or images.shape[1:] != IMAGE_SHAPE:
        raise IDXFormatError(f"{images_path}: expected images of shape (n, 28, 28), "
                             f"found {images.shape}")
    if labels.ndim != 1:
        raise IDXFormatError(f"{labels_path}: expected labels of shape (n,), "
                             f"found {labels.shape}")
    if len(images) != len(labels):
        raise IDXFormatError(f"{images_path} holds {len(images)} images but "
                             f"{labels_path} holds {len(labels)} labels")
    _check_labels(labels, labels_path)
    return images, labels.astype(np.int32)


def _check_labels(labels, source):
    if labels.size and int(labels.max()) >= NUM_CLASSES:
        bad = int(np.argmax(labels >= NUM_CLASSES))
        raise IDXFormatError(f"{source}: label {int(labels[bad])} at index {bad} is "
                             f"outside 0..{NUM_CLASSES - 1}")


def load_raw(name="mnist", split="train", data_dir=None, download=True):
    """One split of MNIST or Fashion-MNIST as stored, before any preprocessing.

    Parameters
    ----------
    name, split, data_dir, download
        As for :func:`load_dataset`.

    Returns
    -------
    images : numpy.ndarray of uint8, shape (n, 28, 28)
    labels : numpy.ndarray of int32, shape (n,)

    Raises
    ------
    ValueError, DataNotFoundError, IDXFormatError
        As for :func:`load_dataset`.
    """
    _check_name(name)
    _check_split(split)
    folder, searched = _search_data_dir(name, data_dir)
    if folder is not None:
        return _read_split(folder, split)
    if not download:
        raise DataNotFoundError(_not_found_message(
            name, searched, "Downloading was disabled (download=False)."))
    try:
        images, labels = _download_with_mxnet(name, split)
    except Exception as err:  # offline, blocked, bad checksum...: report all at once
        raise DataNotFoundError(_not_found_message(
            name, searched, f"Downloading with MXNet also failed: "
                            f"{type(err).__name__}: {err}")) from err
    if len(images) != len(labels):
        raise IDXFormatError(f"MXNet download of {name}/{split}: {len(images)} images "
                             f"but {len(labels)} labels")
    _check_labels(labels, f"MXNet download of {name}/{split}")
    return images, labels


def preprocess(images, method="paper", mean=None, std=None):
    """Scale uint8 pixels to float32 and flatten each image.

    Parameters
    ----------
    images : numpy.ndarray, shape (n, 28, 28) or (n, 784)
        Raw pixel values in 0..255.
    method : {"paper", "255", "standardize"}
        ``"paper"``: ``x / 126``, as in Blundell et al. (2015);
        ``"255"``: ``x / 255``, i.e. values in [0, 1];
        ``"standardize"``: ``(x / 255 - mean) / std``.
    mean, std : float, optional
        Only for ``"standardize"``: pixel mean and standard deviation on the
        [0, 1] scale. By default computed from ``images`` themselves; pass the
        training set's values (e.g. ``TRAIN_PIXEL_STATS["mnist"]``) to
        standardize test data consistently.

    Returns
    -------
    numpy.ndarray of float32, shape (n, 784)

    Raises
    ------
    ValueError
        Unknown ``method``, ``images`` with fewer than 2 dimensions, or
        ``std`` not positive.
    """
    key = str(method).lower()
    if key not in PREPROCESSING_METHODS:
        raise ValueError(f"unknown preprocessing method {method!r}; valid methods: "
                         f"{', '.join(PREPROCESSING_METHODS)}")
    images = np.asarray(images)
    if images.ndim < 2:
        raise ValueError(f"images must have shape (n, ...) with at least 2 "
                         f"dimensions, got shape {images.shape}")
    flat = images.reshape(len(images), -1).astype(np.float32)
    if key == "paper":
        flat /= np.float32(PAPER_PIXEL_SCALE)
        return flat
    flat /= np.float32(255.0)
    if key == "255":
        return flat
    mean = float(flat.mean(dtype=np.float64)) if mean is None else float(mean)
    std = float(flat.std(dtype=np.float64)) if std is None else float(std)
    if not std > 0:
        raise ValueError(f"standardize needs a positive std, got {std}")
    flat -= np.float32(mean)
    flat /= np.float32(std)
    return flat


def _preprocess_for(name, images, preprocessing):
    """:func:`preprocess` with the data set's training statistics for "standardize"."""
    mean, std = TRAIN_PIXEL_STATS[name]
    return preprocess(images, preprocessing, mean=mean, std=std)


def _check_preprocessing(preprocessing):
    if str(preprocessing).lower() not in PREPROCESSING_METHODS:
        raise ValueError(f"unknown preprocessing method {preprocessing!r}; valid "
                         f"methods: {', '.join(PREPROCESSING_METHODS)}")


def load_dataset(name="mnist", split="train", data_dir=None, preprocessing="paper",
                 download=True):
    """Load one split of MNIST or Fashion-MNIST as numpy arrays.

    Parameters
    ----------
    name : {"mnist", "fashion-mnist"}
    split : {"train", "test"}
    data_dir : str or os.PathLike, optional
        Searched first; see :func:`find_data_dir` for the search order.
    preprocessing : {"paper", "255", "standardize"}
        See :func:`preprocess`. ``"standardize"`` uses the data set's training
        pixel statistics :data:`TRAIN_PIXEL_STATS` for every split.
    download : bool
        If the files are found nowhere, try MXNet's downloader (needs network).

    Returns
    -------
    X : numpy.ndarray of float32, shape (n, 784)
        n = 60000 for "train", 10000 for "test".
    y : numpy.ndarray of int32, shape (n,)
        Labels in 0..9 (names in :data:`CLASS_NAMES`).

    Raises
    ------
    ValueError
        Unknown name, split or preprocessing.
    DataNotFoundError
        Files found nowhere (and download disabled or failed); the message
        lists every folder searched.
    IDXFormatError
        Malformed file, image/label count mismatch or label outside 0..9.
    """
    _check_preprocessing(preprocessing)
    images, labels = load_raw(name, split, data_dir, download)
    return _preprocess_for(name, images, preprocessing), labels


def _check_count(value, what, low, high=None):
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise ValueError(f"{what} must be an integer, got {value!r}")
    if value < low or (high is not None and value >= high):
        bounds = f"[{low}, {high})" if high is not None else f">= {low}"
        raise ValueError(f"{what} must be in {bounds}, got {value}")


def load_splits(name="mnist", data_dir=None, preprocessing="paper", num_validation=0,
                subset=None, seed=0, download=True):
    """Train, test and optional validation splits as numpy arrays.

    Parameters
    ----------
    name : {"mnist", "fashion-mnist"}
    data_dir : str or os.PathLike, optional
        See :func:`find_data_dir`.
    preprocessing : {"paper", "255", "standardize"}
        See :func:`load_dataset`.
    num_validation : int
        If > 0, the LAST ``num_validation`` training images become the
        "validation" split and are removed from "train" (the paper's
        50,000 / 10,000 split is ``num_validation=10000``). Must be in
        ``[0, n_train)``.
    subset : int, optional
        Keep only the first ``subset`` examples of each split (smoke runs).
    seed : int
        Unused: the splits are deterministic. Kept so that callers can pass one
        seed everywhere (see :func:`get_loaders`).
    download : bool
        See :func:`load_dataset`.

    Returns
    -------
    dict
        ``{"train": (X, y), "test": (X, y)}``, plus ``"validation": (X, y)``
        when ``num_validation > 0``; X float32 (n, 784), y int32 (n,).
    """
    del seed  # the split is deterministic (last images), nothing to shuffle
    _check_name(name)
    _check_preprocessing(preprocessing)
    if subset is not None:
        _check_count(subset, "subset", 1)
    raw_train = load_raw(name, "train", data_dir, download)
    _check_count(num_validation, "num_validation", 0, len(raw_train[0]))
    raw = {"test": load_raw(name, "test", data_dir, download)}
    n_train = len(raw_train[0]) - num_validation
    raw["train"] = tuple(array[:n_train] for array in raw_train)
    if num_validation > 0:
        raw["validation"] = tuple(array[n_train:] for array in raw_train)
    splits = {}
    for split, (images, labels) in raw.items():
        if subset is not None:
            images, labels = images[:subset], labels[:subset]
        splits[split] = (_preprocess_for(name, images, preprocessing), labels)
    return splits


def get_loaders(name="mnist", batch_size=128, data_dir=None, preprocessing="paper",
                num_validation=0, subset=None, ctx=None, seed=0, download=True):
    """:class:`ArrayLoader` for each split of :func:`load_splits`.

    Parameters
    ----------
    name, data_dir, preprocessing, num_validation, subset, download
        See :func:`load_splits`.
    batch_size : int
        Batch size of every loader.
    ctx : mxnet.Context, optional
        Where batches live; default ``mx.cpu()``.
    seed : int
        Seed of the training loader's shuffling.

    Returns
    -------
    dict of ArrayLoader
        Keys as in :func:`load_splits`. "train" is shuffled every epoch; the
        others are not. All keep their last, smaller batch.
    """
    splits = load_splits(name, data_dir=data_dir, preprocessing=preprocessing,
                         num_validation=num_validation, subset=subset, seed=seed,
                         download=download)
    return {split: ArrayLoader(X, y, batch_size, shuffle=(split == "train"), ctx=ctx,
                               seed=seed)
            for split, (X, y) in splits.items()}
