"""What ran a measurement: the machine and the library versions, recorded with results."""
import os
import platform

import mxnet as mx
import numpy as np

from .context import resolve_context
from .version import __version__

__all__ = ["machine_info"]


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
