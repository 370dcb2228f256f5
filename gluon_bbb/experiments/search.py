"""The hyperparameter search of the paper protocol on Optuna: a study in a relational database
(SQLite in the search folder by default, or any SQLAlchemy URL such as PostgreSQL, so that
workers on several machines share one study), samplers (the paper's grid, TPE, random), pruning
on the per-epoch validation error (Hyperband, median), and trials that are ordinary resumable
run folders which never touch the test set.

A search folder holds ``study.db`` (the default storage), ``.ask.lock`` (the workers of one
machine ask the study for trials one at a time) and ``trials/<setting>/``, one run folder per
setting (:mod:`gluon_bbb.experiments.protocol`). Every worker records a heartbeat for its
running trial; a trial whose worker died (SIGKILL, a lost machine) is failed by the next worker
that looks once its heartbeat is ``grace_period`` seconds old, and retried as a new trial with
the same setting, whose run folder resumes after its last completed epoch.

Typical use::

    from gluon_bbb.experiments import search
    space = search.search_space(lr=[1e-3, 1e-4], num_samples=[1, 2, 5])
    search.search(space, epochs=30, output_dir="results/search", sampler="grid",
                  pruner="hyperband")

The baselines and the Gaussian prior are searched the same way, each with its own keys
(:data:`SPACE_KEYS`), so that every method of Table 1 can be tuned on the same budget::

    space = search.search_space("dropout-1200", lr=[0.3, 0.1, 0.03], momentum=[0.0, 0.9],
                                dropout=[0.3, 0.5])
    search.search(space, epochs=20, output_dir="results/search-dropout-1200",
                  base="dropout-1200", sampler="tpe", max_trials=10)
"""
import contextlib
import logging
import math
import os
import socket
import threading
import time
import warnings
import zlib

import optuna
import sqlalchemy.exc

from .._checks import check_int
from .._mxcompat import trial_id
from ..context import resolve_context
from .machine import hide_password, hide_password_in
from .runlock import RunFolderBusyError, meet_workers, waiting_lock
from .configs import get_config, run_kind
from .protocol import run
from .runfolder import FILES, checkpoint_metadata
from .runners import loaders_for
from .spaces import (PRUNERS, SAMPLERS, SPACE_KEYS, grid_settings, sample_settings, search_kind,
                     search_space, trial_name)

__all__ = ["SPACE_KEYS", "search_kind", "SAMPLERS", "PRUNERS", "STUDY_NAME", "TRIALS",
           "grid_settings", "sample_settings", "search_space", "trial_name", "storage_url", "open_storage",
           "storage_errors", "study_settings", "open_study", "work", "search", "quiet_optuna"]

logger = logging.getLogger(__name__)



STUDY_NAME = "gluon-bbb-search"


#: The subfolder of a search folder that holds one run folder per setting.
TRIALS = "trials"


_STUDY_DB = "study.db"


_ASK_LOCK = ".ask.lock"


_POLL_SECONDS = 2.0


