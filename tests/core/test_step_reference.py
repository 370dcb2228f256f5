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


def _forward(x, layers):
    """The pre-activations of every layer of a ReLU MLP, float64."""
    pre, h = [], x
    for k, (weight, bias) in enumerate(layers):
        z = h @ weight.T + bias
        pre.append(z)
        h = np.maximum(z, 0.0) if k < len(layers) - 1 else z
    return pre


def _signals(x, labels, layers, pre, on):
    """Summed softmax cross-entropy, and for each layer k the activations a_k its weights
    multiply (B, in_k) and the error signals delta_k reaching it (B, units_k): the gradient of
    (W_k, b_k) is (delta_k^T a_k, the column sums of delta_k). The ReLU of hidden layer k
    passes where ``on[k]`` is True."""
    activations = [x] + [np.where(mask, z, 0.0) for z, mask in zip(pre[:-1], on)]
    logits = pre[-1]
    probs = np.exp(logits - logits.max(axis=1, keepdims=True))
    probs /= probs.sum(axis=1, keepdims=True)
    delta = probs.copy()
    delta[np.arange(len(labels)), labels] -= 1.0
    deltas = [None] * len(layers)
    for k in range(len(layers) - 1, -1, -1):
        deltas[k] = delta
        if k:
            delta = (delta @ layers[k][0]) * on[k - 1]
    return ref.softmax_nll(logits, labels), activations, deltas


#: A hidden unit's pre-activation within this fraction of the sum of its terms' magnitudes is
#: at the ReLU's kink to float32 rounding (a float32 sum of n products is exact to about
#: sqrt(n) x 6e-8 of it, 2e-6 for n = 1,200; at worst n x 6e-8): float32 and float64 may take
#: opposite sides there.
KINK = 1e-5
#: More (example, unit) pairs at a kink than this in one minibatch of 128 x 2,400 is not
#: rounding.
MAX_KINKS = 100


def mlp_nll_gradient(x, labels, layers):
    """The gradient of the summed softmax cross-entropy of a ReLU MLP for each (W, b), float64,
    and how far each of its entries may move where a pre-activation lies at the ReLU's kink to
    float32 rounding: the sum over such (example, unit) pairs of the change of the gradient when
    that pair's ReLU is switched (a few dozen of a minibatch's 128 x 2,400 pairs at 2x1200, each
    changing one example's term).

    Returns
    -------
    grads, allowance : list of (numpy.ndarray, numpy.ndarray), per layer, for W and for b
    """
    pre = _forward(x, layers)
    on = [z > 0 for z in pre[:-1]]
    _, activations, deltas = _signals(x, labels, layers, pre, on)
    base = [(d.T @ a, d.sum(axis=0)) for d, a in zip(deltas, activations)]
    h, kinks = x, []
    for k, (weight, bias) in enumerate(layers[:-1]):
        magnitude = np.abs(h) @ np.abs(weight).T + np.abs(bias)
        kinks += [(k, n, j) for n, j in zip(*np.nonzero(np.abs(pre[k]) <= KINK * magnitude))]
        h = np.maximum(pre[k], 0.0)
    assert len(kinks) <= MAX_KINKS, f"{len(kinks)} pre-activations at the ReLU's kink"
    # A switch changes example n's term of the summed gradient alone: outer(delta_k, a_k) of
    # each layer becomes outer(delta_k', a_k'), a change of outer(delta_k' - delta_k, a_k') +
    # outer(delta_k, a_k' - a_k), at most outer(|delta_k' - delta_k|, |a_k'|) + outer(|delta_k|,
    # |a_k' - a_k|) in magnitude (equal to it: at each layer one of the two differences is 0).
    # Summed over the switches, each term is one product of the rows stacked.
    terms = [([], [], [], []) for _ in layers]
    for k, n, j in kinks:
        row = slice(n, n + 1)
        pre_n, on_n = [z[row] for z in pre], [mask[row] for mask in on]
        switched = [mask.copy() for mask in on_n]
        switched[k][0, j] = not switched[k][0, j]
        _, a_own, d_own = _signals(x[row], labels[row], layers, pre_n, on_n)
        _, a_moved, d_moved = _signals(x[row], labels[row], layers, pre_n, switched)
        for rows, values in zip(terms, zip(a_own, d_own, a_moved, d_moved)):
            a, d, a_switched, d_switched = values
            for stack, value in zip(rows, (np.abs(d_switched - d), np.abs(a_switched),
                                           np.abs(d), np.abs(a_switched - a))):
                stack.append(value)
    allowance = []
    for (weight, bias), rows in zip(layers, terms):
        if not kinks:
            allowance.append((np.zeros_like(weight), np.zeros_like(bias)))
            continue
        delta_change, a_switched, delta, a_change = (np.concatenate(stack) for stack in rows)
        allowance.append((delta_change.T @ a_switched + delta.T @ a_change,
                          delta_change.sum(axis=0)))
    return base, allowance


