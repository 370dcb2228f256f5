"""Run folders: their file names, and reading them distrustfully (configuration, sessions,
report, checkpoint metadata), with the helpers that pick the best epoch from a history.

There is one run-folder format, whoever wrote the folder: ``gluon-bbb reproduce`` (a named
configuration), ``gluon-bbb train`` (a custom one, :func:`~.configs.custom_config`) and the
search's trials all write it through :func:`gluon_bbb.experiments.run`, and every command that
reads a folder reads any of them.
"""
import os
import time

from ..io.checkpoint import (CheckpointError, atomic_write_bytes, checked_field, read_json,
                             read_metadata, write_json)
from .configs import (CONFIGS, CUSTOM, LATER_DEFAULTS, PRIOR_KEYS, base_config,
                      check_hyperparameter, hyperparameters, make_prior, run_kind,
                      with_current_names)

__all__ = ["CONFIG", "SESSIONS", "RESULT", "LOG", "FILES", "read_run_config",
           "checked_stored_config", "check_run_dir", "is_record", "is_best", "best_of",
           "append_session", "read_sessions", "read_result", "renamed_record",
           "checkpoint_metadata", "copy_atomically", "now"]

CONFIG = "config.json"


SESSIONS = "sessions.json"


RESULT = "result.json"


LOG = "train.log"


#: Checkpoint of the last completed epoch and of the best epoch on validation, per method.
FILES = {
    "bbb": {"checkpoint": "checkpoint.bbb", "best": "best.bbb"},
    "deterministic": {"checkpoint": "checkpoint.ckpt", "best": "best.params"},
}


def read_run_config(run_dir):
    """The checked ``config.json`` of a run folder, or a ValueError/FileNotFoundError."""
    path = os.path.join(run_dir, CONFIG)
    if not os.path.isfile(path):
        raise FileNotFoundError(f"{path} not found: is {run_dir} a folder written by "
                                "'gluon-bbb train' or 'gluon-bbb reproduce'?")
    config = read_json(path, "a run configuration")
    if "reproduce" not in config:
        raise ValueError(f"{path} names no configuration: {run_dir} was written by a "
                         "'gluon-bbb train' of before the one run-folder format (it kept no "
                         "validation split and no best epoch); train it again")
    return checked_stored_config(config, path)


def checked_stored_config(config, source):
    """A configuration read from a run folder, with every hyperparameter checked as
    :func:`get_config` (or :func:`custom_config`) checks it, or a CheckpointError naming
    ``source``."""
    config = with_current_names(config)  # files of before a rename
    if isinstance(config.get("overrides"), dict):
        config["overrides"] = with_current_names(config["overrides"])
    name = config.get("reproduce")
    if name == CUSTOM:
        prior = config.get("prior")
        if prior not in PRIOR_KEYS or config.get("method") != "bbb":
            raise CheckpointError(f"{source}: a custom configuration needs method 'bbb' and a "
                                  f"prior among {', '.join(PRIOR_KEYS)}")
        expected, fixed = base_config(prior), ("method", "prior")
    elif name in CONFIGS:
        expected, fixed = CONFIGS[name], ("method", "dataset", "preprocessing", "prior")
    else:
        raise CheckpointError(f"{source}: {name!r:.60} is not a configuration; choose one of "
                              f"{', '.join(CONFIGS)} or {CUSTOM}")
    checked = dict(config)
    for key, default in expected.items():
        if key not in config:
            if key in LATER_DEFAULTS[run_kind(expected)]:
                continue  # written before the key existed
            raise CheckpointError(f"{source} lacks the hyperparameter {key!r}")
        try:
            checked[key] = check_hyperparameter(key, config[key])
        except ValueError as error:
            raise CheckpointError(f"{source}: {error}") from None
        if key in fixed and config[key] != default:
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
                             "run folder; choose another --output-dir")
        return None
    stored = read_run_config(run_dir)
    if stored["reproduce"] != config["reproduce"]:
        raise ValueError(f"{run_dir} holds a run of configuration {stored['reproduce']!r}, not "
                         f"{config['reproduce']!r}; choose another --output-dir")
    mine, theirs = hyperparameters(config), hyperparameters(stored)
    changed = sorted(key for key in set(mine) | set(theirs) if mine.get(key) != theirs.get(key))
    if changed:
        differences = ", ".join(f"{key}: {theirs.get(key)!r} there, {mine.get(key)!r} now"
                                for key in changed)
        raise ValueError(f"{run_dir} holds a run of {stored['reproduce']} with other "
                         f"hyperparameters ({differences}); choose another --output-dir")
    return stored


