"""Bayes by Backprop written the way the old MXNet tutorials wrote it -- benchmark baseline only.

This is NOT library code. It re-creates, from a description, the style of the early
MXNet / Gluon "Bayes by Backprop from scratch" tutorials so that
``benchmarks/epoch_time.py --tutorial`` can compare gluon_bbb against it:

* the weights are plain NDArrays (mu, rho per tensor) with ``attach_grad()``, and the
  network is a hand-written 784-400-400-10 ReLU MLP computed with ``nd.dot``;
* every step, a Python loop over the parameters draws eps with ``nd.random.normal``,
  computes sigma = log(1 + exp(rho)) as ``nd.log(1 + nd.exp(rho))`` and the sample
  w = mu + sigma * eps;
* the log densities are written out: log N(x; mu, sigma) = -log(2 pi)/2 - log(sigma)
  - (x - mu)**2 / (2 sigma**2), and the scale-mixture prior is
  log(pi N(x; 0, s1) + (1 - pi) N(x; 0, s2)) with N computed through ``nd.exp``;
* every reduction is an ``nd.sum``; the likelihood uses one-hot labels and
  ``nd.sum(one_hot * log_softmax)``;
* the cost is (1/M) (log q - log P(w)) - log P(D_i | w), and mu and rho are updated by
  Adam (MXNet's fused ``nd.adam_update``, one call per array, in a Python loop).

Nothing is hybridized. Deliberately left out, so the baseline is if anything a little
*faster* than the tutorials were: their per-batch ``loss.asscalar()`` (a host sync for a
moving-average loss) and per-batch accuracy metric.

Usage::

    from benchmarks.tutorial_style import time_epoch
    seconds = time_epoch(loaders["train"], prior="scale-mixture")
"""
import math
import time

import mxnet as mx
import numpy as np
from mxnet import autograd, nd

__all__ = ["TutorialBBB", "time_epoch", "PRIORS"]

PRIORS = ("scale-mixture", "gaussian")
LAYER_SIZES = (784, 400, 400, 10)
LOG_2PI = math.log(2.0 * math.pi)


# ---------------------------------------------------------------- densities, tutorial style
def log_gaussian(x, mu, sigma):
    """Elementwise log N(x; mu, sigma^2), written out."""
    return -0.5 * LOG_2PI - nd.log(sigma) - (x - mu) ** 2 / (2 * sigma ** 2)


def gaussian(x, mu, sigma):
    """Elementwise N(x; mu, sigma^2) for a scalar sigma, through nd.exp."""
    scaling = 1.0 / math.sqrt(2.0 * math.pi * sigma ** 2)
    bell = nd.exp(-(x - mu) ** 2 / (2.0 * sigma ** 2))
    return scaling * bell


def gaussian_log_prior(x, sigma=1.0):
    return -0.5 * LOG_2PI - math.log(sigma) - x ** 2 / (2 * sigma ** 2)


def scale_mixture_log_prior(x, pi=0.5, sigma1=1.0, sigma2=math.exp(-6.0)):
    first = pi * gaussian(x, 0.0, sigma1)
    second = (1 - pi) * gaussian(x, 0.0, sigma2)
    return nd.log(first + second)


