"""The one module that reaches into MXNet's and Optuna's private attributes, and that supplies
what MXNet 1.9.1 reads from numpy and the standard library and newer releases removed.

**Private attributes.** mxnet 1.9.1 keeps a few things gluon_bbb needs only in private
attributes: the arrays behind a Gluon ``Parameter``, a ``Dense`` or ``Conv2D`` layer's settings,
the arrays of its MNIST dataset, the structural parameter names that ``save_parameters`` writes,
and the optimizer state of a ``gluon.Trainer``. Optuna 5 has no public accessor for a trial's id.
Every access is a function here with the reason it is needed; ``tests/core/test_mxcompat.py``
pins the behaviour each one relies on, so an MXNet or Optuna that changes it fails there first.
No other module touches another object's private attributes (``tests/test_architecture.py``
checks).

**Stand-ins for removed names.** MXNet 1.9.1 (the last MXNet 1.x) was written against numpy 1.x
and a Python with ``distutils``. Importing it breaks on numpy 1.24 (``np.bool`` removed), on
numpy 2.x (about twenty names removed by NEP 52) and on Python 3.12 (``distutils`` removed);
upstream's fix was never merged. :data:`NUMPY_SHIMS` lists each name MXNet reads from numpy, the
numpy versions that lack it, what stands in for it and the MXNet line that reads it;
:data:`DISTUTILS_SHIM` is setuptools' copy of ``distutils`` on Python 3.12 and later (setuptools
is a dependency there). :func:`apply` installs them, setting a name only where numpy lacks it:
nothing numpy still has is replaced (numpy 2 has ``np.bool`` again, as ``np.bool_``, and keeps
it). ``import gluon_bbb`` calls it first. So that ``import mxnet`` works when a student types it
*before* ``import gluon_bbb``, the package installs a startup hook at the top of site-packages,
as setuptools does for ``distutils``: the module ``_gluon_bbb_mxcompat_hook`` and the one-line
startup file ``gluon_bbb-mxnet-compat.pth`` that imports it. Its finder answers only for
``mxnet`` and, just before MXNet executes, loads this file by its path (neither the package nor
anything else on ``sys.path``) and calls :func:`apply`; see that module for how it fails soft.
``GLUON_BBB_NUMPY_COMPAT=0`` switches the startup file off. ``tests/core/test_mxcompat_numpy.py``
pins every stand-in as still needed (MXNet's line still reads it; the installed numpy lacks
exactly the names whose version ranges cover it) and all of them as enough (after :func:`apply`,
nothing MXNet reads at import or names in its sources is missing).

This module imports only the standard library, and numpy when :func:`apply` runs.
"""
from __future__ import annotations

import sys
import types
import warnings
from typing import Any, Callable, List, NamedTuple, Optional, Tuple

__all__ = ["parameter_arrays", "set_parameter_array", "dense_settings", "conv_settings",
           "structural_parameters", "trainer_updaters", "trainer_parameters",
           "update_counts", "set_update_counts", "trial_id",
           "NumpyShim", "NUMPY_SHIMS", "DISTUTILS_SHIM", "apply", "added",
           "missing_from_numpy", "numpy_version"]


# ---------------------------------------------------------------------------- Gluon
def parameter_arrays(param):
    """The list of NDArrays behind ``param`` (one per context), or None before it is
    initialised: ``Parameter._data``. ``param.data()`` would raise before initialisation and
    copies nothing, but gives no way to replace the array."""
    return param._data  # noqa: SLF001


def set_parameter_array(param, array):
    """Make ``param.data()`` return ``array`` itself, no copy, on its one context.

    ``Parameter.set_data`` copies the values and cuts the autograd graph from (mu, rho) to a
    sample; handing the sampled array itself to the network keeps that graph, so gradients of
    the loss reach mu and rho (the reparameterisation of section 3.2)."""
    param._data[0] = array  # noqa: SLF001


def dense_settings(layer):
    """A ``gluon.nn.Dense`` layer's ``{'num_hidden': units, 'flatten': bool}``: the layer keeps
    its arguments only in ``_units`` and ``_flatten``."""
    return {"num_hidden": layer._units, "flatten": layer._flatten}  # noqa: SLF001


