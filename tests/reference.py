"""Independent float64 NumPy implementations of the paper's equations, for the tests."""
import numpy as np

LOG_SQRT_2PI = 0.5 * np.log(2 * np.pi)


def softplus(rho):
    return np.logaddexp(0.0, rho)


def log_normal(x, sigma):
    return -0.5 * (x / sigma) ** 2 - np.log(sigma) - LOG_SQRT_2PI


def log_gaussian_prior(w, sigma):
    return log_normal(w, sigma)


def log_scale_mixture_prior(w, pi, sigma1, sigma2):
    """Eq. (7), with np.logaddexp for the mixture."""
    return np.logaddexp(np.log(pi) + log_normal(w, sigma1), np.log1p(-pi) + log_normal(w, sigma2))


def log_q(mu, rho, eps):
    """log N(w; mu, sigma^2) at w = mu + sigma * eps, written as a density of w."""
    sigma = softplus(rho)
    w = mu + sigma * eps
    return log_normal(w - mu, sigma)


def softmax_nll(logits, labels):
    shifted = logits - logits.max(axis=1, keepdims=True)
    log_probs = shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))
    return -log_probs[np.arange(len(labels)), labels.astype(int)].sum()


def mlp_forward(x, layers):
    """layers: list of (W (out, in), b (out,)); ReLU between layers, linear output."""
    h = x
    for k, (weight, bias) in enumerate(layers):
        h = h @ weight.T + bias
        if k < len(layers) - 1:
            h = np.maximum(h, 0.0)
    return h
