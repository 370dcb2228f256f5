"""The paper's priors (section 3.3), one for all weights: the Gaussian and the scale mixture of
Eq. (7), each fixed or learned (empirical Bayes)."""
from __future__ import annotations

import math
import numbers

from .._math import LOG_SQRT_2PI, get_F, kl_normal_scales, softplus, sum_of_squares, total
from .base import Prior

__all__ = ["GaussianPrior", "ScaleMixturePrior"]


def _check_positive_finite(name, value):
    try:
        value = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a positive number, got {value!r}") from None
    if not (value > 0.0 and math.isfinite(value)):
        raise ValueError(f"{name} must be a positive finite number, got {value!r}")
    return value


class GaussianPrior(Prior):
    """P(w) = N(w; 0, sigma^2) for every weight.

    Parameters
    ----------
    sigma : float, > 0
        Standard deviation of the prior (with ``learnable=True``, its starting value).
    learnable : bool
        Learn sigma (empirical Bayes) through the parameter ``log_sigma``. For the closed-form
        KL the optimum has a closed form too, sigma^2 = mean_j (sigma_j^2 + mu_j^2) over the
        posterior's weights.
    """

    name = "gaussian"

    def __init__(self, sigma: float = 1.0, learnable: bool = False) -> None:
        self._sigma = _check_positive_finite("sigma", sigma)
        if learnable:
            self._make_learnable({"log_sigma": math.log(self._sigma)})

    @property
    def sigma(self):
        """The standard deviation: fixed, or as learned so far (a host sync)."""
        return self.values()["sigma"]

    def values(self):
        if not self.learnable:
            return {"sigma": self._sigma}
        return {"sigma": math.exp(self._current_raw()["log_sigma"])}

    def _terms(self, F, raw):
        """(alpha, c) with log N(w; 0, sigma^2) = alpha w^2 + c: floats for a fixed prior,
        (1,) arrays of its ``log_sigma`` for a learnable one."""
        if raw is None:
            return -0.5 / (self._sigma * self._sigma), -(math.log(self._sigma) + LOG_SQRT_2PI)
        log_sigma = raw["log_sigma"]
        return -0.5 * F.exp(-2.0 * log_sigma), -(log_sigma + LOG_SQRT_2PI)

    def log_prob(self, w, F=None, raw=None, index=None):
        """log N(w; 0, sigma^2) elementwise.

        Parameters
        ----------
        w : NDArray or Symbol, any shape
        F : module, optional
            ``mx.nd`` or ``mx.sym``; inferred from ``w`` when omitted.
        raw : dict, optional
            A learnable prior's parameters (see :class:`Prior`).
        index : int, optional
            Ignored: the prior is the same for every weight tensor.

        Returns
        -------
        NDArray or Symbol, same shape as ``w``
        """
        F = F or get_F(w)
        return _affine(F, F.square(w), *self._terms(F, self._raw(F, w, raw)))

    def sum_log_prob(self, w, F=None, raw=None, index=None):
        """sum_j log N(w_j; 0, sigma^2) = -sum(w^2) / (2 sigma^2) - n (log sigma + log(2 pi) / 2).

        sum(w^2) is one BLAS dot product; shape (1,).
        """
        F = F or get_F(w)
        return _quadratic_total(F, w, *self._terms(F, self._raw(F, w, raw)))

    has_closed_form_kl = True

    def sum_kl(self, mu, sigma, F=None, raw=None, index=None):
        """KL(N(mu, sigma^2) || N(0, s^2)) summed over all weights, s the prior's sigma:

        sum_j [log(s / sigma_j) + (sigma_j^2 + mu_j^2) / (2 s^2) - 1/2],

        the expectation under q of the paper's Monte Carlo complexity log q(w | theta) -
        log P(w) (Eq. 8), which the paper notes has closed forms for some prior-posterior
        pairs (section 3.1; Kingma & Welling 2014, appendix B). The terms of sigma_j are
        summed as :func:`~gluon_bbb._math.kl_normal_scales`, accurate also where sigma_j is
        close to s, and those of mu_j as one sum of squares, sum_j mu_j^2 / (2 s^2).

        Parameters
        ----------
        mu, sigma : NDArray or Symbol, the same shape, sigma > 0
        F : module, optional
        raw : dict, optional
            A learnable prior's parameters (see :class:`Prior`).
        index : int, optional
            Ignored: the prior is the same for every weight tensor.

        Returns
        -------
        NDArray or Symbol, (1,)
        """
        F = F or get_F(mu)
        raw = self._raw(F, mu, raw)
        alpha, _ = self._terms(F, raw)  # alpha = -1 / (2 s^2)
        s = self._sigma if raw is None else F.exp(raw["log_sigma"])
        return total(F, kl_normal_scales(F, sigma, s)) - sum_of_squares(F, mu) * alpha


