"""The Bayes-by-Backprop minibatch cost, the paper's Eq. (8), as a hybridizable Gluon loss."""
from __future__ import annotations

import math
from typing import Optional

from mxnet import gluon

from ._math import LOG_SQRT_2PI, softplus, sum_of_squares, total
from .priors import Prior

__all__ = ["BBBLoss", "LIKELIHOODS", "KL_ESTIMATORS"]

#: Likelihoods P(D_i | w) that :class:`BBBLoss` supports.
LIKELIHOODS = ("softmax", "gaussian")


#: How :class:`BBBLoss` computes the complexity cost.
KL_ESTIMATORS = ("monte_carlo", "closed_form")


class BBBLoss(gluon.loss.Loss):
    """Minibatch cost of Bayes by Backprop, Eq. (8) of Blundell et al. (2015).

    F_i(D_i, theta) = kl_weight * (log q(w | theta) - log P(w)) - log P(D_i | w)

    with w = mu + sigma * eps a single weight sample. The variational log density uses the
    reparameterisation, log q(w | theta) = sum_j (-log sigma_j - eps_j^2 / 2 - log(2 pi) / 2),
    which is exact and, unlike (w - mu)^2 / (2 sigma^2), keeps full precision and finite
    gradients for tiny sigma.

    Parameters
    ----------
    prior : Prior
        :class:`~gluon_bbb.GaussianPrior`, :class:`~gluon_bbb.ScaleMixturePrior` or
        :class:`~gluon_bbb.DiagonalGaussianPrior`. A learnable one (``learnable=True``)
        brings its parameters, which become this loss's (``loss.collect_params()``): the
        cost's gradient reaches them, and :class:`~gluon_bbb.BBBTrainer` trains them with mu
        and rho (empirical Bayes). A per-weight one brings its fixed arrays (grad_req 'null')
        the same way, as inputs of the cost; the k-th weight tensor is scored against the
        prior's k-th arrays.
    likelihood : {'softmax', 'gaussian'}
        'softmax': categorical likelihood on the logits ``pred`` (classification; ``label``
        holds class indices). 'gaussian': N(label; pred, noise_sigma^2) (regression).
    noise_sigma : float or None
        Standard deviation of the Gaussian likelihood (known noise); ignored for 'softmax'.
        None learns the noise: the network outputs 2 * D columns, the D means followed by
        D raw scales s, and the likelihood is N(label; mean, softplus(s)^2).
    kl : {'monte_carlo', 'closed_form'}
        'monte_carlo' (the paper's): the complexity is log q(w | theta) - log P(w) at the
        weight sample. 'closed_form': its expectation KL(q || P), exactly
        (:meth:`~gluon_bbb.GaussianPrior.sum_kl`; the Gaussian priors only), from the
        ``weights, sigmas, epsilons`` inputs with mu = w - sigma * eps recovered from the
        sample, or precomputed by the fused operator. Lower-variance gradients, the same
        expected cost.

    Inputs
    ------
    pred : (batch_size, num_outputs)
        Network output for the sampled weights.
    label : (batch_size,) for 'softmax'; same shape as ``pred`` for 'gaussian' with a known
        ``noise_sigma``, as its first half (the means) with ``noise_sigma=None``.
    kl_weight : (1,)
        The minibatch's weight pi_i of the complexity cost (1/M, or Eq. (9)).
    *complexity_inputs : either ``weights, sigmas, epsilons`` or ``complexity``
        ``weights, sigmas, epsilons`` are lists of K arrays: for each of the K weight tensors
        the sample w, its posterior standard deviation sigma = softplus(rho) and the standard
        normal noise eps with w = mu + sigma * eps; the loss computes the complexity from
        them. Alternatively one (1,) array holding the complexity already summed, log q(w |
        theta) - log P(w) (or KL(q || P) with ``kl='closed_form'``), as the fused operator
        (:mod:`gluon_bbb.fused`) returns it; that cost runs in a graph of its own (a child
        block without the prior's arrays or parameters, which it does not read), so a
        hybridized loss takes both conventions.

    Outputs
    -------
    cost : (1,)
        kl_weight * complexity + nll, the quantity to minimise.
    nll : (1,)
        -log P(D_i | w), summed over the minibatch.
    complexity : (1,)
        log q(w | theta) - log P(w), unweighted, summed over all weights.
    """

    def __init__(self, prior: Prior, likelihood: str = "softmax",
                 noise_sigma: Optional[float] = 1.0, kl: str = "monte_carlo", **kwargs) -> None:
        super().__init__(weight=None, batch_axis=0, **kwargs)
        if not isinstance(prior, Prior):
            raise TypeError("prior must be a GaussianPrior, ScaleMixturePrior or "
                            f"DiagonalGaussianPrior, got {prior!r}")
        if kl not in KL_ESTIMATORS:
            raise ValueError(f"unknown kl {kl!r}; expected one of {KL_ESTIMATORS}")
        if kl == "closed_form" and not prior.has_closed_form_kl:
            raise ValueError(f"kl='closed_form' needs a prior with a closed-form KL divergence "
                             f"(GaussianPrior, DiagonalGaussianPrior); {type(prior).__name__} "
                             "has none (the paper's reason for the Monte Carlo estimate): use "
                             "kl='monte_carlo'")
        self.kl = kl
        if likelihood not in LIKELIHOODS:
            raise ValueError(f"unknown likelihood {likelihood!r}; expected one of {LIKELIHOODS}")
        if noise_sigma is not None:
            noise_sigma = float(noise_sigma)
            if not (noise_sigma > 0 and math.isfinite(noise_sigma)):
                raise ValueError(
                    f"noise_sigma must be a positive finite number or None, got {noise_sigma!r}")
        self.prior = prior
        # A learnable prior's parameters become the loss's: trained with mu and rho, and
        # handed to hybrid_forward (as Symbols once hybridized) under their names; so do a
        # per-weight prior's fixed arrays (grad_req 'null': inputs, never trained).
        inputs = {**prior.parameters(), **prior.constants()}
        self.params.update({param.name: param for param in inputs.values()})
        for name, param in inputs.items():
            setattr(self, name, param)
        self.likelihood = likelihood
        self.noise_sigma = noise_sigma
        with self.name_scope():  # the cost of a precomputed complexity, without the prior
            self._precomputed = _PrecomputedCost(self.negative_log_likelihood,
                                                 prefix="precomputed_")

    def negative_log_likelihood(self, F, pred, label):
        """-log P(D_i | w) summed over the minibatch, shape (1,)."""
        if self.likelihood == "softmax":
            log_probs = F.log_softmax(pred, axis=-1)
            return -F.sum(F.pick(log_probs, label, axis=-1), axis=0, keepdims=True).reshape((1,))
        if self.noise_sigma is None:
            return _learned_noise_nll(F, pred, label)
        # broadcast_sub: see the note on elemwise_add in posterior.py.
        residual = F.broadcast_sub(pred, F.reshape_like(label, pred)) * (1.0 / self.noise_sigma)
        per_value = 0.5 * F.square(residual) + (math.log(self.noise_sigma) + LOG_SQRT_2PI)
        return F.sum(per_value).reshape((1,))

    def complexity(self, F, weights, sigmas, epsilons, prior_params=None):
        """log q(w | theta) - log P(w) summed over all weights, shape (1,); ``prior_params``
        are a learnable prior's parameters or a per-weight prior's arrays
        (:class:`~gluon_bbb.priors.Prior`)."""
        log_q, log_prior = [], []
        for index, (w, sigma, eps) in enumerate(zip(weights, sigmas, epsilons)):
            # log q = sum_j (-log sigma_j - eps_j^2 / 2 - log(2 pi) / 2), the reparameterised form
            log_q.append(total(F, -F.log(sigma) - LOG_SQRT_2PI) - 0.5 * sum_of_squares(F, eps))
            log_prior.append(self.prior.sum_log_prob(w, F, prior_params, index))
        return F.add_n(*log_q) - F.add_n(*log_prior)

    def closed_form_complexity(self, F, weights, sigmas, epsilons, prior_params=None):
        """KL(q || P) summed over all weights, shape (1,), mu = w - sigma * eps."""
        return F.add_n(*[self.prior.sum_kl(w - sigma * eps, sigma, F, prior_params, index)
                         for index, (w, sigma, eps) in enumerate(zip(weights, sigmas, epsilons))])

    def forward(self, x, *args):
        """As gluon's, but a precomputed complexity (``pred, label, kl_weight, complexity``, the
        fused operator's) goes to a child block whose graph has none of the prior's arrays or
        parameters as inputs: it does not read them (gluon would report them unused when it
        builds the graph), and a hybridized loss keeps one graph per calling convention."""
        if len(args) == 3:
            self._check_precomputed()
            return self._precomputed(x, *args)
        return super().forward(x, *args)

    def _check_precomputed(self):
        if self.prior.learnable:
            raise TypeError("a learnable prior needs (pred, label, kl_weight, weights, "
                            "sigmas, epsilons): a precomputed complexity has no gradient "
                            "with respect to the prior's parameters")

    def hybrid_forward(self, F, pred, label, kl_weight, *complexity_inputs, **prior_params):
        if len(complexity_inputs) == 1:
            self._check_precomputed()
            return self._precomputed.hybrid_forward(F, pred, label, kl_weight,
                                                    complexity_inputs[0])
        if len(complexity_inputs) != 3:
            raise TypeError("BBBLoss expects (pred, label, kl_weight, weights, sigmas, epsilons) "
                            "or (pred, label, kl_weight, complexity)")
        estimate = self.closed_form_complexity if self.kl == "closed_form" else self.complexity
        complexity = estimate(F, *complexity_inputs, prior_params)
        return _eq8_cost(kl_weight, complexity, self.negative_log_likelihood(F, pred, label))


