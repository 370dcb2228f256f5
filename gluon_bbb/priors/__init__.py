"""Priors over the network weights: the paper's Gaussian and scale-mixture priors (section 3.3,
:mod:`~gluon_bbb.priors.scalar`), and a per-weight diagonal Gaussian made from a trained
posterior for Bayesian updating (:mod:`~gluon_bbb.priors.diagonal`).

All are F-agnostic: ``log_prob(w)`` accepts an NDArray or, inside ``hybrid_forward``, a Symbol.
The paper's two can be fixed, as in the paper, or learned with the posterior
(``learnable=True``, empirical Bayes). :class:`~gluon_bbb.priors.diagonal.DiagonalGaussianPrior`
holds one mean and one standard deviation per weight, so that yesterday's posterior can be
today's prior. :func:`prior_from_config` rebuilds any of them from its ``config()``.
"""
from __future__ import annotations

import numpy as np

from .base import Prior
from .diagonal import DiagonalGaussianPrior
from .scalar import GaussianPrior, ScaleMixturePrior

__all__ = ["Prior", "GaussianPrior", "ScaleMixturePrior", "DiagonalGaussianPrior",
           "prior_from_config"]


def prior_from_config(config: dict) -> Prior:
    """Rebuild a prior from :meth:`Prior.config` output.

    Parameters
    ----------
    config : dict
        ``{"name": "gaussian", "sigma": ...}`` or
        ``{"name": "scale-mixture", "pi": ..., "sigma1": ..., "sigma2": ...}``, each with
        an optional ``"learnable": true``. ``"scale_mixture"``, the spelling of files written
        before the names were unified, is read as ``"scale-mixture"``.
        ``{"name": "diagonal-gaussian", "shapes": [...]}`` gives a
        :class:`DiagonalGaussianPrior` N(0, 1) for every weight of those shapes: its arrays
        are not in the config but in a checkpoint's arrays, which loading the checkpoint
        puts into it.
    """
    config = dict(config)
    name = config.pop("name", None)
    if name == DiagonalGaussianPrior.name:
        shapes = config.pop("shapes", None)
        if config or not _are_shapes(shapes):
            raise ValueError("a diagonal-gaussian prior's config is {'name', 'shapes'} with "
                             f"shapes a list of lists of positive integers, got {shapes!r} "
                             f"and {sorted(config)}")
        return DiagonalGaussianPrior([np.zeros(shape) for shape in shapes],
                                     [np.ones(shape) for shape in shapes])
    if not isinstance(config.get("learnable", False), bool):
        raise ValueError(f"learnable must be true or false, got {config['learnable']!r}")
    if name == "gaussian":
        return GaussianPrior(**config)
    if name in (ScaleMixturePrior.name, "scale_mixture"):
        return ScaleMixturePrior(**config)
    raise ValueError(f"unknown prior {name!r}; expected 'gaussian', 'scale-mixture' or "
                     "'diagonal-gaussian'")


def _are_shapes(shapes):
    """Whether ``shapes`` is a non-empty list of non-empty lists of positive integers."""
    return (isinstance(shapes, list) and bool(shapes) and all(
        isinstance(shape, list) and shape and all(
            isinstance(d, int) and not isinstance(d, bool) and d > 0 for d in shape)
        for shape in shapes))