def is_record(record):
    """A history record with a numeric validation error (stored as 'test_error')."""
    return isinstance(record, dict) and isinstance(record.get("epoch"), int) and \
        isinstance(record.get("test_error"), (int, float))


def is_best(best):
    return isinstance(best, dict) and isinstance(best.get("epoch"), int) and \
        isinstance(best.get("validation_error"), (int, float))


def best_of(history):
    """The first epoch with the lowest validation error, or None for an empty history."""
    if not history:
        return None
    record = min(history, key=lambda r: (r["test_error"], r["epoch"]))
    return {"epoch": record["epoch"], "validation_error": record["test_error"]}


def append_session(run_dir, session):
    sessions = read_sessions(run_dir)
    sessions.append(session)
    write_json(os.path.join(run_dir, SESSIONS), sessions)


def read_sessions(run_dir):
    """The training sessions recorded in a run folder (``[]`` before the first), each with its
    'seconds' (float) and 'epochs_before' and 'epochs_after' (int) checked.

    Raises
    ------
    CheckpointError
        The file or a record is malformed (one line naming the file).
    """
    path = os.path.join(run_dir, SESSIONS)
    if not os.path.exists(path):
        return []
    sessions = read_json(path, "a list of training sessions", kind=list)
    if not all(isinstance(session, dict) for session in sessions):
        raise CheckpointError(f"{path} holds something other than session records")
    for session in sessions:
        checked_field(session, "seconds", float, path)
        checked_field(session, "epochs_before", int, path)
        checked_field(session, "epochs_after", int, path)
    return sessions


def read_result(run_dir):
    """The ``result.json`` of a run folder."""
    path = os.path.join(run_dir, RESULT)
    if not os.path.isfile(path):
        raise FileNotFoundError(f"{path} not found: run 'gluon-bbb reproduce-report {run_dir}'")
    result = read_json(path, "a run's report")
    for key in ("hyperparameters", "overrides"):  # files of before a rename
        if isinstance(result.get(key), dict):
            result[key] = with_current_names(result[key])
    history = checked_field(result, "history", list, path, optional=True, default=[])
    if not all(isinstance(record, dict) for record in history):
        raise CheckpointError(f"{path}: its history holds something other than epoch records")
    return result


def renamed_record(record):
    """A :attr:`BBBTrainer.history` record of a reproduce run with its evaluated split named
    for what it is: 'test_error' becomes 'validation_error'."""
    record = dict(record)
    if "test_error" in record:
        record["validation_error"] = record.pop("test_error")
    return record


def checkpoint_metadata(path, kind):
    """The metadata of a checkpoint file without reading its arrays ({} if there is none),
    with its epoch and history checked; ``kind`` is 'bbb' or 'deterministic'."""
    if not os.path.isfile(path):
        return {}
    metadata = read_metadata(path)
    epoch = checked_field(metadata, "epoch", int, path)
    history = checked_field(metadata, "history", list, path)
    if metadata.get("kind", "bbb") != kind or epoch < 0 or not all(is_record(r) for r in history):
        raise CheckpointError(f"{path} is not a {kind} checkpoint with a well-formed history")
    return metadata


def copy_atomically(source, target):
    with open(source, "rb") as handle:
        atomic_write_bytes(target, handle.read())


def now():
    return time.strftime("%Y-%m-%dT%H:%M:%S%z")
