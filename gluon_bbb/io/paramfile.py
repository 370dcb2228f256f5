"""Gluon parameter files (``Block.save_parameters``), written atomically and read distrustfully:
parsed by :mod:`gluon_bbb.io.ndfile` and checked against the network before anything is loaded."""
import os

import mxnet as mx
import numpy as np
from mxnet import nd

from . import ndfile
from .._mxcompat import structural_parameters
from .checkpoint import MAX_PAYLOAD_BYTES, CheckpointError, atomic_write_bytes

__all__ = ["save_parameter_file", "load_parameter_file", "set_parameter_arrays",
           "structural_parameters", "NDFILE_OVERHEAD"]

#: Bytes an NDArray file may spend on headers and names beyond the values.
NDFILE_OVERHEAD = 64 * 2**10



def save_parameter_file(net, path):
    """Atomically write ``net``'s parameters as an ordinary Gluon parameter file.

    The file is what ``net.save_parameters(path)`` writes: ``net.load_parameters`` reads it
    without gluon_bbb, :func:`load_parameter_file` reads it distrustfully.
    """
    arrays = {name: param.data() for name, param in structural_parameters(net).items()}
    atomic_write_bytes(path, ndfile.dumps(arrays))


def load_parameter_file(net, path, ctx=None):
    """Load a Gluon parameter file (``save_parameters``) into ``net``, distrustfully.

    Like ``net.load_parameters(path, ctx)``, but the file is parsed by :mod:`gluon_bbb.io.ndfile`
    and checked against the network first: it must hold exactly the network's parameters,
    with their shapes (where the network knows them) and float dtypes.

    Parameters
    ----------
    net : gluon.Block, initialised or not
    path : str
    ctx : mx.Context, optional
        Where uninitialised parameters are created; default the CPU.

    Raises
    ------
    FileNotFoundError, CheckpointError
        A missing file; a damaged one, or one for another network, named.
    """
    path = os.fspath(path)
    if not os.path.isfile(path):
        raise FileNotFoundError(f"no parameter file at {path}")
    params = structural_parameters(net)
    limit = MAX_PAYLOAD_BYTES
    if all(param.shape and all(d > 0 for d in param.shape) for param in params.values()):
        limit = sum(int(np.prod(param.shape, dtype=object)) * 8 + 8 * len(param.shape) + 64
                    + len(name) for name, param in params.items()) + NDFILE_OVERHEAD
    if os.path.getsize(path) > limit:
        raise CheckpointError(f"{path} is {os.path.getsize(path)} bytes, more than the network's "
                              f"parameters can need ({limit}): refused unread")
    with open(path, "rb") as handle:
        payload = handle.read(limit + 1)
    try:
        arrays = ndfile.loads(payload)
    except ndfile.NDFileError as error:
        raise CheckpointError(f"{path} is not a Gluon parameter file ({error})") from None
    if not isinstance(arrays, dict) or any(a.dtype.kind != "f" for a in arrays.values()):
        raise CheckpointError(f"{path} is not a Gluon parameter file (it does not hold named "
                              "float arrays)")
    set_parameter_arrays(net, arrays, path, ctx)


def set_parameter_arrays(net, arrays, source, ctx=None):
    """Put named arrays into ``net``'s parameters, after checking they fit.

    Parameters
    ----------
    net : gluon.Block, initialised or not
    arrays : dict of str -> numpy.ndarray, keyed by the structural names
        (:func:`structural_parameters`); exactly the network's parameters
    source : str, named in errors (the file the arrays came from)
    ctx : mx.Context, optional
        Where uninitialised parameters are created; default the CPU.

    Raises
    ------
    CheckpointError
        Missing or unexpected names, or a shape the network does not have.
    """
    params = structural_parameters(net)
    missing, extra = sorted(set(params) - set(arrays)), sorted(set(arrays) - set(params))
    if missing or extra:
        raise CheckpointError(f"{source} does not fit the network: it lacks {missing[:5]} and has "
                              f"unexpected {extra[:5]}")
    for name, param in params.items():
        known = param.shape or ()
        stored = arrays[name].shape
        if len(known) != len(stored) or any(k not in (0, s) for k, s in zip(known, stored)):
            raise CheckpointError(f"{source} does not fit the network: {name} has shape {stored}, "
                                  f"the network {tuple(known)}")
    ctx = ctx or mx.cpu()
    for name, param in params.items():
        value = nd.array(arrays[name], ctx=ctx, dtype=arrays[name].dtype)
        try:
            param.data()
        except (RuntimeError, mx.gluon.parameter.DeferredInitializationError):
            param.shape = value.shape
            param.initialize(ctx=ctx, force_reinit=True)
        param.set_data(value)
