"""BBBTrainer: Bayes by Backprop for an ordinary Gluon network.

The data path of one step, in :meth:`BBBTrainer.step`, reads top to bottom:
sample eps -> w = mu + softplus(rho) * eps -> overwrite the net's parameters with w ->
forward -> Eq. (8) cost -> backward -> update mu and rho.

The sampling step and the complexity part of Eq. (8) run either in the fused C++ operator
(:mod:`gluon_bbb.fused`, on the CPU when it builds) or in the pure-MXNet path
(:class:`~gluon_bbb.posterior.VariationalPosterior` and :meth:`BBBLoss.complexity`). Both give
the same values and gradients; ``trainer.fused`` and ``trainer.fused_reason`` say which runs.

Monte Carlo prediction (:meth:`BBBTrainer.predict_proba`, :meth:`BBBTrainer.evaluate`) is
done by :mod:`gluon_bbb.predictive`, saving and loading by :mod:`gluon_bbb.io.persistence`.
"""
from __future__ import annotations

import logging
import time
import warnings
from typing import Callable, Iterable, List, Optional, Sequence, Union

import numpy as np
import mxnet as mx
from mxnet import autograd, gluon, nd

from ._checks import check_int, check_positive
from .io import persistence
from . import predictive
from .context import resolve_context
from .estimators import LayerEstimators, check_estimator
from .epochs import (EpochTotals, NonFiniteLossError, checked_learning_rate, epoch_line,
                     epoch_seed, print_in_notebook, progress_bar)
from .fused import FiniteGuard, fused_path, variational_sample
from .fused.optimizers import fused_optimizer
from .batched import StepDraws, mean_cost
from .loss import BBBLoss
from .posterior import (GaussianNoise, VariationalPosterior, assign_arrays, initialisation_state,
                        trainable_parameters)
from .predictive import SAMPLING_METHODS
from .weighting import kl_weights

__all__ = ["BBBTrainer", "NonFiniteLossError", "SAMPLING_METHODS"]

logger = logging.getLogger(__name__)


