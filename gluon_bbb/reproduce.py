"""Reproducible runs of the paper's MNIST experiments (Blundell et al. 2015, Table 1 and the
networks behind Table 2), with early stopping on a validation set, resuming and a report.

Protocol (section 5.1 of the paper): train on the first 50,000 MNIST training images and keep
the last 10,000 for validation; pixels are divided by 126; minibatches of 128. After every
epoch the validation error of the posterior-mean network (of the plain network for the
baselines) is measured, the epoch's checkpoint is written atomically, and when the validation
error improves on every earlier epoch the checkpoint is also kept as the best one. The
reported numbers are the test errors of the best epoch on validation: the 10,000 test images
are used by the final report only, with the posterior mean and with a Monte Carlo average of
``mc_samples`` sampled networks.

A run folder (default ``results/<name>``) holds:

``config.json``
    The configuration's hyperparameters. For a Bayes-by-Backprop configuration it also holds
    every key of a ``gluon-bbb train`` configuration, so ``gluon-bbb evaluate``, ``prune``
    (the paper's Table 2) and ``plot`` work on the folder; they use the best epoch.
``checkpoint.bbb`` / ``best.bbb`` (Bayes by Backprop)
    The last completed epoch and the best epoch on validation, :meth:`BBBTrainer.save` files.
``checkpoint.ckpt`` / ``best.params`` (baselines)
    The last completed epoch (parameters, optimizer state, epoch, history, best epoch) and
    the best epoch's parameters as an ordinary Gluon parameter file (``net.load_parameters``
    on ``models.mlp(hidden, dropout=...)``).
``sessions.json``
    One entry per invocation: the command, the machine, the seconds and epochs it ran.
``train.log``, ``result.json``
    The log, and the report (see :func:`report`).

Running the same command again continues after the last completed epoch; a resumed run
draws the same minibatch order, dropout masks and weight noise as an uninterrupted one (the
training loader is reshuffled from (seed, epoch) at the start of every epoch). A folder
holding a different configuration is refused.

Choices the paper leaves open (documented in :data:`DESCRIPTIONS`): the KL weighting is
uniform (pi_i = 1/M, the ``gluon-bbb train`` default), rho starts at -5, the Gaussian-prior
configurations use sigma = 1 (= e^0, the wide component of the default mixture), the
baselines use plain SGD at learning rate 0.1, and the dropout baselines drop hidden units with
probability 0.5 (no input dropout).

Example::

    from gluon_bbb import reproduce
    config = reproduce.get_config("bbb-mixture-400")
    result = reproduce.run(config, epochs=600, output_dir="results/bbb-mixture-400")
    print(result["test_error_mean"], result["test_error_mc"])
"""
import itertools
import logging
import math
import numbers
import os
import time

import mxnet as mx
import numpy as np
from mxnet import gluon, nd

from . import data, models, optimizer_state
from ._checks import check_int, check_positive_ints
from .baselines import classification_cost, evaluate_deterministic, run_epochs
from .checkpoint import (CheckpointError, atomic_write_bytes, checked_field, load_parameter_file,
                         read_checkpoint, read_json, read_metadata, save_parameter_file, write_json,
                         write_checkpoint)
from .context import resolve_context
from .loss import BBBLoss
from .machine import machine_info
from .priors import GaussianPrior, ScaleMixturePrior
from .runlock import RunFolderLock
from .trainer import BBBTrainer

__all__ = ["CONFIGS", "DESCRIPTIONS", "PAPER_TEST_ERROR", "PAPER_GRID", "SEARCH_KEYS",
           "EXTRA_KEYS", "learning_rate_schedule", "describe",
           "get_config", "check_hyperparameter", "check_run_dir", "checked_stored_config",
           "run_kind", "make_runner", "run", "report", "evaluate_run", "read_result",
           "results_table", "renamed_record", "grid_settings", "sample_settings",
           "parse_setting", "search", "search_table"]

logger = logging.getLogger(__name__)

CONFIG = "config.json"
SESSIONS = "sessions.json"
RESULT = "result.json"
LOG = "train.log"
SEARCH_JSON = "search.json"
SEARCH_MD = "search.md"
#: Checkpoint of the last completed epoch and of the best epoch on validation, per method.
FILES = {
    "bbb": {"checkpoint": "checkpoint.bbb", "best": "best.bbb"},
    "deterministic": {"checkpoint": "checkpoint.ckpt", "best": "best.params"},
}
INPUT_SIZE = 784
MC_SAMPLES = 10

#: The paper's MNIST protocol, shared by every configuration.
PROTOCOL = {
    "dataset": "mnist",
    "num_validation": 10000,
    "preprocessing": "paper",  # pixels / 126
    "batch_size": 128,
    "seed": 0,
    "subset": None,  # smoke runs only: first N examples of each split
}

#: Hyperparameter grid of the paper's section 5.1 for the scale-mixture prior.
PAPER_GRID = {
    "lr": [1e-3, 1e-4, 1e-5],
    "num_samples": [1, 2, 5, 10],
    "pi": [0.25, 0.5, 0.75],
    "log_sigma1": [0.0, 1.0, 2.0],  # -log sigma1
    "log_sigma2": [6.0, 7.0, 8.0],  # -log sigma2
}
#: The keys a search setting may set, in table order.
SEARCH_KEYS = tuple(PAPER_GRID)
#: Keys ``--set`` may change besides :data:`SEARCH_KEYS` (choices the paper leaves open).
EXTRA_KEYS = ("optimizer", "kl_weighting", "kl_scale", "lr_decay", "rho_init", "sigma")
#: The values the text-valued keys may take.
CHOICES = {"optimizer": ("adam", "sgd"), "kl_weighting": ("uniform", "blundell")}
#: Hyperparameters added after the first runs were written, with the value those runs used.
LATER_DEFAULTS = {"bbb": {"lr_decay": 1.0, "kl_scale": 1.0}, "deterministic": {}}

