"""Runners: one object per configuration that builds its network and trainer, trains it
resumably, saves and loads its run folder's checkpoints and evaluates (a
:class:`~gluon_bbb.BBBTrainer` for Bayes by Backprop, an ordinary network trained by
:func:`gluon_bbb.baselines.run_epochs` for the baselines).
"""
import logging
import os

import mxnet as mx
import numpy as np
from mxnet import gluon, nd

from .. import data, models
from ..baselines import classification_cost, evaluate_deterministic, run_epochs
from ..io.checkpoint import CheckpointError, checked_field
from ..io.paramfile import load_parameter_file, save_parameter_file, structural_parameters
from ..io.persistence import load_plain_network, save_plain_network
from ..loss import BBBLoss
from ..trainer import BBBTrainer
from .configs import INPUT_SIZE, learning_rate_schedule, make_prior, run_kind
from .runfolder import (FILES, RESULT, best_of, checkpoint_metadata, copy_atomically, is_best,
                        is_record, read_result)

__all__ = ["loaders_for", "make_network", "make_bbb_trainer", "make_runner"]

logger = logging.getLogger(__name__)


def loaders_for(config, data_dir, ctx):
    """The train, validation and test loaders of a configuration's data settings."""
    return data.get_loaders(config["dataset"], batch_size=config["batch_size"], data_dir=data_dir,
                            preprocessing=config["preprocessing"],
                            num_validation=config["num_validation"], subset=config["subset"],
                            ctx=ctx, seed=config["seed"])


def make_network(config, dropout=0.0):
    """The uninitialised network of a configuration: ``models.lenet()`` for
    ``network='lenet'``, else ``models.mlp(hidden)`` (runs written before 'network' was a
    hyperparameter are MLPs)."""
    if config.get("network", "mlp") == "lenet":
        return models.lenet(dropout=dropout)
    return models.mlp(config["hidden"], dropout=dropout)


def make_bbb_trainer(config, ctx, estimator=None):
    """The one factory of network, prior, loss and :class:`~gluon_bbb.BBBTrainer` for a
    Bayes-by-Backprop configuration, of ``reproduce`` or of ``train`` (the same keys:
    ``hidden``, the prior's, ``optimizer``, ``lr``, ``num_samples``, ``kl_weighting``,
    ``kl_scale``, ``rho_init`` (a number or a uniform range), ``mu_init``, ``seed``).

    The MLP is initialised (``mx.init.Xavier()`` from MXNet's generator: seed it first) and
    run once on a zero batch, so that its shapes are known and a checkpoint can be loaded.
    mu starts at the MLP's values (``mu_init='net'``) or uniformly in [-a, a] (``mu_init=a``).
    ``estimator`` (:mod:`gluon_bbb.estimators`) replaces the configuration's, which is
    'weights' for runs written before it was a hyperparameter.
    """
    prior = make_prior(config)
    net = make_network(config)
    net.initialize(mx.init.Xavier(), ctx=ctx)
    net(nd.zeros((1, INPUT_SIZE), ctx=ctx))
    rho_init, mu_init = config["rho_init"], config.get("mu_init", "net")
    return BBBTrainer(net, BBBLoss(prior), optimizer=config["optimizer"],
                      optimizer_params={"learning_rate": config["lr"]},
                      num_samples=config["num_samples"], kl_weighting=config["kl_weighting"],
                      kl_scale=config.get("kl_scale", 1.0), ctx=ctx,
                      rho_init=tuple(rho_init) if isinstance(rho_init, list) else rho_init,
                      mu_init=mu_init if mu_init == "net" else mx.init.Uniform(mu_init),
                      seed=config["seed"],
                      estimator=estimator or config.get("estimator", "weights"))


