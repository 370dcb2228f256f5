"""The fused operators' Python API: the variational sample with its complexity, the finite
guard, the Gaussian sample of the local reparameterisation, and the choice of path."""
from __future__ import annotations

import logging
from typing import Optional, Sequence

import numpy as np
from mxnet import nd

from .._checks import check_int
from ..priors import DiagonalGaussianPrior, GaussianPrior, Prior, ScaleMixturePrior
from .build import NORMAL_OP_NAME, OP_NAME, fused_status, load_fused_op

__all__ = ["FiniteGuard", "fused_path", "variational_sample", "finite_guard", "normal_sample",
           "prior_attributes", "prior_inputs"]

logger = logging.getLogger(__name__)


def prior_attributes(prior):
    """The operator's attributes for a prior (floats written with full precision; a learned
    prior's current values, read once). A per-weight prior's arrays are inputs instead
    (:func:`prior_inputs`)."""
    if isinstance(prior, DiagonalGaussianPrior):
        return {"prior": "diagonal"}
    if isinstance(prior, (ScaleMixturePrior, GaussianPrior)):
        kind = "mixture" if isinstance(prior, ScaleMixturePrior) else "gaussian"
        return {"prior": kind, **{name: repr(value) for name, value in prior.values().items()}}
    raise TypeError("the fused operator supports GaussianPrior, ScaleMixturePrior and "
                    f"DiagonalGaussianPrior, got {prior!r}")


def prior_inputs(prior: Prior, mus: Sequence[nd.NDArray]) -> tuple:
    """The operator's inputs that hold the prior: a per-weight prior's means and standard
    deviations for the weight tensors ``mus`` (on their context, in their dtype), none for a
    prior shared by all weights.

    The operator takes its inputs in groups of ``num_tensors``: mu, rho [, eps], m, s. A call
    that repeats the tensor lists (several draws of the same tensors) repeats ``m`` and ``s``
    the same way.

    Parameters
    ----------
    prior : Prior
    mus : list of K NDArrays, the posterior's means, in the prior's tensor order

    Returns
    -------
    (means, stds) : two tuples of K NDArrays of the shapes of ``mus`` (the same tuples at
        every call with the same ``mus``), or two empty tuples
    """
    if not prior.per_weight:
        return (), ()
    return prior.arrays(mus)