#: Test errors (%) of Table 1 of the paper for the networks these configurations train.
PAPER_TEST_ERROR = {
    "sgd-400": 1.83, "sgd-800": 1.84, "sgd-1200": 1.88,
    "dropout-400": 1.51, "dropout-800": 1.33, "dropout-1200": 1.36,
    "bbb-gaussian-400": 1.82, "bbb-gaussian-800": 1.99, "bbb-gaussian-1200": 2.04,
    "bbb-mixture-400": 1.36, "bbb-mixture-800": 1.34, "bbb-mixture-1200": 1.32,
}


def _bbb_config(units, prior):
    config = dict(PROTOCOL, method="bbb", hidden=[units, units], prior=prior, optimizer="adam",
                  lr=1e-3, lr_decay=1.0, num_samples=1, kl_weighting="uniform", kl_scale=1.0,
                  rho_init=-5.0)
    if prior == "scale-mixture":
        config.update(pi=0.5, log_sigma1=0.0, log_sigma2=6.0)
    else:
        config.update(sigma=1.0)
    return config


def _deterministic_config(units, dropout):
    return dict(PROTOCOL, method="dropout" if dropout else "sgd", hidden=[units, units],
                dropout=dropout, optimizer="sgd", lr=0.1)


#: Named configurations: name -> hyperparameters (a flat dict; see :func:`get_config`).
CONFIGS = {}
#: Named configurations: name -> one line on what it is and which choices it makes.
DESCRIPTIONS = {}
for _units in (400, 800, 1200):
    CONFIGS[f"bbb-mixture-{_units}"] = _bbb_config(_units, "scale-mixture")
    DESCRIPTIONS[f"bbb-mixture-{_units}"] = (
        f"Bayes by Backprop, 2x{_units} ReLU, scale-mixture prior pi=1/2, -log sigma1=0, "
        "-log sigma2=6; Adam lr 1e-3, 1 sample, uniform KL weights, rho_init -5")
    CONFIGS[f"bbb-gaussian-{_units}"] = _bbb_config(_units, "gaussian")
    DESCRIPTIONS[f"bbb-gaussian-{_units}"] = (
        f"Bayes by Backprop, 2x{_units} ReLU, Gaussian prior sigma=1 (-log sigma=0, the "
        "mixture's wide component); Adam lr 1e-3, 1 sample, uniform KL weights, rho_init -5")
    CONFIGS[f"sgd-{_units}"] = _deterministic_config(_units, 0.0)
    DESCRIPTIONS[f"sgd-{_units}"] = f"plain MLP 2x{_units} ReLU, SGD lr 0.1, no dropout"
    CONFIGS[f"dropout-{_units}"] = _deterministic_config(_units, 0.5)
    DESCRIPTIONS[f"dropout-{_units}"] = (
        f"MLP 2x{_units} ReLU with dropout 0.5 after each hidden layer, SGD lr 0.1")
del _units
# Fashion-MNIST, same protocol (50k/10k split of its training set); no paper figure exists.
for _name in ("bbb-mixture-400", "bbb-gaussian-400", "sgd-400", "dropout-400"):
    CONFIGS[f"fashion-{_name}"] = dict(CONFIGS[_name], dataset="fashion-mnist",
                                       reproduce=f"fashion-{_name}")
    DESCRIPTIONS[f"fashion-{_name}"] = "Fashion-MNIST: " + DESCRIPTIONS[_name]
del _name


# ---------------------------------------------------------------------------- configurations
def get_config(name, **overrides):
    """The hyperparameters of configuration ``name``, with ``overrides`` applied and checked.

    Parameters
    ----------
    name : str
        A key of :data:`CONFIGS`.
    **overrides
        Values for keys the configuration has, e.g. ``hidden=[16]`` and ``subset=256`` for a
        smoke run, ``seed=1`` for a replicate, or the search keys ``lr``, ``num_samples``,
        ``pi``, ``log_sigma1``, ``log_sigma2``. Overrides equal to the default are dropped.

    Returns
    -------
    dict
        The flat hyperparameters plus ``"reproduce"`` (the name) and ``"overrides"``.

    Raises
    ------
    ValueError
        An unknown name or key, or a value out of range.
    """
    if name not in CONFIGS:
        raise ValueError(f"unknown configuration {name!r}; choose one of {', '.join(CONFIGS)}")
    config = dict(CONFIGS[name])
    applied = {}
    for key, value in overrides.items():
        if key not in config:
            raise ValueError(f"configuration {name} has no hyperparameter {key!r}; it has "
                             f"{', '.join(sorted(config))}")
        value = check_hyperparameter(key, value)
        if value != config[key]:
            applied[key] = value
            config[key] = value
    if config["method"] == "bbb":
        make_prior(config)  # checks pi and sigma1 > sigma2
    config["reproduce"] = name
    config["overrides"] = applied
    return config


def check_hyperparameter(key, value):
    """``value`` as the type ``key`` takes, or a ValueError."""
    def integer(low):
        return check_int(key, value, minimum=low)

    def real(test, what):
        if isinstance(value, bool) or not isinstance(value, numbers.Real) or not (
                math.isfinite(value) and test(value)):
            raise ValueError(f"{key} must be {what}, got {value!r}")
        return float(value)

    if key == "hidden":
        return check_positive_ints("hidden", value)
    if key == "subset":
        return None if value is None else integer(1)
    if key in ("seed",):
        return integer(0)
    if key in ("num_samples", "batch_size"):
        return integer(1)
    if key == "num_validation":
        return integer(1)
    if key in ("lr", "sigma", "kl_scale"):
        return real(lambda v: v > 0, "a positive number")
    if key == "lr_decay":
        return real(lambda v: 0 < v <= 1, "a number in (0, 1]")
    if key == "pi":
        return real(lambda v: 0 < v < 1, "a number strictly between 0 and 1")
    if key == "dropout":
        return real(lambda v: 0 <= v < 1, "a number in [0, 1)")
    if key in ("log_sigma1", "log_sigma2", "rho_init"):
        return real(lambda v: True, "a finite number")
    if key in CHOICES:
        if value not in CHOICES[key]:
            raise ValueError(f"{key} must be one of {', '.join(CHOICES[key])}, got {value!r}")
        return value
    return value


