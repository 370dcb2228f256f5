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


def mixture_log_prior_gradient(w, pi, sigma1, sigma2):
    """d log P(w) / dw of Eq. (7), float64, from the responsibilities of the two components."""
    log_a = np.log(pi) + log_normal(w, sigma1)
    log_b = np.log1p(-pi) + log_normal(w, sigma2)
    responsibility_a = np.exp(log_a - np.logaddexp(log_a, log_b))
    return -w * (responsibility_a / sigma1 ** 2 + (1 - responsibility_a) / sigma2 ** 2)


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


def philox4x32_10(counters, key):
    """Philox4x32-10 (Salmon et al. 2011) in NumPy: counters (n, 4) uint32, key (k0, k1) ->
    (n, 4) uint32."""
    c = [np.asarray(counters, dtype=np.uint64)[:, i] for i in range(4)]
    k0, k1 = np.uint64(key[0]), np.uint64(key[1])
    mask = np.uint64(0xFFFFFFFF)
    for _ in range(10):
        p0 = np.uint64(0xD2511F53) * c[0]
        p1 = np.uint64(0xCD9E8D57) * c[2]
        c = [(p1 >> np.uint64(32)) ^ c[1] ^ k0, p1 & mask, (p0 >> np.uint64(32)) ^ c[3] ^ k1,
             p0 & mask]
        k0 = (k0 + np.uint64(0x9E3779B9)) & mask
        k1 = (k1 + np.uint64(0xBB67AE85)) & mask
    return np.stack(c, axis=1).astype(np.uint32)


def counter_normals(key, tensor, n, dtype):
    """The n standard normals of tensor number ``tensor`` under a 64-bit key, as the fused
    operators draw them: Philox blocks (j // 4, tensor) for float32 with 24-bit uniforms
    (two Box-Muller pairs per block), (j // 2, tensor) for float64 with 53-bit uniforms (one
    pair per block). Box-Muller in float64 here; the float32 operator's angle is 2 pi u2 - pi/4
    (it reduces the angle to [-pi/4, pi/4) around each quadrant's middle)."""
    per_block = 4 if dtype == np.float32 else 2
    blocks = np.arange(-(-n // per_block), dtype=np.uint64)
    counters = np.stack([blocks & np.uint64(0xFFFFFFFF), blocks >> np.uint64(32),
                         np.full_like(blocks, tensor), np.zeros_like(blocks)], axis=1)
    words = philox4x32_10(counters, (key & 0xFFFFFFFF, key >> 32)).astype(np.uint64)
    if per_block == 4:
        u1 = ((words[:, 0::2] >> np.uint64(8)) + np.uint64(1)).astype(np.float64) * 2.0 ** -24
        u2 = (words[:, 1::2] >> np.uint64(8)).astype(np.float64) * 2.0 ** -24
    else:
        def uniform53(a, b):
            return ((a >> np.uint64(5)) << np.uint64(26) | (b >> np.uint64(6))).astype(
                np.float64) * 2.0 ** -53
        u1 = (1.0 - uniform53(words[:, 0], words[:, 1]))[:, None]
        u2 = uniform53(words[:, 2], words[:, 3])[:, None]
    radius = np.sqrt(-2.0 * np.log(u1.ravel()))
    angle = 2.0 * np.pi * u2.ravel() - (np.pi / 4 if per_block == 4 else 0.0)
    pairs = np.stack([radius * np.cos(angle), radius * np.sin(angle)], axis=1)
    return pairs.ravel()[:n]


def check_against_central_differences(posterior, objective, analytic=None, step=1e-6,
                                      per_tensor=4, rtol=1e-6, atol=1e-9):
    """Gradients of mu and rho against central differences of ``objective()`` in float64, at
    ``per_tensor`` random entries of every tensor of ``posterior``.

    ``objective()`` returns the cost (an NDArray scalar or a float) for the posterior's current
    values; ``analytic`` is the list of gradients (mus, then rhos) to check, by default the
    parameters' recorded ``grad()`` read before any value is moved.
    """
    from mxnet import nd
    params = posterior.mus + posterior.rhos
    if analytic is None:
        analytic = [param.grad().asnumpy() for param in params]
    rng = np.random.default_rng(1)
    for param, gradient in zip(params, analytic):
        values = param.data().asnumpy()
        for flat in rng.choice(values.size, size=min(per_tensor, values.size), replace=False):
            index = np.unravel_index(flat, values.shape)
            shifted = []
            for sign in (1, -1):
                perturbed = values.copy()
                perturbed[index] += sign * step
                param.set_data(nd.array(perturbed, dtype="float64"))
                cost = objective()
                shifted.append(cost.asscalar() if hasattr(cost, "asscalar") else float(cost))
            param.set_data(nd.array(values, dtype="float64"))
            numeric = (shifted[0] - shifted[1]) / (2 * step)
            np.testing.assert_allclose(gradient[index], numeric, rtol=rtol, atol=atol,
                                       err_msg=f"{param.name}{index}")