def variational_sample(mus: Sequence[nd.NDArray], rhos: Sequence[nd.NDArray], prior: Prior,
                       epsilons: Optional[Sequence[nd.NDArray]] = None, key: Optional[int] = None,
                       return_eps: bool = True, kl: str = "monte_carlo",
                       keep_eps: bool = False, num_draws: Optional[int] = None) -> tuple:
    """w = mu + softplus(rho) * eps and the complexity of Eq. (8), in one fused operator.

    **Noise.** eps is counter-based: value j of tensor k is a fixed function of (key, k, j)
    (Philox4x32-10 and Box-Muller; see the operator's source), so it does not depend on the
    number of threads. Each call takes a fresh 64-bit key from MXNet's seeded CPU generator,
    so ``mx.random.seed`` reproduces every later call.

    Parameters
    ----------
    mus, rhos : lists of K NDArrays on the CPU, float32 or float64, pairwise the same shape
    prior : GaussianPrior, ScaleMixturePrior or DiagonalGaussianPrior
        A DiagonalGaussianPrior over the K tensors (in their order) hands the operator its
        arrays, on the mus' context and in their dtype (:func:`prior_inputs`).
    epsilons : list of K NDArrays, optional
        Use this noise instead of drawing it (for tests and cross-checks).
    key : int in [0, 2^64), optional
        Draw eps under this key instead of one from MXNet's generator (which is then left
        untouched): the same key gives the same eps.
    return_eps : bool
        Return eps (default). False leaves it out of the operator's outputs, which spares
        MXNet the zero gradients it would make for them (the training step's choice): the
        backward pass then reads eps from where the forward kept it (``keep_eps``) or draws
        it again from its key.
    kl : {'monte_carlo', 'closed_form'}
        The complexity: the paper's Monte Carlo estimate log q(w | theta) - log P(w) at the
        sample, or (a GaussianPrior or DiagonalGaussianPrior) its expectation KL(q || P) in
        closed form, the estimator of ``BBBLoss(kl='closed_form')``.
    keep_eps : bool
        With ``return_eps=False``: keep the drawn eps (and, with the scale mixture, d log P / dw)
        inside the operator's library for this draw's backward pass, which costs less than
        drawing it again; the training step sets it while autograd records. The kept values are
        filed under a draw id of their own, which the operator passes to its backward pass, so
        only the backward pass of this very draw reads them (not one of another draw under the
        same key, nor of another dtype, nor of a draw with ``keep_eps=False``); a backward pass
        that does not find them draws eps again. Values and gradients are therefore those of
        ``keep_eps=False``, bit for bit. Memory: one buffer per draw awaiting its backward
        pass, at most four, each of the draw's size: per weight 4 bytes (float32), 8 (float32
        with the scale mixture, or float64), 16 (float64 with the scale mixture). A backward
        pass frees its buffer's slot for the next draw; a draw whose backward pass never runs
        holds its buffer (read by no one) until a draw finds no free slot and takes the
        oldest. The buffers stay allocated, for reuse, until the process ends.
    num_draws : int >= 1, optional
        Draw this many weight sets in the one call (several samples a training step, run at
        once by :mod:`gluon_bbb.batched`). The operator sees every mu and rho once per draw
        (draw d's tensor k is its tensor d * K + k, so each draw has noise of its own, and
        draw 0 is the noise of a single draw under the same key); MXNet's autograd adds the
        gradients that reach an array through its several inputs. ``weights`` (and
        ``epsilons``, given or returned) are then lists of ``num_draws`` draws, each a list
        of K arrays, and the complexity is the sum over the draws. None (default): one
        draw, flat lists.

    Returns
    -------
    weights : list of K NDArrays, the sample w (with ``num_draws``: one such list per draw)
    complexity : NDArray, (1,), sum over all weights of log q(w | theta) - log P(w), or
        KL(q || P) with ``kl='closed_form'`` (with ``num_draws``: summed over the draws); with a
        DiagonalGaussianPrior it also has gradients with respect to the prior's arrays (unused by a
        fixed prior)
    epsilons : list of K NDArrays, the noise used; None with ``return_eps=False``
    """
    load_fused_op()
    if len(mus) != len(rhos) or not mus:
        raise ValueError(f"need one rho per mu, got {len(mus)} mu and {len(rhos)} rho")
    if kl not in ("monte_carlo", "closed_form"):
        raise ValueError(f"unknown kl {kl!r}; expected 'monte_carlo' or 'closed_form'")
    if kl == "closed_form" and not isinstance(prior, (GaussianPrior, DiagonalGaussianPrior)):
        raise ValueError("kl='closed_form' needs a GaussianPrior or DiagonalGaussianPrior, got "
                         f"{type(prior).__name__}")
    draws = 1 if num_draws is None else check_int("num_draws", num_draws)
    inputs = _per_draw(mus, draws) + _per_draw(rhos, draws)
    if epsilons is not None:
        if num_draws is not None:
            if len(epsilons) != draws:
                raise ValueError(f"need eps for each of the {draws} draws, got {len(epsilons)}")
            epsilons = [eps for draw in epsilons for eps in draw]
        if len(epsilons) != len(mus) * draws:
            raise ValueError(f"need one eps per mu, got {len(epsilons)} eps and {len(mus)} mu")
        inputs += list(epsilons)
    means, stds = prior_inputs(prior, mus)
    inputs += _per_draw(means, draws) + _per_draw(stds, draws)
    outputs = getattr(nd, OP_NAME)(*inputs, num_tensors=len(mus) * draws,
                                   eps_given=int(epsilons is not None),
                                   return_eps=int(bool(return_eps)),
                                   **_optional_attributes(kl, keep_eps and not return_eps),
                                   **prior_attributes(prior), **_key_attribute(key))
    k = len(mus) * draws  # outputs: w_1..w_k, the complexity, the noise's key [, eps_1..eps_k]
    weights, eps = list(outputs[:k]), (list(outputs[k + 2:]) if return_eps else None)
    if num_draws is not None:
        weights = _by_draw(weights, draws)
        eps = None if eps is None else _by_draw(eps, draws)
    return weights, outputs[k], eps


def _per_draw(tensors, num_draws):
    """The operator's inputs for ``num_draws`` draws of a list of per-tensor inputs: the list
    repeated, draw-major. Every per-tensor input goes through here, so all keep one order."""
    return list(tensors) * num_draws


def _by_draw(arrays, num_draws):
    """The operator's draw-major outputs as ``num_draws`` lists."""
    size = len(arrays) // num_draws
    return [arrays[d * size:(d + 1) * size] for d in range(num_draws)]


def _optional_attributes(kl, keep_eps):
    """The operator's kl and keep_eps attributes, only where they differ from its defaults
    (MXNet passes every attribute as text, and the operator parses them at every call)."""
    attributes = {}
    if kl != "monte_carlo":
        attributes["kl"] = kl
    if keep_eps:
        attributes["keep_eps"] = 1
    return attributes


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
        The prior is trained: the operator's complexity has no gradient with respect to a
        shared prior's parameters. (A per-weight prior, DiagonalGaussianPrior, runs fused.)

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


def normal_sample(mean: nd.NDArray, std: Optional[nd.NDArray] = None,
                  variance: Optional[nd.NDArray] = None, key: Optional[int] = None) -> nd.NDArray:
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