def _changes(overrides):
    """``key=value, ...`` for a configuration's overrides, sorted; '' when there are none."""
    return ", ".join(f"{key}={value}" for key, value in sorted((overrides or {}).items()))


def describe(config):
    """One line on a configuration: its :data:`DESCRIPTIONS` entry, then the overrides."""
    changes = _changes(config.get("overrides"))
    return DESCRIPTIONS[config["reproduce"]] + (f"; changed: {changes}" if changes else "")


def make_prior(config):
    """The prior of a Bayes-by-Backprop configuration (``-log sigma`` convention)."""
    if config["prior"] == "gaussian":
        return GaussianPrior(config["sigma"])
    if not config["log_sigma2"] > config["log_sigma1"]:
        raise ValueError(f"the scale-mixture prior needs sigma2 < sigma1, i.e. log_sigma2 > "
                         f"log_sigma1 (they are -log sigma); got {config['log_sigma2']} and "
                         f"{config['log_sigma1']}")
    return ScaleMixturePrior(config["pi"], math.exp(-config["log_sigma1"]),
                             math.exp(-config["log_sigma2"]))


def run_kind(config):
    """'bbb' for a Bayes-by-Backprop configuration, 'deterministic' for a baseline."""
    return "bbb" if config["method"] == "bbb" else "deterministic"


def _hyperparameters(config):
    """The keys that identify a run: everything but bookkeeping (with :data:`LATER_DEFAULTS`
    filled in for folders written before those keys existed)."""
    bookkeeping = {"reproduce", "overrides", "epochs", "data_dir", "output_dir", "description"}
    values = dict(LATER_DEFAULTS[run_kind(config)], **config)
    return {key: value for key, value in values.items() if key not in bookkeeping}


def learning_rate_schedule(config):
    """The learning rate of each epoch (from 0): ``lr * lr_decay ** epoch``.

    A function of the epoch alone, so resumed runs follow it exactly; None when constant.
    """
    decay = config.get("lr_decay", 1.0)
    if decay == 1.0:
        return None
    base = config["lr"]
    return lambda epoch: base * decay ** epoch


def read_run_config(run_dir):
    """The ``config.json`` of a reproduce run folder, or a ValueError/FileNotFoundError."""
    path = os.path.join(run_dir, CONFIG)
    if not os.path.isfile(path):
        raise FileNotFoundError(f"{path} not found: is {run_dir} a folder written by "
                                "'gluon-bbb reproduce'?")
    config = read_json(path, "a run configuration")
    if "reproduce" not in config:
        raise ValueError(f"{run_dir} was not written by 'gluon-bbb reproduce' (its config.json "
                         "names no reproduce configuration)")
    return checked_stored_config(config, path)


def checked_stored_config(config, source):
    """A configuration read from a run folder, with every hyperparameter checked as
    :func:`get_config` checks it, or a CheckpointError naming ``source``."""
    name = config.get("reproduce")
    if name not in CONFIGS:
        raise CheckpointError(f"{source}: {name!r:.60} is not a configuration; choose one of "
                              f"{', '.join(CONFIGS)}")
    checked = dict(config)
    for key, default in CONFIGS[name].items():
        if key not in config:
            if key in LATER_DEFAULTS[run_kind(CONFIGS[name])]:
                continue  # written before the key existed
            raise CheckpointError(f"{source} lacks the hyperparameter {key!r}")
        try:
            checked[key] = check_hyperparameter(key, config[key])
        except ValueError as error:
            raise CheckpointError(f"{source}: {error}") from None
        if key in ("method", "dataset", "preprocessing", "prior") and config[key] != default:
            raise CheckpointError(f"{source}: {key} is {config[key]!r:.60}, configuration {name} "
                                  f"has {default!r}")
    for key in ("overrides",):
        checked_field(config, key, dict, source, optional=True)
    checked_field(config, "epochs", int, source, optional=True)
    data_dir = config.get("data_dir")
    if data_dir is not None and not isinstance(data_dir, str):
        raise CheckpointError(f"{source}: data_dir must be a folder name or null")
    if checked["method"] == "bbb":
        try:
            make_prior(checked)
        except (ValueError, OverflowError) as error:
            raise CheckpointError(f"{source}: {error}") from None
    return checked


def check_run_dir(run_dir, config):
    """Refuse (ValueError) a folder that holds a run of another configuration.

    Returns the stored configuration, or None for a folder without a run.
    """
    path = os.path.join(run_dir, CONFIG)
    if not os.path.exists(path):
        leftovers = [name for files in FILES.values() for name in files.values()
                     if os.path.exists(os.path.join(run_dir, name))]
        if leftovers:
            raise ValueError(f"{run_dir} holds {leftovers[0]} but no {CONFIG}: it is not a "
                             "reproduce run folder; choose another --output-dir")
        return None
    stored = read_json(path, "a run configuration")
    if "reproduce" not in stored:
        raise ValueError(f"{run_dir} holds a run that 'gluon-bbb reproduce' did not write; "
                         "choose another --output-dir")
    stored = checked_stored_config(stored, path)
    if stored["reproduce"] != config["reproduce"]:
        raise ValueError(f"{run_dir} holds a run of configuration {stored['reproduce']!r}, not "
                         f"{config['reproduce']!r}; choose another --output-dir")
    mine, theirs = _hyperparameters(config), _hyperparameters(stored)
    changed = sorted(key for key in set(mine) | set(theirs) if mine.get(key) != theirs.get(key))
    if changed:
        differences = ", ".join(f"{key}: {theirs.get(key)!r} there, {mine.get(key)!r} now"
                                for key in changed)
        raise ValueError(f"{run_dir} holds a run of {stored['reproduce']} with other "
                         f"hyperparameters ({differences}); choose another --output-dir")
    return stored


