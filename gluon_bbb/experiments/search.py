"""The hyperparameter search of the paper protocol: grids of settings, trials as resumable
run folders that never touch the test set, and the table of their validation errors.
"""
import itertools
import logging
import os

import numpy as np

from .._checks import check_int
from ..checkpoint import CheckpointError, atomic_write_bytes, checked_field, read_json, write_json
from ..context import resolve_context
from .configs import CONFIGS, PAPER_GRID, SEARCH_KEYS, get_config
from .protocol import run
from .runfolder import check_run_dir
from .runners import loaders_for

__all__ = ["SEARCH_JSON", "SEARCH_MD", "grid_settings", "sample_settings", "search", "search_table"]

logger = logging.getLogger(__name__)


SEARCH_JSON = "search.json"


SEARCH_MD = "search.md"


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
    loaders = loaders_for(configs[0][1], data_dir, resolve_context(ctx))  # the same for every trial
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
