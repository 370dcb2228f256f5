"""Saving and restoring a :class:`~gluon_bbb.BBBTrainer` (what its checkpoint holds), and an
ordinary network with its ``gluon.Trainer`` (:func:`save_plain_network`).

The file format, and every check made while reading it, is :mod:`gluon_bbb.io.checkpoint`'s;
the optimizer state is :mod:`gluon_bbb.io.optimizer_state`'s. A checkpoint holds:

* arrays: mu and rho of every weight tensor, the network's other non-trainable arrays
  (e.g. BatchNorm running statistics) as ``'net:<name>'``, a learnable prior's
  parameters and a per-weight prior's means and standard deviations as ``'prior:<name>'``;
* the optimizer state (Adam and SGD; others start afresh);
* metadata: epoch, history, prior, likelihood, settings, seed, and the state of the
  pure-MXNet path's NumPy noise generator (so Monte Carlo predictions after loading continue
  the saved stream).
"""
import logging

import mxnet as mx
from mxnet import nd

from . import optimizer_state
from .._mxcompat import structural_parameters
from .checkpoint import (CheckpointError, checked_field, read_checkpoint, read_metadata,
                         write_checkpoint)
from ..posterior import GaussianNoise, trainable_parameters
from ..priors import prior_from_config

__all__ = ["save_trainer", "load_trainer", "checkpoint_arrays", "save_plain_network",
           "load_plain_network"]

logger = logging.getLogger(__name__)


def checkpoint_arrays(trainer):
    """name -> NDArray of the arrays a checkpoint of ``trainer`` stores."""
    posterior = trainer.posterior
    arrays = {p.name[len(posterior.prefix):]: p.data() for p in trainer.variational_params}
    covered = {id(param) for _, param in trainable_parameters(trainer.net)}
    for name, param in trainer.net.collect_params().items():
        if id(param) not in covered:
            arrays["net:" + name] = param.data()
    for name, param in _prior_arrays(trainer.loss.prior).items():
        arrays["prior:" + name] = param.data()
    return arrays


def _prior_arrays(prior):
    """name -> Parameter: a learnable prior's parameters and a per-weight prior's arrays."""
    return {**prior.parameters(), **prior.constants()}


def save_trainer(trainer, path, extra=None):
    """Atomically write ``trainer``'s checkpoint to ``path`` (no pickle), with ``extra``
    (JSON, e.g. a caller's own progress) under the metadata key 'extra'."""
    if trainer.posterior is None:
        raise RuntimeError("nothing to save: the trainer has not seen any data yet")
    metadata = {
        "kind": "bbb",
        "epoch": trainer.epoch,
        "history": trainer.history,
        "prior": trainer.loss.prior.config(),
        "likelihood": trainer.loss.likelihood,
        "noise_sigma": trainer.loss.noise_sigma,
        "num_samples": trainer.num_samples,
        "kl_weighting": trainer.kl_weighting,
        "kl_scale": trainer.kl_scale,
        "estimator": trainer.estimator,
        "optimizer_params": {k: v for k, v in trainer.optimizer_params.items()
                             if isinstance(v, (int, float, str, bool))},
        "parameter_names": trainer.posterior.names,
        "shapes": [list(s) for s in trainer.posterior.shapes],
        "seed": trainer.seed,
        "noise_state": trainer.noise.get_state(),
    }
    if extra is not None:
        metadata["extra"] = extra
    write_checkpoint(path, checkpoint_arrays(trainer), metadata,
                     optimizer_state.capture(trainer.gluon_trainer))


def load_trainer(trainer, path, optimizer=True):
    """Restore a checkpoint into ``trainer``; see :meth:`gluon_bbb.BBBTrainer.load`.

    Everything is read and checked before the trainer changes.
    """
    if trainer.posterior is None:
        raise RuntimeError(
            "the network's parameter shapes are unknown: run one forward pass through it "
            "before BBBTrainer(...) and load()"
        )
    arrays = checkpoint_arrays(trainer)
    _check_prior_kind(trainer.loss.prior, path)
    stored = read_checkpoint(path, expected={name: a.shape for name, a in arrays.items()},
                             with_optimizer=optimizer)
    metadata = stored.metadata
    epoch = checked_field(metadata, "epoch", int, path)
    history = checked_field(metadata, "history", list, path)
    if epoch < 0 or not all(isinstance(record, dict) for record in history):
        raise CheckpointError(f"{path}: epoch {epoch} or its history is malformed")
    seed = checked_field(metadata, "seed", int, path, optional=True, default=trainer.seed)
    noise_state = metadata.get("noise_state")
    if noise_state is not None:
        try:  # checked on a spare generator before the trainer changes
            GaussianNoise([], mx.cpu(), seed=0).set_state(noise_state)
        except ValueError as error:
            raise CheckpointError(f"{path}: noise_state: {error}") from None
    try:
        prior = prior_from_config(checked_field(metadata, "prior", dict, path))
    except (TypeError, ValueError) as error:
        raise CheckpointError(f"{path}: the stored prior is not valid ({error})") from None
    values = {name: nd.array(stored.arrays[name], ctx=trainer.ctx, dtype=array.dtype)
              for name, array in arrays.items()}
    if optimizer:
        _restore_optimizer(trainer, path, stored)  # checks everything before it changes anything
    for name, param in trainer.net.collect_params().items():
        if "net:" + name in values:
            param.set_data(values["net:" + name])
    posterior = trainer.posterior
    for param in trainer.variational_params:
        param.set_data(values[param.name[len(posterior.prefix):]])
    for name, param in _prior_arrays(trainer.loss.prior).items():
        param.set_data(values["prior:" + name])  # a learnable prior continues as trained
    replaceable = not (trainer.loss.prior.learnable or trainer.loss.prior.per_weight)
    if replaceable and prior != trainer.loss.prior:
        logger.warning("replacing the loss's prior %r by the checkpoint's %r", trainer.loss.prior,
                       prior)
        trainer.loss.prior = prior
        if trainer.hybridize:
            trainer.loss.hybridize()  # drops the cached graph built with the old prior
    if noise_state is not None:
        trainer.noise.set_state(noise_state)  # MC predictions continue the saved stream
    trainer.seed = seed
    trainer.epoch = epoch
    trainer.history = list(history)
    trainer.set_mean()
    return metadata


