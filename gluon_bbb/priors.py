"""Priors over the network weights: the paper's Gaussian and scale-mixture priors (section 3.3).

Both are F-agnostic: ``log_prob(w)`` accepts an NDArray or, inside ``hybrid_forward``, a Symbol.
"""
import math

from ._math import LOG_SQRT_2PI, gaussian_log_density, get_F, sum_of_squares, total

__all__ = ["Prior", "GaussianPrior", "ScaleMixturePrior", "prior_from_config"]


def _check_positive_finite(name, value):
    try:
        value = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a positive number, got {value!r}") from None
    if not (value > 0.0 and math.isfinite(value)):
        raise ValueError(f"{name} must be a positive finite number, got {value!r}")
    return value


class Prior:
    """Base class: an elementwise, factorised prior P(w) = prod_j P(w_j)."""

    def log_prob(self, w, F=None):
        """Elementwise log P(w); same shape as ``w``."""
        raise NotImplementedError

    def sum_log_prob(self, w, F=None):
        """log P(w) summed over all elements of ``w``, shape (1,).

        Equal to ``sum(log_prob(w))``; subclasses compute it with fewer passes over w.
        """
        F = F or get_F(w)
        return total(F, self.log_prob(w, F))

    def config(self):
        """A JSON-serialisable dict from which :func:`prior_from_config` rebuilds the prior."""
        raise NotImplementedError

    #: Whether :meth:`sum_kl` has a closed form for this prior.
    has_closed_form_kl = False

    def sum_kl(self, mu, sigma, F=None):
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


