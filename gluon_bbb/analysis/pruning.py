"""Weight pruning by signal-to-noise ratio (Blundell et al. 2015, section 5.1, Table 2, Fig. 4).

The signal-to-noise ratio of weight j is abs(mu_j) / sigma_j. Removing the weights with the
lowest ratio (setting them to zero in the posterior-mean network) hardly changes the test
error even at 95% removed; removing the weights with the smallest abs(mu_j) ("naive") is the
comparison.

Conventions
-----------
Weights and biases
    "Weights" are the parameter tensors with two or more dimensions (Dense weight matrices,
    convolution kernels, embeddings). Biases and other one-dimensional parameters (BatchNorm
    gamma and beta) are never pruned and not counted in ``num_weights``, as the paper counts
    weights. ``include_bias=True`` prunes and counts every tensor of the posterior.
How many
    A fraction f of N weights removes exactly ``floor(f * N + 0.5)`` of them. Weights tied at
    the threshold are removed in flat order (tensor order, then row-major) until the count is
    reached, so the count is exact whatever the ties.
The trainer is not changed
    The posterior (mu, rho) of the trainer is only read: pruning works on copies of mu. The
    pruned weights are put into ``trainer.net``, the network the trainer samples into (it
    holds no state of its own). :func:`pruning_table` restores the posterior mean there when
    it is done; after :func:`prune`, call ``trainer.set_mean()`` to go back, and
    :meth:`PrunedNetwork.apply` to put the pruned weights in again (``evaluate`` and
    ``predict_proba`` of :class:`PrunedNetwork` do this themselves).
"""
import numbers
import os
import zipfile

import numpy as np
from mxnet import gluon, nd

from .._checks import check_int
from ..baselines import evaluate_deterministic
from ..io.paramfile import (load_parameter_file, save_parameter_file, set_parameter_arrays,
                            structural_parameters)
from ..context import resolve_context
from ..posterior import assign_arrays, trainable_parameters
from ..io.sparse_weights import read_sparse, sparse_nbytes, write_sparse

__all__ = [
    "METHODS",
    "posterior_parameters",
    "signal_to_noise",
    "sample_weights",
    "pruning_mask",
    "prune",
    "PrunedNetwork",
    "load_pruned",
    "pruning_table",
    "PruningTable",
]

#: Pruning orders: lowest abs(mu) / sigma first ('snr') or lowest abs(mu) first ('naive').
METHODS = ("snr", "naive")

DEFAULT_FRACTIONS = (0.0, 0.5, 0.75, 0.95, 0.98)


# ---------------------------------------------------------------------------- reading the posterior
def _read_posterior(trainer, include_bias):
    """NumPy copies of mu and sigma per tensor, and which tensors pruning covers."""
    posterior = getattr(trainer, "posterior", None)
    if posterior is None:
        raise ValueError("trainer has no posterior yet: fit it or load a checkpoint first")
    means = [m.asnumpy() for m in posterior.means()]
    sigmas = [s.asnumpy() for s in posterior.sigmas()]
    covered = [include_bias or m.ndim >= 2 for m in means]
    return means, sigmas, covered


def _flat(arrays, covered):
    return np.concatenate([a.ravel() for a, c in zip(arrays, covered) if c])


def posterior_parameters(trainer, include_bias=False):
    """The posterior means and standard deviations of the weights, flattened.

    Parameters
    ----------
    trainer : BBBTrainer, with a posterior (trained or loaded)
    include_bias : bool
        Also cover the one-dimensional tensors (biases).

    Returns
    -------
    mu, sigma : numpy arrays of shape (num_weights,)
        Tensors in the posterior's order, each flattened row-major.
    """
    means, sigmas, covered = _read_posterior(trainer, include_bias)
    return _flat(means, covered), _flat(sigmas, covered)


def signal_to_noise(trainer, include_bias=False):
    """abs(mu) / sigma of every weight.

    Parameters
    ----------
    trainer, include_bias
        See :func:`posterior_parameters`.

    Returns
    -------
    numpy array of shape (num_weights,), float, >= 0
    """
    mu, sigma = posterior_parameters(trainer, include_bias)
    return np.abs(mu) / sigma