def conv_settings(layer):
    """A copy of a ``gluon.nn.Conv2D`` layer's convolution arguments (kernel, stride, dilate,
    pad, num_filter, num_group, no_bias, layout): the layer keeps them only in ``_kwargs``."""
    return dict(layer._kwargs)  # noqa: SLF001


def structural_parameters(net):
    """name -> Parameter under the structural names ``Block.save_parameters`` writes (e.g.
    ``0.weight``), which only ``_collect_params_with_prefix`` gives."""
    return net._collect_params_with_prefix()  # noqa: SLF001


# ---------------------------------------------------------------------------- optimizer state
def trainer_updaters(trainer):
    """The updaters of a ``gluon.Trainer`` (one per device), which hold the optimizer state
    (``updater.states``): ``Trainer._updaters``."""
    return trainer._updaters  # noqa: SLF001


def trainer_parameters(trainer):
    """The parameters of a ``gluon.Trainer`` in the order of the updater's indices:
    ``Trainer._params``."""
    return trainer._params  # noqa: SLF001


def update_counts(optimizer):
    """{device index: {parameter index: update count}} of an ``mx.optimizer.Optimizer``
    (Adam's bias correction reads the count): ``Optimizer._all_index_update_counts``."""
    return optimizer._all_index_update_counts  # noqa: SLF001


def set_update_counts(optimizer, counts, device=0):
    """Restore :func:`update_counts` and point the optimizer's current counts at ``device``
    (``Optimizer._set_current_context``), as MXNet does before an update on that device."""
    optimizer._all_index_update_counts = counts or {0: {}}  # noqa: SLF001
    optimizer._set_current_context(device)  # noqa: SLF001


# ---------------------------------------------------------------------------- Optuna
def trial_id(trial):
    """The storage id of an Optuna trial (the trial number is not unique across studies):
    ``Trial._trial_id``; Optuna's own heartbeat reads it the same way."""
    return trial._trial_id  # noqa: SLF001


# ---------------------------------------------------------------------------- removed names
class NumpyShim(NamedTuple):
    """One name MXNet 1.9.1 reads from numpy that some numpy versions lack."""

    #: The attribute of the ``numpy`` module.
    name: str
    #: The first numpy release without it, e.g. ``(1, 24)``.
    removed_in: Tuple[int, int]
    #: The first numpy release that has it again, or None.
    restored_in: Optional[Tuple[int, int]]
    #: ``make(numpy) -> value``: what stands in for it.
    make: Callable[[Any], Any]
    #: Where MXNet reads it: a path under the ``mxnet`` package, a line number and that line's
    #: text (the test reads the line in the installed MXNet).
    mxnet_file: str
    mxnet_line: int
    mxnet_text: str
    #: Why the stand-in is what it is.
    reason: str

    def missing_in(self, version: Tuple[int, int]) -> bool:
        """Whether numpy ``version`` (major, minor) lacks the name."""
        return version >= self.removed_in and (self.restored_in is None
                                               or version < self.restored_in)


def _removed_financial_function(name: str) -> Callable:
    """numpy 1.20-1.26's own stand-in for a financial function removed by NEP 32: calling it
    raises, only looking it up works."""
    def removed(*args, **kwargs):
        raise RuntimeError(f"In accordance with NEP 32, the function {name} was removed from "
                           "NumPy version 1.20. A replacement for this function is available "
                           "in the numpy_financial library: "
                           "https://pypi.org/project/numpy-financial")
    removed.__name__ = removed.__qualname__ = name
    return removed


def _in1d(numpy):
    """``np.in1d``, removed in numpy 2.4: ``np.isin`` of the flattened first argument."""
    def in1d(ar1, ar2, assume_unique=False, invert=False, *, kind=None):
        options = {} if kind is None else {"kind": kind}
        return numpy.isin(numpy.asarray(ar1).ravel(), ar2, assume_unique=assume_unique,
                          invert=invert, **options)
    return in1d


def _msort(numpy):
    """``np.msort``, removed in numpy 2.0: a sort along the first axis."""
    def msort(a):
        return numpy.sort(a, axis=0)
    return msort