class GaussianPrior(Prior):
    """P(w) = N(w; 0, sigma^2) for every weight.

    Parameters
    ----------
    sigma : float, > 0
        Standard deviation of the prior.
    """

    def __init__(self, sigma=1.0):
        self.sigma = _check_positive_finite("sigma", sigma)

    def log_prob(self, w, F=None):
        """log N(w; 0, sigma^2) elementwise.

        Parameters
        ----------
        w : NDArray or Symbol, any shape
        F : module, optional
            ``mx.nd`` or ``mx.sym``; inferred from ``w`` when omitted.

        Returns
        -------
        NDArray or Symbol, same shape as ``w``
        """
        F = F or get_F(w)
        return gaussian_log_density(F, w, self.sigma)

    def sum_log_prob(self, w, F=None):
        """sum_j log N(w_j; 0, sigma^2) = -sum(w^2) / (2 sigma^2) - n (log sigma + log(2 pi) / 2).

        sum(w^2) is one BLAS dot product; shape (1,).
        """
        F = F or get_F(w)
        return _quadratic_total(F, w, -0.5 / self.sigma ** 2, -(math.log(self.sigma) + LOG_SQRT_2PI))

    has_closed_form_kl = True

    def sum_kl(self, mu, sigma, F=None):
        """KL(N(mu, sigma^2) || N(0, s^2)) summed over all weights, s the prior's sigma:

        sum_j [log(s / sigma_j) + (sigma_j^2 + mu_j^2) / (2 s^2) - 1/2],

        the expectation under q of the paper's Monte Carlo complexity log q(w | theta) -
        log P(w) (Eq. 8), which the paper notes has closed forms for some prior-posterior
        pairs (section 3.1; Kingma & Welling 2014, appendix B).

        Parameters
        ----------
        mu, sigma : NDArray or Symbol, the same shape, sigma > 0
        F : module, optional

        Returns
        -------
        NDArray or Symbol, (1,)
        """
        F = F or get_F(mu)
        quadratic = (sum_of_squares(F, sigma) + sum_of_squares(F, mu)) * (0.5 / self.sigma ** 2)
        return quadratic - total(F, F.log(sigma)) + total(F, F.ones_like(mu)) * (
            math.log(self.sigma) - 0.5)

    def config(self):
        return {"name": "gaussian", "sigma": self.sigma}


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
    """

    def __init__(self, pi=0.5, sigma1=math.exp(-0.0), sigma2=math.exp(-6.0)):
        try:
            pi = float(pi)
        except (TypeError, ValueError):
            raise ValueError(f"pi must be a number in (0, 1), got {pi!r}") from None
        if not 0.0 < pi < 1.0:
            raise ValueError(f"pi must lie strictly between 0 and 1, got {pi!r}")
        self.pi = pi
        self.sigma1 = _check_positive_finite("sigma1", sigma1)
        self.sigma2 = _check_positive_finite("sigma2", sigma2)
        if not self.sigma2 < self.sigma1:
            raise ValueError(
                f"sigma2 must be smaller than sigma1 (sigma2={self.sigma2!r}, sigma1={self.sigma1!r})"
            )

    def log_prob(self, w, F=None):
        """log(pi N(w; 0, sigma1^2) + (1 - pi) N(w; 0, sigma2^2)) elementwise, Eq. (7).

        Computed as a log-sum-exp, a + softplus(b - a), where a is the log of the wide
        component and b that of the narrow one, so it stays finite for any finite w
        (for abs(w) = 50 and sigma2 = e^-8, b is about -1e10 and the result is a).

        Parameters
        ----------
        w : NDArray or Symbol, any shape
        F : module, optional

        Returns
        -------
        NDArray or Symbol, same shape as ``w``
        """
        F = F or get_F(w)
        wide = gaussian_log_density(F, w, self.sigma1) + math.log(self.pi)
        narrow = gaussian_log_density(F, w, self.sigma2) + math.log1p(-self.pi)
        # softplus(b - a) is only ever added to a; its absolute error (< 3e-6 from the fast
        # kernel) is what matters here, not its relative error.
        return wide + F.Activation(narrow - wide, act_type="softrelu")

    def sum_log_prob(self, w, F=None):
        """log P(w) of Eq. (7) summed over all elements, shape (1,).

        With a = log pi N(w; 0, sigma1^2) = alpha1 w^2 + c1 (and b likewise for sigma2),
        sum(a + softplus(b - a)) = alpha1 sum(w^2) + n c1 + sum(softplus((alpha2 - alpha1) w^2 + c2 - c1)):
        w^2 is formed once and sum(w^2) is a BLAS dot product.
        """
        F = F or get_F(w)
        alpha1, c1 = self._component(self.sigma1, self.pi)
        alpha2, c2 = self._component(self.sigma2, 1.0 - self.pi)
        gap = F.square(w) * (alpha2 - alpha1) + (c2 - c1)
        return _quadratic_total(F, w, alpha1, c1) + total(F, F.Activation(gap, act_type="softrelu"))

    @staticmethod
    def _component(sigma, weight):
        """(alpha, c) with log(weight N(w; 0, sigma^2)) = alpha w^2 + c."""
        return -0.5 / sigma ** 2, math.log(weight) - math.log(sigma) - LOG_SQRT_2PI

    def config(self):
        return {"name": "scale_mixture", "pi": self.pi, "sigma1": self.sigma1, "sigma2": self.sigma2}


def _quadratic_total(F, w, alpha, c):
    """sum_j (alpha w_j^2 + c) = alpha sum(w^2) + n c, shape (1,)."""
    flat = F.reshape(w, shape=(-1,))
    ones = F.ones_like(flat)
    return sum_of_squares(F, flat) * alpha + F.dot(ones, ones) * c


def prior_from_config(config):
    """Rebuild a prior from :meth:`Prior.config` output.

    Parameters
    ----------
    config : dict
        ``{"name": "gaussian", "sigma": ...}`` or
        ``{"name": "scale_mixture", "pi": ..., "sigma1": ..., "sigma2": ...}``.
    """
    config = dict(config)
    name = config.pop("name", None)
    if name == "gaussian":
        return GaussianPrior(**config)
    if name == "scale_mixture":
        return ScaleMixturePrior(**config)
    raise ValueError(f"unknown prior {name!r}; expected 'gaussian' or 'scale_mixture'")
