"""A pruned network stored sparsely: the size Table 2's pruning buys (Blundell et al. 2015,
section 5.1), as a file anyone can check.

Each pruned tensor is kept in compressed sparse row (CSR) form over its first axis, the
layout of ``scipy.sparse.csr_matrix``: a tensor of shape (R, ...) is viewed as an R x C
matrix (C the product of the other axes) and stored as

``<name>:indptr``
    (R + 1,) int32: row r's nonzero values are ``values[indptr[r]:indptr[r + 1]]``;
``<name>:indices``
    (nnz,) column of each nonzero value, increasing within a row; uint16 when C <= 65,536,
    else int32;
``<name>:values``
    (nnz,) the nonzero values, in the tensor's dtype.

Tensors that are not pruned (biases, by default) are stored dense under their own name. The
file is an ordinary :mod:`gluon_bbb.io.checkpoint` file (``kind`` ``"sparse-network"``), so it is
as safe to receive as a checkpoint: :func:`read_sparse` checks every index before it builds a
dense array, and reports a bad file in one line.

For a float32 weight matrix with a fraction f of its N values removed, the CSR form takes
about (1 - f) * N * (4 + 2) bytes against 4 * N dense: it pays from f = 1/3 on.
"""
import numpy as np

from .checkpoint import MAX_PAYLOAD_BYTES, CheckpointError, read_checkpoint, write_checkpoint

__all__ = ["KIND", "to_csr", "from_csr", "sparse_nbytes", "write_sparse", "read_sparse"]

#: The ``kind`` in the metadata of a file written by :func:`write_sparse`.
KIND = "sparse-network"
_PARTS = ("indptr", "indices", "values")
#: Largest column count whose indices fit in uint16.
_UINT16_COLUMNS = 2 ** 16


def _as_matrix(array):
    array = np.asarray(array)
    if array.ndim < 1:
        raise ValueError(f"a tensor to store sparsely needs at least one axis, got shape {array.shape}")
    rows = array.shape[0]
    return array.reshape(rows, -1) if rows else array.reshape(0, int(np.prod(array.shape[1:])))


def to_csr(array):
    """The CSR parts of one tensor.

    Parameters
    ----------
    array : numpy.ndarray, shape (R, ...)

    Returns
    -------
    indptr : (R + 1,) int32
    indices : (nnz,) uint16 or int32, the column within the (R, C) view
    values : (nnz,) the nonzero values, dtype of ``array``
    """
    matrix = _as_matrix(array)
    rows, columns = np.nonzero(matrix)  # row-major order: columns increase within a row
    indptr = np.zeros(matrix.shape[0] + 1, dtype=np.int32)
    np.cumsum(np.bincount(rows, minlength=matrix.shape[0]), out=indptr[1:])
    index_dtype = np.uint16 if matrix.shape[1] <= _UINT16_COLUMNS else np.int32
    return indptr, columns.astype(index_dtype), matrix[rows, columns]


def from_csr(indptr, indices, values, shape, source="the sparse arrays"):
    """The dense tensor of shape ``shape`` whose CSR parts are given, checked first.

    Raises
    ------
    ValueError
        Parts that do not describe a tensor of that shape (named with ``source``).
    """
    shape = tuple(int(d) for d in shape)
    if not shape or any(d < 0 for d in shape):
        raise ValueError(f"{source}: bad shape {shape}")
    num_rows = shape[0]
    num_columns = int(np.prod(shape[1:], dtype=np.int64))
    indptr, indices, values = np.asarray(indptr), np.asarray(indices), np.asarray(values)
    if indptr.shape != (num_rows + 1,) or indptr.dtype.kind not in "iu":
        raise ValueError(f"{source}: indptr must be {num_rows + 1} integers, got {indptr.dtype} "
                         f"{indptr.shape}")
    nnz = len(values)
    if values.ndim != 1 or indices.shape != (nnz,) or indices.dtype.kind not in "iu":
        raise ValueError(f"{source}: indices and values must be two vectors of one length, got "
                         f"{indices.shape} and {values.shape}")
    steps = np.diff(indptr.astype(np.int64))
    if indptr[0] != 0 or indptr[-1] != nnz or np.any(steps < 0):
        raise ValueError(f"{source}: indptr must rise from 0 to the {nnz} values")
    columns = indices.astype(np.int64)
    if nnz and (columns.min() < 0 or columns.max() >= num_columns):
        raise ValueError(f"{source}: a column index lies outside [0, {num_columns})")
    rows = np.repeat(np.arange(num_rows), steps)
    if nnz > 1 and np.any((np.diff(columns) <= 0) & (rows[1:] == rows[:-1])):
        raise ValueError(f"{source}: column indices must increase within each row")
    dense = np.zeros((num_rows, num_columns), dtype=values.dtype)
    dense[rows, columns] = values
    return dense.reshape(shape)