@contextlib.contextmanager
def quiet_optuna():
    """``with quiet_optuna():`` -- without Optuna's ExperimentalWarning (the heartbeat, retry
    and matplotlib APIs this module relies on are marked experimental)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        # this module runs the heartbeat itself, around study.ask/tell
        warnings.filterwarnings("ignore", message="Heartbeat of storage is supposed to be used")
        # a parameter with one value among the finished trials, in the parallel coordinates
        warnings.filterwarnings("ignore", message="Attempting to set identical low and high ylims")
        yield


def storage_url(output_dir, storage=None):
    """``storage``, or the SQLite file ``study.db`` inside ``output_dir``."""
    if storage:
        return storage
    return "sqlite:///" + os.path.join(os.path.abspath(output_dir), _STUDY_DB)


def open_storage(url, heartbeat_interval=60, grace_period=None):
    """An Optuna RDB storage for ``url`` with heartbeats, whose stale trials are retried
    (up to 3 times, with their intermediate values), or a one-line ValueError.

    Parameters
    ----------
    url : str
        Any SQLAlchemy URL: ``sqlite:///path/study.db``, ``postgresql://user@host/db``, ...
    heartbeat_interval : int, seconds between a running trial's heartbeats
    grace_period : int, optional
        Seconds without a heartbeat after which a running trial counts as dead; default
        3 heartbeats.
    """
    check_int("heartbeat_interval", heartbeat_interval)
    grace_period = check_int("grace_period", grace_period or 3 * heartbeat_interval)
    if url.startswith("sqlite"):
        engine_kwargs = {"connect_args": {"timeout": 60}}  # local workers wait for the file lock
    else:
        engine_kwargs = {"pool_pre_ping": True}
    with quiet_optuna():
        retry = optuna.storages.RetryHeartbeatStaleTrialCallback(
            max_retry=3, inherit_intermediate_values=True)
    try:
        with quiet_optuna():
            return optuna.storages.RDBStorage(url, engine_kwargs=engine_kwargs,
                                              heartbeat_interval=heartbeat_interval,
                                              grace_period=grace_period,
                                              heartbeat_stale_trial_callback=retry)
    except Exception as error:  # bad URL, missing driver, unreachable server, bad schema
        raise ValueError(f"cannot open the study storage {hide_password(url)}: "
                         f"{_first_line(error, url)}") from None


#: What a study storage raises: SQLAlchemy's errors (which wrap the driver's) and Optuna's
#: StorageInternalError (which wraps SQLAlchemy's).
_STORAGE_ERRORS = (sqlalchemy.exc.SQLAlchemyError, optuna.exceptions.StorageInternalError)


def _first_line(error, url):
    """The first line of ``error``'s message (or of its cause's, where Optuna's own says
    nothing about it), with ``url`` and its password hidden."""
    lines = [str(error).strip()]
    if isinstance(error, optuna.exceptions.StorageInternalError) and error.__cause__ is not None:
        lines.append(str(error.__cause__).strip())
    text = ": ".join(line.splitlines()[0] for line in lines if line) or type(error).__name__
    return hide_password_in(text, url)


@contextlib.contextmanager
def storage_errors(url):
    """``with storage_errors(url):`` -- work on the study storage ``url`` without showing its
    password: an error of the storage (its driver, SQLAlchemy, Optuna) comes out as a one-line
    ValueError that names the storage with :func:`~.machine.hide_password`, and every log
    record and every warning shown meanwhile (Optuna's and SQLAlchemy's included, in every
    thread) has ``url`` and its password hidden (:func:`~.machine.hide_password_in`) before any
    handler or ``warnings.showwarning`` sees it.

    Parameters
    ----------
    url : str
        The storage's URL, as given (password and all).

    Raises
    ------
    ValueError
        In place of an error of the storage.
    """
    make_record = logging.getLogRecordFactory()

    def hidden_record(*args, **kwargs):
        record = make_record(*args, **kwargs)
        try:
            message = record.getMessage()
        except Exception:  # the handler reports a bad format as it would without this
            return record
        if record.exc_info:  # a traceback repeats its exception's message
            message += "\n" + logging.Formatter().formatException(record.exc_info)
        shown = hide_password_in(message, url)
        if shown != message:
            record.msg, record.args, record.exc_info, record.exc_text = shown, (), None, None
        return record

    show_warning = warnings.showwarning

    def hidden_warning(message, category, filename, lineno, file=None, line=None):
        shown = hide_password_in(str(message), url)
        show_warning(message if shown == str(message) else shown, category, filename, lineno,
                     file, line)

    logging.setLogRecordFactory(hidden_record)
    warnings.showwarning = hidden_warning
    try:
        yield
    except _STORAGE_ERRORS as error:
        raise ValueError(f"the study storage {hide_password(url)} failed: "
                         f"{_first_line(error, url)}") from None
    finally:
        logging.setLogRecordFactory(make_record)
        warnings.showwarning = show_warning


def _sampler(name, seed):
    if name == "tpe":
        return optuna.samplers.TPESampler(seed=seed)
    return optuna.samplers.RandomSampler(seed=seed)  # the grid's trials are enqueued


def _pruner(name, epochs):
    if name == "hyperband":
        return optuna.pruners.HyperbandPruner(min_resource=1, max_resource=epochs,
                                              reduction_factor=3)
    if name == "median":
        return optuna.pruners.MedianPruner(n_startup_trials=5, n_warmup_steps=1)
    return optuna.pruners.NopPruner()


def open_study(storage, settings, worker=0):
    """Create the search's study (enqueueing the grid) or load it, checking that it searches
    the same thing.

    Parameters
    ----------
    storage : optuna.storages.RDBStorage, from :func:`open_storage`
    settings : dict
        What the study searches: 'base', 'overrides', 'space', 'epochs', 'sampler', 'pruner',
        'max_trials', 'seed' (JSON values).
    worker : int
        This worker's number on its machine. The creator of the study seeds its sampler with
        ``seed + worker``; workers that join it add a salt from their host and process, so
        that workers on several machines do not draw the same samples.

    Returns
    -------
    optuna.Study

    Raises
    ------
    ValueError
        The storage holds a study of other settings.
    """
    sampler = _sampler(settings["sampler"], settings["seed"] + worker)
    pruner = _pruner(settings["pruner"], settings["epochs"])
    try:
        study = optuna.create_study(storage=storage, study_name=STUDY_NAME, sampler=sampler,
                                    pruner=pruner, direction="minimize")
    except optuna.exceptions.DuplicatedStudyError:  # another worker created it
        # Joining workers (other processes, other machines) must not all draw the same
        # samples: their sampler's seed also depends on the host and the process.
        salt = zlib.crc32(f"{socket.gethostname()}:{os.getpid()}".encode()) % 2**20
        sampler = _sampler(settings["sampler"], settings["seed"] + worker + salt)
        study = optuna.load_study(storage=storage, study_name=STUDY_NAME, sampler=sampler,
                                  pruner=pruner)
        _wait_until_ready(study, settings)
        return study
    if settings["sampler"] == "grid":
        grid = grid_settings(settings["space"], settings["base"])
        if settings["max_trials"] is not None:
            grid = sample_settings(grid, settings["max_trials"], seed=settings["seed"])
        for setting in grid:
            study.enqueue_trial(setting, skip_if_exists=True)
    study.set_user_attr("settings", settings)  # last: the study is ready
    return study


def _wait_until_ready(study, settings, timeout=120.0):
    deadline = time.time() + timeout
    while "settings" not in study.user_attrs:
        if time.time() > deadline:
            raise ValueError(f"the study {STUDY_NAME} exists but was never set up (its creator "
                             "died while enqueueing the grid?): delete it and start again")
        time.sleep(1.0)
    stored = study.user_attrs["settings"]
    changed = sorted(key for key in set(stored) | set(settings)
                     if stored.get(key) != settings.get(key))
    if changed:
        differences = "; ".join(f"{key}: {stored.get(key)!r} there, {settings.get(key)!r} now"
                                for key in changed)
        raise ValueError(f"the study in this storage searches something else ({differences}); "
                         "use the same options, another --output-dir or another --storage")


def _next_move(study, settings):
    """'ask' (a trial is waiting, or the budget allows a new one), 'wait' (only trials of other
    workers are left: one may die and be retried) or 'stop'."""
    trials = study.get_trials(deepcopy=False)
    states = [trial.state for trial in trials]
    if optuna.trial.TrialState.WAITING in states:
        return "ask"
    if settings["sampler"] != "grid":
        # the budget is of distinct settings: a sampler may draw a setting again (the trial
        # then replays its run folder), and a space may hold fewer settings than the budget
        budget = min(settings["max_trials"], math.prod(map(len, settings["space"].values())))
        if _settings_tried(trials) < budget:
            return "ask"
    return "wait" if optuna.trial.TrialState.RUNNING in states else "stop"


def _settings_tried(trials):
    """The number of distinct settings the trials have tried or are trying: a trial that
    repeats or retries a setting does not count again; a running trial whose setting is not
    sampled yet counts as one."""
    settings, unsampled = set(), 0
    for trial in trials:
        if trial.params:
            settings.add(tuple(sorted(trial.params.items())))
        elif trial.state == optuna.trial.TrialState.RUNNING:
            unsampled += 1
    return len(settings) + unsampled


class _Heartbeat:
    """``with _Heartbeat(storage, trial):`` -- record the trial's heartbeat every interval."""

    def __init__(self, storage, trial):
        self.storage, self.trial_id, self.number = storage, trial_id(trial), trial.number
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._beat, daemon=True)

    def _beat(self):
        interval = self.storage.get_heartbeat_interval()
        while True:
            try:
                self.storage.record_heartbeat(self.trial_id)
            except _STORAGE_ERRORS as error:  # logged, not left to the thread's stderr hook
                logger.warning("trial %d: its heartbeat failed: %s", self.number, error)
            if self.stopped.wait(interval):
                return

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc_info):
        self.stopped.set()
        self.thread.join()
        return False


