"""Numerically careful elementwise functions shared by the priors, the loss and the posterior.

Every function takes the operator namespace ``F`` first (``mx.nd`` or ``mx.sym``) so it can be
called imperatively and from inside ``hybrid_forward``, in the style of GluonTS distributions.
"""
import math
import numbers

import mxnet as mx

__all__ = ["LOG_SQRT_2PI", "get_F", "softplus", "normal_cdf", "total", "sum_of_squares",
           "kl_normal_scales"]

#: log(sqrt(2 pi)), the normalising constant of a standard normal density.
LOG_SQRT_2PI = 0.5 * math.log(2.0 * math.pi)

# Below this rho the fast oneDNN ``softrelu`` loses relative accuracy in float32
# (about 1e-6 at rho = -3, 1e-2 at rho = -10); there the series in sigmoid(rho) is used.
_SOFTPLUS_SERIES_BELOW = -3.0


def get_F(x):
    """Return the operator namespace of ``x``: ``mx.sym`` for a Symbol, otherwise ``mx.nd``."""
    return mx.sym if isinstance(x, mx.sym.Symbol) else mx.nd


def softplus(F, rho):
    """sigma = log(1 + exp(rho)), accurate in float32 for every finite rho.

    The paper (Blundell et al. 2015, section 3.2) parameterises the posterior standard
    deviation as sigma = log(1 + exp(rho)) so that sigma is always positive.

    For rho > -3 the oneDNN ``softrelu`` kernel is fast and accurate. For rho <= -3 it is
    not (it computes log(1 + exp(rho)) with 1 + exp(rho) rounded), so there we use
    ``log1p(z) = -log(1 - s) = s + s^2/2 + s^3/3 + ...`` with ``z = exp(rho)`` and
    ``s = sigmoid(rho) = z / (1 + z) <= 0.0475``; five terms leave a relative truncation
    error below 5e-8, and sigmoid itself is exact to float32 rounding for very negative rho.

    Parameters
    ----------
    F : module
        ``mx.nd`` or ``mx.sym``.
    rho : NDArray or Symbol, any shape

    Returns
    -------
    NDArray or Symbol, same shape as ``rho``
        Strictly positive wherever exp(rho) does not underflow (rho > -87 in float32).
    """
    s = F.Activation(rho, act_type="sigmoid")
    series = s * (1.0 + s * (0.5 + s * (1.0 / 3.0 + s * (0.25 + s * 0.2))))
    fast = F.Activation(rho, act_type="softrelu")
    return F.where(rho > _SOFTPLUS_SERIES_BELOW, fast, series)


# Below this |u| = |sigma - s| / (sigma + s) (0.818 < sigma / s < 1.222), the scale part of
# the KL is summed by its series in u (the first term left out is below 1e-16 of the result);
# above it, the direct form cancels by a factor of 5 at most.
_KL_SERIES_BELOW = 0.1


def kl_normal_scales(F, sigma, s):
    """(r^2 - 1) / 2 - log r with r = sigma / s, elementwise, accurate to a few units of the
    last place also near r = 1.

    KL(N(mu, sigma^2) || N(m, s^2)) = (r^2 - 1) / 2 - log r + ((mu - m) / s)^2 / 2 (Kingma &
    Welling 2014, appendix B); this is its part that depends on the standard deviations alone.
    Near r = 1 it is about (r - 1)^2 and the two terms of the textbook form cancel (in float32,
    a relative error of 2% at r = 1 + 1e-3). There, with u = (sigma - s) / (sigma + s) =
    (r - 1) / (r + 1), exact to rounding, r = (1 + u) / (1 - u) and log r = 2 atanh(u), so

        (r^2 - 1) / 2 - log r = 2 u^2 (2 - u) / (1 - u)^2 - 2 (u^3/3 + u^5/5 + u^7/7 + ...),

    whose series is a few percent of the first term at most; its first seven terms are summed
    where |u| < 0.1. Elsewhere it is t (t + 2) / 2 - log r with t = (sigma - s) / s and log r
    as log1p(t) (|t| < 1/2) or log(sigma / s). Relative error, measured against 40-digit
    arithmetic from r = 1e-3 to 1e3: below 7e-7 in float32 and 1.2e-15 in float64.

    Parameters
    ----------
    F : module
        ``mx.nd`` or ``mx.sym``.
    sigma : NDArray or Symbol, any shape, > 0
    s : float, or NDArray or Symbol broadcastable to ``sigma`` (the same shape, or (1,)), > 0

    Returns
    -------
    NDArray or Symbol, the shape of ``sigma``, >= 0
    """
    if isinstance(s, numbers.Real):
        difference, total_ = sigma - s, sigma + s
        u, t, ratio = difference / total_, difference / s, sigma / s
    else:
        difference = F.broadcast_sub(sigma, s)
        u = F.broadcast_div(difference, F.broadcast_add(sigma, s))
        t, ratio = F.broadcast_div(difference, s), F.broadcast_div(sigma, s)
    # clipped where unused, so that its gradient stays finite even at u = 1 (sigma >> s)
    clipped = F.clip(u, -0.5, 0.5)
    v = F.square(clipped)
    series = 1.0 / 15.0
    for power in (13, 11, 9, 7, 5, 3):
        series = 1.0 / power + v * series
    atanh_minus_u = clipped * v * series  # u^3/3 + u^5/5 + ... + u^15/15
    near = 2.0 * v * (2.0 - clipped) / F.square(1.0 - clipped) - 2.0 * atanh_minus_u
    log_ratio = F.where(F.abs(t) < 0.5, F.log1p(t), F.log(ratio))
    far = 0.5 * t * (t + 2.0) - log_ratio
    return F.where(F.abs(u) < _KL_SERIES_BELOW, near, far)


def normal_cdf(F, z):
    """Phi(z) = (1 + erf(z / sqrt(2))) / 2, the standard normal distribution function.

    Parameters
    ----------
    F : module
        ``mx.nd`` or ``mx.sym``.
    z : NDArray or Symbol, any shape

    Returns
    -------
    NDArray or Symbol, same shape as ``z``, in [0, 1]
    """
    return 0.5 * (1.0 + F.erf(z * (1.0 / math.sqrt(2.0))))


def total(F, x):
    """Sum of all elements of ``x`` as a shape (1,) array.

    A dot product with a ones vector: in the mxnet 1.9.1 CPU wheel this is one BLAS call and
    about 20x faster than ``F.sum`` on half a million float32 values.
    """
    flat = F.reshape(x, shape=(-1,))
    return F.dot(flat, F.ones_like(flat))


def sum_of_squares(F, x):
    """sum(x^2) as a shape (1,) array, by one BLAS dot product."""
    flat = F.reshape(x, shape=(-1,))
    return F.dot(flat, flat)
