"""What ran a measurement: the machine and the library versions, recorded with results, and
the process's memory, for measurements of long runs."""
import ctypes
import ctypes.util
import os
import platform

import mxnet as mx
import numpy as np

from ..context import resolve_context
from ..version import __version__

__all__ = ["machine_info", "resident_memory", "heap_in_use"]


def machine_info(ctx=None):
    """What ran it: CPU model and cores, platform, library versions, context."""
    cpu_model = None
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as handle:
            for line in handle:
                if line.startswith("model name"):
                    cpu_model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    try:
        usable = len(os.sched_getaffinity(0))
    except AttributeError:
        usable = os.cpu_count()
    return {
        "cpu_model": cpu_model or platform.processor() or platform.machine(),
        "cpu_cores": os.cpu_count(),
        "cpu_cores_usable": usable,
        "platform": platform.platform(),
        "python": platform.python_version(),
        "mxnet": mx.__version__,
        "numpy": np.__version__,
        "gluon_bbb": __version__,
        "ctx": str(resolve_context(ctx)),
        "omp_num_threads": os.environ.get("OMP_NUM_THREADS"),
    }


def resident_memory():
    """The process's resident set size in bytes (Linux's /proc/self/statm), or None elsewhere."""
    try:
        with open("/proc/self/statm", encoding="ascii") as handle:
            return int(handle.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return None


class _MallInfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in (
        "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks",
        "fordblks", "keepcost")]


def _mallinfo2():
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        function = libc.mallinfo2  # glibc >= 2.33
    except (OSError, AttributeError):
        return None
    function.restype = _MallInfo2
    return function


_MALLINFO2 = _mallinfo2()


def heap_in_use():
    """Bytes the C allocator has handed out and not taken back (glibc's ``mallinfo2``: the
    arenas' allocated chunks plus the mmapped ones), or None without glibc 2.33.

    Unlike the resident set size it does not count memory that ``free`` kept for reuse, so a
    leak shows as steady growth in it, while the allocator's own caching does not.
    """
    if _MALLINFO2 is None:
        return None
    info = _MALLINFO2()
    return int(info.uordblks + info.hblkhd)
