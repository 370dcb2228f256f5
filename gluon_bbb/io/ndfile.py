"""MXNet's NDArray file format (``nd.save``, ``Block.save_parameters``), read and written in
Python, distrustfully.

MXNet's own loader (``nd.load``, ``Block.load_parameters``) parses a file in C++ and fails on a
damaged one with a raw ``MXNetError`` from deep inside the library; a crafted header can also
ask it for an arbitrarily large allocation. :func:`loads` checks every declared count, shape
and size against the bytes actually present before it allocates anything, and raises one
:class:`NDFileError` (a ValueError) that says what is wrong; :mod:`gluon_bbb.io.checkpoint` adds
the file's name.

The format (``src/ndarray/ndarray.cc`` of MXNet 1.x), little-endian::

    uint64 0x112, uint64 0                      list magic, reserved
    uint64 n, then n arrays, each:
        uint32 0xF993FAC9                       dense array, version 2
        int32 0                                 storage type: dense
        uint32 ndim, int64 dims[ndim]           shape (ndim >= 1)
        int32 dev_type, int32 dev_id            context it was saved from
        int32 type_flag                         dtype, see DTYPES
        prod(dims) * itemsize bytes             the values, C order
    uint64 m (0 or n), then m names, each: uint64 length, bytes (UTF-8)

Only this dense, version-2 layout is accepted: it is what MXNet 1.x writes for dense arrays
with at least one dimension, the only arrays gluon_bbb stores.
"""
import struct

import numpy as np

__all__ = ["DTYPES", "NDFileError", "dumps", "loads"]

LIST_MAGIC = 0x112
ARRAY_MAGIC_V2 = 0xF993FAC9
#: MXNet's type flags and the NumPy dtypes they stand for.
DTYPES = {0: "float32", 1: "float64", 2: "float16", 3: "uint8", 4: "int32", 5: "int8", 6: "int64"}
_FLAGS = {name: flag for flag, name in DTYPES.items()}
_CPU = 1


class NDFileError(ValueError):
    """The bytes are not an NDArray file of the layout in the module docstring."""


class _Reader:
    """Reads little-endian fields from bytes, refusing to read past the end."""

    def __init__(self, payload):
        self.payload, self.offset = memoryview(payload), 0

    def take(self, size, what):
        if size < 0 or self.offset + size > len(self.payload):
            raise NDFileError(f"truncated: {what} needs {size} bytes at offset {self.offset}, "
                              f"the file has {len(self.payload)}")
        chunk = self.payload[self.offset:self.offset + size]
        self.offset += size
        return chunk

    def unpack(self, fmt, what):
        return struct.unpack("<" + fmt, self.take(struct.calcsize("<" + fmt), what))


def loads(payload):
    """Parse an NDArray file.

    Parameters
    ----------
    payload : bytes

    Returns
    -------
    dict of str -> numpy.ndarray, or list of numpy.ndarray
        A dict when the file names its arrays (``nd.save`` of a dict, parameter files), a
        list when it does not. The arrays are copies, safe to keep.

    Raises
    ------
    NDFileError
        Anything that is not the dense version-2 layout, or any count, shape or size that the
        bytes do not hold.
    """
    reader = _Reader(payload)
    magic, _ = reader.unpack("QQ", "the header")
    if magic != LIST_MAGIC:
        raise NDFileError(f"not an MXNet NDArray file (magic {magic:#x}, expected {LIST_MAGIC:#x})")
    (count,) = reader.unpack("Q", "the array count")
    smallest = 4 + 4 + 4 + 8 + 4 + 4 + 4  # magic, stype, ndim, one dim, context, dtype
    if count * smallest > len(payload):
        raise NDFileError(f"declares {count} arrays, more than its {len(payload)} bytes can hold")
    arrays = [_read_array(reader, i) for i in range(count)]
    (num_names,) = reader.unpack("Q", "the name count")
    if num_names not in (0, count):
        raise NDFileError(f"holds {count} arrays but {num_names} names")
    names = []
    for i in range(num_names):
        (length,) = reader.unpack("Q", f"the length of name {i}")
        try:
            names.append(bytes(reader.take(length, f"name {i}")).decode("utf-8"))
        except UnicodeDecodeError:
            raise NDFileError(f"name {i} is not UTF-8") from None
    if reader.offset != len(payload):
        raise NDFileError(f"{len(payload) - reader.offset} unexpected bytes after the last name")
    if not num_names:
        return arrays
    if len(set(names)) != len(names):
        raise NDFileError("the same array name appears twice")
    return dict(zip(names, arrays))


def _read_array(reader, i):
    magic, storage = reader.unpack("Ii", f"the header of array {i}")
    if magic != ARRAY_MAGIC_V2:
        raise NDFileError(f"array {i} has magic {magic:#x}; only dense version-2 arrays "
                          f"({ARRAY_MAGIC_V2:#x}) are read")
    if storage != 0:
        raise NDFileError(f"array {i} has storage type {storage}; only dense arrays are read")
    (ndim,) = reader.unpack("I", f"the rank of array {i}")
    if not 1 <= ndim <= 32:
        raise NDFileError(f"array {i} has rank {ndim}; ranks 1 to 32 are read")
    shape = reader.unpack(f"{ndim}q", f"the shape of array {i}")
    if any(dim < 0 for dim in shape):
        raise NDFileError(f"array {i} has a negative dimension in {shape}")
    _, _, flag = reader.unpack("iii", f"the context and dtype of array {i}")
    if flag not in DTYPES:
        raise NDFileError(f"array {i} has unknown dtype flag {flag}")
    dtype = np.dtype(DTYPES[flag]).newbyteorder("<")
    size = 1
    for dim in shape:
        size *= dim
        if size * dtype.itemsize > len(reader.payload):
            raise NDFileError(f"array {i} declares shape {shape}, more than the file holds")
    values = reader.take(size * dtype.itemsize, f"the values of array {i} (shape {shape})")
    return np.frombuffer(values, dtype=dtype).reshape(shape).astype(dtype.newbyteorder("="))


def dumps(arrays):
    """The bytes of an NDArray file, as ``nd.save`` writes it.

    Parameters
    ----------
    arrays : dict of str -> array-like, or list of array-like
        NumPy arrays or NDArrays (``asnumpy`` is called), of rank >= 1 and a dtype of
        :data:`DTYPES`.

    Returns
    -------
    bytes, readable by :func:`loads`, ``nd.load`` and ``Block.load_parameters``.
    """
    names = list(arrays) if isinstance(arrays, dict) else []
    values = [arrays[name] for name in names] if names else list(arrays)
    parts = [struct.pack("<QQQ", LIST_MAGIC, 0, len(values))]
    for value in values:
        array = np.ascontiguousarray(value.asnumpy() if hasattr(value, "asnumpy") else value)
        if array.dtype.name not in _FLAGS or array.ndim < 1:
            raise ValueError(f"cannot store an array of dtype {array.dtype} and shape {array.shape}")
        parts.append(struct.pack(f"<IiI{array.ndim}qiii", ARRAY_MAGIC_V2, 0, array.ndim,
                                 *array.shape, _CPU, 0, _FLAGS[array.dtype.name]))
        parts.append(array.astype(array.dtype.newbyteorder("<"), copy=False).tobytes())
    parts.append(struct.pack("<Q", len(names)))
    for name in names:
        encoded = name.encode("utf-8")
        parts.append(struct.pack("<Q", len(encoded)) + encoded)
    return b"".join(parts)
