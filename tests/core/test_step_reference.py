"""One training step of the paper's long protocol against an independent float64 NumPy
implementation of Eq. (8)'s gradient: the same weights, the same noise, the same minibatch.

The reference differentiates F = pi_i (log q(w|theta) - log P(w)) - log P(D_i|w), with
w = mu + sigma * eps and sigma = softplus(rho), by hand:
dF/dmu = g - pi_i dlogP/dw and dF/drho = ((g - pi_i dlogP/dw) eps - pi_i / sigma) sigmoid(rho),
where g is the minibatch's summed cross-entropy gradient by backpropagation through the ReLU
network (the log q terms of dF/dmu cancel, and those of dF/dsigma leave -pi_i / sigma).
"""
import numpy as np
import pytest
import mxnet as mx

from gluon_bbb import data
from gluon_bbb.experiments import get_config
from gluon_bbb.experiments.runners import make_bbb_trainer
from gluon_bbb.weighting import kl_weights

import reference as ref
from fused_paths import sampling_path  # noqa: F401  (both sampling paths)
from synthetic import needs_mnist


def mixture_log_prior_gradient(w, pi, sigma1, sigma2):
    """d log P(w) / dw of Eq. (7), float64, from the responsibilities of the two components."""
    log_a = np.log(pi) + ref.log_normal(w, sigma1)
    log_b = np.log1p(-pi) + ref.log_normal(w, sigma2)
    responsibility_a = np.exp(log_a - np.logaddexp(log_a, log_b))
    return -w * (responsibility_a / sigma1 ** 2 + (1 - responsibility_a) / sigma2 ** 2)


def mlp_nll_gradient(x, labels, layers):
    """Summed softmax cross-entropy of a ReLU MLP and its gradient for each (W, b), float64."""
    activations, h = [x], x
    for k, (weight, bias) in enumerate(layers):
        h = h @ weight.T + bias
        if k < len(layers) - 1:
            h = np.maximum(h, 0.0)
        activations.append(h)
    logits = activations[-1]
    probs = np.exp(logits - logits.max(axis=1, keepdims=True))
    probs /= probs.sum(axis=1, keepdims=True)
    delta = probs.copy()
    delta[np.arange(len(labels)), labels] -= 1.0
    grads = [None] * len(layers)
    for k in range(len(layers) - 1, -1, -1):
        grads[k] = (delta.T @ activations[k], delta.sum(axis=0))
        if k:
            delta = (delta @ layers[k][0]) * (activations[k] > 0)
    return ref.softmax_nll(logits, labels), grads


@needs_mnist
@pytest.mark.real_data
def test_a_step_of_the_long_protocol_matches_a_float64_reference():
    config = get_config("bbb-mixture-1200-paper", hidden=[200, 200], num_validation=0)
    loaders = data.get_loaders("mnist", batch_size=128, num_validation=0)
    trainer = make_bbb_trainer(config, mx.cpu())
    x, y = next(iter(loaders["train"]))
    pi_i = float(kl_weights("uniform", len(loaders["train"]))[0])
    trainer.prepare(x)
    mus = [m.data().asnumpy().astype(np.float64) for m in trainer.posterior.mus]
    rhos = [r.data().asnumpy().astype(np.float64) for r in trainer.posterior.rhos]
    lr = config["lr"]
    trainer.step(x, y, pi_i)
    # the network still holds the sample w of the step; eps follows from it
    ws = [t.data().asnumpy().astype(np.float64) for t in trainer.posterior.targets]
    sigmas = [ref.softplus(r) for r in rhos]
    epsilons = [(w - m) / s for w, m, s in zip(ws, mus, sigmas)]
    assert max(np.abs(e).max() for e in epsilons) < 7, "the sample is not mu + sigma * eps"
    prior = trainer.loss.prior
    labels = y.asnumpy().astype(int)
    _, nll_grads = mlp_nll_gradient(x.asnumpy().astype(np.float64), labels,
                                    list(zip(ws[0::2], ws[1::2])))
    nll_grads = [g for pair in nll_grads for g in pair]
    for i, (w, rho, sigma, eps, g) in enumerate(zip(ws, rhos, sigmas, epsilons, nll_grads)):
        dw = g - pi_i * mixture_log_prior_gradient(w, prior.pi, prior.sigma1, prior.sigma2)
        expected_mu = dw
        expected_rho = (dw * eps - pi_i / sigma) / (1 + np.exp(-rho))
        got_mu = trainer.posterior.mus[i].grad().asnumpy()
        got_rho = trainer.posterior.rhos[i].grad().asnumpy()
        scale_mu, scale_rho = np.abs(expected_mu).max(), np.abs(expected_rho).max()
        np.testing.assert_allclose(got_mu, expected_mu, rtol=0, atol=2e-4 * scale_mu,
                                   err_msg=f"d/dmu of tensor {i}")
        np.testing.assert_allclose(got_rho, expected_rho, rtol=0, atol=2e-4 * scale_rho,
                                   err_msg=f"d/drho of tensor {i}")
        # plain SGD on the summed minibatch cost: mu <- mu - lr dF/dmu
        after = trainer.posterior.mus[i].data().asnumpy()
        np.testing.assert_allclose(after, mus[i] - lr * expected_mu, rtol=0,
                                   atol=1e-6 + 2e-4 * lr * scale_mu, err_msg=f"update of mu {i}")