def sample_weights(trainer, num_samples=1, include_bias=False, seed=None):
    """Weights drawn from the posterior, w = mu + sigma * eps (for Fig. 3's weight density).

    Parameters
    ----------
    trainer, include_bias
        See :func:`posterior_parameters`.
    num_samples : int, >= 1
        Networks to draw.
    seed : int, optional
        Seeds a NumPy generator; the trainer's own noise generator is not touched.

    Returns
    -------
    numpy array of shape (num_samples, num_weights)
    """
    check_int("num_samples", num_samples)
    mu, sigma = posterior_parameters(trainer, include_bias)
    eps = np.random.default_rng(seed).standard_normal((int(num_samples), mu.size), dtype=mu.dtype)
    return mu + sigma * eps


# ---------------------------------------------------------------------------- choosing weights
def _check_fraction(fraction, name="fraction"):
    if (isinstance(fraction, bool) or not isinstance(fraction, numbers.Real)
            or not 0.0 <= fraction < 1.0):
        raise ValueError(f"{name} must be a number in [0, 1), got {fraction!r}")
    return float(fraction)


def _check_method(method, name="method"):
    if method not in METHODS:
        raise ValueError(f"{name} must be one of {METHODS}, got {method!r}")
    return method


def pruning_mask(scores, fraction):
    """Which weights to keep when the ``floor(fraction * N + 0.5)`` lowest scores are removed.

    One global threshold from ``np.partition``; ties at the threshold are removed in index
    order until the count is exact.

    Parameters
    ----------
    scores : array_like, shape (N,)
        E.g. the signal-to-noise ratios; NaN counts as the highest score.
    fraction : float in [0, 1)

    Returns
    -------
    numpy bool array, shape (N,), True for the weights that stay.
    """
    fraction = _check_fraction(fraction)
    scores = np.asarray(scores)
    if scores.ndim != 1:
        raise ValueError(f"scores must be one-dimensional, got shape {scores.shape}")
    scores = np.where(np.isnan(scores), np.inf, scores)
    num_removed = int(np.floor(fraction * scores.size + 0.5))
    keep = np.ones(scores.size, dtype=bool)
    if num_removed == 0:
        return keep
    threshold = np.partition(scores, num_removed - 1)[num_removed - 1]
    below = scores < threshold
    keep[below] = False
    ties = np.flatnonzero(scores == threshold)[: num_removed - int(below.sum())]
    keep[ties] = False
    return keep


def _scores(mu, sigma, method):
    return np.abs(mu) / sigma if method == "snr" else np.abs(mu)


