"""Variational continual learning on permuted MNIST (Nguyen et al. 2018), resumable task by task.

The experiment of ``notebooks/11_continual_learning.ipynb`` as a run folder, for runs too long
for a notebook (the reference's setting: 100 epochs a task, 10 weight draws a step). Tasks
1..T are MNIST with the pixels of task t permuted by a fixed permutation; each method learns
them one after another and is scored after each task on the test images of every task seen:

* ``plain``: maximum likelihood, task after task;
* ``BBB, fixed prior``: Bayes by Backprop with the prior N(0, PRIOR_SIGMA^2) for every task;
* ``BBB, Bayesian updating``: the prior of task t is the posterior of task t - 1,
  :meth:`~gluon_bbb.DiagonalGaussianPrior.from_posterior`'s N(mu, softplus(rho)^2) (task 1:
  N(0, PRIOR_SIGMA^2)); the cost of task t is Eq. (2) for its data with the earlier tasks
  summarised in that prior;
* ``BBB, Bayesian updating, ML start``: the same, with task 1's posterior means started from
  the network trained ``ML_START_EPOCHS`` epochs by maximum likelihood on task 1.

A task of a Bayes-by-Backprop method starts its posterior where the previous task's ended
(means and rho), with a fresh Adam; task 1's rho is ``RHO_INIT``. :data:`SETTINGS` holds the
notebook's two settings: ``"notebook"`` (5 tasks of 20,000 images, 10 epochs, four methods)
and ``"vcl"``, the setting of Nguyen et al.'s code (60,000 images a task, 100 epochs a task and
for the ML start, 10 draws a step, 100 to predict, batches of 256, pixels in [0, 1], every task
permuted by ``numpy.random.RandomState(t)`` for task t + 1, as in their ``run_permuted.py``).

The run folder holds:

``continual.ckpt``
    After every task, atomically: each method's network, posterior means and rho at the end of
    the task (a checkpoint of :mod:`gluon_bbb.io.checkpoint`, nothing pickled), the settings,
    the data's SHA-256 and everything measured so far. It is the run's state: the same command
    continues from the last finished task, and a larger ``NUM_TASKS`` extends a finished run.
``continual.json``
    The record, rewritten atomically after every task from the checkpoint: the settings, the
    test error of each method on every task after each task (the notebook's
    ``errors_after_task_on_task``, null where not measured yet), the average accuracy over the
    tasks seen, the ML start's error, the seconds, the command and the machine. Section 7 of
    the notebook reads it.

Every random stream is a function of the settings and the task alone: the network's
initial weights (``mx.random.seed(SEED)``), the batches of task t (``ArrayLoader`` seeded
``SEED + t``, made anew for every method), the weight noise of task t (``BBBTrainer`` seeded
``SEED + t``, reseeded every epoch) and the sampled networks that score it
(:func:`~gluon_bbb.epochs.epoch_seed` stream 5). Between tasks the state is only the arrays of
the checkpoint, and an uninterrupted run goes through them too: a run interrupted anywhere and
resumed writes the same record as an uninterrupted one, but for its seconds, command and
machine (``tests/experiments/test_continual.py`` checks it).
"""
import hashlib
import logging
import math
import os
import time

import mxnet as mx
import numpy as np
from mxnet import gluon, nd

from .. import baselines
from .._math import softplus
from ..context import resolve_context
from ..data import ArrayLoader, load_splits
from ..epochs import epoch_seed
from ..io.checkpoint import (CheckpointError, checked_field, read_checkpoint, read_json,
                             read_metadata, write_checkpoint, write_json)
from ..loss import BBBLoss
from ..priors import DiagonalGaussianPrior, GaussianPrior
from ..trainer import BBBTrainer
from .machine import machine_info
from .runlock import LOCK_FILES, RunFolderLock

__all__ = ["PLAIN", "FIXED", "UPDATING", "UPDATING_ML", "METHODS", "SETTINGS", "CHECKPOINT",
           "RECORD", "continual_settings", "permutations", "run_continual", "read_record"]

