"""The diagonal Gaussian variational posterior q(w | theta) over an ordinary Gluon network.

Bayes by Backprop is a training method, not an architecture: the network stays a plain
``gluon.nn.Sequential`` (or any Block). For each of its trainable parameters this module
keeps a mean ``mu`` and a ``rho`` with sigma = softplus(rho), and :func:`assign_arrays` puts
a sample (or the mean) into the network's parameters.
"""
from __future__ import annotations

import weakref
from typing import Optional, Sequence, Union

import numpy as np
import mxnet as mx
from mxnet import gluon, nd

from ._checks import check_positive
from ._math import softplus
from ._mxcompat import parameter_arrays, set_parameter_array

__all__ = ["VariationalPosterior", "trainable_parameters", "assign_arrays", "initialisation_state",
           "GaussianNoise",
           "inverse_softplus", "MOPED_MIN_SIGMA"]


#: The smallest sigma MOPED starts a weight with (a weight of exactly 0 would get sigma = 0).
MOPED_MIN_SIGMA = 1e-8
#: The network parameters a posterior samples into (their grad_req is 'null', yet they are
#: the weights Bayes by Backprop trains), without marking Gluon's objects.
_SAMPLED_INTO = weakref.WeakSet()


def inverse_softplus(sigma):
    """rho with softplus(rho) = sigma, elementwise, in float64: log(expm1(sigma)).

    Parameters
    ----------
    sigma : numpy.ndarray, > 0

    Returns
    -------
    numpy.ndarray of float64, the shape of ``sigma``
    """
    sigma = np.asarray(sigma, dtype=np.float64)
    if not np.all(sigma > 0):
        raise ValueError("sigma must be positive for softplus to reach it")
    # for large sigma, log(expm1(s)) = s + log(1 - exp(-s)) without overflow
    return np.where(sigma > 30.0, sigma + np.log1p(-np.exp(-np.minimum(sigma, 700.0))),
                    np.log(np.expm1(np.minimum(sigma, 30.0))))


def trainable_parameters(net):
    """The parameters of ``net`` that the posterior covers, in a fixed order.

    Parameters with ``grad_req == 'null'`` (BatchNorm running statistics, frozen layers)
    are left alone. Parameters that the posterior has taken over (grad_req set to 'null'
    by :class:`VariationalPosterior`) are recognised by a marker and kept.

    Returns
    -------
    list of (str, gluon.Parameter)
    """
    return [
        (name, param)
        for name, param in net.collect_params().items()
        if param.grad_req != "null" or param in _SAMPLED_INTO
    ]


def initialisation_state(param: gluon.Parameter) -> str:
    """'ready', 'deferred' (shape known after a forward pass) or 'uninitialised', via public API."""
    try:
        param.list_ctx()
    except RuntimeError:
        return "uninitialised"
    try:
        param.data()
    except gluon.parameter.DeferredInitializationError:
        return "deferred"
    return "ready"


def assign_arrays(params: Sequence[gluon.Parameter], arrays: Sequence[nd.NDArray]) -> None:
    """Make ``param.data()`` return ``array`` itself (no copy) for each pair.

    ``Parameter.set_data`` would copy the values and cut the autograd graph from (mu, rho)
    to the sample; handing the sampled array itself to the network
    (:func:`gluon_bbb._mxcompat.set_parameter_array`) keeps that graph, so gradients of the
    loss reach mu and rho. ``tests/core/test_posterior.py`` checks that MXNet still honours this.

    Parameters
    ----------
    params : list of gluon.Parameter, each initialised on exactly one context
    arrays : list of NDArray, same shapes
    """
    for param, array in zip(params, arrays):
        data = parameter_arrays(param)
        if data is None or len(data) != 1:
            raise RuntimeError(
                f"parameter {param.name} must be initialised on exactly one context "
                f"before gluon_bbb can sample into it"
            )
        if array.shape != param.shape:
            raise ValueError(f"shape {array.shape} does not fit parameter {param.name} {param.shape}")
        set_parameter_array(param, array)


