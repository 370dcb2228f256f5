"""The UCI Mushroom data set (Schlimmer 1987), the contexts of the paper's bandit (section 5.3).

The file ``agaricus-lepiota.data`` has one mushroom per line and no header: 23
comma-separated single letters, the class (``e`` edible, ``p`` poisonous) and then 22
categorical attributes (``?`` marks a missing value, kept as a category of its own).
:func:`load_mushroom` checks the format, naming the line of any problem, and one-hot
encodes the attributes with category sets taken from the data.

Without a path, the file is looked for in ``$GLUON_BBB_DATA/mushroom/`` (else in
``data/mushroom/`` under the working folder, then in the download cache
``~/.cache/gluon_bbb/data/mushroom/``) and, where it is in none, downloaded from UCI
(:func:`find_mushroom_file`, :mod:`gluon_bbb.data.fetch`).
"""
import io
import os
from collections import namedtuple
from pathlib import Path

import numpy as np

from . import digests, fetch, state
from .datafolders import DATA_ENV_VAR, DataNotFoundError
from .sources import files_of

__all__ = [
    "ATTRIBUTE_NAMES",
    "CLASS_LETTERS",
    "MushroomData",
    "MushroomFormatError",
    "FILE_NAME",
    "READ_LIMIT",
    "default_mushroom_path",
    "find_mushroom_file",
    "parse_mushroom_lines",
    "one_hot_encode",
    "load_mushroom",
]

#: The 22 attributes, in file order (columns 2-23), as named by the UCI description.
ATTRIBUTE_NAMES = (
    "cap-shape", "cap-surface", "cap-color", "bruises", "odor", "gill-attachment",
    "gill-spacing", "gill-size", "gill-color", "stalk-shape", "stalk-root",
    "stalk-surface-above-ring", "stalk-surface-below-ring", "stalk-color-above-ring",
    "stalk-color-below-ring", "veil-type", "veil-color", "ring-number", "ring-type",
    "spore-print-color", "population", "habitat",
)
#: Letters of the class column: edible, poisonous.
CLASS_LETTERS = ("e", "p")
NUM_COLUMNS = 1 + len(ATTRIBUTE_NAMES)
_MAX_REPORTED_PROBLEMS = 5

MushroomData = namedtuple("MushroomData", ["contexts", "edible", "categories", "feature_names"])
MushroomData.__doc__ = """The encoded data set.

Attributes
----------
contexts : numpy.ndarray of float32, (N, F)
    One-hot attributes, F = sum of the number of categories of each attribute.
edible : numpy.ndarray of bool, (N,)
categories : tuple of 22 str
    The categories (letters, sorted) of each attribute; column order of ``contexts``.
feature_names : list of F str
    ``"<attribute>=<letter>"`` for each column of ``contexts``.
"""


#: The data file of the UCI Mushroom data set.
FILE_NAME = "agaricus-lepiota.data"

#: The most bytes :func:`load_mushroom` reads (decompressed): 64 times UCI's file, room for a
#: user's own larger table, a bound for a compressed file that would fill memory.
READ_LIMIT = 64 * files_of("mushroom")[0].size


def default_mushroom_path():
    """Where the data file is looked for by default: ``$GLUON_BBB_DATA/mushroom/`` (the folder
    that also holds ``mnist/``), else ``data/mushroom/`` under the working folder."""
    return os.path.join(os.environ.get(DATA_ENV_VAR, "data"), "mushroom", FILE_NAME)


def find_mushroom_file(download: bool = True, progress: bool = True) -> Path:
    """The mushroom file the loaders read (:mod:`gluon_bbb.data.state`): the first verified copy
    in ``$GLUON_BBB_DATA/mushroom/`` (else ``data/mushroom/``, then the download cache), else the
    first copy there (with a warning), else downloaded into ``$GLUON_BBB_DATA/mushroom/`` or the
    download cache (see :mod:`gluon_bbb.data.fetch`). A copy in the download cache that fails its
    check is downloaded again when ``download`` is on, the bad one set aside.

    Parameters
    ----------
    download : bool
        Download the file when it is nowhere.
    progress : bool
        Show a progress bar while downloading.

    Returns
    -------
    pathlib.Path

    Raises
    ------
    DataNotFoundError
        The file is nowhere and downloading is off or failed; the message names the folders
        searched and, after a download, every source tried and why it failed.
    """
    report = state.dataset_state("mushroom", will_download=download)
    state.warn_about(report)
    if report.used is not None:
        return report.used.files[0].path
    places = ", ".join(str(folder / FILE_NAME) for folder in report.searched)
    advice = (f"set {DATA_ENV_VAR} to the folder holding mushroom/{FILE_NAME}, or download "
              f"{FILE_NAME} from the UCI Machine Learning Repository (Mushroom data set) and "
              "pass its path")
    if not download:
        raise DataNotFoundError(f"mushroom data not found at {places}: {advice}")
    try:
        folder = fetch.fetch("mushroom", progress=progress)
    except (fetch.FetchError, OSError) as error:
        raise DataNotFoundError(f"mushroom data not found at {places}, and {error}") from error
    return state.folder_state(folder, files_of("mushroom")).files[0].path


