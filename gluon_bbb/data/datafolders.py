"""Where a data set's IDX files are: the folders searched, in order, the folder downloads go to,
and the one-message error that lists them all (see :mod:`gluon_bbb.data` for the search order)."""
import os
from pathlib import Path

import mxnet as mx

from .._cache import user_cache_dir

__all__ = ["DATASETS", "SPLITS", "DATA_ENV_VAR", "DEBIAN_DATA_ROOT", "DataNotFoundError",
           "idx_filenames", "copy_paths", "idx_file", "check_name", "check_split", "mxnet_home", "download_root",
           "search_data_dir", "not_found_message", "find_data_dir"]

DATASETS = ("mnist", "fashion-mnist")
"""Names of the supported data sets."""

SPLITS = ("train", "test")
"""Splits stored on disk (a validation split is cut from "train", see
:func:`gluon_bbb.data.load_splits`)."""

DATA_ENV_VAR = "GLUON_BBB_DATA"
"""Environment variable naming a folder that holds ``mnist/`` and ``fashion-mnist/``."""

DEBIAN_DATA_ROOT = Path("/usr/share/datasets")
"""Where Debian's ``dataset-*`` packages install data sets (searched last)."""

_SPLIT_PREFIX = {"train": "train", "test": "t10k"}


class DataNotFoundError(FileNotFoundError):
    """A data set's files are in none of the searched folders."""


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
    check_split(split)
    prefix = _SPLIT_PREFIX[split]
    return prefix + "-images-idx3-ubyte", prefix + "-labels-idx1-ubyte"


def _all_idx_filenames():
    return [name for split in SPLITS for name in idx_filenames(split)]


def check_name(name):
    if name not in DATASETS:
        raise ValueError(f"unknown data set {name!r}; valid names: {', '.join(DATASETS)}")


def check_split(split):
    if split not in SPLITS:
        raise ValueError(f"unknown split {split!r}; valid splits: {', '.join(SPLITS)}")


def copy_paths(folder, base_name):
    """The two names a data file may have in ``folder``, raw first: ``base_name`` and
    ``base_name.gz`` (a gzip or zip file is told apart by its first bytes, not by its name)."""
    folder = Path(folder)
    return [folder / base_name, folder / (base_name + ".gz")]


def idx_file(folder, base_name):
    """Path of ``base_name`` or ``base_name.gz`` in ``folder`` (raw preferred), or None."""
    for candidate in copy_paths(folder, base_name):
        if candidate.is_file():
            return candidate
    return None


def _has_all_files(folder):
    return folder.is_dir() and all(idx_file(folder, base) is not None
                                   for base in _all_idx_filenames())


def mxnet_home():
    """MXNet's data folder: ``$MXNET_HOME``, by default ``~/.mxnet``."""
    return Path(mx.base.data_dir()).expanduser()


def download_root():
    """The folder that downloads go to, holding a folder per data set: ``$GLUON_BBB_DATA`` if
    set, else the per-user cache folder ``$XDG_CACHE_HOME/gluon_bbb/data`` (by default
    ``~/.cache/gluon_bbb/data``)."""
    env_root = os.environ.get(DATA_ENV_VAR)
    return Path(env_root).expanduser() if env_root else Path(user_cache_dir("data"))


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
    candidates.append(mxnet_home() / "datasets" / name)
    candidates.append(Path(DEBIAN_DATA_ROOT) / name)
    if not env_root:  # where downloads went (with $GLUON_BBB_DATA, searched above already)
        candidates.append(download_root() / name)
    return candidates


def search_data_dir(name, data_dir=None):
    """First candidate folder holding the four IDX files.

    Returns
    -------
    found : pathlib.Path or None
        The folder, or None when no candidate holds all four files.
    searched : list of pathlib.Path
        Every folder that was looked at, in order.
    """
    check_name(name)
    searched = _candidate_dirs(name, data_dir)
    for folder in searched:
        if _has_all_files(folder):
            return folder, searched
    return None, searched


def not_found_message(name, searched, download_note):
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
        ``$MXNET_HOME/datasets/<name>``, ``/usr/share/datasets/<name>``, then, without
        ``$GLUON_BBB_DATA``, the download cache ``~/.cache/gluon_bbb/data/<name>``) that
        holds all four files.

    Raises
    ------
    ValueError
        Unknown ``name``.
    DataNotFoundError
        ``data_dir`` is given but does not exist, or no folder holds the files
        (the message lists every folder searched).
    """
    found, searched = search_data_dir(name, data_dir)
    if found is None:
        raise DataNotFoundError(not_found_message(
            name, searched, "(find_data_dir does not download.)"))
    return found
