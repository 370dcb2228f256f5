"""The base class of the priors: an elementwise, factorised P(w), fixed or learned, shared by
all weights or per weight."""
from __future__ import annotations

from typing import Sequence

import mxnet as mx
from mxnet import gluon

from .._math import get_F, total

__all__ = ["Prior"]


class Prior:
    """Base class: an elementwise, factorised prior P(w) = prod_j P(w_j).

    A prior is fixed (its values are Python floats, constants of the cost) or, with
    ``learnable=True``, learned by empirical Bayes: its values are then functions of
    unconstrained (1,)-shaped ``gluon.Parameter`` s (:meth:`parameters`; log sigma, and the
    logit of pi), which :class:`~gluon_bbb.BBBLoss` registers as its own so that
    :class:`~gluon_bbb.BBBTrainer` trains them with mu and rho on the same cost, Eq. (8).
    Every method takes those parameters as ``raw`` (a dict name -> (1,) NDArray or Symbol,
    as ``hybrid_forward`` receives them); without ``raw`` a learnable prior reads their
    current values.

    A per-weight prior (:attr:`per_weight`, :class:`DiagonalGaussianPrior`) differs for each
    weight tensor: its methods take the tensor's position ``index`` among the posterior's
    tensors, and its arrays are fixed ``gluon.Parameter`` s (:meth:`constants`, grad_req
    'null') that :class:`~gluon_bbb.BBBLoss` hands to ``hybrid_forward`` in ``raw`` too.
    The paper's priors are the same for every tensor and ignore ``index``.
    """

    #: Whether the prior's values are trained (see the class docstring).
    learnable = False
    #: Whether the prior has its own values for each weight (see the class docstring).
    per_weight = False

    def _make_learnable(self, initial):
        """Make this prior learnable, with parameters name -> initial unconstrained value."""
        self.learnable = True
        self._initial = dict(initial)
        self._parameters = {
            name: gluon.Parameter(f"prior_{name}", shape=(1,), init=mx.init.Constant(value),
                                  dtype="float32")
            for name, value in initial.items()}

    def parameters(self):
        """name -> ``gluon.Parameter`` of shape (1,): the trained unconstrained values of a
        learnable prior; empty for a fixed one."""
        return dict(getattr(self, "_parameters", {}))

    def constants(self):
        """name -> ``gluon.Parameter`` with grad_req 'null': a per-weight prior's fixed arrays,
        inputs of the cost that are never trained; empty for the paper's priors."""
        return {}

    def check_shapes(self, names: Sequence[str], shapes: Sequence[tuple]) -> None:
        """A ValueError unless the prior covers weight tensors of these shapes (the
        posterior's, in its order); every shape fits a prior shared by all weights."""

    def initialize(self, ctx, dtype="float32"):
        """Create a learnable prior's parameters (and a per-weight prior's arrays) on ``ctx``
        in ``dtype`` (done once; later calls move them to ``ctx``). Nothing to do for a fixed
        scalar prior."""
        for param in {**self.parameters(), **self.constants()}.values():
            try:
                contexts = param.list_ctx()
            except RuntimeError:  # not initialised yet
                param.dtype = dtype
                param.initialize(ctx=ctx)
                continue
            if ctx not in contexts:
                param.reset_ctx(ctx)
            if param.dtype != dtype:
                param.cast(dtype)

    def _raw(self, F, like, raw):
        """The raw parameters to compute with: None for a fixed prior, else ``raw`` or the
        parameters' current arrays on ``like``'s context."""
        if not self.learnable:
            return None
        if raw:
            return raw
        if F is not mx.nd:
            raise ValueError("a learnable prior inside a graph needs its parameters as ``raw``")
        return {name: param.data(like.context) for name, param in self._parameters.items()}

    def _current_raw(self):
        """name -> float: a learnable prior's current unconstrained values (a host sync)."""
        values = dict(self._initial)  # until the parameters are initialised
        for name, param in self._parameters.items():
            try:
                values[name] = float(param.data(param.list_ctx()[0]).asnumpy()[0])
            except RuntimeError:
                pass
        return values

    def log_prob(self, w, F=None, raw=None, index=None):
        """Elementwise log P(w); same shape as ``w``."""
        raise NotImplementedError

    def sum_log_prob(self, w, F=None, raw=None, index=None):
        """log P(w) summed over all elements of ``w``, shape (1,).

        Equal to ``sum(log_prob(w))``; subclasses compute it with fewer passes over w.
        """
        F = F or get_F(w)
        return total(F, self.log_prob(w, F, raw, index))

    def values(self):
        """name -> float: the prior's current values (a learned prior's as trained so far)."""
        raise NotImplementedError

    def config(self):
        """A JSON-serialisable dict from which :func:`prior_from_config` rebuilds the prior
        (a learnable prior with its current values as the starting point)."""
        config = {"name": self.name, **self.values()}
        if self.learnable:
            config["learnable"] = True
        return config

    #: Whether :meth:`sum_kl` has a closed form for this prior.
    has_closed_form_kl = False

    def sum_kl(self, mu, sigma, F=None, raw=None, index=None):
        """KL(q || P) summed over all weights, for q = N(mu, sigma^2) elementwise, shape (1,).

        Only priors with ``has_closed_form_kl`` implement it; the paper's Monte Carlo
        estimate (Eq. 8's log q(w | theta) - log P(w)) works for every prior.
        """
        raise ValueError(f"{type(self).__name__} has no closed-form KL divergence from a "
                         "Gaussian posterior; use the Monte Carlo estimate (kl='monte_carlo')")

    def __eq__(self, other):
        return type(self) is type(other) and self.config() == other.config()

    def __repr__(self):
        args = ", ".join(f"{k}={v!r}" for k, v in self.config().items() if k != "name")
        return f"{type(self).__name__}({args})"