logger = logging.getLogger(__name__)

PLAIN, FIXED = "plain", "BBB, fixed prior"
UPDATING, UPDATING_ML = "BBB, Bayesian updating", "BBB, Bayesian updating, ML start"
#: The methods, in the order they run within a task.
METHODS = (PLAIN, FIXED, UPDATING, UPDATING_ML)
CHECKPOINT = "continual.ckpt"
RECORD = "continual.json"
KIND = "gluon_bbb continual learning"
#: The :func:`~gluon_bbb.epochs.epoch_seed` stream of the sampled networks that score a task.
EVAL_STREAM = 5

#: The notebook's settings, with its names. NUM_TASKS may grow between runs of one folder;
#: every other key is the run's identity.
SETTINGS = {
    "notebook": {
        "NUM_TASKS": 5, "TRAIN_PER_TASK": 20000, "TEST_PER_TASK": 2000, "EPOCHS_PER_TASK": 10,
        "ML_START_EPOCHS": 10, "BATCH_SIZE": 128, "HIDDEN": 100, "LEARNING_RATE": 1e-3,
        "PRIOR_SIGMA": 0.1, "RHO_INIT": -3.0, "TRAIN_SAMPLES": 1, "EVAL_SAMPLES": 0,
        "KL": "closed_form", "SEED": 0, "PREPROCESSING": "paper", "PERMUTE_TASK_1": False,
        "INIT_STD": None, "METHODS": list(METHODS)},
    "vcl": {
        "NUM_TASKS": 5, "TRAIN_PER_TASK": 60000, "TEST_PER_TASK": 10000, "EPOCHS_PER_TASK": 100,
        "ML_START_EPOCHS": 100, "BATCH_SIZE": 256, "HIDDEN": 100, "LEARNING_RATE": 1e-3,
        "PRIOR_SIGMA": 1.0, "RHO_INIT": math.log(math.expm1(math.exp(-3.0))),  # log s^2 = -6
        "TRAIN_SAMPLES": 10, "EVAL_SAMPLES": 100, "KL": "closed_form", "SEED": 0,
        "PREPROCESSING": "255", "PERMUTE_TASK_1": True, "INIT_STD": 0.1,
        "METHODS": [PLAIN, UPDATING_ML]},
}
_POSITIVE_INTS = ("NUM_TASKS", "TRAIN_PER_TASK", "TEST_PER_TASK", "EPOCHS_PER_TASK",
                  "ML_START_EPOCHS", "BATCH_SIZE", "HIDDEN", "TRAIN_SAMPLES")