class ScaleMixturePrior(Prior):
    """The scale mixture prior of the paper's Eq. (7).

    P(w) = pi N(w; 0, sigma1^2) + (1 - pi) N(w; 0, sigma2^2), with sigma1 > sigma2 so that
    the first component has a heavy tail and the second concentrates many weights near zero.

    Parameters
    ----------
    pi : float, 0 < pi < 1
        Weight of the wide component.
    sigma1 : float, > 0
        Standard deviation of the wide component.
    sigma2 : float, 0 < sigma2 < sigma1
        Standard deviation of the narrow component.
    learnable : bool
        Learn all three (empirical Bayes) through the parameters ``logit_pi``, ``log_sigma1``
        and ``log_sigma2``. Learning may carry sigma2 past sigma1; the mixture is the same
        with its components swapped, and :meth:`values` reports them in the order wide, narrow.
    """

    name = "scale-mixture"

    def __init__(self, pi: float = 0.5, sigma1: float = math.exp(-0.0),
                 sigma2: float = math.exp(-6.0), learnable: bool = False) -> None:
        try:
            pi = float(pi)
        except (TypeError, ValueError):
            raise ValueError(f"pi must be a number in (0, 1), got {pi!r}") from None
        if not 0.0 < pi < 1.0:
            raise ValueError(f"pi must lie strictly between 0 and 1, got {pi!r}")
        self._pi = pi
        self._sigma1 = _check_positive_finite("sigma1", sigma1)
        self._sigma2 = _check_positive_finite("sigma2", sigma2)
        if not self._sigma2 < self._sigma1:
            raise ValueError(
                f"sigma2 must be smaller than sigma1 (sigma2={self._sigma2!r}, sigma1={self._sigma1!r})"
            )
        if learnable:
            self._make_learnable({"logit_pi": math.log(pi) - math.log1p(-pi),
                                  "log_sigma1": math.log(self._sigma1),
                                  "log_sigma2": math.log(self._sigma2)})

    pi = property(lambda self: self.values()["pi"], doc="Weight of the wide component.")
    sigma1 = property(lambda self: self.values()["sigma1"], doc="The wide component's std.")
    sigma2 = property(lambda self: self.values()["sigma2"], doc="The narrow component's std.")

    def values(self):
        if not self.learnable:
            return {"pi": self._pi, "sigma1": self._sigma1, "sigma2": self._sigma2}
        raw = self._current_raw()
        pi = 1.0 / (1.0 + math.exp(-raw["logit_pi"]))
        sigma1, sigma2 = math.exp(raw["log_sigma1"]), math.exp(raw["log_sigma2"])
        if sigma2 > sigma1:  # the same mixture, named wide then narrow
            pi, sigma1, sigma2 = 1.0 - pi, sigma2, sigma1
        return {"pi": pi, "sigma1": sigma1, "sigma2": sigma2}

    def _terms(self, F, raw):
        """((alpha1, c1), (alpha2, c2)) with log(weight_k N(w; 0, sigma_k^2)) = alpha_k w^2 +
        c_k: floats for a fixed prior, (1,) arrays of its parameters for a learnable one."""
        if raw is None:
            return (self._component(self._sigma1, self._pi),
                    self._component(self._sigma2, 1.0 - self._pi))
        logit = raw["logit_pi"]
        log_weights = (-softplus(F, -logit), -softplus(F, logit))  # log pi, log(1 - pi)
        return tuple((-0.5 * F.exp(-2.0 * log_sigma), log_weight - log_sigma - LOG_SQRT_2PI)
                     for log_sigma, log_weight in zip((raw["log_sigma1"], raw["log_sigma2"]),
                                                      log_weights))

    def log_prob(self, w, F=None, raw=None, index=None):
        """log(pi N(w; 0, sigma1^2) + (1 - pi) N(w; 0, sigma2^2)) elementwise, Eq. (7).

        Computed as a log-sum-exp, a + softplus(b - a), where a is the log of the wide
        component and b that of the narrow one, so it stays finite for any finite w
        (for abs(w) = 50 and sigma2 = e^-8, b is about -1e10 and the result is a).

        Parameters
        ----------
        w : NDArray or Symbol, any shape
        F : module, optional
        raw : dict, optional
            A learnable prior's parameters (see :class:`Prior`).
        index : int, optional
            Ignored: the prior is the same for every weight tensor.

        Returns
        -------
        NDArray or Symbol, same shape as ``w``
        """
        F = F or get_F(w)
        (alpha1, c1), (alpha2, c2) = self._terms(F, self._raw(F, w, raw))
        square = F.square(w)
        wide = _affine(F, square, alpha1, c1)
        narrow = _affine(F, square, alpha2, c2)
        # softplus(b - a) is only ever added to a; its absolute error (< 3e-6 from the fast
        # kernel) is what matters here, not its relative error.
        return wide + F.Activation(narrow - wide, act_type="softrelu")

    def sum_log_prob(self, w, F=None, raw=None, index=None):
        """log P(w) of Eq. (7) summed over all elements, shape (1,).

        With a = log pi N(w; 0, sigma1^2) = alpha1 w^2 + c1 (and b likewise for sigma2),
        sum(a + softplus(b - a)) = alpha1 sum(w^2) + n c1 + sum(softplus((alpha2 - alpha1) w^2 + c2 - c1)):
        w^2 is formed once and sum(w^2) is a BLAS dot product.
        """
        F = F or get_F(w)
        (alpha1, c1), (alpha2, c2) = self._terms(F, self._raw(F, w, raw))
        gap = _affine(F, F.square(w), alpha2 - alpha1, c2 - c1)
        return _quadratic_total(F, w, alpha1, c1) + total(F, F.Activation(gap, act_type="softrelu"))

    @staticmethod
    def _component(sigma, weight):
        """(alpha, c) with log(weight N(w; 0, sigma^2)) = alpha w^2 + c."""
        return -0.5 / sigma ** 2, math.log(weight) - math.log(sigma) - LOG_SQRT_2PI


def _affine(F, x, alpha, c):
    """alpha x + c elementwise, for floats or (1,) arrays alpha and c (then broadcast)."""
    if isinstance(alpha, numbers.Real):
        return x * alpha + c
    return F.broadcast_add(F.broadcast_mul(x, alpha), c)


def _quadratic_total(F, w, alpha, c):
    """sum_j (alpha w_j^2 + c) = alpha sum(w^2) + n c, shape (1,)."""
    flat = F.reshape(w, shape=(-1,))
    ones = F.ones_like(flat)
    return sum_of_squares(F, flat) * alpha + F.dot(ones, ones) * c
