"""The fused variational step: a C++ MXNet operator, built on first use, with a visible fallback.

One call of the operator ``gluon_bbb_variational`` does, for every weight tensor at once,
what the pure-MXNet path does in dozens of operators: draw eps ~ N(0, 1) (counter-based,
keyed from MXNet's seeded generator), sigma = softplus(rho), w = mu + sigma * eps (section 3.2, step 2), and the
complexity sum_j [log q(w_j | theta) - log P(w_j)] of Eq. (8); its backward pass gives the
gradients with respect to mu and rho. Helpers share the library: ``gluon_bbb_finite_guard``
(:func:`finite_guard`, the skip of a non-finite step in one pass), ``gluon_bbb_adam`` and
``gluon_bbb_sgd`` (MXNet's Adam and SGD rules over all tensors in one pass, used by
:mod:`gluon_bbb.fused_optimizers`) and ``gluon_bbb_normal``
(:func:`normal_sample`, mean + std * eps with the same noise, for the local
reparameterisation of :meth:`gluon_bbb.BBBTrainer.predict_proba`). The source is
``gluon_bbb/_ext/variational_op.cc``.

Build: at first use the source is compiled against the headers that ship inside the mxnet
wheel, into a per-user cache (``$GLUON_BBB_CACHE``, else ``$XDG_CACHE_HOME/gluon_bbb``, else
``~/.cache/gluon_bbb``) under a name keyed by the source, the MXNet version, the compiler,
the flags and the CPU. The library is test-loaded in a child process (a broken library kills
the process that loads it), then moved into place atomically, and loaded once per process.
``-march=native`` is safe because the build happens on the machine that runs it.

Fallback: without a compiler, when the build fails, on a GPU, or when ``GLUON_BBB_FUSED=0``,
:func:`fused_status` says why, and :class:`~gluon_bbb.BBBTrainer` uses the pure-MXNet path
and logs the reason (``trainer.fused``, ``trainer.fused_reason``).
"""
import hashlib
import logging
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import threading
from dataclasses import dataclass

import numpy as np
import mxnet as mx
from mxnet import nd

from .priors import GaussianPrior, ScaleMixturePrior

__all__ = ["FusedStatus", "FiniteGuard", "fused_status", "fused_path", "load_fused_op",
           "variational_sample", "finite_guard", "normal_sample", "OP_NAME", "NORMAL_OP_NAME",
           "OPERATORS", "ENV_SWITCH"]

logger = logging.getLogger(__name__)

OP_NAME = "gluon_bbb_variational"
#: The operator behind :func:`normal_sample`.
NORMAL_OP_NAME = "gluon_bbb_normal"
#: Every operator the library registers; a library lacking one is not used.
OPERATORS = (OP_NAME, "gluon_bbb_finite_guard", "gluon_bbb_adam", "gluon_bbb_sgd", NORMAL_OP_NAME)
#: Set to 0 to disable the fused operator everywhere.
ENV_SWITCH = "GLUON_BBB_FUSED"
SOURCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_ext", "variational_op.cc")
#: The source replaces three functions of the wheel's lib_api.cc that leak with MXNet 1.9.1:
#: _opCallMutateInputs at every call of an operator with mutable inputs, _msgSize and _msgGet
#: at every call of any operator once one has failed. The -D renames move lib_api.cc's
#: definitions out of the way.
LIB_API_RENAMES = ("-D_opCallMutateInputs=gluon_bbb_lib_api_opCallMutateInputs_leaking",
                   "-D_msgSize=gluon_bbb_lib_api_msgSize_leaking",
                   "-D_msgGet=gluon_bbb_lib_api_msgGet_leaking")
#: -mprefer-vector-width=512: where the CPU has AVX-512, the elementwise loops use all of it
#: (GCC's default stays at 256 bits); elsewhere the flag changes nothing.
COMPILE_FLAGS = ("-O3", "-std=c++17", "-fPIC", "-fopenmp", "-fno-math-errno",
                 "-fno-trapping-math", "-march=native",  # never -ffast-math: see the docstring
                 "-mprefer-vector-width=512", *LIB_API_RENAMES)
BUILD_TIMEOUT_S = 600