# ---------------------------------------------------------------------------- data
def _loaders(config, data_dir, ctx):
    return data.get_loaders(config["dataset"], batch_size=config["batch_size"], data_dir=data_dir,
                            preprocessing=config["preprocessing"],
                            num_validation=config["num_validation"], subset=config["subset"],
                            ctx=ctx, seed=config["seed"])


# ---------------------------------------------------------------------------- runners
class _BBBRun:
    """A :class:`BBBTrainer` for a configuration, its checkpoints and its best epoch."""

    kind = "bbb"

    def __init__(self, config, ctx):
        self.config, self.ctx = config, ctx
        mx.random.seed(config["seed"])
        np.random.seed(config["seed"])
        net = models.mlp(config["hidden"])
        net.initialize(mx.init.Xavier(), ctx=ctx)
        net(nd.zeros((1, INPUT_SIZE), ctx=ctx))
        self.trainer = BBBTrainer(net, BBBLoss(make_prior(config)), optimizer=config["optimizer"],
                                  optimizer_params={"learning_rate": config["lr"]},
                                  num_samples=config["num_samples"],
                                  kl_weighting=config["kl_weighting"],
                                  kl_scale=config.get("kl_scale", 1.0), ctx=ctx,
                                  rho_init=config["rho_init"], seed=config["seed"])

    @property
    def epoch(self):
        return self.trainer.epoch

    @property
    def history(self):
        return self.trainer.history

    def load(self, path, trust_pickled_state=False):
        self.trainer.load(path, trust_pickled_state=trust_pickled_state)

    def load_best(self, run_dir):
        self.trainer.load(os.path.join(run_dir, FILES["bbb"]["best"]), optimizer=False)
        return self.trainer.epoch

    def restore_best(self, run_dir, best):
        """After loading the last checkpoint: make ``best.bbb`` hold the best epoch."""
        checkpoint = os.path.join(run_dir, FILES["bbb"]["checkpoint"])
        best_path = os.path.join(run_dir, FILES["bbb"]["best"])
        if best["epoch"] == self.epoch:  # a crash may have come between the two writes
            _copy_atomically(checkpoint, best_path)
        elif _checkpoint_metadata(best_path, "bbb").get("epoch") != best["epoch"]:
            raise ValueError(f"{best_path} does not hold epoch {best['epoch']}, the best on "
                             "validation in the history: the run folder was modified")

    def fit(self, train, validation, epochs, run_dir, progress):
        files = FILES["bbb"]
        best = _best_of(self.history)

        def on_epoch(trainer, record):
            nonlocal best
            if best is None or record["test_error"] < best["validation_error"]:
                _copy_atomically(os.path.join(run_dir, files["checkpoint"]),
                                 os.path.join(run_dir, files["best"]))
                best = {"epoch": record["epoch"], "validation_error": record["test_error"]}
            logger.info("epoch %d: validation error %.2f%%, best %.2f%% at epoch %d; %.1f s",
                        record["epoch"], 100 * record["test_error"],
                        100 * best["validation_error"], best["epoch"], record["seconds"])

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
    """An ordinary MLP (with or without dropout) trained by SGD, resumable like a BBBTrainer."""

    kind = "deterministic"

    def __init__(self, config, ctx):
        self.config, self.ctx = config, ctx
        self.seed = config["seed"]
        mx.random.seed(self.seed)
        np.random.seed(self.seed)
        self.net = models.mlp(config["hidden"], dropout=config["dropout"])
        self.net.initialize(mx.init.Xavier(), ctx=ctx)
        self.net.hybridize()
        self.net(nd.zeros((1, INPUT_SIZE), ctx=ctx))
        self.trainer = gluon.Trainer(self.net.collect_params(), config["optimizer"],
                                     {"learning_rate": config["lr"]})
        self.loss = gluon.loss.SoftmaxCrossEntropyLoss()
        self.loss.hybridize()
        self.epoch, self.history, self.best = 0, [], None

    def _params(self):
        return self.net._collect_params_with_prefix()  # structural names, as save_parameters

    def save(self, path):
        arrays = {name: param.data() for name, param in self._params().items()}
        metadata = {"kind": "deterministic", "epoch": self.epoch, "history": self.history,
                    "best": self.best, "seed": self.seed,
                    "shapes": {name: list(a.shape) for name, a in arrays.items()}}
        write_checkpoint(path, arrays, metadata, optimizer_state.capture(self.trainer))

    def load(self, path, trust_pickled_state=False):
        expected = {name: param.shape for name, param in self._params().items()}
        stored = read_checkpoint(path, expected=expected, with_optimizer=True,
                                 trust_pickled_state=trust_pickled_state)
        metadata = stored.metadata
        if metadata.get("kind") != "deterministic":
            raise CheckpointError(f"{path} is not a checkpoint of a deterministic baseline")
        epoch = checked_field(metadata, "epoch", int, path)
        history = checked_field(metadata, "history", list, path)
        checked_field(metadata, "seed", int, path)
        best = checked_field(metadata, "best", dict, path) if epoch else metadata.get("best")
        if epoch < 0 or len(history) != epoch or not all(_is_record(r) for r in history) or (
                epoch and not _is_best(best)):
            raise CheckpointError(f"{path}: its epoch, history or best epoch is malformed")
        if stored.optimizer is not None:
            optimizer_state.restore(self.trainer, *stored.optimizer, source=path)
        elif stored.pickled_optimizer is not None:
            optimizer_state.load_pickled(self.trainer, stored.pickled_optimizer)
        for name, param in self._params().items():
            param.set_data(nd.array(stored.arrays[name], ctx=self.ctx, dtype=stored.arrays[name].dtype))
        self.epoch, self.history, self.best = epoch, list(history), best

    def load_best(self, run_dir):
        """Load ``best.params``; returns its epoch, from the per-epoch checkpoint or, in a
        committed folder that keeps only the best parameters, from ``result.json``."""
        files = FILES["deterministic"]
        load_parameter_file(self.net, os.path.join(run_dir, files["best"]), ctx=self.ctx)
        metadata = _checkpoint_metadata(os.path.join(run_dir, files["checkpoint"]), "deterministic")
        if _is_best(metadata.get("best")):
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

    def fit(self, train, validation, epochs, run_dir, progress):
        files = FILES["deterministic"]
        shuffled = data.EpochShuffled(train, self.seed, lambda: self.epoch)
        for record in run_epochs(self.net, self.trainer, shuffled, epochs,
                                 classification_cost(self.loss), first_epoch=self.epoch,
                                 eval_data=validation, ctx=self.ctx, progress=progress,
                                 seed=self.seed):
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