def _assert_within(actual, expected, tolerance, what):
    """|actual - expected| <= tolerance elementwise (tolerance: a scalar or an array)."""
    excess = np.abs(actual - expected) - tolerance
    worst = np.unravel_index(np.argmax(excess), excess.shape) if excess.ndim else ()
    assert excess.max() <= 0, (f"{what}: {int((excess > 0).sum())} of {excess.size} entries "
                               f"beyond tolerance; worst at {worst}: {actual[worst]} against "
                               f"{expected[worst]}")


def check_step(trainer, x, y, pi_i, lr):
    """Take one step and check its gradients and its SGD update of every mu and rho against the
    float64 reference, from the state before the step and the noise the step drew.

    Returns
    -------
    list of numpy.ndarray: the step's eps, one per tensor
    """
    mus = [m.data().asnumpy().astype(np.float64) for m in trainer.posterior.mus]
    rhos = [r.data().asnumpy().astype(np.float64) for r in trainer.posterior.rhos]
    trainer.step(x, y, pi_i)
    # the network still holds the sample w of the step; eps follows from it
    ws = [t.data().asnumpy().astype(np.float64) for t in trainer.posterior.targets]
    sigmas = [ref.softplus(r) for r in rhos]
    epsilons = [(w - m) / s for w, m, s in zip(ws, mus, sigmas)]
    assert max(np.abs(e).max() for e in epsilons) < 7, "the sample is not mu + sigma * eps"
    prior = trainer.loss.prior
    labels = y.asnumpy().astype(int)
    inputs, layers = x.asnumpy().astype(np.float64), list(zip(ws[0::2], ws[1::2]))
    nll_grads, allowance = mlp_nll_gradient(inputs, labels, layers)
    nll_grads = [g for pair in nll_grads for g in pair]
    kinks = [a for pair in allowance for a in pair]
    for i, (w, rho, sigma, eps, g, kink) in enumerate(zip(ws, rhos, sigmas, epsilons, nll_grads,
                                                          kinks)):
        dw = g - pi_i * ref.mixture_log_prior_gradient(w, prior.pi, prior.sigma1, prior.sigma2)
        expected = {"mu": dw, "rho": (dw * eps - pi_i / sigma) / (1 + np.exp(-rho))}
        allowed = {"mu": kink, "rho": kink * np.abs(eps) / (1 + np.exp(-rho))}
        before = {"mu": mus[i], "rho": rho}
        params = {"mu": trainer.posterior.mus[i], "rho": trainer.posterior.rhos[i]}
        for name, param in params.items():
            scale = np.abs(expected[name]).max()
            _assert_within(param.grad().asnumpy(), expected[name],
                           2e-4 * scale + allowed[name], f"d/d{name} of tensor {i}")
            # plain SGD on the summed minibatch cost: theta <- theta - lr dF/dtheta
            _assert_within(param.data().asnumpy(), before[name] - lr * expected[name],
                           1e-6 + lr * (2e-4 * scale + allowed[name]), f"update of {name} {i}")
    return epsilons


def long_protocol_trainer():
    # the configuration as trained (2x1200): every tensor at its own size
    config = get_config("bbb-mixture-1200-paper", num_validation=0)
    loaders = data.get_loaders("mnist", batch_size=128, num_validation=0)
    return config, loaders["train"], make_bbb_trainer(config, mx.cpu())


@needs_mnist
@pytest.mark.real_data
def test_a_step_of_the_long_protocol_matches_a_float64_reference():
    config, train, trainer = long_protocol_trainer()
    x, y = next(iter(train))
    trainer.prepare(x)
    check_step(trainer, x, y, float(kl_weights("uniform", len(train))[0]), config["lr"])


@needs_mnist
@pytest.mark.real_data
def test_consecutive_steps_and_the_partial_last_batch_match_the_reference():
    """Three steps in a row, each checked from the state the one before left (nothing kept
    from a step may leak into the next): two full minibatches, then the last, partial one of
    the 469 (96 images) with its own complexity weight. Each step draws fresh noise: the
    correlation of two steps' eps over the ~200,000 weights is within 6 standard errors
    (1 / sqrt(n)) of 0."""
    config, train, trainer = long_protocol_trainer()
    batches = list(train)
    assert len(batches) == 469 and batches[-1][0].shape[0] == 60000 - 468 * 128
    pis = kl_weights("uniform", len(batches))
    trainer.prepare(batches[0][0])
    drawn = []
    for i in (0, 1, len(batches) - 1):
        x, y = batches[i]
        drawn.append(np.concatenate([e.ravel() for e in check_step(trainer, x, y,
                                                                    float(pis[i]), config["lr"])]))
    for a, b in ((0, 1), (1, 2), (0, 2)):
        correlation = np.corrcoef(drawn[a], drawn[b])[0, 1]
        assert abs(correlation) < 6 / np.sqrt(drawn[a].size), (a, b, correlation)
