"""Turning a user's context argument into a checked ``mx.Context``.

A GPU is checked twice: it must exist, and this MXNet build must be able to run a kernel on
it. The CUDA wheels of MXNet 1.9.1 (``mxnet-cu1xx``) carry GPU code for compute capabilities
5.0 to 8.6 only, and no PTX that newer GPUs could compile: on a Hopper GPU (an H100, 9.0) MXNet
sees the device and allocates memory, but every kernel fails with "no kernel image is
available for execution on the device". :func:`resolve_context` runs one one-element kernel
on a GPU context the first time it is resolved, and names such a GPU at once.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import re
from typing import Union

import mxnet as mx
from mxnet import nd

__all__ = ["resolve_context", "gpu_compute_capability", "SUPPORTED_CAPABILITIES"]

#: Compute capabilities the GPU code of the MXNet 1.9.1 CUDA wheels was built for.
SUPPORTED_CAPABILITIES = "5.0-8.6"
#: GPU contexts whose kernel check passed in this process.
_CHECKED_GPUS = set()


def resolve_context(ctx: Union[mx.Context, str, None] = None) -> mx.Context:
    """Return an ``mx.Context``, refusing devices that do not exist or cannot run.

    Parameters
    ----------
    ctx : mx.Context, str or None
        ``None`` or ``'cpu'`` for the CPU; ``'gpu'``, ``'gpu(1)'``, ``'gpu:1'`` or
        ``mx.gpu(i)`` for a GPU.

    Raises
    ------
    ValueError
        For a string that names no context, a GPU this machine does not have, or a GPU on
        which this MXNet build cannot run a kernel (the message names its compute
        capability and what is needed).
    """
    if ctx is None:
        return mx.cpu()
    if isinstance(ctx, str):
        match = re.fullmatch(r"\s*(cpu|gpu)\s*(?:[(:]\s*(\d+)\s*\)?)?\s*", ctx.lower())
        if not match:
            raise ValueError(f"unknown context {ctx!r}; use 'cpu', 'gpu' or 'gpu(i)'")
        kind, index = match.group(1), int(match.group(2) or 0)
        ctx = mx.cpu(index) if kind == "cpu" else mx.gpu(index)
    if not isinstance(ctx, mx.Context):
        raise ValueError(f"ctx must be an mx.Context or a string like 'gpu(0)', got {ctx!r}")
    if ctx.device_type == "gpu":
        num_gpus = mx.context.num_gpus()
        if ctx.device_id >= num_gpus:
            raise ValueError(
                f"context {ctx} is not available: this machine has {num_gpus} GPU(s) visible to "
                "MXNet (a CPU-only mxnet build sees none); use ctx=mx.cpu()"
            )
        _check_gpu_runs(ctx)
    return ctx


def _run_one_kernel(ctx):
    """One one-element kernel on ``ctx``, waited for (an MXNetError if it cannot run)."""
    (nd.ones((1,), ctx=ctx) + 1).wait_to_read()


def _check_gpu_runs(ctx):
    if ctx in _CHECKED_GPUS:
        return
    try:
        _run_one_kernel(ctx)
    except mx.base.MXNetError as error:
        lines = [line for line in str(error).splitlines() if line.strip()]
        reason = next((line.strip() for line in lines if "kernel image" in line),
                      lines[0].strip() if lines else "unknown error")
        capability = gpu_compute_capability(ctx.device_id)
        named = f"compute capability {capability}" if capability else "an unknown compute capability"
        raise ValueError(
            f"MXNet {mx.__version__} cannot run on {ctx} ({named}): {reason[:200]}. The MXNet "
            f"1.9.1 CUDA wheels carry GPU code for compute capabilities {SUPPORTED_CAPABILITIES} "
            f"only; this GPU needs an MXNet build compiled for "
            f"{'sm_' + capability.replace('.', '') if capability else 'its architecture'}. "
            "Use ctx='cpu' meanwhile") from None
    _CHECKED_GPUS.add(ctx)


def gpu_compute_capability(device_id=0):
    """The compute capability of GPU ``device_id`` as 'major.minor', or None if unknown.

    Asked of the CUDA driver (``libcuda``) directly, without MXNet, so it works where MXNet's
    kernels do not.
    """
    name = ctypes.util.find_library("cuda") or "libcuda.so.1"
    try:
        cuda = ctypes.CDLL(name)
    except OSError:
        return None
    device, major, minor = ctypes.c_int(), ctypes.c_int(), ctypes.c_int()
    major_attribute, minor_attribute = 75, 76  # CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_*
    try:
        if cuda.cuInit(0) or cuda.cuDeviceGet(ctypes.byref(device), int(device_id)):
            return None
        if cuda.cuDeviceGetAttribute(ctypes.byref(major), major_attribute, device) or \
                cuda.cuDeviceGetAttribute(ctypes.byref(minor), minor_attribute, device):
            return None
    except AttributeError:
        return None
    return f"{major.value}.{minor.value}"
