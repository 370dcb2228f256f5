"""The IDX file format of MNIST and Fashion-MNIST (LeCun et al.): one array of unsigned bytes
per file, gzip-compressed or raw, read with every size checked against the header."""
import gzip
import zlib
from pathlib import Path

import numpy as np

__all__ = ["IDXFormatError", "read_idx"]

_IDX_UINT8 = 0x08
_IDX_IMAGES_MAGIC = 0x00000803  # 2051: uint8, 3 dimensions
_IDX_LABELS_MAGIC = 0x00000801  # 2049: uint8, 1 dimension
_GZIP_MAGIC = b"\x1f\x8b"


class IDXFormatError(ValueError):
    """An IDX file is malformed: bad header, wrong size, corrupt gzip or bad labels."""


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