# ---------------------------------------------------------------------------- pruned networks
class PrunedNetwork:
    """A deterministic network with some weights set to zero.

    Made by :func:`prune` or :func:`load_pruned`, not directly.

    Parameters
    ----------
    net : gluon.Block
    arrays : list of NDArray, one per tensor of ``trainable_parameters(net)``
        The pruned values.
    covered : list of bool, one per tensor
        Which tensors pruning covers (counted in ``num_weights``).
    fraction : float or None
        The fraction that was asked for; None for a network read by :func:`load_pruned`.
    method : str or None

    Attributes
    ----------
    net : gluon.Block
        Holds the pruned weights once :meth:`apply` has run (the constructor runs it).
    num_weights : int
        Weights covered by pruning (biases excluded unless include_bias).
    num_nonzero : int
        Of those, the ones that are not zero.
    fraction, method
    """

    def __init__(self, net, arrays, covered, fraction=None, method=None):
        self.net = net
        self.arrays = list(arrays)
        self.covered = list(covered)
        self.fraction, self.method = fraction, method
        weights = [a for a, c in zip(self.arrays, self.covered) if c]
        self.num_weights = int(sum(a.size for a in weights))
        counts = [nd.sum(a != 0) for a in weights]
        self.num_nonzero = int(nd.add_n(*counts).asscalar()) if counts else 0
        self.apply()

    def apply(self):
        """Put the pruned values into ``self.net``; returns the net."""
        assign_arrays([p for _, p in trainable_parameters(self.net)], self.arrays)
        return self.net

    def evaluate(self, data):
        """Classification error on ``data`` (iterable of (data, label) batches), in [0, 1]."""
        return evaluate_deterministic(self.apply(), data)

    def predict_proba(self, data):
        """Softmax outputs for one batch, (batch_size, ...) -> (batch_size, num_classes)."""
        ctx = self.arrays[0].context
        return nd.softmax(self.apply()(data.as_in_context(ctx)), axis=-1)

    def save(self, path, sparse=False):
        """Write the pruned network, atomically; :func:`load_pruned` reads either kind of file
        and recounts the nonzero weights.

        Parameters
        ----------
        path : str
        sparse : bool
            False: a plain Gluon parameter file (``net.save_parameters``), which loads without
            gluon_bbb by ``net.load_parameters(path)`` into a network of the same architecture.
            True: the pruned tensors in CSR form (:mod:`gluon_bbb.io.sparse_weights`), the others
            dense; its array data is :attr:`sparse_nbytes` bytes.
        """
        if sparse:
            arrays, pruned = self._named_arrays()
            write_sparse(path, arrays, pruned)
        else:
            save_parameter_file(self.apply(), path)

    @property
    def sparse_nbytes(self):
        """Bytes of array data in the sparse file :meth:`save` writes (``sparse=True``): values,
        column indices and row pointers of the pruned tensors, the other tensors dense."""
        return sparse_nbytes(*self._named_arrays())

    @property
    def dense_nbytes(self):
        """Bytes of array data of the same network stored dense (a Gluon parameter file)."""
        return int(sum(array.nbytes for array in self._named_arrays()[0].values()))

    def _named_arrays(self):
        """(structural name -> NumPy array, names of the pruned tensors)."""
        covered = {id(param) for (_, param), c in zip(trainable_parameters(self.apply()), self.covered)
                   if c}
        arrays, pruned = {}, set()
        for name, param in structural_parameters(self.net).items():
            arrays[name] = param.data().asnumpy()
            if id(param) in covered:
                pruned.add(name)
        return arrays, pruned

    def __repr__(self):
        """What was asked (method, fraction; unknown for a network read from a file) and what
        the network holds (its nonzero weights)."""
        asked = ("" if self.method is None and self.fraction is None else
                 f"method={self.method!r}, fraction={self.fraction!r}, ")
        zero = 1.0 - self.num_nonzero / self.num_weights if self.num_weights else 0.0
        return (f"{type(self).__name__}({asked}num_nonzero={self.num_nonzero}, "
                f"num_weights={self.num_weights}, {100 * zero:.1f}% zero)")


def _pruned_arrays(means, covered, keep):
    """Zero the weights of the covered tensors where the flat ``keep`` mask is False."""
    sizes = [m.size for m, c in zip(means, covered) if c]
    masks = iter(np.split(keep, np.cumsum(sizes)[:-1]))
    return [np.where(next(masks).reshape(m.shape), m, 0).astype(m.dtype) if c else m
            for m, c in zip(means, covered)]


def _make_pruned(trainer, means, covered, scores, fraction, method):
    values = _pruned_arrays(means, covered, pruning_mask(scores, fraction))
    arrays = [nd.array(v, ctx=trainer.ctx, dtype=v.dtype) for v in values]
    return PrunedNetwork(trainer.net, arrays, covered, fraction, method)


def prune(trainer, fraction, method="snr", include_bias=False):
    """The posterior-mean network with a fraction of its weights set to zero.

    Parameters
    ----------
    trainer : BBBTrainer, with a posterior
    fraction : float in [0, 1)
        Exactly ``floor(fraction * num_weights + 0.5)`` weights are removed.
    method : {'snr', 'naive'}
        Remove the lowest abs(mu) / sigma first, or the lowest abs(mu) first.
    include_bias : bool
        Also prune (and count) biases; by default they are kept.

    Returns
    -------
    PrunedNetwork
        Its ``net`` is ``trainer.net``, now holding the pruned weights; the trainer's
        posterior is unchanged (``trainer.set_mean()`` restores the mean network).
    """
    fraction, method = _check_fraction(fraction), _check_method(method)
    means, sigmas, covered = _read_posterior(trainer, include_bias)
    scores = _scores(_flat(means, covered), _flat(sigmas, covered), method)
    return _make_pruned(trainer, means, covered, scores, fraction, method)