@dataclass(frozen=True)
class FusedStatus:
    """Whether the fused operator can be used in this process, and why not.

    Attributes
    ----------
    available : bool
    reason : str
        Empty when available; otherwise what prevented it.
    library_path : str or None
    """

    available: bool
    reason: str = ""
    library_path: str = None


_lock = threading.Lock()
_status = None  # FusedStatus once the build/load has been attempted in this process


def _disabled_by_env():
    return os.environ.get(ENV_SWITCH, "1").strip().lower() in ("0", "false", "no", "off")


def fused_status():
    """Build (once, cached on disk) and load (once per process) the fused operator.

    Returns
    -------
    FusedStatus
    """
    global _status
    if _disabled_by_env():
        return FusedStatus(False, f"disabled by the environment variable {ENV_SWITCH}=0")
    with _lock:
        if _status is None:
            _status = _build_and_load()
            if not _status.available:
                logger.warning("gluon_bbb: fused operator unavailable (%s); using the pure-MXNet path",
                               _status.reason)
        return _status


def load_fused_op():
    """Load the fused operator; raise RuntimeError with the reason if it is unavailable."""
    status = fused_status()
    if not status.available:
        raise RuntimeError(f"the fused gluon_bbb operator is unavailable: {status.reason}")
    return status


def _mxnet_dirs():
    root = os.path.dirname(os.path.abspath(mx.__file__))
    return os.path.join(root, "include"), os.path.join(root, "src", "lib_api.cc")


def _cache_dir():
    explicit = os.environ.get("GLUON_BBB_CACHE")
    if explicit:
        return explicit
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "gluon_bbb")


def _compiler():
    for name in (os.environ.get("CXX"), "g++", "c++", "clang++"):
        if name and shutil.which(name):
            return shutil.which(name)
    return None


def _cpu_signature():
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as handle:
            for line in handle:
                if line.startswith("flags"):
                    return line
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _build_key(compiler, include_dir, lib_api_source):
    digest = hashlib.sha256()
    for path in (SOURCE, lib_api_source, os.path.join(include_dir, "mxnet", "lib_api.h")):
        with open(path, "rb") as handle:
            digest.update(handle.read())
    version = subprocess.run([compiler, "--version"], capture_output=True, text=True, timeout=60).stdout
    for part in (mx.__version__, version, " ".join(COMPILE_FLAGS), _cpu_signature(), platform.machine()):
        digest.update(part.encode())
    return digest.hexdigest()[:20]


def _build_and_load():
    if not os.path.exists(SOURCE):
        return FusedStatus(False, f"source file {SOURCE} is missing")
    include_dir, lib_api_source = _mxnet_dirs()
    if not os.path.exists(lib_api_source):
        return FusedStatus(False, f"this mxnet wheel lacks {lib_api_source}")
    compiler = _compiler()
    if compiler is None:
        return FusedStatus(False, "no C++ compiler found (set CXX or install g++)")
    try:
        path = os.path.join(_cache_dir(), f"gluon_bbb_variational-{_build_key(compiler, include_dir, lib_api_source)}.so")
        if not os.path.exists(path):
            error = _build(compiler, include_dir, lib_api_source, path)
            if error:
                return FusedStatus(False, error)
        mx.library.load(path, verbose=False)
    except (OSError, subprocess.SubprocessError, mx.base.MXNetError) as error:
        return FusedStatus(False, f"{type(error).__name__}: {error}")
    missing = [name for name in OPERATORS if not hasattr(nd, name)]
    if missing:
        return FusedStatus(False, f"library {path} loaded but registered no {', '.join(missing)}")
    return FusedStatus(True, "", path)


