"""Building and loading the fused operators' library: compiled on first use against the
headers in the mxnet wheel, cached per user under a content key, test-loaded in a child
process, loaded once per process; the reason when it cannot be."""
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

import mxnet as mx
from mxnet import nd

from .._cache import user_cache_dir

__all__ = ["FusedStatus", "fused_status", "load_fused_op", "OP_NAME", "NORMAL_OP_NAME",
           "OPERATORS", "ENV_SWITCH", "SOURCE", "COMPILE_FLAGS", "compile_command"]

logger = logging.getLogger(__name__)

OP_NAME = "gluon_bbb_variational"
#: The operator behind :func:`normal_sample`.
NORMAL_OP_NAME = "gluon_bbb_normal"
#: Every operator the library registers; a library lacking one is not used.
OPERATORS = (OP_NAME, "gluon_bbb_finite_guard", "gluon_bbb_adam", "gluon_bbb_sgd", NORMAL_OP_NAME)
#: Set to 0 to disable the fused operator everywhere.
ENV_SWITCH = "GLUON_BBB_FUSED"
SOURCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "variational_op.cc")
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
    return user_cache_dir()


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


def compile_command(sources, output, shared=True, compiler=None):
    """The compiler's command line that builds ``sources`` with MXNet's ``lib_api.cc`` into
    ``output``, with the flags and headers of the fused library (an executable with
    ``shared=False``: ``benchmarks/cost_model.py`` builds its harness of the operator's
    kernels this way).

    Parameters
    ----------
    sources : list of str
        C++ files; the fused operator's own folder is on the include path.
    output : str
    shared : bool
    compiler : str, optional
        Default: ``$CXX``, else g++, c++ or clang++ found on the path.

    Returns
    -------
    list of str
    """
    compiler = compiler or _compiler()
    if compiler is None:
        raise RuntimeError("no C++ compiler found (set CXX or install g++)")
    include_dir, lib_api_source = _mxnet_dirs()
    return [compiler, *COMPILE_FLAGS, *(["-shared"] if shared else []), "-I", include_dir,
            "-I", os.path.dirname(SOURCE), *sources, lib_api_source, "-o", output]


def _build(compiler, include_dir, lib_api_source, path):
    """Compile, test-load in a child process, then rename into place. Returns an error or ''."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    handle, tmp = tempfile.mkstemp(suffix=".so", dir=os.path.dirname(path))
    os.close(handle)
    try:
        command = compile_command([SOURCE], tmp, compiler=compiler)
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
