"""What is where: one report of a data set's copies in the folders where it is looked for, each
file checked (:mod:`gluon_bbb.data.checks`), and the folder the loaders read. The loaders, the
fetcher's command and ``gluon-bbb data list|verify|fetch`` all read this report.

The folder read is, in the search order (:func:`gluon_bbb.data.datafolders.search_folders`):

1. the first of ``data_dir``'s folders that holds every file (the caller's choice, verified or
   not);
2. else the first folder whose files all verify;
3. else the first folder that holds every file, although one fails its check (a user's own
   copy; a warning names the file and why), except the download cache when the caller will
   download (the fetcher then sets the bad file aside and repairs the cache).

A folder holding every file but skipped for a verified one later in the order is named in one
warning line with the file and the reason.
"""
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import List, Optional, Sequence, Tuple

from . import checks, datafolders
from .sources import DataFile, files_of

__all__ = ["FileState", "FolderState", "DataSetState", "folder_state", "dataset_state",
           "warn_about"]

logger = logging.getLogger(__name__)
_warned = set()


@dataclass(frozen=True)
class FileState:
    """One data file in one folder.

    Attributes
    ----------
    data_file : DataFile
    path : pathlib.Path or None
        The copy found (``<name>`` or ``<name>.gz``): one that verifies, else the raw one, else
        the gzip one; None when neither is there.
    problem : str or None
        None when ``path`` verifies; else one line naming the file and what is wrong (missing,
        wrong content, unreadable).
    """

    data_file: DataFile
    path: Optional[Path]
    problem: Optional[str]

    @property
    def verified(self) -> bool:
        return self.path is not None and self.problem is None


@dataclass(frozen=True)
class FolderState:
    """Every file of a data set in one folder."""

    folder: Path
    files: Tuple[FileState, ...]

    @property
    def complete(self) -> bool:
        """Every file is there (verified or not)."""
        return all(state.path is not None for state in self.files)

    @property
    def present(self) -> bool:
        """Some file is there."""
        return any(state.path is not None for state in self.files)

    @property
    def verified(self) -> bool:
        """Every file is there and verifies."""
        return all(state.verified for state in self.files)

    def problems(self) -> List[str]:
        """One line per file that is missing or fails its check."""
        return [state.problem for state in self.files if state.problem is not None]

    def path_of(self, name: str) -> Optional[Path]:
        """The copy of the file named ``name`` (without ``.gz``)."""
        return next(state.path for state in self.files if state.data_file.name == name)


@dataclass(frozen=True)
class DataSetState:
    """A data set's report.

    Attributes
    ----------
    name : str
    searched : tuple of pathlib.Path
        Every folder where it is looked for, in order.
    folders : tuple of FolderState
        The folders looked into, in order (all of them with ``every_folder``, else up to the one
        used).
    used : FolderState or None
        The folder the loaders read (see the module docstring); None when none holds every file.
    """

    name: str
    searched: Tuple[Path, ...]
    folders: Tuple[FolderState, ...]
    used: Optional[FolderState]

    def skipped(self) -> List[FolderState]:
        """Folders before the one used that hold every file, one of which fails its check."""
        if self.used is None:
            return []
        before = self.folders[:self.folders.index(self.used)]
        return [state for state in before if state.complete and not state.verified]


def _file_state(folder, data_file):
    copies = [path for path in datafolders.copy_paths(folder, data_file.name) if path.is_file()]
    if not copies:
        return FileState(data_file, None, f"{folder / data_file.name}[.gz]: missing")
    problems = []
    for path in copies:
        problem = checks.problem_of(path, data_file)
        if problem is None:
            return FileState(data_file, path, None)
        problems.append(problem)
    return FileState(data_file, copies[0], "; ".join(problems))


def folder_state(folder, data_files: Sequence[DataFile]) -> FolderState:
    """Each of ``data_files`` in ``folder``, checked (a check already done is remembered)."""
    folder = Path(folder)
    if not folder.is_dir():
        return FolderState(folder, tuple(FileState(data_file, None, f"{folder / data_file.name}"
                                                   "[.gz]: missing") for data_file in data_files))
    return FolderState(folder, tuple(_file_state(folder, data_file) for data_file in data_files))


def dataset_state(name: str, data_dir=None, every_folder: bool = False,
                  will_download: bool = False) -> DataSetState:
    """Where data set ``name`` is, each file checked, and the folder the loaders read.

    Parameters
    ----------
    name : {"mnist", "fashion-mnist", "mushroom"}
    data_dir : str or os.PathLike, optional
        Searched first; see :func:`gluon_bbb.data.datafolders.explicit_dirs`.
    every_folder : bool
        Look into every folder (``gluon-bbb data list``), not only up to the one used.
    will_download : bool
        The caller downloads when no folder is used: a download cache that fails its check is
        then not used (the download repairs it).

    Returns
    -------
    DataSetState

    Raises
    ------
    ValueError
        Unknown ``name``.
    DataNotFoundError
        ``data_dir`` is given but does not exist.
    """
    data_files = files_of(name)
    searched = datafolders.search_folders(name, data_dir)
    explicit = datafolders.explicit_dirs(name, data_dir)
    folders, used = [], None
    for folder in searched:
        state = folder_state(folder, data_files)
        folders.append(state)
        if used is None and state.complete and (folder in explicit or state.verified):
            used = state
            if not every_folder:
                break
    if used is None:
        cache = datafolders.download_cache(name)
        used = next((state for state in folders if state.complete
                     and not (will_download and state.folder == cache)), None)
    return DataSetState(name, tuple(searched), tuple(folders), used)


def _warn_once(message):
    if message not in _warned:
        _warned.add(message)
        logger.warning("%s", message)


def warn_about(report: DataSetState) -> None:
    """Log, once per process each, one line per folder skipped for a verified one and one for
    an unverified folder about to be read, naming the files and why."""
    for state in report.skipped():
        _warn_once(f"{report.name}: skipped {state.folder}, a verified copy is in "
                   f"{report.used.folder}: " + "; ".join(state.problems()))
    if report.used is not None and not report.used.verified:
        _warn_once(f"{report.name}: reading {report.used.folder} although it fails its check: "
                   + "; ".join(report.used.problems())
                   + f" (gluon-bbb data fetch {report.name} downloads a verified copy)")