def _objective(trial, settings, output_dir, data_dir, ctx, loaders, progress, command):
    """Train the trial's setting in its run folder; the best validation error of its epochs."""
    setting = {key: trial.suggest_categorical(key, values)
               for key, values in settings["space"].items()}
    config = get_config(settings["base"], **dict(settings["overrides"], **setting))
    folder = os.path.join(output_dir, TRIALS, trial_name(setting))
    trial.set_user_attr("folder", os.path.relpath(folder, output_dir))
    trial.set_user_attr("worker", f"{socket.gethostname()}:{os.getpid()}")

    reported = set(trial.storage.get_trial(trial_id(trial)).intermediate_values)  # a retry's

    def report(record):
        if record["epoch"] not in reported:
            trial.report(record["test_error"], record["epoch"])
            reported.add(record["epoch"])
        if trial.should_prune():
            raise optuna.TrialPruned(f"validation error {100 * record['test_error']:.2f}% "
                                     f"at epoch {record['epoch']}")

    kind = run_kind(config)
    for record in checkpoint_metadata(os.path.join(folder, FILES[kind]["checkpoint"]), kind).get(
            "history", []):  # a retried trial resumes its folder: tell the pruner its epochs
        report(record)
    summary = run(config, settings["epochs"], folder, data_dir=data_dir, ctx=ctx,
                  progress=progress, command=command, evaluate_test=False,
                  loaders=loaders, epoch_callback=report)
    trial.set_user_attr("best_epoch", summary["best_epoch"])
    trial.set_user_attr("epochs_run", summary["epochs_run"])
    return summary["validation_error"]