def continual_settings(setting: str = "vcl", **overrides) -> dict:
    """The checked settings of a run: :data:`SETTINGS` ``[setting]`` with ``overrides``.

    Parameters
    ----------
    setting : {'notebook', 'vcl'}
    **overrides
        Keys of :data:`SETTINGS` (e.g. ``NUM_TASKS=10``, ``EPOCHS_PER_TASK=1``).

    Returns
    -------
    dict, with ``'SETTING'`` naming the base setting.

    Raises
    ------
    ValueError
        An unknown setting or key, or a value out of range, named.
    """
    if setting not in SETTINGS:
        raise ValueError(f"setting must be one of {', '.join(SETTINGS)}, got {setting!r:.60}")
    settings = dict(SETTINGS[setting], SETTING=setting)
    for key, value in overrides.items():
        if key not in SETTINGS[setting]:
            raise ValueError(f"unknown continual-learning setting {key!r:.60}; the settings are "
                             f"{', '.join(SETTINGS[setting])}")
        settings[key] = value
    for key in _POSITIVE_INTS:
        value = settings[key]
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{key} must be an integer >= 1, got {value!r:.60}")
    value = settings["EVAL_SAMPLES"]
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"EVAL_SAMPLES must be an integer >= 0, got {value!r:.60}")
    for key in ("LEARNING_RATE", "PRIOR_SIGMA"):
        if not _is_number(settings[key]) or not settings[key] > 0 or math.isinf(settings[key]):
            raise ValueError(f"{key} must be a finite number > 0, got {settings[key]!r:.60}")
    if not _is_number(settings["RHO_INIT"]) or not math.isfinite(settings["RHO_INIT"]):
        raise ValueError(f"RHO_INIT must be a finite number, got {settings['RHO_INIT']!r:.60}")
    if settings["INIT_STD"] is not None and not (_is_number(settings["INIT_STD"])
                                                 and 0 < settings["INIT_STD"] < math.inf):
        raise ValueError(f"INIT_STD must be None or a number > 0, got {settings['INIT_STD']!r:.60}")
    if settings["KL"] not in ("closed_form", "monte_carlo"):
        raise ValueError(f"KL must be 'closed_form' or 'monte_carlo', got {settings['KL']!r:.60}")
    if settings["PREPROCESSING"] not in ("paper", "255", "standardize"):
        raise ValueError(f"PREPROCESSING must be 'paper', '255' or 'standardize', got "
                         f"{settings['PREPROCESSING']!r:.60}")
    if not isinstance(settings["SEED"], int) or isinstance(settings["SEED"], bool) \
            or not 0 <= settings["SEED"] < 2**31 - 1 - 2 * settings["NUM_TASKS"]:
        raise ValueError(f"SEED must be an integer in [0, 2^31 - 1), got {settings['SEED']!r:.60}")
    if not isinstance(settings["PERMUTE_TASK_1"], bool):
        raise ValueError("PERMUTE_TASK_1 must be True or False")
    methods = settings["METHODS"]
    if not isinstance(methods, (list, tuple)) or not methods \
            or any(m not in METHODS for m in methods) or len(set(methods)) != len(methods):
        raise ValueError(f"METHODS must be distinct names among {', '.join(METHODS)}, got "
                         f"{methods!r:.80}")
    settings["METHODS"] = [m for m in METHODS if m in methods]  # the order they run in
    return settings


def _is_number(value):
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def permutations(num_features: int, num_tasks: int, seed: int, permute_task_1: bool) -> list:
    """The pixel order of each task.

    Parameters
    ----------
    num_features : int, 784 for MNIST
    num_tasks : int
    seed : int, the run's SEED (used only when task 1 is not permuted)
    permute_task_1 : bool
        True: task t + 1 is ``numpy.random.RandomState(t).permutation`` (Nguyen et al.'s code:
        ``np.random.seed(t)``, then a shuffle), task 1 included. False: task 1 keeps the
        original order, task t + 1 is ``numpy.random.default_rng(seed + t).permutation``.

    Returns
    -------
    list of ``num_tasks`` int arrays, (num_features,). Task t's does not depend on
    ``num_tasks``, so a longer run extends a shorter one.
    """
    if permute_task_1:
        return [np.random.RandomState(t).permutation(num_features) for t in range(num_tasks)]
    return [np.arange(num_features)] + [np.random.default_rng(seed + t).permutation(num_features)
                                        for t in range(1, num_tasks)]


# ---------------------------------------------------------------------------- one task
def _network(settings, num_features, ctx):
    """784-HIDDEN-HIDDEN-10 ReLU, initialised from ``mx.random.seed(SEED)``: Xavier, biases
    zero, or with INIT_STD weights and biases N(0, INIT_STD^2)."""
    std, hidden = settings["INIT_STD"], settings["HIDDEN"]
    init = {} if std is None else {"weight_initializer": mx.init.Normal(std),
                                   "bias_initializer": mx.init.Normal(std)}
    net = gluon.nn.HybridSequential()
    net.add(gluon.nn.Dense(hidden, activation="relu", **init),
            gluon.nn.Dense(hidden, activation="relu", **init), gluon.nn.Dense(10, **init))
    mx.random.seed(settings["SEED"])
    net.initialize(mx.init.Xavier(), ctx=ctx)
    net(nd.zeros((1, num_features), ctx=ctx))  # the shapes
    return net


