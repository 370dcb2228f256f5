"""Whether a file holds what a :class:`~gluon_bbb.data.sources.DataFile` must: the SHA-256 of
its decompressed content, whatever the compression (gzip, a zip archive holding the file as a
member, or none: told apart by the first bytes, not by the name).

The content is read in chunks and never beyond a bound a few times the expected size, so a
huge or endless stream (a zip bomb, a wrong file) is refused without filling memory or disk.
Text files (``DataFile.text``) are digested as canonical text: each line without ``\\n`` or
``\\r\\n``, blank lines dropped, each line ended by ``\\n``.
"""
import gzip
import hashlib
import os
import shutil
import zipfile
import zlib
from contextlib import contextmanager
from typing import BinaryIO, Iterator, Optional

from .sources import DataFile

__all__ = ["ChecksumError", "CHUNK_BYTES", "content_limit", "compression_of", "open_content",
           "read_content", "content_sha256", "check_content", "write_content"]

CHUNK_BYTES = 1 << 16
"""Bytes read at a time."""

_GZIP_MAGIC = b"\x1f\x8b"
_ZIP_MAGIC = b"PK\x03\x04"


class ChecksumError(ValueError):
    """A file does not hold the expected content (wrong, truncated or corrupt)."""


def content_limit(data_file: DataFile) -> int:
    """The most decompressed bytes read from a candidate for ``data_file``: twice its size (the
    canonical text may lose a carriage return per line) and a kibibyte."""
    return 2 * data_file.size + 1024


def compression_of(path) -> str:
    """"gzip", "zip" or "none", from the file's first bytes."""
    with open(path, "rb") as stream:
        head = stream.read(4)
    if head.startswith(_GZIP_MAGIC):
        return "gzip"
    if head == _ZIP_MAGIC:
        return "zip"
    return "none"


def _zip_member(archive, data_file, path):
    """The one member of ``archive`` named ``data_file.name`` (in any folder)."""
    members = [info for info in archive.infolist()
               if os.path.basename(info.filename) == data_file.name and not info.is_dir()]
    if len(members) != 1:
        raise ChecksumError(f"{path}: a zip archive with {len(members)} members named "
                            f"{data_file.name}, not 1")
    if members[0].file_size > content_limit(data_file):
        raise ChecksumError(f"{path}: its member {members[0].filename} holds "
                            f"{members[0].file_size} bytes, more than the "
                            f"{data_file.size} expected")
    return members[0]


@contextmanager
def open_content(path, data_file: DataFile) -> Iterator[BinaryIO]:
    """A binary stream of the decompressed content of ``path`` (see the module docstring).

    Raises
    ------
    ChecksumError
        A zip archive without exactly one member named ``data_file.name``, or whose member is
        far larger than expected; a file that is not a zip archive although it starts like one.
    """
    kind = compression_of(path)
    if kind == "gzip":
        with gzip.open(path, "rb") as stream:
            yield stream
    elif kind == "zip":
        try:
            archive = zipfile.ZipFile(path)
        except zipfile.BadZipFile as error:
            raise ChecksumError(f"{path}: not a readable zip archive ({error})") from None
        with archive, archive.open(_zip_member(archive, data_file, path)) as stream:
            yield stream
    else:
        with open(path, "rb") as stream:
            yield stream


def _chunks(stream, limit, path):
    """The stream's chunks, raising ChecksumError for a corrupt stream or past ``limit`` bytes."""
    total = 0
    while True:
        try:
            chunk = stream.read(CHUNK_BYTES)
        except (EOFError, OSError, zlib.error, zipfile.BadZipFile) as error:
            raise ChecksumError(f"{path}: corrupt or truncated ({type(error).__name__}: "
                                f"{error})") from None
        if not chunk:
            return
        total += len(chunk)
        if total > limit:
            raise ChecksumError(f"{path}: holds more than {limit} bytes once decompressed")
        yield chunk


class _CanonicalText:
    """A hash of text fed in chunks, as canonical lines (see the module docstring)."""

    def __init__(self, digest):
        self.digest, self.pending = digest, b""

    def update(self, chunk):
        lines = (self.pending + chunk).split(b"\n")
        self.pending = lines.pop()
        for line in lines:
            self._line(line)

    def _line(self, line):
        line = line.rstrip(b"\r")
        if line.strip():
            self.digest.update(line + b"\n")

    def hexdigest(self):
        self._line(self.pending)
        self.pending = b""
        return self.digest.hexdigest()


def read_content(path, data_file: DataFile, limit: Optional[int] = None) -> bytes:
    """The decompressed content of ``path`` (plain, gzip or a zip archive's member named
    ``data_file.name``), read in chunks and never beyond ``limit`` bytes.

    Parameters
    ----------
    path : str or os.PathLike
    data_file : DataFile
        What ``path`` should hold: its name picks the zip member.
    limit : int, optional
        The most bytes read. Default :func:`content_limit`.

    Returns
    -------
    bytes

    Raises
    ------
    ChecksumError
        Corrupt or truncated compression, a zip archive without exactly one such member, or more
        than ``limit`` bytes.
    OSError
        The file cannot be read.
    """
    limit = content_limit(data_file) if limit is None else limit
    with open_content(path, data_file) as stream:
        return b"".join(_chunks(stream, limit, path))


def content_sha256(path, data_file: DataFile) -> str:
    """SHA-256 (hex) of the decompressed content of ``path``, as ``data_file`` is checked (of
    the canonical text when ``data_file.text``).

    Raises
    ------
    ChecksumError
        Corrupt or truncated compression, or more than :func:`content_limit` bytes.
    OSError
        The file cannot be read.
    """
    digest = hashlib.sha256()
    sink = _CanonicalText(digest) if data_file.text else digest
    with open_content(path, data_file) as stream:
        for chunk in _chunks(stream, content_limit(data_file), path):
            sink.update(chunk)
    return sink.hexdigest()


def check_content(path, data_file: DataFile) -> None:
    """Raise :class:`ChecksumError`, in one line naming ``path``, unless it holds ``data_file``."""
    found = content_sha256(path, data_file)
    if found != data_file.sha256:
        raise ChecksumError(f"{path}: not {data_file.dataset}/{data_file.name} (the SHA-256 of "
                            f"its content is {found[:16]}..., expected "
                            f"{data_file.sha256[:16]}...): a wrong, changed or truncated file")


def write_content(path, data_file: DataFile, destination) -> None:
    """Write the decompressed content of ``path`` (checked already) to ``destination``."""
    with open_content(path, data_file) as stream, open(destination, "wb") as out:
        shutil.copyfileobj(stream, out, CHUNK_BYTES)