class BBBTrainer:
    """Trains the variational posterior of an ordinary Gluon network by Bayes by Backprop.

    Parameters
    ----------
    net : gluon.Block
        Any network, e.g. a ``gluon.nn.Sequential`` of Dense or Conv2D layers. It stays an
        ordinary network: every step its trainable parameters are replaced by a sample.
        Uninitialised networks are initialised on ``ctx``.
    loss : BBBLoss
    optimizer : str or mx.optimizer.Optimizer
        Updates mu and rho, through a ``gluon.Trainer``.
    optimizer_params : dict, optional
        Default ``{'learning_rate': 1e-3}``.
    num_samples : int, >= 1
        Weight samples per step; the cost is averaged over them (see ``batch_draws``).
    kl_weighting : {'uniform', 'blundell'}
        pi_i = 1/M, or Eq. (9).
    kl_scale : float, > 0
        Multiplies every pi_i. 1 (default) is the paper's cost, Eq. (8) summed over an epoch
        to Eq. (2). Below 1 the complexity cost is down-weighted: a tempered ("cold")
        posterior, which trades the variational bound for accuracy; the recorded 'loss' and
        'complexity' are then those of the scaled cost.
    ctx : mx.Context or str
    mu_init, rho_init, sigma_init, moped_delta
        See :class:`~gluon_bbb.posterior.VariationalPosterior`. ``sigma_init='moped'`` starts
        from a trained network with sigma = moped_delta * abs(w) (MOPED, Krishnan et al. 2020).
    seed : int, optional
        Seeds the noise eps; by default it is drawn from MXNet's generator. The fused
        operator draws eps from MXNet's generator; the pure-MXNet path from
        :class:`~gluon_bbb.posterior.GaussianNoise` (a NumPy generator on the CPU, MXNet's
        generator on the device elsewhere). :meth:`fit` reseeds all of them from
        (seed, epoch) at the start of every epoch, on every path and context, so a resumed run
        draws the same noise as an uninterrupted one.
    hybridize : bool
        Hybridize the network (if it is a HybridBlock), the posterior and the loss. With an
        ``estimator`` other than 'weights' the network runs imperatively (its covered layers
        switch their forward pass between training and evaluation).
    estimator : {'weights', 'local', 'flipout'}
        How the covered layers draw their noise in training (:mod:`gluon_bbb.estimators`):
        the paper's weight sample shared by the minibatch, the local reparameterisation
        (Dense), or Flipout (Dense, Conv2D). Other layers keep weight sampling; the
        complexity cost stays the Monte Carlo log q - log P. Prediction and evaluation
        sample weights as before.
    fused : bool or None
        None (default): use the fused C++ operator when it is available (CPU context,
        float32/float64, a compiler, ``GLUON_BBB_FUSED`` not 0), else fall back to the
        pure-MXNet path with a logged reason. False: always the pure-MXNet path. True:
        require the fused operator (RuntimeError if it is unavailable).
    batch_draws : bool or None
        None: K = ``num_samples`` >= ``gluon_bbb.batched.BATCH_DRAWS_FROM`` (6) draws run as one
        batched pass (:mod:`gluon_bbb.batched`) for a Sequential of Dense layers with the
        'weights' estimator, else (and for fewer draws, where the loop is as fast) as a loop of
        K passes (the same values and gradients, to rounding). False: the loop. True: the
        batched pass or a RuntimeError, for any K.

    Attributes
    ----------
    history : list of dict
        One entry per epoch: 'epoch', 'loss' (sum over the epoch of Eq. 8), 'nll' and
        'complexity' (its two parts, loss = nll + complexity), 'train_error' (of the sampled
        networks during training), 'test_error' (posterior mean, if eval_data was given),
        'skipped_steps', 'seconds', 'posterior' (how wide q is after the epoch:
        :meth:`VariationalPosterior.width_summary`); with a learnable prior also 'prior', its
        values after the epoch (e.g. ``{'sigma': 0.09}``).
    epoch : int
        Number of completed epochs.
    gluon_trainer : mxnet.gluon.Trainer
        The Gluon trainer that updates mu and rho (and a learned prior): its ``optimizer``,
        ``learning_rate`` and ``set_learning_rate``. (``trainer``, its old name, still works
        and warns.)
    fused : bool
        Whether steps use the fused operator (known once the network's shapes are).
    fused_reason : str
        Why the fused operator is not used ('' when it is).
    draws_path, draws_reason : str
        'batched' or 'loop' (see ``batch_draws``), and why the draws loop ('' when batched).
    estimator_report : str
        Which layers use which estimator, and why others do not (known once the network's
        shapes are).

    Notes
    -----
    ``predict_proba(..., sampling='local')`` and ``evaluate(..., sampling='local')`` use the
    local reparameterisation trick for the first layer (see :meth:`predict_proba`). It raises
    a ValueError where it cannot apply to the network (the first block is not a
    ``gluon.nn.Dense``); where it only lacks the fused operator (``fused`` is False: no
    compiler, a GPU, ``GLUON_BBB_FUSED=0``, ``fused=False``) it falls back to sampling the
    weights, which gives the same per-example predictive distribution, and logs why once.
    """

    def __init__(self, net: gluon.Block, loss: BBBLoss, optimizer: str = "adam",
                 optimizer_params: Optional[dict] = None, num_samples: int = 1,
                 kl_weighting: str = "uniform", ctx: Union[mx.Context, str, None] = None,
                 mu_init: Union[str, float] = "net",
                 rho_init: Union[float, Sequence[float]] = -5.0, seed: Optional[int] = None,
                 hybridize: bool = True, fused: Optional[bool] = None, kl_scale: float = 1.0,
                 sigma_init: Optional[str] = None, moped_delta: float = 0.1,
                 estimator: str = "weights", batch_draws: Optional[bool] = None) -> None:
        if not isinstance(net, gluon.Block):
            raise TypeError(f"net must be a gluon Block, got {type(net).__name__}")
        if not isinstance(loss, BBBLoss):
            raise TypeError(f"loss must be a gluon_bbb.BBBLoss, got {type(loss).__name__}")
        check_int("num_samples", num_samples)
        kl_weights(kl_weighting, 1)  # validates the scheme name
        self.kl_scale = check_positive("kl_scale", kl_scale)
        self.net, self.loss = net, loss
        self.ctx = resolve_context(ctx)
        self.optimizer = optimizer
        self.optimizer_params = dict(optimizer_params or {"learning_rate": 1e-3})
        self.num_samples = int(num_samples)
        self.kl_weighting = kl_weighting
        self.mu_init, self.rho_init, self.seed = mu_init, rho_init, seed
        self.sigma_init, self.moped_delta = sigma_init, moped_delta
        self.hybridize = hybridize
        self.estimator = check_estimator(estimator)
        self.estimator_report = "not decided yet: the network has not seen data"
        for name, value in (("fused", fused), ("batch_draws", batch_draws)):
            if value not in (None, True, False):
                raise ValueError(f"{name} must be None, True or False, got {value!r}")
        self.fused_request, self.batch_draws_request = fused, batch_draws
        self.draws_path, self.draws_reason = "loop", "not decided yet: the network has not seen data"
        self.fused, self.fused_reason = False, "not decided yet: the network has not seen data"
        self.posterior = None
        self.history = []
        self.epoch = 0
        self.num_outputs = None
        self._kl_weight_cache = None
        self._setup_without_data()

    # ------------------------------------------------------------------ setup
    @property
    def trainer(self):
        """Deprecated: the old name of :attr:`gluon_trainer` (it read as ``trainer.trainer``)."""
        warnings.warn("BBBTrainer.trainer is deprecated: use BBBTrainer.gluon_trainer",
                      DeprecationWarning, stacklevel=2)
        return self.gluon_trainer

    def _setup_without_data(self):
        if all(initialisation_state(p) == "ready" for p in self.net.collect_params().values()):
            self._build()  # otherwise the shapes are unknown until the first batch

    def prepare(self, data):
        """Finish setting up on a first batch ``data``: initialise the network if needed, learn
        its shapes, build the posterior. Does nothing once set up."""
        if self.posterior is not None:
            return
        params = self.net.collect_params().values()
        if any(initialisation_state(p) == "uninitialised" for p in params):
            self.net.initialize(ctx=self.ctx)
        self.forward(data)  # finishes deferred initialisation
        self._build()

    def _build(self):
        params = self.net.collect_params()
        if any(self.ctx not in p.list_ctx() for p in params.values()):
            params.reset_ctx(self.ctx)
        covered = trainable_parameters(self.net)  # a per-weight prior must fit their shapes
        self.loss.prior.check_shapes([name for name, _ in covered],
                                     [tuple(param.shape) for _, param in covered])
        self.posterior = VariationalPosterior(self.net, mu_init=self.mu_init, rho_init=self.rho_init,
                                              sigma_init=self.sigma_init,
                                              moped_delta=self.moped_delta)
        self.posterior.initialize(ctx=self.ctx)
        prior = self.loss.prior
        prior.initialize(self.ctx, self.posterior.dtype)
        if self.hybridize:
            self.posterior.hybridize()
            self.loss.hybridize()
            if isinstance(self.net, gluon.HybridBlock) and self.estimator == "weights":
                self.net.hybridize()
        if self.estimator != "weights" and isinstance(self.net, gluon.HybridBlock):
            self.net.hybridize(False)  # the estimator layers read their mode at every call
        self.estimators = LayerEstimators(self.net, self.posterior, self.estimator)
        self.estimator_report = self.estimators.report
        self.variational_params = list(self.posterior.collect_params().values())
        self.prior_params = list(prior.parameters().values())  # empty unless it is learnable
        self.fused, self.fused_reason = fused_path(self.ctx, self.posterior.dtype,
                                                   self.variational_params, self.fused_request,
                                                   learnable_prior=prior.learnable)
        # A dict: gluon.Trainer orders its parameters by sorted name, the order in which
        # checkpoints store the optimizer state (posterior_* first, then a learned prior_*).
        trained = {p.name: p for p in self.variational_params + self.prior_params}
        # Adam and SGD: the same rule in one pass over all tensors on the fused path
        optimizer = fused_optimizer(self.optimizer, self.optimizer_params) if self.fused else None
        if optimizer is not None:
            self.gluon_trainer = gluon.Trainer(trained, optimizer)
        else:
            self.gluon_trainer = gluon.Trainer(trained, self.optimizer, self.optimizer_params)
        if self.seed is None:  # drawn from MXNet's generator; fit's per-epoch seeds derive from it
            self.seed = int(nd.random.randint(0, 2**31 - 1, shape=(1,), ctx=mx.cpu()).asscalar())
        # Host draws are the faster on the CPU; elsewhere the device draws its own noise.
        generator = "numpy" if self.ctx.device_type == "cpu" else "mxnet"
        self.noise = GaussianNoise(self.posterior.shapes, self.ctx, dtype=self.posterior.dtype,
                                   seed=self.seed, generator=generator)
        self.finite_guard = FiniteGuard(trained.values(), self.fused, self.ctx)
        self.draws = StepDraws(self._sample, self.forward, self.estimators.training(), self.net,
                               self.posterior.targets, self.num_samples, self.estimator,
                               self.batch_draws_request, self.hybridize)
        self.draws_path, self.draws_reason = self.draws.path, self.draws.reason
        self.set_mean()

    def _sample(self, num_draws=None):
        """Steps 1-2 for every weight tensor: eps ~ N(0, I), w = mu + softplus(rho) * eps.

        Returns the sample w and what BBBLoss needs for the complexity of Eq. (8): the fused
        operator's summed complexity (or its closed-form KL), or (weights, sigmas, epsilons);
        with ``num_draws`` K, K lists of w and [the draws' summed complexity] or K such tuples.
        """
        if self.fused:
            mus = [mu.data() for mu in self.posterior.mus]
            rhos = [rho.data() for rho in self.posterior.rhos]
            # eps stays inside the operator, kept for the backward pass while one is recorded
            weights, complexity, _ = variational_sample(
                mus, rhos, self.loss.prior, return_eps=False, kl=self.loss.kl,
                keep_eps=autograd.is_recording(), num_draws=num_draws)
            return weights, ([complexity] if num_draws else (complexity,))
        if num_draws:
            return tuple(map(list, zip(*[self._sample() for _ in range(num_draws)])))
        epsilons = self.noise.sample()
        outputs = self.posterior(*epsilons)
        weights, sigmas = outputs[:len(epsilons)], outputs[len(epsilons):]
        return weights, (weights, sigmas, epsilons)

    def draw_network(self) -> None:
        """Put one sample w ~ q(w | theta) into the network, from the stream training draws
        from (MXNet's generator on the fused path, :attr:`noise` on the pure-MXNet path)."""
        if self.fused:
            assign_arrays(self.posterior.targets, self._sample()[0])
        else:
            self.posterior.set_sample(self.noise.sample())

    def forward(self, data, forward=None):
        """``forward(data)`` (default: the network), turning MXNet's shape errors into a
        ValueError that names the input."""
        try:
            return (forward or self.net)(data)
        except mx.base.MXNetError as error:
            first_line = str(error).strip().splitlines()[0]
            raise ValueError(
                f"input of shape {tuple(data.shape)} does not fit the network: {first_line}"
            ) from None

    def _check_labels(self, data, label):
        """One synchronising check on a batch: finite, in-range labels of the right length."""
        if label.shape[0] != data.shape[0]:
            raise ValueError(f"{data.shape[0]} inputs but {label.shape[0]} labels in a batch")
        if self.loss.likelihood != "softmax":
            return
        pred = self.forward(data)
        self.num_outputs = pred.shape[-1]
        values = label.asnumpy()
        bad = (values < 0) | (values >= self.num_outputs) | (values != np.round(values))
        if bad.any():
            raise ValueError(
                f"labels must be class indices in [0, {self.num_outputs}) for a network with "
                f"{self.num_outputs} outputs; got {values[bad][:5].tolist()}"
            )

    # ------------------------------------------------------------------ training
    def step(self, data: nd.NDArray, label: nd.NDArray,
             kl_weight: Union[float, nd.NDArray]) -> tuple:
        """One Bayes-by-Backprop update on a minibatch (section 3.2 of the paper).

        Parameters
        ----------
        data : NDArray, (batch_size, ...) the network's input
        label : NDArray, (batch_size,) class indices, or targets for regression
        kl_weight : float or NDArray of shape (1,)
            pi_i, the weight of the complexity cost for this minibatch.

        Returns
        -------
        cost, nll, complexity : NDArray, shape (1,) each, averaged over the weight samples
        pred : NDArray, (batch_size, num_outputs) the network output for the last weight sample
        finite : NDArray, shape (1,): 1 if the update was applied, 0 if it was skipped because
            the cost or a gradient was not finite (see :class:`~gluon_bbb.fused.FiniteGuard`)
        """
        self.prepare(data)
        if not isinstance(kl_weight, nd.NDArray):
            kl_weight = self._kl_weight_array(kl_weight)
        with autograd.record():
            outputs, complexity_inputs = self.draws(data)   # 1-4. K samples w, put in, forward
            cost, nll, complexity, pred = mean_cost(       # 5. Eq. (8), averaged over the draws
                self.loss, outputs, label, kl_weight, complexity_inputs)
        cost.backward()                                               # 6. d cost / d(mu, rho)
        finite = self.finite_guard(cost)                              # NaN/inf: no update
        self.gluon_trainer.step(1)                                    # 7. update mu and rho
        return cost, nll, complexity, pred, finite

    def reseed(self, seed: int) -> None:
        """Restart the weight noise from ``seed`` on both paths: MXNet's generator on the
        trainer's context (the fused operator's) and :attr:`noise` (the pure-MXNet path's).
        :meth:`fit` calls it with a seed derived from (seed, epoch) before every epoch."""
        if self.posterior is None:
            raise RuntimeError("the trainer has no noise to reseed before it has seen data")
        mx.random.seed(int(seed), ctx=self.ctx)
        self.noise.reseed(int(seed))

    def _kl_weight_array(self, kl_weight):
        """A float weight as a (1,) array; the last one is kept, so a caller that passes the
        same float every step (a bandit, a fixed 1/M) copies it to the device once."""
        key = float(kl_weight)
        if self._kl_weight_cache is None or self._kl_weight_cache[0] != key:
            array = nd.array([key], ctx=self.ctx, dtype=self.posterior.dtype)
            self._kl_weight_cache = (key, array)
        return self._kl_weight_cache[1]

    def fit(self, train_data: Iterable, num_epochs: int, eval_data: Optional[Iterable] = None,
            checkpoint_path: Optional[str] = None, progress: bool = True,
            epoch_callback: Optional[Callable] = None,
            learning_rate_schedule: Optional[Callable[[int], float]] = None,
            eval_label: str = "test") -> List[dict]:
        """Train until ``num_epochs`` epochs are complete (continuing from ``self.epoch``).

        Parameters
        ----------
        train_data : iterable of (data, label) NDArray batches with ``len()``
            For example a :class:`gluon_bbb.data.ArrayLoader` or a gluon DataLoader.
        num_epochs : int
            Total number of epochs; a resumed trainer runs only the missing ones.
        eval_data : iterable of batches, optional
            Test error of the posterior-mean network after every epoch.
        checkpoint_path : str, optional
            Written atomically after every epoch.
        progress : bool
            Show a progress bar over each epoch's batches (ipywidgets' in a Jupyter kernel,
            text on stderr elsewhere; :func:`gluon_bbb.epochs.progress_bar`) and, in a Jupyter
            kernel, print each epoch's line (logged at INFO in any case) to stdout.
        epoch_callback : callable, optional
            Called as ``epoch_callback(trainer, record)`` after each epoch's record is added
            to the history and its checkpoint is written (e.g. to keep the best epoch).
        learning_rate_schedule : callable, optional
            ``learning_rate_schedule(epoch) -> float``, the optimizer's learning rate for the
            epoch numbered ``epoch`` (from 0), set before it starts. A function of the epoch
            alone, so a resumed run follows the same schedule as an uninterrupted one.
        eval_label : str
            What ``eval_data`` is, for the per-epoch log line (e.g. 'validation'); the
            history's key stays 'test_error'.

        Returns
        -------
        list of dict, the history (also in ``self.history``).
        """
        num_batches = len(train_data)
        if num_batches < 1:
            raise ValueError("train_data yields no batches")
        first_data, first_label = next(iter(train_data))
        first_data = first_data.as_in_context(self.ctx)
        if self.posterior is not None:
            first_data = first_data.astype(self.posterior.dtype, copy=False)
        self.prepare(first_data)
        self._check_labels(first_data, first_label.as_in_context(self.ctx))
        dtype = self.posterior.dtype
        pis = nd.array(self.kl_scale * kl_weights(self.kl_weighting, num_batches), ctx=self.ctx,
                       dtype=dtype)
        for epoch in range(self.epoch, int(num_epochs)):
            start = time.time()
            if learning_rate_schedule is not None:
                self.gluon_trainer.set_learning_rate(checked_learning_rate(learning_rate_schedule(epoch), epoch))
            self.reseed(epoch_seed(self.seed, epoch))
            totals = EpochTotals(self.loss.likelihood == "softmax", self.num_outputs, self.ctx, dtype)
            batches = progress_bar(train_data, progress, total=num_batches, leave=False,
                                   desc=f"epoch {epoch + 1}/{num_epochs}")
            for i, (data, label) in enumerate(batches):
                data = data.as_in_context(self.ctx).astype(dtype, copy=False)
                label = label.as_in_context(self.ctx).astype(dtype, copy=False)
                pi = pis[min(i, num_batches - 1):min(i, num_batches - 1) + 1]
                totals.add(label, pi, *self.step(data, label, pi))
            record = totals.record(epoch + 1, start)  # the epoch's one host sync
            if self.loss.prior.learnable:
                record["prior"] = self.loss.prior.values()
            record["posterior"] = self.posterior.width_summary()
            self.set_mean()
            if eval_data is not None and self.loss.likelihood == "softmax":
                record["test_error"] = self.evaluate(eval_data)
            self.history.append(record)
            self.epoch = epoch + 1
            if checkpoint_path is not None:
                self.save(checkpoint_path)
            line = epoch_line(record, num_epochs, eval_label)
            logger.info("%s", line)
            print_in_notebook(line, progress)
            if epoch_callback is not None:
                epoch_callback(self, record)
        self.set_mean()
        return self.history

    # ------------------------------------------------------------------ prediction
    def set_mean(self) -> None:
        """Put the posterior means mu into the network: it becomes a deterministic net.

        After this, ``trainer.net`` is an ordinary network holding copies of mu, so
        ``trainer.net.save_parameters(path)`` writes a plain Gluon parameter file.
        """
        if self.posterior is not None:
            self.posterior.set_mean()

    def predict_proba(self, data: Iterable, num_samples: int = 0,
                      sampling: str = "weights") -> List[nd.NDArray]:
        """Class probabilities for one batch of inputs.

        Parameters
        ----------
        data : NDArray, (batch_size, ...)
        num_samples : int
            0: the posterior-mean network. n >= 1: the average of the softmax outputs of n
            sampled networks (a Monte Carlo estimate of the predictive distribution).
        sampling : {'weights', 'local'}
            How the n >= 1 samples are drawn: every weight tensor (default), or the first
            Dense layer by the local reparameterisation trick; see
            :mod:`gluon_bbb.predictive`, which does the sampling.

        Returns
        -------
        NDArray, (batch_size, num_classes)

        Raises
        ------
        ValueError
            ``num_samples`` < 0, an unknown ``sampling``, or ``sampling='local'`` for a
            network whose first block is not a ``gluon.nn.Dense``.
        """
        return predictive.predict_proba(self, [data.as_in_context(self.ctx)], num_samples,
                                        sampling)[0]

    def evaluate(self, data: Iterable, num_samples: int = 0, sampling: str = "weights") -> float:
        """Classification error rate on a data set.

        Parameters
        ----------
        data : iterable of (data, label) batches
        num_samples : int
            0 for the posterior-mean network, n for the average of n sampled networks.
        sampling : {'weights', 'local'}
            See :meth:`predict_proba`.

        Returns
        -------
        float, the fraction of misclassified examples.
        """
        return predictive.evaluate(self, data, num_samples, sampling)

    # ------------------------------------------------------------------ checkpoints
    def save(self, path: str, extra: Optional[dict] = None) -> None:
        """Atomically write mu, rho, the optimizer state, the settings and the history to a
        checkpoint file; see :func:`gluon_bbb.io.persistence.save_trainer`. ``extra`` (JSON)
        is stored alongside, and :meth:`load` returns it under the key 'extra'."""
        persistence.save_trainer(self, path, extra=extra)

    def load(self, path: str, optimizer: bool = True) -> dict:
        """Restore a checkpoint written by :meth:`save` into this trainer.

        The network must have the same architecture; its shapes must be known (initialise it
        and run one forward pass, or build the trainer from a net with known shapes). The
        whole file is read and checked before the trainer changes: a bad file raises a
        :class:`~gluon_bbb.io.checkpoint.CheckpointError` (a ValueError) naming the file and
        the problem, and leaves the trainer as it was. Loading never unpickles anything.
        See :func:`gluon_bbb.io.persistence.load_trainer`.

        Parameters
        ----------
        path : str
        optimizer : bool
            Also restore the optimizer state, to continue training (default). False only
            restores the network, its prior, epoch and history, and never opens the
            optimizer entry (for evaluating, pruning, plotting).

        Returns
        -------
        dict, the checkpoint's metadata.
        """
        return persistence.load_trainer(self, path, optimizer=optimizer)