class MushroomFormatError(ValueError):
    """The mushroom file does not have the format of ``agaricus-lepiota.data``."""


def _line_problem(fields):
    """What is wrong with one line's fields, or None."""
    if len(fields) != NUM_COLUMNS:
        return f"expected {NUM_COLUMNS} comma-separated values, found {len(fields)}"
    bad = [(column + 1, value) for column, value in enumerate(fields)
           if not (len(value) == 1 and (value.isascii() and value.isalpha() or value == "?"))]
    if bad:
        column, value = bad[0]
        return f"column {column} is {value!r}; every value must be a single letter or '?'"
    if fields[0] not in CLASS_LETTERS:
        return f"class (column 1) is {fields[0]!r}; expected 'e' (edible) or 'p' (poisonous)"
    return None


def parse_mushroom_lines(lines, source="<lines>"):
    """Check and split the lines of a mushroom file.

    Parameters
    ----------
    lines : iterable of str
        Without or with line endings; trailing blank lines are ignored.
    source : str
        Names the file in error messages.

    Returns
    -------
    classes : numpy.ndarray of str, (N,), 'e' or 'p'
    attributes : numpy.ndarray of str, (N, 22)

    Raises
    ------
    MushroomFormatError
        Naming the line number (from 1) of up to five problems: a wrong number of values,
        a value that is not a single letter or '?', a class other than 'e'/'p', a blank line
        before the end, or no data at all.
    """
    lines = [line.rstrip("\r\n") for line in lines]
    while lines and not lines[-1].strip():
        lines.pop()
    if not lines:
        raise MushroomFormatError(f"{source}: no data lines")
    rows, problems = [], []
    for number, line in enumerate(lines, start=1):
        fields = [value.strip() for value in line.split(",")]
        problem = "blank line" if not line.strip() else _line_problem(fields)
        if problem:
            problems.append(f"{source}:{number}: {problem}")
        rows.append(fields)
    if problems:
        shown = "\n  ".join(problems[:_MAX_REPORTED_PROBLEMS])
        more = len(problems) - _MAX_REPORTED_PROBLEMS
        raise MushroomFormatError(
            f"{len(problems)} malformed line(s) in the mushroom data:\n  {shown}"
            + (f"\n  ... and {more} more" if more > 0 else ""))
    table = np.array(rows, dtype="<U1")
    return table[:, 0], table[:, 1:]


def one_hot_encode(attributes):
    """One-hot encode categorical columns, with each column's categories taken from the data.

    Parameters
    ----------
    attributes : array_like of str, (N, A)

    Returns
    -------
    encoded : numpy.ndarray of float32, (N, sum_a K_a), exactly A ones per row
    categories : tuple of A str
        The K_a sorted categories of each column, concatenated into one string each.
    """
    attributes = np.asarray(attributes)
    if attributes.ndim != 2 or attributes.shape[0] == 0:
        raise ValueError(f"attributes must have shape (N, A) with N >= 1, got {attributes.shape}")
    blocks, categories = [], []
    for column in attributes.T:  # one pass per attribute, vectorised over mushrooms
        values, codes = np.unique(column, return_inverse=True)
        blocks.append(np.eye(len(values), dtype=np.float32)[codes])
        categories.append("".join(values))
    return np.concatenate(blocks, axis=1), tuple(categories)


def load_mushroom(path=None, download=True):
    """Read, check and encode ``agaricus-lepiota.data``.

    Parameters
    ----------
    path : str or os.PathLike, optional
        The file, plain, gzip-compressed or a zip archive holding ``agaricus-lepiota.data`` (as
        UCI serves it; told apart by the first bytes, as ``gluon-bbb data verify`` does); it is
        read in place, never copied. Default :func:`find_mushroom_file`.
    download : bool
        Without ``path``: download the file when it is nowhere (:func:`find_mushroom_file`).

    Returns
    -------
    MushroomData

    Raises
    ------
    FileNotFoundError
        ``path`` is not a file (a DataNotFoundError without ``path``: see
        :func:`find_mushroom_file`).
    MushroomFormatError
        See :func:`parse_mushroom_lines`.
    ValueError
        A corrupt compressed file, a zip archive without exactly one ``agaricus-lepiota.data``,
        or more than :data:`READ_LIMIT` bytes (a :class:`~gluon_bbb.data.digests.ChecksumError`).
    """
    path = find_mushroom_file(download) if path is None else Path(path)
    if not path.is_file():
        raise FileNotFoundError(
            f"mushroom data not found at {path}: set {DATA_ENV_VAR} to the folder holding "
            f"mushroom/{FILE_NAME}, or download {FILE_NAME} from the UCI Machine Learning "
            "Repository (Mushroom data set) and pass its path")
    content = digests.read_content(path, files_of("mushroom")[0], limit=READ_LIMIT)
    lines = io.TextIOWrapper(io.BytesIO(content), encoding="utf-8", errors="replace")
    classes, attributes = parse_mushroom_lines(lines, source=str(path))
    contexts, categories = one_hot_encode(attributes)
    feature_names = [f"{name}={letter}" for name, letters in zip(ATTRIBUTE_NAMES, categories)
                     for letter in letters]
    return MushroomData(contexts, classes == "e", categories, feature_names)