def _build(compiler, include_dir, lib_api_source, path):
    """Compile, test-load in a child process, then rename into place. Returns an error or ''."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    handle, tmp = tempfile.mkstemp(suffix=".so", dir=os.path.dirname(path))
    os.close(handle)
    try:
        command = [compiler, *COMPILE_FLAGS, "-shared", "-I", include_dir, SOURCE, lib_api_source,
                   "-o", tmp]
        logger.info("gluon_bbb: compiling the fused operator: %s", " ".join(command))
        result = subprocess.run(command, capture_output=True, text=True, timeout=BUILD_TIMEOUT_S)
        if result.returncode != 0:
            tail = " ".join(result.stderr.strip().splitlines()[-3:])
            return f"compiling {os.path.basename(SOURCE)} failed: {tail}"
        check = subprocess.run(
            [sys.executable, "-c", f"import mxnet; mxnet.library.load({tmp!r}, verbose=False); "
                                   f"assert all(hasattr(mxnet.nd, n) for n in {OPERATORS!r})"],
            capture_output=True, text=True, timeout=BUILD_TIMEOUT_S)
        if check.returncode != 0:
            tail = " ".join((check.stderr or check.stdout).strip().splitlines()[-2:])
            return f"the compiled library does not load: {tail}"
        os.replace(tmp, path)
        return ""
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)


def prior_attributes(prior):
    """The operator's attributes for a prior (floats written with full precision; a learned
    prior's current values, read once)."""
    if isinstance(prior, (ScaleMixturePrior, GaussianPrior)):
        kind = "mixture" if isinstance(prior, ScaleMixturePrior) else "gaussian"
        return {"prior": kind, **{name: repr(value) for name, value in prior.values().items()}}
    raise TypeError(f"the fused operator supports GaussianPrior and ScaleMixturePrior, got {prior!r}")


def variational_sample(mus, rhos, prior, epsilons=None, key=None):
    """w = mu + softplus(rho) * eps and the complexity of Eq. (8), in one fused operator.

    **Noise.** eps is counter-based: value j of tensor k is a fixed function of (key, k, j)
    (Philox4x32-10 and Box-Muller; see the operator's source), so it does not depend on the
    number of threads. Each call takes a fresh 64-bit key from MXNet's seeded CPU generator,
    so ``mx.random.seed`` reproduces every later call.

    Parameters
    ----------
    mus, rhos : lists of K NDArrays on the CPU, float32 or float64, pairwise the same shape
    prior : GaussianPrior or ScaleMixturePrior
    epsilons : list of K NDArrays, optional
        Use this noise instead of drawing it (for tests and cross-checks).
    key : int in [0, 2^64), optional
        Draw eps under this key instead of one from MXNet's generator (which is then left
        untouched): the same key gives the same eps.

    Returns
    -------
    weights : list of K NDArrays, the sample w
    complexity : NDArray, (1,), sum over all weights of log q(w | theta) - log P(w)
    epsilons : list of K NDArrays, the noise used
    """
    load_fused_op()
    if len(mus) != len(rhos) or not mus:
        raise ValueError(f"need one rho per mu, got {len(mus)} mu and {len(rhos)} rho")
    inputs = list(mus) + list(rhos)
    if epsilons is not None:
        if len(epsilons) != len(mus):
            raise ValueError(f"need one eps per mu, got {len(epsilons)} eps and {len(mus)} mu")
        inputs += list(epsilons)
    outputs = getattr(nd, OP_NAME)(*inputs, num_tensors=len(mus),
                                   eps_given=int(epsilons is not None), **prior_attributes(prior),
                                   **_key_attribute(key))
    k = len(mus)
    return list(outputs[:k]), outputs[k], list(outputs[k + 1:])


def finite_guard(cost, grads):
    """Zero every gradient in place, on the device, if the cost or any gradient is not finite.

    Parameters
    ----------
    cost : NDArray, (1,)
    grads : list of NDArrays (float32 or float64, on the CPU)

    Returns
    -------
    NDArray, (1,): 1 if everything was finite, else 0 (and the gradients are now zero).
    """
    load_fused_op()
    return nd.gluon_bbb_finite_guard(cost, *grads, num_tensors=len(grads))


class FiniteGuard:
    """A step's non-finite check, on either path: zero every gradient of ``params`` in place, on
    the device and without a host sync, if the cost or any gradient is not finite.

    A NaN in the input can leave the cost finite (a ReLU maps it to 0) and still poison the
    gradients, so the check covers the cost and every gradient; mu and rho therefore never
    receive NaN or inf. The fused operator (:func:`finite_guard`) does it in one pass; the
    pure-MXNet path reduces each gradient with a BLAS dot product (NaN and inf propagate;
    0.03 ms per million values, against 17 ms for ``multi_all_finite`` in this wheel).

    Parameters
    ----------
    params : list of gluon Parameters
    fused : bool
        Use the fused operator.
    ctx : mx.Context
    """

    def __init__(self, params, fused, ctx):
        self.params, self.fused = list(params), fused
        if not fused:
            self.zeros = [nd.zeros(p.shape, ctx=ctx, dtype=p.dtype) for p in self.params]
            self.ones = [nd.ones((int(np.prod(p.shape)),), ctx=ctx, dtype=p.dtype)
                         for p in self.params]

    def __call__(self, cost):
        """Returns the (1,) finite flag, 1 or 0 (and then every gradient is zero)."""
        grads = [param.grad() for param in self.params]
        if self.fused:
            return finite_guard(cost, grads)
        reductions = [nd.dot(g.reshape((-1,)), ones) for g, ones in zip(grads, self.ones)]
        finite = nd.contrib.isfinite(cost + 0 * nd.add_n(*reductions))
        for grad, zeros in zip(grads, self.zeros):
            nd.where(nd.broadcast_to(finite, shape=(grad.shape[0],)), grad, zeros, out=grad)
        return finite


