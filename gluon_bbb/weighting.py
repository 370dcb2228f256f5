"""Minibatch weights pi_i of the complexity cost (paper section 3.4)."""
from __future__ import annotations

import numpy as np

__all__ = ["KL_WEIGHTINGS", "kl_weights"]

#: Supported schemes: 'uniform' (pi_i = 1/M) and 'blundell' (Eq. 9).
KL_WEIGHTINGS = ("uniform", "blundell")


def kl_weights(scheme: str, num_batches: int) -> np.ndarray:
    """Weights pi_1..pi_M of the complexity cost for the M minibatches of an epoch.

    'uniform' gives pi_i = 1/M. 'blundell' is the paper's Eq. (9),
    pi_i = 2^(M-i) / (2^M - 1), computed as 2^-i / (1 - 2^-M) so it does not overflow;
    early minibatches are dominated by the complexity cost, later ones by the data.
    Both sum to 1 over the epoch, so the epoch's total is the full cost of Eq. (2).

    Parameters
    ----------
    scheme : {'uniform', 'blundell'}
    num_batches : int, >= 1
        M, the number of minibatches in one epoch.

    Returns
    -------
    numpy.ndarray, shape (M,), float64
    """
    if scheme not in KL_WEIGHTINGS:
        raise ValueError(f"unknown kl_weighting {scheme!r}; expected one of {KL_WEIGHTINGS}")
    num_batches = int(num_batches)
    if num_batches < 1:
        raise ValueError(f"num_batches must be at least 1, got {num_batches}")
    if scheme == "uniform":
        return np.full(num_batches, 1.0 / num_batches)
    i = np.arange(1, num_batches + 1, dtype=np.float64)
    return np.exp2(-i) / -np.expm1(-num_batches * np.log(2.0))
