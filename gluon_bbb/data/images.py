"""MNIST and Fashion-MNIST as arrays and batches: the four IDX files of a data set read (found or
fetched first), checked, preprocessed (the paper's pixels / 126, [0, 1] or standardized), split
into training, validation and test sets, and served by :class:`~gluon_bbb.data.loaders.ArrayLoader`.
Every public name here is importable from :mod:`gluon_bbb.data`, whose docstring says where the
files are looked for and where they come from."""
from __future__ import annotations

from typing import Optional, Union

import mxnet as mx
import numpy as np

from . import datafolders, fetch, state
from .datafolders import DataNotFoundError, idx_filenames
from .sources import files_of
from .idx import IDXFormatError, read_idx
from .loaders import ArrayLoader

__all__ = ["CLASS_NAMES", "PREPROCESSING_METHODS", "TRAIN_PIXEL_STATS", "NUM_CLASSES", "IMAGE_SHAPE",
           "PAPER_PIXEL_SCALE", "find_or_fetch", "preprocess", "load_raw", "load_dataset",
           "load_splits", "get_loaders"]

CLASS_NAMES = {
    "mnist": [str(digit) for digit in range(10)],
    "fashion-mnist": [
        "T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
        "Sandal", "Shirt", "Sneaker", "Bag", "Ankle boot",
    ],
}
"""Human-readable name of each label 0..9, per data set."""

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

NUM_CLASSES = 10
IMAGE_SHAPE = (28, 28)
PAPER_PIXEL_SCALE = 126.0  # Blundell et al. (2015) divide pixel values by 126.


# ----------------------------------------------------------------------------
# Loading
# ----------------------------------------------------------------------------

def _read_split(files, split):
    """Read and check the images and labels of one split (``files``: a
    :class:`~gluon_bbb.data.state.FolderState`).

    Returns
    -------
    images : numpy.ndarray of uint8, shape (n, 28, 28)
    labels : numpy.ndarray of int32, shape (n,)
    """
    images_name, labels_name = idx_filenames(split)
    images_path = files.path_of(images_name)
    labels_path = files.path_of(labels_name)
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
    datafolders.check_name(name)
    datafolders.check_split(split)
    return _read_split(_found_or_fetched(name, data_dir, download), split)


def find_or_fetch(name: str = "mnist", data_dir=None, download: bool = True,
                  progress: bool = True):
    """The folder holding the four IDX files of a data set: the first in search order (see
    :func:`find_data_dir`), else downloaded (:func:`gluon_bbb.data.fetch.fetch`).

    Parameters
    ----------
    name : {"mnist", "fashion-mnist"}
    data_dir : str or os.PathLike, optional
        Searched first; see :func:`find_data_dir`.
    download : bool
        Download the files when no folder holds them.
    progress : bool
        Show a progress bar while downloading.

    Returns
    -------
    pathlib.Path

    Raises
    ------
    ValueError
        Unknown ``name``.
    DataNotFoundError
        The files are nowhere, and downloading is off or failed; the message lists every
        folder searched and, after a download, every source tried and why it failed.
    """
    return _found_or_fetched(name, data_dir, download, progress).folder


def _found_or_fetched(name, data_dir, download, progress=True):
    """:func:`find_or_fetch`'s folder, as a :class:`~gluon_bbb.data.state.FolderState`."""
    datafolders.check_name(name)
    report = state.dataset_state(name, data_dir, will_download=download)
    state.warn_about(report)
    if report.used is not None:
        return report.used
    if not download:
        raise DataNotFoundError(datafolders.not_found_message(
            name, report.searched, "Downloading was disabled (download=False)."))
    try:
        folder = fetch.fetch(name, progress=progress)
    except (fetch.FetchError, OSError) as err:  # every source failed, or the folder is read-only
        raise DataNotFoundError(datafolders.not_found_message(
            name, report.searched, "Downloading failed: "
            + getattr(err, "reasons", str(err)) + ".")) from err
    return state.folder_state(folder, files_of(name))


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
        If the files are found nowhere, download them (:func:`gluon_bbb.data.fetch.fetch`:
        verified, into ``$GLUON_BBB_DATA/<name>`` or ``~/.cache/gluon_bbb/data/<name>``).

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
    datafolders.check_name(name)
    _check_preprocessing(preprocessing)
    if subset is not None:
        _check_count(subset, "subset", 1)
    files = _found_or_fetched(name, data_dir, download)
    raw_train = _read_split(files, "train")
    _check_count(num_validation, "num_validation", 0, len(raw_train[0]))
    raw = {"test": _read_split(files, "test")}
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


def get_loaders(name: str = "mnist", batch_size: int = 128, data_dir: Optional[str] = None,
                preprocessing: str = "paper", num_validation: int = 0,
                subset: Optional[int] = None, ctx: Union[mx.Context, str, None] = None,
                seed: int = 0, download: bool = True) -> dict:
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