def _compat_module(numpy):
    """``np.compat``, removed in numpy 2.0: MXNet reads only ``basestring`` (``str``)."""
    module = types.ModuleType("numpy.compat", "Stand-in for numpy<2's numpy.compat "
                              "(gluon_bbb._mxcompat): only what MXNet 1.9.1 reads.")
    module.basestring = str
    return module


_NEP52 = "removed by NEP 52 in numpy 2.0"
_FALLBACK = "numpy/fallback.py"
_FINANCIAL = ("numpy 1.20 replaced it by a stub that raises when called; numpy 2.0 dropped the "
              "stub, but MXNet's fallback module still looks it up at import: the same stub")

#: Every numpy name MXNet 1.9.1 reads that some numpy from 1.17 on lacks.
NUMPY_SHIMS: Tuple[NumpyShim, ...] = (
    NumpyShim("bool", (1, 24), (2, 0), lambda np: bool, "numpy/utils.py", 37,
              "bool = onp.bool",
              "numpy 1.24 removed the alias of the builtin bool that MXNet exports as "
              "mx.np.bool; numpy 2.0 brought np.bool back as np.bool_, which is kept"),
    NumpyShim("int", (1, 24), None, lambda np: int, "test_utils.py", 2319,
              "dtype=np.int)",
              "numpy 1.24 removed the alias of the builtin int (mxnet.test_utils' chi-square "
              "test reads it when called)"),
    NumpyShim("PZERO", (2, 0), None, lambda np: 0.0, "numpy/utils.py", 42,
              "PZERO = onp.PZERO", _NEP52),
    NumpyShim("NZERO", (2, 0), None, lambda np: -0.0, "numpy/utils.py", 43,
              "NZERO = onp.NZERO", _NEP52),
    NumpyShim("NINF", (2, 0), None, lambda np: -np.inf, "numpy/utils.py", 44,
              "NINF = onp.NINF", _NEP52),
    NumpyShim("PINF", (2, 0), None, lambda np: np.inf, "numpy/utils.py", 45,
              "PINF = onp.PINF", _NEP52),
    NumpyShim("NAN", (2, 0), None, lambda np: np.nan, "numpy/utils.py", 47,
              "NAN = onp.NAN", _NEP52),
    NumpyShim("NaN", (2, 0), None, lambda np: np.nan, "numpy/utils.py", 48,
              "NaN = onp.NaN", _NEP52),
    NumpyShim("Inf", (2, 0), None, lambda np: np.inf, "gluon/contrib/estimator/event_handler.py",
              248, "priority=np.Inf", _NEP52 + " (an event handler's default, read at import)"),
    NumpyShim("alltrue", (2, 0), None, lambda np: np.all, _FALLBACK, 111,
              "alltrue = onp.alltrue", _NEP52 + "; np.all is the same function"),
    NumpyShim("sometrue", (2, 0), None, lambda np: np.any, "numpy_dispatch_protocol.py", 87,
              "'sometrue',", _NEP52 + "; np.any is the same function (the dispatch "
              "protocol looks up every name of its list at import)"),
    NumpyShim("product", (2, 0), None, lambda np: np.prod, "numpy_dispatch_protocol.py", 124,
              "'product',", _NEP52 + "; np.prod is the same function (looked up at import)"),
    NumpyShim("round_", (2, 0), None, lambda np: np.round, "numpy_dispatch_protocol.py", 92,
              "'round_',", _NEP52 + "; np.round is the same function (looked up at import)"),
    NumpyShim("msort", (2, 0), None, _msort, _FALLBACK, 145, "msort = onp.msort",
              _NEP52 + "; np.sort along axis 0"),
    NumpyShim("compat", (2, 0), None, _compat_module, "ndarray/numpy/_op.py", 7563,
              "_np.compat.basestring",
              "numpy 2.0 removed numpy.compat; mx.np.pad reads compat.basestring (str)"),
    NumpyShim("in1d", (2, 4), None, _in1d, _FALLBACK, 135, "in1d = onp.in1d",
              "deprecated in numpy 2.0, removed in 2.4; np.isin of the flattened input"),
    NumpyShim("trapz", (2, 4), None, lambda np: np.trapezoid, _FALLBACK, 190,
              "trapz = onp.trapz", "deprecated in numpy 2.0, removed in 2.4; "
              "np.trapezoid is the same function"),
) + tuple(
    NumpyShim(name, (2, 0), None, lambda np, name=name: _removed_financial_function(name),
              _FALLBACK, line, f"{name} = onp.{name}", _FINANCIAL)
    for name, line in (("mirr", 143), ("npv", 160), ("pmt", 164), ("ppmt", 173), ("pv", 176),
                       ("rate", 177)))