def _task_data(data, settings, order, t):
    """(training loader, test loader) of task t; made anew for every method and task."""
    x_train, y_train, x_test, y_test = data
    return (ArrayLoader(x_train[:, order], y_train, settings["BATCH_SIZE"], shuffle=True,
                        seed=settings["SEED"] + t),
            ArrayLoader(x_test[:, order], y_test, 1000))


def _learn_task(method, t, state, data, orders, settings, ctx, progress):
    """Method ``method`` learns task ``t`` from ``state`` (None before task 1).

    Returns
    -------
    (state, errors, ml_start_error)
        The arrays at the end of the task ({'net': [...]}, and 'mu' and 'rho' for Bayes by
        Backprop), the test error on tasks 1..t+1, and the ML start's error on task 1 (None
        unless it ran).
    """
    num_features = data[0].shape[1]
    net = _network(settings, num_features, ctx)
    if state is not None:
        for param, value in zip(net.collect_params().values(), state["net"]):
            param.set_data(nd.array(value, ctx=ctx, dtype=value.dtype))
    tests = [_task_data(data, settings, orders[k], k)[1] for k in range(t + 1)]
    train = _task_data(data, settings, orders[t], t)[0]
    adam = {"learning_rate": settings["LEARNING_RATE"]}
    if method == PLAIN:
        baselines.train_deterministic(net, train, settings["EPOCHS_PER_TASK"], optimizer="adam",
                                      optimizer_params=adam, ctx=ctx, progress=progress)
        errors = [baselines.evaluate_deterministic(net, test, ctx=ctx) for test in tests]
        return {"net": _arrays(net)}, errors, None
    ml_start_error = None
    if method == UPDATING_ML and t == 0:  # task 1's posterior means from a plain network
        baselines.train_deterministic(net, train, settings["ML_START_EPOCHS"], optimizer="adam",
                                      optimizer_params=adam, ctx=ctx, progress=progress)
        ml_start_error = baselines.evaluate_deterministic(net, tests[0], ctx=ctx)
    if method in (UPDATING, UPDATING_ML) and state is not None:
        # DiagonalGaussianPrior.from_posterior of the previous posterior: its mu, softplus(rho)
        prior = DiagonalGaussianPrior(
            state["mu"], [softplus(nd, nd.array(rho, ctx=ctx, dtype=rho.dtype)).asnumpy()
                          for rho in state["rho"]])
    else:
        prior = GaussianPrior(settings["PRIOR_SIGMA"])
    trainer = BBBTrainer(net, BBBLoss(prior, kl=settings["KL"]), optimizer_params=adam,
                         num_samples=settings["TRAIN_SAMPLES"], rho_init=settings["RHO_INIT"],
                         ctx=ctx, seed=settings["SEED"] + t)  # means from the net
    if state is not None:  # rho where the previous task's ended
        for rho, old in zip(trainer.posterior.rhos, state["rho"]):
            rho.set_data(nd.array(old, ctx=ctx, dtype=old.dtype))
    if t == 1 and method in (UPDATING, UPDATING_ML):
        logger.info("%s: fused operator %s %s", method, trainer.fused, trainer.fused_reason)
    trainer.fit(train, settings["EPOCHS_PER_TASK"], progress=progress)
    trainer.reseed(epoch_seed(settings["SEED"] + t, 0, stream=EVAL_STREAM))
    errors = [trainer.evaluate(test, num_samples=settings["EVAL_SAMPLES"]) for test in tests]
    state = {"net": _arrays(net), "mu": [m.asnumpy() for m in trainer.posterior.means()],
             "rho": [rho.data().asnumpy() for rho in trainer.posterior.rhos]}
    return state, errors, ml_start_error


def _arrays(net):
    return [param.data().asnumpy() for param in net.collect_params().values()]


# ---------------------------------------------------------------------------- the run folder
def _identity(settings):
    """The settings that make a run: all but NUM_TASKS."""
    return {key: value for key, value in settings.items() if key != "NUM_TASKS"}