def load_pruned(path, net, ctx=None, include_bias=False):
    """Read a network written by :meth:`PrunedNetwork.save`, dense or sparse.

    Parameters
    ----------
    path : str
    net : gluon.Block
        Same architecture as the saved one (initialised or not).
    ctx : mx.Context or str, optional
        Default: CPU.
    include_bias : bool
        Count biases as weights, as when the network was pruned.

    Returns
    -------
    PrunedNetwork, with ``fraction`` and ``method`` None.

    Raises
    ------
    FileNotFoundError, gluon_bbb.io.checkpoint.CheckpointError
        A missing file, or one that is damaged or for another network (named).
    """
    if not isinstance(net, gluon.Block):
        raise TypeError(f"net must be a gluon Block, got {type(net).__name__}")
    ctx = resolve_context(ctx)
    if os.path.isfile(path) and zipfile.is_zipfile(path):  # PrunedNetwork.save(sparse=True)
        shapes = {name: p.shape for name, p in structural_parameters(net).items()}
        known = all(shape and all(d > 0 for d in shape) for shape in shapes.values())
        arrays = read_sparse(path, expected=shapes if known else None)  # checked, named errors
        set_parameter_arrays(net, arrays, path, ctx)
    else:
        load_parameter_file(net, path, ctx=ctx)  # checked, named errors
    arrays = [param.data() for _, param in trainable_parameters(net)]
    return PrunedNetwork(net, arrays, [include_bias or a.ndim >= 2 for a in arrays])


# ---------------------------------------------------------------------------- Table 2
class PruningTable(list):
    """Rows of :func:`pruning_table`: a list of dicts, with a Markdown rendering.

    Each row has 'fraction', 'method', 'test_error', 'num_nonzero', 'num_weights',
    'sparse_bytes' and 'dense_bytes' (:attr:`PrunedNetwork.sparse_nbytes` and
    :attr:`PrunedNetwork.dense_nbytes`; tables written before these existed lack them).
    """

    def to_markdown(self):
        """Markdown text of the table, as in the paper's Table 2: one line per row with the
        proportion removed, the method, the weights left (nonzero), the test error and, where
        the rows have it, the size of the network stored sparsely."""
        sized = all("sparse_bytes" in row for row in self)
        lines = ["| Proportion removed | Method | # Weights | Test error |"
                 + (" Stored sparsely |" if sized else ""),
                 "|---:|:---|---:|---:|" + ("---:|" if sized else "")]
        for row in self:
            size = (f" {row['sparse_bytes'] / 2**10:,.0f} KiB "
                    f"({100 * row['sparse_bytes'] / row['dense_bytes']:.0f}%) |" if sized else "")
            lines.append(f"| {100 * row['fraction']:g}% | {row['method']} | "
                         f"{row['num_nonzero']:,} | {100 * row['test_error']:.2f}% |{size}")
        return "\n".join(lines)


def pruning_table(trainer, test_data, fractions=DEFAULT_FRACTIONS, methods=METHODS,
                  include_bias=False):
    """Test error of the pruned posterior-mean network for each fraction and method (Table 2).

    Parameters
    ----------
    trainer : BBBTrainer, with a posterior
    test_data : iterable of (data, label) batches
    fractions : sequence of float in [0, 1)
    methods : sequence of {'snr', 'naive'}
    include_bias : bool
        See :func:`prune`.

    Returns
    -------
    PruningTable
        One row per (method, fraction), methods outer. The trainer's network holds the
        posterior mean again afterwards.
    """
    fractions = [_check_fraction(f, "fractions") for f in _as_list("fractions", fractions)]
    methods = [_check_method(m, "methods") for m in _as_list("methods", methods)]
    means, sigmas, covered = _read_posterior(trainer, include_bias)
    mu, sigma = _flat(means, covered), _flat(sigmas, covered)
    table = PruningTable()
    try:
        for method in methods:
            scores = _scores(mu, sigma, method)
            for fraction in fractions:
                pruned = _make_pruned(trainer, means, covered, scores, fraction, method)
                table.append({
                    "fraction": fraction,
                    "method": method,
                    "test_error": pruned.evaluate(test_data),
                    "num_nonzero": pruned.num_nonzero,
                    "num_weights": pruned.num_weights,
                    "sparse_bytes": pruned.sparse_nbytes,
                    "dense_bytes": pruned.dense_nbytes,
                })
    finally:
        trainer.set_mean()
    return table


def _as_list(name, values):
    if isinstance(values, (str, bytes)) or not hasattr(values, "__iter__"):
        raise ValueError(f"{name} must be a sequence, got {values!r}")
    values = list(values)
    if not values:
        raise ValueError(f"{name} must not be empty")
    return values