class _DistutilsShim(NamedTuple):
    removed_in_python: Tuple[int, int]
    mxnet_lines: Tuple[Tuple[str, int, str], ...]
    reason: str


#: ``distutils.version`` for MXNet on Python 3.12 and later.
DISTUTILS_SHIM = _DistutilsShim(
    (3, 12),
    (("numpy_op_fallback.py", 20, "from distutils.version import StrictVersion"),
     ("numpy_dispatch_protocol.py", 47, "from distutils.version import LooseVersion"),
     ("numpy_dispatch_protocol.py", 67, "from distutils.version import LooseVersion")),
    "Python 3.12 removed distutils (PEP 632); setuptools keeps a copy (with LooseVersion and "
    "StrictVersion) and makes `import distutils` find it; gluon_bbb requires setuptools there")

_added: List[str] = []
_applied = False
#: The name under which the startup hook (``_gluon_bbb_mxcompat_hook``) keeps the copy of this
#: module it loads when ``import mxnet`` comes before ``import gluon_bbb``.
HOOKED_COPY = "_gluon_bbb_mxcompat_stand_ins"


def numpy_version(numpy) -> Tuple[int, int]:
    """(major, minor) of a numpy module."""
    major, minor = numpy.__version__.split(".")[:2]
    return int(major), int("".join(ch for ch in minor if ch.isdigit()) or 0)


def missing_from_numpy(numpy, names) -> List[str]:
    """The names among ``names`` that ``numpy`` lacks (deprecation warnings of looking them up
    silenced)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return [name for name in names if not hasattr(numpy, name)]


def _ensure_distutils() -> None:
    if sys.version_info[:2] < DISTUTILS_SHIM.removed_in_python:
        return
    try:
        import distutils.version  # noqa: F401  (setuptools' copy, found by its own hook)
    except ImportError:
        try:
            import setuptools  # noqa: F401  (importing it puts its distutils in place)
            import distutils.version  # noqa: F401,F811
        except ImportError as error:
            raise ImportError(
                "MXNet 1.9.1 imports distutils, which Python 3.12 removed; setuptools provides "
                "it: pip install setuptools") from error


def apply() -> List[str]:
    """Give numpy and the standard library what MXNet 1.9.1 reads and they lack.

    Idempotent and cheap after the first call. Makes ``distutils.version`` importable on Python
    3.12 and later, then sets each name of :data:`NUMPY_SHIMS` that the installed numpy lacks
    (never one it has). All or nothing: if it raises, numpy has none of the names.

    Returns
    -------
    list of str, the numpy names this process set (also :func:`added`).

    Raises
    ------
    ImportError
        On Python 3.12 or later without setuptools.
    """
    global _applied
    if not _applied:
        import numpy
        _ensure_distutils()
        # names the startup hook's own copy of this module set before the package was imported
        hooked = sys.modules.get(HOOKED_COPY)
        if hooked is not None and hooked is not sys.modules.get(__name__):
            _added.extend(name for name in getattr(hooked, "added", list)() if name not in _added)
        # every stand-in made before any is set: an error leaves numpy as it was
        missing = set(missing_from_numpy(numpy, [shim.name for shim in NUMPY_SHIMS]))
        stand_ins = {shim.name: shim.make(numpy) for shim in NUMPY_SHIMS if shim.name in missing}
        for name, value in stand_ins.items():
            setattr(numpy, name, value)
            _added.append(name)
        _applied = True
    return list(_added)


def added() -> List[str]:
    """The numpy names :func:`apply` set in this process (empty before it runs)."""
    return list(_added)