def _data_identity(data):
    digest = hashlib.sha256()
    for array in data:
        digest.update(np.ascontiguousarray(array).tobytes())
    return {"sha256": digest.hexdigest(), "train": int(len(data[0])), "test": int(len(data[2])),
            "features": int(data[0].shape[1])}


def _array_names(settings, num_features):
    """name -> shape of every array the checkpoint holds: ``<method index>.<kind>.<i>``."""
    net = _network(settings, num_features, mx.cpu())
    shapes = [tuple(param.shape) for param in net.collect_params().values()]
    names = {}
    for index, method in enumerate(settings["METHODS"]):
        kinds = ("net",) if method == PLAIN else ("net", "mu", "rho")
        for kind in kinds:
            names.update({f"{index}.{kind}.{i}": shape for i, shape in enumerate(shapes)})
    return names


def _check_folder(run_dir):
    """Refuse (ValueError) a path that is not a folder, or a folder holding anything but a
    continual-learning run. Returns whether it holds a checkpoint."""
    if os.path.exists(run_dir) and not os.path.isdir(run_dir):
        raise ValueError(f"{run_dir} is a file, not a run folder; choose another run folder")
    if os.path.isfile(os.path.join(run_dir, CHECKPOINT)):
        return True
    others = sorted(name for name in os.listdir(run_dir) if name not in LOCK_FILES) \
        if os.path.isdir(run_dir) else []
    if others:
        raise ValueError(f"{run_dir} holds {others[0]} but no {CHECKPOINT}: it is not a "
                         "continual-learning run folder; choose another run folder")
    return False


def _read_state(run_dir, settings, data_id):
    """(tasks done, state per method, measured) from the folder's checkpoint, checked against
    this run's settings and data; a CheckpointError or ValueError naming the file otherwise."""
    path = os.path.join(run_dir, CHECKPOINT)
    stored = read_checkpoint(path, expected=_array_names(settings, data_id["features"]))
    metadata = stored.metadata
    if metadata.get("kind") != KIND:
        raise CheckpointError(f"{path} is not a continual-learning checkpoint")
    _check_same_run(run_dir, checked_field(metadata, "settings", dict, path), settings)
    if metadata.get("data") != data_id:
        raise ValueError(f"{run_dir} holds a run on other data ({CHECKPOINT}'s SHA-256 "
                         f"{str(checked_field(metadata, 'data', dict, path).get('sha256'))[:12]}, "
                         f"these data's {data_id['sha256'][:12]}); choose another run folder")
    done = checked_field(metadata, "tasks_done", int, path)
    measured = checked_field(metadata, "measured", dict, path)
    if done < 1:
        raise CheckpointError(f"{path}: tasks_done must be >= 1, got {done}")
    if done > settings["NUM_TASKS"]:
        raise ValueError(f"{run_dir} holds {done} finished tasks, more than the "
                         f"{settings['NUM_TASKS']} "
                         "asked for; ask for at least as many")
    _check_measured(measured, settings["METHODS"], done, path)
    states = {}
    for index, method in enumerate(settings["METHODS"]):
        kinds = ("net",) if method == PLAIN else ("net", "mu", "rho")
        states[method] = {kind: [array for name, array in stored.arrays.items()
                                 if name.startswith(f"{index}.{kind}.")] for kind in kinds}
    return done, states, measured


def _check_same_run(run_dir, theirs, settings):
    """Refuse (ValueError) a folder whose stored settings differ from ``settings`` (up to
    NUM_TASKS), naming the first three differences."""
    mine, theirs = _identity(settings), _identity(theirs)
    changed = sorted(key for key in set(mine) | set(theirs) if mine.get(key) != theirs.get(key))
    if changed:
        raise ValueError(f"{run_dir} holds a run of other settings ("
                         + ", ".join(f"{key}: {theirs.get(key)!r:.40} there, {mine.get(key)!r:.40} "
                                     "now" for key in changed[:3])
                         + "); choose another run folder")