# ---------------------------------------------------------------- the model
class TutorialBBB:
    """A 784-400-400-10 ReLU MLP trained by Bayes by Backprop, tutorial style.

    Parameters
    ----------
    prior : {'scale-mixture', 'gaussian'}
        ScaleMixturePrior(0.5, 1.0, exp(-6)) or GaussianPrior(1.0), as in epoch_time.py.
    num_batches : int
        M, the number of minibatches per epoch; the complexity cost is weighted by 1/M.
    learning_rate : float
        Adam step size.
    rho_init : float
        Initial rho of every weight (sigma = log(1 + exp(-5)) = 0.0067).
    ctx : mx.Context
    seed : int
    """

    def __init__(self, prior="scale-mixture", num_batches=469, learning_rate=1e-3, rho_init=-5.0,
                 ctx=None, seed=0):
        if prior not in PRIORS:
            raise ValueError(f"prior must be one of {PRIORS}, got {prior!r}")
        self.ctx = ctx or mx.cpu()
        self.log_prior = scale_mixture_log_prior if prior == "scale-mixture" else gaussian_log_prior
        self.kl_weight = 1.0 / num_batches
        self.learning_rate = learning_rate
        self.beta1, self.beta2, self.epsilon = 0.9, 0.999, 1e-8
        mx.random.seed(seed)
        self.shapes = []
        for n_in, n_out in zip(LAYER_SIZES[:-1], LAYER_SIZES[1:]):
            self.shapes += [(n_in, n_out), (n_out,)]
        self.mus, self.rhos = [], []
        for shape in self.shapes:
            scale = math.sqrt(2.0 / (shape[0] + shape[-1])) if len(shape) == 2 else 0.01
            self.mus.append(nd.random.normal(0.0, scale, shape=shape, ctx=self.ctx))
            self.rhos.append(nd.full(shape, rho_init, ctx=self.ctx))
        self.variational_params = self.mus + self.rhos
        for param in self.variational_params:
            param.attach_grad()
        # Adam's first and second moments, one pair per variational array.
        self.means = [nd.zeros(p.shape, ctx=self.ctx) for p in self.variational_params]
        self.variances = [nd.zeros(p.shape, ctx=self.ctx) for p in self.variational_params]
        self.t = 0

    def net(self, X, layer_params):
        """The MLP, with the sampled weights passed in."""
        h = X
        num_layers = len(layer_params) // 2
        for i in range(num_layers):
            W, b = layer_params[2 * i], layer_params[2 * i + 1]
            h = nd.dot(h, W) + b
            if i < num_layers - 1:
                h = nd.relu(h)
        return h

    def combined_loss(self, output, label_one_hot, params, mus, sigmas):
        log_likelihood_sum = nd.sum(label_one_hot * nd.log_softmax(output))
        log_prior_sum = sum([nd.sum(self.log_prior(param)) for param in params])
        log_var_posterior_sum = sum([nd.sum(log_gaussian(params[i], mus[i], sigmas[i]))
                                     for i in range(len(params))])
        return self.kl_weight * (log_var_posterior_sum - log_prior_sum) - log_likelihood_sum

    def adam(self):
        """One Adam update of every mu and rho (bias correction folded into the step size)."""
        self.t += 1
        lr = (self.learning_rate * math.sqrt(1 - self.beta2 ** self.t)
              / (1 - self.beta1 ** self.t))
        for param, mean, var in zip(self.variational_params, self.means, self.variances):
            nd.adam_update(param, param.grad, mean, var, out=param, lr=lr, beta1=self.beta1,
                           beta2=self.beta2, epsilon=self.epsilon)

    def step(self, data, label):
        """One Bayes-by-Backprop update; returns the cost NDArray (no host sync)."""
        label_one_hot = nd.one_hot(label, LAYER_SIZES[-1])
        with autograd.record():
            epsilons = [nd.random.normal(0.0, 1.0, shape=shape, ctx=self.ctx) for shape in self.shapes]
            sigmas = [nd.log(1.0 + nd.exp(rho)) for rho in self.rhos]
            layer_params = [self.mus[j] + sigmas[j] * epsilons[j] for j in range(len(self.mus))]
            output = self.net(data, layer_params)
            loss = self.combined_loss(output, label_one_hot, layer_params, self.mus, sigmas)
        loss.backward()
        self.adam()
        return loss


def time_epoch(train_loader, prior="scale-mixture", warmup_batches=20, ctx=None, seed=0):
    """Seconds for one full epoch of tutorial-style Bayes by Backprop over ``train_loader``.

    A fresh model does ``warmup_batches`` steps first (not timed); then one whole epoch
    is timed with ``time.perf_counter()``, ending with ``mx.nd.waitall()``.

    Parameters
    ----------
    train_loader : iterable of (data, label) NDArray batches with ``len()``
        data (batch, 784), label (batch,), e.g. ``gluon_bbb.data.get_loaders(...)["train"]``.
    prior : {'scale-mixture', 'gaussian'}
    warmup_batches : int
    ctx : mx.Context, default cpu
    seed : int

    Returns
    -------
    float, seconds
    """
    ctx = ctx or mx.cpu()
    model = TutorialBBB(prior=prior, num_batches=len(train_loader), ctx=ctx, seed=seed)
    for i, (data, label) in enumerate(train_loader):
        if i >= warmup_batches:
            break
        model.step(data.as_in_context(ctx), label.as_in_context(ctx))
    nd.waitall()
    start = time.perf_counter()
    total = nd.zeros((1,), ctx=ctx)
    for data, label in train_loader:
        total += model.step(data.as_in_context(ctx), label.as_in_context(ctx))
    nd.waitall()
    seconds = time.perf_counter() - start
    if not np.isfinite(total.asscalar()):
        raise FloatingPointError("tutorial-style training produced a non-finite cost")
    return seconds
