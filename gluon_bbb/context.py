"""Turning a user's context argument into a checked ``mx.Context``."""
import re

import mxnet as mx

__all__ = ["resolve_context"]


def resolve_context(ctx=None):
    """Return an ``mx.Context``, refusing devices that do not exist.

    Parameters
    ----------
    ctx : mx.Context, str or None
        ``None`` or ``'cpu'`` for the CPU; ``'gpu'``, ``'gpu(1)'``, ``'gpu:1'`` or
        ``mx.gpu(i)`` for a GPU.

    Raises
    ------
    ValueError
        For a string that names no context, or a GPU this machine does not have.
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
    return ctx