class _BBBRun:
    """A :class:`BBBTrainer` for a configuration, its checkpoints and its best epoch."""

    kind = "bbb"

    def __init__(self, config, ctx):
        self.config, self.ctx = config, ctx
        mx.random.seed(config["seed"])
        np.random.seed(config["seed"])
        self.trainer = make_bbb_trainer(config, ctx)

    @property
    def epoch(self):
        return self.trainer.epoch

    @property
    def history(self):
        return self.trainer.history

    def load(self, path):
        self.trainer.load(path)

    def load_best(self, run_dir):
        self.trainer.load(os.path.join(run_dir, FILES["bbb"]["best"]), optimizer=False)
        return self.trainer.epoch

    def restore_best(self, run_dir, best):
        """After loading the last checkpoint: make ``best.bbb`` hold the best epoch."""
        checkpoint = os.path.join(run_dir, FILES["bbb"]["checkpoint"])
        best_path = os.path.join(run_dir, FILES["bbb"]["best"])
        if best["epoch"] == self.epoch:  # a crash may have come between the two writes
            copy_atomically(checkpoint, best_path)
        elif checkpoint_metadata(best_path, "bbb").get("epoch") != best["epoch"]:
            raise ValueError(f"{best_path} does not hold epoch {best['epoch']}, the best on "
                             "validation in the history: the run folder was modified")

    def fit(self, train, validation, epochs, run_dir, progress, epoch_callback=None):
        files = FILES["bbb"]
        best = best_of(self.history)

        def on_epoch(trainer, record):
            nonlocal best
            if best is None or record["test_error"] < best["validation_error"]:
                copy_atomically(os.path.join(run_dir, files["checkpoint"]),
                                 os.path.join(run_dir, files["best"]))
                best = {"epoch": record["epoch"], "validation_error": record["test_error"]}
            logger.info("epoch %d: validation error %.2f%%, best %.2f%% at epoch %d; %.1f s",
                        record["epoch"], 100 * record["test_error"],
                        100 * best["validation_error"], best["epoch"], record["seconds"])
            if epoch_callback is not None:
                epoch_callback(record)

        shuffled = data.EpochShuffled(train, self.config["seed"], lambda: self.trainer.epoch)
        self.trainer.fit(shuffled, epochs, eval_data=validation,
                         checkpoint_path=os.path.join(run_dir, files["checkpoint"]),
                         progress=progress, epoch_callback=on_epoch,
                         learning_rate_schedule=learning_rate_schedule(self.config),
                         eval_label="validation")

    def evaluate(self, loader, num_samples=0):
        return self.trainer.evaluate(loader, num_samples=num_samples)

    @property
    def num_weights(self):
        return self.trainer.posterior.num_weights

    def fused(self):
        return {"used": bool(self.trainer.fused), "reason": self.trainer.fused_reason}