class VariationalPosterior(gluon.HybridBlock):
    """q(w | theta) = prod_j N(w_j; mu_j, softplus(rho_j)^2) over the trainable weights of a net.

    Calling the block with one standard normal ``eps`` per weight tensor performs step 2 of
    the algorithm in section 3.2 of the paper, w = mu + log(1 + exp(rho)) * eps, for all
    tensors at once; hybridized, it runs as one cached graph.

    Parameters
    ----------
    net : gluon.Block
        An initialised network whose parameter shapes are known (run one forward pass
        first if it uses deferred initialisation).
    mu_init : 'net', float or mx.init.Initializer
        'net' copies the network's current (initialised) values into mu; a float s draws
        mu ~ N(0, s^2); an Initializer is applied to each mu tensor.
    rho_init : float or (float, float)
        A constant, or the bounds of a uniform distribution, for rho. The default -5 gives
        sigma = softplus(-5) = 0.0067. Ignored with ``sigma_init='moped'``.
    sigma_init : None or 'moped'
        'moped' (Krishnan et al. 2020, "Specifying weight priors in Bayesian deep neural
        networks with empirical Bayes"): start from a trained network, sigma = moped_delta *
        abs(w) for each weight w of the net (at least :data:`MOPED_MIN_SIGMA`), so that each
        weight's uncertainty starts in proportion to its size. Needs ``mu_init='net'``.
    moped_delta : float, > 0
        The proportion delta of MOPED.

    Inputs
    ------
    *epsilons : K arrays, the shapes of the K weight tensors

    Outputs
    -------
    list of 2K arrays: the K samples w, then the K standard deviations sigma.
    """

    def __init__(self, net: gluon.Block, mu_init: Union[str, float] = "net",
                 rho_init: Union[float, Sequence[float]] = -5.0, prefix: str = "posterior_",
                 sigma_init: Optional[str] = None, moped_delta: float = 0.1, **kwargs) -> None:
        super().__init__(prefix=prefix, **kwargs)
        if sigma_init not in (None, "moped"):
            raise ValueError(f"sigma_init must be None or 'moped', got {sigma_init!r}")
        if sigma_init == "moped" and not (isinstance(mu_init, str) and mu_init == "net"):
            raise ValueError("sigma_init='moped' starts from the network's trained weights: "
                             f"it needs mu_init='net', got {mu_init!r}")
        self.sigma_init = sigma_init
        self.moped_delta = check_positive("moped_delta", moped_delta)
        named = trainable_parameters(net)
        if not named:
            raise ValueError("the network has no trainable parameters to put a posterior on")
        for name, param in named:
            if param.shape is None or any(int(d) <= 0 for d in param.shape):
                raise ValueError(
                    f"parameter {name} has unknown shape {param.shape}; initialise the network "
                    f"and run one forward pass before building the posterior"
                )
        self.names = [name for name, _ in named]
        self.targets = [param for _, param in named]
        self.shapes = [tuple(param.shape) for param in self.targets]
        self.num_weights = int(sum(np.prod(shape) for shape in self.shapes))
        dtypes = {np.dtype(param.dtype).name for param in self.targets}
        if len(dtypes) != 1:
            raise ValueError(f"all trainable parameters must share one dtype, got {sorted(dtypes)}")
        self.dtype = dtypes.pop()
        self.rho_init = rho_init
        rho_initializer = _rho_initializer(rho_init)
        self.mu_from_net = _mu_from_net(mu_init)
        mu_initializer = mx.init.Zero() if self.mu_from_net else _mu_initializer(mu_init)
        self.mus, self.rhos = [], []
        with self.name_scope():
            for i, shape in enumerate(self.shapes):
                # setattr registers the parameters so hybrid_forward receives them by name.
                setattr(self, f"mu{i}", self.params.get(
                    f"mu{i}", shape=shape, dtype=self.dtype, init=mu_initializer))
                setattr(self, f"rho{i}", self.params.get(
                    f"rho{i}", shape=shape, dtype=self.dtype, init=rho_initializer))
                self.mus.append(getattr(self, f"mu{i}"))
                self.rhos.append(getattr(self, f"rho{i}"))
        for param in self.targets:
            # The network's own arrays are replaced by samples; gluon.Trainer must not see them.
            _SAMPLED_INTO.add(param)
            param.grad_req = "null"

    def initialize(self, init=None, ctx=None, verbose=False, force_reinit=False):
        """Initialise mu and rho on ``ctx``; with mu_init='net', mu starts at the net's values."""
        super().initialize(init=init or mx.init.Zero(), ctx=ctx, verbose=verbose, force_reinit=force_reinit)
        if self.mu_from_net:
            for mu, target in zip(self.mus, self.targets):
                mu.set_data(target.data())
        if self.sigma_init == "moped":
            for rho, target in zip(self.rhos, self.targets):
                sigma = np.maximum(self.moped_delta * np.abs(target.data().asnumpy().astype(np.float64)),
                                   MOPED_MIN_SIGMA)
                rho.set_data(nd.array(inverse_softplus(sigma), dtype=self.dtype,
                                      ctx=rho.list_ctx()[0]))

    def hybrid_forward(self, F, *epsilons, **params):
        weights, sigmas = [], []
        for i, eps in enumerate(epsilons):
            sigma = softplus(F, params[f"rho{i}"])
            # broadcast_add, not "+": in mxnet 1.9.1 a hybridized elemwise_add can drop the
            # gradient of an operand that is a block parameter (tests/core/test_trainer.py checks).
            weights.append(F.broadcast_add(params[f"mu{i}"], sigma * eps))
            sigmas.append(sigma)
        return weights + sigmas

    def means(self):
        """Copies of the posterior means mu, one NDArray per weight tensor."""
        return [mu.data().copy() for mu in self.mus]

    def sigmas(self):
        """sigma = softplus(rho), one NDArray per weight tensor."""
        return [softplus(nd, rho.data()) for rho in self.rhos]

    def set_mean(self) -> None:
        """Put copies of the posterior means into the network's parameters."""
        assign_arrays(self.targets, self.means())

    def width_summary(self) -> dict:
        """How wide q(w | theta) is: the median sigma and the share of weights whose
        signal-to-noise ratio abs(mu) / sigma is below 1, over the weight tensors (those of two
        or more dimensions, the ones pruning covers; all tensors if there are none). One host
        sync; a record of :meth:`gluon_bbb.BBBTrainer.fit` holds it under 'posterior'.

        Returns
        -------
        dict
            'median_sigma': float, > 0; 'snr_below_1': float in [0, 1].
        """
        covered = [i for i, mu in enumerate(self.mus) if len(mu.shape) >= 2] or \
            list(range(len(self.mus)))
        mu = np.concatenate([self.mus[i].data().asnumpy().ravel() for i in covered])
        sigma = np.concatenate([softplus(nd, self.rhos[i].data()).asnumpy().ravel()
                                for i in covered])
        return {"median_sigma": float(np.median(sigma)),
                "snr_below_1": float(np.mean(np.abs(mu) < sigma))}

    def set_sample(self, epsilons):
        """Put one sample w = mu + sigma * eps (outside autograd) into the network."""
        outputs = self(*epsilons)
        assign_arrays(self.targets, outputs[: len(self.targets)])