def _is_record(record):
    """A history record with a numeric validation error (stored as 'test_error')."""
    return isinstance(record, dict) and isinstance(record.get("epoch"), int) and \
        isinstance(record.get("test_error"), (int, float))


def _is_best(best):
    return isinstance(best, dict) and isinstance(best.get("epoch"), int) and \
        isinstance(best.get("validation_error"), (int, float))


def _best_of(history):
    """The first epoch with the lowest validation error, or None for an empty history."""
    if not history:
        return None
    record = min(history, key=lambda r: (r["test_error"], r["epoch"]))
    return {"epoch": record["epoch"], "validation_error": record["test_error"]}


# ---------------------------------------------------------------------------- run
def run(config, epochs, output_dir, data_dir=None, ctx=None, mc_samples=MC_SAMPLES,
        progress=False, command=None, evaluate_test=True, loaders=None,
        trust_pickled_state=False):
    """Train configuration ``config`` to ``epochs`` epochs in ``output_dir`` and report.

    A folder that already holds a run of the same configuration is continued from its last
    completed epoch (nothing is trained when it has ``epochs`` epochs already).

    Parameters
    ----------
    config : dict or str
        From :func:`get_config`, or a name of :data:`CONFIGS`.
    epochs : int
        Total number of epochs.
    output_dir : str
    data_dir : str, optional
        See :func:`gluon_bbb.data.find_data_dir`.
    ctx : mx.Context or str, optional
    mc_samples : int
        Sampled networks of the Monte Carlo test error.
    progress : bool
        tqdm progress bars.
    command : str, optional
        The command line, recorded in ``sessions.json`` and ``result.json``.
    evaluate_test : bool
        False: do not touch the test set and do not write ``result.json`` (for searches).
    loaders : dict, optional
        Loaders from :func:`gluon_bbb.data.get_loaders` with this configuration's data
        settings (dataset, batch size, preprocessing, validation split, subset), to share
        them between runs; default: loaded here.
    trust_pickled_state : bool
        Resuming from a checkpoint of format 1: unpickle its optimizer state (runs code from
        the file) instead of starting the optimizer afresh. See
        :meth:`gluon_bbb.BBBTrainer.load`.

    Returns
    -------
    dict
        The report (see :func:`report`) or, with ``evaluate_test=False``, a summary with
        'best_epoch', 'validation_error', 'last_validation_error', 'epochs_run', 'seconds'.

    Raises
    ------
    ValueError
        ``output_dir`` holds another configuration, bad arguments, or a damaged file
        (:class:`~gluon_bbb.checkpoint.CheckpointError`).
    RunFolderBusyError
        Another process is writing ``output_dir`` (see :mod:`gluon_bbb.runlock`).
    """
    if isinstance(config, str):
        config = get_config(config)
    check_int("epochs", epochs)
    check_int("mc_samples", mc_samples)
    ctx = resolve_context(ctx)
    with RunFolderLock(output_dir):
        return _run_locked(config, epochs, output_dir, data_dir, ctx, mc_samples, progress,
                           command, evaluate_test, loaders, trust_pickled_state)


def _run_locked(config, epochs, output_dir, data_dir, ctx, mc_samples, progress, command,
                evaluate_test, loaders, trust_pickled_state):
    """:func:`run`, holding the folder's writer lock."""
    start = time.time()
    check_run_dir(output_dir, config)
    if loaders is None:
        loaders = _loaders(config, data_dir, ctx)
    runner = make_runner(config, ctx)
    files = FILES[runner.kind]
    checkpoint = os.path.join(output_dir, files["checkpoint"])
    os.makedirs(output_dir, exist_ok=True)
    epochs_before = 0
    if os.path.exists(checkpoint):
        runner.load(checkpoint, trust_pickled_state=trust_pickled_state)
        epochs_before = runner.epoch
        best = _best_of(runner.history)
        if best is not None:
            runner.restore_best(output_dir, best)
        logger.info("resuming %s after epoch %d", checkpoint, runner.epoch)
    if epochs < runner.epoch:
        logger.warning("%s has %d epochs already, more than the %d asked for; nothing to train",
                       output_dir, runner.epoch, epochs)
    write_json(os.path.join(output_dir, CONFIG),
                dict(config, epochs=int(epochs), data_dir=data_dir,
                     description=describe(config)))
    session = {"command": command, "started": _now(), "epochs_before": epochs_before,
               "epochs_requested": int(epochs), "machine": machine_info(ctx)}
    changed = _changes(config["overrides"])
    logger.info("start: %s%s to epoch %d on %s; run folder %s", config["reproduce"],
                f" ({changed})" if changed else "", epochs, ctx, output_dir)
    try:
        runner.fit(loaders["train"], loaders["validation"], epochs, output_dir, progress)
        session["fused"] = runner.fused()
        session["epochs_after"] = runner.epoch
        if not evaluate_test:
            best = _best_of(runner.history)
            session["outcome"] = "finished"
            return {"best_epoch": best["epoch"], "validation_error": best["validation_error"],
                    "last_validation_error": runner.history[-1]["test_error"],
                    "epochs_run": runner.epoch, "seconds": time.time() - start}
        result = report(output_dir, mc_samples=mc_samples, data_dir=data_dir, ctx=ctx,
                        command=command, _session=(session, start))
        session["outcome"] = "finished"
        return result
    except BaseException as error:
        session["outcome"] = f"stopped by {type(error).__name__}"
        raise
    finally:
        session.setdefault("epochs_after", runner.epoch)
        session["seconds"] = time.time() - start
        _append_session(output_dir, session)


