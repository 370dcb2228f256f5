"""Fast in-memory minibatches: :class:`ArrayLoader` over arrays held once in (device) memory,
and :class:`EpochShuffled`, whose order depends only on (seed, epoch) so that a resumed run
sees the minibatches of an uninterrupted one."""
import mxnet as mx
import numpy as np
from mxnet import nd

from .._checks import check_int

__all__ = ["ArrayLoader", "EpochShuffled"]


class ArrayLoader:
    """Fast mini-batch iterator over arrays held once in (device) memory.

    Each batch is gathered with one ``nd.take`` of an index NDArray (or a
    zero-copy slice when not shuffling); there are no per-sample Python loops
    and no host synchronisation per batch.

    Parameters
    ----------
    X : array_like, shape (n, d) or (n, ...)
        Inputs; arrays with more than 2 dimensions are flattened to (n, -1).
    y : array_like, shape (n,)
        Labels.
    batch_size : int
        Examples per batch, >= 1.
    shuffle : bool
        Draw a new permutation of the examples at every epoch.
    ctx : mxnet.Context, optional
        Where the arrays and batches live; default ``mx.cpu()``.
    seed : int, optional
        Seed of the numpy Generator that draws the permutations: two loaders
        with the same seed yield the same batches in the same order.
    last_batch : {"keep", "discard"}
        Keep the final, smaller batch, or drop it.
    dtype : str
        Dtype of the data batches; labels are always float32.

    Attributes
    ----------
    num_examples : int
    batch_size : int

    Yields
    ------
    data : mxnet.nd.NDArray, shape (batch, d), ``dtype``
    label : mxnet.nd.NDArray, shape (batch,), float32
        Without shuffling these are views of the stored arrays: do not modify
        them in place.
    """

    LAST_BATCH_MODES = ("keep", "discard")

    def __init__(self, X, y, batch_size, shuffle=False, ctx=None, seed=None,
                 last_batch="keep", dtype="float32"):
        X, y = self._validated_arrays(X, y)
        check_int("batch_size", batch_size)
        if last_batch not in self.LAST_BATCH_MODES:
            raise ValueError(f"unknown last_batch {last_batch!r}; valid values: "
                             f"{', '.join(self.LAST_BATCH_MODES)}")
        self.batch_size = int(batch_size)
        self.num_examples = len(X)
        self.shuffle = bool(shuffle)
        self.last_batch = last_batch
        self.ctx = mx.cpu() if ctx is None else ctx
        self._rng = np.random.default_rng(seed)
        self._data = nd.array(X, ctx=self.ctx, dtype=dtype)
        self._label = nd.array(y, ctx=self.ctx, dtype="float32")

    @staticmethod
    def _validated_arrays(X, y):
        X = X.asnumpy() if isinstance(X, nd.NDArray) else np.asarray(X)
        y = y.asnumpy() if isinstance(y, nd.NDArray) else np.asarray(y)
        if X.ndim < 2:
            raise ValueError(f"X must have shape (n, d), got shape {X.shape}")
        if X.ndim > 2:
            X = X.reshape(len(X), -1)
        if y.ndim != 1:
            raise ValueError(f"y must have shape (n,), got shape {y.shape}")
        if len(X) != len(y):
            raise ValueError(f"X and y have different lengths: {len(X)} vs {len(y)}")
        if len(X) == 0:
            raise ValueError("X and y are empty")
        return X, y

    def __len__(self):
        """Number of batches per epoch."""
        if self.last_batch == "discard":
            return self.num_examples // self.batch_size
        return -(-self.num_examples // self.batch_size)

    def reseed(self, seed):
        """Restart the generator of the permutations from ``seed``.

        Parameters
        ----------
        seed : int or sequence of int
            Anything ``numpy.random.default_rng`` accepts, e.g. ``[run_seed, epoch]``.
        """
        self._rng = np.random.default_rng(seed)

    def __iter__(self):
        bounds = [(start, min(start + self.batch_size, self.num_examples))
                  for start in range(0, len(self) * self.batch_size, self.batch_size)]
        if not self.shuffle:
            for start, stop in bounds:
                yield self._data[start:stop], self._label[start:stop]
            return
        order = nd.array(self._rng.permutation(self.num_examples), ctx=self.ctx,
                         dtype="int32")
        for start, stop in bounds:
            index = order[start:stop]
            yield nd.take(self._data, index), nd.take(self._label, index)

    def __repr__(self):
        return (f"{type(self).__name__}(num_examples={self.num_examples}, "
                f"batch_size={self.batch_size}, shuffle={self.shuffle}, "
                f"last_batch={self.last_batch!r}, ctx={self.ctx})")


class EpochShuffled:
    """A shuffling loader whose order depends only on (seed, epoch).

    Before each pass it reseeds ``loader`` from ``[seed, epoch_of()]``, so a run resumed
    at epoch e sees the same minibatches as an uninterrupted one.

    Parameters
    ----------
    loader : ArrayLoader
        Any loader with a ``reseed(seed)`` method.
    seed : int
        The run's seed.
    epoch_of : callable
        ``epoch_of() -> int``, the number of the epoch about to run (from 0), e.g.
        ``lambda: trainer.epoch``.
    """

    def __init__(self, loader, seed, epoch_of):
        if not callable(getattr(loader, "reseed", None)):
            raise TypeError(f"EpochShuffled needs a loader with a reseed(seed) method, "
                            f"got {type(loader).__name__}")
        self.loader, self.seed, self.epoch_of = loader, int(seed), epoch_of

    def __len__(self):
        return len(self.loader)

    def __iter__(self):
        self.loader.reseed([self.seed, int(self.epoch_of())])
        return iter(self.loader)

    def __getattr__(self, name):
        return getattr(self.loader, name)
