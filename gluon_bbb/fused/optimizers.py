"""Optimizers over every tensor in one call of the fused library: :class:`FusedAdam` and
:class:`FusedSGD` apply MXNet's own update rules (``mx.optimizer.Adam``, ``mx.optimizer.SGD``)
to all of a network's parameters at once, with the same hyperparameters and optimizer states, so
checkpoints are interchangeable. :func:`adam` and :func:`sgd` pick the fused optimizer where the
library loads and the context is the CPU, else MXNet's.
"""
import math

import numpy as np
import mxnet as mx
from mxnet import nd

from .build import fused_status

__all__ = ["FusedAdam", "FusedSGD", "FUSED_OPTIMIZERS", "fused_optimizer", "adam", "sgd"]


def adam(ctx, **optimizer_params):
    """Adam for the parameters of any network on ``ctx``: :class:`FusedAdam` (one operator call
    per step for all tensors) where the fused library loads and ``ctx`` is the CPU, else
    ``mx.optimizer.Adam``. The update rule and the states are the same.

    Parameters
    ----------
    ctx : mx.Context
    **optimizer_params
        Adam's, e.g. ``learning_rate=1e-3``.

    Returns
    -------
    mx.optimizer.Optimizer, for ``gluon.Trainer(params, optimizer)``.
    """
    if ctx.device_type == "cpu" and fused_status().available:
        return FusedAdam(**optimizer_params)
    return mx.optimizer.Adam(**optimizer_params)


def sgd(ctx, **optimizer_params):
    """SGD for the parameters of any network on ``ctx``: :class:`FusedSGD` (one operator call
    per step for all tensors) where the fused library loads and ``ctx`` is the CPU, else
    ``mx.optimizer.SGD``. The update rule and the states are the same.

    Parameters
    ----------
    ctx : mx.Context
    **optimizer_params
        SGD's, e.g. ``learning_rate=0.1``; without ``momentum`` it is plain SGD,
        w <- w - learning_rate * grad.

    Returns
    -------
    mx.optimizer.Optimizer, for ``gluon.Trainer(params, optimizer)``.
    """
    if ctx.device_type == "cpu" and fused_status().available:
        return FusedSGD(**optimizer_params)
    return mx.optimizer.SGD(**optimizer_params)


def _fusable(operator, weights, grads):
    """Whether the library's ``operator`` takes these tensors: it is loaded, and the tensors are
    dense, on the CPU, and all float32 or all float64."""
    return (hasattr(nd, operator) and weights[0].context.device_type == "cpu"
            and all(w.dtype == weights[0].dtype and np.dtype(w.dtype).name in ("float32", "float64")
                    for w in weights)
            and not any(getattr(g, "stype", "default") != "default" for g in grads))


def _number_list(values):
    return ",".join(repr(float(v)) for v in values)


class _FusedUpdates:
    """What FusedAdam and FusedSGD share: take every tensor at once from ``gluon.Trainer``
    (``aggregate_num``), decide once per set of tensors whether the library's ``OPERATOR``
    takes them, and count the update before :meth:`_fused_update` calls it; tensors it cannot
    take (a GPU context, float16, sparse, no library) go through the parent class one by one."""

    OPERATOR = None

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.aggregate_num = 1 << 20
        self._fusable = {}  # tuple of indices -> whether the operator takes those tensors

    def update_multi_precision(self, index, weight, grad, state):
        if not isinstance(index, (list, tuple)):
            index, weight, grad, state = [index], [weight], [grad], [state]
        key = tuple(index)
        fusable = self._fusable.get(key)
        if fusable is None:
            fusable = self._fusable[key] = _fusable(self.OPERATOR, weight, grad)
        if not fusable:
            for i, w, g, s in zip(index, weight, grad, state):
                super().update_multi_precision(i, w, g, s)
            return
        index = list(index)
        self._update_count(index)
        self._fused_update(index, list(weight), list(grad), list(state), self._get_lrs(index),
                           self._get_wds(index))

    def _fused_update(self, index, weight, grad, state, lrs, wds):
        raise NotImplementedError


@mx.optimizer.register
class FusedAdam(_FusedUpdates, mx.optimizer.Adam):
    """MXNet's Adam, applied to all parameters in one fused operator call per step.

    Same update rule, hyperparameters, optimizer states (mean, var) and bias correction as
    ``mx.optimizer.Adam``, so checkpoints are interchangeable. ``gluon.Trainer`` hands it every
    parameter at once (``aggregate_num``); tensors the operator cannot take (a GPU context,
    float16, or no fused library in this process) go through ``mx.optimizer.Adam`` one by one.
    """

    OPERATOR = "gluon_bbb_adam"

    def _fused_update(self, index, weight, grad, state, lrs, wds):
        for j, i in enumerate(index):
            t = self._index_update_count[i]
            lrs[j] *= math.sqrt(1.0 - self.beta2 ** t) / (1.0 - self.beta1 ** t)
        means = [s[0] for s in state]
        variances = [s[1] for s in state]
        nd.gluon_bbb_adam(*weight, *grad, *means, *variances, num_tensors=len(weight),
                          lrs=_number_list(lrs), wds=_number_list(wds),
                          beta1=repr(float(self.beta1)), beta2=repr(float(self.beta2)),
                          epsilon=repr(float(self.epsilon)),
                          rescale_grad=repr(float(self.rescale_grad)),
                          clip_gradient=repr(float(self.clip_gradient or -1.0)))


@mx.optimizer.register
class FusedSGD(_FusedUpdates, mx.optimizer.SGD):
    """MXNet's SGD (with or without momentum, weight decay and gradient clipping), applied to
    all parameters in one fused operator call per step.

    Same update rule, hyperparameters and optimizer state (the momentum, or none) as
    ``mx.optimizer.SGD``, so checkpoints are interchangeable; tensors the operator cannot take
    go through ``mx.optimizer.SGD``. Multi-precision (float16 weights with float32 copies) is
    left to the parent class.
    """

    OPERATOR = "gluon_bbb_sgd"

    def _fused_update(self, index, weight, grad, state, lrs, wds):
        momenta = state if self.momentum > 0 else []
        nd.gluon_bbb_sgd(*weight, *grad, *momenta, num_tensors=len(weight),
                         lrs=_number_list(lrs), wds=_number_list(wds),
                         momentum=repr(float(self.momentum)),
                         rescale_grad=repr(float(self.rescale_grad)),
                         clip_gradient=repr(float(self.clip_gradient or -1.0)))


#: Optimizer names (lower case) that have a fused counterpart.
FUSED_OPTIMIZERS = {"adam": FusedAdam, "sgd": FusedSGD}


def fused_optimizer(name, optimizer_params):
    """The fused counterpart of the optimizer called ``name`` ('adam', 'sgd'), built from
    ``optimizer_params``, or None if it has none. The caller decides that the fused library
    may be used (the CPU, :func:`fused_status`).

    Parameters
    ----------
    name : str or mx.optimizer.Optimizer
    optimizer_params : dict

    Returns
    -------
    mx.optimizer.Optimizer or None
    """
    if not isinstance(name, str) or name.lower() not in FUSED_OPTIMIZERS:
        return None
    return FUSED_OPTIMIZERS[name.lower()](**optimizer_params)