def _append_session(run_dir, session):
    sessions = _read_sessions(run_dir)
    sessions.append(session)
    write_json(os.path.join(run_dir, SESSIONS), sessions)


def _read_sessions(run_dir):
    path = os.path.join(run_dir, SESSIONS)
    if not os.path.exists(path):
        return []
    sessions = read_json(path, "a list of training sessions", kind=list)
    if not all(isinstance(session, dict) for session in sessions):
        raise CheckpointError(f"{path} holds something other than session records")
    return sessions


# ---------------------------------------------------------------------------- report
def evaluate_run(run_dir, mc_samples=MC_SAMPLES, data_dir=None, ctx=None):
    """Errors of the best epoch on validation of a reproduce run folder; writes nothing.

    The same numbers come out every time: MXNet's and NumPy's generators are seeded from the
    configuration and the weight noise is restored from the checkpoint.

    Returns
    -------
    dict
        'best_epoch', 'validation_error' (re-measured), 'test_error_mean', 'test_error_mc'
        (None for a deterministic baseline), 'mc_samples', 'num_train', 'num_validation',
        'num_test', 'num_weights', 'fused' (of the evaluating trainer; None for a baseline).
    """
    config = read_run_config(run_dir)
    ctx = resolve_context(ctx)
    files = FILES[run_kind(config)]
    if not os.path.isfile(os.path.join(run_dir, files["best"])):
        raise FileNotFoundError(f"{os.path.join(run_dir, files['best'])} not found: {run_dir} "
                                "has no completed epoch yet")
    loaders = _loaders(config, data_dir or config.get("data_dir"), ctx)
    runner = make_runner(config, ctx)
    best_epoch = runner.load_best(run_dir)
    mean = runner.evaluate(loaders["test"], num_samples=0)
    mc = runner.evaluate(loaders["test"], num_samples=mc_samples) if runner.kind == "bbb" else None
    return {
        "best_epoch": best_epoch,
        "validation_error": runner.evaluate(loaders["validation"], num_samples=0),
        "test_error_mean": mean,
        "test_error_mc": mc,
        "mc_samples": mc_samples if runner.kind == "bbb" else None,
        "num_train": loaders["train"].num_examples,
        "num_validation": loaders["validation"].num_examples,
        "num_test": loaders["test"].num_examples,
        "num_weights": runner.num_weights,
        "fused": runner.fused(),
    }


def report(run_dir, mc_samples=MC_SAMPLES, data_dir=None, ctx=None, command=None, _session=None):
    """Evaluate the best epoch on validation on the test set and write ``result.json``.

    Works at any time, also while the run is training (checkpoints are written atomically).

    Returns
    -------
    dict, the contents of ``result.json``:
        'config' (name), 'method', 'description', 'hyperparameters', 'overrides', 'protocol',
        'best_epoch', 'validation_error' (recorded after that epoch),
        'validation_error_recheck' (measured again from the best checkpoint),
        'test_error_mean', 'test_error_mc', 'mc_samples', 'paper_test_error' (%),
        'epochs_run', 'epochs_requested', 'finished', 'history' (per epoch, with
        'validation_error'), 'train_seconds', 'total_wall_seconds' (all reproduce sessions of
        the folder), 'report_seconds', 'machine', 'fused', 'num_weights', 'command' (of this
        report), 'commands' (of the training sessions), 'written'.
    """
    start = time.time()
    config = read_run_config(run_dir)
    ctx = resolve_context(ctx)
    files = FILES[run_kind(config)]
    metadata = _checkpoint_metadata(os.path.join(run_dir, files["checkpoint"]), run_kind(config))
    history = [renamed_record(record) for record in metadata.get("history", [])]
    best = _best_of(metadata.get("history", []))
    if best is None and not metadata and os.path.isfile(os.path.join(run_dir, files["best"])):
        raise FileNotFoundError(
            f"{run_dir} has {files['best']} but no {files['checkpoint']}, whose history the "
            "report needs (committed results keep only the best epoch); 'gluon-bbb evaluate "
            f"{run_dir}' measures the best epoch's test error again")
    if best is None:
        raise FileNotFoundError(f"{run_dir} has no completed epoch yet: nothing to report")
    evaluation = evaluate_run(run_dir, mc_samples=mc_samples, data_dir=data_dir, ctx=ctx)
    if evaluation["best_epoch"] != best["epoch"]:
        raise ValueError(f"the best checkpoint of {run_dir} holds epoch {evaluation['best_epoch']}, "
                         f"the history says {best['epoch']}: a training is writing the folder "
                         "(try again in a moment), or the folder was modified")
    sessions = _read_sessions(run_dir)
    wall = sum(s.get("seconds", 0.0) for s in sessions)
    commands = [s.get("command") for s in sessions]
    fused_sessions = [s["fused"] for s in sessions if s.get("fused")]
    if _session is not None:  # called by run(): its session is not in sessions.json yet
        session, session_start = _session
        wall += time.time() - session_start
        commands.append(session.get("command"))
        if session.get("fused"):
            fused_sessions.append(session["fused"])
    fused = None
    if run_kind(config) == "bbb":
        fused = {"used_in_training": (all(f["used"] for f in fused_sessions)
                                      if fused_sessions else None),
                 "training_reasons": sorted({f["reason"] for f in fused_sessions if f["reason"]}),
                 "used_in_evaluation": evaluation["fused"]["used"]}
    result = {
        "config": config["reproduce"],
        "method": config["method"],
        "description": describe(config),  # not config.json's: that may predate the overrides
        "hyperparameters": _hyperparameters(config),
        "overrides": config.get("overrides", {}),
        "protocol": {
            "train_examples": evaluation["num_train"],
            "validation_examples": evaluation["num_validation"],
            "test_examples": evaluation["num_test"],
            "validation": f"the last {config['num_validation']} training images",
            "selection": "the epoch with the lowest validation error (posterior mean for BBB)",
        },
        "best_epoch": best["epoch"],
        "validation_error": best["validation_error"],
        "validation_error_recheck": evaluation["validation_error"],
        "test_error_mean": evaluation["test_error_mean"],
        "test_error_mc": evaluation["test_error_mc"],
        "mc_samples": evaluation["mc_samples"],
        "paper_test_error": PAPER_TEST_ERROR.get(config["reproduce"]),
        "epochs_run": int(metadata["epoch"]),
        "epochs_requested": config.get("epochs"),
        "finished": int(metadata["epoch"]) >= int(config.get("epochs") or 0),
        "history": history,
        "train_seconds": sum(record.get("seconds", 0.0) for record in history),
        "total_wall_seconds": wall,
        "report_seconds": time.time() - start,
        "machine": machine_info(ctx),
        "fused": fused,
        "num_weights": evaluation["num_weights"],
        "command": command,
        "commands": commands,
        "written": _now(),
    }
    write_json(os.path.join(run_dir, RESULT), result)
    return result


