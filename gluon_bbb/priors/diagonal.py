"""A per-weight diagonal Gaussian prior, made from a trained posterior: Bayesian updating,
where yesterday's posterior is today's prior."""
from __future__ import annotations

from typing import Sequence

import numpy as np
import mxnet as mx
from mxnet import gluon

from .._math import LOG_SQRT_2PI, get_F, kl_normal_scales, sum_of_squares, total
from .._mxcompat import parameter_arrays
from .base import Prior

__all__ = ["DiagonalGaussianPrior"]


class DiagonalGaussianPrior(Prior):
    """P(w) = prod_j N(w_j; m_j, s_j^2): its own mean m_j and standard deviation s_j for each
    weight, the prior of Bayesian updating.

    Eq. (2)'s variational free energy KL(q || P) - E_q[log P(D | w)] is minimised by the q
    closest to the posterior p(w | D) ∝ P(D | w) P(w). For data that come in parts, D_A and
    then D_B, Bayes' rule applies twice: p(w | D_A, D_B) ∝ P(D_B | w) p(w | D_A). With the
    posterior q_A trained on D_A standing in for p(w | D_A), the second step is Eq. (2) on D_B
    alone with P(w) = q_A(w) (Nguyen et al. 2018, "Variational Continual Learning"), which
    :meth:`from_posterior` makes.

    The means and standard deviations are copies, held by fixed ``gluon.Parameter`` s (grad_req
    'null', :meth:`constants`) that :class:`~gluon_bbb.BBBLoss` hands to ``hybrid_forward``:
    inputs of the cost, not constants of its graph, so a checkpoint can restore them and
    training never changes them. They are stored in a checkpoint's arrays (as
    ``'prior:mean<i>'`` and ``'prior:std<i>'``); :meth:`config` holds only their shapes.
    The fused operator takes the arrays as inputs (:meth:`arrays`), for both complexities, so a
    :class:`~gluon_bbb.BBBTrainer` with this prior runs on the fused path where it is available.

    Parameters
    ----------
    means : sequence of array-like
        One array per weight tensor, in the order of the posterior's tensors
        (:attr:`~gluon_bbb.VariationalPosterior.names`).
    stds : sequence of array-like
        The standard deviations, the shapes of ``means``, positive and finite.
    """

    name = "diagonal-gaussian"
    per_weight = True
    has_closed_form_kl = True

    def __init__(self, means: Sequence, stds: Sequence) -> None:
        means, stds = list(means), list(stds)
        if not means or len(means) != len(stds):
            raise ValueError(f"need one array of standard deviations per array of means, got "
                             f"{len(means)} means and {len(stds)} stds")
        self._initial, self._constants = {}, {}
        for i, (mean, std) in enumerate(zip(means, stds)):
            mean = np.array(mean.asnumpy() if hasattr(mean, "asnumpy") else mean, dtype=None)
            std = np.array(std.asnumpy() if hasattr(std, "asnumpy") else std, dtype=None)
            dtype = mean.dtype if mean.dtype in (np.float32, np.float64) else np.dtype("float32")
            if mean.shape != std.shape or mean.ndim == 0:
                raise ValueError(f"tensor {i}: means of shape {mean.shape} and standard "
                                 f"deviations of shape {std.shape}; need one of each per weight")
            if not np.all(np.isfinite(mean)):
                raise ValueError(f"tensor {i}: the means must be finite")
            if not np.all((std > 0) & np.isfinite(std)):
                raise ValueError(f"tensor {i}: the standard deviations must be positive and finite")
            for kind, values in (("mean", mean), ("std", std)):
                name = f"{kind}{i}"
                self._initial[name] = values.astype(dtype)
                self._constants[name] = gluon.Parameter(
                    f"prior_{name}", shape=values.shape, dtype=dtype, grad_req="null",
                    init=_Values(self._initial[name]))
        self.shapes = [tuple(self._initial[f"mean{i}"].shape) for i in range(len(means))]
        self.sizes = [int(np.prod(shape)) for shape in self.shapes]
        # (ctx, dtype), the parameters' array lists then, (means, stds): see _placed
        self._placement = None
        # (the likes of the last arrays() call, the placement it handed out): see arrays
        self._handed_out = None

    @classmethod
    def from_posterior(cls, posterior) -> "DiagonalGaussianPrior":
        """The prior N(w; mu, sigma^2) of a trained posterior q(w | theta): a snapshot of its mu
        and sigma = softplus(rho) (copies; training the posterior further changes neither).

        Parameters
        ----------
        posterior : VariationalPosterior
            E.g. ``trainer.posterior`` after :meth:`~gluon_bbb.BBBTrainer.fit`.

        Returns
        -------
        DiagonalGaussianPrior, over tensors of the posterior's shapes, in its order
        """
        if posterior is None or not hasattr(posterior, "mus"):
            raise TypeError("from_posterior needs a VariationalPosterior (trainer.posterior, "
                            f"once the trainer has seen data), got {posterior!r}")
        return cls([mu.asnumpy() for mu in posterior.means()],
                   [sigma.asnumpy() for sigma in posterior.sigmas()])

    def constants(self):
        return dict(self._constants)

    def _current(self, name):
        """A numpy copy of one of the arrays (as loaded or made)."""
        param = self._constants[name]
        try:
            return param.data(param.list_ctx()[0]).asnumpy()
        except RuntimeError:  # not initialised yet
            return self._initial[name].copy()

    def means(self):
        """The means m, one numpy array per weight tensor (copies)."""
        return [self._current(f"mean{i}") for i in range(len(self.shapes))]

    def stds(self):
        """The standard deviations s, one numpy array per weight tensor (copies)."""
        return [self._current(f"std{i}") for i in range(len(self.shapes))]

    def values(self):
        raise TypeError("a DiagonalGaussianPrior's values are arrays: see means() and stds()")

    def config(self):
        """``{'name': 'diagonal-gaussian', 'shapes': [...]}``: the arrays themselves are a
        checkpoint's arrays, not JSON."""
        return {"name": self.name, "shapes": [list(shape) for shape in self.shapes]}

    def check_shapes(self, names, shapes):
        shapes = [tuple(shape) for shape in shapes]
        if len(shapes) != len(self.shapes):
            raise ValueError(f"the prior covers {len(self.shapes)} weight tensors, the network "
                             f"has {len(shapes)}: it was made from another network's posterior")
        for i, (name, shape, own) in enumerate(zip(names, shapes, self.shapes)):
            if shape != own:
                raise ValueError(f"weight tensor {i} ({name}) has shape {shape}, the prior's "
                                 f"tensor {i} has {own}: it was made from another network's "
                                 "posterior")

    def arrays(self, likes: Sequence) -> tuple:
        """The means and standard deviations of every weight tensor as NDArrays on the context
        and in the dtype of ``likes`` (the posterior's mu, say), for the fused operator.

        A training step calls it with the same ``likes`` every time: after the first call it
        checks only that they and the prior's arrays are the same objects as then, and hands
        out the same two tuples (no placement, no new arrays, no host sync).

        Parameters
        ----------
        likes : list of NDArrays, one per weight tensor, of the prior's shapes

        Returns
        -------
        (means, stds) : two tuples of NDArrays, the prior's own arrays (not copies: read only)
        """
        likes = tuple(likes)
        handed_out = self._handed_out
        if handed_out is not None and handed_out[1] is self._placement and \
                len(likes) == len(handed_out[0]) and \
                all(a is b for a, b in zip(likes, handed_out[0])) and self._still_placed():
            return self._placement[2]
        if len(likes) != len(self.shapes):
            raise ValueError(f"the prior covers {len(self.shapes)} weight tensors, got "
                             f"{len(likes)}")
        for index, like in enumerate(likes):
            if tuple(like.shape) != self.shapes[index]:
                raise ValueError(f"weight tensor {index} has shape {tuple(like.shape)}, the "
                                 f"prior's has {self.shapes[index]}")
        result = self._placed(likes[0].context, np.dtype(likes[0].dtype).name)
        # the likes are kept (not only their ids), so no other array can take their ids
        self._handed_out = (likes, self._placement)
        return result

    def _placed(self, ctx, dtype):
        """(means, stds), tuples of the prior's arrays on ``ctx`` in ``dtype``: initialised,
        moved or cast (:meth:`initialize`) only when the last placement was elsewhere, or when
        something replaced the parameters' arrays since (a cast, ``reset_ctx``, a forced
        re-initialisation; ``set_data``, as a checkpoint's load, writes into them)."""
        placement = self._placement
        if placement is not None and placement[0] == (ctx, dtype) and self._still_placed():
            return placement[2]
        self.initialize(ctx, dtype)
        params = [self._constants[f"{kind}{i}"] for kind in ("mean", "std")
                  for i in range(len(self.shapes))]
        arrays = [param.data(ctx) for param in params]
        n = len(self.shapes)
        self._placement = ((ctx, dtype), [(param, parameter_arrays(param)) for param in params],
                           (tuple(arrays[:n]), tuple(arrays[n:])))
        return self._placement[2]

    def _still_placed(self):
        """Whether the parameters hold the array lists of the last placement."""
        return self._placement is not None and \
            all(parameter_arrays(param) is data for param, data in self._placement[1])

    def _arrays(self, F, like, raw, index):
        """(m, s) of weight tensor ``index``: from ``raw`` inside a graph, else the arrays on
        ``like``'s context in its dtype."""
        if index is None or not 0 <= int(index) < len(self.shapes):
            raise ValueError(f"a per-weight prior needs the weight tensor's index in "
                             f"[0, {len(self.shapes)}), got {index!r}")
        index = int(index)
        if raw:
            return raw[f"mean{index}"], raw[f"std{index}"]
        if F is not mx.nd:
            raise ValueError("a per-weight prior inside a graph needs its arrays as ``raw``")
        if tuple(like.shape) != self.shapes[index]:
            raise ValueError(f"weight tensor {index} has shape {tuple(like.shape)}, the prior's "
                             f"has {self.shapes[index]}")
        means, stds = self._placed(like.context, np.dtype(like.dtype).name)
        return means[index], stds[index]

    def log_prob(self, w, F=None, raw=None, index=None):
        """log N(w_j; m_j, s_j^2) elementwise, for weight tensor ``index``.

        Parameters
        ----------
        w : NDArray or Symbol, the shape of the prior's tensor ``index``
        F : module, optional
        raw : dict, optional
            The prior's arrays by name (:meth:`constants`), as ``hybrid_forward`` receives them.
        index : int
            Which weight tensor ``w`` is, its position in the posterior.

        Returns
        -------
        NDArray or Symbol, same shape as ``w``
        """
        F = F or get_F(w)
        mean, std = self._arrays(F, w, raw, index)
        return -0.5 * F.square((w - mean) / std) - F.log(std) - LOG_SQRT_2PI

    def sum_log_prob(self, w, F=None, raw=None, index=None):
        """sum_j log N(w_j; m_j, s_j^2) = -sum_j (w_j - m_j)^2 / (2 s_j^2) - sum_j log s_j -
        n log(2 pi) / 2, shape (1,): the log P(w) of Eq. (8)'s Monte Carlo complexity."""
        F = F or get_F(w)
        mean, std = self._arrays(F, w, raw, index)
        return (-0.5 * sum_of_squares(F, (w - mean) / std) - total(F, F.log(std))
                - self.sizes[int(index)] * LOG_SQRT_2PI)

    def sum_kl(self, mu, sigma, F=None, raw=None, index=None):
        """KL(N(mu, sigma^2) || N(m, s^2)) summed over the weights of tensor ``index``:

        sum_j [log(s_j / sigma_j) + (sigma_j^2 + (mu_j - m_j)^2) / (2 s_j^2) - 1/2],

        the expectation under q of Eq. (8)'s log q(w | theta) - log P(w). Each term is
        summed as (r_j^2 - 1) / 2 - log r_j + g_j^2 / 2 with r = sigma / s and g = (mu - m) / s,
        two non-negative numbers, the first from :func:`~gluon_bbb._math.kl_normal_scales`,
        accurate to a few units of the last place also near r = 1 (the textbook form, in
        float32, is off by 2% at r = 1 + 1e-3, with mu = m): a q close to the prior, as right
        after :meth:`from_posterior`, has its KL to float32 precision.

        Parameters
        ----------
        mu, sigma : NDArray or Symbol, the shape of the prior's tensor ``index``, sigma > 0
        F : module, optional
        raw : dict, optional
            The prior's arrays by name (:meth:`constants`).
        index : int

        Returns
        -------
        NDArray or Symbol, (1,)
        """
        F = F or get_F(mu)
        mean, std = self._arrays(F, mu, raw, index)
        return total(F, kl_normal_scales(F, sigma, std) + 0.5 * F.square((mu - mean) / std))

    def __eq__(self, other):
        return (type(self) is type(other) and self.shapes == other.shapes
                and all(np.array_equal(a, b) for a, b in zip(self.means() + self.stds(),
                                                             other.means() + other.stds())))

    def __repr__(self):
        return (f"DiagonalGaussianPrior({sum(self.sizes)} weights in {len(self.shapes)} "
                "tensors)")


class _Values(mx.init.Initializer):
    """Initialises an array with given values (a per-weight prior's)."""

    def __init__(self, values):
        super().__init__()
        self.values = values

    def _init_weight(self, _, arr):
        arr[:] = self.values.astype(arr.dtype)

    _init_bias = _init_weight
    _init_default = _init_weight