def _stored_settings(path):
    """The settings of a continual-learning checkpoint, read without its arrays."""
    metadata = read_metadata(path)
    if metadata.get("kind") != KIND:
        raise CheckpointError(f"{path} is not a continual-learning checkpoint")
    return checked_field(metadata, "settings", dict, path)


def _check_measured(measured, methods, done, path):
    errors = checked_field(measured, "errors", dict, path)
    seconds = checked_field(measured, "seconds", dict, path)
    checked_field(measured, "ml_start_error", (float, type(None)), path)
    for method in methods:
        rows, times = errors.get(method), seconds.get(method)
        if not (isinstance(rows, list) and len(rows) == done and isinstance(times, list)
                and len(times) == done
                and all(isinstance(row, list) and len(row) == t + 1
                        and all(_is_number(e) and 0 <= e <= 1 for e in row)
                        for t, row in enumerate(rows))
                and all(_is_number(s) and s >= 0 for s in times)):
            raise CheckpointError(f"{path}: its errors or seconds of {method!r} are not those of "
                                  f"{done} finished tasks")


def _write_state(run_dir, settings, data_id, done, states, measured):
    arrays = {}
    for index, method in enumerate(settings["METHODS"]):
        for kind, values in states[method].items():
            arrays.update({f"{index}.{kind}.{i}": value for i, value in enumerate(values)})
    write_checkpoint(os.path.join(run_dir, CHECKPOINT), arrays,
                     {"kind": KIND, "settings": settings, "data": data_id, "tasks_done": done,
                      "measured": measured})


def _record(settings, data_id, done, measured, command):
    num_tasks, methods = settings["NUM_TASKS"], settings["METHODS"]
    errors = {m: [[round(float(e), 6) for e in row] + [None] * (num_tasks - len(row))
                  for row in measured["errors"][m]] + [[None] * num_tasks] * (num_tasks - done)
              for m in methods}
    averages = {m: [round(1 - float(np.mean(row)), 6) for row in measured["errors"][m]]
                for m in methods}
    ml_start = measured["ml_start_error"]
    return {"kind": KIND, "setting": settings["SETTING"], "settings": settings,
            "methods": methods, "tasks_done": done,
            "errors_after_task_on_task": errors, "average_accuracy_after_task": averages,
            "ml_start_error_task_1": None if ml_start is None else round(float(ml_start), 6),
            "data": data_id,
            "seconds": {m: float(sum(measured["seconds"][m])) for m in methods},
            "seconds_per_task": measured["seconds"], "command": command,
            "machine": machine_info(), "written": time.strftime("%Y-%m-%dT%H:%M:%S%z")}


def _write_record(run_dir, record):
    write_json(os.path.join(run_dir, RECORD), record)


def read_record(run_dir: str) -> dict:
    """The record ``continual.json`` of a run folder (a CheckpointError naming a bad file)."""
    path = os.path.join(run_dir, RECORD)
    record = read_json(path, "a continual-learning record")
    if record.get("kind") != KIND:
        raise CheckpointError(f"{path} is not a continual-learning record")
    checked_field(record, "errors_after_task_on_task", dict, path)
    checked_field(record, "settings", dict, path)
    return record


def _load_data(settings, data, data_dir):
    """(x_train, y_train, x_test, y_test): MNIST's first TRAIN_PER_TASK and TEST_PER_TASK
    images in the settings' preprocessing, or the first of ``data``."""
    if data is None:
        splits = load_splits("mnist", data_dir, preprocessing=settings["PREPROCESSING"])
        data = (*splits["train"], *splits["test"])
    x_train, y_train, x_test, y_test = (np.asarray(a) for a in data)
    for name, x, y, n in (("training", x_train, y_train, settings["TRAIN_PER_TASK"]),
                          ("test", x_test, y_test, settings["TEST_PER_TASK"])):
        if x.ndim != 2 or y.shape != (len(x),):
            raise ValueError(f"the {name} images must be (n, features) with (n,) labels")
        if len(x) < n:
            raise ValueError(f"{n} {name} images a task asked for, the data hold {len(x)}")
    n, m = settings["TRAIN_PER_TASK"], settings["TEST_PER_TASK"]
    return (np.ascontiguousarray(x_train[:n], dtype=np.float32), y_train[:n].astype(np.int32),
            np.ascontiguousarray(x_test[:m], dtype=np.float32), y_test[:m].astype(np.int32))