def _eq8_cost(kl_weight, complexity, nll):
    """Eq. (8)'s cost pi_i * complexity + nll, with its two parts: (cost, nll, complexity),
    (1,) each."""
    return kl_weight * complexity + nll, nll, complexity


class _PrecomputedCost(gluon.HybridBlock):
    """Eq. (8)'s cost from a complexity summed elsewhere (the fused operator's): the graph of
    :class:`BBBLoss` for that call, with no parameters.

    Parameters
    ----------
    negative_log_likelihood : callable
        ``negative_log_likelihood(F, pred, label)`` -> (1,), the loss's.

    Inputs: pred, label, kl_weight (1,), complexity (1,). Outputs: cost, nll, complexity.
    """

    def __init__(self, negative_log_likelihood, **kwargs) -> None:
        super().__init__(**kwargs)
        self._negative_log_likelihood = negative_log_likelihood

    def hybrid_forward(self, F, pred, label, kl_weight, complexity):
        return _eq8_cost(kl_weight, complexity, self._negative_log_likelihood(F, pred, label))


def _learned_noise_nll(F, pred, label):
    """-sum log N(label; mean, softplus(s)^2) where ``pred`` holds [mean | s] along its last axis."""
    mean, raw_scale = F.split(pred, num_outputs=2, axis=-1)
    sigma = softplus(F, raw_scale)
    residual = F.broadcast_sub(mean, F.reshape_like(label, mean)) / sigma
    per_value = 0.5 * F.square(residual) + F.log(sigma) + LOG_SQRT_2PI
    return F.sum(per_value).reshape((1,))