def work(study, storage, output_dir, data_dir=None, ctx=None, progress=False, command=None):
    """Run trials of ``study`` until its budget is spent: ask for a trial (the workers of one
    machine in turn), train it with a heartbeat, tell the study its best validation error,
    that it was pruned, or that it failed.

    Run it inside :func:`storage_errors` (as :func:`search` does) to keep the storage's
    password out of its messages.

    Returns
    -------
    int, the number of trials this worker ran.
    """
    settings = study.user_attrs["settings"]
    ctx = resolve_context(ctx)
    loaders = None
    done = 0
    while True:
        with quiet_optuna():
            optuna.storages.fail_stale_trials(study)
        with waiting_lock(os.path.join(output_dir, _ASK_LOCK)), quiet_optuna():
            move = _next_move(study, settings)
            trial = study.ask() if move == "ask" else None
        if move == "stop":
            return done
        if move == "wait":  # for the other workers' last trials: one may die and be retried
            time.sleep(min(storage.get_heartbeat_interval(), _POLL_SECONDS))
            continue
        if loaders is None:  # every trial has the data settings of base and overrides
            loaders = loaders_for(get_config(settings["base"], **settings["overrides"]),
                                  data_dir, ctx)
        logger.info("trial %d: %s", trial.number, trial.params or "(its setting is sampled)")
        try:
            with _Heartbeat(storage, trial):
                value = _objective(trial, settings, output_dir, data_dir, ctx, loaders, progress,
                                   command)
        except optuna.TrialPruned as pruned:
            logger.info("trial %d pruned: %s", trial.number, pruned)
            study.tell(trial, state=optuna.trial.TrialState.PRUNED)
        except (ValueError, RunFolderBusyError, FloatingPointError) as error:
            # e.g. an invalid prior from TPE, or a learning rate that diverges
            logger.warning("trial %d failed: %s", trial.number, error)
            trial.set_user_attr("error", str(error)[:500])
            study.tell(trial, state=optuna.trial.TrialState.FAIL)
        except BaseException:  # Ctrl-C, say: the setting is queued again, its folder resumes
            study.tell(trial, state=optuna.trial.TrialState.FAIL)
            study.enqueue_trial(trial.params, user_attrs={"retry_of": trial.number})
            raise
        else:
            logger.info("trial %d: best validation error %.2f%%", trial.number, 100 * value)
            study.tell(trial, value)
        done += 1


