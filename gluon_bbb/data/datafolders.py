"""Where a data set's IDX files are: the folders searched, in order, the folder downloads go to,
and the one-message error that lists them all (see :mod:`gluon_bbb.data` for the search order)."""
import os
from pathlib import Path

import mxnet as mx

from .._cache import user_cache_dir

__all__ = ["DATASETS", "SPLITS", "DATA_ENV_VAR", "DEBIAN_DATA_ROOT", "DataNotFoundError",
           "idx_filenames", "copy_paths", "idx_file", "check_name", "check_split", "mxnet_home",
           "download_root", "download_cache", "explicit_dirs", "search_folders", "search_data_dir",
           "not_found_message", "find_data_dir"]

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


def mxnet_home():
    """MXNet's data folder: ``$MXNET_HOME``, by default ``~/.mxnet``."""
    return Path(mx.base.data_dir()).expanduser()


def download_root():
    """The folder that downloads go to, holding a folder per data set: ``$GLUON_BBB_DATA`` if
    set, else the per-user cache folder ``$XDG_CACHE_HOME/gluon_bbb/data`` (by default
    ``~/.cache/gluon_bbb/data``)."""
    env_root = os.environ.get(DATA_ENV_VAR)
    return Path(env_root).expanduser() if env_root else Path(user_cache_dir("data"))


def download_cache(name):
    """The download cache's folder of data set ``name``, ``$XDG_CACHE_HOME/gluon_bbb/data/<name>``
    (by default ``~/.cache/gluon_bbb/data/<name>``), whether or not ``$GLUON_BBB_DATA`` is set."""
    return Path(user_cache_dir("data")) / name


def explicit_dirs(name, data_dir):
    """The folders that ``data_dir`` names for data set ``name``: ``data_dir/<name>``, then
    ``data_dir`` itself unless its name says it holds another data set (none without it).

    Raises
    ------
    DataNotFoundError
        ``data_dir`` is given but does not exist.
    """
    if data_dir is None:
        return []
    data_dir = Path(data_dir).expanduser()
    if not data_dir.is_dir():
        raise DataNotFoundError(f"data_dir {str(data_dir)!r} does not exist "
                                f"(or is not a folder)")
    # Accept the folder holding the files directly, unless its name says it
    # holds another data set (data_dir=".../mnist" with name="fashion-mnist").
    others = set(DATASETS + ("mushroom",)) - {name}
    return [data_dir / name] + ([] if data_dir.name in others else [data_dir])


def search_folders(name, data_dir=None):
    """Every folder where data set ``name`` is looked for, in order (see :mod:`gluon_bbb.data`):
    ``data_dir``'s, ``$GLUON_BBB_DATA/<name>``, then for MNIST and Fashion-MNIST MXNet's cache
    and Debian's folder, for the mushrooms ``data/mushroom`` without ``$GLUON_BBB_DATA``; last,
    without ``$GLUON_BBB_DATA``, the download cache.

    Raises
    ------
    DataNotFoundError
        ``data_dir`` is given but does not exist.
    """
    candidates = explicit_dirs(name, data_dir)
    env_root = os.environ.get(DATA_ENV_VAR)
    if env_root:
        candidates.append(Path(env_root).expanduser() / name)
    if name == "mushroom":
        if not env_root:
            candidates.append(Path("data") / name)
    else:
        candidates.append(mxnet_home() / "datasets" / name)
        candidates.append(Path(DEBIAN_DATA_ROOT) / name)
    if not env_root:  # where downloads went (with $GLUON_BBB_DATA, searched above already)
        candidates.append(download_cache(name))
    return candidates


def search_data_dir(name, data_dir=None):
    """The folder the loaders read data set ``name`` from, without downloading (see
    :mod:`gluon_bbb.data.state` for the rule: a verified copy wins over one that fails its check).

    Returns
    -------
    found : pathlib.Path or None
        The folder, or None when no candidate holds all four files.
    searched : list of pathlib.Path
        Every folder that was looked at, in order.
    """
    from .state import dataset_state  # the report checks files; this module only lists folders
    check_name(name)
    report = dataset_state(name, data_dir)
    return (None if report.used is None else report.used.folder), list(report.searched)


def not_found_message(name, searched, download_note):
    places = "\n".join(f"  - {folder}" for folder in searched)
    files = ", ".join(_all_idx_filenames())
    return (
        f"could not find the {name!r} data set. Looked for its four IDX files "
        f"({files}; raw or .gz) in:\n{places}\n{download_note}\n"
        f"To fix: pass data_dir='/path/to/{name}' (or its parent folder), set "
        f"{DATA_ENV_VAR}=/path/holding/{name}/ (a folder containing mnist/ and "
        f"fashion-mnist/), place the files in one of the folders listed above, or set "
        f"GLUON_BBB_MIRROR to a server laid out like such a folder.")


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