def _check_prior_kind(prior, path):
    """A CheckpointError unless the file's prior is of ``prior``'s kind where either is
    learnable or per-weight: such a prior's parameters (arrays) are the loss's, so the loss
    must be built for them (``BBBLoss(prior_from_config(metadata['prior']))``); the arrays'
    shapes are checked with the others'."""
    metadata = read_metadata(path)
    try:
        stored = prior_from_config(checked_field(metadata, "prior", dict, path))
    except (TypeError, ValueError) as error:
        raise CheckpointError(f"{path}: the stored prior is not valid ({error})") from None
    if (prior.learnable or stored.learnable) and (
            type(stored) is not type(prior) or stored.learnable != prior.learnable):
        raise CheckpointError(
            f"{path}: its prior is {stored!r}, the loss's {prior!r}; a learnable prior must be "
            "the same kind in both: build the loss with the file's prior, "
            "prior_from_config(metadata['prior'])")
    if (prior.per_weight or stored.per_weight) and type(stored) is not type(prior):
        raise CheckpointError(
            f"{path}: its prior is {stored!r}, the loss's {prior!r}; a per-weight prior must "
            "be the same kind in both: build the loss with the file's prior, "
            "prior_from_config(metadata['prior'])")


def _restore_optimizer(trainer, path, stored):
    """The optimizer state of a checkpoint into the trainer's ``gluon.Trainer``, or a warning
    that it starts afresh."""
    if stored.optimizer is not None:
        optimizer_state.restore(trainer.gluon_trainer, *stored.optimizer, source=path)
    elif optimizer_state.family(trainer.gluon_trainer.optimizer) is None:
        logger.warning("%s: the state of optimizer %s is not stored in checkpoints; it starts "
                       "afresh", path, type(trainer.gluon_trainer.optimizer).__name__)
    elif stored.metadata.get("epoch"):
        logger.warning("%s holds no optimizer state (a slimmed checkpoint?); the optimizer "
                       "starts afresh", path)


def save_plain_network(path, net, trainer, metadata):
    """Atomically write an ordinary network (its parameters under the names
    ``save_parameters`` uses) and the optimizer state of its ``gluon.Trainer``, with
    ``metadata`` (JSON), to a checkpoint file.

    Parameters
    ----------
    path : str
    net : gluon.Block, initialised
    trainer : gluon.Trainer over ``net``'s parameters
    metadata : dict, JSON
    """
    arrays = {name: param.data() for name, param in structural_parameters(net).items()}
    write_checkpoint(path, arrays, metadata, optimizer_state.capture(trainer))


def load_plain_network(path, net, trainer, check_metadata=None, require_optimizer=False):
    """Restore a checkpoint of :func:`save_plain_network` into ``net`` and ``trainer``.

    Everything is read and checked before either changes: the arrays must be exactly the
    network's (names and shapes), ``check_metadata(metadata)`` may raise a
    :class:`~gluon_bbb.io.checkpoint.CheckpointError`, and the optimizer state must fit the
    trainer. A file without optimizer state leaves the optimizer as it is, unless
    ``require_optimizer``.

    Returns
    -------
    dict, the checkpoint's metadata.
    """
    params = structural_parameters(net)
    stored = read_checkpoint(path, expected={name: p.shape for name, p in params.items()},
                             with_optimizer=True)
    if check_metadata is not None:
        check_metadata(stored.metadata)
    if stored.optimizer is None and require_optimizer:
        raise CheckpointError(f"{path} holds no optimizer state")
    if stored.optimizer is not None:
        optimizer_state.restore(trainer, *stored.optimizer, source=path)  # checks first
    for name, param in params.items():
        param.set_data(nd.array(stored.arrays[name], ctx=param.list_ctx()[0], dtype=param.dtype))
    return stored.metadata