def run_continual(run_dir: str, settings: dict, data=None, data_dir=None, ctx=None,
                  command=None, progress: bool = False) -> dict:
    """Learn tasks 1..NUM_TASKS (continuing the folder's run) and record each as it ends.

    Parameters
    ----------
    run_dir : str
        New, empty, or holding a run of the same settings (up to NUM_TASKS), which continues
        from its last finished task.
    settings : dict, from :func:`continual_settings`
    data : (x_train, y_train, x_test, y_test), optional
        Arrays (n, features) and (n,) to take the first TRAIN_PER_TASK and TEST_PER_TASK
        from; default MNIST from ``data_dir`` in the settings' PREPROCESSING.
    data_dir : str, optional, see :func:`gluon_bbb.data.find_data_dir`
    ctx : mx.Context or str, optional
    command : str, optional, recorded
    progress : bool, progress bars over each epoch's batches

    Returns
    -------
    dict, the record (also in ``run_dir/continual.json``).

    Raises
    ------
    ValueError
        A run folder that holds something else, another run's settings or data, or a bad
        checkpoint (:class:`~gluon_bbb.io.checkpoint.CheckpointError`); another process
        writing it (:class:`~gluon_bbb.experiments.runlock.RunFolderBusyError`). One line,
        naming the folder or file.
    """
    settings = continual_settings(settings.get("SETTING"), **{k: v for k, v in settings.items()
                                                             if k != "SETTING"})
    ctx = resolve_context(ctx)
    _check_folder(run_dir)  # before the lock creates the folder
    with RunFolderLock(run_dir):
        resuming = _check_folder(run_dir)
        if resuming:  # settings first: a foreign run is refused before the data are loaded
            _check_same_run(run_dir, _stored_settings(os.path.join(run_dir, CHECKPOINT)), settings)
        data = _load_data(settings, data, data_dir)
        data_id = _data_identity(data)
        orders = permutations(data_id["features"], settings["NUM_TASKS"], settings["SEED"],
                              settings["PERMUTE_TASK_1"])
        if resuming:
            done, states, measured = _read_state(run_dir, settings, data_id)
            logger.info("%s: %d of %d tasks done; continuing", run_dir, done, settings["NUM_TASKS"])
        else:
            done, states = 0, {method: None for method in settings["METHODS"]}
            measured = {"errors": {m: [] for m in settings["METHODS"]},
                        "seconds": {m: [] for m in settings["METHODS"]}, "ml_start_error": None}
        for t in range(done, settings["NUM_TASKS"]):
            for method in settings["METHODS"]:
                start = time.time()
                states[method], errors, ml_start = _learn_task(method, t, states[method], data,
                                                               orders, settings, ctx, progress)
                measured["errors"][method].append([float(e) for e in errors])
                measured["seconds"][method].append(time.time() - start)
                if ml_start is not None:
                    measured["ml_start_error"] = float(ml_start)
                logger.info("task %d, %s: error %s on tasks 1-%d, %.0f s", t + 1, method,
                            " ".join(f"{e:.2%}" for e in errors), t + 1,
                            measured["seconds"][method][-1])
            _write_state(run_dir, settings, data_id, t + 1, states, measured)
            _write_record(run_dir, _record(settings, data_id, t + 1, measured, command))
        record = _record(settings, data_id, settings["NUM_TASKS"], measured, command)
        if done == settings["NUM_TASKS"]:  # nothing was left: the record is refreshed
            _write_record(run_dir, record)
        return record