def read_result(run_dir):
    """The ``result.json`` of a run folder."""
    path = os.path.join(run_dir, RESULT)
    if not os.path.isfile(path):
        raise FileNotFoundError(f"{path} not found: run 'gluon-bbb reproduce-report {run_dir}'")
    result = read_json(path, "a run's report")
    history = checked_field(result, "history", list, path, optional=True, default=[])
    if not all(isinstance(record, dict) for record in history):
        raise CheckpointError(f"{path}: its history holds something other than epoch records")
    return result


def results_table(results):
    """A markdown table (Table 1 layout) of :func:`report` results.

    The 'changed' column lists each run's overrides of its configuration (``--set`` and the
    like), so that runs of one configuration stay apart.
    """
    lines = ["| configuration | changed | units/layer | # weights | epochs | best epoch "
             "| validation error | test error (mean) | test error (MC) | paper |",
             "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for result in results:
        hidden = result["hyperparameters"]["hidden"]
        mc, paper = result["test_error_mc"], result.get("paper_test_error")
        mc_cell = "-" if mc is None else f"{100 * mc:.2f}% ({result['mc_samples']} samples)"
        paper_cell = "-" if paper is None else f"{paper:.2f}%"
        changed = _changes(result.get("overrides")) or "-"
        lines.append(
            f"| {result['config']} | {changed} | {'x'.join(map(str, hidden))} | "
            f"{result['num_weights']:,} | {result['epochs_run']} | {result['best_epoch']} | "
            f"{100 * result['validation_error']:.2f}% | {100 * result['test_error_mean']:.2f}% | "
            f"{mc_cell} | {paper_cell} |")
    return "\n".join(lines) + "\n"


def renamed_record(record):
    """A :attr:`BBBTrainer.history` record of a reproduce run with its evaluated split named
    for what it is: 'test_error' becomes 'validation_error'."""
    record = dict(record)
    if "test_error" in record:
        record["validation_error"] = record.pop("test_error")
    return record


# ---------------------------------------------------------------------------- search
def grid_settings(grid=None):
    """Every setting of a grid (default the paper's, 324 settings), in a fixed order.

    Parameters
    ----------
    grid : dict, optional
        key -> list of values, keys among :data:`SEARCH_KEYS`; missing keys take the
        paper's values.

    Returns
    -------
    list of dict
    """
    grid = dict(PAPER_GRID, **(grid or {}))
    unknown = set(grid) - set(SEARCH_KEYS)
    if unknown:
        raise ValueError(f"unknown search keys {sorted(unknown)}; use {', '.join(SEARCH_KEYS)}")
    settings = []
    for values in itertools.product(*(list(grid[key]) for key in SEARCH_KEYS)):
        setting = dict(zip(SEARCH_KEYS, values))
        if setting["log_sigma2"] > setting["log_sigma1"]:
            settings.append(setting)
    return settings


def sample_settings(settings, max_trials, seed=0):
    """A seeded random sample of ``max_trials`` settings (all of them if fewer), in grid order."""
    check_int("max_trials", max_trials)
    if max_trials >= len(settings):
        return list(settings)
    chosen = np.random.default_rng(seed).choice(len(settings), size=max_trials, replace=False)
    return [settings[i] for i in sorted(chosen)]


def parse_setting(text, keys=SEARCH_KEYS):
    """``"lr=1e-4,num_samples=2,pi=0.25"`` -> a dict; keys among ``keys`` (default
    :data:`SEARCH_KEYS`; ``SEARCH_KEYS + EXTRA_KEYS`` for ``--set``)."""
    setting = {}
    for item in text.split(","):
        key, sep, value = item.partition("=")
        key = key.strip().replace("-", "_")
        if not sep or key not in keys:
            raise ValueError(f"bad setting {text!r}: write key=value pairs separated by commas, "
                             f"keys among {', '.join(keys)}")
        try:
            setting[key] = (value.strip() if key in CHOICES else
                            int(value) if key == "num_samples" else float(value))
        except ValueError:
            raise ValueError(f"bad value {value!r} for {key} in setting {text!r}") from None
    return setting


def _trial_name(setting):
    parts = {"lr": "lr", "num_samples": "samples", "pi": "pi", "log_sigma1": "logsigma1-",
             "log_sigma2": "logsigma2-"}
    return "_".join(f"{parts[key]}{setting[key]:g}" for key in SEARCH_KEYS if key in setting)


def search(settings, epochs, output_dir, base="bbb-mixture-400", overrides=None, data_dir=None,
           ctx=None, progress=False, command=None, trust_pickled_state=False):
    """Train each setting for ``epochs`` epochs and tabulate their validation errors.

    Each trial is a reproduce run (resumable, early stopping on validation) in
    ``output_dir/<trial>``; the test set is not touched. The rows of earlier searches in the
    same folder are kept; ``search.json`` and ``search.md`` list all of them, best first.

    Parameters
    ----------
    settings : list of dict
        Values for some of :data:`SEARCH_KEYS` (the others keep ``base``'s), e.g. from
        :func:`grid_settings`, :func:`sample_settings` or :func:`parse_setting`.
    epochs : int
        The budget of every trial.
    base : str
        A Bayes-by-Backprop configuration of :data:`CONFIGS`.
    overrides : dict, optional
        Applied to every trial, e.g. ``{"hidden": [16], "subset": 256}`` for a smoke run.
    trust_pickled_state : bool
        Passed to :func:`run` for every trial.

    Returns
    -------
    list of dict, the rows of this call, in the order of ``settings``.
    """
    if base not in CONFIGS or CONFIGS[base]["method"] != "bbb":
        raise ValueError(f"the search base must be a Bayes-by-Backprop configuration, got {base!r}")
    if not settings:
        raise ValueError("no settings to search")
    overrides = dict(overrides or {})
    configs = []
    for setting in settings:
        unknown = set(setting) - set(SEARCH_KEYS)
        if unknown:
            raise ValueError(f"unknown search keys {sorted(unknown)}; use {', '.join(SEARCH_KEYS)}")
        if CONFIGS[base]["prior"] != "scale-mixture" and set(setting) & {"pi", "log_sigma1", "log_sigma2"}:
            raise ValueError(f"{base} has a Gaussian prior: search lr and num_samples only")
        config = get_config(base, **dict(overrides, **setting))
        full = {key: config[key] for key in SEARCH_KEYS if key in config}
        configs.append((full, config, os.path.join(output_dir, _trial_name(full))))
    _read_search(output_dir, base, overrides)  # refuse before training anything
    for _, config, trial_dir in configs:
        check_run_dir(trial_dir, config)
    rows = []
    loaders = _loaders(configs[0][1], data_dir, resolve_context(ctx))  # the same for every trial
    for number, (setting, config, trial_dir) in enumerate(configs, 1):
        logger.info("trial %d/%d: %s", number, len(configs), setting)
        summary = run(config, epochs, trial_dir, data_dir=data_dir, ctx=ctx, progress=progress,
                      command=command, evaluate_test=False, loaders=loaders,
                      trust_pickled_state=trust_pickled_state)
        rows.append(dict(setting, trial=os.path.basename(trial_dir), epochs=summary["epochs_run"],
                         best_epoch=summary["best_epoch"],
                         validation_error=summary["validation_error"],
                         last_validation_error=summary["last_validation_error"],
                         seconds=summary["seconds"]))
    _write_search(output_dir, base, overrides, rows)
    return rows


def _read_search(output_dir, base, overrides):
    """The rows of an earlier search in ``output_dir`` by trial name, or a ValueError if it
    searched another base or overrides."""
    path = os.path.join(output_dir, SEARCH_JSON)
    if not os.path.exists(path):
        return {}
    saved = read_json(path, "a search table")
    rows = checked_field(saved, "rows", list, path, optional=True, default=[])
    if not all(isinstance(row, dict) and isinstance(row.get("trial"), str) for row in rows):
        raise CheckpointError(f"{path}: its rows are not search results")
    if saved.get("base") != base or saved.get("overrides") != overrides:
        raise ValueError(f"{path} holds a search of {saved.get('base')} with overrides "
                         f"{saved.get('overrides')}, not of {base} with {overrides}; choose "
                         "another --output-dir")
    return {row["trial"]: row for row in saved.get("rows", [])}


def _write_search(output_dir, base, overrides, rows):
    path = os.path.join(output_dir, SEARCH_JSON)
    merged = _read_search(output_dir, base, overrides)
    merged.update({row["trial"]: row for row in rows})
    ordered = sorted(merged.values(), key=lambda r: (r["validation_error"], r["trial"]))
    write_json(path, {"base": base, "overrides": overrides, "rows": ordered})
    changed = "".join(f", {key}={value}" for key, value in sorted(overrides.items()))
    text = (f"Validation error of the posterior mean (best epoch within each trial's budget) "
            f"of settings of {base}{changed}; best first.\n\n{search_table(ordered)}")
    atomic_write_bytes(os.path.join(output_dir, SEARCH_MD), text.encode("utf-8"))


def search_table(rows):
    """A markdown table of search rows."""
    lines = ["| rank | lr | samples | pi | -log sigma1 | -log sigma2 | epochs | best epoch "
             "| best validation error | last validation error |",
             "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for rank, row in enumerate(rows, 1):
        cells = [f"{row[key]:g}" if row.get(key) is not None else "-" for key in SEARCH_KEYS]
        lines.append(f"| {rank} | {' | '.join(cells)} | {row['epochs']} | {row['best_epoch']} | "
                     f"{100 * row['validation_error']:.2f}% | "
                     f"{100 * row['last_validation_error']:.2f}% |")
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------------- helpers
def _checkpoint_metadata(path, kind):
    """The metadata of a checkpoint file without reading its arrays ({} if there is none),
    with its epoch and history checked; ``kind`` is 'bbb' or 'deterministic'."""
    if not os.path.isfile(path):
        return {}
    metadata = read_metadata(path)
    epoch = checked_field(metadata, "epoch", int, path)
    history = checked_field(metadata, "history", list, path)
    if metadata.get("kind", "bbb") != kind or epoch < 0 or not all(_is_record(r) for r in history):
        raise CheckpointError(f"{path} is not a {kind} checkpoint with a well-formed history")
    return metadata


def _copy_atomically(source, target):
    with open(source, "rb") as handle:
        atomic_write_bytes(target, handle.read())


def _now():
    return time.strftime("%Y-%m-%dT%H:%M:%S%z")