def sparse_nbytes(arrays, pruned):
    """Bytes of array data :func:`write_sparse` stores for ``arrays``.

    Parameters
    ----------
    arrays : dict of str -> numpy.ndarray
    pruned : set of str, the names stored in CSR form (the others dense)

    Returns
    -------
    int, the values, indices and row pointers (the file adds a small fixed header)
    """
    total = 0
    for name, array in arrays.items():
        parts = to_csr(array) if name in pruned else (np.asarray(array),)
        total += sum(part.nbytes for part in parts)
    return int(total)


def write_sparse(path, arrays, pruned):
    """Atomically write ``arrays``, those named in ``pruned`` in CSR form.

    Parameters
    ----------
    path : str
    arrays : dict of str -> numpy.ndarray (or NDArray), e.g. a network's parameters by name
    pruned : iterable of str, names of ``arrays`` to store sparsely
    """
    pruned = set(pruned)
    unknown = sorted(pruned - set(arrays))
    if unknown:
        raise ValueError(f"no arrays named {unknown} to store sparsely")
    stored, shapes = {}, {}
    for name, array in arrays.items():
        array = array.asnumpy() if hasattr(array, "asnumpy") else np.asarray(array)
        if ":" in name:
            raise ValueError(f"array names may not contain ':', got {name!r}")
        if name in pruned:
            for part, value in zip(_PARTS, to_csr(array)):
                stored[f"{name}:{part}"] = value
            shapes[name] = list(array.shape)
        else:
            stored[name] = array
    write_checkpoint(path, stored, {"kind": KIND, "sparse_shapes": shapes})


def read_sparse(path, expected=None):
    """The dense arrays of a file written by :func:`write_sparse`, checked.

    Parameters
    ----------
    path : str
    expected : dict of str -> tuple, optional
        Name -> shape of the arrays the caller needs; the file must hold exactly these
        (checked before any array is built). Without it, the dense arrays may take at most
        :data:`gluon_bbb.io.checkpoint.MAX_PAYLOAD_BYTES`.

    Returns
    -------
    dict of str -> numpy.ndarray

    Raises
    ------
    FileNotFoundError, CheckpointError
        A missing file, or one that is not such a file, damaged, or for other arrays (named).
    """
    stored = read_checkpoint(path)
    metadata = stored.metadata
    shapes = metadata.get("sparse_shapes")
    if metadata.get("kind") != KIND or not isinstance(shapes, dict):
        raise CheckpointError(f"{path} is not a sparsely stored network (kind "
                              f"{metadata.get('kind')!r})")
    dense = {name: value for name, value in stored.arrays.items() if ":" not in name}
    parts = set(stored.arrays) - set(dense)
    for name, shape in shapes.items():
        names = {f"{name}:{part}" for part in _PARTS}
        if not (isinstance(shape, list) and all(isinstance(d, int) and d >= 0 for d in shape)
                and shape) or names - parts or name in dense:
            raise CheckpointError(f"{path}: the sparse array {name!r} is incomplete or has a bad shape")
        parts -= names
    if parts:
        raise CheckpointError(f"{path} holds sparse parts of no listed array: {sorted(parts)[:3]}")
    # Shapes are checked before any dense array is built: a crafted shape could ask for any size.
    declared = dict({name: tuple(value.shape) for name, value in dense.items()},
                    **{name: tuple(shape) for name, shape in shapes.items()})
    if expected is not None:
        wanted = {name: tuple(shape) for name, shape in expected.items()}
        if declared != wanted:
            missing = sorted(set(wanted) - set(declared))
            extra = sorted(set(declared) - set(wanted))
            wrong = sorted(n for n in set(declared) & set(wanted) if declared[n] != wanted[n])
            raise CheckpointError(f"{path} does not fit this network: missing {missing[:3]}, "
                                  f"unexpected {extra[:3]}, other shapes {wrong[:3]}")
    dense_bytes = sum(int(np.prod(shape, dtype=object)) * stored.arrays[f"{name}:values"].itemsize
                      for name, shape in shapes.items())
    if dense_bytes > MAX_PAYLOAD_BYTES:
        raise CheckpointError(f"{path} declares {dense_bytes} bytes of dense arrays, more than "
                              f"{MAX_PAYLOAD_BYTES}: refused")
    arrays = dict(dense)
    for name, shape in shapes.items():
        try:
            arrays[name] = from_csr(*(stored.arrays[f"{name}:{part}"] for part in _PARTS), shape,
                                    source=f"{path}: {name}")
        except ValueError as error:
            raise CheckpointError(str(error)) from None
    return arrays