def _mu_from_net(mu_init):
    if isinstance(mu_init, str):
        if mu_init != "net":
            raise ValueError(f"mu_init must be 'net', a float or an mx.init.Initializer, got {mu_init!r}")
        return True
    return False


def _mu_initializer(mu_init):
    if isinstance(mu_init, mx.init.Initializer):
        return mu_init
    scale = float(mu_init)
    if not scale > 0:
        raise ValueError(f"mu_init as a normal scale must be positive, got {mu_init!r}")
    return mx.init.Normal(scale)


def _rho_initializer(rho_init):
    if isinstance(rho_init, (tuple, list)):
        low, high = (float(v) for v in rho_init)
        if not low < high:
            raise ValueError(f"rho_init bounds must satisfy low < high, got {rho_init!r}")
        return _Uniform(low, high)
    return mx.init.Constant(float(rho_init))


class _Uniform(mx.init.Initializer):
    """U(low, high); mx.init.Uniform only supports symmetric bounds."""

    def __init__(self, low, high):
        super().__init__(low=low, high=high)
        self.low, self.high = low, high

    def _init_weight(self, _, arr):
        nd.random.uniform(self.low, self.high, out=arr)

    _init_bias = _init_weight
    _init_default = _init_weight


class GaussianNoise:
    """Standard normal eps for every weight tensor, drawn as one flat vector per call.

    Two generators, each seeded by :meth:`reseed` and usable on any context:

    * ``'numpy'``: a NumPy ``Generator`` on the host, its draws copied once into an NDArray on
      ``ctx`` (on the CPU about twice as fast as ``nd.random.normal`` in this mxnet wheel);
      its state is JSON (:meth:`get_state`), so a checkpoint can keep it.
    * ``'mxnet'``: ``nd.random.normal`` on ``ctx`` itself, from MXNet's generator for that
      context (no host work: what a GPU wants).

    Each tensor's eps is a view into the flat vector.

    Parameters
    ----------
    shapes : list of tuple
    ctx : mx.Context
    dtype : str
    seed : int or None
        Seeds the 'numpy' generator; None draws a seed from MXNet's generator, so
        ``mx.random.seed`` makes runs reproducible. The 'mxnet' generator is seeded by
        ``mx.random.seed`` (or :meth:`reseed`).
    generator : {'numpy', 'mxnet'}
    """

    GENERATORS = ("numpy", "mxnet")

    def __init__(self, shapes, ctx, dtype="float32", seed=None, generator="numpy"):
        if generator not in self.GENERATORS:
            raise ValueError(f"generator must be one of {self.GENERATORS}, got {generator!r}")
        self.shapes = [tuple(s) for s in shapes]
        self.sizes = [int(np.prod(s)) for s in self.shapes]
        self.offsets = np.concatenate([[0], np.cumsum(self.sizes)]).astype(int)
        self.ctx, self.dtype, self.generator = ctx, np.dtype(dtype), generator
        self.rng = None
        if generator == "numpy":
            if seed is None:
                seed = int(nd.random.randint(0, 2**31 - 1, shape=(1,), ctx=mx.cpu()).asscalar())
            self.rng = np.random.default_rng(seed)

    def reseed(self, seed):
        """Restart the generator from ``seed`` (for 'mxnet': MXNet's generator for ctx)."""
        if self.generator == "numpy":
            self.rng = np.random.default_rng(int(seed))
        else:
            mx.random.seed(int(seed), ctx=self.ctx)

    def sample(self):
        """Returns a list of NDArrays, one per shape, iid N(0, 1)."""
        total = int(self.offsets[-1])
        if self.generator == "numpy":
            values = self.rng.standard_normal(total, dtype=self.dtype)
            flat = nd.array(values, ctx=self.ctx, dtype=self.dtype)
        else:
            flat = nd.random.normal(shape=(total,), ctx=self.ctx, dtype=self.dtype.name)
        return [flat[a:b].reshape(s) for a, b, s in zip(self.offsets[:-1], self.offsets[1:], self.shapes)]

    def get_state(self):
        """The 'numpy' generator's state as JSON, or None for 'mxnet'."""
        return None if self.rng is None else self.rng.bit_generator.state

    def set_state(self, state):
        """Restore a :meth:`get_state` value (a ValueError if it is not one)."""
        if self.rng is None:
            return
        try:
            self.rng.bit_generator.state = state
        except (TypeError, ValueError, KeyError, OverflowError) as error:
            raise ValueError(f"not a state of the noise generator ({error})") from None