def fused_path(ctx, dtype, params, requested=None, learnable_prior=False):
    """Whether a trainer's steps can use the fused operator, and why not; logs the reason
    when falling back.

    Parameters
    ----------
    ctx : mx.Context
    dtype : str, the posterior's
    params : list of gluon Parameters, mu and rho
    requested : bool or None
        None: use it when it is available. False: never. True: require it.
    learnable_prior : bool
        The prior is trained: the operator's complexity has no gradient with respect to it.

    Returns
    -------
    (bool, str): (True, '') or (False, the reason).

    Raises
    ------
    RuntimeError
        ``requested`` is True and the operator cannot be used.
    """
    if requested is False:
        return False, "fused=False was requested"
    if ctx.device_type != "cpu":
        reason = f"the fused operator runs on the CPU only, the context is {ctx}"
    elif dtype not in ("float32", "float64"):
        reason = f"the fused operator supports float32 and float64, not {dtype}"
    elif any(p.grad_req == "add" for p in params):
        reason = "the fused operator cannot accumulate gradients (grad_req='add')"
    elif learnable_prior:
        reason = ("the prior is learnable, and the fused operator's complexity has no gradient "
                  "with respect to the prior's parameters")
    else:
        reason = fused_status().reason
    if not reason:
        return True, ""
    if requested:
        raise RuntimeError(f"fused=True, but {reason}")
    logger.warning("gluon_bbb: using the pure-MXNet path: %s", reason)
    return False, reason


def normal_sample(mean, std=None, variance=None, key=None):
    """out = mean + std * eps with eps ~ N(0, 1), elementwise, in one fused operator.

    The noise is drawn as in :func:`variational_sample` (counter-based, keyed from MXNet's
    seeded CPU generator at each call, or by ``key``), so ``mx.random.seed`` reproduces it
    whatever the number of threads. It is the sampling step of the local
    reparameterisation trick (Kingma, Salimans & Welling 2015, "Variational Dropout and the
    Local Reparameterization Trick"): the pre-activations of a Dense layer are Gaussian under
    q(w | theta) and can be drawn directly from their mean and variance. No gradient.

    Parameters
    ----------
    mean : NDArray, any shape, float32 or float64, on the CPU
    std : NDArray, the shape and dtype of ``mean``, >= 0
    variance : NDArray, the shape and dtype of ``mean``, >= 0
        Give exactly one of ``std`` and ``variance``; with ``variance`` the square root is
        taken inside the operator (a negative variance gives NaN).
    key : int in [0, 2^64), optional
        As in :func:`variational_sample`.

    Returns
    -------
    NDArray, the shape and dtype of ``mean``
    """
    load_fused_op()
    if (std is None) == (variance is None):
        raise ValueError("give exactly one of std and variance")
    scale, scale_is = (std, "std") if variance is None else (variance, "variance")
    if tuple(scale.shape) != tuple(mean.shape):
        raise ValueError(f"{scale_is} has shape {tuple(scale.shape)}, the mean {tuple(mean.shape)}")
    return getattr(nd, NORMAL_OP_NAME)(mean, scale, scale_is=scale_is, **_key_attribute(key))


def _key_attribute(key):
    """The operators' attribute ``key`` for an explicit key, or none for a drawn one."""
    if key is None:
        return {}
    if isinstance(key, bool) or not isinstance(key, (int, np.integer)) or not 0 <= key < 2**64:
        raise ValueError(f"key must be an integer in [0, 2^64), got {key!r}")
    return {"key": str(int(key))}
