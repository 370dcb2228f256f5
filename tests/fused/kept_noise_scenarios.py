"""Draws of the fused operator whose noise the library keeps for the backward pass, run in a
process of their own by ``test_fused.py`` (on the engine its environment names).

Usage::

    python kept_noise_scenarios.py SCENARIO[,SCENARIO...] OUT.npz

Each SCENARIO is one of :data:`SCENARIOS` (several draws in one process, as a user makes them),
run one after another in the order given; OUT.npz holds, for each draw each checks,
``<scenario>:<draw>/<array>``: the sample w, the complexity and the gradients of mu and rho of
that draw's objective. ``fresh`` alone runs every draw of :data:`DRAWS` alone, with
``keep_eps=False``, so that nothing is ever kept in this process; its arrays are
``<draw>/<array>``.
"""
import sys

import mxnet as mx
import numpy as np
from mxnet import autograd, nd

from gluon_bbb import GaussianPrior, ScaleMixturePrior, fused

WEIGHTS = 1000
RHO = -5.0
MIXTURE = ScaleMixturePrior(0.5, 1.0, 0.0025)
GAUSSIAN = GaussianPrior(1.0)

#: name: (the network's parameters, dtype, prior, the noise's key: an integer, or 'seed3' for
#: the key MXNet's generator gives after mx.random.seed(3))
DRAWS = {
    "a-mixture-float32-key7": ("a", "float32", MIXTURE, 7),
    "b-mixture-float32-key7": ("b", "float32", MIXTURE, 7),
    "a-mixture-float32-seed3": ("a", "float32", MIXTURE, "seed3"),
    "b-mixture-float32-seed3": ("b", "float32", MIXTURE, "seed3"),
    "b-gaussian-float64-key7": ("b", "float64", GAUSSIAN, 7),
}

ARRAYS = ("w", "complexity", "mu_grad", "rho_grad")


def parameters(network, dtype):
    """mu (weights of about the narrow component's scale, where d log P / dw is large), rho and
    the upstream gradient of w, of one network."""
    rng = np.random.default_rng({"a": 1, "b": 2}[network])
    mu = nd.array(rng.normal(scale=0.005, size=WEIGHTS), dtype=dtype)
    rho = nd.full((WEIGHTS,), RHO, dtype=dtype)
    upstream = nd.array(np.random.default_rng(3).normal(size=WEIGHTS), dtype=dtype)
    mu.attach_grad()
    rho.attach_grad()
    return mu, rho, upstream


def record(name, keep_eps):
    """Records draw ``name``'s objective, complexity + sum(w * upstream); returns it and a
    function that reads the draw's arrays once its backward pass has run."""
    network, dtype, prior, key = DRAWS[name]
    mu, rho, upstream = parameters(network, dtype)
    if key == "seed3":
        mx.random.seed(3)
        key = None
    with autograd.record():
        weights, complexity, _ = fused.variational_sample([mu], [rho], prior, key=key,
                                                          return_eps=False, keep_eps=keep_eps)
        objective = complexity + nd.sum(weights[0] * upstream)

    def arrays():
        values = (weights[0], complexity, mu.grad, rho.grad)
        return {f"{name}/{label}": a.asnumpy() for label, a in zip(ARRAYS, values)}
    return objective, arrays


def same_key():
    """Two networks of the same shape in lockstep, drawn under one explicit key."""
    objective_a, arrays_a = record("a-mixture-float32-key7", keep_eps=True)
    objective_b, arrays_b = record("b-mixture-float32-key7", keep_eps=True)
    autograd.backward([objective_a, objective_b])
    return {**arrays_a(), **arrays_b()}


def reseeded():
    """The same with mx.random.seed(3) before each network's draw."""
    objective_a, arrays_a = record("a-mixture-float32-seed3", keep_eps=True)
    objective_b, arrays_b = record("b-mixture-float32-seed3", keep_eps=True)
    autograd.backward([objective_a, objective_b])
    return {**arrays_a(), **arrays_b()}


def kept_then_not_kept():
    """A draw with keep_eps, its backward pass, then one under the same key without keep_eps."""
    objective_a, arrays_a = record("a-mixture-float32-key7", keep_eps=True)
    objective_a.backward()
    objective_b, arrays_b = record("b-mixture-float32-key7", keep_eps=False)
    objective_b.backward()
    return {**arrays_a(), **arrays_b()}


def float32_then_float64():
    """A float32 scale-mixture draw (eps and d log P / dw: 8 bytes a weight) and a float64
    Gaussian one (eps: 8 bytes a weight) under the same key, both awaiting their backward pass."""
    objective_a, arrays_a = record("a-mixture-float32-key7", keep_eps=True)
    objective_b, arrays_b = record("b-gaussian-float64-key7", keep_eps=True)
    objective_b.backward()
    objective_a.backward()
    return {**arrays_a(), **arrays_b()}


def fresh():
    """Every draw alone, its noise drawn again in the backward pass; nothing is kept in this
    process."""
    results = {}
    for name in DRAWS:
        objective, arrays = record(name, keep_eps=False)
        objective.backward()
        results.update(arrays())
    return results


SCENARIOS = {"same-key": same_key, "reseeded": reseeded,
             "kept-then-not-kept": kept_then_not_kept,
             "float32-then-float64": float32_then_float64}


if __name__ == "__main__":
    scenarios, out = sys.argv[1:]
    if scenarios == "fresh":
        np.savez(out, **fresh())
    else:
        np.savez(out, **{f"{scenario}:{name}": value for scenario in scenarios.split(",")
                         for name, value in SCENARIOS[scenario]().items()})