def study_settings(space, epochs, base="bbb-mixture-400", overrides=None, sampler="grid",
                   pruner="hyperband", max_trials=None, seed=0):
    """What a study searches, checked, as JSON values (see :func:`search` for the arguments);
    stored in the study, so every worker must pass the same."""
    kind = search_kind(base)
    unknown = set(space) - set(SPACE_KEYS[kind])
    if unknown:
        raise ValueError(f"{base} (a {kind} configuration) has no search keys "
                         f"{', '.join(sorted(unknown))}; use {', '.join(SPACE_KEYS[kind])}")
    if sampler not in SAMPLERS or pruner not in PRUNERS:
        raise ValueError(f"sampler must be one of {', '.join(SAMPLERS)} and pruner one of "
                         f"{', '.join(PRUNERS)}, got {sampler!r} and {pruner!r}")
    if sampler != "grid" and max_trials is None:
        raise ValueError(f"the {sampler} sampler needs a number of trials (--max-trials)")
    overrides = dict(overrides or {})
    clash = set(overrides) & set(space)
    if clash:
        raise ValueError(f"{', '.join(sorted(clash))} cannot be both searched and overridden")
    get_config(base, **overrides)  # checks the overrides before anything is written
    if sampler == "grid" and not grid_settings(space, base):
        raise ValueError("the grid has no setting with neg_log_sigma2 > neg_log_sigma1")
    return {"base": base, "overrides": overrides, "space": space,
            "epochs": check_int("epochs", epochs), "sampler": sampler, "pruner": pruner,
            "max_trials": None if max_trials is None else check_int("max_trials", max_trials),
            "seed": check_int("seed", seed, minimum=0)}


def search(space, epochs, output_dir, base="bbb-mixture-400", overrides=None, sampler="grid",
           pruner="hyperband", max_trials=None, seed=0, storage=None, worker=0,
           heartbeat_interval=60, data_dir=None, ctx=None, progress=False, command=None,
           start_together=None):
    """Create or join the study of a search and work on it in this process.

    Parameters
    ----------
    space : dict
        From :func:`search_space` with the same ``base``.
    epochs : int
        The budget of every trial (Hyperband's maximum resource).
    output_dir : str
        The search folder: run folders of the trials, and the SQLite study by default.
    base : str
        A configuration of :data:`~.configs.CONFIGS`: Bayes by Backprop (either prior) or a
        baseline; its kind decides the keys of ``space`` (:data:`~.spaces.SPACE_KEYS`).
    overrides : dict, optional
        Applied to every trial, e.g. ``{"hidden": [16], "subset": 256}`` for a smoke run.
    sampler : {'grid', 'tpe', 'random'}
        'grid' runs every setting of the space (or ``max_trials`` of them, a seeded sample)
        exactly once; 'tpe' and 'random' sample ``max_trials`` settings.
    pruner : {'hyperband', 'median', 'none'}
    max_trials : int, optional
        Required for 'tpe' and 'random': the number of distinct settings they try (a setting
        drawn again replays its run folder and does not count).
    seed : int
        Seeds the sample of the grid and the samplers (``seed + worker``).
    storage : str, optional
        A SQLAlchemy URL; default ``sqlite:///<output_dir>/study.db``.
    worker : int
        This worker's number on its machine.
    heartbeat_interval : int
        Seconds; a trial without a heartbeat for 3 of them is failed and retried.
    start_together : (str, int), optional
        A folder and a number of workers: meet them there before the first trial
        (:func:`gluon_bbb.experiments.runlock.meet_workers`).

    Returns
    -------
    optuna.Study
    """
    settings = study_settings(space, epochs, base, overrides, sampler, pruner, max_trials, seed)
    os.makedirs(output_dir, exist_ok=True)
    url = storage_url(output_dir, storage)
    with storage_errors(url):
        rdb = open_storage(url, heartbeat_interval)
        study = open_study(rdb, settings, worker)
        if start_together is not None:
            meet_workers(start_together[0], worker, start_together[1])
        count = work(study, rdb, output_dir, data_dir=data_dir, ctx=ctx, progress=progress,
                     command=command)
        logger.info("worker %d ran %d trials; the study has %d", worker, count, len(study.trials))
    return study
