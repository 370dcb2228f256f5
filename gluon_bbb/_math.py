"""Numerically careful elementwise functions shared by the priors, the loss and the posterior.

Every function takes the operator namespace ``F`` first (``mx.nd`` or ``mx.sym``) so it can be
called imperatively and from inside ``hybrid_forward``, in the style of GluonTS distributions.
"""
import math

import mxnet as mx

__all__ = ["LOG_SQRT_2PI", "get_F", "softplus", "normal_cdf", "total"]

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