class _DeterministicRun:
    """An ordinary network (with or without dropout) trained by SGD (with ``momentum`` and
    ``lr_decay`` where the configuration has them), resumable like a BBBTrainer."""

    kind = "deterministic"

    def __init__(self, config, ctx):
        self.config, self.ctx = config, ctx
        self.seed = config["seed"]
        mx.random.seed(self.seed)
        np.random.seed(self.seed)
        self.net = make_network(config, dropout=config["dropout"])
        self.net.initialize(mx.init.Xavier(), ctx=ctx)
        self.net.hybridize()
        self.net(nd.zeros((1, INPUT_SIZE), ctx=ctx))
        optimizer_params = {"learning_rate": config["lr"]}
        if config.get("momentum", 0.0):  # runs written before momentum existed had none
            optimizer_params["momentum"] = config["momentum"]
        self.trainer = gluon.Trainer(self.net.collect_params(), config["optimizer"],
                                     optimizer_params)
        self.loss = gluon.loss.SoftmaxCrossEntropyLoss()
        self.loss.hybridize()
        self.epoch, self.history, self.best = 0, [], None

    def _params(self):
        return structural_parameters(self.net)  # the names save_parameters writes

    def save(self, path):
        metadata = {"kind": "deterministic", "epoch": self.epoch, "history": self.history,
                    "best": self.best, "seed": self.seed,
                    "shapes": {name: list(p.shape) for name, p in self._params().items()}}
        save_plain_network(path, self.net, self.trainer, metadata)

    def load(self, path):
        def check(metadata):
            if metadata.get("kind") != "deterministic":
                raise CheckpointError(f"{path} is not a checkpoint of a deterministic baseline")
            epoch = checked_field(metadata, "epoch", int, path)
            history = checked_field(metadata, "history", list, path)
            checked_field(metadata, "seed", int, path)
            best = checked_field(metadata, "best", dict, path) if epoch else metadata.get("best")
            if epoch < 0 or len(history) != epoch or not all(is_record(r) for r in history) or (
                    epoch and not is_best(best)):
                raise CheckpointError(f"{path}: its epoch, history or best epoch is malformed")

        metadata = load_plain_network(path, self.net, self.trainer, check_metadata=check)
        self.epoch, self.history = metadata["epoch"], list(metadata["history"])
        self.best = metadata.get("best")

    def load_best(self, run_dir):
        """Load ``best.params``; returns its epoch, from the per-epoch checkpoint or, in a
        committed folder that keeps only the best parameters, from ``result.json``."""
        files = FILES["deterministic"]
        load_parameter_file(self.net, os.path.join(run_dir, files["best"]), ctx=self.ctx)
        metadata = checkpoint_metadata(os.path.join(run_dir, files["checkpoint"]), "deterministic")
        if is_best(metadata.get("best")):
            return int(metadata["best"]["epoch"])
        if os.path.isfile(os.path.join(run_dir, RESULT)):
            return checked_field(read_result(run_dir), "best_epoch", int,
                                 os.path.join(run_dir, RESULT))
        raise FileNotFoundError(f"{run_dir} has {files['best']} but neither {files['checkpoint']} "
                                f"nor {RESULT}, so the epoch it holds is unknown")

    def restore_best(self, run_dir, best):
        if best["epoch"] == self.epoch:  # a crash may have come between the two writes
            self._save_best(run_dir)

    def _save_best(self, run_dir):
        save_parameter_file(self.net, os.path.join(run_dir, FILES["deterministic"]["best"]))

    def fit(self, train, validation, epochs, run_dir, progress, epoch_callback=None):
        files = FILES["deterministic"]
        shuffled = data.EpochShuffled(train, self.seed, lambda: self.epoch)
        for record in run_epochs(self.net, self.trainer, shuffled, epochs,
                                 classification_cost(self.loss), first_epoch=self.epoch,
                                 eval_data=validation, ctx=self.ctx, progress=progress,
                                 seed=self.seed,
                                 learning_rate_schedule=learning_rate_schedule(self.config)):
            self.history.append(record)
            self.epoch = record["epoch"]
            improved = self.best is None or record["test_error"] < self.best["validation_error"]
            if improved:
                self.best = {"epoch": self.epoch, "validation_error": record["test_error"]}
            self.save(os.path.join(run_dir, files["checkpoint"]))
            if improved:
                self._save_best(run_dir)
            logger.info("epoch %d: validation error %.2f%%, best %.2f%% at epoch %d; %.1f s",
                        record["epoch"], 100 * record["test_error"],
                        100 * self.best["validation_error"], self.best["epoch"],
                        record["seconds"])
            if epoch_callback is not None:
                epoch_callback(record)

    def evaluate(self, loader, num_samples=0):
        del num_samples  # a deterministic network has no Monte Carlo average
        return evaluate_deterministic(self.net, loader, ctx=self.ctx)

    @property
    def num_weights(self):
        return int(sum(np.prod(p.shape) for p in self.net.collect_params().values()))

    def fused(self):
        return None


def make_runner(config, ctx):
    """The runner of a configuration: it builds the network and trainer, trains, saves and
    loads its run folder's checkpoints, and evaluates (``load_best``, ``evaluate``)."""
    return _BBBRun(config, ctx) if run_kind(config) == "bbb" else _DeterministicRun(config, ctx)
